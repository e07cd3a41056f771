//! A real Kubernetes control plane for the end-to-end tests, as controller projects test against one (envtest):
//! Debian's etcd, and kube-apiserver, kube-controller-manager and kube-scheduler built from k8s.io/kubernetes by
//! scripts/build-k8s (testing/k8s), with kwok simulating the kubelets of the nodes the test creates (heartbeats, node
//! leases, pods Running, pods whose deletion was asked for gone). Everything on free loopback ports, in a temp dir,
//! killed on drop. The real kubectl of the same version talks to it with a kubeconfig this writes. A second
//! kube-apiserver of another minor (`start_api_server`) can join the same etcd, as a second master's during an HA
//! upgrade.
//!
//! The API server authenticates with static tokens: `admin` (group system:masters) for the test's own setup and the
//! control plane, and `upgrade` (no group: nothing until RBAC grants it) for runs that must work with the documented
//! least-privilege role. Authorization is RBAC,Node, as in a kubeadm cluster.
//!
//! When the binaries are not built (no Go toolchain, no module proxy), `KubeControlPlane::start` returns `None` after
//! printing one line that names what is missing; with `CI` set it panics instead, so CI never skips silently.

#![allow(dead_code)]

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use super::etcd::TestEtcd;

/// The version scripts/build-k8s builds (its PRIMARY_VERSION).
pub const K8S_VERSION: &str = "v1.34.4";
/// The next minor's kube-apiserver (`scripts/build-k8s v1.35.4`, testing/k8s-v1.35.4), which a test runs beside
/// K8S_VERSION's over one etcd, as an HA control plane is while its masters are upgraded one at a time.
pub const NEXT_K8S_VERSION: &str = "v1.35.4";
const BINARIES: [&str; 5] = ["kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl", "kwok"];
/// The node names a test may give (each has a kubelet token: `kubectl_as_node`).
pub const NODE_NAMES: [&str; 12] = ["m1", "m2", "m3", "n1", "n2", "n3", "n4", "n5", "b1", "b2", "g1", "g2"];
/// Nodes kwok simulates carry this annotation (kwok's --manage-nodes-with-annotation-selector).
pub const KWOK_NODE_ANNOTATION: &str = "kwok.x-k8s.io/node";

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()).expect("a free loopback port")
}

/// Where scripts/build-k8s leaves the binaries of K8S_VERSION.
pub fn binaries_dir() -> PathBuf {
    binaries_dir_of(K8S_VERSION)
}

/// Where `scripts/build-k8s VERSION` leaves the binaries of `version`.
fn binaries_dir_of(version: &str) -> PathBuf {
    let cache = std::env::var_os("UPGRADE_TEST_CACHE").map(PathBuf::from).unwrap_or_else(|| {
        PathBuf::from(std::env::var_os("HOME").unwrap_or_else(|| "/root".into())).join(".cache/upgrade-tests")
    });
    cache.join(format!("k8s-{version}"))
}

/// `None` when every file named is in `dir`; otherwise says which are missing and how to build them, on stderr as
/// `SKIPPED: ...` (`Some`), or panics when `CI` is set (CI never skips).
fn skipped_for_missing(dir: &Path, files: &[&str], build: &str) -> Option<()> {
    let missing: Vec<&str> = files.iter().copied().filter(|f| !dir.join(f).is_file()).collect();
    if missing.is_empty() {
        return None;
    }
    let why = format!(
        "the real Kubernetes control plane is not built ({} missing in {}): run {build} (needs Go and the Go module \
         proxy)",
        missing.join(", "),
        dir.display()
    );
    if std::env::var_os("CI").is_some() {
        panic!("{why}");
    }
    eprintln!("SKIPPED: {why}");
    Some(())
}

/// The real kubectl built with the API server (Debian's is more than one minor older: outside the supported skew).
pub fn kubectl_binary() -> PathBuf {
    binaries_dir().join("kubectl")
}

