//! The state directory's lock: one run at a time per state directory, with who holds it.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::time_format::utc_timestamp;

/// Held while a run drives the cluster: an advisory `flock` on `<state>/lock`, taken before anything else and let go
/// by the kernel when the process ends, however it ends (kill -9 and OOM kills included). The file is never deleted:
/// deleting and re-creating a lock file is what lets two runs both believe they hold it. Who holds it (pid, start,
/// host, run) is written into the file after the lock is taken, for the message that refuses a second run; a file
/// naming a process that still runs but does not hold the lock (pid 1 in a fresh container) means nothing.
#[derive(Debug)]
pub(crate) struct RunLock {
    file: File,
    path: PathBuf,
}

#[derive(Debug, Serialize, Deserialize)]
struct LockHolder {
    pid: u32,
    started: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    host: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    run: String,
}

impl RunLock {
    /// Takes the lock of a state directory, or says who holds it. A state directory that cannot be created or
    /// written refuses the start (exit 2): nothing has been touched yet.
    pub(crate) fn acquire(state_dir: &Path) -> Result<RunLock> {
        use std::os::fd::AsRawFd;
        fs::create_dir_all(state_dir).map_err(|e| refused_start(state_dir, e))?;
        let path = state_dir.join("lock");
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(|e| refused_start(&path, e))?;
        // SAFETY: flock on a descriptor this function owns; std opens it close-on-exec, so commands the run starts
        // (ssh masters, local commands) never inherit the lock and cannot keep it after the run dies.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
            let e = std::io::Error::last_os_error();
            if e.raw_os_error() != Some(libc::EWOULDBLOCK) {
                return Err(refused_start(&path, e));
            }
            // The holder may have taken the lock an instant ago and not written its name yet: give it a moment.
            let mut who = "it is starting now".to_string();
            for _ in 0..50 {
                if let Ok(holder) = serde_json::from_str::<LockHolder>(&fs::read_to_string(&path).unwrap_or_default()) {
                    who = holder.describe();
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            return Err(Error::input(format!("another upgrade is running on this cluster ({who})"))
                .in_file(&path)
                .hint("wait for it to finish (the lock is let go when that process ends, even by kill -9)"));
        }
        let mut lock = RunLock { file, path };
        lock.write_holder("")?;
        Ok(lock)
    }

    /// Adds the run's id to what the lock file says about its holder.
    pub(crate) fn name_run(&mut self, run: &str) -> Result<()> {
        self.write_holder(run)
    }

    fn write_holder(&mut self, run: &str) -> Result<()> {
        use std::io::{Seek, SeekFrom};
        let holder = LockHolder {
            pid: std::process::id(),
            started: utc_timestamp(SystemTime::now()),
            host: host_name(),
            run: run.to_string(),
        };
        let body = serde_json::to_string(&holder).unwrap_or_default();
        let path = self.path.clone();
        self.file.set_len(0).map_err(|e| refused_start(&path, e))?;
        self.file.seek(SeekFrom::Start(0)).map_err(|e| refused_start(&path, e))?;
        self.file.write_all(body.as_bytes()).map_err(|e| refused_start(&path, e))?;
        self.file.sync_data().map_err(|e| refused_start(&path, e))
    }
}

impl LockHolder {
    fn describe(&self) -> String {
        let mut text = format!("pid {}, started {}", self.pid, self.started);
        if !self.host.is_empty() {
            text.push_str(&format!(", on {}", self.host));
        }
        if !self.run.is_empty() {
            text.push_str(&format!(", run {}", self.run));
        }
        text
    }
}

impl Drop for RunLock {
    fn drop(&mut self) {
        // The holder's name goes before the lock does (closing the file lets it go); the file itself stays.
        let _ = self.file.set_len(0);
    }
}

pub(crate) fn host_name() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: gethostname writes at most `buf.len()` bytes into the buffer.
    if unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) } != 0 {
        return String::new();
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

/// The state directory cannot be used before the run starts: bad input for the operator to fix (exit 2).
pub(super) fn refused_start(path: &Path, e: std::io::Error) -> Error {
    Error::input(format!("cannot use the state directory: {}", crate::error::io_reason(&e)))
        .in_file(path)
        .hint("make it writable, or choose another with --state-dir; nothing was touched")
}
