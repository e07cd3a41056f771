//! The cluster lock as a lease (src/phase/cluster_lock.rs): two controllers (two state directories) over one fake
//! cluster, with the API latency and outages of one side injected by a kubectl wrapper in the test's directory, as
//! the fault report of 2026-11-24 reproduced N1 and N4. Local hosts (`ansible_connection: local`) keep a round to a
//! couple of seconds, so the races run 20 times each; the rest of the lock's tests (tests/cluster_lock.rs) run over
//! real sshd.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::Value;

use crate::support::fake_cluster::FakeCluster;
use crate::support::{Outcome, Running, Scenario};

const NODES: [&str; 2] = ["n1", "n2"];

/// One master already at the target and two nodes to upgrade (a nodes-only run: quick), a stand-in etcdctl.
struct Rig {
    dir: tempfile::TempDir,
    fake: FakeCluster,
}

impl Rig {
    fn new(ttl: u64) -> Rig {
        let dir = tempfile::Builder::new().prefix("upgrade-lease-").tempdir().expect("scratch dir");
        let fake = FakeCluster::at(&dir.path().join("cluster"));
        let rig = Rig { dir, fake };
        rig.reset();
        let etcdctl = Path::new(env!("CARGO_MANIFEST_DIR")).join("inventories/demo/bin/etcdctl");
        std::fs::copy(&etcdctl, rig.path("etcdctl")).expect("copy etcdctl");
        let mut vars = String::new();
        for (key, value) in rig.fake.command_vars() {
            vars.push_str(&format!("    {key}: {}\n", serde_json::to_string(&value).unwrap()));
        }
        let d = rig.dir.path().display();
        // The races here are timed against leases of a few seconds; the gate on removed APIs (its own tests in
        // tests/api_removals.rs) adds reads to preflight that a loaded machine stretches past them.
        std::fs::write(
            rig.path("hosts.yml"),
            format!(
                "all:\n  vars:\n    ansible_connection: local\n    upgrade_target_version: v1.29.1\n    \
                 upgrade_nodes_serial: 1\n{vars}    upgrade_node_ready_delay: 1\n    \
                 upgrade_control_plane_ready_delay: 1\n    upgrade_etcdctl: \"{d}/etcdctl\"\n    \
                 upgrade_etcd_endpoints: http://127.0.0.1:2379\n    upgrade_etcd_cacert: \"\"\n    \
                 upgrade_etcd_cert: \"\"\n    upgrade_etcd_key: \"\"\n    \
                 upgrade_etcd_backup_dir: \"{d}/backups/{{{{ inventory_hostname }}}}\"\n    \
                 upgrade_cluster_lock_ttl: {ttl}\n    upgrade_change_id: CHG-4711\n    upgrade_api_removals_check: false\n  children:\n    \
                 masters: {{hosts: {{m1: {{}}}}}}\n    etcd: {{hosts: {{m1: {{}}}}}}\n    \
                 nodes: {{hosts: {{n1: {{}}, n2: {{}}}}}}\n"
            ),
        )
        .expect("inventory");
        rig
    }

    fn path(&self, relative: &str) -> PathBuf {
        self.dir.path().join(relative)
    }

    /// A fresh cluster (the master at the target, the nodes not), no state directories.
    fn reset(&self) {
        let spec = "m1 v1.29.1 node-role.kubernetes.io/control-plane=\nn1 v1.28.5 -\nn2 v1.28.5 -\n";
        let out = std::process::Command::new(FakeCluster::script_dir().join("fake-cluster"))
            .args(["init", "--state"])
            .arg(self.fake.state_dir())
            .stdin(std::process::Stdio::piped())
            .spawn()
            .and_then(|mut child| {
                use std::io::Write;
                child.stdin.take().expect("stdin").write_all(spec.as_bytes())?;
                child.wait_with_output()
            })
            .expect("fake-cluster init");
        assert!(out.status.success(), "init: {}", String::from_utf8_lossy(&out.stderr));
        for state in ["a", "b"] {
            let _ = std::fs::remove_dir_all(self.path(state));
        }
    }

