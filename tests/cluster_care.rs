//! Whole-cluster care end to end over real sshd: cluster hooks, the preflight health gate, configuration backups
//! beside the etcd snapshot and `upgrade restore`.

use crate::support::{Outcome, Scenario};
use crate::upgrade::{TARGET, TestCluster, nodes, spec};

fn journal(cluster: &TestCluster) -> Vec<serde_json::Value> {
    let text = std::fs::read_to_string(cluster.path(".upgrade-state/journal.jsonl")).unwrap_or_default();
    text.lines().filter_map(|l| serde_json::from_str(l).ok()).collect()
}

/// A hook that appends its name and the number of drains the cluster has seen so far to `log` on the controller.
fn recording_hook(name: &str, cluster: &TestCluster, log: &std::path::Path) -> String {
    let calls = cluster.fake.state_dir().join("calls.log");
    format!(
        "- name: record the {name} hook\n  shell: echo \"{name} on {{{{ inventory_hostname }}}} after $(grep -c '\tdrain\t' {calls} || true) drains\" >> {log}\n  delegate_to: localhost\n",
        calls = calls.display(),
        log = log.display()
    )
}

#[test]
fn cluster_mid_and_post_hooks_run_once_each_between_the_control_plane_and_the_nodes_and_at_the_end() {
    let list = nodes(2, "region=a");
    let cluster = TestCluster::new(&spec(&list))
        .var("upgrade_nodes_serial: 1")
        .var("upgrade_cluster_mid_hook: hooks/mid.yml")
        .var("upgrade_cluster_post_hook: hooks/post.yml");
    let log = cluster.path("cluster-hooks.log");
    cluster.write("hooks/mid.yml", &recording_hook("mid", &cluster, &log));
    cluster.write("hooks/post.yml", &recording_hook("post", &cluster, &log));
    let junit = cluster.path("junit.xml");
    cluster
        .upgrade(&["--junit", &junit.display().to_string()])
        .expect_code(0)
        .stdout_has("cluster hooks run: cluster-mid-hook, cluster-post-hook");

    let lines = std::fs::read_to_string(&log).expect("the hooks wrote their log");
    // Three masters drained before the mid hook, and the two nodes too before the post hook; each hook once.
    assert_eq!(lines, "mid on m1 after 3 drains\npost on m1 after 5 drains\n");

    let finished: Vec<(String, String)> = journal(&cluster)
        .iter()
        .filter(|e| e["event"] == "host-finished")
        .filter_map(|e| Some((e["phase"].as_str()?.to_string(), e["host"].as_str()?.to_string())))
        .filter(|(phase, _)| phase.starts_with("cluster-"))
        .collect();
    assert_eq!(
        finished,
        [("cluster-mid-hook".to_string(), "m1".to_string()), ("cluster-post-hook".to_string(), "m1".to_string())],
        "the journal records each cluster hook once, in order"
    );
    let xml = std::fs::read_to_string(&junit).expect("junit");
    assert!(xml.contains("<testsuite name=\"cluster-mid-hook\""), "{xml}");
    assert!(xml.contains("<testsuite name=\"cluster-post-hook\""), "{xml}");

    // A second run of the same target repeats neither (nothing to upgrade; the journal says they ran).
    cluster.upgrade(&[]).expect_code(0);
    assert_eq!(std::fs::read_to_string(&log).expect("log"), lines);
    assert_eq!(cluster.fake.version("n2"), TARGET);
}

#[test]
fn a_failing_cluster_pre_hook_stops_the_run_before_any_master_is_touched() {
    let cluster = TestCluster::new(&[("n1", "region=a")]).var("upgrade_cluster_pre_hook: hooks/pre.yml");
    cluster.write("hooks/pre.yml", "- name: storage migration\n  command: \"false\"\n");
    cluster
        .upgrade(&[])
        .expect_code(1)
        .stdout_has("[m1] FAILED at cluster-hook")
        .stdout_has("upgrade_cluster_pre_hook failed");
    assert!(cluster.fake.calls().iter().all(|c| c.action != "cordon"), "no node was cordoned");
    assert_eq!(cluster.fake.upgrades("m1"), 0);
}

