//! The cluster-wide lock: a lease in a ConfigMap in kube-system, seen through the fake cluster from several runs
//! over real sshd (the races of two controllers are in tests/lease.rs).

use std::time::{Duration, Instant};

use crate::support::fake_cluster::FakeCluster;
use crate::support::{Outcome, Scenario};
use crate::upgrade::{TestCluster, nodes, spec};

fn lock_json(fake: &FakeCluster) -> Option<String> {
    let out = fake.run("kubectl", &["-n", "kube-system", "get", "configmap", "upgrade-lock", "-o", "json"]);
    out.status.success().then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

/// A lock written by an earlier version of this tool on another controller, last renewed at `renewed` (seconds since
/// the epoch): it reads as another controller's, never this one's, stale after the TTL.
fn foreign_lock(fake: &FakeCluster, renewed: u64) {
    let renewed = format!("--from-literal=renewed={renewed}");
    let out = fake.run(
        "kubectl",
        &[
            "-n",
            "kube-system",
            "create",
            "configmap",
            "upgrade-lock",
            "--from-literal=holder=ops@elsewhere",
            "--from-literal=where=/srv/other/.upgrade-state",
            "--from-literal=started=2026-11-23T09:00:00Z",
            "--from-literal=run=20261123T090000Z-77",
            &renewed,
        ],
    );
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
}

fn now() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs()
}

fn unlock(cluster: &TestCluster, extra: &[&str]) -> Outcome {
    Scenario::in_dir(&cluster.path("")).arg("unlock").inventory(cluster.inventory()).args(extra).run()
}

#[test]
fn a_second_run_from_another_state_directory_is_refused_naming_the_first_which_renews_and_releases() {
    let list = nodes(2, "region=a");
    // A lease of 20 s is renewed every 4 s, and a renewal may take up to 10 s (half the lease) before the run holds
    // back: a loaded machine's slow kubectl is not mistaken for a lost lock.
    let cluster = TestCluster::new(&spec(&list)).var("upgrade_cluster_lock_ttl: 20");
    // Every drain and upgrade step takes 3 s: the first run is still going when the second starts, and lasts past a
    // renewal.
    std::fs::write(cluster.fake.state_dir().join("delay"), "3").unwrap();
    let first_state = cluster.path("first-state");
    let second_state = cluster.path("second-state");
    let first = cluster.scenario(&["--state-dir", &first_state.display().to_string()]).spawn();
    let started = Instant::now();
    while !cluster.fake.calls().iter().any(|c| c.action == "cordon") {
        assert!(started.elapsed() < Duration::from_secs(60), "the first run never cordoned a node");
        std::thread::sleep(Duration::from_millis(100));
    }

    let second = cluster.upgrade(&["--state-dir", &second_state.display().to_string()]).expect_code(2);
    let second = second.stderr_has("another upgrade holds the cluster lock kube-system/upgrade-lock");
    let first_dir = first_state.canonicalize().unwrap().display().to_string();
    let second = second.stderr_has(&first_dir);
    drop(second);

    let first = first.finish().expect_code(0).stdout_has("cluster lock kube-system/upgrade-lock released");
    drop(first);
    let actions: Vec<String> = cluster.fake.calls().into_iter().map(|c| c.action).collect();
    assert!(
        actions.iter().filter(|a| *a == "replace-configmap").count() >= 2,
        "the first run renewed its lease (and released it), conditionally: {actions:?}"
    );
    assert_eq!(
        actions.iter().filter(|a| *a == "create-configmap").count(),
        1,
        "one take, refused no write: {actions:?}"
    );
    let lease: serde_json::Value = serde_json::from_str(&lock_json(&cluster.fake).expect("the lease stays")).unwrap();
    assert_eq!(lease["data"]["holderIdentity"], "", "released after the run: {lease}");
}

