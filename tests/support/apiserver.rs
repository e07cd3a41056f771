//! A real Kubernetes control plane for the end-to-end tests, as controller projects test against one (envtest):
//! etcd 3.6.5 (the one kubeadm v1.34 runs), kube-apiserver, kube-controller-manager and kube-scheduler, built from
//! their modules by scripts/build-k8s (testing/k8s, testing/real-cluster/etcd-v3.6.5), with kwok simulating the
//! kubelets of the nodes the test creates (heartbeats, node leases, pods Running, pods whose deletion was asked for
//! gone). Everything on free loopback ports, in a temp dir, killed on drop. The real kubectl of the same version
//! talks to it with a kubeconfig this writes. A second kube-apiserver of another minor (`start_api_server`) can join
//! the same etcd, as a second master's during an HA upgrade.
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
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use super::control_plane_pool::{self, Slot};
use super::etcd::TestEtcd;

/// The version scripts/build-k8s builds (its PRIMARY_VERSION).
pub const K8S_VERSION: &str = "v1.34.4";
/// The next minor's kube-apiserver (`scripts/build-k8s v1.35.4`, testing/k8s-v1.35.4), which a test runs beside
/// K8S_VERSION's over one etcd, as an HA control plane is while its masters are upgraded one at a time.
pub const NEXT_K8S_VERSION: &str = "v1.35.4";
const BINARIES: [&str; 6] = ["etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl", "kwok"];
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

/// The real kubectl built with the API server (Debian's is more than one minor older: outside the supported skew),
/// started without its garbage collector: the tests start it about 4,000 times, each a process of a tenth of a
/// second that its package initialisation fills and a collection only slows (measured: a quarter less CPU per
/// call). A two-line shell script in the test cache, as the tests and `upgrade_kubectl` run it by path.
pub fn kubectl_binary() -> PathBuf {
    static WRAPPER: OnceLock<PathBuf> = OnceLock::new();
    WRAPPER
        .get_or_init(|| {
            let dir = binaries_dir();
            let wrapper = dir.join("kubectl-without-gc");
            let text = format!("#!/bin/sh\nGOGC=off exec {} \"$@\"\n", dir.join("kubectl").display());
            if std::fs::read_to_string(&wrapper).ok().as_deref() != Some(text.as_str()) && dir.is_dir() {
                // Written aside and renamed: tests in other processes may be running the same file.
                let aside = dir.join(format!("kubectl-without-gc.{}", std::process::id()));
                std::fs::write(&aside, &text).expect("write the kubectl wrapper");
                std::fs::set_permissions(&aside, std::os::unix::fs::PermissionsExt::from_mode(0o755))
                    .expect("make the kubectl wrapper executable");
                std::fs::rename(&aside, &wrapper).expect("put the kubectl wrapper in place");
            }
            wrapper
        })
        .clone()
}

pub struct KubeControlPlane {
    dir: PathBuf,
    /// A plane of this test's own: its directory, removed with it.
    _own_dir: Option<tempfile::TempDir>,
    /// A plane of this test's own: its etcd, stopped with it.
    _etcd: Option<TestEtcd>,
    etcd_endpoint: String,
    /// The processes stopped with this value: every component of a plane of this test's own, or what a test added
    /// to a shared plane (`start_api_server`).
    children: Vec<(String, Child)>,
    /// A shared plane (control_plane_pool): the slot this test holds, its components left running for the next.
    slot: Option<Slot>,
    url: String,
    admin_kubeconfig: PathBuf,
    upgrade_kubeconfig: PathBuf,
}

impl KubeControlPlane {
    /// Starts etcd, the API server (waiting for /readyz), the controller manager, the scheduler and kwok, for this
    /// test alone. `None` (after one line on stderr) when the binaries are not built, unless `CI` is set.
    pub fn start() -> Option<KubeControlPlane> {
        if KubeControlPlane::missing_binaries() {
            return None;
        }
        let dir = tempfile::Builder::new().prefix("test-kube-").tempdir().expect("temp dir");
        let path = dir.path().to_path_buf();
        let etcd = TestEtcd::start_for_control_plane(&binaries_dir().join("etcd"), false);
        let endpoint = etcd.endpoints().to_string();
        Some(KubeControlPlane::boot(&path, Some(dir), Some(etcd), endpoint))
    }

