//! Reading a task file: YAML nodes into `Task` values, every mistake an input error at its place.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use super::*;
use crate::error::{Error, Result};
use crate::yaml::{Node, NodeValue};

const TASK_KEYS: &[&str] = &[
    "name",
    "when",
    "register",
    "failed_when",
    "changed_when",
    "ignore_errors",
    "until",
    "retries",
    "delay",
    "delegate_to",
    "local_action",
    "run_once",
    "become",
    "become_user",
    "environment",
    "vars",
    "loop",
    "with_items",
    "with_fileglob",
    "with_first_found",
    "loop_control",
    "no_log",
    "tags",
    "args",
    "timeout",
    "notify",
    "listen",
    "async",
    "poll",
    "throttle",
    "check_mode",
];

/// Whether a key could name a module ansible-core runs (`oc_obj`, `kubernetes.core.k8s_drain`): not one of Ansible's
/// task keywords, and a Python identifier or a dotted collection name.
fn is_module_name(key: &str) -> bool {
    !ANSIBLE_KEYWORDS.contains(&key)
        && !key.starts_with("with_")
        && key.split('.').all(|part| {
            part.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                && part.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        })
}

/// Ansible's task keywords (ansible-core 2.19's `Task`, `Block` and `Handler` attributes): a key among them that is not
/// in `TASK_KEYS` is a keyword we do not support, not a module.
const ANSIBLE_KEYWORDS: &[&str] = &[
    "action",
    "always",
    "any_errors_fatal",
    "become_exe",
    "become_flags",
    "become_method",
    "collections",
    "connection",
    "debugger",
    "delegate_facts",
    "diff",
    "ignore_unreachable",
    "module_defaults",
    "port",
    "remote_user",
    "rescue",
];

const BLOCK_KEYS: &[&str] = &[
    "name",
    "block",
    "rescue",
    "always",
    "when",
    "vars",
    "become",
    "become_user",
    "environment",
    "ignore_errors",
    "no_log",
    "delegate_to",
    "run_once",
    "tags",
    "throttle",
    "check_mode",
];

/// Reads a task file. The first problem is returned; `check_task_file` collects all of them.
pub fn load_task_file(path: &Path) -> Result<Vec<Task>> {
    let text = std::fs::read_to_string(path).map_err(|e| Error::read_file(path, e))?;
    let (tasks, mut errors) = parse_tasks(&text, path);
    if errors.is_empty() { Ok(tasks) } else { Err(errors.swap_remove(0)) }
}

/// Task files read once per run and shared: every built-in step includes `defaults.yml`, so a 5,000-node run would
/// otherwise parse it tens of thousands of times. A file changed since it was read (its modification time or size
/// differs) is read again, as Ansible reads an include when it reaches it.
#[derive(Debug, Default)]
pub struct TaskFileCache {
    files: std::sync::Mutex<std::collections::HashMap<std::path::PathBuf, (FileStamp, std::sync::Arc<Vec<Task>>)>>,
}

type FileStamp = Option<(std::time::SystemTime, u64)>;

impl TaskFileCache {
    /// The tasks of `path`, parsed once while the file stays as it was.
    pub fn load(&self, path: &Path) -> Result<std::sync::Arc<Vec<Task>>> {
        let stamp: FileStamp = std::fs::metadata(path).ok().and_then(|m| Some((m.modified().ok()?, m.len())));
        let cached = self.files.lock().ok().and_then(|files| files.get(path).cloned());
        if let Some((seen, tasks)) = cached {
            if stamp.is_some() && seen == stamp {
                return Ok(tasks);
            }
        }
        let tasks = std::sync::Arc::new(load_task_file(path)?);
        if let Ok(mut files) = self.files.lock() {
            files.insert(path.to_path_buf(), (stamp, tasks.clone()));
        }
        Ok(tasks)
    }
}

