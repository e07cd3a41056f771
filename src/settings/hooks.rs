//! Hooks: the hook points, the variables that name them, and resolving a hook variable to its task file (in one place).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::{readers::*, resolve::*};
use crate::error::{Error, Result};
use crate::inventory::{Origin, Var, Vars};

/// The places in a host's sequence where an operator's task file runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum HookPoint {
    MasterPre,
    MasterMid,
    MasterPost,
    /// Before the node is cordoned, while it still takes work (an acknowledgement pause, a check of the node in
    /// service). openshift-ansible has no such point: its `openshift_node_upgrade_pre_hook` runs after the cordon and
    /// the drain (release-3.11 upgrade_nodes.yml), so that alias stays with `NodePre`.
    NodePreCordon,
    NodePreDrain,
    NodePre,
    NodeMid,
    NodePost,
    /// Once per run, on the first master: before the control plane, between it and the nodes, after the nodes.
    ClusterPre,
    ClusterMid,
    ClusterPost,
}

impl HookPoint {
    pub const MASTER: [HookPoint; 3] = [HookPoint::MasterPre, HookPoint::MasterMid, HookPoint::MasterPost];
    pub const NODE: [HookPoint; 5] = [
        HookPoint::NodePreCordon,
        HookPoint::NodePreDrain,
        HookPoint::NodePre,
        HookPoint::NodeMid,
        HookPoint::NodePost,
    ];
    pub const CLUSTER: [HookPoint; 3] = [HookPoint::ClusterPre, HookPoint::ClusterMid, HookPoint::ClusterPost];

    /// Short name for output: `pre`, `mid`, `post`, `pre-cordon`, `pre-drain`.
    pub fn name(self) -> &'static str {
        match self {
            HookPoint::MasterPre | HookPoint::NodePre => "pre",
            HookPoint::MasterMid | HookPoint::NodeMid => "mid",
            HookPoint::MasterPost | HookPoint::NodePost => "post",
            HookPoint::NodePreCordon => "pre-cordon",
            HookPoint::NodePreDrain => "pre-drain",
            HookPoint::ClusterPre => "cluster-pre",
            HookPoint::ClusterMid => "cluster-mid",
            HookPoint::ClusterPost => "cluster-post",
        }
    }

    /// Stable key for machine-readable output.
    pub fn key(self) -> &'static str {
        match self {
            HookPoint::MasterPre => "master_pre",
            HookPoint::MasterMid => "master_mid",
            HookPoint::MasterPost => "master_post",
            HookPoint::NodePreCordon => "node_pre_cordon",
            HookPoint::NodePreDrain => "node_pre_drain",
            HookPoint::NodePre => "node_pre",
            HookPoint::NodeMid => "node_mid",
            HookPoint::NodePost => "node_post",
            HookPoint::ClusterPre => "cluster_pre",
            HookPoint::ClusterMid => "cluster_mid",
            HookPoint::ClusterPost => "cluster_post",
        }
    }

    /// The canonical variable and the openshift-ansible alias (the canonical one again where there is none).
    pub fn variables(self) -> (&'static str, &'static str) {
        match self {
            HookPoint::MasterPre => ("upgrade_master_pre_hook", "openshift_master_upgrade_pre_hook"),
            HookPoint::MasterMid => ("upgrade_master_mid_hook", "openshift_master_upgrade_hook"),
            HookPoint::MasterPost => ("upgrade_master_post_hook", "openshift_master_upgrade_post_hook"),
            // openshift-ansible has no hook before the cordon: no alias.
            HookPoint::NodePreCordon => ("upgrade_node_pre_cordon_hook", "upgrade_node_pre_cordon_hook"),
            HookPoint::NodePreDrain => ("upgrade_node_pre_drain_hook", "openshift_node_upgrade_pre_drain_hook"),
            HookPoint::NodePre => ("upgrade_node_pre_hook", "openshift_node_upgrade_pre_hook"),
            HookPoint::NodeMid => ("upgrade_node_mid_hook", "openshift_node_upgrade_hook"),
            HookPoint::NodePost => ("upgrade_node_post_hook", "openshift_node_upgrade_post_hook"),
            // openshift-ansible has no cluster-level hooks: no alias.
            HookPoint::ClusterPre => ("upgrade_cluster_pre_hook", "upgrade_cluster_pre_hook"),
            HookPoint::ClusterMid => ("upgrade_cluster_mid_hook", "upgrade_cluster_mid_hook"),
            HookPoint::ClusterPost => ("upgrade_cluster_post_hook", "upgrade_cluster_post_hook"),
        }
    }
}

/// A hook task file one host runs, resolved to a path that exists.
#[derive(Debug, Clone, PartialEq)]
pub struct Hook {
    pub path: PathBuf,
    /// The variable that named it (canonical or alias) and where that was set.
    pub variable: String,
    pub origin: Origin,
}

