//! What makes the cluster valid between two batches (and between two masters), read from four lists the first master
//! reads (`get nodes`, `get pods --all-namespaces`, `get deployments,statefulsets,daemonsets,replicasets
//! --all-namespaces`, `get pdb --all-namespaces`, all `-o json`):
//! - every node Ready that was Ready before the run;
//! - every kube-system pod that was Running and Ready before the run is again (one gone is judged by its
//!   controller); one that was not before the run is reported once, never waited for;
//! - every workload that had a pod on a drained node (its Deployment, StatefulSet, DaemonSet or ReplicaSet) back to
//!   its desired available count;
//! - every PodDisruptionBudget that selects a pod the next batch's drain will evict allows at least one disruption
//!   (one that allowed none before the run is not waited for: the drain meets it).
//!
//! kOps's cluster validation (`kops validate cluster`, run between nodes by its rolling update) checks the same
//! things of nodes and kube-system pods; the workloads and budgets are what the next drain meets.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde_json::{Map, Value};

use crate::cluster::{ClusterNode, parse_node_list};
use crate::drain_blockers::{DrainBlocker, find_in, items};
use crate::label_selector::selects;

/// A controller of pods, as `namespace/name` with its kind.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct WorkloadRef {
    pub kind: String,
    pub namespace: String,
    pub name: String,
}

impl fmt::Display for WorkloadRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

#[derive(Debug, Clone)]
struct Pod {
    namespace: String,
    name: String,
    node: String,
    running_ready: bool,
    finished: bool,
    /// The pod's controller (kind, name), if one owns it.
    owner: Option<(String, String)>,
    labels: Map<String, Value>,
    mirror: bool,
}

impl Pod {
    fn full_name(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    /// What a drain evicts: not a mirror pod, a DaemonSet's pod or a finished one.
    fn evicted_by_drain(&self) -> bool {
        !self.mirror && !self.finished && self.owner.as_ref().is_none_or(|(kind, _)| kind != "DaemonSet")
    }
}

#[derive(Debug, Clone)]
struct Controller {
    id: WorkloadRef,
    desired: i64,
    available: i64,
    owner: Option<(String, String)>,
}

#[derive(Debug, Clone)]
struct Budget {
    namespace: String,
    name: String,
    selector: Option<Value>,
    allowed: i64,
}

/// One read of the cluster, as validation sees it.
#[derive(Debug, Clone)]
pub(crate) struct ClusterView {
    nodes: Vec<ClusterNode>,
    pods: Vec<Pod>,
    controllers: Vec<Controller>,
    budgets: Vec<Budget>,
    /// What the drains would meet, by node, found in the same pod and budget lists (drain_blockers.rs).
    pub drain_blockers: BTreeMap<String, Vec<DrainBlocker>>,
}

fn text(v: &Value, path: &str) -> String {
    v.pointer(path).and_then(Value::as_str).unwrap_or_default().to_string()
}

fn number(v: &Value, path: &str) -> Option<i64> {
    v.pointer(path).and_then(Value::as_i64)
}

fn controller_of(object: &Value) -> Option<(String, String)> {
    let owners = object.pointer("/metadata/ownerReferences").and_then(Value::as_array)?;
    let owner = owners.iter().find(|o| o.get("controller").and_then(Value::as_bool) == Some(true))?;
    Some((text(owner, "/kind"), text(owner, "/name")))
}

fn list<'a>(json: &'a Value, what: &str) -> Result<&'a [Value], String> {
    items(json).map_err(|e| format!("the cluster's {what} list is not a Kubernetes list: {e}"))
}

fn parse(json: &str, what: &str) -> Result<Value, String> {
    serde_json::from_str(json).map_err(|e| format!("the cluster's {what} list is not a Kubernetes list: {e}"))
}

