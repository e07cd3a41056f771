//! Whole-cluster care end to end over real sshd: cluster hooks, the preflight health gate, configuration backups
//! beside the etcd snapshot and `upgrade restore`.

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
        .expect_stdout("cluster hooks run: cluster-mid-hook, cluster-post-hook");

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
        .expect_stdout("[m1] FAILED at cluster-hook")
        .expect_stdout("upgrade_cluster_pre_hook failed");
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
        .expect_stderr("nodes this run would upgrade are not Ready: n2")
        .expect_stderr("upgrade_preflight_allow_not_ready");
    assert!(cluster.fake.calls().iter().all(|c| c.action != "cordon"), "nothing was touched");
    assert_eq!(cluster.fake.upgrades("m1"), 0);

    let cluster = cluster.var("upgrade_preflight_allow_not_ready: [n2]");
    cluster
        .upgrade(&[])
        .expect_code(0)
        .expect_stdout("not Ready, upgraded anyway (upgrade_preflight_allow_not_ready): n2");
    assert_eq!(cluster.fake.version("n2"), TARGET);
}

#[test]
fn a_node_left_out_of_the_run_that_would_fall_outside_the_kubelet_skew_stops_preflight() {
    let cluster = TestCluster::new(&[("n1", "region=a"), ("n2", "region=b")]).var("upgrade_max_kubelet_skew: 0");
    cluster
        .upgrade(&["--label", "region=a"])
        .expect_code(1)
        .expect_stderr("more than 0 minor versions behind")
        .expect_stderr("n2 (v1.28.5)");
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
    cluster.write("host_vars/n1.yml", "openshift_hostname: wrong.example.com\nopenshift_kubelet_name_override: n1.example.com\n");
    cluster.upgrade(&[]).expect_code(0);
    assert_eq!(cluster.fake.version("n1.example.com"), TARGET);
    assert!(cluster.fake.actions_on("n1.example.com").contains(&"drain".to_string()));
}
