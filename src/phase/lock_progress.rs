//! The run's progress as the cluster lock carries it (data key `progress`), for `upgrade status` on any machine: the
//! phase, the batch in flight, the hosts done, failed, skipped and left, and at the end the result. Kept small and
//! bounded (a ConfigMap is read by every status call): at most [`MAX_BATCH_NAMES`] host names.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use crate::events::Event;
use crate::plan::Plan;
use crate::plan::expected::{Estimate, phase_batches};
use crate::report::eta::Eta;
use crate::vocabulary::{HostOutcome, Phase};

/// How many hosts of the batch in flight the record names; the rest are counted.
pub(crate) const MAX_BATCH_NAMES: usize = 10;

/// The record, as JSON in the lock's `progress` data key.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub(crate) struct ProgressRecord {
    /// The phase running (the last one, once the run ended).
    #[serde(default)]
    pub phase: String,
    /// The batch in flight, 1-based, of `batches` (0: the phase has no batches).
    #[serde(default)]
    pub batch: usize,
    #[serde(default)]
    pub batches: usize,
    /// The hosts of the batch in flight (the first [`MAX_BATCH_NAMES`]) and how many it has.
    #[serde(default)]
    pub batch_hosts: Vec<String>,
    #[serde(default)]
    pub batch_size: usize,
    /// Hosts to upgrade (control plane and nodes): upgraded, failed, skipped (already at the target), left.
    #[serde(default)]
    pub done: usize,
    #[serde(default)]
    pub failed: usize,
    #[serde(default)]
    pub skipped: usize,
    #[serde(default)]
    pub left: usize,
    /// When the record was made (UTC).
    #[serde(default)]
    pub updated: String,
    /// The run's time left as it was then (from the journal's history, corrected by the run's pace).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub eta_seconds: Option<u64>,
    /// While the run waits for `upgrade resume`: what waits (`batch 2`, `master m2`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paused_before: Option<String>,
    /// Once the run ended: `success`, `failed` or `interrupted`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<String>,
}

impl ProgressRecord {
    pub(crate) fn parse(text: &str) -> Option<ProgressRecord> {
        serde_json::from_str(text).ok()
    }

    /// `nodes: batch 1 of 2 (node-1, node-2, node-3) - 4 done, 0 failed, 0 skipped, 5 left`
    pub(crate) fn describe(&self) -> String {
        let mut text = if self.phase.is_empty() { "starting".to_string() } else { self.phase.clone() };
        if self.batch > 0 {
            text.push_str(&format!(": batch {} of {}", self.batch, self.batches));
            if !self.batch_hosts.is_empty() {
                let more = self.batch_size.saturating_sub(self.batch_hosts.len());
                let more = if more > 0 { format!(" and {more} more") } else { String::new() };
                text.push_str(&format!(" ({}{more})", self.batch_hosts.join(", ")));
            }
        }
        text.push_str(&format!(
            " - hosts: {} done, {} failed, {} skipped, {} left",
            self.done, self.failed, self.skipped, self.left
        ));
        if let (Some(before), None) = (&self.paused_before, &self.result) {
            text.push_str(&format!(" - PAUSED: {before} waits for `upgrade resume`"));
        }
        if let (Some(left), None) = (self.eta_seconds, &self.result) {
            let left = crate::time_format::short_duration(std::time::Duration::from_secs(left));
            text.push_str(&format!(" - about {left} left"));
        }
        text
    }
}

/// Follows the run's events and keeps its record.
#[derive(Default)]
pub(crate) struct Tracker {
    /// The time left, when the state directory is known (`with_eta`).
    eta: Option<Eta>,
    record: ProgressRecord,
    /// The hosts the plan upgrades (control plane and nodes).
    planned: BTreeSet<String>,
    /// Of those, the ones whose sequence ended.
    ended: BTreeSet<String>,
}

fn upgrades(phase: Phase) -> bool {
    matches!(phase, Phase::ControlPlane | Phase::Nodes)
}

impl Tracker {
    pub(crate) fn new(plan: &Plan) -> Tracker {
        let planned: BTreeSet<String> = plan
            .phases
            .iter()
            .filter(|p| upgrades(p.phase))
            .flat_map(|p| p.batches.iter().flatten().cloned())
            .collect();
        let record = ProgressRecord { left: planned.len(), ..ProgressRecord::default() };
        Tracker { record, planned, ended: BTreeSet::new(), eta: None }
    }

    /// The record carries the time left, predicted from the journals of `state_dir`.
    pub(crate) fn with_eta(mut self, plan: &Plan, state_dir: &std::path::Path) -> Tracker {
        self.eta = Some(Eta::new(Estimate::from_state_dir(state_dir), phase_batches(plan)));
        self
    }

