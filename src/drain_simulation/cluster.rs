//! The cluster as the simulation sees it, read from the lists (`get pods`, `get nodes`, `get pdb`, and when an evicted
//! pod has a claim, `get pvc`, `get pv`; all `--all-namespaces -o json` where namespaced): what a pod asks for
//! (requests, node selector and required affinity, tolerations, claims, required anti-affinity, spread constraints)
//! and what a node offers (allocatable, labels, taints, Ready, cordoned).

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::quantity::{millicores, units};

/// CPU and memory, as requests or room.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Resources {
    pub cpu: i64,
    pub memory: i64,
}

impl Resources {
    pub(crate) fn add(self, other: Resources) -> Resources {
        Resources { cpu: self.cpu + other.cpu, memory: self.memory + other.memory }
    }

    fn max(self, other: Resources) -> Resources {
        Resources { cpu: self.cpu.max(other.cpu), memory: self.memory.max(other.memory) }
    }
}

/// A required pod (anti-)affinity term.
#[derive(Debug, Clone)]
pub(crate) struct AffinityTerm {
    pub selector: Option<Value>,
    /// The namespaces whose pods it looks at (`namespaces`, else the pod's own); `None` with a `namespaceSelector`.
    pub namespaces: Vec<String>,
    /// `namespaceSelector`, evaluated against `kubernetes.io/metadata.name` only (namespace labels are not read).
    pub namespace_selector: Option<Value>,
    pub topology_key: String,
    /// Names what it selects (namespaces and selectors), for `Placed`'s cache of the pods selected.
    pub selects_key: String,
}

impl AffinityTerm {
    pub(crate) fn looks_at(&self, pod: &Pod) -> bool {
        let in_namespace = match &self.namespace_selector {
            Some(selector) => {
                let labels: Map<String, Value> =
                    [("kubernetes.io/metadata.name".to_string(), Value::String(pod.namespace.clone()))]
                        .into_iter()
                        .collect();
                self.namespaces.contains(&pod.namespace)
                    || crate::label_selector::selects(Some(selector), Some(&labels)).unwrap_or(true)
            }
            None => self.namespaces.contains(&pod.namespace),
        };
        // A selector that cannot be evaluated is taken to select: the simulation errs towards "does not fit".
        in_namespace && crate::label_selector::selects(self.selector.as_ref(), Some(&pod.labels)).unwrap_or(true)
    }
}

/// A topology spread constraint with `whenUnsatisfiable: DoNotSchedule`.
#[derive(Debug, Clone)]
pub(crate) struct Spread {
    pub max_skew: i64,
    pub topology_key: String,
    /// `labelSelector` with the `matchLabelKeys` values of the pod added.
    pub selector: Option<Value>,
    /// Names what it counts (the pod's namespace and the selector), for `Placed`'s cache of the pods selected.
    pub selects_key: String,
}

#[derive(Debug, Clone)]
pub(crate) struct Pod {
    pub namespace: String,
    pub name: String,
    /// Where it runs now (empty: not scheduled).
    pub node: String,
    pub labels: Map<String, Value>,
    /// `Succeeded` or `Failed`.
    pub finished: Option<String>,
    /// The kind of its controller, if one owns it.
    pub controller: Option<String>,
    pub mirror: bool,
    pub terminating: bool,
    pub requests: Resources,
    /// No CPU or memory request or limit on any container (QoS class BestEffort).
    pub best_effort: bool,
    pub node_selector: Map<String, Value>,
    /// `requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms` of its node affinity.
    pub node_affinity: Option<Value>,
    pub tolerations: Vec<Value>,
    /// The names of its PersistentVolumeClaims (in its namespace).
    pub claims: Vec<String>,
    pub anti_affinity: Vec<AffinityTerm>,
    pub spread: Vec<Spread>,
}

impl Pod {
    pub(crate) fn full_name(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }

    /// Counted where it runs: scheduled, not finished, not on its way out.
    pub(crate) fn occupies(&self) -> bool {
        self.finished.is_none() && !self.terminating
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Taint {
    pub key: String,
    pub value: String,
    pub effect: String,
}

impl std::fmt::Display for Taint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let value = if self.value.is_empty() { String::new() } else { format!("={}", self.value) };
        write!(f, "{}{value}:{}", self.key, self.effect)
    }
}

