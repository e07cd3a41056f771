//! The upgrade as people read it: phase and batch headers, one line per host step, hook task results, and the
//! summary with what is left to do. Lines carry a timestamp when the output is not a terminal (logs, CI).

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::events::{Event, EventSink, TaskStatus};
use crate::tasks::report::task_lines;
use crate::vocabulary::{HostOutcome, Phase, Step, Summary};

use super::eta::{Eta, stall_text};
use super::log::HostLogReporter;
use super::output::OutputQueue;
use super::progress::{ProgressBars, about_left};
use super::running::{HEARTBEAT, Running, clock};

pub(crate) struct HumanReporter {
    lines: Arc<Lines>,
    verbosity: u8,
    color: bool,
    /// Progress bars on stderr, when it is a terminal.
    progress: Option<ProgressBars>,
    /// The step each host is in, so hook task results show and built-in step tasks stay quiet.
    current_step: Mutex<HashMap<String, Step>>,
    /// The stdout queue, waited on briefly while the progress bars are cleared so lines land above them.
    settle: Option<OutputQueue>,
    /// The steps said ok in this phase, by host: said once (see `StepFinished`).
    reported: Mutex<std::collections::HashSet<(String, Step)>>,
    /// The hook tasks each host finished in its current hook, said in one line when the hook ends (without `-v`).
    hook_tasks: Mutex<HashMap<String, TaskCounts>>,
    /// The steps in flight, for the heartbeat of piped output.
    running: Arc<Mutex<Running>>,
    /// The state directory, said at the start and in the summary: where the run's record is.
    state_dir: Option<PathBuf>,
    /// The time left, said at each batch and on the progress display.
    eta: Option<Arc<Eta>>,
}

/// Where the lines go, shared with the heartbeat thread.
struct Lines {
    out: Mutex<Box<dyn Write + Send>>,
    timestamps: bool,
}

impl Lines {
    fn write(&self, lines: &[String]) {
        let Ok(mut out) = self.out.lock() else { return };
        let stamp = if self.timestamps { format!("{} ", clock(std::time::SystemTime::now())) } else { String::new() };
        for line in lines {
            let _ = writeln!(out, "{stamp}{line}");
        }
        let _ = out.flush();
    }
}

impl HumanReporter {
    pub(crate) fn new(out: Box<dyn Write + Send>, verbosity: u8, timestamps: bool) -> HumanReporter {
        HumanReporter {
            lines: Arc::new(Lines { out: Mutex::new(out), timestamps }),
            verbosity,
            color: false,
            progress: None,
            current_step: Mutex::new(HashMap::new()),
            hook_tasks: Mutex::new(HashMap::new()),
            reported: Mutex::new(std::collections::HashSet::new()),
            settle: None,
            running: Arc::new(Mutex::new(Running::default())),
            state_dir: None,
            eta: None,
        }
    }

    /// Says the time left at each batch and on the progress display.
    pub(crate) fn with_eta(mut self, eta: Arc<Eta>) -> HumanReporter {
        self.eta = Some(eta);
        self
    }

    /// Says where the run's record is: the state directory, its journal and host logs.
    pub(crate) fn with_state_dir(mut self, state_dir: &Path) -> HumanReporter {
        self.state_dir = Some(state_dir.to_path_buf());
        self
    }

    /// Every `every`, a line for each step that has run that long since a line last said so. A thread of its own,
    /// which ends once the reporter is gone.
    pub(crate) fn with_heartbeat(self, every: Duration) -> HumanReporter {
        let lines = Arc::downgrade(&self.lines);
        let running = Arc::downgrade(&self.running);
        let tick = (every / 4).clamp(Duration::from_millis(10), Duration::from_secs(1));
        let _ = std::thread::Builder::new().name("heartbeat".into()).spawn(move || {
            loop {
                std::thread::sleep(tick);
                let (Some(lines), Some(running)) = (lines.upgrade(), running.upgrade()) else { return };
                let due = running.lock().map(|mut r| r.heartbeat(every)).unwrap_or_default();
                if !due.is_empty() {
                    lines.write(&due);
                }
            }
        });
        self
    }

    /// Lines on stdout through its queue (timestamped unless stdout is a terminal, colored only on a terminal without
    /// `NO_COLOR`), progress bars on stderr when stderr is a terminal.
    pub(crate) fn for_terminal(verbosity: u8, stdout: &OutputQueue) -> HumanReporter {
        use std::io::IsTerminal;
        let on_terminal = std::io::stdout().is_terminal();
        // https://no-color.org: any non-empty value turns color off.
        let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
        let mut reporter = HumanReporter::new(stdout.writer(), verbosity, !on_terminal);
        reporter.color = on_terminal && !no_color;
        reporter.progress = ProgressBars::on_stderr(!no_color);
        reporter.settle = Some(stdout.clone());
        // Without the progress display, nothing would move while a step waits: piped output says it still runs.
        if reporter.progress.is_none() { reporter.with_heartbeat(HEARTBEAT) } else { reporter }
    }

