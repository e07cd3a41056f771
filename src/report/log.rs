//! A log per host in the state directory (`<state>/logs/<host>.log`): every step and task result of that host with
//! a timestamp, appended run after run, so an operator can read one host's story after the fact.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use crate::events::{Event, EventSink};
use crate::phase::HostOutcome;
use crate::tasks::report::task_lines;

pub struct HostLogReporter {
    dir: PathBuf,
    state: Mutex<LogState>,
}

#[derive(Default)]
struct LogState {
    run: String,
    files: HashMap<String, Option<File>>,
}

impl HostLogReporter {
    pub fn new(dir: &Path) -> HostLogReporter {
        HostLogReporter { dir: dir.to_path_buf(), state: Mutex::new(LogState::default()) }
    }

    /// The log file of a host; a name that cannot be a file name is made into one.
    pub fn path(dir: &Path, host: &str) -> PathBuf {
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
        let file = state.files.entry(host.to_string()).or_insert_with(|| {
            // A log that cannot be opened is skipped: the per-host log is a convenience, never a reason to stop.
            let _ = std::fs::create_dir_all(&self.dir);
            let mut file = OpenOptions::new().create(true).append(true).open(Self::path(&self.dir, host)).ok()?;
            let _ = writeln!(file, "{} === run {run}", now());
            Some(file)
        });
        let Some(file) = file else { return };
        let stamp = now();
        for line in lines {
            let _ = writeln!(file, "{stamp} {line}");
        }
        let _ = file.flush();
    }
}

fn now() -> String {
    crate::journal::utc_timestamp(std::time::SystemTime::now())
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
            Event::HostCompleted { report } => {
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
