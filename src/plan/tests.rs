use serde_json::{Value, json};

use super::*;
use crate::error::{ErrorKind, Location};
use crate::inventory::{Group, Host, Origin, Var};
use crate::settings::{MaxFailPercentage, Serial};

fn serial(text: &str) -> Serial {
    Serial::parse(text).unwrap()
}

#[test]
fn serial_batches_follow_ansible_exactly() {
    for (total, s, want) in [
        (10, "2", vec![2, 2, 2, 2, 2]),
        (10, "20%", vec![2, 2, 2, 2, 2]),
        (10, "[1, 2, 3]", vec![1, 2, 3, 3, 1]),
        (10, "[1, '20%', -1]", vec![1, 2, 7]),
        (3, "20%", vec![1, 1, 1]),
        (11, "20%", vec![2, 2, 2, 2, 2, 1]),
        (10, "1", vec![1; 10]),
        (10, "0", vec![10]),
        (10, "-1", vec![10]),
        (10, "0%", vec![1; 10]),
        (10, "150%", vec![10]),
        (10, "100%", vec![10]),
        (10, "[2, 0]", vec![2, 8]),
        (5, "10", vec![5]),
        (0, "2", vec![]),
        // Python's float arithmetic: 0.29 * 100 = 28.999999999999996, truncated to 28.
        (100, "29%", vec![28, 28, 28, 16]),
    ] {
        assert_eq!(serial_batches(total, &serial(s)), want, "serial {s} over {total} hosts");
        assert_eq!(serial_batches(total, &serial(s)).iter().sum::<usize>(), total);
    }
}

#[test]
fn threshold_must_be_exceeded_and_a_wholly_failed_batch_always_stops() {
    let pct = |p: f64| MaxFailPercentage::new(p).unwrap();
    for (failed, size, max, want) in [
        (2, 4, 49.0, true),
        (2, 4, 50.0, false),
        (1, 4, 49.0, false),
        (0, 4, 0.0, false),
        (1, 4, 0.0, true),
        (1, 1, 100.0, true),
        (4, 4, 100.0, true),
        (3, 4, 100.0, false),
        (3, 4, 75.0, false),
        (3, 4, 74.9, true),
        (0, 0, 0.0, false),
    ] {
        assert_eq!(threshold_exceeded(failed, size, pct(max)), want, "{failed}/{size} at {max}%");
    }
}

#[test]
fn phases_parse_by_name_and_preflight_is_always_there() {
    let names = |v: &[&str]| select_phases(&v.iter().map(|s| s.to_string()).collect::<Vec<_>>());
    assert_eq!(names(&[]).unwrap(), Phase::ALL.to_vec());
    assert_eq!(names(&["nodes"]).unwrap(), vec![Phase::Preflight, Phase::Nodes]);
    assert_eq!(names(&["verify,etcd-backup"]).unwrap(), vec![Phase::Preflight, Phase::EtcdBackup, Phase::Verify]);
    let err = names(&["nodes", "drain"]).unwrap_err();
    assert_eq!(err.kind, ErrorKind::Input);
    assert!(err.message.contains("`drain`"), "{err}");
    assert!(err.hint.unwrap().contains("etcd-backup, control-plane"));
}

/// A hand-built inventory: groups of hosts, vars as `(scope, name, value)` where scope is a group or a host.
struct TestInventory {
    inv: Inventory,
}

impl TestInventory {
    fn new() -> Self {
        let dir = std::env::temp_dir();
        TestInventory { inv: Inventory::new(dir.join("hosts"), dir) }
    }

    fn group(mut self, name: &str, hosts: &[&str]) -> Self {
        for h in hosts {
            if !self.inv.hosts.contains_key(*h) {
                let host = Host::new(h, Location::new("hosts", 1, 1));
                self.inv.hosts.insert(h.to_string(), host);
            }
        }
        self.inv.groups.insert(name.to_string(), group(name, hosts));
        self.inv.refresh();
        self
    }

    fn var(mut self, scope: &str, name: &str, value: Value, line: usize) -> Self {
        let var = Var { value, origin: Origin::Inventory(Location::new("hosts", line, 1)) };
        if let Some(g) = self.inv.groups.get_mut(scope) {
            g.vars.insert(name.to_string(), var);
        } else if let Some(h) = self.inv.hosts.get_mut(scope) {
            h.vars.insert(name.to_string(), var);
        } else {
            panic!("no group or host {scope}");
        }
        self
    }
}