#[test]
fn a_node_that_is_not_ready_is_refused_in_preflight_and_accepted_when_listed() {
    let list = nodes(2, "region=a");
    let cluster = TestCluster::new(&spec(&list));
    cluster.fake.set_cue("n2", "ready", "false");
    cluster
        .upgrade(&[])
        .expect_code(1)
        .stderr_has("nodes this run would upgrade are not Ready: n2")
        .stderr_has("upgrade_preflight_allow_not_ready");
    assert!(cluster.fake.calls().iter().all(|c| c.action != "cordon"), "nothing was touched");
    assert_eq!(cluster.fake.upgrades("m1"), 0);

    // A pending CSR of some other node is said, not refused.
    let csr = cluster.fake.state_dir().join("csrs/csr-old");
    std::fs::create_dir_all(&csr).unwrap();
    std::fs::write(csr.join("username"), "system:node:n9\n").unwrap();
    let cluster = cluster.var("upgrade_preflight_allow_not_ready: [n2]");
    cluster
        .upgrade(&[])
        .expect_code(0)
        .stdout_has("pending certificate signing requests: csr-old (system:node:n9)")
        .stdout_has("not Ready, upgraded anyway (upgrade_preflight_allow_not_ready): n2");
    assert_eq!(cluster.fake.version("n2"), TARGET);
}

#[test]
fn a_node_the_run_does_not_touch_that_is_not_ready_is_reported_apart_at_the_end() {
    let cluster = TestCluster::new(&[("n1", "region=a"), ("n2", "region=b")]);
    cluster.fake.set_cue("n2", "ready", "false");
    cluster
        .upgrade(&["--label", "region=a"])
        .expect_code(0)
        .stdout_has("not Ready, and not touched by this run: n2")
        .stdout_has("not Ready, not touched by this run: n2");
    assert_eq!(cluster.fake.version("n1"), TARGET);
}

#[test]
fn a_node_left_out_of_the_run_that_would_fall_outside_the_kubelet_skew_stops_preflight() {
    let cluster = TestCluster::new(&[("n1", "region=a"), ("n2", "region=b")]).var("upgrade_max_kubelet_skew: 0");
    cluster
        .upgrade(&["--label", "region=a"])
        .expect_code(1)
        .stderr_has("more than 0 minor versions behind")
        .stderr_has("n2 (v1.28.5)");
    assert!(cluster.fake.calls().iter().all(|c| c.action != "cordon"), "nothing was touched");
}

#[test]
fn openshift_hostname_names_the_node_when_node_name_is_not_set() {
    let mut cluster = TestCluster::new(&[("n1", "region=a")]);
    let mut init = String::new();
    for m in crate::upgrade::MASTERS {
        init.push_str(&format!("{m} v1.28.5 node-role.kubernetes.io/control-plane=\n"));
    }
    init.push_str("n1.example.com v1.28.5 region=a\n");
    cluster.fake = crate::support::fake_cluster::FakeCluster::init(&init);
    // openshift_kubelet_name_override wins over openshift_hostname, as in openshift-ansible.
    cluster.write(
        "host_vars/n1.yml",
        "openshift_hostname: wrong.example.com\nopenshift_kubelet_name_override: n1.example.com\n",
    );
    cluster.upgrade(&[]).expect_code(0);
    assert_eq!(cluster.fake.version("n1.example.com"), TARGET);
    assert!(cluster.fake.actions_on("n1.example.com").contains(&"drain".to_string()));
}

fn backup_dirs(cluster: &TestCluster, host: &str) -> Vec<std::path::PathBuf> {
    let root = cluster.sshd.host_root(host).join("etcd-backups");
    let mut dirs: Vec<_> = std::fs::read_dir(root).map(|d| d.flatten().map(|e| e.path()).collect()).unwrap_or_default();
    dirs.sort();
    dirs
}

/// m1's kube-apiserver manifest, under its host root, as the inventory names it for the backup.
fn manifest(cluster: &TestCluster) -> std::path::PathBuf {
    cluster.sshd.host_root("m1").join("etc/kubernetes/manifests/kube-apiserver.yaml")
}

/// The backup's default paths name m1's manifests directory (the other hosts have none: it is left out there).
fn with_manifest_backed_up(cluster: TestCluster) -> TestCluster {
    let dir = manifest(&cluster).parent().unwrap().display().to_string();
    cluster.var(&format!("upgrade_config_backup_default_paths: [{}]", serde_json::to_string(&dir).unwrap()))
}

fn restore(cluster: &TestCluster, args: &[&str]) -> Outcome {
    Scenario::in_dir(&cluster.path("")).arg("restore").inventory(cluster.inventory()).args(args).run()
}

