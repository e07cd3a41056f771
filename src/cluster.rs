//! What the cluster says about its nodes: the `get nodes -o json` NodeList, read into plain values.

use std::collections::BTreeMap;

use serde::Deserialize;

/// One node as the cluster API reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterNode {
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
pub fn parse_node_list(json: &str) -> Result<Vec<ClusterNode>, String> {
    let list: NodeList =
        serde_json::from_str(json).map_err(|e| format!("the cluster's node list is not a Kubernetes NodeList: {e}"))?;
    Ok(list.items.into_iter().map(NodeItem::into_node).collect())
}

/// Reads the output of `kubectl get node NAME -o json`: one Node object.
pub fn parse_node(json: &str) -> Result<ClusterNode, String> {
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

#[cfg(test)]
mod tests {
    use super::*;

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
