//! Nodes that cannot be drained (README "Nodes that cannot be drained") on the real API server: a budget that never
//! allows a disruption refuses every eviction from n1 (HTTP 429 from the real API server, the budget's status
//! computed by the real disruption controller).

use std::time::Duration;

use serde_json::Value;

use crate::real_api::RealCluster;

const OLD: &str = "v1.33.5";
const TARGET: &str = "v1.34.4";

/// One master, n1 and n2 in batches of one; a Deployment `guarded` of one replica pinned to n1 behind a budget of
/// `minAvailable: 1`: n1's drain can never finish.
fn guarded_cluster(behavior: &str) -> Option<RealCluster> {
    guarded_by(behavior, r#"{"matchLabels": {"app": "guarded"}}"#)
}

/// The same, the budget's selector given.
fn guarded_by(behavior: &str, selector: &str) -> Option<RealCluster> {
    let cluster = RealCluster::at(OLD, &["m1"], &[("n1", OLD), ("n2", OLD)])?;
    cluster.pinned_deployment("guarded", 1, "n1");
    cluster.api.apply(&format!(
        r#"{{"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {{"name": "guarded", "namespace": "default"}},
            "spec": {{"minAvailable": 1, "selector": {selector}}}}}"#
    ));
    cluster.api.wait_for("the guarded budget computed over its running pod", Duration::from_secs(60), || {
        let pdb: Value =
            serde_json::from_str(&cluster.api.ok(&["get", "pdb", "guarded", "-o", "json"])).unwrap_or(Value::Null);
        pdb["status"]["currentHealthy"].as_u64() == Some(1)
            && pdb["status"]["observedGeneration"].as_i64() == pdb["metadata"]["generation"].as_i64()
    });
    Some(
        cluster
            .var("upgrade_nodes_serial: 1")
            .var("upgrade_nodes_drain_timeout: 6")
            .var("upgrade_validation_interval: 1")
            .var(&format!("upgrade_undrainable_node_behavior: {behavior}")),
    )
}

fn unschedulable(cluster: &RealCluster, node: &str) -> bool {
    cluster.api.node(node)["spec"]["unschedulable"].as_bool().unwrap_or(false)
}

/// `quarantine`: n1 stays cordoned and labelled, is not upgraded; n2 is upgraded; the run exits 1 and lists n1 with
/// the budget that blocked it and what finishes it.
#[test]
fn a_budget_that_never_allows_a_disruption_with_quarantine_leaves_the_node_cordoned_and_labelled_and_upgrades_the_rest()
{
    let Some(cluster) = guarded_cluster("quarantine") else { return };
    let run = cluster.upgrade(&[]).expect_code(1);
    let output = run.output();
    assert!(output.contains("[n1] PASSED OVER (could not be drained, quarantine)"), "{output}");
    assert!(output.contains("passed over, below the target (could not be drained): 1"), "{output}");
    assert!(output.contains("PodDisruptionBudget default/guarded allows 0 disruptions"), "{output}");
    assert!(output.contains("kubectl label node n1 upgrade-tool.io/status-"), "{output}");
    assert_eq!(cluster.kubelet_version("n1"), OLD, "n1 was not upgraded");
    assert!(unschedulable(&cluster, "n1"), "n1 stays cordoned");
    assert_eq!(cluster.api.node("n1")["metadata"]["labels"]["upgrade-tool.io/status"], "quarantined");
    assert_eq!(cluster.kubelet_version("n2"), TARGET, "the run went on with n2");
    assert!(!unschedulable(&cluster, "n2"));
}

/// `schedule`: n1 is given back (uncordoned), not upgraded, not labelled; n2 is upgraded; exit 1.
#[test]
fn with_schedule_the_undrainable_node_is_uncordoned_not_upgraded_and_the_run_goes_on() {
    let Some(cluster) = guarded_cluster("schedule") else { return };
    let output = cluster.upgrade(&[]).expect_code(1).output().to_string();
    assert!(output.contains("[n1] PASSED OVER (could not be drained, schedule)"), "{output}");
    assert_eq!(cluster.kubelet_version("n1"), OLD);
    assert!(!unschedulable(&cluster, "n1"), "n1 got its capacity back");
    assert!(cluster.api.node("n1")["metadata"]["labels"]["upgrade-tool.io/status"].is_null());
    assert_eq!(cluster.kubelet_version("n2"), TARGET);
}