#[test]
fn a_configuration_backup_is_written_beside_the_snapshot_and_listed_in_the_journal() {
    let cluster = TestCluster::new(&[("n1", "region=a")]);
    let cluster = with_manifest_backed_up(cluster);
    std::fs::create_dir_all(manifest(&cluster).parent().unwrap()).unwrap();
    std::fs::write(manifest(&cluster), "image: kube-apiserver:v1.28.5\n").unwrap();
    cluster.upgrade(&["--phase", "control-plane"]).expect_code(0).stdout_has("configuration saved in");

    let dirs = backup_dirs(&cluster, "m1");
    assert_eq!(dirs.len(), 1, "{dirs:?}");
    assert!(dirs[0].join("snapshot.db").is_file(), "the snapshot is there");
    let copy = dirs[0].join("config").join(manifest(&cluster).strip_prefix("/").unwrap());
    assert_eq!(std::fs::read_to_string(&copy).expect("the manifest copy"), "image: kube-apiserver:v1.28.5\n");
    let kubeadm_config = std::fs::read_to_string(dirs[0].join("config/kubeadm-config.json")).expect("kubeadm-config");
    assert!(kubeadm_config.contains("kubernetesVersion: v1.28.5"), "{kubeadm_config}");

    let stamp = dirs[0].file_name().unwrap().to_string_lossy().to_string();
    let backups: Vec<serde_json::Value> = journal(&cluster).into_iter().filter(|e| e["event"] == "backup").collect();
    let m1_config = backups
        .iter()
        .find(|b| b["host"] == "m1" && b["files"].is_array())
        .unwrap_or_else(|| panic!("m1's configuration backup in the journal: {backups:?}"));
    assert_eq!(m1_config["timestamp"], stamp.as_str(), "same timestamp as the snapshot");
    let files: Vec<&str> = m1_config["files"].as_array().unwrap().iter().filter_map(|f| f.as_str()).collect();
    assert!(files.contains(&manifest(&cluster).parent().unwrap().to_str().unwrap()), "{files:?}");
    assert!(backups.iter().any(|b| b["host"] == "m1" && b["snapshot"].as_str().is_some_and(|s| s.contains(&stamp))));
}

#[test]
fn restore_puts_a_changed_configuration_file_back_and_restores_a_real_etcd_from_its_snapshot() {
    let cluster = with_manifest_backed_up(TestCluster::with_real_etcd(&[("n1", "region=a")]));
    let stop = cluster.etcd.stop_command();
    let start = cluster.etcd.start_command();
    let data_dir = cluster.etcd.data_dir().display().to_string();
    let flags = cluster.etcd.restore_flags();
    let cluster = cluster
        .var(&format!("upgrade_etcd_stop_command: {}", serde_json::to_string(&stop).unwrap()))
        .var(&format!("upgrade_etcd_start_command: {}", serde_json::to_string(&start).unwrap()))
        .var(&format!("upgrade_etcd_data_dir: {}", serde_json::to_string(&data_dir).unwrap()))
        .var(&format!("upgrade_etcd_restore_flags: {}", serde_json::to_string(&flags).unwrap()))
        .var("upgrade_etcd_restore_timeout: 60");
    std::fs::create_dir_all(manifest(&cluster).parent().unwrap()).unwrap();
    std::fs::write(manifest(&cluster), "image: kube-apiserver:v1.28.5\n").unwrap();
    let put = cluster.etcd.etcdctl(&["put", "/registry/restore/marker", "before-the-backup"]);
    assert!(put.status.success());
    cluster.upgrade(&["--phase", "control-plane"]).expect_code(0);

    // Things go wrong after the backup.
    std::fs::write(manifest(&cluster), "image: kube-apiserver:broken\n").unwrap();
    assert!(cluster.etcd.etcdctl(&["del", "/registry/restore/marker"]).status.success());
    assert!(cluster.etcd.etcdctl(&["put", "/registry/restore/after", "written later"]).status.success());

    // Without --yes: the plan, and nothing changed.
    let run = restore(&cluster, &["--limit", "m1", "--etcd"]).expect_code(2).stdout_has("Restore plan: backup");
    let run = run.stdout_has("etcdctl snapshot restore").stdout_has(&stop).stderr_has("--yes");
    assert_eq!(std::fs::read_to_string(manifest(&cluster)).unwrap(), "image: kube-apiserver:broken\n");
    drop(run);

    restore(&cluster, &["--limit", "m1", "--etcd", "--yes"]).expect_code(0);
    assert_eq!(std::fs::read_to_string(manifest(&cluster)).unwrap(), "image: kube-apiserver:v1.28.5\n");
    let marker = cluster.etcd.etcdctl(&["get", "/registry/restore/marker", "--print-value-only"]);
    assert_eq!(String::from_utf8_lossy(&marker.stdout).trim(), "before-the-backup", "the restored etcd answers");
    let later = cluster.etcd.etcdctl(&["get", "/registry/restore/after", "--print-value-only"]);
    assert_eq!(String::from_utf8_lossy(&later.stdout).trim(), "", "what was written after the backup is gone");
    assert!(
        std::path::Path::new(&format!("{data_dir}.before-restore-{}", {
            let d = backup_dirs(&cluster, "m1");
            d[0].file_name().unwrap().to_string_lossy().to_string()
        }))
        .is_dir(),
        "the old data directory is kept aside"
    );
}

