//! The strategies end to end (issue 12): an update graph walked hop by hop (killed and resumed), the zone-then-age
//! order, blue-green node replacement with surge hooks. Real sshd hosts on loopback, a real etcd, the scripted fake
//! cluster API.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

use crate::support::etcd::TestEtcd;
use crate::support::fake_cluster::FakeCluster;
use crate::support::sshd::TestSshd;
use crate::support::{Outcome, Scenario, cluster_inventory, cluster_vars};

const MASTERS: [&str; 3] = ["m1", "m2", "m3"];

/// Three masters, the nodes of each inventory group, every host on one real sshd with its own root, the fake cluster
/// created from `init` lines (the masters are added at `masters_at`).
pub(crate) struct Cluster {
    dir: tempfile::TempDir,
    sshd: TestSshd,
    etcd: TestEtcd,
    pub(crate) fake: FakeCluster,
    /// Inventory groups besides `masters` and `etcd`, in order: (`nodes`, [n1, n2]), (`new_nodes`, [g1]).
    groups: Vec<(String, Vec<String>)>,
    vars: Vec<String>,
}

impl Cluster {
    pub(crate) fn new(masters_at: &str, nodes: &str, groups: &[(&str, &[&str])]) -> Cluster {
        let mut spec: String =
            MASTERS.iter().map(|m| format!("{m} {masters_at} node-role.kubernetes.io/control-plane=\n")).collect();
        spec.push_str(nodes);
        Cluster {
            dir: tempfile::Builder::new().prefix("upgrade-strategies-").tempdir().expect("scratch dir"),
            sshd: TestSshd::start(),
            etcd: TestEtcd::stand_in(),
            fake: FakeCluster::init(&spec),
            groups: groups
                .iter()
                .map(|(g, hosts)| (g.to_string(), hosts.iter().map(|h| h.to_string()).collect()))
                .collect(),
            vars: Vec::new(),
        }
    }

    /// An `all:vars` line (`key: value`, YAML).
    pub(crate) fn var(mut self, line: &str) -> Cluster {
        self.vars.push(line.to_string());
        self
    }

    fn path(&self, relative: &str) -> PathBuf {
        self.dir.path().join(relative)
    }

    pub(crate) fn write(&self, relative: &str, text: &str) {
        let path = self.path(relative);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("dir");
        std::fs::write(path, text).expect("write");
    }

    fn inventory(&self) -> PathBuf {
        let mut vars = cluster_vars(&self.fake, &self.etcd);
        for line in &self.vars {
            vars.push_str(&format!("    {line}\n"));
        }
        let groups: Vec<(&str, &[String])> =
            self.groups.iter().map(|(g, hosts)| (g.as_str(), hosts.as_slice())).collect();
        let text = cluster_inventory(&vars, &MASTERS, &groups, |h| self.sshd.yaml_host(h, 8));
        let path = self.path("hosts.yml");
        std::fs::write(&path, text).expect("inventory");
        path
    }

    /// `upgrade ARGS --inventory hosts.yml` in the cluster's directory.
    fn scenario(&self, args: &[&str]) -> Scenario {
        Scenario::in_dir(self.dir.path()).args(args).inventory(self.inventory()).env("NO_COLOR", "1")
    }