#[derive(Debug, Clone)]
pub(crate) struct Node {
    pub name: String,
    pub labels: Map<String, Value>,
    pub taints: Vec<Taint>,
    /// `status.allocatable` CPU and memory; `None` when the node does not report them.
    pub allocatable: Option<Resources>,
    /// `status.allocatable.pods`; `None`: not reported, not limited.
    pub max_pods: Option<i64>,
    pub ready: bool,
    pub unschedulable: bool,
}

impl Node {
    pub(crate) fn label(&self, key: &str) -> Option<&str> {
        self.labels.get(key).and_then(Value::as_str)
    }
}

#[derive(Debug, Clone)]
pub(crate) struct Budget {
    pub namespace: String,
    pub name: String,
    pub selector: Option<Value>,
    /// `status.disruptionsAllowed` (0 when the disruption controller has not computed it: the eviction is refused).
    pub allowed: i64,
}

impl Budget {
    pub(crate) fn guards(&self, pod: &Pod) -> bool {
        pod.namespace == self.namespace
            && crate::label_selector::selects(self.selector.as_ref(), Some(&pod.labels)).unwrap_or(true)
    }

    pub(crate) fn full_name(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }
}

/// Where a PersistentVolume may be used: its required node affinity and its zone and region labels.
#[derive(Debug, Clone, Default)]
pub(crate) struct VolumePlace {
    pub name: String,
    pub node_affinity: Option<Value>,
    /// `topology.kubernetes.io/zone` and the like, with the values (`a__b` is a or b).
    pub zones: Vec<(String, Vec<String>)>,
}

/// What a claim leads to.
#[derive(Debug, Clone)]
pub(crate) enum ClaimPlace {
    /// Bound to a volume (with where it may be used).
    Bound(VolumePlace),
    /// Not bound yet: not constrained here (its class's provisioning topology is not read).
    Unbound,
    /// The claim, or the volume it is bound to, is not in the cluster: the pod stays Pending.
    Missing(String),
}

fn text(v: &Value, path: &str) -> String {
    v.pointer(path).and_then(Value::as_str).unwrap_or_default().to_string()
}

fn array<'a>(v: &'a Value, path: &str) -> &'a [Value] {
    v.pointer(path).and_then(Value::as_array).map(Vec::as_slice).unwrap_or_default()
}

fn object(v: &Value, path: &str) -> Map<String, Value> {
    v.pointer(path).and_then(Value::as_object).cloned().unwrap_or_default()
}

/// A container's `resources.requests` as read, or why a quantity cannot be read.
fn container_requests(container: &Value, pod: &str) -> Result<Resources, String> {
    let read = |key: &str, parse: fn(&str) -> Option<i64>| -> Result<i64, String> {
        match container.pointer(&format!("/resources/requests/{key}")) {
            None | Some(Value::Null) => Ok(0),
            Some(value) => {
                let text = value.as_str().map(str::to_string).unwrap_or_else(|| value.to_string());
                parse(&text).ok_or_else(|| format!("pod {pod}: its {key} request `{text}` is not a quantity"))
            }
        }
    };
    Ok(Resources { cpu: read("cpu", millicores)?, memory: read("memory", units)? })
}

/// What the scheduler counts for a pod (component-helpers' `PodRequests`): the containers' sum plus the sidecars
/// (init containers with `restartPolicy: Always`), or the largest init container with the sidecars started before
/// it, whichever is more; plus the pod's overhead.
fn pod_requests(pod: &Value, name: &str) -> Result<Resources, String> {
    let mut sum = Resources::default();
    for container in array(pod, "/spec/containers") {
        sum = sum.add(container_requests(container, name)?);
    }
    let (mut sidecars, mut init_max) = (Resources::default(), Resources::default());
    for init in array(pod, "/spec/initContainers") {
        let requests = container_requests(init, name)?;
        if text(init, "/restartPolicy") == "Always" {
            sidecars = sidecars.add(requests);
            init_max = init_max.max(sidecars);
        } else {
            init_max = init_max.max(requests.add(sidecars));
        }
    }
    let overhead =
        container_requests(&serde_json::json!({"resources": {"requests": pod.pointer("/spec/overhead")}}), name)?;
    Ok(sum.add(sidecars).max(init_max).add(overhead))
}

