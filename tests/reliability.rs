//! Reliability under faults (issue 9, part A): runs started at the same instant, stale locks whose pid lives again,
//! a read-only or full state filesystem, signals during preflight, a stdout nobody reads, and the cluster that
//! cannot be read at the end. Each test drives the real binary on a private copy of the demo cluster.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::support::demo::{Demo, NODES, lock_is_free};
use crate::support::{Running, signal};

/// A bind mount over a directory of the test (read-only, or a small tmpfs), undone on drop. Needs root, as the test
/// machines and CI run; the mount is private to the test's own temp dir, so tests stay parallel-safe.
struct Mount {
    path: PathBuf,
}

impl Mount {
    fn read_only(path: &Path) -> Mount {
        mount(&["--bind", path_str(path), path_str(path)]);
        let guard = Mount { path: path.to_path_buf() };
        mount(&["-o", "remount,ro,bind", path_str(path)]);
        guard
    }

    fn tmpfs(path: &Path, size: &str) -> Mount {
        mount(&["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs", path_str(path)]);
        Mount { path: path.to_path_buf() }
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.path).status();
    }
}

fn path_str(path: &Path) -> &str {
    path.to_str().expect("a UTF-8 temp path")
}

fn mount(args: &[&str]) {
    let out = Command::new("mount").args(args).output().expect("run mount");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "mount {args:?} failed (these tests need root, as CI has): {stderr}");
}

/// A run that a failing test must not leave behind (blocked on its stdout, or in a drain that never ends).
struct KillOnDrop(Running);

impl std::ops::Deref for KillOnDrop {
    type Target = Running;
    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

impl std::ops::DerefMut for KillOnDrop {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.0
    }
}

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Whether a process has exited, without blocking.
fn exited(child: &mut std::process::Child) -> Option<std::process::ExitStatus> {
    child.try_wait().expect("try_wait")
}

