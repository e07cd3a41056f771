//! The cluster's health before anything moves: nodes Ready, versions within the skew policy.

use std::collections::{BTreeSet, HashMap};

use super::decision::*;
use crate::cluster::ClusterNode;
use crate::error::{Error, Result};
use crate::flavor::Flavor;
use crate::phase::run::UpgradeRun;
use crate::settings::TargetVersion;
use crate::vocabulary::Phase;

/// The hosts this run upgrades (masters to upgrade, selected nodes not at the target), as inventory names.
pub(super) fn to_touch(decided: &Preflight) -> Vec<String> {
    let nodes = decided.node_batches.iter().flatten().filter(|h| !decided.nodes_skipped.contains_key(*h));
    decided.masters.iter().chain(nodes).cloned().collect()
}

/// The cluster's health before anything moves: every node the run will touch Ready (or accepted by name in
/// `upgrade_preflight_allow_not_ready`), the others that are not Ready said; when the masters move, no node left
/// behind more minors than the kubelet skew policy allows (`upgrade_max_kubelet_skew`).
pub(super) fn health_gate(run: &UpgradeRun, cluster: &HashMap<String, ClusterNode>, decided: &Preflight) -> Result<()> {
    let allowed = run.host_list(&run.first_master, "upgrade_preflight_allow_not_ready");
    let touched = to_touch(decided);
    let touched_nodes: BTreeSet<String> = touched.iter().map(|h| run.node_name(h)).collect();
    let (mut refused, mut accepted) = (Vec::new(), Vec::new());
    for host in &touched {
        let node = run.node_name(host);
        // A node an earlier run of this target left half-way may be NotReady because of that run: it is finished.
        let resumed = unfinished(run, Phase::ControlPlane, host) || unfinished(run, Phase::Nodes, host);
        if cluster.get(&node).is_some_and(|n| !n.ready) && !resumed {
            if allowed.iter().any(|a| *a == node || a == host) { accepted.push(node) } else { refused.push(node) }
        }
    }
    let mut others: Vec<&str> =
        cluster.values().filter(|n| !n.ready && !touched_nodes.contains(&n.name)).map(|n| n.name.as_str()).collect();
    others.sort();
    if !others.is_empty() {
        run.notice(None, format!("not Ready, and not touched by this run: {}", others.join(", ")));
    }
    if !accepted.is_empty() {
        run.notice(
            None,
            format!("not Ready, upgraded anyway (upgrade_preflight_allow_not_ready): {}", accepted.join(", ")),
        );
    }
    if !refused.is_empty() {
        return Err(Error::hosts_failed(format!(
            "preflight: nodes this run would upgrade are not Ready: {}",
            refused.join(", ")
        ))
        .hint(
            "make them Ready first, or accept them by name in upgrade_preflight_allow_not_ready (a list) to upgrade \
             them as they are; nothing was changed",
        ));
    }
    // The openshift flavour's target is an OpenShift release (v3.11.248), not a kubelet version (v1.11.0): no skew
    // to compute, and 3.11 comes only from 3.10.
    if decided.masters.is_empty() || run.plan.flavor.flavor == Flavor::Openshift {
        return Ok(());
    }
    let skew = max_kubelet_skew(run);
    let target = &run.target;
    let mut behind: Vec<String> = cluster
        .values()
        .filter(|n| !touched_nodes.contains(&n.name))
        .filter_map(|n| TargetVersion::parse(&n.kubelet_version).ok().map(|v| (n, v)))
        .filter(|(_, v)| v.major != target.major || target.minor > v.minor + skew)
        .map(|(n, _)| format!("{} ({})", n.name, n.kubelet_version))
        .collect();
    behind.sort();
    if behind.is_empty() {
        return Ok(());
    }
    Err(Error::hosts_failed(format!(
        "preflight: after the masters move to {target}, these kubelets would be more than {skew} minor versions behind \
         (the supported skew): {}",
        behind.join(", ")
    ))
    .hint(
        "upgrade those nodes in steps first, or include them in this run (--limit, the label selector); \
         upgrade_max_kubelet_skew sets the allowed skew; nothing was changed",
    ))
}

/// Kubernetes' version skew policy: kubelets may be 3 minors older than the API server from 1.28 on, 2 before.
pub(super) fn max_kubelet_skew(run: &UpgradeRun) -> u64 {
    let default = if run.target.major == 1 && run.target.minor < 28 { 2 } else { 3 };
    let text = run.render_for(&run.first_master, "{{ upgrade_max_kubelet_skew | default('') }}");
    text.trim().parse().unwrap_or(default)
}