pub struct KubeControlPlane {
    dir: tempfile::TempDir,
    _etcd: TestEtcd,
    children: Vec<(String, Child)>,
    url: String,
    admin_kubeconfig: PathBuf,
    upgrade_kubeconfig: PathBuf,
}

impl KubeControlPlane {
    /// Starts etcd, the API server (waiting for /readyz), the controller manager, the scheduler and kwok. `None`
    /// (after one line on stderr) when the binaries are not built, unless `CI` is set.
    pub fn start() -> Option<KubeControlPlane> {
        let files: Vec<&str> = BINARIES.iter().copied().chain(["kwok-stages.yaml"]).collect();
        if skipped_for_missing(&binaries_dir(), &files, "scripts/build-k8s").is_some() {
            return None;
        }
        let dir = tempfile::Builder::new().prefix("test-kube-").tempdir().expect("temp dir");
        let etcd = TestEtcd::start();
        let d = dir.path();
        openssl(&["genrsa", "-out", &d.join("sa.key").to_string_lossy(), "2048"]);
        openssl(&[
            "rsa",
            "-in",
            &d.join("sa.key").to_string_lossy(),
            "-pubout",
            "-out",
            &d.join("sa.pub").to_string_lossy(),
        ]);
        // A CA for the CSR signer of the controller manager (approved kubelet CSRs get signed, as in a cluster).
        openssl(&[
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-subj",
            "/CN=test-ca",
            "-days",
            "3",
            "-keyout",
            &d.join("ca.key").to_string_lossy(),
            "-out",
            &d.join("ca.crt").to_string_lossy(),
        ]);
        // Nodes authenticate as system:node:NAME in group system:nodes (the Node authorizer lets a kubelet create its
        // CSRs), for the names the tests give their nodes.
        let mut tokens =
            String::from("admin-token,admin,admin-uid,\"system:masters\"\nupgrade-token,upgrade,upgrade-uid\n");
        for node in NODE_NAMES {
            tokens.push_str(&format!("node-{node}-token,system:node:{node},node-{node}-uid,\"system:nodes\"\n"));
        }
        std::fs::write(d.join("tokens.csv"), tokens).expect("tokens");
        let port = free_port();
        let url = format!("https://127.0.0.1:{port}");
        let mut plane = KubeControlPlane {
            admin_kubeconfig: d.join("admin.kubeconfig"),
            upgrade_kubeconfig: d.join("upgrade.kubeconfig"),
            url: url.clone(),
            children: Vec::new(),
            _etcd: etcd,
            dir,
        };
        write_kubeconfig(&plane.admin_kubeconfig, &url, "admin-token");
        write_kubeconfig(&plane.upgrade_kubeconfig, &url, "upgrade-token");
        let d = plane.dir.path().to_path_buf();
        let path = |name: &str| d.join(name).to_string_lossy().into_owned();
        let args = plane.api_server_args(port, "apiserver-certs");
        plane.spawn("kube-apiserver", &binaries_dir().join("kube-apiserver"), &args);
        plane.wait_ready();
        let admin = plane.admin_kubeconfig.display().to_string();
        let mut controller_manager = component_args(&admin);
        controller_manager.extend([
            format!("--service-account-private-key-file={}", path("sa.key")),
            format!("--cluster-signing-cert-file={}", path("ca.crt")),
            format!("--cluster-signing-key-file={}", path("ca.key")),
            "--use-service-account-credentials=false".to_string(),
            // kwok renews the node leases; on a loaded 2-core machine a renewal can come late, and the node
            // lifecycle controller would call a node NotReady that no test made so (5 minutes, not 50 s).
            "--node-monitor-grace-period=300s".to_string(),
            // The controllers a drain, a PDB and a node's pods meet; not the cloud or volume ones.
            "--controllers=disruption,replicaset,deployment,daemonset,nodelifecycle,garbagecollector,csrsigning,\
                 serviceaccount,serviceaccount-token,namespace"
                .to_string(),
        ]);
        plane.spawn_built("kube-controller-manager", &controller_manager);
        let scheduler = component_args(&admin);
        plane.spawn_built("kube-scheduler", &scheduler);
        plane.spawn_built(
            "kwok",
            &[
                format!("--kubeconfig={}", plane.admin_kubeconfig.display()),
                format!("--config={}", binaries_dir().join("kwok-stages.yaml").display()),
                "--manage-all-nodes=false".to_string(),
                format!("--manage-nodes-with-annotation-selector={KWOK_NODE_ANNOTATION}=fake"),
                format!("--server-address=127.0.0.1:{}", free_port()),
                "--node-lease-duration-seconds=40".to_string(),
            ],
        );
        Some(plane)
    }

