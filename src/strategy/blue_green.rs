//! Blue-green node replacement (OpenShift 3.11's "blue-green cluster upgrades", ARO's add-one / drain-one /
//! remove-one cycle). The masters are upgraded in place; then the green nodes (inventory group `new_nodes`, already at
//! the target) take the load: blue and green are labelled, green made schedulable, blue unschedulable, and the blue
//! nodes are evacuated in serial batches, each with the node hooks, the drain timeout and the failure threshold.
//! Optional controller-side surge hooks add a new node before each blue one is drained and remove the old one after.
//! `upgrade --rollback-blue-green` (rollback.rs) makes blue schedulable and green unschedulable again.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Instant;

use serde_json::Value;

use crate::cluster::ClusterNode;
use crate::error::{Error, Result};
use crate::phase::batches::{BatchStop, StopSignal};
use crate::phase::nodes::run_in_batches_from;
use crate::phase::run::{StepFailure, UpgradeRun};
use crate::phase::shared_steps::{drain, hook, safe_point};
use crate::settings::HookPoint;
use crate::vocabulary::Phase;
use crate::vocabulary::{HostOutcome, HostReport, Step, StopReason};

use super::nodes_strategy::{ADD_HOOK, REMOVE_HOOK};

/// Every surge hook must be a valid task list before anything is touched.
pub(crate) fn check_surge_hooks(plan: &crate::plan::Plan) -> Result<()> {
    let bg = &plan.strategy.blue_green;
    let mut seen = BTreeSet::new();
    for (path, variable) in bg.surge.values().flat_map(|s| [(&s.add, ADD_HOOK), (&s.remove, REMOVE_HOOK)]) {
        let Some(path) = path.as_ref().filter(|p| seen.insert((*p).clone())) else { continue };
        if let Some(first) = crate::tasks::check_task_file(path).into_iter().next() {
            return Err(
                first.hint(format!("fix the hook file named by {variable}; `upgrade check` lists every problem"))
            );
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------------------------
// preflight and verify

/// Preflight: every green node is a node of the cluster, Ready, at the target.
pub(crate) fn check_green(run: &UpgradeRun, cluster: &HashMap<String, ClusterNode>) -> Result<()> {
    let bg = &run.plan.strategy.blue_green;
    if !bg.enabled() || !run.plan.has_phase(Phase::Nodes) {
        return Ok(());
    }
    let mut problems = Vec::new();
    for host in &bg.green {
        let node = run.node_name(host);
        match cluster.get(&node) {
            None => problems.push(format!("{node} is not a node of the cluster")),
            Some(n) if !n.ready => problems.push(format!("{node} is not Ready")),
            // What the host has installed when the flavour decides "at the target" from it (openshift: every
            // 3.11.z node reports one kubelet version), else the kubelet's.
            Some(n) => {
                let running = run.version_before(host).unwrap_or_else(|| n.kubelet_version.clone());
                if !run.target.is_reported_by(&running) {
                    problems.push(format!("{node} runs {running}, not {}", run.target))
                }
            }
        }
    }
    if problems.is_empty() {
        return Ok(());
    }
    Err(Error::hosts_failed(format!("the green nodes are not ready to take the load: {}", problems.join("; "))).hint(
        format!(
            "join the new nodes of group `{}` to the cluster at {} and wait until they are Ready; nothing was changed",
            bg.green_group, run.target
        ),
    ))
}

/// Before the switch-over and before each batch of blue nodes: the green nodes as the cluster reports them now, at
/// least `upgrade_green_min_ready` (default: all) of them Ready, and schedulable once the switch-over made them so.
/// A green node that went NotReady after preflight must not receive the blue nodes' pods (N2). `Err` says why not.
async fn green_can_take_the_load(run: &UpgradeRun, switched: bool) -> std::result::Result<(), String> {
    let bg = &run.plan.strategy.blue_green;
    if bg.green.is_empty() {
        // Surge hooks add the replacements: nothing to count here.
        return Ok(());
    }
    let cluster = crate::phase::cluster_reads::read_cluster(run, Phase::Nodes)
        .await
        .map_err(|e| format!("the green nodes could not be read: {}", e.message))?;
    let mut ok = 0;
    let mut problems = Vec::new();
    for host in &bg.green {
        let node = run.node_name(host);
        match cluster.iter().find(|n| n.name == node) {
            None => problems.push(format!("{node} is not a node of the cluster")),
            Some(n) if !n.ready => problems.push(format!("{node} is not Ready")),
            Some(n) if switched && n.unschedulable => problems.push(format!("{node} is unschedulable")),
            Some(_) => ok += 1,
        }
    }
    let needed = bg.green_min_ready.unwrap_or(bg.green.len());
    if ok >= needed {
        return Ok(());
    }
    Err(format!(
        "only {ok} of {} green node(s) can take the load, {needed} needed (upgrade_green_min_ready): {}",
        bg.green.len(),
        problems.join("; ")
    ))
}

/// The hosts verify checks: with blue-green, the green nodes instead of the evacuated blue ones.
pub(crate) fn to_verify(run: &UpgradeRun, upgraded: Vec<String>) -> Vec<String> {
    let bg = &run.plan.strategy.blue_green;
    if !bg.enabled() {
        return upgraded;
    }
    let blue: BTreeSet<String> =
        run.plan.phase(Phase::Nodes).map(|p| p.batches.concat()).unwrap_or_default().into_iter().collect();
    let mut hosts: Vec<String> = upgraded.into_iter().filter(|h| !blue.contains(h)).collect();
    if run.plan.has_phase(Phase::Nodes) {
        hosts.extend(bg.green.iter().cloned());
    }
    hosts
}

// ---------------------------------------------------------------------------------------------------------------
// the nodes phase, blue-green

fn label_pair(run: &UpgradeRun, color: &str) -> Value {
    Value::String(format!("{}={color}", run.plan.strategy.blue_green.label))
}

/// Runs a built-in step on each host in turn; the first failure is returned with its host.
async fn each(
    run: &UpgradeRun,
    hosts: &[String],
    step: Step,
    file: &str,
    more: &[(&str, Value)],
) -> std::result::Result<(), (String, StepFailure)> {
    for host in hosts {
        run.run_step(Phase::Nodes, host, step, &run.playbook(file), more, None).await.map_err(|f| (host.clone(), f))?;
    }
    Ok(())
}

/// Labels blue and green, makes green schedulable and blue unschedulable, then evacuates the blue nodes batch by
/// batch. Returns the reports of the blue nodes and, when the phase stopped early, why.
pub(crate) async fn run(
    run: &Arc<UpgradeRun>,
    batches: &[Vec<String>],
    stop: &StopSignal,
) -> (Vec<HostReport>, Option<StopReason>) {
    let bg = &run.plan.strategy.blue_green;
    // Blue nodes an earlier run evacuated (for this target) are not evacuated again.
    let done: BTreeSet<String> = batches.iter().flatten().filter(|h| evacuated_earlier(run, h)).cloned().collect();
    let blue: Vec<String> = batches.iter().flatten().filter(|h| !done.contains(*h)).cloned().collect();
    let skipped = done.iter().map(|h| {
        let outcome = HostOutcome::Skipped { reason: "evacuated by an earlier run (blue)".into() };
        run.host_completed(Phase::Nodes, h, outcome, Instant::now())
    });
    let mut reports: Vec<HostReport> = crate::phase::fan_out(run.forks(), skipped).await;
    if blue.is_empty() {
        return (reports, None);
    }
    let blue_label = [("upgrade_node_label", label_pair(run, "blue"))];
    let green_label = [("upgrade_node_label", label_pair(run, "green"))];
    // Nothing is switched over onto green nodes that cannot take the load (a green node may have gone NotReady
    // while the masters were upgraded, after preflight checked it).
    if let Err(why) = green_can_take_the_load(run, false).await {
        return not_started(run, reports, &blue, &why, StopReason::GreenNotReady { batch: 0, reason: why.clone() })
            .await;
    }
    let switched = async {
        each(run, &blue, Step::Label, "label.yml", &blue_label).await?;
        each(run, &bg.green, Step::Label, "label.yml", &green_label).await?;
        for host in &bg.green {
            let schedulable = crate::phase::node_marks::uncordon_vars(run, host, false);
            each(run, std::slice::from_ref(host), Step::Uncordon, "uncordon.yml", &schedulable).await?;
        }
        // Each blue node's pre-cordon hook runs before the blue nodes are cordoned together, while they take work.
        for host in &blue {
            hook(run, Phase::Nodes, host, HookPoint::NodePreCordon, Step::PreCordonHook)
                .await
                .map_err(|f| (host.clone(), f))?;
        }
        // Each cordon is marked on its Node (a re-run and a rollback tell it from an operator's own); a blue node
        // cordoned by someone else keeps that cordon unmarked.
        for host in &blue {
            let vars = crate::phase::node_marks::cordon_vars(run, host, was_cordoned(run, host), true);
            each(run, std::slice::from_ref(host), Step::Cordon, "cordon.yml", &vars).await?;
        }
        Ok(())
    }
    .await;
    if let Err((host, failure)) = switched {
        let why = format!("blue-green switch-over failed on {host} at {}: {}", failure.step, failure.reason);
        let stop = StopReason::SwitchOver { host, step: failure.step, reason: failure.reason };
        return not_started(run, reports, &blue, &why, stop).await;
    }
    run.notice(
        None,
        format!(
            "blue-green: {} green node(s) schedulable, {} blue node(s) unschedulable; evacuating the blue nodes",
            bg.green.len(),
            blue.len()
        ),
    );

    let batches: Vec<Vec<String>> = batches
        .iter()
        .map(|b| b.iter().filter(|h| !done.contains(*h)).cloned().collect::<Vec<_>>())
        .filter(|b| !b.is_empty())
        .collect();
    let max_fail = run.plan.settings.max_fail_percentage.value;
    // One batch at a time, the green nodes read again before each (N2): the first batch was checked just above.
    let mut stopped = None;
    for (index, batch) in batches.iter().enumerate() {
        if stopped.is_some() {
            let why = "not started: the blue-green evacuation stopped before this batch".to_string();
            for h in batch {
                let outcome = HostOutcome::NotStarted { reason: why.clone() };
                reports.push(run.host_completed(Phase::Nodes, h, outcome, Instant::now()).await);
            }
            continue;
        }
        if index > 0 && !stop.is_stopping() {
            if let Err(why) = green_can_take_the_load(run, true).await {
                run.notice(None, format!("blue-green: batch {} not started: {why}", index + 1));
                stopped = Some(StopReason::GreenNotReady { batch: index + 1, reason: why.clone() });
                for h in batch {
                    let outcome = HostOutcome::NotStarted { reason: why.clone() };
                    reports.push(run.host_completed(Phase::Nodes, h, outcome, Instant::now()).await);
                }
                continue;
            }
        }
        let (evacuated, batch_stop) =
            run_in_batches_from(run, batch, index, batches.len(), stop, |run, host| async move {
                evacuate(&run, &host).await
            })
            .await;
        reports.extend(evacuated);
        stopped = batch_stop.map(|stop| match stop {
            BatchStop::Threshold { batch, failed, size } => {
                StopReason::Threshold { batch, failed, size, max_fail: max_fail.to_string(), blue: true }
            }
            BatchStop::Interrupted => StopReason::HaltedBatches { halt: run.halt(), blue: true },
            BatchStop::Gate(reason) => reason,
        });
    }
    if stopped.is_none() {
        stopped = super::final_soak::final_soak(run, &reports).await;
    }
    (reports, stopped)
}

/// The blue nodes not started, with why, and the phase's stop.
async fn not_started(
    run: &UpgradeRun,
    mut reports: Vec<HostReport>,
    blue: &[String],
    why: &str,
    stop: StopReason,
) -> (Vec<HostReport>, Option<StopReason>) {
    for h in blue {
        let outcome = HostOutcome::NotStarted { reason: why.to_string() };
        reports.push(run.host_completed(Phase::Nodes, h, outcome, Instant::now()).await);
    }
    (reports, Some(stop))
}

/// Cordoned before the blue-green run, by someone else: unschedulable and not marked by an upgrade run.
fn was_cordoned(run: &UpgradeRun, host: &str) -> bool {
    crate::phase::node_marks::cordoned_by_someone_else(run, host)
}

/// One blue node: surge-add hook, pre-drain hook, drain, pre hook, delete (when asked), surge-remove hook, post hook.
/// A failure leaves the node unschedulable (it is blue: the green nodes carry the load; rollback makes it schedulable).
async fn evacuate(run: &UpgradeRun, host: &str) -> HostReport {
    let started = Instant::now();
    let node = run.node_name(host);
    // From the Node's mark as preflight read it (a rollback reads the marks again; the journal only records it).
    let was_cordoned = was_cordoned(run, host);
    run.host_started(Phase::Nodes, host, was_cordoned).await;
    let outcome = match evacuate_steps(run, host, &node).await {
        Ok(deleted) => {
            if !deleted {
                give_back_guards(run, host).await;
            }
            let what = if deleted { "evacuated and its node object deleted" } else { "evacuated, left unschedulable" };
            run.notice(Some(host), format!("blue node {node} {what}"));
            HostOutcome::Upgraded { left_cordoned: false }
        }
        Err(mut f) => {
            let limit = run.plan.settings.drain_timeout.value;
            if f.step == Step::Drain && f.timed_out && limit.seconds() > 0 {
                f.reason = format!("drain timed out after {limit}");
            }
            HostOutcome::Failed { step: f.step, reason: f.reason, unreachable: f.unreachable, left_cordoned: true }
        }
    };
    run.host_completed(Phase::Nodes, host, outcome, started).await
}

/// An evacuated blue node is done: the disruption guards this run set on it are removed (its cordon and the cordon's
/// mark stay: blue stays unschedulable until a rollback). Quietly: it is the end of the evacuation, not a step of it.
async fn give_back_guards(run: &UpgradeRun, host: &str) {
    let vars = crate::phase::node_marks::uncordon_vars(run, host, true);
    let file = run.playbook("uncordon.yml");
    if let Err(f) = run.run_step_quietly(host, Step::Uncordon, &file, &vars).await {
        run.notice(Some(host), format!("could not remove the disruption guards of the run: {}", f.reason));
    }
}

async fn evacuate_steps(run: &UpgradeRun, host: &str, node: &str) -> std::result::Result<bool, StepFailure> {
    let bg = &run.plan.strategy.blue_green;
    let surge = bg.surge.get(host).cloned().unwrap_or_default();
    if let Some(file) = &surge.add {
        surge_hook_step(run, host, node, Step::SurgeAddHook, file).await?;
    }
    hook(run, Phase::Nodes, host, HookPoint::NodePreDrain, Step::PreDrainHook).await?;
    drain(run, Phase::Nodes, host).await?;
    hook(run, Phase::Nodes, host, HookPoint::NodePre, Step::PreHook).await?;
    if bg.delete_nodes {
        safe_point(run, Step::DeleteNode)?;
        run.run_step(Phase::Nodes, host, Step::DeleteNode, &run.playbook("delete_node.yml"), &[], None).await?;
    }
    if let Some(file) = &surge.remove {
        surge_hook_step(run, host, node, Step::SurgeRemoveHook, file).await?;
    }
    hook(run, Phase::Nodes, host, HookPoint::NodePost, Step::PostHook).await?;
    Ok(bg.delete_nodes)
}

/// A surge hook runs on the controller (`localhost`), told which node it replaces.
async fn surge_hook_step(
    run: &UpgradeRun,
    host: &str,
    node: &str,
    step: Step,
    file: &std::path::Path,
) -> std::result::Result<(), StepFailure> {
    safe_point(run, step)?;
    let more = [
        ("upgrade_replaced_host", Value::String(host.to_string())),
        ("upgrade_replaced_node", Value::String(node.to_string())),
    ];
    run.run_step(Phase::Nodes, "localhost", step, file, &more, None).await.map(|_| ())
}

/// The journal says an earlier run evacuated this blue node for the same target.
fn evacuated_earlier(run: &UpgradeRun, host: &str) -> bool {
    let evacuated = [crate::journal::HostRecord::Upgraded];
    run.history.finished_for(Phase::Nodes, host, &run.target.to_string(), &evacuated)
}
