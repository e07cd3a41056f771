//! kured's reboot lock held for the run (issue 21 item 8): the annotation `weave.works/kured-node-lock` on kured's
//! DaemonSet is taken when free, given back at the end whatever happened, given back by a re-run when a run of ours
//! died holding it, and waited for (then refused) while kured holds it. Unattended package upgrades on the hosts are
//! named in preflight.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::Value;

use crate::support::demo::{Demo, NODES};

const ANNOTATION: &str = "weave.works%kured-node-lock";

/// Installs kured's DaemonSet in the demo's fake cluster (kube-system/kured).
fn install_kured(demo: &Demo) -> PathBuf {
    let dir = demo.fake.state_dir().join("workloads/kube-system/daemonset/kured");
    std::fs::create_dir_all(&dir).expect("kured dir");
    std::fs::write(dir.join("image"), "ghcr.io/kubereboot/kured:1.17.1\n").expect("kured image");
    dir.join("annotations").join(ANNOTATION)
}

fn lock_holder(lock: &std::path::Path) -> Option<String> {
    let text = std::fs::read_to_string(lock).ok()?;
    let value: Value = serde_json::from_str(&text).expect("kured's lock is JSON");
    Some(value["nodeID"].as_str().expect("nodeID").to_string())
}

#[test]
fn kureds_lock_is_held_during_the_run_and_a_rerun_gives_back_the_one_a_kill_9_left() {
    let demo = Demo::new();
    let lock = install_kured(&demo);
    demo.fake.set_cue("node-2", "drain_hang", "forever");
    let mut first = demo.spawn(&[]);
    demo.wait_for_call("node-2", "drain");
    let holder = lock_holder(&lock).expect("the run holds kured's lock while it drains node-2");
    assert!(holder.starts_with("upgrade-tool:"), "named as ours: {holder}");
    let value: Value = serde_json::from_str(&std::fs::read_to_string(&lock).unwrap()).unwrap();
    assert_eq!(value["TTL"], 0, "{value}");
    assert_eq!(value["metadata"]["unschedulable"], false, "{value}");
    assert!(value["created"].as_str().is_some_and(|c| c.ends_with('Z')), "{value}");
    first.kill().expect("kill -9");
    let _ = first.wait();
    assert_eq!(lock_holder(&lock).as_deref(), Some(holder.as_str()), "a kill -9 leaves it");

    demo.fake.set_cue("node-2", "drain_hang", "0");
    let rerun = demo.run(&[]);
    assert_eq!(rerun.code, 0, "{rerun}");
    assert!(rerun.stdout.contains("was left by a run of ours that is no longer running"), "{rerun}");
    assert!(rerun.stdout.contains("kured's reboot lock on kube-system/kured given back"), "{rerun}");
    assert!(!lock.exists(), "given back at the end of the re-run\n{rerun}");
    for node in NODES {
        assert_eq!(demo.fake.upgrades(node), 1, "{node} upgraded once\n{rerun}");
    }
}

#[test]
fn kureds_lock_is_given_back_after_an_interrupted_run() {
    let demo = Demo::new();
    let lock = install_kured(&demo);
    demo.fake.set_cue("node-1", "drain_hang", "forever");
    let child = demo.spawn(&["--grace-period", "0"]);
    demo.wait_for_call("node-1", "drain");
    assert!(lock_holder(&lock).is_some_and(|h| h.starts_with("upgrade-tool:")), "held while node-1 drains");
    child.signal(libc::SIGINT);
    let out = child.finish();
    assert_eq!(out.code, 130, "{out}");
    assert!(!lock.exists(), "given back after the interrupt\n{out}");
}

#[test]
fn a_lock_kured_holds_is_waited_for_then_the_run_is_refused_with_nothing_touched() {
    let demo = Demo::new();
    let lock = install_kured(&demo);
    std::fs::create_dir_all(lock.parent().unwrap()).unwrap();
    let kureds = r#"{"nodeID":"node-3","metadata":{"unschedulable":false},"created":"2026-11-24T10:00:00Z","TTL":0}"#;
    std::fs::write(&lock, kureds).unwrap();
    let out = demo.run(&["-e", "upgrade_kured_lock_wait=2", "-e", "upgrade_kured_lock_delay=1"]);
    assert_eq!(out.code, 2, "{out}");
    let all = out.output();
    assert!(
        all.contains("kured holds its reboot lock on kube-system/kured (held by node-3 since 2026-11-24T10:00:00Z)"),
        "{all}"
    );
    assert!(all.contains("waiting up to 2s"), "{all}");
    assert_eq!(std::fs::read_to_string(&lock).unwrap(), kureds, "kured's lock left alone");
    let touched: Vec<_> = demo
        .fake
        .calls()
        .into_iter()
        .filter(|c| !c.action.starts_with("get") && !c.action.ends_with("-configmap"))
        .collect();
    assert!(touched.is_empty(), "nothing touched: {touched:?}\n{out}");
}

