//! The Markdown summary for CI (`--summary-md FILE`, and GitHub's `GITHUB_STEP_SUMMARY` when it is set): the
//! result, counts per phase, failures with their reasons, the nodes left cordoned with the command that fixes each,
//! durations (slowest hosts first) and where the run's record is. No links: a CI page shows it as it is.

use std::fmt::Write;
use std::path::Path;
use std::time::Duration;

use crate::vocabulary::{HostOutcome, HostReport, Phase, Summary};

use super::running::short_duration;

/// How many of the slowest hosts the durations table lists.
const SLOWEST: usize = 10;

/// The summary of a run that took `took`, its record in `state_dir`.
pub(crate) fn render(summary: &Summary, took: Duration, state_dir: &Path) -> String {
    let mut md = String::new();
    let exit_code = summary.exit_code().code();
    // The verdict the exit code gives, so a CI page and the job's status never disagree.
    let verdict = match exit_code {
        0 => "success",
        130 => "interrupted",
        _ => "FAILED",
    };
    let _ = writeln!(md, "## upgrade to {}: {verdict}\n", cell(&summary.target));
    let advice = match verdict {
        "interrupted" => "re-run the same command to resume; finished hosts are not redone",
        "FAILED" => "fix what is listed below and re-run the same command; finished hosts are not redone",
        _ => "every host is at the target or was skipped for a reason given below",
    };
    let _ = writeln!(md, "**Result: {verdict}** ({advice}), exit code {exit_code}.\n");
    let _ = writeln!(md, "- took: {}", self::took(took));
    if let Some(change) = &summary.change_id {
        let _ = writeln!(md, "- change: {}", inline(change));
    }
    if let Some(why) = &summary.stopped {
        let _ = writeln!(md, "- stopped: {}", inline(&why.to_string()));
    }
    if let Some(lost) = &summary.cluster_lock_lost {
        let _ = writeln!(md, "- cluster lock lost: {}", inline(lost));
    }
    if let Some(failure) = &summary.state_error {
        let _ = writeln!(md, "- state directory: {} (the journal or the host logs are incomplete)", inline(failure));
    }
    md.push('\n');
    counts(&mut md, summary);
    failures(&mut md, summary);
    cordoned(&mut md, summary);
    durations(&mut md, summary);
    let _ = writeln!(
        md,
        "Record: state directory `{}`, journal `{}`, host logs `{}`.",
        code(&state_dir.display().to_string()),
        code(&state_dir.join("journal.jsonl").display().to_string()),
        code(&state_dir.join("logs").join("<host>.log").display().to_string())
    );
    md
}

/// A table of outcomes per phase, in the order the phases ran.
fn counts(md: &mut String, summary: &Summary) {
    let mut phases: Vec<Phase> = Vec::new();
    for r in &summary.hosts {
        if !phases.contains(&r.phase) {
            phases.push(r.phase);
        }
    }
    if phases.is_empty() {
        md.push_str("No host was started.\n\n");
        return;
    }
    md.push_str("| phase | done | skipped | failed | not started | passed over | time |\n");
    md.push_str("| --- | ---: | ---: | ---: | ---: | ---: | ---: |\n");
    for phase in phases {
        let of: Vec<&HostReport> = summary.hosts.iter().filter(|r| r.phase == phase).collect();
        let n = |pick: fn(&HostOutcome) -> bool| of.iter().filter(|r| pick(&r.outcome)).count();
        // The hosts of a phase run side by side: its time is its longest host's, not their sum.
        let time = of.iter().map(|r| r.duration).max().unwrap_or_default();
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} | {} | {} | {} |",
            phase,
            n(|o| matches!(o, HostOutcome::Upgraded { .. })),
            n(|o| matches!(o, HostOutcome::Skipped { .. })),
            n(|o| matches!(o, HostOutcome::Failed { .. })),
            n(|o| matches!(o, HostOutcome::NotStarted { .. })),
            n(|o| matches!(o, HostOutcome::PassedOver { .. })),
            took(time)
        );
    }
    md.push('\n');
}

fn failures(md: &mut String, summary: &Summary) {
    let failed: Vec<String> = summary
        .hosts
        .iter()
        .filter_map(|r| match &r.outcome {
            HostOutcome::Failed { step, reason, unreachable, .. } => {
                let unreachable = if *unreachable { " (unreachable)" } else { "" };
                Some(format!("- `{}` ({}) at {step}{unreachable}: {}", code(&r.host), r.phase, inline(reason)))
            }
            HostOutcome::PassedOver { behavior, blocked_by, fix, .. } => Some(format!(
                "- `{}` ({}) passed over, below the target ({behavior}): {}; to finish it: `{}`",
                code(&r.host),
                r.phase,
                inline(&blocked_by.join("; ")),
                code(fix)
            )),
            _ => None,
        })
        .collect();
    if failed.is_empty() {
        return;
    }
    let _ = writeln!(md, "### Failures ({})\n", failed.len());
    for line in failed {
        let _ = writeln!(md, "{line}");
    }
    md.push('\n');
}

fn cordoned(md: &mut String, summary: &Summary) {
    if summary.left_cordoned.is_empty() {
        return;
    }
    let source = if summary.cluster_read_error.is_some() { "as the hosts reported" } else { "as the cluster reports" };
    let _ = writeln!(md, "### Nodes left cordoned ({}, {source})\n", summary.left_cordoned.len());
    for c in &summary.left_cordoned {
        let why = if c.before_run { " (it was cordoned before the run)" } else { "" };
        let _ = writeln!(md, "- `{}`{why}: to make it schedulable again run `{}`", code(&c.node), code(&c.fix));
    }
    md.push('\n');
}

