//! The upgrade as people read it: phase and batch headers, one line per host step, hook task results, and the
//! summary with what is left to do. Lines carry a timestamp when the output is not a terminal (logs, CI).

use std::collections::HashMap;
use std::io::Write;
use std::sync::Mutex;
use std::time::Duration;

use crate::events::{Event, EventSink};
use crate::tasks::report::task_lines;
use crate::vocabulary::{HostOutcome, Phase, Step, Summary};

use super::output::OutputQueue;
use super::progress::ProgressBars;

pub(crate) struct HumanReporter {
    out: Mutex<Box<dyn Write + Send>>,
    verbosity: u8,
    timestamps: bool,
    color: bool,
    /// Progress bars on stderr, when it is a terminal.
    progress: Option<ProgressBars>,
    /// The step each host is in, so hook task results show and built-in step tasks stay quiet.
    current_step: Mutex<HashMap<String, Step>>,
    /// The stdout queue, waited on briefly while the progress bars are cleared so lines land above them.
    settle: Option<OutputQueue>,
}

impl HumanReporter {
    pub(crate) fn new(out: Box<dyn Write + Send>, verbosity: u8, timestamps: bool) -> HumanReporter {
        HumanReporter {
            out: Mutex::new(out),
            verbosity,
            timestamps,
            color: false,
            progress: None,
            current_step: Mutex::new(HashMap::new()),
            settle: None,
        }
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
        reporter
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
        let Ok(mut out) = self.out.lock() else { return };
        let stamp = if self.timestamps {
            let now = crate::time_format::utc_timestamp(std::time::SystemTime::now());
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
        self.current_step.lock().ok().and_then(|s| s.get(host).copied()).is_some_and(|step| {
            matches!(step, Step::PreCordonHook | Step::PreDrainHook | Step::PreHook | Step::MidHook | Step::PostHook)
        })
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
            progress.event(event);
        }
        match event {
            Event::RunStarted { target, phases, resumed, .. } => {
                let how = if *resumed { " (resuming an earlier run)" } else { "" };
                self.write(&[format!(
                    "Upgrading to {target}: {}{how}",
                    phases.iter().map(|p| p.name()).collect::<Vec<_>>().join(", ")
                )]);
            }
            Event::PhaseStarted { phase } => self.write(&[String::new(), self.paint(&format!("== {phase}"), "1")]),
            Event::PhaseFinished { phase, ok, duration } => {
                let status = if *ok { self.paint("done", "32") } else { self.paint("stopped", "31") };
                self.write(&[format!("== {phase} {status} in {}", secs(duration))]);
            }
            Event::BatchStarted { phase, index, total, hosts } => {
                let what = if *phase == Phase::ControlPlane { "master" } else { "batch" };
                self.write(&[format!("-- {what} {index}/{total}: {}", hosts.join(", "))]);
            }
            Event::BatchFinished { phase, failed, size, .. } if *phase == Phase::Nodes && *failed > 0 => {
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
                    (false, Some(e)) => format!("[{host}] {step} {}: {e}", self.paint("FAILED", "31")),
                    (false, None) => format!("[{host}] {step} {}", self.paint("FAILED", "31")),
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
            Event::HostFinished { report } => {
                let host = &report.host;
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
            Event::Notice { host: Some(host), message } => self.write(&[format!("[{host}] {message}")]),
            Event::Notice { host: None, message } => self.write(&[message.clone()]),
            Event::RunFinished { summary } => self.write(&summary_lines(summary)),
            _ => {}
        }
    }
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
mod tests {
    use super::*;
    use crate::vocabulary::CordonedNode;

    fn summary(cluster_read_error: Option<&str>, cordoned: &[&str]) -> Summary {
        Summary {
            target: "v1.29.1".into(),
            hosts: Vec::new(),
            stopped: None,
            left_cordoned: cordoned
                .iter()
                .map(|n| CordonedNode { node: n.to_string(), before_run: false, fix: format!("kubectl uncordon {n}") })
                .collect(),
            not_ready_untouched: Vec::new(),
            left_to_operator: Vec::new(),
            cluster_read_error: cluster_read_error.map(str::to_string),
            interrupted: false,
            resumed: None,
            state_error: None,
            cluster_lock_lost: None,
            change_id: None,
            api_removals_acknowledged: Vec::new(),
        }
    }

    #[test]
    fn the_summary_says_whether_the_cordoned_nodes_come_from_the_cluster_or_from_the_hosts() {
        let from_cluster = summary_lines(&summary(None, &["node-2"])).join("\n");
        assert!(from_cluster.contains("left cordoned, as the cluster reports: 1\n  node-2: to make it schedulable"));
        let from_hosts = summary_lines(&summary(Some("cannot read the cluster's nodes"), &["node-2"])).join("\n");
        assert!(from_hosts.contains("the cluster could not be read at the end: cannot read the cluster's nodes\n"));
        assert!(from_hosts.contains("left cordoned, as the hosts reported: 1\n  node-2: to make it schedulable again"));
        let none = summary_lines(&summary(Some("timeout"), &[])).join("\n");
        assert!(none.contains("left cordoned, as the hosts reported: none"), "{none}");
    }

    #[test]
    fn a_state_directory_that_could_not_be_written_is_never_a_success() {
        let mut s = summary(None, &[]);
        s.state_error = Some("cannot write the journal j: No space left on device".into());
        s.interrupted = true;
        assert_eq!(s.exit_code(), crate::vocabulary::ExitCode::Failed);
        let text = summary_lines(&s).join("\n");
        assert!(text.contains("state directory: cannot write the journal j: No space left on device"), "{text}");
        assert!(!text.contains("result: success"), "{text}");
    }

    #[test]
    fn the_summary_lists_the_minors_crossed_on_acknowledgement() {
        let mut acknowledged = summary(None, &[]);
        acknowledged.api_removals_acknowledged =
            vec!["1.25: policy/v1beta1 podsecuritypolicies at m1 (metrics)".into()];
        let lines = summary_lines(&acknowledged).join("\n");
        assert!(lines.contains("crossed on acknowledgement (upgrade_acknowledge_api_removals): 1"), "{lines}");
        assert!(lines.contains("  1.25: policy/v1beta1 podsecuritypolicies at m1 (metrics)"), "{lines}");
    }
}
