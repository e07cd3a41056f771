//! The validation between batches and the batch soak (README "Validation between batches") on the real API server: a Deployment pinned
//! to the first batch's node loses its pods to the drain; while the node is held by a taint after its upgrade the
//! pods stay Pending, so the Deployment is not available and the next batch must not start. The scheduler, the
//! ReplicaSet controller and kwok's kubelets bring it back for real once the taint goes.

use std::time::Duration;

use serde_json::Value;

use crate::real_api::RealCluster;

const OLD: &str = "v1.33.5";
const TARGET: &str = "v1.34.4";

/// One master and two nodes in batches of one, a Deployment `web` of two replicas that runs only on n1, and n1's mid
/// hook (after its upgrade, before its uncordon) tainting n1 with `hold=yes:NoSchedule`, removed `release_after`
/// seconds later (never when `None`). n2's pre-cordon hook writes what `web` has available when n2's turn comes.
fn pinned_workload_cluster(release_after: Option<u32>, extra: &[&str]) -> Option<RealCluster> {
    let cluster = RealCluster::at(OLD, &["m1"], &[("n1", OLD), ("n2", OLD)])?;
    cluster.pinned_deployment("web", 2, "n1");
    cluster.api.wait_for("web available on n1", Duration::from_secs(60), || available(&cluster) == Some(2));
    let release = match release_after {
        Some(seconds) => format!(
            "\n    - name: release n1 a little later\n      shell: \"(sleep {seconds}; {{{{ upgrade_kubectl }}}} taint \
             node n1 hold-) >/dev/null 2>&1 &\"\n"
        ),
        None => String::new(),
    };
    let mid = format!(
        "- when: inventory_hostname == 'n1'\n  block:\n    - name: hold n1 after its upgrade\n      shell: \
         \"{{{{ upgrade_kubectl }}}} taint node n1 hold=yes:NoSchedule\"{release}"
    );
    std::fs::write(cluster.path("mid.yml"), mid).expect("mid hook");
    let seen = cluster.path("web-when-n2-starts");
    let pre_cordon = format!(
        "- name: what web has available when n2's turn comes\n  shell: \"{{{{ upgrade_kubectl }}}} get deployment web \
         -o jsonpath='{{.status.availableReplicas}}' > {}\"\n  when: inventory_hostname == 'n2'\n",
        seen.display()
    );
    std::fs::write(cluster.path("pre_cordon.yml"), pre_cordon).expect("pre-cordon hook");
    let (mid, pre_cordon) =
        (cluster.path("mid.yml").display().to_string(), cluster.path("pre_cordon.yml").display().to_string());
    let mut cluster = cluster
        .var("upgrade_nodes_serial: 1")
        .var("upgrade_validation_interval: 1")
        .var(&format!("upgrade_node_mid_hook: \"{mid}\""))
        .var(&format!("upgrade_node_pre_cordon_hook: \"{pre_cordon}\""));
    for line in extra {
        cluster = cluster.var(line);
    }
    Some(cluster)
}

fn available(cluster: &RealCluster) -> Option<u64> {
    let deployment: Value =
        serde_json::from_str(&cluster.api.ok(&["get", "deployment", "web", "-o", "json"])).unwrap_or(Value::Null);
    Some(deployment["status"]["availableReplicas"].as_u64().unwrap_or(0))
}

/// The run waits, between n1's batch and n2's, until `web` is available again; with `upgrade_validate_count: 2` it
/// takes two valid reads in a row before n2 is cordoned.
#[test]
fn the_next_batch_waits_for_a_deployment_to_be_available_again_and_count_two_needs_two_valid_reads() {
    let Some(cluster) = pinned_workload_cluster(Some(6), &["upgrade_validate_count: 2"]) else { return };
    let run = cluster.upgrade(&[]).expect_code(0).output_has("result: success");
    let output = run.output();
    assert!(output.contains("before batch 2: waiting for default/web: 0/2 available"), "{output}");
    assert!(output.contains("cluster valid before batch 2: 1/2 reads"), "{output}");
    assert!(output.contains("cluster valid before batch 2 (2 reads in a row)"), "{output}");
    let seen = std::fs::read_to_string(cluster.path("web-when-n2-starts")).expect("n2's pre-cordon hook ran");
    assert_eq!(seen.trim(), "2", "web was whole again when n2's turn came");
    assert_eq!(cluster.kubelet_version("n2"), TARGET);
}

