//! Nodes that cannot be drained (README "Nodes that cannot be drained"): `upgrade_undrainable_node_behavior`, as AKS's
//! `undrainableNodeBehavior`. `fail` (the default) fails the node as before; `quarantine` leaves it cordoned,
//! labelled `upgrade-tool.io/status=quarantined`, not upgraded, and the run goes on with the others; `schedule` gives
//! it back (uncordoned), not upgraded, and the run goes on. A node so passed over is not a failure for the threshold,
//! but the run ends with exit 1: a node is left below the target. Only nodes: a master that cannot be drained stops
//! the run, as the masters must all reach the target before any node.

use super::run::UpgradeRun;
use super::step_runner::StepFailure;
use crate::vocabulary::{HostOutcome, Phase, Step};

pub(crate) const VARIABLE: &str = "upgrade_undrainable_node_behavior";
/// The label a quarantined node carries (the tool's own prefix, as its annotations).
pub(crate) const QUARANTINE_LABEL: &str = "upgrade-tool.io/status=quarantined";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Behavior {
    Fail,
    Quarantine,
    Schedule,
}

impl Behavior {
    fn name(self) -> &'static str {
        match self {
            Behavior::Fail => "fail",
            Behavior::Quarantine => "quarantine",
            Behavior::Schedule => "schedule",
        }
    }
}

/// The host's behaviour as rendered (the plan checked every host's written value; a rendered value that is none of
/// the three fails the node, as `fail` does).
pub(crate) fn behavior(run: &UpgradeRun, host: &str) -> Behavior {
    match run.render_for(host, &format!("{{{{ {VARIABLE} | default('fail') }}}}")).trim() {
        "quarantine" => Behavior::Quarantine,
        "schedule" => Behavior::Schedule,
        _ => Behavior::Fail,
    }
}

/// After the drain of `host` failed (not interrupted, the host reachable) and its behaviour is not `fail`: the
/// quarantine label where asked, what blocked the drain (read again now), and the outcome. `None` when the node must
/// fail after all (the label could not be set: a quarantine that is not marked is not one).
pub(crate) async fn pass_over(
    run: &UpgradeRun,
    host: &str,
    behavior: Behavior,
    failure: &StepFailure,
    left_cordoned: bool,
) -> Option<HostOutcome> {
    let node = run.node_name(host);
    if behavior == Behavior::Quarantine {
        let label = [("upgrade_node_label", serde_json::Value::from(QUARANTINE_LABEL))];
        if let Err(f) = run.run_step(Phase::Nodes, host, Step::Label, &run.playbook("label.yml"), &label, None).await {
            run.notice(Some(host), format!("could not label the node {QUARANTINE_LABEL}: {}", f.reason));
            return None;
        }
    }
    let blocked_by = match super::preflight::read_drain_blockers(run, Phase::Nodes).await {
        Ok(found) => {
            let on_node: Vec<String> = found.get(&node).into_iter().flatten().map(ToString::to_string).collect();
            if on_node.is_empty() { vec![failure.reason.clone()] } else { on_node }
        }
        Err(why) => vec![failure.reason.clone(), format!("(the blockers could not be read again: {why})")],
    };
    let inventory = run.inventory.path.display();
    let fix = match behavior {
        Behavior::Quarantine => format!(
            "let the drain through (the budget or pod above), then `kubectl label node {node} upgrade-tool.io/status-` \
             and `upgrade --inventory {inventory} --limit {host}` (it is still cordoned)"
        ),
        _ => format!(
            "let the drain through (the budget or pod above), then `upgrade --inventory {inventory} --limit {host}`"
        ),
    };
    run.notice(
        Some(host),
        format!(
            "could not be drained: passed over ({}{}), not upgraded; the run goes on with the others",
            behavior.name(),
            if left_cordoned { ", left cordoned and labelled" } else { ", schedulable again" }
        ),
    );
    Some(HostOutcome::PassedOver { behavior: behavior.name().to_string(), blocked_by, left_cordoned, fix })
}
