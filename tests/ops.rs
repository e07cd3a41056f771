//! Safe to interrupt, easy to follow: kill -9 and resume, SIGINT with a grace period, the run lock, the JSON events
//! and the JUnit report, on a copy of the demo cluster (local connections, the scripted fake cluster API).

use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::Outcome;
use crate::support::demo::{Demo, HOSTS, NODES, lock_is_free};

#[test]
fn kill_9_in_the_middle_of_a_node_batch_then_a_rerun_upgrades_every_node_exactly_once() {
    let demo = Demo::new();
    // node-2's drain takes 3 s: the orchestrator is killed while it drains.
    demo.fake.set_cue("node-2", "drain_hang", "3");
    let mut first = demo.spawn(&[]);
    demo.wait_for_call("node-2", "drain");
    std::thread::sleep(Duration::from_millis(500));
    first.kill().expect("kill -9 the orchestrator");
    let _ = first.wait();
    assert!(demo.fake.is_cordoned("node-2"), "the killed run left node-2 cordoned (the scenario this test is about)");
    assert!(demo.path(".upgrade-state/lock").exists(), "kill -9 leaves the lock behind");

    let second = demo.run(&[]);
    let out = second.to_string();
    assert_eq!(second.code, 0, "the re-run finishes the upgrade\n{out}");
    let stdout = second.stdout.clone();
    // node-2 certainly (it was draining); its batch mates too if they were still in flight at the kill.
    let cordoned = stdout
        .lines()
        .find_map(|l| l.split("nodes left cordoned by an earlier run: ").nth(1))
        .unwrap_or_else(|| panic!("no list of nodes left cordoned\n{out}"));
    let cordoned = cordoned.split(" (").next().unwrap_or_default();
    assert!(cordoned.split(", ").any(|n| n == "node-2"), "lists node-2 among the cordoned nodes: {cordoned}\n{out}");
    let resumed = stdout.lines().find(|l| l.contains("resumed: ")).unwrap_or_else(|| panic!("no resumed line\n{out}"));
    let in_flight = resumed.split("in flight restarted (").nth(1).and_then(|r| r.split(')').next()).unwrap_or("");
    assert!(in_flight.split(", ").any(|h| h == "node-2"), "node-2 restarted: {resumed}\n{out}");
    for host in HOSTS {
        assert_eq!(demo.fake.upgrades(host), 1, "{host} upgraded exactly once\n{out}");
        assert_eq!(demo.fake.version(host), "v1.29.1", "{host} at the target\n{out}");
        assert!(!demo.fake.is_cordoned(host), "{host} schedulable at the end\n{out}");
    }
    // The masters were done by the first run: the second does not touch them again.
    let kubeadm_applies = demo.fake.calls().iter().filter(|c| c.action == "kubeadm-apply").count();
    assert_eq!(kubeadm_applies, 1, "kubeadm upgrade apply ran once\n{out}");
}

#[test]
fn sigint_during_a_batch_leaves_no_node_cordoned_that_was_not_upgraded() {
    let demo = Demo::new();
    // node-2's drain never ends: only the grace period gets the run out of the batch.
    demo.fake.set_cue("node-2", "drain_hang", "forever");
    let child = demo.spawn(&["--grace-period", "1"]);
    demo.wait_for_call("node-2", "drain");
    std::thread::sleep(Duration::from_millis(300));
    child.signal(libc::SIGINT);
    let out = child.finish();
    let described = out.to_string();
    assert_eq!(out.code, 130, "an interrupted run exits 130\n{described}");
    let stdout = out.stdout.clone();
    assert!(stdout.contains("result: interrupted"), "{described}");
    assert!(stdout.contains("[node-2] interrupted before its upgrade: uncordoned again"), "{described}");
    for node in NODES {
        assert!(
            !(demo.fake.is_cordoned(node) && demo.fake.upgrades(node) == 0),
            "{node} is cordoned but was not upgraded\n{described}"
        );
    }
    assert_eq!(demo.fake.upgrades("node-2"), 0, "node-2 never got past its drain\n{described}");
    // The later batch never started.
    assert!(!demo.fake.calls().iter().any(|c| c.node == "node-4"), "node-4 was touched\n{described}");
    // The journal says how the run ended, and the lock is let go (its file stays: it is never deleted).
    let journal = std::fs::read_to_string(demo.path(".upgrade-state/journal.jsonl")).expect("journal");
    assert!(journal.lines().last().is_some_and(|l| l.contains("\"status\":\"interrupted\"")), "{journal}");
    assert!(lock_is_free(&demo.path(".upgrade-state")));

    // The re-run finishes what is left, node-2 included.
    demo.fake.set_cue("node-2", "drain_hang", "0");
    let rerun = demo.run(&[]);
    assert_eq!(rerun.code, 0, "{rerun}");
    for node in NODES {
        assert_eq!(demo.fake.upgrades(node), 1, "{node} upgraded exactly once\n{rerun}");
    }
}

