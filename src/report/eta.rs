//! The time left, corrected as the run goes, and the steps that stall. Fed every event first (before the reporters
//! that show it): where the run is (phase, batch), how long this run's hosts took against their usual time (the
//! correction), and the steps in flight. The usual times come from the journal's history (`plan::expected`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::events::{Event, EventSink};
use crate::plan::expected::{Estimate, STALL_FACTOR, STALL_MIN_EXTRA};
use crate::vocabulary::{HostOutcome, Phase, Step};

pub(crate) struct Eta {
    estimate: Estimate,
    state: Mutex<State>,
    /// How much longer than usual a step must also run to stall (2 minutes; shorter in the unit tests).
    min_extra: Duration,
    /// The monotonic clock every time here is read from: the machine's, or a test's that moves only when told.
    clock: Arc<dyn Clock>,
}

/// Where "now" comes from, so that what depends on time passing is tested without waiting for it.
pub(crate) trait Clock: Send + Sync {
    fn now(&self) -> Instant;
}

/// The machine's monotonic clock.
pub(crate) struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Instant {
        Instant::now()
    }
}

#[derive(Default)]
struct State {
    /// The run's phases with their numbers of batches (as planned, then as each phase says when its batch starts).
    phases: Vec<(Phase, usize)>,
    /// The phase in flight (an index into `phases`), and whether it has finished.
    current: Option<(usize, bool)>,
    phase_started: Option<Instant>,
    /// The batch in flight: (index, total, since).
    batch: Option<(usize, usize, Instant)>,
    /// This run's upgraded hosts: the time they took, and their usual time.
    took: f64,
    usual: f64,
    hosts: HashMap<String, Instant>,
    /// The steps in flight by host: phase, step, since, said to stall.
    steps: HashMap<String, (Phase, Step, Instant, bool)>,
}

impl Eta {
    pub(crate) fn new(estimate: Estimate, phases: Vec<(Phase, usize)>) -> Eta {
        Eta::with_min_extra(estimate, phases, STALL_MIN_EXTRA)
    }

    pub(crate) fn with_min_extra(estimate: Estimate, phases: Vec<(Phase, usize)>, min_extra: Duration) -> Eta {
        Eta::with_clock(estimate, phases, min_extra, Arc::new(SystemClock))
    }

    pub(crate) fn with_clock(
        estimate: Estimate,
        phases: Vec<(Phase, usize)>,
        min_extra: Duration,
        clock: Arc<dyn Clock>,
    ) -> Eta {
        Eta { estimate, state: Mutex::new(State { phases, ..State::default() }), min_extra, clock }
    }

    fn since(&self, then: Instant) -> Duration {
        self.clock.now().saturating_duration_since(then)
    }

    /// The run's time left: the batch in flight, the rest of its phase, the phases after it.
    pub(crate) fn left(&self) -> Option<Duration> {
        let state = self.state.lock().ok()?;
        let correction = state.correction();
        let (later, now) = match state.current {
            Some((i, finished)) => {
                let now = if finished { 0.0 } else { self.phase_left(&state, i, correction) };
                (i + 1, now)
            }
            None => (0, 0.0),
        };
        let rest: f64 =
            state.phases.iter().skip(later).map(|(p, b)| self.estimate.phase(*p, *b).seconds * correction).sum();
        Some(Duration::from_secs_f64((now + rest).max(0.0)))
    }

    /// The time left in the phase in flight.
    pub(crate) fn phase_left_now(&self) -> Option<Duration> {
        let state = self.state.lock().ok()?;
        match state.current {
            Some((i, false)) => Some(Duration::from_secs_f64(self.phase_left(&state, i, state.correction()))),
            _ => None,
        }
    }

    fn phase_left(&self, state: &State, i: usize, correction: f64) -> f64 {
        let Some((phase, batches)) = state.phases.get(i).copied() else { return 0.0 };
        let elapsed = |since: Instant| self.since(since).as_secs_f64();
        if batches == 0 {
            let usual = self.estimate.phase(phase, 0).seconds * correction;
            return (usual - state.phase_started.map_or(0.0, elapsed)).max(0.0);
        }
        let host = self.estimate.host(phase).seconds * correction;
        match state.batch {
            Some((index, total, since)) => (host - elapsed(since)).max(0.0) + total.saturating_sub(index) as f64 * host,
            None => batches as f64 * host,
        }
    }