    /// Follows one event; true when the record changed (a phase or batch started or ended, a host's sequence ended).
    pub(crate) fn event(&mut self, event: &Event) -> bool {
        if let Some(eta) = &self.eta {
            crate::events::EventSink::event(eta, event);
        }
        let r = &mut self.record;
        match event {
            Event::PhaseStarted { phase } => {
                r.phase = phase.name().to_string();
                (r.batch, r.batches, r.batch_size) = (0, 0, 0);
                r.batch_hosts.clear();
                true
            }
            Event::BatchStarted { phase, index, total, hosts } => {
                r.phase = phase.name().to_string();
                (r.batch, r.batches, r.batch_size) = (*index, *total, hosts.len());
                r.batch_hosts = hosts.iter().take(MAX_BATCH_NAMES).cloned().collect();
                true
            }
            Event::BatchFinished { .. } | Event::PhaseFinished { .. } => true,
            Event::Paused { before, .. } => {
                r.paused_before = Some(before.clone());
                true
            }
            Event::Resumed { .. } => r.paused_before.take().is_some(),
            Event::HostFinished { report } if upgrades(report.phase) && self.planned.contains(&report.host) => {
                // A host ends once per phase; a re-counted end (not expected) does not count twice.
                if !self.ended.insert(report.host.clone()) {
                    return false;
                }
                match &report.outcome {
                    HostOutcome::Upgraded { .. } => r.done += 1,
                    HostOutcome::Failed { .. } => r.failed += 1,
                    // A node passed over (it could not be drained) is left below the target, as a skipped one.
                    HostOutcome::Skipped { .. } | HostOutcome::PassedOver { .. } => r.skipped += 1,
                    HostOutcome::NotStarted { .. } => {
                        self.ended.remove(&report.host);
                        return false;
                    }
                }
                r.left = self.planned.len().saturating_sub(self.ended.len());
                true
            }
            _ => false,
        }
    }

    /// The run ended with `result` (`success`, `failed`, `interrupted`).
    pub(crate) fn finish(&mut self, result: &str) {
        self.record.result = Some(result.to_string());
    }

    /// The record as the lock carries it, stamped now.
    pub(crate) fn json(&mut self) -> String {
        self.record.updated = crate::time_format::utc_timestamp(std::time::SystemTime::now());
        self.record.eta_seconds = self.eta.as_ref().and_then(Eta::left).map(|left| left.as_secs());
        serde_json::to_string(&self.record).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vocabulary::HostReport;
    use std::time::Duration;

    fn ended(host: &str, outcome: HostOutcome) -> Event {
        Event::HostFinished {
            report: HostReport {
                phase: Phase::Nodes,
                host: host.into(),
                node: None,
                outcome,
                duration: Duration::from_secs(1),
                window: None,
            },
        }
    }

    #[test]
    fn a_pause_is_in_the_record_while_the_run_waits_and_gone_once_resumed() {
        let mut tracker =
            Tracker { record: ProgressRecord { left: 2, ..ProgressRecord::default() }, ..Tracker::default() };
        tracker.event(&Event::PhaseStarted { phase: Phase::Nodes });
        let paused = Event::Paused { by: "ops@laptop".into(), at: "t".into(), before: "batch 2".into(), timeout: None };
        assert!(tracker.event(&paused), "the record changed: written at once");
        let record = ProgressRecord::parse(&tracker.json()).unwrap();
        assert_eq!(record.paused_before.as_deref(), Some("batch 2"));
        assert!(record.describe().ends_with(" - PAUSED: batch 2 waits for `upgrade resume`"), "{}", record.describe());
        let resumed = Event::Resumed { by: None, before: "batch 2".into(), waited: Duration::from_secs(5) };
        assert!(tracker.event(&resumed));
        assert_eq!(ProgressRecord::parse(&tracker.json()).unwrap().paused_before, None);
        assert!(!tracker.json().contains("paused_before"), "absent when not paused: the record stays small");
    }

    #[test]
    fn the_record_follows_phases_batches_and_hosts_and_stays_small() {
        let hosts: Vec<String> = (1..=30).map(|i| format!("node-{i}")).collect();
        let mut tracker = Tracker {
            record: ProgressRecord { left: 30, ..ProgressRecord::default() },
            planned: hosts.iter().cloned().collect(),
            ended: BTreeSet::new(),
            // No history: the defaults, 8 minutes a batch of nodes.
            eta: Some(Eta::new(Estimate::default(), vec![(Phase::Nodes, 2)])),
        };
        assert!(tracker.event(&Event::PhaseStarted { phase: Phase::Nodes }));
        assert!(tracker.event(&Event::BatchStarted {
            phase: Phase::Nodes,
            index: 1,
            total: 2,
            hosts: hosts[..15].to_vec()
        }));
        assert!(tracker.event(&ended("node-1", HostOutcome::Upgraded { left_cordoned: false })));
        assert!(!tracker.event(&ended("node-1", HostOutcome::Upgraded { left_cordoned: false })), "counted once");
        tracker.event(&ended(
            "node-2",
            HostOutcome::Failed {
                step: crate::vocabulary::Step::Drain,
                reason: "timed out".into(),
                unreachable: false,
                left_cordoned: true,
            },
        ));
        tracker.event(&ended("node-3", HostOutcome::Skipped { reason: "already at the target".into() }));
        let text = tracker.json();
        assert!(text.len() < 1024, "{} bytes: {text}", text.len());
        let mut record = ProgressRecord::parse(&text).unwrap();
        assert_eq!((record.done, record.failed, record.skipped, record.left), (1, 1, 1, 27));
        let left = record.eta_seconds.expect("the time left");
        assert!((900..=960).contains(&left), "two batches of 8 minutes by the defaults: {left}");
        record.eta_seconds = Some(245);
        assert_eq!(
            record.describe(),
            "nodes: batch 1 of 2 (node-1, node-2, node-3, node-4, node-5, node-6, node-7, node-8, node-9, node-10 \
             and 5 more) - hosts: 1 done, 1 failed, 1 skipped, 27 left - about 4m05s left"
        );
        tracker.finish("failed");
        assert_eq!(ProgressRecord::parse(&tracker.json()).unwrap().result.as_deref(), Some("failed"));
    }
}