#[test]
fn a_control_plane_pod_not_ready_after_a_masters_upgrade_stops_the_run() {
    let cluster = TestCluster::new(&[("n1", "region=a")])
        .var("upgrade_control_plane_ready_timeout: 3")
        .var("upgrade_control_plane_ready_delay: 1");
    cluster.fake.set_cue("m1", "cp_pod_not_ready", "kube-scheduler");
    cluster
        .upgrade(&[])
        .expect_code(1)
        .stdout_has("[m1] FAILED at control-plane-pods")
        .stdout_has("kube-scheduler-m1 on m1 is Running, not Ready")
        .stdout_has("master m1 failed");
    assert_eq!(cluster.fake.version("m1"), TARGET, "m1 itself was upgraded");
    assert_eq!(cluster.fake.upgrades("m2"), 0, "m2 was not started");
    assert_eq!(cluster.fake.upgrades("n1"), 0, "the nodes were not started");
}

#[test]
fn a_node_waiting_for_its_certificate_is_reported_and_approved_only_when_allowed() {
    let cluster = TestCluster::new(&[("n1", "region=a")]).var("upgrade_node_ready_timeout: 3");
    cluster.fake.set_cue("n1", "csr_pending", "");
    cluster
        .upgrade(&[])
        .expect_code(1)
        .stdout_has("[n1] FAILED at wait-ready")
        .stdout_has("pending certificate signing requests: csr-n1");
    assert!(!cluster.fake.calls().iter().any(|c| c.action == "csr-approve"), "nothing approved without the setting");

    let cluster = cluster.var("upgrade_approve_node_csrs: true");
    cluster.upgrade(&[]).expect_code(0).stdout_has("approved the pending CSRs of n1: csr-n1");
    assert!(cluster.fake.is_ready("n1"));
    assert_eq!(cluster.fake.version("n1"), TARGET);
}

#[test]
fn openshift_rolling_restart_mode_and_openshift_hostname_reach_the_built_in_steps() {
    let defaults = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("playbooks/defaults.yml");
    crate::support::Scenario::new()
        .file(
            "hosts",
            "[masters]\nlocalhost ansible_connection=local openshift_rolling_restart_mode=system openshift_hostname=node-a.example\n",
        )
        .file(
            "show.yml",
            &format!(
                "- include_tasks: {}\n- debug:\n    msg: \"mode={{{{ upgrade_rolling_restart_mode }}}} node={{{{ node_name }}}}\"\n",
                defaults.display()
            ),
        )
        .args(["run-tasks", "show.yml", "-i", "hosts", "-e", "upgrade_target_version=v1.29.1"])
        .success()
        .stdout_has("mode=system node=node-a.example");
}

#[test]
fn openshift_rolling_restart_mode_reboots_masters_only_and_the_canonical_variable_every_host() {
    // "The openshift_rolling_restart_mode only works for master hosts" (OpenShift 3.11 docs): a node keeps restarting
    // its services under it; upgrade_rolling_restart_mode keeps its meaning everywhere.
    let defaults = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("playbooks/defaults.yml");
    let show = |extra: &[&str]| {
        let mut args = vec!["run-tasks", "show.yml", "-i", "hosts", "-e", "upgrade_target_version=v1.29.1"];
        args.extend_from_slice(extra);
        crate::support::Scenario::new()
            .file(
                "hosts",
                "[OSEv3:children]\nmasters\nnodes\n\n[OSEv3:vars]\nopenshift_rolling_restart_mode=system\n\n\
                 [masters]\nm1 ansible_connection=local\n\n[nodes]\nm1\nn1 ansible_connection=local\n",
            )
            .file(
                "show.yml",
                &format!(
                    "- include_tasks: {}\n- debug:\n    msg: \"mode={{{{ upgrade_rolling_restart_mode }}}}\"\n",
                    defaults.display()
                ),
            )
            .args(args)
            .success()
    };
    let mode_of = |host: &str, mode: &str| format!("[{host}] ok: debug\n    msg: mode={mode}\n");
    show(&[]).stdout_has(&mode_of("m1", "system")).stdout_has(&mode_of("n1", "services"));
    show(&["-e", "upgrade_rolling_restart_mode=system"]).stdout_has(&mode_of("n1", "system"));
}

