//! Any module `upgrade` does not implement, run through ansible-core itself: the task becomes a one-task play for
//! its host, run by `ansible-playbook` (beside `upgrade_ansible_command`, or on PATH) with the host's connection
//! variables, the task's `become` and `environment` and its rendered arguments; the module's JSON result comes back
//! as the task's result, so `register`, `failed_when`, `until` work on it. Modules are found as ansible-core finds
//! them: installed collections, `ANSIBLE_LIBRARY`, and the directories `upgrade_ansible_library` names, the
//! task's role's `library/` and a `library/` beside the task file (given to ansible as `ANSIBLE_LIBRARY`).
//!
//! Whether ansible-core and the module are there is asked once per process and module (`ansible-playbook
//! --version`, then a file in the library directories or `ansible-doc -t module -j NAME`): `upgrade check` names
//! each task that will run this way, and refuses the file when either is missing.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{LazyLock, Mutex};

use serde_json::{Map, Value, json};

use super::common::*;
use super::context::ModuleContext;
use crate::connection::ConnectionError;
use crate::tasks::Vars;
use crate::tasks::model::ANSIBLE_CORE_MODULE_ARG as MODULE_NAME_ARG;
use crate::tasks::role_dirs::role_dependencies;

/// The connection and become variables of a host that ansible-core reads; given to it as they render for the task.
const CONNECTION_VARS: &[&str] = &[
    "ansible_host",
    "ansible_port",
    "ansible_user",
    "ansible_connection",
    "ansible_ssh_private_key_file",
    "ansible_private_key_file",
    "ansible_ssh_common_args",
    "ansible_ssh_extra_args",
    "ansible_ssh_args",
    "ansible_ssh_executable",
    "ansible_ssh_pipelining",
    "ansible_pipelining",
    "ansible_timeout",
    "ansible_python_interpreter",
    "ansible_shell_type",
    "ansible_shell_executable",
    "ansible_remote_tmp",
    "ansible_become_method",
    "ansible_become_exe",
    "ansible_become_flags",
    "ansible_become_password",
    "ansible_become_pass",
];

/// One `ansible-doc` question: the tool, the module, the library directories.
type DocQuery = (String, String, Vec<PathBuf>);

/// Where ansible-core is and where it looks for modules.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct AnsibleCore {
    /// `upgrade_ansible_command`: the `ansible` command (`/opt/ansible/bin/ansible`); its `-playbook` and `-doc`
    /// siblings are run. Unset: `ansible-playbook` and `ansible-doc` on PATH.
    pub command: Option<String>,
    /// `upgrade_ansible_library` (relative directories are the inventory's).
    pub library: Vec<PathBuf>,
}

impl AnsibleCore {
    /// From a host's variables: `upgrade_ansible_command`, `upgrade_ansible_library` (a list or `:`-separated),
    /// relative library directories against `inventory_dir`.
    pub fn from_vars(get: impl Fn(&str) -> Option<Value>) -> AnsibleCore {
        let text = |v: Value| match v {
            Value::String(s) => s,
            Value::Null => String::new(),
            other => other.to_string(),
        };
        let command = get("upgrade_ansible_command").map(text).filter(|s| !s.trim().is_empty());
        let base = get("inventory_dir").map(text).map(PathBuf::from);
        let dirs: Vec<String> = match get("upgrade_ansible_library") {
            Some(Value::Array(items)) => items.into_iter().map(text).collect(),
            Some(v) => text(v).split(':').map(str::to_string).collect(),
            None => Vec::new(),
        };
        let library = dirs
            .into_iter()
            .filter(|d| !d.trim().is_empty())
            .map(|d| match &base {
                Some(b) if Path::new(&d).is_relative() => b.join(d),
                _ => PathBuf::from(d),
            })
            .collect();
        AnsibleCore { command, library }
    }

    /// `ansible-playbook` or `ansible-doc`: the sibling of `upgrade_ansible_command`, else the name on PATH.
    pub fn tool(&self, tool: &str) -> String {
        match &self.command {
            Some(c) => format!("{}-{tool}", c.trim()),
            None => format!("ansible-{tool}"),
        }
    }

