//! etcd backup: a verified snapshot on every etcd host before anything else moves. It is a gate: one host without a
//! verified backup stops the run.

use std::time::Instant;

use serde_json::Value;

use super::run::UpgradeRun;
use super::{HostOutcome, HostReport, Step};
use crate::plan::Phase;

/// Whether every etcd host has a verified backup of this target from an earlier run.
pub fn done_earlier(run: &UpgradeRun) -> bool {
    !run.plan.etcd_hosts.is_empty() && run.plan.etcd_hosts.iter().all(|h| backed_up_earlier(run, h))
}

/// Backs up every etcd host at once. Returns the reports, and whether the gate is open.
pub async fn run(run: &UpgradeRun) -> (Vec<HostReport>, bool) {
    let hosts = run.plan.etcd_hosts.clone();
    if done_earlier(run) {
        // The snapshot that matters is the one from before the upgrade started: an interrupted run already took it.
        let reports = hosts
            .iter()
            .map(|h| {
                let reason = format!("a verified backup was taken by an earlier run for {}", run.target);
                run.host_completed(Phase::EtcdBackup, h, HostOutcome::Skipped { reason }, Instant::now())
            })
            .collect();
        return (reports, true);
    }
    let backups = hosts.iter().map(|host| backup(run, host));
    let reports = super::join_all(backups).await;
    let open = reports.iter().all(|r| !r.outcome.is_failure());
    (reports, open)
}

/// The journal says this host's backup succeeded in an earlier run with the same target.
fn backed_up_earlier(run: &UpgradeRun, host: &str) -> bool {
    use crate::journal::HostRecord;
    run.history.host(Phase::EtcdBackup.name(), host).is_some_and(|h| {
        !h.in_flight
            && matches!(h.finished, Some(HostRecord::Upgraded | HostRecord::Skipped))
            && h.target.as_deref() == Some(run.target.to_string().as_str())
    })
}

async fn backup(run: &UpgradeRun, host: &str) -> HostReport {
    let started = Instant::now();
    if !run.host_started(Phase::EtcdBackup, host, false) {
        let outcome = HostOutcome::NotStarted { reason: run.stop_reason() };
        return run.host_completed(Phase::EtcdBackup, host, outcome, started);
    }
    let outcome =
        match run.run_step(Phase::EtcdBackup, host, Step::Backup, &run.playbook("etcd_backup.yml"), &[], None).await {
            Ok(facts) => {
                let path = facts.get("upgrade_etcd_snapshot").and_then(Value::as_str).unwrap_or("?").to_string();
                let status = facts.get("upgrade_etcd_snapshot_status");
                let keys = status.and_then(|s| s.get("totalKey")).map(|v| v.to_string()).unwrap_or_else(|| "?".into());
                let size = status.and_then(|s| s.get("totalSize")).map(|v| v.to_string()).unwrap_or_else(|| "?".into());
                run.notice(Some(host), format!("etcd snapshot verified: {path} ({keys} keys, {size} bytes)"));
                HostOutcome::Upgraded { left_cordoned: false }
            }
            Err(f) => {
                HostOutcome::Failed { step: f.step, reason: f.reason, unreachable: f.unreachable, left_cordoned: false }
            }
        };
    run.host_completed(Phase::EtcdBackup, host, outcome, started)
}
