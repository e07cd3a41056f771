//! The openshift flavour end to end, over real sshd hosts on loopback, with the fake cluster standing in for `oc`
//! and for the hosts' yum, rpm, excluders and master-restart (testing/fake-cluster), real openssl reading real
//! certificates, and a real etcd for the backup. Every 3.11.z kubelet reports the same version, so what a host has
//! installed decides.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::etcd::{TestEtcd, etcdctl_binary};
use crate::support::fake_cluster::FakeCluster;
use crate::support::sshd::TestSshd;
use crate::support::{Outcome, Scenario};

pub(crate) const KUBELET: &str = "v1.11.0+d4cacc0";
pub(crate) const OLD: &str = "3.11.200";
pub(crate) const TARGET: &str = "3.11.248";
const EXCLUDERS: [&str; 2] = ["atomic-openshift-excluder", "atomic-openshift-docker-excluder"];

/// An OpenShift 3.11 cluster in openshift-ansible's layout: master m1 (also etcd) and nodes n1, n2, each an inventory
/// host on one sshd with its own root (where its certificates live).
pub(crate) struct OpenShiftCluster {
    dir: tempfile::TempDir,
    pub(crate) sshd: TestSshd,
    pub(crate) fake: FakeCluster,
    etcd: Option<TestEtcd>,
    /// Extra `[OSEv3:vars]` lines.
    vars: Vec<String>,
}

impl OpenShiftCluster {
    /// `installed`: what each of m1, n1, n2 has installed (`rpm -q`).
    pub(crate) fn new(installed: [&str; 3]) -> OpenShiftCluster {
        let mut spec = String::new();
        for ((name, role), version) in [("m1", "master"), ("n1", "compute"), ("n2", "compute")].iter().zip(installed) {
            spec.push_str(&format!("{name} {KUBELET} node-role.kubernetes.io/{role}=true rpm={version}\n"));
        }
        let cluster = OpenShiftCluster {
            dir: tempfile::Builder::new().prefix("upgrade-openshift-").tempdir().expect("scratch dir"),
            sshd: TestSshd::start(),
            fake: FakeCluster::init(&spec),
            etcd: None,
            vars: Vec::new(),
        };
        for host in ["m1", "n1", "n2"] {
            cluster.certificates(host, 3650);
        }
        cluster
    }

    pub(crate) fn with_etcd(mut self) -> OpenShiftCluster {
        self.etcd = Some(TestEtcd::start());
        self
    }

    pub(crate) fn var(mut self, line: &str) -> OpenShiftCluster {
        self.vars.push(line.to_string());
        self
    }

    /// Real certificates, valid for `days`, where OpenShift 3.11 keeps them under the host's root: the master's on
    /// m1, the node's everywhere, etcd's on m1.
    fn certificates(&self, host: &str, days: u32) {
        let files: &[&str] = if host == "m1" {
            &[
                "etc/origin/master/ca.crt",
                "etc/origin/master/master.server.crt",
                "etc/origin/node/client-ca.crt",
                "etc/etcd/peer.crt",
            ]
        } else {
            &["etc/origin/node/client-ca.crt"]
        };
        for file in files {
            self.certificate(host, file, days);
        }
    }

    fn certificate(&self, host: &str, file: &str, days: u32) -> PathBuf {
        let path = self.sshd.host_root(host).join(file);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("certificate dir");
        let key = path.with_extension("key");
        let out = Command::new("openssl")
            .args(["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-subj"])
            .arg(format!("/CN={host}"))
            .arg("-days")
            .arg(days.to_string())
            .arg("-keyout")
            .arg(&key)
            .arg("-out")
            .arg(&path)
            .output()
            .expect("run openssl");
        assert!(out.status.success(), "openssl req: {}", String::from_utf8_lossy(&out.stderr));
        path
    }

