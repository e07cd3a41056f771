//! kubespray's sample inventory (tests/fixtures/kubespray-sample, its README names the source), filled in as an
//! operator does: recognised without any setting, planned with its groups, its target read from `kube_version`.

use std::path::Path;

use crate::support::{Scenario, copy_dir};

/// The sample with its hosts uncommented, as an operator fills it in; `more` is appended to inventory.ini.
fn kubespray_inventory(more: &str) -> Scenario {
    let scenario = Scenario::new().env("NO_COLOR", "1");
    let sample = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/kubespray-sample");
    copy_dir(&sample, scenario.dir());
    let shipped = std::fs::read_to_string(sample.join("inventory.ini")).expect("read the sample");
    let filled: String = shipped
        .lines()
        .map(|line| line.strip_prefix("# node").map_or(line.to_string(), |rest| format!("node{rest}")))
        .collect::<Vec<_>>()
        .join("\n");
    std::fs::write(scenario.path("inventory.ini"), format!("{filled}\n{more}")).expect("write the inventory");
    scenario
}

#[test]
fn kubesprays_sample_layout_plans_with_its_groups_and_kube_version() {
    kubespray_inventory("")
        .args(["--plan", "-i", "inventory.ini"])
        .success()
        .stdout_has(
            "Groups: kubespray's layout (guessed: no `masters` group, and a `kube_control_plane` group; set \
             upgrade_masters_group, upgrade_nodes_group, upgrade_etcd_group to override): masters = \
             `kube_control_plane`, nodes = `kube_node`, etcd = `etcd`",
        )
        .stdout_has("target-version       v1.32.4")
        .stdout_has("from kube_version at ")
        .stdout_has("group_vars/k8s_cluster/k8s-cluster.yml:20")
        .stdout_has("control-plane: 3 host(s) in 3 batch(es)")
        .stdout_has("nodes: 3 host(s)");
    let plan = kubespray_inventory("").args(["--plan", "--output", "json", "-i", "inventory.ini"]).success().json();
    assert_eq!(plan["groups"]["masters"]["name"], "kube_control_plane");
    assert_eq!(plan["groups"]["etcd"]["name"], "etcd");
    assert!(plan["groups"]["kubespray"].as_str().is_some_and(|why| why.starts_with("guessed")));
    assert_eq!(plan["settings"]["target_version"], "v1.32.4");
}

#[test]
fn upgrade_target_version_wins_over_kube_version_and_the_group_settings_over_the_guess() {
    kubespray_inventory("[all:vars]\nupgrade_target_version=v1.33.1\n")
        .args(["--plan", "-i", "inventory.ini"])
        .success()
        .stdout_has("target-version       v1.33.1")
        .stdout_lacks("kube_version");
    // An older inventory: kube-master/kube-node, and the etcd hosts named by the setting.
    Scenario::new()
        .file("hosts", "[kube-master]\nm1\n[kube-node]\nn1\nn2\n[etcd-hosts]\ne1\n[all:vars]\nupgrade_etcd_group=etcd-hosts\nkube_version=v1.29.1\n")
        .args(["--plan", "-i", "hosts"])
        .success()
        .stdout_has("masters = `kube-master`, nodes = `kube-node`")
        .stdout_has("etcd = `etcd-hosts` (upgrade_etcd_group at ")
        .stdout_has("etcd-backup: snapshot etcd on 1 host(s), before anything else\n    e1")
        .stdout_has("target-version       v1.29.1");
}

#[test]
fn hosts_disagreeing_on_kube_version_are_refused() {
    // host_vars win over group_vars/k8s_cluster (a [kube_node:vars] line would not: group files win over it).
    kubespray_inventory("")
        .file("host_vars/node5.yml", "kube_version: v1.31.0\n")
        .args(["--plan", "-i", "inventory.ini"])
        .failure(2)
        .stderr_has("hosts disagree on kube_version");
}