/// A budget whose selector is `matchExpressions` only is evaluated as the API server evaluates it: the live plan names
/// it as n1's drain blocker and blocks (exit 1), and the run's drain meets it.
#[test]
fn a_budget_selecting_by_match_expressions_blocks_in_the_live_plan() {
    let selector = r#"{"matchExpressions": [{"key": "app", "operator": "In", "values": ["guarded", "other"]}]}"#;
    let Some(cluster) = guarded_by("fail", selector) else { return };
    cluster
        .upgrade(&["--plan", "--live"])
        .expect_code(1)
        .output_has("PodDisruptionBudget default/guarded allows 0 disruptions (guards pod default/guarded-");
}

/// n1 and n2 in batches of one; n1's post hook (after its uncordon) puts a pod no controller owns on n2: the drain
/// blocker appears after preflight read them, while the run goes.
fn a_bare_pod_appears_on_n2_during_batch_1(extra: &[&str]) -> Option<RealCluster> {
    let cluster = RealCluster::at(OLD, &["m1"], &[("n1", OLD), ("n2", OLD)])?;
    let pod = r#"{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "lone", "namespace": "default"},
        "spec": {"nodeName": "n2", "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}]}}"#;
    std::fs::write(cluster.path("lone.json"), pod).expect("pod");
    let post = format!(
        "- name: a bare pod on n2 once n1 is done\n  when: inventory_hostname == 'n1'\n  shell: \"{{{{ upgrade_kubectl \
         }}}} apply -f {}\"\n",
        cluster.path("lone.json").display()
    );
    std::fs::write(cluster.path("post.yml"), post).expect("post hook");
    let post = cluster.path("post.yml").display().to_string();
    let mut cluster = cluster
        .var("upgrade_nodes_serial: 1")
        .var("upgrade_validation_interval: 1")
        .var(&format!("upgrade_node_post_hook: \"{post}\""));
    for line in extra {
        cluster = cluster.var(line);
    }
    Some(cluster)
}

/// The drain blockers are read again before each batch (from the validation's own read of the pods): a bare pod put
/// on n2 during batch 1 stops the run before batch 2 with `upgrade_fail_on_drain_blockers: true`, though preflight
/// found nothing; n2 is never cordoned.
#[test]
fn a_drain_blocker_that_appears_during_the_run_stops_the_next_batch_when_blockers_are_fatal() {
    let Some(cluster) = a_bare_pod_appears_on_n2_during_batch_1(&["upgrade_fail_on_drain_blockers: true"]) else {
        return;
    };
    let run = cluster.upgrade(&[]).expect_code(1);
    let output = run.output();
    assert!(
        output.contains(
            "drain blockers before batch 2 (upgrade_fail_on_drain_blockers): n2 (pod default/lone has no controller"
        ),
        "{output}"
    );
    assert_eq!(cluster.kubelet_version("n1"), TARGET, "batch 1 went through");
    assert_eq!(cluster.kubelet_version("n2"), OLD, "n2 was not started");
    assert!(!unschedulable(&cluster, "n2"), "n2 was never cordoned");
}

/// With the validation off the blockers are read on their own before each batch; not fatal, the new one is said as a
/// warning before n2's batch and the run goes on (drain --force deletes the bare pod).
#[test]
fn with_validation_off_the_blockers_are_still_read_again_and_said_before_the_next_batch() {
    let Some(cluster) = a_bare_pod_appears_on_n2_during_batch_1(&["upgrade_validation_timeout: 0"]) else { return };
    let run = cluster.upgrade(&[]).expect_code(0);
    run.output_has("warning: before batch 2, read again: its drain would meet: pod default/lone has no controller");
    assert_eq!(cluster.kubelet_version("n2"), TARGET);
}

/// `upgrade_drain_fallback: disable-eviction` (kubespray's drain_fallback_enabled): n1's drain times out on the
/// budget, is retried with `--disable-eviction` (the real kubectl deletes the pod past the budget the real API server
/// enforces), names the budget it overrode, and n1 is upgraded; so is n2.
#[test]
fn a_drain_that_timed_out_is_retried_with_disable_eviction_naming_the_budget_it_overrode() {
    let Some(cluster) = guarded_cluster("fail") else { return };
    let cluster = cluster.var("upgrade_drain_fallback: disable-eviction").var("upgrade_drain_fallback_timeout: 60");
    let run = cluster.upgrade(&[]).expect_code(0);
    let output = run.output();
    assert!(
        output.contains(
            "[n1] drain timed out after 6s; retrying with --disable-eviction for 60s (upgrade_drain_fallback), \
             deleting pods past PodDisruptionBudget default/guarded"
        ),
        "{output}"
    );
    assert!(output.contains("[n1] drained with --disable-eviction: overrode PodDisruptionBudget default/guarded"));
    assert_eq!(cluster.kubelet_version("n1"), TARGET, "n1 was drained past its budget and upgraded");
    assert_eq!(cluster.kubelet_version("n2"), TARGET);
    assert!(!unschedulable(&cluster, "n1"));
}
