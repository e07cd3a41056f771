//! The strategies end to end (issue 12): an update graph walked hop by hop (killed and resumed), the zone-then-age
//! order, blue-green node replacement with surge hooks. Real sshd hosts on loopback, a real etcd, the scripted fake
//! cluster API.

use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use crate::support::describe;
use crate::support::etcd::TestEtcd;
use crate::support::fake_cluster::FakeCluster;
use crate::support::sshd::TestSshd;

const MASTERS: [&str; 3] = ["m1", "m2", "m3"];

/// Three masters, the nodes of each inventory group, every host on one real sshd with its own root, the fake cluster
/// created from `init` lines (the masters are added at `masters_at`).
struct Cluster {
    dir: tempfile::TempDir,
    sshd: TestSshd,
    etcd: TestEtcd,
    fake: FakeCluster,
    /// Inventory groups besides `masters` and `etcd`, in order: (`nodes`, [n1, n2]), (`new_nodes`, [g1]).
    groups: Vec<(String, Vec<String>)>,
    vars: Vec<String>,
}

impl Cluster {
    fn new(masters_at: &str, nodes: &str, groups: &[(&str, &[&str])]) -> Cluster {
        let mut spec: String =
            MASTERS.iter().map(|m| format!("{m} {masters_at} node-role.kubernetes.io/control-plane=\n")).collect();
        spec.push_str(nodes);
        Cluster {
            dir: tempfile::Builder::new().prefix("upgrade-strategies-").tempdir().expect("scratch dir"),
            sshd: TestSshd::start(),
            etcd: TestEtcd::start(),
            fake: FakeCluster::init(&spec),
            groups: groups
                .iter()
                .map(|(g, hosts)| (g.to_string(), hosts.iter().map(|h| h.to_string()).collect()))
                .collect(),
            vars: Vec::new(),
        }
    }

    /// An `all:vars` line (`key: value`, YAML).
    fn var(mut self, line: &str) -> Cluster {
        self.vars.push(line.to_string());
        self
    }

    fn path(&self, relative: &str) -> PathBuf {
        self.dir.path().join(relative)
    }

    fn write(&self, relative: &str, text: &str) {
        let path = self.path(relative);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("dir");
        std::fs::write(path, text).expect("write");
    }

    fn inventory(&self) -> PathBuf {
        let mut text = String::from("all:\n  vars:\n");
        for (k, v) in self.fake.command_vars() {
            text.push_str(&format!("    {k}: \"{v}\"\n"));
        }
        text.push_str(&format!("    upgrade_etcdctl: \"{}\"\n", crate::support::etcd::etcdctl_binary().display()));
        text.push_str(&format!("    upgrade_etcd_endpoints: \"{}\"\n", self.etcd.endpoints()));
        text.push_str("    upgrade_etcd_cacert: \"\"\n    upgrade_etcd_cert: \"\"\n    upgrade_etcd_key: \"\"\n");
        text.push_str("    upgrade_etcd_backup_dir: \"{{ host_root }}/etcd-backups\"\n");
        text.push_str("    upgrade_node_ready_delay: 1\n    upgrade_node_ready_timeout: 20\n");
        for line in &self.vars {
            text.push_str(&format!("    {line}\n"));
        }
        text.push_str("  children:\n    masters:\n      hosts:\n");
        for m in MASTERS {
            text.push_str(&self.sshd.yaml_host(m, 8));
        }
        text.push_str("    etcd:\n      hosts:\n        m1:\n");
        for (group, hosts) in &self.groups {
            text.push_str(&format!("    {group}:\n      hosts:\n"));
            for h in hosts {
                text.push_str(&self.sshd.yaml_host(h, 8));
            }
        }
        let path = self.path("hosts.yml");
        std::fs::write(&path, text).expect("inventory");
        path
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_upgrade"));
        command.args(args).arg("--inventory").arg(self.inventory()).current_dir(self.dir.path());
        command.env("NO_COLOR", "1");
        command
    }

    fn upgrade(&self, args: &[&str], code: i32) -> Output {
        let output = self.command(args).output().expect("run upgrade");
        assert_eq!(output.status.code(), Some(code), "upgrade {args:?}: {}", describe(&output));
        output
    }