    fn inventory(&self) -> PathBuf {
        let host =
            |name: &str, group: &str| format!("{} openshift_node_group_name={group}\n", self.sshd.ini_host(name));
        let mut text = String::from("[OSEv3:children]\nmasters\nnodes\netcd\n\n[OSEv3:vars]\n");
        text.push_str("openshift_deployment_type=openshift-enterprise\nopenshift_release=\"3.11\"\n");
        text.push_str(&format!("openshift_pkg_version=-{TARGET}\n"));
        for line in &self.vars {
            text.push_str(&format!("{line}\n"));
        }
        text.push_str("\n[masters]\n");
        text.push_str(&host("m1", "node-config-master"));
        text.push_str("\n[etcd]\nm1\n\n[nodes]\nm1\n");
        text.push_str(&host("n1", "node-config-compute"));
        text.push_str(&host("n2", "node-config-compute"));
        std::fs::write(self.dir.path().join("hosts"), text).expect("inventory");

        // The stand-ins, as an operator's group_vars would carry site settings.
        let mut vars = String::new();
        for (k, v) in self.fake.openshift_command_vars() {
            vars.push_str(&format!("{k}: \"{v}\"\n"));
        }
        vars.push_str("upgrade_node_ready_delay: 1\nupgrade_node_ready_timeout: 20\nupgrade_api_health_timeout: 20\n");
        vars.push_str("upgrade_certificate_expiry_master_files: [\"{{ host_root }}/etc/origin/master/ca.crt\", \"{{ host_root }}/etc/origin/master/master.server.crt\"]\n");
        vars.push_str("upgrade_certificate_expiry_node_files: [\"{{ host_root }}/etc/origin/node/client-ca.crt\"]\n");
        vars.push_str("upgrade_certificate_expiry_etcd_files: [\"{{ host_root }}/etc/etcd/peer.crt\", \"{{ host_root }}/etc/etcd/server.crt\"]\n");
        // The real etcdctl, held to what OpenShift 3.11's etcd 3.2 accepts (testing/tool-flags/etcdctl-3.2).
        vars.push_str(&format!("upgrade_etcdctl: \"{}\"\n", speaking_etcd_3_2()));
        if let Some(etcd) = &self.etcd {
            vars.push_str(&format!("upgrade_etcd_endpoints: \"{}\"\n", etcd.endpoints()));
        }
        vars.push_str("upgrade_etcd_cacert: \"\"\nupgrade_etcd_cert: \"\"\nupgrade_etcd_key: \"\"\n");
        vars.push_str("upgrade_etcd_backup_dir: \"{{ host_root }}/etcd-backups\"\n");
        std::fs::create_dir_all(self.dir.path().join("group_vars")).expect("group_vars");
        std::fs::write(self.dir.path().join("group_vars/OSEv3.yml"), vars).expect("group_vars/OSEv3.yml");
        self.dir.path().join("hosts")
    }

    pub(crate) fn upgrade(&self, args: &[&str]) -> Outcome {
        Scenario::on_cluster(self.dir.path(), &self.inventory()).args(args).run()
    }

    /// The actions the fake saw on one node, in order.
    pub(crate) fn actions_on(&self, node: &str) -> Vec<String> {
        self.fake.actions_on(node)
    }
}

/// Debian's etcdctl (3.4) behind testing/tool-flags/speak, which refuses first what etcd 3.2's etcdctl refuses.
pub(crate) fn speaking_etcd_3_2() -> String {
    let speak = Path::new(env!("CARGO_MANIFEST_DIR")).join("testing/tool-flags/speak");
    format!("{} etcdctl-3.2 {}", speak.display(), etcdctl_binary().display())
}

fn root_file(cluster: &OpenShiftCluster, host: &str, file: &str) -> String {
    Path::new(&cluster.sshd.host_root(host)).join(file).display().to_string()
}