fn wait_until(what: &str, limit: Duration, mut ok: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !ok() {
        assert!(Instant::now() < deadline, "{what}: not within {limit:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn fifty_runs_started_at_the_same_instant_let_exactly_one_through() {
    let demo = Demo::new();
    // The winner stays in node-1's drain until it is interrupted, so it holds the lock while the others try.
    demo.fake.set_cue("node-1", "drain_hang", "forever");
    // A lock left by a killed run is there, so every run also races to take over a stale lock.
    std::fs::create_dir_all(demo.path(".upgrade-state")).expect("state dir");
    std::fs::write(demo.path(".upgrade-state/lock"), r#"{"pid": 4000000000, "started": "2026-11-23T09:00:00Z"}"#)
        .expect("a stale lock");
    // All 50 wait on a FIFO and start together when it is opened for writing: a real start at the same instant.
    let barrier = demo.path("start-together");
    let made = Command::new("mkfifo").arg(&barrier).status().expect("mkfifo");
    assert!(made.success());
    let mut runs: Vec<std::process::Child> = (0..50)
        .map(|_| {
            let upgrade = demo.scenario(&["--grace-period", "0"]).command();
            let mut command = Command::new("sh");
            command
                .arg("-c")
                .arg(format!("read _ < {}; exec \"$0\" \"$@\"", barrier.display()))
                .arg(upgrade.get_program())
                .args(upgrade.get_args())
                .current_dir(demo.path(""));
            command.stdout(Stdio::null()).stderr(Stdio::piped());
            command.spawn().expect("start upgrade")
        })
        .collect();
    std::thread::sleep(Duration::from_millis(500));
    // One line per run; the write end stays open until the end so that a run slow to reach the FIFO still gets its.
    let mut go = std::fs::OpenOptions::new().write(true).open(&barrier).expect("open the barrier");
    std::io::Write::write_all(&mut go, &[b'\n'; 50]).expect("start them");

    // Losers exit at once; the winner gets through preflight, the backup and the masters before node-1's drain, so
    // once that drain started and nobody exited for 2 s, the runs still going are the ones that took the lock.
    let mut refused = 0;
    let mut quiet_since = Instant::now();
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let mut i = 0;
        while i < runs.len() {
            if let Some(status) = exited(&mut runs[i]) {
                let mut run = runs.swap_remove(i);
                let mut stderr = String::new();
                run.stderr.take().expect("stderr").read_to_string(&mut stderr).expect("read stderr");
                let _ = run.wait(); // already reaped by try_wait; says so to the reader (and to clippy)
                assert_eq!(status.code(), Some(2), "a run that did not get the lock is refused with 2: {stderr}");
                assert!(stderr.contains("another upgrade is running on this cluster (pid "), "{stderr}");
                refused += 1;
                quiet_since = Instant::now();
            } else {
                i += 1;
            }
        }
        let draining = demo.fake.calls().iter().any(|c| c.node == "node-1" && c.action == "drain");
        if runs.is_empty() || (draining && quiet_since.elapsed() > Duration::from_secs(2)) {
            break;
        }
        assert!(Instant::now() < deadline, "the runs did not settle within 120 s ({refused} refused)");
        std::thread::sleep(Duration::from_millis(20));
    }
    let still_running = runs;
    let winners = still_running.len();
    for run in &still_running {
        signal(run, libc::SIGINT);
    }
    for run in still_running {
        let out = run.wait_with_output().expect("wait for the winner");
        assert_eq!(out.status.code(), Some(130), "stderr: {}", String::from_utf8_lossy(&out.stderr));
    }
    assert_eq!((winners, refused), (1, 49), "exactly one run takes the lock");
    let drains = demo.fake.calls().iter().filter(|c| c.node == "node-1" && c.action == "drain").count();
    assert_eq!(drains, 1, "node-1 was drained by one run only");
    assert!(lock_is_free(&demo.path(".upgrade-state")), "the lock is let go at the end");
}

#[test]
fn a_lock_naming_a_live_but_unrelated_pid_is_taken_over() {
    // In a container the run is pid 1: after a kill -9 (or an OOM kill) the lock names pid 1, alive again as the
    // next run's own container. Nothing holds the lock, so it is taken over. The test's own pid stands in for it.
    for pid in [1, std::process::id()] {
        let demo = Demo::new();
        std::fs::create_dir_all(demo.path(".upgrade-state")).expect("state dir");
        let holder = format!(r#"{{"pid": {pid}, "started": "2026-11-23T09:00:00Z"}}"#);
        std::fs::write(demo.path(".upgrade-state/lock"), holder).expect("write a stale lock");
        let out = demo.run(&["--phase", "preflight"]);
        assert_eq!(out.code, 0, "the stale lock of pid {pid} is taken over\n{out}");
    }
}

#[test]
fn a_read_only_state_directory_refuses_the_start_with_exit_2_and_touches_nothing() {
    let demo = Demo::new();
    let state = demo.path(".upgrade-state");
    std::fs::create_dir_all(&state).expect("state dir");
    let _read_only = Mount::read_only(&state);
    let out = demo.run(&[]);
    let stderr = out.stderr.clone();
    assert_eq!(out.code, 2, "a refused start\n{out}");
    assert!(stderr.contains(&state.display().to_string()) && stderr.contains("Read-only file system"), "{stderr}");
    assert!(stderr.contains("--state-dir"), "says what to do: {stderr}");
    assert!(demo.fake.calls().is_empty(), "nothing was touched: {:?}", demo.fake.calls());
}

/// A kubectl that takes 3 s over the first `get nodes` (preflight's read of the cluster) and says when it starts it.
fn slow_first_cluster_read(demo: &Demo) -> String {
    let script = demo.path("slow-kubectl");
    let marker = demo.path("preflight-reading");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\ncase \" $* \" in *\" get nodes \"*) [ -e {m} ] || {{ touch {m}; sleep 3; }} ;; esac\nexec \"$@\"\n",
            m = marker.display()
        ),
    )
    .expect("write slow-kubectl");
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).expect("chmod");
    format!(r#"{{"upgrade_kubectl": "{} {{{{ demo_fake_cluster }}}}/kubectl {{{{ demo_fake }}}}"}}"#, script.display())
}

#[test]
fn a_sigterm_during_preflight_starts_no_later_phase() {
    let demo = Demo::new();
    let kubectl = slow_first_cluster_read(&demo);
    let child = demo.spawn(&["-e", &kubectl]);
    wait_until("preflight reads the cluster", Duration::from_secs(30), || demo.path("preflight-reading").exists());
    child.signal(libc::SIGTERM);
    let out = child.finish();
    let stdout = out.stdout.clone();
    assert_eq!(out.code, 130, "{out}");
    assert!(!stdout.contains("== etcd-backup"), "the etcd backup did not start\n{out}");
    assert!(!demo.path(".state/etcd-backups").exists(), "no snapshot was taken\n{out}");
    let touched = calls_that_touch(&demo);
    assert!(touched.is_empty(), "no node was touched: {touched:?}\n{out}");
    assert!(stdout.contains("preflight's remaining checks were not run"), "says so\n{out}");
    assert!(stdout.contains("result: interrupted"), "{out}");
}

/// A kubectl that never answers a call whose arguments contain `call` while `<demo>/stuck` exists (an API server
/// that accepts the request and never answers), and says when it got there (`<demo>/hanging`).
fn kubectl_hanging_on(demo: &Demo, call: &str) -> String {
    let script = demo.path("hanging-kubectl");
    let (marker, stuck) = (demo.path("hanging"), demo.path("stuck"));
    std::fs::write(&stuck, "").expect("touch stuck");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\ncase \" $* \" in *\" {call} \"*) touch {m}; while [ -e {s} ]; do sleep 0.2; done ;; esac\n\
             exec \"$@\"\n",
            m = marker.display(),
            s = stuck.display()
        ),
    )
    .expect("write hanging-kubectl");
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).expect("chmod");
    format!(r#"{{"upgrade_kubectl": "{} {{{{ demo_fake_cluster }}}}/kubectl {{{{ demo_fake }}}}"}}"#, script.display())
}