fn group(name: &str, hosts: &[&str]) -> Group {
    let mut group = Group::new(name);
    group.hosts = hosts.iter().map(|h| h.to_string()).collect();
    group
}

fn cluster() -> TestInventory {
    TestInventory::new()
        .group("masters", &["m1", "m2", "m3"])
        .group("etcd", &["m1", "m2", "m3"])
        .group("nodes", &["m1", "m2", "m3", "i1", "i2", "n1", "n2"])
        .var("m1", "openshift_node_group_name", json!("node-config-master"), 3)
        .var("i1", "openshift_node_group_name", json!("node-config-infra"), 4)
        .var("i2", "openshift_node_group_name", json!("node-config-infra"), 5)
        .var("n1", "openshift_node_group_name", json!("node-config-compute"), 6)
        .var("n2", "openshift_node_group_name", json!("node-config-compute"), 7)
}

/// Builds the plan from the upgrade's flags (`--serial 2` or `--serial=2`), as `commands` hands them over.
fn build(inv: &TestInventory, args: &[&str]) -> Result<Plan> {
    let mut request = PlanRequest::default();
    let mut words = args.iter().flat_map(|a| match a.split_once('=') {
        Some((flag, value)) if a.starts_with("--") => vec![flag.to_string(), value.to_string()],
        _ => vec![a.to_string()],
    });
    while let Some(flag) = words.next() {
        let value = words.next().unwrap_or_else(|| panic!("{flag} needs a value"));
        let flags = &mut request.flags;
        match flag.as_str() {
            "--phase" => request.phases.push(value),
            "--limit" => request.limit = Some(value),
            "--serial" => flags.serial = Some(value),
            "--label" => flags.label = Some(value),
            "--max-fail-percentage" => flags.max_fail_percentage = Some(value),
            "--drain-timeout" => flags.drain_timeout = Some(value),
            "--target-version" => flags.target_version = Some(value),
            other => panic!("the test helper does not know {other}"),
        }
    }
    Plan::build(&inv.inv, &Vars::new(), &request)
}

fn batches(plan: &Plan, phase: Phase) -> Vec<Vec<String>> {
    plan.phase(phase).map(|p| p.batches.clone()).unwrap_or_default()
}

fn b(groups: &[&[&str]]) -> Vec<Vec<String>> {
    groups.iter().map(|g| g.iter().map(|h| h.to_string()).collect()).collect()
}

#[test]
fn the_plan_of_an_openshift_cluster() {
    let plan = build(&cluster(), &[]).unwrap();
    let names: Vec<&str> = plan.phases.iter().map(|p| p.phase.name()).collect();
    assert_eq!(names, ["preflight", "etcd-backup", "control-plane", "nodes", "verify"]);
    assert_eq!(batches(&plan, Phase::EtcdBackup), b(&[&["m1", "m2", "m3"]]));
    assert_eq!(batches(&plan, Phase::ControlPlane), b(&[&["m1"], &["m2"], &["m3"]]));
    assert_eq!(batches(&plan, Phase::Nodes), b(&[&["i1"], &["i2"], &["n1"], &["n2"]]));
    assert_eq!(plan.hosts, ["m1", "m2", "m3", "i1", "i2", "n1", "n2"]);
    assert_eq!(plan.settings.serial.origin, Origin::Default);
}

#[test]
fn the_label_selects_compute_nodes_offline() {
    let plan = build(&cluster(), &["--label", "node-role.kubernetes.io/compute=true", "--serial", "2"]).unwrap();
    assert_eq!(batches(&plan, Phase::Nodes), b(&[&["n1", "n2"]]));
    assert_eq!(plan.nodes_not_selected, ["i1", "i2"]);
    assert_eq!(plan.settings.serial.origin, Origin::Flag("--serial".into()));
    let json = plan_json(&plan, &cluster().inv);
    assert_eq!(json["settings"]["label"], json!("node-role.kubernetes.io/compute=true"));
    assert_eq!(json["settings"]["serial"], json!(2));
}

#[test]
fn node_labels_and_custom_node_groups_count_too() {
    let inv = cluster().var("n2", "node_labels", json!({"region": "group1"}), 9).var(
        "i1",
        "node_labels",
        json!("region=group1,zone=a"),
        10,
    );
    let plan = build(&inv, &["--label", "region=group1"]).unwrap();
    assert_eq!(batches(&plan, Phase::Nodes), b(&[&["i1"], &["n2"]]));

    let groups = "[{'name': 'node-config-compute', 'labels': ['tier=gold']}, {'name': 'node-config-infra', \
                  'labels': ['tier=silver']}]";
    let inv = cluster().var("all", "openshift_node_groups", json!(groups), 20);
    let plan = build(&inv, &["--label", "tier=gold"]).unwrap();
    assert_eq!(batches(&plan, Phase::Nodes), b(&[&["n1"], &["n2"]]));
    assert!(build(&inv, &["--label", "node-role.kubernetes.io/compute=true"]).is_err());
}