#[test]
fn a_stale_lock_is_taken_over_with_a_warning() {
    let cluster = TestCluster::new(&spec(&nodes(1, "region=a")));
    foreign_lock(&cluster.fake, now() - 3600);
    let run = cluster.upgrade(&[]).expect_code(0);
    let run = run.stdout_has("warning: taking over the cluster lock kube-system/upgrade-lock from ops@elsewhere");
    let _ = run.stdout_has("not renewed within its lease (900s)");
    assert_eq!(cluster.fake.version("n1"), "v1.29.1");
    assert!(lock_json(&cluster.fake).unwrap().contains(r#""holderIdentity": """#), "released at the end");
}

#[test]
fn a_live_lock_of_another_controller_refuses_the_run_until_unlock_removes_it() {
    let cluster = TestCluster::new(&spec(&nodes(1, "region=a")));
    foreign_lock(&cluster.fake, now());
    let run =
        cluster.upgrade(&[]).expect_code(2).stderr_has("ops@elsewhere (state directory /srv/other/.upgrade-state)");
    drop(run.stderr_has("upgrade unlock"));
    // Besides the permission questions (reads), the lock is all it asked for: it never read the nodes.
    let actions: Vec<String> =
        cluster.fake.calls().into_iter().map(|c| c.action).filter(|a| a != "get-can-i").collect();
    assert_eq!(
        actions,
        ["create-configmap", "get-configmap"],
        "the foreign lock and the read of its holder: the cluster was not even read"
    );

    // Renewed within its lease: refused without --force (tests/lease.rs has --force), and without --yes too.
    let live = unlock(&cluster, &["--yes"]).expect_code(2).stderr_has("its run may be alive");
    drop(live.stdout_has("held by ops@elsewhere"));
    std::fs::remove_dir_all(cluster.fake.state_dir().join("configmaps/kube-system/upgrade-lock")).unwrap();
    foreign_lock(&cluster.fake, now() - 3600);
    let refused = unlock(&cluster, &[]).expect_code(2).stderr_has("pass --yes");
    drop(refused);
    assert!(!lock_json(&cluster.fake).unwrap().contains("holderIdentity"), "no confirmation, no change");
    let removed = unlock(&cluster, &["--yes"]).expect_code(0).stdout_has("held by ops@elsewhere");
    drop(removed.stdout_has("cluster lock kube-system/upgrade-lock released"));
    assert!(lock_json(&cluster.fake).unwrap().contains(r#""holderIdentity": """#));
    unlock(&cluster, &["--yes"]).expect_code(0).stdout_has("nothing to release");
    cluster.upgrade(&[]).expect_code(0);
}

fn status(cluster: &TestCluster, extra: &[&str]) -> Outcome {
    Scenario::in_dir(&cluster.path("")).arg("status").inventory(cluster.inventory()).args(extra).run()
}

#[test]
fn status_from_anywhere_shows_the_run_in_progress_its_phase_batch_and_hosts_then_its_result() {
    let list = nodes(3, "region=a");
    let cluster = TestCluster::new(&spec(&list));
    // Every drain and upgrade step takes 2 s: the run is in its nodes phase long enough to be looked at.
    std::fs::write(cluster.fake.state_dir().join("delay"), "2").unwrap();
    let first_state = cluster.path("first-state");
    let first = cluster.scenario(&["--state-dir", &first_state.display().to_string()]).spawn();

    // Another controller knows nothing of the first's state directory: status reads the cluster's lock.
    let started = Instant::now();
    let seen = loop {
        assert!(started.elapsed() < Duration::from_secs(120), "status never showed the nodes phase");
        let out = status(&cluster, &["--output", "json"]).expect_code(0);
        let found: serde_json::Value = serde_json::from_str(out.stdout_text().trim()).expect("one JSON document");
        if found["progress"]["phase"] == "nodes" && found["progress"]["batch"].as_u64() >= Some(2) {
            break found;
        }
        std::thread::sleep(Duration::from_millis(300));
    };
    assert_eq!(seen["in_progress"], true, "{seen}");
    assert_eq!(seen["lock"], "kube-system/upgrade-lock", "{seen}");
    assert_eq!(seen["where"], first_state.canonicalize().unwrap().display().to_string(), "{seen}");
    assert_eq!(seen["progress"]["batches"], 3, "serial 1: one node a batch: {seen}");
    assert!(seen["progress"]["done"].as_u64().unwrap() >= 1, "the first node is done by batch 2: {seen}");
    assert!(seen["renewed_seconds_ago"].as_u64().unwrap() < 60, "{seen}");
    assert!(seen["progress"]["eta_seconds"].as_u64().is_some(), "the time left as of the record: {seen}");
    let text = status(&cluster, &[]).expect_code(0);
    let text = text.stdout_has("upgrade in progress (cluster lock kube-system/upgrade-lock)");
    drop(text.stdout_has("  now: nodes: batch ").stdout_has(" - about "));

    drop(first.finish().expect_code(0));
    let after = status(&cluster, &[]).expect_code(0);
    let after = after.stdout_has("no upgrade in progress (the cluster lock kube-system/upgrade-lock is free)");
    let after = after.stdout_has(": success\n");
    drop(after.stdout_has("hosts: 6 done, 0 failed, 0 skipped, 0 left"));
}

/// A kubectl whose first `refusals` calls find no API server (kubectl's own words for a refused connection), as
/// while the only master's API server is restarted by an upgrade an earlier, killed run left going on it.
fn kubectl_refusing_at_first(cluster: &TestCluster, refusals: usize) -> String {
    let count = cluster.path("kubectl-calls");
    cluster.write(
        "refusing-kubectl",
        &format!(
            "#!/bin/sh\nn=$(cat {count} 2>/dev/null || echo 0); echo $((n + 1)) > {count}\n\
             if [ \"$n\" -lt {refusals} ]; then\n  echo 'The connection to the server 10.0.0.1:6443 was refused - did \
             you specify the right host or port?' >&2\n  exit 1\nfi\nexec {kubectl} \"$@\"\n",
            count = count.display(),
            kubectl = cluster.fake.kubectl_command()
        ),
    );
    format!("sh {}", cluster.path("refusing-kubectl").display())
}

#[test]
fn a_run_started_while_the_api_server_does_not_answer_waits_for_it_then_upgrades() {
    let cluster = TestCluster::new(&spec(&nodes(1, "region=a")));
    let kubectl = kubectl_refusing_at_first(&cluster, 6);
    let cluster = cluster.var(&format!("upgrade_kubectl: \"{kubectl}\""));
    cluster
        .upgrade(&[])
        .expect_code(0)
        .output_has("the API server does not answer (The connection to the server 10.0.0.1:6443 was refused")
        .output_has("waiting up to 300s for it (upgrade_control_plane_ready_timeout)")
        .output_has("result: success");
}

#[test]
fn an_api_server_that_never_answers_fails_preflight_once_the_wait_is_over_with_nothing_touched() {
    let cluster = TestCluster::new(&spec(&nodes(1, "region=a")));
    let kubectl = kubectl_refusing_at_first(&cluster, usize::MAX / 2);
    let cluster = cluster.var(&format!("upgrade_kubectl: \"{kubectl}\"")).var("upgrade_control_plane_ready_timeout: 3");
    cluster
        .upgrade(&[])
        .expect_code(1)
        .output_has("waiting up to 3s for it")
        .output_has("was refused - did you specify the right host or port?");
    let moved: Vec<String> = cluster
        .fake
        .calls()
        .into_iter()
        .filter(|c| ["cordon", "drain", "uncordon"].contains(&c.action.as_str()))
        .map(|c| c.argv)
        .collect();
    assert!(moved.is_empty(), "nothing is touched: {moved:?}");
}