/// N9: a cluster call that hangs in preflight (the node list, the lock's create) obeys SIGTERM and the grace period
/// like any step: past the grace period it is cut, the run exits 130 with nothing touched.
fn a_hung_preflight_call_is_cut_at_the_end_of_the_grace_period(call: &str) {
    let demo = Demo::new();
    let kubectl = kubectl_hanging_on(&demo, call);
    let mut child = demo.spawn(&["--grace-period", "3", "-e", &kubectl]);
    wait_until("the cluster call hangs", Duration::from_secs(60), || demo.path("hanging").exists());
    child.signal(libc::SIGTERM);
    let signalled = Instant::now();
    // The call stays hung until the test removes `stuck`: the run must end by itself, the call cut.
    let deadline = signalled + Duration::from_secs(60);
    while child.try_wait().expect("poll").is_none() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    let ended_by_itself = child.try_wait().expect("poll").is_some();
    let elapsed = signalled.elapsed();
    let _ = std::fs::remove_file(demo.path("stuck"));
    let out = child.finish_within(Duration::from_secs(60));
    assert!(ended_by_itself, "the run ended while the call was still hung: it was cut\n{out}");
    // A lower bound only (a loaded machine makes it later, never earlier): the grace period is given in full.
    assert!(elapsed >= Duration::from_secs(3), "not before the grace period: {elapsed:?}\n{out}");
    assert_eq!(out.code, 130, "{out}");
    let touched = calls_that_touch(&demo);
    assert!(touched.is_empty(), "no node was touched: {touched:?}\n{out}");
    assert!(!demo.path(".state/etcd-backups").exists(), "no snapshot was taken\n{out}");
    assert!(out.output().contains("grace period"), "says why\n{out}");
}

#[test]
fn a_node_list_that_never_answers_in_preflight_is_cut_by_the_grace_period() {
    a_hung_preflight_call_is_cut_at_the_end_of_the_grace_period("get nodes -o json");
}

#[test]
fn a_lock_create_that_never_answers_is_cut_by_the_grace_period() {
    a_hung_preflight_call_is_cut_at_the_end_of_the_grace_period("create configmap");
}

/// Fills a file system: writes to `path` until the kernel says it is full (ENOSPC).
fn fill(path: &Path) {
    use std::io::Write;
    let mut file = std::fs::File::create(path).expect("create the filler");
    let chunk = vec![b'x'; 64 * 1024];
    loop {
        match file.write_all(&chunk) {
            Ok(()) => {}
            Err(e) if e.raw_os_error() == Some(libc::ENOSPC) => break,
            Err(e) => panic!("filling {}: {e}", path.display()),
        }
    }
    let _ = file.sync_all();
}

