//! `upgrade status --inventory X`: the upgrade in progress on the cluster, from any machine. It reads the cluster-wide
//! lock (phase/cluster_lock.rs) on the first master: who holds it, since when, its last renewal, and the progress
//! record its run writes at each phase and batch (phase/lock_progress.rs), and a pause (`upgrade pause`: who, when,
//! and where the run waits). Nothing in progress: it says so, with the
//! last run's result when its release recorded one. Changes nothing.

use crate::console::outln;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use crate::error::{Error, Result};
use crate::inventory::{Inventory, Vars};
use crate::phase::cluster_lock::{self, Lease, Stamp};
use crate::phase::lock_progress::ProgressRecord;
use crate::session::{Remote, Session, UpgradeRequest};
use crate::unlock::NoticesOnStderr;

/// How often `--watch` reads the lock again.
const WATCH_EVERY: Duration = Duration::from_secs(3);

/// What status found, ready to print.
struct Found {
    name: String,
    lease: Option<Lease>,
    ttl: Duration,
}

impl Found {
    fn in_progress(&self) -> bool {
        self.lease.as_ref().is_some_and(|l| !l.released())
    }

    fn progress(&self) -> Option<ProgressRecord> {
        self.lease.as_ref().and_then(|l| ProgressRecord::parse(&l.progress))
    }

    fn stale(&self) -> bool {
        self.lease.as_ref().is_some_and(|l| !l.live(cluster_lock::epoch_ms(), self.ttl))
    }

    /// What changed for `--watch`: the holder, its run, its progress and the pause (a renewal alone is no change).
    fn key(&self) -> (bool, String, String, bool, Option<Stamp>) {
        let lease = self.lease.clone().unwrap_or_default();
        let progress = self.progress().map(|p| ProgressRecord { updated: String::new(), ..p });
        (self.in_progress(), lease.run, format!("{progress:?}"), self.stale(), lease.paused)
    }

    /// The pause's line: who paused, when, and what it does to the run in progress or the next one.
    fn pause_line(&self) -> Option<String> {
        let lease = self.lease.as_ref()?;
        let paused = lease.paused.as_ref()?;
        let waiting = self.progress().and_then(|p| p.paused_before).filter(|_| self.in_progress());
        let what = match waiting {
            Some(before) => format!("the run waits before {before}"),
            None if self.in_progress() => "the run waits at its next master or batch".to_string(),
            None => "a run started now waits before its first master or batch".to_string(),
        };
        Some(format!("  PAUSED by {paused} (upgrade pause): {what} until `upgrade resume --inventory ...`"))
    }

    fn text(&self) -> Vec<String> {
        let Some(lease) = &self.lease else {
            return vec![format!("no upgrade in progress: the cluster has no lock {} (no run recorded)", self.name)];
        };
        let progress = self.progress();
        if lease.released() {
            let mut lines = vec![format!("no upgrade in progress (the cluster lock {} is free)", self.name)];
            // A lock made by `upgrade pause` alone names no run.
            if !lease.run.is_empty() {
                let result = progress.as_ref().and_then(|p| p.result.clone()).unwrap_or_else(|| "not recorded".into());
                lines.push(format!("last run: {}: {result}", lease.describe()));
                if let Some(p) = &progress {
                    lines.push(format!("  ended in {} at {}", p.describe(), p.updated));
                }
            }
            lines.extend(self.pause_line());
            return lines;
        }
        let mut lines = vec![format!("upgrade in progress (cluster lock {})", self.name)];
        lines.push(format!("  run: {}", lease.describe()));
        match &progress {
            Some(p) => lines.push(format!("  now: {} (as of {})", p.describe(), p.updated)),
            None => lines.push("  now: preflight (no progress recorded yet)".to_string()),
        }
        lines.extend(self.pause_line());
        if self.stale() {
            lines.push(
                "  warning: not renewed within its lease: its run is probably dead; a new run takes the lock over \
                 (or `upgrade unlock --inventory ...` releases it)"
                    .to_string(),
            );
        }
        lines
    }

    fn json(&self) -> Value {
        let lease = self.lease.clone().unwrap_or_default();
        let renewed = lease.renewed_ago(cluster_lock::epoch_ms()).map(|d| d.as_secs());
        json!({
            "lock": self.name,
            "in_progress": self.in_progress(),
            "stale": self.in_progress() && self.stale(),
            "holder": lease.holder,
            "where": lease.location,
            "run": lease.run,
            "controller": lease.identity,
            "started": lease.started,
            "change_id": lease.change_id,
            "renewed_seconds_ago": renewed,
            "lease_seconds": lease.duration.map(|d| d.as_secs()),
            "progress": self.progress(),
            "paused": lease.paused.as_ref().map(|p| json!({"by": p.by, "at": p.at})),
            "resumed": lease.resumed.as_ref().map(|r| json!({"by": r.by, "at": r.at})),
        })
    }
}

/// Reads the lock and prints what it says; with `watch`, again every few seconds, each change, until no run holds it.
pub(crate) fn status(
    request: &UpgradeRequest,
    inventory: Inventory,
    extra: Vars,
    remote: Remote,
    watch: bool,
    json: bool,
) -> Result<i32> {
    let session = Session::open(request, inventory, extra, remote, Arc::new(NoticesOnStderr))?;
    let run = session.run.clone();
    let outcome = session.runtime.block_on(async {
        let name = cluster_lock::lock_name(run.as_ref());
        let ttl = cluster_lock::ttl(run.as_ref())?;
        let mut last_key = None;
        loop {
            let lease = cluster_lock::read(run.as_ref(), true).await.map_err(|why| {
                Error::hosts_failed(format!("cannot read the cluster lock {name} on {}: {why}", run.first_master))
                    .hint("check upgrade_kubectl and the cluster credentials on the first master")
            })?;
            let found = Found { name: name.clone(), lease, ttl };
            let key = found.key();
            if last_key.as_ref() != Some(&key) {
                if json {
                    outln!("{}", found.json());
                } else {
                    for line in found.text() {
                        outln!("{line}");
                    }
                }
                last_key = Some(key);
            }
            if !watch || !found.in_progress() {
                return Ok(0);
            }
            tokio::time::sleep(WATCH_EVERY).await;
        }
    });
    session.close();
    outcome
}
