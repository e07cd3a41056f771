//! How the nodes are upgraded and along which versions, beyond the one-target, in-place default: the update graph
//! and its multi-hop paths. Read from the inventory like the other run-wide settings (a flag-less variable that the
//! hosts of the phase it governs must agree on), decided before anything connects, carried out by the executor.

pub(crate) mod blue_green;
pub(crate) mod final_soak;
pub(crate) mod graph;
pub(crate) mod hops;
pub(crate) mod nodes_order;
pub(crate) mod nodes_strategy;
pub(crate) mod order;
pub(crate) mod rollback;
pub(crate) mod versions;

use serde_json::{Value, json};

use crate::error::Result;
use crate::inventory::{Origin, Vars};
use crate::settings::{HostVarsRef, Setting, Shown, run_wide};
pub(crate) use graph::UpdateGraph;
pub(crate) use nodes_order::NodesOrder;
pub(crate) use nodes_strategy::BlueGreen;

/// The strategy settings of a plan, each with its origin.
#[derive(Debug, Clone, PartialEq)]
pub struct Strategy {
    /// `upgrade_update_graph`: the graph the target must be reachable in; a far target becomes a path of hops.
    pub update_graph: Option<Setting<UpdateGraph>>,
    /// `upgrade_nodes_order`: the order the nodes phase takes the nodes in.
    pub order: Setting<NodesOrder>,
    /// `upgrade_nodes_strategy` and the blue-green settings.
    pub blue_green: BlueGreen,
}

impl Shown for String {
    fn shown(&self) -> String {
        format!("`{self}`")
    }
}

/// A variable's value as text; null and blank text mean unset.
fn text_value(value: &Value) -> Result<Option<String>> {
    match value {
        Value::Null => Ok(None),
        Value::String(s) if s.trim().is_empty() => Ok(None),
        Value::String(s) => Ok(Some(s.trim().to_string())),
        other => Ok(Some(other.to_string())),
    }
}

impl Strategy {
    /// Reads the strategy settings: the update graph over every host of the plan (it governs the target, as the
    /// target version does), the others over the nodes.
    pub fn resolve(
        node_hosts: HostVarsRef<'_>,
        all_hosts: HostVarsRef<'_>,
        extra: &Vars,
        inventory: &crate::inventory::Inventory,
    ) -> Result<Strategy> {
        let base_dir = inventory.dir.as_path();
        let order = run_wide(
            "upgrade_nodes_order",
            None,
            ("upgrade_nodes_order", "upgrade_nodes_order"),
            node_hosts,
            extra,
            NodesOrder::parse,
            NodesOrder::from_value,
        )?
        .unwrap_or(Setting { value: NodesOrder::Inventory, source: None, origin: Origin::Default });
        let graph = run_wide(
            "upgrade_update_graph",
            None,
            ("upgrade_update_graph", "upgrade_update_graph"),
            all_hosts,
            extra,
            |s| text_value(&Value::String(s.to_string())),
            text_value,
        )?;
        let update_graph = match graph {
            Some(Setting { value: Some(text), source, origin }) => {
                let path = crate::settings::resolve_path(&text, base_dir);
                let graph = UpdateGraph::load(&path).map_err(|e| match &e.location {
                    // A file that cannot be read is the variable's fault: point at it.
                    None => crate::settings::located(e, "upgrade_update_graph", &origin),
                    Some(_) => e,
                })?;
                Some(Setting { value: graph, source, origin })
            }
            _ => None,
        };
        let blue_green = BlueGreen::resolve(node_hosts, extra, inventory)?;
        Ok(Strategy { update_graph, order, blue_green })
    }

    /// The nodes in the order the nodes phase takes them, as far as the inventory tells (`node_labels` for the zone;
    /// the ages are known only at run time, when preflight orders them again from what the cluster reports).
    pub fn order_offline(
        &self,
        nodes: Vec<String>,
        labels: &indexmap::IndexMap<String, std::collections::BTreeMap<String, String>>,
    ) -> Vec<String> {
        match self.order.value {
            NodesOrder::Inventory => nodes,
            NodesOrder::ZoneAge => {
                nodes_order::zone_age(&nodes, |h| nodes_order::NodeFacts { labels: labels.get(h), created: None })
            }
        }
    }

    /// The keys `--plan --output json` adds for the strategies.
    pub fn plan_json(&self, target: Option<&crate::settings::TargetVersion>) -> Value {
        let graph = self.update_graph.as_ref().map(|g| {
            // Offline the running version is unknown: the path from every version of the graph that reaches the
            // target is shown; the run picks the one from the version the masters report.
            let hops_from: serde_json::Map<String, Value> = match target {
                Some(target) => g
                    .value
                    .versions()
                    .iter()
                    .filter(|v| *v < target)
                    .filter_map(|from| {
                        let path = g.value.path(from, target)?;
                        Some((from.to_string(), json!(path.iter().map(ToString::to_string).collect::<Vec<_>>())))
                    })
                    .collect(),
                None => serde_json::Map::new(),
            };
            json!({
                "file": g.value.path.display().to_string(),
                "origin": g.describe_origin(),
                "hops_from": hops_from,
            })
        });
        let order = json!({
            "rule": self.order.value.name(),
            "origin": self.order.describe_origin(),
            "reordered_at_run_time": self.order.value == NodesOrder::ZoneAge,
        });
        json!({ "update_graph": graph, "nodes_order": order, "nodes_strategy": self.blue_green.plan_json() })
    }

    /// Lines for the text plan.
    pub fn plan_text(&self, target: Option<&crate::settings::TargetVersion>) -> Vec<String> {
        let mut lines = self.blue_green.plan_text();
        if self.order.value == NodesOrder::ZoneAge {
            lines.push(format!(
                "Node order: zone-age ({}): by the {} label, oldest first within a zone. The batches above follow \
                 the zones of node_labels; the run orders the nodes again by the labels and creation times the \
                 cluster reports.",
                self.order.describe_origin(),
                nodes_order::ZONE_LABEL
            ));
        }
        if let Some(g) = &self.update_graph {
            lines.push(format!("Update graph: {} ({})", g.value.path.display(), g.describe_origin()));
            match target {
                Some(target) if g.value.contains(target) => {
                    lines.push(format!(
                        "  the run reads the version the masters run and walks the graph to {target}, one hop at a \
                         time (each hop a complete upgrade: etcd backup, control plane, nodes, verify):"
                    ));
                    for from in g.value.versions().iter().filter(|v| *v < target) {
                        if let Some(path) = g.value.path(from, target) {
                            let hops: Vec<String> = path.iter().map(ToString::to_string).collect();
                            lines.push(format!("    from {from}: {}", hops.join(" -> ")));
                        }
                    }
                }
                Some(target) => lines.push(format!("  the target {target} is not in the graph: preflight refuses it")),
                None => {}
            }
        }
        lines
    }
}
