//! The kubeadm flavour on real Debian hosts (support/debian_host.rs): each host a debootstrapped bookworm root with
//! real apt, apt-mark and dpkg, reached over SSH through its own chrooted sshd; the Kubernetes packages stand-in
//! .debs in a repository laid out like pkgs.k8s.io, served on loopback by the test; the cluster API the fake cluster
//! (its kubectl runs on the first master, inside its root), told of package installs by kubelet's postinst and of
//! restarts by the stand-in systemctl. Without the cached root (scripts/build-debian-root) these tests say SKIPPED,
//! and fail under CI.

use std::path::PathBuf;

use crate::support::debian_host::{DebianHost, DebianImage, RepoServer};
use crate::support::etcd::{TestEtcd, etcdctl_binary};
use crate::support::fake_cluster::FakeCluster;
use crate::support::{Outcome, Scenario};

const TARGET: &str = "v1.29.1";
/// The line pkgs.k8s.io's install docs write (http and trusted=yes: see support/debian_host.rs).
const OFFICIAL_LINE: &str = "deb [trusted=yes] http://pkgs.k8s.io/core:/stable:/v1.28/deb/ /";
const KUBE_LIST: &str = "/etc/apt/sources.list.d/kubernetes.list";

struct DebianCluster {
    dir: tempfile::TempDir,
    fake: FakeCluster,
    etcd: TestEtcd,
    repo: RepoServer,
    masters: Vec<DebianHost>,
    nodes: Vec<DebianHost>,
    vars: Vec<String>,
}

impl DebianCluster {
    /// Masters and nodes at 1.28.5 (packages held, repository at v1.28), or `None` when the root is not built.
    fn new(masters: &[&str], nodes: &[&str]) -> Option<DebianCluster> {
        DebianCluster::with_line(masters, nodes, |_| OFFICIAL_LINE.to_string())
    }

    /// Like `new`, with each host's repository line made by `line` from the repository server's URL.
    fn with_line(masters: &[&str], nodes: &[&str], line: impl Fn(&str) -> String) -> Option<DebianCluster> {
        let image = DebianImage::find()?;
        let mut init = String::new();
        for m in masters {
            init.push_str(&format!("{m} v1.28.5 node-role.kubernetes.io/control-plane=\n"));
        }
        for n in nodes {
            init.push_str(&format!("{n} v1.28.5 -\n"));
        }
        let fake = FakeCluster::init(&init);
        let repo = RepoServer::start(&image.repo());
        let start = |list: &[&str]| -> Vec<DebianHost> {
            list.iter().map(|n| DebianHost::start(&image, n, &fake, &repo, &line(&repo.url()))).collect()
        };
        let (masters, nodes) = (start(masters), start(nodes));
        Some(DebianCluster {
            dir: tempfile::Builder::new().prefix("debian-e2e-").tempdir().expect("scratch dir"),
            etcd: TestEtcd::start(),
            fake,
            repo,
            masters,
            nodes,
            vars: Vec::new(),
        })
    }

    fn var(mut self, line: &str) -> DebianCluster {
        self.vars.push(line.to_string());
        self
    }

    fn host(&self, name: &str) -> &DebianHost {
        self.masters.iter().chain(&self.nodes).find(|h| h.name == name).expect("a host of the cluster")
    }

    fn hosts(&self) -> impl Iterator<Item = &DebianHost> {
        self.masters.iter().chain(&self.nodes)
    }

