//! `upgrade check-apis --inventory hosts.yml [--target vX]`: the gate on removed APIs and flags without a run.

use std::time::Duration;

use super::arguments::{Loaded, load, print, remote};
use crate::cli::CheckApisArgs;
use crate::error::{Error, Result};
use crate::plan::PlanRequest;
use crate::session::UpgradeRequest;
use crate::settings::{OutputFormat, SettingFlags};

pub(super) fn check_apis(args: &CheckApisArgs) -> Result<i32> {
    let Loaded { inventory, extra, .. } = load(&args.inventory)?;
    let request = UpgradeRequest {
        plan: PlanRequest {
            phases: Vec::new(),
            limit: args.inventory.limit.clone(),
            flags: SettingFlags {
                target_version: args.target.clone(),
                forks: args.forks.clone(),
                ..SettingFlags::default()
            },
        },
        output: args.output,
        // The table covers every minor up to the target: a target two minors ahead is a question, not a run.
        allow_skip_minor: true,
        window: Default::default(),
        state_dir: args.state_dir.clone(),
        fresh: false,
        rollback_blue_green: false,
        grace_period: Duration::from_secs(300),
        junit: None,
        summary_md: None,
    };
    let report = crate::plan::check_apis::check_apis(&request, inventory, extra, remote(&args.run)?)?;
    let text = match args.output {
        OutputFormat::Json => {
            let mut text = serde_json::to_string_pretty(&report)
                .map_err(|e| Error::internal(format!("cannot render the report as JSON: {e}")))?;
            text.push('\n');
            text
        }
        OutputFormat::Text => format!("{}\n", report.render()),
    };
    print(&text);
    Ok(if report.blocked { 1 } else { 0 })
}
