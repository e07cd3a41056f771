//! A log per host in the state directory (`<state>/logs/<host>.log`): every step and task result of that host with
//! a timestamp, appended run after run, so an operator can read one host's story after the fact.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use crate::events::{Event, EventSink};
use crate::tasks::report::task_lines;
use crate::vocabulary::HostOutcome;

/// Told when a host log cannot be written (the path and why), so the run can stop and say so.
pub(crate) type OnWriteFailure = Box<dyn Fn(&Path, &str) + Send + Sync>;

pub(crate) struct HostLogReporter {
    dir: PathBuf,
    state: Mutex<LogState>,
    on_failure: OnWriteFailure,
}

#[derive(Default)]
struct LogState {
    run: String,
    files: HashMap<String, Option<File>>,
}

impl HostLogReporter {
    pub(crate) fn new(dir: &Path, on_failure: OnWriteFailure) -> HostLogReporter {
        HostLogReporter { dir: dir.to_path_buf(), state: Mutex::new(LogState::default()), on_failure }
    }

    /// The log file of a host; a name that cannot be a file name is made into one.
    pub(crate) fn path(dir: &Path, host: &str) -> PathBuf {
        let safe: String = host
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | ':' | '@') { c } else { '_' })
            .collect();
        let safe = if safe.starts_with('.') { format!("_{safe}") } else { safe };
        dir.join(format!("{safe}.log"))
    }

    fn write(&self, host: &str, lines: &[String]) {
        let Ok(mut state) = self.state.lock() else { return };
        let run = state.run.clone();
        let path = Self::path(&self.dir, host);
        let file = match state.files.entry(host.to_string()) {
            std::collections::hash_map::Entry::Occupied(entry) => entry.into_mut(),
            std::collections::hash_map::Entry::Vacant(entry) => {
                let opened = std::fs::create_dir_all(&self.dir)
                    .and_then(|_| OpenOptions::new().create(true).append(true).open(&path))
                    .and_then(|mut file| writeln!(file, "{} === run {run}", now()).map(|_| file));
                match opened {
                    Ok(file) => entry.insert(Some(file)),
                    Err(e) => {
                        (self.on_failure)(&path, &crate::error::io_reason(&e));
                        entry.insert(None)
                    }
                }
            }
        };
        let Some(file) = file else { return };
        let stamp = now();
        let mut text = String::new();
        for line in lines {
            text.push_str(&format!("{stamp} {line}\n"));
        }
        // One write per event, so a failure is seen once per event and not per line.
        if let Err(e) = file.write_all(text.as_bytes()).and_then(|_| file.flush()) {
            (self.on_failure)(&path, &crate::error::io_reason(&e));
        }
    }
}

fn now() -> String {
    crate::time_format::utc_timestamp(std::time::SystemTime::now())
}

impl EventSink for HostLogReporter {
    fn event(&self, event: &Event) {
        match event {
            Event::RunStarted { run, target, .. } => {
                if let Ok(mut state) = self.state.lock() {
                    state.run = format!("{run} (target {target})");
                }
            }
            Event::HostStarted { phase, host } => self.write(host, &[format!("{phase}: sequence starts")]),
            Event::StepStarted { phase, host, step } => self.write(host, &[format!("{phase}: {step} started")]),
            Event::StepFinished { phase, host, step, ok, duration, error } => {
                let status = if *ok { "ok".to_string() } else { format!("FAILED: {}", error.as_deref().unwrap_or("")) };
                self.write(host, &[format!("{phase}: {step} {status} ({:.1}s)", duration.as_secs_f64())]);
            }
            Event::TaskFinished { host, task, status, result, ignored, .. } => {
                let lines: Vec<String> = task_lines(host, task, *status, result, *ignored, true)
                    .into_iter()
                    .map(|l| format!("  {l}"))
                    .collect();
                self.write(host, &lines);
            }
            Event::Notice { host: Some(host), message } => self.write(host, std::slice::from_ref(message)),
            Event::HostFinished { report } => {
                let what = match &report.outcome {
                    HostOutcome::Upgraded { .. } => "done".to_string(),
                    HostOutcome::Skipped { reason } => format!("skipped: {reason}"),
                    HostOutcome::Failed { step, reason, .. } => format!("FAILED at {step}: {reason}"),
                    HostOutcome::NotStarted { reason } => format!("not started: {reason}"),
                };
                self.write(
                    &report.host,
                    &[format!("{}: {what} ({:.1}s)", report.phase, report.duration.as_secs_f64())],
                );
            }
            _ => {}
        }
    }
}
