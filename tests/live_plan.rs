//! `upgrade plan --live`: the plan checked against the cluster (the fake cluster, over real sshd), changing nothing.

use crate::upgrade::{MASTERS, TestCluster, nodes, spec};

#[test]
fn a_live_plan_lists_a_pdb_blocked_node_and_an_unmanaged_pod_exits_1_and_only_reads() {
    let list = nodes(3, "region=a");
    let cluster = TestCluster::new(&spec(&list)).var("upgrade_nodes_serial: 2");
    cluster.fake.set_cue("n1", "pdb_pod", "guarded");
    cluster.fake.set_cue("n2", "unmanaged_pod", "bare-n2");
    let run = cluster.upgrade(&["--plan", "--live"]).expect_code(1);
    let run = run.stdout_has("n1 [n1] v1.28.5: BLOCKED: 1 drain blocker(s)");
    let run = run.stdout_has("drain blocker: PodDisruptionBudget default/guarded-pdb allows 0 disruptions");
    let run = run.stdout_has("drain blocker: pod default/bare-n2 has no controller");
    let run = run.stdout_has("n3 [n3] v1.28.5: upgrade in nodes batch 2");
    let run = run.stdout_has("m1 [m1] v1.28.5: upgrade in control-plane batch 1");
    let run = run.stdout_has("1. control-plane: m1").stdout_has("4. nodes: n1, n2\n  5. nodes: n3");
    let run = run.stdout_has("etcd db").stdout_has("result: BLOCKED");
    drop(run);

    let json = cluster.upgrade(&["--plan", "--live", "--output", "json"]).expect_code(1);
    let plan: serde_json::Value =
        serde_json::from_str(&json.stdout.clone()).unwrap_or_else(|e| json.fail(&format!("{e}")));
    assert_eq!(plan["blocked"], true);
    let host = |name: &str| plan["hosts"].as_array().unwrap().iter().find(|h| h["host"] == name).unwrap().clone();
    assert_eq!(host("n1")["action"], "blocked");
    assert_eq!(host("n1")["drain_blockers"][0]["kind"], "disruption-budget");
    assert_eq!(host("n2")["drain_blockers"][0], serde_json::json!({"kind": "unmanaged", "pod": "default/bare-n2"}));
    assert_eq!(host("n3")["action"], "upgrade");
    assert_eq!(host("m2")["current_version"], "v1.28.5");

    let writes: Vec<String> =
        cluster.fake.calls().into_iter().map(|c| c.action).filter(|a| !a.starts_with("get")).collect();
    assert!(writes.is_empty(), "the live plan only read the cluster: {writes:?}");
    for host in MASTERS.iter().copied().chain(["n1", "n2", "n3"]) {
        assert_eq!(cluster.fake.upgrades(host), 0, "{host} untouched");
        assert!(!cluster.fake.is_cordoned(host));
    }
}

#[test]
fn a_live_plan_with_nothing_in_the_way_exits_0_and_the_real_run_warns_or_stops_on_blockers() {
    let cluster = TestCluster::new(&spec(&nodes(1, "region=a")));
    cluster.upgrade(&["--plan", "--live"]).expect_code(0).stdout_has("result: nothing blocks");

    cluster.fake.set_cue("n1", "unmanaged_pod", "bare-n1");
    let strict = TestCluster::new(&spec(&nodes(1, "region=a"))).var("upgrade_fail_on_drain_blockers: true");
    strict.fake.set_cue("n1", "unmanaged_pod", "bare-n1");
    let run = strict.upgrade(&[]).expect_code(1).stderr_has("preflight: drain blockers on n1");
    drop(run);
    assert!(strict.fake.calls().iter().all(|c| c.action != "cordon"), "nothing was cordoned");

    let run = cluster.upgrade(&[]).expect_code(0);
    drop(run.stdout_has("[n1] warning: its drain would meet: pod default/bare-n1 has no controller"));
}