    /// A control plane as `start` leaves one, shared with the tests before and after this one under nextest (one
    /// test at a time: control_plane_pool), reset to that state before it is handed over; under `cargo test` a plane
    /// of this test's own. For the tests that do not change the plane's processes or what it counts in /metrics
    /// (requests to deprecated APIs).
    pub fn shared() -> Option<KubeControlPlane> {
        if KubeControlPlane::missing_binaries() {
            return None;
        }
        let Some(slot) = control_plane_pool::slot() else { return KubeControlPlane::start() };
        if let Some(record) = slot.record() {
            let mut plane = KubeControlPlane {
                admin_kubeconfig: record.dir.join("admin.kubeconfig"),
                upgrade_kubeconfig: record.dir.join("upgrade.kubeconfig"),
                dir: record.dir.clone(),
                _own_dir: None,
                _etcd: None,
                etcd_endpoint: record.etcd_endpoint.clone(),
                children: Vec::new(),
                slot: None,
                url: record.url.clone(),
            };
            let kwok_pid = *record.pids.last().expect("the plane's processes, kwok last");
            match plane.reset(kwok_pid) {
                Ok(kwok) => {
                    let mut pids = record.pids.clone();
                    *pids.last_mut().expect("kwok") = kwok;
                    slot.update(&control_plane_pool::Record { pids, ..record });
                    plane.slot = Some(slot);
                    return Some(plane);
                }
                Err(why) => {
                    eprintln!("the shared control plane could not be reset ({why}): a new one boots");
                    slot.discard(Some(&record));
                }
            }
        }
        let dir = slot.plane_dir();
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("the plane's directory");
        let etcd = TestEtcd::start_for_control_plane(&binaries_dir().join("etcd"), true);
        let (etcd_endpoint, etcd_pid, etcd_dir) =
            (etcd.endpoints().to_string(), etcd.pid(), etcd.scratch_dir().to_path_buf());
        // Left running for the next test: not stopped with this value.
        std::mem::forget(etcd);
        let mut plane = KubeControlPlane::boot(&dir, None, None, etcd_endpoint.clone());
        let mut pids = vec![etcd_pid];
        pids.extend(plane.children.drain(..).map(|(_, child)| child.id()));
        let record =
            control_plane_pool::Record { url: plane.url.clone(), etcd_endpoint, dir: dir.clone(), etcd_dir, pids };
        slot.save(&record);
        plane.slot = Some(slot);
        Some(plane)
    }

    /// Puts a shared plane back to what a boot leaves, for the next test: no node, no CSR, no namespace of a test's,
    /// none of the objects a test makes in the system namespaces (workloads, budgets, pods, events, the lock, the
    /// kubeadm configuration, node leases, roles not of the bootstrap), then checks that it is so. Err says what
    /// was left (the plane is then stopped and a new one boots).
    fn reset(&mut self, kwok_pid: u32) -> Result<u32, String> {
        let ready = self.kubectl(&["get", "--raw", "/readyz"]);
        if !ready.status.success() {
            return Err(format!("not ready: {}", String::from_utf8_lossy(&ready.stderr).trim()));
        }
        const SYSTEM: [&str; 4] = ["default", "kube-system", "kube-public", "kube-node-lease"];
        let namespaces = self.kubectl(&["get", "namespaces", "-o", "name"]);
        for ns in String::from_utf8_lossy(&namespaces.stdout).lines() {
            let name = ns.trim_start_matches("namespace/");
            if !SYSTEM.contains(&name) {
                self.kubectl(&["delete", "namespace", name, "--wait=false"]);
            }
        }
        let delete = |args: &[&str]| {
            let out = self.kubectl(&[&["delete", "--ignore-not-found", "--wait=false"], args].concat());
            if out.status.success() { Ok(()) } else { Err(String::from_utf8_lossy(&out.stderr).trim().to_string()) }
        };
        delete(&["nodes,certificatesigningrequests", "--all"])?;
        delete(&["clusterroles,clusterrolebindings", "-l", "!kubernetes.io/bootstrapping"])?;
        for ns in SYSTEM {
            let workloads = "deployments,replicasets,daemonsets,statefulsets,jobs,poddisruptionbudgets,events";
            delete(&["-n", ns, workloads, "--all"])?;
            delete(&["-n", ns, "pods", "--all", "--force", "--grace-period=0"])?;
            delete(&["-n", ns, "roles,rolebindings", "-l", "!kubernetes.io/bootstrapping"])?;
            // The API servers' own identity leases stay; a node's lease, the run's lock, go.
            delete(&["-n", ns, "leases", "-l", "!apiserver.kubernetes.io/identity"])?;
            let configmaps = self.kubectl(&["get", "-n", ns, "configmaps", "-o", "name"]);
            for cm in String::from_utf8_lossy(&configmaps.stdout).lines() {
                let name = cm.trim_start_matches("configmap/");
                let of_the_api_server = ["kube-root-ca.crt", "extension-apiserver-authentication"].contains(&name)
                    || name.starts_with("kube-apiserver-");
                if !of_the_api_server {
                    delete(&["-n", ns, "configmap", name])?;
                }
            }
        }
        // What the controllers remove after the deletes (pods of deleted workloads, terminating namespaces): gone
        // within seconds, or the plane is not reused.
        let started = Instant::now();
        loop {
            let left = self.kubectl(&[
                "get",
                "nodes,pods,deployments,replicasets,daemonsets,poddisruptionbudgets,\
                certificatesigningrequests",
                "--all-namespaces",
                "-o",
                "name",
            ]);
            let namespaces = self.kubectl(&["get", "namespaces", "-o", "name"]);
            let mut what: Vec<String> = String::from_utf8_lossy(&left.stdout).lines().map(str::to_string).collect();
            what.extend(
                String::from_utf8_lossy(&namespaces.stdout)
                    .lines()
                    .filter(|ns| !SYSTEM.contains(&ns.trim_start_matches("namespace/")))
                    .map(str::to_string),
            );
            if left.status.success() && namespaces.status.success() && what.is_empty() {
                break;
            }
            if started.elapsed() > Duration::from_secs(30) {
                return Err(format!("left after 30 s: {}", what.join(", ")));
            }
            std::thread::sleep(Duration::from_millis(300));
        }
        // A new kwok: the last one keeps what it knew of the nodes of the same names (their leases, their stages),
        // and would play it onto this test's.
        let _ = Command::new("kill").arg("-KILL").arg(kwok_pid.to_string()).status();
        let kwok = self.kwok_args();
        self.spawn_in("kwok", &binaries_dir().join("kwok"), &kwok, true);
        let (_, child) = self.children.pop().expect("kwok");
        Ok(child.id())
    }

