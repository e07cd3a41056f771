//! `upgrade pause` and `upgrade resume` (README "Pause from anywhere"): from any machine, mark the cluster lock
//! (phase/cluster_lock.rs) paused, naming who (user@machine) and when, or clear the mark. The run holding the lock
//! reads it at each safe point and waits there (phase/pause.rs). Declarative, as Cluster API's `spec.paused` and
//! `kubectl rollout pause`: the mark is on the cluster, not on a run, so a pause with no run in progress holds for the
//! run started next (it waits before its first master or batch), and it stays until `upgrade resume`.
//!
//! Each change is a conditional write of the lock as read, with only the pause's keys changed (the holder, its
//! renewal and its progress as they were), on its resourceVersion: a renewal made in between refuses it (Conflict),
//! and it is read and made again; the run's own writes carry the pause they read the same way. A pause never takes,
//! renews or breaks the lease.

use crate::console::outln;
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::inventory::{Inventory, Vars};
use crate::phase::cluster_lock::{self, Lease, Stamp, write_pause};
use crate::session::{Remote, Session, UpgradeRequest};
use crate::unlock::NoticesOnStderr;
use serde_json::Value;

/// `upgrade pause` (`pause: true`) or `upgrade resume` (`pause: false`) on the cluster the inventory names.
pub(crate) fn pause(
    request: &UpgradeRequest,
    inventory: Inventory,
    extra: Vars,
    remote: Remote,
    pause: bool,
) -> Result<i32> {
    let session = Session::open(request, inventory, extra, remote, Arc::new(NoticesOnStderr))?;
    let run = session.run.clone();
    let outcome = session.runtime.block_on(async {
        let name = cluster_lock::lock_name(run.as_ref());
        let failed = |why: String| {
            Error::hosts_failed(format!(
                "cannot {} the cluster lock {name} on {}: {why}",
                verb(pause),
                run.first_master
            ))
            .hint("check upgrade_kubectl and the cluster credentials on the first master; nothing was changed")
        };
        // A few rounds: each refused write means the lock changed in between (a renewal, another pause), so it is
        // read again and the change made on what it is now.
        for _ in 0..5 {
            let found = cluster_lock::read(run.as_ref(), true).await.map_err(failed)?;
            let change = match decide(found.as_ref(), pause) {
                Change::Nothing(said) => {
                    outln!("{}", said.replace("{name}", &name));
                    return Ok(0);
                }
                Change::Write(change) => change,
            };
            let out = match &found {
                Some(lease) => cluster_lock::write(run.as_ref(), &lease.resource_version, &change, true).await,
                None => cluster_lock::create(run.as_ref(), &change, true).await,
            }
            .map_err(failed)?;
            if out.rc == 0 {
                for line in done(found.as_ref(), pause, &name) {
                    outln!("{line}");
                }
                return Ok(0);
            }
            if !(out.conflict() || out.already_exists() || out.not_found()) {
                return Err(failed(out.reason()));
            }
        }
        Err(failed("it kept changing while this command wrote it (its run renewing very often?): try again".into()))
    });
    session.close();
    outcome
}

fn verb(pause: bool) -> &'static str {
    if pause { "pause" } else { "resume" }
}

/// What a pause or resume does to the lock as read.
#[derive(Debug, PartialEq)]
enum Change {
    /// Nothing to write: what to say (`{name}` stands for the lock's name).
    Nothing(String),
    /// The lock's data to write.
    Write(serde_json::Map<String, Value>),
}

fn decide(found: Option<&Lease>, pause: bool) -> Change {
    match (found.and_then(|l| l.paused.as_ref()), pause) {
        (Some(paused), true) => {
            Change::Nothing(format!("already paused by {paused}: nothing changed (`upgrade resume` lets it go on)"))
        }
        (None, false) => Change::Nothing("the cluster lock {name} is not paused: nothing to resume".to_string()),
        _ => {
            // No lock yet: a released one (no holder) that carries the pause, which a run takes over at once.
            let mut data = found
                .map(Lease::data)
                .unwrap_or_else(|| Lease { renewed_ms: Some(cluster_lock::epoch_ms()), ..Lease::default() }.data());
            let (paused, resumed) = if pause { (Some(Stamp::now()), None) } else { (None, Some(Stamp::now())) };
            write_pause(paused.as_ref(), resumed.as_ref(), &mut data);
            Change::Write(data)
        }
    }
}