#[test]
fn a_selector_matching_nothing_says_which_labels_exist() {
    let err = build(&cluster(), &["--label", "region=nowhere"]).unwrap_err();
    assert_eq!(err.kind, ErrorKind::Input);
    assert!(err.message.contains("matches none of the 4 nodes"), "{err}");
    assert!(err.hint.unwrap().contains("node-role.kubernetes.io/compute=true"));
    // Without the nodes phase, the selector has nothing to select.
    assert!(build(&cluster(), &["--label", "region=nowhere", "--phase", "control-plane"]).is_ok());
}

#[test]
fn settings_come_from_inventory_aliases_with_their_place() {
    let inv = cluster()
        .var("all", "openshift_upgrade_nodes_serial", json!("2"), 30)
        .var("nodes", "upgrade_nodes_max_fail_percentage", json!("49"), 31)
        .var("all", "openshift_upgrade_nodes_drain_timeout", json!("10m"), 32);
    let plan = build(&inv, &[]).unwrap();
    assert_eq!(batches(&plan, Phase::Nodes), b(&[&["i1", "i2"], &["n1", "n2"]]));
    assert_eq!(plan.settings.serial.source.as_deref(), Some("openshift_upgrade_nodes_serial"));
    assert_eq!(plan.settings.serial.origin, Origin::Inventory(Location::new("hosts", 30, 1)));
    assert_eq!(plan.settings.max_fail_percentage.value.percent(), 49.0);
    assert_eq!(plan.settings.drain_timeout.value.seconds(), 600);
    // The flag wins.
    let plan = build(&inv, &["--serial", "3"]).unwrap();
    assert_eq!(batches(&plan, Phase::Nodes), b(&[&["i1", "i2", "n1"], &["n2"]]));
}

#[test]
fn hosts_that_disagree_on_a_run_wide_setting_are_an_error() {
    let inv = cluster().var("n1", "upgrade_nodes_max_fail_percentage", json!(30), 40);
    let err = build(&inv, &[]).unwrap_err();
    assert!(err.message.contains("hosts disagree on upgrade_nodes_max_fail_percentage"), "{err}");
    assert!(err.message.contains("i1") && err.message.contains("n1"), "{err}");
    assert_eq!(err.location, Some(Location::new("hosts", 40, 1)));
    // A flag settles it.
    assert!(build(&inv, &["--max-fail-percentage", "10"]).is_ok());
}

#[test]
fn cluster_hooks_are_read_from_the_first_master_and_must_exist() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("hooks")).unwrap();
    std::fs::write(dir.path().join("hooks/migrate.yml"), "- debug: msg=hi\n").unwrap();
    let mut inv = cluster().var("all", "upgrade_cluster_pre_hook", json!("hooks/migrate.yml"), 43);
    inv.inv.dir = dir.path().to_path_buf();
    let plan = build(&inv, &[]).unwrap();
    assert_eq!(plan.cluster_hooks[&HookPoint::ClusterPre].path, dir.path().join("hooks/migrate.yml"));
    let missing = cluster().var("all", "upgrade_cluster_post_hook", json!("hooks/nowhere.yml"), 44);
    let err = build(&missing, &[]).unwrap_err();
    assert!(err.message.contains("upgrade_cluster_post_hook"), "{err}");
    assert_eq!(err.location, Some(Location::new("hosts", 44, 1)));
}

