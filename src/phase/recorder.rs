//! How a run is told and recorded: events to the reporters, behind a gate that an exit at once closes, and entries
//! appended to the journal with secrets masked; a state directory that cannot be written stops the run.

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::{Arc, Mutex, OnceLock, RwLock};

use super::batches::StopHandle;
use crate::events::{Event, EventSink, SharedSink};
use crate::journal::{Journal, JournalEntry};
use crate::redact::Redactor;
use crate::time_format::utc_timestamp;
use crate::vocabulary::RunStatus;

/// The run's events and journal.
pub(crate) struct Recorder {
    sink: Arc<EventGate>,
    /// None once the run has ended at once (`end_now`): nothing is recorded after its last line.
    journal: Mutex<Option<Journal>>,
    run_id: String,
    /// Masks `upgrade_secret_vars` values in journal entries (events are masked by the sink already).
    redactor: Arc<Redactor>,
    pub write_failures: Arc<WriteFailures>,
}

impl Recorder {
    pub(crate) fn new(
        sink: SharedSink,
        journal: Journal,
        redactor: Arc<Redactor>,
        write_failures: Arc<WriteFailures>,
    ) -> Recorder {
        Recorder {
            sink: Arc::new(EventGate { inner: sink, open: RwLock::new(true) }),
            run_id: journal.run_id().to_string(),
            journal: Mutex::new(Some(journal)),
            redactor,
            write_failures,
        }
    }

    pub(crate) fn event(&self, event: Event) {
        self.sink.event(&event);
    }

    pub(crate) fn notice(&self, host: Option<&str>, message: impl Into<String>) {
        self.event(Event::Notice { host: host.map(str::to_string), message: message.into() });
    }

    /// The reporters, behind the gate (for the task engine's events).
    pub(crate) fn sink(&self) -> SharedSink {
        self.sink.clone()
    }

    pub(crate) fn run_id(&self) -> &str {
        &self.run_id
    }

    /// Appends to the journal, its secrets masked; false when it could not be written (then the run stops: see
    /// `WriteFailures`) or the run has ended (`end_now`).
    pub(crate) fn record(&self, entry: JournalEntry) -> bool {
        let entry = self.masked(entry);
        let (result, path) = match self.journal.lock().as_deref_mut() {
            Ok(Some(journal)) => (journal.record(&entry), journal.path().to_path_buf()),
            Ok(None) | Err(_) => return false,
        };
        match result {
            Ok(()) => true,
            Err(e) => {
                self.write_failures.failed("the journal", &path, &e.message);
                false
            }
        }
    }

    /// Appends to the journal as `record` does, and waits until the entry is on disk with the others appended
    /// meanwhile (one sync for all: see `journal::GroupCommit`). For the hosts in flight, which record every step.
    pub(crate) async fn record_durably(&self, entry: JournalEntry) -> bool {
        let entry = self.masked(entry);
        let (appended, path) = match self.journal.lock().as_deref_mut() {
            Ok(Some(journal)) => (journal.append(&entry), journal.path().to_path_buf()),
            Ok(None) | Err(_) => return false,
        };
        let result = match appended {
            Ok(pending) => pending.durable().await,
            Err(e) => Err(e.message),
        };
        match result {
            Ok(()) => true,
            Err(reason) => {
                self.write_failures.failed("the journal", &path, &reason);
                false
            }
        }
    }

    fn masked(&self, mut entry: JournalEntry) -> JournalEntry {
        if !self.redactor.is_empty() {
            for text in entry.texts_mut() {
                *text = self.redactor.text(text);
            }
        }
        entry
    }

    /// A second interrupt: the process exits without waiting for the hosts in flight, once the output queued so far
    /// is written (which can take seconds). The journal gets its last line and the reporters their last events now;
    /// from then on the tasks still running record nothing, say nothing and start no step, so the line that says
    /// the run ended stays the journal's last and `Exiting` the last event, and no host is touched while the output
    /// drains. Commands already running on hosts end on their own.
    pub(crate) fn end_now(&self, message: &str) {
        // Waits for events being reported now, then closes the gate to every later one.
        let Ok(mut open) = self.sink.open.write() else { return };
        self.sink.inner.event(&Event::Notice { host: None, message: message.to_string() });
        if let Ok(mut slot) = self.journal.lock() {
            if let Some(mut journal) = slot.take() {
                let entry = JournalEntry::RunFinished {
                    run: self.run_id.clone(),
                    time: utc_timestamp(std::time::SystemTime::now()),
                    status: RunStatus::Interrupted,
                };
                if let Err(e) = journal.record(&entry) {
                    self.write_failures.failed("the journal", journal.path(), &e.message);
                }
            }
        }
        self.sink.inner.event(&Event::Exiting);
        *open = false;
    }

