//! Who cordoned a node, read from the Node itself (issue 21 item 4): a cordon this tool makes is marked
//! (`upgrade-tool.io/cordoned-by`), so a run after a kill -9 (also `--fresh`, also from another state directory)
//! uncordons what a dead run cordoned and leaves the operator's own cordons alone (R7). The disruption guards of
//! cluster-autoscaler and Karpenter are held while a node is worked on and given back (item 8). Node names are names,
//! never shell (N18).

use std::time::{Duration, Instant};

use crate::upgrade::TestCluster;

const CORDONED_BY: &str = "upgrade-tool.io/cordoned-by";
const AUTOSCALER: &str = "cluster-autoscaler.kubernetes.io/scale-down-disabled";
const KARPENTER: &str = "karpenter.sh/do-not-disrupt";

fn wait_for_call(cluster: &TestCluster, node: &str, action: &str) {
    let deadline = Instant::now() + Duration::from_secs(90);
    while !cluster.fake.calls().iter().any(|c| c.node == node && c.action == action) {
        assert!(Instant::now() < deadline, "never saw {action} on {node}: {:?}", cluster.fake.calls());
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Starts a run, waits until `node` drains (its drain made to last `hang` seconds), and kills the run with SIGKILL.
fn kill_during_drain(cluster: &TestCluster, node: &str, args: &[&str]) {
    cluster.fake.set_cue(node, "drain_hang", "3");
    let mut running = cluster.scenario(args).spawn();
    wait_for_call(cluster, node, "drain");
    running.signal(libc::SIGKILL);
    let _ = running.wait();
    // The orphaned drain ends by itself; the next run must not meet it.
    std::thread::sleep(Duration::from_secs(4));
    cluster.fake.set_cue(node, "drain_hang", "");
    std::fs::remove_file(cluster.fake.state_dir().join("nodes").join(node).join("drain_hang")).expect("cue");
}

#[test]
fn a_fresh_run_after_a_kill_uncordons_the_node_the_dead_run_cordoned_and_keeps_the_operators_cordon() {
    // n3 was cordoned by its operator: no run's mark is on it.
    let cluster = TestCluster::new(&[("n1", "-"), ("n2", "-"), ("n3", "- cordoned")]).var("upgrade_nodes_serial: 1");
    kill_during_drain(&cluster, "n1", &[]);
    assert!(cluster.fake.is_cordoned("n1"), "the killed run left n1 cordoned");
    let marks = cluster.fake.annotations("n1");
    assert!(marks.get(CORDONED_BY).is_some_and(|r| !r.is_empty()), "the cordon is marked on the Node: {marks:?}");
    assert!(marks.contains_key("upgrade-tool.io/cordoned-at"), "{marks:?}");

    // --fresh forgets the journal: the Node still says who cordoned it (R7).
    let out = cluster.upgrade(&["--fresh"]).expect_code(0);
    assert!(!cluster.fake.is_cordoned("n1"), "n1 is given back\n{out}");
    assert!(!out.stdout.contains("n1 (it was cordoned before the run)"), "{out}");
    assert!(cluster.fake.is_cordoned("n3"), "the operator's cordon stays\n{out}");
    assert!(out.stdout.contains("n3 (it was cordoned before the run)"), "{out}");
    for n in ["n1", "n2", "n3"] {
        let left: Vec<String> = cluster.fake.annotations(n).into_keys().collect();
        assert!(left.is_empty(), "{n}: every mark and guard of the runs is removed: {left:?}");
    }
}

#[test]
fn the_disruption_guards_are_held_while_a_node_is_worked_on_and_an_operators_guard_is_left_alone() {
    let cluster =
        TestCluster::new(&[("n1", "-"), ("n2", "-")]).var("upgrade_nodes_serial: 1").var("upgrade_change_id: CHG-0042");
    // The operator keeps Karpenter off n2 for reasons of their own: that guard is theirs and stays.
    cluster.fake.run("kubectl", &["annotate", "node", "n2", &format!("{KARPENTER}=true")]);
    kill_during_drain(&cluster, "n1", &[]);
    let marks = cluster.fake.annotations("n1");
    assert_eq!(marks.get(AUTOSCALER).map(String::as_str), Some("true"), "{marks:?}");
    assert_eq!(marks.get(KARPENTER).map(String::as_str), Some("true"), "{marks:?}");
    assert_eq!(marks.get("upgrade-tool.io/change-id").map(String::as_str), Some("CHG-0042"), "{marks:?}");

    // The re-run takes over what the dead run left, and gives it all back when each node is done.
    let out = cluster.upgrade(&[]).expect_code(0);
    assert!(cluster.fake.calls().iter().any(|c| c.node == "n2" && c.argv.contains(AUTOSCALER)), "n2 was guarded");
    assert!(cluster.fake.annotations("n1").is_empty(), "n1: {:?}\n{out}", cluster.fake.annotations("n1"));
    let n2 = cluster.fake.annotations("n2");
    assert_eq!(n2.keys().collect::<Vec<_>>(), [KARPENTER], "only the operator's guard is left on n2\n{out}");
    for n in ["n1", "n2"] {
        assert!(!cluster.fake.is_cordoned(n), "{n}");
        assert_eq!(cluster.fake.upgrades(n), 1, "{n} upgraded once");
    }
}

#[test]
fn a_node_name_that_is_not_a_kubernetes_name_is_refused_before_anything() {
    let cluster = TestCluster::new(&[("n1", "-")]);
    let pwned = cluster.path("pwned");
    let name = format!("n1;touch${{IFS}}{}", pwned.display());
    // The host's own node_name, as an inventory would give it.
    let text = std::fs::read_to_string(cluster.inventory()).expect("inventory");
    let text = text.replacen("        n1:\n", &format!("        n1:\n          node_name: '{name}'\n"), 1);
    assert!(text.contains("node_name"), "{text}");
    std::fs::write(cluster.path("bad.yml"), text).expect("inventory");
    let out = crate::support::Scenario::on_cluster(&cluster.path(""), &cluster.path("bad.yml")).run().expect_code(2);
    assert!(out.stderr.contains("not Kubernetes node names") && out.stderr.contains("n1;touch"), "{out}");
    assert!(!pwned.exists(), "nothing ran the name");
    assert!(cluster.fake.calls().iter().all(|c| c.action.starts_with("get") || c.action == "-"), "nothing was touched");
}
