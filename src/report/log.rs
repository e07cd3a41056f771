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

/// Host logs kept open at once: an eighth of the open-files limit, between 64 and 1,024. A run over 5,000 hosts must
/// not hold 5,000 descriptors; a host's log closed to make room is opened again (appending) at its next line. Every
/// host in flight should fit (serial 10% of 5,000 is 500): reopening at each line was a tenth of a wide run's CPU.
fn open_logs_bound() -> usize {
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit only writes the struct passed, which lives for the call.
    let soft = if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } == 0 { limit.rlim_cur } else { 0 };
    usize::try_from(soft / 8).unwrap_or(usize::MAX).clamp(64, 1024)
}

pub(crate) struct HostLogReporter {
    dir: PathBuf,
    state: Mutex<LogState>,
    on_failure: OnWriteFailure,
    open_logs: usize,
}

#[derive(Default)]
struct LogState {
    run: String,
    /// The hosts whose log has this run's header, and those whose log could not be opened (`false`: not written to
    /// again this run, so a failure is reported once).
    started: HashMap<String, bool>,
    /// The open logs, with when each was last written (a count of writes).
    open: HashMap<String, (File, u64)>,
    writes: u64,
}

impl HostLogReporter {
    pub(crate) fn new(dir: &Path, on_failure: OnWriteFailure) -> HostLogReporter {
        Self::with_open_logs(dir, on_failure, open_logs_bound())
    }

    fn with_open_logs(dir: &Path, on_failure: OnWriteFailure, open_logs: usize) -> HostLogReporter {
        HostLogReporter {
            dir: dir.to_path_buf(),
            state: Mutex::new(LogState::default()),
            on_failure,
            open_logs: open_logs.max(1),
        }
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
        self.write_indented(host, "", lines);
    }