    fn paint(&self, text: &str, code: &str) -> String {
        if self.color { format!("\x1b[{code}m{text}\x1b[0m") } else { text.to_string() }
    }

    fn write(&self, lines: &[String]) {
        match &self.progress {
            Some(progress) => progress.suspend(|| {
                self.write_lines(lines);
                // Bounded: a paused terminal costs the bars' neat order, never the run.
                if let Some(queue) = &self.settle {
                    queue.drain(Duration::from_millis(200));
                }
            }),
            None => self.write_lines(lines),
        }
    }

    fn write_lines(&self, lines: &[String]) {
        self.lines.write(lines);
    }

    fn is_hook(&self, host: &str) -> bool {
        self.current_step.lock().ok().and_then(|s| s.get(host).copied()).is_some_and(|step| {
            matches!(step, Step::PreCordonHook | Step::PreDrainHook | Step::PreHook | Step::MidHook | Step::PostHook)
        })
    }
}

/// How a hook's tasks ended on one host, as Ansible's recap counts them.
#[derive(Debug, Default)]
struct TaskCounts {
    ok: usize,
    changed: usize,
    skipped: usize,
    failed: usize,
}

impl TaskCounts {
    fn count(&mut self, status: TaskStatus) {
        match status {
            TaskStatus::Ok => self.ok += 1,
            TaskStatus::Changed => self.changed += 1,
            TaskStatus::Skipped => self.skipped += 1,
            TaskStatus::Failed | TaskStatus::Unreachable => self.failed += 1,
        }
    }

    /// `5 tasks: ok=3 changed=2 skipped=0 failed=0`
    fn describe(&self) -> String {
        let all = self.ok + self.changed + self.skipped + self.failed;
        let tasks = if all == 1 { "task" } else { "tasks" };
        format!(
            "{all} {tasks}: ok={} changed={} skipped={} failed={}",
            self.ok, self.changed, self.skipped, self.failed
        )
    }
}

fn secs(d: &Duration) -> String {
    format!("{:.1}s", d.as_secs_f64())
}

