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

/// A role's `meta/main.yml` (or `main.yaml`), parsed; none when it is missing or unreadable.
fn role_meta(role: &Path) -> Option<crate::yaml::Node> {
    let meta = role_file(role, "meta", None)?;
    let text = std::fs::read_to_string(&meta).ok()?;
    crate::yaml::parse(&text, &meta).ok().flatten()
}

/// One entry of a role's `meta/main.yml` `dependencies`: a name, or a mapping with `role` or `name`, the params
/// the dependency is given (its other keys, and those of its `vars:`) and its `when`.
pub struct RoleDependency {
    pub name: String,
    /// Where it is, found as ansible-core finds a dependency: beside the role, then in the roles tree it is in,
    /// then in `ANSIBLE_ROLES_PATH`. None when not found or named by a template.
    pub dir: Option<PathBuf>,
    pub params: serde_json::Map<String, Value>,
    pub when: Vec<Value>,
}

/// The dependencies `role`'s meta lists, in order.
pub fn role_dependency_entries(role: &Path) -> Vec<RoleDependency> {
    let Some(node) = role_meta(role) else { return Vec::new() };
    let Value::Object(meta) = node.to_json() else { return Vec::new() };
    let Some(Value::Array(deps)) = meta.get("dependencies") else { return Vec::new() };
    let mut search: Vec<PathBuf> = role.parent().map(Path::to_path_buf).into_iter().collect();
    search.extend(role.parent().and_then(enclosing_roles_dir).map(Path::to_path_buf));
    search.extend(roles_path(None));
    deps.iter()
        .filter_map(|dep| {
            let (name, params, when) = match dep {
                Value::String(name) => (name.clone(), serde_json::Map::new(), Vec::new()),
                Value::Object(entry) => {
                    let name = entry.get("role").or_else(|| entry.get("name")).and_then(Value::as_str)?.to_string();
                    let mut params = entry.clone();
                    for key in ["role", "name", "tags", "when", "vars"] {
                        params.remove(key);
                    }
                    if let Some(Value::Object(vars)) = entry.get("vars") {
                        params.extend(vars.clone());
                    }
                    let when = match entry.get("when") {
                        Some(Value::Array(items)) => items.clone(),
                        Some(Value::Null) | None => Vec::new(),
                        Some(one) => vec![one.clone()],
                    };
                    (name, params, when)
                }
                _ => return None,
            };
            let dir = (!name.contains("{{"))
                .then(|| search.iter().map(|dir| dir.join(&name)).find(|dir| dir.is_dir()))
                .flatten();
            Some(RoleDependency { name, dir, params, when })
        })
        .collect()
}

/// The roles `role`'s meta lists under `dependencies` that are found (see `role_dependency_entries`): for the
/// library directories ansible-core is given.
pub fn role_dependencies(role: &Path) -> Vec<PathBuf> {
    role_dependency_entries(role).into_iter().filter_map(|dep| dep.dir).collect()
}

/// `allow_duplicates: true` in the role's meta: it runs again as a dependency of another role in the same play.
pub fn allows_duplicates(role: &Path) -> bool {
    let Some(node) = role_meta(role) else { return false };
    match node.to_json().get("allow_duplicates") {
        Some(Value::Bool(yes)) => *yes,
        Some(Value::String(s)) => matches!(s.to_ascii_lowercase().as_str(), "yes" | "true"),
        _ => false,
    }
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

    #[test]
    fn a_dependency_gives_its_params_and_when_and_meta_may_allow_duplicates() {
        let root = tree(&["roles/app/tasks/main.yml", "roles/base/tasks/main.yml"]);
        std::fs::create_dir_all(root.path().join("roles/app/meta")).expect("mkdir");
        std::fs::write(
            root.path().join("roles/app/meta/main.yml"),
            "allow_duplicates: yes\ndependencies:\n- role: base\n  word: w\n  vars: {more: m}\n  when: x\n  tags: [t]\n",
        )
        .expect("write");
        let deps = role_dependency_entries(&root.path().join("roles/app"));
        assert_eq!(deps.len(), 1);
        assert_eq!(deps[0].dir, Some(root.path().join("roles/base")));
        assert_eq!(Value::Object(deps[0].params.clone()), serde_json::json!({"word": "w", "more": "m"}));
        assert_eq!(deps[0].when, [Value::String("x".into())]);
        assert!(allows_duplicates(&root.path().join("roles/app")));
        assert!(!allows_duplicates(&root.path().join("roles/base")));
    }
}
