//! A stand-in Kubernetes API server for the real `kubectl`, in test code only: plain HTTP/1.1 on loopback, one thread
//! per connection, serving what `get nodes`, `get node NAME`, `cordon`, `uncordon`, `drain` and `get --raw /readyz`
//! ask for: discovery (/api, /apis, /api/v1, policy/v1 and apps/v1), nodes (GET, list, strategic-merge PATCH of
//! `spec.unschedulable`), pods listed by node (`fieldSelector=spec.nodeName=NAME`), evictions (POST
//! `.../pods/NAME/eviction`) that honour a PodDisruptionBudget with HTTP 429, DaemonSets (so drain can skip their pods),
//! and /readyz. The host-side stand-ins tell it what a kubelet restart did: `POST /_test/kubelet/NAME?version=V`.
//! Every request is recorded, in order, for the test to count.
//!
//! ```ignore
//! let api = KubeApi::start(&[("m1", "v1.28.5"), ("n1", "v1.28.5")]);
//! api.add_pod("default", "web-1", "n1", PodKind::ReplicaSet);
//! // upgrade_kubectl: "kubectl --kubeconfig=<api.kubeconfig()>"
//! ```

#![allow(dead_code)]

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};

/// What owns a pod, which decides what `kubectl drain` does with it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PodKind {
    /// Owned by a ReplicaSet: evicted.
    ReplicaSet,
    /// Owned by a DaemonSet: skipped with `--ignore-daemonsets`.
    DaemonSet,
    /// Guarded by a PodDisruptionBudget that allows no disruption: every eviction is refused with 429.
    DisruptionBudget,
    /// The eviction is accepted but the pod never goes away (a finalizer, a stuck preStop hook).
    NeverTerminates,
}

#[derive(Debug, Clone)]
struct Node {
    name: String,
    version: String,
    ready: bool,
    unschedulable: bool,
    /// After a kubelet restart the node stays NotReady.
    stays_not_ready: bool,
    /// After a kubelet restart the node reports NotReady for this many reads of it, then Ready.
    not_ready_reads: u32,
}

#[derive(Debug, Clone)]
struct Pod {
    namespace: String,
    name: String,
    node: String,
    kind: PodKind,
    uid: String,
    evicted: bool,
}

#[derive(Default)]
struct State {
    nodes: Vec<Node>,
    pods: Vec<Pod>,
    readyz_ok: bool,
    /// /readyz fails from the restart of this node's kubelet on.
    readyz_fails_after_restart_of: Option<String>,
    /// Nodes still to answer NotReady, with the reads left.
    not_ready_reads_left: HashMap<String, u32>,
    requests: Vec<Request>,
    /// ConfigMaps by (namespace, name), as stored objects (the cluster-wide lock).
    configmaps: HashMap<(String, String), Value>,
    /// `/metrics`: the apiserver_requested_deprecated_apis lines a test gives, after process_start_time_seconds;
    /// forbidden (403, as RBAC answers a user without `get /metrics`) when set.
    deprecated_api_lines: String,
    metrics_forbidden: bool,
    /// The last resourceVersion given out (every ConfigMap write takes the next, as etcd's revision).
    revision: u64,
}

/// One request as the server saw it: method, path (no query) and query.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub method: String,
    pub path: String,
    pub query: String,
}

impl Request {
    pub fn is(&self, method: &str, path: &str) -> bool {
        self.method == method && self.path == path
    }
}

/// The server, its kubeconfig, stopped on drop.
pub struct KubeApi {
    port: u16,
    state: Arc<Mutex<State>>,
    stop: Arc<AtomicBool>,
    dir: tempfile::TempDir,
}

