//! `upgrade --inventory X`: the upgrade itself.

use super::arguments::{Loaded, load, remote, upgrade_request};
use crate::cli::UpgradeArgs;
use crate::error::Result;

pub(super) fn upgrade(args: &UpgradeArgs) -> Result<i32> {
    let Loaded { inventory, extra, vault } = load(&args.inventory)?;
    let mut remote = remote(&args.run)?;
    // Hooks may read vault-encrypted files (`include_vars`) with the same passwords as the inventory.
    remote.engine.vault = vault;
    crate::executor::upgrade(&upgrade_request(args), inventory, extra, remote)
}
