//! Events flow from the executor to reporters; the executor never prints.
//!
//! An event is a plain value. The task engine sends task events; later work adds phase, batch and host events to
//! the same enum, so readers match with a `_` arm.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;

use crate::vocabulary::{HostReport, Phase, Step, Summary};

/// What a finished task did on one host, as Ansible's callbacks and recap count it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TaskStatus {
    Ok,
    Changed,
    Failed,
    Skipped,
    Unreachable,
}

impl TaskStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            TaskStatus::Ok => "ok",
            TaskStatus::Changed => "changed",
            TaskStatus::Failed => "failed",
            TaskStatus::Skipped => "skipped",
            TaskStatus::Unreachable => "unreachable",
        }
    }
}

/// Which task an event is about: its name as shown to people and where it is written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskRef {
    pub name: String,
    pub file: PathBuf,
    pub line: usize,
}

impl std::fmt::Display for TaskRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({}:{})", self.name, self.file.display(), self.line)
    }
}

#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Event {
    /// A host starts a task.
    TaskStarted {
        host: String,
        task: TaskRef,
    },
    /// An attempt of a task with `until`/`retries` did not succeed; another follows after the delay.
    TaskRetry {
        host: String,
        task: TaskRef,
        attempt: u32,
        retries: u32,
        result: Value,
    },
    /// A host finished a task. `result` is what `register` stores (already censored when `no_log` is set).
    /// `ignored`: it failed but `ignore_errors` let the host go on. `rescued`: it failed inside a block whose
    /// `rescue` section then ran.
    TaskFinished {
        host: String,
        task: TaskRef,
        status: TaskStatus,
        result: Value,
        duration: Duration,
        ignored: bool,
        rescued: bool,
    },
    /// A host finished a task list (for `run-tasks`: the whole file; in an upgrade: one step's file).
    TaskListFinished {
        host: String,
        failed: bool,
        unreachable: bool,
    },

    // The upgrade's own events, from the phases.
    /// The run starts: the plan is made and the lock is held.
    RunStarted {
        run: String,
        target: String,
        phases: Vec<Phase>,
        resumed: bool,
        /// `upgrade_change_id`, the change ticket, when set.
        change_id: Option<String>,
    },
    PhaseStarted {
        phase: Phase,
    },
    PhaseFinished {
        phase: Phase,
        ok: bool,
        duration: Duration,
    },
    /// Batch `index` of `total` (1-based) starts with these hosts.
    BatchStarted {
        phase: Phase,
        index: usize,
        total: usize,
        hosts: Vec<String>,
    },
    /// A batch ended; `failed` of its `size` hosts failed.
    BatchFinished {
        phase: Phase,
        index: usize,
        failed: usize,
        size: usize,
    },
    HostStarted {
        phase: Phase,
        host: String,
    },
    StepStarted {
        phase: Phase,
        host: String,
        step: Step,
    },
    StepFinished {
        phase: Phase,
        host: String,
        step: Step,
        ok: bool,
        duration: Duration,
        error: Option<String>,
    },
    /// A host's sequence in a phase ended (`host-finished` in the JSON events).
    HostFinished {
        report: HostReport,
    },
    /// Something a person should read, about a host or the whole run (`host: None`).
    Notice {
        host: Option<String>,
        message: String,
    },
    /// A step has run past 3 times its usual time (and at least 2 minutes more): said once per step.
    Stalled {
        phase: Phase,
        host: String,
        step: Step,
        running: Duration,
        usual: Duration,
        /// Earlier runs on this inventory measured the usual time (else it is a default).
        usual_measured: bool,
    },
    /// The cluster's upgrades are paused (`upgrade pause`, README "Pause from anywhere"): what was in flight has
    /// finished and the run waits before `before` (a master or batch), still holding its lock, until resumed or
    /// `timeout` (`None`: for ever).
    Paused {
        /// user@machine that paused, and when (UTC).
        by: String,
        at: String,
        before: String,
        timeout: Option<Duration>,
    },
    /// Resumed (`upgrade resume` by `by`, when the lock says who) after waiting `waited`: `before` starts.
    Resumed {
        by: Option<String>,
        before: String,
        waited: Duration,
    },
    /// The run is over; the summary says what was done and what is left.
    RunFinished {
        summary: Summary,
    },
    /// The process exits at once (a second interrupt): reporters flush and clear what they draw.
    Exiting,
}

/// Where events go. Reporters implement it; it must be cheap and must not block for long.
pub trait EventSink: Send + Sync {
    fn event(&self, event: &Event);
}

pub type SharedSink = Arc<dyn EventSink>;

/// Keeps every event; for tests and for callers that look at results afterwards.
#[derive(Debug, Default)]
pub struct EventLog {
    events: Mutex<Vec<Event>>,
}

impl EventLog {
    pub fn new() -> Arc<Self> {
        Arc::new(EventLog::default())
    }

    pub fn events(&self) -> Vec<Event> {
        self.events.lock().map(|e| e.clone()).unwrap_or_default()
    }

    /// The finished-task events of one host, in order: (task name, status, result).
    pub fn results(&self, host: &str) -> Vec<(String, TaskStatus, Value)> {
        self.events()
            .into_iter()
            .filter_map(|e| match e {
                Event::TaskFinished { host: h, task, status, result, .. } if h == host => {
                    Some((task.name, status, result))
                }
                _ => None,
            })
            .collect()
    }
}

impl EventSink for EventLog {
    fn event(&self, event: &Event) {
        if let Ok(mut events) = self.events.lock() {
            events.push(event.clone());
        }
    }
}

/// Sends events to nobody.
pub struct NoEvents;

impl EventSink for NoEvents {
    fn event(&self, _event: &Event) {}
}
