//! The scripted fake cluster API (testing/fake-cluster/) seen from a test: a private state directory, the command
//! strings that point the inventory's command variables at it, and readers for node state and the call log.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use upgrade::connection::shell_quote;

/// One call the fake recorded, in the order of `calls.log`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Call {
    /// The node the call acted on, `-` for `get nodes`.
    pub node: String,
    /// `get-nodes`, `get-node`, `readyz`, `cordon`, `uncordon`, `drain`, `kubeadm-plan`, `kubeadm-apply`,
    /// `kubeadm-node`, `upgrade`, `daemon-reload`, `restart`.
    pub action: String,
    /// The tool and its arguments as called (`kubectl drain node-1 --force ...`).
    pub argv: String,
}

/// A fake cluster: its state directory, removed on drop when the cluster made it.
pub struct FakeCluster {
    _dir: Option<tempfile::TempDir>,
    state: PathBuf,
}

impl FakeCluster {
    /// The folder of the fake's scripts in this repository.
    pub fn script_dir() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("testing").join("fake-cluster")
    }

    /// Creates a cluster from `init` lines: `NAME VERSION LABELS [cordoned] [notready]`, one node a line.
    pub fn init(nodes: &str) -> FakeCluster {
        let dir = tempfile::Builder::new().prefix("fake-cluster-").tempdir().expect("temp dir");
        let state = dir.path().join("state");
        let cluster = FakeCluster { _dir: Some(dir), state };
        let out = cluster.run_with_stdin("init", &[], nodes.as_bytes());
        assert!(out.status.success(), "fake-cluster init failed: {}", String::from_utf8_lossy(&out.stderr));
        cluster
    }

    /// The fake cluster whose state is in `state` (made by `fake-cluster init`), owned by someone else.
    pub fn at(state: &Path) -> FakeCluster {
        FakeCluster { _dir: None, state: state.to_path_buf() }
    }

    pub fn state_dir(&self) -> &Path {
        &self.state
    }

    pub fn tool(&self, tool: &str) -> String {
        format!(
            "{} --state {}",
            shell_quote(&Self::script_dir().join(tool).to_string_lossy()),
            shell_quote(&self.state.to_string_lossy())
        )
    }

    /// The value for `upgrade_kubectl`.
    pub fn kubectl_command(&self) -> String {
        self.tool("kubectl")
    }

    /// The value for `upgrade_kubeadm`: the node is the host's `node_name`, templated by the executor.
    pub fn kubeadm_command(&self) -> String {
        format!("{} --node {{{{ node_name }}}}", self.tool("kubeadm"))
    }

    /// The value for `upgrade_kubelet_package_command`: the kubelet "package swap" sets the node's version.
    pub fn kubelet_package_command(&self) -> String {
        format!("{} --node {{{{ node_name }}}} upgrade {{{{ upgrade_target_version }}}}", self.tool("fake-node"))
    }

    /// The value for `upgrade_daemon_reload_command`.
    pub fn daemon_reload_command(&self) -> String {
        format!("{} --node {{{{ node_name }}}} daemon-reload", self.tool("fake-node"))
    }

    /// The value for `upgrade_master_restart_command` and `upgrade_node_restart_command`.
    pub fn restart_command(&self) -> String {
        format!("{} --node {{{{ node_name }}}} restart", self.tool("fake-node"))
    }

    /// Every command variable the built-in playbooks read, pointed at this fake (for `[all:vars]` or `-e`).
    pub fn command_vars(&self) -> Vec<(&'static str, String)> {
        vec![
            ("upgrade_kubectl", self.kubectl_command()),
            ("upgrade_kubeadm", self.kubeadm_command()),
            ("upgrade_kubeadm_package_command", "true".to_string()),
            ("upgrade_kubelet_package_command", self.kubelet_package_command()),
            ("upgrade_master_restart_command", self.restart_command()),
            ("upgrade_node_restart_command", self.restart_command()),
            ("upgrade_daemon_reload_command", self.daemon_reload_command()),
            // The test hosts are this machine: its own repository files are not the fake's to change.
            ("upgrade_kubernetes_repo_manage", "false".to_string()),
            // Nor are its automatic package upgrades the test's to report (preflight's warning would vary by machine).
            ("upgrade_auto_updates_command", "true".to_string()),
            // Each master's own API server, asked by name: the fake answers for that node (its apiserver_unhealthy).
            ("upgrade_api_server_url", "https://{{ node_name }}:6443".to_string()),
            (
                "upgrade_master_api_health_command",
                format!("{} --server={{{{ upgrade_api_server_url }}}} get --raw /readyz", self.kubectl_command()),
            ),
            // And its version: what the fake's kubeadm set on that master.
            (
                "upgrade_master_api_version_command",
                format!("{} --server={{{{ upgrade_api_server_url }}}} get --raw /version", self.kubectl_command()),
            ),
        ]
    }

    /// Every command variable of the openshift flavour pointed at this fake (YAML-ready values): `oc`, `yum`,
    /// `rpm`, the two excluders, `master-restart`, daemon-reload and the node service restart, on the host's `node_name`.
    pub fn openshift_command_vars(&self) -> Vec<(&'static str, String)> {
        let on_node = |tool: &str| format!("{} --node {{{{ node_name }}}}", self.tool(tool));
        vec![
            ("upgrade_kubectl", self.tool("oc")),
            ("upgrade_yum", on_node("yum")),
            ("upgrade_host_version_command", format!("{} -q --qf %{{VERSION}} atomic-openshift-node", on_node("rpm"))),
            ("upgrade_openshift_excluder_command", format!("{} atomic-openshift-excluder", on_node("excluder"))),
            ("upgrade_docker_excluder_command", format!("{} atomic-openshift-docker-excluder", on_node("excluder"))),
            ("upgrade_openshift_master_restart_command", on_node("master-restart")),
            ("upgrade_node_restart_command", self.restart_command()),
            ("upgrade_daemon_reload_command", self.daemon_reload_command()),
            // A master's static pod manifests are the fake's (its init lays them down where a real master has
            // /etc/origin/node/pods), and the pre-pull of their images is the fake's `docker pull`.
            (
                "upgrade_openshift_static_pod_dir",
                format!("{}/nodes/{{{{ node_name }}}}/pods", self.state.to_string_lossy()),
            ),
            ("upgrade_image_pull_command", format!("{} pull", on_node("docker"))),
            // The test hosts are this machine: its automatic package upgrades are not the test's to report.
            ("upgrade_auto_updates_command", "true".to_string()),
            // The runtime upgrade is on by default, as in openshift-ansible; the default also restarts docker with
            // systemctl, which the test hosts do not have.
            ("upgrade_container_runtime_command", format!("{} install -y docker", on_node("yum"))),
            // Each master's own API server through oc 3.11's --server, as the fake answers it per node.
            ("upgrade_api_server_url", "https://{{ node_name }}:8443".to_string()),
            (
                "upgrade_master_api_health_command",
                format!("{} --server={{{{ upgrade_api_server_url }}}} get --raw /healthz/ready", self.tool("oc")),
            ),
        ]
    }

    /// The image a master's static pod runs (`master-api`, `master-controllers`, `master-etcd`) or a node's SDN pods
    /// (`sdn`), as the fake's kubelet last started it.
    pub fn image(&self, node: &str, pod: &str) -> String {
        self.node_file(node, &format!("images/{pod}"))
    }

    /// A master's static pod manifest as it is on its disk now (`apiserver.yaml`, `controller.yaml`, `etcd.yaml`).
    pub fn manifest(&self, node: &str, file: &str) -> String {
        self.node_file(node, &format!("pods/{file}"))
    }

    /// What `rpm -q` reports on the node (`3.11.248`), empty when nothing is installed.
    pub fn package_version(&self, node: &str) -> String {
        self.node_file(node, "package_version")
    }

    /// How many times `yum install` upgraded docker or cri-o on the node.
    pub fn runtime_upgrades(&self, node: &str) -> u32 {
        self.node_file(node, "runtime_upgrades").trim().parse().unwrap_or(0)
    }

    /// `excluded` or `unexcluded`: the state of one of the node's excluders (`atomic-openshift-excluder`, ...).
    pub fn excluder(&self, node: &str, name: &str) -> String {
        self.node_file(node, &format!("excluder.{name}"))
    }

    /// Runs one of the fake's tools (`kubectl`, `oc`, `kubeadm`, `fake-node`, or `fake-cluster` verbs such as `set`)
    /// against this state, the way a playbook's shell would.
    pub fn run(&self, tool: &str, args: &[&str]) -> Output {
        self.run_with_stdin(tool, args, b"")
    }

    fn run_with_stdin(&self, tool: &str, args: &[&str], stdin: &[u8]) -> Output {
        use std::io::Write;
        let mut command = self.command(tool, args);
        command.stdin(std::process::Stdio::piped());
        command.stdout(std::process::Stdio::piped()).stderr(std::process::Stdio::piped());
        let mut child = command.spawn().expect("run the fake cluster script");
        if let Some(mut input) = child.stdin.take() {
            input.write_all(stdin).expect("write stdin");
        }
        child.wait_with_output().expect("wait for the fake cluster script")
    }

    /// The command for a tool, not yet started (for tests that need to kill it).
    pub fn command(&self, tool: &str, args: &[&str]) -> Command {
        let (program, verb) = match tool {
            "kubectl" | "oc" | "kubeadm" | "fake-node" | "yum" | "rpm" | "excluder" | "master-restart" => {
                (Self::script_dir().join(tool), None)
            }
            verb => (Self::script_dir().join("fake-cluster"), Some(verb)),
        };
        let mut command = Command::new(program);
        command.args(verb).arg("--state").arg(&self.state).args(args);
        command.env_remove("FAKE_CLUSTER_DIR").env_remove("FAKE_NODE");
        command
    }

    fn node_file(&self, node: &str, file: &str) -> String {
        std::fs::read_to_string(self.state.join("nodes").join(node).join(file)).unwrap_or_default().trim().to_string()
    }

    /// Writes a cue file (README.md: `drain_hang`, `drain_fail`, `upgrade_fail`, `ready_fail`, `report_version`).
    pub fn set_cue(&self, node: &str, cue: &str, value: &str) {
        let path = self.state.join("nodes").join(node).join(cue);
        std::fs::write(&path, value).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
    }

    pub fn version(&self, node: &str) -> String {
        self.node_file(node, "version")
    }

    pub fn is_ready(&self, node: &str) -> bool {
        self.node_file(node, "ready") == "true"
    }

    pub fn is_cordoned(&self, node: &str) -> bool {
        self.node_file(node, "unschedulable") == "true"
    }

    /// How many times the node's kubelet was upgraded.
    pub fn upgrades(&self, node: &str) -> u32 {
        self.node_file(node, "upgrades").parse().unwrap_or(0)
    }

    /// The node's annotations (`annotate node`), by key.
    pub fn annotations(&self, node: &str) -> std::collections::BTreeMap<String, String> {
        let dir = self.state.join("nodes").join(node).join("annotations");
        let Ok(entries) = std::fs::read_dir(dir) else { return Default::default() };
        entries
            .filter_map(|e| e.ok())
            .map(|e| {
                let key = e.file_name().to_string_lossy().replace('%', "/");
                (key, std::fs::read_to_string(e.path()).unwrap_or_default())
            })
            .collect()
    }

    /// Every call so far, in order.
    pub fn calls(&self) -> Vec<Call> {
        let log = std::fs::read_to_string(self.state.join("calls.log")).unwrap_or_default();
        log.lines()
            .filter_map(|line| {
                let mut fields = line.splitn(4, '\t');
                let _timestamp = fields.next()?;
                Some(Call {
                    node: fields.next()?.to_string(),
                    action: fields.next()?.to_string(),
                    argv: fields.next()?.to_string(),
                })
            })
            .collect()
    }

    /// The calls that acted on one node, as `action` names in order (e.g. `["cordon", "drain", "upgrade"]`).
    pub fn actions_on(&self, node: &str) -> Vec<String> {
        self.calls().into_iter().filter(|c| c.node == node).map(|c| c.action).collect()
    }
}
