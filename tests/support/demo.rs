//! A private copy of the demo cluster (inventories/demo: local connections, the scripted fake cluster API, a fake
//! etcdctl) in a temp dir, for tests that drive the real binary through whole runs, signals and kills.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use super::fake_cluster::FakeCluster;
use super::{Outcome, Running, Scenario};

pub const NODES: [&str; 6] = ["node-1", "node-2", "node-3", "node-4", "node-5", "node-6"];
pub const HOSTS: [&str; 9] =
    ["master-1", "master-2", "master-3", "node-1", "node-2", "node-3", "node-4", "node-5", "node-6"];

/// A private copy of inventories/demo in a temp dir: its hooks, its fake etcdctl, and the fake cluster's state in
/// `<dir>/.state/cluster` (`fake`), so tests run in parallel.
pub struct Demo {
    pub fake: FakeCluster,
    pub dir: tempfile::TempDir,
}

impl Demo {
    pub fn new() -> Demo {
        let dir = tempfile::Builder::new().prefix("upgrade-ops-").tempdir().expect("temp dir");
        let demo = Path::new(env!("CARGO_MANIFEST_DIR")).join("inventories/demo");
        let fake = FakeCluster::script_dir();
        let hosts = std::fs::read_to_string(demo.join("hosts.yml")).expect("read the demo inventory");
        let hosts = hosts.replace(
            "demo_fake_cluster: \"{{ inventory_dir }}/../../testing/fake-cluster\"",
            &format!("demo_fake_cluster: \"{}\"", fake.display()),
        );
        assert!(hosts.contains(&fake.display().to_string()), "the demo inventory names the fake cluster differently");
        std::fs::write(dir.path().join("hosts.yml"), hosts).expect("write the inventory");
        for file in ["cluster.txt", "bin/etcdctl"] {
            copy(&demo.join(file), &dir.path().join(file));
        }
        for entry in std::fs::read_dir(demo.join("hooks")).expect("demo hooks") {
            let path = entry.expect("hook").path();
            copy(&path, &dir.path().join("hooks").join(path.file_name().expect("name")));
        }
        let state = dir.path().join(".state/cluster");
        let out = Command::new(fake.join("fake-cluster"))
            .args(["init", "--state"])
            .arg(&state)
            .arg(demo.join("cluster.txt"))
            .output()
            .expect("run fake-cluster init");
        assert!(out.status.success(), "fake-cluster init: {}", String::from_utf8_lossy(&out.stderr));
        Demo { fake: FakeCluster::at(&state), dir }
    }

    pub fn path(&self, relative: &str) -> PathBuf {
        self.dir.path().join(relative)
    }

    /// `upgrade --inventory hosts.yml ARGS` in the demo's directory.
    pub fn scenario(&self, args: &[&str]) -> Scenario {
        Scenario::in_dir(self.dir.path()).inventory(self.path("hosts.yml")).args(args).env_remove("NO_COLOR")
    }

    pub fn run(&self, args: &[&str]) -> Outcome {
        self.scenario(args).run()
    }

    pub fn spawn(&self, args: &[&str]) -> Running {
        self.scenario(args).spawn()
    }

    /// Waits until the fake cluster logged `action` on `node` (the orchestrator got that far).
    pub fn wait_for_call(&self, node: &str, action: &str) {
        let deadline = Instant::now() + Duration::from_secs(60);
        while !self.fake.calls().iter().any(|c| c.node == node && c.action == action) {
            assert!(Instant::now() < deadline, "no {action} of {node} within 60 s; calls: {:?}", self.fake.calls());
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

pub fn copy(from: &Path, to: &Path) {
    std::fs::create_dir_all(to.parent().expect("parent")).expect("mkdir");
    std::fs::copy(from, to).unwrap_or_else(|e| panic!("copy {}: {e}", from.display()));
}

/// Whether the run lock of a state directory is free now: an advisory lock on it can be taken (and is let go).
pub fn lock_is_free(state: &Path) -> bool {
    use std::os::fd::AsRawFd;
    let Ok(file) = std::fs::File::open(state.join("lock")) else { return true };
    // SAFETY: flock on a file descriptor this function owns; closing the file releases it.
    unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) == 0 }
}
