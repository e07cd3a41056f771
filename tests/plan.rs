//! `upgrade --plan`: what an operator sees before anything is touched, and the JSON contract CI relies on.

use serde_json::{Value, json};

use crate::support::{Outcome, Scenario, openshift_fixture};

fn phase<'a>(plan: &'a Value, name: &str) -> Option<&'a Value> {
    plan["phases"].as_array()?.iter().find(|p| p["name"] == name)
}

fn batches(plan: &Value, name: &str) -> Value {
    phase(plan, name).map_or(Value::Null, |p| p["batches"].clone())
}

const MASTERS: [&str; 3] =
    ["ose3-master1.test.example.com", "ose3-master2.test.example.com", "ose3-master3.test.example.com"];

#[test]
fn the_openshift_example_plan_upgrades_masters_one_at_a_time_then_the_nodes() {
    let hosts = openshift_fixture("hosts.example");
    let out = Scenario::new().arg("--inventory").arg(&hosts).arg("--plan").success();
    let mut out = out
        .stdout_has("etcd-backup: snapshot etcd on 3 host(s)")
        .stdout_has("control-plane: 3 host(s) in 3 batch(es), one master at a time")
        .stdout_has("nodes: 4 host(s) in 4 batch(es), serial 1")
        .stdout_has("ose3-infra1.test.example.com")
        .stdout_has("ose3-node2.test.example.com")
        .stdout_has("serial               1 ");
    for (i, master) in MASTERS.iter().enumerate() {
        let line = format!("batch {}: {master}\n", i + 1);
        out = out.check(&format!("control-plane batch line {line:?}"), |o| o.stdout.contains(&line));
    }

    let out = Scenario::new().arg("-i").arg(&hosts).args(["--plan", "--output", "json"]).success();
    let plan = out.json();
    assert_eq!(batches(&plan, "etcd-backup"), json!([MASTERS]));
    assert_eq!(batches(&plan, "control-plane"), json!([[MASTERS[0]], [MASTERS[1]], [MASTERS[2]]]));
    assert_eq!(
        batches(&plan, "nodes"),
        json!([
            ["ose3-infra1.test.example.com"],
            ["ose3-infra2.test.example.com"],
            ["ose3-node1.test.example.com"],
            ["ose3-node2.test.example.com"]
        ])
    );
    assert_eq!(plan["settings"]["serial"], json!(1));
    assert_eq!(plan["settings"]["max_fail_percentage"], json!(0));
    assert_eq!(plan["settings"]["drain_timeout_seconds"], json!(0));
    assert_eq!(plan["settings"]["label"], Value::Null);
}

#[test]
fn a_label_selects_the_compute_nodes_offline_and_says_so() {
    let hosts = openshift_fixture("hosts.example");
    let label = ["--label", "node-role.kubernetes.io/compute=true"];
    Scenario::new()
        .arg("-i")
        .arg(&hosts)
        .arg("--plan")
        .args(label)
        .success()
        .stdout_has("nodes: 2 host(s)")
        .stdout_has("evaluated offline")
        .stdout_has("node_labels")
        .stdout_has("openshift_node_group_name");

    let out = Scenario::new()
        .arg("-i")
        .arg(&hosts)
        .args(["--plan", "--output", "json", "--serial", "2"])
        .args(label)
        .success();
    let plan = out.json();
    assert_eq!(batches(&plan, "nodes"), json!([["ose3-node1.test.example.com", "ose3-node2.test.example.com"]]));
    assert_eq!(plan["settings"]["label"], json!("node-role.kubernetes.io/compute=true"));
    assert_eq!(plan["settings"]["serial"], json!(2));
}

