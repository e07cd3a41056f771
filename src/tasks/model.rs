//! The task-file model: a YAML task list read into `Task` values that remember their file and line.
//!
//! Only the Ansible subset docs/DESIGN.md lists is accepted; anything else (an unknown key or module, two modules in
//! one task, an argument of the wrong type) is an input error naming the file, line, column and task.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use crate::error::{Error, Location, Result};
use crate::yaml::{Node, NodeValue};

#[derive(Debug, Clone, PartialEq)]
pub struct Task {
    /// The `name:` as written (it may hold a template); `None` when the task has none.
    pub name: Option<String>,
    /// Where the task starts in its file.
    pub location: Location,
    pub action: Action,
    /// `when:` conditions, all of which must hold. YAML booleans are kept as `true`/`false` values.
    pub when: Vec<Value>,
    pub register: Option<String>,
    pub failed_when: Vec<Value>,
    pub changed_when: Vec<Value>,
    pub ignore_errors: Option<Value>,
    pub until: Vec<Value>,
    pub retries: Option<Value>,
    pub delay: Option<Value>,
    pub delegate_to: Option<String>,
    pub run_once: Option<Value>,
    /// `become:` (a Rust keyword, hence the underscore).
    pub become_: Option<Value>,
    pub become_user: Option<Value>,
    pub environment: Option<Value>,
    pub vars: Map<String, Value>,
    /// `loop:` or `with_items:` (the latter flattened one level when run, as Ansible does).
    pub loop_items: Option<Value>,
    pub loop_flatten: bool,
    pub loop_var: Option<String>,
    pub loop_label: Option<String>,
    /// `loop_control.index_var`: the name the item's 0-based position goes by.
    pub index_var: Option<String>,
    pub no_log: Option<Value>,
    /// `timeout:` seconds for one run of the module (Ansible's task keyword); 0 or unset: no limit.
    pub timeout: Option<Value>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    Module(ModuleCall),
    Block {
        block: Vec<Task>,
        rescue: Vec<Task>,
        always: Vec<Task>,
    },
    /// `include_tasks` / `import_tasks`: the file (maybe a template), read when the task runs.
    Include {
        file: String,
    },
}

#[derive(Debug, Clone, PartialEq)]
pub struct ModuleCall {
    pub module: Module,
    /// Arguments as written; free-form text is split the way Ansible's `parse_kv` does (`_raw_params` + options).
    pub args: Map<String, Value>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Module {
    Command,
    Shell,
    Script,
    Copy,
    Template,
    Fetch,
    Debug,
    Pause,
    Assert,
    Fail,
    SetFact,
    WaitFor,
    Stat,
    Reboot,
    WaitForConnection,
}

/// What an argument must hold. A string with a template in it may turn into anything, so it always passes here.
#[derive(Clone, Copy, PartialEq, Eq)]
enum ArgKind {
    Str,
    Int,
    Bool,
    StrOrList,
    List,
    Any,
}

impl Module {
    pub const ALL: [Module; 15] = [
        Module::Command,
        Module::Shell,
        Module::Script,
        Module::Copy,
        Module::Template,
        Module::Fetch,
        Module::Debug,
        Module::Pause,
        Module::Assert,
        Module::Fail,
        Module::SetFact,
        Module::WaitFor,
        Module::Stat,
        Module::Reboot,
        Module::WaitForConnection,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Module::Command => "command",
            Module::Shell => "shell",
            Module::Script => "script",
            Module::Copy => "copy",
            Module::Template => "template",
            Module::Fetch => "fetch",
            Module::Debug => "debug",
            Module::Pause => "pause",
            Module::Assert => "assert",
            Module::Fail => "fail",
            Module::SetFact => "set_fact",
            Module::WaitFor => "wait_for",
            Module::Stat => "stat",
            Module::Reboot => "reboot",
            Module::WaitForConnection => "wait_for_connection",
        }
    }