/// Parses a task list, collecting every error rather than stopping at the first.
pub fn parse_tasks(text: &str, path: &Path) -> (Vec<Task>, Vec<Error>) {
    let root = match crate::yaml::parse(text, path) {
        Ok(Some(root)) => root,
        Ok(None) => return (Vec::new(), Vec::new()),
        Err(e) => return (Vec::new(), vec![e]),
    };
    let mut parser = Parser { file: path.to_path_buf(), errors: Vec::new(), listed_support: false };
    let Some(items) = root.as_seq() else {
        let err = Error::input(format!("a task file is a list of tasks, found {}", root.type_name()))
            .at(root.location(path))
            .hint("start each task with `- name: ...`");
        return (Vec::new(), vec![err]);
    };
    if items.iter().any(|item| item.get("hosts").is_some()) {
        let first = items.iter().find(|item| item.get("hosts").is_some()).unwrap_or(&root);
        let err = Error::input("this is a playbook (a list of plays with `hosts:`), not a task list")
            .at(first.location(path))
            .hint("give a task list: the `tasks:` of the play, without `hosts:`");
        return (Vec::new(), vec![err]);
    }
    let tasks = parser.task_list(&root);
    (tasks, parser.errors)
}

/// The action a task has been given while its keys are read, and the key that gave it.
type Chosen<'n> = Option<(Action, &'n Node)>;

struct Parser {
    file: PathBuf,
    errors: Vec<Error>,
    /// The list of supported modules and keywords has been given in a hint of this file.
    listed_support: bool,
}

/// A task's name for messages: its `name:` or, failing that, its position.
fn display_name(node: &Node) -> String {
    node.get("name").and_then(Node::as_str).map(|n| format!("task \"{n}\"")).unwrap_or_else(|| "unnamed task".into())
}

impl Parser {
    fn error(&mut self, node: &Node, task: &str, message: impl Into<String>, hint: impl Into<String>) {
        let message = format!("{task}: {}", message.into());
        self.errors.push(Error::input(message).at(node.location(&self.file)).hint(hint));
    }

    fn task_list(&mut self, node: &Node) -> Vec<Task> {
        let Some(items) = node.as_seq() else {
            self.error(
                node,
                "task list",
                format!("expected a list of tasks, found {}", node.type_name()),
                "write a YAML list: `- name: ...`",
            );
            return Vec::new();
        };
        items.iter().filter_map(|item| self.task(item)).collect()
    }

    fn task(&mut self, node: &Node) -> Option<Task> {
        let Some(entries) = node.as_map() else {
            self.error(
                node,
                "task",
                format!("a task is a mapping, found {}", node.type_name()),
                "write `- name: ...` followed by a module, e.g. `command: ...`",
            );
            return None;
        };
        let label = display_name(node);
        let errors_before = self.errors.len();
        let mut task = Task { location: node.location(&self.file), ..Task::default() };
        let is_block = node.get("block").is_some();
        let mut chosen: Chosen<'_> = None;
        let mut extra_args: Option<Map<String, Value>> = None;
        for (key_node, value) in entries {
            let key = key_node.key_text();
            if is_block && !BLOCK_KEYS.contains(&key.as_str()) {
                self.error(
                    key_node,
                    &label,
                    format!("`{key}` is not allowed on a block"),
                    format!("a block takes {}", BLOCK_KEYS.join(", ")),
                );
                continue;
            }
            if key == "args" {
                match value.to_json() {
                    Value::Object(map) => extra_args = Some(map),
                    _ => self.error(
                        value,
                        &label,
                        format!("`args` must be a mapping, found {}", value.type_name()),
                        "write `args: {chdir: /tmp}`",
                    ),
                }
            } else if !self.keyword(&mut task, key_node, value, &label) {
                self.action_key(&mut task, &mut chosen, node, key_node, value, &label);
            }
        }
        match chosen {
            Some((Action::Module(mut call), _)) => {
                if let Some(extra) = extra_args {
                    for (k, v) in extra {
                        call.args.insert(k, v);
                    }
                    self.check_args(call.module, &call.args, node, &label);
                }
                task.action = Action::Module(self.in_check_mode(&task, call, node, &label));
            }
            Some((Action::Include { import: true, .. }, key_node)) if task.loop_items.is_some() => self.error(
                key_node,
                &label,
                "You cannot use loops on 'import_tasks' statements. You should use 'include_tasks' instead.",
                "write include_tasks to run the file once per item",
            ),
            Some((other, _)) => task.action = other,
            None if self.errors.len() == errors_before => {
                self.error(
                    node,
                    &label,
                    "no module in this task",
                    "add a module such as `command: ...` or `debug: msg=...`",
                );
            }
            None => {}
        }
        if self.errors.len() > errors_before { None } else { Some(task) }
    }

