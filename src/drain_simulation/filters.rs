//! The scheduler's filters that leave an evicted pod Pending, in the scheduler's order: NodeAffinity (node selector
//! and required node affinity), TaintToleration (NoSchedule and NoExecute), VolumeBinding and VolumeZone (the
//! node affinity and zone of the volumes its claims are bound to), NodeResourcesFit (CPU, memory, pod count),
//! InterPodAffinity (required anti-affinity, both ways) and PodTopologySpread (`DoNotSchedule`).

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

use serde_json::Value;

use super::cluster::{AffinityTerm, Node, Pod, Resources, Taint, VolumePlace};
use super::quantity::{show_bytes, show_millicores};

/// Why a node does not take a pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Misfit {
    Cpu { free: i64 },
    Memory { free: i64 },
    Pods { max: i64 },
    AllocatableUnknown,
    Selector,
    Taint(String),
    Volume(String),
    AntiAffinity(String),
    Spread(String),
}

impl Misfit {
    /// The reason without what is particular to one node: nodes with the same kind are said together.
    pub(crate) fn kind(&self) -> String {
        match self {
            Misfit::Cpu { .. } => "insufficient cpu".into(),
            Misfit::Memory { .. } => "insufficient memory".into(),
            Misfit::Pods { .. } => "too many pods".into(),
            Misfit::AllocatableUnknown => "allocatable cpu/memory not reported".into(),
            Misfit::Selector => "node selector/affinity not matched".into(),
            Misfit::Taint(taint) => format!("untolerated taint {taint}"),
            Misfit::Volume(why) => why.clone(),
            Misfit::AntiAffinity(why) => why.clone(),
            Misfit::Spread(why) => why.clone(),
        }
    }

    /// What is particular to the node (how much is free).
    pub(crate) fn detail(&self) -> Option<String> {
        match self {
            Misfit::Cpu { free } => Some(format!("{} free", show_millicores(*free))),
            Misfit::Memory { free } => Some(format!("{} free", show_bytes(*free))),
            Misfit::Pods { max } => Some(format!("{max} max")),
            _ => None,
        }
    }
}

/// One `NodeSelectorRequirement` against a value (`None`: the node has no such label or field).
fn requirement_holds(requirement: &Value, value: Option<&str>) -> bool {
    let values: Vec<&str> = requirement
        .get("values")
        .and_then(Value::as_array)
        .map(|v| v.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let number = |v: Option<&str>| v.and_then(|v| v.parse::<i64>().ok());
    match requirement.get("operator").and_then(Value::as_str).unwrap_or_default() {
        "In" => value.is_some_and(|v| values.contains(&v)),
        "NotIn" => !value.is_some_and(|v| values.contains(&v)),
        "Exists" => value.is_some(),
        "DoesNotExist" => value.is_none(),
        "Gt" => number(value).zip(number(values.first().copied())).is_some_and(|(v, bound)| v > bound),
        "Lt" => number(value).zip(number(values.first().copied())).is_some_and(|(v, bound)| v < bound),
        // An operator the API does not define matches nothing: the simulation errs towards "does not fit".
        _ => false,
    }
}

/// `nodeSelectorTerms` (of a pod's required node affinity or a volume's): any term, each of whose requirements
/// holds; a term without requirements matches nothing, as in the API.
pub(crate) fn terms_match(terms: &Value, node: &Node) -> bool {
    let Some(terms) = terms.as_array() else { return false };
    terms.iter().any(|term| {
        let expressions = term.get("matchExpressions").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
        let fields = term.get("matchFields").and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default();
        if expressions.is_empty() && fields.is_empty() {
            return false;
        }
        expressions.iter().all(|r| {
            let key = r.get("key").and_then(Value::as_str).unwrap_or_default();
            requirement_holds(r, node.label(key))
        }) && fields.iter().all(|r| {
            let name = (r.get("key").and_then(Value::as_str) == Some("metadata.name")).then_some(node.name.as_str());
            requirement_holds(r, name)
        })
    })
}

/// The node selector and the required node affinity.
pub(crate) fn selects_node(pod: &Pod, node: &Node) -> bool {
    pod.node_selector.iter().all(|(key, want)| node.label(key) == want.as_str())
        && pod.node_affinity.as_ref().is_none_or(|terms| terms_match(terms, node))
}

fn tolerates(toleration: &Value, taint: &Taint) -> bool {
    let field = |name: &str| toleration.get(name).and_then(Value::as_str).unwrap_or_default();
    let effect_ok = field("effect").is_empty() || field("effect") == taint.effect;
    // An empty key with Exists tolerates every taint.
    let key_ok = (field("key").is_empty() && field("operator") == "Exists") || field("key") == taint.key;
    let value_ok = match field("operator") {
        "Exists" => true,
        "" | "Equal" => field("value") == taint.value,
        _ => false,
    };
    effect_ok && key_ok && value_ok
}

/// The first NoSchedule or NoExecute taint of the node the pod does not tolerate.
fn untolerated<'a>(pod: &Pod, node: &'a Node) -> Option<&'a Taint> {
    node.taints
        .iter()
        .filter(|t| t.effect == "NoSchedule" || t.effect == "NoExecute")
        .find(|t| !pod.tolerations.iter().any(|tol| tolerates(tol, t)))
}