    /// Another kube-apiserver, of `version` (`NEXT_K8S_VERSION`), over this control plane's etcd with its tokens,
    /// authorization and service-account keys, on its own port: a second master's API server during an HA upgrade,
    /// one minor ahead of (or behind) the first. Waits for its /readyz. `None` (after one line on stderr) when
    /// `scripts/build-k8s VERSION` has not built it, unless `CI` is set. Stopped with the control plane.
    pub fn start_api_server(&mut self, version: &str) -> Option<ApiServer> {
        let bins = binaries_dir_of(version);
        if skipped_for_missing(&bins, &["kube-apiserver"], &format!("scripts/build-k8s {version}")).is_some() {
            return None;
        }
        let port = free_port();
        let url = format!("https://127.0.0.1:{port}");
        let server = ApiServer {
            admin_kubeconfig: self.dir.path().join(format!("admin-{version}.kubeconfig")),
            upgrade_kubeconfig: self.dir.path().join(format!("upgrade-{version}.kubeconfig")),
            url: url.clone(),
        };
        write_kubeconfig(&server.admin_kubeconfig, &url, "admin-token");
        write_kubeconfig(&server.upgrade_kubeconfig, &url, "upgrade-token");
        let args = self.api_server_args(port, &format!("apiserver-certs-{version}"));
        let name = format!("kube-apiserver-{version}");
        self.spawn(&name, &bins.join("kube-apiserver"), &args);
        let started = Instant::now();
        let ready = || {
            let out = Command::new(kubectl_binary())
                .arg(format!("--kubeconfig={}", server.admin_kubeconfig.display()))
                .args(["get", "--raw", "/readyz"])
                .output()
                .expect("run kubectl");
            out.status.success() && String::from_utf8_lossy(&out.stdout).trim() == "ok"
        };
        while !ready() {
            assert!(started.elapsed() < Duration::from_secs(90), "{name} not ready after 90 s: {}", self.log(&name));
            if let Some((_, child)) = self.children.iter_mut().find(|(n, _)| *n == name) {
                if let Ok(Some(status)) = child.try_wait() {
                    panic!("{name} exited ({status}): {}", self.log(&name));
                }
            }
            std::thread::sleep(Duration::from_millis(300));
        }
        Some(server)
    }

    /// The flags of every kube-apiserver of this control plane: its etcd, its tokens (static: admin, upgrade, one
    /// kubelet per node name), RBAC,Node, its service-account keys; the serving certificate self-signed in `certs`.
    fn api_server_args(&self, port: u16, certs: &str) -> Vec<String> {
        let path = |name: &str| self.dir.path().join(name).to_string_lossy().into_owned();
        vec![
            format!("--etcd-servers={}", self._etcd.endpoints()),
            format!("--secure-port={port}"),
            "--bind-address=127.0.0.1".into(),
            "--advertise-address=127.0.0.1".into(),
            format!("--cert-dir={}", path(certs)),
            format!("--token-auth-file={}", path("tokens.csv")),
            "--authorization-mode=RBAC,Node".into(),
            format!("--service-account-key-file={}", path("sa.pub")),
            format!("--service-account-signing-key-file={}", path("sa.key")),
            "--service-account-issuer=https://kubernetes.default.svc".into(),
            "--service-cluster-ip-range=10.96.0.0/16".into(),
            "--allow-privileged=true".into(),
            "--endpoint-reconciler-type=none".into(),
            // A deprecated API version v1.34.4 (and v1.35.4) still serves, off by default: the gate on removed APIs
            // (tests/api_removals.rs) requests it and reads apiserver_requested_deprecated_apis for real.
            "--runtime-config=networking.k8s.io/v1beta1=true".into(),
        ]
    }

