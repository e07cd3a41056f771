//! `upgrade --rollback-blue-green` (README "Blue-green"): the blue nodes schedulable again, the green ones
//! unschedulable. Its moves serve the rollback command and a rollback asked for during the final soak
//! (final_soak.rs).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use crate::cluster::ClusterNode;
use crate::error::Error;
use crate::events::Event;
use crate::phase::run::UpgradeRun;
use crate::phase::shared_steps::{final_state, left_cordoned};
use crate::vocabulary::{HostOutcome, HostReport, Phase, Step, StopReason, Summary};

/// `upgrade --rollback-blue-green`: blue nodes schedulable again, green nodes unschedulable. Deleted blue nodes
/// cannot come back this way (they must rejoin the cluster) and are said to be gone.
pub(crate) async fn rollback(run: &UpgradeRun) -> (Summary, Option<Error>) {
    let bg = &run.plan.strategy.blue_green;
    let mut summary = Summary::empty(run.target.to_string());
    if !bg.enabled() {
        let e = Error::input("--rollback-blue-green: the inventory does not use the blue-green strategy")
            .in_file(&run.inventory.path)
            .hint("set upgrade_nodes_strategy: blue-green (and the green group) as for the run being rolled back");
        return (summary, Some(e));
    }
    run.event(Event::RunStarted {
        run: run.run_id(),
        target: run.target.to_string(),
        phases: vec![Phase::RollbackBlueGreen],
        resumed: false,
        change_id: Some(run.change_id()).filter(|c| !c.is_empty()),
    });
    let cluster: HashMap<String, ClusterNode> = match crate::phase::cluster_reads::read_cluster(run, Phase::Preflight)
        .await
    {
        Ok(nodes) => {
            let cluster: HashMap<String, ClusterNode> = nodes.into_iter().map(|n| (n.name.clone(), n)).collect();
            // The marks of the nodes as they are now decide what the rollback gives back (node_marks.rs).
            if let Ok(mut before) = run.cluster_before.lock() {
                *before = Arc::new(cluster.clone());
            }
            cluster
        }
        Err(e) => {
            summary.stopped = Some(StopReason::ClusterUnreadable { message: e.message.clone(), exit_code: e.code() });
            return (summary, Some(e));
        }
    };
    summary.hosts = give_back(run, &cluster).await;
    if let Ok(after) = final_state(run).await {
        summary.left_cordoned = left_cordoned(run, &after);
    }
    run.event(Event::RunFinished { summary: summary.clone() });
    (summary, None)
}

/// The rollback's moves: every blue node of the plan schedulable again (unless deleted, or cordoned before the
/// blue-green run), every green node unschedulable; one report each. `cluster`: the nodes as they are now.
pub(crate) async fn give_back(run: &UpgradeRun, cluster: &HashMap<String, ClusterNode>) -> Vec<HostReport> {
    let bg = &run.plan.strategy.blue_green;
    let mut reports = Vec::new();
    let blue: Vec<String> = run.plan.phase(Phase::Nodes).map(|p| p.batches.concat()).unwrap_or_default();
    let moves = blue
        .iter()
        .map(|h| (h, Step::Uncordon, "uncordon.yml"))
        .chain(bg.green.iter().map(|h| (h, Step::Cordon, "cordon.yml")));
    for (host, step, file) in moves {
        let started = Instant::now();
        let node = run.node_name(host);
        // From the Node, not the journal: a blue node a killed run cordoned carries that run's mark and is given back
        // (N3); one without a mark was cordoned by someone else before the blue-green run.
        let cordoned_before =
            step == Step::Uncordon && cluster.get(&node).is_some_and(|n| n.cordoned_by_someone_else());
        let outcome = if !cluster.contains_key(&node) {
            HostOutcome::Skipped { reason: format!("node {node} is not in the cluster (deleted?): it must rejoin") }
        } else if cordoned_before {
            HostOutcome::Skipped { reason: format!("node {node} was cordoned before the blue-green run: left so") }
        } else {
            // Green is cordoned with the run's mark and no disruption guard: nothing works on it afterwards.
            let more = if step == Step::Uncordon {
                crate::phase::node_marks::uncordon_vars(run, host, false)
            } else {
                crate::phase::node_marks::cordon_vars(run, host, false, false)
            };
            match run.run_step(Phase::Nodes, host, step, &run.playbook(file), &more, None).await {
                Ok(_) => HostOutcome::Upgraded { left_cordoned: false },
                Err(f) => {
                    HostOutcome::Failed { step, reason: f.reason, unreachable: f.unreachable, left_cordoned: false }
                }
            }
        };
        let report = HostReport {
            phase: Phase::RollbackBlueGreen,
            host: host.clone(),
            node: (node != *host).then_some(node),
            outcome,
            duration: started.elapsed(),
            window: None,
        };
        run.event(Event::HostFinished { report: report.clone() });
        reports.push(report);
    }
    reports
}
