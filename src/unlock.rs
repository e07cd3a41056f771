//! `upgrade unlock --inventory X`: removes the cluster-wide lock (phase/cluster_lock.rs) that a dead run left, after
//! showing who held it and asking (`--yes` answers for scripts; without a terminal and without --yes it refuses).

use std::io::{BufRead, IsTerminal, Write};
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::events::{Event, EventSink};
use crate::inventory::{Inventory, Vars};
use crate::phase::cluster_lock::{self, Holder};
use crate::session::{Remote, Session, UpgradeRequest};

/// Says notices and failed steps on stderr: unlock has no progress to show.
struct NoticesOnStderr;

impl EventSink for NoticesOnStderr {
    fn event(&self, event: &Event) {
        match event {
            Event::Notice { message, .. } => eprintln!("{message}"),
            Event::StepFinished { host, step, ok: false, error: Some(e), .. } => {
                eprintln!("[{host}] {step} failed: {e}")
            }
            _ => {}
        }
    }
}

/// Removes the cluster lock after showing its holder and confirming (`remote.engine.assume_yes` confirms). `request`
/// is an upgrade with nothing but the inventory's `--limit`: its plan finds the first master and the connections.
pub(crate) fn unlock(request: &UpgradeRequest, inventory: Inventory, extra: Vars, remote: Remote) -> Result<i32> {
    let assume_yes = remote.engine.assume_yes;
    let session = Session::open(request, inventory, extra, remote, Arc::new(NoticesOnStderr))?;
    let run = session.run.clone();
    let me = Holder::this_run(&run.run_id(), "");
    let outcome = session.runtime.block_on(async {
        let cannot = |why: String| {
            Error::hosts_failed(format!("cannot read the cluster lock on {}: {why}", run.first_master))
                .hint("check upgrade_kubectl and the cluster credentials on the first master")
        };
        let read = cluster_lock::call(&run, "read", &me, true).await.map_err(cannot)?;
        if read.rc != 0 {
            if read.stderr.contains("NotFound") || read.stderr.contains("not found") {
                println!("no cluster lock is held: nothing to remove");
                return Ok(0);
            }
            return Err(cannot(read.stderr.trim().to_string()));
        }
        let holder = Holder::parse(&read.stdout).unwrap_or_default();
        println!("the cluster lock is held by {}", holder.describe());
        if !assume_yes && !confirm()? {
            println!("left in place");
            return Ok(1);
        }
        let removed = cluster_lock::call(&run, "release", &me, true).await.map_err(cannot)?;
        if removed.rc != 0 {
            return Err(cannot(removed.stderr.trim().to_string()));
        }
        println!("cluster lock removed");
        Ok(0)
    });
    session.close();
    outcome
}

/// "remove it? [y/N]" on a terminal; without one the operator must say --yes.
fn confirm() -> Result<bool> {
    if !std::io::stdin().is_terminal() {
        return Err(Error::input("upgrade unlock asks before removing the lock, and stdin is not a terminal")
            .hint("make sure the holder is no longer running, then pass --yes"));
    }
    print!("remove it? Make sure that run is no longer running. [y/N] ");
    let _ = std::io::stdout().flush();
    let mut answer = String::new();
    let _ = std::io::stdin().lock().read_line(&mut answer);
    Ok(matches!(answer.trim(), "y" | "Y" | "yes" | "YES" | "Yes"))
}