#[test]
fn a_state_filesystem_that_fills_up_mid_run_stops_new_hosts_and_fails_the_run() {
    let demo = Demo::new();
    let state = demo.path(".upgrade-state");
    std::fs::create_dir_all(&state).expect("state dir");
    // A real full file system: the state directory is a small tmpfs of its own, filled while node-1 drains, so the
    // journal and the host logs get ENOSPC from the kernel. (RLIMIT_FSIZE would give EFBIG on any file the run or
    // its commands write; a tmpfs fills only the state directory.)
    let _tmpfs = Mount::tmpfs(&state, "4m");
    demo.fake.set_cue("node-1", "drain_hang", "2");
    let child = demo.spawn(&[]);
    demo.wait_for_call("node-1", "drain");
    fill(&state.join("filler"));
    let out = child.finish();
    let stdout = out.stdout.clone();
    assert_eq!(out.code, 1, "a run whose journal is incomplete fails\n{out}");
    assert!(!stdout.contains("result: success"), "{out}");
    assert!(stdout.contains("No space left on device"), "says why\n{out}");
    assert!(stdout.contains("no new host starts"), "says what happens\n{out}");
    for what in ["cannot write the journal", "cannot write the host log"] {
        assert!(stdout.matches(what).count() <= 2, "`{what}` is said once (and in the summary)\n{out}");
    }
    assert!(stdout.contains("state directory: cannot write the "), "the summary says it\n{out}");
    // The batch in flight finished; the next one never started; nothing is left cordoned.
    for node in ["node-1", "node-2", "node-3"] {
        assert_eq!(demo.fake.upgrades(node), 1, "{node} in flight finished\n{out}");
    }
    for node in ["node-4", "node-5", "node-6"] {
        assert!(!demo.fake.calls().iter().any(|c| c.node == node), "{node} was not started\n{out}");
    }
    for node in NODES {
        assert!(!demo.fake.is_cordoned(node), "{node} is not left cordoned\n{out}");
    }

    // With space again, the same command finishes the upgrade, each node once.
    std::fs::remove_file(state.join("filler")).expect("free the space");
    let rerun = demo.run(&[]);
    assert_eq!(rerun.code, 0, "{rerun}");
    for node in NODES {
        assert_eq!(demo.fake.upgrades(node), 1, "{node} upgraded exactly once\n{rerun}");
        assert!(!demo.fake.is_cordoned(node), "{node}\n{rerun}");
    }
}

#[test]
fn a_preflight_whose_api_server_goes_away_after_the_first_question_waits_for_it_and_reads_the_cluster() {
    let demo = Demo::new();
    // As when a re-run starts while the kubeadm upgrade of a dead run goes on on the only master: the API server
    // answered the run's first question (may the credentials do what the run does), then restarts; its first two
    // `get nodes` are refused as kubectl says it.
    let count = demo.path("get-nodes-calls");
    let script = demo.path("restarting-kubectl");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\ncase \" $* \" in *\" get nodes -o json \"*) echo >>{count}; if [ \"$(wc -l <{count})\" -le 2 ]; then \
             echo 'The connection to the server 10.0.0.1:6443 was refused - did you specify the right host or port?' >&2; \
             exit 1; fi ;; esac\nexec \"$@\"\n",
            count = count.display()
        ),
    )
    .expect("write restarting-kubectl");
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).expect("chmod");
    let vars = format!(
        r#"{{"upgrade_kubectl": "{} {{{{ demo_fake_cluster }}}}/kubectl {{{{ demo_fake }}}}"}}"#,
        script.display()
    );

    let out = demo.run(&["--phase", "preflight", "--output", "json", "-e", &vars]);
    assert_eq!(out.code, 0, "the third read answers and preflight passes\n{out}");
    let calls = std::fs::read_to_string(&count).expect("the reads were counted").lines().count();
    assert!(calls >= 3, "the refused read was asked again until it answered ({calls} reads)\n{out}");
    assert!(
        out.stdout.lines().any(|l| l.contains("\"notice\"")
            && l.contains("the API server does not answer (read the cluster's nodes")
            && l.contains("10.0.0.1:6443 was refused")),
        "the wait is said, with kubectl's words\n{out}"
    );
}

