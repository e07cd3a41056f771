//! The upgrade as people read it: phase and batch headers, one line per host step, hook task results, and the
//! summary with what is left to do. Lines carry a timestamp when the output is not a terminal (logs, CI).

use std::collections::HashMap;
use std::io::Write;
use std::sync::Mutex;
use std::time::Duration;

use crate::events::{Event, EventSink};
use crate::phase::{HostOutcome, Step, Summary};
use crate::tasks::report::task_lines;

pub struct HumanReporter {
    out: Mutex<Box<dyn Write + Send>>,
    verbosity: u8,
    timestamps: bool,
    /// The step each host is in, so hook task results show and built-in step tasks stay quiet.
    current_step: Mutex<HashMap<String, Step>>,
}

impl HumanReporter {
    pub fn new(out: Box<dyn Write + Send>, verbosity: u8, timestamps: bool) -> HumanReporter {
        HumanReporter { out: Mutex::new(out), verbosity, timestamps, current_step: Mutex::new(HashMap::new()) }
    }

    fn write(&self, lines: &[String]) {
        let Ok(mut out) = self.out.lock() else { return };
        let stamp = if self.timestamps {
            let now = crate::journal::utc_timestamp(std::time::SystemTime::now());
            format!("{} ", now.get(11..19).unwrap_or(&now))
        } else {
            String::new()
        };
        for line in lines {
            let _ = writeln!(out, "{stamp}{line}");
        }
        let _ = out.flush();
    }

    fn is_hook(&self, host: &str) -> bool {
        self.current_step
            .lock()
            .ok()
            .and_then(|s| s.get(host).copied())
            .is_some_and(|step| matches!(step, Step::PreDrainHook | Step::PreHook | Step::MidHook | Step::PostHook))
    }
}

fn secs(d: &Duration) -> String {
    format!("{:.1}s", d.as_secs_f64())
}

impl EventSink for HumanReporter {
    fn event(&self, event: &Event) {
        match event {
            Event::RunStarted { target, phases, resumed, .. } => {
                let how = if *resumed { " (resuming an earlier run)" } else { "" };
                self.write(&[format!("Upgrading to {target}: {}{how}", phases.join(", "))]);
            }
            Event::PhaseStarted { phase } => self.write(&[String::new(), format!("== {phase}")]),
            Event::PhaseFinished { phase, ok, duration } => {
                let status = if *ok { "done" } else { "stopped" };
                self.write(&[format!("== {phase} {status} in {}", secs(duration))]);
            }
            Event::BatchStarted { phase, index, total, hosts } => {
                let what = if phase == "control-plane" { "master" } else { "batch" };
                self.write(&[format!("-- {what} {index}/{total}: {}", hosts.join(", "))]);
            }
            Event::BatchFinished { phase, failed, size, .. } if phase == "nodes" && *failed > 0 => {
                self.write(&[format!("-- {failed} of {size} nodes of the batch failed")]);
            }
            Event::StepStarted { host, step, .. } => {
                if let Ok(mut steps) = self.current_step.lock() {
                    steps.insert(host.clone(), *step);
                }
                if self.verbosity > 0 {
                    self.write(&[format!("[{host}] {step} ...")]);
                }
            }
            Event::StepFinished { host, step, ok, duration, error, .. } => {
                let line = match (ok, error) {
                    (true, _) => format!("[{host}] {step} ok ({})", secs(duration)),
                    (false, Some(e)) => format!("[{host}] {step} FAILED: {e}"),
                    (false, None) => format!("[{host}] {step} FAILED"),
                };
                self.write(&[line]);
            }
            Event::TaskFinished { host, task, status, result, ignored, .. } => {
                if self.verbosity > 0 || self.is_hook(host) {
                    let lines: Vec<String> = task_lines(host, task, *status, result, *ignored, self.verbosity > 0)
                        .into_iter()
                        .map(|l| format!("  {l}"))
                        .collect();
                    self.write(&lines);
                }
            }
            Event::HostCompleted { report } => {
                let host = &report.host;
                let line = match &report.outcome {
                    HostOutcome::Upgraded { left_cordoned: true } => {
                        format!("[{host}] done in {} (left cordoned: it was before the run)", secs(&report.duration))
                    }
                    HostOutcome::Upgraded { .. } if report.phase == "verify" => {
                        format!("[{host}] verified: Ready at the target")
                    }
                    HostOutcome::Upgraded { .. } if report.phase == "etcd-backup" => {
                        format!("[{host}] backup done in {}", secs(&report.duration))
                    }
                    HostOutcome::Upgraded { .. } => format!("[{host}] done in {}", secs(&report.duration)),
                    HostOutcome::Skipped { reason } => format!("[{host}] skipped: {reason}"),
                    HostOutcome::Failed { step, reason, .. } => format!("[{host}] FAILED at {step}: {reason}"),
                    HostOutcome::NotStarted { reason } => format!("[{host}] not started: {reason}"),
                };
                self.write(&[line]);
            }
            Event::Notice { host: Some(host), message } => self.write(&[format!("[{host}] {message}")]),
            Event::Notice { host: None, message } => self.write(&[message.clone()]),
            Event::RunFinished { summary } => self.write(&summary_lines(summary)),
            _ => {}
        }
    }
}

