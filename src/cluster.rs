//! What the cluster says about its nodes: the `get nodes -o json` NodeList, read into plain values.

use std::collections::BTreeMap;

use serde::Deserialize;

/// One node as the cluster API reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ClusterNode {
    pub name: String,
    pub labels: BTreeMap<String, String>,
    pub unschedulable: bool,
    pub kubelet_version: String,
    pub ready: bool,
    /// `metadata.creationTimestamp` (RFC 3339, UTC, as the API server writes it); empty when not reported.
    pub created: String,
}

#[derive(Deserialize)]
struct NodeList {
    #[serde(default)]
    items: Vec<NodeItem>,
}

#[derive(Deserialize)]
struct NodeItem {
    metadata: Metadata,
    #[serde(default)]
    spec: Spec,
    #[serde(default)]
    status: Status,
}

#[derive(Deserialize)]
struct Metadata {
    name: String,
    #[serde(default)]
    labels: BTreeMap<String, String>,
    #[serde(default, rename = "creationTimestamp")]
    created: String,
}

#[derive(Deserialize, Default)]
struct Spec {
    #[serde(default)]
    unschedulable: bool,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct Status {
    #[serde(default)]
    node_info: NodeInfo,
    #[serde(default)]
    conditions: Vec<Condition>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct NodeInfo {
    #[serde(default)]
    kubelet_version: String,
}

#[derive(Deserialize)]
struct Condition {
    #[serde(rename = "type")]
    kind: String,
    status: String,
}

/// Reads the output of `kubectl get nodes -o json`. The message of the error says what was wrong with it.
pub(crate) fn parse_node_list(json: &str) -> Result<Vec<ClusterNode>, String> {
    let list: NodeList =
        serde_json::from_str(json).map_err(|e| format!("the cluster's node list is not a Kubernetes NodeList: {e}"))?;
    Ok(list.items.into_iter().map(NodeItem::into_node).collect())
}

/// Reads the output of `kubectl get node NAME -o json`: one Node object.
pub(crate) fn parse_node(json: &str) -> Result<ClusterNode, String> {
    let item: NodeItem =
        serde_json::from_str(json).map_err(|e| format!("the cluster's answer is not a Kubernetes Node: {e}"))?;
    Ok(item.into_node())
}

impl NodeItem {
    fn into_node(self) -> ClusterNode {
        ClusterNode {
            ready: self.status.conditions.iter().any(|c| c.kind == "Ready" && c.status == "True"),
            name: self.metadata.name,
            created: self.metadata.created,
            labels: self.metadata.labels,
            unschedulable: self.spec.unschedulable,
            kubelet_version: self.status.node_info.kubelet_version,
        }
    }
}

/// A certificate signing request neither approved nor denied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PendingCsr {
    pub name: String,
    /// `spec.username`: `system:node:NAME` for a kubelet's serving certificate, `system:serviceaccount:...:node-bootstrapper`
    /// (or `system:bootstrap:...`) for its client certificate.
    pub requestor: String,
}

impl PendingCsr {
    /// The node the request is for, when the requestor says (`system:node:NAME`).
    pub(crate) fn node(&self) -> Option<&str> {
        self.requestor.strip_prefix("system:node:")
    }
}

#[derive(Deserialize)]
struct CsrList {
    #[serde(default)]
    items: Vec<CsrItem>,
}

#[derive(Deserialize)]
struct CsrItem {
    metadata: Metadata,
    #[serde(default)]
    spec: CsrSpec,
    #[serde(default)]
    status: CsrStatus,
}

#[derive(Deserialize, Default)]
struct CsrSpec {
    #[serde(default)]
    username: String,
}

#[derive(Deserialize, Default)]
struct CsrStatus {
    #[serde(default)]
    conditions: Vec<CsrCondition>,
}

#[derive(Deserialize)]
struct CsrCondition {
    #[serde(rename = "type")]
    kind: String,
}

/// Reads `kubectl get csr -o json` and keeps the pending requests (no Approved or Denied condition).
pub(crate) fn parse_pending_csrs(json: &str) -> Result<Vec<PendingCsr>, String> {
    let list: CsrList = serde_json::from_str(json)
        .map_err(|e| format!("the cluster's CSR list is not a CertificateSigningRequestList: {e}"))?;
    Ok(list
        .items
        .into_iter()
        .filter(|c| !c.status.conditions.iter().any(|k| k.kind == "Approved" || k.kind == "Denied"))
        .map(|c| PendingCsr { name: c.metadata.name, requestor: c.spec.username })
        .collect())
}

#[derive(Deserialize)]
struct PodList {
    #[serde(default)]
    items: Vec<PodItem>,
}

#[derive(Deserialize)]
struct PodItem {
    metadata: Metadata,
    #[serde(default)]
    spec: PodSpec,
    #[serde(default)]
    status: PodStatus,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct PodSpec {
    #[serde(default)]
    node_name: String,
}

#[derive(Deserialize, Default)]
struct PodStatus {
    #[serde(default)]
    phase: String,
    #[serde(default)]
    conditions: Vec<Condition>,
}

/// Reads `get pods -o json` of the control-plane pods: `Ok` when every node of `masters` runs at least one and each
/// is Running and Ready; otherwise what is wrong, node by node.
pub(crate) fn control_plane_pods_problem(json: &str, masters: &[String]) -> Result<(), String> {
    let list: PodList = serde_json::from_str(json)
        .map_err(|e| format!("the control-plane pod list is not a Kubernetes PodList: {e}"))?;
    let mut problems = Vec::new();
    for master in masters {
        let pods: Vec<&PodItem> = list.items.iter().filter(|p| p.spec.node_name == *master).collect();
        if pods.is_empty() {
            problems.push(format!("no control-plane pod on {master}"));
        }
        for pod in pods {
            let ready = pod.status.conditions.iter().any(|c| c.kind == "Ready" && c.status == "True");
            if pod.status.phase != "Running" || !ready {
                let phase = if pod.status.phase.is_empty() { "no phase" } else { pod.status.phase.as_str() };
                problems.push(format!(
                    "{} on {master} is {phase}, {}",
                    pod.metadata.name,
                    if ready { "Ready" } else { "not Ready" }
                ));
            }
        }
    }
    if problems.is_empty() { Ok(()) } else { Err(problems.join("; ")) }
}

#[cfg(test)]
mod tests {
    #[test]
    fn control_plane_pods_must_run_ready_on_every_master() {
        let pod = |name: &str, node: &str, ready: &str| {
            format!(
                r#"{{"metadata":{{"name":"{name}"}},"spec":{{"nodeName":"{node}"}},"status":{{"phase":"Running","conditions":[{{"type":"Ready","status":"{ready}"}}]}}}}"#
            )
        };
        let masters = ["m1".to_string(), "m2".to_string(), "m3".to_string()];
        let json = format!(
            r#"{{"items":[{},{},{}]}}"#,
            pod("api-m1", "m1", "True"),
            pod("api-m2", "m2", "False"),
            pod("x-n1", "n1", "False")
        );
        let problem = control_plane_pods_problem(&json, &masters).unwrap_err();
        assert_eq!(problem, "api-m2 on m2 is Running, not Ready; no control-plane pod on m3");
        let json = format!(r#"{{"items":[{},{}]}}"#, pod("api-m1", "m1", "True"), pod("api-m2", "m2", "True"));
        assert!(control_plane_pods_problem(&json, &masters[..2]).is_ok());
    }

    use super::*;

    #[test]
    fn keeps_only_pending_csrs() {
        let json = r#"{"items":[
          {"metadata":{"name":"csr-a"},"spec":{"username":"system:node:n1"},"status":{}},
          {"metadata":{"name":"csr-b"},"spec":{"username":"system:node:n2"},"status":{"conditions":[{"type":"Approved"}]}},
          {"metadata":{"name":"csr-c"},"spec":{"username":"system:bootstrap:abc"}}]}"#;
        let pending = parse_pending_csrs(json).unwrap();
        let names: Vec<&str> = pending.iter().map(|c| c.name.as_str()).collect();
        assert_eq!(names, ["csr-a", "csr-c"]);
        assert_eq!(pending[0].node(), Some("n1"));
        assert_eq!(pending[1].node(), None);
    }

