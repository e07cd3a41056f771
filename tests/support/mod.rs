//! Helpers shared by every integration test: a scenario builder that runs the real `upgrade` binary in its own
//! scratch directory, and the location of the fixtures.

#![allow(dead_code)]

pub mod apiserver;
pub mod control_plane_pool;
pub mod debian_host;
pub mod demo;
pub mod etcd;
pub mod fake_cluster;
pub mod kube_api;
pub mod sshd;
pub mod stand_in_host;

use std::cell::RefCell;
use std::ffi::{OsStr, OsString};
use std::fmt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use tempfile::TempDir;

/// One of openshift-ansible 3.11's example inventories (tests/fixtures/openshift-ansible-3.11).
pub fn openshift_fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/openshift-ansible-3.11").join(name)
}

/// The one way tests run the `upgrade` binary: a scenario of arguments, environment and files, run in a scratch
/// directory (its working directory) with `.run()`, `.success()`, `.failure(code)` or `.spawn()`. The finishers
/// print the command, its output and the scratch directory when the exit code is not the expected one.
///
/// `Scenario::new()` makes a fresh scratch directory; `Scenario::in_dir` runs in a fixture's own directory (a test
/// cluster's, a demo copy's) whose sshd, etcd and fake cluster the fixture's inventory already names.
/// `{dir}` in an argument stands for the scratch directory.
pub struct Scenario {
    dir: Scratch,
    args: Vec<OsString>,
    /// `None` removes the variable.
    env: Vec<(OsString, Option<OsString>)>,
}

/// Where a scenario runs: a temp directory it owns, or a fixture's directory that outlives it.
enum Scratch {
    Owned(TempDir),
    Fixture(PathBuf),
}

impl Scratch {
    fn path(&self) -> &Path {
        match self {
            Scratch::Owned(dir) => dir.path(),
            Scratch::Fixture(path) => path,
        }
    }
}

impl Default for Scenario {
    fn default() -> Self {
        Scenario::new()
    }
}

impl Scenario {
    pub fn new() -> Self {
        let dir = tempfile::Builder::new().prefix("upgrade-test-").tempdir().expect("create a scratch directory");
        Scenario { dir: Scratch::Owned(dir), args: Vec::new(), env: Vec::new() }
    }

    /// A scenario that runs in `dir`, a directory some fixture owns (and removes).
    pub fn in_dir(dir: &Path) -> Self {
        Scenario { dir: Scratch::Fixture(dir.to_path_buf()), args: Vec::new(), env: Vec::new() }
    }

    /// A run against a test cluster: in the cluster's directory, `--inventory INVENTORY`, no colours.
    pub fn on_cluster(dir: &Path, inventory: &Path) -> Self {
        Scenario::in_dir(dir).inventory(inventory).env("NO_COLOR", "1")
    }

    /// Writes a file (parent directories included) relative to the scratch directory.
    pub fn file(self, relative: &str, contents: &str) -> Self {
        let path = self.dir.path().join(relative);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).expect("create the file's directory");
        }
        std::fs::write(&path, contents).expect("write the scenario file");
        self
    }

    pub fn arg(mut self, arg: impl AsRef<OsStr>) -> Self {
        let text = arg.as_ref().to_string_lossy();
        let arg = if text.contains("{dir}") {
            OsString::from(text.replace("{dir}", &self.dir.path().to_string_lossy()))
        } else {
            arg.as_ref().to_os_string()
        };
        self.args.push(arg);
        self
    }

    pub fn args<I, S>(self, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        args.into_iter().fold(self, Scenario::arg)
    }

    /// `--inventory PATH`.
    pub fn inventory(self, path: impl AsRef<OsStr>) -> Self {
        self.arg("--inventory").arg(path)
    }

    pub fn env(mut self, key: impl Into<OsString>, value: impl Into<OsString>) -> Self {
        self.env.push((key.into(), Some(value.into())));
        self
    }

    pub fn env_remove(mut self, key: impl Into<OsString>) -> Self {
        self.env.push((key.into(), None));
        self
    }

    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    pub fn path(&self, relative: &str) -> PathBuf {
        self.dir.path().join(relative)
    }

    /// The command, not yet started, for a test that needs its own pipes or its own way to wait.
    pub fn command(&self) -> Command {
        let mut command = Command::new(env!("CARGO_BIN_EXE_upgrade"));
        command.args(&self.args).current_dir(self.dir.path());
        // Run inside GitHub Actions, the runs under test must not write into the job's own summary.
        command.env_remove("GITHUB_STEP_SUMMARY");
        for (key, value) in &self.env {
            match value {
                Some(value) => command.env(key, value),
                None => command.env_remove(key),
            };
        }
        command
    }

    /// Runs the binary and returns what happened, whatever the exit code.
    pub fn run(self) -> Outcome {
        let output = self.command().output().expect("run the upgrade binary");
        Outcome::new(output, self.args, self.dir)
    }

    /// Runs and expects exit code 0.
    pub fn success(self) -> Outcome {
        self.run().expect_code(0)
    }

    /// Runs and expects exit code `code` (2 for bad input, 1 for failed hosts).
    pub fn failure(self, code: i32) -> Outcome {
        self.run().expect_code(code)
    }

    /// Starts the binary with stdout and stderr piped, for a test that signals, kills or reads it while it runs.
    pub fn spawn(self) -> Running {
        let mut command = self.command();
        command.stdout(Stdio::piped()).stderr(Stdio::piped());
        let child = command.spawn().expect("start the upgrade binary");
        Running { child, args: self.args, dir: self.dir }
    }
}