    /// The run ended at once (`end_now`): nothing new starts.
    pub(crate) fn has_ended(&self) -> bool {
        self.journal.lock().map(|j| j.is_none()).unwrap_or(true)
    }
}

/// Failures to write the state directory (the journal, the host logs): ENOSPC, EROFS, EIO. The first one stops the
/// run as a first interrupt does (no new host starts, hosts in flight finish their sequence), since whatever is done
/// without a journal entry could not be resumed correctly; the run then ends with exit 1, never as a success. Each
/// kind of file is said once, on the reporters that still work (the terminal or the JSON stream).
pub(crate) struct WriteFailures {
    /// The first failure: (what and where, why).
    first: OnceLock<(String, String)>,
    said: Mutex<BTreeSet<&'static str>>,
    stop: Arc<StopHandle>,
    say: SharedSink,
}

impl WriteFailures {
    pub(crate) fn new(stop: Arc<StopHandle>, say: SharedSink) -> WriteFailures {
        WriteFailures { first: OnceLock::new(), said: Mutex::new(BTreeSet::new()), stop, say }
    }

    /// `what` names the kind of file (`the journal`, `the host log`); `error` says why the write failed.
    pub(crate) fn failed(&self, what: &'static str, path: &Path, error: &str) {
        let text = format!("cannot write {what} {}: {error}", path.display());
        let first = self.first.set((text.clone(), error.to_string())).is_ok();
        if first {
            self.stop.stop();
        }
        let new_kind = self.said.lock().map(|mut said| said.insert(what)).unwrap_or(false);
        if new_kind {
            self.say.event(&Event::Notice {
                host: None,
                message: format!(
                    "{text}: no new host starts; hosts in flight finish their sequence; the run ends with exit 1 \
                     (free space in the state directory or make it writable, then re-run the same command)"
                ),
            });
        }
    }

    /// The run's one stop handle, which this shares with the cluster lock's fence (cluster_lock.rs): a run that can
    /// no longer vouch for its lock stops as a failed write or an interrupt stops it.
    pub(crate) fn stop_handle(&self) -> &StopHandle {
        &self.stop
    }

    /// The first write that failed, if any: which file and why.
    pub(crate) fn failure(&self) -> Option<&String> {
        self.first.get().map(|(text, _)| text)
    }

    /// Why the first write failed (`No space left on device`).
    pub(crate) fn reason(&self) -> Option<&String> {
        self.first.get().map(|(_, reason)| reason)
    }
}

/// The reporters behind a gate that `Recorder::end_now` closes for good after the run's last events.
struct EventGate {
    inner: SharedSink,
    /// Read for every event (reporters are called concurrently); written once, to close.
    open: RwLock<bool>,
}

impl EventSink for EventGate {
    fn event(&self, event: &Event) {
        if let Ok(open) = self.open.read() {
            if *open {
                self.inner.event(event);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::phase::batches::stop_signal;
    use crate::vocabulary::{Phase, Step};

    #[test]
    fn journal_entries_are_masked_but_a_secret_that_spells_a_phase_leaves_the_phase_readable() {
        let dir = tempfile::tempdir().unwrap();
        let (journal, _) = Journal::open(dir.path(), false).unwrap();
        let run = journal.run_id().to_string();
        let (stop, _signal) = stop_signal();
        let sink: SharedSink = Arc::new(crate::events::NoEvents);
        let failures = Arc::new(WriteFailures::new(Arc::new(stop), sink.clone()));
        let redactor = Arc::new(Redactor::new(["nodes".to_string(), "tok-123".to_string()]));
        let recorder = Recorder::new(sink, journal, redactor, failures);
        let time = "t".to_string();
        let (phase, host) = (Phase::Nodes, "n1".to_string());
        assert!(recorder.record(JournalEntry::StepDone {
            run: run.clone(),
            time: time.clone(),
            phase,
            host: host.clone(),
            step: Step::Drain
        }));
        let outcome = crate::journal::HostRecord::Failed;
        let detail = "drain: kubectl --token=tok-123 failed on nodes".to_string();
        assert!(recorder.record(JournalEntry::HostFinished { run, time, phase, host, outcome, detail }));
        let text = std::fs::read_to_string(dir.path().join("journal.jsonl")).unwrap();
        assert!(!text.contains("tok-123"), "{text}");
        assert!(text.contains(r#""detail":"drain: kubectl --token=******** failed on ********""#), "{text}");
        assert_eq!(text.matches(r#""phase":"nodes""#).count(), 2, "{text}");
    }
}
