//! `upgrade --inventory X`: the upgrade itself.

use super::arguments::{Loaded, load, remote, upgrade_request};
use crate::cli::UpgradeArgs;
use crate::console::errln;
use crate::error::Result;
use crate::inventory::Inventory;
use crate::journal::DEFAULT_STATE_DIR;
use crate::report::files::ReportFiles;
use crate::vocabulary::{StopReason, Summary};

pub(super) fn upgrade(args: &UpgradeArgs) -> Result<i32> {
    let request = upgrade_request(args);
    // Before anything else, the inventory included: a report path that cannot be written is bad input, and a run
    // refused for any reason still leaves its reports saying why.
    let reports = ReportFiles::open(request.junit.as_deref(), request.summary_md.as_deref())?;
    let result = load(&args.inventory).and_then(|Loaded { inventory, extra, vault }| {
        let mut remote = remote(&args.run)?;
        // Hooks may read vault-encrypted files (`include_vars`) with the same passwords as the inventory.
        remote.engine.vault = vault;
        crate::executor::upgrade(&request, inventory, extra, remote, &reports)
    });
    if let Err(e) = &result {
        let target = request.plan.flags.target_version.clone().unwrap_or_default();
        // With where it went wrong: the reports are all a CI page shows of a refused run.
        let message = match &e.location {
            Some(location) => format!("{location}: {}", e.message),
            None => e.message.clone(),
        };
        let summary =
            Summary { stopped: Some(StopReason::Preflight { message, exit_code: e.code() }), ..Summary::empty(target) };
        // Where the run would have kept its record, as it finds its inventory's directory.
        let state_dir = request.state_dir.clone().unwrap_or_else(|| {
            let inventory = args.inventory.inventory.clone().unwrap_or_default();
            Inventory::dir_of(&inventory, inventory.is_dir()).join(DEFAULT_STATE_DIR)
        });
        for warning in reports.write_refused(&summary, &state_dir) {
            errln!("warning: {warning}");
        }
    }
    result
}