#[test]
fn hosts_that_have_the_target_installed_are_skipped_though_every_kubelet_reports_the_same_version() {
    let cluster = OpenShiftCluster::new([OLD, OLD, TARGET]).with_etcd();
    let first = cluster
        .upgrade(&[])
        .expect_code(0)
        .output_has("[n2] skipped: already at v3.11.248: installed on the host")
        .output_has("result: success");

    for host in ["m1", "n1"] {
        assert_eq!(cluster.fake.package_version(host), TARGET, "{host} has the target installed");
        assert_eq!(cluster.fake.upgrades(host), 1, "{host} was upgraded exactly once");
        assert!(!cluster.fake.is_cordoned(host), "{host} is schedulable again");
        for excluder in EXCLUDERS {
            assert_eq!(cluster.fake.excluder(host, excluder), "excluded", "{host}: {excluder} excludes again");
        }
    }
    assert_eq!(cluster.fake.upgrades("n2"), 0, "n2 was not touched");
    assert!(cluster.actions_on("n2").is_empty(), "no cordon, drain or yum on n2: {:?}", cluster.actions_on("n2"));
    // The 3.11 sequence, as the docs and openshift-ansible have it, between the run's marks on the Node (`oc annotate`,
    // a flag set oc 3.11 has).
    let on_m1: Vec<String> = cluster.actions_on("m1").into_iter().filter(|a| a != "get-node").collect();
    assert_eq!(
        on_m1,
        [
            "annotate",
            "cordon",
            "drain",
            "unexclude",
            "unexclude",
            "yum",
            "yum", // docker, as openshift-ansible unless docker_upgrade is false
            "exclude",
            "exclude",
            "pull",
            "pull",
            "delete-sdn-pods",
            "master-restart-api",
            "master-restart-controllers",
            "daemon-reload",
            "restart",
            "healthz", // the health gate asks m1's own API server (--server), not only the first master's kubeconfig
            "uncordon",
            "annotate"
        ]
    );
    // Merged with the kubeadm steps: none of kubeadm's preflight checks ran, and the control-plane health gate asked
    // OpenShift's /healthz/ready (the 3.11 fake answers NotFound to /readyz, as Kubernetes 1.11 does).
    assert!(!first.output().contains("package manager"), "no package manager detection on OpenShift hosts");
    assert!(!first.output().contains("kubeadm"), "no kubeadm upgrade plan on OpenShift");
    assert!(first.output().contains("control-plane-health ok"), "the health gate ran after m1");
    let api_reads = cluster.actions_on("-");
    assert!(!api_reads.iter().any(|a| a == "readyz"), "{api_reads:?}");
    assert!(api_reads.iter().filter(|a| *a == "healthz").count() >= 2, "restart wait and health gate: {api_reads:?}");
    // Readiness reads only the node in question, as in the kubeadm steps: the whole node list is read only by
    // preflight, verify and the validation between batches (one list with each of its reads of the workloads).
    assert!(cluster.actions_on("n1").contains(&"get-node".to_string()), "{:?}", cluster.actions_on("n1"));
    let validations = api_reads.iter().filter(|a| *a == "get-workloads").count();
    assert!(validations >= 1, "the baseline before the first cordon: {api_reads:?}");
    assert_eq!(api_reads.iter().filter(|a| *a == "get-nodes").count(), 2 + validations, "{api_reads:?}");
    let drain = cluster.fake.calls().into_iter().find(|c| c.action == "drain" && c.node == "n1").expect("n1 drained");
    assert!(drain.argv.starts_with("oc adm drain n1 --delete-local-data --ignore-daemonsets --force"), "{drain:?}");

    // A second run finds every host at the target by what it has installed.
    cluster
        .upgrade(&[])
        .expect_code(0)
        .output_has("[m1] skipped: upgraded by an earlier run (has v3.11.248 installed)")
        .output_has("[n1] skipped: upgraded by an earlier run (has v3.11.248 installed)")
        .output_has("nothing to upgrade");
    assert_eq!(cluster.fake.upgrades("n1"), 1, "not upgraded again");
}