/// The closing summary: what was done, skipped, failed, not started, and what the operator has left to do.
pub fn summary_lines(summary: &Summary) -> Vec<String> {
    let mut lines = vec![String::new(), "== summary".to_string()];
    let backups = summary
        .hosts
        .iter()
        .filter(|r| r.phase == "etcd-backup" && matches!(r.outcome, HostOutcome::Upgraded { .. }))
        .count();
    if backups > 0 {
        lines.push(format!("etcd backups verified: {backups}"));
    }
    let group = |pick: &dyn Fn(&HostOutcome) -> Option<String>| -> Vec<String> {
        summary
            .hosts
            .iter()
            .filter(|r| r.phase != "verify")
            .filter(|r| r.phase != "etcd-backup" || !matches!(r.outcome, HostOutcome::Upgraded { .. }))
            .filter_map(|r| pick(&r.outcome).map(|detail| format!("  {} ({}){detail}", r.host, r.phase)))
            .collect()
    };
    let sections: [(&str, Vec<String>); 4] = [
        ("upgraded", group(&|o| matches!(o, HostOutcome::Upgraded { .. }).then(String::new))),
        (
            "skipped",
            group(&|o| if let HostOutcome::Skipped { reason } = o { Some(format!(": {reason}")) } else { None }),
        ),
        (
            "failed",
            group(&|o| {
                if let HostOutcome::Failed { step, reason, .. } = o {
                    Some(format!(": {step}: {reason}"))
                } else {
                    None
                }
            }),
        ),
        (
            "not started",
            group(&|o| if let HostOutcome::NotStarted { reason } = o { Some(format!(": {reason}")) } else { None }),
        ),
    ];
    for (title, entries) in sections {
        if !entries.is_empty() {
            lines.push(format!("{title}: {}", entries.len()));
            lines.extend(entries);
        }
    }
    let verify_failures: Vec<String> = summary
        .hosts
        .iter()
        .filter(|r| r.phase == "verify")
        .filter_map(|r| match &r.outcome {
            HostOutcome::Failed { reason, .. } => Some(format!("  {}: {reason}", r.host)),
            _ => None,
        })
        .collect();
    if !verify_failures.is_empty() {
        lines.push(format!("verify found problems: {}", verify_failures.len()));
        lines.extend(verify_failures);
    }
    if !summary.left_cordoned.is_empty() {
        lines.push(format!("left cordoned: {}", summary.left_cordoned.len()));
        for c in &summary.left_cordoned {
            let why = if c.before_run { " (it was cordoned before the run)" } else { "" };
            lines.push(format!("  {}{why}: to make it schedulable again run `{}`", c.node, c.fix));
        }
    }
    if let Some(why) = &summary.stopped {
        lines.push(format!("stopped: {why}"));
    }
    let verdict = if summary.interrupted {
        "interrupted: re-run the same command to resume; finished hosts are not redone"
    } else if summary.failed() {
        "FAILED: fix what is listed above and re-run the same command; finished hosts are not redone"
    } else {
        "success"
    };
    lines.push(format!("result: {verdict}"));
    lines
}
