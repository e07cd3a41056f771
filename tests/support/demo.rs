//! A private copy of the demo cluster (inventories/demo: local connections, the scripted fake cluster API, a fake
//! etcdctl) in a temp dir, for tests that drive the real binary through whole runs, signals and kills.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

pub const NODES: [&str; 6] = ["node-1", "node-2", "node-3", "node-4", "node-5", "node-6"];
pub const HOSTS: [&str; 9] =
    ["master-1", "master-2", "master-3", "node-1", "node-2", "node-3", "node-4", "node-5", "node-6"];

/// A private copy of inventories/demo in a temp dir: its hooks, its fake etcdctl, and the fake cluster's state in
/// `<dir>/.state/cluster`, so tests run in parallel.
pub struct Demo {
    pub dir: tempfile::TempDir,
}

impl Demo {
    pub fn new() -> Demo {
        let dir = tempfile::Builder::new().prefix("upgrade-ops-").tempdir().expect("temp dir");
        let demo = Path::new(env!("CARGO_MANIFEST_DIR")).join("inventories/demo");
        let fake = Path::new(env!("CARGO_MANIFEST_DIR")).join("testing/fake-cluster");
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
        let out = Command::new(fake.join("fake-cluster"))
            .args(["init", "--state"])
            .arg(dir.path().join(".state/cluster"))
            .arg(demo.join("cluster.txt"))
            .output()
            .expect("run fake-cluster init");
        assert!(out.status.success(), "fake-cluster init: {}", String::from_utf8_lossy(&out.stderr));
        Demo { dir }
    }

    pub fn path(&self, relative: &str) -> PathBuf {
        self.dir.path().join(relative)
    }

    pub fn node_file(&self, node: &str, file: &str) -> String {
        std::fs::read_to_string(self.path(&format!(".state/cluster/nodes/{node}/{file}")))
            .unwrap_or_default()
            .trim()
            .to_string()
    }

    pub fn set_cue(&self, node: &str, cue: &str, value: &str) {
        std::fs::write(self.path(&format!(".state/cluster/nodes/{node}/{cue}")), value).expect("write a cue");
    }

    pub fn upgrades(&self, node: &str) -> u32 {
        self.node_file(node, "upgrades").parse().unwrap_or(0)
    }

    pub fn version(&self, node: &str) -> String {
        self.node_file(node, "version")
    }

    pub fn is_cordoned(&self, node: &str) -> bool {
        self.node_file(node, "unschedulable") == "true"
    }

    /// `(node, action)` of every call the fake cluster logged, in order.
    pub fn calls(&self) -> Vec<(String, String)> {
        let log = std::fs::read_to_string(self.path(".state/cluster/calls.log")).unwrap_or_default();
        log.lines()
            .filter_map(|l| {
                let mut f = l.split('\t').skip(1);
                Some((f.next()?.to_string(), f.next()?.to_string()))
            })
            .collect()
    }

    pub fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_upgrade"));
        command.arg("--inventory").arg(self.path("hosts.yml")).args(args).current_dir(self.dir.path());
        command.env_remove("NO_COLOR");
        command
    }

    pub fn run(&self, args: &[&str]) -> Output {
        self.command(args).output().expect("run upgrade")
    }

    pub fn spawn(&self, args: &[&str]) -> Child {
        let mut command = self.command(args);
        command.stdout(Stdio::piped()).stderr(Stdio::piped());
        command.spawn().expect("start upgrade")
    }

    /// Waits until the fake cluster logged `action` on `node` (the orchestrator got that far).
    pub fn wait_for_call(&self, node: &str, action: &str) {
        let deadline = Instant::now() + Duration::from_secs(60);
        while !self.calls().iter().any(|(n, a)| n == node && a == action) {
            assert!(Instant::now() < deadline, "no {action} of {node} within 60 s; calls: {:?}", self.calls());
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

pub fn copy(from: &Path, to: &Path) {
    std::fs::create_dir_all(to.parent().expect("parent")).expect("mkdir");
    std::fs::copy(from, to).unwrap_or_else(|e| panic!("copy {}: {e}", from.display()));
}

pub fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Waits for the run to end; past `limit` it is killed (so a hang fails the test instead of holding it).
pub fn wait_at_most(mut child: Child, limit: Duration) -> Output {
    let deadline = Instant::now() + limit;
    while child.try_wait().expect("poll upgrade").is_none() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    child.wait_with_output().expect("wait for upgrade")
}

pub fn signal(child: &Child, signal: i32) {
    let pid = libc::pid_t::try_from(child.id()).expect("pid");
    // SAFETY: kill only sends a signal to our own child process.
    assert_eq!(unsafe { libc::kill(pid, signal) }, 0, "send signal {signal}");
}

/// Whether the run lock of a state directory is free now: an advisory lock on it can be taken (and is let go).
pub fn lock_is_free(state: &Path) -> bool {
    use std::os::fd::AsRawFd;
    let Ok(file) = std::fs::File::open(state.join("lock")) else { return true };
    // SAFETY: flock on a file descriptor this function owns; closing the file releases it.
    unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) == 0 }
}
