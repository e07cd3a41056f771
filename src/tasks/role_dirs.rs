//! Where roles are on disk, for the run (`import_role`, `include_role`), for `upgrade check` and for the library
//! directories ansible-core is given: found as ansible-core finds them for the playbook that would use the hook.
//! A hook has no playbook, so the places a playbook would be are searched, nearest first:
//! - beside the hook file: `roles/NAME` and `NAME` (a playbook beside the hook);
//! - for a file under a `tasks/` directory (`X/tasks/...`): `X/roles/NAME` (a playbook's own `tasks/`, as
//!   openshift-ansible's `playbooks/.../docker/tasks/upgrade.yml` beside `docker/roles`) and `NAME` beside `X` (the
//!   sibling roles of role `X`);
//! - the nearest `roles/` directory the file is in (a role inside a roles tree imports others of that tree by their
//!   path in it, as kubespray's `roles/remove-node/pre-remove` imports `remove_node/pre_remove`: the playbooks
//!   that use the role have that tree in their roles path);
//! - `upgrade_roles_path` and `ANSIBLE_ROLES_PATH`.

use std::path::{Path, PathBuf};

use serde_json::Value;

/// The directory of role `name` for tasks read from `task_file`, searching `roles_path` (the configured
/// directories) after the places beside the file.
pub fn find_role(task_file: &Path, name: &str, roles_path: &[PathBuf]) -> Option<PathBuf> {
    if Path::new(name).is_absolute() {
        return Some(PathBuf::from(name)).filter(|p| p.is_dir());
    }
    let dir = task_file.parent().unwrap_or(Path::new("."));
    let mut candidates = vec![dir.join("roles").join(name), dir.join(name)];
    if let Some(owner) = dir.ancestors().find(|d| d.file_name().is_some_and(|n| n == "tasks")).and_then(Path::parent) {
        candidates.push(owner.join("roles").join(name));
        if let Some(siblings) = owner.parent() {
            candidates.push(siblings.join(name));
        }
    }
    if let Some(tree) = enclosing_roles_dir(dir) {
        candidates.push(tree.join(name));
    }
    candidates.extend(roles_path.iter().map(|p| p.join(name)));
    candidates.into_iter().find(|c| c.join("tasks").is_dir())
}

/// The nearest directory named `roles` that `dir` is in (or is).
fn enclosing_roles_dir(dir: &Path) -> Option<&Path> {
    dir.ancestors().find(|d| d.file_name().is_some_and(|n| n == "roles"))
}

/// The directories of `upgrade_roles_path` (a list or `:`-separated text) and of `ANSIBLE_ROLES_PATH`.
pub fn roles_path(configured: Option<&Value>) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = match configured {
        Some(Value::Array(items)) => items.iter().filter_map(Value::as_str).map(PathBuf::from).collect(),
        Some(Value::String(s)) => s.split(':').filter(|p| !p.is_empty()).map(PathBuf::from).collect(),
        _ => Vec::new(),
    };
    if let Some(env) = std::env::var_os("ANSIBLE_ROLES_PATH") {
        out.extend(std::env::split_paths(&env));
    }
    out
}

/// `role/SUB/FROM` (`main` by default), with `.yml`, `.yaml` or as named.
pub fn role_file(role: &Path, sub: &str, from: Option<&str>) -> Option<PathBuf> {
    let base = role.join(sub).join(from.unwrap_or("main"));
    let with_ext = |ext: &str| {
        let mut p = base.clone().into_os_string();
        p.push(ext);
        PathBuf::from(p)
    };
    [with_ext(".yml"), with_ext(".yaml"), base.clone()].into_iter().find(|p| p.is_file())
}

/// The roles `role`'s `meta/main.yml` (or `main.yaml`) lists under `dependencies` (a name, or a mapping with `role`
/// or `name`), found as ansible-core finds a dependency: beside the role, then in the roles tree it is in, then in
/// `ANSIBLE_ROLES_PATH`. A dependency not found, or named by a template, is left out (its tasks are not run, only
/// its `library/` is looked in).
pub fn role_dependencies(role: &Path) -> Vec<PathBuf> {
    let Some(meta) = role_file(role, "meta", None) else { return Vec::new() };
    let Ok(text) = std::fs::read_to_string(&meta) else { return Vec::new() };
    let Ok(Some(node)) = crate::yaml::parse(&text, &meta) else { return Vec::new() };
    let Some(deps) = node.get("dependencies").and_then(|d| d.as_seq()) else { return Vec::new() };
    let mut search: Vec<PathBuf> = role.parent().map(Path::to_path_buf).into_iter().collect();
    search.extend(role.parent().and_then(enclosing_roles_dir).map(Path::to_path_buf));
    search.extend(roles_path(None));
    deps.iter()
        .filter_map(|dep| dep.as_str().or_else(|| dep.get("role").or_else(|| dep.get("name")).and_then(|n| n.as_str())))
        .filter(|name| !name.contains("{{"))
        .filter_map(|name| search.iter().map(|dir| dir.join(name)).find(|dir| dir.is_dir()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree(files: &[&str]) -> tempfile::TempDir {
        let root = tempfile::tempdir().expect("tempdir");
        for f in files {
            let path = root.path().join(f);
            std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
            std::fs::write(&path, "---\n").expect("write");
        }
        root
    }

    #[test]
    fn a_role_in_a_roles_tree_finds_the_roles_of_that_tree_by_their_path_in_it() {
        let root =
            tree(&["roles/remove-node/pre-remove/tasks/main.yml", "roles/remove_node/pre_remove/tasks/main.yml"]);
        let hook = root.path().join("roles/remove-node/pre-remove/tasks/main.yml");
        assert_eq!(
            find_role(&hook, "remove_node/pre_remove", &[]),
            Some(root.path().join("roles/remove_node/pre_remove"))
        );
    }

    #[test]
    fn a_file_of_a_playbooks_tasks_directory_finds_the_roles_beside_that_directory() {
        let root = tree(&["docker/tasks/upgrade.yml", "docker/roles/container_runtime/tasks/main.yml"]);
        let hook = root.path().join("docker/tasks/upgrade.yml");
        assert_eq!(
            find_role(&hook, "container_runtime", &[]),
            Some(root.path().join("docker/roles/container_runtime"))
        );
    }

    #[test]
    fn a_file_deeper_in_a_roles_tasks_finds_the_sibling_roles() {
        let root = tree(&["r/node/tasks/upgrade/restart.yml", "r/runtime/tasks/main.yml"]);
        let hook = root.path().join("r/node/tasks/upgrade/restart.yml");
        assert_eq!(find_role(&hook, "runtime", &[]), Some(root.path().join("r/runtime")));
        assert_eq!(find_role(&hook, "absent", &[]), None);
    }

    #[test]
    fn dependencies_are_read_from_meta_main_yaml_too() {
        let root =
            tree(&["roles/es/tasks/main.yml", "roles/lib/library/m.py", "roles/defaults_only/defaults/main.yml"]);
        std::fs::create_dir_all(root.path().join("roles/es/meta")).expect("mkdir");
        std::fs::write(
            root.path().join("roles/es/meta/main.yaml"),
            "dependencies:\n- role: lib\n- defaults_only\n- role: absent\n- role: '{{ x }}'\n",
        )
        .expect("write");
        assert_eq!(
            role_dependencies(&root.path().join("roles/es")),
            [root.path().join("roles/lib"), root.path().join("roles/defaults_only")]
        );
    }
}