    /// Starts one of the binaries scripts/build-k8s built (K8S_VERSION's).
    fn spawn_built(&mut self, binary: &str, args: &[String]) {
        self.spawn(binary, &binaries_dir().join(binary), args);
    }

    /// Starts `program` as the component `name`, its output in `name.log`.
    fn spawn(&mut self, name: &str, program: &Path, args: &[String]) {
        let log = std::fs::File::create(self.dir.path().join(format!("{name}.log"))).expect("log file");
        let child = Command::new(program)
            .args(args)
            // Debian's etcd (3.4.23) has no watch progress requests, so the API server serves no watch-list streams
            // ("the required storage feature RequestWatchProgress is disabled"): the clients (the controller manager,
            // the scheduler, kwok) list then watch, as they do against any etcd without it.
            .env("KUBE_FEATURE_WatchListClient", "false")
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log"))
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("start {name}: {e}"));
        self.children.push((name.to_string(), child));
    }

    fn wait_ready(&mut self) {
        let started = Instant::now();
        loop {
            let out = self.kubectl(&["get", "--raw", "/readyz"]);
            if out.status.success() && String::from_utf8_lossy(&out.stdout).trim() == "ok" {
                return;
            }
            let exited = self
                .children
                .iter_mut()
                .find_map(|(name, child)| child.try_wait().ok().flatten().map(|status| (name.clone(), status)));
            if let Some((name, status)) = exited {
                panic!("{name} exited ({status}): {}", self.log(&name));
            }
            if started.elapsed() > Duration::from_secs(90) {
                panic!("kube-apiserver not ready after 90 s: {}", self.log("kube-apiserver"));
            }
            std::thread::sleep(Duration::from_millis(300));
        }
    }

    /// The last part of a component's log, for a failure message.
    pub fn log(&self, component: &str) -> String {
        let text = std::fs::read_to_string(self.dir.path().join(format!("{component}.log"))).unwrap_or_default();
        let start = text.len().saturating_sub(3000);
        text[text.char_indices().map(|(i, _)| i).find(|i| *i >= start).unwrap_or(0)..].to_string()
    }

    pub fn url(&self) -> &str {
        &self.url
    }

    /// The first kube-apiserver (K8S_VERSION's), the one the controllers, the scheduler and kwok talk to.
    pub fn first_api_server(&self) -> ApiServer {
        ApiServer {
            url: self.url.clone(),
            admin_kubeconfig: self.admin_kubeconfig.clone(),
            upgrade_kubeconfig: self.upgrade_kubeconfig.clone(),
        }
    }

    /// The kubeconfig of `admin` (system:masters).
    pub fn admin_kubeconfig(&self) -> &Path {
        &self.admin_kubeconfig
    }

    /// The kubeconfig of `upgrade`, a user with no group: it can do what RBAC grants it and nothing else.
    pub fn upgrade_kubeconfig(&self) -> &Path {
        &self.upgrade_kubeconfig
    }

    /// `upgrade_kubectl` for a run as `admin`: the real kubectl with the admin kubeconfig.
    pub fn kubectl_command(&self) -> String {
        format!("{} --kubeconfig={}", kubectl_binary().display(), self.admin_kubeconfig.display())
    }

    /// `upgrade_kubectl` for a run as `upgrade` (least privilege).
    pub fn least_privilege_kubectl_command(&self) -> String {
        format!("{} --kubeconfig={}", kubectl_binary().display(), self.upgrade_kubeconfig.display())
    }

    /// Runs the real kubectl as admin.
    pub fn kubectl(&self, args: &[&str]) -> Output {
        self.kubectl_with_stdin(args, "")
    }

    pub fn kubectl_with_stdin(&self, args: &[&str], stdin: &str) -> Output {
        use std::io::Write;
        let mut child = Command::new(kubectl_binary())
            .arg(format!("--kubeconfig={}", self.admin_kubeconfig.display()))
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run kubectl");
        child.stdin.take().expect("stdin").write_all(stdin.as_bytes()).expect("write stdin");
        child.wait_with_output().expect("kubectl output")
    }

    /// kubectl as admin that must succeed; its stdout.
    pub fn ok(&self, args: &[&str]) -> String {
        let out = self.kubectl(args);
        assert!(out.status.success(), "kubectl {}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// `kubectl apply -f -` of a YAML or JSON document, as admin.
    pub fn apply(&self, manifest: &str) {
        let out = self.kubectl_with_stdin(&["apply", "-f", "-"], manifest);
        assert!(out.status.success(), "kubectl apply: {}\n{manifest}", String::from_utf8_lossy(&out.stderr));
    }

    /// A node simulated by kwok, reporting `version` as its kubelet's and Ready once kwok has seen it.
    pub fn add_node(&self, name: &str, version: &str, labels: &[(&str, &str)]) {
        let mut all = vec![("kubernetes.io/hostname".to_string(), name.to_string()), ("type".into(), "kwok".into())];
        all.extend(labels.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        let labels: serde_json::Map<String, serde_json::Value> =
            all.into_iter().map(|(k, v)| (k, serde_json::Value::String(v))).collect();
        let node = serde_json::json!({
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": name, "labels": labels, "annotations": {KWOK_NODE_ANNOTATION: "fake"}},
        });
        self.apply(&node.to_string());
        // kwok initialises the node's status (Ready, and its own version where none is set) once it sees it: the
        // version is reported after that, and again should kwok's first write land after ours.
        self.wait_nodes_ready(&[name]);
        self.wait_for(&format!("{name} reporting {version}"), Duration::from_secs(30), || {
            if self.node(name)["status"]["nodeInfo"]["kubeletVersion"] == version {
                return true;
            }
            self.set_kubelet_version(name, version);
            false
        });
    }

    /// What a kubelet reports after its package swap and restart: the node's `status.nodeInfo.kubeletVersion`.
    pub fn set_kubelet_version(&self, node: &str, version: &str) {
        let patch = serde_json::json!({"status": {"nodeInfo": {"kubeletVersion": version}}}).to_string();
        self.ok(&["patch", "node", node, "--subresource=status", "--type=merge", "-p", &patch]);
    }

    /// Waits until every node named is Ready (kwok has taken it over), for at most 60 s.
    pub fn wait_nodes_ready(&self, nodes: &[&str]) {
        let started = Instant::now();
        loop {
            let pending: Vec<&str> = nodes.iter().copied().filter(|n| !self.node_ready(n)).collect();
            if pending.is_empty() {
                return;
            }
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "not Ready after 60 s: {pending:?}\n{}",
                self.log("kwok")
            );
            std::thread::sleep(Duration::from_millis(300));
        }
    }

    pub fn node_ready(&self, node: &str) -> bool {
        let out =
            self.kubectl(&["get", "node", node, "-o", "jsonpath={.status.conditions[?(@.type==\"Ready\")].status}"]);
        String::from_utf8_lossy(&out.stdout).trim() == "True"
    }

    /// Runs the real kubectl as the kubelet of `node` (user system:node:NODE, group system:nodes).
    pub fn kubectl_as_node(&self, node: &str, args: &[&str], stdin: &str) -> Output {
        use std::io::Write;
        let mut child = Command::new(kubectl_binary())
            .arg(format!("--server={}", self.url))
            .arg("--insecure-skip-tls-verify=true")
            .arg(format!("--token=node-{node}-token"))
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run kubectl");
        child.stdin.take().expect("stdin").write_all(stdin.as_bytes()).expect("write stdin");
        child.wait_with_output().expect("kubectl output")
    }

    /// The client URL of the control plane's own etcd (an etcd backup of the real cluster's data).
    pub fn etcd_endpoints(&self) -> &str {
        self._etcd.endpoints()
    }

    /// The node's JSON as the API server has it.
    pub fn node(&self, node: &str) -> serde_json::Value {
        serde_json::from_str(&self.ok(&["get", "node", node, "-o", "json"])).expect("node JSON")
    }

    /// Waits until `check` holds, for at most `limit`, saying `what` when it does not.
    pub fn wait_for(&self, what: &str, limit: Duration, mut check: impl FnMut() -> bool) {
        let started = Instant::now();
        while !check() {
            assert!(started.elapsed() < limit, "{what}: not so after {}s", limit.as_secs());
            std::thread::sleep(Duration::from_millis(300));
        }
    }

    pub fn dir(&self) -> &Path {
        self.dir.path()
    }
}

/// A second kube-apiserver of the control plane (`KubeControlPlane::start_api_server`).
pub struct ApiServer {
    pub url: String,
    /// `admin` (system:masters) through this server.
    pub admin_kubeconfig: PathBuf,
    /// `upgrade` (what RBAC grants it) through this server.
    pub upgrade_kubeconfig: PathBuf,
}

impl ApiServer {
    /// `upgrade_kubectl` for a run as `admin` through this server.
    pub fn kubectl_command(&self) -> String {
        format!("{} --kubeconfig={}", kubectl_binary().display(), self.admin_kubeconfig.display())
    }

    /// The real kubectl as admin through this server: its stdout, or what it said on failure.
    pub fn kubectl(&self, args: &[&str]) -> Result<String, String> {
        let out = Command::new(kubectl_binary())
            .arg(format!("--kubeconfig={}", self.admin_kubeconfig.display()))
            .args(args)
            .output()
            .expect("run kubectl");
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).into_owned())
        } else {
            Err(String::from_utf8_lossy(&out.stderr).into_owned())
        }
    }
}

