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

const KUBELET: &str = "v1.11.0+d4cacc0";
const OLD: &str = "3.11.200";
const TARGET: &str = "3.11.248";
const EXCLUDERS: [&str; 2] = ["atomic-openshift-excluder", "atomic-openshift-docker-excluder"];

/// An OpenShift 3.11 cluster in openshift-ansible's layout: master m1 (also etcd) and nodes n1, n2, each an inventory
/// host on one sshd with its own root (where its certificates live).
struct OpenShiftCluster {
    dir: tempfile::TempDir,
    sshd: TestSshd,
    fake: FakeCluster,
    etcd: Option<TestEtcd>,
    /// Extra `[OSEv3:vars]` lines.
    vars: Vec<String>,
}

impl OpenShiftCluster {
    /// `installed`: what each of m1, n1, n2 has installed (`rpm -q`).
    fn new(installed: [&str; 3]) -> OpenShiftCluster {
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

    fn with_etcd(mut self) -> OpenShiftCluster {
        self.etcd = Some(TestEtcd::start());
        self
    }

    fn var(mut self, line: &str) -> OpenShiftCluster {
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
        vars.push_str(&format!("upgrade_etcdctl: \"{}\"\n", etcdctl_binary().display()));
        if let Some(etcd) = &self.etcd {
            vars.push_str(&format!("upgrade_etcd_endpoints: \"{}\"\n", etcd.endpoints()));
        }
        vars.push_str("upgrade_etcd_cacert: \"\"\nupgrade_etcd_cert: \"\"\nupgrade_etcd_key: \"\"\n");
        vars.push_str("upgrade_etcd_backup_dir: \"{{ host_root }}/etcd-backups\"\n");
        std::fs::create_dir_all(self.dir.path().join("group_vars")).expect("group_vars");
        std::fs::write(self.dir.path().join("group_vars/OSEv3.yml"), vars).expect("group_vars/OSEv3.yml");
        self.dir.path().join("hosts")
    }

    fn upgrade(&self, args: &[&str]) -> Outcome {
        Scenario::on_cluster(self.dir.path(), &self.inventory()).args(args).run()
    }

    /// The actions the fake saw on one node, in order.
    fn actions_on(&self, node: &str) -> Vec<String> {
        self.fake.actions_on(node)
    }
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
    // The 3.11 sequence, as the docs and openshift-ansible have it.
    let on_m1: Vec<String> = cluster.actions_on("m1").into_iter().filter(|a| a != "get-node").collect();
    assert_eq!(
        on_m1,
        [
            "cordon",
            "drain",
            "unexclude",
            "unexclude",
            "yum",
            "exclude",
            "exclude",
            "master-restart-api",
            "master-restart-controllers",
            "daemon-reload",
            "restart",
            "uncordon"
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
    // preflight and verify.
    assert!(cluster.actions_on("n1").contains(&"get-node".to_string()), "{:?}", cluster.actions_on("n1"));
    assert_eq!(api_reads.iter().filter(|a| *a == "get-nodes").count(), 2, "{api_reads:?}");
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

    assert_eq!(cluster.actions_on("n1"), ["cordon", "drain", "unexclude", "unexclude", "yum", "exclude", "exclude"]);
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
fn docker_upgrade_upgrades_the_container_runtime_inside_the_drained_window_and_only_then() {
    let cluster = OpenShiftCluster::new([TARGET, OLD, OLD]).var("docker_upgrade=true");
    // The default also restarts docker with systemctl, which the test hosts do not have.
    let yum = cluster.fake.tool("yum");
    let cluster = cluster
        .var(&format!("upgrade_container_runtime_command=\"{yum} --node {{{{ node_name }}}} install -y docker\""));
    cluster.upgrade(&["--phase", "nodes"]).expect_code(0);
    let calls: Vec<_> = cluster.fake.calls().into_iter().filter(|c| c.node == "n1").collect();
    let at = |what: &dyn Fn(&crate::support::fake_cluster::Call) -> bool| calls.iter().position(what);
    let drained = at(&|c| c.action == "drain").expect("n1 drained");
    let runtime = at(&|c| c.action == "yum" && c.argv.contains("install -y docker")).expect("docker upgraded");
    let uncordoned = at(&|c| c.action == "uncordon").expect("n1 uncordoned");
    assert!(drained < runtime && runtime < uncordoned, "inside the drained window: {calls:?}");

    let without = OpenShiftCluster::new([TARGET, OLD, OLD]);
    without.upgrade(&["--phase", "nodes"]).expect_code(0);
    assert!(
        without.fake.calls().iter().all(|c| !c.argv.contains("docker &&") && !c.argv.ends_with("-y docker")),
        "no runtime upgrade unless asked"
    );
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
