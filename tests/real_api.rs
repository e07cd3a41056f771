//! Against the real Kubernetes API server (tests/support/apiserver.rs: kube-apiserver, the controller manager and the
//! scheduler built from k8s.io/kubernetes v1.34.4, kwok's simulated kubelets; for an HA control plane during its
//! upgrade, a second kube-apiserver, v1.35.4, over the same etcd), with the real kubectl of v1.34.4:
//! what the stand-ins cannot prove, because a misunderstanding of the API would be the same on both sides. Evictions
//! meet real PodDisruptionBudgets (whose status the disruption controller computes), pods evicted are recreated by the
//! ReplicaSet controller and placed by the scheduler, CSRs are created by a node's own credentials, blue nodes are
//! deleted for real.
//!
//! The hosts are local connections (this machine); what runs on a host is a stand-in that tells the real API server
//! what a kubelet would report after its package swap (`status.nodeInfo.kubeletVersion`, through the status
//! subresource), since there is no kubelet here: kwok plays the kubelets.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::Value;

use crate::support::apiserver::{ApiServer, K8S_VERSION, KubeControlPlane, NEXT_K8S_VERSION, kubectl_binary};
use crate::support::etcd::etcdctl_binary;
use crate::support::{Outcome, Scenario};

const OLD: &str = "v1.33.5";
const TARGET: &str = "v1.34.4";

/// A cluster on the real control plane: kwok nodes for the masters and nodes, the host-side stand-ins, an inventory.
pub(crate) struct RealCluster {
    pub(crate) api: KubeControlPlane,
    pub(crate) dir: tempfile::TempDir,
    masters: Vec<String>,
    nodes: Vec<String>,
    /// Extra `all: vars:` lines.
    vars: Vec<String>,
    /// Extra variables of one host: (host, `name: value`).
    host_vars: Vec<(String, String)>,
    /// The run's upgrade_target_version.
    target: &'static str,
}

impl RealCluster {
    /// Masters at OLD, upgraded to TARGET. `None` when the control plane is not built (the start said SKIPPED and
    /// why).
    fn new(masters: &[&str], nodes: &[(&str, &str)]) -> Option<RealCluster> {
        RealCluster::between(masters, nodes, OLD, TARGET)
    }

    /// The masters' kubelets report `old` (the API server stays v1.34.4: kwok's nodes report what they are told).
    /// The masters' own API servers are this v1.34.4 one whatever the target, so their version is not waited for.
    pub(crate) fn at(old: &str, masters: &[&str], nodes: &[(&str, &str)]) -> Option<RealCluster> {
        RealCluster::between(masters, nodes, old, TARGET).map(|c| c.var("upgrade_master_api_version_command: \"\""))
    }

    /// `at` on a control plane of this test's own, never shared: for a test whose requests the API server counts in
    /// what a later test reads (a deprecated API requested shows in every later run's gate on removed APIs).
    pub(crate) fn at_on_its_own_control_plane(
        old: &str,
        masters: &[&str],
        nodes: &[(&str, &str)],
    ) -> Option<RealCluster> {
        let api = KubeControlPlane::start()?;
        let cluster = RealCluster::on(api, masters, nodes, old, TARGET);
        Some(cluster.var("upgrade_master_api_version_command: \"\""))
    }

    /// Masters whose kubelets report `from`, a run to `target`, on a control plane shared with the tests before and
    /// after this one (reset in between: KubeControlPlane::shared).
    fn between(masters: &[&str], nodes: &[(&str, &str)], from: &str, target: &'static str) -> Option<RealCluster> {
        Some(RealCluster::on(KubeControlPlane::shared()?, masters, nodes, from, target))
    }

    fn on(
        api: KubeControlPlane,
        masters: &[&str],
        nodes: &[(&str, &str)],
        from: &str,
        target: &'static str,
    ) -> RealCluster {
        let dir = tempfile::Builder::new().prefix("upgrade-real-api-").tempdir().expect("temp dir");
        for m in masters {
            api.add_node(m, from, &[("node-role.kubernetes.io/control-plane", "")]);
        }
        for (n, version) in nodes {
            api.add_node(n, version, &[]);
        }
        let all: Vec<&str> = masters.iter().copied().chain(nodes.iter().map(|(n, _)| *n)).collect();
        api.wait_nodes_ready(&all);
        // kubeadm init leaves its ClusterConfiguration in kube-system/kubeadm-config: the masters' image pull before
        // their window reads its imageRepository there.
        api.apply(
            "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: kubeadm-config\n  namespace: kube-system\ndata:\n  \
             ClusterConfiguration: |\n    apiVersion: kubeadm.k8s.io/v1beta4\n    kind: ClusterConfiguration\n    \
             imageRepository: registry.k8s.io\n",
        );
        // The masters keep the workload off, as kubeadm's taint does.
        for m in masters {
            api.ok(&["taint", "node", m, "node-role.kubernetes.io/control-plane=:NoSchedule"]);
            // kubeadm's static pods, as the kubelet mirrors them: the control-plane pods gate reads these.
            for component in ["kube-apiserver", "kube-controller-manager", "kube-scheduler", "etcd"] {
                api.apply(&static_pod(component, m, target));
            }
        }
        let cluster = RealCluster {
            api,
            dir,
            masters: masters.iter().map(|s| s.to_string()).collect(),
            nodes: nodes.iter().map(|(n, _)| n.to_string()).collect(),
            vars: Vec::new(),
            host_vars: Vec::new(),
            target,
        };
        cluster.write_stand_ins();
        cluster
    }

