//! The nodes in the order of the run's rule, from what the cluster reports: the run-time half of `nodes_order`.

use super::nodes_order::{NodeFacts, NodesOrder, ZONE_LABEL, zone_age};

/// The selected nodes in the order of the run's rule, from what the cluster reports (said when it differs from the
/// inventory's order).
pub(crate) fn for_run(
    run: &crate::phase::run::UpgradeRun,
    selected: Vec<String>,
    cluster: &std::collections::HashMap<String, crate::cluster::ClusterNode>,
) -> Vec<String> {
    if run.plan.strategy.order.value != NodesOrder::ZoneAge {
        return selected;
    }
    let ordered = zone_age(&selected, |h| {
        let node = cluster.get(&run.node_name(h));
        NodeFacts { labels: node.map(|n| &n.labels), created: node.map(|n| n.created.as_str()) }
    });
    run.notice(None, format!("zone-age order (by {ZONE_LABEL}, oldest first): {}", ordered.join(", ")));
    ordered
}