/// A started run. It derefs to its `Child` (`id()`, `kill()`, `stdout.take()`); `finish()` waits for it.
pub struct Running {
    child: Child,
    args: Vec<OsString>,
    dir: Scratch,
}

impl Running {
    /// The process id of the upgrade binary.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Waits for the run to end and returns what happened.
    pub fn finish(self) -> Outcome {
        let output = self.child.wait_with_output().expect("wait for the upgrade binary");
        Outcome::new(output, self.args, self.dir)
    }

    /// Waits for the run to end; past `limit` it is killed (so a hang fails the test instead of holding it).
    pub fn finish_within(mut self, limit: Duration) -> Outcome {
        let deadline = Instant::now() + limit;
        while self.child.try_wait().expect("poll upgrade").is_none() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        self.finish()
    }

    /// Sends `signal` (`libc::SIGINT`, ...) to the run.
    pub fn signal(&self, signal: i32) {
        self::signal(&self.child, signal);
    }
}

impl std::ops::Deref for Running {
    type Target = Child;
    fn deref(&self) -> &Child {
        &self.child
    }
}

impl std::ops::DerefMut for Running {
    fn deref_mut(&mut self) -> &mut Child {
        &mut self.child
    }
}

/// The result of a run. It keeps an owned scratch directory alive for follow-up checks.
pub struct Outcome {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
    args: Vec<OsString>,
    dir: PathBuf,
    /// The owned scratch directory, kept on disk when the test fails.
    owned: RefCell<Option<TempDir>>,
}

impl Outcome {
    fn new(output: Output, args: Vec<OsString>, dir: Scratch) -> Outcome {
        let path = dir.path().to_path_buf();
        let owned = match dir {
            Scratch::Owned(dir) => Some(dir),
            Scratch::Fixture(_) => None,
        };
        Outcome {
            code: output.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
            args,
            dir: path,
            owned: RefCell::new(owned),
        }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn path(&self, relative: &str) -> PathBuf {
        self.dir.join(relative)
    }

    /// stdout then stderr, for a check that does not care where a message went.
    pub fn output(&self) -> String {
        format!("{}{}", self.stdout, self.stderr)
    }

    pub fn expect_code(self, code: i32) -> Self {
        if self.code != code {
            self.fail(&format!("expected exit code {code}, got {}", self.code));
        }
        self
    }

    /// Fails the test with everything needed to reproduce it; an owned scratch directory is kept for a look.
    pub fn fail(&self, why: &str) -> ! {
        let text = self.to_string();
        if let Some(dir) = self.owned.borrow_mut().take() {
            let _ = dir.keep();
        }
        panic!("{why}\n{text}");
    }

    /// stdout as it was written.
    pub fn stdout_text(&self) -> &str {
        &self.stdout
    }

    /// stdout parsed as one JSON document.
    pub fn json(&self) -> serde_json::Value {
        match serde_json::from_str(&self.stdout) {
            Ok(v) => v,
            Err(e) => self.fail(&format!("stdout is not one JSON document: {e}")),
        }
    }

    pub fn stdout_has(self, needle: &str) -> Self {
        if !self.stdout.contains(needle) {
            self.fail(&format!("stdout lacks {needle:?}"));
        }
        self
    }

    pub fn stdout_lacks(self, needle: &str) -> Self {
        if self.stdout.contains(needle) {
            self.fail(&format!("stdout has {needle:?}"));
        }
        self
    }

    pub fn stderr_has(self, needle: &str) -> Self {
        if !self.stderr.contains(needle) {
            self.fail(&format!("stderr lacks {needle:?}"));
        }
        self
    }

    /// stdout or stderr has `needle`.
    pub fn output_has(self, needle: &str) -> Self {
        if !self.output().contains(needle) {
            self.fail(&format!("the output lacks {needle:?}"));
        }
        self
    }

    /// Checks a condition on the outcome, failing with the full context.
    pub fn check(self, what: &str, ok: impl FnOnce(&Outcome) -> bool) -> Self {
        if !ok(&self) {
            self.fail(what);
        }
        self
    }
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let args: Vec<String> = self.args.iter().map(|a| a.to_string_lossy().into_owned()).collect();
        writeln!(f, "command: upgrade {}", args.join(" "))?;
        writeln!(f, "scratch dir: {}", self.dir().display())?;
        writeln!(f, "exit code: {}", self.code)?;
        writeln!(f, "--- stdout ---\n{}", self.stdout)?;
        write!(f, "--- stderr ---\n{}", self.stderr)
    }
}

