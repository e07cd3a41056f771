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
    acknowledged.api_removals_acknowledged = vec!["1.25: policy/v1beta1 podsecuritypolicies at m1 (metrics)".into()];
    let lines = summary_lines(&acknowledged).join("\n");
    assert!(lines.contains("crossed on acknowledgement (upgrade_acknowledge_api_removals): 1"), "{lines}");
    assert!(lines.contains("  1.25: policy/v1beta1 podsecuritypolicies at m1 (metrics)"), "{lines}");
}

/// A `Write` that a test reads back.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Captured {
    fn text(&self) -> String {
        String::from_utf8(self.0.lock().unwrap().clone()).unwrap()
    }
}

fn step_started(host: &str, step: Step) -> Event {
    Event::StepStarted { phase: Phase::Nodes, host: host.into(), step }
}

#[test]
fn piped_output_says_a_hung_drain_still_waits_and_since_when_until_it_ends() {
    let out = Captured::default();
    let reporter = HumanReporter::new(Box::new(out.clone()), 0, true).with_heartbeat(Duration::from_millis(30));
    reporter.event(&step_started("node-5", Step::Drain));
    // Waited for, not slept for: two beats come within 60 ms on an idle machine, later on a loaded one.
    let beats_in = |text: &str| text.lines().filter(|l| l.contains("[node-5] drain still running")).count();
    for _ in 0..500 {
        if beats_in(&out.text()) >= 2 {
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let text = out.text();
    let beats = beats_in(&text);
    assert!(beats >= 2, "a line per interval while it waits:\n{text}");
    assert!(text.contains("waiting for its pods to be evicted, since "), "{text}");
    reporter.event(&Event::StepFinished {
        phase: Phase::Nodes,
        host: "node-5".into(),
        step: Step::Drain,
        ok: true,
        duration: Duration::from_secs(1),
        error: None,
    });
    let said = out.text().len();
    // Three intervals of the heartbeat.
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(out.text().len(), said, "nothing more once the step ended:\n{}", out.text());
}

#[test]
fn the_start_and_the_summary_say_where_the_record_is_and_name_each_failed_hosts_log() {
    let out = Captured::default();
    let reporter =
        HumanReporter::new(Box::new(out.clone()), 0, false).with_state_dir(Path::new("/srv/c1/.upgrade-state"));
    reporter.event(&Event::RunStarted {
        run: "r1".into(),
        target: "v1.29.1".into(),
        phases: vec![Phase::Nodes],
        resumed: false,
        change_id: None,
    });
    let mut failed = summary(None, &[]);
    failed.hosts.push(crate::vocabulary::HostReport {
        phase: Phase::Nodes,
        host: "node-5".into(),
        node: None,
        outcome: HostOutcome::Failed {
            step: Step::Drain,
            reason: "timed out".into(),
            unreachable: false,
            left_cordoned: true,
        },
        duration: Duration::from_secs(60),
        window: None,
    });
    reporter.event(&Event::RunFinished { summary: failed });
    let text = out.text();
    let record = "record: state directory /srv/c1/.upgrade-state, journal /srv/c1/.upgrade-state/journal.jsonl, \
                  host logs /srv/c1/.upgrade-state/logs/<host>.log";
    assert_eq!(text.matches(record).count(), 2, "at the start and in the summary:\n{text}");
    assert!(text.contains("the failed hosts' logs:\n  node-5: /srv/c1/.upgrade-state/logs/node-5.log\n"), "{text}");
    assert!(text.trim_end().ends_with("re-run the same command; finished hosts are not redone"), "{text}");
}

#[test]
fn a_step_run_again_in_a_phase_is_said_once_unless_verbose_or_failed() {
    let finished = |ok: bool| Event::StepFinished {
        phase: Phase::Preflight,
        host: "master-1".into(),
        step: Step::ReadCluster,
        ok,
        duration: Duration::from_millis(100),
        error: (!ok).then(|| "timed out".to_string()),
    };
    let out = Captured::default();
    let reporter = HumanReporter::new(Box::new(out.clone()), 0, false);
    reporter.event(&Event::PhaseStarted { phase: Phase::Preflight });
    for ok in [true, true, false] {
        reporter.event(&finished(ok));
    }
    let text = out.text();
    assert_eq!(text.matches("[master-1] read-cluster ok").count(), 1, "{text}");
    assert!(text.contains("[master-1] read-cluster FAILED: timed out"), "a failure is always said: {text}");
    reporter.event(&Event::PhaseStarted { phase: Phase::Verify });
    reporter.event(&finished(true));
    assert_eq!(out.text().matches("[master-1] read-cluster ok").count(), 2, "once per phase: {}", out.text());
    let verbose_out = Captured::default();
    let verbose = HumanReporter::new(Box::new(verbose_out.clone()), 1, false);
    verbose.event(&finished(true));
    verbose.event(&finished(true));
    assert_eq!(verbose_out.text().matches("read-cluster ok").count(), 2, "-v says every one");
}

#[test]
fn a_hooks_tasks_are_one_line_when_it_ends_and_a_failed_one_is_shown_in_full() {
    let task = |name: &str, status: TaskStatus| Event::TaskFinished {
        host: "node-1".into(),
        task: crate::events::TaskRef { name: name.into(), file: "hooks/node_pre.yml".into(), line: 1 },
        status,
        result: serde_json::json!({"msg": format!("{name} said this")}),
        duration: Duration::from_millis(10),
        ignored: false,
        rescued: false,
    };
    let hook_finished = |error: Option<&str>| Event::StepFinished {
        phase: Phase::Nodes,
        host: "node-1".into(),
        step: Step::PreHook,
        ok: error.is_none(),
        duration: Duration::from_millis(40),
        error: error.map(str::to_string),
    };
    let out = Captured::default();
    let reporter = HumanReporter::new(Box::new(out.clone()), 0, false);
    reporter.event(&step_started("node-1", Step::PreHook));
    reporter.event(&task("say hello", TaskStatus::Ok));
    reporter.event(&task("touch a file", TaskStatus::Changed));
    reporter.event(&task("only on masters", TaskStatus::Skipped));
    reporter.event(&task("call the load balancer", TaskStatus::Failed));
    reporter.event(&hook_finished(Some("a task failed")));
    let text = out.text();
    assert!(
        text.contains("  [node-1] say hello: say hello said this\n"),
        "what a hook says (its msg) is shown: {text}"
    );
    assert!(!text.contains("ok: say hello"), "a task that went well is counted, not listed: {text}");
    assert!(text.contains("call the load balancer"), "the failed task is shown: {text}");
    assert!(text.contains("[node-1] pre-hook FAILED: a task failed"), "the hook's line: {text}");
    let ok = Captured::default();
    let reporter = HumanReporter::new(Box::new(ok.clone()), 0, false);
    reporter.event(&step_started("node-1", Step::PreHook));
    reporter.event(&task("say hello", TaskStatus::Ok));
    reporter.event(&task("touch a file", TaskStatus::Changed));
    reporter.event(&hook_finished(None));
    assert!(
        ok.text().contains("[node-1] pre-hook ok (0.0s): 2 tasks: ok=1 changed=1 skipped=0 failed=0"),
        "{}",
        ok.text()
    );
}