fn best_effort(pod: &Value) -> bool {
    array(pod, "/spec/containers").iter().chain(array(pod, "/spec/initContainers")).all(|c| {
        ["requests", "limits"].iter().all(|kind| {
            ["cpu", "memory"]
                .iter()
                .all(|key| c.pointer(&format!("/resources/{kind}/{key}")).is_none_or(Value::is_null))
        })
    })
}

fn affinity_term(term: &Value, own_namespace: &str) -> AffinityTerm {
    let mut namespaces: Vec<String> =
        array(term, "/namespaces").iter().filter_map(Value::as_str).map(str::to_string).collect();
    let namespace_selector = term.pointer("/namespaceSelector").filter(|v| !v.is_null()).cloned();
    if namespaces.is_empty() && namespace_selector.is_none() {
        namespaces.push(own_namespace.to_string());
    }
    let selector = term.pointer("/labelSelector").cloned();
    AffinityTerm {
        selects_key: format!("anti {namespaces:?} {namespace_selector:?} {selector:?}"),
        selector,
        namespaces,
        namespace_selector,
        topology_key: text(term, "/topologyKey"),
    }
}

fn spread(constraint: &Value, labels: &Map<String, Value>, namespace: &str) -> Option<Spread> {
    if text(constraint, "/whenUnsatisfiable") != "DoNotSchedule" {
        return None;
    }
    // matchLabelKeys: the pod's own values of those keys are added to the selector (as the API server merges them).
    let mut selector = constraint.pointer("/labelSelector").cloned();
    let keys: Vec<&str> = array(constraint, "/matchLabelKeys").iter().filter_map(Value::as_str).collect();
    if let Some(Value::Object(s)) = selector.as_mut() {
        for key in keys {
            if let Some(value) = labels.get(key) {
                let expression = serde_json::json!({"key": key, "operator": "In", "values": [value]});
                match s.entry("matchExpressions").or_insert_with(|| Value::Array(Vec::new())) {
                    Value::Array(list) => list.push(expression),
                    other => *other = Value::Array(vec![expression]),
                }
            }
        }
    }
    Some(Spread {
        max_skew: constraint.pointer("/maxSkew").and_then(Value::as_i64).unwrap_or(1).max(1),
        topology_key: text(constraint, "/topologyKey"),
        selects_key: format!("spread {namespace} {selector:?}"),
        selector,
    })
}

pub(crate) fn read_pod(pod: &Value) -> Result<Pod, String> {
    let namespace = text(pod, "/metadata/namespace");
    let name = text(pod, "/metadata/name");
    let full = format!("{namespace}/{name}");
    let phase = text(pod, "/status/phase");
    let controller = array(pod, "/metadata/ownerReferences")
        .iter()
        .find(|o| o.get("controller").and_then(Value::as_bool) == Some(true))
        .map(|o| text(o, "/kind"));
    let labels = object(pod, "/metadata/labels");
    let required = "/spec/affinity/podAntiAffinity/requiredDuringSchedulingIgnoredDuringExecution";
    Ok(Pod {
        node: text(pod, "/spec/nodeName"),
        finished: matches!(phase.as_str(), "Succeeded" | "Failed").then(|| phase.clone()),
        controller,
        mirror: pod.pointer("/metadata/annotations/kubernetes.io~1config.mirror").is_some(),
        terminating: pod.pointer("/metadata/deletionTimestamp").is_some_and(|v| !v.is_null()),
        requests: pod_requests(pod, &full)?,
        best_effort: best_effort(pod),
        node_selector: object(pod, "/spec/nodeSelector"),
        node_affinity: pod
            .pointer("/spec/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution/nodeSelectorTerms")
            .filter(|v| !v.is_null())
            .cloned(),
        tolerations: array(pod, "/spec/tolerations").to_vec(),
        claims: array(pod, "/spec/volumes")
            .iter()
            .filter_map(|v| v.pointer("/persistentVolumeClaim/claimName").and_then(Value::as_str))
            .map(str::to_string)
            .collect(),
        anti_affinity: array(pod, required).iter().map(|t| affinity_term(t, &namespace)).collect(),
        spread: array(pod, "/spec/topologySpreadConstraints")
            .iter()
            .filter_map(|c| spread(c, &labels, &namespace))
            .collect(),
        labels,
        namespace,
        name,
    })
}

