//! Golden files: what the binary prints and records on fixed inputs, byte for byte, so that a refactoring that
//! changes the JSON events, the journal lines or the `--plan --output json` document fails here.
//!
//! Only what must vary from run to run is normalised: times, durations, run ids and backup stamps, temp paths, ports,
//! epoch seconds, etcd's random ids, the disk's free space and this checkout's path. Hosts of one batch run at the
//! same time, so their lines interleave differently each run: between two lines that belong to no host (phase,
//! batch, run events) the host lines are put in host order, each host's own order kept.
//!
//! `UPGRADE_BLESS=1 cargo test --test lib golden::` rewrites tests/golden/ from what the binary does now.

use std::path::Path;

use regex::Regex;

use crate::support::Scenario;
use crate::support::etcd::{TestEtcd, etcdctl_binary};
use crate::support::fake_cluster::FakeCluster;
use crate::support::sshd::TestSshd;

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Compares `actual` with tests/golden/`name`, or rewrites the file when `UPGRADE_BLESS` is set.
fn golden(name: &str, actual: &str) {
    let path = repo().join("tests/golden").join(name);
    if std::env::var_os("UPGRADE_BLESS").is_some() {
        std::fs::create_dir_all(path.parent().expect("golden dir")).expect("create tests/golden");
        std::fs::write(&path, actual).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
        return;
    }
    let expected = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("read {}: {e} (UPGRADE_BLESS=1 writes it)", path.display()));
    if expected == actual {
        return;
    }
    let kept = std::env::temp_dir().join(format!("golden-actual-{}-{name}", std::process::id()));
    let _ = std::fs::write(&kept, actual);
    let (mut want, mut got) = (expected.lines(), actual.lines());
    let mut line = 1;
    loop {
        match (want.next(), got.next()) {
            (Some(a), Some(b)) if a == b => line += 1,
            (a, b) => panic!(
                "{name} differs from the golden file at line {line}\n--- expected\n{}\n--- actual\n{}\n\
                 whole actual output: {} (diff it with {}; UPGRADE_BLESS=1 accepts it)",
                a.unwrap_or("<end>"),
                b.unwrap_or("<end>"),
                kept.display(),
                path.display()
            ),
        }
    }
}

