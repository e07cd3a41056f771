//! What the cluster says about its nodes: the `get nodes -o json` NodeList, read into plain values.

use std::borrow::Cow;
use std::collections::BTreeMap;

use serde::Deserialize;

use crate::settings::TargetVersion;

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
    /// The node's annotations that this tool reads: its own (`upgrade-tool.io/...`, see `annotations`) and the
    /// disruption guards of cluster-autoscaler and Karpenter. The others are not kept: a real node carries many,
    /// some large (CSI node ids, volumes), and a poll of 5,000 nodes must not copy them.
    pub annotations: BTreeMap<String, String>,
}

/// The node annotations this tool writes and reads, one place for their names.
pub(crate) mod annotations {
    /// The prefix of the keys this tool owns on a Node (see README "Who cordoned a node").
    pub(crate) const PREFIX: &str = "upgrade-tool.io/";
    /// The run (its journal run id) that cordoned the node: set in the same step as the cordon, removed with the
    /// uncordon. A cordoned node without it was cordoned by someone else.
    pub(crate) const CORDONED_BY: &str = "upgrade-tool.io/cordoned-by";
    /// When that run cordoned it (RFC 3339, UTC).
    pub(crate) const CORDONED_AT: &str = "upgrade-tool.io/cordoned-at";
    /// The change ticket of that run (`upgrade_change_id`), when set.
    pub(crate) const CHANGE_ID: &str = "upgrade-tool.io/change-id";
    /// Which disruption guards this tool set on the node (comma-separated keys below): only those are removed again,
    /// so a guard the operator set stays.
    pub(crate) const GUARDS: &str = "upgrade-tool.io/guards";
    /// cluster-autoscaler does not scale down a node annotated so.
    pub(crate) const AUTOSCALER: &str = "cluster-autoscaler.kubernetes.io/scale-down-disabled";
    /// Karpenter does not disrupt (consolidate, drift, expire) a node annotated so.
    pub(crate) const KARPENTER: &str = "karpenter.sh/do-not-disrupt";
    /// The guards set while the run works on a node.
    pub(crate) const DISRUPTION_GUARDS: [&str; 2] = [AUTOSCALER, KARPENTER];

    pub(crate) fn kept(key: &str) -> bool {
        key.starts_with(PREFIX) || DISRUPTION_GUARDS.contains(&key)
    }
}

impl ClusterNode {
    /// The run that cordoned this node, when an upgrade run did (its annotation); `None` for a schedulable node.
    pub(crate) fn cordoned_by_run(&self) -> Option<&str> {
        if !self.unschedulable {
            return None;
        }
        self.annotations.get(annotations::CORDONED_BY).map(String::as_str).filter(|r| !r.is_empty())
    }

    /// "Cordoned before the run": unschedulable and not cordoned by an upgrade run (any run: this one, a killed one,
    /// another controller's). Read from the Node itself, so it holds for `--fresh`, a second state directory and a
    /// rollback alike.
    pub(crate) fn cordoned_by_someone_else(&self) -> bool {
        self.unschedulable && self.cordoned_by_run().is_none()
    }

    /// The disruption guards an upgrade run set on this node (its `upgrade-tool.io/guards`).
    pub(crate) fn guards_set_by_a_run(&self) -> Vec<&str> {
        let listed = self.annotations.get(annotations::GUARDS).map(String::as_str).unwrap_or_default();
        annotations::DISRUPTION_GUARDS.iter().copied().filter(|g| listed.split(',').any(|l| l.trim() == *g)).collect()
    }

    /// The disruption guards a run may set and later remove on this node: those absent, and those an upgrade run set
    /// (a killed one's are taken over). A guard the operator set is theirs.
    pub(crate) fn guards_to_own(&self) -> Vec<&'static str> {
        let ours = self.guards_set_by_a_run();
        annotations::DISRUPTION_GUARDS
            .iter()
            .copied()
            .filter(|g| !self.annotations.contains_key(*g) || ours.contains(g))
            .collect()
    }
}

