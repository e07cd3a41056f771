//! JSON lines for CI: one object per event, flushed as it happens, then a summary object. The schema is in the
//! README; every object has `event` and `time`.

use std::io::Write;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

use crate::events::{Event, EventSink};
use crate::vocabulary::{ExitCode, RunStatus};

use super::eta::Eta;

pub(crate) struct JsonReporter {
    out: Mutex<Box<dyn Write + Send>>,
    /// The run's time left, put on the phase and batch events as `eta_seconds`.
    eta: Option<Arc<Eta>>,
}

impl JsonReporter {
    pub(crate) fn new(out: Box<dyn Write + Send>) -> JsonReporter {
        JsonReporter { out: Mutex::new(out), eta: None }
    }

    pub(crate) fn with_eta(mut self, eta: Arc<Eta>) -> JsonReporter {
        self.eta = Some(eta);
        self
    }
}

fn ms(d: &std::time::Duration) -> f64 {
    (d.as_secs_f64() * 1000.0).round() / 1000.0
}

/// The JSON object of an event, or `None` for events CI does not need and for `task-finished`, which
/// [`TaskFinishedLine`] writes without copying the result.
pub(crate) fn event_json(event: &Event) -> Option<Value> {
    let value = match event {
        Event::RunStarted { run, target, phases, resumed, change_id } => {
            let mut line =
                json!({"event": "run-started", "run": run, "target": target, "phases": phases, "resumed": resumed});
            if let Some(change) = change_id {
                line["change_id"] = Value::from(change.as_str());
            }
            line
        }
        Event::PhaseStarted { phase } => json!({"event": "phase-started", "phase": phase}),
        Event::PhaseFinished { phase, ok, duration } => {
            json!({"event": "phase-finished", "phase": phase, "status": if *ok { "ok" } else { "failed" }, "duration": ms(duration)})
        }
        Event::BatchStarted { phase, index, total, hosts } => {
            json!({"event": "batch-started", "phase": phase, "batch": index, "batches": total, "hosts": hosts})
        }
        Event::BatchFinished { phase, index, failed, size } => {
            json!({"event": "batch-finished", "phase": phase, "batch": index, "failed": failed, "size": size})
        }
        Event::HostStarted { phase, host } => json!({"event": "host-started", "phase": phase, "host": host}),
        Event::StepStarted { phase, host, step } => {
            json!({"event": "step-started", "phase": phase, "host": host, "step": step.name()})
        }
        Event::StepFinished { phase, host, step, ok, duration, error } => json!({
            "event": "step-finished", "phase": phase, "host": host, "step": step.name(),
            "status": if *ok { "ok" } else { "failed" }, "duration": ms(duration), "error": error
        }),
        Event::HostFinished { report } => {
            let mut v = serde_json::to_value(report).ok()?;
            if let Value::Object(m) = &mut v {
                m.insert("event".into(), json!("host-finished"));
            }
            v
        }
        Event::Notice { host, message } => json!({"event": "notice", "host": host, "message": message}),
        Event::Stalled { phase, host, step, running, usual, usual_measured } => json!({
            "event": "stall", "phase": phase, "host": host, "step": step.name(),
            "running_seconds": running.as_secs(), "usual_seconds": usual.as_secs(),
            "usual_from": if *usual_measured { "earlier-runs" } else { "default" },
            "message": super::eta::stall_text(*step, *running, *usual, *usual_measured)
        }),
        Event::Paused { by, at, before, timeout } => json!({
            "event": "paused", "by": by, "paused_at": at, "before": before,
            "timeout_seconds": timeout.map(|t| t.as_secs())
        }),
        Event::Resumed { by, before, waited } => json!({
            "event": "resumed", "by": by, "before": before, "waited_seconds": waited.as_secs()
        }),
        Event::RunFinished { summary } => {
            let mut v = serde_json::to_value(summary).ok()?;
            if let Value::Object(m) = &mut v {
                m.insert("event".into(), json!("summary"));
                m.insert("status".into(), json!(summary.exit_code().status().name()));
                m.insert("exit_code".into(), json!(summary.exit_code().code()));
            }
            v
        }
        Event::Exiting => json!({
            "event": "aborted",
            "status": RunStatus::Interrupted.name(),
            "exit_code": ExitCode::Interrupted.code()
        }),
        _ => return None,
    };
    Some(value)
}

/// A `task-finished` line, serialized from the event itself: the result is not copied into a JSON value first (the
/// most frequent event, and the largest).
#[derive(serde::Serialize)]
struct TaskFinishedLine<'a> {
    event: &'static str,
    host: &'a str,
    task: &'a str,
    file: &'a std::path::Path,
    line: usize,
    status: &'a str,
    duration: f64,
    ignored: bool,
    rescued: bool,
    result: &'a Value,
    time: String,
}

impl EventSink for JsonReporter {
    fn event(&self, event: &Event) {
        // The time is taken once the line has its place in the stream, so that the times of the stream never go
        // back: taken before, a line serialized slowly (a task's 1 MB of output) could go out after a later one.
        let Ok(mut out) = self.out.lock() else { return };
        let time = crate::time_format::utc_timestamp(std::time::SystemTime::now());
        let serialized = match event {
            Event::TaskFinished { host, task, status, result, duration, ignored, rescued } => {
                serde_json::to_vec(&TaskFinishedLine {
                    event: "task-finished",
                    host,
                    task: &task.name,
                    file: &task.file,
                    line: task.line,
                    status: status.as_str(),
                    duration: ms(duration),
                    ignored: *ignored,
                    rescued: *rescued,
                    result,
                    time,
                })
            }
            _ => {
                let Some(mut value) = event_json(event) else { return };
                if let Value::Object(m) = &mut value {
                    let phase_or_batch = matches!(
                        event,
                        Event::PhaseStarted { .. }
                            | Event::PhaseFinished { .. }
                            | Event::BatchStarted { .. }
                            | Event::BatchFinished { .. }
                    );
                    if let Some(left) = self.eta.as_ref().filter(|_| phase_or_batch).and_then(|eta| eta.left()) {
                        m.insert("eta_seconds".into(), json!(left.as_secs()));
                    }
                    m.insert("time".into(), json!(time));
                }
                serde_json::to_vec(&value)
            }
        };
        // One write per event: the line and its newline together (the queue wakes its writer once per write).
        if let Ok(mut line) = serialized {
            line.push(b'\n');
            let _ = out.write_all(&line);
            let _ = out.flush();
        }
    }
}
