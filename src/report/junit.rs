//! The JUnit XML report for CI: one test suite per phase, one test case per host.

use std::fmt::Write;

use crate::vocabulary::{HostOutcome, HostReport, Phase, Step, Summary};

/// The report of a run: a test case per host and phase; when a preflight check stopped the run, a failed
/// `preflight` case says why (so a CI job shows the reason, not an empty report).
pub(crate) fn render(summary: &Summary) -> String {
    let mut reports = Vec::new();
    if let Some(why) = summary.stopped.as_ref().and_then(|s| s.check_failed()) {
        reports.push(HostReport {
            phase: Phase::Preflight,
            host: Phase::Preflight.name().into(),
            node: None,
            outcome: HostOutcome::Failed {
                step: Step::ReadCluster,
                reason: why.to_string(),
                unreachable: false,
                left_cordoned: false,
            },
            duration: std::time::Duration::ZERO,
            window: None,
        });
    }
    reports.extend(summary.hosts.iter().cloned());
    render_reports(&reports)
}

/// Renders host reports. Phases keep the order in which they first appear.
pub(crate) fn render_reports(reports: &[HostReport]) -> String {
    let mut phases: Vec<Phase> = Vec::new();
    for r in reports {
        if !phases.contains(&r.phase) {
            phases.push(r.phase);
        }
    }
    let count = |pred: &dyn Fn(&HostOutcome) -> bool, phase: Option<Phase>| {
        reports.iter().filter(|r| phase.is_none_or(|p| r.phase == p) && pred(&r.outcome)).count()
    };
    // A node passed over is below the target: a failure of its test case, of the kind `passed-over`.
    let failed = |o: &HostOutcome| matches!(o, HostOutcome::Failed { .. } | HostOutcome::PassedOver { .. });
    let skipped = |o: &HostOutcome| matches!(o, HostOutcome::Skipped { .. } | HostOutcome::NotStarted { .. });
    let total_time: f64 = reports.iter().map(|r| r.duration.as_secs_f64()).sum();

    let mut xml = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(
        xml,
        "<testsuites name=\"upgrade\" tests=\"{}\" failures=\"{}\" errors=\"0\" skipped=\"{}\" time=\"{:.3}\">",
        reports.len(),
        count(&failed, None),
        count(&skipped, None),
        total_time
    );
    for phase in phases {
        let cases: Vec<&HostReport> = reports.iter().filter(|r| r.phase == phase).collect();
        let time: f64 = cases.iter().map(|r| r.duration.as_secs_f64()).sum();
        let _ = writeln!(
            xml,
            "  <testsuite name=\"{}\" tests=\"{}\" failures=\"{}\" errors=\"0\" skipped=\"{}\" time=\"{:.3}\">",
            escape(phase.name()),
            cases.len(),
            count(&failed, Some(phase)),
            count(&skipped, Some(phase)),
            time
        );
        for case in cases {
            let _ = write!(
                xml,
                "    <testcase classname=\"upgrade.{}\" name=\"{}\" time=\"{:.3}\"",
                escape(phase.name()),
                escape(&case.host),
                case.duration.as_secs_f64()
            );
            match &case.outcome {
                HostOutcome::Upgraded { .. } => xml.push_str("/>\n"),
                HostOutcome::Skipped { reason } | HostOutcome::NotStarted { reason } => {
                    let _ = write!(xml, ">\n      <skipped message=\"{}\"/>\n    </testcase>\n", escape(reason));
                }
                HostOutcome::PassedOver { behavior, blocked_by, fix, .. } => {
                    let message = format!("passed over ({behavior}): {}", blocked_by.join("; "));
                    let _ = write!(
                        xml,
                        ">\n      <failure message=\"{}\" type=\"passed-over\">{}</failure>\n    </testcase>\n",
                        escape(&message),
                        escape(&format!("{message}\nto finish it: {fix}"))
                    );
                }
                HostOutcome::Failed { step, reason, .. } => {
                    let kind = if case.phase == Phase::Preflight { case.phase.to_string() } else { step.to_string() };
                    let _ = write!(
                        xml,
                        ">\n      <failure message=\"{}\" type=\"{}\">{}</failure>\n    </testcase>\n",
                        escape(&format!("{kind}: {reason}")),
                        kind,
                        escape(reason)
                    );
                }
            }
        }
        xml.push_str("  </testsuite>\n");
    }
    xml.push_str("</testsuites>\n");
    xml
}

/// XML-escapes text and drops characters XML 1.0 cannot carry (control characters from command output).
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\t' | '\n' | '\r' => out.push(c),
            c if (c as u32) < 0x20 => {}
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vocabulary::Step;
    use std::time::Duration;

    fn report(phase: Phase, host: &str, outcome: HostOutcome) -> HostReport {
        HostReport {
            phase,
            host: host.into(),
            node: None,
            outcome,
            duration: Duration::from_millis(1500),
            window: None,
        }
    }

    #[test]
    fn one_case_per_host_and_phase() {
        let xml = render_reports(&[
            report(Phase::ControlPlane, "m1", HostOutcome::Upgraded { left_cordoned: false }),
            report(
                Phase::Nodes,
                "n1",
                HostOutcome::Failed {
                    step: Step::Drain,
                    reason: "drain timed out after 5m <pods>\u{1b}".into(),
                    unreachable: false,
                    left_cordoned: false,
                },
            ),
            report(Phase::Nodes, "n2", HostOutcome::Skipped { reason: "already at v1.29.1".into() }),
        ]);
        assert!(xml.contains("<testsuites name=\"upgrade\" tests=\"3\" failures=\"1\" errors=\"0\" skipped=\"1\""));
        assert!(xml.contains("<testsuite name=\"nodes\" tests=\"2\" failures=\"1\""));
        assert!(xml.contains("<testcase classname=\"upgrade.control-plane\" name=\"m1\" time=\"1.500\"/>"));
        assert!(xml.contains("message=\"drain: drain timed out after 5m &lt;pods&gt;\" type=\"drain\""));
        assert!(!xml.contains('\u{1b}'));
    }

    #[test]
    fn a_node_passed_over_is_a_failure_of_its_own_type_with_what_finishes_it() {
        let xml = render_reports(&[report(
            Phase::Nodes,
            "n1",
            HostOutcome::PassedOver {
                behavior: "quarantine".into(),
                blocked_by: vec!["PodDisruptionBudget default/guarded allows 0 disruptions".into()],
                left_cordoned: true,
                fix: "upgrade --inventory hosts.yml --limit n1".into(),
            },
        )]);
        assert!(xml.contains("failures=\"1\""), "{xml}");
        assert!(xml.contains("type=\"passed-over\""), "{xml}");
        assert!(xml.contains("passed over (quarantine): PodDisruptionBudget default/guarded allows 0 disruptions"));
        assert!(xml.contains("to finish it: upgrade --inventory hosts.yml --limit n1"), "{xml}");
    }
}
