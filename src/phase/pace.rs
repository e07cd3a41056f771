//! The batches' pace as the run goes, for the maintenance window's prediction (maintenance.rs): when the last batch
//! started and how long each took, gate to gate. Held by the run (run.rs); it sees nothing of the run, so the run can
//! hold it.

use std::sync::Mutex;
use std::time::{Duration, Instant};

#[derive(Default)]
pub(crate) struct Pace {
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    batch_started: Option<Instant>,
    batches: Vec<Duration>,
    control_plane_checked: bool,
}

impl Pace {
    /// True the first time only: the control-plane phase is checked once, before its first master.
    pub(crate) fn first_master(&self) -> bool {
        self.state.lock().map(|mut s| !std::mem::replace(&mut s.control_plane_checked, true)).unwrap_or(false)
    }

    /// At a batch's gate: the batch before (if any) ends here; the mean time of the batches so far.
    pub(crate) fn mean_so_far(&self) -> Duration {
        let Ok(mut state) = self.state.lock() else { return Duration::ZERO };
        if let Some(started) = state.batch_started.take() {
            state.batches.push(started.elapsed());
        }
        match u32::try_from(state.batches.len()) {
            Ok(0) | Err(_) => Duration::ZERO,
            Ok(n) => state.batches.iter().sum::<Duration>() / n,
        }
    }

    /// The run waited `paused` at a gate (a pause): not part of the batch before, whose time the next gate takes.
    pub(crate) fn exclude(&self, paused: Duration) {
        if let Ok(mut state) = self.state.lock() {
            if let Some(started) = &mut state.batch_started {
                *started += paused;
            }
        }
    }

    /// A batch starts now.
    pub(crate) fn batch_starts(&self) {
        if let Ok(mut state) = self.state.lock() {
            state.batch_started = Some(Instant::now());
        }
    }
}