    /// The library directories for a task of `task_file`: `upgrade_ansible_library`, the role's `library/` (a task
    /// file under ROLE/tasks/) and those of the roles its `meta/main.yml` depends on (as Ansible loads a role's
    /// dependencies with it: openshift-ansible's roles get `oc_obj` from `lib_openshift` so), a `library/` beside
    /// the task file, then `ANSIBLE_LIBRARY`'s.
    pub fn library_for(&self, task_file: &Path) -> Vec<PathBuf> {
        let mut dirs = self.library.clone();
        let mut dir = task_file.parent();
        while let Some(d) = dir {
            if d.file_name().is_some_and(|n| n == "tasks") {
                if let Some(role) = d.parent() {
                    role_libraries(role, &mut Vec::new(), &mut dirs);
                }
                break;
            }
            dir = d.parent();
        }
        if let Some(parent) = task_file.parent() {
            dirs.push(parent.join("library"));
        }
        if let Some(env) = std::env::var_os("ANSIBLE_LIBRARY") {
            dirs.extend(std::env::split_paths(&env));
        }
        // Absolute: ansible-playbook runs in a directory of its own.
        let mut dirs: Vec<PathBuf> =
            dirs.into_iter().filter_map(|d| std::fs::canonicalize(d).ok()).filter(|d| d.is_dir()).collect();
        dirs.dedup();
        dirs
    }

    /// ansible-core's version line (`ansible-playbook [core 2.19.14]`), or why it cannot be run.
    pub fn version(&self) -> Result<String, String> {
        static SEEN: LazyLock<Mutex<HashMap<String, Result<String, String>>>> = LazyLock::new(Default::default);
        let tool = self.tool("playbook");
        if let Some(seen) = SEEN.lock().ok().and_then(|s| s.get(&tool).cloned()) {
            return seen;
        }
        let answer = match Command::new("sh").arg("-c").arg(format!("{tool} --version")).output() {
            Ok(out) if out.status.success() => {
                Ok(String::from_utf8_lossy(&out.stdout).lines().next().unwrap_or_default().trim().to_string())
            }
            Ok(out) => Err(format!(
                "`{tool} --version` failed: {}",
                String::from_utf8_lossy(&out.stderr).lines().last().unwrap_or("exit status not 0").trim()
            )),
            Err(e) => Err(format!("cannot run `{tool}`: {e}")),
        };
        if let Ok(mut seen) = SEEN.lock() {
            seen.insert(tool, answer.clone());
        }
        answer
    }

    /// Where ansible-core finds module `name` for a task of `task_file`, or why it does not.
    pub fn find_module(&self, name: &str, task_file: &Path) -> Result<String, String> {
        let version = self.version().map_err(|e| {
            let how = if self.command.is_some() { "fix upgrade_ansible_command" } else { "put it on PATH" };
            format!("ansible-core is needed to run it and was not found ({e}): install ansible-core and {how}")
        })?;
        let library = self.library_for(task_file);
        let short = name.rsplit('.').next().unwrap_or(name);
        for dir in &library {
            for file in [dir.join(format!("{short}.py")), dir.join(short)] {
                if file.is_file() && !name.contains('.') {
                    return Ok(format!("{version}, module {}", file.display()));
                }
            }
        }
        static SEEN: LazyLock<Mutex<HashMap<DocQuery, Result<String, String>>>> = LazyLock::new(Default::default);
        let key = (self.tool("doc"), name.to_string(), library.clone());
        if let Some(seen) = SEEN.lock().ok().and_then(|s| s.get(&key).cloned()) {
            return seen;
        }
        let doc = format!("{} -t module -j {}", self.tool("doc"), crate::ansible_compat::shell_quote(name));
        let mut cmd = Command::new("sh");
        cmd.arg("-c").arg(&doc);
        if !library.is_empty() {
            cmd.env("ANSIBLE_LIBRARY", std::env::join_paths(&library).unwrap_or_default());
        }
        let answer = match cmd.output() {
            Ok(out) => match serde_json::from_slice::<Value>(&out.stdout) {
                Ok(Value::Object(found)) if !found.is_empty() => {
                    let file = found
                        .values()
                        .next()
                        .and_then(|m| m.pointer("/doc/filename"))
                        .and_then(Value::as_str)
                        .unwrap_or(name)
                        .to_string();
                    Ok(format!("{version}, module {file}"))
                }
                _ => Err(format!(
                    "ansible-core ({version}) has no module `{name}` (`{doc}` found nothing{})",
                    if library.is_empty() {
                        String::new()
                    } else {
                        format!(
                            " in its collections and {}",
                            library.iter().map(|d| d.display().to_string()).collect::<Vec<_>>().join(", ")
                        )
                    }
                )),
            },
            Err(e) => Err(format!("cannot run `{doc}`: {e}")),
        };
        if let Ok(mut seen) = SEEN.lock() {
            seen.insert(key, answer.clone());
        }
        answer
    }
}

/// `role/library` and, depth first, those of the roles it depends on (`meta/main.yml`), as ansible-core adds the
/// `library/` of every role it loads.
fn role_libraries(role: &Path, seen: &mut Vec<PathBuf>, out: &mut Vec<PathBuf>) {
    if seen.iter().any(|s| s == role) {
        return;
    }
    seen.push(role.to_path_buf());
    out.push(role.join("library"));
    for dep in role_dependencies(role) {
        role_libraries(&dep, seen, out);
    }
}