#[test]
fn phases_left_out_are_absent_from_the_json() {
    let out = Scenario::new()
        .arg("-i")
        .arg(openshift_fixture("hosts.example"))
        .args(["--plan", "--output", "json", "--phase", "nodes"])
        .success();
    let plan = out.json();
    let names: Vec<&str> = plan["phases"].as_array().unwrap().iter().filter_map(|p| p["name"].as_str()).collect();
    assert_eq!(names, ["preflight", "nodes"]);
}

const CLUSTER: &str = "\
[masters]
m1
m2

[nodes]
m1
m2
n[1:5] node_labels=\"{'region': 'east'}\"

[all:vars]
";

/// An INI cluster with one extra line in `[all:vars]` (line 11).
fn cluster_with(var_line: &str) -> Scenario {
    Scenario::new().file("hosts.ini", &format!("{CLUSTER}{var_line}\n")).args(["-i", "hosts.ini", "--plan"])
}

#[test]
fn settings_come_from_the_inventory_with_their_place() {
    let out = cluster_with("openshift_upgrade_nodes_serial=[1, '20%', -1]").args(["--output", "json"]).success();
    let plan = out.json();
    assert_eq!(batches(&plan, "nodes"), json!([["n1"], ["n2"], ["n3", "n4", "n5"]]));
    assert_eq!(plan["settings"]["serial"], json!([1, "20%", -1]));
    cluster_with("upgrade_nodes_serial=2").success().stdout_has("upgrade_nodes_serial at hosts.ini:11");
    // -e beats the inventory; the flag beats -e.
    cluster_with("upgrade_nodes_serial=2")
        .args(["-e", "upgrade_nodes_serial=5"])
        .success()
        .stdout_has("batch 1: n1, n2, n3, n4, n5");
    cluster_with("upgrade_nodes_serial=2")
        .args(["-e", "upgrade_nodes_serial=5", "--serial", "4"])
        .success()
        .stdout_has("batch 2: n5");
}

#[test]
fn the_kubeadm_host_settings_show_with_their_origin() {
    cluster_with("upgrade_package_manager=dnf")
        .success()
        .stdout_has("upgrade_package_manager              dnf")
        .stdout_has("from hosts.ini:11")
        .stdout_has("upgrade_kubernetes_repo_manage       true")
        .stdout_has("upgrade_kubernetes_repo_file         by the package manager")
        .stdout_has("upgrade_control_plane_ready_timeout  300");
    let out = cluster_with("")
        .args(["-e", "upgrade_kubernetes_repo_file=/etc/apt/sources.list.d/k8s.list", "--output", "json"])
        .success();
    let plan = out.json();
    let rows = plan["host_settings"].as_array().expect("host_settings").clone();
    let row = |variable: &str| rows.iter().find(|r| r["variable"] == variable).cloned().unwrap_or(Value::Null);
    assert_eq!(row("upgrade_package_manager")["value"], "auto");
    assert_eq!(row("upgrade_package_manager")["origin"], "default");
    assert_eq!(row("upgrade_kubernetes_repo_file")["value"], "/etc/apt/sources.list.d/k8s.list");
    assert_eq!(
        row("upgrade_kubernetes_repo_file")["origin"],
        "-e upgrade_kubernetes_repo_file=/etc/apt/sources.list.d/k8s.list"
    );
}

#[test]
fn forks_come_from_the_inventory_or_the_flag_and_the_plan_says_which() {
    let forks_row = |out: &Outcome| {
        out.output()
            .lines()
            .find(|l| l.trim_start().starts_with("forks "))
            .map(str::split_whitespace)
            .map_or(Vec::new(), |words| words.map(str::to_string).collect::<Vec<_>>())
    };
    assert_eq!(forks_row(&cluster_with("").success()), ["forks", "50", "from", "default"]);
    let row = forks_row(&cluster_with("upgrade_forks=7").success());
    assert_eq!(row[..5], ["forks", "7", "from", "upgrade_forks", "at"], "{row:?}");
    assert_eq!(row[5], "hosts.ini:11:1", "{row:?}");
    assert_eq!(
        forks_row(&cluster_with("upgrade_forks=7").args(["-f", "3"]).success()),
        ["forks", "3", "from", "--forks"]
    );
    // JSON plans carry no forks: they stay what CI already reads.
    let out = cluster_with("upgrade_forks=7").args(["--output", "json"]).success();
    assert!(out.json()["settings"].get("forks").is_none());
}

