//! The phased upgrade end to end: real sshd hosts on loopback, a real etcd whose snapshot is saved and verified,
//! and the scripted fake cluster API for kubectl/kubeadm.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::etcd::TestEtcd;
use crate::support::fake_cluster::FakeCluster;
use crate::support::sshd::TestSshd;
use crate::support::{Outcome, Scenario, cluster_inventory_with_etcd, cluster_vars};

pub(crate) const TARGET: &str = "v1.29.1";
pub(crate) const MASTERS: [&str; 3] = ["m1", "m2", "m3"];

/// A cluster of three masters and some nodes, every host an inventory name on a real sshd, with its own root.
pub(crate) struct TestCluster {
    dir: tempfile::TempDir,
    pub(crate) sshd: TestSshd,
    /// Hosts that live on a second sshd, so that one can be killed alone.
    other_sshd: Option<TestSshd>,
    pub(crate) etcd: TestEtcd,
    pub(crate) fake: FakeCluster,
    pub(crate) nodes: Vec<String>,
    /// Extra `all:vars` lines (`key: value`, YAML).
    all_vars: Vec<String>,
    /// Hosts that use `other_sshd`.
    on_other: Vec<String>,
    /// The etcd group's members; empty: the first master.
    etcd_members: Vec<String>,
}

impl TestCluster {
    /// Three masters and `nodes` (name, labels) at v1.28.5, the backups taken by the stand-in etcdctl.
    pub(crate) fn new(nodes: &[(&str, &str)]) -> TestCluster {
        TestCluster::with_etcd(nodes, TestEtcd::stand_in())
    }

    /// `new` over a real etcd: for the tests of the snapshot itself and of a restore.
    pub(crate) fn with_real_etcd(nodes: &[(&str, &str)]) -> TestCluster {
        TestCluster::with_etcd(nodes, TestEtcd::start())
    }

    fn with_etcd(nodes: &[(&str, &str)], etcd: TestEtcd) -> TestCluster {
        let mut spec = String::new();
        for m in MASTERS {
            spec.push_str(&format!("{m} v1.28.5 node-role.kubernetes.io/control-plane=\n"));
        }
        for (n, labels) in nodes {
            spec.push_str(&format!("{n} v1.28.5 {labels}\n"));
        }
        TestCluster {
            dir: tempfile::Builder::new().prefix("upgrade-e2e-").tempdir().expect("scratch dir"),
            sshd: TestSshd::start(),
            other_sshd: None,
            etcd,
            fake: FakeCluster::init(&spec),
            nodes: nodes.iter().map(|(n, _)| n.to_string()).collect(),
            all_vars: Vec::new(),
            on_other: Vec::new(),
            etcd_members: Vec::new(),
        }
    }

    /// Makes `hosts` the inventory's etcd group (instead of the first master alone).
    pub(crate) fn etcd_members(mut self, hosts: &[&str]) -> TestCluster {
        self.etcd_members = hosts.iter().map(|h| h.to_string()).collect();
        self
    }

    pub(crate) fn var(mut self, line: &str) -> TestCluster {
        self.all_vars.push(line.to_string());
        self
    }

    /// Puts these hosts on a second sshd of their own.
    fn on_second_sshd(mut self, hosts: &[&str]) -> TestCluster {
        self.other_sshd = Some(TestSshd::start());
        self.on_other = hosts.iter().map(|h| h.to_string()).collect();
        self
    }

    pub(crate) fn path(&self, relative: &str) -> PathBuf {
        self.dir.path().join(relative)
    }

    pub(crate) fn write(&self, relative: &str, text: &str) {
        let path = self.path(relative);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("dir");
        std::fs::write(path, text).expect("write");
    }

    fn host_entry(&self, name: &str) -> String {
        let sshd = if self.on_other.iter().any(|h| h == name) { self.other_sshd.as_ref() } else { None };
        sshd.unwrap_or(&self.sshd).yaml_host(name, 8)
    }

