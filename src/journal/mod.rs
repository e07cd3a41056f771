//! The state directory: a lock so two runs never drive one cluster, and an append-only journal of what each run
//! did, flushed as it goes, so an interrupted run can be resumed without redoing finished hosts.

use std::collections::BTreeMap;
use std::fs::{self, File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex};
use std::time::SystemTime;

use crate::time_format::compact_timestamp;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::vocabulary::{Phase, RunStatus, Step, step_name};

mod durations;
mod lock;

pub(crate) use durations::{Durations, entries_of};
use lock::refused_start;
pub(crate) use lock::{RunLock, host_name};

/// The state directory's default name, beside the inventory.
pub(crate) const DEFAULT_STATE_DIR: &str = ".upgrade-state";

/// One line of the journal.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "kebab-case")]
pub(crate) enum JournalEntry {
    RunStarted {
        run: String,
        time: String,
        target: String,
        /// `upgrade_change_id`, the change ticket, when set.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        change_id: Option<String>,
    },
    /// `was_cordoned`: the node was unschedulable when the sequence started (not by this tool's doing), so a later
    /// run can tell a node cordoned by us from one an operator cordoned.
    HostStarted {
        run: String,
        time: String,
        phase: Phase,
        host: String,
        #[serde(default)]
        was_cordoned: bool,
    },
    /// Recorded for the upgrade step only: a start without a `step-done` means the run died while the command ran
    /// on the host (where it may have finished on its own).
    StepStarted {
        run: String,
        time: String,
        phase: Phase,
        host: String,
        #[serde(with = "step_name")]
        step: Step,
    },
    StepDone {
        run: String,
        time: String,
        phase: Phase,
        host: String,
        #[serde(with = "step_name")]
        step: Step,
    },
    HostFinished {
        run: String,
        time: String,
        phase: Phase,
        host: String,
        outcome: HostRecord,
        detail: String,
    },
    RunFinished {
        run: String,
        time: String,
        status: RunStatus,
    },
    /// A backup written on a host under `dir` (`upgrade_etcd_backup_dir/<timestamp>`): the verified etcd snapshot,
    /// or the configuration files copied into `dir/config` (their paths on the host). `upgrade restore` reads these.
    Backup {
        run: String,
        time: String,
        host: String,
        timestamp: String,
        dir: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        snapshot: Option<String>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        files: Vec<String>,
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
    /// Preflight's gate on removed APIs and flags let the run cross `minor` because the operator acknowledged it
    /// (`upgrade_acknowledge_api_removals`): what had been found then, and the sources that could not be read.
    ApiRemovalsAcknowledged {
        run: String,
        time: String,
        minor: String,
        found: Vec<String>,
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        unreadable: Vec<String>,
    },
}

impl JournalEntry {
    /// Its free text (hosts, targets, details, paths), for masking secrets; the phase, step and status are words of
    /// the tool's own and stay readable, so a masked entry still resumes.
    pub(crate) fn texts_mut(&mut self) -> Vec<&mut String> {
        match self {
            JournalEntry::RunStarted { run, time, target, change_id } => {
                let mut texts = vec![run, time, target];
                texts.extend(change_id.iter_mut());
                texts
            }
            JournalEntry::HostStarted { run, time, host, .. }
            | JournalEntry::StepStarted { run, time, host, .. }
            | JournalEntry::StepDone { run, time, host, .. } => vec![run, time, host],
            JournalEntry::HostFinished { run, time, host, detail, .. } => vec![run, time, host, detail],
            JournalEntry::RunFinished { run, time, .. } => vec![run, time],
            JournalEntry::Backup { run, time, host, timestamp, dir, snapshot, files } => {
                let mut texts = vec![run, time, host, timestamp, dir];
                texts.extend(snapshot.iter_mut());
                texts.extend(files.iter_mut());
                texts
            }
            JournalEntry::HopStarted { run, time, from, target, final_target, .. } => {
                vec![run, time, from, target, final_target]
            }
            JournalEntry::ApiRemovalsAcknowledged { run, time, minor, found, unreadable } => {
                let mut texts = vec![run, time, minor];
                texts.extend(found.iter_mut().chain(unreadable.iter_mut()));
                texts
            }
        }
    }
}

/// How a host's sequence ended, as recorded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub(crate) enum HostRecord {
    Upgraded,
    Skipped,
    Failed,
}

