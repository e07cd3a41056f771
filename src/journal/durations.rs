//! How long things took in earlier runs, read from the journal: each host's sequence per phase, each step per phase,
//! and the phases without hosts of their own (preflight, verify). What the predicted duration, the time left and the
//! stall notices are made of. The state directory belongs to one inventory, so one flavour: the host groups are the
//! phases (the masters' control-plane, the nodes' nodes).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::BufRead;
use std::path::Path;

use super::{HostRecord, JournalEntry};
use crate::time_format::parse_utc_millis;
use crate::vocabulary::{Phase, Step};

/// The durations earlier runs recorded, in seconds.
#[derive(Debug, Default, Clone)]
pub(crate) struct Durations {
    /// A host's whole sequence in a phase, for the hosts it upgraded.
    hosts: BTreeMap<Phase, Vec<f64>>,
    /// A step's time in a phase: from the entry before it on the same host to its `step-done`.
    steps: HashMap<(Phase, Step), Vec<f64>>,
    /// A phase's span in a run, from its first entry (preflight: the run's start) to its last.
    phases: BTreeMap<Phase, Vec<f64>>,
    /// The runs any of these came from.
    runs: BTreeSet<String>,
}

impl Durations {
    /// What the journals of `state_dir` recorded (the current one and those set aside by `--fresh`). A journal that
    /// cannot be read gives nothing: a prediction then uses its defaults and says so.
    pub(crate) fn read(state_dir: &Path) -> Durations {
        let mut paths: Vec<_> =
            std::fs::read_dir(state_dir).map(|dir| dir.flatten().map(|e| e.path()).collect()).unwrap_or_default();
        paths.retain(|p| {
            let name = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
            name.starts_with("journal.") && name.ends_with(".jsonl")
        });
        paths.sort();
        let entries: Vec<JournalEntry> = paths.iter().flat_map(|p| entries_of(p).unwrap_or_default()).collect();
        Durations::from_entries(&entries)
    }

    pub(crate) fn from_entries(entries: &[JournalEntry]) -> Durations {
        let mut durations = Durations::default();
        let secs = |time: &str| parse_utc_millis(time).map(|ms| ms as f64 / 1000.0);
        let mut run_start: HashMap<&str, f64> = HashMap::new();
        // (run, phase, host) -> when its sequence started, and when its last entry was.
        let mut host_start: HashMap<(&str, Phase, &str), f64> = HashMap::new();
        let mut last_entry: HashMap<(&str, Phase, &str), f64> = HashMap::new();
        let mut spans: BTreeMap<(&str, Phase), (f64, f64)> = BTreeMap::new();
        for entry in entries {
            let (run, time, phase, host) = match entry {
                JournalEntry::RunStarted { run, time, .. } => {
                    if let Some(t) = secs(time) {
                        run_start.insert(run, t);
                    }
                    continue;
                }
                JournalEntry::HostStarted { run, time, phase, host, .. }
                | JournalEntry::StepStarted { run, time, phase, host, .. }
                | JournalEntry::StepDone { run, time, phase, host, .. }
                | JournalEntry::HostFinished { run, time, phase, host, .. } => (run.as_str(), time, *phase, host),
                _ => continue,
            };
            let Some(t) = secs(time) else { continue };
            let from = if phase == Phase::Preflight { run_start.get(run).copied().unwrap_or(t) } else { t };
            let s = spans.entry((run, phase)).or_insert((from, t));
            s.0 = s.0.min(from);
            s.1 = s.1.max(t);
            let key = (run, phase, host.as_str());
            match entry {
                JournalEntry::HostStarted { .. } => {
                    host_start.insert(key, t);
                }
                JournalEntry::StepDone { step, .. } => {
                    if let Some(before) = last_entry.get(&key) {
                        durations.steps.entry((phase, *step)).or_default().push(t - before);
                        durations.runs.insert(run.to_string());
                    }
                }
                JournalEntry::HostFinished { outcome: HostRecord::Upgraded, .. } => {
                    if let Some(start) = host_start.remove(&key) {
                        durations.hosts.entry(phase).or_default().push(t - start);
                        durations.runs.insert(run.to_string());
                    }
                }
                _ => {}
            }
            last_entry.insert(key, t);
        }
        for ((_, phase), (from, to)) in spans {
            durations.phases.entry(phase).or_default().push(to - from);
        }
        durations
    }

    /// How many earlier runs the durations come from.
    pub(crate) fn runs(&self) -> usize {
        self.runs.len()
    }

