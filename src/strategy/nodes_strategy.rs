//! The nodes strategy as the inventory asks for it: in place (the default) or blue-green, with the blue-green
//! settings (the green group, the label, deleting the evacuated nodes, the surge hooks). `blue_green` carries it out.

use std::collections::BTreeSet;
use std::fmt;
use std::path::PathBuf;

use indexmap::IndexMap;
use serde_json::{Value, json};

use crate::error::{Error, Result};
use crate::inventory::{Inventory, Origin, Vars};
use crate::settings::{DrainTimeout, HostVarsRef, Setting, Shown, run_wide};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum NodesStrategy {
    #[default]
    InPlace,
    BlueGreen,
}

impl NodesStrategy {
    pub fn parse(text: &str) -> Result<NodesStrategy> {
        match text.trim().trim_matches(|c| c == '"' || c == '\'') {
            "in-place" => Ok(NodesStrategy::InPlace),
            "blue-green" => Ok(NodesStrategy::BlueGreen),
            other => Err(Error::input(format!("upgrade_nodes_strategy `{other}` is not a strategy this tool knows"))
                .hint("write in-place (upgrade each node, the default) or blue-green (evacuate the old nodes onto new ones)")),
        }
    }

    pub fn from_value(value: &Value) -> Result<NodesStrategy> {
        match value {
            Value::String(s) => NodesStrategy::parse(s),
            other => NodesStrategy::parse(&other.to_string()),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            NodesStrategy::InPlace => "in-place",
            NodesStrategy::BlueGreen => "blue-green",
        }
    }
}

impl fmt::Display for NodesStrategy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl Shown for NodesStrategy {
    fn shown(&self) -> String {
        format!("`{self}`")
    }
}

/// The controller-side hooks of one blue node.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SurgeHooks {
    pub add: Option<PathBuf>,
    pub remove: Option<PathBuf>,
}

/// The blue-green settings of a plan.
#[derive(Debug, Clone, PartialEq)]
pub struct BlueGreen {
    pub strategy: Setting<NodesStrategy>,
    /// `upgrade_green_group` (default `new_nodes`) and its hosts.
    pub green_group: String,
    pub green: Vec<String>,
    /// `upgrade_blue_green_label` (default `color`): the label key set to `blue` and `green`.
    pub label: String,
    /// `upgrade_blue_green_delete_nodes`: delete each evacuated blue node's object.
    pub delete_nodes: bool,
    /// The surge hooks of each node that has any.
    pub surge: IndexMap<String, SurgeHooks>,
    /// `upgrade_green_min_ready`: how many green nodes must be Ready and schedulable before each batch of blue
    /// nodes is evacuated (`None`: all of them).
    pub green_min_ready: Option<usize>,
    /// `upgrade_blue_green_final_soak_seconds`: once every blue node is evacuated, how long the run keeps them
    /// cordoned and watched for a rollback before it finishes (0: no soak).
    pub final_soak_seconds: u64,
}

pub(crate) const FINAL_SOAK: &str = "upgrade_blue_green_final_soak_seconds";

pub(super) const ADD_HOOK: &str = "upgrade_node_surge_add_hook";
pub(super) const REMOVE_HOOK: &str = "upgrade_node_surge_remove_hook";

impl BlueGreen {
    pub fn enabled(&self) -> bool {
        self.strategy.value == NodesStrategy::BlueGreen
    }

