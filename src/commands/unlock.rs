//! `upgrade unlock --inventory X`: removes the cluster lock a dead run left behind.

use super::arguments::{Loaded, load, remote};
use crate::cli::UnlockArgs;
use crate::error::Result;
use crate::plan::PlanRequest;
use crate::session::UpgradeRequest;

pub(super) fn unlock(args: &UnlockArgs) -> Result<i32> {
    let Loaded { inventory, extra, .. } = load(&args.inventory)?;
    // An upgrade with nothing but the inventory: its plan names the first master, which reads the lock.
    let request = UpgradeRequest {
        plan: PlanRequest { limit: args.inventory.limit.clone(), ..PlanRequest::default() },
        ..UpgradeRequest::default()
    };
    crate::unlock::unlock(&request, inventory, extra, remote(&args.run)?, args.force)
}