    /// A kubectl in front of the fake that first runs `before` (sh; `$*` is the kubectl command line).
    fn kubectl(&self, name: &str, before: &str) -> String {
        let path = self.path(name);
        std::fs::write(&path, format!("#!/bin/sh\n{before}\nexec {} \"$@\"\n", self.fake.kubectl_command()))
            .expect("wrapper");
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        path.display().to_string()
    }

    /// `upgrade` from state directory `state`, through `kubectl` (a wrapper's path) when given.
    fn controller(&self, state: &str, kubectl: Option<&str>, extra: &[&str]) -> Scenario {
        let mut scenario = Scenario::on_cluster(self.dir.path(), &self.path("hosts.yml"))
            .args(["--state-dir", &self.path(state).display().to_string()]);
        if let Some(kubectl) = kubectl {
            scenario = scenario.args(["-e", &serde_json::json!({ "upgrade_kubectl": kubectl }).to_string()]);
        }
        scenario.args(extra)
    }

    fn kubectl_out(&self, args: &[&str]) -> std::process::Output {
        self.fake.run("kubectl", args)
    }

    fn lease(&self) -> Option<Value> {
        let out = self.kubectl_out(&["-n", "kube-system", "get", "configmap", "upgrade-lock", "-o", "json"]);
        out.status.success().then(|| serde_json::from_slice(&out.stdout).expect("lease JSON"))
    }

    /// A lease another controller holds, renewed `age` ago with a lease of `lease` seconds (also the fields an
    /// earlier version of the tool wrote, so that version reads it the same).
    fn foreign_lease(&self, age: Duration, lease: u64) {
        let renewed = SystemTime::now() - age;
        let secs = renewed.duration_since(UNIX_EPOCH).unwrap().as_secs();
        let out = self.kubectl_out(&[
            "-n",
            "kube-system",
            "create",
            "configmap",
            "upgrade-lock",
            "--from-literal=holderIdentity=0123456789abcdef0123456789abcdef",
            &format!("--from-literal=leaseDurationSeconds={lease}"),
            "--from-literal=acquireTime=2026-11-23T09:00:00.000000Z",
            &format!("--from-literal=renewTime={}", micro_time(secs)),
            "--from-literal=leaderTransitions=3",
            "--from-literal=holder=ops@elsewhere",
            "--from-literal=where=/srv/other/.upgrade-state",
            "--from-literal=started=2026-11-23T09:00:00Z",
            "--from-literal=run=20261123T090000Z-77",
            &format!("--from-literal=renewed={secs}"),
        ]);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    }

    /// How many times each node was upgraded (`fake-node upgrade` that succeeded).
    fn upgrades(&self) -> Vec<u32> {
        NODES
            .iter()
            .map(|n| {
                std::fs::read_to_string(self.fake.state_dir().join("nodes").join(n).join("upgrades"))
                    .map(|s| s.trim().parse().unwrap_or(0))
                    .unwrap_or(0)
            })
            .collect()
    }

    /// Waits until the fake logged `action` on `node`, while `run` goes on (a run that ended fails the test with
    /// its output).
    fn wait_for_call(&self, node: &str, action: &str, mut run: Running) -> Running {
        let deadline = Instant::now() + Duration::from_secs(30);
        while !self.fake.calls().iter().any(|c| c.node == node && c.action == action) {
            if run.try_wait().expect("poll the run").is_some() {
                run.finish().fail(&format!("the run ended before the {action} of {node}"));
            }
            assert!(Instant::now() < deadline, "no {action} of {node}: {:?}", self.fake.calls());
            std::thread::sleep(Duration::from_millis(20));
        }
        run
    }
}

