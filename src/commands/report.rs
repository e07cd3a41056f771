//! `upgrade report --inventory X --html FILE` (and `--svg FILE`): the timeline picture of a recorded run.

use super::arguments::{Loaded, load};
use crate::cli::ReportArgs;
use crate::error::{Error, Result};
use crate::journal::{DEFAULT_STATE_DIR, entries_of};
use crate::report::timeline;

pub(super) fn report(args: &ReportArgs) -> Result<i32> {
    if args.html.is_none() && args.svg.is_none() {
        return Err(Error::input("upgrade report needs --html FILE or --svg FILE (or both)")
            .hint("e.g. upgrade report --inventory hosts.yml --html run.html"));
    }
    let Loaded { inventory, .. } = load(&args.inventory)?;
    let state_dir = args.state_dir.clone().unwrap_or_else(|| inventory.dir.join(DEFAULT_STATE_DIR));
    let journal = state_dir.join("journal.jsonl");
    let entries = entries_of(&journal).map_err(|e| {
        Error::input(format!("cannot read the journal {}: {e}", journal.display()))
            .hint("run the upgrade first, or pass --state-dir where its journal is")
    })?;
    let timeline = timeline::build(&entries, args.run.as_deref())
        .map_err(|why| Error::input(format!("{}: {why}", journal.display())).hint("pass --run with one of its runs"))?;
    let write = |path: &std::path::PathBuf, text: String| {
        std::fs::write(path, text).map_err(|e| {
            Error::input(format!("cannot write {}: {e}", path.display()))
                .hint("check that its directory exists and is writable")
        })
    };
    if let Some(path) = &args.html {
        write(path, timeline::html(&timeline))?;
    }
    if let Some(path) = &args.svg {
        write(path, timeline::svg(&timeline))?;
    }
    Ok(0)
}