/// What was done, and what the run does now.
fn done(found: Option<&Lease>, pause: bool, name: &str) -> Vec<String> {
    let run = found.filter(|l| !l.released());
    let me = cluster_lock::Stamp::now().by;
    match (pause, run) {
        (true, Some(lease)) => vec![
            format!("cluster lock {name} paused by {me}"),
            format!(
                "the run in progress ({}) finishes what is in flight and waits before its next master or batch, \
                 still holding the lock; `upgrade resume --inventory ...` lets it go on (`upgrade status` shows it)",
                lease.describe()
            ),
        ],
        (true, None) => vec![
            format!("cluster lock {name} paused by {me}"),
            "no upgrade in progress: a run started now waits before its first master or batch until `upgrade \
             resume --inventory ...`"
                .to_string(),
        ],
        (false, Some(lease)) => vec![
            format!("cluster lock {name} resumed by {me}"),
            format!("the run in progress ({}) goes on within a few seconds", lease.describe()),
        ],
        (false, None) => vec![
            format!("cluster lock {name} resumed by {me}"),
            "no upgrade in progress: the next run goes on without waiting".to_string(),
        ],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn held_by(run: &str) -> Lease {
        Lease {
            resource_version: "12".into(),
            identity: "c0ffee".into(),
            duration: Some(std::time::Duration::from_secs(900)),
            acquired: "2026-11-27T20:00:00.000000Z".into(),
            renewed_ms: Some(1_795_600_000_250),
            transitions: 3,
            holder: "ops@ci".into(),
            location: "/srv/s".into(),
            started: "2026-11-27T20:00:00Z".into(),
            run: run.into(),
            change_id: "CHG-7".into(),
            progress: r#"{"phase":"nodes"}"#.into(),
            paused: None,
            resumed: None,
        }
    }

    fn reread(data: serde_json::Map<String, Value>) -> Lease {
        Lease::parse(&serde_json::json!({"metadata": {"resourceVersion": "13"}, "data": data}).to_string()).unwrap()
    }

    #[test]
    fn a_pause_changes_only_its_own_keys_and_a_resume_clears_them() {
        let lease = held_by("r1");
        let Change::Write(data) = decide(Some(&lease), true) else { panic!("a pause writes") };
        let paused = reread(data);
        let stamp = paused.paused.clone().expect("paused");
        assert_eq!(stamp.by, cluster_lock::Stamp::now().by, "user@machine, as the holder is named");
        assert!(!stamp.at.is_empty());
        // The holder, its renewal and its progress as they were: a pause is not a renewal.
        assert_eq!(Lease { resource_version: "12".into(), paused: None, ..paused.clone() }, lease);

        assert!(matches!(decide(Some(&paused), true), Change::Nothing(s) if s.starts_with("already paused by ")));
        let Change::Write(data) = decide(Some(&paused), false) else { panic!("a resume writes") };
        let resumed = reread(data);
        assert_eq!(resumed.paused, None);
        assert_eq!(resumed.resumed.as_ref().map(|r| r.by.clone()), Some(stamp.by));
        assert!(matches!(decide(Some(&resumed), false), Change::Nothing(s) if s.contains("not paused")));
        assert!(matches!(decide(None, false), Change::Nothing(_)));
    }

    #[test]
    fn a_pause_with_no_lock_makes_a_released_one_that_a_run_takes_over_and_keeps_paused() {
        let Change::Write(data) = decide(None, true) else { panic!("a pause writes") };
        let lock = reread(data);
        assert!(lock.released(), "no holder: {lock:?}");
        assert!(lock.paused.is_some());
        let now = cluster_lock::epoch_ms();
        let ttl = std::time::Duration::from_secs(900);
        assert_eq!(
            cluster_lock::decide(Some(&lock), now, ttl, "me"),
            cluster_lock::Decision::TakeOver { stale: false },
            "free at once"
        );
    }
}
