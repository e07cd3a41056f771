//! The drain simulation of `upgrade plan --live`: batch after batch, in the plan's order, the pods each drain would
//! evict (as `kubectl drain --ignore-daemonsets --force` chooses them), the PodDisruptionBudgets that would refuse
//! with the budget the earlier batches leave, and whether the evicted pods find a place on the schedulable nodes that
//! stay, through the scheduler's filters (filters.rs). Pure: the live plan reads the lists and prints the result.
//!
//! Between batches the evicted pods of earlier batches are where the simulation placed them (they count on those
//! nodes for the next batch; one placed on a node of a later batch is evicted again there). Their budgets: with the
//! validation between batches on, the run waits for the evicted pods to be back, so each batch starts with the
//! budgets as read now; with it off (`upgrade_validation_timeout: 0`), they are not assumed back, and the earlier
//! batches' evictions are taken from the budgets.

mod cluster;
mod filters;
mod quantity;
mod render;
mod report;
#[cfg(test)]
mod tests;

pub use render::render;
pub use report::*;

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use cluster::{Budget, ClaimPlace, Node, Pod, Resources, VolumePlace, read_budget, read_claims, read_node, read_pod};
use filters::{Misfit, Placed};

/// The cluster as read for the simulation.
pub struct ClusterLists {
    pods: Vec<Pod>,
    budgets: Vec<Budget>,
    nodes: Vec<Node>,
    /// `None` until the claims and volumes are read (only when an evicted pod has a claim); `Err`: why not.
    claims: Option<Result<BTreeMap<String, ClaimPlace>, String>>,
}

fn list<'a>(json: &str, what: &str, parsed: &'a mut Value) -> Result<&'a [Value], String> {
    *parsed =
        serde_json::from_str(json).map_err(|e| format!("the cluster's {what} list is not a Kubernetes list: {e}"))?;
    let parsed: &'a Value = parsed;
    crate::drain_blockers::items(parsed).map_err(|e| format!("the cluster's {what} list is not a Kubernetes list: {e}"))
}

/// Why a pod on a drained node is not evicted, or `None` when it is.
fn not_evicted(pod: &Pod) -> Option<String> {
    if pod.mirror {
        Some("mirror (static) pod: the kubelet runs it, drain leaves it".into())
    } else if pod.controller.as_deref() == Some("DaemonSet") {
        Some("DaemonSet pod: drain leaves it (--ignore-daemonsets)".into())
    } else if let Some(phase) = &pod.finished {
        Some(format!("finished ({phase}): drain deletes it, nothing to place again"))
    } else if pod.terminating {
        Some("already terminating".into())
    } else {
        None
    }
}

impl ClusterLists {
    /// Reads `get pods`, `get pdb` and `get nodes` (`-o json`); the error says which list is not one.
    pub fn read(pods_json: &str, pdbs_json: &str, nodes_json: &str) -> Result<ClusterLists, String> {
        let (mut pods, mut pdbs, mut nodes) = (Value::Null, Value::Null, Value::Null);
        let pods = list(pods_json, "pod", &mut pods)?.iter().map(read_pod).collect::<Result<_, _>>()?;
        let budgets = list(pdbs_json, "PodDisruptionBudget", &mut pdbs)?.iter().map(read_budget).collect();
        let nodes = list(nodes_json, "node", &mut nodes)?.iter().map(read_node).collect::<Result<_, _>>()?;
        Ok(ClusterLists { pods, budgets, nodes, claims: None })
    }

    /// Takes these nodes as schedulable (blue-green: the switch-over uncordons the green nodes before the drains).
    pub fn uncordon(&mut self, nodes: &[String]) {
        for node in self.nodes.iter_mut().filter(|n| nodes.contains(&n.name)) {
            node.unschedulable = false;
        }
    }