/// What must vary from run to run, replaced by a name in angle brackets.
struct Normaliser {
    /// Literal texts (temp dirs, ports, this checkout) and what stands for them; the longest first.
    literals: Vec<(String, &'static str)>,
}

impl Normaliser {
    fn new(mut literals: Vec<(String, &'static str)>) -> Normaliser {
        literals.push((repo().display().to_string(), "<repo>"));
        literals.sort_by_key(|(text, _)| std::cmp::Reverse(text.len()));
        Normaliser { literals }
    }

    fn line(&self, line: &str) -> String {
        let mut line = line.to_string();
        for (text, name) in &self.literals {
            line = line.replace(text.as_str(), name);
        }
        // (pattern, replacement): run ids and backup stamps, wall-clock times, elapsed times, what etcd (its ids, and
        // its database size, which grows with the load of the machine) and the disk answer differently each time.
        let rules: &[(&str, &str)] = &[
            (r"\d{8}T\d{6}Z-\d+", "<run>"),
            // The cluster lock's holder: the state directory's random controller id.
            (r"\b[0-9a-f]{32}\b", "<controller>"),
            (r"\d{8}T\d{6}Z", "<stamp>"),
            (r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:?\d\d)?", "<time>"),
            (r"[A-Z][a-z]{2} \d\d?, \d{4} \d\d:\d\d UTC", "<date>"),
            (r"\b\d+:\d\d:\d\d\.\d+\b", "<delta>"),
            (r#""duration":[0-9.]+"#, r#""duration":<duration>"#),
            // The time left: from this run's own pace (no earlier run here, so the defaults corrected by it).
            // (also inside the cluster lock's progress record, a JSON string in a JSON line).
            (r#"(eta_seconds\\*":)\d+"#, "${1}<eta>"),
            // A node's cordoned window and its parts (drain, upgrade, restart, ready, other): times.
            (r#""(seconds|drain|upgrade|restart|ready|other)":[0-9.]+"#, r#""$1":<duration>"#),
            (r"\(\d+ ms\)", "(<ms>)"),
            (r"took = [0-9.]+[mµn]?s", "took = <took>"),
            (r#"(took\\?":)[0-9.]+"#, "${1}<took>"),
            (r#"((cluster_id|member_id|leader|hash|ID)\\?":)\d+"#, "${1}<id>"),
            (r#"(peerURLs\\?":\[\\?"http://127\.0\.0\.1:)\d+"#, "${1}<peer-port>"),
            (r#"((dbSize|dbSizeInUse|totalSize|upgrade_etcd_db_size)\\?":)\d+"#, "${1}<size>"),
            (r#"(size\\?":\\?")\d+ kB"#, "${1}<size> kB"),
            (r"(\d+ keys, )\d+ bytes", "${1}<size> bytes"),
            (r"\b1[6-9]\d{8}(\.\d+)?\b", "<epoch>"),
            (r#"("upgrade_etcd_backup_free":)\d+"#, "${1}<free>"),
        ];
        for (pattern, replacement) in rules {
            let re = Regex::new(pattern).expect("a valid pattern");
            line = re.replace_all(&line, *replacement).into_owned();
        }
        if line.contains("read the free space of") {
            let re = Regex::new(r#"("stdout":"|"stdout_lines":\[")\d+"#).expect("a valid pattern");
            line = re.replace_all(&line, "${1}<free>").into_owned();
        }
        line
    }

    /// Normalises every line, then puts the lines of hosts that ran at the same time in host order.
    fn lines(&self, text: &str) -> String {
        let mut out = String::new();
        let mut block: Vec<(String, String)> = Vec::new();
        let flush = |block: &mut Vec<(String, String)>, out: &mut String| {
            block.sort_by(|a, b| a.0.cmp(&b.0));
            for (_, line) in block.drain(..) {
                out.push_str(&line);
                out.push('\n');
            }
        };
        for raw in text.lines() {
            let host = serde_json::from_str::<serde_json::Value>(raw)
                .ok()
                .and_then(|v| v.get("host").and_then(|h| h.as_str()).map(str::to_string));
            let line = self.line(raw);
            match host {
                Some(host) => block.push((host, line)),
                None => {
                    flush(&mut block, &mut out);
                    out.push_str(&line);
                    out.push('\n');
                }
            }
        }
        flush(&mut block, &mut out);
        out
    }
}

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default().trim().to_string()
}

/// One master (also etcd) and four nodes on a real sshd, the fake cluster, a real etcd. Batches of three nodes at
/// most 50% failing: in batch 1, n1's kubeadm upgrade fails and n2's drain outlasts its 2 s timeout, so n4 (batch
/// 2) is not started and the run stops on the threshold.
#[test]
fn a_run_with_a_failed_node_and_a_drain_timeout_prints_and_records_the_golden_events() {
    let spec = "m1 v1.28.5 node-role.kubernetes.io/control-plane=\n\
                n1 v1.28.5 region=a\nn2 v1.28.5 region=a\nn3 v1.28.5 region=a\nn4 v1.28.5 region=a\n";
    let sshd = TestSshd::start();
    let etcd = TestEtcd::start();
    let fake = FakeCluster::init(spec);
    fake.set_cue("n1", "upgrade_fail", "");
    fake.set_cue("n2", "drain_hang", "");
    let dir = tempfile::Builder::new().prefix("upgrade-golden-").tempdir().expect("scratch dir");
    let mut text = String::from("all:\n  vars:\n    upgrade_target_version: v1.29.1\n");
    for (k, v) in fake.command_vars() {
        text.push_str(&format!("    {k}: \"{v}\"\n"));
    }
    text.push_str(&format!("    upgrade_etcdctl: \"{}\"\n", etcdctl_binary().display()));
    text.push_str(&format!("    upgrade_etcd_endpoints: \"{}\"\n", etcd.endpoints()));
    text.push_str("    upgrade_etcd_cacert: \"\"\n    upgrade_etcd_cert: \"\"\n    upgrade_etcd_key: \"\"\n");
    text.push_str("    upgrade_etcd_backup_dir: \"{{ host_root }}/etcd-backups\"\n");
    text.push_str("    upgrade_node_ready_delay: 1\n    upgrade_node_ready_timeout: 20\n");
    text.push_str("    upgrade_nodes_serial: 3\n    upgrade_nodes_max_fail_percentage: 50\n");
    text.push_str("    upgrade_nodes_drain_timeout: 2\n");
    text.push_str("  children:\n    masters:\n      hosts:\n");
    text.push_str(&sshd.yaml_host("m1", 8));
    text.push_str("    etcd:\n      hosts:\n        m1:\n    nodes:\n      hosts:\n");
    for n in ["n1", "n2", "n3", "n4"] {
        text.push_str(&sshd.yaml_host(n, 8));
    }
    std::fs::write(dir.path().join("hosts.yml"), text).expect("write the inventory");

    // The cluster lock names its holder user@host: a fixed user, whoever runs the test.
    let out = Scenario::in_dir(dir.path())
        .args(["--inventory", "hosts.yml", "--output", "json"])
        .env("NO_COLOR", "1")
        .env("USER", "golden")
        .env_remove("LOGNAME")
        .failure(1);
    let stdout = &out.stdout;
    let journal = std::fs::read_to_string(dir.path().join(".upgrade-state/journal.jsonl")).expect("the journal");

    let fake_dir = fake.state_dir().parent().expect("the fake cluster's dir").display().to_string();
    let etcd_port = etcd.endpoints().rsplit(':').next().expect("etcd's port").to_string();
    let normaliser = Normaliser::new(vec![
        (dir.path().display().to_string(), "<scratch>"),
        (sshd.dir().display().to_string(), "<sshd>"),
        (fake_dir, "<fake>"),
        (etcd.scratch_dir().display().to_string(), "<etcd>"),
        (format!("127.0.0.1:{etcd_port}"), "127.0.0.1:<etcd-port>"),
        (format!("\"ansible_port\":{}", sshd.port()), "\"ansible_port\":<ssh-port>"),
        (format!("\"ansible_port\":\"{}\"", sshd.port()), "\"ansible_port\":\"<ssh-port>\""),
        (format!("@{}", hostname()), "@<hostname>"),
    ]);
    golden("upgrade-events.jsonl", &normaliser.lines(stdout));
    golden("upgrade-journal.jsonl", &normaliser.lines(&journal));
}

fn plan_json(inventory: &Path) -> String {
    let out = Scenario::new().inventory(inventory).args(["--plan", "--output", "json"]).env("NO_COLOR", "1").success();
    Normaliser::new(vec![(out.dir().display().to_string(), "<scratch>")]).lines(&out.stdout)
}

#[test]
fn the_plan_of_the_demo_inventory_is_the_golden_one() {
    golden("plan-demo.json", &plan_json(&repo().join("inventories/demo/hosts.yml")));
}

#[test]
fn the_plan_of_an_openshift_inventory_is_the_golden_one() {
    golden("plan-demo-openshift.json", &plan_json(&repo().join("inventories/demo-openshift/hosts")));
}

#[test]
fn the_normaliser_keeps_each_hosts_order_and_sorts_only_hosts_between_shared_lines() {
    let normaliser = Normaliser::new(Vec::new());
    let text = "{\"event\":\"a\"}\n{\"host\":\"n2\",\"x\":1}\n{\"host\":\"n1\",\"x\":2}\n{\"host\":\"n2\",\"x\":3}\n\
                {\"event\":\"b\",\"host\":null}\n{\"host\":\"n0\"}\n";
    assert_eq!(
        normaliser.lines(text),
        "{\"event\":\"a\"}\n{\"host\":\"n1\",\"x\":2}\n{\"host\":\"n2\",\"x\":1}\n{\"host\":\"n2\",\"x\":3}\n\
         {\"event\":\"b\",\"host\":null}\n{\"host\":\"n0\"}\n"
    );
    assert_eq!(
        normaliser.line(r#"{"run":"20261123T131358Z-13455","time":"2026-11-23T13:13:58Z","duration":0.217}"#),
        r#"{"run":"<run>","time":"<time>","duration":<duration>}"#
    );
}
