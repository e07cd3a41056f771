//! Preflight: before anything moves, every host answers, the cluster is read, and the run is checked against it:
//! masters on one version, a target newer than that (no skipped minor unless allowed), masters already at the target
//! for a nodes-only run, a label selector that selects something. What is already at the target is skipped.

mod cluster_access;
mod decision;
mod drain_blockers;
mod health_gate;
mod host_checks;
mod lock;
mod node_names;
mod reachable;
#[cfg(test)]
mod tests;

use cluster_access::*;
pub(crate) use decision::*;
pub(crate) use drain_blockers::*;
use health_gate::*;
pub(crate) use host_checks::*;
use lock::*;
pub(crate) use node_names::*;
pub(crate) use reachable::*;

use std::collections::HashMap;

use crate::cluster::ClusterNode;
use crate::error::Result;
use crate::flavor::Flavor;
use crate::phase::cluster_reads::{read_cluster, read_host_versions, report_pending_csrs};
use crate::phase::run::UpgradeRun;
use crate::vocabulary::Phase;

pub(crate) async fn run(run: &std::sync::Arc<UpgradeRun>, strategy_checks: &[StrategyCheck]) -> Result<Preflight> {
    check_node_names(run)?;
    // Outside the maintenance window nothing starts, not even the cluster lock (maintenance.rs).
    crate::phase::maintenance::at_start(run).await?;
    let ttl = crate::phase::cluster_lock::ttl(run.as_ref())?;
    check_reachable(run).await?;
    // Asking changes nothing; the lock is the first write, and a role without it would fail there less clearly.
    check_permissions(run).await?;
    take_cluster_lock(run, ttl).await?;
    crate::phase::certificates::check(run).await?;
    let cluster = read_cluster(run, Phase::Preflight).await?;
    // One copy, which the later phases keep as the cluster before the run.
    let by_name: std::sync::Arc<HashMap<String, ClusterNode>> =
        std::sync::Arc::new(cluster.into_iter().map(|n| (n.name.clone(), n)).collect());
    if let Ok(mut before) = run.cluster_before.lock() {
        *before = by_name.clone();
    }
    read_host_versions(run).await?;
    for check in strategy_checks {
        check(run, &by_name)?;
    }
    let decided = decide(run, &by_name)?;
    health_gate(run, &by_name, &decided)?;
    let upgrading: Vec<(String, Phase)> = decided
        .masters
        .iter()
        .map(|h| (h.clone(), Phase::ControlPlane))
        .chain(
            decided
                .node_batches
                .iter()
                .flatten()
                .filter(|h| !decided.nodes_skipped.contains_key(*h))
                .map(|h| (h.clone(), Phase::Nodes)),
        )
        .collect();
    // The gate on what the minors crossed remove or require (api_removals.rs), before anything on a host changes.
    if !upgrading.is_empty() && !run.stop.is_stopping() {
        let hosts = crate::phase::api_removals::hosts_to_upgrade(&decided);
        crate::phase::api_removals::gate(run, &hosts, decided.control_plane_version.as_ref()).await?;
    }
    // kured reboots no node while the run works: its lock is held from here (a lock a dead run of ours left is given
    // back even when there is nothing to do).
    crate::phase::kured_lock::hold(run.as_ref(), &run.kured_lock, !upgrading.is_empty() && !run.stop.is_stopping())
        .await?;
    // After a stop (a signal while the cluster was read, a state directory that cannot be written) no later phase
    // starts, so nothing more is checked: the kubeadm plan check installs kubeadm on the first master, which an
    // operator who pressed Ctrl-C did not ask for.
    if upgrading.is_empty() || stopped_between_checks(run) {
        return Ok(decided);
    }
    // The package manager, the repository switch and kubeadm's plan are the kubeadm flow's: the openshift flavour
    // installs with yum between its excluders, the custom flavour runs only the operator's commands.
    let kubeadm = run.plan.flavor.flavor == Flavor::Kubeadm;
    check_drain_blockers(run, &upgrading).await?;
    check_auto_updates(run, &upgrading).await;
    if kubeadm {
        check_hosts(run, &upgrading).await?;
        if stopped_between_checks(run) {
            return Ok(decided);
        }
    }
    // Every flavour takes the etcd backup with upgrade_etcdctl and asks it for the members' health after each master.
    if run.plan.has_phase(Phase::EtcdBackup) || !decided.masters.is_empty() {
        check_etcdctl(run).await?;
    }
    if kubeadm && !decided.masters.is_empty() && !stopped_between_checks(run) {
        kubeadm_plan(run).await?;
    }
    // Every check passed: the target's packages and the masters' images are fetched now, before any window
    // (prefetch.rs; upgrade_prefetch, upgrade_prepull_images).
    if kubeadm && !stopped_between_checks(run) {
        let kubeadm_flow: Vec<String> =
            upgrading.iter().filter(|(h, p)| !custom_upgrade(run, h, *p)).map(|(h, _)| h.clone()).collect();
        crate::phase::prefetch::before_the_windows(run, &kubeadm_flow, &decided.masters).await?;
    }
    // After a signal preflight reads nothing more than it must.
    if !run.stop.is_stopping() {
        report_pending_csrs(run, Phase::Preflight).await;
    }
    Ok(decided)
}