#[test]
fn a_second_run_is_refused_while_the_first_holds_the_lock() {
    let demo = Demo::new();
    demo.fake.set_cue("node-1", "drain_hang", "forever");
    let first = demo.spawn(&["--grace-period", "0"]);
    demo.wait_for_call("node-1", "drain");

    let second = demo.run(&[]);
    let stderr = second.stderr.clone();
    assert_eq!(second.code, 2, "{second}");
    assert!(stderr.contains(&format!("another upgrade is running on this cluster (pid {}", first.id())), "{stderr}");
    assert!(stderr.contains("started 20"), "the holder's start time: {stderr}");

    // Let the first one go: with no grace period it stops at once, its drain cut short.
    first.signal(libc::SIGINT);
    let out = first.finish();
    assert_eq!(out.code, 130, "{out}");
    assert!(!demo.fake.is_cordoned("node-1"), "node-1 uncordoned after the interrupt\n{out}");
}

/// The fields every event type must carry (README, "JSON events").
fn required_fields(event: &str) -> Option<&'static [&'static str]> {
    Some(match event {
        "run-started" => &["run", "target", "phases", "resumed"],
        "phase-started" => &["phase", "eta_seconds"],
        "phase-finished" => &["phase", "status", "duration", "eta_seconds"],
        "batch-started" => &["phase", "batch", "batches", "hosts", "eta_seconds"],
        "batch-finished" => &["phase", "batch", "failed", "size", "eta_seconds"],
        "host-started" => &["phase", "host"],
        "step-started" => &["phase", "host", "step"],
        "step-finished" => &["phase", "host", "step", "status", "duration", "error"],
        "task-finished" => &["host", "task", "file", "line", "status", "duration", "ignored", "rescued", "result"],
        "notice" => &["host", "message"],
        "stall" => &["phase", "host", "step", "running_seconds", "usual_seconds", "usual_from", "message"],
        "host-finished" => &["phase", "host", "status", "duration"],
        "summary" => &["status", "exit_code", "target", "hosts", "stopped", "left_cordoned", "interrupted"],
        "aborted" => &["status", "exit_code"],
        _ => return None,
    })
}

fn json_lines(out: &Outcome) -> Vec<Value> {
    out.stdout
        .lines()
        .enumerate()
        .map(|(i, line)| {
            serde_json::from_str(line)
                .unwrap_or_else(|e| panic!("stdout line {} is not JSON ({e}): {line}\n{}", i + 1, out))
        })
        .collect()
}

fn check_schema(events: &[Value], out: &Outcome) {
    for event in events {
        let kind = event["event"].as_str().unwrap_or_else(|| panic!("no `event`: {event}"));
        let time = event["time"].as_str().unwrap_or_else(|| panic!("no `time`: {event}"));
        assert!(time.len() == 20 && time.ends_with('Z'), "time is UTC: {time}");
        let fields = required_fields(kind).unwrap_or_else(|| panic!("undocumented event type {kind}: {event}"));
        for field in fields {
            assert!(event.get(*field).is_some(), "{kind} lacks `{field}`: {event}\n{out}");
        }
    }
}

