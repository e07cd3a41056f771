//! The state directory: a lock so two runs never drive one cluster, and an append-only journal of what each run
//! did, flushed as it goes, so an interrupted run can be resumed without redoing finished hosts.

use std::collections::BTreeMap;
use std::fs::{self, File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// The state directory's default name, beside the inventory.
pub const DEFAULT_STATE_DIR: &str = ".upgrade-state";

/// Held while a run drives the cluster; removed on drop.
#[derive(Debug)]
pub struct RunLock {
    path: PathBuf,
}

#[derive(Debug, Serialize, Deserialize)]
struct LockHolder {
    pid: u32,
    started: String,
}

impl RunLock {
    /// Takes the lock of a state directory. A lock left by a process that no longer runs is taken over.
    pub fn acquire(state_dir: &Path) -> Result<RunLock> {
        fs::create_dir_all(state_dir).map_err(|e| state_error(state_dir, e))?;
        let path = state_dir.join("lock");
        let holder = LockHolder { pid: std::process::id(), started: utc_timestamp(SystemTime::now()) };
        let body = serde_json::to_string(&holder).unwrap_or_default();
        for _ in 0..2 {
            match OpenOptions::new().write(true).create_new(true).open(&path) {
                Ok(mut file) => {
                    file.write_all(body.as_bytes()).map_err(|e| state_error(&path, e))?;
                    file.sync_all().map_err(|e| state_error(&path, e))?;
                    return Ok(RunLock { path });
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                    let text = fs::read_to_string(&path).unwrap_or_default();
                    match serde_json::from_str::<LockHolder>(&text) {
                        Ok(other) if process_alive(other.pid) => {
                            return Err(Error::input(format!(
                                "another upgrade is running on this cluster (pid {}, started {})",
                                other.pid, other.started
                            ))
                            .in_file(&path)
                            .hint("wait for it to finish; if that process is gone for good, remove the lock file"));
                        }
                        // A stale lock: its process died (kill -9, a crash, a reboot).
                        _ => {
                            let _ = fs::remove_file(&path);
                        }
                    }
                }
                Err(e) => return Err(state_error(&path, e)),
            }
        }
        Err(Error::input("could not take the run lock").in_file(&path).hint("remove the lock file and try again"))
    }
}

impl RunLock {
    /// The lock file, for a process that exits without unwinding (a second interrupt) and removes it itself.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for RunLock {
    fn drop(&mut self) {
        let _ = fs::remove_file(&self.path);
    }
}

fn process_alive(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

fn state_error(path: &Path, e: std::io::Error) -> Error {
    Error::internal(format!("cannot write the state directory {}: {e}", path.display()))
        .hint("check that the directory is writable, or move it with --state-dir")
}

/// One line of the journal.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "kebab-case")]
pub enum JournalEntry {
    RunStarted {
        run: String,
        time: String,
        target: String,
    },
    /// `was_cordoned`: the node was unschedulable when the sequence started (not by this tool's doing), so a later
    /// run can tell a node cordoned by us from one an operator cordoned.
    HostStarted {
        run: String,
        time: String,
        phase: String,
        host: String,
        #[serde(default)]
        was_cordoned: bool,
    },
    /// Recorded for the upgrade step only: a start without a `step-done` means the run died while the command ran
    /// on the host (where it may have finished on its own).
    StepStarted {
        run: String,
        time: String,
        phase: String,
        host: String,
        step: String,
    },
    StepDone {
        run: String,
        time: String,
        phase: String,
        host: String,
        step: String,
    },
    HostFinished {
        run: String,
        time: String,
        phase: String,
        host: String,
        outcome: HostRecord,
        detail: String,
    },
    RunFinished {
        run: String,
        time: String,
        status: String,
    },
    /// A hop of an update-graph path starts (its own run-started/run-finished follow): `hop` of `hops`.
    HopStarted {
        run: String,
        time: String,
        hop: usize,
        hops: usize,
        from: String,
        target: String,
        final_target: String,
    },
}

/// How a host's sequence ended, as recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum HostRecord {
    Upgraded,
    Skipped,
    Failed,
}

/// What earlier runs recorded about one host in one phase.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HostHistory {
    /// The last recorded end of its sequence, if it ended.
    pub finished: Option<HostRecord>,
    /// Started (again) after its last end: the run stopped while the host was in flight.
    pub in_flight: bool,
    /// Steps done in the attempt that was in flight.
    pub steps_done: Vec<String>,
    /// Steps started and never recorded done (the upgrade step cut short by a kill).
    pub steps_cut_short: Vec<String>,
    /// Whether the node was cordoned before the sequence first started (by someone else).
    pub was_cordoned: bool,
    /// The target of the run that recorded the host last.
    pub target: Option<String>,
}