/// The slowest hosts first, with how long each node was out of service.
fn durations(md: &mut String, summary: &Summary) {
    let mut hosts: Vec<&HostReport> = summary.hosts.iter().filter(|r| !r.duration.is_zero()).collect();
    if hosts.is_empty() {
        return;
    }
    hosts.sort_by_key(|r| std::cmp::Reverse(r.duration));
    let shown = if hosts.len() > SLOWEST { format!(", {SLOWEST} of {}", hosts.len()) } else { String::new() };
    let _ = writeln!(md, "### Durations (slowest first{shown})\n");
    md.push_str("| host | phase | time | cordoned (cordon to uncordon) |\n| --- | --- | ---: | --- |\n");
    for r in hosts.iter().take(SLOWEST) {
        let window = r.window.as_ref().map(|w| w.describe()).unwrap_or_else(|| "-".into());
        let _ = writeln!(md, "| {} | {} | {} | {} |", cell(&r.host), r.phase, took(r.duration), window);
    }
    md.push('\n');
}

/// `0.4s` under ten seconds (a quick step is not `0s`), else `4m05s`.
fn took(d: Duration) -> String {
    if d < Duration::from_secs(10) { format!("{:.1}s", d.as_secs_f64()) } else { short_duration(d) }
}

/// Text from outside (error messages, command output) made safe inside a line or a table cell: one line, no
/// table breaks, no HTML, no Markdown emphasis or links it did not mean.
fn inline(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\n' | '\r' | '\t' => out.push(' '),
            '|' | '*' | '_' | '[' | ']' | '`' | '#' | '\\' => {
                out.push('\\');
                out.push(c);
            }
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            c if c.is_control() => {}
            c => out.push(c),
        }
    }
    out
}

fn cell(text: &str) -> String {
    inline(text)
}

/// Text inside a code span: one line, no backtick to end it early, no pipe to break a table.
fn code(text: &str) -> String {
    text.chars()
        .filter(|c| !c.is_control() || *c == '\n')
        .map(|c| match c {
            '`' => '\'',
            '\n' => ' ',
            '|' => '¦',
            c => c,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vocabulary::{CordonedNode, Step};

    fn report(phase: Phase, host: &str, secs: u64, outcome: HostOutcome) -> HostReport {
        HostReport { phase, host: host.into(), node: None, outcome, duration: Duration::from_secs(secs), window: None }
    }

    #[test]
    fn a_failed_run_gives_its_result_counts_failures_cordoned_nodes_with_the_fix_and_slowest_hosts_first() {
        let mut summary = Summary::empty("v1.29.1".into());
        summary.hosts = vec![
            report(Phase::ControlPlane, "m1", 70, HostOutcome::Upgraded { left_cordoned: false }),
            report(Phase::Nodes, "n2", 30, HostOutcome::Upgraded { left_cordoned: false }),
            report(
                Phase::Nodes,
                "n1",
                245,
                HostOutcome::Failed {
                    step: Step::Upgrade,
                    reason: "apt-get failed | exit 100\n<E: held packages> *see* [log]".into(),
                    unreachable: false,
                    left_cordoned: true,
                },
            ),
            report(Phase::Nodes, "n3", 0, HostOutcome::NotStarted { reason: "the run stopped".into() }),
        ];
        summary.left_cordoned =
            vec![CordonedNode { node: "n1".into(), before_run: false, fix: "kubectl uncordon n1".into() }];
        let md = render(&summary, Duration::from_secs(7800), Path::new("/srv/st"));
        assert!(md.starts_with("## upgrade to v1.29.1: FAILED\n"), "{md}");
        assert!(md.contains("exit code 1"), "{md}");
        assert!(md.contains("- took: 2h10m"), "{md}");
        assert!(md.contains("| control-plane | 1 | 0 | 0 | 0 | 0 | 1m10s |"), "{md}");
        assert!(md.contains("| nodes | 1 | 0 | 1 | 1 | 0 | 4m05s |"), "{md}");
        // The reason stays one line and cannot break the Markdown around it.
        assert!(
            md.contains(
                "- `n1` (nodes) at upgrade: apt-get failed \\| exit 100 &lt;E: held packages&gt; \\*see\\* \\[log\\]"
            ),
            "{md}"
        );
        assert!(md.contains("### Nodes left cordoned (1, as the cluster reports)"), "{md}");
        assert!(md.contains("- `n1`: to make it schedulable again run `kubectl uncordon n1`"), "{md}");
        let slowest = md.find("| n1 | nodes | 4m05s |").expect("n1 in the durations");
        assert!(slowest < md.find("| m1 | control-plane | 1m10s |").expect("m1"), "slowest first: {md}");
        assert!(!md.contains("| n3 |"), "a host that never started has no duration: {md}");
        assert!(md.contains("Record: state directory `/srv/st`, journal `/srv/st/journal.jsonl`"), "{md}");
        assert!(!md.contains("http"), "link-free: {md}");
    }

    #[test]
    fn a_successful_run_says_success_and_has_no_failure_section() {
        let mut summary = Summary::empty("v1.29.1".into());
        summary.hosts = vec![report(Phase::Nodes, "n1", 5, HostOutcome::Upgraded { left_cordoned: false })];
        let md = render(&summary, Duration::from_secs(5), Path::new("st"));
        assert!(md.contains("| nodes | 1 | 0 | 0 | 0 | 0 | 5.0s |"), "{md}");
        assert!(md.starts_with("## upgrade to v1.29.1: success\n"), "{md}");
        assert!(md.contains("exit code 0"), "{md}");
        assert!(!md.contains("### Failures"), "{md}");
        assert!(!md.contains("left cordoned"), "{md}");
    }
}
