//! How the nodes are upgraded and along which versions, beyond the one-target, in-place default: the update graph
//! and its multi-hop paths. Read from the inventory like the other run-wide settings (a flag-less variable that the
//! hosts of the phase it governs must agree on), decided before anything connects, carried out by the executor.

pub mod graph;
pub mod hops;
pub mod versions;

use std::path::Path;

use serde_json::{Value, json};

use crate::error::Result;
use crate::inventory::{Origin, Vars};
use crate::settings::{HostVarsRef, Setting, Shown, run_wide};
pub use graph::UpdateGraph;

/// The strategy settings of a plan, each with its origin.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Strategy {
    /// `upgrade_update_graph`: the graph the target must be reachable in; a far target becomes a path of hops.
    pub update_graph: Option<Setting<UpdateGraph>>,
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
    /// target version does).
    pub fn resolve(all_hosts: HostVarsRef<'_>, extra: &Vars, base_dir: &Path) -> Result<Strategy> {
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
                let graph = UpdateGraph::load(&path).map_err(|e| match (&e.location, &origin) {
                    // A file that cannot be read is the variable's fault: point at it.
                    (None, Origin::Inventory(_) | Origin::GroupVars(_) | Origin::HostVars(_)) => {
                        crate::settings::located(e, "upgrade_update_graph", &origin)
                    }
                    _ => e,
                })?;
                Some(Setting { value: graph, source, origin })
            }
            _ => None,
        };
        Ok(Strategy { update_graph })
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
        json!({ "update_graph": graph })
    }

    /// Lines for the text plan.
    pub fn plan_text(&self, target: Option<&crate::settings::TargetVersion>) -> Vec<String> {
        let mut lines = Vec::new();
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
