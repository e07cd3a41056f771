//! The task-file model: a YAML task list read into `Task` values that remember their file and line.
//!
//! Only the Ansible subset docs/DESIGN.md lists is accepted; anything else (an unknown key or module, two modules in one
//! task, an argument of the wrong type) is an input error naming the file, line, column and task. The types are here,
//! the reader in `parse`; the model is the bottom of `tasks` and imports neither `modules` nor `engine`.

mod check_mode;
mod parse;

use serde_json::{Map, Value};

use crate::error::Location;
pub use check_mode::CheckMode;
pub use parse::{TaskFileCache, load_task_file, parse_kv, parse_tasks};

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
    /// `loop:` or `with_items:` (the latter flattened one level when run, as Ansible does), or the terms of a
    /// `with_LOOKUP:` loop.
    pub loop_items: Option<Value>,
    pub loop_flatten: bool,
    /// `with_fileglob`, `with_first_found`: the lookup (`fileglob`, `first_found`) whose answer for the rendered terms
    /// is the list looped over, as Ansible's `with_LOOKUP` is `loop: "{{ query('LOOKUP', *terms) }}"`.
    pub loop_lookup: Option<String>,
    pub loop_var: Option<String>,
    pub loop_label: Option<String>,
    /// `loop_control.index_var`: the name the item's 0-based position goes by.
    pub index_var: Option<String>,
    pub no_log: Option<Value>,
    /// `timeout:` seconds for one run of the module (Ansible's task keyword); 0 or unset: no limit.
    pub timeout: Option<Value>,
    /// `notify:`: the handlers (by name or `listen` topic) this task runs when it reports changed.
    pub notify: Vec<String>,
    /// `listen:` (a handler's): the topics it also answers to.
    pub listen: Vec<String>,
    /// `async:` seconds the module may run as a job, and `poll:` seconds between looks at it (0: do not wait).
    pub async_: Option<Value>,
    pub poll: Option<Value>,
    /// `throttle:` how many hosts may run the task at once (0 or unset: no limit); a block's applies to its tasks.
    pub throttle: Option<Value>,
    /// `check_mode:` true runs the task in check mode (see [`CheckMode`]), false as always; a block's applies to its
    /// tasks.
    pub check_mode: Option<Value>,
}

/// An empty task: no keywords, and an empty block for its action until one is set.
impl Default for Task {
    fn default() -> Self {
        Task {
            name: None,
            location: Location::file(""),
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
            loop_lookup: None,
            loop_var: None,
            loop_label: None,
            index_var: None,
            no_log: None,
            timeout: None,
            notify: Vec::new(),
            listen: Vec::new(),
            async_: None,
            poll: None,
            throttle: None,
            check_mode: None,
        }
    }
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
        /// Written as `import_tasks` (static in Ansible): messages name it so.
        import: bool,
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
    File,
    Service,
    Systemd,
    SystemdService,
    /// `meta`: run by the engine itself (flush_handlers, end_host, end_play, noop), never on a host.
    Meta,
    /// `import_role` / `include_role`: run by the engine, which reads the role's tasks and variables.
    ImportRole,
    IncludeRole,
    Uri,
    AsyncStatus,
    Lineinfile,
    Slurp,
    IncludeVars,
    Blockinfile,
    GetUrl,
    /// `package`: the host's package manager's module (`apt`, `dnf`), picked per host as Ansible's action does.
    Package,
    Apt,
    /// `yum` is `dnf` in ansible-core 2.19 (a redirect).
    Yum,
    Dnf,
    /// A module `upgrade` does not implement, run through ansible-core itself; its name is the argument
    /// [`ANSIBLE_CORE_MODULE_ARG`]. Not in [`Module::ALL`]: no name parses to it.
    AnsibleCore,
}

/// The argument that carries the module's name in a task run through ansible-core (`_ansible_` names are reserved by
/// Ansible, so no module argument is called this).
pub const ANSIBLE_CORE_MODULE_ARG: &str = "_ansible_upgrade_module";