impl KubeApi {
    /// Starts the server with these nodes (name, kubelet version), all Ready and schedulable.
    pub fn start(nodes: &[(&str, &str)]) -> KubeApi {
        let listener = TcpListener::bind(("127.0.0.1", 0)).expect("bind the stand-in API server");
        let port = listener.local_addr().expect("local address").port();
        let state = State {
            nodes: nodes
                .iter()
                .map(|(name, version)| Node {
                    name: name.to_string(),
                    version: version.to_string(),
                    ready: true,
                    unschedulable: false,
                    stays_not_ready: false,
                    not_ready_reads: 0,
                })
                .collect(),
            readyz_ok: true,
            // kubeadm's own ConfigMap, there in every kubeadm cluster: the masters' image pulls read its
            // imageRepository.
            configmaps: [(
                ("kube-system".to_string(), "kubeadm-config".to_string()),
                serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": "kubeadm-config", "namespace": "kube-system", "resourceVersion": "1"},
                    "data": {"ClusterConfiguration":
                        "apiVersion: kubeadm.k8s.io/v1beta3\nkind: ClusterConfiguration\nimageRepository: registry.k8s.io\n"}}),
            )]
            .into_iter()
            .collect(),
            ..State::default()
        };
        let state = Arc::new(Mutex::new(state));
        let stop = Arc::new(AtomicBool::new(false));
        let dir = tempfile::Builder::new().prefix("kube-api-").tempdir().expect("temp dir");
        let kubeconfig = format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: test\n  cluster:\n    server: http://127.0.0.1:{port}\n\
             contexts:\n- name: test\n  context:\n    cluster: test\n    user: test\ncurrent-context: test\n\
             users:\n- name: test\n  user: {{}}\n"
        );
        std::fs::write(dir.path().join("kubeconfig"), kubeconfig).expect("kubeconfig");
        {
            let (state, stop) = (state.clone(), stop.clone());
            std::thread::spawn(move || {
                for stream in listener.incoming() {
                    if stop.load(Ordering::SeqCst) {
                        break;
                    }
                    let Ok(stream) = stream else { continue };
                    let state = state.clone();
                    std::thread::spawn(move || serve(stream, &state));
                }
            });
        }
        KubeApi { port, state, stop, dir }
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    pub fn kubeconfig(&self) -> PathBuf {
        self.dir.path().join("kubeconfig")
    }

    /// The value for `upgrade_kubectl`: the real kubectl, pointed at this server.
    pub fn kubectl_command(&self) -> String {
        format!("kubectl --kubeconfig={}", self.kubeconfig().display())
    }

    pub fn add_pod(&self, namespace: &str, name: &str, node: &str, kind: PodKind) {
        let mut state = self.state.lock().unwrap();
        let uid = format!("uid-{}", state.pods.len() + 1);
        state.pods.push(Pod {
            namespace: namespace.into(),
            name: name.into(),
            node: node.into(),
            kind,
            uid,
            evicted: false,
        });
    }

    /// After its kubelet restarts, the node stays NotReady.
    pub fn stays_not_ready(&self, node: &str) {
        self.with_node(node, |n| n.stays_not_ready = true);
    }

    /// After its kubelet restarts, the node answers NotReady to the first `reads - 1` reads and Ready from then on.
    pub fn ready_at_read(&self, node: &str, reads: u32) {
        self.with_node(node, |n| n.not_ready_reads = reads.saturating_sub(1));
    }

    /// `/metrics` reports these `apiserver_requested_deprecated_apis` series as requested (value 1).
    pub fn saw_deprecated_api(&self, group: &str, version: &str, resource: &str, removed_release: &str) {
        let line = format!(
            "apiserver_requested_deprecated_apis{{group=\"{group}\",removed_release=\"{removed_release}\",\
             resource=\"{resource}\",subresource=\"\",version=\"{version}\"}} 1\n"
        );
        self.state.lock().unwrap().deprecated_api_lines.push_str(&line);
    }

    /// `/metrics` answers 403 Forbidden.
    pub fn forbid_metrics(&self) {
        self.state.lock().unwrap().metrics_forbidden = true;
    }

    /// /readyz fails once this node's kubelet has restarted (a control plane that does not come back).
    pub fn readyz_fails_after_restart_of(&self, node: &str) {
        self.state.lock().unwrap().readyz_fails_after_restart_of = Some(node.to_string());
    }

    fn with_node(&self, node: &str, f: impl FnOnce(&mut Node)) {
        let mut state = self.state.lock().unwrap();
        f(state.nodes.iter_mut().find(|n| n.name == node).unwrap_or_else(|| panic!("no node {node}")));
    }

    pub fn version(&self, node: &str) -> String {
        self.state.lock().unwrap().nodes.iter().find(|n| n.name == node).map(|n| n.version.clone()).unwrap_or_default()
    }

    pub fn is_cordoned(&self, node: &str) -> bool {
        self.state.lock().unwrap().nodes.iter().any(|n| n.name == node && n.unschedulable)
    }

    /// The pods still on the node (not evicted), by name.
    pub fn pods_on(&self, node: &str) -> Vec<String> {
        let state = self.state.lock().unwrap();
        state.pods.iter().filter(|p| p.node == node && !p.evicted).map(|p| p.name.clone()).collect()
    }

    /// Every request so far, in order.
    pub fn requests(&self) -> Vec<Request> {
        self.state.lock().unwrap().requests.clone()
    }
}