impl HostHistory {
    pub fn did(&self, step: &str) -> bool {
        self.steps_done.iter().any(|s| s == step)
    }

    /// The last attempt did not end in success: it was cut short or it failed.
    pub fn unfinished(&self) -> bool {
        self.in_flight || self.finished == Some(HostRecord::Failed)
    }
}

/// Everything earlier runs recorded, per (phase, host).
#[derive(Debug, Clone, Default)]
pub struct History {
    pub hosts: BTreeMap<(String, String), HostHistory>,
    /// The target of the last recorded run.
    pub target: Option<String>,
    pub runs: usize,
    /// The last hop of an update-graph path recorded, if any.
    pub hop: Option<HopHistory>,
}

/// The last hop of an update-graph path an earlier run started.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HopHistory {
    pub hop: usize,
    pub hops: usize,
    pub from: String,
    pub target: String,
    pub final_target: String,
    /// Its run finished with success.
    pub finished: bool,
}

impl History {
    pub fn host(&self, phase: &str, host: &str) -> Option<&HostHistory> {
        self.hosts.get(&(phase.to_string(), host.to_string()))
    }

    fn apply(&mut self, entry: &JournalEntry) {
        match entry {
            JournalEntry::RunStarted { target, .. } => {
                self.runs += 1;
                self.target = Some(target.clone());
            }
            JournalEntry::HostStarted { phase, host, was_cordoned, .. } => {
                let target = self.target.clone();
                let h = self.hosts.entry((phase.clone(), host.clone())).or_default();
                // A sequence started again after one that was cut short or failed keeps what that one knew: whether
                // the node was cordoned before us, and (same target) whether the upgrade step already ran.
                let carry = h.unfinished() && h.target == target;
                h.was_cordoned = if h.unfinished() { h.was_cordoned } else { *was_cordoned };
                if !carry {
                    h.steps_done.clear();
                    h.steps_cut_short.clear();
                }
                h.in_flight = true;
                h.target = target;
            }
            JournalEntry::StepStarted { phase, host, step, .. } => {
                let h = self.hosts.entry((phase.clone(), host.clone())).or_default();
                if !h.steps_cut_short.contains(step) {
                    h.steps_cut_short.push(step.clone());
                }
            }
            JournalEntry::StepDone { phase, host, step, .. } => {
                let h = self.hosts.entry((phase.clone(), host.clone())).or_default();
                h.steps_cut_short.retain(|s| s != step);
                if !h.did(step) {
                    h.steps_done.push(step.clone());
                }
            }
            JournalEntry::HostFinished { phase, host, outcome, .. } => {
                let h = self.hosts.entry((phase.clone(), host.clone())).or_default();
                h.in_flight = false;
                h.finished = Some(*outcome);
                if *outcome != HostRecord::Failed {
                    h.steps_done.clear();
                }
                h.steps_cut_short.clear();
            }
            JournalEntry::RunFinished { status, .. } => {
                if let Some(hop) = &mut self.hop {
                    hop.finished |= status == "success";
                }
            }
            JournalEntry::HopStarted { hop, hops, from, target, final_target, .. } => {
                self.hop = Some(HopHistory {
                    hop: *hop,
                    hops: *hops,
                    from: from.clone(),
                    target: target.clone(),
                    final_target: final_target.clone(),
                    finished: false,
                });
            }
        }
    }
}

/// The append-only journal of the state directory.
#[derive(Debug)]
pub struct Journal {
    file: File,
    path: PathBuf,
    run: String,
}