impl EventSink for HumanReporter {
    fn event(&self, event: &Event) {
        // What comes from outside (command output, names from the cluster, messages) reaches the terminal without
        // escape sequences: a pod or node name holding `ESC[2J` must not clear the operator's screen.
        let mut event = event.clone();
        crate::redact::sink::each_text(&mut event, &mut |s| {
            if let std::borrow::Cow::Owned(clean) = crate::redact::escapes::strip_terminal_escapes(s) {
                *s = clean;
            }
        });
        let event = &event;
        if let Some(progress) = &self.progress {
            progress.event(event, self.eta.as_deref());
        }
        match event {
            Event::RunStarted { target, phases, resumed, .. } => {
                let how = if *resumed { " (resuming an earlier run)" } else { "" };
                let mut lines = vec![format!(
                    "Upgrading to {target}: {}{how}",
                    phases.iter().map(|p| p.name()).collect::<Vec<_>>().join(", ")
                )];
                if let Some(dir) = &self.state_dir {
                    lines.extend(record_lines(dir));
                }
                self.write(&lines);
            }
            Event::PhaseStarted { phase } => {
                if let Ok(mut seen) = self.reported.lock() {
                    seen.clear();
                }
                self.write(&[String::new(), self.paint(&format!("== {phase}"), "1")])
            }
            Event::PhaseFinished { phase, ok, duration } => {
                let status = if *ok { self.paint("done", "32") } else { self.paint("stopped", "31") };
                self.write(&[format!("== {phase} {status} in {}", secs(duration))]);
            }
            Event::BatchStarted { phase, index, total, hosts } => {
                let what = if *phase == Phase::ControlPlane { "master" } else { "batch" };
                let left = self.eta.as_ref().and_then(|eta| eta.left());
                let left = left.map(|left| format!(" ({} in the run)", about_left(left))).unwrap_or_default();
                self.write(&[format!("-- {what} {index}/{total}: {}{left}", hosts.join(", "))]);
            }
            Event::BatchFinished { phase, failed, size, .. } if *phase == Phase::Nodes && *failed > 0 => {
                self.write(&[format!("-- {failed} of {size} nodes of the batch failed")]);
            }
            Event::StepStarted { host, step, .. } => {
                if let Ok(mut steps) = self.current_step.lock() {
                    steps.insert(host.clone(), *step);
                }
                if let Ok(mut running) = self.running.lock() {
                    running.started(host, *step);
                }
                if self.verbosity > 0 {
                    self.write(&[format!("[{host}] {step} ...")]);
                }
            }
            Event::StepFinished { host, step, ok, duration, error, .. } => {
                if let Ok(mut running) = self.running.lock() {
                    running.ended(host);
                }
                let tasks = self.hook_tasks.lock().ok().and_then(|mut c| c.remove(host)).map(|c| c.describe());
                let tasks = tasks.map(|t| format!(": {t}")).unwrap_or_default();
                // A step a phase runs again for another purpose (preflight reads the cluster and checks the hosts
                // several times) is said once per host and phase; the host log has every one, and so has -v.
                let first = self.reported.lock().map(|mut seen| seen.insert((host.clone(), *step))).unwrap_or(true);
                if *ok && !first && self.verbosity == 0 && tasks.is_empty() {
                    return;
                }
                let line = match (ok, error) {
                    (true, _) => format!("[{host}] {step} ok ({}){tasks}", secs(duration)),
                    (false, Some(e)) => format!("[{host}] {step} {}: {e}", self.paint("FAILED", "31")),
                    (false, None) => format!("[{host}] {step} {}", self.paint("FAILED", "31")),
                };
                self.write(&[line]);
            }
            Event::TaskFinished { host, task, status, result, ignored, .. } => {
                let hook = self.is_hook(host);
                if hook && self.verbosity == 0 {
                    // Counted, and said in one line when the hook ends; a failure is shown as it happens.
                    if let Ok(mut counts) = self.hook_tasks.lock() {
                        counts.entry(host.clone()).or_default().count(*status);
                    }
                }
                let failed = matches!(status, TaskStatus::Failed | TaskStatus::Unreachable);
                // What a hook says to the person (`debug: msg=...`, an assertion's message) is shown as it comes.
                let said = result.get("msg").and_then(|m| m.as_str()).filter(|m| !m.trim().is_empty());
                if let (true, 0, false, Some(msg)) = (hook, self.verbosity, failed, said) {
                    let lines: Vec<String> = msg.lines().map(|l| format!("  [{host}] {}: {l}", task.name)).collect();
                    self.write(&lines);
                }
                if self.verbosity > 0 || (hook && failed) {
                    let lines: Vec<String> = task_lines(host, task, *status, result, *ignored, self.verbosity > 0)
                        .into_iter()
                        .map(|l| format!("  {l}"))
                        .collect();
                    self.write(&lines);
                }
            }
            Event::HostFinished { report } => {
                let host = &report.host;
                if let Ok(mut running) = self.running.lock() {
                    running.ended(host);
                }
                let line = match &report.outcome {
                    HostOutcome::Upgraded { left_cordoned: true } => {
                        format!("[{host}] done in {} (left cordoned: it was before the run)", secs(&report.duration))
                    }
                    HostOutcome::Upgraded { .. } if report.phase == Phase::Verify => {
                        format!("[{host}] verified: Ready at the target")
                    }
                    HostOutcome::Upgraded { .. } if report.phase == Phase::ConfigBackup => {
                        format!("[{host}] configuration backup done in {}", secs(&report.duration))
                    }
                    HostOutcome::Upgraded { .. } if report.phase.is_cluster_hook() => {
                        format!("[{host}] {} done in {}", report.phase, secs(&report.duration))
                    }
                    HostOutcome::Upgraded { .. } if report.phase == Phase::EtcdBackup => {
                        format!("[{host}] backup done in {}", secs(&report.duration))
                    }
                    HostOutcome::Upgraded { .. } => format!("[{host}] done in {}", secs(&report.duration)),
                    HostOutcome::Skipped { reason } => format!("[{host}] skipped: {reason}"),
                    HostOutcome::Failed { step, reason, .. } => {
                        format!("[{host}] {} at {step}: {reason}", self.paint("FAILED", "1;31"))
                    }
                    HostOutcome::NotStarted { reason } => format!("[{host}] not started: {reason}"),
                    HostOutcome::PassedOver { behavior, blocked_by, .. } => format!(
                        "[{host}] {} (could not be drained, {behavior}): {}",
                        self.paint("PASSED OVER", "1;33"),
                        blocked_by.join("; ")
                    ),
                };
                self.write(&[line]);
            }
            Event::Stalled { host, step, running, usual, usual_measured, .. } => {
                let text = stall_text(*step, *running, *usual, *usual_measured);
                self.write(&[format!("[{host}] {} {text}", self.paint("STALLED?", "1;33"))]);
            }
            Event::Paused { by, at, before, timeout } => {
                let text = super::progress::paused_text(by, at, before, *timeout);
                self.write(&[text.replacen("PAUSED", &self.paint("PAUSED", "1;33"), 1)]);
            }
            Event::Resumed { by, before, waited } => {
                self.write(&[super::progress::resumed_text(by.as_deref(), before, *waited)])
            }
            Event::Notice { host: Some(host), message } => self.write(&[format!("[{host}] {message}")]),
            Event::Notice { host: None, message } => self.write(&[message.clone()]),
            Event::RunFinished { summary } => {
                if let Ok(mut running) = self.running.lock() {
                    running.clear();
                }
                let mut lines = summary_lines(summary);
                if let Some(dir) = &self.state_dir {
                    // Before the verdict, which stays the last line.
                    let verdict = lines.pop();
                    lines.extend(record_lines(dir));
                    lines.extend(failed_host_logs(summary, dir));
                    lines.extend(verdict);
                }
                self.write(&lines);
            }
            Event::Exiting => {
                if let Ok(mut running) = self.running.lock() {
                    running.clear();
                }
            }
            _ => {}
        }
    }
}

