//! Checking a module's arguments as the task file is read: unknown arguments, wrong types, and the arguments each
//! module cannot do without, every mistake an input error at the task.

use serde_json::{Map, Value};

use super::{BLOCK_KEYS, Parser};
use crate::tasks::model::{ArgKind, Module};
use crate::yaml::Node;

/// The `meta` actions the engine runs.
const META_ACTIONS: &[&str] = &["flush_handlers", "end_host", "end_play", "noop"];

impl Parser {
    pub(super) fn check_args(&mut self, module: Module, args: &Map<String, Value>, node: &Node, label: &str) {
        let Some(spec) = module.args() else { return };
        for (name, value) in args {
            let Some((_, kind)) = spec.iter().find(|(n, _)| n == name) else {
                let names: Vec<&str> = spec.iter().map(|(n, _)| *n).filter(|n| *n != "_raw_params").collect();
                if module.ansible_only_args().contains(&name.as_str()) {
                    continue;
                }
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
                                .is_some_and(|s| crate::ansible_compat::boolean(&Value::String(s.into())).is_some())
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
            Module::Meta => {
                let action = args.get("_raw_params").and_then(Value::as_str).unwrap_or_default().trim();
                if !META_ACTIONS.contains(&action) {
                    self.error(
                        node,
                        label,
                        format!("`meta: {action}` is not supported"),
                        format!("supported: meta: {}", META_ACTIONS.join(", ")),
                    );
                }
                None
            }
            Module::ImportRole | Module::IncludeRole if !has("name") => Some("`name` (the role)"),
            Module::IncludeRole => {
                self.check_apply(args.get("apply"), node, label);
                None
            }
            Module::Uri if !has("url") => Some("`url`"),
            Module::AsyncStatus if !has("jid") => Some("`jid`"),
            Module::Slurp if !has("src") && !has("path") => Some("`src`"),
            Module::IncludeVars if !has("file") && !has("_raw_params") => Some("a file"),
            Module::Blockinfile if !["path", "dest", "destfile", "name"].iter().any(|k| has(k)) => Some("`path`"),
            Module::GetUrl if !has("url") || !has("dest") => Some("`url` and `dest`"),
            Module::Lineinfile if !["path", "dest", "destfile", "name"].iter().any(|k| has(k)) => Some("`path`"),
            Module::Service if !has("name") => Some("`name`"),
            Module::Service | Module::Systemd | Module::SystemdService => {
                let state = args.get("state").and_then(Value::as_str).unwrap_or("started");
                const STATES: &[&str] = &["reloaded", "restarted", "started", "stopped"];
                if !state.contains("{{") && !STATES.contains(&state) {
                    self.error(
                        node,
                        label,
                        format!(
                            "`{}` argument `state` must be one of {}, found `{state}`",
                            module.name(),
                            STATES.join(", ")
                        ),
                        "write `state: restarted`",
                    );
                }
                None
            }
            Module::File if !has("path") && !has("dest") && !has("name") => Some("`path`"),
            Module::File => {
                let state = args.get("state").and_then(Value::as_str).unwrap_or("file");
                const STATES: &[&str] = &["absent", "directory", "file", "link", "touch"];
                if !state.contains("{{") && !STATES.contains(&state) {
                    self.error(
                        node,
                        label,
                        format!("`file` argument `state` must be one of {}, found `{state}`", STATES.join(", ")),
                        "write `state: directory`",
                    );
                }
                None
            }
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

    /// `include_role`'s `apply`: a mapping of the keywords a block takes, which each task of the role gets.
    fn check_apply(&mut self, apply: Option<&Value>, node: &Node, label: &str) {
        let keys: Vec<&str> =
            BLOCK_KEYS.iter().copied().filter(|k| !["name", "block", "rescue", "always"].contains(k)).collect();
        match apply {
            None => {}
            Some(Value::Object(map)) => {
                for key in map.keys().filter(|k| !keys.contains(&k.as_str())) {
                    self.error(
                        node,
                        label,
                        format!("`apply` cannot give the role's tasks `{key}`"),
                        format!("`apply` takes {}", keys.join(", ")),
                    );
                }
            }
            Some(other) => self.error(
                node,
                label,
                format!("`apply` must be a mapping of task keywords, found {other}"),
                "write `apply: {become: true, tags: [x]}`",
            ),
        }
    }
}
