//! Ansible task files: the model, templating, modules and the engine that runs them on a host.

pub mod connect;
pub mod engine;
pub mod facts;
pub mod host_vars;
pub mod model;
pub mod modules;
pub mod report;
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
