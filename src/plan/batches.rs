//! Which nodes the selector keeps and the batches they are upgraded in: Ansible's `serial` arithmetic, the serial
//! groups, infra nodes first on OpenShift, and `max_fail_percentage`'s threshold.

use std::collections::{BTreeMap, BTreeSet};

use indexmap::IndexMap;

use crate::error::{Error, Result};
use crate::inventory::{Inventory, Vars};
use crate::settings::{LabelSelector, MaxFailPercentage, Serial, SerialItem, Setting, Settings};

/// Where the label selector reads the nodes' labels.
pub enum NodeLabels<'a> {
    /// `--plan`: the labels the inventory gives (`node_labels`, `openshift_node_group_name`).
    Offline,
    /// The run's preflight: the labels the cluster reports, by host.
    Cluster(&'a dyn Fn(&str) -> Option<&'a BTreeMap<String, String>>),
    /// A run's plan: the selector is not applied yet (preflight applies it).
    NotYet,
}

/// The nodes a label selector keeps, in the order they run, and their batches.
#[derive(Debug, Clone, PartialEq)]
pub struct NodeSelection {
    pub nodes: Vec<String>,
    /// The candidates the selector left out, in their order.
    pub left_out: Vec<String>,
    pub batches: Vec<Vec<String>>,
}

/// The one label selection and batching of the nodes phase, for `--plan` and for the run's preflight: keeps the
/// candidates the label setting matches (an error when it matches none and the nodes phase `needs_nodes`), lets
/// `order` put the kept nodes in run order (it is told which were left out), then cuts them into batches
/// ([`batch_nodes`]; `node_labels` are the offline labels that tell infra groups apart).
pub fn select_and_batch(
    candidates: &[String],
    labels: NodeLabels<'_>,
    needs_nodes: bool,
    settings: &Settings,
    node_labels: &IndexMap<String, BTreeMap<String, String>>,
    inventory: &Inventory,
    infra_first: bool,
    order: impl FnOnce(Vec<String>, &[String]) -> Result<Vec<String>>,
) -> Result<NodeSelection> {
    let labels_of = |host: &str| -> Option<&BTreeMap<String, String>> {
        match &labels {
            NodeLabels::Offline => node_labels.get(host),
            NodeLabels::Cluster(of) => of(host),
            NodeLabels::NotYet => None,
        }
    };
    let (kept, left_out): (Vec<String>, Vec<String>) = match (&settings.label.value, &labels) {
        (Some(selector), NodeLabels::Offline | NodeLabels::Cluster(_)) => {
            let (kept, left): (Vec<String>, Vec<String>) =
                candidates.iter().cloned().partition(|h| labels_of(h).is_some_and(|l| selector.matches(l)));
            if kept.is_empty() && needs_nodes {
                return Err(no_match_error(selector, &settings.label, candidates, &labels_of, &labels));
            }
            (kept, left)
        }
        _ => (candidates.to_vec(), Vec::new()),
    };
    let nodes = order(kept, &left_out)?;
    let batches = batch_nodes(&nodes, settings, node_labels, inventory, infra_first);
    Ok(NodeSelection { nodes, left_out, batches })
}

fn no_match_error<'a>(
    selector: &LabelSelector,
    setting: &Setting<Option<LabelSelector>>,
    candidates: &[String],
    labels_of: &dyn Fn(&str) -> Option<&'a BTreeMap<String, String>>,
    source: &NodeLabels<'_>,
) -> Error {
    let mut present: BTreeSet<String> = BTreeSet::new();
    for labels in candidates.iter().filter_map(|h| labels_of(h)) {
        present.extend(labels.iter().map(|(k, v)| format!("{k}={v}")));
    }
    let offline = matches!(source, NodeLabels::Offline);
    let hint = if candidates.is_empty() {
        "the plan has no nodes to select from (group `nodes` minus `masters`, after --limit)".to_string()
    } else if present.is_empty() && offline {
        "no node has labels offline: set node_labels (or openshift_node_group_name) on the nodes, or drop the selector"
            .to_string()
    } else {
        let shown: Vec<String> = present.iter().take(12).cloned().collect();
        let more = if present.len() > 12 { format!(" (and {} more)", present.len() - 12) } else { String::new() };
        format!("the nodes have these labels: {}{more}", shown.join(", "))
    };
    let read = if offline {
        " (evaluated offline against node_labels and openshift_node_group_name)"
    } else {
        ", by the labels the cluster reports"
    };
    Error::input(format!(
        "label selector `{selector}` ({}) matches none of the {} nodes{read}",
        setting.describe_origin(),
        candidates.len()
    ))
    .hint(hint)
}

