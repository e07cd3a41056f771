//! The kubeadm steps end to end with the real kubectl: every host a real sshd whose PATH holds recording stand-ins
//! for apt-get/apt-mark or dnf/yum, systemctl and kubeadm (support/stand_in_host.rs), the cluster API a stand-in
//! Kubernetes API server on loopback (support/kube_api.rs) that the real kubectl reaches through a kubeconfig, and a
//! real etcd for the backup and the health gate.

use std::path::PathBuf;
use std::process::Command;

use crate::support::etcd::{TestEtcd, etcdctl_binary};
use crate::support::kube_api::{KubeApi, PodKind};
use crate::support::stand_in_host::{Packages, StandInHost};
use crate::support::{Outcome, Scenario};

const FROM: &str = "v1.28.5";
const TARGET: &str = "v1.29.1";

struct KubeadmCluster {
    dir: tempfile::TempDir,
    api: KubeApi,
    etcd: TestEtcd,
    masters: Vec<StandInHost>,
    nodes: Vec<StandInHost>,
    vars: Vec<String>,
}

impl KubeadmCluster {
    /// Masters and nodes at v1.28.5, each a stand-in host with its package manager and a repository file at v1.28.
    fn new(masters: &[(&str, Packages)], nodes: &[(&str, Packages)]) -> KubeadmCluster {
        let all: Vec<(&str, &str)> = masters.iter().chain(nodes).map(|(name, _)| (*name, FROM)).collect();
        let api = KubeApi::start(&all);
        let start = |list: &[(&str, Packages)]| -> Vec<StandInHost> {
            list.iter().map(|(name, packages)| StandInHost::start(name, *packages, "v1.28", &api.url())).collect()
        };
        let masters = start(masters);
        let nodes = start(nodes);
        KubeadmCluster {
            dir: tempfile::Builder::new().prefix("kubeadm-e2e-").tempdir().expect("scratch dir"),
            etcd: TestEtcd::start(),
            api,
            masters,
            nodes,
            vars: Vec::new(),
        }
    }

    fn var(mut self, line: &str) -> KubeadmCluster {
        self.vars.push(line.to_string());
        self
    }

    fn host(&self, name: &str) -> &StandInHost {
        self.masters.iter().chain(&self.nodes).find(|h| h.name == name).expect("a host of the cluster")
    }

    fn inventory(&self) -> PathBuf {
        let mut text = String::from("all:\n  vars:\n");
        text.push_str(&format!("    upgrade_target_version: {TARGET}\n"));
        text.push_str(&format!("    upgrade_kubectl: \"{}\"\n", self.api.kubectl_command()));
        // The per-master probe's default (curl) against the stand-in API server, which every master shares.
        text.push_str(&format!("    upgrade_api_server_url: \"{}\"\n", self.api.url()));
        text.push_str(&format!("    upgrade_api_removals_metrics_url: \"{}\"\n", self.api.url()));
        // It is every master's: one version for all, where each master's own is the point (real_api.rs checks that).
        text.push_str("    upgrade_master_api_version_command: \"\"\n");
        text.push_str(&format!("    upgrade_etcdctl: \"{}\"\n", etcdctl_binary().display()));
        text.push_str(&format!("    upgrade_etcd_endpoints: \"{}\"\n", self.etcd.endpoints()));
        text.push_str("    upgrade_etcd_cacert: \"\"\n    upgrade_etcd_cert: \"\"\n    upgrade_etcd_key: \"\"\n");
        text.push_str("    upgrade_etcd_backup_dir: \"{{ host_root }}/etcd-backups\"\n");
        text.push_str("    upgrade_node_ready_delay: 1\n    upgrade_node_ready_timeout: 20\n");
        text.push_str("    upgrade_control_plane_ready_delay: 1\n    upgrade_control_plane_ready_timeout: 20\n");
        // The stand-in API server serves no kube-system pods; the fake cluster's tests (cluster_care.rs) cover that gate.
        text.push_str("    upgrade_control_plane_pods_check: false\n");
        // Nor SelfSubjectAccessReviews: the real API server's tests (real_api.rs) cover the permissions check.
        text.push_str("    upgrade_cluster_permissions_check: false\n");
        for line in &self.vars {
            text.push_str(&format!("    {line}\n"));
        }
        text.push_str("  children:\n    masters:\n      hosts:\n");
        for m in &self.masters {
            text.push_str(&m.yaml_host(8));
        }
        text.push_str(&format!("    etcd:\n      hosts:\n        {}:\n", self.masters[0].name));
        text.push_str("    nodes:\n      hosts:\n");
        for n in &self.nodes {
            text.push_str(&n.yaml_host(8));
        }
        let path = self.dir.path().join("hosts.yml");
        std::fs::write(&path, text).expect("inventory");
        path
    }