    /// The steps that have now run past [`STALL_FACTOR`] times their usual time and `min_extra` more, each once.
    pub(crate) fn stalls(&self) -> Vec<Event> {
        let Ok(mut state) = self.state.lock() else { return Vec::new() };
        let mut stalled = Vec::new();
        for (host, (phase, step, since, said)) in &mut state.steps {
            let usual = self.estimate.step(*phase, *step);
            let usual_time = Duration::from_secs_f64(usual.seconds.max(0.0));
            let running = self.since(*since);
            if !*said && running.as_secs_f64() > STALL_FACTOR * usual.seconds && running >= usual_time + self.min_extra
            {
                *said = true;
                stalled.push(Event::Stalled {
                    phase: *phase,
                    host: host.clone(),
                    step: *step,
                    running,
                    usual: usual_time,
                    usual_measured: usual.measured,
                });
            }
        }
        stalled.sort_by(|a, b| stall_host(a).cmp(stall_host(b)));
        stalled
    }

    /// Every `every`, the stalls found go to `sink`, for as long as the sink is there.
    pub(crate) fn watch_stalls(
        self: &std::sync::Arc<Eta>,
        sink: std::sync::Weak<dyn EventSink>,
        every: Duration,
    ) -> Option<std::thread::JoinHandle<()>> {
        let eta = self.clone();
        std::thread::Builder::new()
            .name("stalls".into())
            .spawn(move || {
                loop {
                    std::thread::sleep(every);
                    let Some(sink) = sink.upgrade() else { return };
                    for stall in eta.stalls() {
                        sink.event(&stall);
                    }
                }
            })
            .ok()
    }
}

/// `drain has run 16m02s, over 3 times its usual 5m00s (from earlier runs on this inventory): it may be stuck`
pub(crate) fn stall_text(step: Step, running: Duration, usual: Duration, usual_measured: bool) -> String {
    let from =
        if usual_measured { "from earlier runs on this inventory" } else { "a default: no earlier run timed it" };
    format!(
        "{step} has run {}, over {STALL_FACTOR} times its usual {} ({from}): it may be stuck",
        crate::time_format::short_duration(running),
        crate::time_format::short_duration(usual)
    )
}

fn stall_host(event: &Event) -> &str {
    match event {
        Event::Stalled { host, .. } => host,
        _ => "",
    }
}

impl State {
    /// How this run's hosts compare with their usual time so far (1 until one finished), within reason.
    fn correction(&self) -> f64 {
        if self.took > 0.0 && self.usual > 0.0 { (self.took / self.usual).clamp(0.2, 5.0) } else { 1.0 }
    }
}