    pub(crate) fn inventory(&self) -> PathBuf {
        let mut vars = format!("    upgrade_target_version: {TARGET}\n");
        vars.push_str(&cluster_vars(&self.fake, &self.etcd));
        for line in &self.all_vars {
            vars.push_str(&format!("    {line}\n"));
        }
        let etcd: Vec<&str> = self.etcd_members.iter().map(String::as_str).collect();
        let groups = [("nodes", &self.nodes[..])];
        let text = cluster_inventory_with_etcd(&vars, &MASTERS, &etcd, &groups, |h| self.host_entry(h));
        let path = self.path("hosts.yml");
        std::fs::write(&path, text).expect("inventory");
        path
    }

    /// `upgrade --inventory hosts.yml ARGS` in the cluster's directory.
    pub(crate) fn scenario(&self, args: &[&str]) -> Scenario {
        Scenario::on_cluster(self.dir.path(), &self.inventory()).args(args)
    }

    pub(crate) fn command(&self, args: &[&str]) -> Command {
        self.scenario(args).command()
    }

    pub(crate) fn upgrade(&self, args: &[&str]) -> Outcome {
        self.scenario(args).run()
    }

    fn version(&self, node: &str) -> String {
        self.fake.version(node)
    }

    /// The nodes in the order the fake cluster saw them drained.
    fn drained(&self) -> Vec<String> {
        self.fake.calls().into_iter().filter(|c| c.action == "drain").map(|c| c.node).collect()
    }
}

pub(crate) fn nodes(n: usize, labels: &str) -> Vec<(String, String)> {
    (1..=n).map(|i| (format!("n{i}"), labels.to_string())).collect()
}

pub(crate) fn spec(list: &[(String, String)]) -> Vec<(&str, &str)> {
    list.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect()
}

fn snapshot_dirs(root: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(root).map(|d| d.flatten().map(|e| e.path()).collect()).unwrap_or_default()
}

#[test]
fn a_full_upgrade_backs_up_etcd_then_masters_one_at_a_time_then_nodes_in_batches() {
    let list = nodes(6, "region=a");
    let cluster = TestCluster::with_real_etcd(&spec(&list)).var("upgrade_nodes_serial: \"50%\"");
    let run = cluster.upgrade(&[]).expect_code(0);
    let run = run.stdout_has("etcd snapshot verified").stdout_has("result: success");

    for host in MASTERS.iter().copied().chain(cluster.nodes.iter().map(String::as_str)) {
        assert_eq!(cluster.version(host), TARGET, "{host} is at the target");
        assert_eq!(cluster.fake.upgrades(host), 1, "{host} was upgraded exactly once");
        assert!(!cluster.fake.is_cordoned(host), "{host} is schedulable again");
    }
    // The snapshot exists on m1 (the etcd group) and etcdctl itself says it is sound.
    let backups = snapshot_dirs(&cluster.sshd.host_root("m1").join("etcd-backups"));
    assert_eq!(backups.len(), 1, "one timestamped backup directory: {backups:?}");
    let snapshot = backups[0].join("snapshot.db");
    let status = cluster.etcd.etcdctl(&["snapshot", "status", &snapshot.display().to_string(), "-w", "json"]);
    assert!(status.status.success(), "the snapshot verifies: {}", String::from_utf8_lossy(&status.stderr));

    // Masters strictly one after the other, then the nodes of batch 1 (n1-n3) before any of batch 2.
    let drained = cluster.drained();
    assert_eq!(&drained[..3], &MASTERS, "masters first, in order: {drained:?}");
    let mut first_batch: Vec<String> = drained[3..6].to_vec();
    first_batch.sort();
    assert_eq!(first_batch, ["n1", "n2", "n3"], "batch 1 is n1-n3: {drained:?}");
    let calls = cluster.fake.calls();
    let last_uncordon_batch_1 =
        calls.iter().rposition(|c| c.action == "uncordon" && ["n1", "n2", "n3"].contains(&c.node.as_str()));
    let first_cordon_batch_2 =
        calls.iter().position(|c| c.action == "cordon" && ["n4", "n5", "n6"].contains(&c.node.as_str()));
    assert!(last_uncordon_batch_1 < first_cordon_batch_2, "batch 2 starts after batch 1 is done: {drained:?}");
    drop(run);
}

