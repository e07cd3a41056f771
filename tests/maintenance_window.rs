//! Maintenance windows (README "Maintenance windows") on the scripted cluster: a run outside its window refuses
//! before anything is touched; a run whose window closes stops before the next batch with every node schedulable,
//! and the re-run resumes from the journal. The windows are written from the test's own clock (jiff), so the tests
//! hold whenever they run.

use jiff::civil::Date;
use jiff::{Timestamp, tz::TimeZone};

use crate::strategies::Cluster;

fn today_utc() -> Date {
    Timestamp::now().to_zoned_datetime(TimeZone::UTC).date()
}

/// Nodes-only (the masters at the target): n1 and n2 in batches of one.
fn two_batches() -> Cluster {
    Cluster::new("v1.29.1", "n1 v1.28.5 -\nn2 v1.28.5 -\n", &[("nodes", &["n1", "n2"])])
        .var("upgrade_target_version: v1.29.1")
        .var("upgrade_nodes_serial: 1")
}

/// Every day's window, but yesterday to tomorrow excluded: closed now, whatever the time. Refused with exit 1,
/// naming when the next window opens, before the cluster lock or any node is touched; `--ignore-maintenance-window`
/// runs.
#[test]
fn a_run_outside_its_window_refuses_to_start_and_says_when_the_next_opens() {
    let today = today_utc();
    let (from, to) = (today.yesterday().unwrap(), today.tomorrow().unwrap());
    let cluster = two_batches()
        .var("upgrade_maintenance_window: \"Mon-Sun 01:00-05:00 UTC\"")
        .var(&format!("upgrade_maintenance_exclusions: [\"{from}..{to}\"]"));
    let out = cluster.upgrade(&[], 1);
    let next = to.tomorrow().unwrap().strftime("%a %Y-%m-%d 01:00 UTC").to_string();
    assert!(
        out.output().contains(&format!(
            "outside the maintenance window (Mon-Sun 01:00-05:00 UTC): the next window opens {next}; nothing was changed"
        )),
        "{out}"
    );
    assert!(out.output().contains("--ignore-maintenance-window"), "{out}");
    assert!(cluster.fake.calls().is_empty(), "nothing was read or written: {:?}", cluster.fake.calls());
    cluster.upgrade(&["--ignore-maintenance-window"], 0);
    assert_eq!(cluster.fake.version("n2"), "v1.29.1");
}

/// A window that closes a little after the run starts, with `upgrade_maintenance_min_remaining: 60`: batch 1 starts
/// (more than 60 s left), n1's post hook holds until less than 60 s are left, so batch 2 (predicted to take as long
/// as batch 1, or 60 s) is not started: the run stops
/// there, n1 upgraded and schedulable, n2 never cordoned, and says when the next window opens. The re-run resumes
/// from the journal (n1 is not done again).
#[test]
fn a_run_whose_window_closes_stops_before_the_next_batch_with_nothing_cordoned_then_resumes() {
    let now = Timestamp::now().as_second();
    // The window's end on a minute, 100 to 160 s from now; it opened an hour before.
    let end = (now + 100 + 59) / 60 * 60;
    let clock = |at: i64| Timestamp::from_second(at).unwrap().strftime("%H:%M").to_string();
    let window = format!("Mon-Sun {}-{} UTC", clock(end - 3600), clock(end));
    let cluster = two_batches()
        .var(&format!("upgrade_maintenance_window: \"{window}\""))
        .var("upgrade_maintenance_min_remaining: 60")
        .var("upgrade_node_post_hook: hooks/hold.yml");
    cluster.write(
        "hooks/hold.yml",
        &format!(
            "- name: hold until less than 60 s of the window are left\n  shell: \"sleep $(( {end} - 50 - $(date +%s) \
             ))\"\n  when: inventory_hostname == 'n1'\n"
        ),
    );
    let out = cluster.upgrade(&[], 1);
    let said = out.output();
    assert!(said.contains("too little of the maintenance window is left for batch 2: "), "{out}");
    // What is needed: the batches' mean time so far (batch 1, held by its hook), or 60 s when that is less.
    assert!(
        said.contains("s needed (the batches' mean time so far); the next window opens ")
            || said.contains("60s needed (upgrade_maintenance_min_remaining); the next window opens "),
        "{out}"
    );
    assert_eq!(cluster.fake.version("n1"), "v1.29.1", "batch 1 went through");
    assert!(!cluster.fake.is_cordoned("n1"), "n1 is schedulable");
    assert_eq!(cluster.fake.version("n2"), "v1.28.5", "batch 2 was not started");
    assert!(!cluster.fake.calls().iter().any(|c| c.node == "n2" && c.action == "cordon"), "n2 was never cordoned");

    let resumed = cluster.upgrade(&["--ignore-maintenance-window"], 0);
    assert_eq!(cluster.fake.version("n2"), "v1.29.1", "{resumed}");
    let upgrades_of_n1 = cluster.fake.calls().iter().filter(|c| c.node == "n1" && c.action == "drain").count();
    assert_eq!(upgrades_of_n1, 1, "n1 was not done again");
}
