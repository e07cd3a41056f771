//! `upgrade plan` (= `upgrade --plan`): what an upgrade would do, without contacting any host; with `--live`, read
//! the cluster and the hosts first, changing nothing.

use super::arguments::{Loaded, load, plan_request, print, remote, upgrade_request};
use crate::cli::UpgradeArgs;
use crate::error::{Error, Result};
use crate::journal::DEFAULT_STATE_DIR;
use crate::plan::expected::Estimate;
use crate::plan::{Plan, live, plan_json, plan_text};
use crate::settings::OutputFormat;

pub(super) fn plan(args: &UpgradeArgs) -> Result<i32> {
    // What only a run does is refused rather than ignored: a plan writes no report and starts nothing.
    let run_only = [
        (args.junit.is_some(), "--junit"),
        (args.summary_md.is_some(), "--summary-md"),
        (args.fresh, "--fresh"),
        (args.rollback_blue_green, "--rollback-blue-green"),
    ];
    if let Some((_, flag)) = run_only.iter().find(|(set, _)| *set) {
        return Err(Error::input(format!("{flag} applies to a run, not to a plan"))
            .hint("drop it from the plan command; `upgrade plan --help` lists what a plan takes"));
    }
    let Loaded { inventory, extra, .. } = load(&args.inventory)?;
    if args.live {
        let plan = live::live_plan(&upgrade_request(args), inventory, extra, remote(&args.run)?)?;
        let text = match args.output {
            OutputFormat::Json => pretty_json(&plan, "the live plan")?,
            OutputFormat::Text => live::render(&plan),
        };
        print(&text);
        return Ok(if plan.blocked { 1 } else { 0 });
    }
    let plan = Plan::build(&inventory, &extra, &plan_request(args))?;
    let text = match args.output {
        OutputFormat::Text => {
            // Predicted from the times this inventory's earlier runs recorded in the state directory.
            let state_dir = args.state_dir.clone().unwrap_or_else(|| inventory.dir.join(DEFAULT_STATE_DIR));
            let expected = Estimate::from_state_dir(&state_dir).plan(&plan);
            format!("{}{}\n", plan_text(&plan, &inventory), expected.line())
        }
        OutputFormat::Json => pretty_json(&plan_json(&plan, &inventory), "the plan")?,
    };
    // `-e` arguments are shown with their origins: a secret given there is masked.
    print(&crate::redact::Redactor::for_inventory(&inventory, &extra).text(&text));
    Ok(0)
}

fn pretty_json(value: &impl serde::Serialize, what: &str) -> Result<String> {
    let mut text = serde_json::to_string_pretty(value)
        .map_err(|e| Error::internal(format!("cannot render {what} as JSON: {e}")))?;
    text.push('\n');
    Ok(text)
}