    fn missing_binaries() -> bool {
        let files: Vec<&str> = BINARIES.iter().copied().chain(["kwok-stages.yaml"]).collect();
        skipped_for_missing(&binaries_dir(), &files, "scripts/build-k8s").is_some()
    }

    /// Boots a plane in `d` over the etcd at `etcd_endpoint`: `etcd`, this test's own, or a shared plane's (without
    /// `etcd`), whose processes get a process group of their own so that they outlive the test process.
    fn boot(
        d: &Path,
        own_dir: Option<tempfile::TempDir>,
        etcd: Option<TestEtcd>,
        etcd_endpoint: String,
    ) -> KubeControlPlane {
        let shared = etcd.is_none();
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
            etcd_endpoint,
            dir: d.to_path_buf(),
            _own_dir: own_dir,
            slot: None,
        };
        write_kubeconfig(&plane.admin_kubeconfig, &url, "admin-token");
        write_kubeconfig(&plane.upgrade_kubeconfig, &url, "upgrade-token");
        let d = plane.dir.clone();
        let path = |name: &str| d.join(name).to_string_lossy().into_owned();
        let args = plane.api_server_args(port, "apiserver-certs");
        let spawn = |plane: &mut KubeControlPlane, name: &str, program: &Path, args: &[String]| {
            plane.spawn_in(name, program, args, shared)
        };
        spawn(&mut plane, "kube-apiserver", &binaries_dir().join("kube-apiserver"), &args);
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
        spawn(
            &mut plane,
            "kube-controller-manager",
            &binaries_dir().join("kube-controller-manager"),
            &controller_manager,
        );
        let scheduler = component_args(&admin);
        spawn(&mut plane, "kube-scheduler", &binaries_dir().join("kube-scheduler"), &scheduler);
        let kwok = plane.kwok_args();
        spawn(&mut plane, "kwok", &binaries_dir().join("kwok"), &kwok);
        plane
    }

    /// kwok's flags: the nodes a test gives the annotation, kwok's own stages (Ready nodes with leases, pods
    /// Running and Ready, deleted pods gone).
    fn kwok_args(&self) -> Vec<String> {
        vec![
            format!("--kubeconfig={}", self.admin_kubeconfig.display()),
            format!("--config={}", binaries_dir().join("kwok-stages.yaml").display()),
            "--manage-all-nodes=false".to_string(),
            format!("--manage-nodes-with-annotation-selector={KWOK_NODE_ANNOTATION}=fake"),
            format!("--server-address=127.0.0.1:{}", free_port()),
            "--node-lease-duration-seconds=40".to_string(),
        ]
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
            admin_kubeconfig: self.dir.join(format!("admin-{version}.kubeconfig")),
            upgrade_kubeconfig: self.dir.join(format!("upgrade-{version}.kubeconfig")),
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
        let path = |name: &str| self.dir.join(name).to_string_lossy().into_owned();
        vec![
            format!("--etcd-servers={}", self.etcd_endpoint),
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

    /// Starts `program` as the component `name`, its output in `name.log`, stopped with this value.
    fn spawn(&mut self, name: &str, program: &Path, args: &[String]) {
        self.spawn_in(name, program, args, false);
    }

    /// `spawn`, in a process group of its own when `own_group` (a shared plane's component, which outlives the test
    /// process and whatever signals its group).
    fn spawn_in(&mut self, name: &str, program: &Path, args: &[String], own_group: bool) {
        let log = std::fs::File::create(self.dir.join(format!("{name}.log"))).expect("log file");
        let mut command = Command::new(program);
        if own_group {
            std::os::unix::process::CommandExt::process_group(&mut command, 0);
        }
        let child = command
            .args(args)
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
        let text = std::fs::read_to_string(self.dir.join(format!("{component}.log"))).unwrap_or_default();
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
        &self.etcd_endpoint
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
        &self.dir
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
        // The consumers first, the API server last (etcd goes with `_etcd`). A shared plane's own components are not
        // among them: they wait for the slot's next test.
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
