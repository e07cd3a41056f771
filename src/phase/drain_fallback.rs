//! A drain that timed out, retried with `--disable-eviction` (README "Nodes that cannot be drained"), as kubespray's
//! `drain_fallback_enabled`: `upgrade_drain_fallback: disable-eviction` deletes the pods the evictions could not move,
//! past their PodDisruptionBudgets, within `upgrade_drain_fallback_timeout`. The budgets it overrides are named
//! before and after. kubectl has the flag since 1.18; OpenShift 3.11's `oc` does not (the plan refuses the setting
//! there, and a templated value that renders to it is not acted on).

use std::time::Duration;

use serde_json::Value;

use super::run::{StepFailure, UpgradeRun};
use super::shared_steps::{cut_at_abort, safe_point};
use crate::drain_blockers::DrainBlocker;
use crate::host_settings::{DISABLE_EVICTION, DRAIN_FALLBACK, disable_eviction_missing};
use crate::vocabulary::{Phase, Step};

/// After the drain of `host` failed with `failure`: `None` when no fallback applies (not asked for, not a timeout,
/// interrupted, the host unreachable, or the flag missing from the tools); else the retry's result.
pub(crate) async fn retry(
    run: &UpgradeRun,
    phase: Phase,
    host: &str,
    failure: &StepFailure,
) -> Option<Result<(), StepFailure>> {
    let asked = run.render_for(host, &format!("{{{{ {DRAIN_FALLBACK} | default('none') }}}}"));
    if asked.trim() != DISABLE_EVICTION || !failure.timed_out || failure.interrupted || failure.unreachable {
        return None;
    }
    if let Some(why) = disable_eviction_missing(run.plan.flavor.flavor, Some(&run.target)) {
        run.notice(Some(host), format!("the drain is not retried with --disable-eviction ({DRAIN_FALLBACK}): {why}"));
        return None;
    }
    let seconds = run.host_seconds(host, "upgrade_drain_fallback_timeout", 360).max(1);
    let budgets = overridden_budgets(run, phase, host).await;
    run.notice(
        Some(host),
        format!(
            "{}; retrying with --disable-eviction for {seconds}s ({DRAIN_FALLBACK}), deleting pods past {budgets}",
            failure.reason
        ),
    );
    if let Err(f) = safe_point(run, Step::Drain) {
        return Some(Err(f));
    }
    let more =
        [("upgrade_drain_disable_eviction", Value::Bool(true)), ("upgrade_drain_timeout_seconds", seconds.into())];
    let file = run.playbook("drain.yml");
    let limit = Some(Duration::from_secs(seconds));
    let drained = run.run_step(phase, host, Step::Drain, &file, &more, limit);
    match cut_at_abort(run, phase, host, Step::Drain, drained).await {
        Ok(_) => {
            run.notice(Some(host), format!("drained with --disable-eviction: overrode {budgets}"));
            Some(Ok(()))
        }
        Err(mut f) => {
            if !f.interrupted {
                f.reason = format!("{}, and with --disable-eviction ({DRAIN_FALLBACK}): {}", failure.reason, f.reason);
            }
            Some(Err(f))
        }
    }
}

/// The budgets the drain of `host` meets now, as the operator reads them (`PodDisruptionBudget default/web`), or
/// what could not be read.
async fn overridden_budgets(run: &UpgradeRun, phase: Phase, host: &str) -> String {
    let node = run.node_name(host);
    match super::preflight::read_drain_blockers(run, phase).await {
        Ok(found) => {
            let budgets: Vec<String> = found
                .get(&node)
                .into_iter()
                .flatten()
                .filter_map(|b| match b {
                    DrainBlocker::DisruptionBudget { pdb, .. } => Some(format!("PodDisruptionBudget {pdb}")),
                    _ => None,
                })
                .collect::<std::collections::BTreeSet<_>>()
                .into_iter()
                .collect();
            if budgets.is_empty() { "no PodDisruptionBudget that allows 0 now".into() } else { budgets.join(", ") }
        }
        Err(why) => format!("the PodDisruptionBudgets in the way (not named: {why})"),
    }
}