    /// Whether a pod a drain of these batches would evict has a claim: then the claims and volumes are needed.
    pub fn needs_claims(&self, batches: &[Vec<String>]) -> bool {
        let drained: BTreeSet<&str> = batches.iter().flatten().map(String::as_str).collect();
        self.pods.iter().any(|p| drained.contains(p.node.as_str()) && not_evicted(p).is_none() && !p.claims.is_empty())
    }

    /// The claim and volume lists (`get pvc --all-namespaces -o json`, `get pv -o json`), or why they were not read.
    pub fn with_claims(mut self, read: Result<(String, String), String>) -> ClusterLists {
        self.claims = Some(read.and_then(|(pvcs, pvs)| {
            let (mut a, mut b) = (Value::Null, Value::Null);
            Ok(read_claims(list(&pvcs, "PersistentVolumeClaim", &mut a)?, list(&pvs, "PersistentVolume", &mut b)?))
        }));
        self
    }

    /// Where the pod's claims may be used; `Err(Ok(why))`: it stays Pending; `Err(Err(why))`: the lists are unreadable.
    fn volumes_of(&self, pod: &Pod) -> Result<Vec<VolumePlace>, Result<String, String>> {
        if pod.claims.is_empty() {
            return Ok(Vec::new());
        }
        let claims = match &self.claims {
            Some(Ok(claims)) => claims,
            Some(Err(why)) => return Err(Err(why.clone())),
            None => return Err(Err("the PersistentVolumeClaims were not read".into())),
        };
        let mut places = Vec::new();
        for claim in &pod.claims {
            let name = format!("{}/{claim}", pod.namespace);
            match claims.get(&name) {
                None => return Err(Ok(format!("its PersistentVolumeClaim {name} does not exist"))),
                Some(ClaimPlace::Missing(why)) => return Err(Ok(why.clone())),
                Some(ClaimPlace::Unbound) => {}
                Some(ClaimPlace::Bound(place)) => places.push(place.clone()),
            }
        }
        Ok(places)
    }

    /// Each batch (the node names of its drains) in order. `pods_back_between_batches`: the validation between
    /// batches waits for the evicted pods (their budgets are whole again for the next batch).
    pub fn simulate(&self, batches: &[Vec<String>], pods_back_between_batches: bool) -> Vec<BatchSimulation> {
        let mut placed = Placed::new(&self.nodes, &self.pods);
        let mut consumed = vec![0i64; self.budgets.len()];
        let mut out = Vec::new();
        let mut unreadable: Option<String> = None;
        for batch in batches {
            if let Some(why) = &unreadable {
                out.push(BatchSimulation::unreadable(&format!("an earlier batch could not be simulated: {why}")));
                continue;
            }
            let simulation = self.batch(&mut placed, batch, &mut consumed, pods_back_between_batches);
            if simulation.verdict == Verdict::Unreadable {
                unreadable = simulation.reasons.first().cloned();
            }
            out.push(simulation);
        }
        out
    }