fn micro_time(secs: u64) -> String {
    // The fake stores text: a date the tool parses (days from the epoch, as time_format does).
    let days = secs / 86_400;
    let rem = secs % 86_400;
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.000000Z", rem / 3600, rem % 3600 / 60, rem % 60)
}

fn finish(run: Running) -> Outcome {
    run.finish_within(Duration::from_secs(60))
}

/// N1: two runs find the same stale lease and both try to take it over; their writes are slowed so that both read
/// it before either writes (and, for the earlier version, so that one's delete lands after the other's create, as
/// in the report). Exactly one drives the cluster, the other is refused naming it; no node is upgraded twice.
#[test]
fn two_runs_taking_over_one_stale_lease_at_once_never_both_drive_the_cluster() {
    // A long lease: this race is about the take-over, and the winner must not be fenced by a loaded machine.
    in_rounds(30, |rig, round| {
        rig.foreign_lease(Duration::from_secs(3600), 30);
        // Which side writes late alternates, with a jitter: both orders of the race, never the same timing.
        let (slow, fast) = if round % 2 == 0 { ("a", "b") } else { ("b", "a") };
        let late = format!("0.{}", 6 + round % 4);
        // The first write of each kind only: the take-over (or the earlier version's delete and create), not the
        // renewals, which would fence a run whose every write takes most of a fifth of its lease.
        let writes = |side: &str, delay: &str| {
            let seen = rig.path(&format!("wrote-{side}"));
            let _ = std::fs::remove_dir_all(&seen);
            std::fs::create_dir_all(&seen).unwrap();
            format!(
                "for w in replace delete create; do case \"$*\" in *\" $w \"*configmap*|*\" $w -f\"*) \
                 [ -e {s}/$w ] || {{ touch {s}/$w; sleep {delay}; }};; esac; done",
                s = seen.display()
            )
        };
        let slow_kubectl = rig.kubectl(&format!("kubectl-{slow}"), &writes(slow, &late));
        let fast_kubectl = rig.kubectl(&format!("kubectl-{fast}"), &writes(fast, "0.2"));
        let one = rig.controller(slow, Some(&slow_kubectl), &["--phase", "nodes"]).spawn();
        let two = rig.controller(fast, Some(&fast_kubectl), &["--phase", "nodes"]).spawn();
        let (one, two) = (finish(one), finish(two));
        let mut codes = [one.code, two.code];
        codes.sort_unstable();
        let refused = if one.code == 2 { &one } else { &two };
        assert!(
            codes == [0, 2] && refused.stderr.contains("another upgrade holds the cluster lock"),
            "round {round}: exactly one run drives the cluster, the other is refused\n{one}\n{two}"
        );
        assert_eq!(rig.upgrades(), [1, 1], "round {round}: every node upgraded once\n{one}\n{two}");
        let replaced = rig.fake.calls().iter().filter(|c| c.action == "replace-configmap").count();
        assert!(replaced >= 2, "round {round}: both tried the conditional take-over ({replaced} writes)");
        let lease = rig.lease().expect("the lease stays");
        assert_eq!(lease["data"]["holderIdentity"], "", "round {round}: released at the end: {lease}");
        assert_eq!(lease["data"]["leaderTransitions"], "4", "round {round}: one transition: {lease}");
    });
}

