//! The etcd backup's command shapes (playbooks/etcd_backup.yml) against Debian's real etcd and etcdctl, run through
//! the shell exactly as the playbook runs them, with the certificate flags left out (plain http).

use std::process::{Command, Output};

use serde_json::Value;

use crate::support::etcd::{TestEtcd, etcdctl_binary};

fn sh(command: &str) -> Output {
    Command::new("sh").arg("-c").arg(command).output().expect("run sh")
}

fn ok(command: &str) -> String {
    let out = sh(command);
    assert!(
        out.status.success(),
        "`{command}` failed with {:?}\nstdout: {}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn the_playbook_commands_save_and_verify_a_real_snapshot() {
    let etcd = TestEtcd::start();
    let etcdctl = etcdctl_binary().display().to_string();
    // What etcd_backup.yml builds as upgrade_etcd_client when the certificate variables are empty.
    let client = format!("ETCDCTL_API=3 {etcdctl} --endpoints={}", etcd.endpoints());
    let backup_dir = etcd.scratch_dir().join("backups");
    let backup_dir = backup_dir.display();

    ok(&format!("mkdir -p -m 0700 {backup_dir}"));
    let status: Value = serde_json::from_str(&ok(&format!("{client} endpoint status -w json"))).expect("JSON");
    let db_size = status[0]["Status"]["dbSize"].as_u64().expect("Status.dbSize in endpoint status");
    assert!(db_size > 0);

    let free_kib: u64 = ok(&format!("df -Pk {backup_dir} | awk 'NR == 2 {{ print $4 }}'"))
        .trim()
        .parse()
        .expect("df prints the free 1024-byte blocks");
    assert!(free_kib * 1024 >= 2 * db_size, "this machine's temp dir is nearly full");

    let stamp = ok("date -u +%Y%m%dT%H%M%SZ").trim().to_string();
    let path = format!("{backup_dir}/{stamp}");
    let saved = ok(&format!("mkdir -p -m 0700 {path} && {client} snapshot save {path}/snapshot.db"));
    assert!(saved.contains("Snapshot saved"), "{saved}");

    let check = ok(&format!("ETCDCTL_API=3 {etcdctl} snapshot status {path}/snapshot.db -w json"));
    let check: Value = serde_json::from_str(&check).expect("snapshot status -w json is JSON");
    assert!(check["totalSize"].as_u64().unwrap_or(0) > 0, "{check}");
    assert!(check["revision"].as_u64().unwrap_or(0) > 0, "{check}");
    assert!(check["totalKey"].as_u64().unwrap_or(0) >= 20, "the sample keys are in the snapshot: {check}");
    assert!(check["hash"].is_u64(), "{check}");
}

#[test]
fn a_corrupt_snapshot_fails_verification() {
    let etcd = TestEtcd::start();
    let etcdctl = etcdctl_binary().display().to_string();
    let path = etcd.scratch_dir().join("snapshot.db");
    std::fs::write(&path, b"not a bolt database").expect("write");
    let out = sh(&format!("ETCDCTL_API=3 {etcdctl} snapshot status {} -w json", path.display()));
    assert!(!out.status.success(), "etcdctl accepted a corrupt snapshot");
}

#[test]
fn test_etcd_serves_its_own_keys() {
    let etcd = TestEtcd::start();
    let out = etcd.etcdctl(&["get", "/registry/test/key-00", "--print-value-only"]);
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("value "));
    assert!(etcd.data_dir().join("member").is_dir());
}