/// A string of the JSON, borrowed where it has no escapes: a poll reads every node of the cluster (25 MB at 5,000
/// nodes) to keep the few in flight, and copying the strings of every node was a fifth of that parse. (serde borrows
/// a `Cow` field itself, but not one inside a map or a list: those are always copied.)
#[derive(Default, PartialEq, Eq, PartialOrd, Ord)]
struct Text<'a>(Cow<'a, str>);

impl<'de: 'a, 'a> Deserialize<'de> for Text<'a> {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl<'de> serde::de::Visitor<'de> for Visitor {
            type Value = Text<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Text<'de>, E> {
                Ok(Text(Cow::Borrowed(v)))
            }
            fn visit_str<E>(self, v: &str) -> Result<Text<'de>, E> {
                Ok(Text(Cow::Owned(v.to_string())))
            }
            fn visit_string<E>(self, v: String) -> Result<Text<'de>, E> {
                Ok(Text(Cow::Owned(v)))
            }
        }
        deserializer.deserialize_str(Visitor)
    }
}

impl Text<'_> {
    fn into_owned(self) -> String {
        self.0.into_owned()
    }
}

impl std::ops::Deref for Text<'_> {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for Text<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

#[derive(Deserialize)]
struct NodeList<'a> {
    #[serde(default, borrow)]
    items: Vec<NodeItem<'a>>,
}

#[derive(Deserialize)]
struct NodeItem<'a> {
    #[serde(borrow)]
    metadata: NodeMetadata<'a>,
    #[serde(default)]
    spec: Spec,
    #[serde(default, borrow)]
    status: Status<'a>,
}

#[derive(Deserialize)]
struct Metadata<'a> {
    #[serde(borrow)]
    name: Text<'a>,
}

/// A Node's metadata: its name, labels, creation time and annotations (read for nodes only: not `flatten`, which buffers every
/// field, and not for the pods of a large cluster).
#[derive(Deserialize)]
struct NodeMetadata<'a> {
    #[serde(borrow)]
    name: Text<'a>,
    #[serde(default, borrow)]
    labels: BTreeMap<Text<'a>, Text<'a>>,
    #[serde(default, borrow, rename = "creationTimestamp")]
    created: Text<'a>,
    #[serde(default, borrow)]
    annotations: BTreeMap<Text<'a>, Text<'a>>,
}

#[derive(Deserialize, Default)]
struct Spec {
    #[serde(default)]
    unschedulable: bool,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct Status<'a> {
    #[serde(default, borrow)]
    node_info: NodeInfo<'a>,
    #[serde(default, borrow)]
    conditions: Vec<Condition<'a>>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct NodeInfo<'a> {
    #[serde(default, borrow)]
    kubelet_version: Text<'a>,
}

#[derive(Deserialize)]
struct Condition<'a> {
    #[serde(rename = "type", borrow)]
    kind: Text<'a>,
    #[serde(borrow)]
    status: Text<'a>,
}

/// Reads the output of `kubectl get nodes -o json`. The message of the error says what was wrong with it.
pub(crate) fn parse_node_list(json: &str) -> Result<Vec<ClusterNode>, String> {
    parse_nodes_named(json, |_| true)
}

/// Reads the nodes whose name `wanted` accepts from the output of `kubectl get nodes -o json`.
pub(crate) fn parse_nodes_named(json: &str, wanted: impl Fn(&str) -> bool) -> Result<Vec<ClusterNode>, String> {
    let list: NodeList<'_> =
        serde_json::from_str(json).map_err(|e| format!("the cluster's node list is not a Kubernetes NodeList: {e}"))?;
    Ok(list.items.into_iter().filter(|n| wanted(&n.metadata.name)).map(NodeItem::into_node).collect())
}

/// Reads the output of `kubectl get node NAME -o json`: one Node object.
pub(crate) fn parse_node(json: &str) -> Result<ClusterNode, String> {
    let item: NodeItem<'_> =
        serde_json::from_str(json).map_err(|e| format!("the cluster's answer is not a Kubernetes Node: {e}"))?;
    Ok(item.into_node())
}

