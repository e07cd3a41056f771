//! `upgrade plan --live`: the plan checked against the cluster (the fake cluster, over real sshd; the drain simulation
//! on the real API server), changing nothing.

use crate::real_api::RealCluster;
use crate::upgrade::{MASTERS, TestCluster, nodes, spec};

/// The kubelets' version before the run on the real API server.
const REAL_OLD: &str = "v1.33.5";

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
    let run = run.stdout_has("1. control-plane: m1").stdout_has("4. nodes: n1, n2\n").stdout_has("5. nodes: n3\n");
    // The fake's pods request nothing: they need a node, not room; the budget that allows none blocks n1's batch.
    let run = run.stdout_has(
        "problem: drain simulation of batch 4 (nodes: n1, n2): BLOCKED: PodDisruptionBudget default/guarded-pdb \
         allows no disruption: it refuses every eviction",
    );
    let run = run.stdout_has("     best-effort (no requests, need a node, not room): default/web-n1 (on n1)");
    let run = run.stdout_has("5. nodes: n3\n     drain simulation: fits\n");
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

/// A read the simulation needs that fails makes the batch UNREADABLE, never "fits": n1 runs a StatefulSet's pod with a
/// claim, so the claims are read, and the fake API server does not serve them (`get pvc` fails).
#[test]
fn a_drain_simulation_whose_claims_cannot_be_read_is_unreadable_and_blocks_the_plan() {
    let cluster = TestCluster::new(&spec(&nodes(1, "region=a")));
    let pods = serde_json::json!({"kind": "List", "items": [{
        "metadata": {"name": "db-0", "namespace": "default", "labels": {"app": "db"},
                     "ownerReferences": [{"kind": "StatefulSet", "name": "db", "controller": true}]},
        "spec": {"nodeName": "n1", "containers": [{"name": "db"}],
                 "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data-db-0"}}]},
        "status": {"phase": "Running"}}]});
    cluster.write("pods.json", &pods.to_string());
    cluster.write(
        "kubectl-wrapper",
        &format!(
            "#!/bin/sh\nif [ \"$*\" = \"get pods --all-namespaces -o json\" ]; then cat {}; exit 0; fi\nexec {} \"$@\"\n",
            cluster.path("pods.json").display(),
            cluster.fake.kubectl_command()
        ),
    );
    let kubectl = format!("sh {}", cluster.path("kubectl-wrapper").display());
    let extra = serde_json::json!({ "upgrade_kubectl": kubectl }).to_string();
    let run = cluster.upgrade(&["--plan", "--live", "-e", &extra]).expect_code(1);
    let run =
        run.stdout_has("nodes: n1\n     drain simulation: UNREADABLE: pod default/db-0's volumes cannot be followed: ");
    let run = run.stdout_has("cannot read the cluster's claims on m1");
    let run = run.stdout_has("problem: drain simulation of batch 4 (nodes: n1): UNREADABLE: ");
    drop(run.stdout_lacks("drain simulation: fits\n     evicts: default/db-0"));
}