/// Where the run's record is: `record: state directory D, journal D/journal.jsonl, host logs D/logs/<host>.log`.
fn record_lines(state_dir: &Path) -> Vec<String> {
    vec![format!(
        "record: state directory {}, journal {}, host logs {}",
        state_dir.display(),
        state_dir.join("journal.jsonl").display(),
        state_dir.join("logs").join("<host>.log").display()
    )]
}

/// The log of each host that failed, where its step's whole output is.
fn failed_host_logs(summary: &Summary, state_dir: &Path) -> Vec<String> {
    let mut hosts: Vec<&str> = summary
        .hosts
        .iter()
        .filter(|r| matches!(r.outcome, HostOutcome::Failed { .. }))
        .map(|r| r.host.as_str())
        .collect();
    hosts.dedup();
    if hosts.is_empty() {
        return Vec::new();
    }
    let logs = state_dir.join("logs");
    let mut lines = vec!["the failed hosts' logs:".to_string()];
    lines.extend(hosts.iter().map(|h| format!("  {h}: {}", HostLogReporter::path(&logs, h).display())));
    lines
}

/// The closing summary: what was done, skipped, failed, not started, and what the operator has left to do.
pub(crate) fn summary_lines(summary: &Summary) -> Vec<String> {
    let mut lines = vec![String::new(), "== summary".to_string()];
    let backups = summary
        .hosts
        .iter()
        .filter(|r| r.phase == Phase::EtcdBackup && matches!(r.outcome, HostOutcome::Upgraded { .. }))
        .count();
    if backups > 0 {
        lines.push(format!("etcd backups verified: {backups}"));
    }
    let hooks: Vec<&str> = summary
        .hosts
        .iter()
        .filter(|r| r.phase.is_cluster_hook() && matches!(r.outcome, HostOutcome::Upgraded { .. }))
        .map(|r| r.phase.name())
        .collect();
    if !hooks.is_empty() {
        lines.push(format!("cluster hooks run: {}", hooks.join(", ")));
    }
    let group = |pick: &dyn Fn(&HostOutcome) -> Option<String>| -> Vec<String> {
        summary
            .hosts
            .iter()
            .filter(|r| r.phase != Phase::Verify)
            .filter(|r| !r.phase.is_cluster_hook() || !matches!(r.outcome, HostOutcome::Upgraded { .. }))
            .filter(|r| {
                !matches!(r.phase, Phase::EtcdBackup | Phase::ConfigBackup)
                    || !matches!(r.outcome, HostOutcome::Upgraded { .. })
            })
            .filter_map(|r| pick(&r.outcome).map(|detail| format!("  {} ({}){detail}", r.host, r.phase)))
            .collect()
    };
    let sections: [(&str, Vec<String>); 5] = [
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
        (
            "passed over, below the target (could not be drained)",
            group(&|o| match o {
                HostOutcome::PassedOver { behavior, blocked_by, fix, .. } => {
                    Some(format!(" ({behavior}): {}; to finish it: {fix}", blocked_by.join("; ")))
                }
                _ => None,
            }),
        ),
    ];
    for (title, entries) in sections {
        if !entries.is_empty() {
            lines.push(format!("{title}: {}", entries.len()));
            lines.extend(entries);
        }
    }
    // How long each node was out of service, and on what (drain + upgrade + restart + ready is the floor).
    let windows: Vec<String> = summary
        .hosts
        .iter()
        .filter_map(|r| r.window.as_ref().map(|w| format!("  {}: {}", r.host, w.describe())))
        .collect();
    if !windows.is_empty() {
        lines.push("cordoned windows (cordon to uncordon):".to_string());
        lines.extend(windows);
    }
    lines.extend(what_is_left(summary));
    lines
}