impl EventSink for Eta {
    fn event(&self, event: &Event) {
        let Ok(mut state) = self.state.lock() else { return };
        let state = &mut *state;
        let now = self.clock.now();
        match event {
            // Each hop of an update path is a run of its own, with the same phases.
            Event::RunStarted { .. } => {
                state.current = None;
                state.batch = None;
            }
            Event::PhaseStarted { phase } => {
                let from = state.current.map_or(0, |(i, _)| i + 1);
                let i = match state.phases.iter().skip(from).position(|(p, _)| p == phase) {
                    Some(at) => from + at,
                    None => {
                        // A phase the plan did not list (the backup a control-plane run takes first): in its place.
                        let at = from.min(state.phases.len());
                        state.phases.insert(at, (*phase, 0));
                        at
                    }
                };
                state.current = Some((i, false));
                state.phase_started = Some(now);
                state.batch = None;
            }
            Event::BatchStarted { index, total, .. } => {
                if let Some((i, _)) = state.current {
                    if let Some(entry) = state.phases.get_mut(i) {
                        entry.1 = *total;
                    }
                }
                state.batch = Some((*index, *total, now));
            }
            Event::PhaseFinished { .. } => {
                if let Some((_, finished)) = &mut state.current {
                    *finished = true;
                }
                state.batch = None;
            }
            Event::HostStarted { host, .. } => {
                state.hosts.insert(host.clone(), now);
            }
            Event::HostFinished { report } => {
                let started = state.hosts.remove(&report.host);
                if let (Some(started), HostOutcome::Upgraded { .. }) = (started, &report.outcome) {
                    state.took += now.saturating_duration_since(started).as_secs_f64();
                    state.usual += self.estimate.host(report.phase).seconds;
                }
                state.steps.remove(&report.host);
            }
            Event::StepStarted { phase, host, step } => {
                state.steps.insert(host.clone(), (*phase, *step, now, false));
            }
            Event::StepFinished { host, .. } => {
                state.steps.remove(host);
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::journal::{Durations, JournalEntry};
    use crate::vocabulary::HostReport;

    /// A clock that stands still until the test moves it.
    struct TestClock {
        start: Instant,
        moved: Mutex<Duration>,
    }

    impl TestClock {
        fn new() -> Arc<TestClock> {
            Arc::new(TestClock { start: Instant::now(), moved: Mutex::new(Duration::ZERO) })
        }

        fn advance(&self, by: Duration) {
            *self.moved.lock().unwrap() += by;
        }
    }

    impl Clock for TestClock {
        fn now(&self) -> Instant {
            self.start + *self.moved.lock().unwrap()
        }
    }

    /// Earlier runs: a node took 2 s, its drain 0.2 s (times in whole seconds in the journal: 2 s and 1 s here).
    fn estimate() -> Estimate {
        let lines = [
            r#"{"event":"run-started","run":"r1","time":"2026-11-22T00:00:00Z","target":"v1.29.1"}"#,
            r#"{"event":"host-started","run":"r1","time":"2026-11-22T00:00:10Z","phase":"nodes","host":"n1"}"#,
            r#"{"event":"step-done","run":"r1","time":"2026-11-22T00:00:11Z","phase":"nodes","host":"n1","step":"drain"}"#,
            r#"{"event":"host-finished","run":"r1","time":"2026-11-22T00:00:12Z","phase":"nodes","host":"n1","outcome":"upgraded","detail":""}"#,
        ];
        let entries: Vec<JournalEntry> = lines.iter().map(|l| serde_json::from_str(l).expect("entry")).collect();
        Estimate::new(Durations::from_entries(&entries))
    }

    fn finished(host: &str) -> Event {
        Event::HostFinished {
            report: HostReport {
                phase: Phase::Nodes,
                host: host.into(),
                node: None,
                outcome: HostOutcome::Upgraded { left_cordoned: false },
                duration: Duration::ZERO,
                window: None,
            },
        }
    }

    #[test]
    fn the_time_left_counts_the_batches_to_come_and_is_corrected_by_how_long_this_runs_hosts_took() {
        let clock = TestClock::new();
        let eta = Eta::with_clock(estimate(), vec![(Phase::Nodes, 3)], STALL_MIN_EXTRA, clock.clone());
        assert_eq!(eta.left(), Some(Duration::from_secs(6)), "three batches of 2 s before the run starts");
        eta.event(&Event::PhaseStarted { phase: Phase::Nodes });
        eta.event(&Event::BatchStarted { phase: Phase::Nodes, index: 1, total: 3, hosts: vec!["n1".into()] });
        eta.event(&Event::HostStarted { phase: Phase::Nodes, host: "n1".into() });
        clock.advance(Duration::from_millis(500));
        assert_eq!(eta.left(), Some(Duration::from_millis(5500)), "1.5 s of this batch and two more batches");
        // n1 took 4 s where 2 s was usual: the batches to come are expected to take twice as long.
        clock.advance(Duration::from_millis(3500));
        eta.event(&finished("n1"));
        eta.event(&Event::BatchStarted { phase: Phase::Nodes, index: 2, total: 3, hosts: vec!["n2".into()] });
        assert_eq!(eta.left(), Some(Duration::from_secs(8)), "two batches of 4 s");
        assert!(eta.phase_left_now().is_some());
        eta.event(&Event::PhaseFinished { phase: Phase::Nodes, ok: true, duration: Duration::ZERO });
        assert_eq!(eta.left(), Some(Duration::ZERO));
    }

    #[test]
    fn a_step_past_three_times_its_usual_time_is_said_to_stall_once_and_a_finished_one_never() {
        let clock = TestClock::new();
        let eta = Eta::with_clock(estimate(), vec![(Phase::Nodes, 1)], Duration::from_millis(100), clock.clone());
        eta.event(&Event::StepStarted { phase: Phase::Nodes, host: "n1".into(), step: Step::Drain });
        eta.event(&Event::StepStarted { phase: Phase::Nodes, host: "n2".into(), step: Step::Drain });
        clock.advance(Duration::from_millis(2500));
        assert!(eta.stalls().is_empty(), "a drain usually takes 1 s: 2.5 s is not yet 3 times that");
        eta.event(&Event::StepFinished {
            phase: Phase::Nodes,
            host: "n2".into(),
            step: Step::Drain,
            ok: true,
            duration: Duration::ZERO,
            error: None,
        });
        clock.advance(Duration::from_millis(700));
        let stalls = eta.stalls();
        assert_eq!(stalls.len(), 1, "{stalls:?}");
        let Event::Stalled { host, step, usual, usual_measured, running, .. } = &stalls[0] else { panic!() };
        assert_eq!((host.as_str(), *step, *usual, *usual_measured), ("n1", Step::Drain, Duration::from_secs(1), true));
        assert_eq!(*running, Duration::from_millis(3200));
        assert!(eta.stalls().is_empty(), "said once");
    }

    /// A writer the test reads back.
    #[derive(Clone, Default)]
    struct Shared(std::sync::Arc<Mutex<Vec<u8>>>);

    impl std::io::Write for Shared {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl Shared {
        fn text(&self) -> String {
            String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
        }
    }

    #[test]
    fn a_stalled_step_is_said_once_in_the_text_and_the_json_output() {
        let clock = TestClock::new();
        let eta =
            Arc::new(Eta::with_clock(estimate(), vec![(Phase::Nodes, 1)], Duration::from_millis(100), clock.clone()));
        let (text, json) = (Shared::default(), Shared::default());
        let human = super::super::human::HumanReporter::new(Box::new(text.clone()), 0, false);
        let json_out = super::super::json::JsonReporter::new(Box::new(json.clone()));
        let sink: Arc<dyn EventSink> =
            Arc::new(super::super::FanOut(vec![eta.clone(), Arc::new(human), Arc::new(json_out)]));
        let watcher = eta.watch_stalls(Arc::downgrade(&sink), Duration::from_millis(50)).expect("thread");
        sink.event(&Event::StepStarted { phase: Phase::Nodes, host: "n1".into(), step: Step::Drain });
        clock.advance(Duration::from_secs(4));
        // The watcher looks every 50 ms: wait for its first word of the stall, then let it look twice more, which
        // must not say it again.
        let mut looked = 0;
        while !text.text().contains("STALLED?") && looked < 200 {
            std::thread::sleep(Duration::from_millis(20));
            looked += 1;
        }
        std::thread::sleep(Duration::from_millis(100));
        drop(sink);
        watcher.join().expect("the watcher ends with the sink");
        let text = text.text();
        let said: Vec<&str> = text.lines().filter(|l| l.contains("STALLED?")).collect();
        assert_eq!(said.len(), 1, "{text}");
        assert!(said[0].starts_with("[n1] STALLED? drain has run "), "{text}");
        assert!(said[0].contains("over 3 times its usual 1s (from earlier runs on this inventory)"), "{text}");
        let json = json.text();
        let stalls: Vec<serde_json::Value> = json
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .filter(|e| e["event"] == "stall")
            .collect();
        assert_eq!(stalls.len(), 1, "{json}");
        assert_eq!(stalls[0]["host"], "n1");
        assert_eq!(stalls[0]["step"], "drain");
        assert_eq!(stalls[0]["usual_seconds"], 1);
        assert_eq!(stalls[0]["usual_from"], "earlier-runs");
    }
}