impl Drop for KubeApi {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wakes the accept loop so it sees the stop flag.
        let _ = TcpStream::connect(("127.0.0.1", self.port));
    }
}

struct Response {
    status: u16,
    body: String,
    content_type: &'static str,
}

fn json_response(status: u16, body: Value) -> Response {
    Response { status, body: body.to_string(), content_type: "application/json" }
}

fn status(code: u16, reason: &str, message: &str) -> Response {
    json_response(
        code,
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message,
               "reason": reason, "code": code}),
    )
}

fn serve(stream: TcpStream, state: &Mutex<State>) {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(30)));
    let mut reader = BufReader::new(match stream.try_clone() {
        Ok(s) => s,
        Err(_) => return,
    });
    let mut writer = stream;
    // Keep-alive: the Go client reuses connections; serve requests until it closes.
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let mut parts = line.split_whitespace();
        let (Some(method), Some(target)) = (parts.next(), parts.next()) else { return };
        let (method, target) = (method.to_string(), target.to_string());
        let mut length = 0usize;
        loop {
            let mut header = String::new();
            if reader.read_line(&mut header).unwrap_or(0) == 0 {
                return;
            }
            let header = header.trim_end();
            if header.is_empty() {
                break;
            }
            if let Some((name, value)) = header.split_once(':') {
                if name.eq_ignore_ascii_case("content-length") {
                    length = value.trim().parse().unwrap_or(0);
                }
            }
        }
        let mut body = vec![0u8; length];
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        let (path, query) = match target.split_once('?') {
            Some((p, q)) => (p.to_string(), q.to_string()),
            None => (target.clone(), String::new()),
        };
        let response = {
            let mut state = state.lock().unwrap();
            state.requests.push(Request { method: method.clone(), path: path.clone(), query: query.clone() });
            route(&mut state, &method, &path, &query, &body)
        };
        let reason = match response.status {
            200 => "OK",
            201 => "Created",
            404 => "Not Found",
            429 => "Too Many Requests",
            _ => "Error",
        };
        let head = format!(
            "HTTP/1.1 {} {reason}\r\nContent-Type: {}\r\nContent-Length: {}\r\n\r\n",
            response.status,
            response.content_type,
            response.body.len()
        );
        if writer.write_all(head.as_bytes()).and_then(|_| writer.write_all(response.body.as_bytes())).is_err() {
            return;
        }
    }
}

fn query_param(query: &str, key: &str) -> Option<String> {
    query.split('&').find_map(|pair| {
        let (k, v) = pair.split_once('=')?;
        (k == key).then(|| percent_decode(v))
    })
}

fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).ok().and_then(|h| u8::from_str_radix(h, 16).ok());
                match hex {
                    Some(b) => {
                        out.push(b);
                        i += 3;
                    }
                    None => {
                        out.push(b'%');
                        i += 1;
                    }
                }
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn route(state: &mut State, method: &str, path: &str, query: &str, body: &[u8]) -> Response {
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    match (method, segments.as_slice()) {
        ("GET", ["readyz"]) => {
            if state.readyz_ok {
                Response { status: 200, body: "ok".into(), content_type: "text/plain; charset=utf-8" }
            } else {
                Response {
                    status: 500,
                    body: "[+]ping ok\n[-]etcd failed: reason withheld\nreadyz check failed".into(),
                    content_type: "text/plain; charset=utf-8",
                }
            }
        }
        ("GET", ["metrics"]) if state.metrics_forbidden => json_response(
            403,
            json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "Forbidden", "code": 403,
                   "message": "forbidden: User \"system:anonymous\" cannot get path \"/metrics\""}),
        ),
        ("GET", ["metrics"]) => Response {
            status: 200,
            body: format!(
                "# TYPE process_start_time_seconds gauge\nprocess_start_time_seconds 1.7e+09\n{}",
                state.deprecated_api_lines
            ),
            content_type: "text/plain; version=0.0.4",
        },
        ("GET", ["version"]) => {
            json_response(200, json!({"major": "1", "minor": "28", "gitVersion": "v1.28.5", "platform": "linux/amd64"}))
        }
        ("GET", ["api"]) => json_response(
            200,
            json!({"kind": "APIVersions", "versions": ["v1"],
                   "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}]}),
        ),
        ("GET", ["apis"]) => {
            let group = |name: &str| {
                json!({"name": name, "versions": [{"groupVersion": format!("{name}/v1"), "version": "v1"}],
                       "preferredVersion": {"groupVersion": format!("{name}/v1"), "version": "v1"}})
            };
            json_response(
                200,
                json!({"kind": "APIGroupList", "apiVersion": "v1",
                       "groups": [group("apps"), group("policy"), group("authorization.k8s.io")]}),
            )
        }
        ("GET", ["api", "v1"]) => json_response(
            200,
            json!({"kind": "APIResourceList", "groupVersion": "v1", "resources": [
                resource("nodes", "Node", false, &["get", "list", "patch", "update", "watch"], &["no"]),
                resource("pods", "Pod", true, &["get", "list", "delete", "watch"], &["po"]),
                // kubectl drain evicts only when the subresource names its group and version.
                json!({"name": "pods/eviction", "singularName": "", "namespaced": true, "group": "policy",
                       "version": "v1", "kind": "Eviction", "verbs": ["create"]}),
                resource("namespaces", "Namespace", false, &["get", "list"], &["ns"]),
                // Stored objects (the cluster-wide lock); `get configmap kubeadm-config` answers NotFound unless a
                // test created it, as on a cluster without kubeadm.
                resource("configmaps", "ConfigMap", true, &["create", "get", "list", "patch", "update", "delete"], &["cm"]),
            ]}),
        ),
        ("GET", ["apis", "policy", "v1"]) => json_response(
            200,
            json!({"kind": "APIResourceList", "groupVersion": "policy/v1", "resources": [
                resource("poddisruptionbudgets", "PodDisruptionBudget", true, &["get", "list"], &["pdb"]),
            ]}),
        ),
        ("GET", ["apis", "apps", "v1"]) => json_response(
            200,
            json!({"kind": "APIResourceList", "groupVersion": "apps/v1", "resources": [
                resource("daemonsets", "DaemonSet", true, &["get", "list"], &["ds"]),
                resource("replicasets", "ReplicaSet", true, &["get", "list"], &["rs"]),
                resource("deployments", "Deployment", true, &["get", "list"], &["deploy"]),
                resource("statefulsets", "StatefulSet", true, &["get", "list"], &["sts"]),
            ]}),
        ),
        ("GET", ["apis", "authorization.k8s.io", "v1"]) => json_response(
            200,
            json!({"kind": "APIResourceList", "groupVersion": "authorization.k8s.io/v1", "resources": [
                resource("selfsubjectaccessreviews", "SelfSubjectAccessReview", false, &["create"], &[]),
            ]}),
        ),
        // `auth can-i`: this stand-in allows everything (RBAC's answers are tested on the real API server,
        // tests/real_api.rs); the review comes back with its spec, as the API server returns it.
        ("POST", ["apis", "authorization.k8s.io", "v1", "selfsubjectaccessreviews"]) => {
            let mut review: Value = serde_json::from_slice(body).unwrap_or_else(|_| json!({}));
            review["status"] = json!({"allowed": true});
            json_response(201, review)
        }
        ("GET", ["api", "v1", "nodes"]) => {
            let items: Vec<Value> = state.nodes.iter().map(node_json).collect();
            json_response(
                200,
                json!({"kind": "NodeList", "apiVersion": "v1", "metadata": {"resourceVersion": "1"}, "items": items}),
            )
        }
        ("GET", ["api", "v1", "nodes", name]) => {
            let Some(node) = state.nodes.iter_mut().find(|n| n.name == *name) else {
                return status(404, "NotFound", &format!("nodes \"{name}\" not found"));
            };
            // A node coming back answers NotReady to a number of reads, then Ready.
            let left = state.not_ready_reads_left.get(*name).copied().unwrap_or(0);
            if left > 0 {
                state.not_ready_reads_left.insert(name.to_string(), left - 1);
                let mut shown = node.clone();
                shown.ready = false;
                return json_response(200, node_json(&shown));
            }
            json_response(200, node_json(node))
        }
        ("PATCH", ["api", "v1", "nodes", name]) => {
            let patch: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
            let Some(node) = state.nodes.iter_mut().find(|n| n.name == *name) else {
                return status(404, "NotFound", &format!("nodes \"{name}\" not found"));
            };
            if let Some(spec) = patch.get("spec") {
                if let Some(value) = spec.get("unschedulable") {
                    node.unschedulable = value.as_bool().unwrap_or(false);
                }
            }
            json_response(200, node_json(node))
        }
        ("GET", ["api", "v1", "pods"]) => {
            let on_node = query_param(query, "fieldSelector")
                .and_then(|s| s.split(',').find_map(|term| term.strip_prefix("spec.nodeName=").map(str::to_string)));
            let items: Vec<Value> = state
                .pods
                .iter()
                .filter(|p| !p.evicted || p.kind == PodKind::NeverTerminates)
                .filter(|p| on_node.as_ref().is_none_or(|n| *n == p.node))
                .map(pod_json)
                .collect();
            json_response(
                200,
                json!({"kind": "PodList", "apiVersion": "v1", "metadata": {"resourceVersion": "1"}, "items": items}),
            )
        }
        ("GET", ["api", "v1", "namespaces", ns, "pods", name]) => {
            match state
                .pods
                .iter()
                .find(|p| p.namespace == *ns && p.name == *name && (!p.evicted || p.kind == PodKind::NeverTerminates))
            {
                Some(pod) => json_response(200, pod_json(pod)),
                None => status(404, "NotFound", &format!("pods \"{name}\" not found")),
            }
        }
        ("POST", ["api", "v1", "namespaces", ns, "pods", name, "eviction"]) => {
            let Some(pod) = state.pods.iter_mut().find(|p| p.namespace == *ns && p.name == *name && !p.evicted) else {
                return status(404, "NotFound", &format!("pods \"{name}\" not found"));
            };
            if pod.kind == PodKind::DisruptionBudget {
                let mut response =
                    status(429, "TooManyRequests", "Cannot evict pod as it would violate the pod's disruption budget.");
                let mut body: Value = serde_json::from_str(&response.body).unwrap_or(Value::Null);
                body["details"] = json!({"causes": [{"reason": "DisruptionBudget",
                    "message": format!("The disruption budget {}-pdb needs 1 healthy pods and has 1 currently", pod.name)}]});
                response.body = body.to_string();
                return response;
            }
            pod.evicted = true;
            json_response(
                201,
                json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}),
            )
        }
        // The validation between batches lists the controllers: the stand-in keeps none as objects (its pods' owners
        // are names only), so each list is empty and the validation waits for no workload here.
        ("GET", ["apis", "apps", "v1", plural @ ("deployments" | "statefulsets" | "daemonsets" | "replicasets")]) => {
            let kind = match *plural {
                "deployments" => "DeploymentList",
                "statefulsets" => "StatefulSetList",
                "daemonsets" => "DaemonSetList",
                _ => "ReplicaSetList",
            };
            json_response(200, json!({"kind": kind, "apiVersion": "apps/v1", "metadata": {}, "items": []}))
        }
        // kured is not installed here (its DaemonSet is read for its reboot lock).
        ("GET", ["apis", "apps", "v1", "namespaces", _, "daemonsets", "kured"]) => {
            status(404, "NotFound", "daemonsets.apps \"kured\" not found")
        }
        ("GET", ["apis", "apps", "v1", "namespaces", ns, "daemonsets", name]) => json_response(
            200,
            json!({"kind": "DaemonSet", "apiVersion": "apps/v1",
                   "metadata": {"name": name, "namespace": ns, "uid": format!("ds-{name}")},
                   "spec": {"selector": {"matchLabels": {"app": name}}, "template": {"metadata": {"labels": {"app": name}}, "spec": {"containers": [{"name": "c", "image": "pause"}]}}},
                   "status": {"currentNumberScheduled": 1, "desiredNumberScheduled": 1, "numberMisscheduled": 0, "numberReady": 1}}),
        ),
        // One budget per DisruptionBudget pod, selecting it by its `app` label, allowing no disruption.
        ("GET", ["apis", "policy", "v1", "poddisruptionbudgets"]) => {
            let items: Vec<Value> = state
                .pods
                .iter()
                .filter(|p| p.kind == PodKind::DisruptionBudget && !p.evicted)
                .map(|p| {
                    json!({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                           "metadata": {"name": format!("{}-pdb", p.name), "namespace": p.namespace},
                           "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": p.name}}},
                           "status": {"disruptionsAllowed": 0, "currentHealthy": 1, "desiredHealthy": 1, "expectedPods": 1}})
                })
                .collect();
            json_response(
                200,
                json!({"kind": "PodDisruptionBudgetList", "apiVersion": "policy/v1", "metadata": {"resourceVersion": "1"}, "items": items}),
            )
        }
        // ConfigMaps: create is atomic (409 AlreadyExists), patch is a JSON merge patch, delete removes.
        ("POST", ["api", "v1", "namespaces", ns, "configmaps"]) => {
            let mut object: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
            let name = object.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default().to_string();
            let key = (ns.to_string(), name.clone());
            if state.configmaps.contains_key(&key) {
                let mut response = status(409, "AlreadyExists", &format!("configmaps \"{name}\" already exists"));
                response.body = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "code": 409,
                    "reason": "AlreadyExists", "message": format!("configmaps \"{name}\" already exists"),
                    "details": {"name": name, "kind": "configmaps"}})
                .to_string();
                return response;
            }
            object["metadata"]["namespace"] = json!(ns);
            object["metadata"]["uid"] = json!(format!("cm-{name}"));
            state.revision += 1;
            object["metadata"]["resourceVersion"] = json!(state.revision.to_string());
            state.configmaps.insert(key, object.clone());
            json_response(201, object)
        }
        ("GET", ["api", "v1", "namespaces", ns, "configmaps", name]) => {
            match state.configmaps.get(&(ns.to_string(), name.to_string())) {
                Some(object) => json_response(200, object.clone()),
                None => status(404, "NotFound", &format!("configmaps \"{name}\" not found")),
            }
        }
        // A replace (PUT) names the resourceVersion it read: another one is a Conflict, as from the API server.
        ("PUT", ["api", "v1", "namespaces", ns, "configmaps", name]) => {
            let mut object: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
            let revision = state.revision + 1;
            match state.configmaps.get_mut(&(ns.to_string(), name.to_string())) {
                Some(stored) => {
                    let wanted = object.pointer("/metadata/resourceVersion").cloned();
                    if wanted.is_some() && wanted.as_ref() != stored.pointer("/metadata/resourceVersion") {
                        let message = format!(
                            "Operation cannot be fulfilled on configmaps \"{name}\": the object has been modified; \
                             please apply your changes to the latest version and try again"
                        );
                        let mut response = status(409, "Conflict", &message);
                        response.body = json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                            "code": 409, "reason": "Conflict", "message": message,
                            "details": {"name": name, "kind": "configmaps"}})
                        .to_string();
                        return response;
                    }
                    object["metadata"]["namespace"] = json!(ns);
                    object["metadata"]["uid"] = json!(format!("cm-{name}"));
                    object["metadata"]["resourceVersion"] = json!(revision.to_string());
                    *stored = object.clone();
                    state.revision = revision;
                    json_response(200, object)
                }
                None => status(404, "NotFound", &format!("configmaps \"{name}\" not found")),
            }
        }
        ("PATCH", ["api", "v1", "namespaces", ns, "configmaps", name]) => {
            let patch: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
            let revision = state.revision + 1;
            match state.configmaps.get_mut(&(ns.to_string(), name.to_string())) {
                Some(object) => {
                    merge_patch(object, &patch);
                    object["metadata"]["resourceVersion"] = json!(revision.to_string());
                    state.revision = revision;
                    json_response(200, object.clone())
                }
                None => status(404, "NotFound", &format!("configmaps \"{name}\" not found")),
            }
        }
        ("DELETE", ["api", "v1", "namespaces", ns, "configmaps", name]) => {
            match state.configmaps.remove(&(ns.to_string(), name.to_string())) {
                Some(_) => json_response(
                    200,
                    json!({"kind": "Status", "apiVersion": "v1", "status": "Success", "details": {"name": name, "kind": "configmaps"}}),
                ),
                None => status(404, "NotFound", &format!("configmaps \"{name}\" not found")),
            }
        }
        // The host-side stand-ins: a kubelet restarted at a version.
        ("POST", ["_test", "kubelet", name]) => {
            let version = query_param(query, "version").unwrap_or_default();
            let fail_readyz = state.readyz_fails_after_restart_of.as_deref() == Some(*name);
            let Some(node) = state.nodes.iter_mut().find(|n| n.name == *name) else {
                return status(404, "NotFound", &format!("nodes \"{name}\" not found"));
            };
            if !version.is_empty() {
                node.version = if version.starts_with('v') { version } else { format!("v{version}") };
            }
            node.ready = !node.stays_not_ready;
            let reads = node.not_ready_reads;
            if reads > 0 {
                state.not_ready_reads_left.insert(name.to_string(), reads);
            }
            if fail_readyz {
                state.readyz_ok = false;
            }
            json_response(200, json!({"restarted": name}))
        }
        _ => status(404, "NotFound", &format!("the server could not find the requested resource ({method} {path})")),
    }
}