    fn upgrade(&self, args: &[&str]) -> Outcome {
        Scenario::on_cluster(self.dir.path(), &self.inventory()).args(args).run()
    }
}

/// The calls of one host, as `argv` lines, for a failing assertion.
fn calls(host: &StandInHost) -> String {
    host.calls().iter().map(|c| format!("{}  [repo {}]", c.argv, c.repo_minor)).collect::<Vec<_>>().join("\n")
}

/// The host-side order the Kubernetes upgrade docs give: the repository at the new minor before the first package
/// install, daemon-reload before the kubelet restart.
fn assert_docs_order(host: &StandInHost, install: &str) {
    let list = host.calls();
    let first_install = list.iter().find(|c| c.argv.starts_with(install)).unwrap_or_else(|| {
        panic!("{}: no `{install}`:\n{}", host.name, calls(host));
    });
    assert_eq!(
        first_install.repo_minor,
        "v1.29",
        "{}: the repository says v1.29 at the first install\n{}",
        host.name,
        calls(host)
    );
    let reload = host
        .position("systemctl daemon-reload")
        .unwrap_or_else(|| panic!("{}: no daemon-reload\n{}", host.name, calls(host)));
    let restart = host
        .position("systemctl restart kubelet")
        .unwrap_or_else(|| panic!("{}: no restart\n{}", host.name, calls(host)));
    assert!(reload < restart, "{}: daemon-reload comes before the restart\n{}", host.name, calls(host));
}