#[test]
fn restore_refuses_without_hosts_or_a_recorded_backup_and_touches_nothing() {
    let inventory = "[masters]\nm1 ansible_connection=local\n";
    crate::support::Scenario::new()
        .file("hosts", inventory)
        .args(["restore", "-i", "hosts"])
        .failure(2)
        .stderr_has("--limit HOST");
    crate::support::Scenario::new()
        .file("hosts", inventory)
        .args(["restore", "-i", "hosts", "--limit", "m1", "--yes"])
        .failure(2)
        .stderr_has("record no verified etcd backup");
    crate::support::Scenario::new()
        .file("hosts", inventory)
        .file(
            ".upgrade-state/journal.jsonl",
            "{\"event\":\"backup\",\"run\":\"r\",\"time\":\"t\",\"host\":\"m1\",\"timestamp\":\"20260101T000000Z\",\"dir\":\"/nowhere/20260101T000000Z\",\"snapshot\":\"/nowhere/20260101T000000Z/snapshot.db\"}\n",
        )
        .args(["restore", "-i", "hosts", "--limit", "m1", "--backup", "20250101T000000Z"])
        .failure(2)
        .stderr_has("the recorded backups are: 20260101T000000Z");
}

#[test]
fn restore_refuses_while_an_upgrade_holds_the_state_directory_and_touches_nothing() {
    let inventory = "[masters]\nm1 ansible_connection=local\n";
    let scenario = crate::support::Scenario::new().file("hosts", inventory);
    let config = scenario.path("backup/config/etc/app.conf");
    let target = scenario.path("etc/app.conf");
    let journal = serde_json::json!({"event": "backup", "run": "r", "time": "t", "host": "m1",
        "timestamp": "20260101T000000Z", "dir": scenario.path("backup"), "files": [target]});
    let scenario = scenario
        .file(".upgrade-state/journal.jsonl", &format!("{journal}\n"))
        .file("backup/config/etc/app.conf", "restored\n")
        .file("etc/app.conf", "changed since\n");
    assert!(config.is_file());
    // An upgrade holds the state directory's lock (flock, as the run takes it).
    let mut holder = std::process::Command::new("flock")
        .arg(scenario.path(".upgrade-state/lock"))
        .args(["-c", "sleep 60"])
        .spawn()
        .expect("flock");
    std::thread::sleep(std::time::Duration::from_millis(300));
    let scenario = scenario.args(["restore", "-i", "hosts", "--limit", "m1", "--backup", "20260101T000000Z", "--yes"]);
    let refused = scenario.run();
    let _ = holder.kill();
    let _ = holder.wait();
    let refused = refused.expect_code(2).stderr_has("another upgrade is running");
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "changed since\n", "nothing was restored");
    drop(refused);
}

#[test]
fn restore_with_v_masks_the_listed_secrets_as_the_upgrade_does() {
    // N13: a token inside upgrade_kubectl, listed in upgrade_secret_vars.
    let cluster = with_manifest_backed_up(TestCluster::new(&[("n1", "region=a")]))
        .var("api_token: tok-SECRET-123456")
        .var("upgrade_secret_vars: [api_token]");
    std::fs::create_dir_all(manifest(&cluster).parent().unwrap()).unwrap();
    std::fs::write(manifest(&cluster), "image: kube-apiserver:v1.28.5\n").unwrap();
    let kubectl = format!("env KUBE_TOKEN={{{{ api_token }}}} {}", cluster.fake.kubectl_command());
    let extra = serde_json::json!({ "upgrade_kubectl": kubectl }).to_string();
    let run = cluster.upgrade(&["--phase", "control-plane", "-e", &extra, "-vvv"]).expect_code(0);
    assert!(!run.stdout.contains("tok-SECRET") && !run.stderr.contains("tok-SECRET"), "{run}");
    let run = restore(&cluster, &["--limit", "m1", "--yes", "-v", "-e", &extra]).expect_code(0);
    assert!(run.stdout.contains("KUBE_TOKEN=********"), "the fact is printed, masked\n{run}");
    assert!(!run.stdout.contains("tok-SECRET") && !run.stderr.contains("tok-SECRET"), "{run}");
}