#[test]
fn a_host_that_fails_after_the_unexclude_is_excluded_again_and_the_run_stops_on_the_threshold() {
    let cluster = OpenShiftCluster::new([TARGET, OLD, OLD])
        .var("openshift_upgrade_nodes_serial=1")
        .var("openshift_upgrade_nodes_max_fail_percentage=0");
    cluster.fake.set_cue("n1", "yum_fail", "");
    cluster
        .upgrade(&["--phase", "nodes,verify"])
        .expect_code(1)
        .output_has("[n1] FAILED at upgrade")
        .output_has("transaction check error")
        .output_has("not started");

    assert_eq!(
        cluster.actions_on("n1"),
        ["annotate", "cordon", "drain", "unexclude", "unexclude", "yum", "exclude", "exclude"]
    );
    for excluder in EXCLUDERS {
        assert_eq!(
            cluster.fake.excluder("n1", excluder),
            "excluded",
            "n1: {excluder} excludes again after the failure"
        );
    }
    assert_eq!(cluster.fake.package_version("n1"), OLD, "nothing was installed on n1");
    assert!(
        cluster.actions_on("n2").is_empty(),
        "the threshold stopped the run before n2: {:?}",
        cluster.actions_on("n2")
    );
}

#[test]
fn a_certificate_expiring_within_the_warning_window_stops_preflight_naming_host_file_and_date() {
    let cluster = OpenShiftCluster::new([TARGET, OLD, OLD]);
    cluster.certificate("m1", "etc/origin/master/master.server.crt", 30);
    let file = root_file(&cluster, "m1", "etc/origin/master/master.server.crt");
    let run =
        cluster.upgrade(&["--phase", "nodes"]).expect_code(1).output_has("1 certificate(s) expire within 365 days");
    let text = run.output();
    let line = format!("m1: {file} expires ");
    let Some(at) = text.find(&line) else { run.fail(&format!("the report lacks `{line}`")) };
    let date = &text[at + line.len()..].chars().take(23).collect::<String>();
    assert!(date.ends_with(" UTC") && date.starts_with("20"), "an expiry date follows: {date:?}\n{text}");
    assert!(text.contains("(in 29 days)") || text.contains("(in 30 days)"), "{text}");
    assert!(cluster.fake.calls().iter().all(|c| c.action != "cordon"), "nothing was touched");

    // Within openshift-ansible's year but beyond a shorter window: the operator's setting decides.
    cluster.upgrade(&["--phase", "nodes", "-e", "openshift_certificate_expiry_warning_days=20"]).expect_code(0);
    assert_eq!(cluster.fake.package_version("n1"), TARGET);
}

#[test]
fn an_expiring_certificate_only_warns_when_fail_on_warn_is_false() {
    let cluster = OpenShiftCluster::new([TARGET, OLD, OLD]).var("openshift_certificate_expiry_fail_on_warn=False");
    cluster.certificate("n2", "etc/origin/node/client-ca.crt", 10);
    cluster
        .upgrade(&["--phase", "nodes"])
        .expect_code(0)
        .output_has("upgrade_certificate_expiry_fail_on_warn is false: going on");
    assert_eq!(cluster.fake.package_version("n2"), TARGET);
}

#[test]
fn the_container_runtime_is_upgraded_inside_the_drained_window_unless_docker_upgrade_is_false() {
    // openshift-ansible upgrades docker unless docker_upgrade is False (D10).
    let cluster = OpenShiftCluster::new([TARGET, OLD, OLD]);
    cluster.upgrade(&["--phase", "nodes"]).expect_code(0);
    let calls: Vec<_> = cluster.fake.calls().into_iter().filter(|c| c.node == "n1").collect();
    let at = |what: &dyn Fn(&crate::support::fake_cluster::Call) -> bool| calls.iter().position(what);
    let drained = at(&|c| c.action == "drain").expect("n1 drained");
    let runtime = at(&|c| c.action == "yum" && c.argv.ends_with("install -y docker")).expect("docker upgraded");
    let uncordoned = at(&|c| c.action == "uncordon").expect("n1 uncordoned");
    assert!(drained < runtime && runtime < uncordoned, "inside the drained window: {calls:?}");
    assert_eq!(cluster.fake.runtime_upgrades("n2"), 1, "every upgraded host");

    let without = OpenShiftCluster::new([TARGET, OLD, OLD]).var("docker_upgrade=false");
    without.upgrade(&["--phase", "nodes"]).expect_code(0);
    assert!(
        without.fake.calls().iter().all(|c| !c.argv.ends_with("-y docker")),
        "no runtime upgrade with docker_upgrade=false"
    );
    assert_eq!(without.fake.runtime_upgrades("n1"), 0);
}