pub(crate) fn read_node(node: &Value) -> Result<Node, String> {
    let name = text(node, "/metadata/name");
    let allocatable = node.pointer("/status/allocatable").and_then(Value::as_object);
    let quantity = |key: &str, parse: fn(&str) -> Option<i64>| -> Result<Option<i64>, String> {
        match allocatable.and_then(|a| a.get(key)) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => {
                let t = v.as_str().map(str::to_string).unwrap_or_else(|| v.to_string());
                parse(&t).map(Some).ok_or_else(|| format!("node {name}: its allocatable {key} `{t}` is not a quantity"))
            }
        }
    };
    let (cpu, memory, pods) = (quantity("cpu", millicores)?, quantity("memory", units)?, quantity("pods", units)?);
    Ok(Node {
        labels: object(node, "/metadata/labels"),
        taints: array(node, "/spec/taints")
            .iter()
            .map(|t| Taint { key: text(t, "/key"), value: text(t, "/value"), effect: text(t, "/effect") })
            .collect(),
        allocatable: cpu.zip(memory).map(|(cpu, memory)| Resources { cpu, memory }),
        max_pods: pods,
        ready: array(node, "/status/conditions")
            .iter()
            .any(|c| text(c, "/type") == "Ready" && text(c, "/status") == "True"),
        unschedulable: node.pointer("/spec/unschedulable").and_then(Value::as_bool).unwrap_or(false),
        name,
    })
}

pub(crate) fn read_budget(pdb: &Value) -> Budget {
    Budget {
        namespace: text(pdb, "/metadata/namespace"),
        name: text(pdb, "/metadata/name"),
        selector: pdb.pointer("/spec/selector").cloned(),
        allowed: pdb.pointer("/status/disruptionsAllowed").and_then(Value::as_i64).unwrap_or(0),
    }
}

/// The zone and region labels the scheduler's VolumeZone filter compares with the node's.
const ZONE_LABELS: [&str; 4] = [
    "topology.kubernetes.io/zone",
    "topology.kubernetes.io/region",
    "failure-domain.beta.kubernetes.io/zone",
    "failure-domain.beta.kubernetes.io/region",
];

/// Every claim (`namespace/name`) and where it may be used, from the claim and volume lists.
pub(crate) fn read_claims(pvcs: &[Value], pvs: &[Value]) -> BTreeMap<String, ClaimPlace> {
    let volumes: BTreeMap<String, VolumePlace> = pvs
        .iter()
        .map(|pv| {
            let name = text(pv, "/metadata/name");
            let labels = object(pv, "/metadata/labels");
            let zones = ZONE_LABELS
                .iter()
                .filter_map(|key| labels.get(*key).and_then(Value::as_str).map(|v| (key.to_string(), v)))
                .map(|(key, v)| (key, v.split("__").map(str::to_string).collect()))
                .collect();
            let node_affinity = pv.pointer("/spec/nodeAffinity/required/nodeSelectorTerms").filter(|v| !v.is_null());
            (name.clone(), VolumePlace { name, node_affinity: node_affinity.cloned(), zones })
        })
        .collect();
    pvcs.iter()
        .map(|pvc| {
            let claim = format!("{}/{}", text(pvc, "/metadata/namespace"), text(pvc, "/metadata/name"));
            let volume = text(pvc, "/spec/volumeName");
            let place = if volume.is_empty() {
                ClaimPlace::Unbound
            } else {
                match volumes.get(&volume) {
                    Some(place) => ClaimPlace::Bound(place.clone()),
                    None => ClaimPlace::Missing(format!(
                        "its claim {claim} is bound to PersistentVolume {volume}, which does not exist"
                    )),
                }
            };
            (claim, place)
        })
        .collect()
}