impl ClusterView {
    /// Reads the four lists; a list that cannot be read is an error (never "valid").
    pub(crate) fn read(nodes: &str, pods: &str, controllers: &str, budgets: &str) -> Result<ClusterView, String> {
        let nodes = parse_node_list(nodes)?;
        let (pods_json, controllers_json, budgets_json) =
            (parse(pods, "pod")?, parse(controllers, "workload")?, parse(budgets, "PodDisruptionBudget")?);
        let pods = list(&pods_json, "pod")?
            .iter()
            .map(|p| {
                let phase = text(p, "/status/phase");
                let ready = p
                    .pointer("/status/conditions")
                    .and_then(Value::as_array)
                    .is_some_and(|c| c.iter().any(|c| c["type"] == "Ready" && c["status"] == "True"));
                Pod {
                    namespace: text(p, "/metadata/namespace"),
                    name: text(p, "/metadata/name"),
                    node: text(p, "/spec/nodeName"),
                    running_ready: phase == "Running" && ready && p.pointer("/metadata/deletionTimestamp").is_none(),
                    finished: phase == "Succeeded" || phase == "Failed",
                    owner: controller_of(p),
                    labels: p.pointer("/metadata/labels").and_then(Value::as_object).cloned().unwrap_or_default(),
                    mirror: p.pointer("/metadata/annotations/kubernetes.io~1config.mirror").is_some(),
                }
            })
            .collect();
        let controllers = list(&controllers_json, "workload")?
            .iter()
            .filter_map(|c| {
                let kind = text(c, "/kind");
                let replicas = number(c, "/spec/replicas").unwrap_or(1);
                let (desired, available) = match kind.as_str() {
                    "Deployment" | "ReplicaSet" => (replicas, number(c, "/status/availableReplicas").unwrap_or(0)),
                    // availableReplicas came with 1.22; readyReplicas is what older servers say.
                    "StatefulSet" => (
                        replicas,
                        number(c, "/status/availableReplicas")
                            .or_else(|| number(c, "/status/readyReplicas"))
                            .unwrap_or(0),
                    ),
                    "DaemonSet" => (
                        number(c, "/status/desiredNumberScheduled").unwrap_or(0),
                        number(c, "/status/numberAvailable").unwrap_or(0),
                    ),
                    _ => return None,
                };
                let id =
                    WorkloadRef { kind, namespace: text(c, "/metadata/namespace"), name: text(c, "/metadata/name") };
                Some(Controller { id, desired, available, owner: controller_of(c) })
            })
            .collect();
        let drain_blockers = find_in(list(&pods_json, "pod")?, list(&budgets_json, "PodDisruptionBudget")?);
        let budgets = list(&budgets_json, "PodDisruptionBudget")?
            .iter()
            .map(|b| Budget {
                namespace: text(b, "/metadata/namespace"),
                name: text(b, "/metadata/name"),
                selector: b.pointer("/spec/selector").cloned(),
                // Not computed yet by the disruption controller: no disruption allowed yet.
                allowed: number(b, "/status/disruptionsAllowed").unwrap_or(0),
            })
            .collect();
        Ok(ClusterView { nodes, pods, controllers, budgets, drain_blockers })
    }

    fn controller(&self, kind: &str, namespace: &str, name: &str) -> Option<&Controller> {
        self.controllers.iter().find(|c| c.id.kind == kind && c.id.namespace == namespace && c.id.name == name)
    }

    /// The workload a pod's controller stands for: a Deployment's ReplicaSet is judged as its Deployment.
    fn workload_of(&self, pod: &Pod) -> Option<WorkloadRef> {
        let (kind, name) = pod.owner.as_ref()?;
        let own = WorkloadRef { kind: kind.clone(), namespace: pod.namespace.clone(), name: name.clone() };
        match self.controller(kind, &pod.namespace, name).and_then(|c| c.owner.as_ref()) {
            Some((parent_kind, parent)) if parent_kind == "Deployment" => {
                Some(WorkloadRef { kind: parent_kind.clone(), namespace: pod.namespace.clone(), name: parent.clone() })
            }
            _ => Some(own),
        }
    }

    /// The workloads with a pod on one of `nodes`: what their drain and restart disturb (DaemonSet pods stay
    /// through a drain but restart with the node; they must be available again too).
    pub(crate) fn workloads_on(&self, nodes: &[String]) -> BTreeSet<WorkloadRef> {
        self.pods
            .iter()
            .filter(|p| nodes.contains(&p.node) && !p.mirror && !p.finished)
            .filter_map(|p| self.workload_of(p))
            .collect()
    }
}

