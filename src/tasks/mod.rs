//! Ansible task files: the model, templating, modules and the engine that runs them on a host.

pub mod connect;
pub mod engine;
pub mod host_vars;
pub mod model;
pub mod modules;
pub mod report;
pub mod template;

pub use template::{Templar, Vars};

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{Map, Value};

use crate::cli::{CheckArgs, RunTasksArgs};
use crate::error::{Error, Result};
use crate::events::SharedSink;
use crate::inventory::{self, Inventory, parse_extra_vars, vars_to_json};
use connect::{ConnectOptions, ConnectionPool};
use engine::{Engine, EngineOptions, HostOutcome};
use model::{Action, Task};

/// The inventory variables that name hook files: ours and openshift-ansible's.
pub const HOOK_VARIABLES: &[&str] = &[
    "upgrade_master_pre_hook",
    "upgrade_master_mid_hook",
    "upgrade_master_post_hook",
    "upgrade_node_pre_drain_hook",
    "upgrade_node_pre_hook",
    "upgrade_node_mid_hook",
    "upgrade_node_post_hook",
    "upgrade_cluster_pre_hook",
    "upgrade_cluster_mid_hook",
    "upgrade_cluster_post_hook",
    "openshift_master_upgrade_pre_hook",
    "openshift_master_upgrade_hook",
    "openshift_master_upgrade_post_hook",
    "openshift_node_upgrade_pre_drain_hook",
    "openshift_node_upgrade_pre_hook",
    "openshift_node_upgrade_hook",
    "openshift_node_upgrade_post_hook",
    "upgrade_node_surge_add_hook",
    "upgrade_node_surge_remove_hook",
];

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
    let table = host_vars::HostVarsTable::new(inventory, extra);
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
                    facts: Map::from_iter([("error".into(), Value::String(e.to_string()))]),
                },
            )),
        }
    }
    pool.close_all().await;
    outcomes
}

fn load_inventory(path: Option<&PathBuf>) -> Result<Inventory> {
    let path = path.ok_or_else(|| Error::input("--inventory is required").hint("give --inventory PATH"))?;
    Inventory::load(path)
}

/// Asks `pause` prompts on the terminal; `None` when there is none (then `pause` with a prompt needs `--yes`).
pub fn terminal_prompter() -> Option<engine::Prompter> {
    if !std::io::stdin().is_terminal() {
        return None;
    }
    Some(Arc::new(|question: &str| {
        eprint!("{question}: ");
        let mut line = String::new();
        match std::io::stdin().read_line(&mut line) {
            Ok(0) | Err(_) => None,
            Ok(_) => Some(line.trim_end_matches(['\r', '\n']).to_string()),
        }
    }))
}

/// `upgrade run-tasks FILE`: runs one task file on inventory hosts.
pub fn run_tasks_command(args: &RunTasksArgs) -> Result<i32> {
    let inventory = load_inventory(args.inventory.inventory.as_ref())?;
    let extra = parse_extra_vars(&args.inventory.extra_vars, &std::env::current_dir().unwrap_or_default())?;
    // `--limit` restricts a play on `hosts: all`, as ansible-playbook -l does: the hosts keep the inventory order.
    let hosts = inventory.limit(args.inventory.limit.as_deref().unwrap_or("all"))?;
    if hosts.is_empty() {
        return Err(Error::input("no hosts selected").hint("check --limit against the inventory"));
    }
    // A password login the run could not use is refused before any host is touched.
    for host in &hosts {
        crate::builtin_vars::check_no_ssh_password(host, &inventory.host_vars(host, &extra))?;
    }
    let tasks = model::load_task_file(&args.file)?;
    let prompter = terminal_prompter();
    let options = EngineOptions {
        assume_yes: args.run.yes,
        verbosity: args.run.verbose,
        command_timeout: None,
        prompter,
        whole_stdout: false,
    };
    let connect = ConnectOptions {
        connect_timeout: std::time::Duration::from_secs(args.run.connect_timeout),
        accept_new_host_keys: args.run.accept_new_host_keys,
        command_timeout: None,
    };
    let reporter = Arc::new(report::TextReporter::new(args.run.verbose, Box::new(std::io::stdout()), &hosts));
    let runtime = crate::tasks::async_runtime()?;
    let host_vars: std::collections::HashMap<String, serde_json::Map<String, Value>> =
        hosts.iter().map(|h| (h.clone(), vars_to_json(&inventory.host_vars(h, &extra)))).collect();
    let redactor = Arc::new(crate::redact::Redactor::from_hosts(&host_vars));
    let sink: SharedSink = Arc::new(crate::redact::Redacting { redactor, inner: reporter.clone() });
    let outcomes = runtime.block_on(run_tasks(&inventory, &extra, &hosts, &tasks, args.forks, options, connect, sink));
    reporter.print_recap();
    let bad = outcomes.iter().any(|(_, o)| o.failed || o.unreachable);
    Ok(if bad { 1 } else { 0 })
}

/// Problems found in one task file: YAML, unknown keys and modules, template syntax, missing includes.
pub fn check_task_file(path: &Path) -> Vec<Error> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) => return vec![Error::read_file(path, e)],
    };
    let (tasks, mut errors) = model::parse_tasks(&text, path);
    let templar = Templar::new();
    check_tasks(&tasks, &templar, &mut errors);
    errors
}

