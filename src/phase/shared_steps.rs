//! The steps both strategies share, below the in-place sequence (sequence.rs) and blue-green
//! (strategy/blue_green.rs): the safe point between steps, the hooks, the drain, and the final read of the cluster
//! with the nodes left cordoned.

use std::collections::HashMap;
use std::time::Instant;

use super::cluster_reads::read_cluster;
use super::run::{StepFailure, UpgradeRun};
use crate::cluster::ClusterNode;
use crate::error::Result;
use crate::events::Event;
use crate::settings::HookPoint;
use crate::vocabulary::{CordonedNode, HostOutcome, HostReport, Phase, Step};

/// Before each step: past the grace period of an interrupt, the host stops here, between steps.
pub(crate) fn safe_point(run: &UpgradeRun, step: Step) -> Result<(), StepFailure> {
    if run.stop.is_aborting() { Err(StepFailure::interrupted(step)) } else { Ok(()) }
}

/// Runs the host's hook at `point` after the safe-point check.
pub(crate) async fn hook(
    run: &UpgradeRun,
    phase: Phase,
    host: &str,
    point: HookPoint,
    step: Step,
) -> Result<(), StepFailure> {
    if !run.has_hook(host, point) {
        return Ok(());
    }
    safe_point(run, step)?;
    cut_at_abort(run, phase, host, step, run.run_hook(phase, host, point, step)).await
}

/// Runs a hook or a built-in step until it ends or the grace period of an interrupt runs out, whichever comes
/// first. A hook can run for ever (`sleep 600`, a drain waiting on a PodDisruptionBudget): past the grace period
/// the step is dropped, which kills its command (the connection kills what it started when dropped), and the host
/// stops there as at a safe point; the caller's clean-up then uncordons a node this run cordoned and did not
/// upgrade.
pub(crate) async fn cut_at_abort<T>(
    run: &UpgradeRun,
    phase: Phase,
    host: &str,
    step: Step,
    work: impl std::future::Future<Output = Result<T, StepFailure>>,
) -> Result<T, StepFailure> {
    let started = Instant::now();
    let mut stop = run.stop.clone();
    tokio::select! {
        result = work => result,
        _ = stop.aborted() => {
            let failure = StepFailure::interrupted(step);
            run.event(Event::StepFinished {
                phase,
                host: host.into(),
                step,
                ok: false,
                duration: started.elapsed(),
                error: Some(failure.reason.clone()),
            });
            Err(failure)
        }
    }
}

/// The drain, bounded by the drain timeout, and cut short when the grace period of an interrupt runs out (a drain
/// can wait for ever on a PodDisruptionBudget; stopping it changes nothing on the node).
pub(crate) async fn drain(run: &UpgradeRun, phase: Phase, host: &str) -> Result<(), StepFailure> {
    safe_point(run, Step::Drain)?;
    let limit = run.plan.settings.drain_timeout.value.limit();
    let file = run.playbook("drain.yml");
    cut_at_abort(run, phase, host, Step::Drain, run.run_step(phase, host, Step::Drain, &file, &[], limit))
        .await
        .map(|_| ())
}

/// Reads the cluster at the end of the run.
pub(crate) async fn final_state(run: &UpgradeRun) -> Result<HashMap<String, ClusterNode>> {
    let nodes = read_cluster(run, Phase::Verify).await?;
    Ok(nodes.into_iter().map(|n| (n.name.clone(), n)).collect())
}

/// Every node the cluster reports unschedulable, with how to make it schedulable again.
pub(crate) fn left_cordoned(run: &UpgradeRun, cluster: &HashMap<String, ClusterNode>) -> Vec<CordonedNode> {
    let before = run.cluster_before.lock().map(|b| b.clone()).unwrap_or_default();
    let nodes = cluster
        .values()
        .filter(|n| n.unschedulable)
        // "Before the run" from the Node's mark as preflight read it: a cordon a killed run left is marked, and is not
        // said to be the operator's (R7).
        .map(|n| (n.name.clone(), before.get(&n.name).is_some_and(|b| b.cordoned_by_someone_else())));
    cordoned_nodes(run, nodes)
}

/// When the cluster cannot be read at the end: the nodes the hosts' own sequences reported left cordoned (a failed
/// host whose node this run cordoned, an upgraded node that was cordoned before the run).
pub(crate) fn left_cordoned_by_hosts(run: &UpgradeRun, reports: &[HostReport]) -> Vec<CordonedNode> {
    let nodes = reports.iter().filter_map(|r| {
        let node = || r.node.clone().unwrap_or_else(|| r.host.clone());
        match r.outcome {
            HostOutcome::Failed { left_cordoned: true, .. } => Some((node(), false)),
            HostOutcome::Upgraded { left_cordoned: true } => Some((node(), true)),
            _ => None,
        }
    });
    cordoned_nodes(run, nodes)
}

fn cordoned_nodes(run: &UpgradeRun, nodes: impl Iterator<Item = (String, bool)>) -> Vec<CordonedNode> {
    // As the flavour's defaults.yml derives it for the steps: the openshift flavour's is `<upgrade_kubectl> adm`
    // (3.11's uncordon is `oc adm uncordon`), the others' is upgrade_kubectl itself.
    let template = match run.plan.flavor.flavor {
        crate::flavor::Flavor::Openshift => {
            "{{ upgrade_kubectl_adm | default((upgrade_kubectl | default('oc')) ~ ' adm') }}"
        }
        _ => "{{ upgrade_kubectl_adm | default(upgrade_kubectl | default('kubectl')) }}",
    };
    let kubectl = run.render_for(&run.first_master, template);
    let mut nodes: Vec<CordonedNode> = nodes
        .map(|(node, before_run)| CordonedNode { fix: format!("{kubectl} uncordon {node}"), node, before_run })
        .collect();
    nodes.sort_by(|a, b| a.node.cmp(&b.node));
    nodes.dedup_by(|a, b| a.node == b.node);
    nodes
}
