//! What would stop or hurt a node's drain, found in the cluster's pods and PodDisruptionBudgets
//! (`get pods --all-namespaces -o json`, `get pdb --all-namespaces -o json`: never `-A`, which kubectl 1.11 and
//! OpenShift 3.11's `oc` do not know) before anything moves:
//! - a PodDisruptionBudget that allows no disruption over a pod of the node: its eviction is refused until the
//!   drain timeout;
//! - a pod no controller owns: `drain --force` deletes it and nothing brings it back;
//! - a pod with an emptyDir volume: `--delete-emptydir-data` deletes its data.
//!
//! DaemonSet pods, mirror (static) pods and finished pods are not blockers: drain leaves or ignores them.

use std::collections::BTreeMap;
use std::fmt;

use serde::Serialize;
use serde_json::Value;

/// One thing that would block or hurt the drain of a node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum DrainBlocker {
    /// `namespace/name` of the budget and of the pod it guards.
    DisruptionBudget {
        pdb: String,
        pod: String,
    },
    Unmanaged {
        pod: String,
    },
    EmptyDir {
        pod: String,
    },
}

impl fmt::Display for DrainBlocker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DrainBlocker::DisruptionBudget { pdb, pod } => {
                write!(f, "PodDisruptionBudget {pdb} allows 0 disruptions (guards pod {pod})")
            }
            DrainBlocker::Unmanaged { pod } => {
                write!(f, "pod {pod} has no controller (drain --force deletes it for good)")
            }
            DrainBlocker::EmptyDir { pod } => write!(f, "pod {pod} has an emptyDir volume (its data is lost on drain)"),
        }
    }
}

struct Budget {
    namespace: String,
    name: String,
    /// `spec.selector`, evaluated as the API server evaluates it (`crate::label_selector`).
    selector: Option<Value>,
}

/// The drain blockers of every node, by node name (nodes without any are absent). The message of the error says
/// which list could not be read.
pub fn find(pods_json: &str, pdbs_json: &str) -> Result<BTreeMap<String, Vec<DrainBlocker>>, String> {
    let pods: Value =
        serde_json::from_str(pods_json).map_err(|e| format!("the cluster's pod list is not a Kubernetes list: {e}"))?;
    let pdbs: Value = serde_json::from_str(pdbs_json)
        .map_err(|e| format!("the cluster's PodDisruptionBudget list is not a Kubernetes list: {e}"))?;
    // A list we cannot read is never "nothing blocks": `items` must be a list of objects.
    let pods = items(&pods).map_err(|e| format!("the cluster's pod list is not a Kubernetes list: {e}"))?;
    let pdbs =
        items(&pdbs).map_err(|e| format!("the cluster's PodDisruptionBudget list is not a Kubernetes list: {e}"))?;
    Ok(find_in(pods, pdbs))
}

/// The drain blockers of every node in the `items` of a pod list and of a PodDisruptionBudget list already read (the
/// validation between batches shares its lists).
pub(crate) fn find_in(pods: &[Value], pdbs: &[Value]) -> BTreeMap<String, Vec<DrainBlocker>> {
    let text = |v: &Value, path: &str| v.pointer(path).and_then(Value::as_str).unwrap_or_default().to_string();
    let budgets: Vec<Budget> = pdbs
        .iter()
        .filter(|pdb| pdb.pointer("/status/disruptionsAllowed").and_then(Value::as_i64) == Some(0))
        .map(|pdb| Budget {
            namespace: text(pdb, "/metadata/namespace"),
            name: text(pdb, "/metadata/name"),
            selector: pdb.pointer("/spec/selector").cloned(),
        })
        .collect();

    let mut found: BTreeMap<String, Vec<DrainBlocker>> = BTreeMap::new();
    for pod in pods {
        let node = text(pod, "/spec/nodeName");
        let phase = text(pod, "/status/phase");
        if node.is_empty() || phase == "Succeeded" || phase == "Failed" {
            continue;
        }
        let owners = pod.pointer("/metadata/ownerReferences").and_then(Value::as_array).cloned().unwrap_or_default();
        let controller = owners.iter().find(|o| o.get("controller").and_then(Value::as_bool) == Some(true));
        if controller.is_some_and(|o| o.get("kind").and_then(Value::as_str) == Some("DaemonSet")) {
            continue;
        }
        if pod.pointer("/metadata/annotations/kubernetes.io~1config.mirror").is_some() {
            continue;
        }
        let namespace = text(pod, "/metadata/namespace");
        let name = format!("{namespace}/{}", text(pod, "/metadata/name"));
        let labels = pod.pointer("/metadata/labels").and_then(Value::as_object);
        let blockers = found.entry(node).or_default();
        for budget in budgets.iter().filter(|b| b.namespace == namespace) {
            // matchLabels and matchExpressions; an empty selector selects every pod of the namespace, a missing one
            // none (policy/v1). One that cannot be evaluated is taken to select: the drain would meet it.
            if crate::label_selector::selects(budget.selector.as_ref(), labels).unwrap_or(true) {
                let pdb = format!("{}/{}", budget.namespace, budget.name);
                blockers.push(DrainBlocker::DisruptionBudget { pdb, pod: name.clone() });
            }
        }
        if controller.is_none() {
            blockers.push(DrainBlocker::Unmanaged { pod: name.clone() });
        }
        let volumes = pod.pointer("/spec/volumes").and_then(Value::as_array).cloned().unwrap_or_default();
        if volumes.iter().any(|v| v.get("emptyDir").is_some()) {
            blockers.push(DrainBlocker::EmptyDir { pod: name.clone() });
        }
    }
    found.retain(|_, b| !b.is_empty());
    found
}

