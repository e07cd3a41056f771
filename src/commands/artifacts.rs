//! `upgrade artifacts`: the packages and images the upgrade to the target needs (plan/artifacts.rs).

use super::arguments::{Loaded, load, print, remote};
use crate::cli::ArtifactsArgs;
use crate::error::{Error, Result};
use crate::plan::PlanRequest;
use crate::session::UpgradeRequest;
use crate::settings::{OutputFormat, SettingFlags};

pub(super) fn artifacts(args: &ArtifactsArgs) -> Result<i32> {
    let Loaded { inventory, extra, .. } = load(&args.inventory)?;
    let request = UpgradeRequest {
        plan: PlanRequest {
            phases: Vec::new(),
            limit: args.inventory.limit.clone(),
            flags: SettingFlags { target_version: args.target.clone(), ..SettingFlags::default() },
        },
        ..UpgradeRequest::default()
    };
    let found = crate::plan::artifacts::artifacts(&request, inventory, extra, remote(&args.run)?)?;
    print(&match args.output {
        OutputFormat::Json => {
            let mut text = serde_json::to_string_pretty(&found)
                .map_err(|e| Error::internal(format!("cannot render the artifacts as JSON: {e}")))?;
            text.push('\n');
            text
        }
        OutputFormat::Text => crate::plan::artifacts::render(&found),
    });
    Ok(0)
}