    /// The usual time of one host's sequence in `phase` (the median of the hosts it upgraded).
    pub(crate) fn host_seconds(&self, phase: Phase) -> Option<f64> {
        median(self.hosts.get(&phase)?)
    }

    /// The usual time of `step` in `phase`.
    pub(crate) fn step_seconds(&self, phase: Phase, step: Step) -> Option<f64> {
        median(self.steps.get(&(phase, step))?)
    }

    /// The usual span of `phase` in a run.
    pub(crate) fn phase_seconds(&self, phase: Phase) -> Option<f64> {
        median(self.phases.get(&phase)?)
    }
}

/// Every whole entry of one journal file; a line cut short by a crash is skipped, as when the journal is read to
/// resume.
pub(crate) fn entries_of(path: &Path) -> std::io::Result<Vec<JournalEntry>> {
    let file = std::fs::File::open(path)?;
    let mut entries = Vec::new();
    for line in std::io::BufReader::new(file).split(b'\n') {
        if let Ok(entry) = serde_json::from_slice::<JournalEntry>(&line?) {
            entries.push(entry);
        }
    }
    Ok(entries)
}

fn median(values: &[f64]) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    let mut sorted = values.to_vec();
    sorted.sort_by(|a, b| a.total_cmp(b));
    let mid = sorted.len() / 2;
    Some(if sorted.len() % 2 == 0 { (sorted[mid - 1] + sorted[mid]) / 2.0 } else { sorted[mid] })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(text: &str) -> JournalEntry {
        serde_json::from_str(text).expect("a journal entry")
    }

    /// Two runs: n1 and n2 upgraded in 100 s and 140 s, n1's drain 40 s then 60 s; a third run only skipped.
    #[test]
    fn the_usual_times_are_the_medians_of_what_earlier_runs_recorded_and_skipped_hosts_do_not_count() {
        let mut entries = Vec::new();
        for (run, start, host, drain, total) in [("r1", 0, "n1", 40, 100), ("r2", 1000, "n2", 60, 140)] {
            let at = |s: u64| {
                crate::time_format::utc_timestamp(
                    std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_795_000_000 + start + s),
                )
            };
            entries.push(line(&format!(
                r#"{{"event":"run-started","run":"{run}","time":"{}","target":"v1.29.1"}}"#,
                at(0)
            )));
            entries.push(line(&format!(r#"{{"event":"step-done","run":"{run}","time":"{}","phase":"preflight","host":"m1","step":"read-cluster"}}"#, at(30))));
            entries.push(line(&format!(
                r#"{{"event":"host-started","run":"{run}","time":"{}","phase":"nodes","host":"{host}"}}"#,
                at(50)
            )));
            entries.push(line(&format!(
                r#"{{"event":"step-done","run":"{run}","time":"{}","phase":"nodes","host":"{host}","step":"cordon"}}"#,
                at(51)
            )));
            entries.push(line(&format!(
                r#"{{"event":"step-done","run":"{run}","time":"{}","phase":"nodes","host":"{host}","step":"drain"}}"#,
                at(51 + drain)
            )));
            entries.push(line(&format!(r#"{{"event":"host-finished","run":"{run}","time":"{}","phase":"nodes","host":"{host}","outcome":"upgraded","detail":""}}"#, at(50 + total))));
        }
        entries.push(line(
            r#"{"event":"host-started","run":"r3","time":"2026-11-22T00:00:00Z","phase":"nodes","host":"n1"}"#,
        ));
        entries.push(line(r#"{"event":"host-finished","run":"r3","time":"2026-11-22T00:00:01Z","phase":"nodes","host":"n1","outcome":"skipped","detail":""}"#));
        let durations = Durations::from_entries(&entries);
        assert_eq!(durations.host_seconds(Phase::Nodes), Some(120.0));
        assert_eq!(durations.step_seconds(Phase::Nodes, Step::Drain), Some(50.0));
        assert_eq!(durations.step_seconds(Phase::Nodes, Step::Cordon), Some(1.0));
        assert_eq!(durations.phase_seconds(Phase::Preflight), Some(30.0), "preflight counts from the run's start");
        assert_eq!(durations.host_seconds(Phase::ControlPlane), None);
        assert_eq!(durations.runs(), 2, "the run that only skipped taught nothing");
    }

    #[test]
    fn a_state_directory_without_a_journal_has_no_durations() {
        let dir = tempfile::tempdir().expect("dir");
        let durations = Durations::read(dir.path());
        assert_eq!(durations.runs(), 0);
        assert_eq!(durations.host_seconds(Phase::Nodes), None);
    }
}