/// RFC 7386: objects merge key by key, null removes, anything else replaces.
fn merge_patch(target: &mut Value, patch: &Value) {
    let Value::Object(fields) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = json!({});
    }
    for (key, value) in fields {
        if value.is_null() {
            target.as_object_mut().map(|t| t.remove(key));
        } else {
            merge_patch(&mut target[key], value);
        }
    }
}

fn resource(name: &str, kind: &str, namespaced: bool, verbs: &[&str], short: &[&str]) -> Value {
    json!({"name": name, "singularName": "", "namespaced": namespaced, "kind": kind, "verbs": verbs, "shortNames": short})
}

fn node_json(node: &Node) -> Value {
    let mut spec = json!({});
    if node.unschedulable {
        spec = json!({"unschedulable": true,
                      "taints": [{"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}]});
    }
    let (status, reason) = if node.ready { ("True", "KubeletReady") } else { ("False", "KubeletNotReady") };
    json!({
        "kind": "Node", "apiVersion": "v1",
        "metadata": {"name": node.name, "uid": format!("node-{}", node.name), "resourceVersion": "1",
                     "labels": {"kubernetes.io/hostname": node.name, "kubernetes.io/os": "linux"}},
        "spec": spec,
        "status": {
            "conditions": [{"type": "Ready", "status": status, "reason": reason}],
            "nodeInfo": {"kubeletVersion": node.version, "kubeProxyVersion": node.version,
                         "operatingSystem": "linux", "architecture": "amd64"}
        }
    })
}

fn pod_json(pod: &Pod) -> Value {
    let owner = match pod.kind {
        PodKind::DaemonSet => json!([{"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "node-agent",
                                     "uid": "ds-node-agent", "controller": true}]),
        _ => json!([{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": format!("{}-rs", pod.name),
                     "uid": format!("rs-{}", pod.name), "controller": true}]),
    };
    let mut metadata = json!({"name": pod.name, "namespace": pod.namespace, "uid": pod.uid, "resourceVersion": "1",
                              "labels": {"app": pod.name}, "ownerReferences": owner});
    if pod.evicted {
        metadata["deletionTimestamp"] = json!("2026-01-01T00:00:00Z");
        metadata["deletionGracePeriodSeconds"] = json!(30);
    }
    json!({
        "kind": "Pod", "apiVersion": "v1", "metadata": metadata,
        "spec": {"nodeName": pod.node, "containers": [{"name": "c", "image": "pause"}]},
        "status": {"phase": "Running"}
    })
}