impl Journal {
    /// Opens the journal for a new run and reads what earlier runs recorded. `fresh` sets the old journal aside
    /// (renamed, never deleted) so this run starts from nothing.
    pub fn open(state_dir: &Path, fresh: bool) -> Result<(Journal, History)> {
        fs::create_dir_all(state_dir).map_err(|e| state_error(state_dir, e))?;
        let path = state_dir.join("journal.jsonl");
        let now = SystemTime::now();
        if fresh && path.exists() {
            let aside = state_dir.join(format!("journal.{}.jsonl", compact_timestamp(now)));
            fs::rename(&path, &aside).map_err(|e| state_error(&path, e))?;
        }
        let history = read_history(&path)?;
        let mut file = OpenOptions::new().create(true).append(true).open(&path).map_err(|e| state_error(&path, e))?;
        if !ends_with_newline(&path) {
            // Close a line cut short by a kill -9, so this run's first entry starts whole.
            file.write_all(b"\n").map_err(|e| state_error(&path, e))?;
        }
        let run = format!("{}-{}", compact_timestamp(now), std::process::id());
        Ok((Journal { file, path, run }, history))
    }

    pub fn run_id(&self) -> &str {
        &self.run
    }

    /// Another handle on the same journal and run (each hop of an update path has its own run context).
    pub fn try_clone(&self) -> Result<Journal> {
        let file = self.file.try_clone().map_err(|e| state_error(&self.path, e))?;
        Ok(Journal { file, path: self.path.clone(), run: self.run.clone() })
    }

    /// What the journal holds now, this run's entries included.
    pub fn history(&self) -> Result<History> {
        read_history(&self.path)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends one entry and flushes it to disk before returning: what is recorded survives a kill -9.
    pub fn record(&mut self, entry: &JournalEntry) -> Result<()> {
        let mut line = serde_json::to_string(entry).map_err(|e| Error::internal(e.to_string()))?;
        line.push('\n');
        self.file.write_all(line.as_bytes()).map_err(|e| state_error(&self.path, e))?;
        self.file.sync_data().map_err(|e| state_error(&self.path, e))
    }
}

fn ends_with_newline(path: &Path) -> bool {
    use std::io::{Read, Seek, SeekFrom};
    let Ok(mut f) = File::open(path) else { return true };
    if f.seek(SeekFrom::End(-1)).is_err() {
        return true; // empty
    }
    let mut last = [0u8; 1];
    f.read_exact(&mut last).map(|_| last[0] == b'\n').unwrap_or(true)
}

fn read_history(path: &Path) -> Result<History> {
    let mut history = History::default();
    let file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(history),
        Err(e) => return Err(state_error(path, e)),
    };
    // Read as bytes: a kill -9 or a crash of the machine can leave a line cut short, or garbage where the file
    // system had not written yet (even bytes that are not UTF-8). Such a line is skipped; every whole line counts.
    for line in BufReader::new(file).split(b'\n') {
        let line = line.map_err(|e| state_error(path, e))?;
        if let Ok(entry) = serde_json::from_slice::<JournalEntry>(&line) {
            history.apply(&entry);
        }
    }
    Ok(history)
}

/// `2026-11-22T00:27:42Z`
pub fn utc_timestamp(t: SystemTime) -> String {
    let (y, mo, d, h, mi, s) = civil(t);
    format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}Z")
}

/// `20261122T002742Z`: for file and directory names.
pub fn compact_timestamp(t: SystemTime) -> String {
    let (y, mo, d, h, mi, s) = civil(t);
    format!("{y:04}{mo:02}{d:02}T{h:02}{mi:02}{s:02}Z")
}

