//! What this tool writes on the Nodes it works on, and reads back: who cordoned a node (`upgrade-tool.io/cordoned-by`,
//! `-at`, `change-id`), and the disruption guards that keep cluster-autoscaler and Karpenter off it while the run
//! works on it (`upgrade-tool.io/guards` lists those this tool set). The marks live on the Node, not in the journal,
//! so any later run (`--fresh`, another state directory, another controller, `--rollback-blue-green`) reads the same
//! answer to "was it cordoned before the run?" (R7, N3).

use serde_json::Value;

use super::run::UpgradeRun;
use crate::cluster::{ClusterNode, annotations};

/// The host's node as preflight read it (with its annotations).
pub(crate) fn node_before(run: &UpgradeRun, host: &str) -> Option<ClusterNode> {
    let node = run.node_name(host);
    run.cluster_before.lock().ok().and_then(|c| c.get(&node).cloned())
}

/// Cordoned before the run: unschedulable in preflight's read and not marked by an upgrade run.
pub(crate) fn cordoned_by_someone_else(run: &UpgradeRun, host: &str) -> bool {
    node_before(run, host).is_some_and(|n| n.cordoned_by_someone_else())
}

/// The change ticket of the run (`upgrade_change_id`), recorded on what the run marks; empty when not set.
pub(crate) fn change_id(run: &UpgradeRun, host: &str) -> String {
    run.render_for(host, "{{ upgrade_change_id | default('') }}").trim().to_string()
}

/// The guards this run may set and remove on the host's node: see `ClusterNode::guards_to_own`. A node preflight did
/// not see (joined since) has none yet.
fn guards(run: &UpgradeRun, host: &str) -> Vec<&'static str> {
    node_before(run, host).map(|n| n.guards_to_own()).unwrap_or_else(|| annotations::DISRUPTION_GUARDS.to_vec())
}

/// The variables of cordon.yml: the annotations set before the cordon, and whether the cordon itself is left out (a
/// node cordoned by someone else keeps their cordon; it still gets the guards while the run works on it).
/// `guarded`: whether the run works on the node now (its guards are set); a rollback's cordon of a green node is not.
pub(crate) fn cordon_vars(
    run: &UpgradeRun,
    host: &str,
    was_cordoned: bool,
    guarded: bool,
) -> Vec<(&'static str, Value)> {
    let mut set = Vec::new();
    if !was_cordoned {
        let now = crate::time_format::utc_timestamp(std::time::SystemTime::now());
        set.push(format!("{}={}", annotations::CORDONED_BY, run.run_id()));
        set.push(format!("{}={now}", annotations::CORDONED_AT));
        let change = change_id(run, host);
        if !change.is_empty() {
            set.push(format!("{}={change}", annotations::CHANGE_ID));
        }
    }
    let guards = if guarded { guards(run, host) } else { Vec::new() };
    if !guards.is_empty() {
        set.extend(guards.iter().map(|g| format!("{g}=true")));
        set.push(format!("{}={}", annotations::GUARDS, guards.join(",")));
    }
    vec![("upgrade_node_annotations", Value::from(set)), ("upgrade_node_was_cordoned", Value::Bool(was_cordoned))]
}

/// The variables of uncordon.yml: the annotations removed after the uncordon (the cordon mark unless the cordon
/// is left, and the guards this tool owns, always: the node is done).
pub(crate) fn uncordon_vars(run: &UpgradeRun, host: &str, was_cordoned: bool) -> Vec<(&'static str, Value)> {
    let mut remove: Vec<String> = Vec::new();
    if !was_cordoned {
        remove.extend([annotations::CORDONED_BY, annotations::CORDONED_AT, annotations::CHANGE_ID].map(String::from));
    }
    remove.extend(guards(run, host).into_iter().map(String::from));
    remove.push(annotations::GUARDS.to_string());
    let remove: Vec<String> = remove.into_iter().map(|k| format!("{k}-")).collect();
    vec![
        ("upgrade_node_annotations_removed", Value::from(remove)),
        ("upgrade_node_was_cordoned", Value::Bool(was_cordoned)),
    ]
}