#[test]
fn an_apt_master_and_a_dnf_node_go_from_1_28_to_1_29_in_the_order_of_the_kubernetes_docs() {
    let cluster = KubeadmCluster::new(&[("m1", Packages::Apt)], &[("n1", Packages::Dnf)]);
    cluster.api.add_pod("default", "web-1", "n1", PodKind::ReplicaSet);
    let run = cluster.upgrade(&[]).expect_code(0).stdout_has("result: success");
    let run = run.stdout_has("[m1] package manager: apt (detected)").stdout_has("[n1] package manager: dnf (detected)");
    run.stdout_has("v1.28 -> v1.29 before the first package install");

    let (m1, n1) = (cluster.host("m1"), cluster.host("n1"));
    assert_docs_order(
        m1,
        "apt-get install -y -qq -o DPkg::Lock::Timeout=300 -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold kubeadm=1.29.1-*",
    );
    assert_docs_order(n1, "dnf install -y kubeadm-1.29.1-* --disableexcludes=kubernetes");
    let plan = m1.position("kubeadm upgrade plan v1.29.1").unwrap_or_else(|| panic!("no plan\n{}", calls(m1)));
    let apply = m1.position("kubeadm upgrade apply v1.29.1 --yes").unwrap_or_else(|| panic!("no apply\n{}", calls(m1)));
    assert!(plan < apply, "kubeadm upgrade plan before kubeadm upgrade apply\n{}", calls(m1));
    assert!(n1.position("kubeadm upgrade node").is_some(), "{}", calls(n1));
    assert!(
        n1.position("dnf install -y kubelet-1.29.1-* kubectl-1.29.1-* --disableexcludes=kubernetes").is_some(),
        "{}",
        calls(n1)
    );
    assert!(n1.position("apt").is_none(), "the dnf host never saw apt: {}", calls(n1));
    // Before the windows: n1 downloaded its packages through a copy of its repository file switched to v1.29 (its
    // own file still at v1.28 then), the flags dnf 4 and yum 3.4.3 both have; m1 pulled the control plane's images
    // from the cluster's image repository (kubeadm-config).
    let download = n1
        .calls()
        .into_iter()
        .position(|c| {
            c.argv.starts_with("dnf --setopt=reposdir=/tmp/upgrade-packages.")
                && c.argv.ends_with(
                    "install -y --downloadonly kubeadm-1.29.1-* kubelet-1.29.1-* kubectl-1.29.1-* \
                     --disableexcludes=kubernetes",
                )
                && c.repo_minor == "v1.28"
        })
        .unwrap_or_else(|| panic!("no download before the window\n{}", calls(n1)));
    assert!(download < n1.position("dnf install -y kubeadm-1.29.1-*").unwrap(), "{}", calls(n1));
    let pull = m1
        .position("kubeadm config images pull --kubernetes-version v1.29.1 --image-repository registry.k8s.io")
        .unwrap_or_else(|| panic!("no image pull\n{}", calls(m1)));
    assert!(pull < apply, "{}", calls(m1));

    // The repository files say v1.29 now, with the v1.28 original kept beside them.
    for host in [m1, n1] {
        let now = std::fs::read_to_string(host.repo_file()).expect("repository file");
        assert!(now.contains("/core:/stable:/v1.29/") && !now.contains("v1.28"), "{now}");
        let kept = std::fs::read_to_string(format!("{}.v1.28.bak", host.repo_file().display())).expect("backup");
        assert!(kept.contains("/core:/stable:/v1.28/"), "{kept}");
    }
    assert_eq!(cluster.api.version("m1"), TARGET);
    assert_eq!(cluster.api.version("n1"), TARGET);
    assert!(cluster.api.pods_on("n1").is_empty(), "the real kubectl drained n1");
}

#[test]
fn the_repository_switch_runs_once_and_a_file_without_a_pkgs_minor_is_left_alone() {
    let cluster = KubeadmCluster::new(&[("m1", Packages::Apt)], &[("n1", Packages::Apt)]);
    let other = "deb http://mirror.example/kubernetes stable main\n";
    std::fs::write(cluster.host("n1").repo_file(), other).expect("n1's own repository");
    let run = cluster.upgrade(&[]).expect_code(0);
    let said = run.stdout.clone().matches("[n1] package manager").count();
    assert_eq!(said, 1, "said once for n1");
    run.stdout_has("names no pkgs.k8s.io minor: left alone");
    assert_eq!(std::fs::read_to_string(cluster.host("n1").repo_file()).unwrap(), other);
    let backup = PathBuf::from(format!("{}.v1.28.bak", cluster.host("m1").repo_file().display()));
    let first = std::fs::read_to_string(&backup).expect("m1's backup");
    // The switch again on m1 (its preflight and its upgrade both ran it) changed nothing after the first time.
    let repo = std::fs::read_to_string(cluster.host("m1").repo_file()).unwrap();
    assert_eq!(repo.matches("v1.29").count(), 1, "{repo}");
    assert_eq!(std::fs::read_to_string(&backup).unwrap(), first);
}