/// A time as UTC (year, month, day, hour, minute, second): Howard Hinnant's days-to-civil, to avoid a date crate.
pub fn civil(t: SystemTime) -> (i64, u32, u32, u32, u32, u32) {
    let secs = t.duration_since(UNIX_EPOCH).map(|d| d.as_secs() as i64).unwrap_or(0);
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d, (rem / 3600) as u32, (rem % 3600 / 60) as u32, (rem % 60) as u32)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn timestamps_are_utc() {
        let t = UNIX_EPOCH + Duration::from_secs(1_795_307_262);
        assert_eq!(utc_timestamp(t), "2026-11-22T00:27:42Z");
        assert_eq!(compact_timestamp(UNIX_EPOCH), "19700101T000000Z");
        assert_eq!(utc_timestamp(UNIX_EPOCH + Duration::from_secs(951_782_400)), "2000-02-29T00:00:00Z");
    }

    #[test]
    fn a_second_run_is_refused_while_the_first_holds_the_lock() {
        let dir = tempfile::tempdir().unwrap();
        let first = RunLock::acquire(dir.path()).unwrap();
        let err = RunLock::acquire(dir.path()).unwrap_err();
        assert!(err.message.contains(&format!("pid {}", std::process::id())), "{err}");
        drop(first);
        RunLock::acquire(dir.path()).unwrap();
    }

    #[test]
    fn a_stale_lock_is_taken_over() {
        let dir = tempfile::tempdir().unwrap();
        fs::write(dir.path().join("lock"), r#"{"pid": 4000000000, "started": "then"}"#).unwrap();
        RunLock::acquire(dir.path()).unwrap();
    }

    #[test]
    fn a_journal_with_bytes_that_are_not_utf8_is_read_past() {
        let dir = tempfile::tempdir().unwrap();
        let whole = r#"{"event":"run-started","run":"r","time":"t","target":"v1.29.1"}"#;
        fs::write(dir.path().join("journal.jsonl"), [whole.as_bytes(), b"\n\x80\xff{\"ev\n"].concat()).unwrap();
        let (_, history) = Journal::open(dir.path(), false).unwrap();
        assert_eq!((history.runs, history.target.as_deref()), (1, Some("v1.29.1")));
    }

    #[test]
    fn history_says_what_finished_and_what_was_in_flight() {
        let dir = tempfile::tempdir().unwrap();
        {
            let (mut j, history) = Journal::open(dir.path(), false).unwrap();
            assert_eq!(history.runs, 0);
            let run = j.run_id().to_string();
            let t = || "t".to_string();
            let (nodes, n1, n2) = ("nodes".to_string(), "n1".to_string(), "n2".to_string());
            j.record(&JournalEntry::RunStarted { run: run.clone(), time: t(), target: "v1.29.1".into() }).unwrap();
            for h in [&n1, &n2] {
                j.record(&JournalEntry::HostStarted {
                    run: run.clone(),
                    time: t(),
                    phase: nodes.clone(),
                    host: h.clone(),
                    was_cordoned: false,
                })
                .unwrap();
            }
            j.record(&JournalEntry::StepDone {
                run: run.clone(),
                time: t(),
                phase: nodes.clone(),
                host: n2.clone(),
                step: "drain".into(),
            })
            .unwrap();
            j.record(&JournalEntry::HostFinished {
                run,
                time: t(),
                phase: nodes,
                host: n1,
                outcome: HostRecord::Upgraded,
                detail: String::new(),
            })
            .unwrap();
        }
        // A line cut short by a kill -9 is ignored.
        let mut f = OpenOptions::new().append(true).open(dir.path().join("journal.jsonl")).unwrap();
        f.write_all(b"{\"event\":\"host-fin").unwrap();
        drop(f);
        {
            let (mut j, _) = Journal::open(dir.path(), false).unwrap();
            let run = j.run_id().to_string();
            j.record(&JournalEntry::RunFinished { run, time: "t".into(), status: "interrupted".into() }).unwrap();
        }
        let text = fs::read_to_string(dir.path().join("journal.jsonl")).unwrap();
        assert!(text.lines().last().unwrap().contains("run-finished"), "{text}");
        let (_, history) = Journal::open(dir.path(), false).unwrap();
        assert_eq!(history.runs, 1);
        assert_eq!(history.target.as_deref(), Some("v1.29.1"));
        let n1 = history.host("nodes", "n1").unwrap();
        assert_eq!((n1.finished, n1.in_flight), (Some(HostRecord::Upgraded), false));
        let n2 = history.host("nodes", "n2").unwrap();
        assert_eq!((n2.finished, n2.in_flight, n2.steps_done.clone()), (None, true, vec!["drain".to_string()]));

        let (_, fresh) = Journal::open(dir.path(), true).unwrap();
        assert_eq!(fresh.runs, 0);
    }
}