#[test]
fn the_json_stream_and_the_junit_report_follow_the_documented_schema() {
    let demo = Demo::new();
    let junit = demo.path("report.xml");
    let out = demo.run(&["--output", "json", "--junit", junit.to_str().expect("path")]);
    assert_eq!(out.code, 0, "{out}");
    let events = json_lines(&out);
    check_schema(&events, &out);
    let kinds: Vec<&str> = events.iter().filter_map(|e| e["event"].as_str()).collect();
    for kind in [
        "run-started",
        "phase-started",
        "phase-finished",
        "batch-started",
        "batch-finished",
        "host-started",
        "step-started",
        "step-finished",
        "host-finished",
    ] {
        assert!(kinds.contains(&kind), "no {kind} event");
    }
    assert_eq!(kinds.first(), Some(&"run-started"));
    let last = events.last().expect("events");
    assert_eq!((last["event"].as_str(), last["exit_code"].as_i64()), (Some("summary"), Some(0)), "{last}");
    assert_eq!(last["status"], "success");
    // Every step that starts finishes.
    let starts = kinds.iter().filter(|k| **k == "step-started").count();
    assert_eq!(starts, kinds.iter().filter(|k| **k == "step-finished").count());
    // A failed step carries its error; an ok one a null error.
    for e in events.iter().filter(|e| e["event"] == "step-finished") {
        assert_eq!(e["status"] == "ok", e["error"].is_null(), "{e}");
    }

    let xml = std::fs::read_to_string(&junit).expect("the JUnit report");
    let cases = junit_cases(&xml);
    assert_eq!(attr(&xml, "testsuites", "tests"), Some(cases.len().to_string()), "{xml}");
    let mut expected: Vec<(String, String)> = Vec::new();
    for m in ["master-1", "master-2", "master-3"] {
        expected.push(("etcd-backup".into(), m.into()));
        expected.push(("control-plane".into(), m.into()));
    }
    for n in NODES {
        expected.push(("nodes".into(), n.into()));
    }
    for h in HOSTS {
        expected.push(("verify".into(), h.into()));
        expected.push(("config-backup".into(), h.into()));
    }
    let mut got = cases.clone();
    got.sort();
    expected.sort();
    assert_eq!(got, expected, "one test case per host and phase\n{xml}");
}

#[test]
fn a_run_stopped_by_preflight_still_ends_the_json_stream_with_a_summary_and_writes_junit() {
    let demo = Demo::new();
    let junit = demo.path("report.xml");
    let out = demo.run(&["--output", "json", "--junit", junit.to_str().expect("path"), "--target-version", "v1.27.0"]);
    assert_eq!(out.code, 2, "a downgrade is bad input\n{out}");
    assert!(out.stderr.contains("older than the control plane"), "{out}");
    let events = json_lines(&out);
    check_schema(&events, &out);
    let last = events.last().expect("events");
    assert_eq!((last["event"].as_str(), last["exit_code"].as_i64()), (Some("summary"), Some(2)), "{last}");
    let xml = std::fs::read_to_string(&junit).expect("the JUnit report");
    junit_cases(&xml);
    assert!(xml.contains("<failure message=\"preflight: the target v1.27.0 is older"), "{xml}");
    for host in HOSTS {
        assert_eq!(demo.fake.upgrades(host), 0);
    }
}

#[test]
fn a_report_path_that_cannot_be_written_is_bad_input_before_any_host_is_touched() {
    let demo = Demo::new();
    for flag in ["--junit", "--summary-md"] {
        let out = demo.run(&[flag, "/nonexistent/x.xml"]);
        assert_eq!(out.code, 2, "an unwritable {flag} is bad input\n{out}");
        assert!(out.stderr.contains(&format!("{flag}: cannot write")), "{out}");
        assert!(out.stderr.contains("/nonexistent/x.xml") && out.stderr.contains("hint:"), "{out}");
        // Refused before the plan is even said: nothing that reads as a run, no host contacted.
        assert!(!out.stdout.contains("result:"), "{out}");
        assert!(demo.fake.calls().is_empty(), "no host is touched: {:?}", demo.fake.calls());
    }
    for host in HOSTS {
        assert_eq!(demo.fake.upgrades(host), 0);
    }
}

