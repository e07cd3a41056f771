//! Warm control planes shared by the tests of one `cargo nextest run`, one test at a time in each (a slot), instead
//! of a boot per test: a boot (etcd, three keys, kube-apiserver to /readyz, the controllers, kwok) costs a core for
//! many seconds, most of what a short real-API test costs. Each test process locks a free slot (a file lock, so a
//! test that dies mid-way frees it), takes the control plane the slot's last test left, puts it back to what a boot
//! leaves (`KubeControlPlane::reset`) and checks that it is so; a plane that is gone or cannot be reset is stopped
//! and a new one boots in the slot. The planes outlive the test processes that started them (their own process
//! group, not a test's child) and are stopped by a watchdog once the nextest run that they belong to has ended.
//!
//! Only under nextest (`NEXTEST_RUN_ID`): `cargo test` runs every test in one process, which boots a plane per test
//! as before, so that nothing outlives it.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// As many as the `real-control-plane` test group of .config/nextest.toml runs at once: a test finds a free one.
const SLOTS: usize = 2;

/// A slot held by this test process (its lock is released when the process ends, however it ends).
pub struct Slot {
    _lock: File,
    dir: PathBuf,
}

/// What a slot's control plane is: written by the test that booted it, read by the next.
pub struct Record {
    pub url: String,
    pub etcd_endpoint: String,
    /// The plane's directory (keys, kubeconfigs, logs), inside the slot.
    pub dir: PathBuf,
    /// Its etcd's (data, log).
    pub etcd_dir: PathBuf,
    /// Every process of the plane: etcd, kube-apiserver, the controller manager, the scheduler, kwok.
    pub pids: Vec<u32>,
}

/// A slot of this nextest run, locked for this test; `None` outside nextest.
pub fn slot() -> Option<Slot> {
    let run = std::env::var("NEXTEST_RUN_ID").ok()?;
    let root = std::env::temp_dir().join(format!("upgrade-test-control-planes-{run}"));
    std::fs::create_dir_all(&root).expect("the control planes' directory");
    let open = |i: usize| {
        let dir = root.join(format!("slot-{i}"));
        std::fs::create_dir_all(&dir).expect("a slot's directory");
        let lock = File::create(dir.join("lock")).expect("a slot's lock file");
        (lock, dir)
    };
    for i in 0..SLOTS {
        let (lock, dir) = open(i);
        if flock(&lock, libc::LOCK_EX | libc::LOCK_NB) {
            return Some(Slot { _lock: lock, dir });
        }
    }
    // More tests than slots (a group raised, another runner's filter): wait for one.
    let (lock, dir) = open(std::process::id() as usize % SLOTS);
    assert!(flock(&lock, libc::LOCK_EX), "lock a slot: {}", std::io::Error::last_os_error());
    Some(Slot { _lock: lock, dir })
}

impl Slot {
    /// Where a plane booted in this slot keeps its files.
    pub fn plane_dir(&self) -> PathBuf {
        self.dir.join("plane")
    }

    /// The plane the slot's last test left, when its processes all still run.
    pub fn record(&self) -> Option<Record> {
        let text = std::fs::read_to_string(self.dir.join("record")).ok()?;
        let mut lines = text.lines();
        let record = Record {
            url: lines.next()?.to_string(),
            etcd_endpoint: lines.next()?.to_string(),
            dir: PathBuf::from(lines.next()?),
            etcd_dir: PathBuf::from(lines.next()?),
            pids: lines.next()?.split_whitespace().filter_map(|p| p.parse().ok()).collect(),
        };
        if record.pids.is_empty() || !record.pids.iter().all(|pid| running(*pid)) {
            self.discard(Some(&record));
            return None;
        }
        Some(record)
    }

    /// Makes `record` the slot's plane (booted by this test), and has it stopped when this nextest run ends.
    pub fn save(&self, record: &Record) {
        self.update(record);
        stop_when_the_run_ends(&self.dir);
    }

    /// Writes `record` as the slot's plane (its processes changed: a new kwok).
    pub fn update(&self, record: &Record) {
        let pids: Vec<String> = record.pids.iter().map(u32::to_string).collect();
        let (dir, etcd_dir) = (record.dir.display(), record.etcd_dir.display());
        let text = format!("{}\n{}\n{dir}\n{etcd_dir}\n{}\n", record.url, record.etcd_endpoint, pids.join(" "));
        std::fs::write(self.dir.join("record.new"), text).expect("the slot's record");
        std::fs::rename(self.dir.join("record.new"), self.dir.join("record")).expect("the slot's record");
    }

    /// Stops the slot's plane (what `record` names) and forgets it, so that the next test boots a new one.
    pub fn discard(&self, record: Option<&Record>) {
        let _ = std::fs::remove_file(self.dir.join("record"));
        if let Some(record) = record {
            let pids: Vec<String> = record.pids.iter().map(u32::to_string).collect();
            let _ = Command::new("kill").args(["-KILL"]).args(&pids).stderr(Stdio::null()).status();
            let _ = std::fs::remove_dir_all(&record.dir);
            let _ = std::fs::remove_dir_all(&record.etcd_dir);
        }
    }
}

/// flock(2) on `file` (File::lock is newer than this crate's rust-version); true when taken. Released when the file
/// is closed, so when the test process ends, however it ends.
fn flock(file: &File, operation: libc::c_int) -> bool {
    // SAFETY: the descriptor is open for as long as `file` is borrowed.
    unsafe { libc::flock(std::os::fd::AsRawFd::as_raw_fd(file), operation) == 0 }
}

/// Whether `pid` is a live process (not gone, not a zombie).
fn running(pid: u32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { return false };
    let state = stat.rfind(')').and_then(|i| stat[i + 1..].split_whitespace().next());
    !matches!(state, None | Some("Z") | Some("X"))
}

/// The process that runs this test process: nextest, whose end is the run's.
fn runner() -> (u32, String) {
    let parent = std::os::unix::process::parent_id();
    (parent, start_time(parent).unwrap_or_default())
}

/// A process's start time (the 22nd field of its stat, the 20th after the command name), which tells it from a
/// later process given the same pid.
fn start_time(pid: u32) -> Option<String> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rfind(')').and_then(|i| stat[i + 1..].split_whitespace().nth(19)).map(str::to_string)
}

/// A watchdog, in a process group of its own: once the runner is gone (or another process has its pid), it stops
/// the processes the slot's record names then, and removes the etcd's directory and the slot's.
fn stop_when_the_run_ends(slot: &Path) {
    let (runner, started) = runner();
    let slot = slot.display();
    let script = format!(
        "while [ \"$(sed 's/.*) //' /proc/{runner}/stat 2>/dev/null | cut -d' ' -f20)\" = '{started}' ]; do sleep 2; \
         done; pids=$(sed -n 5p '{slot}/record' 2>/dev/null); etcd=$(sed -n 4p '{slot}/record' 2>/dev/null); \
         [ -n \"$pids\" ] && kill $pids 2>/dev/null; sleep 3; [ -n \"$pids\" ] && kill -KILL $pids 2>/dev/null; \
         [ -n \"$etcd\" ] && rm -rf \"$etcd\"; rm -rf '{slot}'; rmdir \"$(dirname '{slot}')\" 2>/dev/null; true"
    );
    let spawned = std::os::unix::process::CommandExt::process_group(
        Command::new("sh").args(["-c", &script]).stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null()),
        0,
    )
    .spawn();
    // Never waited for: it outlives this test process by design, and init reaps it.
    drop(spawned.expect("start the control plane's watchdog"));
}