    pub fn resolve(node_hosts: HostVarsRef<'_>, extra: &Vars, inventory: &Inventory) -> Result<BlueGreen> {
        let text = |s: &str| Ok(s.trim().trim_matches(|c| c == '"' || c == '\'').to_string());
        let value_text = |v: &Value| match v {
            Value::String(s) => text(s),
            other => Ok(other.to_string()),
        };
        let strategy = run_wide(
            "upgrade_nodes_strategy",
            None,
            ("upgrade_nodes_strategy", "upgrade_nodes_strategy"),
            node_hosts,
            extra,
            NodesStrategy::parse,
            NodesStrategy::from_value,
        )?
        .unwrap_or(Setting { value: NodesStrategy::InPlace, source: None, origin: Origin::Default });
        let read = |name: &str, default: &str| -> Result<String> {
            let found = run_wide(name, None, (name, name), node_hosts, extra, text, value_text)?;
            Ok(found.map(|s| s.value).filter(|v| !v.is_empty()).unwrap_or_else(|| default.to_string()))
        };
        let green_group = read("upgrade_green_group", "new_nodes")?;
        let label = read("upgrade_blue_green_label", "color")?;
        let delete_nodes = run_wide(
            "upgrade_blue_green_delete_nodes",
            None,
            ("upgrade_blue_green_delete_nodes", "upgrade_blue_green_delete_nodes"),
            node_hosts,
            extra,
            |s| bool_value(&Value::String(s.to_string())),
            bool_value,
        )?
        .is_some_and(|s| s.value);
        let mut surge = IndexMap::new();
        if strategy.value == NodesStrategy::BlueGreen {
            for (host, vars) in node_hosts {
                let hooks = SurgeHooks {
                    add: surge_hook(host, vars, ADD_HOOK, &inventory.dir)?,
                    remove: surge_hook(host, vars, REMOVE_HOOK, &inventory.dir)?,
                };
                if hooks != SurgeHooks::default() {
                    surge.insert(host.to_string(), hooks);
                }
            }
        }
        let green = inventory.group_hosts(&green_group).unwrap_or_default();
        let min_ready = read("upgrade_green_min_ready", "")?;
        let green_min_ready = if min_ready.is_empty() || min_ready == "all" {
            None
        } else {
            // A count the green group cannot reach would stop every run before its first batch: said now (exit 2).
            let n = min_ready.parse::<usize>().ok().filter(|n| *n >= 1 && (green.is_empty() || *n <= green.len()));
            Some(n.ok_or_else(|| {
                Error::input(format!(
                    "upgrade_green_min_ready `{min_ready}` is not a count of green nodes between 1 and {}",
                    green.len().max(1)
                ))
                .in_file(&inventory.path)
                .hint("write a whole number of green nodes, or `all` (the default)")
            })?)
        };
        let final_soak = run_wide(
            FINAL_SOAK,
            None,
            (FINAL_SOAK, FINAL_SOAK),
            node_hosts,
            extra,
            DrainTimeout::parse,
            DrainTimeout::from_value,
        )
        .map_err(|e| {
            Error { message: format!("{FINAL_SOAK}: {}", e.message), ..e }
                .hint("write seconds (3600) or a duration such as \"1h\"; 0 for no final soak")
        })?;
        let final_soak_seconds = final_soak.as_ref().map_or(0, |s| s.value.seconds());
        // The soak keeps the blue nodes for a rollback: nothing may remove them meanwhile.
        if final_soak_seconds > 0 && strategy.value == NodesStrategy::BlueGreen {
            let removes = if delete_nodes {
                Some("upgrade_blue_green_delete_nodes: true deletes each blue node's object")
            } else if surge.values().any(|h| h.remove.is_some()) {
                Some("an upgrade_node_surge_remove_hook removes each blue node")
            } else {
                None
            };
            if let Some(removes) = removes {
                return Err(Error::input(format!(
                    "{FINAL_SOAK} keeps the blue nodes for a rollback, but {removes} as soon as it is evacuated"
                ))
                .in_file(&inventory.path)
                .hint(format!("set {FINAL_SOAK}: 0, or keep the blue nodes (no deletion, no surge remove hook)")));
            }
        }
        Ok(BlueGreen { strategy, green_group, green, label, delete_nodes, surge, green_min_ready, final_soak_seconds })
    }