/// A host's hooks by hook point; only the points that are set.
pub type HostHooks = BTreeMap<HookPoint, Hook>;

/// Reads the hooks of `points` from one host's variables; relative paths resolve against `base_dir`.
pub fn resolve_hooks(host: &str, vars: &Vars, points: &[HookPoint], base_dir: &Path) -> Result<HostHooks> {
    let mut hooks = HostHooks::new();
    for &point in points {
        let (canonical, alias) = point.variables();
        let Some((name, var)) = pick(vars, canonical, alias) else { continue };
        let Some(path) = hook_file(host, name, var, base_dir)? else { continue };
        hooks.insert(point, Hook { path, variable: name.to_string(), origin: var.origin.clone() });
    }
    Ok(hooks)
}

/// The task file a hook variable names, checked: a path (not another type, not a template) to a file that exists.
/// The one place hooks are resolved: the hooks of every hook point (`resolve_hooks`) and blue-green's surge hooks.
pub(crate) fn hook_file(host: &str, name: &str, var: &Var, base_dir: &Path) -> Result<Option<PathBuf>> {
    let path = match hook_path(&var.value, base_dir) {
        Ok(None) => return Ok(None),
        Ok(Some(path)) => path,
        Err(type_name) => {
            return Err(located(
                Error::input(format!("{name} (for {host}) is {type_name}, not a path to a task file"))
                    .hint("set it to the path of an Ansible task list, e.g. hooks/pre.yml"),
                name,
                &var.origin,
            ));
        }
    };
    if let Value::String(text) = &var.value {
        reject_template(name, text.trim(), &var.origin)?;
    }
    if !path.is_file() {
        return Err(located(
            Error::input(format!("{name} (for {host}) names {}, which does not exist", path.display())).hint(format!(
                "create the task file, or fix the path (relative paths resolve against {})",
                base_dir.display()
            )),
            name,
            &var.origin,
        ));
    }
    Ok(Some(path))
}

/// The task file a hook variable's value names, resolved the one way the run, `upgrade check` and blue-green's surge
/// hooks all use: trimmed, `~/` expanded, relative paths against `base_dir`. `Ok(None)` when unset or empty; the
/// value's type name when it is not a string.
pub fn hook_path(value: &Value, base_dir: &Path) -> std::result::Result<Option<PathBuf>, &'static str> {
    match value {
        Value::Null => Ok(None),
        Value::String(s) if s.trim().is_empty() => Ok(None),
        Value::String(s) => Ok(Some(resolve_path(s.trim(), base_dir))),
        other => Err(type_name(other)),
    }
}

/// The inventory variables that name hook files: ours and openshift-ansible's, and blue-green's surge hooks.
pub const HOOK_VARIABLES: &[&str] = &[
    "upgrade_master_pre_hook",
    "upgrade_master_mid_hook",
    "upgrade_master_post_hook",
    "upgrade_node_pre_cordon_hook",
    "upgrade_node_pre_drain_hook",
    "upgrade_node_pre_hook",
    "upgrade_node_mid_hook",
    "upgrade_node_post_hook",
    "upgrade_cluster_pre_hook",
    "upgrade_cluster_mid_hook",
    "upgrade_cluster_post_hook",
    "openshift_master_upgrade_pre_hook",
    "openshift_master_upgrade_hook",
    "openshift_master_upgrade_post_hook",
    "openshift_node_upgrade_pre_drain_hook",
    "openshift_node_upgrade_pre_hook",
    "openshift_node_upgrade_hook",
    "openshift_node_upgrade_post_hook",
    "upgrade_node_surge_add_hook",
    "upgrade_node_surge_remove_hook",
];

/// Every hook file any host of the inventory names (by [`hook_path`], as a run resolves it), without duplicates.
pub fn hook_files(inventory: &crate::inventory::Inventory, extra: &Vars) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = Vec::new();
    for host in inventory.hosts.keys() {
        let vars = inventory.host_vars(host, extra);
        for name in HOOK_VARIABLES {
            let Some(Ok(Some(path))) = vars.get(*name).map(|v| hook_path(&v.value, &inventory.dir)) else { continue };
            if !files.contains(&path) {
                files.push(path);
            }
        }
    }
    files
}

pub(crate) fn resolve_path(text: &str, base_dir: &Path) -> PathBuf {
    if let Some(rest) = text.strip_prefix("~/") {
        if let Some(home) = std::env::var_os("HOME") {
            return PathBuf::from(home).join(rest);
        }
    }
    let path = PathBuf::from(text);
    if path.is_absolute() { path } else { base_dir.join(path) }
}
