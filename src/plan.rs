//! The plan: a pure function from inventory and settings to phases and batches. Nothing here connects.

use crate::cli::UpgradeArgs;
use crate::error::{Error, Result};

/// `upgrade --plan`: prints what an upgrade would do.
pub fn plan_command(_args: &UpgradeArgs) -> Result<i32> {
    Err(Error::internal("--plan is not implemented yet"))
}