    /// Waits until the fake cluster logged a call whose action and arguments match.
    fn wait_for(&self, what: &str, matches: impl Fn(&crate::support::fake_cluster::Call) -> bool) {
        let deadline = Instant::now() + Duration::from_secs(90);
        while !self.fake.calls().iter().any(&matches) {
            assert!(Instant::now() < deadline, "never saw {what}: {:?}", self.fake.calls());
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn journal(&self) -> String {
        std::fs::read_to_string(self.path(".upgrade-state/journal.jsonl")).unwrap_or_default()
    }

    fn backups(&self) -> usize {
        std::fs::read_dir(self.sshd.host_root("m1").join("etcd-backups")).map(|d| d.count()).unwrap_or(0)
    }
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

// ---------------------------------------------------------------------------------------------------------------
// update graph

const GRAPH: &str = r#"{"nodes": [{"version": "1.28.5"}, {"version": "1.29.1"}, {"version": "1.30.2"},
    {"version": "1.29.0"}],
  "edges": [[0, 1], [1, 2], [0, 3], [3, 2]]}"#;

fn graph_cluster() -> Cluster {
    let cluster = Cluster::new("v1.28.5", "n1 v1.28.5 -\nn2 v1.28.5 -\n", &[("nodes", &["n1", "n2"])])
        .var("upgrade_target_version: v1.30.2")
        .var("upgrade_update_graph: graph.json");
    cluster.write("graph.json", GRAPH);
    cluster
}

#[test]
fn a_target_two_edges_away_is_walked_hop_by_hop_and_a_run_killed_in_the_second_hop_resumes_there() {
    let cluster = graph_cluster();
    let mut child = cluster.command(&[]).stdout(Stdio::null()).stderr(Stdio::null()).spawn().expect("start");
    // Hop 2 has begun on the control plane: m1 went to v1.30.2 and m2 is being drained.
    cluster.wait_for("m2's drain in hop 2", |_| {
        let calls = cluster.fake.calls();
        let apply = calls.iter().position(|c| c.action == "kubeadm-apply" && c.argv.contains("v1.30.2"));
        apply.is_some_and(|at| calls[at..].iter().any(|c| c.node == "m2" && c.action == "drain"))
    });
    child.kill().expect("SIGKILL the run");
    child.wait().expect("reap");
    assert_eq!(cluster.fake.version("n1"), "v1.29.1", "the nodes finished hop 1 and not hop 2");
    let journal = cluster.journal();
    assert!(journal.contains(r#""event":"hop-started""#) && journal.contains(r#""hop":2"#), "{journal}");

    let resumed = cluster.upgrade(&[], 0);
    let out = stdout(&resumed);
    assert!(out.contains("resuming the update path at hop 2 of 2: v1.29.1 -> v1.30.2"), "{out}");
    assert!(!out.contains("hop 1 of 2"), "hop 1 is not done again: {out}");
    for host in ["m1", "m2", "m3", "n1", "n2"] {
        assert_eq!(cluster.fake.version(host), "v1.30.2", "{host} is at the final target");
        assert!(!cluster.fake.is_cordoned(host), "{host} is schedulable");
    }
    // Hop 1 went through the newest release of its minor; each host was upgraded once per hop, m1 not again.
    assert!(cluster.fake.calls().iter().any(|c| c.action == "kubeadm-apply" && c.argv.contains("v1.29.1")));
    assert!(!cluster.fake.calls().iter().any(|c| c.argv.contains("v1.29.0")), "the older 1.29 is not visited");
    assert_eq!(cluster.fake.upgrades("m1"), 2, "m1 did each hop once");
    assert_eq!(cluster.fake.upgrades("n2"), 2, "n2 did each hop once");
    // Each hop took its own etcd backup; the resumed hop 2 keeps the verified one its first attempt took.
    assert_eq!(cluster.backups(), 2, "one backup per hop");
    assert!(out.contains("a verified backup was taken by an earlier run for v1.30.2"), "{out}");
}

#[test]
fn a_target_the_graph_does_not_reach_is_refused_before_anything_is_touched() {
    let cluster = graph_cluster();
    let refused = cluster.upgrade(&["--target-version", "v1.31.0"], 2);
    let err = String::from_utf8_lossy(&refused.stderr).into_owned();
    assert!(err.contains("not reachable from v1.28.5"), "{err}");
    assert!(err.contains("v1.29.0, v1.29.1, v1.30.2"), "the hint says what the graph offers: {err}");
    assert!(cluster.fake.calls().iter().all(|c| c.action.starts_with("get")), "nothing was touched");
}

#[test]
fn versions_lists_the_targets_the_graph_offers_from_the_cluster_or_from_a_given_version() {
    let cluster = graph_cluster();
    let listed = cluster.command(&["versions"]).output().expect("run");
    assert!(listed.status.success(), "{}", describe(&listed));
    let text = stdout(&listed);
    assert!(text.contains("Running version: v1.28.5 (the masters, read from the cluster)"), "{text}");
    assert!(text.contains("v1.30.2      v1.29.1 -> v1.30.2 (2 hops)"), "{text}");

    let listed = cluster.command(&["versions", "--from", "1.29.1", "--output", "json"]).output().expect("run");
    let doc: serde_json::Value = serde_json::from_slice(&listed.stdout).expect(&describe(&listed));
    assert_eq!(doc["targets"], serde_json::json!([{"version": "v1.30.2", "path": ["v1.30.2"]}]));
}

#[test]
fn the_plan_shows_the_hops_from_each_version_and_keeps_its_old_keys() {
    let cluster = graph_cluster();
    let plan = cluster.command(&["--plan", "--output", "json"]).output().expect("run");
    let doc: serde_json::Value = serde_json::from_slice(&plan.stdout).expect(&describe(&plan));
    assert_eq!(doc["update_graph"]["hops_from"]["v1.28.5"], serde_json::json!(["v1.29.1", "v1.30.2"]));
    assert_eq!(doc["settings"]["target_version"], "v1.30.2");
    assert_eq!(doc["phases"][3]["batches"], serde_json::json!([["n1"], ["n2"]]));
}

#[test]
fn without_a_graph_a_target_two_minors_ahead_lists_the_hops_it_would_need() {
    let cluster =
        Cluster::new("v1.28.5", "n1 v1.28.5 -\n", &[("nodes", &["n1"])]).var("upgrade_target_version: v1.31.0");
    let refused = cluster.upgrade(&[], 2);
    let err = String::from_utf8_lossy(&refused.stderr).into_owned();
    assert!(err.contains("the hops to v1.31.0: v1.29.x -> v1.30.x -> v1.31.0"), "{err}");
}

// ---------------------------------------------------------------------------------------------------------------
// zone-age order

#[test]
fn zone_age_takes_the_nodes_without_a_zone_then_zone_a_then_zone_b_oldest_first_max_unavailable_at_a_time() {
    let nodes = "n1 v1.28.5 topology.kubernetes.io/zone=b\nn2 v1.28.5 topology.kubernetes.io/zone=a\n\
                 n3 v1.28.5 -\nn4 v1.28.5 topology.kubernetes.io/zone=b\nn5 v1.28.5 -\n";
    let cluster = Cluster::new("v1.28.5", nodes, &[("nodes", &["n1", "n2", "n3", "n4", "n5"])])
        .var("upgrade_target_version: v1.29.1")
        .var("upgrade_nodes_order: zone-age")
        .var("upgrade_nodes_max_unavailable: 2");
    for (node, created) in [
        ("n1", "2024-01-01T00:00:00Z"),
        ("n2", "2024-06-01T00:00:00Z"),
        ("n3", "2024-03-01T00:00:00Z"),
        ("n4", "2023-01-01T00:00:00Z"),
        ("n5", "2023-06-01T00:00:00Z"),
    ] {
        cluster.fake.set_cue(node, "created", created);
    }
    let run = cluster.upgrade(&[], 0);
    let out = stdout(&run);
    assert!(out.contains("zone-age order (by topology.kubernetes.io/zone, oldest first): n5, n3, n2, n4, n1"), "{out}");
    assert!(out.contains("-- batch 1/3: n5, n3") && out.contains("-- batch 3/3: n1"), "{out}");
    let drained: Vec<String> = cluster
        .fake
        .calls()
        .into_iter()
        .filter(|c| c.action == "drain" && c.node.starts_with('n'))
        .map(|c| c.node)
        .collect();
    let mut first_batch = drained[..2].to_vec();
    first_batch.sort();
    assert_eq!(first_batch, ["n3", "n5"], "no zone first: {drained:?}");
    let mut second_batch = drained[2..4].to_vec();
    second_batch.sort();
    assert_eq!(second_batch, ["n2", "n4"], "then zone a and the oldest of zone b: {drained:?}");
    assert_eq!(drained[4], "n1", "the newest node of zone b last: {drained:?}");
}

#[test]
fn the_offline_plan_orders_by_the_zones_of_node_labels_and_says_the_run_orders_again() {
    let inventory = "[masters]\nm1\n[nodes]\nn1 node_labels=\"{'topology.kubernetes.io/zone': 'b'}\"\n\
                     n2 node_labels=\"{'topology.kubernetes.io/zone': 'a'}\"\nn3\n\
                     [all:vars]\nupgrade_nodes_order=zone-age\nupgrade_nodes_max_unavailable=2\n";
    let mut out = crate::support::Scenario::new()
        .file("hosts", inventory)
        .args(["--inventory", "hosts", "--plan", "--output", "json"])
        .success();
    let plan = out.json();
    assert_eq!(plan["phases"][3]["batches"], serde_json::json!([["n3", "n2"], ["n1"]]));
    assert_eq!(plan["nodes_order"]["rule"], "zone-age");
    assert_eq!(plan["nodes_order"]["reordered_at_run_time"], true);
    assert_eq!(plan["settings"]["serial"], 2, "max_unavailable is serial under another name");
    crate::support::Scenario::new()
        .file("hosts", inventory)
        .args(["--inventory", "hosts", "--plan"])
        .success()
        .stdout_has("Node order: zone-age")
        .stdout_has("the run orders the nodes again");
}
