//! `upgrade restore --etcd` of a real etcd cluster: three etcd processes on loopback (Debian's etcd-server), each
//! the etcd of one master of a test cluster on real sshd, stopped and started by the restore through commands that
//! really stop and start them. The snapshots are taken by a real upgrade of the masters, so the journal lists
//! them as it does for an operator.

use serde_json::Value;

use crate::support::etcd::TestEtcd;
use crate::support::{Outcome, Scenario};
use crate::upgrade::{MASTERS, TestCluster};

const MARKER: &str = "/registry/restore/marker";

/// A test cluster whose etcd group is m1, m2, m3, each with its own member of `members`: endpoint, data directory,
/// stop and start commands, name and peer URL.
fn cluster_with_members(members: &[TestEtcd]) -> TestCluster {
    // Its own etcd is not one of them; the real etcdctl is what the members are restored with.
    let cluster = TestCluster::with_real_etcd(&[]).etcd_members(&MASTERS).var("upgrade_etcd_restore_timeout: 60");
    for (host, member) in MASTERS.iter().zip(members) {
        write_member_vars(&cluster, host, member, true, &member.start_command());
    }
    cluster
}

/// `host`'s variables for its etcd member (`peer_url: false` leaves the peer URL to the default, which is the same
/// `https://127.0.0.1:2380` for every host here), started by `start`.
fn write_member_vars(cluster: &TestCluster, host: &str, member: &TestEtcd, peer_url: bool, start: &str) {
    let json = |s: &str| serde_json::to_string(s).unwrap();
    let mut vars = format!(
        "upgrade_etcd_endpoints: {}\nupgrade_etcd_data_dir: {}\nupgrade_etcd_stop_command: {}\nupgrade_etcd_start_command: {}\nupgrade_etcd_member_name: {}\n",
        json(member.endpoints()),
        json(&member.data_dir().display().to_string()),
        json(&member.stop_command()),
        json(start),
        json(&member.name()),
    );
    if peer_url {
        vars.push_str(&format!("upgrade_etcd_peer_url: {}\n", json(&member.peer_url())));
    }
    cluster.write(&format!("host_vars/{host}.yml"), &vars);
}

fn restore(cluster: &TestCluster, args: &[&str]) -> Outcome {
    Scenario::in_dir(&cluster.path("")).arg("restore").inventory(cluster.inventory()).args(args).run()
}

fn get(member: &TestEtcd, key: &str) -> String {
    let out = member.etcdctl(&["get", key, "--print-value-only"]);
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

fn healthy(member: &TestEtcd) -> bool {
    member.etcdctl(&["endpoint", "health"]).status.success()
}

/// The cluster id a member reports and the names of the members it lists.
/// A member started again a moment ago answers once the cluster has elected a leader: it is asked again for up to
/// 30 s (on a loaded machine the election took longer than etcdctl's 5 s deadline), then the last answer is judged.
fn membership(member: &TestEtcd) -> (u64, Vec<String>) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    let mut out = member.etcdctl(&["member", "list", "-w", "json"]);
    while !out.status.success() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(500));
        out = member.etcdctl(&["member", "list", "-w", "json"]);
    }
    assert!(out.status.success(), "member list on {}: {}", member.endpoints(), String::from_utf8_lossy(&out.stderr));
    let list: Value = serde_json::from_slice(&out.stdout).expect("member list -w json");
    let mut names: Vec<String> = list["members"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|m| m["name"].as_str().map(str::to_string))
        .collect();
    names.sort();
    (list["header"]["cluster_id"].as_u64().expect("header.cluster_id"), names)
}

/// Every member healthy, and all in one cluster of the three.
fn assert_one_cluster_of_three(members: &[TestEtcd]) -> u64 {
    let seen: Vec<(u64, Vec<String>)> = members.iter().map(membership).collect();
    for (member, (id, names)) in members.iter().zip(&seen) {
        assert!(healthy(member), "{} answers endpoint health", member.endpoints());
        assert_eq!(names, &["e1", "e2", "e3"], "{} lists the three members", member.endpoints());
        assert_eq!(*id, seen[0].0, "{} is in the same cluster as the first member", member.endpoints());
    }
    seen[0].0
}

/// The data directories that restore would have left beside a member's (`.restore-*`, `.before-restore-*`).
fn beside(member: &TestEtcd) -> Vec<String> {
    let dir = member.data_dir();
    let parent = dir.parent().unwrap();
    let mut found: Vec<String> = std::fs::read_dir(parent)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("data.") && n.contains("restore-"))
        .collect();
    found.sort();
    found
}

#[test]
fn a_three_member_etcd_is_restored_as_one_cluster_with_the_member_flags_built_from_the_inventory() {
    let members = TestEtcd::start_cluster(3);
    let cluster = cluster_with_members(&members);
    assert!(members[0].etcdctl(&["put", MARKER, "before-the-backup"]).status.success());
    cluster.upgrade(&["--phase", "control-plane"]).expect_code(0);
    assert!(members[1].etcdctl(&["put", MARKER, "after-the-backup"]).status.success());
    assert!(members[2].etcdctl(&["put", "/registry/restore/later", "written later"]).status.success());

    restore(&cluster, &["--limit", "etcd", "--etcd", "--yes"])
        .expect_code(0)
        .stdout_has("--initial-cluster-token etcd-cluster-1")
        .stdout_has(&format!("--initial-advertise-peer-urls {}", members[1].peer_url()));

    assert_one_cluster_of_three(&members);
    for member in &members {
        assert_eq!(get(member, MARKER), "before-the-backup", "{} serves the backup's data", member.endpoints());
        assert_eq!(get(member, "/registry/restore/later"), "", "what was written after the backup is gone");
        assert_eq!(beside(member).len(), 1, "the old data directory is kept beside it: {:?}", beside(member));
        assert!(beside(member)[0].starts_with("data.before-restore-"), "{:?}", beside(member));
    }
}