#[test]
fn a_clean_drain_by_the_real_kubectl_evicts_pods_skips_daemonsets_and_polls_one_node_at_a_time() {
    let cluster = KubeadmCluster::new(&[("m1", Packages::Apt)], &[("n1", Packages::Apt)]);
    cluster.api.add_pod("default", "web-1", "n1", PodKind::ReplicaSet);
    cluster.api.add_pod("default", "web-2", "n1", PodKind::ReplicaSet);
    cluster.api.add_pod("kube-system", "node-agent-n1", "n1", PodKind::DaemonSet);
    // After its restart n1 is Ready at the third read of it.
    cluster.api.ready_at_read("n1", 3);
    cluster.upgrade(&[]).expect_code(0).stdout_has("result: success");
    assert_eq!(cluster.api.pods_on("n1"), ["node-agent-n1"], "evicted all but the DaemonSet's pod");
    let requests = cluster.api.requests();
    let evictions: Vec<&str> = requests
        .iter()
        .filter(|r| r.method == "POST" && r.path.ends_with("/eviction"))
        .map(|r| r.path.as_str())
        .collect();
    assert_eq!(evictions.len(), 2, "{evictions:?}");
    assert!(evictions.iter().all(|p| !p.contains("node-agent")), "{evictions:?}");

    // Readiness polling: from n1's kubelet restart until Ready, one read of that node per poll, never the list.
    let restart = requests.iter().position(|r| r.is("POST", "/_test/kubelet/n1")).expect("n1 restarted");
    let until = requests[restart..].iter().position(|r| r.method == "PATCH").map(|i| restart + i).expect("uncordon");
    let polls = &requests[restart + 1..until];
    let reads = polls.iter().filter(|r| r.is("GET", "/api/v1/nodes/n1")).count();
    let lists = polls.iter().filter(|r| r.is("GET", "/api/v1/nodes")).count();
    // kubectl uncordon reads the node once itself before its PATCH.
    assert_eq!(reads, 3 + 1, "three polls of one node each, then uncordon's own read: {polls:?}");
    assert_eq!(lists, 0, "no poll read the node list: {polls:?}");
}

#[test]
fn a_drain_blocked_by_a_disruption_budget_hits_the_drain_timeout_and_that_node_is_uncordoned() {
    let cluster = KubeadmCluster::new(&[("m1", Packages::Apt)], &[("n1", Packages::Apt), ("n2", Packages::Apt)])
        .var("upgrade_nodes_serial: 2")
        .var("upgrade_nodes_max_fail_percentage: 50")
        .var("upgrade_nodes_drain_timeout: 4");
    cluster.api.add_pod("default", "guarded", "n1", PodKind::DisruptionBudget);
    cluster.api.add_pod("default", "web-2", "n2", PodKind::ReplicaSet);
    let run = cluster.upgrade(&[]).expect_code(1).stdout_has("drain timed out after 4s");
    assert_eq!(cluster.api.version("n1"), FROM, "n1 was not upgraded");
    assert!(!cluster.api.is_cordoned("n1"), "n1 got its capacity back");
    assert_eq!(cluster.api.pods_on("n1"), ["guarded"]);
    assert_eq!(cluster.api.version("n2"), TARGET, "n2 went on");
    assert!(
        cluster.host("n1").position("kubeadm").is_none(),
        "n1's host was not touched: {}",
        calls(cluster.host("n1"))
    );
    let refused = cluster
        .api
        .requests()
        .iter()
        .filter(|r| r.is("POST", "/api/v1/namespaces/default/pods/guarded/eviction"))
        .count();
    assert!(refused >= 1, "kubectl asked to evict the guarded pod and was told 429");
    drop(run);
}

#[test]
fn a_pod_that_never_terminates_holds_the_drain_until_the_timeout() {
    let cluster =
        KubeadmCluster::new(&[("m1", Packages::Apt)], &[("n1", Packages::Apt)]).var("upgrade_nodes_drain_timeout: 3");
    cluster.api.add_pod("default", "stuck", "n1", PodKind::NeverTerminates);
    cluster.upgrade(&[]).expect_code(1).stdout_has("drain timed out after 3s");
    assert_eq!(cluster.api.version("n1"), FROM);
    assert!(!cluster.api.is_cordoned("n1"));
}