#[test]
fn a_label_selects_the_nodes_by_the_labels_the_cluster_reports() {
    let list = [("n1", "region=a"), ("n2", "region=b"), ("n3", "region=a")];
    let cluster = TestCluster::new(&list);
    cluster.upgrade(&["--label", "region=a"]).expect_code(0);
    assert_eq!(cluster.version("n1"), TARGET);
    assert_eq!(cluster.version("n3"), TARGET);
    assert_eq!(cluster.version("n2"), "v1.28.5", "n2 is not selected");
    assert_eq!(cluster.fake.upgrades("n2"), 0);

    cluster.upgrade(&["--phase", "nodes", "--label", "region=nowhere"]).expect_code(2).stderr_has("matches none");
}

#[test]
fn a_drain_that_outlasts_the_drain_timeout_fails_the_node_which_is_uncordoned_and_counted() {
    let list = nodes(2, "region=a");
    let cluster = TestCluster::new(&spec(&list))
        .var("upgrade_nodes_drain_timeout: 2")
        .var("upgrade_nodes_serial: 2")
        .var("upgrade_nodes_max_fail_percentage: 50");
    cluster.fake.set_cue("n1", "drain_hang", "");
    let run = cluster.upgrade(&[]).expect_code(1).stdout_has("[n1] FAILED at drain: drain timed out after 2s");
    assert_eq!(cluster.version("n1"), "v1.28.5", "n1 was not upgraded");
    assert!(!cluster.fake.is_cordoned("n1"), "n1 got its capacity back");
    assert_eq!(cluster.version("n2"), TARGET, "one failure of two is within 50%");
    let _ = run.stdout_has("failed: 1");
}

#[test]
fn a_drain_that_fails_saying_timed_out_before_the_drain_timeout_is_not_called_a_drain_timeout() {
    let list = nodes(1, "region=a");
    let cluster = TestCluster::new(&spec(&list)).var("upgrade_nodes_drain_timeout: 600");
    cluster.fake.set_cue("n1", "drain_fail", "error: timed out waiting for the condition");
    let _ = cluster
        .upgrade(&[])
        .expect_code(1)
        .stdout_has("timed out waiting for the condition")
        .stdout_lacks("drain timed out after");
}

#[test]
fn failures_that_exceed_max_fail_percentage_stop_the_later_batches_but_equal_ones_do_not() {
    let list = nodes(4, "region=a");
    let exceeded =
        TestCluster::new(&spec(&list)).var("upgrade_nodes_serial: 2").var("upgrade_nodes_max_fail_percentage: 49");
    exceeded.fake.set_cue("n1", "upgrade_fail", "");
    exceeded.upgrade(&[]).expect_code(1).stdout_has("not started");
    assert_eq!(exceeded.fake.upgrades("n3"), 0, "batch 2 never started");
    assert_eq!(exceeded.version("n2"), TARGET, "the rest of batch 1 finished");

    let equal =
        TestCluster::new(&spec(&list)).var("upgrade_nodes_serial: 2").var("upgrade_nodes_max_fail_percentage: 50");
    equal.fake.set_cue("n1", "upgrade_fail", "");
    equal.upgrade(&[]).expect_code(1);
    assert_eq!(equal.version("n4"), TARGET, "50% failed is not more than 50%: batch 2 ran");
}

