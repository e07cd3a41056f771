//! `upgrade restore`: the recovery path. Puts the configuration files of a backup (taken beside the etcd snapshot
//! by an upgrade, listed in the journal) back on a host or group and, with `--etcd`, restores etcd from the
//! snapshot the documented way: `etcdctl snapshot restore` into a new data directory, stop etcd, move the new
//! directory into place (the old one kept beside it), start etcd. The plan is printed first; without `--yes`
//! nothing is changed.

use std::path::PathBuf;
use std::sync::Arc;

use serde_json::{Map, Value};

use crate::error::{Error, Result};
use crate::events::SharedSink;
use crate::inventory::{Inventory, Origin, Var, Vars};
use crate::journal::{DEFAULT_STATE_DIR, HostBackup, read_backups};
use crate::session::Remote;
use crate::tasks::engine::EngineOptions;
use crate::tasks::{Templar, host_vars::HostVarsTable, report::TextReporter, run_tasks};

/// What `upgrade restore` is asked to do.
#[derive(Debug, Clone, Default)]
pub(crate) struct RestoreRequest {
    /// `--limit`: the hosts to restore (required).
    pub limit: Option<String>,
    /// The backup's timestamp; `None`: the latest with a verified etcd snapshot.
    pub backup: Option<String>,
    /// Also restore etcd from the backup's snapshot.
    pub etcd: bool,
    /// Where the journals that list the backups live; `None`: `.upgrade-state` next to the inventory.
    pub state_dir: Option<PathBuf>,
}

/// What restore does on one host.
struct HostRestore {
    host: String,
    backup: HostBackup,
    /// Restore etcd here (`--etcd` and the host has the backup's snapshot).
    etcd: bool,
    /// The host's etcd data directory and the stop/start commands, rendered for the plan.
    data_dir: String,
    stop: String,
    start: String,
}