#[test]
fn approving_node_csrs_waits_for_ready_only_as_every_3_11_kubelet_reports_one_version() {
    // Every 3.11.z kubelet reports v1.11.0+d4cacc0, never the target: the approving wait must not ask for it, as
    // the plain wait does not (D6).
    let cluster = OpenShiftCluster::new([TARGET, OLD, TARGET]).var("upgrade_approve_node_csrs=true");
    cluster.fake.set_cue("n1", "csr_pending", "");
    cluster
        .upgrade(&["--phase", "nodes", "-e", "upgrade_node_ready_timeout=5"])
        .expect_code(0)
        .output_has("approved the pending CSRs of n1: csr-n1");
    assert_eq!(cluster.fake.package_version("n1"), TARGET);
    assert!(cluster.fake.is_ready("n1") && !cluster.fake.is_cordoned("n1"), "n1 is back in service");
}

#[test]
fn a_live_plan_reads_what_each_host_has_installed_as_preflight_does() {
    // Every node reports kubelet v1.11.0+d4cacc0: without the hosts' installed versions the live plan saw a skipped
    // minor (exit 2) or, with --allow-skip-minor, every host to upgrade (D8).
    let cluster = OpenShiftCluster::new([TARGET, OLD, TARGET]);
    cluster
        .upgrade(&["--plan", "--live"])
        .expect_code(0)
        .stdout_has("n1 [n1] 3.11.200: upgrade in nodes batch 1")
        .stdout_has("n2 [n2] 3.11.248: skip: already at v3.11.248: installed on the host")
        .stdout_has("result: nothing blocks");
    assert!(cluster.fake.calls().iter().all(|c| c.action != "yum" && c.action != "cordon"), "only read");
}

#[test]
fn an_update_graph_of_openshift_releases_is_walked_from_what_the_masters_have_installed() {
    // A graph names OpenShift releases; every 3.11.z kubelet reports v1.11.0+d4cacc0, which no graph holds (D9).
    let cluster = OpenShiftCluster::new([OLD, OLD, TARGET]).with_etcd().var("upgrade_update_graph=graph.json");
    std::fs::write(
        cluster.dir.path().join("graph.json"),
        r#"{"nodes": [{"version": "3.11.200"}, {"version": "3.11.248"}], "edges": [[0, 1]]}"#,
    )
    .expect("graph");
    let inventory = cluster.inventory();
    crate::support::Scenario::in_dir(cluster.dir.path())
        .args(["versions"])
        .inventory(inventory)
        .env("NO_COLOR", "1")
        .run()
        .expect_code(0)
        .stdout_has("Running version: v3.11.200 (the masters, as installed)")
        .stdout_has("v3.11.248");
    cluster.upgrade(&[]).expect_code(0).output_has("result: success");
    assert_eq!(cluster.fake.package_version("m1"), TARGET);
    assert_eq!(cluster.fake.package_version("n1"), TARGET);
}