#[test]
fn when_the_cluster_cannot_be_read_at_the_end_the_summary_lists_the_nodes_the_hosts_left_cordoned() {
    let demo = Demo::new();
    // The cluster API stops answering `get nodes` once node-1 is done (its post hook says so), while node-2 waits in
    // vain to become Ready: node-2 fails with its node cordoned, and the final read of the cluster fails. One node at
    // a time: with node-3 in node-2's batch, the API going away would also fail node-3's wait (the poller reads the
    // list when several nodes wait), and which of them was still waiting would be a race.
    let down = demo.path("cluster-down");
    std::fs::write(
        demo.path("hooks/node_post.yml"),
        format!(
            "- name: the cluster API goes away\n  command: touch {}\n  when: inventory_hostname == 'node-1'\n",
            down.display()
        ),
    )
    .expect("write the post hook");
    let script = demo.path("flaky-kubectl");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\ncase \" $* \" in *\" get nodes \"*) if [ -e {} ]; then echo 'Unable to connect to the server: \
             i/o timeout' >&2; exit 1; fi ;; esac\nexec \"$@\"\n",
            down.display()
        ),
    )
    .expect("write flaky-kubectl");
    std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755)).expect("chmod");
    // Validation between batches off: it would rightly hold node-2's batch while the API is away (and stop the run
    // after its timeout, node-2 untouched), and this test is about the final read after a node failed cordoned.
    let vars = format!(
        r#"{{"upgrade_kubectl": "{} {{{{ demo_fake_cluster }}}}/kubectl {{{{ demo_fake }}}}", "upgrade_node_ready_timeout": 3, "upgrade_validation_timeout": 0}}"#,
        script.display()
    );
    demo.fake.set_cue("node-2", "ready_fail", "");

    let out = demo.run(&["--output", "json", "--serial", "1", "-e", &vars]);
    assert_eq!(out.code, 1, "{out}");
    let summary: Value = out
        .stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|e| e["event"] == "summary")
        .unwrap_or_else(|| panic!("no summary\n{out}"));
    assert!(demo.fake.is_cordoned("node-2"), "the scenario: node-2 is left cordoned\n{out}");
    let cordoned: Vec<&str> =
        summary["left_cordoned"].as_array().expect("left_cordoned").iter().filter_map(|c| c["node"].as_str()).collect();
    assert_eq!(cordoned, ["node-2"], "as the hosts reported\n{summary}");
    assert!(summary["left_cordoned"][0]["fix"].as_str().is_some_and(|f| f.ends_with("uncordon node-2")), "{summary}");
    assert!(
        summary["cluster_read_error"].as_str().is_some_and(|e| e.contains("Unable to connect to the server")),
        "says the cluster could not be read\n{summary}"
    );
}