    #[test]
    fn reads_a_node_list() {
        let json = r#"{"apiVersion":"v1","kind":"NodeList","items":[
          {"metadata":{"name":"m1","labels":{"node-role.kubernetes.io/master":"true"}},
           "spec":{},
           "status":{"nodeInfo":{"kubeletVersion":"v1.28.4"},
                     "conditions":[{"type":"MemoryPressure","status":"False"},{"type":"Ready","status":"True"}]}},
          {"metadata":{"name":"n1"},"spec":{"unschedulable":true},
           "status":{"nodeInfo":{"kubeletVersion":"v1.28.4"},"conditions":[{"type":"Ready","status":"False"}]}}]}"#;
        let nodes = parse_node_list(json).unwrap();
        assert_eq!(nodes.len(), 2);
        assert!(nodes[0].ready && !nodes[0].unschedulable);
        assert_eq!(nodes[0].labels["node-role.kubernetes.io/master"], "true");
        assert!(!nodes[1].ready && nodes[1].unschedulable);
        assert_eq!(nodes[1].kubelet_version, "v1.28.4");
    }

    #[test]
    fn rejects_what_is_not_a_node_list() {
        assert!(parse_node_list("Error from server (Forbidden)").is_err());
        assert!(parse_node_list(r#"{"items":[{"spec":{}}]}"#).is_err());
    }
}
