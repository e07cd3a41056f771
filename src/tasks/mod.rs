//! Ansible task files: the model, templating, modules and the engine that runs them on a host.

pub mod connect;
pub mod engine;
pub mod facts;
pub mod host_vars;
pub mod model;
pub mod modules;
pub mod report;
pub mod role_dirs;
pub mod template;

pub use template::{Templar, Vars};

/// Hook discovery is the settings' one function (the run and `upgrade check` resolve hooks alike); reachable here
/// too, beside the task-file check it feeds.
pub use crate::settings::hook_files;

use std::path::Path;
use std::sync::Arc;

use serde_json::{Map, Value};

use crate::error::Error;
use crate::events::SharedSink;
use crate::inventory::{self, Inventory, vars_to_json};
use connect::{ConnectOptions, ConnectionPool};
use engine::{Engine, EngineOptions, HostOutcome};
use model::{Action, Task};

/// Runs `tasks` on `hosts` concurrently (at most `forks` at once), sending events to `sink`.
pub async fn run_tasks(
    inventory: &Inventory,
    extra: &inventory::Vars,
    hosts: &[String],
    tasks: &[Task],
    forks: usize,
    options: EngineOptions,
    connect: ConnectOptions,
    sink: SharedSink,
) -> Vec<(String, HostOutcome)> {
    let pool_hosts = crate::inventory::host_vars_json(inventory, extra);
    let pool = Arc::new(ConnectionPool::new(pool_hosts, connect));
    // One fact store for every host of the run: `hostvars[h]` shows what h's tasks set and registered.
    let table =
        host_vars::HostVarsTable::with_facts(inventory, extra, pool.host_vars().clone(), host_vars::FactStore::new());
    let mut engine = Engine::new(Arc::new(Templar::new()), sink, options, pool.clone());
    engine.facts = table.facts();
    let engine = Arc::new(engine);
    engine.run_once.set_order(hosts, forks.max(1));
    let permits = Arc::new(tokio::sync::Semaphore::new(forks.max(1)));
    let tasks = Arc::new(tasks.to_vec());
    let extra_json = vars_to_json(extra);
    let mut handles = Vec::new();
    for host in hosts {
        let vars = table.for_host(host, Map::new());
        let (engine, permits, tasks, extra_json, host) =
            (engine.clone(), permits.clone(), tasks.clone(), extra_json.clone(), host.clone());
        handles.push(tokio::spawn(async move {
            let _permit = permits.acquire_owned().await;
            let outcome = engine.run_host_with(&host, vars, extra_json, &tasks).await;
            (host, outcome)
        }));
    }
    let mut outcomes = Vec::new();
    for (handle, host) in handles.into_iter().zip(hosts) {
        match handle.await {
            Ok(pair) => outcomes.push(pair),
            Err(e) => outcomes.push((
                host.clone(),
                HostOutcome {
                    failed: true,
                    unreachable: false,
                    facts: Arc::new(host_vars::HostFacts::from_iter([(
                        Arc::from("error"),
                        Arc::new(Value::String(e.to_string())),
                    )])),
                },
            )),
        }
    }
    pool.close_all().await;
    outcomes
}

/// Problems found in one task file: YAML, unknown keys and modules, template syntax, missing includes.
pub fn check_task_file(path: &Path) -> Vec<Error> {
    check_task_file_with_notes(path, &[], &modules::AnsibleCore::default()).errors
}

/// Where the inventory says ansible-core is (`upgrade_ansible_command`, `upgrade_ansible_library`): the first host
/// that sets them, relative library directories against the inventory's directory.
pub fn ansible_core_of(inventory: &Inventory, extra: &inventory::Vars) -> modules::AnsibleCore {
    for host in inventory.hosts.keys() {
        let vars = vars_to_json(&inventory.host_vars(host, extra));
        if vars.get("upgrade_ansible_command").is_some() || vars.get("upgrade_ansible_library").is_some() {
            return modules::AnsibleCore::from_vars(|k| match k {
                "inventory_dir" => Some(Value::String(inventory.dir.display().to_string())),
                _ => vars.get(k).cloned(),
            });
        }
    }
    modules::AnsibleCore::default()
}

/// What checking a task file (and the files it includes) found.
#[derive(Default)]
pub struct TaskFileCheck {
    /// Problems: the file is refused.
    pub errors: Vec<Error>,
    /// Things the file does that work, but not as its author may expect (an argument Ansible removed and `upgrade`
    /// ignores): `path:line: task "x": ...`.
    pub notes: Vec<String>,
}

/// Checks a task file and every file it includes, with notes beside the errors. `roles_path`: the directories of
/// the inventory's `upgrade_roles_path`, searched for roles after those beside the file.
/// `ansible`: where modules `upgrade` does not implement are looked for (ansible-core).
pub fn check_task_file_with_notes(
    path: &Path,
    roles_path: &[std::path::PathBuf],
    ansible: &modules::AnsibleCore,
) -> TaskFileCheck {
    let mut checker = Checker {
        templar: Templar::new(),
        checked: FilesChecked::default(),
        dependencies_checked: FilesChecked::default(),
        out: TaskFileCheck::default(),
        roles_path: roles_path.to_vec(),
        ansible: ansible.clone(),
        said_how_to_get_ansible: false,
    };
    checker.file(path);
    checker.out
}