/// The play as YAML (JSON is YAML) with every string that holds template markers tagged `!unsafe`: the arguments
/// are rendered already, so ansible-core must not render them again.
fn unsafe_yaml(v: &Value) -> String {
    match v {
        Value::String(s) if s.contains("{{") || s.contains("{%") || s.contains("{#") => {
            format!("!unsafe {}", Value::String(s.clone()))
        }
        Value::Array(items) => format!("[{}]", items.iter().map(unsafe_yaml).collect::<Vec<_>>().join(", ")),
        Value::Object(m) => format!(
            "{{{}}}",
            m.iter()
                .map(|(k, v)| format!("{}: {}", Value::String(k.clone()), unsafe_yaml(v)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        other => other.to_string(),
    }
}

/// The task, run by ansible-core on the module's target host.
pub(super) async fn run(ctx: &ModuleContext, args: &Map<String, Value>, vars: &Vars) -> ModuleResult {
    let mut args = args.clone();
    let Some(Value::String(name)) = args.remove(MODULE_NAME_ARG) else {
        return Ok(failed("internal: a task for ansible-core without its module name"));
    };
    let core = AnsibleCore::from_vars(|k| vars.get(k));
    let (probe, module, file) = (core.clone(), name.clone(), ctx.task_file.clone());
    let found = tokio::task::spawn_blocking(move || probe.find_module(&module, &file))
        .await
        .unwrap_or_else(|e| Err(format!("the look for ansible-core stopped: {e}")));
    if let Err(why) = found {
        return Ok(failed(format!("module `{name}` is not one upgrade runs, and {why}")));
    }
    // The target's connection variables (the delegate's, from hostvars, when the task is delegated).
    let target_vars = |k: &str| -> Option<Value> {
        if ctx.target == ctx.host {
            vars.get(k)
        } else {
            vars.get("hostvars").and_then(|h| h.get(&ctx.target).and_then(|t| t.get(k)).cloned())
        }
    };
    let mut host_vars = Map::new();
    for key in CONNECTION_VARS {
        if let Some(v) = target_vars(key) {
            let rendered = ctx.templar.render_value(&v, vars).map_err(|e| {
                ConnectionError::Transport(format!("cannot render {key} for ansible-core: {}", e.message))
            })?;
            host_vars.insert(key.to_string(), rendered);
        }
    }
    // `copy`'s controller-side `src` is found where upgrade finds it (ansible-playbook runs elsewhere).
    let short = name.rsplit('.').next().unwrap_or(&name);
    let remote_src = args.get("remote_src").and_then(crate::ansible_compat::boolean).unwrap_or(false);
    if short == "copy" && !remote_src {
        if let Some(Value::String(src)) = args.get("src").cloned() {
            let found = resolve_local(&ctx.task_file, &src, Some("files"));
            let found = std::fs::canonicalize(&found).unwrap_or(found);
            let mut text = found.display().to_string();
            if src.ends_with('/') {
                text.push('/');
            }
            args.insert("src".into(), Value::String(text));
        }
    }
    let mut task = Map::new();
    task.insert("name".into(), json!(name));
    task.insert(name.clone(), Value::Object(args));
    if let Some(user) = &ctx.become_user {
        task.insert("become".into(), json!(true));
        task.insert("become_user".into(), json!(user));
    }
    if !ctx.environment.is_empty() {
        let env: Map<String, Value> = ctx.environment.iter().map(|(k, v)| (k.clone(), json!(v))).collect();
        task.insert("environment".into(), Value::Object(env));
    }
    if ctx.check_mode {
        task.insert("check_mode".into(), json!(true));
    }
    let play = json!([{"hosts": ctx.target, "gather_facts": false, "tasks": [Value::Object(task)]}]);
    let inventory = json!({"all": {"hosts": {ctx.target.clone(): host_vars}}});
    let dir = tempfile::Builder::new()
        .prefix("upgrade-ansible-")
        .tempdir()
        .map_err(|e| ConnectionError::Transport(format!("cannot make a directory for ansible-core: {e}")))?;
    let write = |file: &str, v: &Value| {
        std::fs::write(dir.path().join(file), unsafe_yaml(v))
            .map_err(|e| ConnectionError::Transport(format!("cannot write {file} for ansible-core: {e}")))
    };
    write("play.yml", &play)?;
    write("inventory.yml", &inventory)?;
    let mut cmd = tokio::process::Command::new("sh");
    cmd.arg("-c")
        .arg(format!("exec {} -i inventory.yml play.yml", core.tool("playbook")))
        .current_dir(dir.path())
        .env("ANSIBLE_STDOUT_CALLBACK", "minimal")
        .env("ANSIBLE_NOCOLOR", "1")
        .env("ANSIBLE_RETRY_FILES_ENABLED", "0")
        .kill_on_drop(true);
    let library = core.library_for(&ctx.task_file);
    if !library.is_empty() {
        cmd.env("ANSIBLE_LIBRARY", std::env::join_paths(&library).unwrap_or_default());
    }
    let out = match ctx.timeout {
        Some(limit) => tokio::time::timeout(limit, cmd.output()).await.map_err(|_| ConnectionError::Timeout(limit))?,
        None => cmd.output().await,
    }
    .map_err(|e| ConnectionError::Transport(format!("cannot run {}: {e}", core.tool("playbook"))))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    match result_of(&stdout, &ctx.target) {
        Some(mut result) => {
            if result.get("unreachable").and_then(Value::as_bool) == Some(true) {
                let msg = result.get("msg").and_then(Value::as_str).unwrap_or("unreachable").to_string();
                return Err(ConnectionError::Transport(format!("ansible-core could not reach the host: {msg}")));
            }
            result.entry("changed").or_insert(json!(false));
            Ok(result)
        }
        None => {
            let stderr = String::from_utf8_lossy(&out.stderr);
            let tail: Vec<&str> = stderr.lines().chain(stdout.lines()).filter(|l| !l.trim().is_empty()).collect();
            Ok(failed(format!(
                "ansible-core gave no result for module `{name}` (exit {}): {}",
                out.status.code().unwrap_or(-1),
                tail[tail.len().saturating_sub(5)..].join(" | ")
            )))
        }
    }
}

/// The minimal callback's line for the host: `HOST | SUCCESS => {...}`, `| CHANGED`, `| FAILED!`,
/// `| UNREACHABLE!` (or `| SKIPPED`), followed by the result as JSON.
fn result_of(stdout: &str, host: &str) -> Option<Map<String, Value>> {
    let prefix = format!("{host} | ");
    let start = stdout.match_indices(&prefix).find(|(i, _)| *i == 0 || stdout.as_bytes()[i - 1] == b'\n')?.0;
    let rest = &stdout[start..];
    let arrow = rest.find(" => ")?;
    let status = rest[prefix.len()..arrow].trim();
    let mut stream = serde_json::Deserializer::from_str(&rest[arrow + 4..]).into_iter::<Value>();
    let Value::Object(mut result) = stream.next()?.ok()? else { return None };
    // The callback gives the outcome in the status word and leaves it out of the JSON.
    match status {
        "FAILED!" => {
            result.insert("failed".into(), json!(true));
        }
        "UNREACHABLE!" => {
            result.insert("unreachable".into(), json!(true));
        }
        "SKIPPED" => {
            result.insert("skipped".into(), json!(true));
        }
        _ => {}
    }
    Some(result)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_minimal_callbacks_result_is_read_for_the_host() {
        let out = "[WARNING]: something\nh1 | CHANGED => {\n    \"changed\": true,\n    \"ping\": \"pong\"\n}\n";
        assert_eq!(result_of(out, "h1").expect("result")["ping"], "pong");
        let failed = "h1 | FAILED! => {\"changed\": false, \"failed\": true, \"msg\": \"no\"}\n";
        assert_eq!(result_of(failed, "h1").expect("result")["msg"], "no");
        let failed = "h1 | FAILED! => {\n    \"changed\": false,\n    \"msg\": \"boom\"\n}\n";
        assert_eq!(result_of(failed, "h1").expect("result")["failed"], true);
        assert!(result_of("xh1 | SUCCESS => {}", "h1").is_none());
    }

    #[test]
    fn rendered_strings_with_template_markers_are_unsafe_for_ansible() {
        let play = json!({"a": "{{ x }}", "b": ["plain", "{% y %}"], "c": 1});
        assert_eq!(unsafe_yaml(&play), r#"{"a": !unsafe "{{ x }}", "b": ["plain", !unsafe "{% y %}"], "c": 1}"#);
    }

    #[test]
    fn tools_are_the_siblings_of_upgrade_ansible_command() {
        let core = AnsibleCore { command: Some("/opt/a/bin/ansible".into()), library: Vec::new() };
        assert_eq!(core.tool("playbook"), "/opt/a/bin/ansible-playbook");
        assert_eq!(AnsibleCore::default().tool("doc"), "ansible-doc");
        let vars = json!({"upgrade_ansible_library": "lib:/abs", "inventory_dir": "/inv"});
        let core = AnsibleCore::from_vars(|k| vars.get(k).cloned());
        assert_eq!(core.library, [PathBuf::from("/inv/lib"), PathBuf::from("/abs")]);
    }
}