    fn batch(
        &self,
        placed: &mut Placed<'_>,
        batch: &[String],
        consumed: &mut [i64],
        pods_back: bool,
    ) -> BatchSimulation {
        let index: std::collections::HashMap<&str, usize> =
            self.nodes.iter().enumerate().map(|(i, n)| (n.name.as_str(), i)).collect();
        let in_batch: BTreeSet<usize> = batch.iter().filter_map(|n| index.get(n.as_str()).copied()).collect();
        let mut skipped = Vec::new();
        let mut evicted: Vec<usize> = Vec::new();
        for (i, pod) in self.pods.iter().enumerate() {
            // Where it is now: where the simulation placed it, or, for a finished or terminating pod (which takes no
            // room), the node it ran on.
            let node = match placed.node_of(i) {
                Some(node) => node,
                None if !pod.occupies() => match index.get(pod.node.as_str()) {
                    Some(node) => *node,
                    None => continue,
                },
                None => continue,
            };
            if !in_batch.contains(&node) {
                continue;
            }
            match not_evicted(pod) {
                Some(why) => {
                    skipped.push(SkippedPod { pod: pod.full_name(), node: self.nodes[node].name.clone(), why })
                }
                None => evicted.push(i),
            }
        }
        let from: BTreeMap<usize, String> =
            evicted.iter().map(|i| (*i, self.nodes[placed.node_of(*i).unwrap_or_default()].name.clone())).collect();
        let budgets = self.budgets_of(&evicted, consumed, pods_back);
        // The batch's drains run together: every evicted pod leaves before any is placed again.
        for i in &evicted {
            placed.remove(*i);
        }
        let candidates: Vec<usize> = (0..self.nodes.len())
            .filter(|n| !in_batch.contains(n) && self.nodes[*n].ready && !self.nodes[*n].unschedulable)
            .collect();
        let mut capacity = Capacity { excluded: self.excluded(&in_batch), ..Capacity::default() };
        for n in &candidates {
            let node = &self.nodes[*n];
            if let Some(taint) = node.taints.iter().find(|t| t.effect == "NoSchedule" || t.effect == "NoExecute") {
                capacity.tainted.push(format!("{} ({taint})", node.name));
                continue;
            }
            capacity.nodes.push(node.name.clone());
            let free = placed.free(*n).unwrap_or_default();
            capacity.free_cpu_millis += free.cpu.max(0);
            capacity.free_memory_bytes += free.memory.max(0);
        }
        // Placed as the scheduler would take them if the biggest came first (first fit decreasing, the kindest
        // order: a batch said not to fit does not fit in any order), each on the feasible node with the most room
        // left (the scheduler's default LeastAllocated score).
        let mut order: Vec<usize> = evicted.iter().copied().filter(|i| self.pods[*i].controller.is_some()).collect();
        order.sort_by_key(|i| {
            let p = &self.pods[*i];
            (p.best_effort, std::cmp::Reverse((p.requests.cpu, p.requests.memory)), p.full_name())
        });
        let mut outcome: BTreeMap<usize, (String, Option<String>, Option<String>)> = BTreeMap::new();
        for i in &evicted {
            if self.pods[*i].controller.is_none() {
                outcome.insert(*i, ("not-recreated".into(), None, None));
            }
        }
        for i in order {
            let pod = &self.pods[i];
            capacity.requested_cpu_millis += pod.requests.cpu;
            capacity.requested_memory_bytes += pod.requests.memory;
            let volumes = match self.volumes_of(pod) {
                Ok(volumes) => volumes,
                Err(Ok(why)) => {
                    outcome.insert(i, ("pending".into(), None, Some(why)));
                    continue;
                }
                Err(Err(why)) => {
                    let reason = format!("pod {}'s volumes cannot be followed: {why}", pod.full_name());
                    return BatchSimulation::unreadable(&reason);
                }
            };
            match place(placed, i, &volumes, &candidates) {
                Ok(node) => {
                    placed.assign(i, node);
                    outcome.insert(i, ("placed".into(), Some(self.nodes[node].name.clone()), None));
                }
                Err(why) => {
                    outcome.insert(i, ("pending".into(), None, Some(why)));
                }
            }
        }
        let evicted: Vec<EvictedPod> = evicted
            .iter()
            .map(|i| {
                let pod = &self.pods[*i];
                let (state, placed_on, reason) = outcome.remove(i).unwrap_or_default();
                EvictedPod {
                    pod: pod.full_name(),
                    node: from.get(i).cloned().unwrap_or_default(),
                    cpu_millis: pod.requests.cpu,
                    memory_bytes: pod.requests.memory,
                    best_effort: pod.best_effort,
                    outcome: state,
                    placed_on,
                    reason,
                }
            })
            .collect();
        let mut reasons = Vec::new();
        let pending = evicted.iter().filter(|p| p.outcome == "pending").count();
        if pending > 0 {
            reasons.push(format!("{pending} of {} evicted pod(s) would stay Pending", evicted.len()));
        }
        for budget in budgets.iter().filter(|b| b.blocks) {
            reasons.push(format!("PodDisruptionBudget {} allows no disruption: it refuses every eviction", budget.pdb));
        }
        let verdict = if reasons.is_empty() { Verdict::Fits } else { Verdict::Blocked };
        BatchSimulation { verdict, reasons, evicted, skipped, budgets, capacity }
    }