impl Drop for KubeControlPlane {
    fn drop(&mut self) {
        // The consumers first, the API server last (etcd goes with `_etcd`).
        for (_, child) in self.children.iter_mut().rev() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// The flags the controller manager and the scheduler share: the admin's kubeconfig for the API and for checking
/// who calls them, no leader election (one of each), their own port on loopback.
fn component_args(admin_kubeconfig: &str) -> Vec<String> {
    vec![
        format!("--kubeconfig={admin_kubeconfig}"),
        format!("--authentication-kubeconfig={admin_kubeconfig}"),
        format!("--authorization-kubeconfig={admin_kubeconfig}"),
        "--leader-elect=false".into(),
        "--bind-address=127.0.0.1".into(),
        format!("--secure-port={}", free_port()),
    ]
}

fn openssl(args: &[&str]) {
    let out = Command::new("openssl").args(args).output().expect("run openssl");
    assert!(out.status.success(), "openssl {}: {}", args.join(" "), String::from_utf8_lossy(&out.stderr));
}

fn write_kubeconfig(path: &Path, url: &str, token: &str) {
    // The API server's certificate is self-signed (--cert-dir): the tests do not check it.
    let config = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: test\n  cluster:\n    server: {url}\n    \
         insecure-skip-tls-verify: true\nusers:\n- name: user\n  user:\n    token: {token}\ncontexts:\n- name: test\n  \
         context:\n    cluster: test\n    user: user\ncurrent-context: test\n"
    );
    std::fs::write(path, config).expect("kubeconfig");
}