/// N4: controller A cannot reach the API for longer than its lease (its kubectl calls hang); it is fenced (starts
/// nothing, stops at a safe point, exit 1 saying it lost the cluster lock) while B, started once A's lease is
/// stale, takes it over and finishes. No node is upgraded twice, A's late writes change nothing.
#[test]
fn a_controller_that_cannot_renew_is_fenced_while_another_takes_over() {
    // A's lease is 12 s (it is the one fenced; 6 s were tried, and a machine loaded by other builds fenced A before
    // its outage, when one renewal through the scripted cluster took that long); B's 30 s, so a loaded machine never
    // fences B, which takes A's lease over when A's own 12 s have passed since its last renewal.
    in_rounds(12, |rig, round| {
        let down = rig.path("apidown");
        let _ = std::fs::remove_file(&down);
        // Drains take a second: A is draining n1 when its API goes away.
        std::fs::write(rig.fake.state_dir().join("delay"), "1").unwrap();
        let a_kubectl = rig.kubectl("kubectl-a", &format!("while [ -e {} ]; do sleep 0.1; done", down.display()));
        let a = rig.controller("a", Some(&a_kubectl), &["--phase", "nodes"]).spawn();
        let a = rig.wait_for_call("n1", "cordon", a);
        std::fs::write(&down, "").unwrap();
        // B starts once A's lease (12 s) is stale by the clock, plus the jitter of a round.
        std::thread::sleep(Duration::from_millis(12300 + 50 * (round % 5)));
        std::fs::write(rig.fake.state_dir().join("delay"), "0").unwrap();
        let b = rig.controller("b", None, &["--phase", "nodes", "-e", "upgrade_cluster_lock_ttl=30"]).spawn();
        let b = rig.wait_for_call("n2", "drain", b);
        std::fs::remove_file(&down).unwrap();
        let (a, b) = (finish(a), finish(b));
        let a = a.expect_code(1).stdout_has("lost the cluster lock kube-system/upgrade-lock");
        let b = b.expect_code(0).stdout_has("warning: taking over the cluster lock");
        assert_eq!(rig.upgrades(), [1, 1], "round {round}: every node upgraded once\n{a}\n{b}");
        let summary = a.stdout.lines().rev().find(|l| l.contains("stopped:")).unwrap_or_default().to_string();
        assert!(summary.contains("lost the cluster lock"), "round {round}: A says why it stopped: {a}");
    });
}

/// Runs `round` twice (`LEASE_ROUNDS` overrides; `scripts/chaos lease` runs 20), two at a time, each on a rig of its
/// own with a lease of `ttl` seconds. The races are timing-dependent: the two rounds take both orders of the race,
/// and the many rounds that find a rare interleaving are the chaos script's, off the suite's path.
/// Under nextest the race tests run one at a time (the `lease-races` test group, .config/nextest.toml), since many
/// controllers at once on a small machine slow every call past the leases; under `cargo test` the two may overlap,
/// four rigs in all, as many as one test ran before.
fn in_rounds(ttl: u64, round: impl Fn(&Rig, u64) + Sync) {
    let rounds: u64 = std::env::var("LEASE_ROUNDS").ok().and_then(|r| r.parse().ok()).unwrap_or(2);
    // A rig per round, at most four at a time.
    let rigs = rounds.clamp(1, 4);
    let next = std::sync::atomic::AtomicU64::new(0);
    std::thread::scope(|scope| {
        for _ in 0..rigs {
            scope.spawn(|| {
                let rig = Rig::new(ttl);
                let started = Instant::now();
                loop {
                    let n = next.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    if n >= rounds {
                        // Said, not asserted: how long the rounds took is the machine's load, not a property of
                        // the lease (speed is measured in benchmarks, never in tests).
                        eprintln!("lease rounds on this rig took {:?}", started.elapsed());
                        return;
                    }
                    rig.reset();
                    round(&rig, n);
                }
            });
        }
    });
}