#[test]
fn a_member_that_fails_to_start_with_the_restored_data_sends_every_member_back_to_its_old_data_and_running() {
    let members = TestEtcd::start_cluster(3);
    let cluster = cluster_with_members(&members);
    assert!(members[0].etcdctl(&["put", MARKER, "before-the-backup"]).status.success());
    cluster.upgrade(&["--phase", "control-plane"]).expect_code(0);
    assert!(members[0].etcdctl(&["put", MARKER, "after-the-backup"]).status.success());
    let cluster_id = assert_one_cluster_of_three(&members);

    // m2's start fails the first time it is asked (a unit that times out, say), then works.
    let once = cluster.path("m2-start-failed-once");
    let start = format!("if [ ! -e {0} ]; then touch {0}; exit 1; fi; {1}", once.display(), members[1].start_command());
    write_member_vars(&cluster, "m2", &members[1], true, &start);

    restore(&cluster, &["--limit", "etcd", "--etcd", "--yes"])
        .expect_code(1)
        .stdout_has("etcd did not start with the restored data on m2")
        .stdout_has("m1: running with its old data")
        .stdout_has("m2: running with its old data")
        .stdout_has("m3: running with its old data");

    assert!(once.exists(), "m2's start was asked");
    assert_eq!(assert_one_cluster_of_three(&members), cluster_id, "the members are back in their old cluster");
    for member in &members {
        assert_eq!(get(member, MARKER), "after-the-backup", "{} runs its old data", member.endpoints());
        assert_eq!(beside(member).len(), 1, "{:?}", beside(member));
        assert!(beside(member)[0].starts_with("data.restore-"), "the restored data is set aside: {:?}", beside(member));
    }
}

#[test]
fn a_multi_member_restore_is_refused_for_some_members_only_or_when_the_member_flags_cannot_be_built() {
    let members = TestEtcd::start_cluster(3);
    let cluster = cluster_with_members(&members);
    cluster.upgrade(&["--phase", "control-plane"]).expect_code(0);
    assert!(members[0].etcdctl(&["put", MARKER, "after-the-backup"]).status.success());

    restore(&cluster, &["--limit", "m1", "--etcd", "--yes"])
        .expect_code(2)
        .stderr_has("restoring only m1 would leave the restored members apart from the others")
        .stderr_has("--limit etcd");

    // Every host's default peer URL is https://127.0.0.1:2380 (ansible_host): no cluster can be built from that.
    for (host, member) in MASTERS.iter().zip(&members) {
        write_member_vars(&cluster, host, member, false, &member.start_command());
    }
    restore(&cluster, &["--limit", "etcd", "--etcd", "--yes"])
        .expect_code(2)
        .stderr_has("would both have the peer URL https://127.0.0.1:2380")
        .stderr_has("upgrade_etcd_peer_url");

    // Nothing was touched: every member runs on its own data, nothing was written beside it.
    assert_one_cluster_of_three(&members);
    for member in &members {
        assert_eq!(get(member, MARKER), "after-the-backup");
        assert!(beside(member).is_empty(), "{:?}", beside(member));
    }
}

#[test]
fn a_data_directory_that_is_not_there_is_refused_before_etcd_is_stopped() {
    let cluster = TestCluster::with_real_etcd(&[]);
    let stop = cluster.etcd.stop_command();
    let start = cluster.etcd.start_command();
    let typo = cluster.etcd.scratch_dir().join("typo");
    let json = |s: &str| serde_json::to_string(s).unwrap();
    let flags = cluster.etcd.restore_flags();
    let cluster = cluster
        .var(&format!("upgrade_etcd_stop_command: {}", json(&stop)))
        .var(&format!("upgrade_etcd_start_command: {}", json(&start)))
        .var(&format!("upgrade_etcd_restore_flags: {}", json(&flags)))
        .var("upgrade_etcd_restore_timeout: 20");
    cluster.upgrade(&["--phase", "control-plane"]).expect_code(0);
    assert!(cluster.etcd.etcdctl(&["put", MARKER, "after-the-backup"]).status.success());

    let cluster = cluster.var(&format!("upgrade_etcd_data_dir: {}", json(&typo.display().to_string())));
    restore(&cluster, &["--limit", "m1", "--etcd", "--yes"])
        .expect_code(1)
        .stdout_has(&format!("etcd's data directory {} is not there", typo.display()))
        .stdout_has("nothing was stopped")
        .stdout_lacks("changed: restore | stop etcd");
    assert!(healthy(&cluster.etcd), "etcd still answers");
    assert_eq!(get(&cluster.etcd, MARKER), "after-the-backup", "on its own data");
    let left: Vec<_> = std::fs::read_dir(cluster.etcd.scratch_dir())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains("restore-"))
        .collect();
    assert!(left.is_empty(), "nothing restored was left beside it: {left:?}");
}
