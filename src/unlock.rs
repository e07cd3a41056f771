//! `upgrade unlock --inventory X`: releases the cluster-wide lock (phase/cluster_lock.rs) that a dead run left, after
//! showing who held it and how long ago it was renewed, and asking (`--yes` answers for scripts; without a terminal
//! and without --yes it refuses). A lock renewed within its lease may belong to a live run: refused unless `--force`.

use crate::console::{errln, outln};
use std::io::{BufRead, IsTerminal, Write};
use std::sync::Arc;
use std::time::Duration;

use crate::error::{Error, Result};
use crate::events::{Event, EventSink};
use crate::inventory::{Inventory, Vars};
use crate::phase::cluster_lock;
use crate::session::{Remote, Session, UpgradeRequest};

/// Says notices and failed steps on stderr: unlock and status have no progress to show.
pub(crate) struct NoticesOnStderr;

impl EventSink for NoticesOnStderr {
    fn event(&self, event: &Event) {
        match event {
            Event::Notice { message, .. } => errln!("{message}"),
            Event::StepFinished { host, step, ok: false, error: Some(e), .. } => {
                errln!("[{host}] {step} failed: {e}")
            }
            _ => {}
        }
    }
}

/// Releases the cluster lock after showing its holder and confirming (`remote.engine.assume_yes` confirms). `request`
/// is an upgrade with nothing but the inventory's `--limit`: its plan finds the first master and the connections.
/// The release is a conditional write (the lease marked free), so a renewal made meanwhile wins and nothing is lost.
pub(crate) fn unlock(
    request: &UpgradeRequest,
    inventory: Inventory,
    extra: Vars,
    remote: Remote,
    force: bool,
) -> Result<i32> {
    let assume_yes = remote.engine.assume_yes;
    let session = Session::open(request, inventory, extra, remote, Arc::new(NoticesOnStderr))?;
    let run = session.run.clone();
    let outcome = session.runtime.block_on(async {
        let cannot = |why: String| {
            Error::hosts_failed(format!("cannot read the cluster lock on {}: {why}", run.first_master))
                .hint("check upgrade_kubectl and the cluster credentials on the first master")
        };
        let name = cluster_lock::lock_name(run.as_ref());
        let ttl = cluster_lock::ttl(run.as_ref())?;
        let Some(lease) = cluster_lock::read(run.as_ref(), true).await.map_err(cannot)? else {
            outln!("no cluster lock is held: nothing to release");
            return Ok(0);
        };
        if lease.released() {
            outln!("no run holds the cluster lock {name} (last held by {}): nothing to release", lease.describe());
            return Ok(0);
        }
        outln!("the cluster lock {name} is held by {}", lease.describe());
        let now = cluster_lock::epoch_ms();
        if lease.live(now, ttl) {
            let ago = lease.renewed_ago(now).map_or_else(|| "at a time that cannot be read".into(), |d| secs_ago(d));
            let lease_secs = lease.duration.unwrap_or(ttl).as_secs();
            if !force {
                return Err(Error::input(format!(
                    "the cluster lock {name} was renewed {ago}, within its {lease_secs}s lease: its run may be alive"
                ))
                .hint(format!(
                    "wait for that run to end, or for the lock to go stale ({lease_secs}s after its last renewal: a \
                     run started then takes it over); `--force` releases it now, at the risk described there"
                )));
            }
            errln!(
                "warning: --force: if that run is alive it keeps driving the cluster until its next renewal (within \
                 {}s) finds the lock gone and stops it; a run started before then drives the cluster alongside it \
                 (nodes drained or upgraded twice at once)",
                (lease_secs / 5).max(1)
            );
        }
        if !assume_yes && !confirm()? {
            outln!("left in place");
            return Ok(1);
        }
        let released = cluster_lock::force_release(run.as_ref(), &lease).await.map_err(cannot)?;
        if released.rc != 0 {
            return Err(cannot(released.reason()));
        }
        outln!("cluster lock {name} released");
        Ok(0)
    });
    session.close();
    outcome
}

fn secs_ago(d: Duration) -> String {
    format!("{}s ago", d.as_secs())
}

/// "release it? [y/N]" on a terminal; without one the operator must say --yes.
fn confirm() -> Result<bool> {
    if !std::io::stdin().is_terminal() {
        return Err(Error::input("upgrade unlock asks before releasing the lock, and stdin is not a terminal")
            .hint("make sure the holder is no longer running, then pass --yes"));
    }
    print!("release it? Make sure that run is no longer running. [y/N] ");
    let _ = std::io::stdout().flush();
    let mut answer = String::new();
    let _ = std::io::stdin().lock().read_line(&mut answer);
    Ok(matches!(answer.trim(), "y" | "Y" | "yes" | "YES" | "Yes"))
}