/// The drain simulation on the real API server: m1 (kubeadm's control-plane taint) and n1, n2, n3 of 2 CPUs and 4 GiB
/// each, a Deployment of one 1500m pod on each node, drained one node a batch. n1's pod needs 1500m where n2 and n3
/// have 500m left: the batch is BLOCKED with the numbers and the pod's reason, and the plan exits 1. Once n3's
/// Deployment is gone, the same pod fits on n3 and nothing blocks.
#[test]
fn a_batch_whose_evicted_pods_do_not_fit_is_blocked_in_the_live_plan_and_one_that_fits_is_not() {
    let Some(cluster) = RealCluster::at(REAL_OLD, &["m1"], &[("n1", REAL_OLD), ("n2", REAL_OLD), ("n3", REAL_OLD)])
    else {
        return;
    };
    let cluster = cluster.var("upgrade_nodes_serial: 1");
    let sized = serde_json::json!({"cpu": "2", "memory": "4Gi", "pods": "110"});
    for node in ["n1", "n2", "n3"] {
        let patch = serde_json::json!({"status": {"allocatable": sized, "capacity": sized}}).to_string();
        cluster.api.ok(&["patch", "node", node, "--subresource=status", "--type=merge", "-p", &patch]);
    }
    // Each Deployment is placed by the real scheduler on the one node left schedulable.
    for (app, node) in [("a", "n1"), ("b", "n2"), ("c", "n3")] {
        for other in ["n1", "n2", "n3"].into_iter().filter(|n| *n != node) {
            cluster.api.ok(&["cordon", other]);
        }
        cluster.api.apply(&format!(
            r#"{{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {{"name": "{app}", "namespace": "default"}},
              "spec": {{"replicas": 1, "selector": {{"matchLabels": {{"app": "{app}"}}}},
                "template": {{"metadata": {{"labels": {{"app": "{app}"}}}},
                  "spec": {{"containers": [{{"name": "c", "image": "registry.k8s.io/pause:3.10",
                    "resources": {{"requests": {{"cpu": "1500m", "memory": "1Gi"}}}}}}]}}}}}}}}"#
        ));
        cluster.wait_for_pods(app, 1);
        for other in ["n1", "n2", "n3"] {
            cluster.api.ok(&["uncordon", other]);
        }
    }

    let blocked = cluster.upgrade(&["--plan", "--live"]).expect_code(1);
    let blocked = blocked
        .stdout_has("  2. nodes: n1\n     drain simulation: BLOCKED: 1 of 1 evicted pod(s) would stay Pending\n");
    let blocked = blocked.stdout_has(
        "capacity: the evicted pods request cpu 1500m, memory 1Gi; free on the 2 schedulable node(s) that stay (n2, \
         n3): cpu 1, memory 6Gi; tainted, only for pods that tolerate it: m1 \
         (node-role.kubernetes.io/control-plane:NoSchedule); taking nothing: n1 (in this batch)",
    );
    let blocked = blocked.stdout_has("untolerated taint node-role.kubernetes.io/control-plane:NoSchedule on m1");
    let blocked = blocked.stdout_has("insufficient cpu on n2 (500m free), n3 (500m free)");
    let blocked = blocked.stdout_has("result: BLOCKED");
    drop(blocked);
    let json = cluster.upgrade(&["--plan", "--live", "--output", "json"]).expect_code(1).json();
    let batch = json["batches"].as_array().and_then(|b| b.iter().find(|b| b["hosts"] == serde_json::json!(["n1"])));
    let simulation = &batch.expect("n1's batch")["drain_simulation"];
    assert_eq!(simulation["verdict"], "blocked", "{simulation}");
    assert_eq!(simulation["evicted"][0]["outcome"], "pending", "{simulation}");
    assert_eq!(simulation["evicted"][0]["cpu_millis"], 1500, "{simulation}");
    assert!(
        simulation["evicted"][0]["reason"].as_str().unwrap_or_default().contains("insufficient cpu"),
        "{simulation}"
    );
    assert!(!cluster.unschedulable("n1"), "the plan only read");

    // n3's Deployment gone, n1's pod fits there; n2's then goes to n1, back by then.
    cluster.api.ok(&["delete", "deployment", "c", "--wait=true"]);
    cluster.api.wait_for("c's pod gone", std::time::Duration::from_secs(60), || {
        cluster.api.ok(&["get", "pods", "-l", "app=c", "-o", "name"]).trim().is_empty()
    });
    let fits = cluster.upgrade(&["--plan", "--live"]).expect_code(0);
    let fits = fits.stdout_has("  2. nodes: n1\n     drain simulation: fits\n");
    drop(fits.stdout_lacks("BLOCKED").stdout_has("result: nothing blocks"));
}
