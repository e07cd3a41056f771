//! `upgrade run-tasks FILE`: runs one task file on inventory hosts (for hook authors), and prints a recap.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::{Map, Value};

use super::arguments::{Loaded, load, remote};
use crate::cli::RunTasksArgs;
use crate::error::{Error, Result};
use crate::events::SharedSink;
use crate::inventory::vars_to_json;
use crate::session::Remote;
use crate::tasks::{model, report, run_tasks as run_on_hosts};

pub(super) fn run_tasks(args: &RunTasksArgs) -> Result<i32> {
    let Loaded { inventory, extra, vault } = load(&args.inventory)?;
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
    let Remote { runtime, connect, mut engine } = remote(&args.run)?;
    engine.vault = vault;
    let reporter = Arc::new(report::TextReporter::new(args.run.verbose, Box::new(std::io::stdout()), &hosts));
    let host_vars: HashMap<String, Map<String, Value>> =
        hosts.iter().map(|h| (h.clone(), vars_to_json(&inventory.host_vars(h, &extra)))).collect();
    let redactor = Arc::new(crate::redact::Redactor::from_hosts(&host_vars));
    let sink: SharedSink = Arc::new(crate::redact::sink::Redacting { redactor, inner: reporter.clone() });
    let outcomes =
        runtime.block_on(run_on_hosts(&inventory, &extra, &hosts, &tasks, args.forks, engine, connect, sink));
    reporter.print_recap();
    let bad = outcomes.iter().any(|(_, o)| o.failed || o.unreachable);
    Ok(if bad { 1 } else { 0 })
}