/// `upgrade ARGS --inventory INVENTORY`, run in the inventory's directory: a task file or `check` on hosts.
pub fn upgrade_with(args: &[&str], inventory: &Path) -> Outcome {
    Scenario::in_dir(inventory.parent().expect("the inventory's directory")).args(args).inventory(inventory).run()
}

/// Sends `signal` (`libc::SIGINT`, ...) to a child process.
pub fn signal(child: &Child, signal: i32) {
    let pid = libc::pid_t::try_from(child.id()).expect("pid");
    // SAFETY: kill only sends a signal to our own child process.
    assert_eq!(unsafe { libc::kill(pid, signal) }, 0, "send signal {signal}");
}

/// The `all:vars` lines (YAML, indented for `all: vars:`) that every end-to-end cluster of the tests shares: the
/// built-in playbooks' commands pointed at the fake cluster, the real etcd for the backup, short readiness polls.
pub fn cluster_vars(fake: &fake_cluster::FakeCluster, etcd: &etcd::TestEtcd) -> String {
    let mut text = String::new();
    for (k, v) in fake.command_vars() {
        text.push_str(&format!("    {k}: \"{v}\"\n"));
    }
    text.push_str(&format!("    upgrade_etcdctl: \"{}\"\n", etcd.etcdctl_path().display()));
    text.push_str(&format!("    upgrade_etcd_endpoints: \"{}\"\n", etcd.endpoints()));
    text.push_str("    upgrade_etcd_cacert: \"\"\n    upgrade_etcd_cert: \"\"\n    upgrade_etcd_key: \"\"\n");
    text.push_str("    upgrade_etcd_backup_dir: \"{{ host_root }}/etcd-backups\"\n");
    text.push_str("    upgrade_node_ready_delay: 1\n    upgrade_node_ready_timeout: 20\n");
    // The default 5 s between control-plane polls (and kubeadm plan retries) is for real API servers; the fake
    // cluster answers at once, so a missed poll costs a test 5 s for nothing.
    text.push_str("    upgrade_control_plane_ready_delay: 1\n");
    text
}

/// A YAML inventory: `vars` under `all: vars:`, the masters (the first one also the etcd host), then each group of
/// hosts; `host` writes one host's entry (its connection variables).
pub fn cluster_inventory(
    vars: &str,
    masters: &[&str],
    groups: &[(&str, &[String])],
    host: impl Fn(&str) -> String,
) -> String {
    cluster_inventory_with_etcd(vars, masters, &masters[..masters.len().min(1)], groups, host)
}

/// `cluster_inventory` with the etcd group's members named (masters, or hosts of `groups`).
pub fn cluster_inventory_with_etcd(
    vars: &str,
    masters: &[&str],
    etcd: &[&str],
    groups: &[(&str, &[String])],
    host: impl Fn(&str) -> String,
) -> String {
    let mut text = format!("all:\n  vars:\n{vars}");
    text.push_str("  children:\n    masters:\n      hosts:\n");
    for m in masters {
        text.push_str(&host(m));
    }
    text.push_str("    etcd:\n      hosts:\n");
    for e in if etcd.is_empty() { &["m1"][..] } else { etcd } {
        text.push_str(&format!("        {e}:\n"));
    }
    for (group, hosts) in groups {
        text.push_str(&format!("    {group}:\n      hosts:\n"));
        for h in hosts.iter() {
            text.push_str(&host(h));
        }
    }
    text
}

/// Whether the process whose pid a command wrote to `pid_file` has ended (or is a zombie), waiting up to `limit`:
/// a command that must have been killed.
pub fn process_ends_within(pid_file: &Path, limit: std::time::Duration) -> bool {
    let pid = std::fs::read_to_string(pid_file).unwrap_or_default().trim().to_string();
    assert!(!pid.is_empty(), "{} holds no pid", pid_file.display());
    let deadline = std::time::Instant::now() + limit;
    loop {
        let alive = std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .is_ok_and(|stat| !stat.rsplit(')').next().unwrap_or_default().trim_start().starts_with('Z'));
        if !alive {
            return true;
        }
        if std::time::Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// Copies a fixture directory into a scenario, file modes (a script's executable bit) included.
pub fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("create the copy's directory");
    for entry in std::fs::read_dir(from).expect("list the fixture") {
        let entry = entry.expect("read the fixture's directory");
        let target = to.join(entry.file_name());
        if entry.path().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).expect("copy a fixture file");
        }
    }
}
