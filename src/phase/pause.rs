//! Pause from anywhere (README "Pause from anywhere"), as Cluster API's `spec.paused` and `kubectl rollout pause`:
//! `upgrade pause` on any machine marks the cluster lock paused; the run reads the lock at each safe point (before a
//! master's or a batch's first cordon, where the maintenance window and the validation stop it too), after what was
//! in flight has finished, and waits there, still renewing its lock (cluster_lock.rs), until `upgrade resume` clears
//! the mark or `upgrade_pause_timeout` passes: then it stops at that safe point with nothing cordoned, resumable by
//! re-running once resumed.

use std::time::{Duration, Instant};

use super::cluster_lock::{self, Held, Stamp};
use super::run::UpgradeRun;
use crate::events::Event;
use crate::settings::{PAUSE_TIMEOUT, pause_timeout};
use crate::vocabulary::StopReason;

/// How often a paused run reads the lock again.
const POLL: Duration = Duration::from_secs(2);

/// Before the first cordon of a master or batch (`what`): waits while the cluster's upgrades are paused; why the run
/// must stop here, if it must (the pause outlasted `upgrade_pause_timeout`). A stop asked for meanwhile (a signal,
/// the lock lost) ends the wait: the caller sees it.
pub(crate) async fn before(run: &UpgradeRun, what: &str) -> Option<StopReason> {
    let held = run.held_cluster_lock()?;
    // A lock that cannot be read says nothing of a pause: the run does not start what comes next until it can.
    let mut paused = match cluster_lock::read_pause(run).await {
        Ok((None, _)) => return None,
        Ok((Some(stamp), _)) => Some(stamp),
        Err(why) => {
            run.notice(None, unreadable(&held, what, &why));
            None
        }
    };
    let limit =
        match pause_timeout(&run.render_for(&run.first_master, &format!("{{{{ {PAUSE_TIMEOUT} | default('') }}}}"))) {
            Ok(limit) => limit,
            Err(e) => return Some(StopReason::Preflight { message: e.message.clone(), exit_code: e.code() }),
        };
    let waiting = Instant::now();
    let mut said = false;
    let resumed_by;
    loop {
        if let (Some(stamp), false) = (&paused, said) {
            said = true;
            let (by, at) = (stamp.by.clone(), stamp.at.clone());
            run.event(Event::Paused { by, at, before: what.to_string(), timeout: limit });
            // `upgrade status` on any machine sees the run waiting now, not at the next renewal.
            run.write_progress().await;
        }
        if run.stop.is_stopping() {
            return None;
        }
        if let Some(limit) = limit.filter(|limit| waiting.elapsed() >= *limit) {
            return Some(StopReason::PauseTimeout { reason: timed_out(paused.as_ref(), what, limit) });
        }
        tokio::time::sleep(POLL).await;
        match cluster_lock::read_pause(run).await {
            Ok((None, resumed)) => {
                resumed_by = resumed.map(|r| r.by);
                break;
            }
            Ok((Some(stamp), _)) => paused = Some(stamp),
            Err(why) if paused.is_none() => run.notice(None, unreadable(&held, what, &why)),
            // Paused, then unreadable a moment: still paused as far as anyone knows.
            Err(_) => {}
        }
    }
    let waited = waiting.elapsed();
    run.pace.exclude(waited);
    if said {
        run.event(Event::Resumed { by: resumed_by, before: what.to_string(), waited });
    }
    None
}

fn unreadable(held: &Held, what: &str, why: &str) -> String {
    format!(
        "cannot read the cluster lock {} for a pause before {what}: {why}; {what} waits until it can be read \
         (retried every {}s)",
        held.name,
        POLL.as_secs()
    )
}

fn timed_out(paused: Option<&Stamp>, what: &str, limit: Duration) -> String {
    let limit = crate::time_format::short_duration(limit);
    match paused {
        Some(stamp) => {
            format!("paused by {stamp} (upgrade pause) for longer than {PAUSE_TIMEOUT} {limit} before {what}")
        }
        None => format!("the cluster lock could not be read for a pause for {PAUSE_TIMEOUT} {limit} before {what}"),
    }
}