/// The `items` of a Kubernetes list: a list of objects. `null` is an empty list (how Go writes a nil slice).
pub(crate) fn items(list: &Value) -> Result<&[Value], String> {
    const NONE: &[Value] = &[];
    match list.get("items") {
        Some(Value::Array(items)) => match items.iter().find(|i| !i.is_object()) {
            Some(item) => Err(format!("an item is not an object: {}", shortened(item))),
            None => Ok(items),
        },
        Some(Value::Null) => Ok(NONE),
        Some(other) => Err(format!("`items` is not a list: {}", shortened(other))),
        None if list.is_object() => Err("it has no `items`".into()),
        None => Err(format!("not an object: {}", shortened(list))),
    }
}

/// A JSON value as a short text for a message.
fn shortened(value: &Value) -> String {
    let text = value.to_string();
    match text.char_indices().nth(80) {
        Some((at, _)) => format!("{}...", &text[..at]),
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_budgets_at_zero_bare_pods_and_local_storage_but_not_daemonsets() {
        let pods = r#"{"items":[
          {"metadata":{"name":"ds","namespace":"kube-system","ownerReferences":[{"kind":"DaemonSet","controller":true}]},
           "spec":{"nodeName":"n1","volumes":[{"name":"x","emptyDir":{}}]},"status":{"phase":"Running"}},
          {"metadata":{"name":"web","namespace":"default","labels":{"app":"web"},
                       "ownerReferences":[{"kind":"ReplicaSet","controller":true}]},
           "spec":{"nodeName":"n1"},"status":{"phase":"Running"}},
          {"metadata":{"name":"db","namespace":"default","labels":{"app":"db"},
                       "ownerReferences":[{"kind":"StatefulSet","controller":true}]},
           "spec":{"nodeName":"n2"},"status":{"phase":"Running"}},
          {"metadata":{"name":"bare","namespace":"default"},"spec":{"nodeName":"n2","volumes":[{"name":"c","emptyDir":{}}]},
           "status":{"phase":"Running"}},
          {"metadata":{"name":"done","namespace":"default"},"spec":{"nodeName":"n3"},"status":{"phase":"Succeeded"}}]}"#;
        let pdbs = r#"{"items":[
          {"metadata":{"name":"db-pdb","namespace":"default"},"spec":{"selector":{"matchLabels":{"app":"db"}}},
           "status":{"disruptionsAllowed":0}},
          {"metadata":{"name":"web-pdb","namespace":"default"},"spec":{"selector":{"matchLabels":{"app":"web"}}},
           "status":{"disruptionsAllowed":1}},
          {"metadata":{"name":"not-web","namespace":"default"},"spec":{"selector":{"matchExpressions":
             [{"key":"app","operator":"NotIn","values":["web"]},{"key":"app","operator":"Exists"}]}},
           "status":{"disruptionsAllowed":0}}]}"#;
        let found = find(pods, pdbs).unwrap();
        assert!(!found.contains_key("n1"), "a DaemonSet pod and a budget with room block nothing: {found:?}");
        assert!(!found.contains_key("n3"), "a finished pod blocks nothing");
        assert_eq!(
            found["n2"],
            [
                DrainBlocker::DisruptionBudget { pdb: "default/db-pdb".into(), pod: "default/db".into() },
                // A budget of matchExpressions only (app NotIn [web], app Exists): db, not web, not bare (no label).
                DrainBlocker::DisruptionBudget { pdb: "default/not-web".into(), pod: "default/db".into() },
                DrainBlocker::Unmanaged { pod: "default/bare".into() },
                DrainBlocker::EmptyDir { pod: "default/bare".into() },
            ]
        );
        assert!(find("Error from server", pdbs).is_err());
    }

    #[test]
    fn a_list_whose_items_are_not_a_list_of_objects_is_an_error_not_nothing_to_block() {
        let good = r#"{"kind":"List","items":[]}"#;
        assert_eq!(find(good, good), Ok(BTreeMap::new()));
        assert_eq!(find(r#"{"kind":"List","items":null}"#, good), Ok(BTreeMap::new()), "Go's nil slice");
        for bad in [r#"{"kind":"List","items":{"a":5}}"#, r#"{"kind":"List"}"#, r#"{"items":[5]}"#, "[]", "5"] {
            let pods = find(bad, good).expect_err(bad);
            assert!(pods.starts_with("the cluster's pod list is not a Kubernetes list"), "{bad}: {pods}");
            let pdbs = find(good, bad).expect_err(bad);
            assert!(pdbs.starts_with("the cluster's PodDisruptionBudget list"), "{bad}: {pdbs}");
        }
    }
}
