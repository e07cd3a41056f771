//! The steps in flight, as a person watching reads them: what each waits for and since when. The progress display
//! shows it on its host's line; piped output (a log, CI) gets a line per step still running every
//! [`HEARTBEAT`], so a hung drain never looks like silence or like a step that just began.

use std::collections::BTreeMap;
use std::time::{Duration, Instant, SystemTime};

use crate::vocabulary::Step;

/// How often piped output says that a step is still running.
pub(crate) const HEARTBEAT: Duration = Duration::from_secs(30);

/// What a step waits for while it runs, in a person's words.
pub(crate) fn waits_for(step: Step) -> &'static str {
    match step {
        Step::Drain => "waiting for its pods to be evicted",
        Step::WaitReady => "waiting for the node to be Ready at the target",
        Step::ControlPlaneHealth => "waiting for the API server and etcd to answer healthy",
        Step::ControlPlanePods => "waiting for the control-plane pods to be Running and Ready",
        Step::Upgrade => "installing the target's packages",
        Step::Restart => "restarting the node's services",
        Step::Backup => "taking the etcd snapshot",
        Step::ConfigBackup => "copying the configuration files",
        Step::Csr => "reading the pending certificate signing requests",
        step if step.is_hook() => "running the hook's tasks",
        Step::ReadCluster | Step::Verify => "reading the cluster",
        _ => "running",
    }
}

/// `14:03:12`: the wall-clock time of day (UTC), as the timestamped lines show it.
pub(crate) fn clock(t: SystemTime) -> String {
    let stamp = crate::time_format::utc_timestamp(t);
    stamp.get(11..19).unwrap_or(&stamp).to_string()
}

pub(crate) use crate::time_format::short_duration;

/// A step in flight on one host.
#[derive(Debug, Clone)]
pub(crate) struct RunningStep {
    pub step: Step,
    pub since: SystemTime,
    pub started: Instant,
    /// When a line last said this step runs (its start, or the last heartbeat).
    pub said: Instant,
}

impl RunningStep {
    pub(crate) fn new(step: Step) -> RunningStep {
        let now = Instant::now();
        RunningStep { step, since: SystemTime::now(), started: now, said: now }
    }

    /// `drain: waiting for its pods to be evicted, since 14:03:12`
    pub(crate) fn label(&self) -> String {
        format!("{}: {}, since {}", self.step, waits_for(self.step), clock(self.since))
    }
}

/// The steps in flight, per host.
#[derive(Debug, Default)]
pub(crate) struct Running {
    steps: BTreeMap<String, RunningStep>,
}

impl Running {
    pub(crate) fn started(&mut self, host: &str, step: Step) {
        self.steps.insert(host.to_string(), RunningStep::new(step));
    }

    pub(crate) fn ended(&mut self, host: &str) {
        self.steps.remove(host);
    }

    pub(crate) fn clear(&mut self) {
        self.steps.clear();
    }

    /// The lines for the steps nothing was said about for `every`:
    /// `[node-5] drain still running (30s): waiting for its pods to be evicted, since 14:03:12`.
    pub(crate) fn heartbeat(&mut self, every: Duration) -> Vec<String> {
        let now = Instant::now();
        let mut lines = Vec::new();
        for (host, running) in &mut self.steps {
            if now.duration_since(running.said) >= every {
                running.said = now;
                lines.push(format!(
                    "[{host}] {} still running ({}): {}, since {}",
                    running.step,
                    short_duration(now.duration_since(running.started)),
                    waits_for(running.step),
                    clock(running.since)
                ));
            }
        }
        lines
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_step_nothing_was_said_about_for_the_interval_gets_one_line_naming_what_it_waits_for() {
        let mut running = Running::default();
        running.started("node-5", Step::Drain);
        assert!(running.heartbeat(Duration::from_millis(80)).is_empty(), "it just began");
        std::thread::sleep(Duration::from_millis(90));
        let lines = running.heartbeat(Duration::from_millis(80));
        assert_eq!(lines.len(), 1, "{lines:?}");
        assert!(lines[0].starts_with("[node-5] drain still running (0s): waiting for its pods to be evicted, since "));
        assert!(running.heartbeat(Duration::from_millis(80)).is_empty(), "once per interval");
        running.ended("node-5");
        std::thread::sleep(Duration::from_millis(90));
        assert!(running.heartbeat(Duration::from_millis(80)).is_empty(), "an ended step is not running");
    }

    #[test]
    fn durations_read_as_a_person_says_them() {
        assert_eq!(short_duration(Duration::from_secs(12)), "12s");
        assert_eq!(short_duration(Duration::from_secs(245)), "4m05s");
        assert_eq!(short_duration(Duration::from_secs(7800)), "2h10m");
    }
}