#[test]
fn bad_settings_in_the_inventory_name_the_line_and_exit_2() {
    for (line, message) in [
        ("upgrade_nodes_serial=abc", "serial `abc`"),
        ("upgrade_nodes_serial=-1%", "negative percentage"),
        ("upgrade_nodes_serial=[]", "empty list"),
        ("upgrade_nodes_max_fail_percentage=101", "outside 0..=100"),
        ("openshift_upgrade_nodes_max_fail_percentage=-5", "outside 0..=100"),
        ("upgrade_nodes_drain_timeout=soon", "not a duration"),
        ("upgrade_nodes_label=region=west", "matches none of the 5 nodes"),
        ("upgrade_node_pre_hook=hooks/missing.yml", "does not exist"),
        ("upgrade_package_manager=zypper", "upgrade_package_manager `zypper`"),
        ("upgrade_control_plane_ready_timeout=-1", "upgrade_control_plane_ready_timeout is -1"),
        ("upgrade_node_ready_timeout=-30", "upgrade_node_ready_timeout is `-30`"),
        ("upgrade_kubernetes_repo_manage=perhaps", "upgrade_kubernetes_repo_manage `perhaps` is not a boolean"),
        ("upgrade_forks=0", "forks must be 1 or more"),
    ] {
        cluster_with(line).failure(2).stderr_has("hosts.ini:11").stderr_has(message).stderr_has("hint:");
    }
}

#[test]
fn bad_flags_exit_2_with_what_to_do() {
    for (flag, message) in [
        (vec!["--serial", "abc"], "serial `abc`"),
        (vec!["--serial=-1%"], "negative percentage"),
        (vec!["--serial", "[]"], "empty list"),
        (vec!["--max-fail-percentage", "101"], "outside 0..=100"),
        (vec!["--drain-timeout", "ten minutes"], "not a duration"),
        (vec!["--label", "region=west"], "matches none of the 5 nodes"),
        (vec!["--label", "a b"], "label"),
        (vec!["--phase", "drain"], "unknown phase `drain`"),
        (vec!["--target-version", "latest"], "major.minor.patch"),
        (vec!["--forks", "0"], "--forks: forks must be 1 or more"),
        (vec!["-f", "many"], "forks `many` is not a whole number"),
    ] {
        cluster_with("").args(&flag).failure(2).stderr_has(message).stderr_has("hint:");
    }
}

#[test]
fn the_label_hint_lists_the_labels_nodes_have() {
    cluster_with("").args(["--label", "region=west"]).failure(2).stderr_has("region=east");
}

#[test]
fn hooks_are_listed_per_host_and_a_missing_one_is_named() {
    Scenario::new()
        .file("inv/hosts.ini", &format!("{CLUSTER}upgrade_node_pre_hook=hooks/pre.yml\n"))
        .file("inv/hooks/pre.yml", "- debug: msg=hello\n")
        .args(["-i", "inv/hosts.ini", "--plan"])
        .success()
        .stdout_has("n3 pre hook: ")
        .stdout_has("hooks/pre.yml (upgrade_node_pre_hook");
    cluster_with("openshift_node_upgrade_hook=/nonexistent/mid.yml")
        .failure(2)
        .stderr_has("openshift_node_upgrade_hook")
        .stderr_has("/nonexistent/mid.yml");
}

#[test]
fn an_inventory_without_masters_is_refused() {
    Scenario::new()
        .file("hosts.ini", "[nodes]\nn1\nn2\n")
        .args(["-i", "hosts.ini", "--plan"])
        .failure(2)
        .stderr_has("hosts.ini")
        .stderr_has("no `masters` group")
        .stderr_has("hint:");
}

