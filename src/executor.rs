//! Carries out a plan: phases, batches, host steps and hooks. It never prints; it sends events.

use crate::cli::UpgradeArgs;
use crate::error::{Error, Result};

/// `upgrade --inventory X`: the upgrade itself.
pub fn upgrade_command(_args: &UpgradeArgs) -> Result<i32> {
    Err(Error::internal("the upgrade is not implemented yet"))
}