/// The files one check has entered. A file that includes itself (kubespray's drain retries by including its own file
/// from `rescue:` with a counter) or a longer include cycle is checked once: its tasks are the same each time, and
/// entering it again would recurse without end.
#[derive(Default)]
struct FilesChecked(std::collections::HashSet<std::path::PathBuf>);

impl FilesChecked {
    /// True the first time a file is seen. Paths are compared canonical, so `./self.yml` and `self.yml` are one file.
    fn first_visit(&mut self, path: &Path) -> bool {
        let key = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
        self.0.insert(key)
    }
}

struct Checker {
    templar: Templar,
    checked: FilesChecked,
    /// Role dependencies checked: each once (a dependency shared by roles, or roles depending on each other).
    dependencies_checked: FilesChecked,
    out: TaskFileCheck,
    roles_path: Vec<std::path::PathBuf>,
    ansible: modules::AnsibleCore,
    /// The hint on getting ansible-core is given once per check, not per task.
    said_how_to_get_ansible: bool,
}

impl Checker {
    /// A role a task imports or includes: found where a run finds it (beside the hook, `roles/`,
    /// `ANSIBLE_ROLES_PATH`), its tasks file and handlers checked.
    fn role(&mut self, task: &Task, role: &engine::RoleCall) {
        if role.name.contains("{{") || role.tasks_from.as_deref().is_some_and(|t| t.contains("{{")) {
            return;
        }
        let refuse = |what: String, hint: &str| {
            Error::input(format!("task \"{}\": {what}", task.display_name())).at(task.location.clone()).hint(hint)
        };
        let mut search = self.roles_path.clone();
        search.extend(role_dirs::roles_path(None));
        let Some(dir) = role_dirs::find_role(&task.location.file, &role.name, &search) else {
            self.out.errors.push(refuse(
                format!("the role '{}' was not found", role.name),
                "put it in roles/ beside the hook file or beside it, or name its parent directory in \
                 upgrade_roles_path or ANSIBLE_ROLES_PATH",
            ));
            return;
        };
        match role_dirs::role_file(&dir, "tasks", role.tasks_from.as_deref()) {
            Some(tasks) => self.file(&tasks),
            None => self.out.errors.push(refuse(
                format!(
                    "Could not find specified file in role: tasks/{} (role {})",
                    role.tasks_from.as_deref().unwrap_or("main"),
                    dir.display()
                ),
                "name a file of the role's tasks/ in tasks_from",
            )),
        }
        if let Some(handlers) = role_dirs::role_file(&dir, "handlers", None) {
            self.file(&handlers);
        }
        self.dependencies(task, &dir, &mut vec![dir.clone()]);
    }

    /// The `meta/main.yml` dependencies of the role in `dir`, recursively: their tasks and handlers checked as the
    /// run runs them. A dependency not found or in a cycle (`chain`: the roles being entered) is an error, as at
    /// run time; one named by a template is left to the run. Each role is entered once, so the check ends.
    fn dependencies(&mut self, task: &Task, dir: &Path, chain: &mut Vec<std::path::PathBuf>) {
        for dep in role_dirs::role_dependency_entries(dir) {
            let meta = dir.join("meta").display().to_string();
            let refuse = |what: String, hint: &str| {
                Error::input(format!("task \"{}\": {meta}: {what}", task.display_name()))
                    .at(task.location.clone())
                    .hint(hint)
            };
            let Some(dep_dir) = dep.dir else {
                if !dep.name.contains("{{") {
                    self.out.errors.push(refuse(
                        format!("the dependency '{}' was not found", dep.name),
                        "put the dependency beside the role or in ANSIBLE_ROLES_PATH, or remove it from meta/main.yml",
                    ));
                }
                continue;
            };
            let key = |d: &Path| std::fs::canonicalize(d).unwrap_or_else(|_| d.to_path_buf());
            if chain.iter().any(|entered| key(entered) == key(&dep_dir)) {
                self.out.errors.push(refuse(
                    format!("the dependency '{}' depends on itself", dep.name),
                    "break the cycle: a role cannot depend, directly or not, on itself",
                ));
                continue;
            }
            if !self.dependencies_checked.first_visit(&dep_dir) {
                continue;
            }
            for sub in ["tasks", "handlers"] {
                if let Some(file) = role_dirs::role_file(&dep_dir, sub, None) {
                    self.file(&file);
                }
            }
            chain.push(dep_dir.clone());
            self.dependencies(task, &dep_dir, chain);
            chain.pop();
        }
    }