#[test]
fn node_groups_with_their_own_serial_are_batched_on_their_own_infra_first() {
    let inv = cluster()
        .group("compute", &["n1", "n2"])
        .group("infra", &["i1", "i2"])
        .var("compute", "upgrade_nodes_serial", json!("100%"), 41)
        .var("infra", "upgrade_nodes_serial", json!(1), 42);
    let plan = build(&inv, &[]).unwrap();
    assert_eq!(batches(&plan, Phase::Nodes), b(&[&["i1"], &["i2"], &["n1", "n2"]]));
    assert_eq!(plan.settings.serial_groups.len(), 2);
    // Infra first even when the compute nodes come first in the inventory.
    let compute_first = TestInventory::new()
        .group("masters", &["m1"])
        .group("nodes", &["n1", "n2", "i1", "i2"])
        .group("compute", &["n1", "n2"])
        .group("infra", &["i1", "i2"])
        .var("compute", "upgrade_nodes_serial", json!("50%"), 41)
        .var("infra", "upgrade_nodes_serial", json!(1), 42);
    let plan = build(&compute_first, &[]).unwrap();
    assert_eq!(batches(&plan, Phase::Nodes), b(&[&["i1"], &["i2"], &["n1"], &["n2"]]));
    // The flag makes one serial for every node again.
    let plan = build(&inv, &["--serial", "3"]).unwrap();
    assert_eq!(batches(&plan, Phase::Nodes), b(&[&["i1", "i2", "n1"], &["n2"]]));
    assert!(plan.settings.serial_groups.is_empty());
}

#[test]
fn bad_settings_name_their_place() {
    for (name, value, flag_value) in [
        ("upgrade_nodes_serial", json!("abc"), "abc"),
        ("upgrade_nodes_serial", json!("-1%"), "-1%"),
        ("upgrade_nodes_serial", json!([]), "[]"),
        ("upgrade_nodes_max_fail_percentage", json!(101), "101"),
        ("upgrade_nodes_drain_timeout", json!("soon"), "soon"),
        ("upgrade_nodes_serial", json!("{{ serial }}"), "x"),
    ] {
        let err = build(&cluster().var("all", name, value.clone(), 50), &[]).unwrap_err();
        assert_eq!(err.kind, ErrorKind::Input);
        assert_eq!(err.location, Some(Location::new("hosts", 50, 1)), "{name}={value}: {err}");
        assert!(err.message.contains(name), "{err}");
        assert!(err.hint.is_some());
        let flag = match name {
            "upgrade_nodes_serial" => "--serial",
            "upgrade_nodes_max_fail_percentage" => "--max-fail-percentage",
            _ => "--drain-timeout",
        };
        let arg = format!("{flag}={flag_value}");
        let err = build(&cluster(), &[&arg]).unwrap_err();
        assert!(err.message.starts_with(flag), "{err}");
    }
}

#[test]
fn bad_validation_settings_are_refused_at_their_place_before_anything_connects() {
    for (name, value) in [
        ("upgrade_validate_count", json!(0)),
        ("upgrade_validate_count", json!("twice")),
        ("upgrade_validation_interval", json!("0")),
        ("upgrade_validation_timeout", json!("a while")),
        ("upgrade_batch_soak_seconds", json!("long")),
    ] {
        let err = build(&cluster().var("all", name, value.clone(), 50), &[]).unwrap_err();
        assert_eq!(err.kind, ErrorKind::Input, "{name}={value}");
        assert_eq!(err.location, Some(Location::new("hosts", 50, 1)), "{name}={value}: {err}");
        assert!(err.message.contains(name), "{err}");
        assert!(err.hint.is_some());
    }
    // A soak with the validation off has nothing to watch with: refused at the soak's line.
    let inv = cluster().var("all", "upgrade_validation_timeout", json!(0), 40).var(
        "all",
        "upgrade_batch_soak_seconds",
        json!(60),
        50,
    );
    let err = build(&inv, &[]).unwrap_err();
    assert_eq!(err.location, Some(Location::new("hosts", 50, 1)), "{err}");
    assert!(err.message.contains("upgrade_validation_timeout is 0"), "{err}");
    // Templated values are the run's to render and check.
    assert!(build(&cluster().var("all", "upgrade_validate_count", json!("{{ n }}"), 50), &[]).is_ok());
    assert!(build(&cluster().var("all", "upgrade_validation_timeout", json!(0), 50), &[]).is_ok());
}

#[test]
fn no_masters_is_an_input_error() {
    let inv = TestInventory::new().group("nodes", &["n1"]);
    let err = build(&inv, &[]).unwrap_err();
    assert_eq!(err.kind, ErrorKind::Input);
    assert!(err.message.contains("no `masters` group"), "{err}");
    let inv = TestInventory::new().group("masters", &[]).group("nodes", &["n1"]);
    assert!(build(&inv, &[]).unwrap_err().message.contains("empty `masters` group"));
}

#[test]
fn without_an_etcd_group_the_first_master_is_backed_up() {
    let inv = TestInventory::new().group("masters", &["m1", "m2"]).group("nodes", &["n1"]);
    let plan = build(&inv, &[]).unwrap();
    assert_eq!(batches(&plan, Phase::EtcdBackup), b(&[&["m1"]]));
}