fn check_tasks(tasks: &[Task], templar: &Templar, errors: &mut Vec<Error>) {
    for task in tasks {
        for (text, bare) in task.templated_strings() {
            let checked = if bare { templar.check_condition_syntax(&text) } else { templar.check_syntax(&text) };
            if let Err(e) = checked {
                errors.push(
                    Error::input(format!("task \"{}\": bad template `{text}`: {}", task.display_name(), e.message))
                        .at(task.location.clone())
                        .hint("fix the Jinja syntax (matching braces, filter names, quotes)"),
                );
            }
        }
        match &task.action {
            Action::Block { block, rescue, always } => {
                check_tasks(block, templar, errors);
                check_tasks(rescue, templar, errors);
                check_tasks(always, templar, errors);
            }
            Action::Include { file } if !file.contains("{{") => {
                let target = engine::resolve_local(&task.location.file, file, None);
                if !target.exists() {
                    errors.push(
                        Error::input(format!(
                            "task \"{}\": included file {} does not exist",
                            task.display_name(),
                            target.display()
                        ))
                        .at(task.location.clone())
                        .hint("fix the path; relative paths resolve against the including file's directory"),
                    );
                } else {
                    let nested = check_task_file(&target);
                    errors.extend(nested);
                }
            }
            _ => {}
        }
    }
}

/// The hook files the inventory's hosts name, resolved against the inventory's directory, without duplicates.
pub fn hook_files(inventory: &Inventory, extra: &inventory::Vars) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = Vec::new();
    for host in inventory.hosts.keys() {
        let vars = inventory.host_vars(host, extra);
        for name in HOOK_VARIABLES {
            if let Some(Value::String(file)) = vars.get(*name).map(|v| &v.value) {
                if file.trim().is_empty() {
                    continue;
                }
                let path = Path::new(file);
                let path = if path.is_absolute() { path.to_path_buf() } else { inventory.dir.join(path) };
                if !files.contains(&path) {
                    files.push(path);
                }
            }
        }
    }
    files
}

/// Checks the built-in step files compiled into this binary; returns how many problems they have.
fn check_builtin_playbooks() -> usize {
    let Ok(dir) = tempfile::tempdir() else { return 0 };
    let Ok(dir) = crate::playbooks::materialize(dir.path()) else { return 0 };
    let mut problems = 0;
    for name in crate::playbooks::names() {
        // defaults.yml holds the playbooks' default variables, not tasks.
        if name == "defaults.yml" {
            continue;
        }
        let errors = check_task_file(&dir.join(name));
        if errors.is_empty() {
            println!("ok: built-in playbooks/{name}");
        }
        for e in &errors {
            eprintln!("error: built-in playbooks/{name}: {e}");
        }
        problems += errors.len();
    }
    problems
}

/// The settings of an upgrade with this inventory and these extra vars, as a run would read them.
fn check_settings(args: &CheckArgs, inventory: &Inventory, extra: &inventory::Vars) -> Result<()> {
    let mut argv: Vec<std::ffi::OsString> = vec!["upgrade".into(), "--inventory".into()];
    argv.push(inventory.path.clone().into_os_string());
    for e in &args.inventory.extra_vars {
        argv.push("-e".into());
        argv.push(e.into());
    }
    if let Some(limit) = &args.inventory.limit {
        argv.push("--limit".into());
        argv.push(limit.into());
    }
    let cli = <crate::cli::Cli as clap::Parser>::try_parse_from(argv)
        .map_err(|e| Error::input(format!("cannot read the arguments: {e}")))?;
    crate::plan::Plan::build_for_run(inventory, extra, &cli.upgrade).map(|_| ())
}

/// `upgrade check`: validates inventory, settings and task files without connecting.
pub fn check_command(args: &CheckArgs) -> Result<i32> {
    let mut problems = 0usize;
    let mut files: Vec<PathBuf> = Vec::new();
    match load_inventory(args.inventory.inventory.as_ref()) {
        Ok(inventory) => {
            let extra = parse_extra_vars(&args.inventory.extra_vars, &std::env::current_dir().unwrap_or_default());
            match extra {
                Ok(extra) => {
                    println!("ok: {}", inventory.path.display());
                    match check_settings(args, &inventory, &extra) {
                        Ok(()) => println!("ok: settings and plan"),
                        Err(e) => {
                            eprintln!("error: {e}");
                            problems += 1;
                        }
                    }
                    files.extend(hook_files(&inventory, &extra));
                }
                Err(e) => {
                    eprintln!("error: {e}");
                    problems += 1;
                }
            }
        }
        Err(e) => {
            eprintln!("error: {e}");
            problems += 1;
        }
    }
    problems += check_builtin_playbooks();
    for f in &args.files {
        if !files.contains(f) {
            files.push(f.clone());
        }
    }
    for file in &files {
        let errors = check_task_file(file);
        if errors.is_empty() {
            println!("ok: {}", file.display());
        } else {
            problems += errors.len();
            for e in errors {
                eprintln!("error: {e}");
            }
        }
    }
    Ok(if problems > 0 { 2 } else { 0 })
}

/// The async runtime every command that talks to hosts runs on.
pub fn async_runtime() -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| Error::internal(format!("cannot start the async runtime: {e}")))
}