/// What earlier runs recorded about one host in one phase.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct HostHistory {
    /// The last recorded end of its sequence, if it ended.
    pub finished: Option<HostRecord>,
    /// Started (again) after its last end: the run stopped while the host was in flight.
    pub in_flight: bool,
    /// Steps done in the attempt that was in flight.
    pub steps_done: Vec<Step>,
    /// Steps started and never recorded done (the upgrade step cut short by a kill).
    pub steps_cut_short: Vec<Step>,
    /// Whether the node was cordoned before the sequence first started (by someone else).
    pub was_cordoned: bool,
    /// The target of the run that recorded the host last.
    pub target: Option<String>,
}

impl HostHistory {
    pub(crate) fn did(&self, step: Step) -> bool {
        self.steps_done.contains(&step)
    }

    /// The last attempt did not end in success: it was cut short or it failed.
    pub(crate) fn unfinished(&self) -> bool {
        self.in_flight || self.finished == Some(HostRecord::Failed)
    }
}

/// Everything earlier runs recorded, per (phase, host).
#[derive(Debug, Clone, Default)]
pub(crate) struct History {
    pub hosts: BTreeMap<(Phase, String), HostHistory>,
    /// The target of the last recorded run.
    pub target: Option<String>,
    pub runs: usize,
    /// The last hop of an update-graph path recorded, if any.
    pub hop: Option<HopHistory>,
    /// How and when the last recorded run ended; `None` when it was cut short (or there was none).
    pub last_end: Option<(RunStatus, String)>,
}

/// The last hop of an update-graph path an earlier run started.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct HopHistory {
    pub hop: usize,
    pub hops: usize,
    pub from: String,
    pub target: String,
    pub final_target: String,
    /// Its run finished with success.
    pub finished: bool,
}

impl History {
    pub(crate) fn host(&self, phase: Phase, host: &str) -> Option<&HostHistory> {
        self.hosts.get(&(phase, host.to_string()))
    }

    /// An earlier run of `target` started this host's sequence in `phase` and did not finish it (cut short or
    /// failed): it runs again, to finish what is left.
    pub(crate) fn unfinished(&self, phase: Phase, host: &str, target: &str) -> bool {
        self.host(phase, host).is_some_and(|h| h.unfinished() && h.target.as_deref() == Some(target))
    }

    /// The host's last recorded sequence in `phase` upgraded it.
    pub(crate) fn upgraded_earlier(&self, phase: Phase, host: &str) -> bool {
        self.host(phase, host).and_then(|h| h.finished) == Some(HostRecord::Upgraded)
    }

    /// An earlier run of `target` ended this host's sequence in `phase` with one of `outcomes`, and nothing started
    /// it again since (a verified backup, a cluster hook run to the end, a blue node evacuated).
    pub(crate) fn finished_for(&self, phase: Phase, host: &str, target: &str, outcomes: &[HostRecord]) -> bool {
        self.host(phase, host).is_some_and(|h| {
            !h.in_flight && h.finished.is_some_and(|f| outcomes.contains(&f)) && h.target.as_deref() == Some(target)
        })
    }

    /// In an unfinished attempt for `target`, `step` was done (`done: true`) or started and never recorded done.
    pub(crate) fn step_of_unfinished(&self, phase: Phase, host: &str, target: &str, step: Step, done: bool) -> bool {
        self.unfinished(phase, host, target)
            && self
                .host(phase, host)
                .is_some_and(|h| if done { h.did(step) } else { h.steps_cut_short.contains(&step) })
    }