/// Prints the restore plan, then (with `--yes`, `remote.engine.assume_yes`) carries it out one host at a time.
pub(crate) fn restore(request: &RestoreRequest, inventory: Inventory, extra: Vars, remote: Remote) -> Result<i32> {
    let Remote { runtime, connect, engine } = remote;
    let pattern = request.limit.as_deref().ok_or_else(|| {
        Error::input("restore needs the hosts to restore").hint("pass --limit HOST or --limit GROUP (e.g. masters)")
    })?;
    let hosts = inventory.limit(pattern)?;
    if hosts.is_empty() {
        return Err(Error::input(format!("--limit `{pattern}` selects no host")).hint("name inventory hosts or groups"));
    }
    let state_dir = request.state_dir.clone().unwrap_or_else(|| inventory.dir.join(DEFAULT_STATE_DIR));
    let backups = read_backups(&state_dir)?;
    let timestamp = match &request.backup {
        Some(t) => t.clone(),
        None => backups.iter().rev().find(|b| b.snapshot.is_some()).map(|b| b.timestamp.clone()).ok_or_else(|| {
            Error::input(format!("the journals in {} record no verified etcd backup", state_dir.display()))
                .hint("pass --backup TIMESTAMP, or --state-dir where the upgrade kept its journal")
        })?,
    };
    let known: Vec<&str> = {
        let mut t: Vec<&str> = backups.iter().map(|b| b.timestamp.as_str()).collect();
        t.dedup();
        t
    };
    if !known.contains(&timestamp.as_str()) {
        return Err(Error::input(format!("no backup {timestamp} is recorded in {}", state_dir.display())).hint(
            format!("the recorded backups are: {}", if known.is_empty() { "none".into() } else { known.join(", ") }),
        ));
    }

    let table = HostVarsTable::new(&inventory, &extra);
    let templar = Templar::new();
    let render = |host: &str, template: &str| -> String {
        let vars = table.for_host(host, Map::new());
        templar.render_str(template, &vars).unwrap_or_else(|_| template.to_string()).trim().to_string()
    };
    let mut plan: Vec<HostRestore> = Vec::new();
    for host in &hosts {
        let Some(backup) = backups.iter().find(|b| b.host == *host && b.timestamp == timestamp) else { continue };
        plan.push(HostRestore {
            host: host.clone(),
            etcd: request.etcd && backup.snapshot.is_some(),
            backup: backup.clone(),
            data_dir: render(host, "{{ upgrade_etcd_data_dir | default('/var/lib/etcd') }}"),
            stop: render(host, "{{ upgrade_etcd_stop_command | default('systemctl stop etcd') }}"),
            start: render(host, "{{ upgrade_etcd_start_command | default('systemctl start etcd') }}"),
        });
    }
    if plan.is_empty() {
        return Err(Error::input(format!("backup {timestamp} holds nothing for {}", hosts.join(", ")))
            .hint("choose the hosts the backup was taken on (--limit), or another --backup"));
    }
    if request.etcd && !plan.iter().any(|p| p.etcd) {
        return Err(Error::input(format!("--etcd: backup {timestamp} has no etcd snapshot on {}", hosts.join(", ")))
            .hint("select the etcd hosts (--limit etcd)"));
    }

    print!("{}", plan_text(&timestamp, &plan));
    let without: Vec<&str> = hosts.iter().filter(|h| !plan.iter().any(|p| p.host == **h)).map(String::as_str).collect();
    if !without.is_empty() {
        println!("  not touched (backup {timestamp} holds nothing for them): {}", without.join(", "));
    }
    if !engine.assume_yes {
        return Err(Error::input("restore not carried out: nothing was changed")
            .hint("read the plan above, then run the same command with --yes"));
    }

    // An upgrade running from the same state directory would be moving the hosts this puts back: the restore waits
    // for no one, it refuses (exit 2, naming the holder) before touching anything, as a second upgrade does.
    let _lock = crate::journal::RunLock::acquire(&state_dir)?;
    let playbooks = crate::playbooks::materialize(&state_dir.join("playbooks"))?;
    // The flavour's own defaults (openshift: the /etc/etcd certificates) apply, as in an upgrade.
    let host_vars: Vec<(String, crate::inventory::Vars)> = names_for_flavor(&plan)
        .into_iter()
        .map(|h| {
            let v = inventory.host_vars(&h, &extra);
            (h, v)
        })
        .collect();
    let refs: Vec<(&str, &crate::inventory::Vars)> = host_vars.iter().map(|(h, v)| (h.as_str(), v)).collect();
    let flavor = crate::flavor::choose(&inventory, &refs)?.flavor;
    let file = playbooks.join(crate::playbooks::for_flavor(flavor, "restore.yml"));
    let tasks = crate::tasks::model::load_task_file(&file)?;
    let names: Vec<String> = plan.iter().map(|p| p.host.clone()).collect();
    let reporter = Arc::new(TextReporter::new(engine.verbosity, Box::new(std::io::stdout()), &names));
    let mut failed = false;
    // One host at a time: a restore is rare and each step should be read as it happens.
    for item in &plan {
        let mut vars = extra.clone();
        let mut set = |name: &str, value: Value| {
            vars.insert(name.into(), Var { value, origin: Origin::ExtraVars("restore".into()) });
        };
        set("upgrade_restore_dir", Value::String(item.backup.dir.clone()));
        set("upgrade_restore_timestamp", Value::String(timestamp.clone()));
        let files = item.backup.files.iter().filter(|f| f.starts_with('/')).cloned().map(Value::String).collect();
        set("upgrade_restore_files", Value::Array(files));
        set("upgrade_restore_etcd", Value::Bool(item.etcd));
        set("upgrade_restore_snapshot", Value::String(item.backup.snapshot.clone().unwrap_or_default()));
        set("upgrade_target_version", Value::String("v0.0.0".into()));
        let options = EngineOptions { assume_yes: true, ..engine.clone() };
        let sink: SharedSink = reporter.clone();
        let host = [item.host.clone()];
        let outcomes = runtime.block_on(run_tasks(&inventory, &vars, &host, &tasks, 1, options, connect.clone(), sink));
        if outcomes.iter().any(|(_, o)| o.failed || o.unreachable) {
            failed = true;
            break;
        }
    }
    reporter.print_recap();
    if failed {
        println!("restore stopped at the failed host: the hosts after it were not touched");
    }
    Ok(if failed { 1 } else { 0 })
}

fn names_for_flavor(plan: &[HostRestore]) -> Vec<String> {
    plan.iter().map(|p| p.host.clone()).collect()
}

/// The plan, exactly as it will be carried out.
fn plan_text(timestamp: &str, plan: &[HostRestore]) -> String {
    let mut out = format!("Restore plan: backup {timestamp}\n");
    for item in plan {
        let dir = &item.backup.dir;
        out.push_str(&format!("  {}:\n", item.host));
        for file in item.backup.files.iter().filter(|f| f.starts_with('/')) {
            out.push_str(&format!("    copy back {dir}/config{file} -> {file} (the current one kept as {file}.before-restore-{timestamp})\n"));
        }
        if item.backup.files.iter().any(|f| f == "kubeadm-config.json") {
            out.push_str(&format!(
                "    kubeadm-config ConfigMap: not applied; it is in {dir}/config/kubeadm-config.json (kubectl replace -f)\n"
            ));
        }
        if item.etcd {
            let (data, snapshot) = (&item.data_dir, item.backup.snapshot.as_deref().unwrap_or_default());
            out.push_str(&format!(
                "    etcd: etcdctl snapshot restore {snapshot} --data-dir {data}.restore-{timestamp}\n"
            ));
            out.push_str(&format!("    etcd: stop etcd: {}\n", item.stop));
            out.push_str(&format!(
                "    etcd: mv {data} {data}.before-restore-{timestamp}; mv {data}.restore-{timestamp} {data}\n"
            ));
            out.push_str(&format!("    etcd: start etcd: {}\n", item.start));
            out.push_str("    etcd: wait until `etcdctl endpoint health` answers\n");
        }
    }
    out
}