#[test]
fn a_run_refused_while_its_inputs_are_read_still_writes_its_reports_saying_why() {
    let demo = Demo::new();
    let (junit, markdown) = (demo.path("report.xml"), demo.path("summary.md"));
    let out = demo.run(&[
        "--junit",
        junit.to_str().expect("path"),
        "--summary-md",
        markdown.to_str().expect("path"),
        "-e",
        "@missing-vars.yml",
    ]);
    assert_eq!(out.code, 2, "a missing -e file is bad input\n{out}");
    let xml = std::fs::read_to_string(&junit).expect("the JUnit report of a refused run");
    junit_cases(&xml);
    assert!(xml.contains("<failure message=\"preflight: ") && xml.contains("missing-vars.yml"), "{xml}");
    let md = std::fs::read_to_string(&markdown).expect("the Markdown summary of a refused run");
    assert!(md.contains("FAILED") && md.contains("exit code 2"), "{md}");
    assert!(demo.fake.calls().is_empty(), "no host is touched: {:?}", demo.fake.calls());
}

/// Checks the XML is well formed enough for CI (one root, every tag closed in order, quoted attributes) and returns
/// the test cases as (suite, name).
fn junit_cases(xml: &str) -> Vec<(String, String)> {
    let body = xml.strip_prefix("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n").expect("XML declaration");
    let mut stack: Vec<String> = Vec::new();
    let mut cases = Vec::new();
    let mut roots = 0;
    let mut rest = body;
    while let Some(start) = rest.find('<') {
        let text_before = &rest[..start];
        assert!(!text_before.contains('>'), "stray markup: {text_before}");
        for (i, _) in text_before.match_indices('&') {
            let entity = &text_before[i..];
            assert!(
                ["&amp;", "&lt;", "&gt;", "&quot;", "&apos;"].iter().any(|e| entity.starts_with(e)),
                "a bare & in: {text_before}"
            );
        }
        let end = rest[start..].find('>').expect("unclosed tag") + start;
        let tag = &rest[start + 1..end];
        rest = &rest[end + 1..];
        if let Some(name) = tag.strip_prefix('/') {
            assert_eq!(stack.pop().as_deref(), Some(name), "closing tag out of order in\n{xml}");
            continue;
        }
        let self_closing = tag.ends_with('/');
        let tag = tag.trim_end_matches('/');
        let name = tag.split_whitespace().next().expect("tag name").to_string();
        assert_eq!(tag.matches('"').count() % 2, 0, "unbalanced quotes in <{tag}>");
        if stack.is_empty() {
            roots += 1;
        }
        if name == "testcase" {
            let suite = stack.last().cloned().unwrap_or_default();
            assert_eq!(suite, "testsuite", "a testcase outside a testsuite");
            let classname = attr(&format!("<{tag}>"), "testcase", "classname").expect("classname");
            let case = attr(&format!("<{tag}>"), "testcase", "name").expect("name");
            cases.push((classname.trim_start_matches("upgrade.").to_string(), case));
        }
        if !self_closing {
            stack.push(name);
        }
    }
    assert!(stack.is_empty(), "unclosed tags: {stack:?}");
    assert_eq!(roots, 1, "one root element");
    cases
}

/// The value of `attribute` on the first `<element ...>` in `xml`.
fn attr(xml: &str, element: &str, attribute: &str) -> Option<String> {
    let start = xml.find(&format!("<{element} "))?;
    let tag = &xml[start..start + xml[start..].find('>')?];
    let key = format!(" {attribute}=\"");
    let from = tag.find(&key)? + key.len();
    Some(tag[from..from + tag[from..].find('"')?].to_string())
}