/// N5: two controllers with the same user, host name and state-directory path but their own state directory contents
/// (two containers, two cloned VMs). Simulated with one path whose directory is swapped between the runs: A runs from
/// PATH; stopped (SIGSTOP), PATH is renamed away and a new, empty directory takes its place for B, then A's comes
/// back and A goes on (a run reads its built-in steps from its state directory, which on another machine stays
/// where it is). Same text, other controller id: B is refused while A's lease is live. (A mount namespace per controller, as the report did, needs root; the
/// rename gives the same two facts: one path string, two directory contents, two flocks.)
#[test]
fn a_controller_with_the_same_name_and_path_but_its_own_state_directory_does_not_take_a_live_lease() {
    // A lease long enough that A, stopped while its directory is swapped, is not fenced for the pause.
    let rig = Rig::new(60);
    std::fs::write(rig.fake.state_dir().join("delay"), "1").unwrap();
    let a = rig.controller("st", None, &["--phase", "nodes"]).spawn();
    let a = rig.wait_for_call("n1", "cordon", a);
    // A stands still while PATH holds B's directory: A reads its built-in steps from its own, as a controller on
    // another machine would. A and the commands it runs are stopped, and seen stopped, before the swap: a signal
    // sent is not yet a process stopped, and a step already running would read the swapped directory.
    let stopped = stop_process_tree(a.pid());
    std::fs::rename(rig.path("st"), rig.path("st-of-a")).unwrap();
    std::fs::create_dir(rig.path("st")).unwrap();
    let b = rig.controller("st", None, &["--phase", "nodes"]).run();
    std::fs::remove_dir_all(rig.path("st")).unwrap();
    std::fs::rename(rig.path("st-of-a"), rig.path("st")).unwrap();
    for pid in stopped {
        let _ = Command::new("kill").arg("-CONT").arg(pid.to_string()).status();
    }
    drop(
        b.expect_code(2)
            .stderr_has("another upgrade holds the cluster lock")
            .stderr_has(&rig.path("st").display().to_string()),
    );
    let a = finish(a).expect_code(0);
    drop(a);
    assert_eq!(rig.upgrades(), [1, 1], "every node upgraded once");
    // The same state directory, back: its own lease (released now, or left by a kill -9) is its own at once.
    let id = std::fs::read_to_string(rig.path("st/controller-id")).unwrap();
    let lease = rig.lease().unwrap();
    assert_eq!(lease["data"]["holderIdentity"], "", "released: {lease}");
    assert_eq!(lease["data"]["change_id"], "CHG-4711", "the change ticket is on the lease: {lease}");
    assert!(id.trim().len() == 32, "a random id: {id}");
}

/// Stops `root` and every process under it (SIGSTOP), and returns once each is seen stopped in /proc, parents first
/// so that none starts a new child meanwhile; returns their pids, to be continued.
fn stop_process_tree(root: u32) -> Vec<u32> {
    let mut stopped: Vec<u32> = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let unstopped: Vec<u32> = process_tree(root).into_iter().filter(|pid| !stopped.contains(pid)).collect();
        if unstopped.is_empty() {
            return stopped;
        }
        for pid in unstopped {
            let _ = Command::new("kill").arg("-STOP").arg(pid.to_string()).status();
            while process_state(pid).is_some_and(|state| !matches!(state, 'T' | 't' | 'Z' | 'X')) {
                assert!(Instant::now() < deadline, "process {pid} did not stop");
                std::thread::sleep(Duration::from_millis(5));
            }
            stopped.push(pid);
        }
    }
}

/// `root` and its descendants now.
fn process_tree(root: u32) -> Vec<u32> {
    let mut tree = vec![root];
    tree.extend(crate::support::sshd::descendants(root));
    tree
}

/// The state letter of a process (R, S, T, Z...), or None once it is gone.
fn process_state(pid: u32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rfind(')').and_then(|i| stat[i + 1..].split_whitespace().next()).and_then(|s| s.chars().next())
}

/// A run killed with -9 leaves its lease; the re-run from the same state directory takes it back at once (its
/// controller id), without waiting for the lease to go stale.
#[test]
fn a_rerun_from_the_same_state_directory_takes_its_own_lease_back_at_once() {
    let rig = Rig::new(300);
    std::fs::write(rig.fake.state_dir().join("delay"), "1").unwrap();
    let mut a = rig.wait_for_call("n1", "cordon", rig.controller("a", None, &["--phase", "nodes"]).spawn());
    a.kill().unwrap();
    let _ = a.wait();
    assert_ne!(rig.lease().unwrap()["data"]["holderIdentity"], "", "left held by the killed run");
    std::fs::write(rig.fake.state_dir().join("delay"), "0").unwrap();
    let again = rig.controller("a", None, &["--phase", "nodes"]).run().expect_code(0);
    drop(again.stdout_has("it is this controller's (this state directory's id)"));
    assert_eq!(rig.upgrades(), [1, 1]);
}