    pub(crate) fn var(mut self, line: &str) -> RealCluster {
        self.vars.push(line.to_string());
        self
    }

    /// A `name: value` line among `host`'s own variables.
    fn host_var(mut self, host: &str, line: &str) -> RealCluster {
        self.host_vars.push((host.to_string(), line.to_string()));
        self
    }

    pub(crate) fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// kubeadm (certificates a year ahead, `upgrade apply/node` accepted) and the package swap of kubelet and kubectl,
    /// which reports the node's new kubelet version to the API server as its kubelet would after the restart.
    fn write_stand_ins(&self) {
        let kubeadm = r#"#!/bin/sh
# kubeadm on a host of the real-API tests: the control plane is the test's own, so `upgrade apply/node` have nothing
# to do; `certs check-expiration` prints kubeadm's table with every certificate a year ahead.
case "$*" in
"certs check-expiration")
    when=$(date -u -d "@$(($(date -u +%s) + 365 * 86400))" '+%b %d, %Y %H:%M UTC')
    printf 'CERTIFICATE                EXPIRES                  RESIDUAL TIME   CERTIFICATE AUTHORITY   EXTERNALLY MANAGED\n'
    for c in admin.conf apiserver apiserver-kubelet-client; do printf '%-26s %-24s %-15s %-23s %s\n' "$c" "$when" 364d ca no; done
    ;;
upgrade\ apply\ *|upgrade\ node|upgrade\ plan\ *) echo "[upgrade] done" ;;
config\ images\ pull\ *) echo "[config/images] Pulled registry.k8s.io/kube-apiserver" ;;
*) echo "unexpected: kubeadm $*" >&2; exit 1 ;;
esac
"#;
        let upgrade = format!(
            r#"#!/bin/sh
# kubelet-upgrade NODE VERSION: the kubelet and kubectl packages at VERSION; the kubelet, restarted, reports it.
set -eu
echo "$1" >>{log}
exec {kubectl} --kubeconfig={config} patch node "$1" --subresource=status --type=merge \
    -p "{{\"status\":{{\"nodeInfo\":{{\"kubeletVersion\":\"$2\"}}}}}}"
"#,
            kubectl = kubectl_binary().display(),
            config = self.api.admin_kubeconfig().display(),
            log = self.path("upgrades.log").display()
        );
        for (name, text) in [("kubeadm", kubeadm.to_string()), ("kubelet-upgrade", upgrade)] {
            std::fs::write(self.path(name), text).expect("stand-in");
            let mode = std::os::unix::fs::PermissionsExt::from_mode(0o755);
            std::fs::set_permissions(self.path(name), mode).expect("chmod");
        }
    }

    pub(crate) fn inventory(&self, kubectl: &str) -> PathBuf {
        let mut text = String::from("all:\n  vars:\n    ansible_connection: local\n");
        let vars = [
            format!("upgrade_kubectl: \"{kubectl}\""),
            format!("upgrade_kubeadm: \"{}\"", self.path("kubeadm").display()),
            "upgrade_kubeadm_package_command: \"true\"".to_string(),
            format!(
                "upgrade_kubelet_package_command: \"{} {{{{ node_name }}}} {{{{ upgrade_target_version }}}}\"",
                self.path("kubelet-upgrade").display()
            ),
            "upgrade_master_restart_command: \"true\"".into(),
            "upgrade_node_restart_command: \"true\"".into(),
            "upgrade_daemon_reload_command: \"true\"".into(),
            "upgrade_kubernetes_repo_manage: false".into(),
            "upgrade_kubeadm_plan_check: false".into(),
            format!("upgrade_etcdctl: \"{}\"", etcdctl_binary().display()),
            format!("upgrade_etcd_endpoints: \"{}\"", self.api.etcd_endpoints()),
            format!("upgrade_etcd_member_url: \"{}\"", self.api.etcd_endpoints()),
            "upgrade_etcd_cacert: \"\"".into(),
            "upgrade_etcd_cert: \"\"".into(),
            "upgrade_etcd_key: \"\"".into(),
            format!("upgrade_etcd_backup_dir: \"{}/backups/{{{{ inventory_hostname }}}}\"", self.dir.path().display()),
            // Each master's own API server is this one control plane's.
            format!("upgrade_api_server_url: \"{}\"", self.api.url()),
            // The gate on removed APIs reads each master's own API server's /metrics: this one.
            format!("upgrade_api_removals_metrics_url: \"{}\"", self.api.url()),
            format!("upgrade_target_version: \"{}\"", self.target),
            "upgrade_node_ready_delay: 1".into(),
            // A drain that cannot finish fails the node instead of holding the test for ever.
            "upgrade_nodes_drain_timeout: 180".into(),
            "upgrade_node_ready_timeout: 60".into(),
            "upgrade_control_plane_ready_delay: 1".into(),
            "upgrade_control_plane_ready_timeout: 60".into(),
        ];
        // A test's own line for a key replaces the default one.
        let key = |line: &str| line.split(':').next().unwrap_or_default().trim().to_string();
        let own: Vec<String> = self.vars.iter().map(|l| key(l)).collect();
        for line in vars.iter().filter(|l| !own.contains(&key(l))).chain(&self.vars) {
            text.push_str(&format!("    {line}\n"));
        }
        text.push_str("  children:\n    masters:\n      hosts:\n");
        for m in &self.masters {
            text.push_str(&format!("        {m}:\n"));
            for (_, line) in self.host_vars.iter().filter(|(host, _)| host == m) {
                text.push_str(&format!("          {line}\n"));
            }
        }
        text.push_str("    etcd:\n      hosts:\n");
        text.push_str(&format!("        {}:\n", self.masters[0]));
        text.push_str("    nodes:\n      hosts:\n");
        for n in &self.nodes {
            text.push_str(&format!("        {n}:\n"));
        }
        let path = self.path("hosts.yml");
        std::fs::write(&path, text).expect("inventory");
        path
    }

    pub(crate) fn upgrade(&self, args: &[&str]) -> Outcome {
        Scenario::on_cluster(self.dir.path(), &self.inventory(&self.api.kubectl_command())).args(args).run()
    }

    /// How many times each node's packages were swapped, from the stand-in's log.
    pub(crate) fn upgrades(&self, node: &str) -> usize {
        std::fs::read_to_string(self.path("upgrades.log")).unwrap_or_default().lines().filter(|l| *l == node).count()
    }

    pub(crate) fn kubelet_version(&self, node: &str) -> String {
        self.api.node(node)["status"]["nodeInfo"]["kubeletVersion"].as_str().unwrap_or_default().to_string()
    }

    pub(crate) fn unschedulable(&self, node: &str) -> bool {
        self.api.node(node)["spec"]["unschedulable"].as_bool().unwrap_or(false)
    }

    /// The pods of a label selector with the node each runs on (`""` when not scheduled).
    fn pods(&self, selector: &str) -> Vec<(String, String, bool)> {
        let list: Value =
            serde_json::from_str(&self.api.ok(&["get", "pods", "-l", selector, "-o", "json"])).expect("pod list");
        list["items"]
            .as_array()
            .map(|items| {
                items
                    .iter()
                    .map(|p| {
                        let ready = p["status"]["conditions"]
                            .as_array()
                            .is_some_and(|c| c.iter().any(|c| c["type"] == "Ready" && c["status"] == "True"));
                        (
                            p["metadata"]["name"].as_str().unwrap_or_default().to_string(),
                            p["spec"]["nodeName"].as_str().unwrap_or_default().to_string(),
                            ready && p["metadata"]["deletionTimestamp"].is_null(),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    /// A Deployment NAME of `replicas` pause pods labelled app=NAME that run only on `node` (a nodeSelector on its
    /// hostname), its pods Running and Ready there.
    pub(crate) fn pinned_deployment(&self, name: &str, replicas: u32, node: &str) {
        self.api.apply(&format!(
            r#"{{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {{"name": "{name}", "namespace": "default"}},
              "spec": {{"replicas": {replicas}, "selector": {{"matchLabels": {{"app": "{name}"}}}},
                "template": {{"metadata": {{"labels": {{"app": "{name}"}}}},
                  "spec": {{"nodeSelector": {{"kubernetes.io/hostname": "{node}"}},
                    "containers": [{{"name": "c", "image": "registry.k8s.io/pause:3.10"}}]}}}}}}}}"#
        ));
        self.wait_for_pods(name, replicas);
    }

    /// `replicas` pods labelled app=NAME scheduled and Ready. The scheduler and kwok of a control plane started a
    /// moment ago, on a loaded machine, take their time: this is the test's setup, not what it checks.
    pub(crate) fn wait_for_pods(&self, name: &str, replicas: u32) {
        let want = replicas as usize;
        self.api.wait_for(&format!("{replicas} {name} pods Running and Ready"), Duration::from_secs(180), || {
            self.pods(&format!("app={name}")).iter().filter(|(_, node, ready)| !node.is_empty() && *ready).count()
                == want
        });
    }

    /// A Deployment of `replicas` pause pods labelled app=NAME, and a PodDisruptionBudget over them.
    fn workload(&self, name: &str, replicas: u32, budget: &str) {
        self.api.apply(&format!(
            r#"{{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {{"name": "{name}", "namespace": "default"}},
              "spec": {{"replicas": {replicas}, "selector": {{"matchLabels": {{"app": "{name}"}}}},
                "template": {{"metadata": {{"labels": {{"app": "{name}"}}}},
                  "spec": {{"containers": [{{"name": "c", "image": "registry.k8s.io/pause:3.10"}}]}}}}}}}}"#
        ));
        self.api.apply(&format!(
            r#"{{"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {{"name": "{name}", "namespace": "default"}},
              "spec": {{{budget}, "selector": {{"matchLabels": {{"app": "{name}"}}}}}}}}"#
        ));
        self.wait_for_pods(name, replicas);
        let want = replicas as usize;
        // The disruption controller has computed the budget's status (an eviction before that is refused).
        self.api.wait_for(&format!("the {name} budget's status"), Duration::from_secs(60), || {
            let pdb: Value =
                serde_json::from_str(&self.api.ok(&["get", "pdb", name, "-o", "json"])).unwrap_or(Value::Null);
            pdb["status"]["observedGeneration"].as_i64() == pdb["metadata"]["generation"].as_i64()
                && pdb["status"]["currentHealthy"].as_u64() == Some(want as u64)
        });
    }
}