/// A hook that never ends does not hold the run past the grace period: its command is killed, the host stops
/// there, and its node (cordoned by this run, not upgraded) is uncordoned again.
#[test]
fn a_hook_that_never_ends_is_cut_when_the_grace_period_is_over_and_its_node_uncordoned() {
    let demo = Demo::new();
    let pids = demo.path("pids");
    std::fs::create_dir_all(&pids).expect("pid dir");
    let hang = format!(
        "- name: a hook that never ends\n  shell: echo $$ > {}/{{{{ inventory_hostname }}}}; exec sleep 600\n",
        pids.display()
    );
    std::fs::write(demo.path("hooks/hang.yml"), hang).expect("write the hook");
    let child = demo.spawn(&["--grace-period", "3", "-e", "upgrade_node_pre_hook=hooks/hang.yml"]);
    let deadline = Instant::now() + Duration::from_secs(60);
    let hanging = loop {
        let found: Vec<String> = std::fs::read_dir(&pids)
            .expect("pid dir")
            .flatten()
            .filter(|e| e.metadata().is_ok_and(|m| m.len() > 0))
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        if !found.is_empty() {
            break found;
        }
        assert!(Instant::now() < deadline, "no node reached its pre hook within 60 s; calls: {:?}", demo.fake.calls());
        std::thread::sleep(Duration::from_millis(50));
    };
    std::thread::sleep(Duration::from_millis(300));
    let interrupted = Instant::now();
    child.signal(libc::SIGINT);
    // 3 s of grace, then the uncordon: far from the hook's 600 s (a bound, not a benchmark).
    let out = child.finish_within(Duration::from_secs(30));
    let took = interrupted.elapsed();
    let described = out.to_string();
    assert!(took < Duration::from_secs(30), "still running {took:?} after SIGINT (killed)\n{described}");
    assert_eq!(out.code, 130, "an interrupted run exits 130\n{described}");
    for node in &hanging {
        assert!(!demo.fake.is_cordoned(node), "{node} uncordoned after its hook was cut\n{described}");
        assert_eq!(demo.fake.upgrades(node), 0, "{node} was not upgraded\n{described}");
        let gone = crate::support::process_ends_within(&pids.join(node), Duration::from_secs(5));
        assert!(gone, "the hook's command of {node} still runs\n{described}");
    }
    for node in NODES {
        assert!(!(demo.fake.is_cordoned(node) && demo.fake.upgrades(node) == 0), "{node} left cordoned\n{described}");
    }
}

/// A hook that prints 200 MB: the orchestrator keeps the first and last part of it (saying how much it dropped) in
/// the events, the JSON stream and the host log, and its own memory stays bounded. A correctness bound read from
/// the kernel's accounting of the process (its VmHWM, sampled until it exits), not a timing benchmark. Not wait4's
/// ru_maxrss: that counts the child from its fork, when it still maps the test binary's own memory (over 100 MB by
/// the end of a whole suite), so it measured the test harness, not the orchestrator.
#[test]
fn a_hook_printing_200_mb_keeps_the_orchestrator_under_100_mb() {
    use std::io::Read;
    let demo = Demo::new();
    let hook = "- name: print 200 MB\n  shell: head -c 200000000 /dev/zero | tr '\\0' x\n  \
                when: inventory_hostname == 'node-1'\n";
    std::fs::write(demo.path("hooks/big.yml"), hook).expect("write the hook");
    let mut child = demo.spawn(&["--output", "json", "-e", "upgrade_node_pre_hook=hooks/big.yml"]);
    let pid = libc::pid_t::try_from(child.id()).expect("pid");
    let reader = |mut pipe: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut text = String::new();
            let _ = pipe.read_to_string(&mut text);
            text
        })
    };
    // The peak of the orchestrator after its exec (VmHWM belongs to the address space exec made), sampled until the
    // process is gone; it only grows, so the last sample is the peak within one sampling interval.
    let peak = std::thread::spawn(move || {
        let mut peak_kb = 0u64;
        while let Ok(status) = std::fs::read_to_string(format!("/proc/{pid}/status")) {
            // Between fork and exec the child is still the test binary: not the orchestrator yet.
            let exe = std::fs::read_link(format!("/proc/{pid}/exe")).unwrap_or_default();
            if !exe.to_string_lossy().contains("upgrade") {
                std::thread::sleep(Duration::from_millis(5));
                continue;
            }
            let hwm = status
                .lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok());
            match hwm {
                Some(kb) => peak_kb = peak_kb.max(kb),
                None => break, // a zombie: the process has ended
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        peak_kb
    });
    let stdout = reader(Box::new(child.stdout.take().expect("stdout")));
    let stderr = reader(Box::new(child.stderr.take().expect("stderr")));
    let mut status = 0;
    // SAFETY: a zeroed rusage is a valid value for wait4 to fill in.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: waits for our own child; status and usage point to live locals.
    let waited = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    assert_eq!(waited, pid, "wait4");
    let (stdout, stderr) = (stdout.join().expect("stdout"), stderr.join().expect("stderr"));
    let peak_kb = peak.join().expect("the sampler");
    let described = format!(
        "exit status {status}\n--- stderr\n{stderr}\n--- stdout (first 3000 bytes)\n{}",
        &stdout[..stdout.len().min(3000)]
    );
    assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0, "the run succeeds\n{described}");
    let peak_mb = peak_kb / 1024;
    assert!(peak_kb > 0, "the orchestrator's memory was sampled");
    assert!(peak_mb < 100, "peak RSS {peak_mb} MB\n{described}");
    assert!(stdout.len() < 20_000_000, "the JSON stream is bounded too: {} bytes", stdout.len());
    let hook_line = stdout
        .lines()
        .find(|l| {
            l.contains("\"event\":\"task-finished\"") && l.contains("print 200 MB") && l.contains("\"host\":\"node-1\"")
        })
        .unwrap_or_else(|| panic!("no task-finished event for the hook\n{described}"));
    let shown = &hook_line[..hook_line.len().min(600)];
    assert!(hook_line.contains("bytes of output dropped"), "the event says what was dropped: {shown}");
    assert!(hook_line.contains("xxxxxxxx"), "the event keeps the output's start and end");
    let log = std::fs::read_to_string(demo.path(".upgrade-state/logs/node-1.log")).expect("host log");
    assert!(log.contains("bytes of output dropped"), "the host log keeps the bounded output");
    drop(child);
}