    /// Checks what the plan can check offline: something to take the load of the blue nodes.
    pub fn check(&self, blue: &[String], inventory: &Inventory) -> Result<()> {
        if !self.enabled() || blue.is_empty() {
            return Ok(());
        }
        let surging = blue.iter().all(|h| self.surge.get(h).is_some_and(|s| s.add.is_some()));
        if self.green.is_empty() && !surging {
            return Err(Error::input(format!(
                "upgrade_nodes_strategy is blue-green ({}) but the green group `{}` has no hosts",
                self.strategy.describe_origin(),
                self.green_group
            ))
            .in_file(&inventory.path)
            .hint(format!(
                "list the new nodes (already at the target) in group `{}` (or name another with upgrade_green_group), \
                 or give each old node an {ADD_HOOK} that adds its replacement",
                self.green_group
            )));
        }
        Ok(())
    }

    /// The blue nodes: the selected nodes that are not green.
    pub fn blue(&self, nodes: Vec<String>) -> Vec<String> {
        if !self.enabled() {
            return nodes;
        }
        let green: BTreeSet<&String> = self.green.iter().collect();
        nodes.into_iter().filter(|h| !green.contains(h)).collect()
    }

    pub fn plan_json(&self) -> Value {
        if !self.enabled() {
            return json!({"name": self.strategy.value.name(), "origin": self.strategy.describe_origin()});
        }
        let path = |p: &Option<PathBuf>| p.as_ref().map(|p| p.display().to_string());
        let surge: serde_json::Map<String, Value> = self
            .surge
            .iter()
            .map(|(h, s)| (h.clone(), json!({"add": path(&s.add), "remove": path(&s.remove)})))
            .collect();
        json!({
            "name": self.strategy.value.name(),
            "origin": self.strategy.describe_origin(),
            "green_group": self.green_group,
            "green": self.green,
            "label": self.label,
            "delete_nodes": self.delete_nodes,
            "green_min_ready": self.green_min_ready,
            "final_soak_seconds": self.final_soak_seconds,
            "surge_hooks": surge,
        })
    }

    pub fn plan_text(&self) -> Vec<String> {
        if !self.enabled() {
            return Vec::new();
        }
        let mut lines = vec![
            format!("Nodes strategy: blue-green ({})", self.strategy.describe_origin()),
            format!(
                "  green (group {}, must be Ready at the target): {}",
                self.green_group,
                if self.green.is_empty() { "none (surge hooks add them)".to_string() } else { self.green.join(", ") }
            ),
            format!(
                "  label {0}=blue / {0}=green; green made schedulable, blue unschedulable, then the blue nodes of the \
                 nodes phase are evacuated in its batches (not upgraded); their node objects are {1}",
                self.label,
                if self.delete_nodes { "deleted (upgrade_blue_green_delete_nodes)" } else { "kept" }
            ),
        ];
        if self.final_soak_seconds > 0 {
            lines.push(format!(
                "  final soak: the blue nodes stay cordoned {}s after the last is evacuated ({FINAL_SOAK}); \
                 --rollback-blue-green gives the workload back during or after it",
                self.final_soak_seconds
            ));
        }
        for (host, hooks) in &self.surge {
            let show = |p: &Option<PathBuf>| p.as_ref().map_or("-".to_string(), |p| p.display().to_string());
            lines.push(format!("  {host} surge hooks: add {}, remove {}", show(&hooks.add), show(&hooks.remove)));
        }
        lines
    }
}

fn bool_value(value: &Value) -> Result<bool> {
    crate::ansible_compat::boolean(value).ok_or_else(|| {
        Error::input(format!("upgrade_blue_green_delete_nodes `{value}` is not a boolean")).hint("write true or false")
    })
}

fn surge_hook(host: &str, vars: &Vars, name: &str, base_dir: &std::path::Path) -> Result<Option<PathBuf>> {
    let Some(var) = vars.get(name) else { return Ok(None) };
    crate::settings::hook_file(host, name, var, base_dir)
}