#[test]
fn a_stdout_nobody_reads_blocks_neither_the_run_nor_two_interrupts_and_loses_no_line() {
    let demo = Demo::new();
    // Each node's pre-drain hook prints 1 MB: its task-finished JSON line alone is far more than a pipe holds.
    std::fs::write(
        demo.path("hooks/node_pre_drain.yml"),
        "- name: a chatty hook\n  shell: yes 0123456789abcdef | head -c 1000000\n",
    )
    .expect("write the hook");
    // node-1 and node-3 are still in flight (in their mid hook) when the interrupts come.
    std::fs::write(demo.path("hooks/node_mid.yml"), "- name: a slow hook\n  command: sleep 3\n")
        .expect("write the hook");
    demo.fake.set_cue("node-2", "drain_hang", "forever");
    let mut child = KillOnDrop(demo.spawn(&["--output", "json"]));
    // Nobody reads stdout. The run still gets to node-2's drain, past three 1 MB lines.
    let reached = Instant::now() + Duration::from_secs(60);
    while !demo.fake.calls().iter().any(|c| c.node == "node-2" && c.action == "drain") {
        assert!(Instant::now() < reached, "the run froze behind its unread stdout: {:?}", demo.fake.calls());
        std::thread::sleep(Duration::from_millis(50));
    }
    child.signal(libc::SIGINT);
    std::thread::sleep(Duration::from_millis(300));
    child.signal(libc::SIGINT);
    // The second interrupt is handled while stdout is still unread: the journal gets its last line at once.
    let journal = demo.path(".upgrade-state/journal.jsonl");
    let sealed = || {
        std::fs::read_to_string(&journal)
            .is_ok_and(|j| j.lines().last().is_some_and(|l| l.contains(r#""status":"interrupted""#)))
    };
    // Signals that arrive before the listener runs again are one signal (tokio coalesces them, as the kernel does
    // for a pending signal): on a loaded machine two interrupts 300 ms apart can be a single one. An operator whose
    // second Ctrl-C was taken as the first presses it again; so does the test, once, if nothing was sealed.
    let pressed_again = Instant::now() + Duration::from_secs(3);
    while !sealed() && Instant::now() < pressed_again {
        std::thread::sleep(Duration::from_millis(50));
    }
    if !sealed() {
        child.signal(libc::SIGINT);
    }
    wait_until("the second interrupt is handled", Duration::from_secs(10), sealed);
    // The slow hooks of node-1 and node-3 end while the output waits for its reader: their hosts go no further
    // and nothing is recorded after the run's last line.
    std::thread::sleep(Duration::from_secs(4));
    let last = std::fs::read_to_string(&journal).expect("journal").lines().last().map(str::to_string);
    assert!(last.is_some_and(|l| l.contains(r#""status":"interrupted""#)), "still the journal's last line");
    assert!(exited(&mut child).is_none(), "it waits for its output to be read before exiting");

    // Now the reader comes back: everything is there, whole and in order, and the process exits.
    let mut stdout = child.stdout.take().expect("stdout");
    let reader = std::thread::spawn(move || {
        let mut bytes = Vec::new();
        stdout.read_to_end(&mut bytes).expect("read stdout");
        bytes
    });
    let deadline = Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(status) = exited(&mut child) {
            break status;
        }
        assert!(Instant::now() < deadline, "the process did not exit once its output was read");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(status.code(), Some(130));
    assert!(lock_is_free(&demo.path(".upgrade-state")), "the exit let the run lock go");
    let out = String::from_utf8_lossy(&reader.join().expect("reader")).into_owned();
    let events: Vec<Value> = out
        .lines()
        .enumerate()
        .map(|(i, l)| serde_json::from_str(l).unwrap_or_else(|e| panic!("line {} is not whole JSON ({e})", i + 1)))
        .collect();
    let kinds: Vec<&str> = events.iter().filter_map(|e| e["event"].as_str()).collect();
    assert_eq!(kinds.first(), Some(&"run-started"));
    assert_eq!(kinds.last(), Some(&"aborted"), "the stream ends as a second interrupt ends it");
    let chatty = events.iter().filter(|e| e["event"] == "task-finished" && e["task"] == "a chatty hook").count();
    assert_eq!(chatty, 3, "the three 1 MB lines of batch 1 are all there");
    let times: Vec<&str> = events.iter().filter_map(|e| e["time"].as_str()).collect();
    assert!(times.windows(2).all(|w| w[0] <= w[1]), "in the order they happened");
    // In the nodes phase: preflight runs per-host steps of its own (certificates, host-check) on node-2 before.
    let position = |kind: &str, host: &str| {
        events
            .iter()
            .position(|e| e["event"] == kind && e["host"] == host && e["phase"] == "nodes")
            .unwrap_or(usize::MAX)
    };
    assert!(position("host-started", "node-2") < position("step-started", "node-2"), "in order");
}

/// The fake cluster calls that change a node: reads (the node list, the permission questions, kured's DaemonSet)
/// touch nothing, and the cluster lock (a ConfigMap taken before the read and released at the end) is not a node.
fn calls_that_touch(demo: &Demo) -> Vec<crate::support::fake_cluster::Call> {
    demo.fake
        .calls()
        .into_iter()
        .filter(|c| !c.action.starts_with("get-") && !c.action.ends_with("-configmap"))
        .collect()
}