impl ModuleCall {
    /// The module as the task names it (`oc_obj` for a task run through ansible-core).
    pub fn module_name(&self) -> &str {
        match self.module {
            Module::AnsibleCore => {
                self.args.get(ANSIBLE_CORE_MODULE_ARG).and_then(Value::as_str).unwrap_or("ansible-core")
            }
            m => m.name(),
        }
    }
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
    pub const ALL: [Module; 33] = [
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
        Module::File,
        Module::Service,
        Module::Systemd,
        Module::SystemdService,
        Module::Meta,
        Module::ImportRole,
        Module::IncludeRole,
        Module::Uri,
        Module::AsyncStatus,
        Module::Lineinfile,
        Module::Slurp,
        Module::IncludeVars,
        Module::Blockinfile,
        Module::GetUrl,
        Module::Package,
        Module::Apt,
        Module::Yum,
        Module::Dnf,
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
            Module::File => "file",
            Module::Service => "service",
            Module::Systemd => "systemd",
            Module::SystemdService => "systemd_service",
            Module::Meta => "meta",
            Module::ImportRole => "import_role",
            Module::IncludeRole => "include_role",
            Module::Uri => "uri",
            Module::AsyncStatus => "async_status",
            Module::Lineinfile => "lineinfile",
            Module::Slurp => "slurp",
            Module::IncludeVars => "include_vars",
            Module::Blockinfile => "blockinfile",
            Module::GetUrl => "get_url",
            Module::Package => "package",
            Module::Apt => "apt",
            Module::Yum => "yum",
            Module::Dnf => "dnf",
            Module::AnsibleCore => "ansible-core",
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

    /// Whether the module takes an argument of that name (any, for set_fact).
    pub fn accepts(self, arg: &str) -> bool {
        self.args().is_none_or(|spec| spec.iter().any(|(n, _)| *n == arg))
    }

    /// Arguments ansible-core's module has that upgrade's does not run: a task that gives one is run through
    /// ansible-core (and refused by the check, saying so, where ansible-core is not found).
    pub fn ansible_only_args(self) -> &'static [&'static str] {
        match self {
            Module::Apt => APT_ANSIBLE_ONLY,
            Module::Dnf | Module::Yum => DNF_ANSIBLE_ONLY,
            Module::Copy => &["remote_src", "directory_mode", "local_follow", "validate", "checksum", "unsafe_writes"],
            _ => &[],
        }
    }