#[test]
fn a_failed_run_writes_the_markdown_summary_for_ci_to_its_file_and_appends_it_to_github_step_summary() {
    let list = nodes(2, "region=a");
    let cluster = TestCluster::new(&spec(&list)).var("upgrade_nodes_serial: 1");
    cluster.fake.set_cue("n1", "upgrade_fail", "");
    let step_summary = cluster.path("step-summary.md");
    std::fs::write(&step_summary, "## an earlier step\n\n").expect("the earlier step's summary");
    let markdown = cluster.path("summary.md");
    cluster
        .scenario(&["--summary-md", &markdown.display().to_string()])
        .env("GITHUB_STEP_SUMMARY", &step_summary)
        .run()
        .expect_code(1);

    let md = std::fs::read_to_string(&markdown).expect("the --summary-md file");
    assert!(md.starts_with(&format!("## upgrade to {TARGET}: FAILED\n")), "{md}");
    assert!(md.contains("exit code 1"), "{md}");
    assert!(md.contains("| control-plane | 3 | 0 | 0 | 0 | 0 |"), "the three masters upgraded: {md}");
    assert!(md.contains("| nodes | 0 | 0 | 1 | 1 | 0 |"), "n1 failed, so n2 was not started: {md}");
    assert!(md.contains("- stopped: batch 1: 1 of 1 nodes failed"), "{md}");
    assert!(md.contains("### Failures (1)\n\n- `n1` (nodes) at upgrade: "), "{md}");
    assert!(md.contains("- `n1`: to make it schedulable again run `"), "n1 is left cordoned with its fix: {md}");
    assert!(md.contains("### Durations (slowest first, 10 of "), "{md}");
    assert!(md.contains(&format!("Record: state directory `{}", cluster.path(".upgrade-state").display())), "{md}");

    // GitHub gathers every step's summary in one file: this run's is added after the earlier step's.
    let gathered = std::fs::read_to_string(&step_summary).expect("GITHUB_STEP_SUMMARY");
    assert_eq!(gathered, format!("## an earlier step\n\n{md}\n"));
}

#[test]
fn a_batch_in_which_every_node_fails_stops_the_run_even_at_100_percent() {
    let list = nodes(4, "region=a");
    let cluster =
        TestCluster::new(&spec(&list)).var("upgrade_nodes_serial: 2").var("upgrade_nodes_max_fail_percentage: 100");
    cluster.fake.set_cue("n1", "upgrade_fail", "");
    cluster.fake.set_cue("n2", "upgrade_fail", "");
    cluster.upgrade(&[]).expect_code(1).stdout_has("not started");
    assert_eq!(cluster.fake.upgrades("n3"), 0);
}

#[test]
fn a_failing_master_hook_stops_the_run_before_the_next_master_and_hook_output_is_shown() {
    let cluster = TestCluster::new(&[("n1", "region=a")]).var("upgrade_master_post_hook: hooks/post.yml");
    cluster.write(
        "hooks/post.yml",
        "- name: announce\n  debug:\n    msg: \"post hook on {{ inventory_hostname }}\"\n\
         - name: refuse on m2\n  command: \"false\"\n  when: inventory_hostname == 'm2'\n",
    );
    cluster
        .upgrade(&[])
        .expect_code(1)
        .stdout_has("post hook on m1")
        .stdout_has("[m2] FAILED at post-hook")
        .stdout_has("master m2 failed");
    assert_eq!(cluster.fake.upgrades("m3"), 0, "m3 was not started");
    assert_eq!(cluster.fake.upgrades("n1"), 0, "the nodes were not started");
}

#[test]
fn a_nodes_only_run_is_refused_while_the_masters_are_behind() {
    let cluster = TestCluster::new(&[("n1", "region=a")]);
    cluster.upgrade(&["--phase", "nodes"]).expect_code(2).stderr_has("upgrade the control plane first");
    assert!(cluster.fake.calls().iter().all(|c| c.action != "cordon"), "nothing was touched");
}

#[test]
fn a_second_run_after_success_changes_nothing() {
    let list = nodes(2, "region=a");
    let cluster = TestCluster::new(&spec(&list));
    cluster.upgrade(&[]).expect_code(0);
    let calls = cluster.fake.calls().len();
    cluster.upgrade(&[]).expect_code(0).stdout_has("nothing to upgrade");
    let after: Vec<String> = cluster.fake.calls()[calls..].iter().map(|c| c.action.clone()).collect();
    // Its own cluster lock (taken, its progress record written at verify, released) is all it wrote: the first run
    // left the lease released, so the second takes it over and releases it with conditional writes.
    let writes: Vec<&String> = after.iter().filter(|a| !a.starts_with("get")).collect();
    assert!(
        writes.len() >= 2 && writes.iter().all(|w| *w == "replace-configmap"),
        "the second run only read the cluster and wrote its lock: {after:?}"
    );
    for host in ["m1", "m2", "m3", "n1", "n2"] {
        assert_eq!(cluster.fake.upgrades(host), 1, "{host} upgraded once");
    }
}