    /// The budgets that would refuse some of the `evicted` pods, and what the batch takes of each.
    fn budgets_of(&self, evicted: &[usize], consumed: &mut [i64], pods_back: bool) -> Vec<BudgetRefusal> {
        let mut refusals = Vec::new();
        for (b, budget) in self.budgets.iter().enumerate() {
            let evictions = evicted.iter().filter(|i| budget.guards(&self.pods[**i])).count();
            if evictions == 0 {
                continue;
            }
            let left = if pods_back { budget.allowed } else { budget.allowed - consumed[b] }.max(0);
            consumed[b] += evictions as i64;
            let refused = evictions.saturating_sub(left as usize);
            if refused > 0 {
                refusals.push(BudgetRefusal {
                    pdb: budget.full_name(),
                    allowed_now: budget.allowed,
                    left_for_batch: left,
                    evictions,
                    refused,
                    blocks: budget.allowed <= 0,
                });
            }
        }
        refusals
    }

    fn excluded(&self, in_batch: &BTreeSet<usize>) -> Vec<String> {
        let mut excluded = Vec::new();
        for (i, node) in self.nodes.iter().enumerate() {
            let why = if in_batch.contains(&i) {
                "in this batch"
            } else if node.unschedulable {
                "cordoned"
            } else if !node.ready {
                "NotReady"
            } else {
                continue;
            };
            excluded.push(format!("{} ({why})", node.name));
        }
        excluded
    }
}

/// The node the pod goes to, or why none takes it (the nodes grouped by reason, as the scheduler's event says it).
fn place(placed: &Placed<'_>, index: usize, volumes: &[VolumePlace], candidates: &[usize]) -> Result<usize, String> {
    let pod = &placed.pods[index];
    if candidates.is_empty() {
        return Err("no schedulable node stays".into());
    }
    let mut misfits: Vec<(usize, Misfit)> = Vec::new();
    let mut best: Option<(usize, f64)> = None;
    let neighbours = placed.neighbours(index);
    for &node in candidates {
        match placed.check(pod, volumes, &neighbours, node) {
            Ok(()) => {
                let score = room_left(placed, node, pod.requests);
                if best.is_none_or(|(_, s)| score > s) {
                    best = Some((node, score));
                }
            }
            Err(misfit) => misfits.push((node, misfit)),
        }
    }
    if let Some((node, _)) = best {
        return Ok(node);
    }
    let mut by_kind: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for (node, misfit) in &misfits {
        let name = &placed.nodes[*node].name;
        let named = match misfit.detail() {
            Some(detail) => format!("{name} ({detail})"),
            None => name.clone(),
        };
        by_kind.entry(misfit.kind()).or_default().push(named);
    }
    let said: Vec<String> = by_kind
        .into_iter()
        .map(|(kind, nodes)| {
            let shown: Vec<&str> = nodes.iter().take(5).map(String::as_str).collect();
            let more = if nodes.len() > 5 { format!(" and {} more", nodes.len() - 5) } else { String::new() };
            format!("{kind} on {}{more}", shown.join(", "))
        })
        .collect();
    Err(format!("0/{} schedulable node(s) that stay fit: {}", candidates.len(), said.join("; ")))
}

/// The scheduler's LeastAllocated score after the pod is placed: the mean share of CPU and memory left free.
fn room_left(placed: &Placed<'_>, node: usize, requests: Resources) -> f64 {
    let (Some(free), Some(allocatable)) = (placed.free(node), placed.nodes[node].allocatable) else { return 0.0 };
    let share = |free: i64, total: i64| if total > 0 { (free as f64) / (total as f64) } else { 0.0 };
    (share(free.cpu - requests.cpu, allocatable.cpu) + share(free.memory - requests.memory, allocatable.memory)) / 2.0
}