#[test]
fn phases_left_out_are_absent_and_their_hosts_too() {
    let plan = build(&cluster(), &["--phase", "nodes"]).unwrap();
    let names: Vec<&str> = plan.phases.iter().map(|p| p.phase.name()).collect();
    assert_eq!(names, ["preflight", "nodes"]);
    // Masters are always checked by preflight (a nodes-only run needs them at the target already).
    assert_eq!(plan.hosts, ["m1", "m2", "m3", "i1", "i2", "n1", "n2"]);
    let json = plan_json(&plan, &cluster().inv);
    let names: Vec<&str> = json["phases"].as_array().unwrap().iter().map(|p| p["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["preflight", "nodes"]);
}

#[test]
fn limit_restricts_the_nodes() {
    let plan = build(&cluster(), &["--limit", "n1,i2"]).unwrap();
    assert_eq!(batches(&plan, Phase::Nodes), b(&[&["i2"], &["n1"]]));
    let err = build(&cluster(), &["--limit", "m1"]).unwrap_err();
    assert!(err.message.contains("selects none of the nodes"), "{err}");
}

#[test]
fn hooks_are_per_host_and_must_exist() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("hooks")).unwrap();
    std::fs::write(dir.path().join("hooks/compute.yml"), "- debug: msg=hi\n").unwrap();
    std::fs::write(dir.path().join("hooks/master.yml"), "- debug: msg=hi\n").unwrap();
    let mut inv = cluster()
        .group("compute", &["n1", "n2"])
        .var("compute", "openshift_node_upgrade_pre_hook", json!("hooks/compute.yml"), 60)
        .var("masters", "upgrade_master_post_hook", json!(dir.path().join("hooks/master.yml")), 61);
    inv.inv.dir = dir.path().to_path_buf();
    let plan = build(&inv, &[]).unwrap();
    let hook = &plan.hooks["n1"][&HookPoint::NodePre];
    assert_eq!(hook.path, dir.path().join("hooks/compute.yml"));
    assert_eq!(hook.variable, "openshift_node_upgrade_pre_hook");
    assert!(!plan.hooks.contains_key("i1"));
    assert_eq!(plan.hooks["m2"][&HookPoint::MasterPost].path, dir.path().join("hooks/master.yml"));
    let text = plan_text(&plan, &inv.inv);
    assert!(text.contains("hooks/compute.yml"), "{text}");
    assert_eq!(text.matches("master.yml").count(), 3, "--plan: every master's hook: {text}");
    // Before a run: once per set of hosts that share them.
    let brief = crate::plan::plan_text_brief(&plan, &inv.inv);
    assert_eq!(brief.matches("master.yml").count(), 1, "{brief}");
    assert!(brief.contains("    hooks of every host:\n      post hook: "), "{brief}");
    assert!(brief.contains("    hooks of n1, n2:\n      pre hook: "), "the compute nodes only: {brief}");

    let inv = inv.var("i1", "upgrade_node_post_hook", json!("hooks/missing.yml"), 62);
    let err = build(&inv, &[]).unwrap_err();
    assert!(err.message.contains("upgrade_node_post_hook") && err.message.contains("missing.yml"), "{err}");
    assert_eq!(err.location, Some(Location::new("hosts", 62, 1)));
}

#[test]
fn the_json_contract_holds() {
    let plan = build(&cluster(), &["--serial", "2", "--max-fail-percentage", "25", "--drain-timeout", "90s"]).unwrap();
    let json = plan_json(&plan, &cluster().inv);
    let phase = |name: &str| json["phases"].as_array().unwrap().iter().find(|p| p["name"] == name).cloned().unwrap();
    assert_eq!(phase("etcd-backup")["batches"], json!([["m1", "m2", "m3"]]));
    assert_eq!(phase("control-plane")["batches"], json!([["m1"], ["m2"], ["m3"]]));
    assert_eq!(phase("nodes")["batches"], json!([["i1", "i2"], ["n1", "n2"]]));
    assert_eq!(phase("preflight")["batches"], json!([]));
    assert_eq!(phase("verify")["batches"], json!([]));
    assert_eq!(json["settings"]["serial"], json!(2));
    assert_eq!(json["settings"]["max_fail_percentage"], json!(25));
    assert_eq!(json["settings"]["drain_timeout_seconds"], json!(90));
    assert_eq!(json["settings"]["label"], Value::Null);
}