/// A Deployment that does not come back within `upgrade_validation_timeout` stops the run before the next batch,
/// naming it: n2 is neither cordoned nor upgraded, and the run exits 1.
#[test]
fn a_deployment_not_available_within_the_timeout_stops_the_run_before_the_next_batch_naming_it() {
    let Some(cluster) = pinned_workload_cluster(None, &["upgrade_validation_timeout: 8"]) else { return };
    let run = cluster.upgrade(&[]).expect_code(1);
    let output = run.output();
    assert!(
        output.contains(
            "the cluster was not valid within upgrade_validation_timeout 8s before batch 2: default/web: 0/2 available"
        ),
        "{output}"
    );
    assert_eq!(cluster.kubelet_version("n1"), TARGET, "n1's batch went through");
    assert_eq!(cluster.kubelet_version("n2"), OLD, "n2 was not started");
    assert!(!cluster.path("web-when-n2-starts").exists(), "n2's turn never came");
    assert_ne!(cluster.api.node("n2")["spec"]["unschedulable"], Value::Bool(true), "n2 was never cordoned");
}

/// `upgrade_batch_soak_seconds`: after n1's batch validates, the run watches it; n1 going NotReady during the soak
/// (kwok lets go of it and its Ready condition turns False, as when a kubelet stops posting) fails the batch, and n2
/// is not started.
#[test]
fn a_batch_whose_node_goes_not_ready_during_its_soak_fails_and_the_next_is_not_started() {
    let Some(cluster) = RealCluster::at(OLD, &["m1"], &[("n1", OLD), ("n2", OLD)]) else { return };
    let patch = r#"{"status":{"conditions":[{"type":"Ready","status":"False","reason":"KubeletNotReady","message":"soak test"}]}}"#;
    std::fs::write(cluster.path("not-ready.json"), patch).expect("patch");
    let post = format!(
        "- name: n1 stops being Ready a little after its uncordon\n  when: inventory_hostname == 'n1'\n  shell: \"(sleep \
         4; {{{{ upgrade_kubectl }}}} annotate node n1 kwok.x-k8s.io/node-; {{{{ upgrade_kubectl }}}} patch node n1 \
         --subresource=status --type=strategic --patch-file {}) >/dev/null 2>&1 &\"\n",
        cluster.path("not-ready.json").display()
    );
    std::fs::write(cluster.path("post.yml"), post).expect("post hook");
    let post = cluster.path("post.yml").display().to_string();
    let cluster = cluster
        .var("upgrade_nodes_serial: 1")
        .var("upgrade_validation_interval: 1")
        .var("upgrade_batch_soak_seconds: 30")
        .var(&format!("upgrade_node_post_hook: \"{post}\""));
    let run = cluster.upgrade(&[]).expect_code(1);
    let output = run.output();
    assert!(output.contains("soaking batch 1 for 30s (upgrade_batch_soak_seconds), until "), "{output}");
    assert!(
        output.contains(
            "batch 1 failed its soak of 30s (upgrade_batch_soak_seconds): node n1 to be Ready (it was before the run)"
        ),
        "{output}"
    );
    assert_eq!(cluster.kubelet_version("n2"), OLD, "n2 was not started");
    assert_ne!(cluster.api.node("n2")["spec"]["unschedulable"], Value::Bool(true), "n2 was never cordoned");
}
