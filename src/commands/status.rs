//! `upgrade status --inventory X`: the upgrade in progress on the cluster, read from its lock.

use super::arguments::{Loaded, load, remote};
use crate::cli::StatusArgs;
use crate::error::Result;
use crate::plan::PlanRequest;
use crate::session::UpgradeRequest;
use crate::settings::OutputFormat;

pub(super) fn status(args: &StatusArgs) -> Result<i32> {
    let Loaded { inventory, extra, .. } = load(&args.inventory)?;
    // An upgrade with nothing but the inventory: its plan names the first master, which reads the lock.
    let request = UpgradeRequest {
        plan: PlanRequest { limit: args.inventory.limit.clone(), ..PlanRequest::default() },
        ..UpgradeRequest::default()
    };
    let json = args.output == OutputFormat::Json;
    crate::status::status(&request, inventory, extra, remote(&args.run)?, args.watch, json)
}
