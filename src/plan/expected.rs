//! How long a run is expected to take, from what earlier runs on this inventory recorded (its state directory's
//! journal): one host's sequence per phase (the hosts of a batch run side by side, so a batch takes about one host's
//! time), each step's usual time (for the stall notices), the phases without batches as a whole. Where no earlier run
//! recorded a time, defaults stand in, and every line that uses them says so.

use std::time::Duration;

use crate::journal::Durations;
use crate::vocabulary::{Phase, Step};

/// A step that runs past this many times its usual time is said to stall...
pub(crate) const STALL_FACTOR: f64 = 3.0;
/// ...once it has also run this much longer than usual (a 5 s step that takes 16 s is no stall).
pub(crate) const STALL_MIN_EXTRA: Duration = Duration::from_secs(120);

/// The usual times, from the journal's history or the defaults.
#[derive(Debug, Clone, Default)]
pub(crate) struct Estimate {
    durations: Durations,
}

/// A usual time and whether earlier runs measured it (else it is a default).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Usual {
    pub seconds: f64,
    pub measured: bool,
}

impl Estimate {
    pub(crate) fn new(durations: Durations) -> Estimate {
        Estimate { durations }
    }

    /// The earlier runs the times come from.
    pub(crate) fn runs(&self) -> usize {
        self.durations.runs()
    }

    /// One host's sequence in `phase`.
    pub(crate) fn host(&self, phase: Phase) -> Usual {
        match self.durations.host_seconds(phase) {
            Some(seconds) => Usual { seconds, measured: true },
            None => Usual { seconds: default_host_seconds(phase), measured: false },
        }
    }

    /// `step` in `phase`.
    pub(crate) fn step(&self, phase: Phase, step: Step) -> Usual {
        match self.durations.step_seconds(phase, step) {
            Some(seconds) => Usual { seconds, measured: true },
            None => Usual { seconds: default_step_seconds(step), measured: false },
        }
    }

    /// A phase of `batches` batches (none: a phase without hosts of its own, as preflight and verify).
    pub(crate) fn phase(&self, phase: Phase, batches: usize) -> Usual {
        if batches > 0 {
            let host = self.host(phase);
            return Usual { seconds: host.seconds * batches as f64, measured: host.measured };
        }
        match self.durations.phase_seconds(phase) {
            Some(seconds) => Usual { seconds, measured: true },
            None => Usual { seconds: default_phase_seconds(phase), measured: false },
        }
    }

    /// What the journals of `state_dir` recorded.
    pub(crate) fn from_state_dir(state_dir: &std::path::Path) -> Estimate {
        Estimate::new(Durations::read(state_dir))
    }

    /// A plan's run: its phases one after the other, each of its batches after the other.
    pub(crate) fn plan(&self, plan: &super::Plan) -> Expected {
        self.run(&phase_batches(plan))
    }

    /// The whole run: its phases (with their numbers of batches) one after the other.
    pub(crate) fn run(&self, phases: &[(Phase, usize)]) -> Expected {
        let mut seconds = 0.0;
        let mut measured = false;
        let mut defaulted = false;
        for (phase, batches) in phases {
            let usual = self.phase(*phase, *batches);
            seconds += usual.seconds;
            measured |= usual.measured;
            defaulted |= !usual.measured;
        }
        Expected { seconds: seconds.round() as u64, runs: if measured { self.runs() } else { 0 }, defaulted }
    }
}

/// The plan's phases with their numbers of batches.
pub(crate) fn phase_batches(plan: &super::Plan) -> Vec<(Phase, usize)> {
    plan.phases.iter().map(|p| (p.phase, p.batches.len())).collect()
}

/// The run's predicted duration.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Expected {
    pub seconds: u64,
    /// The earlier runs the prediction comes from (0: defaults only).
    pub runs: usize,
    /// Some phases had no earlier time: defaults stand in for them.
    pub defaulted: bool,
}

impl Expected {
    /// `expected: about 2h10m (from 3 earlier runs)`; with defaults, says so.
    pub fn line(&self) -> String {
        let about = crate::time_format::short_duration(Duration::from_secs(self.seconds));
        let from = match (self.runs, self.defaulted) {
            (0, _) => "defaults: no earlier run on this inventory recorded its times".to_string(),
            (1, false) => "from 1 earlier run".to_string(),
            (n, false) => format!("from {n} earlier runs"),
            (1, true) => "from 1 earlier run, defaults for what it did not time".to_string(),
            (n, true) => format!("from {n} earlier runs, defaults for what they did not time"),
        };
        format!("expected: about {about} ({from})")
    }
}

