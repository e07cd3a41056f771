//! `upgrade --inventory X`: the upgrade itself.

use super::arguments::{Loaded, load, remote, upgrade_request};
use crate::cli::UpgradeArgs;
use crate::error::Result;

pub(super) fn upgrade(args: &UpgradeArgs) -> Result<i32> {
    let Loaded { inventory, extra } = load(&args.inventory)?;
    crate::executor::upgrade(&upgrade_request(args), inventory, extra, remote(&args.run)?)
}