#[test]
fn a_lock_kured_gives_back_while_the_run_waits_is_then_taken() {
    let demo = Demo::new();
    let lock = install_kured(&demo);
    std::fs::create_dir_all(lock.parent().unwrap()).unwrap();
    std::fs::write(&lock, r#"{"nodeID":"node-3","created":"2026-11-24T10:00:00Z","TTL":0}"#).unwrap();
    let child = demo.spawn(&["-e", "upgrade_kured_lock_wait=60", "-e", "upgrade_kured_lock_delay=1"]);
    // node-3's reboot ends: kured removes its lock.
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while !demo.fake.calls().iter().any(|c| c.action == "get-daemonset") {
        assert!(std::time::Instant::now() < deadline, "the run never read kured's DaemonSet");
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(500));
    std::fs::remove_file(&lock).unwrap();
    let out = child.finish();
    assert_eq!(out.code, 0, "{out}");
    assert!(out.stdout.contains("waiting up to 60s"), "{out}");
    assert!(out.stdout.contains("taken for the run"), "{out}");
    assert!(!lock.exists(), "{out}");
}

#[test]
fn automatic_package_upgrades_on_a_host_are_named_in_preflight() {
    let demo = Demo::new();
    let command = r#"{"upgrade_auto_updates_command": "printf 'unattended-upgrades enabled\\napt-daily-upgrade.timer enabled\\ndnf-automatic.timer disabled\\n'"}"#;
    let out = demo.run(&["-e", command]);
    assert_eq!(out.code, 0, "{out}");
    let warning = "warning: automatic package upgrades are enabled on this host (unattended-upgrades, \
                   apt-daily-upgrade.timer): the package holds (the excluders on OpenShift) keep the Kubernetes packages";
    assert!(out.stdout.contains(&format!("[node-1] {warning}")), "{out}");
    assert!(out.stdout.contains("the container runtime, the kernel"), "says what else could move\n{out}");
    assert!(!out.stdout.contains("dnf-automatic.timer"), "a disabled unit is not named\n{out}");
    // A host with none enabled (or no systemctl): nothing said.
    let quiet = Demo::new().run(&["-e", r#"{"upgrade_auto_updates_command": "echo 'dnf-automatic.timer disabled'"}"#]);
    assert_eq!(quiet.code, 0, "{quiet}");
    assert!(!quiet.stdout.contains("automatic package upgrades"), "{quiet}");
}

/// `upgrade_change_id` in the journal's run-started line, the JSON run-started event and the summary (of a run of
/// preflight alone: the ticket is the run's, whichever phases it runs).
#[test]
fn the_change_ticket_is_in_the_journal_the_run_started_event_and_the_summary() {
    let demo = Demo::new();
    let out = demo.run(&["--phase", "preflight", "--output", "json", "-e", "upgrade_change_id=CHG-0815"]);
    assert_eq!(out.code, 0, "{out}");
    let events: Vec<Value> = out.stdout.lines().filter_map(|l| serde_json::from_str(l).ok()).collect();
    let started = events.iter().find(|e| e["event"] == "run-started").expect("run-started");
    assert_eq!(started["change_id"], "CHG-0815", "{started}");
    let summary = events.iter().find(|e| e["event"] == "summary").expect("summary");
    assert_eq!(summary["change_id"], "CHG-0815", "{summary}");
    let journal = std::fs::read_to_string(demo.path(".upgrade-state/journal.jsonl")).expect("journal");
    let first: Value = serde_json::from_str(journal.lines().next().expect("a line")).expect("JSON");
    assert_eq!(first["event"], "run-started", "{first}");
    assert_eq!(first["change_id"], "CHG-0815", "{first}");
}

/// A take refused for another reason than a value already there (RBAC, an API that cannot annotate) stops preflight
/// with that reason instead of trying again for ever.
#[test]
fn a_take_the_api_refuses_stops_preflight_with_the_reason() {
    let demo = Demo::new();
    install_kured(&demo);
    let wrapper = demo.path("forbidding-kubectl");
    std::fs::write(
        &wrapper,
        "#!/bin/sh\ncase \" $* \" in *\" annotate daemonset \"*) echo 'Error from server (Forbidden): daemonsets.apps \
         \"kured\" is forbidden' >&2; exit 1 ;; esac\nexec \"$@\"\n",
    )
    .unwrap();
    std::fs::set_permissions(&wrapper, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let kubectl = format!(
        r#"{{"upgrade_kubectl": "{} {{{{ demo_fake_cluster }}}}/kubectl {{{{ demo_fake }}}}"}}"#,
        wrapper.display()
    );
    let out = demo.scenario(&["-e", &kubectl]).spawn().finish_within(Duration::from_secs(60));
    assert_eq!(out.code, 1, "{out}");
    assert!(out.output().contains("the take was refused: Error from server (Forbidden)"), "{out}");
    let touched: Vec<_> = demo.fake.calls().into_iter().filter(|c| c.action == "cordon").collect();
    assert!(touched.is_empty(), "nothing cordoned: {touched:?}");
}