    /// A task written `check_mode: true` whose module has no check mode here but has one in ansible-core goes to
    /// ansible-core (so `check` asks for it); one neither can run in check mode is refused. A check mode that comes
    /// from a block or a template is settled when the task runs.
    fn in_check_mode(&mut self, task: &Task, call: ModuleCall, node: &Node, label: &str) -> ModuleCall {
        if task.check_mode != Some(Value::Bool(true)) {
            return call;
        }
        match call.module.check_mode() {
            CheckMode::ThroughAnsibleCore => call.through_ansible_core(call.module.name()),
            CheckMode::Unsupported => {
                self.error(
                    node,
                    label,
                    format!("`{}` cannot run in check mode here (`check_mode: true`)", call.module.name()),
                    "remove `check_mode: true` from this task (ansible-core's template renders on the controller, so it \
                     cannot be handed to it)",
                );
                call
            }
            CheckMode::Runs | CheckMode::Skips(_) => call,
        }
    }

    /// Reads one of the task keywords (`when`, `register`, `loop`, ...) into the task; `false` for any other key.
    fn keyword(&mut self, task: &mut Task, key_node: &Node, value: &Node, label: &str) -> bool {
        let key = key_node.key_text();
        match key.as_str() {
            "name" => task.name = self.string(value, label, "name"),
            "when" => task.when = self.conditions(value, label, "when"),
            "failed_when" => task.failed_when = self.conditions(value, label, "failed_when"),
            "changed_when" => task.changed_when = self.conditions(value, label, "changed_when"),
            "until" => task.until = self.conditions(value, label, "until"),
            "register" => task.register = self.identifier(value, label, "register"),
            "ignore_errors" => task.ignore_errors = self.boolish(value, label, "ignore_errors"),
            "run_once" => task.run_once = self.boolish(value, label, "run_once"),
            "no_log" => task.no_log = self.boolish(value, label, "no_log"),
            "become" => task.become_ = self.boolish(value, label, "become"),
            "become_user" => task.become_user = self.string(value, label, "become_user").map(Value::String),
            "retries" => task.retries = self.intish(value, label, "retries"),
            "delay" => task.delay = self.intish(value, label, "delay"),
            "timeout" => {
                task.timeout = self.intish(value, label, "timeout");
                if task.timeout.as_ref().and_then(Value::as_i64).is_some_and(|t| t < 0) {
                    self.error(
                        value,
                        label,
                        "`timeout` must be 0 or more seconds".to_string(),
                        "write `timeout: 30` (seconds; 0 means no limit)".to_string(),
                    );
                }
            }
            "delegate_to" => task.delegate_to = self.string(value, label, "delegate_to"),
            "environment" => match &value.value {
                NodeValue::Map(_) | NodeValue::Str(_) => task.environment = Some(value.to_json()),
                _ => self.error(
                    value,
                    label,
                    format!("`environment` must be a mapping, found {}", value.type_name()),
                    "write `environment: {NAME: value}`",
                ),
            },
            "vars" => match value.to_json() {
                Value::Object(map) => task.vars = map,
                Value::Null => {}
                _ => self.error(
                    value,
                    label,
                    format!("`vars` must be a mapping, found {}", value.type_name()),
                    "write `vars: {name: value}`",
                ),
            },
            "loop" | "with_items" | "with_fileglob" | "with_first_found" => {
                if task.loop_items.is_some() {
                    self.error(key_node, label, "two loops given (`loop` or `with_...`)", "keep one of them");
                }
                match &value.value {
                    NodeValue::Seq(_) | NodeValue::Str(_) => task.loop_items = Some(value.to_json()),
                    _ => self.error(
                        value,
                        label,
                        format!("`{key}` must be a list or a template, found {}", value.type_name()),
                        "write a YAML list or `\"{{ some_list }}\"`",
                    ),
                }
                task.loop_flatten = key == "with_items";
                task.loop_lookup = key.strip_prefix("with_").filter(|l| *l != "items").map(str::to_string);
            }
            "loop_control" => self.loop_control(value, label, task),
            "notify" => task.notify = self.names(value, label, "notify"),
            "async" => task.async_ = self.intish(value, label, "async"),
            "poll" => task.poll = self.intish(value, label, "poll"),
            "throttle" => task.throttle = self.intish(value, label, "throttle"),
            "check_mode" => task.check_mode = self.boolish(value, label, "check_mode"),
            "listen" => task.listen = self.names(value, label, "listen"),
            "tags" | "rescue" | "always" => {}
            _ => return false,
        }
        true
    }