    pub(crate) fn upgrade(&self, args: &[&str], code: i32) -> Outcome {
        self.scenario(args).run().expect_code(code)
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
    // The final target given with -e, the highest precedence, does not hide each hop's own target from its steps.
    let target = ["-e", "upgrade_target_version=v1.30.2"];
    let mut child =
        cluster.scenario(&target).command().stdout(Stdio::null()).stderr(Stdio::null()).spawn().expect("start");
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

    let resumed = cluster.upgrade(&target, 0);
    let out = resumed.stdout.clone();
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
    let err = refused.stderr.clone();
    assert!(err.contains("not reachable from v1.28.5"), "{err}");
    assert!(err.contains("v1.29.0, v1.29.1, v1.30.2"), "the hint says what the graph offers: {err}");
    // The run's own cluster lock (a ConfigMap, taken and released) is not a touch of the cluster's nodes.
    let touched = |a: &str| !a.starts_with("get") && !a.ends_with("-configmap");
    assert!(cluster.fake.calls().iter().all(|c| !touched(&c.action)), "nothing was touched");
}

#[test]
fn versions_lists_the_targets_the_graph_offers_from_the_cluster_or_from_a_given_version() {
    let cluster = graph_cluster();
    let listed = cluster.scenario(&["versions"]).success();
    let text = listed.stdout.clone();
    assert!(text.contains("Running version: v1.28.5 (the masters, read from the cluster)"), "{text}");
    assert!(text.contains("v1.30.2      v1.29.1 -> v1.30.2 (2 hops)"), "{text}");

    let doc = cluster.scenario(&["versions", "--from", "1.29.1", "--output", "json"]).run().json();
    assert_eq!(doc["targets"], serde_json::json!([{"version": "v1.30.2", "path": ["v1.30.2"]}]));
}

/// The gate on removed APIs weighs every minor of the path before the first hop changes anything: a client of an API
/// 1.30 removes (the second hop's minor) refuses the run while the cluster is still all at 1.28.5.
#[test]
fn the_first_hop_is_refused_for_what_the_second_hops_minor_removes() {
    let cluster = graph_cluster();
    let line = "apiserver_requested_deprecated_apis{group=\"example.io\",removed_release=\"1.30\",resource=\"gadgets\",\
                subresource=\"\",version=\"v1beta1\"} 1\n";
    std::fs::write(cluster.fake.state_dir().join("deprecated_apis"), line).expect("cue");
    let run = cluster.upgrade(&[], 1).stdout_has("example.io/v1beta1 gadgets").stdout_has("BLOCKED: 1.30");
    for node in ["m1", "n1", "n2"] {
        assert_eq!(cluster.fake.version(node), "v1.28.5", "{node} untouched\n{}", run.output());
    }
}

#[test]
fn the_plan_shows_the_hops_from_each_version_and_keeps_its_old_keys() {
    let cluster = graph_cluster();
    let doc = cluster.scenario(&["--plan", "--output", "json"]).run().json();
    assert_eq!(doc["update_graph"]["hops_from"]["v1.28.5"], serde_json::json!(["v1.29.1", "v1.30.2"]));
    assert_eq!(doc["settings"]["target_version"], "v1.30.2");
    assert_eq!(doc["phases"][3]["batches"], serde_json::json!([["n1"], ["n2"]]));
}

#[test]
fn without_a_graph_a_target_two_minors_ahead_lists_the_hops_it_would_need() {
    let cluster =
        Cluster::new("v1.28.5", "n1 v1.28.5 -\n", &[("nodes", &["n1"])]).var("upgrade_target_version: v1.31.0");
    let refused = cluster.upgrade(&[], 2);
    let err = refused.stderr.clone();
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
    let out = run.stdout.clone();
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
    let out = crate::support::Scenario::new()
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

// ---------------------------------------------------------------------------------------------------------------
// blue-green

fn labels(cluster: &Cluster, node: &str) -> String {
    std::fs::read_to_string(cluster.fake.state_dir().join("nodes").join(node).join("labels")).unwrap_or_default()
}

#[test]
fn blue_green_evacuates_the_blue_nodes_in_batches_counts_a_stuck_drain_and_rolls_back() {
    // n3 was cordoned by its operator before the run: a rollback leaves it so.
    let nodes = "n1 v1.28.5 -\nn2 v1.28.5 -\nn3 v1.28.5 - cordoned\n\
                 g1 v1.29.1 - cordoned\ng2 v1.29.1 - cordoned\ng3 v1.29.1 - cordoned\n";
    let cluster = Cluster::new("v1.28.5", nodes, &[("nodes", &["n1", "n2", "n3"]), ("new_nodes", &["g1", "g2", "g3"])])
        .var("upgrade_target_version: v1.29.1")
        .var("upgrade_nodes_strategy: blue-green")
        .var("upgrade_nodes_serial: 2")
        .var("upgrade_nodes_max_fail_percentage: 50")
        .var("upgrade_nodes_drain_timeout: 2")
        .var("upgrade_node_pre_drain_hook: hooks/record.yml")
        .var("upgrade_node_post_hook: hooks/record.yml");
    let log = cluster.path("hooks.log");
    cluster.write(
        "hooks/record.yml",
        &format!("- shell: echo \"{{{{ inventory_hostname }}}}\" >> {}\n  delegate_to: localhost\n", log.display()),
    );
    cluster.fake.set_cue("n2", "drain_hang", "");

    let run = cluster.upgrade(&[], 1);
    let out = run.stdout.clone();
    assert!(out.contains("[n2] FAILED at drain: drain timed out after 2s"), "{out}");
    assert!(
        out.contains("-- batch 1/2: n1, n2") && out.contains("-- batch 2/2: n3"),
        "one failure of two is within 50%: {out}"
    );
    for m in MASTERS {
        assert_eq!(cluster.fake.version(m), "v1.29.1", "the masters are upgraded in place");
    }
    for n in ["n1", "n2", "n3"] {
        assert_eq!(cluster.fake.upgrades(n), 0, "{n} is replaced, not upgraded");
        assert!(cluster.fake.is_cordoned(n), "{n} is unschedulable");
        assert!(labels(&cluster, n).contains("color=blue"), "{n}: {}", labels(&cluster, n));
    }
    for g in ["g1", "g2", "g3"] {
        assert!(!cluster.fake.is_cordoned(g), "{g} takes the load");
        assert!(labels(&cluster, g).contains("color=green"), "{g}: {}", labels(&cluster, g));
    }
    // The batch of n1 and n2 was evacuated before n3; every blue node was made unschedulable before any drain.
    let calls = cluster.fake.calls();
    let position = |node: &str, action: &str| calls.iter().position(|c| c.node == node && c.action == action);
    let last_cordon = ["n1", "n2", "n3"].iter().filter_map(|n| position(n, "cordon")).max();
    let first_drain = ["n1", "n2", "n3"].iter().filter_map(|n| position(n, "drain")).min();
    assert!(last_cordon < first_drain, "{calls:?}");
    assert!(position("g1", "uncordon") < first_drain, "green is schedulable before blue is drained");
    assert!(position("n1", "drain") < position("n3", "drain") && position("n2", "drain") < position("n3", "drain"));
    // The node hooks ran for each blue node; n2 never got past its drain.
    let hooks = std::fs::read_to_string(&log).expect("the hooks ran");
    let count = |h: &str| hooks.lines().filter(|l| *l == h).count();
    assert_eq!((count("n1"), count("n2"), count("n3")), (2, 1, 2), "{hooks}");
    assert!(cluster.fake.calls().iter().all(|c| c.action != "delete"), "node objects are kept by default");

    let rollback = cluster.upgrade(&["--rollback-blue-green"], 0);
    for n in ["n1", "n2"] {
        assert!(!cluster.fake.is_cordoned(n), "{n} is schedulable again");
    }
    assert!(cluster.fake.is_cordoned("n3"), "n3 was cordoned before the run: {}", rollback.stdout);
    for g in ["g1", "g2", "g3"] {
        assert!(cluster.fake.is_cordoned(g), "{g} is unschedulable again");
    }
}

#[test]
fn blue_green_refuses_green_nodes_not_ready_at_the_target_before_touching_anything() {
    let nodes = "n1 v1.28.5 -\ng1 v1.28.5 -\n";
    let cluster = Cluster::new("v1.28.5", nodes, &[("nodes", &["n1"]), ("new_nodes", &["g1"])])
        .var("upgrade_target_version: v1.29.1")
        .var("upgrade_nodes_strategy: blue-green");
    let refused = cluster.upgrade(&[], 1);
    let err = refused.stderr.clone();
    assert!(err.contains("the green nodes are not ready to take the load: g1 runs v1.28.5, not v1.29.1"), "{err}");
    // The run's own cluster lock (a ConfigMap, taken and released) is not a touch of the cluster's nodes.
    let touched = |a: &str| !a.starts_with("get") && !a.ends_with("-configmap");
    assert!(cluster.fake.calls().iter().all(|c| !touched(&c.action)), "nothing was touched");
}

#[test]
fn a_surge_cycle_adds_a_node_before_each_blue_drain_and_removes_the_old_one_after() {
    let cluster = Cluster::new("v1.29.1", "n1 v1.28.5 -\nn2 v1.28.5 -\n", &[("nodes", &["n1", "n2"])])
        .var("upgrade_target_version: v1.29.1")
        .var("upgrade_nodes_strategy: blue-green")
        .var("upgrade_blue_green_delete_nodes: true")
        .var("upgrade_node_surge_add_hook: hooks/surge_add.yml")
        .var("upgrade_node_surge_remove_hook: hooks/surge_remove.yml");
    // The hooks stand in for a cloud scale set: they write into the fake cluster's call log, so that one timeline
    // shows the hooks between the cluster calls. They run on the controller.
    let calls_log = cluster.fake.state_dir().join("calls.log");
    for (file, action) in [("hooks/surge_add.yml", "surge-add"), ("hooks/surge_remove.yml", "surge-remove")] {
        cluster.write(
            file,
            &format!(
                "- name: {action} for {{{{ upgrade_replaced_node }}}}\n  shell: printf 't\\t%s\\t{action}\\ton %s\\n' \
                 '{{{{ upgrade_replaced_node }}}}' \"$(hostname)\" >> {}\n",
                calls_log.display()
            ),
        );
    }
    let run = cluster.upgrade(&[], 0);
    let out = run.stdout.clone();
    assert!(out.contains("blue node n1 evacuated and its node object deleted"), "{out}");
    let timeline: Vec<(String, String)> = cluster
        .fake
        .calls()
        .into_iter()
        .filter(|c| ["n1", "n2"].contains(&c.node.as_str()) && !c.action.starts_with("get"))
        .filter(|c| c.action != "label" && c.action != "cordon" && c.action != "annotate")
        .map(|c| (c.node, c.action))
        .collect();
    let expected: Vec<(String, String)> = [
        ("n1", "surge-add"),
        ("n1", "drain"),
        ("n1", "delete"),
        ("n1", "surge-remove"),
        ("n2", "surge-add"),
        ("n2", "drain"),
        ("n2", "delete"),
        ("n2", "surge-remove"),
    ]
    .iter()
    .map(|(n, a)| (n.to_string(), a.to_string()))
    .collect();
    assert_eq!(timeline, expected);
    assert!(!cluster.fake.state_dir().join("nodes/n1").exists(), "n1's node object is gone");
}

#[test]
fn the_plan_shows_the_blue_green_strategy_and_keeps_its_old_keys() {
    let inventory = "[masters]\nm1\n[nodes]\nn1\nn2\n[new_nodes]\ng1\n\
                     [all:vars]\nupgrade_nodes_strategy=blue-green\nupgrade_blue_green_label=generation\n";
    let out = crate::support::Scenario::new()
        .file("hosts", inventory)
        .args(["--inventory", "hosts", "--plan", "--output", "json"])
        .success();
    let plan = out.json();
    assert_eq!(plan["nodes_strategy"]["name"], "blue-green");
    assert_eq!(plan["nodes_strategy"]["green"], serde_json::json!(["g1"]));
    assert_eq!(plan["nodes_strategy"]["label"], "generation");
    assert_eq!(plan["nodes_strategy"]["delete_nodes"], false);
    assert_eq!(plan["phases"][3]["batches"], serde_json::json!([["n1"], ["n2"]]));
    assert_eq!(plan["settings"]["serial"], 1);

    let empty = "[masters]\nm1\n[nodes]\nn1\n[all:vars]\nupgrade_nodes_strategy=blue-green\n";
    crate::support::Scenario::new()
        .file("hosts", empty)
        .args(["--inventory", "hosts", "--plan"])
        .failure(2)
        .stderr_has("the green group `new_nodes` has no hosts");
}

// ---------------------------------------------------------------------------------------------------------------
// bad input

#[test]
fn a_bad_strategy_setting_or_graph_file_is_refused_with_its_place_and_what_to_write() {
    let plan = |vars: &str| {
        crate::support::Scenario::new()
            .file("hosts", &format!("[masters]\nm1\n[nodes]\nn1\n[all:vars]\n{vars}\n"))
            .file("graph.json", "{\"nodes\": [{\"version\": \"1.28.5\"}],\n \"edges\": [[0, 7]]}")
            .file("broken.json", "{\"nodes\": [\n  {\"version\": \"1.28.5\"},\n  oops]}")
            .args(["--inventory", "hosts", "--plan"])
            .failure(2)
    };
    plan("upgrade_nodes_order=random").stderr_has("hosts:6:").stderr_has("write inventory (the inventory's order");
    plan("upgrade_nodes_strategy=green-blue").stderr_has("hosts:6:").stderr_has("write in-place");
    plan("upgrade_update_graph=graph.json").stderr_has("edge [0, 7] names a node that does not exist");
    plan("upgrade_update_graph=broken.json").stderr_has("broken.json:3:");
    plan("upgrade_update_graph=missing.json").stderr_has("cannot read the update graph").stderr_has("hosts:6:");
}

/// Masters at the target (a nodes-only blue-green round): b1..b3 blue, g1 green, serial 1.
fn blue_green_round() -> Cluster {
    let nodes = "b1 v1.28.5 -\nb2 v1.28.5 -\nb3 v1.28.5 -\ng1 v1.29.1 - cordoned\n";
    Cluster::new("v1.29.1", nodes, &[("nodes", &["b1", "b2", "b3"]), ("new_nodes", &["g1"])])
        .var("upgrade_target_version: v1.29.1")
        .var("upgrade_nodes_strategy: blue-green")
        .var("upgrade_nodes_serial: 1")
}

/// Each node's `schedulable/cordoned` and the annotations left on it, for comparing end states.
fn end_state(cluster: &Cluster) -> Vec<(String, bool, Vec<String>)> {
    ["b1", "b2", "b3", "g1"]
        .iter()
        .map(|n| {
            let marks = cluster.fake.annotations(n).into_keys().filter(|k| !k.ends_with("cordoned-at")).collect();
            (n.to_string(), cluster.fake.is_cordoned(n), marks)
        })
        .collect()
}

#[test]
fn blue_green_reads_the_green_nodes_again_before_each_batch_and_stops_before_evacuating_onto_nothing() {
    let cluster = blue_green_round();
    // g1 goes NotReady while b1 is evacuated, after preflight and the switch-over checked it (N2).
    cluster.write(
        "hooks/green-down.yml",
        &format!(
            "- shell: echo false > {}\n  delegate_to: localhost\n",
            cluster.fake.state_dir().join("nodes/g1/ready").display()
        ),
    );
    let cluster = cluster.var("upgrade_node_post_hook: hooks/green-down.yml");
    let out = cluster.upgrade(&[], 1);
    assert!(out.stdout.contains("only 0 of 1 green node(s) can take the load, 1 needed"), "{out}");
    assert!(out.stdout.contains("g1 is not Ready"), "{out}");
    assert!(cluster.fake.calls().iter().any(|c| c.node == "b1" && c.action == "drain"), "batch 1 ran");
    for b in ["b2", "b3"] {
        assert!(!cluster.fake.calls().iter().any(|c| c.node == b && c.action == "drain"), "{b} kept its pods\n{out}");
    }

    // With upgrade_green_min_ready 1 of 1 and g1 Ready again, the re-run evacuates the rest.
    std::fs::write(cluster.fake.state_dir().join("nodes/g1/ready"), "true\n").expect("ready");
    let cluster = cluster.var("upgrade_green_min_ready: 1");
    std::fs::write(cluster.path("hooks/green-down.yml"), "- debug: msg=ok\n").expect("hook");
    let out = cluster.upgrade(&[], 0);
    for b in ["b2", "b3"] {
        assert!(cluster.fake.calls().iter().any(|c| c.node == b && c.action == "drain"), "{b}\n{out}");
    }
}

#[test]
fn blue_green_refuses_an_upgrade_green_min_ready_the_green_group_cannot_reach() {
    let cluster = blue_green_round().var("upgrade_green_min_ready: 2");
    let out = cluster.upgrade(&[], 2);
    assert!(out.stderr.contains("upgrade_green_min_ready `2`"), "{out}");
    assert!(cluster.fake.calls().iter().all(|c| c.action.starts_with("get") || c.action.ends_with("-configmap")));
}

/// A final soak keeps the blue nodes for a rollback: deleting them as they are evacuated would leave nothing to roll
/// back to, so the two together are refused before anything is touched; so is a bad duration.
#[test]
fn blue_green_refuses_a_final_soak_with_the_blue_nodes_deleted_and_a_soak_that_is_not_a_duration() {
    let cluster = blue_green_round()
        .var("upgrade_blue_green_final_soak_seconds: 1h")
        .var("upgrade_blue_green_delete_nodes: true");
    let out = cluster.upgrade(&[], 2);
    assert!(
        out.stderr.contains(
            "upgrade_blue_green_final_soak_seconds keeps the blue nodes for a rollback, but \
             upgrade_blue_green_delete_nodes: true deletes each blue node's object as soon as it is evacuated"
        ),
        "{out}"
    );
    assert!(cluster.fake.calls().iter().all(|c| c.action.starts_with("get") || c.action.ends_with("-configmap")));
    let out = blue_green_round().var("upgrade_blue_green_final_soak_seconds: soon").upgrade(&[], 2);
    assert!(out.stderr.contains("upgrade_blue_green_final_soak_seconds"), "{out}");
}

#[test]
fn blue_green_killed_during_evacuation_then_rerun_and_rolled_back_ends_as_a_clean_round_does() {
    // The clean round: run, then roll back.
    let clean = blue_green_round();
    clean.upgrade(&[], 0);
    let clean_after_run = end_state(&clean);
    clean.upgrade(&["--rollback-blue-green"], 0);
    let clean_after_rollback = end_state(&clean);
    assert_eq!(
        clean_after_rollback.iter().map(|(n, c, _)| (n.as_str(), *c)).collect::<Vec<_>>(),
        [("b1", false), ("b2", false), ("b3", false), ("g1", true)],
        "the strategy's rollback: blue schedulable, green not"
    );

    // Killed while b1, b2 or b3 drains (N3): the re-run and the rollback end where the clean round ends.
    for killed_at in ["b1", "b2", "b3"] {
        let cluster = blue_green_round();
        cluster.fake.set_cue(killed_at, "drain_hang", "3");
        let mut running = cluster.scenario(&[]).spawn();
        cluster.wait_for(&format!("{killed_at} drain"), |c| c.node == killed_at && c.action == "drain");
        running.signal(libc::SIGKILL);
        let _ = running.wait();
        std::thread::sleep(Duration::from_secs(4));
        std::fs::remove_file(cluster.fake.state_dir().join("nodes").join(killed_at).join("drain_hang")).expect("cue");

        let rerun = cluster.upgrade(&[], 0);
        assert!(!rerun.stdout.contains("(it was cordoned before the run)"), "killed at {killed_at}\n{rerun}");
        assert_eq!(end_state(&cluster), clean_after_run, "re-run after a kill at {killed_at}\n{rerun}");
        let rollback = cluster.upgrade(&["--rollback-blue-green"], 0);
        assert!(!rollback.stdout.contains("left so"), "killed at {killed_at}\n{rollback}");
        assert_eq!(end_state(&cluster), clean_after_rollback, "rollback after a kill at {killed_at}\n{rollback}");
    }
}