    /// The arguments a module accepts; `None` accepts any name (set_fact).
    fn args(self) -> Option<&'static [(&'static str, ArgKind)]> {
        use ArgKind::*;
        const ROLE: &[(&str, ArgKind)] = &[
            ("name", Str),
            ("tasks_from", Str),
            ("vars_from", Str),
            ("defaults_from", Str),
            ("handlers_from", Str),
            ("allow_duplicates", Bool),
            ("public", Bool),
            ("rolespec_validate", Bool),
            ("apply", Any),
        ];
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
            // Removed in ansible-core 2.14 but still in old files: accepted and ignored, with a note from `check`.
            ("warn", Any),
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
                ("backup", Bool),
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
            Module::SetFact | Module::AnsibleCore => return None,
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
            Module::Meta => &[("_raw_params", Str)],
            Module::AsyncStatus => &[("jid", Str), ("mode", Str)],
            Module::Slurp => &[("src", Str), ("path", Str)],
            Module::GetUrl => &[
                ("url", Str),
                ("dest", Str),
                ("checksum", Str),
                ("force", Bool),
                ("backup", Bool),
                ("timeout", Int),
                ("headers", Any),
                ("validate_certs", Bool),
                ("url_username", Str),
                ("url_password", Str),
                ("username", Str),
                ("password", Str),
                ("force_basic_auth", Bool),
                ("mode", Any),
                ("owner", Str),
                ("group", Str),
            ],
            Module::Blockinfile => &[
                ("path", Str),
                ("dest", Str),
                ("destfile", Str),
                ("name", Str),
                ("block", Str),
                ("content", Str),
                ("marker", Str),
                ("marker_begin", Str),
                ("marker_end", Str),
                ("state", Str),
                ("insertafter", Str),
                ("insertbefore", Str),
                ("create", Bool),
                ("backup", Bool),
                ("validate", Str),
                ("mode", Any),
                ("owner", Str),
                ("group", Str),
                ("unsafe_writes", Bool),
            ],
            Module::IncludeVars => &[("_raw_params", Str), ("file", Str), ("name", Str)],
            Module::Lineinfile => &[
                ("path", Str),
                ("dest", Str),
                ("destfile", Str),
                ("name", Str),
                ("regexp", Str),
                ("regex", Str),
                ("search_string", Str),
                ("state", Str),
                ("line", Str),
                ("value", Str),
                ("backrefs", Bool),
                ("insertafter", Str),
                ("insertbefore", Str),
                ("create", Bool),
                ("backup", Bool),
                ("firstmatch", Bool),
                ("validate", Str),
                ("mode", Any),
                ("owner", Str),
                ("group", Str),
                ("unsafe_writes", Bool),
            ],
            Module::Uri => &[
                ("url", Str),
                ("method", Str),
                ("body", Any),
                ("body_format", Str),
                ("status_code", Any),
                ("return_content", Bool),
                ("validate_certs", Bool),
                ("headers", Any),
                ("timeout", Int),
                ("follow_redirects", Str),
                ("url_username", Str),
                ("url_password", Str),
                ("user", Str),
                ("password", Str),
                ("force_basic_auth", Bool),
                ("ca_path", Str),
                ("client_cert", Str),
                ("client_key", Str),
            ],
            // `apply` (the last) is include_role's only: keywords for every task of the role (an include's own
            // keywords are the include's).
            Module::ImportRole => &ROLE[..ROLE.len() - 1],
            Module::IncludeRole => ROLE,
            Module::Service => &[
                ("name", Str),
                ("state", Str),
                ("enabled", Bool),
                // SysV init's arguments: on a systemd host Ansible drops them with a warning, and so do we.
                ("sleep", Int),
                ("pattern", Str),
                ("runlevel", Str),
                ("arguments", Str),
                ("args", Str),
                ("use", Str),
            ],
            Module::Systemd | Module::SystemdService => &[
                ("name", Str),
                ("service", Str),
                ("unit", Str),
                ("state", Str),
                ("enabled", Bool),
                ("force", Bool),
                ("masked", Bool),
                ("daemon_reload", Bool),
                ("daemon-reload", Bool),
                ("daemon_reexec", Bool),
                ("daemon-reexec", Bool),
                ("scope", Str),
                ("no_block", Bool),
            ],
            Module::Apt => APT_ARGS,
            Module::Dnf | Module::Yum => DNF_ARGS,
            // Ansible's `package` hands every argument but `use` to the host's module, which checks them there.
            Module::Package => PACKAGE_ARGS,
            Module::File => &[
                ("path", Str),
                ("dest", Str),
                ("name", Str),
                ("state", Str),
                ("mode", Any),
                ("owner", Str),
                ("group", Str),
                ("recurse", Bool),
                ("src", Str),
                ("force", Bool),
                ("follow", Bool),
            ],
        })
    }
}