#[test]
fn an_sshd_killed_during_a_nodes_upgrade_fails_that_node_and_the_run_goes_on() {
    let list = nodes(3, "region=a");
    let cluster = TestCluster::new(&spec(&list))
        .on_second_sshd(&["n2"])
        .var("upgrade_nodes_serial: 3")
        .var("upgrade_nodes_max_fail_percentage: 50");
    // n2's drain takes a while; its host dies in the middle of it.
    cluster.fake.set_cue("n2", "drain_hang", "6");
    let child = cluster.scenario(&[]).spawn();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !cluster.drained().iter().any(|n| n == "n2") {
        assert!(std::time::Instant::now() < deadline, "n2's drain never started");
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    cluster.other_sshd.as_ref().expect("second sshd").kill();
    let run = child.finish().expect_code(1).stdout_has("[n2] FAILED");
    assert_eq!(cluster.version("n1"), TARGET, "the other nodes of the batch finished");
    assert_eq!(cluster.version("n3"), TARGET);
    drop(run);
}

#[test]
fn ci_runs_the_control_plane_then_the_nodes_as_separate_phases_and_the_backup_gate_still_holds() {
    let list = nodes(2, "region=a");
    let cluster = TestCluster::new(&spec(&list));
    cluster
        .upgrade(&["--phase", "control-plane"])
        .expect_code(0)
        .stdout_has("no verified etcd backup of this target exists: taking one first")
        .stdout_has("etcd snapshot verified");
    for m in MASTERS {
        assert_eq!(cluster.version(m), TARGET);
    }
    assert_eq!(cluster.fake.upgrades("n1"), 0, "the nodes wait for their own phase");
    assert_eq!(snapshot_dirs(&cluster.sshd.host_root("m1").join("etcd-backups")).len(), 1);

    cluster.upgrade(&["--phase", "nodes"]).expect_code(0);
    assert_eq!(cluster.version("n1"), TARGET);
    assert_eq!(cluster.version("n2"), TARGET);
    assert_eq!(
        snapshot_dirs(&cluster.sshd.host_root("m1").join("etcd-backups")).len(),
        1,
        "the nodes phase does not touch etcd"
    );
}

#[test]
fn nodes_already_at_the_target_keep_their_place_in_the_planned_batches_and_are_skipped() {
    let list = nodes(4, "region=a");
    let cluster = TestCluster::new(&spec(&list)).var("upgrade_nodes_serial: \"50%\"");
    cluster.fake.set_cue("n1", "report_version", TARGET);
    cluster
        .upgrade(&[])
        .expect_code(0)
        .stdout_has("-- batch 1/2: n1, n2")
        .stdout_has("-- batch 2/2: n3, n4")
        .stdout_has("[n1] skipped: already at v1.29.1");
    assert_eq!(cluster.fake.upgrades("n1"), 0, "n1 was not touched");
    assert!(cluster.fake.actions_on("n1").iter().all(|a| a.starts_with("get")), "{:?}", cluster.fake.actions_on("n1"));
    for n in ["n2", "n3", "n4"] {
        assert_eq!(cluster.fake.upgrades(n), 1);
    }
}

#[test]
fn run_once_in_a_node_hook_runs_once_per_batch_as_in_a_serial_play() {
    let list = nodes(4, "region=a");
    let cluster =
        TestCluster::new(&spec(&list)).var("upgrade_nodes_serial: 2").var("upgrade_node_post_hook: hooks/post.yml");
    let log = cluster.path("notify.log");
    cluster.write(
        "hooks/post.yml",
        &format!(
            "- name: tell the team once per batch\n  shell: echo \"batch done by {{{{ inventory_hostname }}}}\" >> {}\n  run_once: true\n  delegate_to: localhost\n",
            log.display()
        ),
    );
    cluster.upgrade(&[]).expect_code(0);
    let lines = std::fs::read_to_string(&log).expect("the hook wrote on the controller");
    assert_eq!(lines.lines().count(), 2, "one line per batch of two: {lines}");
}

#[test]
fn a_node_hook_reads_through_hostvars_what_a_master_hook_registered_and_facts_last_from_step_to_step() {
    let cluster = TestCluster::new(&[("n1", "region=a")])
        .var("upgrade_master_post_hook: hooks/master.yml")
        .var("upgrade_node_pre_hook: hooks/node_pre.yml")
        .var("upgrade_node_post_hook: hooks/node_post.yml");
    let log = cluster.path("hostvars.log");
    cluster.write(
        "hooks/master.yml",
        "- name: remember\n  command: echo \"token of {{ inventory_hostname }}\"\n  register: master_token\n",
    );
    cluster.write("hooks/node_pre.yml", "- set_fact:\n    seen_before: \"pre hook of {{ inventory_hostname }}\"\n");
    cluster.write(
        "hooks/node_post.yml",
        &format!(
            "- name: read\n  shell: echo \"{{{{ hostvars['m1'].master_token.stdout }}}}, {{{{ hostvars['m3']['master_token']['stdout'] }}}}, {{{{ seen_before }}}}, {{{{ hostvars[inventory_hostname].seen_before }}}}\" >> {}\n  delegate_to: localhost\n",
            log.display()
        ),
    );
    cluster.upgrade(&[]).expect_code(0);
    let lines = std::fs::read_to_string(&log).expect("the node hook wrote on the controller");
    assert_eq!(lines.trim(), "token of m1, token of m3, pre hook of n1, pre hook of n1");
}

#[test]
fn an_openshift_cluster_is_driven_with_oc_and_oc_adm() {
    let cluster = TestCluster::new(&[("n1", "region=a")]);
    let oc = cluster.fake.tool("oc");
    let cluster = cluster.var(&format!("upgrade_kubectl: \"{oc}\"")).var(&format!("upgrade_kubectl_adm: \"{oc} adm\""));
    cluster.upgrade(&[]).expect_code(0);
    let drains: Vec<String> =
        cluster.fake.calls().into_iter().filter(|c| c.action == "drain").map(|c| c.argv).collect();
    assert!(!drains.is_empty() && drains.iter().all(|a| a.contains("oc adm drain")), "{drains:?}");
    assert_eq!(cluster.version("n1"), TARGET);
}

#[test]
fn a_node_upgraded_with_rolling_restart_mode_system_is_rebooted_and_waited_for() {
    let cluster = TestCluster::new(&[("n1", "region=a")]).on_second_sshd(&["n1"]);
    let host = cluster.other_sshd.as_ref().expect("second sshd");
    let first_listener = host.pid();
    std::fs::write(host.host_root("n1").join("boot_id"), "boot-1\n").expect("boot id");
    // The "reboot" takes n1's sshd away for two seconds; the kubelet comes back with the host (the fake's restart,
    // run while the host is down), so the node's restart step is the reboot and nothing else.
    let while_down = format!(
        "echo boot-2 > {{{{ host_root }}}}/boot_id; echo reboot >> {{{{ host_root }}}}/reboots; {}",
        cluster.fake.restart_command()
    );
    let reboot = host.restart_command(std::time::Duration::from_secs(2), &while_down);
    let cluster = cluster
        .var("upgrade_rolling_restart_mode: \"{{ 'system' if inventory_hostname == 'n1' else 'services' }}\"")
        .var(&format!("upgrade_reboot_command: {}", serde_json::to_string(&reboot).expect("json")))
        .var("upgrade_reboot_timeout: 60")
        .var("upgrade_boot_time_command: \"cat {{ host_root }}/boot_id\"");

    cluster.upgrade(&[]).expect_code(0).stdout_has("result: success");
    let host = cluster.other_sshd.as_ref().expect("second sshd");
    let reboots = std::fs::read_to_string(host.host_root("n1").join("reboots")).expect("n1 was rebooted");
    assert_eq!(reboots, "reboot\n", "exactly one reboot");
    let listener = std::fs::read_to_string(host.dir().join("sshd.pid")).expect("the restarted sshd wrote its pid");
    assert_ne!(listener.trim(), first_listener.to_string(), "n1's sshd really went away and came back");
    assert_eq!(cluster.version("n1"), TARGET);
    assert!(cluster.fake.is_ready("n1") && !cluster.fake.is_cordoned("n1"), "n1 is back in service");
    // After the reboot the run went on with n1: waited for it to be ready, then uncordoned it.
    let actions = cluster.fake.actions_on("n1");
    let restart = actions.iter().position(|a| a == "restart").expect("the kubelet came back with the reboot");
    assert!(actions[restart..].contains(&"uncordon".to_string()), "{actions:?}");
    // The masters kept the services restart.
    for m in MASTERS {
        assert!(!cluster.sshd.host_root(m).join("reboots").exists(), "{m} was not rebooted");
        assert!(cluster.fake.actions_on(m).contains(&"restart".to_string()), "{m} restarted its services");
    }
}

#[test]
fn a_failing_kubeadm_upgrade_plan_stops_the_run_in_preflight_with_kubeadms_message() {
    let cluster = TestCluster::new(&[("n1", "region=a")]);
    cluster.fake.set_cue("m1", "plan_fail", "[upgrade/health] FATAL: there are unhealthy control plane pods");
    // kubeadm's own health checks fail while a control plane settles (etcd restarting under a re-run after a kill):
    // asked again for the control plane's readiness timeout (4 s here, every second), then the run stops.
    let cluster = cluster.var("upgrade_control_plane_ready_timeout: 4");
    let run = cluster.upgrade(&[]).expect_code(1).stderr_has("unhealthy control plane pods");
    run.stderr_has("upgrade_kubeadm_plan_check: false");
    let actions: Vec<String> = cluster.fake.calls().into_iter().map(|c| c.action).collect();
    let plans = actions.iter().filter(|a| *a == "kubeadm-plan").count();
    assert_eq!(plans, 5, "asked once and again 4 times over the 4 s: {actions:?}");

    // Any other refusal of kubeadm's is final at once.
    let other = TestCluster::new(&[("n1", "region=a")]);
    other.fake.set_cue("m1", "plan_fail", "[upgrade/versions] FATAL: the --version argument is invalid");
    other.upgrade(&[]).expect_code(1).stderr_has("the --version argument is invalid");
    let plans = other.fake.calls().into_iter().filter(|c| c.action == "kubeadm-plan").count();
    assert_eq!(plans, 1, "a refusal that is not a health check is not asked again");
    assert!(!actions.iter().any(|a| a == "cordon" || a == "drain" || a.starts_with("kubeadm-a")), "{actions:?}");

    // Turned off, the same cluster upgrades.
    let cluster = cluster.var("upgrade_kubeadm_plan_check: false");
    cluster.upgrade(&[]).expect_code(0);
}

#[test]
fn the_custom_flavour_runs_no_package_or_kubeadm_plan_checks_and_keeps_the_control_plane_health_gate() {
    let cluster = TestCluster::new(&[("n1", "region=a")]);
    // kubeadm's plan would stop the run here: the custom flavour must not ask it.
    cluster.fake.set_cue("m1", "plan_fail", "the custom flavour ran kubeadm upgrade plan");
    let command = cluster.fake.kubelet_package_command();
    let cluster = cluster
        .var("upgrade_flavor: custom")
        .var(&format!("upgrade_master_upgrade_command: \"{command}\""))
        .var(&format!("upgrade_node_upgrade_command: \"{command}\""));
    let run = cluster.upgrade(&[]).expect_code(0);
    assert!(!run.stdout.contains("package manager"), "no package manager detection:\n{}", run.stdout);
    let actions: Vec<String> = cluster.fake.calls().into_iter().map(|c| c.action).collect();
    assert!(!actions.iter().any(|a| a.starts_with("kubeadm")), "{actions:?}");
    assert!(actions.contains(&"readyz".to_string()), "the health gate still asks /readyz: {actions:?}");
    assert_eq!(cluster.version("m1"), TARGET);
    assert_eq!(cluster.version("n1"), TARGET);
}

#[test]
fn a_node_with_its_own_upgrade_command_naming_node_name_gets_no_package_manager_check() {
    let cluster = TestCluster::new(&[("n1", "region=a")]);
    // The command refers to what the run decides per host (node_name, the target): preflight must read it as the
    // steps will, not as an undefined variable, and so not look for a package manager on n1.
    let command = cluster.fake.kubelet_package_command();
    let cluster = cluster.var(&format!("upgrade_node_upgrade_command: \"{command}\""));
    let run = cluster.upgrade(&[]).expect_code(0);
    let checked: Vec<&str> = run.stdout.lines().filter(|l| l.contains("package manager")).collect();
    assert!(checked.iter().any(|l| l.contains("m1")), "the masters are still checked: {checked:?}");
    assert!(!checked.iter().any(|l| l.contains("n1")), "n1 upgrades with its own command: {checked:?}");
    assert_eq!(cluster.version("n1"), TARGET);
}

#[test]
fn kubeadm_certificates_expiring_within_30_days_stop_preflight_before_anything_moves() {
    let cluster = TestCluster::new(&[("n1", "region=a")]);
    std::fs::write(cluster.fake.state_dir().join("certs_expire_days"), "10").expect("cue");
    cluster
        .upgrade(&[])
        .expect_code(1)
        .stderr_has("certificate(s) expire within 30 days (default)")
        .stderr_has("m1: kubeadm certificate apiserver expires ")
        .stderr_has("kubeadm certs renew");
    assert!(cluster.drained().is_empty(), "nothing was drained");
    assert_eq!(cluster.version("m1"), "v1.28.5");

    // A shorter window lets preflight pass (what follows it is every other test's).
    cluster.upgrade(&["--phase", "preflight", "-e", "upgrade_certificate_expiry_warning_days=7"]).expect_code(0);
}

#[test]
fn kubelet_versions_with_a_distribution_suffix_count_as_the_target_from_preflight_to_verify() {
    // One suffix end to end; the others (GKE's, k3s's) are the version comparison's unit test in settings::target.
    for suffix in ["-eks-123"] {
        let cluster = TestCluster::new(&[("n1", "region=a")]);
        // The kubelet "package" the distribution ships reports its own suffix, as EKS, GKE and k3s kubelets do.
        let package = format!("{} --node {{{{ node_name }}}} upgrade {TARGET}{suffix}", cluster.fake.tool("fake-node"));
        let extra = serde_json::json!({ "upgrade_kubelet_package_command": package }).to_string();
        cluster.upgrade(&["-e", &extra]).expect_code(0).stdout_has("result: success");
        for host in MASTERS.into_iter().chain(["n1"]) {
            assert_eq!(cluster.version(host), format!("{TARGET}{suffix}"), "{host}");
            assert_eq!(cluster.fake.upgrades(host), 1, "{host} upgraded once ({suffix})");
            assert!(!cluster.fake.is_cordoned(host), "{host} schedulable again ({suffix})");
        }
        // A re-run sees every node at the target: nothing is upgraded again.
        cluster.upgrade(&["-e", &extra]).expect_code(0).stdout_has("nothing to upgrade");
        assert_eq!(cluster.fake.upgrades("n1"), 1, "n1 not upgraded again ({suffix})");
    }
}

#[test]
fn wait_ready_polls_again_after_an_answer_that_is_not_json() {
    let cluster = TestCluster::new(&[("n1", "region=a")]);
    // A kubectl that, once after each upgrade, answers the first poll of wait-ready (`get node NAME`) with a
    // warning instead of JSON, and exits 0.
    let flag = cluster.path("answer-garbage-once");
    let wrapper = cluster.path("flaky-kubectl");
    cluster.write(
        "flaky-kubectl",
        &format!(
            "#!/bin/sh\nif [ -e {flag} ] && [ \"$1 $2\" = \"get node\" ]; then rm -f {flag}; \
             echo 'W1123 10:00:00 warning: the server is shutting down'; exit 0; fi\nexec {kubectl} \"$@\"\n",
            flag = flag.display(),
            kubectl = cluster.fake.kubectl_command()
        ),
    );
    let package = format!("touch {} && {}", flag.display(), cluster.fake.kubelet_package_command());
    let extra = serde_json::json!({
        "upgrade_kubectl": format!("sh {}", wrapper.display()),
        "upgrade_kubelet_package_command": package,
    })
    .to_string();
    cluster.upgrade(&["-e", &extra]).expect_code(0).stdout_has("result: success");
    assert!(!flag.exists(), "the last wait-ready was given the non-JSON answer");
    for host in MASTERS.into_iter().chain(["n1"]) {
        assert_eq!(cluster.version(host), TARGET, "{host}");
        assert!(!cluster.fake.is_cordoned(host), "{host} schedulable again");
    }
}