    /// A module `upgrade` does not implement: a note that ansible-core runs it, or an error saying why it cannot.
    fn through_ansible_core(&mut self, task: &Task, call: &model::ModuleCall) {
        let name = call.module_name();
        match self.ansible.find_module(name, &task.location.file) {
            Ok(found) => self.out.notes.push(format!(
                "{}: task \"{}\": module `{name}` runs through ansible-core ({found}); each such task costs an \
                 ansible-playbook run",
                task.location,
                task.display_name()
            )),
            Err(why) => {
                // A module of ours given an argument only ansible-core's has, or a module we do not have.
                let what = match model::Module::from_name(name) {
                    Some(ours) => {
                        let only: Vec<String> = call
                            .args
                            .keys()
                            .filter(|k| ours.ansible_only_args().contains(&k.as_str()))
                            .map(|k| format!("`{k}`"))
                            .collect();
                        let reason = match only.is_empty() {
                            // Not for its arguments: for `check_mode: true`, which ours has no check mode for.
                            true => "in check mode".to_string(),
                            false => format!("with {}", only.join(", ")),
                        };
                        format!("`{name}` {reason} runs through ansible-core: {why}")
                    }
                    None => format!("unknown module `{name}`: {why}"),
                };
                let hint = if std::mem::replace(&mut self.said_how_to_get_ansible, true) {
                    "see the first such error for how ansible-core is found".to_string()
                } else {
                    "a module upgrade does not implement runs through ansible-core: `ansible-playbook` on PATH or \
                     beside upgrade_ansible_command, the module in a collection, ANSIBLE_LIBRARY, upgrade_ansible_library, \
                     the role's library/ or a library/ beside the task file; or fix the module's name"
                        .to_string()
                };
                self.out.errors.push(
                    Error::input(format!("task \"{}\": {what}", task.display_name()))
                        .at(task.location.clone())
                        .hint(hint),
                );
            }
        }
    }

    /// A task's `notify` names handlers of its handlers file (checked too), as Ansible requires.
    fn notified_handlers(&mut self, task: &Task) {
        let Some(file) = engine::handlers_file(&task.location.file) else {
            self.out.errors.push(
                Error::input(format!(
                    "task \"{}\": notifies `{}` but there are no handlers for this file",
                    task.display_name(),
                    task.notify[0]
                ))
                .at(task.location.clone())
                .hint("put the handlers in handlers/main.yml beside the role's tasks/ (or beside this file)"),
            );
            return;
        };
        self.file(&file);
        let Ok(text) = std::fs::read_to_string(&file) else { return };
        let (handlers, _) = model::parse_tasks(&text, &file);
        for name in &task.notify {
            if !name.contains("{{") && !handlers.iter().any(|h| engine::answers_to(h, name)) {
                self.out.errors.push(
                    Error::input(format!("task \"{}\": {}", task.display_name(), engine::handler_not_found(name)))
                        .at(task.location.clone())
                        .hint(format!("name a handler of {} (its `name` or a `listen` topic)", file.display())),
                );
            }
        }
    }

    fn file(&mut self, path: &Path) {
        if !self.checked.first_visit(path) {
            return;
        }
        let text = match std::fs::read_to_string(path) {
            Ok(t) => t,
            Err(e) => return self.out.errors.push(Error::read_file(path, e)),
        };
        let (tasks, parse_errors) = model::parse_tasks(&text, path);
        self.out.errors.extend(parse_errors);
        self.tasks(&tasks);
    }

    fn tasks(&mut self, tasks: &[Task]) {
        for task in tasks {
            for (text, bare) in task.templated_strings() {
                let templar = &self.templar;
                let checked = if bare { templar.check_condition_syntax(&text) } else { templar.check_syntax(&text) };
                if let Err(e) = checked {
                    self.out.errors.push(
                        Error::input(format!("task \"{}\": bad template `{text}`: {}", task.display_name(), e.message))
                            .at(task.location.clone())
                            .hint("fix the Jinja syntax (matching braces, filter names, quotes)"),
                    );
                }
            }
            match &task.action {
                Action::Block { block, rescue, always } => {
                    self.tasks(block);
                    self.tasks(rescue);
                    self.tasks(always);
                }
                Action::Include { file, .. } if !file.contains("{{") => {
                    let target = engine::resolve_local(&task.location.file, file, None);
                    if !target.exists() {
                        self.out.errors.push(
                            Error::input(format!(
                                "task \"{}\": included file {} does not exist",
                                task.display_name(),
                                target.display()
                            ))
                            .at(task.location.clone())
                            .hint("fix the path; relative paths resolve against the including file's directory"),
                        );
                    } else {
                        self.file(&target);
                    }
                }
                Action::Module(call) => {
                    if !task.notify.is_empty() {
                        self.notified_handlers(task);
                    }
                    if call.module == model::Module::AnsibleCore {
                        self.through_ansible_core(task, call);
                    }
                    if matches!(call.module, model::Module::ImportRole | model::Module::IncludeRole) {
                        self.role(task, &engine::RoleCall::from_args(&call.args));
                    }
                    for (module, arg, release) in model::REMOVED_ARGS {
                        if call.module == *module && call.args.contains_key(*arg) {
                            self.out.notes.push(format!(
                                "{}: task \"{}\": `{arg}` was removed from `{}` in ansible-core {release}; it is ignored",
                                task.location,
                                task.display_name(),
                                module.name()
                            ));
                        }
                    }
                }
                _ => {}
            }
        }
    }
}