fn volume_misfit(volumes: &[VolumePlace], node: &Node) -> Option<String> {
    for volume in volumes {
        if volume.node_affinity.as_ref().is_some_and(|terms| !terms_match(terms, node)) {
            return Some(format!("volume node affinity conflict (PersistentVolume {})", volume.name));
        }
        for (key, values) in &volume.zones {
            if !node.label(key).is_some_and(|v| values.iter().any(|z| z == v)) {
                return Some(format!(
                    "volume zone conflict (PersistentVolume {} in {key}={})",
                    volume.name,
                    values.join("__")
                ));
            }
        }
    }
    None
}

/// A spread constraint's matching pods per domain, the fewest, and 1 when the pod itself matches.
pub(crate) struct SpreadCounts {
    counts: HashMap<String, i64>,
    min: i64,
    own: i64,
}

/// What the pods in place say of where one pod may go (`Placed::neighbours`).
pub(crate) struct Neighbours {
    /// (topology key, value) -> why a pod may not go to a node in that domain.
    repelled: HashMap<String, HashMap<String, String>>,
    /// One per spread constraint of the pod, in order.
    spread: Vec<SpreadCounts>,
}

/// Per pod, the required anti-affinity terms of the other pods that select it (each distinct term evaluated over
/// every pod once).
fn repelled_by(pods: &[Pod]) -> Vec<Vec<(usize, usize)>> {
    let mut by_key: HashMap<&str, Vec<(usize, usize)>> = HashMap::new();
    for (i, pod) in pods.iter().enumerate() {
        for (t, term) in pod.anti_affinity.iter().enumerate() {
            by_key.entry(&term.selects_key).or_default().push((i, t));
        }
    }
    let mut repelled_by = vec![Vec::new(); pods.len()];
    for terms in by_key.values() {
        let (i, t) = terms[0];
        let term: &AffinityTerm = &pods[i].anti_affinity[t];
        for selected in (0..pods.len()).filter(|s| term.looks_at(&pods[*s])) {
            repelled_by[selected].extend(terms.iter().filter(|(other, _)| *other != selected));
        }
    }
    repelled_by
}

/// Where every pod is (those that occupy a node), kept as pods are removed and placed, with each node's use.
pub(crate) struct Placed<'a> {
    pub nodes: &'a [Node],
    pub pods: &'a [Pod],
    /// Each pod's node index, `None` for one that occupies none (finished, Pending, evicted and not placed).
    at: Vec<Option<usize>>,
    /// Per node: the requests of its pods and how many there are.
    usage: Vec<(Resources, i64)>,
    /// Per pod, the required anti-affinity terms of other pods that select it: (that pod, its term).
    repelled_by: Vec<Vec<(usize, usize)>>,
    /// The pods a selector selects, by the selector (with its namespaces): the replicas of one workload share their
    /// constraints' selectors, so each is evaluated over every pod once, not once per replica placed.
    selected: RefCell<HashMap<String, Rc<Vec<usize>>>>,
}