#[test]
fn a_node_that_stays_not_ready_after_its_restart_fails() {
    let cluster =
        KubeadmCluster::new(&[("m1", Packages::Apt)], &[("n1", Packages::Apt)]).var("upgrade_node_ready_timeout: 3");
    cluster.api.stays_not_ready("n1");
    cluster.upgrade(&[]).expect_code(1).stdout_has("node n1 is not Ready at v1.29.1 after 3s");
    assert_eq!(cluster.api.version("n1"), TARGET, "its kubelet runs the target, but it is not Ready");
    assert!(cluster.api.is_cordoned("n1"), "a node upgraded but not Ready is left cordoned");
}

#[test]
fn an_api_server_not_ready_after_a_masters_upgrade_stops_the_run_before_the_next_master() {
    let cluster = KubeadmCluster::new(&[("m1", Packages::Apt), ("m2", Packages::Apt)], &[("n1", Packages::Apt)])
        .var("upgrade_control_plane_ready_timeout: 3");
    cluster.api.readyz_fails_after_restart_of("m1");
    let run = cluster.upgrade(&[]).expect_code(1).stdout_has("control-plane-health");
    let run = run.stdout_has("did not answer ok within 3s");
    run.stdout_has("master m1 failed; the masters after it were not started");
    assert_eq!(cluster.api.version("m1"), TARGET);
    assert_eq!(cluster.api.version("m2"), FROM, "m2 was not started");
    assert!(cluster.host("m2").position("kubeadm upgrade").is_none(), "{}", calls(cluster.host("m2")));
    assert!(cluster.host("n1").position("kubeadm upgrade").is_none());
}

#[test]
fn preflight_stops_on_an_etcdctl_that_does_not_run_and_names_the_two_fixes() {
    let cluster = KubeadmCluster::new(&[("m1", Packages::Apt)], &[("n1", Packages::Apt)])
        .var("upgrade_etcdctl: /nonexistent/etcdctl");
    let run = cluster.upgrade(&[]).expect_code(1).stdout_has("install the etcd client");
    run.stdout_has("crictl exec");
    assert!(cluster.api.requests().iter().all(|r| r.method != "PATCH"), "no node was cordoned");
    // Only the certificate read of preflight (`kubeadm certs check-expiration`) ran before: no plan, no upgrade.
    assert!(cluster.host("m1").position("kubeadm upgrade").is_none(), "{}", calls(cluster.host("m1")));
}

#[test]
fn the_real_kubectl_cordons_drains_and_reads_through_the_stand_in_api_server() {
    let api = KubeApi::start(&[("n1", FROM)]);
    api.add_pod("default", "web-1", "n1", PodKind::ReplicaSet);
    api.add_pod("kube-system", "node-agent-n1", "n1", PodKind::DaemonSet);
    let kubectl = |args: &[&str]| {
        let out = Command::new("timeout")
            .arg("60")
            .arg("kubectl")
            .arg(format!("--kubeconfig={}", api.kubeconfig().display()))
            .args(args)
            .env("HOME", api.kubeconfig().parent().expect("dir"))
            .output()
            .expect("run kubectl (scripts/install-test-deps installs it)");
        let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert!(out.status.success(), "kubectl {args:?} failed:\n{text}\nrequests: {:?}", api.requests());
        text
    };
    assert_eq!(kubectl(&["get", "--raw", "/readyz"]), "ok");
    let node: serde_json::Value = serde_json::from_str(&kubectl(&["get", "node", "n1", "-o", "json"])).expect("json");
    assert_eq!(node["status"]["nodeInfo"]["kubeletVersion"], FROM);
    let list: serde_json::Value = serde_json::from_str(&kubectl(&["get", "nodes", "-o", "json"])).expect("json");
    assert_eq!(list["items"][0]["metadata"]["name"], "n1");
    kubectl(&["cordon", "n1"]);
    assert!(api.is_cordoned("n1"));
    let drained =
        kubectl(&["drain", "n1", "--ignore-daemonsets", "--delete-emptydir-data", "--force", "--timeout=20s"]);
    assert!(drained.contains("evicted"), "{drained}");
    assert_eq!(api.pods_on("n1"), ["node-agent-n1"]);
    kubectl(&["uncordon", "n1"]);
    assert!(!api.is_cordoned("n1"));
}
