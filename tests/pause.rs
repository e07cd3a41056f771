//! Pause from anywhere (README "Pause from anywhere") on the real API server: `upgrade pause` from another directory
//! (no state directory of the run's) while batch 1 is in flight stops batch 2 from starting; the run waits, still
//! renewing its lock, and `upgrade status` says who paused and where it waits; `upgrade resume` lets it go on. A pause
//! with no run in progress holds for the next run, which stops at its first gate once `upgrade_pause_timeout` passes,
//! with nothing cordoned; resumed, the same command finishes.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::real_api::RealCluster;
use crate::support::{Outcome, Scenario};

const OLD: &str = "v1.33.5";
const TARGET: &str = "v1.34.4";

/// The master at the target, n1 and n2 at OLD in batches of one; a lease of 10 s, renewed every 2 s, so the pause
/// and resume race with the run's renewals. n1's post hook (after its uncordon) says n1 is in flight and holds until
/// the test says go.
fn two_batches(extra: &[&str]) -> Option<RealCluster> {
    let cluster = RealCluster::at(TARGET, &["m1"], &[("n1", OLD), ("n2", OLD)])?;
    let post = format!(
        "- when: inventory_hostname == 'n1'\n  block:\n    - name: n1 is in flight\n      shell: \"touch {in_flight}\"\n    \
         - name: hold n1 until the test says go\n      shell: \"while [ ! -e {go} ]; do sleep 0.2; done\"\n",
        in_flight = cluster.path("n1-in-flight").display(),
        go = cluster.path("go").display()
    );
    std::fs::write(cluster.path("post.yml"), post).expect("post hook");
    let post = cluster.path("post.yml").display().to_string();
    let mut cluster = cluster
        .var("upgrade_nodes_serial: 1")
        .var("upgrade_validation_interval: 1")
        .var("upgrade_cluster_lock_ttl: 10")
        .var(&format!("upgrade_node_post_hook: \"{post}\""));
    for line in extra {
        cluster = cluster.var(line);
    }
    Some(cluster)
}

/// `upgrade pause`, `resume` or `status` from a directory of its own: another operator's machine.
fn from_elsewhere(cluster: &RealCluster, command: &str, extra: &[&str]) -> Outcome {
    let elsewhere = cluster.path("elsewhere");
    std::fs::create_dir_all(&elsewhere).expect("another operator's directory");
    let inventory = cluster.inventory(&cluster.api.kubectl_command());
    Scenario::in_dir(&elsewhere).arg(command).inventory(&inventory).args(extra).run()
}

fn wait_for_file(path: &Path, limit: Duration) {
    let started = Instant::now();
    while !path.exists() {
        assert!(started.elapsed() < limit, "{} never appeared", path.display());
        std::thread::sleep(Duration::from_millis(200));
    }
}

fn cordoned(cluster: &RealCluster, node: &str) -> bool {
    cluster.api.node(node)["spec"]["unschedulable"].as_bool().unwrap_or(false)
}

fn lock(cluster: &RealCluster) -> Value {
    let text = cluster.api.ok(&["-n", "kube-system", "get", "configmap", "upgrade-lock", "-o", "json"]);
    serde_json::from_str(&text).expect("the lock's JSON")
}

fn state_dir(cluster: &RealCluster) -> PathBuf {
    cluster.path("run-state")
}

