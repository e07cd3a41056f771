//! The live plan's drain simulation (crate::drain_simulation): the reads it needs beyond the pods and budgets
//! (drain_simulation.yml: the nodes; the claims and volumes when an evicted pod has a claim), the batches in the
//! plan's order, and whether the run validates between batches (then the evicted pods are assumed back, their
//! budgets whole, before the next batch).

use serde_json::Value;

use crate::drain_simulation::{BatchSimulation, ClusterLists};
use crate::phase::run::UpgradeRun;
use crate::plan::Phase;
use crate::vocabulary::Step;

/// The registered outputs of drain_simulation.yml read as `what`, or why it could not be read.
async fn read(run: &UpgradeRun, what: &str, registers: &[&str]) -> Result<Vec<String>, String> {
    let more = [("upgrade_drain_simulation_read", Value::String(what.into()))];
    let file = run.playbook("drain_simulation.yml");
    let facts = run
        .run_step(Phase::Preflight, &run.first_master, Step::ReadCluster, &file, &more, None)
        .await
        .map_err(|f| format!("cannot read the cluster's {what} on {}: {}", run.first_master, f.reason))?;
    let texts = registers
        .iter()
        .map(|name| facts.get(*name).and_then(|r| r.get("stdout")).and_then(Value::as_str).unwrap_or_default().into())
        .collect();
    for name in registers {
        run.steps.forget(&run.first_master, name);
    }
    Ok(texts)
}

/// Each batch's simulation, in the order of `batches` (the hosts of each); `workloads` is the pod and budget lists as
/// read for the drain blockers (one read serves both). A read that fails makes the simulations that need it
/// unreadable.
pub(super) async fn simulate(
    run: &UpgradeRun,
    workloads: &Result<(String, String), String>,
    batches: &[Vec<String>],
) -> Vec<BatchSimulation> {
    let nodes: Vec<Vec<String>> = batches.iter().map(|b| b.iter().map(|h| run.node_name(h)).collect()).collect();
    let unreadable =
        |why: &str| -> Vec<BatchSimulation> { nodes.iter().map(|_| BatchSimulation::unreadable(why)).collect() };
    let (pods, pdbs) = match workloads {
        Ok(lists) => lists,
        Err(why) => return unreadable(why),
    };
    let node_list = match read(run, "nodes", &["upgrade_simulation_nodes"]).await {
        Ok(mut texts) => texts.remove(0),
        Err(why) => return unreadable(&why),
    };
    let mut lists = match ClusterLists::read(pods, pdbs, &node_list) {
        Ok(lists) => lists,
        Err(why) => return unreadable(&why),
    };
    if lists.needs_claims(&nodes) {
        let claims = read(run, "claims", &["upgrade_simulation_pvcs", "upgrade_simulation_pvs"]).await;
        lists = lists.with_claims(claims.map(|mut t| (t.remove(0), t.remove(0))));
    }
    // Blue-green: the green nodes, cordoned until the switch-over, take the evicted pods.
    if run.plan.strategy.blue_green.enabled() {
        let green: Vec<String> = run.plan.strategy.blue_green.green.iter().map(|h| run.node_name(h)).collect();
        lists.uncordon(&green);
    }
    let pods_back = crate::phase::validation::validates_between_batches(run);
    lists.simulate(&nodes, pods_back)
}