/// The values of `upgrade_secret_vars` show nowhere: not in the JSON events, the host logs, the journal, the human
/// output nor the summary's fix command, though the token sits inside `upgrade_kubectl`. With `upgrade_no_log`, the
/// built-in steps' results are censored as no_log does.
#[test]
fn secret_variables_are_masked_in_every_output_and_upgrade_no_log_censors_the_builtin_steps() {
    const TOKEN: &str = "tok-9f8e7d6c5b4a";
    let demo = Demo::new();
    // node-3 was cordoned before the run: the summary lists it with the command that uncordons it.
    demo.fake.set_cue("node-3", "unschedulable", "true");
    std::fs::write(
        demo.path("hooks/show.yml"),
        "- name: a hook that prints the token\n  shell: echo \"token is {{ demo_token }}\"\n",
    )
    .expect("hook");
    let extra = serde_json::json!({
        "demo_token": TOKEN,
        "upgrade_secret_vars": ["demo_token"],
        "upgrade_kubectl": "DEMO_TOKEN={{ demo_token }} {{ demo_fake_cluster }}/kubectl {{ demo_fake }}",
        "upgrade_node_post_hook": "hooks/show.yml",
        "upgrade_no_log": true,
    })
    .to_string();
    let out = demo.run(&["--output", "json", "-e", &extra]);
    let described = out.to_string();
    assert_eq!(out.code, 0, "{described}");
    let stdout = out.stdout.clone();
    assert!(stdout.contains("token is ********"), "the hook's output is masked, not dropped\n{described}");
    let fix = stdout
        .lines()
        .find(|l| l.contains("\"event\":\"summary\""))
        .and_then(|l| l.split("\"fix\":\"").nth(1))
        .unwrap_or_else(|| panic!("no fix command in the summary\n{described}"));
    assert!(fix.starts_with("DEMO_TOKEN=******** "), "{fix}");
    let cordon = stdout
        .lines()
        .find(|l| l.contains("\"event\":\"task-finished\"") && l.contains("\"task\":\"cordon node-1\""))
        .unwrap_or_else(|| panic!("no cordon task\n{described}"));
    assert!(cordon.contains("\"censored\":"), "upgrade_no_log censors the built-in steps: {cordon}");
    let mut everything = format!("{stdout}{}", out.stderr.clone());
    for entry in std::fs::read_dir(demo.path(".upgrade-state/logs")).expect("logs").flatten() {
        everything.push_str(&std::fs::read_to_string(entry.path()).unwrap_or_default());
    }
    everything.push_str(&std::fs::read_to_string(demo.path(".upgrade-state/journal.jsonl")).expect("journal"));

    // Again in text mode: nothing left to upgrade, the summary still names node-3 with its fix command.
    let again = demo.run(&["-e", &extra]);
    let human = again.stdout.clone();
    assert!(human.contains("run `DEMO_TOKEN=******** "), "{again}");
    everything.push_str(&human);
    everything.push_str(&again.stderr.clone());
    if let Some(at) = everything.find(TOKEN) {
        let around = &everything[at.saturating_sub(300)..(at + 100).min(everything.len())];
        panic!("the token shows: ...{around}...");
    }
}