#[test]
fn a_pause_from_another_machine_stops_the_next_batch_until_resume_lets_it_go_on() {
    let Some(cluster) = two_batches(&[]) else { return };
    let inventory = cluster.inventory(&cluster.api.kubectl_command());
    let run = Scenario::on_cluster(cluster.dir.path(), &inventory)
        .args(["--state-dir", &state_dir(&cluster).display().to_string()])
        .spawn();
    wait_for_file(&cluster.path("n1-in-flight"), Duration::from_secs(300));

    let paused = from_elsewhere(&cluster, "pause", &[]).expect_code(0);
    let paused = paused.stdout_has("cluster lock kube-system/upgrade-lock paused by ");
    drop(paused.stdout_has("finishes what is in flight and waits before its next master or batch"));
    let by = lock(&cluster)["data"]["paused_by"].as_str().expect("the lock names who paused").to_string();
    assert!(by.contains('@'), "user@machine: {by}");
    from_elsewhere(&cluster, "pause", &[]).expect_code(0).stdout_has(&format!("already paused by {by}"));
    std::fs::write(cluster.path("go"), "").expect("go");

    // Batch 1 finishes; batch 2 waits at its gate, and status on another machine says so.
    let started = Instant::now();
    let seen = loop {
        assert!(started.elapsed() < Duration::from_secs(120), "status never showed the run waiting before batch 2");
        let out = from_elsewhere(&cluster, "status", &["--output", "json"]).expect_code(0);
        let found: Value = serde_json::from_str(out.stdout_text().trim()).expect("one JSON document");
        if found["progress"]["paused_before"] == "batch 2" {
            break found;
        }
        std::thread::sleep(Duration::from_millis(500));
    };
    assert_eq!(seen["paused"]["by"], by.as_str(), "{seen}");
    assert_eq!(seen["in_progress"], true, "{seen}");
    let text = from_elsewhere(&cluster, "status", &[]).expect_code(0);
    drop(text.stdout_has(&format!("  PAUSED by {by} at ")).stdout_has("the run waits before batch 2 until"));
    // Held there: several renewals go by (every 2 s), and n2 is neither cordoned nor upgraded.
    std::thread::sleep(Duration::from_secs(8));
    assert!(!cordoned(&cluster, "n2"), "n2 was not cordoned while paused");
    assert_eq!(cluster.kubelet_version("n2"), OLD, "n2 was not started while paused");
    assert_eq!(cluster.kubelet_version("n1"), TARGET, "batch 1 finished what it had in flight");
    let renewed = lock(&cluster)["data"]["renewTime"].clone();
    std::thread::sleep(Duration::from_secs(3));
    assert_ne!(lock(&cluster)["data"]["renewTime"], renewed, "the paused run keeps renewing its lock");
    assert_eq!(lock(&cluster)["data"]["paused_by"], by.as_str(), "its renewals keep the pause");

    let resumed = from_elsewhere(&cluster, "resume", &[]).expect_code(0);
    drop(resumed.stdout_has(&format!("cluster lock kube-system/upgrade-lock resumed by {by}")));
    let run = run.finish_within(Duration::from_secs(300)).expect_code(0).output_has("result: success");
    let output = run.output();
    assert!(output.contains(&format!("PAUSED by {by} at ")), "{output}");
    assert!(output.contains("batch 2 waits, the cluster lock kept, until `upgrade resume"), "{output}");
    assert!(output.contains(&format!("resumed by {by} after ")), "{output}");
    // The pause and the renewals raced (Conflict on one side or the other) without a warning or a fence.
    assert!(!output.contains("cannot renew the cluster lock"), "{output}");
    assert!(!output.contains("lost the cluster lock"), "{output}");
    assert_eq!(cluster.kubelet_version("n2"), TARGET);
    from_elsewhere(&cluster, "resume", &[]).expect_code(0).stdout_has("is not paused: nothing to resume");
}

#[test]
fn a_pause_with_no_run_holds_the_next_which_stops_at_its_first_gate_after_the_pause_timeout_then_resumes() {
    let Some(cluster) = two_batches(&["upgrade_pause_timeout: 8"]) else { return };
    std::fs::write(cluster.path("go"), "").expect("n1 is not held");
    let paused = from_elsewhere(&cluster, "pause", &[]).expect_code(0);
    drop(paused.stdout_has("no upgrade in progress: a run started now waits before its first master or batch"));

    let stopped = cluster.upgrade(&["--state-dir", &state_dir(&cluster).display().to_string()]).expect_code(1);
    let output = stopped.output();
    assert!(output.contains("the cluster's upgrades are paused (by "), "said when the lock was taken: {output}");
    assert!(
        output.contains("(upgrade pause) for longer than upgrade_pause_timeout 8s before batch 1; the masters and batches after it were not started"),
        "{output}"
    );
    for node in ["n1", "n2"] {
        assert!(!cordoned(&cluster, node), "{node} was never cordoned");
        assert_eq!(cluster.kubelet_version(node), OLD, "{node} was not started");
    }
    assert_eq!(cluster.upgrades("n1"), 0);

    // The stopped run's release kept the pause: resume clears it, and the same command finishes.
    from_elsewhere(&cluster, "resume", &[]).expect_code(0).stdout_has("resumed by ");
    let run = cluster.upgrade(&["--state-dir", &state_dir(&cluster).display().to_string()]).expect_code(0);
    drop(run.output_has("result: success"));
    assert_eq!(cluster.kubelet_version("n2"), TARGET);
}