#[test]
fn the_pre_cordon_hook_runs_while_the_node_takes_work_and_openshift_node_upgrade_pre_hook_after_the_drain() {
    // upgrade_node_pre_cordon_hook runs before the cordon; openshift_node_upgrade_pre_hook keeps openshift-ansible's
    // place (release-3.11 upgrade_nodes.yml: after "Mark node unschedulable" and the drain).
    let cluster = OpenShiftCluster::new([TARGET, OLD, TARGET])
        .var("upgrade_node_pre_cordon_hook=hooks/pre_cordon.yml")
        .var("openshift_node_upgrade_pre_hook=hooks/pre.yml");
    let log = cluster.dir.path().join("hooks.log");
    let state = cluster.fake.state_dir().display().to_string();
    std::fs::create_dir_all(cluster.dir.path().join("hooks")).expect("hooks dir");
    for (file, label) in [("pre_cordon", "pre-cordon"), ("pre", "pre")] {
        let hook = format!(
            "- shell: echo \"{label} {{{{ node_name }}}} unschedulable=$(cat {state}/nodes/{{{{ node_name }}}}/unschedulable)\" >> {}\n",
            log.display()
        );
        std::fs::write(cluster.dir.path().join(format!("hooks/{file}.yml")), hook).expect("hook");
    }
    let run = cluster.upgrade(&["--phase", "nodes", "--output", "json"]).expect_code(0);
    assert!(run.stdout.contains(r#""step":"pre-cordon-hook""#), "the step is named in the events: {}", run.stdout);
    let logged = std::fs::read_to_string(&log).expect("the hooks ran");
    assert_eq!(logged, "pre-cordon n1 unschedulable=false\npre n1 unschedulable=true\n");
}

#[test]
fn the_fix_for_a_node_left_cordoned_is_oc_adm_uncordon_when_only_upgrade_kubectl_is_set() {
    // The inventory sets upgrade_kubectl only (as the demo does): the steps use `<upgrade_kubectl> adm`, and so must
    // the summary's fix command (D15).
    let cluster = OpenShiftCluster::new([TARGET, OLD, TARGET]);
    cluster.fake.run("oc", &["adm", "cordon", "n1"]);
    let oc = cluster.fake.tool("oc");
    cluster
        .upgrade(&["--phase", "nodes,verify"])
        .expect_code(0)
        .output_has(&format!("to make it schedulable again run `{oc} adm uncordon n1`"));
}

/// A real PEM certificate request for `subject`, base64-encoded as `spec.request` carries it.
fn csr_request(dir: &Path, subject: &str) -> String {
    let out = Command::new("openssl")
        .args(["req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-subj", subject])
        .arg("-keyout")
        .arg(dir.join("csr.key"))
        .output()
        .expect("run openssl");
    assert!(out.status.success(), "openssl req: {}", String::from_utf8_lossy(&out.stderr));
    let mut base64 = Command::new("base64")
        .arg("-w0")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("run base64");
    use std::io::Write;
    base64.stdin.take().expect("stdin").write_all(&out.stdout).expect("write the request");
    String::from_utf8(base64.wait_with_output().expect("base64").stdout).expect("ascii")
}

#[test]
fn a_node_bootstrapper_csr_is_approved_for_the_node_its_subject_names() {
    // OpenShift 3.11's client CSRs come from the node-bootstrapper service account; only the request's subject
    // (CN=system:node:NAME) says which node (D14). openshift-ansible's oc_csr_approve reads it the same way.
    let cluster = OpenShiftCluster::new([TARGET, OLD, TARGET]).var("upgrade_approve_node_csrs=true");
    cluster.fake.set_cue("n1", "csr_pending", "node-bootstrapper");
    let request = csr_request(cluster.dir.path(), "/O=system:nodes/CN=system:node:n1");
    cluster.fake.set_cue("n1", "csr_request", &request);
    cluster
        .upgrade(&["--phase", "nodes", "-e", "upgrade_node_ready_timeout=5"])
        .expect_code(0)
        .output_has("approved the pending CSRs of n1: csr-n1");
    assert!(cluster.fake.is_ready("n1"));

    // A request naming another node is not this node's: it is neither approved nor reported for n1.
    let other = OpenShiftCluster::new([TARGET, OLD, TARGET]);
    other.fake.set_cue("n1", "csr_pending", "node-bootstrapper");
    other.fake.set_cue("n1", "csr_request", &csr_request(other.dir.path(), "/O=system:nodes/CN=system:node:n9"));
    let run = other.upgrade(&["--phase", "nodes", "-e", "upgrade_node_ready_timeout=3"]).expect_code(1);
    assert!(!run.output().contains("pending certificate signing requests: csr-n1"), "{}", run.output());
}

#[test]
fn a_configuration_restore_restarts_the_master_api_controllers_and_node_service_and_keeps_a_directory_aside() {
    let cluster = OpenShiftCluster::new([OLD, OLD, TARGET]).with_etcd();
    let put = |host: &str, file: &str, text: &str| {
        let path = cluster.sshd.host_root(host).join(file);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    };
    put("m1", "etc/origin/master/master-config.yaml", "backed up\n");
    put("m1", "etc/origin/node/pods/apiserver.yaml", "backed up\n");
    put("n1", "etc/origin/node/node-config.yaml", "backed up\n");
    // The backup's paths under each host's root (the defaults name /etc/origin, which is this machine's own).
    let paths = |list: &[&str]| {
        let quoted: Vec<String> = list.iter().map(|p| format!("\"{{{{ host_root }}}}/{p}\"")).collect();
        format!("upgrade_config_backup_default_paths: [{}]\n", quoted.join(", "))
    };
    let host_vars = cluster.dir.path().join("host_vars");
    std::fs::create_dir_all(&host_vars).unwrap();
    std::fs::write(host_vars.join("m1.yml"), paths(&["etc/origin/master/master-config.yaml", "etc/origin/node/pods"]))
        .unwrap();
    std::fs::write(host_vars.join("n1.yml"), paths(&["etc/origin/node/node-config.yaml"])).unwrap();
    cluster.upgrade(&[]).expect_code(0);

    // Things go wrong after the backup.
    put("m1", "etc/origin/master/master-config.yaml", "broken\n");
    put("m1", "etc/origin/node/pods/apiserver.yaml", "broken\n");
    put("n1", "etc/origin/node/node-config.yaml", "broken\n");
    let calls_before = cluster.fake.calls().len();

    let restore = Scenario::in_dir(cluster.dir.path()).arg("restore").inventory(cluster.inventory());
    restore
        .args(["--limit", "OSEv3", "--yes"])
        .run()
        .expect_code(0)
        .stdout_has("m1: ")
        .stdout_has(" api\n")
        .stdout_has(" controllers\n");

    assert_eq!(
        std::fs::read_to_string(root_file(&cluster, "m1", "etc/origin/master/master-config.yaml")).unwrap(),
        "backed up\n"
    );
    assert_eq!(
        std::fs::read_to_string(root_file(&cluster, "m1", "etc/origin/node/pods/apiserver.yaml")).unwrap(),
        "backed up\n"
    );
    assert_eq!(
        std::fs::read_to_string(root_file(&cluster, "n1", "etc/origin/node/node-config.yaml")).unwrap(),
        "backed up\n"
    );
    // The directory's current copy is kept beside it, as the plan says.
    let node_dir = cluster.sshd.host_root("m1").join("etc/origin/node");
    let kept: Vec<PathBuf> = std::fs::read_dir(&node_dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with("pods.before-restore-"))
        .collect();
    assert_eq!(kept.len(), 1, "{kept:?}");
    assert_eq!(std::fs::read_to_string(kept[0].join("apiserver.yaml")).unwrap(), "broken\n");

    // The 3.11 restarts after a configuration restore (seed §5.5): the master's API and controllers, then its node
    // service; a node's node service only.
    let after = |node: &str| -> Vec<String> {
        cluster.fake.calls()[calls_before..].iter().filter(|c| c.node == node).map(|c| c.action.clone()).collect()
    };
    assert_eq!(after("m1"), ["master-restart-api", "master-restart-controllers", "restart"]);
    assert_eq!(after("n1"), ["restart"]);
    assert!(after("n2").is_empty(), "n2 has nothing in the backup: {:?}", after("n2"));
}