    fn apply(&mut self, entry: &JournalEntry) {
        match entry {
            JournalEntry::RunStarted { target, .. } => {
                self.runs += 1;
                self.target = Some(target.clone());
                self.last_end = None;
            }
            JournalEntry::HostStarted { phase, host, was_cordoned, .. } => {
                let target = self.target.clone();
                let h = self.hosts.entry((*phase, host.clone())).or_default();
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
                let h = self.hosts.entry((*phase, host.clone())).or_default();
                if !h.steps_cut_short.contains(step) {
                    h.steps_cut_short.push(*step);
                }
            }
            JournalEntry::StepDone { phase, host, step, .. } => {
                let h = self.hosts.entry((*phase, host.clone())).or_default();
                h.steps_cut_short.retain(|s| s != step);
                if !h.did(*step) {
                    h.steps_done.push(*step);
                }
            }
            JournalEntry::HostFinished { phase, host, outcome, .. } => {
                let h = self.hosts.entry((*phase, host.clone())).or_default();
                h.in_flight = false;
                h.finished = Some(*outcome);
                if *outcome != HostRecord::Failed {
                    h.steps_done.clear();
                }
                h.steps_cut_short.clear();
            }
            JournalEntry::Backup { .. } | JournalEntry::ApiRemovalsAcknowledged { .. } => {}
            JournalEntry::RunFinished { status, time, .. } => {
                self.last_end = Some((*status, time.clone()));
                if let Some(hop) = &mut self.hop {
                    hop.finished |= *status == RunStatus::Success;
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
pub(crate) struct Journal {
    file: File,
    path: PathBuf,
    run: String,
    commit: Arc<GroupCommit>,
}

/// Entries appended by hosts in flight are made durable together (a group commit): one fdatasync, begun after
/// their writes, serves every entry written before it began, and each writer waits for one such sync before it goes
/// on. Hundreds of hosts in flight each recorded their steps with an fdatasync of their own: a tenth of a wide run's
/// CPU, and the worker threads blocked on the disk meanwhile.
#[derive(Debug, Default)]
struct GroupCommit {
    state: Mutex<Commit>,
    wake: Condvar,
    synced: tokio::sync::watch::Sender<Synced>,
}

#[derive(Debug, Default)]
struct Commit {
    /// Entries written (the last one's number).
    written: u64,
    /// Entries known to be on disk.
    synced: u64,
    /// The sync thread was started (it ends when the journal is dropped, or at a failed sync).
    syncing: bool,
    /// The journal was dropped: the thread ends once it has synced what was written.
    closed: bool,
}

#[derive(Debug, Default)]
struct Synced {
    upto: u64,
    /// Why a sync failed: no entry is durable past this point.
    failed: Option<String>,
}

/// An entry written and not yet known to be on disk.
#[must_use = "an entry is durable only once `durable` returns"]
pub(crate) struct Pending {
    number: u64,
    commit: Arc<GroupCommit>,
}

impl Pending {
    /// Waits until the entry is on disk; the error is the reason a sync failed (`No space left on device`).
    pub(crate) async fn durable(self) -> std::result::Result<(), String> {
        let mut synced = self.commit.synced.subscribe();
        let seen = synced.wait_for(|s| s.upto >= self.number || s.failed.is_some()).await;
        match seen {
            Ok(s) if s.upto >= self.number => Ok(()),
            Ok(s) => Err(s.failed.clone().unwrap_or_default()),
            Err(_) => Err("the journal was closed".into()),
        }
    }
}

impl GroupCommit {
    /// Syncs what was written, again and again, until the journal is dropped or a sync fails.
    fn sync_loop(&self, file: File) {
        loop {
            let target = {
                let Ok(mut state) = self.state.lock() else { return };
                while state.written <= state.synced && !state.closed {
                    state = match self.wake.wait(state) {
                        Ok(state) => state,
                        Err(_) => return,
                    };
                }
                if state.written <= state.synced {
                    return;
                }
                state.written
            };
            match file.sync_data() {
                Ok(()) => self.synced_up_to(target),
                Err(e) => {
                    // The run stops on this failure; every entry not yet synced waits no more and fails with it.
                    self.synced.send_modify(|s| s.failed = Some(crate::error::io_reason(&e)));
                    return;
                }
            }
        }
    }

    /// Entries up to `number` are on disk: their writers go on.
    fn synced_up_to(&self, number: u64) {
        if let Ok(mut state) = self.state.lock() {
            state.synced = state.synced.max(number);
        }
        self.synced.send_modify(|s| s.upto = s.upto.max(number));
    }
}

impl Drop for Journal {
    fn drop(&mut self) {
        if let Ok(mut state) = self.commit.state.lock() {
            state.closed = true;
        }
        self.commit.wake.notify_all();
    }
}

impl Journal {
    /// Opens the journal for a new run and reads what earlier runs recorded. `fresh` sets the old journal aside
    /// (renamed, never deleted) so this run starts from nothing.
    pub(crate) fn open(state_dir: &Path, fresh: bool) -> Result<(Journal, History)> {
        fs::create_dir_all(state_dir).map_err(|e| refused_start(state_dir, e))?;
        let path = state_dir.join("journal.jsonl");
        let now = SystemTime::now();
        if fresh && path.exists() {
            let aside = state_dir.join(format!("journal.{}.jsonl", compact_timestamp(now)));
            fs::rename(&path, &aside).map_err(|e| refused_start(&path, e))?;
        }
        let history = read_history(&path)?;
        let mut file = OpenOptions::new().create(true).append(true).open(&path).map_err(|e| refused_start(&path, e))?;
        if !ends_with_newline(&path) {
            // Close a line cut short by a kill -9, so this run's first entry starts whole.
            file.write_all(b"\n").map_err(|e| refused_start(&path, e))?;
        }
        let run = format!("{}-{}", compact_timestamp(now), std::process::id());
        Ok((Journal { file, path, run, commit: Arc::default() }, history))
    }

    /// A journal that keeps nothing, for commands that change nothing to resume (`upgrade plan --live`,
    /// `upgrade unlock`): they run the built-in step files through the same run context as an upgrade.
    pub(crate) fn detached() -> Result<Journal> {
        let path = PathBuf::from("/dev/null");
        let file = OpenOptions::new().append(true).open(&path).map_err(|e| refused_start(&path, e))?;
        let run = format!("{}-{}", compact_timestamp(SystemTime::now()), std::process::id());
        Ok(Journal { file, path, run, commit: Arc::default() })
    }

    pub(crate) fn run_id(&self) -> &str {
        &self.run
    }

    /// Another handle on the same journal and run (each hop of an update path has its own run context).
    pub(crate) fn try_clone(&self) -> Result<Journal> {
        let file = self.file.try_clone().map_err(|e| refused_start(&self.path, e))?;
        Ok(Journal { file, path: self.path.clone(), run: self.run.clone(), commit: Arc::default() })
    }

    /// What the journal holds now, this run's entries included.
    pub(crate) fn history(&self) -> Result<History> {
        read_history(&self.path)
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Appends one entry and flushes it to disk before returning: what is recorded survives a kill -9.
    pub(crate) fn record(&mut self, entry: &JournalEntry) -> Result<()> {
        let number = self.write(entry)?;
        self.file.sync_data().map_err(|e| self.failed(&e))?;
        // That sync covered every entry written before this one too.
        self.commit.synced_up_to(number);
        Ok(())
    }

    /// Appends one entry; it is on disk once the `Pending` returned says so (entries appended meanwhile share the
    /// sync: see `GroupCommit`).
    pub(crate) fn append(&mut self, entry: &JournalEntry) -> Result<Pending> {
        let number = self.write(entry)?;
        let start = self.commit.state.lock().map(|mut state| !std::mem::replace(&mut state.syncing, true));
        if start.unwrap_or(false) {
            let file = self.file.try_clone().map_err(|e| self.failed(&e))?;
            let commit = self.commit.clone();
            std::thread::Builder::new()
                .name("journal".into())
                .spawn(move || commit.sync_loop(file))
                .map_err(|e| Error::internal(format!("cannot start the journal's sync thread: {e}")))?;
        }
        self.commit.wake.notify_all();
        Ok(Pending { number, commit: self.commit.clone() })
    }

    /// The message is the bare reason (`No space left on device`): the caller names the file.
    fn failed(&self, e: &std::io::Error) -> Error {
        Error::internal(crate::error::io_reason(e)).in_file(&self.path)
    }

    /// Writes one entry (not synced), returning its number in this journal.
    fn write(&mut self, entry: &JournalEntry) -> Result<u64> {
        let mut line = serde_json::to_string(entry).map_err(|e| Error::internal(e.to_string()))?;
        line.push('\n');
        self.file.write_all(line.as_bytes()).map_err(|e| self.failed(&e))?;
        let mut state = self.commit.state.lock().map_err(|_| Error::internal("the journal's state was poisoned"))?;
        state.written += 1;
        Ok(state.written)
    }
}

/// A backup one host recorded: the etcd snapshot and the configuration files under `dir`, for `upgrade restore`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct HostBackup {
    pub host: String,
    pub timestamp: String,
    pub dir: String,
    /// The verified snapshot, when the host is an etcd host.
    pub snapshot: Option<String>,
    /// The configuration paths copied into `dir/config`.
    pub files: Vec<String>,
}

/// Every backup the journals of the state directory record (the current one and those `--fresh` set aside), one
/// per host and timestamp, oldest first.
pub(crate) fn read_backups(state_dir: &Path) -> Result<Vec<HostBackup>> {
    let mut journals: Vec<PathBuf> = match fs::read_dir(state_dir) {
        Ok(dir) => dir
            .flatten()
            .map(|e| e.path())
            .filter(|p| {
                let name = p.file_name().and_then(|n| n.to_str()).unwrap_or_default();
                name.starts_with("journal.") && name.ends_with(".jsonl")
            })
            .collect(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(e) => return Err(refused_start(state_dir, e)),
    };
    // journal.<timestamp>.jsonl (set aside) sort before journal.jsonl (the current one).
    journals.sort();
    let mut backups: Vec<HostBackup> = Vec::new();
    for path in journals {
        let file = File::open(&path).map_err(|e| refused_start(&path, e))?;
        for line in BufReader::new(file).split(b'\n') {
            let line = line.map_err(|e| refused_start(&path, e))?;
            let Ok(JournalEntry::Backup { host, timestamp, dir, snapshot, files, .. }) = serde_json::from_slice(&line)
            else {
                continue;
            };
            let index = match backups.iter().position(|b| b.host == host && b.timestamp == timestamp) {
                Some(i) => i,
                None => {
                    backups.push(HostBackup { host, timestamp, dir, ..HostBackup::default() });
                    backups.len() - 1
                }
            };
            let backup = &mut backups[index];
            if snapshot.is_some() {
                backup.snapshot = snapshot;
            }
            backup.files.extend(files);
        }
    }
    Ok(backups)
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
        Err(e) => return Err(refused_start(path, e)),
    };
    // Read as bytes: a kill -9 or a crash of the machine can leave a line cut short, or garbage where the file
    // system had not written yet (even bytes that are not UTF-8). Such a line is skipped; every whole line counts.
    for line in BufReader::new(file).split(b'\n') {
        let line = line.map_err(|e| refused_start(path, e))?;
        if let Ok(entry) = serde_json::from_slice::<JournalEntry>(&line) {
            history.apply(&entry);
        }
    }
    Ok(history)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step_done(run: &str, host: &str) -> JournalEntry {
        JournalEntry::StepDone {
            run: run.into(),
            time: "2026-11-23T00:00:00Z".into(),
            phase: Phase::Nodes,
            host: host.into(),
            step: Step::Drain,
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn entries_of_many_hosts_at_once_are_each_on_disk_once_their_wait_returns() {
        let dir = tempfile::tempdir().unwrap();
        let (journal, _) = Journal::open(dir.path(), false).unwrap();
        let run = journal.run_id().to_string();
        let journal = Arc::new(Mutex::new(journal));
        let hosts: Vec<_> = (0..200)
            .map(|i| {
                let (journal, run) = (journal.clone(), run.clone());
                let path = dir.path().join("journal.jsonl");
                tokio::spawn(async move {
                    let host = format!("n{i}");
                    let pending = journal.lock().unwrap().append(&step_done(&run, &host)).unwrap();
                    pending.durable().await.unwrap();
                    // Durable means written too: the history read now has the host's step.
                    read_history(&path).unwrap().host(Phase::Nodes, &host).is_some_and(|h| h.did(Step::Drain))
                })
            })
            .collect();
        for host in hosts {
            assert!(host.await.unwrap());
        }
        // A blocking record after them still works, and a wait on an entry it covered returns at once.
        let pending = journal.lock().unwrap().append(&step_done(&run, "m1")).unwrap();
        journal.lock().unwrap().record(&step_done(&run, "m2")).unwrap();
        pending.durable().await.unwrap();
        assert_eq!(fs::read_to_string(dir.path().join("journal.jsonl")).unwrap().lines().count(), 202);
    }

    #[tokio::test]
    async fn an_entry_appended_just_before_the_journal_is_closed_is_still_synced() {
        let dir = tempfile::tempdir().unwrap();
        let (mut journal, _) = Journal::open(dir.path(), false).unwrap();
        let run = journal.run_id().to_string();
        let pending = journal.append(&step_done(&run, "n1")).unwrap();
        drop(journal);
        pending.durable().await.unwrap();
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
    fn a_stale_lock_is_taken_over_even_when_its_pid_runs_again() {
        for pid in [4_000_000_000, 1, std::process::id()] {
            let dir = tempfile::tempdir().unwrap();
            fs::write(dir.path().join("lock"), format!(r#"{{"pid": {pid}, "started": "then"}}"#)).unwrap();
            let lock = RunLock::acquire(dir.path()).unwrap();
            drop(lock);
            assert!(dir.path().join("lock").exists(), "the lock file is never deleted");
        }
    }

    #[test]
    fn fifty_threads_taking_over_one_stale_lock_at_once_leave_exactly_one_holder() {
        // The old create-then-write lock, taken over by delete-then-create, let several of them through in about one
        // round in five of these (checked with a copy of its logic); a flock cannot.
        for _ in 0..50 {
            let dir = tempfile::tempdir().unwrap();
            fs::write(dir.path().join("lock"), "left by a killed run").unwrap();
            let barrier = std::sync::Arc::new(std::sync::Barrier::new(50));
            let tries: Vec<_> = (0..50)
                .map(|_| {
                    let (barrier, dir) = (barrier.clone(), dir.path().to_path_buf());
                    std::thread::spawn(move || {
                        barrier.wait();
                        RunLock::acquire(&dir)
                    })
                })
                .collect();
            // Every lock taken is held until all are counted.
            let locks: Vec<_> = tries.into_iter().map(|t| t.join().unwrap()).collect();
            assert_eq!(locks.iter().filter(|l| l.is_ok()).count(), 1);
        }
    }

    #[test]
    fn the_refusal_names_the_holder_and_its_run() {
        let dir = tempfile::tempdir().unwrap();
        let mut first = RunLock::acquire(dir.path()).unwrap();
        first.name_run("20261123T100000Z-42").unwrap();
        let err = RunLock::acquire(dir.path()).unwrap_err();
        assert_eq!(err.exit_code(), 2);
        assert!(err.message.contains(&format!("on {}, run 20261123T100000Z-42", host_name())), "{err}");
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
            let (nodes, n1, n2) = (Phase::Nodes, "n1".to_string(), "n2".to_string());
            j.record(&JournalEntry::RunStarted {
                run: run.clone(),
                time: t(),
                target: "v1.29.1".into(),
                change_id: None,
            })
            .unwrap();
            for h in [&n1, &n2] {
                j.record(&JournalEntry::HostStarted {
                    run: run.clone(),
                    time: t(),
                    phase: nodes,
                    host: h.clone(),
                    was_cordoned: false,
                })
                .unwrap();
            }
            j.record(&JournalEntry::StepDone {
                run: run.clone(),
                time: t(),
                phase: nodes,
                host: n2.clone(),
                step: Step::Drain,
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
            j.record(&JournalEntry::RunFinished { run, time: "t".into(), status: RunStatus::Interrupted }).unwrap();
        }
        let text = fs::read_to_string(dir.path().join("journal.jsonl")).unwrap();
        assert!(text.lines().last().unwrap().contains("run-finished"), "{text}");
        let (_, history) = Journal::open(dir.path(), false).unwrap();
        assert_eq!(history.runs, 1);
        assert_eq!(history.target.as_deref(), Some("v1.29.1"));
        let n1 = history.host(Phase::Nodes, "n1").unwrap();
        assert_eq!((n1.finished, n1.in_flight), (Some(HostRecord::Upgraded), false));
        let n2 = history.host(Phase::Nodes, "n2").unwrap();
        assert_eq!((n2.finished, n2.in_flight, n2.steps_done.clone()), (None, true, vec![Step::Drain]));

        let (_, fresh) = Journal::open(dir.path(), true).unwrap();
        assert_eq!(fresh.runs, 0);
    }
}