    /// Writes `lines` to the host's log, each after a timestamp and `indent`.
    fn write_indented(&self, host: &str, indent: &str, lines: &[String]) {
        let Ok(mut state) = self.state.lock() else { return };
        let path = Self::path(&self.dir, host);
        let mut file = match state.open.remove(host) {
            Some((file, _)) => file,
            None => {
                let header = match state.started.get(host) {
                    Some(false) => return,
                    Some(true) => None,
                    None => Some(format!("{} === run {}", now(), state.run)),
                };
                // The directory is made at a host's first open of the run; a reopen (past the bound of open logs,
                // most writes of a wide batch) finds it there.
                let dir = if header.is_some() { std::fs::create_dir_all(&self.dir) } else { Ok(()) };
                let opened =
                    dir.and_then(|_| OpenOptions::new().create(true).append(true).open(&path)).and_then(|mut file| {
                        match &header {
                            Some(header) => writeln!(file, "{header}").map(|_| file),
                            None => Ok(file),
                        }
                    });
                match opened {
                    Ok(file) => {
                        state.started.insert(host.to_string(), true);
                        file
                    }
                    Err(e) => {
                        (self.on_failure)(&path, &crate::error::io_reason(&e));
                        state.started.insert(host.to_string(), false);
                        return;
                    }
                }
            }
        };
        let stamp = now();
        let mut text = String::with_capacity(lines.iter().map(|l| stamp.len() + indent.len() + l.len() + 2).sum());
        for line in lines {
            for part in [stamp.as_str(), " ", indent, line, "\n"] {
                text.push_str(part);
            }
        }
        // One write per event, so a failure is seen once per event and not per line.
        if let Err(e) = file.write_all(text.as_bytes()).and_then(|_| file.flush()) {
            (self.on_failure)(&path, &crate::error::io_reason(&e));
        }
        if state.open.len() >= self.open_logs {
            // Dropping the least recently written closes it; its next line opens it again.
            let oldest = state.open.iter().min_by_key(|(_, (_, at))| *at).map(|(h, _)| h.clone());
            if let Some(oldest) = oldest {
                state.open.remove(&oldest);
            }
        }
        state.writes += 1;
        let at = state.writes;
        state.open.insert(host.to_string(), (file, at));
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
                self.write_indented(host, "  ", &task_lines(host, task, *status, result, *ignored, true));
            }
            Event::Notice { host: Some(host), message } => self.write(host, std::slice::from_ref(message)),
            Event::Stalled { host, step, running, usual, usual_measured, .. } => self.write(
                host,
                &[format!("STALLED? {}", super::eta::stall_text(*step, *running, *usual, *usual_measured))],
            ),
            Event::HostFinished { report } => {
                let what = match &report.outcome {
                    HostOutcome::Upgraded { .. } => "done".to_string(),
                    HostOutcome::Skipped { reason } => format!("skipped: {reason}"),
                    HostOutcome::Failed { step, reason, .. } => format!("FAILED at {step}: {reason}"),
                    HostOutcome::NotStarted { reason } => format!("not started: {reason}"),
                    HostOutcome::PassedOver { behavior, blocked_by, .. } => {
                        format!("PASSED OVER (could not be drained, {behavior}): {}", blocked_by.join("; "))
                    }
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

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    fn reporter(dir: &Path, run: &str, open_logs: usize, failures: Arc<Mutex<Vec<String>>>) -> HostLogReporter {
        let on_failure: OnWriteFailure =
            Box::new(move |path, why| failures.lock().unwrap().push(format!("{}: {why}", path.display())));
        let reporter = HostLogReporter::with_open_logs(dir, on_failure, open_logs);
        reporter.state.lock().unwrap().run = run.to_string();
        reporter
    }

    fn read(dir: &Path, host: &str) -> Vec<String> {
        let text = std::fs::read_to_string(HostLogReporter::path(dir, host)).unwrap();
        // Drop the timestamp in front of every line.
        text.lines().map(|l| l.split_once(' ').map_or(l, |(_, rest)| rest).to_string()).collect()
    }

    #[test]
    fn a_log_closed_to_make_room_is_reopened_without_a_second_header() {
        let dir = tempfile::tempdir().unwrap();
        let failures = Arc::new(Mutex::new(Vec::new()));
        let hosts = ["a", "b", "c", "d"];
        for run in ["run-1", "run-2"] {
            // Two open at most: writing to four hosts in turn closes and reopens every log.
            let logs = reporter(dir.path(), run, 2, failures.clone());
            for round in 0..3 {
                for host in hosts {
                    logs.write(host, &[format!("{run} line {round}")]);
                    assert!(logs.state.lock().unwrap().open.len() <= 2);
                }
            }
        }
        assert!(failures.lock().unwrap().is_empty(), "{:?}", failures.lock().unwrap());
        for host in hosts {
            let want: Vec<String> = ["run-1", "run-2"]
                .iter()
                .flat_map(|run| {
                    std::iter::once(format!("=== run {run}")).chain((0..3).map(move |i| format!("{run} line {i}")))
                })
                .collect();
            assert_eq!(read(dir.path(), host), want, "{host}");
        }
    }

    #[test]
    fn a_log_that_cannot_be_opened_is_reported_once_and_not_tried_again() {
        let dir = tempfile::tempdir().unwrap();
        // The logs directory is a file: no log can be created under it.
        let logs_dir = dir.path().join("logs");
        std::fs::write(&logs_dir, "not a directory").unwrap();
        let failures = Arc::new(Mutex::new(Vec::new()));
        let logs = reporter(&logs_dir, "run-1", 1, failures.clone());
        for _ in 0..3 {
            logs.write("a", &["line".to_string()]);
            logs.write("b", &["line".to_string()]);
        }
        let failures = failures.lock().unwrap();
        assert_eq!(failures.len(), 2, "{failures:?}");
        assert!(failures[0].contains("a.log") && failures[1].contains("b.log"), "{failures:?}");
    }
}