    /// `command`, `ansible.builtin.command` and `ansible.legacy.command` name the same module.
    pub fn from_name(name: &str) -> Option<Module> {
        let short =
            name.strip_prefix("ansible.builtin.").or_else(|| name.strip_prefix("ansible.legacy.")).unwrap_or(name);
        Module::ALL.into_iter().find(|m| m.name() == short)
    }

    /// Modules whose free-form text is a command line (Ansible's `check_raw`).
    fn takes_raw(self) -> bool {
        matches!(self, Module::Command | Module::Shell | Module::Script)
    }

    /// The arguments a module accepts; `None` accepts any name (set_fact).
    fn args(self) -> Option<&'static [(&'static str, ArgKind)]> {
        use ArgKind::*;
        const COMMAND: &[(&str, ArgKind)] = &[
            ("_raw_params", Str),
            ("cmd", Str),
            ("argv", List),
            ("chdir", Str),
            ("creates", Str),
            ("removes", Str),
            ("stdin", Str),
            ("stdin_add_newline", Bool),
            ("strip_empty_ends", Bool),
            ("executable", Str),
            ("expand_argument_vars", Bool),
        ];
        Some(match self {
            Module::Command | Module::Shell => COMMAND,
            Module::Script => &[
                ("_raw_params", Str),
                ("cmd", Str),
                ("chdir", Str),
                ("creates", Str),
                ("removes", Str),
                ("executable", Str),
            ],
            Module::Copy | Module::Template => &[
                ("content", Any),
                ("src", Str),
                ("dest", Str),
                ("mode", Any),
                ("force", Bool),
                ("owner", Str),
                ("group", Str),
            ],
            Module::Fetch => {
                &[("src", Str), ("dest", Str), ("flat", Bool), ("fail_on_missing", Bool), ("validate_checksum", Bool)]
            }
            Module::Debug => &[("msg", Any), ("var", Str), ("verbosity", Int)],
            Module::Pause => &[("seconds", Int), ("minutes", Int), ("prompt", Str), ("echo", Bool)],
            Module::Assert => {
                &[("that", StrOrList), ("fail_msg", Any), ("msg", Any), ("success_msg", Any), ("quiet", Bool)]
            }
            Module::Fail => &[("msg", Any)],
            Module::SetFact => return None,
            Module::WaitFor => &[
                ("host", Str),
                ("port", Int),
                ("path", Str),
                ("timeout", Int),
                ("delay", Int),
                ("state", Str),
                ("search_regex", Str),
                ("connect_timeout", Int),
                ("sleep", Int),
                ("msg", Str),
            ],
            Module::Stat => &[
                ("path", Str),
                ("follow", Bool),
                ("get_checksum", Bool),
                ("checksum_algorithm", Str),
                ("get_mime", Bool),
                ("get_attributes", Bool),
            ],
            Module::Reboot => &[
                ("boot_time_command", Str),
                ("connect_timeout", Int),
                ("msg", Str),
                ("post_reboot_delay", Int),
                ("pre_reboot_delay", Int),
                ("reboot_command", Str),
                ("reboot_timeout", Int),
                ("search_paths", StrOrList),
                ("test_command", Str),
            ],
            Module::WaitForConnection => &[("connect_timeout", Int), ("delay", Int), ("sleep", Int), ("timeout", Int)],
        })
    }
}

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
    "loop_control",
    "no_log",
    "tags",
    "args",
    "timeout",
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
];

/// Reads a task file. The first problem is returned; `check_task_file` collects all of them.
pub fn load_task_file(path: &Path) -> Result<Vec<Task>> {
    let text = std::fs::read_to_string(path).map_err(|e| Error::read_file(path, e))?;
    let (tasks, mut errors) = parse_tasks(&text, path);
    if errors.is_empty() { Ok(tasks) } else { Err(errors.swap_remove(0)) }
}