impl NodeItem<'_> {
    fn into_node(self) -> ClusterNode {
        ClusterNode {
            ready: self.status.conditions.iter().any(|c| &*c.kind == "Ready" && &*c.status == "True"),
            name: self.metadata.name.into_owned(),
            created: self.metadata.created.into_owned(),
            labels: self.metadata.labels.into_iter().map(|(k, v)| (k.into_owned(), v.into_owned())).collect(),
            unschedulable: self.spec.unschedulable,
            annotations: self
                .metadata
                .annotations
                .into_iter()
                .filter(|(k, _)| annotations::kept(k))
                .map(|(k, v)| (k.into_owned(), v.into_owned()))
                .collect(),
            kubelet_version: self.status.node_info.kubelet_version.into_owned(),
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
    /// The node the request's own subject names (`CN=system:node:NAME` in `spec.request`), when it can be read.
    pub subject_node: Option<String>,
}

/// The service account OpenShift 3.11's kubelets bootstrap their client certificates with: one for every node, so
/// only the request's subject says which node a CSR is for.
const NODE_BOOTSTRAPPER: &str = "system:serviceaccount:openshift-infra:node-bootstrapper";

impl PendingCsr {
    /// The node the request is for: the requestor's (`system:node:NAME`), or, for the node bootstrapper's requests,
    /// the node the request's subject names, as openshift-ansible's oc_csr_approve reads it. Other requestors name no
    /// node: a subject alone is not trusted from anyone who may create a CSR.
    pub(crate) fn node(&self) -> Option<&str> {
        if let Some(node) = self.requestor.strip_prefix("system:node:") {
            return Some(node);
        }
        if self.requestor == NODE_BOOTSTRAPPER { self.subject_node.as_deref() } else { None }
    }
}

/// The node a CSR's `spec.request` (base64 of a PEM `CERTIFICATE REQUEST`) names in its subject's common name
/// (`system:node:NAME`); `None` when it names none or cannot be read.
fn subject_node(request: &str) -> Option<String> {
    use x509_parser::prelude::FromDer;
    let pem = data_encoding::BASE64.decode(request.trim().as_bytes()).ok()?;
    let (_, pem) = x509_parser::pem::parse_x509_pem(&pem).ok()?;
    if pem.label != "CERTIFICATE REQUEST" && pem.label != "NEW CERTIFICATE REQUEST" {
        return None;
    }
    let (_, csr) = x509_parser::certification_request::X509CertificationRequest::from_der(&pem.contents).ok()?;
    let cn = csr.certification_request_info.subject.iter_common_name().next()?.as_str().ok()?;
    cn.strip_prefix("system:node:").filter(|n| !n.is_empty()).map(str::to_string)
}

#[derive(Deserialize)]
struct CsrList<'a> {
    #[serde(default, borrow)]
    items: Vec<CsrItem<'a>>,
}

#[derive(Deserialize)]
struct CsrItem<'a> {
    #[serde(borrow)]
    metadata: Metadata<'a>,
    #[serde(default)]
    spec: CsrSpec,
    #[serde(default)]
    status: CsrStatus,
}

#[derive(Deserialize, Default)]
struct CsrSpec {
    #[serde(default)]
    username: String,
    #[serde(default)]
    request: String,
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
    let list: CsrList<'_> = serde_json::from_str(json)
        .map_err(|e| format!("the cluster's CSR list is not a CertificateSigningRequestList: {e}"))?;
    Ok(list
        .items
        .into_iter()
        .filter(|c| !c.status.conditions.iter().any(|k| k.kind == "Approved" || k.kind == "Denied"))
        .map(|c| {
            // Read only where it decides: the bootstrapper's requests name their node nowhere else.
            let subject_node = if c.spec.username == NODE_BOOTSTRAPPER { subject_node(&c.spec.request) } else { None };
            PendingCsr { name: c.metadata.name.into_owned(), requestor: c.spec.username, subject_node }
        })
        .collect())
}

#[derive(Deserialize)]
struct PodList<'a> {
    #[serde(default, borrow)]
    items: Vec<PodItem<'a>>,
}

#[derive(Deserialize)]
struct PodItem<'a> {
    #[serde(borrow)]
    metadata: Metadata<'a>,
    #[serde(default)]
    spec: PodSpec,
    #[serde(default, borrow)]
    status: PodStatus<'a>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct PodSpec {
    #[serde(default)]
    node_name: String,
    #[serde(default)]
    containers: Vec<Container>,
}

