//! The predicted duration and the time left, end to end over real sshd: from defaults (said as such) while the state
//! directory has no history, then from the times the earlier run recorded in the journal.

use serde_json::Value;

use crate::upgrade::{TestCluster, nodes, spec};

fn events(stdout: &str) -> Vec<Value> {
    stdout.lines().filter_map(|l| serde_json::from_str(l).ok()).collect()
}

/// The `eta_seconds` of each event named `event`, in order.
fn etas(events: &[Value], event: &str, phase: &str) -> Vec<u64> {
    events
        .iter()
        .filter(|e| e["event"] == event && e["phase"] == phase)
        .map(|e| e["eta_seconds"].as_u64().unwrap_or_else(|| panic!("{event} of {phase} has no eta_seconds: {e}")))
        .collect()
}

fn expected_line(stdout: &str) -> String {
    stdout
        .lines()
        .find(|l| l.starts_with("expected: about "))
        .unwrap_or_else(|| panic!("no expected: line in\n{stdout}"))
        .to_string()
}

#[test]
fn the_expected_duration_and_time_left_come_from_defaults_first_then_from_the_earlier_run() {
    let cluster = TestCluster::new(&spec(&nodes(2, "region=a"))).var("upgrade_nodes_serial: 1");
    let plan = cluster.upgrade(&["--plan"]).expect_code(0);
    let line = expected_line(plan.stdout_text());
    assert!(line.ends_with("(defaults: no earlier run on this inventory recorded its times)"), "{line}");

    let run = cluster.upgrade(&["--output", "json"]).expect_code(0);
    let first = events(run.stdout_text());
    // Defaults before anything ran: minutes per master and per batch of nodes.
    let start = etas(&first, "phase-started", "preflight")[0];
    assert!(start >= 40 * 60, "three masters and two batches of nodes by the defaults: {start} s");
    // Corrected as the run goes: its hosts took seconds, not minutes; nothing is left once verify has finished.
    let nodes_batches = etas(&first, "batch-started", "nodes");
    assert_eq!(nodes_batches.len(), 2, "{first:?}");
    assert!(nodes_batches[0] < start / 10, "after the masters took seconds: {nodes_batches:?}");
    assert!(nodes_batches[1] <= nodes_batches[0], "{nodes_batches:?}");
    assert_eq!(etas(&first, "phase-finished", "verify"), [0]);

    // The state directory now has a run's times: the plan says so, and so does a live plan.
    let plan = cluster.upgrade(&["--plan"]).expect_code(0);
    let line = expected_line(plan.stdout_text());
    assert!(line.ends_with("(from 1 earlier run)"), "{line}");
    // The run took seconds: so does the prediction (well under the defaults' 40 minutes).
    let about = line.split(' ').nth(2).unwrap_or_default();
    let minutes: u64 = about.split_once('m').map_or(Some(0), |(m, _)| m.parse().ok()).unwrap_or(99);
    assert!(!about.contains('h') && minutes < 5, "{line}");
    let live = cluster.upgrade(&["--plan", "--live"]).expect_code(0);
    assert!(expected_line(live.stdout_text()).ends_with("(from 1 earlier run)"), "{}", live.stdout_text());

    // --fresh sets the journal aside; its times still count. The run says its expectation before it starts.
    let again = cluster.upgrade(&["--fresh"]).expect_code(0);
    let line = expected_line(again.stdout_text());
    assert!(line.ends_with("(from 1 earlier run)"), "{line}");
}