const APT_ARGS: &[(&str, ArgKind)] = &[
    ("name", ArgKind::StrOrList),
    ("pkg", ArgKind::StrOrList),
    ("package", ArgKind::StrOrList),
    ("state", ArgKind::Str),
    ("update_cache", ArgKind::Bool),
    ("update-cache", ArgKind::Bool),
    ("cache_valid_time", ArgKind::Int),
    ("update_cache_retries", ArgKind::Int),
    ("update_cache_retry_max_delay", ArgKind::Int),
    ("allow_downgrade", ArgKind::Bool),
    ("allow-downgrade", ArgKind::Bool),
    ("allow_downgrades", ArgKind::Bool),
    ("allow-downgrades", ArgKind::Bool),
    ("allow_change_held_packages", ArgKind::Bool),
    ("install_recommends", ArgKind::Bool),
    ("install-recommends", ArgKind::Bool),
    ("default_release", ArgKind::Str),
    ("default-release", ArgKind::Str),
    ("purge", ArgKind::Bool),
    ("autoremove", ArgKind::Bool),
    ("only_upgrade", ArgKind::Bool),
    ("force", ArgKind::Bool),
    ("lock_timeout", ArgKind::Int),
];
const APT_ANSIBLE_ONLY: &[&str] = &[
    "deb",
    "upgrade",
    "dpkg_options",
    "autoclean",
    "fail_on_autoremove",
    "policy_rc_d",
    "force_apt_get",
    "clean",
    "allow_unauthenticated",
    "allow-unauthenticated",
    "auto_install_module_deps",
];
const DNF_ARGS: &[(&str, ArgKind)] = &[
    ("name", ArgKind::StrOrList),
    ("pkg", ArgKind::StrOrList),
    ("state", ArgKind::Str),
    ("update_cache", ArgKind::Bool),
    ("expire-cache", ArgKind::Bool),
    ("allow_downgrade", ArgKind::Bool),
    ("disable_excludes", ArgKind::Str),
    ("enablerepo", ArgKind::StrOrList),
    ("disablerepo", ArgKind::StrOrList),
];
const DNF_ANSIBLE_ONLY: &[&str] = &[
    "list",
    "conf_file",
    "disable_gpg_check",
    "installroot",
    "releasever",
    "autoremove",
    "exclude",
    "skip_broken",
    "update_only",
    "security",
    "bugfix",
    "enable_plugin",
    "disable_plugin",
    "download_only",
    "lock_timeout",
    "install_weak_deps",
    "download_dir",
    "allowerasing",
    "nobest",
    "best",
    "cacheonly",
    "sslverify",
    "validate_certs",
    "use_backend",
    "install_repoquery",
];
/// `package`'s own (`name`, `state`, `use`) and those of the modules it hands over to.
const PACKAGE_ARGS: &[(&str, ArgKind)] = &[
    ("name", ArgKind::StrOrList),
    ("state", ArgKind::Str),
    ("use", ArgKind::Str),
    ("pkg", ArgKind::StrOrList),
    ("package", ArgKind::StrOrList),
    ("update_cache", ArgKind::Bool),
    ("update-cache", ArgKind::Bool),
    ("cache_valid_time", ArgKind::Int),
    ("allow_downgrade", ArgKind::Bool),
    ("allow_change_held_packages", ArgKind::Bool),
    ("install_recommends", ArgKind::Bool),
    ("default_release", ArgKind::Str),
    ("purge", ArgKind::Bool),
    ("autoremove", ArgKind::Bool),
    ("only_upgrade", ArgKind::Bool),
    ("force", ArgKind::Bool),
    ("lock_timeout", ArgKind::Int),
    ("disable_excludes", ArgKind::Str),
    ("enablerepo", ArgKind::StrOrList),
    ("disablerepo", ArgKind::StrOrList),
];

/// Arguments Ansible removed from a module that old task files still carry: accepted, ignored, and named by
/// `upgrade check` (module, argument, the ansible-core release that removed it).
pub const REMOVED_ARGS: &[(Module, &str, &str)] = &[(Module::Command, "warn", "2.14"), (Module::Shell, "warn", "2.14")];

impl Task {
    /// The name shown to people: the `name:` or, as Ansible does, the action.
    pub fn display_name(&self) -> String {
        if let Some(name) = &self.name {
            return name.clone();
        }
        match &self.action {
            Action::Module(call) => call.module_name().to_string(),
            Action::Block { .. } => "block".into(),
            Action::Include { file, import } => {
                format!("{} {file}", if *import { "import_tasks" } else { "include_tasks" })
            }
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
            &self.async_,
            &self.poll,
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
            Action::Include { file, .. } => out.push((file.clone(), false)),
            Action::Block { .. } => {}
        }
        out
    }
}