/// Parses a task list, collecting every error rather than stopping at the first.
pub fn parse_tasks(text: &str, path: &Path) -> (Vec<Task>, Vec<Error>) {
    let root = match crate::yaml::parse(text, path) {
        Ok(Some(root)) => root,
        Ok(None) => return (Vec::new(), Vec::new()),
        Err(e) => return (Vec::new(), vec![e]),
    };
    let mut parser = Parser { file: path.to_path_buf(), errors: Vec::new() };
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

struct Parser {
    file: PathBuf,
    errors: Vec<Error>,
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
        let mut task = Task {
            name: None,
            location: node.location(&self.file),
            action: Action::Block { block: Vec::new(), rescue: Vec::new(), always: Vec::new() },
            when: Vec::new(),
            register: None,
            failed_when: Vec::new(),
            changed_when: Vec::new(),
            ignore_errors: None,
            until: Vec::new(),
            retries: None,
            delay: None,
            delegate_to: None,
            run_once: None,
            become_: None,
            become_user: None,
            environment: None,
            vars: Map::new(),
            loop_items: None,
            loop_flatten: false,
            loop_var: None,
            loop_label: None,
            index_var: None,
            no_log: None,
            timeout: None,
        };
        let is_block = node.get("block").is_some();
        let mut action: Option<(Action, &Node)> = None;
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
            match key.as_str() {
                "name" => task.name = self.string(value, &label, "name"),
                "when" => task.when = self.conditions(value, &label, "when"),
                "failed_when" => task.failed_when = self.conditions(value, &label, "failed_when"),
                "changed_when" => task.changed_when = self.conditions(value, &label, "changed_when"),
                "until" => task.until = self.conditions(value, &label, "until"),
                "register" => task.register = self.identifier(value, &label, "register"),
                "ignore_errors" => task.ignore_errors = self.boolish(value, &label, "ignore_errors"),
                "run_once" => task.run_once = self.boolish(value, &label, "run_once"),
                "no_log" => task.no_log = self.boolish(value, &label, "no_log"),
                "become" => task.become_ = self.boolish(value, &label, "become"),
                "become_user" => task.become_user = self.string(value, &label, "become_user").map(Value::String),
                "retries" => task.retries = self.intish(value, &label, "retries"),
                "delay" => task.delay = self.intish(value, &label, "delay"),
                "timeout" => {
                    task.timeout = self.intish(value, &label, "timeout");
                    if task.timeout.as_ref().and_then(Value::as_i64).is_some_and(|t| t < 0) {
                        self.error(
                            value,
                            &label,
                            "`timeout` must be 0 or more seconds".to_string(),
                            "write `timeout: 30` (seconds; 0 means no limit)".to_string(),
                        );
                    }
                }
                "delegate_to" => task.delegate_to = self.string(value, &label, "delegate_to"),
                "environment" => match &value.value {
                    NodeValue::Map(_) | NodeValue::Str(_) => task.environment = Some(value.to_json()),
                    _ => self.error(
                        value,
                        &label,
                        format!("`environment` must be a mapping, found {}", value.type_name()),
                        "write `environment: {NAME: value}`",
                    ),
                },
                "vars" => match value.to_json() {
                    Value::Object(map) => task.vars = map,
                    Value::Null => {}
                    _ => self.error(
                        value,
                        &label,
                        format!("`vars` must be a mapping, found {}", value.type_name()),
                        "write `vars: {name: value}`",
                    ),
                },
                "loop" | "with_items" => {
                    if task.loop_items.is_some() {
                        self.error(key_node, &label, "`loop` and `with_items` both given", "keep one of them");
                    }
                    match &value.value {
                        NodeValue::Seq(_) | NodeValue::Str(_) => task.loop_items = Some(value.to_json()),
                        _ => self.error(
                            value,
                            &label,
                            format!("`{key}` must be a list or a template, found {}", value.type_name()),
                            "write a YAML list or `\"{{ some_list }}\"`",
                        ),
                    }
                    task.loop_flatten = key == "with_items";
                }
                "loop_control" => self.loop_control(value, &label, &mut task),
                "tags" => {}
                "args" => match value.to_json() {
                    Value::Object(map) => extra_args = Some(map),
                    _ => self.error(
                        value,
                        &label,
                        format!("`args` must be a mapping, found {}", value.type_name()),
                        "write `args: {chdir: /tmp}`",
                    ),
                },
                "block" => {
                    let block = self.task_list(value);
                    let rescue = node.get("rescue").map(|r| self.nested(r)).unwrap_or_default();
                    let always = node.get("always").map(|a| self.nested(a)).unwrap_or_default();
                    action = Some((Action::Block { block, rescue, always }, key_node));
                }
                "rescue" | "always" => {}
                "local_action" => {
                    if let Some(call) = self.local_action(value, &label) {
                        if let Some((_, first)) = &action {
                            let first = first.key_text();
                            self.error(
                                key_node,
                                &label,
                                format!("two actions in one task: `{first}` and `local_action`"),
                                "split them into two tasks",
                            );
                        }
                        task.delegate_to = Some("localhost".into());
                        action = Some((Action::Module(call), key_node));
                    }
                }
                "include_tasks" | "import_tasks" | "ansible.builtin.include_tasks" | "ansible.builtin.import_tasks" => {
                    let file = match &value.value {
                        NodeValue::Str(s) => Some(s.clone()),
                        NodeValue::Map(_) => value.get("file").and_then(Node::as_str).map(str::to_string),
                        _ => None,
                    };
                    match file {
                        Some(file) if !file.trim().is_empty() => {
                            if let Some((_, first)) = &action {
                                let first = first.key_text();
                                self.error(
                                    key_node,
                                    &label,
                                    format!("two actions in one task: `{first}` and `{key}`"),
                                    "split them into two tasks",
                                );
                            }
                            action = Some((Action::Include { file }, key_node));
                        }
                        _ => self.error(
                            value,
                            &label,
                            format!("`{key}` needs a file name"),
                            format!("write `{key}: other-file.yml`"),
                        ),
                    }
                }
                other => match Module::from_name(other) {
                    Some(module) => {
                        if let Some((_, first)) = &action {
                            let first = first.key_text();
                            self.error(
                                key_node,
                                &label,
                                format!("two modules in one task: `{first}` and `{other}`"),
                                "split them into two tasks",
                            );
                            continue;
                        }
                        if let Some(args) = self.module_args(module, value, &label) {
                            action = Some((Action::Module(ModuleCall { module, args }), key_node));
                        }
                    }
                    None if TASK_KEYS.contains(&other) => {}
                    None => {
                        let known = Module::ALL.iter().map(|m| m.name()).collect::<Vec<_>>().join(", ");
                        self.error(
                            key_node,
                            &label,
                            format!("unknown key or module `{other}`"),
                            format!("supported modules: {known}; task keys: {}", TASK_KEYS.join(", ")),
                        );
                    }
                },
            }
        }
        match action {
            Some((Action::Module(mut call), _)) => {
                if let Some(extra) = extra_args {
                    for (k, v) in extra {
                        call.args.insert(k, v);
                    }
                    self.check_args(call.module, &call.args, node, &label);
                }
                task.action = Action::Module(call);
            }
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
            NodeValue::Str(s) => parse_kv(s, module.takes_raw()),
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

    fn check_args(&mut self, module: Module, args: &Map<String, Value>, node: &Node, label: &str) {
        let Some(spec) = module.args() else { return };
        for (name, value) in args {
            let Some((_, kind)) = spec.iter().find(|(n, _)| n == name) else {
                let names: Vec<&str> = spec.iter().map(|(n, _)| *n).filter(|n| *n != "_raw_params").collect();
                let what = if name == "_raw_params" {
                    format!("`{}` takes no free-form text (`{}`)", module.name(), value.as_str().unwrap_or_default())
                } else {
                    format!("`{}` has no argument `{name}`", module.name())
                };
                self.error(node, label, what, format!("its arguments are: {}", names.join(", ")));
                continue;
            };
            let templated = value.as_str().is_some_and(|s| s.contains("{{") || s.contains("{%"));
            let ok = templated
                || match kind {
                    ArgKind::Str => !value.is_array() && !value.is_object(),
                    ArgKind::Int => {
                        value.is_i64()
                            || value.is_u64()
                            || value.as_str().is_some_and(|s| s.trim().parse::<i64>().is_ok())
                    }
                    ArgKind::Bool => {
                        value.is_boolean()
                            || value
                                .as_str()
                                .is_some_and(|s| crate::tasks::engine::parse_bool(&Value::String(s.into())).is_some())
                    }
                    ArgKind::StrOrList => value.is_string() || value.is_array() || value.is_boolean(),
                    ArgKind::List => value.is_array(),
                    ArgKind::Any => true,
                };
            if !ok {
                let expected = match kind {
                    ArgKind::Str => "text",
                    ArgKind::Int => "a number",
                    ArgKind::Bool => "a boolean",
                    ArgKind::StrOrList => "an expression or a list of expressions",
                    ArgKind::List => "a list",
                    ArgKind::Any => "a value",
                };
                self.error(
                    node,
                    label,
                    format!("`{}` argument `{name}` must be {expected}, found {value}", module.name()),
                    format!("write `{name}:` with {expected}"),
                );
            }
        }
        let has = |k: &str| args.contains_key(k);
        let missing = match module {
            Module::Command | Module::Shell if !has("_raw_params") && !has("cmd") && !has("argv") => Some("a command"),
            Module::Script if !has("_raw_params") && !has("cmd") => Some("a script path"),
            Module::Copy if !has("dest") => Some("`dest`"),
            Module::Copy if !has("src") && !has("content") => Some("`src` or `content`"),
            Module::Template if !has("src") || !has("dest") => Some("`src` and `dest`"),
            Module::Fetch if !has("src") || !has("dest") => Some("`src` and `dest`"),
            Module::Assert if !has("that") => Some("`that`"),
            Module::Stat if !has("path") => Some("`path`"),
            Module::WaitFor if has("port") && has("path") => {
                self.error(node, label, "`wait_for` takes `port` or `path`, not both", "split it into two tasks");
                None
            }
            Module::Debug if has("msg") && has("var") => {
                self.error(node, label, "`debug` takes `msg` or `var`, not both", "keep one of them");
                None
            }
            _ => None,
        };
        if let Some(what) = missing {
            self.error(
                node,
                label,
                format!("`{}` needs {what}", module.name()),
                format!("see the `{}` module's documentation", module.name()),
            );
        }
    }
}

/// Splits free-form module text like Ansible's `parse_kv`: `key=value` pairs become options and the rest is
/// `_raw_params`. For command-like modules (`check_raw`) only the command options are taken out of the text.
pub fn parse_kv(text: &str, check_raw: bool) -> Map<String, Value> {
    const RAW_OPTIONS: &[&str] =
        &["creates", "removes", "chdir", "executable", "warn", "stdin", "stdin_add_newline", "strip_empty_ends"];
    let mut options = Map::new();
    let mut raw: Vec<String> = Vec::new();
    for piece in split_args(text) {
        match find_unescaped_eq(&piece) {
            Some(pos) => {
                let key = piece[..pos].trim();
                let value = piece[pos + 1..].trim();
                if check_raw && !RAW_OPTIONS.contains(&key) {
                    raw.push(piece.clone());
                } else {
                    options.insert(key.to_string(), Value::String(unquote(value).replace("\\=", "=")));
                }
            }
            None => raw.push(piece),
        }
    }
    if !raw.is_empty() {
        options.insert("_raw_params".into(), Value::String(raw.join(" ")));
    }
    options
}

fn find_unescaped_eq(s: &str) -> Option<usize> {
    // Like Ansible: the first `=` after the first character that is not escaped with a backslash.
    let bytes = s.as_bytes();
    (1..bytes.len()).find(|&i| bytes[i] == b'=' && bytes[i - 1] != b'\\')
}

fn unquote(s: &str) -> &str {
    let b = s.as_bytes();
    if b.len() >= 2 && (b[0] == b'"' || b[0] == b'\'') && b[b.len() - 1] == b[0] { &s[1..s.len() - 1] } else { s }
}

/// Splits on whitespace outside quotes and Jinja blocks, keeping the quotes (Ansible's `split_args`).
pub fn split_args(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quote: Option<char> = None;
    let mut depth = 0usize;
    let chars: Vec<char> = text.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        if quote.is_none() && c == '{' && matches!(next, Some('{' | '%' | '#')) {
            depth += 1;
            cur.push(c);
            cur.push(next.unwrap_or('{'));
            i += 2;
            continue;
        }
        if depth > 0 && matches!(c, '}' | '%' | '#') && next == Some('}') {
            depth -= 1;
            cur.push(c);
            cur.push('}');
            i += 2;
            continue;
        }
        match quote {
            Some(q) if c == q && (i == 0 || chars[i - 1] != '\\') => quote = None,
            None if (c == '"' || c == '\'') && depth == 0 => quote = Some(c),
            None if c.is_whitespace() && depth == 0 => {
                if !cur.is_empty() {
                    out.push(std::mem::take(&mut cur));
                }
                i += 1;
                continue;
            }
            _ => {}
        }
        cur.push(c);
        i += 1;
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

impl Task {
    /// The name shown to people: the `name:` or, as Ansible does, the action.
    pub fn display_name(&self) -> String {
        if let Some(name) = &self.name {
            return name.clone();
        }
        match &self.action {
            Action::Module(call) => call.module.name().to_string(),
            Action::Block { .. } => "block".into(),
            Action::Include { file } => format!("include_tasks {file}"),
        }
    }

    /// Every string of the task that is templated when it runs, with what it is, for syntax checks.
    pub fn templated_strings(&self) -> Vec<(String, bool)> {
        fn walk(v: &Value, out: &mut Vec<(String, bool)>) {
            match v {
                Value::String(s) => out.push((s.clone(), false)),
                Value::Array(items) => items.iter().for_each(|i| walk(i, out)),
                Value::Object(map) => map.values().for_each(|i| walk(i, out)),
                _ => {}
            }
        }
        let mut out = Vec::new();
        for cond in self.when.iter().chain(&self.failed_when).chain(&self.changed_when).chain(&self.until) {
            if let Value::String(s) = cond {
                out.push((s.clone(), true));
            }
        }
        for s in [&self.name, &self.delegate_to, &self.loop_label].into_iter().flatten() {
            out.push((s.clone(), false));
        }
        for v in [
            &self.ignore_errors,
            &self.retries,
            &self.delay,
            &self.run_once,
            &self.become_,
            &self.become_user,
            &self.environment,
            &self.loop_items,
            &self.no_log,
            &self.timeout,
        ]
        .into_iter()
        .flatten()
        {
            walk(v, &mut out);
        }
        self.vars.values().for_each(|v| walk(v, &mut out));
        match &self.action {
            Action::Module(call) => {
                for (k, v) in &call.args {
                    // `assert: that` and `debug: var` hold bare expressions.
                    let bare = matches!((call.module, k.as_str()), (Module::Assert, "that") | (Module::Debug, "var"));
                    if bare {
                        match v {
                            Value::String(s) => out.push((s.clone(), true)),
                            Value::Array(items) => {
                                out.extend(items.iter().filter_map(|i| i.as_str()).map(|s| (s.to_string(), true)))
                            }
                            _ => {}
                        }
                    } else {
                        walk(v, &mut out);
                    }
                }
            }
            Action::Include { file } => out.push((file.clone(), false)),
            Action::Block { .. } => {}
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> (Vec<Task>, Vec<Error>) {
        parse_tasks(text, Path::new("hook.yml"))
    }

    #[test]
    fn free_form_commands_split_like_parse_kv() {
        let args = parse_kv("ls -l \"a b\" chdir=/tmp creates=/x foo=bar", true);
        assert_eq!(args["_raw_params"], "ls -l \"a b\" foo=bar");
        assert_eq!(args["chdir"], "/tmp");
        assert_eq!(args["creates"], "/x");
        let args = parse_kv("msg=\"hello {{ name }} there\" var=x", false);
        assert_eq!(args["msg"], "hello {{ name }} there");
        assert_eq!(args["var"], "x");
        assert_eq!(split_args("echo {{ a | default('x y') }} 'q r'"), ["echo", "{{ a | default('x y') }}", "'q r'"]);
    }

    #[test]
    fn tasks_keep_their_keys_and_lines() {
        let (tasks, errors) = parse(
            "- name: one\n  command: ls -l chdir=/tmp\n  register: out\n  when: x is defined\n  become: yes\n\n- debug: var=out\n",
        );
        assert!(errors.is_empty(), "{errors:?}");
        assert_eq!(tasks.len(), 2);
        assert_eq!(tasks[0].location.line, 1);
        assert_eq!(tasks[1].location.line, 7);
        assert_eq!(tasks[0].register.as_deref(), Some("out"));
        assert_eq!(tasks[0].become_, Some(Value::Bool(true)));
        assert_eq!(tasks[0].when, vec![Value::String("x is defined".into())]);
        let Action::Module(call) = &tasks[1].action else { panic!() };
        assert_eq!(call.module, Module::Debug);
        assert_eq!(tasks[1].display_name(), "debug");
    }

    #[test]
    fn builtin_names_blocks_and_local_action() {
        let (tasks, errors) = parse(
            "- block:\n    - ansible.builtin.shell: echo hi\n  rescue:\n    - fail: msg=oops\n  always:\n    - debug: msg=done\n- local_action: command hostname\n",
        );
        assert!(errors.is_empty(), "{errors:?}");
        let Action::Block { block, rescue, always } = &tasks[0].action else { panic!() };
        assert_eq!((block.len(), rescue.len(), always.len()), (1, 1, 1));
        assert_eq!(tasks[1].delegate_to.as_deref(), Some("localhost"));
    }

    #[test]
    fn errors_name_line_task_and_hint() {
        let (_, errors) = parse(
            "- name: first\n  comand: ls\n- name: second\n  debug: msg=x\n  shell: ls\n- name: third\n  pause:\n    seconds: many\n",
        );
        assert_eq!(errors.len(), 3, "{errors:?}");
        let texts: Vec<String> = errors.iter().map(|e| e.to_string()).collect();
        assert!(texts[0].starts_with("hook.yml:2:3: task \"first\": unknown key or module `comand`"), "{}", texts[0]);
        assert!(texts[1].contains(":5:3: task \"second\": two modules in one task"), "{}", texts[1]);
        assert!(texts[2].contains("task \"third\": `pause` argument `seconds` must be a number"), "{}", texts[2]);
        assert!(errors.iter().all(|e| e.hint.is_some()));
    }

    #[test]
    fn a_playbook_is_refused() {
        let (_, errors) = parse("- hosts: all\n  tasks:\n    - debug: msg=x\n");
        assert!(errors[0].message.contains("playbook"));
        assert!(errors[0].hint.as_deref().unwrap_or_default().contains("task list"));
    }
}