/// The end of the summary: what verify found, the cluster's state, why the run stopped and the verdict.
fn what_is_left(summary: &Summary) -> Vec<String> {
    let mut lines = Vec::new();
    let verify_failures: Vec<String> = summary
        .hosts
        .iter()
        .filter(|r| r.phase == Phase::Verify)
        .filter_map(|r| match &r.outcome {
            HostOutcome::Failed { reason, .. } => Some(format!("  {}: {reason}", r.host)),
            _ => None,
        })
        .collect();
    if !verify_failures.is_empty() {
        lines.push(format!("verify found problems: {}", verify_failures.len()));
        lines.extend(verify_failures);
    }
    if !summary.api_removals_acknowledged.is_empty() {
        lines.push(format!(
            "removed APIs and flags crossed on acknowledgement (upgrade_acknowledge_api_removals): {}",
            summary.api_removals_acknowledged.len()
        ));
        lines.extend(summary.api_removals_acknowledged.iter().map(|a| format!("  {a}")));
    }
    if !summary.not_ready_untouched.is_empty() {
        lines.push(format!("not Ready, not touched by this run: {}", summary.not_ready_untouched.join(", ")));
    }
    if !summary.left_to_operator.is_empty() {
        lines.push(format!("left to the operator (not moved by this flavour): {}", summary.left_to_operator.len()));
        lines.extend(
            summary.left_to_operator.iter().map(|w| format!("  {} in {} runs {}", w.workload, w.namespace, w.image)),
        );
    }
    if let Some(error) = &summary.cluster_read_error {
        lines.push(format!("the cluster could not be read at the end: {error}"));
        if summary.left_cordoned.is_empty() {
            lines.push("left cordoned, as the hosts reported: none".to_string());
        } else {
            lines.push(format!("left cordoned, as the hosts reported: {}", summary.left_cordoned.len()));
        }
    } else if !summary.left_cordoned.is_empty() {
        lines.push(format!("left cordoned, as the cluster reports: {}", summary.left_cordoned.len()));
    }
    if !summary.left_cordoned.is_empty() {
        for c in &summary.left_cordoned {
            let why = if c.before_run { " (it was cordoned before the run)" } else { "" };
            lines.push(format!("  {}{why}: to make it schedulable again run `{}`", c.node, c.fix));
        }
    }
    if let Some(resumed) = &summary.resumed {
        lines.push(format!("resumed: {}", resume_line(resumed)));
    }
    if let Some(why) = &summary.stopped {
        lines.push(format!("stopped: {why}"));
    }
    if let Some(failure) = &summary.state_error {
        lines.push(format!(
            "state directory: {failure}: the journal or the host logs are incomplete; free space or make the state \
             directory writable, then re-run the same command"
        ));
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

/// `3 hosts done by an earlier run, 1 in flight restarted, 1 failed tried again, 1 node found cordoned by it`
pub(crate) fn resume_line(resume: &crate::vocabulary::Resume) -> String {
    let count = |n: usize, one: &str, many: &str| format!("{n} {}", if n == 1 { one } else { many });
    let mut parts = Vec::new();
    if !resume.done_earlier.is_empty() {
        parts.push(format!("{} done by an earlier run", count(resume.done_earlier.len(), "host", "hosts")));
    }
    if !resume.in_flight_restarted.is_empty() {
        parts.push(format!(
            "{} in flight restarted ({})",
            resume.in_flight_restarted.len(),
            resume.in_flight_restarted.join(", ")
        ));
    }
    if !resume.failed_retried.is_empty() {
        parts.push(format!(
            "{} failed tried again ({})",
            resume.failed_retried.len(),
            resume.failed_retried.join(", ")
        ));
    }
    if !resume.cordoned_by_earlier_run.is_empty() {
        parts.push(format!(
            "{} found cordoned by it ({})",
            count(resume.cordoned_by_earlier_run.len(), "node", "nodes"),
            resume.cordoned_by_earlier_run.join(", ")
        ));
    }
    parts.join(", ")
}

#[cfg(test)]
mod tests;