    fn inventory(&self) -> PathBuf {
        let mut text = String::from("all:\n  vars:\n");
        text.push_str(&format!("    upgrade_target_version: {TARGET}\n"));
        // The cluster side is the fake's, run on the first master inside its root (bind-mounted there); the host
        // side (kubeadm, apt, dpkg, systemctl) is each host's own, with the built-in defaults.
        let kubectl = self.fake.kubectl_command();
        text.push_str(&format!("    upgrade_kubectl: \"{kubectl}\"\n"));
        text.push_str("    upgrade_api_server_url: \"https://{{ node_name }}:6443\"\n");
        text.push_str(&format!(
            "    upgrade_master_api_health_command: \"{kubectl} --server={{{{ upgrade_api_server_url }}}} get --raw /readyz\"\n"
        ));
        text.push_str(&format!("    upgrade_etcdctl: \"{}\"\n", etcdctl_binary().display()));
        text.push_str(&format!("    upgrade_etcd_endpoints: \"{}\"\n", self.etcd.endpoints()));
        text.push_str("    upgrade_etcd_cacert: \"\"\n    upgrade_etcd_cert: \"\"\n    upgrade_etcd_key: \"\"\n");
        text.push_str("    upgrade_node_ready_delay: 1\n    upgrade_node_ready_timeout: 30\n");
        text.push_str("    upgrade_control_plane_ready_delay: 1\n    upgrade_control_plane_ready_timeout: 30\n");
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

    /// Each host's packages, holds and repository file, to compare before and after a refusal.
    fn snapshot(&self) -> Vec<(String, String)> {
        self.hosts()
            .map(|h| {
                let (_, state) = h
                    .sh("dpkg-query -W -f='${Package} ${Version} ${Status}\\n' kubeadm kubelet kubectl cri-tools \
                     kubernetes-cni; apt-mark showhold; ls /etc/apt/sources.list.d; cat /etc/apt/sources.list.d/*");
                (h.name.clone(), state)
            })
            .collect()
    }
}

/// Every host at the target: packages installed from the v1.29 repository, held again, the node at the target.
fn assert_upgraded(cluster: &DebianCluster, run: &Outcome) {
    for h in cluster.hosts() {
        let why = || format!("{}: {}\n{run}", h.name, h.sh("cat /var/log/apt/term.log 2>/dev/null | tail -n 30").1);
        assert_eq!(h.installed("kubeadm"), "1.29.1-1.1", "{}", why());
        assert_eq!(h.installed("kubelet"), "1.29.1-1.1", "{}", why());
        assert_eq!(h.installed("kubectl"), "1.29.1-1.1", "{}", why());
        // kubelet's dependency stays met (apt moves it only when the new kubelet asks for more).
        assert!(!h.installed("kubernetes-cni").is_empty(), "{}", why());
        let held: Vec<String> = h.holds().into_iter().collect();
        assert_eq!(held, ["kubeadm", "kubectl", "kubelet"], "{}", why());
        let line = h.file(KUBE_LIST);
        assert!(line.contains("/core:/stable:/v1.29/deb/") && !line.contains("v1.28"), "{}: {line}", h.name);
        assert_eq!(h.sh("kubelet --version").1.trim(), "Kubernetes v1.29.1");
        assert_eq!(cluster.fake.version(&h.name), TARGET, "{}", why());
        assert!(!cluster.fake.is_cordoned(&h.name));
    }
}

#[test]
fn a_master_and_two_nodes_go_from_1_28_5_to_1_29_1_with_real_apt_and_dpkg() {
    let Some(cluster) = DebianCluster::new(&["m1"], &["n1", "n2"]) else { return };
    let run = cluster.upgrade(&[]).expect_code(0).stdout_has("result: success");
    let run = run.stdout_has("[m1] package manager: apt (detected)");
    assert_upgraded(&cluster, &run);
    // Each host's apt fetched the v1.29 index: the switch happened before the install, on every host.
    let fetched = cluster.repo.requests();
    assert!(
        fetched
            .iter()
            .any(|p| p.starts_with("/core:/stable:/v1.29/deb/") && p.contains("/kubeadm_1.29.1-1.1_")),
        "{fetched:?}"
    );
    // The kubelet restart came after the daemon-reload, on every host (the stand-in systemctl's log).
    for h in cluster.hosts() {
        let log = h.file("/var/log/systemctl.log");
        assert_eq!(log.lines().collect::<Vec<_>>(), ["daemon-reload", "restart kubelet"], "{}", h.name);
        assert_eq!(cluster.fake.upgrades(&h.name), 1, "{}: one package swap", h.name);
    }
}