/// The batches of the nodes phase. With one serial: `batch_hosts`; with `infra_first` (the openshift flavour, as
/// OpenShift 3.11's docs order control plane, infra nodes, then application nodes) the infra nodes first, in
/// batches of their own, then the others, a percentage being of each part. When node groups carry their own serial
/// (`upgrade_nodes_serial` in each group's variables), each group is batched on its own, infra groups first (a node
/// labelled node-role.kubernetes.io/infra=true offline, or in an inventory group whose name says infra), then the
/// others in inventory order; a percentage is of the group's selected nodes.
pub fn batch_nodes(
    nodes: &[String],
    settings: &Settings,
    node_labels: &IndexMap<String, BTreeMap<String, String>>,
    inventory: &Inventory,
    infra_first: bool,
) -> Vec<Vec<String>> {
    let no_extra = Vars::new();
    let is_infra = |host: &String| {
        node_labels.get(host).and_then(|l| l.get("node-role.kubernetes.io/infra")).is_some_and(|v| v == "true")
            || inventory.hosts.get(host).is_some_and(|h| h.groups.iter().any(|g| g != "all" && g.contains("infra")))
            // A node group of the operator's own naming (`node-config-infra-east`) has no labels offline.
            || (infra_first
                && inventory
                    .host_var(host, "openshift_node_group_name", &no_extra)
                    .and_then(|v| v.value.as_str())
                    .is_some_and(|g| g.contains("infra")))
    };
    if settings.serial_groups.is_empty() {
        let serial = &settings.serial.value;
        if !infra_first {
            return batch_hosts(nodes, serial);
        }
        let (infra, others): (Vec<String>, Vec<String>) = nodes.iter().cloned().partition(|h| is_infra(h));
        return batch_hosts(&infra, serial).into_iter().chain(batch_hosts(&others, serial)).collect();
    }
    let mut groups: Vec<(bool, Vec<String>, &Serial)> = settings
        .serial_groups
        .iter()
        .map(|g| {
            let hosts: Vec<String> = nodes.iter().filter(|h| g.hosts.contains(h)).cloned().collect();
            (hosts.iter().any(is_infra), hosts, &g.serial.value)
        })
        .collect();
    // Stable: infra groups first, otherwise the inventory order.
    groups.sort_by_key(|(infra, _, _)| !*infra);
    groups
        .iter()
        .filter(|(_, hosts, _)| !hosts.is_empty())
        .flat_map(|(_, hosts, serial)| batch_hosts(hosts, serial))
        .collect()
}

/// The batches of the nodes phase: the hosts in order, cut by `serial_batches`.
pub fn batch_hosts(hosts: &[String], serial: &Serial) -> Vec<Vec<String>> {
    let mut rest = hosts;
    let mut batches = Vec::new();
    for size in serial_batches(hosts.len(), serial) {
        let (batch, tail) = rest.split_at(size.min(rest.len()));
        batches.push(batch.to_vec());
        rest = tail;
    }
    batches
}

/// Batch sizes for `total` hosts, with Ansible's arithmetic (`_get_serialized_batches` and `pct_to_int`): entry i
/// of the serial list sizes batch i and the last entry repeats; a percentage is of `total`, truncated, at least 1; an
/// entry of 0 or less takes all the rest. The sizes add up to `total`.
pub fn serial_batches(total: usize, serial: &Serial) -> Vec<usize> {
    let items = serial.items();
    let mut sizes = Vec::new();
    let mut left = total;
    let mut index = 0;
    while left > 0 {
        let item = items.get(index).or(items.last()).copied().unwrap_or(SerialItem::Count(-1));
        let size = match item {
            // Python: int((pct / 100.0) * num_items) or 1, floating point included.
            SerialItem::Percent(p) => ((f64::from(p) / 100.0) * total as f64) as i64,
            SerialItem::Count(n) => n,
        };
        let size = match (item, size) {
            (SerialItem::Percent(_), 0) => 1,
            _ => size,
        };
        if size <= 0 {
            sizes.push(left);
            break;
        }
        let size = usize::try_from(size).unwrap_or(usize::MAX).min(left);
        sizes.push(size);
        left -= size;
        index = (index + 1).min(items.len().saturating_sub(1));
    }
    sizes
}

/// Whether a batch's failures stop the run: the failed share must *exceed* the percentage (Ansible's
/// `failed / batch_size > pct / 100.0`), and a batch where every host failed stops the run whatever the percentage.
pub fn threshold_exceeded(failed: usize, batch_size: usize, max_fail: MaxFailPercentage) -> bool {
    if failed == 0 || batch_size == 0 {
        return false;
    }
    if failed >= batch_size {
        return true;
    }
    failed as f64 / batch_size as f64 > max_fail.percent() / 100.0
}