#[test]
fn a_run_after_one_that_finished_says_so_and_does_not_claim_to_resume_it() {
    let demo = Demo::new();
    let first = demo.run(&[]);
    assert_eq!(first.code, 0, "{first}");
    assert!(!first.stdout.contains("resuming"), "{first}");
    let second = demo.run(&[]);
    assert_eq!(second.code, 0, "{second}");
    assert!(second.stdout.contains("the earlier run from this state directory finished with success at "), "{second}");
    assert!(second.stdout.contains("this run starts afresh (not a resume)"), "{second}");
    assert!(!second.stdout.contains("(resuming an earlier run)"), "{second}");
    let record = format!("record: state directory {}", demo.path(".upgrade-state").canonicalize().unwrap().display());
    assert_eq!(second.stdout.matches(&record).count(), 2, "at the start and in the summary: {second}");
}

#[test]
fn the_demo_directory_as_inventory_reads_its_hosts_and_passes_over_its_script_and_hook_files() {
    let demo = Demo::new();
    let dir = demo.path("").display().to_string();
    let plan = crate::support::Scenario::in_dir(demo.dir.path()).args(["--plan", "--inventory", &dir]).run();
    assert_eq!(plan.code, 0, "{plan}");
    let plan = plan.stderr_has("bin/etcdctl in the inventory directory: an executable, which Ansible would run as");
    let plan = plan.stderr_has("hooks/node_pre.yml in the inventory directory: YAML that is not a mapping");
    drop(plan.stdout_has("nodes: 6 host(s) in 2 batch(es)"));
}

/// On a terminal, a step that waits is seen waiting: its host's line says what it waits for, and the time on it
/// counts up from the step's own start while nothing else happens (it stood at 0s during a hung drain). The demo runs
/// in a real pseudo-terminal (util-linux `script`), 160 columns wide.
#[test]
fn on_a_terminal_a_hung_drain_shows_what_it_waits_for_and_its_time_moving() {
    let demo = Demo::new();
    demo.fake.set_cue("node-2", "drain_hang", "4");
    let typescript = demo.path("typescript");
    let command = demo.scenario(&[]).command();
    let line = std::iter::once(command.get_program())
        .chain(command.get_args())
        .map(|a| format!("'{}'", a.to_string_lossy().replace('\'', "'\\''")))
        .collect::<Vec<_>>()
        .join(" ");
    let status = std::process::Command::new("script")
        .args(["-q", "-e", "-f", "-c"])
        .arg(format!("stty cols 160 rows 45; {line}"))
        .arg(&typescript)
        .current_dir(demo.dir.path())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .status()
        .expect("run script(1)");
    let screen = String::from_utf8_lossy(&std::fs::read(&typescript).expect("the typescript")).into_owned();
    assert!(status.success(), "the run under a terminal failed:\n{screen}");
    let waiting = "[node-2] drain: waiting for its pods to be evicted, since ";
    assert!(screen.contains(waiting), "the host line says what the drain waits for:\n{screen}");
    let moved = ["(2s)", "(3s)"]
        .iter()
        .any(|t| screen.split(waiting).skip(1).any(|after| after[..40.min(after.len())].contains(t)));
    assert!(moved, "the drain's time counts up while it hangs:\n{screen}");
}
