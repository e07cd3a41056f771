//! `upgrade pause --inventory X` and `upgrade resume --inventory X`: the cluster lock's pause, from any machine.

use super::arguments::{Loaded, load, remote};
use crate::cli::PauseArgs;
use crate::error::Result;
use crate::plan::PlanRequest;
use crate::session::UpgradeRequest;

pub(super) fn pause(args: &PauseArgs, pause: bool) -> Result<i32> {
    let Loaded { inventory, extra, .. } = load(&args.inventory)?;
    // An upgrade with nothing but the inventory: its plan names the first master, which writes the lock.
    let request = UpgradeRequest {
        plan: PlanRequest { limit: args.inventory.limit.clone(), ..PlanRequest::default() },
        ..UpgradeRequest::default()
    };
    crate::pause::pause(&request, inventory, extra, remote(&args.run)?, pause)
}
