//! The cluster lock as a lease (src/phase/cluster_lock.rs): two controllers (two state directories) over one fake
//! cluster, with the API latency and outages of one side injected by a kubectl wrapper in the test's directory, as
//! the fault report of 2026-11-24 reproduced N1 and N4. Local hosts (`ansible_connection: local`) keep a round to a
//! couple of seconds, so the races run 20 times each; the rest of the lock's tests (tests/cluster_lock.rs) run over
//! real sshd.

use std::path::{Path, PathBuf};
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
        std::fs::write(
            rig.path("hosts.yml"),
            format!(
                "all:\n  vars:\n    ansible_connection: local\n    upgrade_target_version: v1.29.1\n    \
                 upgrade_nodes_serial: 1\n{vars}    upgrade_node_ready_delay: 1\n    \
                 upgrade_control_plane_ready_delay: 1\n    upgrade_etcdctl: \"{d}/etcdctl\"\n    \
                 upgrade_etcd_endpoints: http://127.0.0.1:2379\n    upgrade_etcd_cacert: \"\"\n    \
                 upgrade_etcd_cert: \"\"\n    upgrade_etcd_key: \"\"\n    \
                 upgrade_etcd_backup_dir: \"{d}/backups/{{{{ inventory_hostname }}}}\"\n    \
                 upgrade_cluster_lock_ttl: {ttl}\n    upgrade_change_id: CHG-4711\n  children:\n    \
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
        std::fs::write(
            &path,
            format!("#!/bin/sh\n{before}\nexec {} \"$@\"\n", self.fake.kubectl_command()),
        )
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

    fn wait_for_call(&self, node: &str, action: &str) {
        let deadline = Instant::now() + Duration::from_secs(30);
        while !self.fake.calls().iter().any(|c| c.node == node && c.action == action) {
            assert!(Instant::now() < deadline, "no {action} of {node}: {:?}", self.fake.calls());
            std::thread::sleep(Duration::from_millis(20));
        }
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
    let started = Instant::now();
    let rig = Rig::new(4);
    for round in 0..20 {
        rig.reset();
        rig.foreign_lease(Duration::from_secs(3600), 4);
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
    }
    assert!(started.elapsed() < Duration::from_secs(120), "20 rounds took {:?}", started.elapsed());
}

/// N4: controller A cannot reach the API for longer than its lease (its kubectl calls hang); it is fenced (starts
/// nothing, stops at a safe point, exit 1 saying it lost the cluster lock) while B, started once A's lease is
/// stale, takes it over and finishes. No node is upgraded twice, A's late writes change nothing.
#[test]
fn a_controller_that_cannot_renew_is_fenced_while_another_takes_over() {
    let started = Instant::now();
    let rig = Rig::new(2);
    let down = rig.path("apidown");
    for round in 0..20 {
        rig.reset();
        let _ = std::fs::remove_file(&down);
        // Drains take a second: A is draining n1 when its API goes away.
        std::fs::write(rig.fake.state_dir().join("delay"), "1").unwrap();
        let a_kubectl = rig.kubectl("kubectl-a", &format!("while [ -e {} ]; do sleep 0.05; done", down.display()));
        let a = rig.controller("a", Some(&a_kubectl), &["--phase", "nodes"]).spawn();
        rig.wait_for_call("n1", "cordon");
        std::fs::write(&down, "").unwrap();
        // B starts once A's lease (2 s) is stale by the clock, plus the jitter of a round.
        std::thread::sleep(Duration::from_millis(2300 + 50 * (round % 5)));
        std::fs::write(rig.fake.state_dir().join("delay"), "0").unwrap();
        let b = rig.controller("b", None, &["--phase", "nodes"]).spawn();
        rig.wait_for_call("n2", "drain");
        std::fs::remove_file(&down).unwrap();
        let (a, b) = (finish(a), finish(b));
        let a = a.expect_code(1).stdout_has("lost the cluster lock kube-system/upgrade-lock");
        let b = b.expect_code(0).stdout_has("warning: taking over the cluster lock");
        assert_eq!(rig.upgrades(), [1, 1], "round {round}: every node upgraded once\n{a}\n{b}");
        let summary = a.stdout.lines().rev().find(|l| l.contains("stopped:")).unwrap_or_default().to_string();
        assert!(summary.contains("lost the cluster lock"), "round {round}: A says why it stopped: {a}");
    }
    assert!(started.elapsed() < Duration::from_secs(150), "20 rounds took {:?}", started.elapsed());
}