#[derive(Deserialize, Default)]
struct Container {
    #[serde(default)]
    image: String,
}

#[derive(Deserialize, Default)]
struct PodStatus<'a> {
    #[serde(default)]
    phase: String,
    #[serde(default, borrow)]
    conditions: Vec<Condition<'a>>,
}

/// Reads `get pods -o json` of the control-plane pods: `Ok` when every node of `masters` runs at least one and each
/// is Running and Ready; otherwise what is wrong, node by node.
pub(crate) fn control_plane_pods_problem(json: &str, masters: &[String]) -> Result<(), String> {
    let list: PodList<'_> = serde_json::from_str(json)
        .map_err(|e| format!("the control-plane pod list is not a Kubernetes PodList: {e}"))?;
    let mut problems = Vec::new();
    for master in masters {
        let pods: Vec<&PodItem<'_>> = list.items.iter().filter(|p| p.spec.node_name == *master).collect();
        if pods.is_empty() {
            problems.push(format!("no control-plane pod on {master}"));
        }
        for pod in pods {
            let ready = pod.status.conditions.iter().any(|c| &*c.kind == "Ready" && &*c.status == "True");
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

/// Reads a PodList (`get pods -n NS -o json`) for the pods of `node` whose names start with each of `prefixes`
/// (`master-api-`, `sdn-`): `Ok` when each prefix has at least one such pod and every one of them runs `image` (its
/// first container's); otherwise what is wrong. A list that cannot be read is a problem too: a check that cannot
/// read what it checks fails.
pub(crate) fn pods_not_at_image(json: &str, node: &str, prefixes: &[&str], image: &str) -> Result<(), String> {
    let list: PodList<'_> =
        serde_json::from_str(json).map_err(|e| format!("the pod list is not a Kubernetes PodList: {e}"))?;
    let mut problems = Vec::new();
    for prefix in prefixes {
        let pods: Vec<&PodItem<'_>> =
            list.items.iter().filter(|p| p.spec.node_name == node && p.metadata.name.starts_with(prefix)).collect();
        if pods.is_empty() {
            problems.push(format!("no {prefix}{node} pod on {node}"));
        }
        for pod in pods {
            let runs = pod.spec.containers.first().map_or("no container", |c| c.image.as_str());
            if runs != image {
                problems.push(format!("{} runs {runs}, not {image}", pod.metadata.name));
            }
        }
    }
    if problems.is_empty() { Ok(()) } else { Err(problems.join("; ")) }
}

/// The OpenShift release in `get --raw /version/openshift` (`{"gitVersion": "v3.11.248", ...}`).
pub(crate) fn openshift_release(json: &str) -> Result<String, String> {
    #[derive(Deserialize)]
    struct Info {
        #[serde(rename = "gitVersion")]
        git_version: String,
    }
    let info: Info = serde_json::from_str(json.trim()).map_err(|e| {
        let shown: String = json.trim().chars().take(200).collect();
        format!("/version/openshift did not answer a version: {e} (`{shown}`)")
    })?;
    Ok(info.git_version)
}

/// The image of a workload object (`get dc|deployment|daemonset NAME -o json`): its pod template's first container.
/// `None` for an empty answer (`--ignore-not-found` of an object the cluster does not have) or another shape.
pub(crate) fn workload_image(json: &str) -> Option<String> {
    let value: serde_json::Value = serde_json::from_str(json.trim()).ok()?;
    value.pointer("/spec/template/spec/containers/0/image")?.as_str().map(str::to_string)
}

/// The image repository of a kubeadm cluster: `imageRepository` of the ClusterConfiguration in the kubeadm-config
/// ConfigMap (`get configmap kubeadm-config -o json`); `None` when the configuration names none (kubeadm's default,
/// registry.k8s.io). An answer that is not that ConfigMap is an error: the images are never guessed.
pub(crate) fn kubeadm_image_repository(json: &str) -> Result<Option<String>, String> {
    let value: serde_json::Value =
        serde_json::from_str(json).map_err(|e| format!("the kubeadm-config ConfigMap is not JSON ({e})"))?;
    let config = value
        .pointer("/data/ClusterConfiguration")
        .and_then(serde_json::Value::as_str)
        .ok_or("the kubeadm-config ConfigMap has no data.ClusterConfiguration")?;
    // A top-level key of the YAML document (kubeadm writes it unindented, as a plain or quoted scalar).
    Ok(config.lines().find_map(|line| {
        let rest = line.strip_prefix("imageRepository:")?;
        let repository = rest.split(" #").next().unwrap_or_default().trim().trim_matches(|c| c == '"' || c == '\'');
        (!repository.is_empty()).then(|| repository.to_string())
    }))
}

/// Every container image of a list of workloads (`get daemonsets --all-namespaces -o json`), init containers too,
/// sorted and once each.
pub(crate) fn workload_images(json: &str) -> Result<Vec<String>, String> {
    let value: serde_json::Value =
        serde_json::from_str(json).map_err(|e| format!("the DaemonSet list is not JSON ({e})"))?;
    let items = match value.get("items") {
        Some(serde_json::Value::Array(items)) => items.as_slice(),
        Some(serde_json::Value::Null) => &[],
        _ => return Err("the DaemonSet list has no items".into()),
    };
    let mut images: Vec<String> = items
        .iter()
        .flat_map(|item| {
            ["initContainers", "containers"].into_iter().filter_map(move |kind| {
                item.pointer(&format!("/spec/template/spec/{kind}")).and_then(serde_json::Value::as_array)
            })
        })
        .flatten()
        .filter_map(|c| c.get("image").and_then(serde_json::Value::as_str).map(str::to_string))
        .collect();
    images.sort();
    images.dedup();
    Ok(images)
}

/// The oldest release among container images, one a line (`registry.redhat.io/openshift3/ose-control-plane:v3.11.200`),
/// read from their tags: the release and the tag as written. Images whose tag is not a release (a digest, `v3.11`)
/// are passed over: only what is known to be older counts.
pub(crate) fn oldest_image_release(images: &str) -> Option<(TargetVersion, String)> {
    images
        .lines()
        .map(|line| line.trim().trim_matches(|c| c == '"' || c == '\''))
        .filter_map(|image| {
            let (_, tag) = image.rsplit_once(':')?;
            (!tag.contains('/')).then_some(tag)?;
            TargetVersion::parse(tag).ok().map(|v| (v, tag.to_string()))
        })
        .min_by(|a, b| a.0.cmp(&b.0))
}

#[cfg(test)]
mod tests {

    /// `openssl req -new -subj /O=system:nodes/CN=system:node:n1`, base64 as `spec.request` carries it.
    const N1_REQUEST: &str = "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURSBSRVFVRVNULS0tLS0KTUlIc01JR1NBZ0VBTURBeEZUQVRCZ05WQkFvTURITjVjM1JsYlRwdWIyUmxjekVYTUJVR0ExVUVBd3dPYzNsegpkR1Z0T201dlpHVTZiakV3V1RBVEJnY3Foa2pPUFFJQkJnZ3Foa2pPUFFNQkJ3TkNBQVNoMzVFZjd2V3lEdWpnCkluSzgzNlhQMElpekdYSnZPZnNYOU5rcitPanRqR1MvNy8wVlUrbmV5OFRVVS9SbkFaTUVNTk9xaGZ5dGl0MWwKaVQzcWg3QmZvQUF3Q2dZSUtvWkl6ajBFQXdJRFNRQXdSZ0loQUlSaTgzY1hXZGdiOS9FZTlmc3ZXM2tnN2ZRZwpBMXR4UjNDd0lSUERYajliQWlFQWxMbjVpRExqemkrUlRQRmFTRU5SUk11VjltYlpueGZ2dEpQeFVJZ1NHbGM9Ci0tLS0tRU5EIENFUlRJRklDQVRFIFJFUVVFU1QtLS0tLQo=";

    #[test]
    fn a_bootstrapper_csr_is_for_the_node_its_subject_names_and_no_other_requestor_is_trusted_by_its_subject() {
        let list = |username: &str, request: &str| {
            format!(
                r#"{{"items": [{{"metadata": {{"name": "csr-a"}}, "spec": {{"username": "{username}", "request": "{request}"}}}}]}}"#
            )
        };
        let node = |username: &str, request: &str| {
            parse_pending_csrs(&list(username, request)).unwrap()[0].node().map(str::to_string)
        };
        let bootstrapper = "system:serviceaccount:openshift-infra:node-bootstrapper";
        assert_eq!(node(bootstrapper, N1_REQUEST).as_deref(), Some("n1"));
        assert_eq!(node("system:node:n2", N1_REQUEST).as_deref(), Some("n2"), "the requestor names its node");
        assert_eq!(
            node("system:serviceaccount:default:someone", N1_REQUEST),
            None,
            "any CSR creator may write a subject"
        );
        assert_eq!(node(bootstrapper, "not base64"), None);
        assert_eq!(node(bootstrapper, ""), None);
    }

    #[test]
    fn a_kubeadm_clusters_image_repository_is_read_from_its_cluster_configuration() {
        let cm = |config: &str| serde_json::json!({"data": {"ClusterConfiguration": config}}).to_string();
        let mirror = cm(
            "apiVersion: kubeadm.k8s.io/v1beta3\nimageRepository: \"10.0.0.5:5000/k8s\"\nkind: ClusterConfiguration\n",
        );
        assert_eq!(kubeadm_image_repository(&mirror).unwrap().as_deref(), Some("10.0.0.5:5000/k8s"));
        assert_eq!(kubeadm_image_repository(&cm("kind: ClusterConfiguration\n")).unwrap(), None);
        assert!(kubeadm_image_repository("Error from server (NotFound)").is_err());
        assert!(kubeadm_image_repository("{}").is_err());
    }

    #[test]
    fn the_images_of_daemonsets_are_listed_once_each_init_containers_too() {
        let list = serde_json::json!({"items": [
            {"spec": {"template": {"spec": {"initContainers": [{"image": "calico/cni:v3.27.0"}],
                "containers": [{"image": "calico/node:v3.27.0"}]}}}},
            {"spec": {"template": {"spec": {"containers": [{"image": "calico/node:v3.27.0"}]}}}}]});
        assert_eq!(workload_images(&list.to_string()).unwrap(), ["calico/cni:v3.27.0", "calico/node:v3.27.0"]);
        assert!(workload_images("not json").is_err());
    }

    #[test]
    fn the_oldest_image_release_is_read_from_tags_and_images_without_one_are_passed_over() {
        let images = "registry.redhat.io/openshift3/ose-control-plane:v3.11.248\n\
                      'registry.redhat.io/openshift3/ose-control-plane:v3.11.200'\n\
                      registry.local:5000/ose-control-plane@sha256:abc\n\
                      registry.local:5000/ose-control-plane\n";
        let (release, tag) = oldest_image_release(images).expect("a release");
        assert_eq!(tag, "v3.11.200");
        assert_eq!(release, TargetVersion::parse("3.11.200").unwrap());
        assert!(oldest_image_release("registry.local:5000/ose-control-plane:v3.11\n").is_none());
        assert!(oldest_image_release("").is_none());
    }

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
    fn escaped_strings_read_as_plain_ones_and_a_poll_keeps_only_the_nodes_it_waits_for() {
        // `\/` and `\u0031` are what a JSON writer may escape: such strings cannot be borrowed from the text.
        let json = r#"{"items":[
          {"metadata":{"name":"n\u0031","labels":{"topology.kubernetes.io\/zone":"eu\/1"}},
           "status":{"conditions":[{"type":"Re\u0061dy","status":"True"}]}},
          {"metadata":{"name":"n2"}}]}"#;
        let nodes = super::parse_nodes_named(json, |name| name == "n1").unwrap();
        assert_eq!(nodes.len(), 1);
        assert_eq!(nodes[0].name, "n1");
        assert_eq!(nodes[0].labels["topology.kubernetes.io/zone"], "eu/1");
        assert!(nodes[0].ready);
        assert_eq!(parse_node_list(json).unwrap().len(), 2);
    }

    #[test]
    fn rejects_what_is_not_a_node_list() {
        assert!(parse_node_list("Error from server (Forbidden)").is_err());
        assert!(parse_node_list(r#"{"items":[{"spec":{}}]}"#).is_err());
    }
}