/// What the cluster was before the run: the standard the validation holds it to.
#[derive(Debug, Clone, Default)]
pub(crate) struct Baseline {
    ready_nodes: BTreeSet<String>,
    /// kube-system pods Running and Ready before the run, with their workload.
    system_pods: BTreeMap<String, Option<WorkloadRef>>,
    /// kube-system pods not Running and Ready before the run (crash-looping, pending): reported, not waited for.
    pub not_ready_before: Vec<String>,
    /// Budgets that allowed no disruption before the run (`minAvailable` equal to the replicas): waiting will not
    /// change them; the drain meets them, and `upgrade_undrainable_node_behavior` decides.
    pub blocked_before: BTreeSet<String>,
}

impl Baseline {
    /// A node this run failed: the failure threshold has judged it, the validation does not wait for it again.
    pub(crate) fn excuse(&mut self, node: &str) {
        self.ready_nodes.remove(node);
    }

    pub(crate) fn of(view: &ClusterView) -> Baseline {
        let mut baseline = Baseline {
            ready_nodes: view.nodes.iter().filter(|n| n.ready).map(|n| n.name.clone()).collect(),
            blocked_before: view
                .budgets
                .iter()
                .filter(|b| b.allowed < 1)
                .map(|b| format!("{}/{}", b.namespace, b.name))
                .collect(),
            ..Baseline::default()
        };
        for pod in view.pods.iter().filter(|p| p.namespace == "kube-system" && !p.finished) {
            if pod.running_ready {
                baseline.system_pods.insert(pod.full_name(), view.workload_of(pod));
            } else {
                baseline.not_ready_before.push(pod.full_name());
            }
        }
        baseline
    }
}

/// What is not valid now, each as what the run waits for (`default/web: 3/4 available`); empty when the cluster is
/// valid. `watched` are the workloads disturbed so far, `next_nodes` the nodes the next drain empties.
pub(crate) fn not_valid(
    view: &ClusterView,
    baseline: &Baseline,
    watched: &BTreeSet<WorkloadRef>,
    next_nodes: &[String],
) -> Vec<String> {
    let mut problems = Vec::new();
    for name in &baseline.ready_nodes {
        // A node gone from the cluster is not waited for: blue-green and the surge cycle delete the nodes they
        // replace, and an autoscaler's scale-down is not the run's to undo. Its workloads are judged by their
        // controllers.
        if view.nodes.iter().any(|n| &n.name == name && !n.ready) {
            problems.push(format!("node {name} to be Ready (it was before the run)"));
        }
    }
    let mut workloads = watched.clone();
    for (name, workload) in &baseline.system_pods {
        match view.pods.iter().find(|p| &p.full_name() == name) {
            Some(pod) if pod.running_ready => {}
            Some(_) => problems.push(format!("{name} to be Running and Ready (it was before the run)")),
            // Replaced by its controller (a drain evicted it): the controller says whether it is back.
            None => match workload {
                Some(workload) => {
                    workloads.insert(workload.clone());
                }
                None => problems.push(format!("{name} to be back (it was Running and Ready before the run)")),
            },
        }
    }
    for workload in &workloads {
        // A workload deleted since is not the run's to wait for.
        let Some(c) = view.controller(&workload.kind, &workload.namespace, &workload.name) else { continue };
        if c.available < c.desired {
            problems.push(format!("{workload}: {}/{} available", c.available, c.desired));
        }
    }
    let evicted: Vec<&Pod> =
        view.pods.iter().filter(|p| next_nodes.contains(&p.node) && p.evicted_by_drain()).collect();
    for budget in &view.budgets {
        if budget.allowed >= 1 || baseline.blocked_before.contains(&format!("{}/{}", budget.namespace, budget.name)) {
            continue;
        }
        // A selector that cannot be evaluated is taken to select: the drain would meet the budget anyway.
        let guarded = evicted.iter().find(|p| {
            p.namespace == budget.namespace && selects(budget.selector.as_ref(), Some(&p.labels)).unwrap_or(true)
        });
        if let Some(pod) = guarded {
            problems.push(format!(
                "PodDisruptionBudget {}/{} to allow a disruption (it allows {}; it guards {} on {})",
                budget.namespace,
                budget.name,
                budget.allowed,
                pod.full_name(),
                pod.node
            ));
        }
    }
    problems
}

#[cfg(test)]
mod tests;
