//! `upgrade restore`: puts a backup taken by an upgrade back on the selected hosts.

use super::arguments::{Loaded, load, remote};
use crate::cli::RestoreArgs;
use crate::error::Result;
use crate::restore::RestoreRequest;

pub(super) fn restore(args: &RestoreArgs) -> Result<i32> {
    let Loaded { inventory, extra, .. } = load(&args.inventory)?;
    let request = RestoreRequest {
        limit: args.inventory.limit.clone(),
        backup: args.backup.clone(),
        etcd: args.etcd,
        state_dir: args.state_dir.clone(),
    };
    crate::restore::restore(&request, inventory, extra, remote(&args.run)?)
}