    /// Reads a key that says what the task does: a block, `local_action`, an include, or a module.
    fn action_key<'n>(
        &mut self,
        task: &mut Task,
        chosen: &mut Chosen<'n>,
        node: &Node,
        key_node: &'n Node,
        value: &Node,
        label: &str,
    ) {
        let key = key_node.key_text();
        match key.as_str() {
            "block" => {
                let block = self.task_list(value);
                let rescue = node.get("rescue").map(|r| self.nested(r)).unwrap_or_default();
                let always = node.get("always").map(|a| self.nested(a)).unwrap_or_default();
                self.set_action(chosen, key_node, label, "actions", |_| Some(Action::Block { block, rescue, always }));
            }
            "local_action" => {
                self.set_action(chosen, key_node, label, "actions", |this| {
                    let call = this.local_action(value, label)?;
                    task.delegate_to = Some("localhost".into());
                    Some(Action::Module(call))
                });
            }
            "include_tasks" | "import_tasks" | "ansible.builtin.include_tasks" | "ansible.builtin.import_tasks" => {
                let file = match &value.value {
                    NodeValue::Str(s) => Some(s.clone()),
                    NodeValue::Map(_) => value.get("file").and_then(Node::as_str).map(str::to_string),
                    _ => None,
                };
                match file {
                    Some(file) if !file.trim().is_empty() => {
                        self.set_action(chosen, key_node, label, "actions", |_| {
                            Some(Action::Include { file, import: key.ends_with("import_tasks") })
                        });
                    }
                    _ => self.error(
                        value,
                        label,
                        format!("`{key}` needs a file name"),
                        format!("write `{key}: other-file.yml`"),
                    ),
                }
            }
            other => match Module::from_name(other) {
                Some(module) => self.set_action(chosen, key_node, label, "modules", |this| {
                    let mut args = this.module_args(module, value, label)?;
                    // An argument only ansible-core's module has: the task is ansible-core's to run.
                    if args.keys().any(|k| module.ansible_only_args().contains(&k.as_str())) {
                        args.insert(ANSIBLE_CORE_MODULE_ARG.into(), Value::String(other.to_string()));
                        return Some(Action::Module(ModuleCall { module: Module::AnsibleCore, args }));
                    }
                    Some(Action::Module(ModuleCall { module, args }))
                }),
                None if TASK_KEYS.contains(&other) => {}
                // Any other module is ansible-core's to run (the check asks whether it has it).
                None if is_module_name(other) => self.set_action(chosen, key_node, label, "modules", |this| {
                    let mut args = this.module_args(Module::AnsibleCore, value, label)?;
                    args.insert(ANSIBLE_CORE_MODULE_ARG.into(), Value::String(other.to_string()));
                    Some(Action::Module(ModuleCall { module: Module::AnsibleCore, args }))
                }),
                None => self.unsupported(key_node, label, other),
            },
        }
    }

    /// A key that is neither a keyword nor a module name. Ansible reads any key that is not one of its task
    /// keywords as a module name, so that is what the message calls it; the long list of what is supported is
    /// given once per file, not with every error.
    fn unsupported(&mut self, key_node: &Node, label: &str, key: &str) {
        let message = if ANSIBLE_KEYWORDS.contains(&key) || key.starts_with("with_") {
            format!("the keyword `{key}` is not supported")
        } else {
            format!("unknown module `{key}`")
        };
        let hint = if self.listed_support {
            "see the first error of this file for what is supported".to_string()
        } else {
            self.listed_support = true;
            let known = Module::ALL.iter().map(|m| m.name()).collect::<Vec<_>>().join(", ");
            format!("supported modules: {known}; supported task keywords: {}", TASK_KEYS.join(", "))
        };
        self.error(key_node, label, message, hint);
    }

    /// The one place a task is given its action, built by `action` (which reports its own errors). A task does one
    /// thing: a second action is an error naming both keys (`what`: "modules" or "actions"), and is not read.
    fn set_action<'n>(
        &mut self,
        chosen: &mut Chosen<'n>,
        key_node: &'n Node,
        label: &str,
        what: &str,
        action: impl FnOnce(&mut Self) -> Option<Action>,
    ) {
        if let Some((_, first)) = chosen {
            let (first, key) = (first.key_text(), key_node.key_text());
            self.error(
                key_node,
                label,
                format!("two {what} in one task: `{first}` and `{key}`"),
                "split them into two tasks",
            );
            return;
        }
        if let Some(action) = action(self) {
            *chosen = Some((action, key_node));
        }
    }

    fn nested(&mut self, node: &Node) -> Vec<Task> {
        if node.is_null() { Vec::new() } else { self.task_list(node) }
    }

    fn string(&mut self, node: &Node, label: &str, key: &str) -> Option<String> {
        match &node.value {
            NodeValue::Str(s) => Some(s.clone()),
            NodeValue::Int(_) | NodeValue::Float(_) | NodeValue::Bool(_) => Some(node.key_text()),
            NodeValue::Null => None,
            _ => {
                self.error(
                    node,
                    label,
                    format!("`{key}` must be a string, found {}", node.type_name()),
                    format!("write `{key}: some text`"),
                );
                None
            }
        }
    }

    /// A name or a list of names (`notify: restart kubelet`, `notify: [a, b]`).
    fn names(&mut self, node: &Node, label: &str, key: &str) -> Vec<String> {
        match &node.value {
            NodeValue::Seq(items) => items.iter().filter_map(|i| self.string(i, label, key)).collect(),
            _ => self.string(node, label, key).into_iter().collect(),
        }
    }

    fn identifier(&mut self, node: &Node, label: &str, key: &str) -> Option<String> {
        let name = self.string(node, label, key)?;
        let valid = name.chars().next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !valid {
            self.error(
                node,
                label,
                format!("`{name}` is not a valid variable name"),
                "use letters, digits and `_`, not starting with a digit",
            );
            return None;
        }
        Some(name)
    }

    fn conditions(&mut self, node: &Node, label: &str, key: &str) -> Vec<Value> {
        let one = |n: &Node, this: &mut Parser| -> Option<Value> {
            match &n.value {
                NodeValue::Str(s) => Some(Value::String(s.clone())),
                NodeValue::Bool(b) => Some(Value::Bool(*b)),
                NodeValue::Int(_) | NodeValue::Float(_) => Some(Value::String(n.key_text())),
                _ => {
                    this.error(
                        n,
                        label,
                        format!("`{key}` must be an expression or a list of them, found {}", n.type_name()),
                        format!("write `{key}: result.rc != 0`"),
                    );
                    None
                }
            }
        };
        match &node.value {
            NodeValue::Seq(items) => items.iter().filter_map(|i| one(i, self)).collect(),
            NodeValue::Null => Vec::new(),
            _ => one(node, self).into_iter().collect(),
        }
    }

    fn boolish(&mut self, node: &Node, label: &str, key: &str) -> Option<Value> {
        match &node.value {
            NodeValue::Bool(b) => Some(Value::Bool(*b)),
            NodeValue::Str(s) => Some(Value::String(s.clone())),
            NodeValue::Int(i) => Some(Value::Bool(*i != 0)),
            NodeValue::Null => None,
            _ => {
                self.error(
                    node,
                    label,
                    format!("`{key}` must be a boolean, found {}", node.type_name()),
                    format!("write `{key}: true`"),
                );
                None
            }
        }
    }

    fn intish(&mut self, node: &Node, label: &str, key: &str) -> Option<Value> {
        match &node.value {
            NodeValue::Int(i) => Some(Value::from(*i)),
            NodeValue::Str(s) if s.contains("{{") || s.trim().parse::<i64>().is_ok() => Some(Value::String(s.clone())),
            NodeValue::Null => None,
            _ => {
                self.error(
                    node,
                    label,
                    format!("`{key}` must be a number, found {}", node.type_name()),
                    format!("write `{key}: 3`"),
                );
                None
            }
        }
    }

    fn loop_control(&mut self, node: &Node, label: &str, task: &mut Task) {
        let Some(entries) = node.as_map() else {
            self.error(
                node,
                label,
                format!("`loop_control` must be a mapping, found {}", node.type_name()),
                "write `loop_control: {loop_var: host}`",
            );
            return;
        };
        for (k, v) in entries {
            match k.key_text().as_str() {
                "loop_var" => task.loop_var = self.identifier(v, label, "loop_var"),
                "label" => task.loop_label = self.string(v, label, "label"),
                "index_var" => task.index_var = self.identifier(v, label, "index_var"),
                other => self.error(
                    k,
                    label,
                    format!("`loop_control.{other}` is not supported"),
                    "use loop_var, index_var or label",
                ),
            }
        }
    }

    fn local_action(&mut self, node: &Node, label: &str) -> Option<ModuleCall> {
        // `local_action: command ls` or `local_action: {module: command, cmd: ls}`.
        let (module_name, rest) = match &node.value {
            NodeValue::Str(s) => {
                let s = s.trim();
                let (m, rest) = s.split_once(char::is_whitespace).unwrap_or((s, ""));
                (
                    m.to_string(),
                    Node { value: NodeValue::Str(rest.trim().to_string()), line: node.line, column: node.column },
                )
            }
            NodeValue::Map(entries) => {
                let Some(module) = node.get("module").and_then(Node::as_str) else {
                    self.error(
                        node,
                        label,
                        "`local_action` needs a `module:`",
                        "write `local_action: command ls` or `local_action: {module: command, cmd: ls}`",
                    );
                    return None;
                };
                let rest: Vec<(Node, Node)> =
                    entries.iter().filter(|(k, _)| k.key_text() != "module").cloned().collect();
                (module.to_string(), Node { value: NodeValue::Map(rest), line: node.line, column: node.column })
            }
            _ => {
                self.error(
                    node,
                    label,
                    format!("`local_action` must be text or a mapping, found {}", node.type_name()),
                    "write `local_action: command ls`",
                );
                return None;
            }
        };
        let Some(module) = Module::from_name(&module_name) else {
            let known = Module::ALL.iter().map(|m| m.name()).collect::<Vec<_>>().join(", ");
            self.error(
                node,
                label,
                format!("unknown module `{module_name}` in local_action"),
                format!("supported modules: {known}"),
            );
            return None;
        };
        let args = self.module_args(module, &rest, label)?;
        Some(ModuleCall { module, args })
    }

    fn module_args(&mut self, module: Module, node: &Node, label: &str) -> Option<Map<String, Value>> {
        let args = match &node.value {
            NodeValue::Null => Map::new(),
            NodeValue::Str(s) => match parse_kv(s, module.takes_raw()) {
                Ok(args) => args,
                Err(e) => {
                    self.error(node, label, e, "close every quote and every {{ }} / {% %} block".to_string());
                    return None;
                }
            },
            NodeValue::Int(_) | NodeValue::Float(_) | NodeValue::Bool(_) if module.takes_raw() => {
                let mut m = Map::new();
                m.insert("_raw_params".into(), Value::String(node.key_text()));
                m
            }
            NodeValue::Map(_) => match node.to_json() {
                Value::Object(m) => m,
                _ => Map::new(),
            },
            _ => {
                self.error(
                    node,
                    label,
                    format!(
                        "arguments of `{}` must be a mapping or `key=value` text, found {}",
                        module.name(),
                        node.type_name()
                    ),
                    format!("write `{}:` followed by indented `key: value` lines", module.name()),
                );
                return None;
            }
        };
        let before = self.errors.len();
        self.check_args(module, &args, node, label);
        if self.errors.len() > before { None } else { Some(args) }
    }
}

/// Free-form module text as ansible-core's `parse_kv` splits it (`_raw_params` + options), as task arguments.
pub fn parse_kv(text: &str, check_raw: bool) -> Result<Map<String, Value>, String> {
    let pairs = crate::ansible_compat::parse_kv(text, check_raw)?;
    Ok(pairs.into_iter().map(|(k, v)| (k, Value::String(v))).collect())
}

mod module_args;
#[cfg(test)]
mod tests;
