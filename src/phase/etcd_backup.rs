//! etcd backup: a verified snapshot on every etcd host before anything else moves. It is a gate: one host without a
//! verified backup stops the run.

use std::time::Instant;

use serde_json::Value;

use super::run::UpgradeRun;
use crate::journal::JournalEntry;
use crate::time_format::utc_timestamp;
use crate::vocabulary::{HostOutcome, HostReport, Phase, Step};

/// Whether every etcd host has a verified backup of this target from an earlier run.
pub(crate) fn done_earlier(run: &UpgradeRun) -> bool {
    !run.plan.etcd_hosts.is_empty() && run.plan.etcd_hosts.iter().all(|h| backed_up_earlier(run, h))
}

/// Backs up every etcd host at once. Returns the reports, and whether the gate is open.
pub(crate) async fn run(run: &UpgradeRun) -> (Vec<HostReport>, bool) {
    let hosts = run.plan.etcd_hosts.clone();
    if done_earlier(run) {
        // The snapshot that matters is the one from before the upgrade started: an interrupted run already took it.
        let skipped = hosts.iter().map(|h| {
            let reason = format!("a verified backup was taken by an earlier run for {}", run.target);
            run.host_completed(Phase::EtcdBackup, h, HostOutcome::Skipped { reason }, Instant::now())
        });
        return (super::fan_out(run.forks(), skipped).await, true);
    }
    let backups = hosts.iter().map(|host| backup(run, host));
    let mut reports = super::fan_out(run.forks(), backups).await;
    let mut open = reports.iter().all(|r| !r.outcome.is_failure());
    if open {
        // The configuration of every host the run touches, beside its snapshot (same timestamp).
        let configs = run.plan.hosts.iter().map(|host| config_backup(run, host));
        let configs = super::fan_out(run.forks(), configs).await;
        open = configs.iter().all(|r| !r.outcome.is_failure());
        reports.extend(configs);
    }
    (reports, open)
}

/// The pseudo-phase of the configuration backups in events, journal and JUnit.
const CONFIG_BACKUP: Phase = Phase::ConfigBackup;

/// Copies the host's configuration files beside the snapshot (config_backup.yml) and lists them in the journal.
async fn config_backup(run: &UpgradeRun, host: &str) -> HostReport {
    let started = Instant::now();
    if !run.host_started(CONFIG_BACKUP, host, false).await {
        let outcome = HostOutcome::NotStarted { reason: run.stop_reason() };
        return run.host_completed(CONFIG_BACKUP, host, outcome, started).await;
    }
    let file = run.playbook("config_backup.yml");
    let outcome = match run.run_step(CONFIG_BACKUP, host, Step::ConfigBackup, &file, &[], None).await {
        Ok(facts) => {
            let stdout = facts
                .get("upgrade_config_backup")
                .and_then(|r| r.get("stdout"))
                .and_then(Value::as_str)
                .unwrap_or_default();
            let mut files: Vec<String> =
                stdout.lines().filter_map(|l| l.trim().strip_prefix("saved ")).map(str::to_string).collect();
            let dir = facts.get("upgrade_config_backup_path").and_then(|v| v.as_str()).unwrap_or_default().trim();
            let dir = dir.strip_suffix("/config").unwrap_or(dir).to_string();
            let kubeadm = facts.get("upgrade_kubeadm_config").and_then(|r| r.get("rc")).and_then(Value::as_i64);
            if kubeadm == Some(0) {
                files.push("kubeadm-config.json".into());
            }
            let said = if files.is_empty() {
                "configuration backup: none of the configuration files exists on this host, nothing to save".into()
            } else {
                format!("configuration saved in {dir}/config: {}", files.join(", "))
            };
            run.notice(Some(host), said);
            let _ = run.record(JournalEntry::Backup {
                run: run.run_id(),
                time: utc_timestamp(std::time::SystemTime::now()),
                host: host.into(),
                timestamp: run.run_timestamp.clone(),
                dir,
                snapshot: None,
                files,
            });
            HostOutcome::Upgraded { left_cordoned: false }
        }
        Err(f) => {
            HostOutcome::Failed { step: f.step, reason: f.reason, unreachable: f.unreachable, left_cordoned: false }
        }
    };
    run.host_completed(CONFIG_BACKUP, host, outcome, started).await
}

/// The journal says this host's backup succeeded in an earlier run with the same target.
fn backed_up_earlier(run: &UpgradeRun, host: &str) -> bool {
    use crate::journal::HostRecord;
    let backed_up = [HostRecord::Upgraded, HostRecord::Skipped];
    run.history.finished_for(Phase::EtcdBackup, host, &run.target.to_string(), &backed_up)
}

async fn backup(run: &UpgradeRun, host: &str) -> HostReport {
    let started = Instant::now();
    if !run.host_started(Phase::EtcdBackup, host, false).await {
        let outcome = HostOutcome::NotStarted { reason: run.stop_reason() };
        return run.host_completed(Phase::EtcdBackup, host, outcome, started).await;
    }
    let outcome =
        match run.run_step(Phase::EtcdBackup, host, Step::Backup, &run.playbook("etcd_backup.yml"), &[], None).await {
            Ok(facts) => {
                let path = facts.get("upgrade_etcd_snapshot").and_then(|v| v.as_str()).unwrap_or("?").to_string();
                let status = facts.get("upgrade_etcd_snapshot_status");
                let keys = status.and_then(|s| s.get("totalKey")).map(|v| v.to_string()).unwrap_or_else(|| "?".into());
                let size = status.and_then(|s| s.get("totalSize")).map(|v| v.to_string()).unwrap_or_else(|| "?".into());
                run.notice(Some(host), format!("etcd snapshot verified: {path} ({keys} keys, {size} bytes)"));
                let _ = run.record(JournalEntry::Backup {
                    run: run.run_id(),
                    time: utc_timestamp(std::time::SystemTime::now()),
                    host: host.into(),
                    timestamp: run.run_timestamp.clone(),
                    dir: path.strip_suffix("/snapshot.db").unwrap_or(&path).to_string(),
                    snapshot: Some(path.clone()),
                    files: Vec::new(),
                });
                HostOutcome::Upgraded { left_cordoned: false }
            }
            Err(f) => {
                HostOutcome::Failed { step: f.step, reason: f.reason, unreachable: f.unreachable, left_cordoned: false }
            }
        };
    run.host_completed(Phase::EtcdBackup, host, outcome, started).await
}