impl<'a> Placed<'a> {
    pub(crate) fn new(nodes: &'a [Node], pods: &'a [Pod]) -> Placed<'a> {
        let index: HashMap<&str, usize> = nodes.iter().enumerate().map(|(i, n)| (n.name.as_str(), i)).collect();
        let at: Vec<Option<usize>> =
            pods.iter().map(|p| if p.occupies() { index.get(p.node.as_str()).copied() } else { None }).collect();
        let mut placed = Placed {
            nodes,
            pods,
            at: vec![None; pods.len()],
            usage: vec![(Resources::default(), 0); nodes.len()],
            repelled_by: repelled_by(pods),
            selected: RefCell::new(HashMap::new()),
        };
        for (pod, node) in at.into_iter().enumerate() {
            if let Some(node) = node {
                placed.assign(pod, node);
            }
        }
        placed
    }

    pub(crate) fn node_of(&self, pod: usize) -> Option<usize> {
        self.at[pod]
    }

    pub(crate) fn assign(&mut self, pod: usize, node: usize) {
        self.remove(pod);
        self.at[pod] = Some(node);
        let (sum, count) = self.usage[node];
        self.usage[node] = (sum.add(self.pods[pod].requests), count + 1);
    }

    pub(crate) fn remove(&mut self, pod: usize) {
        if let Some(node) = self.at[pod].take() {
            let (sum, count) = self.usage[node];
            let r = self.pods[pod].requests;
            self.usage[node] = (Resources { cpu: sum.cpu - r.cpu, memory: sum.memory - r.memory }, count - 1);
        }
    }

    /// The pods `key` names that `selects`, wherever they are (labels do not change; places do).
    fn selected(&self, key: &str, selects: impl Fn(&Pod) -> bool) -> Rc<Vec<usize>> {
        if let Some(found) = self.selected.borrow().get(key) {
            return found.clone();
        }
        let found: Rc<Vec<usize>> = Rc::new((0..self.pods.len()).filter(|i| selects(&self.pods[*i])).collect());
        self.selected.borrow_mut().insert(key.to_string(), found.clone());
        found
    }

    /// Of `pods`, those that occupy a node, with it.
    fn occupying<'b>(&'b self, pods: &'b [usize]) -> impl Iterator<Item = (&'a Pod, usize)> + 'b {
        pods.iter().filter_map(|i| self.at[*i].map(|n| (&self.pods[*i], n)))
    }

    fn used(&self, node: usize) -> (Resources, i64) {
        self.usage[node]
    }

    /// What is left of the node's allocatable CPU and memory; `None` when it does not report them.
    pub(crate) fn free(&self, node: usize) -> Option<Resources> {
        let used = self.used(node).0;
        self.nodes[node].allocatable.map(|a| Resources { cpu: a.cpu - used.cpu, memory: a.memory - used.memory })
    }

    /// What the pods in place say of where `pod` may go, read once per pod rather than once per node: the domains
    /// its required anti-affinity (either way) keeps it out of, and its spread constraints' counts per domain.
    pub(crate) fn neighbours(&self, index: usize) -> Neighbours {
        let pod = &self.pods[index];
        let mut repelled: HashMap<String, HashMap<String, String>> = HashMap::new();
        let mut keep_out = |key: &str, node: usize, why: String| {
            if let Some(value) = self.nodes[node].label(key) {
                repelled.entry(key.to_string()).or_default().entry(value.to_string()).or_insert(why);
            }
        };
        for term in &pod.anti_affinity {
            let selected = self.selected(&term.selects_key, |other| term.looks_at(other));
            for (other, n) in self.occupying(&selected) {
                keep_out(
                    &term.topology_key,
                    n,
                    format!("pod anti-affinity ({} in the same {})", other.full_name(), term.topology_key),
                );
            }
        }
        // The pods already there with a required anti-affinity to this one keep it out too.
        for (other, term) in &self.repelled_by[index] {
            let Some(n) = self.at[*other] else { continue };
            let (other, term) = (&self.pods[*other], &self.pods[*other].anti_affinity[*term]);
            let why = format!("pod anti-affinity of {} (same {})", other.full_name(), term.topology_key);
            keep_out(&term.topology_key, n, why);
        }
        let spread = pod
            .spread
            .iter()
            .map(|constraint| {
                let key = &constraint.topology_key;
                let counted = |other: &Pod| {
                    other.namespace == pod.namespace
                        && crate::label_selector::selects(constraint.selector.as_ref(), Some(&other.labels))
                            .unwrap_or(true)
                };
                // The domains: every node the pod's selector and affinity allow (nodeAffinityPolicy Honor, taints
                // ignored: nodeTaintsPolicy Ignore, the defaults), cordoned and drained ones included, as the
                // scheduler counts them.
                let mut counts: HashMap<String, i64> = self
                    .nodes
                    .iter()
                    .filter(|n| selects_node(pod, n))
                    .filter_map(|n| n.label(key))
                    .map(|d| (d.to_string(), 0))
                    .collect();
                let selected = self.selected(&constraint.selects_key, counted);
                for (_, n) in self.occupying(&selected) {
                    if let Some(count) = self.nodes[n].label(key).and_then(|d| counts.get_mut(d)) {
                        *count += 1;
                    }
                }
                let min = counts.values().copied().min().unwrap_or(0);
                SpreadCounts { counts, min, own: i64::from(counted(pod)) }
            })
            .collect();
        Neighbours { repelled, spread }
    }

    fn anti_affinity(&self, node: usize, neighbours: &Neighbours) -> Option<String> {
        neighbours.repelled.iter().find_map(|(key, domains)| domains.get(self.nodes[node].label(key)?).cloned())
    }

    fn spread(&self, pod: &Pod, node: usize, neighbours: &Neighbours) -> Option<String> {
        for (constraint, counted) in pod.spread.iter().zip(&neighbours.spread) {
            let key = &constraint.topology_key;
            let Some(domain) = self.nodes[node].label(key) else {
                return Some(format!("topology spread: node has no label {key}"));
            };
            let (here, min) = (counted.counts.get(domain).copied().unwrap_or(0) + counted.own, counted.min);
            if here - min > constraint.max_skew {
                return Some(format!(
                    "topology spread ({key}={domain} would hold {here}, the emptiest {min}: maxSkew {})",
                    constraint.max_skew
                ));
            }
        }
        None
    }

    /// Whether `node` takes `pod` (whose claims' volumes are `volumes`), as the scheduler's filters decide.
    pub(crate) fn check(
        &self,
        pod: &Pod,
        volumes: &[VolumePlace],
        neighbours: &Neighbours,
        node: usize,
    ) -> Result<(), Misfit> {
        let n = &self.nodes[node];
        if !selects_node(pod, n) {
            return Err(Misfit::Selector);
        }
        if let Some(taint) = untolerated(pod, n) {
            return Err(Misfit::Taint(taint.to_string()));
        }
        if let Some(why) = volume_misfit(volumes, n) {
            return Err(Misfit::Volume(why));
        }
        let (used, count) = self.used(node);
        if n.max_pods.is_some_and(|max| count + 1 > max) {
            return Err(Misfit::Pods { max: n.max_pods.unwrap_or_default() });
        }
        if pod.requests != Resources::default() {
            let Some(allocatable) = n.allocatable else { return Err(Misfit::AllocatableUnknown) };
            let free = Resources { cpu: allocatable.cpu - used.cpu, memory: allocatable.memory - used.memory };
            if pod.requests.cpu > free.cpu {
                return Err(Misfit::Cpu { free: free.cpu });
            }
            if pod.requests.memory > free.memory {
                return Err(Misfit::Memory { free: free.memory });
            }
        }
        if let Some(why) = self.anti_affinity(node, neighbours) {
            return Err(Misfit::AntiAffinity(why));
        }
        if let Some(why) = self.spread(pod, node, neighbours) {
            return Err(Misfit::Spread(why));
        }
        Ok(())
    }
}