/// N11: `upgrade unlock` refuses a lease renewed within its lease (exit 2, naming the holder and how long ago it
/// renewed); `--force` releases it, says the risk, and the run that held it stops at its next renewal (exit 1).
#[test]
fn unlock_refuses_a_live_lease_and_force_releases_it_saying_the_risk() {
    // A lease long enough that a loaded machine never fences the run by itself: only --force stops it.
    let rig = Rig::new(20);
    std::fs::write(rig.fake.state_dir().join("delay"), "2").unwrap();
    let a = rig.wait_for_call("n1", "cordon", rig.controller("a", None, &["--phase", "nodes"]).spawn());
    let unlock = |extra: &[&str]| {
        Scenario::in_dir(rig.dir.path()).arg("unlock").inventory(rig.path("hosts.yml")).args(extra).run()
    };
    let refused = unlock(&["--yes"]).expect_code(2).stderr_has("within its 20s lease: its run may be alive");
    drop(refused.stdout_has("held by").stdout_has("renewed").stderr_has("--force"));
    assert_ne!(rig.lease().unwrap()["data"]["holderIdentity"], "", "left in place");
    let forced = unlock(&["--yes", "--force"]).expect_code(0).stderr_has("warning: --force");
    drop(forced.stderr_has("drives the cluster alongside it").stdout_has("released"));
    let a = finish(a).expect_code(1);
    drop(a.stdout_has("lost the cluster lock kube-system/upgrade-lock: it was released by someone else"));
    // Released and its holder gone: nothing to do.
    unlock(&["--yes"]).expect_code(0).stdout_has("nothing to release");
}

/// N14: `check` and `--plan` refuse an `upgrade_cluster_lock_ttl` the run would refuse, at its line, exit 2.
#[test]
fn check_and_plan_refuse_a_bad_cluster_lock_ttl() {
    let rig = Rig::new(30);
    for bad in ["abc", "0", "-5"] {
        let e = format!("upgrade_cluster_lock_ttl={bad}");
        let runs: [(Option<&str>, Vec<&str>); 2] = [(Some("check"), vec!["-e", &e]), (None, vec!["--plan", "-e", &e])];
        for (command, args) in runs {
            let mut scenario = Scenario::in_dir(rig.dir.path());
            if let Some(command) = command {
                scenario = scenario.arg(command);
            }
            let out = scenario.inventory(rig.path("hosts.yml")).args(args).run().expect_code(2);
            drop(out.stderr_has("upgrade_cluster_lock_ttl"));
        }
    }
    assert!(rig.fake.calls().is_empty(), "nothing was touched");
}

/// N15: a run refused because another holds the lease writes JSON lines ending with a summary whose exit code is 2
/// and which names the holder (README, "JSON events").
#[test]
fn a_run_refused_by_a_held_lease_writes_a_json_summary_with_exit_code_2() {
    let rig = Rig::new(30);
    rig.foreign_lease(Duration::from_secs(1), 30);
    let out = rig.controller("a", None, &["--output", "json"]).run().expect_code(2);
    let last: Value =
        serde_json::from_str(out.stdout.lines().last().expect("JSON lines")).expect("the last line is JSON");
    assert_eq!(last["event"], "summary", "{last}");
    assert_eq!(last["exit_code"], 2, "{last}");
    assert!(last.to_string().contains("ops@elsewhere"), "names the holder: {last}");
    assert_eq!(last["change_id"], "CHG-4711", "{last}");
}
