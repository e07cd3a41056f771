//! etcd backup: a verified snapshot on every etcd host before anything else moves. It is a gate: one host without a
//! verified backup stops the run.

use std::time::Instant;

use serde_json::Value;

use super::run::UpgradeRun;
use super::{HostOutcome, HostReport, Step};
use crate::plan::Phase;

/// Backs up every etcd host at once. Returns the reports, and whether the gate is open.
pub async fn run(run: &UpgradeRun) -> (Vec<HostReport>, bool) {
    let hosts: Vec<String> = run.plan.phase(Phase::EtcdBackup).map(|p| p.batches.concat()).unwrap_or_default();
    let backups = hosts.iter().map(|host| backup(run, host));
    let reports = super::join_all(backups).await;
    let open = reports.iter().all(|r| !r.outcome.is_failure());
    (reports, open)
}

async fn backup(run: &UpgradeRun, host: &str) -> HostReport {
    let started = Instant::now();
    run.host_started(Phase::EtcdBackup, host);
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
