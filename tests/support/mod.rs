//! Helpers shared by every integration test: a scenario builder that runs the real `upgrade` binary in its own
//! scratch directory, and the location of the fixtures.

#![allow(dead_code)]

pub mod demo;
pub mod etcd;
pub mod fake_cluster;
pub mod kube_api;
pub mod sshd;
pub mod stand_in_host;

use std::ffi::{OsStr, OsString};
use std::fmt;
use std::path::{Path, PathBuf};
use std::process::Command;

use tempfile::TempDir;

/// One of openshift-ansible 3.11's example inventories (tests/fixtures/openshift-ansible-3.11).
pub fn openshift_fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/openshift-ansible-3.11").join(name)
}

/// One run of `upgrade` in a fresh scratch directory (also its working directory): files to create, arguments,
/// environment. `{dir}` in an argument stands for the scratch directory.
pub struct Scenario {
    dir: TempDir,
    args: Vec<OsString>,
    env: Vec<(OsString, OsString)>,
}

impl Default for Scenario {
    fn default() -> Self {
        Scenario::new()
    }
}

impl Scenario {
    pub fn new() -> Self {
        let dir = tempfile::Builder::new().prefix("upgrade-test-").tempdir().expect("create a scratch directory");
        Scenario { dir, args: Vec::new(), env: Vec::new() }
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

    pub fn env(mut self, key: impl Into<OsString>, value: impl Into<OsString>) -> Self {
        self.env.push((key.into(), value.into()));
        self
    }

    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    pub fn path(&self, relative: &str) -> PathBuf {
        self.dir.path().join(relative)
    }

    /// Runs the binary and returns what happened, whatever the exit code.
    pub fn run(self) -> Outcome {
        let mut command = Command::new(env!("CARGO_BIN_EXE_upgrade"));
        command.args(&self.args).current_dir(self.dir.path());
        for (key, value) in &self.env {
            command.env(key, value);
        }
        let output = command.output().expect("run the upgrade binary");
        Outcome {
            code: output.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
            args: self.args,
            dir: Some(self.dir),
        }
    }

    /// Runs and expects exit code 0.
    pub fn success(self) -> Outcome {
        self.run().expect_code(0)
    }

    /// Runs and expects exit code `code` (2 for bad input, 1 for failed hosts).
    pub fn failure(self, code: i32) -> Outcome {
        self.run().expect_code(code)
    }
}

/// The result of a run. It keeps the scratch directory alive for follow-up checks.
pub struct Outcome {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
    args: Vec<OsString>,
    dir: Option<TempDir>,
}

impl Outcome {
    pub fn dir(&self) -> &Path {
        self.dir.as_ref().map_or(Path::new(""), |d| d.path())
    }

    fn expect_code(mut self, code: i32) -> Self {
        if self.code != code {
            self.fail(&format!("expected exit code {code}, got {}", self.code));
        }
        self
    }

    /// Fails the test with everything needed to reproduce it; the scratch directory is kept for a look.
    pub fn fail(&mut self, why: &str) -> ! {
        let text = self.to_string();
        if let Some(dir) = self.dir.take() {
            let _ = dir.keep();
        }
        panic!("{why}\n{text}");
    }

    /// stdout parsed as one JSON document.
    pub fn json(&mut self) -> serde_json::Value {
        match serde_json::from_str(&self.stdout) {
            Ok(v) => v,
            Err(e) => self.fail(&format!("stdout is not one JSON document: {e}")),
        }
    }

    pub fn stdout_has(mut self, needle: &str) -> Self {
        if !self.stdout.contains(needle) {
            self.fail(&format!("stdout lacks {needle:?}"));
        }
        self
    }

    pub fn stdout_lacks(mut self, needle: &str) -> Self {
        if self.stdout.contains(needle) {
            self.fail(&format!("stdout has {needle:?}"));
        }
        self
    }

    pub fn stderr_has(mut self, needle: &str) -> Self {
        if !self.stderr.contains(needle) {
            self.fail(&format!("stderr lacks {needle:?}"));
        }
        self
    }

    /// Checks a condition on the outcome, failing with the full context.
    pub fn check(mut self, what: &str, ok: impl FnOnce(&Outcome) -> bool) -> Self {
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

/// Runs the real `upgrade` binary with `args` and `--inventory INVENTORY`.
pub fn upgrade_with(args: &[&str], inventory: &Path) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_upgrade"))
        .args(args)
        .arg("--inventory")
        .arg(inventory)
        .output()
        .expect("run upgrade")
}

/// A finished command as a failing test shows it: exit code, stdout, stderr.
pub fn describe(out: &std::process::Output) -> String {
    format!(
        "exit {:?}\n--- stdout\n{}\n--- stderr\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
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