fn static_pod(component: &str, node: &str, version: &str) -> String {
    serde_json::json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": format!("{component}-{node}"),
            "namespace": "kube-system",
            "labels": {"tier": "control-plane", "component": component},
            // A mirror pod, as the kubelet makes for a static pod: a drain skips it (it would delete any other pod
            // no controller owns).
            "annotations": {"kubernetes.io/config.mirror": format!("{component}-{node}"), "kubernetes.io/config.source": "file"},
        },
        "spec": {
            "nodeName": node,
            "tolerations": [{"operator": "Exists"}],
            "containers": [{"name": component, "image": format!("registry.k8s.io/{component}:{version}")}],
        },
    })
    .to_string()
}

#[test]
fn the_real_control_plane_starts_and_kwok_makes_its_nodes_ready() {
    let Some(api) = KubeControlPlane::start() else { return };
    api.add_node("n1", OLD, &[]);
    api.wait_nodes_ready(&["n1"]);
    let node = api.node("n1");
    assert_eq!(node["status"]["nodeInfo"]["kubeletVersion"], OLD, "{node}");
    let version = api.ok(&["version", "-o", "json"]);
    assert!(version.contains("\"gitVersion\": \"v1.34.4\""), "{version}");
}

/// The kubeadm flavour end to end on the real API server: 2 masters and 3 nodes, a Deployment behind a budget that
/// allows one disruption. Every drain goes through real evictions; the evicted pods are recreated and scheduled by
/// the real controllers; the nodes end at the target, schedulable, the workload whole.
#[test]
fn a_kubeadm_cluster_of_two_masters_and_three_nodes_is_upgraded_through_the_real_api() {
    let Some(cluster) = RealCluster::new(&["m1", "m2"], &[("n1", OLD), ("n2", OLD), ("n3", OLD)]) else { return };
    cluster.workload("web", 3, r#""maxUnavailable": 1"#);
    let run = cluster.upgrade(&[]).expect_code(0).output_has("result: success");
    for node in ["m1", "m2", "n1", "n2", "n3"] {
        assert_eq!(cluster.kubelet_version(node), TARGET, "{node}");
        assert!(!cluster.unschedulable(node), "{node} is schedulable again");
    }
    // The last node's evicted pods are recreated and placed by the real controllers, then made Ready by kwok.
    cluster.api.wait_for("the workload whole again", Duration::from_secs(60), || {
        cluster.pods("app=web").iter().filter(|(_, n, ready)| !n.is_empty() && *ready).count() == 3
    });
    // The drains evicted for real: no pod of the workload is one of the pods it started with on every node.
    assert!(run.output().contains("[n1] drain ok"), "{}", run.output());
    // A second run finds the cluster at the target.
    cluster.upgrade(&[]).expect_code(0).output_has("nothing to upgrade");
}

/// A budget that allows no disruption refuses the eviction (HTTP 429, from the real API server): the drain times
/// out, the node is uncordoned again and not upgraded, the run stops; the live plan names the budget beforehand.
#[test]
fn a_budget_that_allows_no_disruption_refuses_the_drain_on_the_real_api() {
    let Some(cluster) = RealCluster::new(&["m1"], &[("n1", OLD)]) else { return };
    let cluster = cluster.var("upgrade_nodes_drain_timeout: 6");
    cluster.workload("guarded", 1, r#""minAvailable": 1"#);
    let inventory = cluster.inventory(&cluster.api.kubectl_command());
    Scenario::on_cluster(cluster.dir.path(), &inventory)
        .args(["--plan", "--live"])
        .run()
        .expect_code(1)
        .output_has("PodDisruptionBudget default/guarded allows 0 disruptions");
    // The masters first (nothing of the workload runs there), then n1, whose drain the budget refuses.
    cluster.upgrade(&[]).expect_code(1).output_has("[n1] FAILED at drain");
    assert_eq!(cluster.kubelet_version("m1"), TARGET);
    assert!(!cluster.unschedulable("n1"), "n1 got its capacity back");
    assert_eq!(cluster.kubelet_version("n1"), OLD, "n1 was not upgraded");
}

/// Blue-green on the real API: the green nodes (already at the target) take the workload the real scheduler moves off
/// the evacuated blue nodes, whose Node objects are then deleted from the API server.
#[test]
fn blue_green_labels_evacuates_onto_the_green_nodes_and_deletes_the_blue_ones_on_the_real_api() {
    let Some(cluster) = RealCluster::new(&["m1"], &[("b1", OLD), ("b2", OLD), ("g1", TARGET), ("g2", TARGET)]) else {
        return;
    };
    let cluster = cluster.var("upgrade_nodes_strategy: blue-green").var("upgrade_blue_green_delete_nodes: true");
    // The workload starts on the blue nodes only (the green ones are cordoned until the switch-over, as new nodes
    // joined for a blue-green upgrade are).
    for g in ["g1", "g2"] {
        cluster.api.ok(&["cordon", g]);
    }
    cluster.workload("web", 2, r#""maxUnavailable": 1"#);
    assert!(cluster.pods("app=web").iter().all(|(_, node, _)| node.starts_with('b')), "{:?}", cluster.pods("app=web"));
    // The green group is new_nodes (openshift-ansible's name): the inventory lists g1, g2 there, b1, b2 as nodes.
    let inventory = cluster.inventory(&cluster.api.kubectl_command());
    let text = std::fs::read_to_string(&inventory).expect("inventory");
    let text =
        text.replace("        g1:\n        g2:\n", "") + "    new_nodes:\n      hosts:\n        g1:\n        g2:\n";
    std::fs::write(&inventory, text).expect("inventory with new_nodes");
    Scenario::on_cluster(cluster.dir.path(), &inventory).run().expect_code(0).output_has("result: success");

    let nodes = cluster.api.ok(&["get", "nodes", "-o", "name"]);
    assert!(!nodes.contains("node/b1") && !nodes.contains("node/b2"), "the blue nodes are deleted: {nodes}");
    for g in ["g1", "g2"] {
        assert!(!cluster.unschedulable(g), "{g} takes the load");
        assert_eq!(cluster.api.node(g)["metadata"]["labels"]["color"], "green");
    }
    cluster.api.wait_for("the workload on the green nodes", Duration::from_secs(60), || {
        let pods = cluster.pods("app=web");
        pods.len() == 2 && pods.iter().all(|(_, node, ready)| node.starts_with('g') && *ready)
    });
}

/// A kubelet that rotated its client certificate after the restart waits for its CSR, created with the node's own
/// credentials (system:node:NAME, as a kubelet does): with upgrade_approve_node_csrs the wait approves it through the
/// real API (`certificate approve`), and the kubelet, once approved, reports the target.
#[test]
fn a_nodes_pending_csr_is_approved_through_the_real_api_while_it_is_waited_for() {
    let Some(cluster) = RealCluster::new(&["m1"], &[("n1", OLD)]) else { return };
    let cluster = cluster.var("upgrade_approve_node_csrs: true");
    // n1's package swap creates the kubelet's CSR instead of reporting the new version at once.
    let key = cluster.path("n1.key");
    let csr_pem = cluster.path("n1.csr");
    let out = std::process::Command::new("openssl")
        .args(["req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-subj"])
        .arg("/O=system:nodes/CN=system:node:n1")
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&csr_pem)
        .output()
        .expect("openssl");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let request = data_encoding::BASE64.encode(&std::fs::read(&csr_pem).expect("csr"));
    let csr = serde_json::json!({
        "apiVersion": "certificates.k8s.io/v1",
        "kind": "CertificateSigningRequest",
        "metadata": {"name": "csr-n1-rotation"},
        "spec": {
            "request": request,
            "signerName": "kubernetes.io/kube-apiserver-client-kubelet",
            "usages": ["digital signature", "client auth"],
        },
    })
    .to_string();
    std::fs::write(cluster.path("n1-csr.json"), &csr).expect("csr json");
    let upgrade = cluster.path("kubelet-upgrade");
    let original = std::fs::read_to_string(&upgrade).expect("stand-in");
    let creates_csr = format!(
        "#!/bin/sh\n# n1's kubelet asks for a new client certificate (as system:node:n1) and reports the target once \
         it is approved.\nif [ \"$1\" = n1 ]; then\n  {kubectl} --server={url} --insecure-skip-tls-verify=true \
         --token=node-n1-token create -f {csr}\n  (i=0; while [ $i -lt 60 ]; do {kubectl} --kubeconfig={config} get csr \
         csr-n1-rotation -o jsonpath='{{.status.conditions[0].type}}' | grep -q Approved && exec {original} \"$@\"; \
         sleep 1; i=$((i+1)); done) >/dev/null 2>&1 &\n  exit 0\nfi\nexec {original} \"$@\"\n",
        kubectl = kubectl_binary().display(),
        url = cluster.api.url(),
        csr = cluster.path("n1-csr.json").display(),
        config = cluster.api.admin_kubeconfig().display(),
        original = cluster.path("kubelet-upgrade-original").display(),
    );
    std::fs::write(cluster.path("kubelet-upgrade-original"), original).expect("original stand-in");
    std::fs::write(&upgrade, creates_csr).expect("stand-in");
    for f in [&upgrade, &cluster.path("kubelet-upgrade-original")] {
        std::fs::set_permissions(f, std::os::unix::fs::PermissionsExt::from_mode(0o755)).expect("chmod");
    }

    cluster.upgrade(&[]).expect_code(0).output_has("approved the pending CSRs of n1: csr-n1-rotation");
    let csr: Value = serde_json::from_str(&cluster.api.ok(&["get", "csr", "csr-n1-rotation", "-o", "json"])).unwrap();
    assert_eq!(csr["spec"]["username"], "system:node:n1", "created by the node itself");
    assert_eq!(csr["status"]["conditions"][0]["type"], "Approved", "{csr}");
    assert_eq!(cluster.kubelet_version("n1"), TARGET);
}

/// An HA control plane during its upgrade to v1.35.4: m1's API server is kube-apiserver v1.35.4 already (its
/// `kubeadm upgrade apply` done), m2's still v1.34.4, both over one etcd, as kubeadm's stacked masters are. The run
/// talks to m1's (the first master's: discovery, node reads, the lease, evictions); the controllers, the scheduler
/// and kwok to m2's. The health gate asks each master's own API server for its version: m2's still answers v1.34.4
/// after its `kubeadm upgrade node`, so the run stops there, before any node; run again once m2's API server is the
/// new one, the same command finishes the upgrade, the workload's evictions through one server, its budget's status
/// and its pods' places from controllers on the other.
#[test]
fn an_ha_control_plane_with_api_servers_a_minor_apart_goes_on_only_once_each_masters_reports_the_target() {
    let nodes = [("n1", K8S_VERSION), ("n2", K8S_VERSION)];
    let Some(mut cluster) = RealCluster::between(&["m1", "m2"], &nodes, K8S_VERSION, NEXT_K8S_VERSION) else { return };
    let Some(next) = cluster.api.start_api_server(NEXT_K8S_VERSION) else { return };
    let first = cluster.api.first_api_server();
    assert_eq!(server_version(&first), K8S_VERSION);
    assert_eq!(server_version(&next), NEXT_K8S_VERSION);
    cluster.workload("web", 2, r#""maxUnavailable": 1"#);
    // The kubelet of 1.35 refuses cgroup v1 unless its configuration allows it, and this machine's hosts have
    // cgroup v1: their kubelet configuration says so, as the gate on what the target requires asks.
    let kubelet_config = cluster.path("kubelet-config.yaml");
    std::fs::write(&kubelet_config, "kind: KubeletConfiguration\nfailCgroupV1: false\n").expect("kubelet config");
    // m2's own API server is polled for the target this long before the run stops.
    let cluster = cluster
        .var(&format!("upgrade_kubelet_config_file: \"{}\"", kubelet_config.display()))
        .var("upgrade_control_plane_ready_timeout: 15")
        .host_var("m1", &format!("upgrade_api_server_url: \"{}\"", next.url))
        .host_var("m2", &format!("upgrade_api_server_url: \"{}\"", first.url));
    let inventory = cluster.inventory(&next.kubectl_command());
    let stopped = Scenario::on_cluster(cluster.dir.path(), &inventory).run().expect_code(1);
    let said = format!("m2's own API server ({}) does not report the target {NEXT_K8S_VERSION}", first.url);
    assert!(stopped.output().contains(&said), "{}", stopped.output());
    assert!(stopped.output().contains(&format!("answered {K8S_VERSION}")), "{}", stopped.output());
    for node in ["n1", "n2"] {
        assert_eq!(cluster.kubelet_version(node), K8S_VERSION, "{node} not started");
        assert!(!cluster.unschedulable(node), "{node}");
    }

    // Run again as it is, m2 (its kubelet at the target already) is checked again, not taken as done.
    let again = Scenario::on_cluster(cluster.dir.path(), &inventory).run().expect_code(1);
    assert!(again.output().contains(&said), "{}", again.output());

    // m2's API server moves to v1.35.4: its own is now the new one.
    let text = std::fs::read_to_string(&inventory).expect("inventory").replace(&first.url, &next.url);
    std::fs::write(&inventory, text).expect("inventory");
    Scenario::on_cluster(cluster.dir.path(), &inventory).run().expect_code(0).output_has("result: success");
    for node in ["m1", "m2", "n1", "n2"] {
        assert_eq!(cluster.kubelet_version(node), NEXT_K8S_VERSION, "{node}");
        assert!(!cluster.unschedulable(node), "{node} is schedulable again");
    }
    // The lease the run wrote through the new server is the one the old server serves (the same resourceVersion).
    let lease = |server: &ApiServer| -> Value {
        let json = server.kubectl(&["-n", "kube-system", "get", "configmap", "upgrade-lock", "-o", "json"]);
        serde_json::from_str(&json.expect("the lease")).expect("JSON")
    };
    let (through_new, through_old) = (lease(&next), lease(&first));
    assert_eq!(through_new["metadata"]["resourceVersion"], through_old["metadata"]["resourceVersion"]);
    assert_eq!(through_new["data"], through_old["data"]);
    cluster.api.wait_for("the workload whole again", Duration::from_secs(60), || {
        cluster.pods("app=web").iter().filter(|(_, n, ready)| !n.is_empty() && *ready).count() == 2
    });
}

/// N1 on the real API server: a stale lease (its holder dead an hour ago) found by two controllers at once, each with
/// its own state directory; both read it, then both write it back conditionally on the resourceVersion they read.
/// The real API server answers the second write `Conflict`: exactly one drives the cluster, the other is refused, and
/// every node is upgraded once.
#[test]
fn two_controllers_taking_over_a_stale_lock_on_the_real_api_never_both_drive_the_cluster() {
    let Some(cluster) = RealCluster::new(&["m1"], &[("n1", OLD), ("n2", OLD)]) else { return };
    let kubectl = cluster.api.kubectl_command();
    exactly_one_of_two_racing_controllers_drives_the_cluster(&cluster, &kubectl, &kubectl);
}

/// The same race during an HA control plane's upgrade, each controller through another master's API server: one
/// kube-apiserver v1.34.4, the other v1.35.4, over one etcd. A conditional write through one server must meet the
/// resourceVersion the other wrote, or both would take the lock.
#[test]
fn two_controllers_racing_through_api_servers_of_two_minors_over_one_etcd_never_both_drive_the_cluster() {
    let Some(mut cluster) = RealCluster::new(&["m1"], &[("n1", OLD), ("n2", OLD)]) else { return };
    let Some(next) = cluster.api.start_api_server(NEXT_K8S_VERSION) else { return };
    assert_eq!(server_version(&next), NEXT_K8S_VERSION, "the second API server is the next minor's");
    let (old, new) = (cluster.api.kubectl_command(), next.kubectl_command());
    exactly_one_of_two_racing_controllers_drives_the_cluster(&cluster, &old, &new);
}

/// Two runs, through `kubectl_a` and `kubectl_b`, find the same stale lease; each one's first conditional write
/// waits a second, so that both have read the lease before either writes.
fn exactly_one_of_two_racing_controllers_drives_the_cluster(cluster: &RealCluster, kubectl_a: &str, kubectl_b: &str) {
    let hour_ago = std::process::Command::new("date")
        .args(["-u", "-d", "-1 hour", "+%Y-%m-%dT%H:%M:%S.000000Z"])
        .output()
        .expect("date");
    let hour_ago = String::from_utf8_lossy(&hour_ago.stdout).trim().to_string();
    cluster.api.apply(
        &serde_json::json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "upgrade-lock", "namespace": "kube-system"},
            "data": {
                "holderIdentity": "a-controller-that-died",
                "leaseDurationSeconds": "60",
                "acquireTime": hour_ago,
                "renewTime": hour_ago,
                "leaderTransitions": "1",
                "holder": "ops@gone",
            },
        })
        .to_string(),
    );
    let slow = |side: &str, kubectl: &str| {
        let path = cluster.path(&format!("kubectl-{side}"));
        let mark = cluster.path(&format!("wrote-{side}"));
        std::fs::write(
            &path,
            format!(
                "#!/bin/sh\ncase \"$*\" in *\" replace \"*|*\" replace -f\"*) [ -e {mark} ] || {{ touch {mark}; sleep 1; }};; esac\nexec {kubectl} \"$@\"\n",
                mark = mark.display(),
            ),
        )
        .expect("kubectl wrapper");
        std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o755)).expect("chmod");
        path
    };
    let (a, b) = (slow("a", kubectl_a), slow("b", kubectl_b));
    let run = |kubectl: &PathBuf, state: &str| {
        let inventory = cluster.inventory(&kubectl.display().to_string());
        let copy = cluster.path(&format!("hosts-{state}.yml"));
        std::fs::copy(&inventory, &copy).expect("inventory copy");
        Scenario::on_cluster(cluster.dir.path(), &copy)
            .args(["--state-dir", &cluster.path(state).display().to_string()])
            .spawn()
    };
    let (one, two) = (run(&a, "state-a"), run(&b, "state-b"));
    let (one, two) = (one.finish_within(Duration::from_secs(180)), two.finish_within(Duration::from_secs(180)));
    let mut codes = [one.code, two.code];
    codes.sort_unstable();
    assert_eq!(codes, [0, 2], "exactly one drives the cluster\n{one}\n{two}");
    let refused = if one.code == 2 { &one } else { &two };
    assert!(refused.output().contains("another upgrade holds the cluster lock"), "{refused}");
    for node in ["m1", "n1", "n2"] {
        assert_eq!(cluster.upgrades(node), 1, "{node} upgraded once\n{one}\n{two}");
        assert_eq!(cluster.kubelet_version(node), cluster.target);
    }
}