/// One host's sequence when nothing was measured: generous guesses for a real cluster (a master's upgrade and its
/// gates take longer than a node's).
fn default_host_seconds(phase: Phase) -> f64 {
    match phase {
        Phase::ControlPlane => 600.0,
        Phase::Nodes => 480.0,
        Phase::EtcdBackup => 120.0,
        Phase::ConfigBackup => 60.0,
        Phase::ClusterPreHook | Phase::ClusterMidHook | Phase::ClusterPostHook => 120.0,
        Phase::RollbackBlueGreen => 120.0,
        Phase::Preflight | Phase::Verify => 60.0,
    }
}

fn default_phase_seconds(phase: Phase) -> f64 {
    match phase {
        Phase::Preflight => 120.0,
        Phase::Verify => 60.0,
        other => default_host_seconds(other),
    }
}

fn default_step_seconds(step: Step) -> f64 {
    match step {
        Step::Drain | Step::Upgrade => 300.0,
        Step::WaitReady | Step::ControlPlanePods => 180.0,
        Step::Restart | Step::ControlPlaneHealth | Step::Backup => 120.0,
        step if step.is_hook() => 180.0,
        _ => 60.0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::journal::JournalEntry;

    fn nodes_history(runs: &[(&str, u64)]) -> Durations {
        let mut entries = Vec::new();
        for (i, (run, seconds)) in runs.iter().enumerate() {
            let at = |s: u64| {
                crate::time_format::utc_timestamp(
                    std::time::UNIX_EPOCH + Duration::from_secs(1_795_000_000 + i as u64 * 100_000 + s),
                )
            };
            for text in [
                format!(r#"{{"event":"run-started","run":"{run}","time":"{}","target":"v1.29.1"}}"#, at(0)),
                format!(
                    r#"{{"event":"step-done","run":"{run}","time":"{}","phase":"preflight","host":"m1","step":"read-cluster"}}"#,
                    at(60)
                ),
                format!(r#"{{"event":"host-started","run":"{run}","time":"{}","phase":"nodes","host":"n1"}}"#, at(100)),
                format!(
                    r#"{{"event":"host-finished","run":"{run}","time":"{}","phase":"nodes","host":"n1","outcome":"upgraded","detail":""}}"#,
                    at(100 + seconds)
                ),
            ] {
                entries.push(serde_json::from_str::<JournalEntry>(&text).expect("entry"));
            }
        }
        Durations::from_entries(&entries)
    }

    #[test]
    fn a_run_is_predicted_from_the_hosts_earlier_runs_upgraded_one_batch_after_the_other() {
        let estimate = Estimate::new(nodes_history(&[("r1", 1800), ("r2", 2400), ("r3", 2100)]));
        let expected = estimate.run(&[(Phase::Preflight, 0), (Phase::Nodes, 3)]);
        // Preflight took 60 s each time; a node 2100 s (the median); three batches of nodes.
        assert_eq!(expected, Expected { seconds: 60 + 3 * 2100, runs: 3, defaulted: false });
        assert_eq!(expected.line(), "expected: about 1h46m (from 3 earlier runs)");
    }

    #[test]
    fn without_history_the_prediction_uses_defaults_and_says_so() {
        let expected = Estimate::default().run(&[(Phase::Preflight, 0), (Phase::ControlPlane, 3), (Phase::Nodes, 2)]);
        assert_eq!(expected.seconds, 120 + 3 * 600 + 2 * 480);
        assert_eq!(
            expected.line(),
            "expected: about 48m00s (defaults: no earlier run on this inventory recorded its times)"
        );
        let partly = Estimate::new(nodes_history(&[("r1", 600)])).run(&[(Phase::ControlPlane, 1), (Phase::Nodes, 1)]);
        assert_eq!(partly.line(), "expected: about 20m00s (from 1 earlier run, defaults for what it did not time)");
        assert_eq!(Estimate::default().step(Phase::Nodes, Step::Drain), Usual { seconds: 300.0, measured: false });
    }
}