#[test]
fn inventory_warnings_are_said_on_stderr_and_json_stdout_stays_clean() {
    let hosts = format!("{CLUSTER}\n[web-servers]\nn1\n");
    let scenario = Scenario::new().file("hosts.ini", &hosts).args(["-i", "hosts.ini", "--plan"]);
    scenario
        .args(["--output", "json"])
        .success()
        .stderr_has("warning: invalid character(s) in group name `web-servers`")
        .check("stdout is one JSON document", |o| serde_json::from_str::<Value>(&o.stdout).is_ok());
    // `upgrade check` reads the same inventory and says the same.
    Scenario::new()
        .file("hosts.ini", &hosts)
        .args(["check", "-i", "hosts.ini"])
        .success()
        .stderr_has("warning: invalid character(s) in group name `web-servers`");
}

#[test]
fn check_and_the_plan_resolve_a_hook_to_the_same_file() {
    // Spaces around the path: the run trims them; `upgrade check` once joined them to the directory as they were.
    let hosts = format!("{CLUSTER}upgrade_node_pre_hook=\"  hooks/pre.yml  \"\n");
    let hook = "- name: fine\n  debug:\n    msg: hi\n";
    let plan = Scenario::new()
        .file("hosts.ini", &hosts)
        .file("hooks/pre.yml", hook)
        .args(["-i", "hosts.ini", "--plan", "--output", "json"])
        .success();
    let planned = plan.json()["hooks"]["n1"]["node_pre"]["path"].as_str().map(str::to_string);
    let planned = planned.unwrap_or_else(|| plan.fail("the plan names no pre hook for n1"));
    assert!(planned.ends_with("hooks/pre.yml"), "{planned}");
    Scenario::new()
        .file("hosts.ini", &hosts)
        .file("hooks/pre.yml", hook)
        .args(["check", "-i", "hosts.ini"])
        .success()
        .check("check names the file the plan runs", |o| {
            o.stdout.lines().any(|l| l.strip_prefix("ok: ").is_some_and(|p| p.ends_with("hooks/pre.yml")))
        });
}

#[test]
fn with_one_serial_the_openshift_flavour_batches_infra_nodes_first_and_on_their_own() {
    // OpenShift 3.11's docs upgrade the control plane, then infra nodes, then application nodes (D12); a node group of
    // the operator's own naming counts as infra when its name says so. Other flavours keep the inventory order.
    let inventory = |head: &str| {
        format!(
            "{head}[masters]\nm1\n[nodes]\nm1\nn1 openshift_node_group_name=node-config-compute\n\
             i1 openshift_node_group_name=node-config-infra-east\nn2 openshift_node_group_name=node-config-compute\n\
             n3 openshift_node_group_name=node-config-compute\ni2 openshift_node_group_name=node-config-infra\n\
             [all:vars]\nupgrade_nodes_serial=\"50%\"\nupgrade_target_version=3.11.248\n"
        )
    };
    let plan = |text: String| {
        let scenario = Scenario::new().file("hosts", &text);
        let out = Scenario::new().arg("-i").arg(scenario.path("hosts")).args(["--plan", "--output", "json"]).success();
        batches(&out.json(), "nodes")
    };
    assert_eq!(
        plan(inventory("[OSEv3:children]\nmasters\nnodes\n")),
        json!([["i1"], ["i2"], ["n1"], ["n2"], ["n3"]]),
        "50% of 2 infra nodes, then 50% of 3 compute nodes (1, as Ansible truncates)"
    );
    assert_eq!(
        plan(inventory("[all:vars]\nupgrade_flavor=kubeadm\n")),
        json!([["n1", "i1"], ["n2", "n3"], ["i2"]]),
        "the kubeadm flavour keeps the inventory order"
    );
}