/// The gitVersion a kube-apiserver reports (`kubectl version`'s serverVersion).
fn server_version(server: &ApiServer) -> String {
    let version: Value =
        serde_json::from_str(&server.kubectl(&["version", "-o", "json"]).expect("kubectl version")).expect("JSON");
    version["serverVersion"]["gitVersion"].as_str().unwrap_or_default().to_string()
}

/// Least privilege: a run with credentials that RBAC grants nothing is refused in preflight, naming each permission it
/// lacks, before the lock or any node is touched; with examples/rbac/upgrade.yaml bound to it, the whole kubeadm
/// upgrade runs as that user and not as system:masters.
#[test]
fn a_run_with_the_documented_least_privilege_role_upgrades_and_without_it_is_refused_naming_what_is_missing() {
    let Some(cluster) = RealCluster::new(&["m1"], &[("n1", OLD), ("n2", OLD)]) else { return };
    cluster.workload("web", 2, r#""maxUnavailable": 1"#);
    let as_upgrade = cluster.inventory(&cluster.api.least_privilege_kubectl_command());
    let refused = Scenario::on_cluster(cluster.dir.path(), &as_upgrade).run().expect_code(1);
    for missing in
        ["patch nodes", "create pods --subresource=eviction --all-namespaces", "create configmaps -n kube-system"]
    {
        assert!(refused.output().contains(missing), "names `{missing}`: {}", refused.output());
    }
    assert!(refused.output().contains("examples/rbac/upgrade.yaml"), "{}", refused.output());
    assert!(!cluster.unschedulable("n1") && cluster.kubelet_version("n1") == OLD, "nothing was touched");
    let lock = cluster.api.kubectl(&["-n", "kube-system", "get", "configmap", "upgrade-lock"]);
    assert!(!lock.status.success(), "no lock was taken");

    let role =
        std::fs::read_to_string(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/rbac/upgrade.yaml"))
            .expect("the documented role");
    cluster.api.apply(&role);
    // The API server's RBAC authorizer sees new bindings through its informers, a moment after the write.
    cluster.api.wait_for("the role bound to `upgrade`", Duration::from_secs(30), || {
        let out = cluster.api.kubectl(&["auth", "can-i", "update", "configmaps", "-n", "kube-system", "--as=upgrade"]);
        String::from_utf8_lossy(&out.stdout).trim() == "yes"
    });
    Scenario::on_cluster(cluster.dir.path(), &as_upgrade).run().expect_code(0).output_has("result: success");
    for node in ["m1", "n1", "n2"] {
        assert_eq!(cluster.kubelet_version(node), TARGET);
        assert!(!cluster.unschedulable(node), "{node}");
    }
}
