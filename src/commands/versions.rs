//! `upgrade versions`: the targets the update graph offers from the running version.

use super::arguments::{Loaded, load, print, remote};
use crate::cli::VersionsArgs;
use crate::error::Result;
use crate::settings::OutputFormat;

pub(super) fn versions(args: &VersionsArgs) -> Result<i32> {
    let Loaded { inventory, extra, .. } = load(&args.inventory)?;
    let offered = crate::strategy::versions::versions(&inventory, &extra, args.from.as_deref(), remote(&args.run)?)?;
    print(&match args.output {
        OutputFormat::Json => offered.json(),
        OutputFormat::Text => offered.text(),
    });
    Ok(0)
}
