//! Flavours in `--plan`: which built-in steps upgrade the cluster, why, and with which packages and target; before
//! anything connects.

use serde_json::{Value, json};

use crate::support::{Scenario, openshift_fixture};

fn plan_json(inventory: &std::path::Path, extra: &[&str]) -> Value {
    let out =
        Scenario::new().arg("--inventory").arg(inventory).args(["--plan", "--output", "json"]).args(extra).success();
    out.json()
}

#[test]
fn every_openshift_ansible_example_inventory_plans_the_openshift_flavour_with_origin_packages() {
    // The fixtures' group_vars/OSEv3/vars.yml sets openshift_deployment_type: origin, and a group_vars file beats
    // [OSEv3:vars] in Ansible: every example is an origin cluster.
    for name in ["hosts.example", "hosts.localhost", "hosts.openstack", "hosts.glusterfs.native.example"] {
        let plan = plan_json(&openshift_fixture(name), &[]);
        assert_eq!(plan["flavor"]["name"], "openshift", "{name}");
        assert_eq!(
            plan["flavor"]["packages"],
            json!({"masters": ["origin", "origin-clients", "origin-node"], "nodes": ["origin", "origin-node"]}),
            "{name}"
        );
        let reason = plan["flavor"]["reason"].as_str().unwrap_or_default();
        assert!(reason.contains("OSEv3"), "{name}: the reason names the OSEv3 group: {reason}");
        assert_eq!(plan["certificate_expiry"]["warning_days"], json!(365), "{name}: openshift-ansible's year");
        assert_eq!(plan["certificate_expiry"]["fail_on_warn"], json!(true), "{name}");
        // The keys CI already reads are still there.
        assert!(plan["phases"].is_array() && plan["settings"]["serial"].is_number(), "{name}: old keys kept");
    }
    Scenario::new()
        .arg("--inventory")
        .arg(openshift_fixture("hosts.example"))
        .arg("--plan")
        .success()
        .stdout_has("Flavor: openshift (guessed: the inventory has an OSEv3 group")
        .stdout_has("packages: masters origin, origin-clients, origin-node; nodes origin, origin-node")
        .stdout_has("certificate-expiry   365 days, fail");
}

#[test]
fn an_enterprise_inventory_upgrades_the_atomic_openshift_packages() {
    // hosts.openstack on its own (without the fixtures' group_vars) says openshift-enterprise.
    let text = std::fs::read_to_string(openshift_fixture("hosts.openstack")).expect("fixture");
    let scenario = Scenario::new().file("hosts", &text);
    let hosts = scenario.path("hosts");
    let plan = plan_json(&hosts, &[]);
    assert_eq!(plan["flavor"]["name"], "openshift");
    assert_eq!(
        plan["flavor"]["packages"],
        json!({
            "masters": ["atomic-openshift", "atomic-openshift-clients", "atomic-openshift-node"],
            "nodes": ["atomic-openshift", "atomic-openshift-node"],
        })
    );
}

#[test]
fn openshift_deployment_type_alone_makes_an_inventory_openshift() {
    let scenario = Scenario::new()
        .file("hosts", "[masters]\nm1\n[nodes]\nn1\n[all:vars]\nopenshift_deployment_type=openshift-enterprise\n");
    let plan = plan_json(&scenario.path("hosts"), &[]);
    assert_eq!(plan["flavor"]["name"], "openshift");
    let reason = plan["flavor"]["reason"].as_str().unwrap_or_default();
    assert!(reason.contains("openshift_deployment_type is set"), "{reason}");
}

#[test]
fn a_kubeadm_inventory_still_plans_kubeadm_and_upgrade_flavor_overrides_the_guess() {
    let scenario =
        Scenario::new().file("hosts", "[masters]\nm1\n[nodes]\nn1\n[all:vars]\nupgrade_target_version=v1.29.1\n");
    let plan = plan_json(&scenario.path("hosts"), &[]);
    assert_eq!(plan["flavor"]["name"], "kubeadm");
    assert_eq!(plan["flavor"]["packages"], Value::Null);
    assert_eq!(plan["certificate_expiry"]["warning_days"], json!(30), "kubeadm's renewal window");
    assert_eq!(plan["settings"]["target_version"], "v1.29.1");

    let plan = plan_json(&openshift_fixture("hosts.example"), &["-e", "upgrade_flavor=kubeadm"]);
    assert_eq!(plan["flavor"]["name"], "kubeadm");
    assert!(plan["flavor"]["reason"].as_str().unwrap_or_default().contains("upgrade_flavor from -e"));

    Scenario::new()
        .arg("--inventory")
        .arg(scenario.path("hosts"))
        .args(["--plan", "-e", "upgrade_flavor=rpm"])
        .failure(2)
        .stderr_has("upgrade_flavor `rpm`")
        .stderr_has("kubeadm, openshift or custom");
}

#[test]
fn the_custom_flavour_refuses_to_plan_without_the_commands_it_runs() {
    let scenario = Scenario::new().file(
        "hosts",
        "[masters]\nm1\n[nodes]\nn1\n[all:vars]\nupgrade_flavor=custom\nupgrade_master_upgrade_command=/opt/up.sh\n",
    );
    Scenario::new()
        .arg("--inventory")
        .arg(scenario.path("hosts"))
        .arg("--plan")
        .failure(2)
        .stderr_has("n1 has no upgrade_node_upgrade_command");
    let plan = plan_json(&scenario.path("hosts"), &["-e", "upgrade_node_upgrade_command=/opt/up.sh"]);
    assert_eq!(plan["flavor"]["name"], "custom");
}

#[test]
fn the_openshift_target_comes_from_the_package_version_then_the_image_tag_then_the_release() {
    let inventory = |vars: &str| {
        let scenario = Scenario::new().file(
            "hosts",
            &format!("[OSEv3:children]\nmasters\nnodes\n[masters]\nm1\n[nodes]\nn1\n[OSEv3:vars]\n{vars}"),
        );
        let plan = plan_json(&scenario.path("hosts"), &[]);
        (plan["settings"]["target_version"].clone(), plan["setting_origins"]["target_version"]["source"].clone())
    };
    // The image tag must name the target's release (see the test below); the package version comes first.
    let all = "openshift_release=\"3.11\"\nopenshift_image_tag=v3.11.248\nopenshift_pkg_version=-3.11.248-1.git.0\n";
    assert_eq!(inventory(all), (json!("v3.11.248-1.git.0"), json!("openshift_pkg_version")));
    assert_eq!(
        inventory(&format!("{all}upgrade_target_version=3.11.248\n")),
        (json!("v3.11.248"), json!("upgrade_target_version")),
        "the canonical name wins"
    );
    assert_eq!(
        inventory("openshift_release=\"3.11\"\nopenshift_image_tag=v3.11.240\n"),
        (json!("v3.11.240"), json!("openshift_image_tag"))
    );
    assert_eq!(inventory("openshift_release=3.11.232\n"), (json!("v3.11.232"), json!("openshift_release")));
    // A bare minor release names no 3.11.z: no target, and the plan says why.
    assert_eq!(inventory("openshift_release=\"3.11\"\n").0, Value::Null);
    let scenario = Scenario::new()
        .file("hosts", "[OSEv3:children]\nmasters\n[masters]\nm1\n[OSEv3:vars]\nopenshift_release=\"3.11\"\n");
    Scenario::new()
        .arg("--inventory")
        .arg(scenario.path("hosts"))
        .arg("--plan")
        .success()
        .stdout_has("names no patch release");
}

#[test]
fn a_target_that_names_another_release_than_openshift_image_tag_is_refused_naming_both() {
    // The image tag moves the control plane, the target the packages: they must name one release (D13).
    let scenario = Scenario::new().file(
        "hosts",
        "[OSEv3:children]\nmasters\nnodes\n[masters]\nm1\n[nodes]\nn1\n[OSEv3:vars]\n\
         openshift_image_tag=v3.11.240\nopenshift_pkg_version=-3.11.248\n",
    );
    let plan = |extra: &[&str]| {
        let mut run = Scenario::new().arg("--inventory").arg(scenario.path("hosts")).arg("--plan");
        for arg in extra {
            run = run.arg(arg);
        }
        run
    };
    plan(&[])
        .failure(2)
        .stderr_has("the target v3.11.248 (openshift_pkg_version at ")
        .stderr_has("and openshift_image_tag v3.11.240 (openshift_image_tag at ")
        .stderr_has("hosts:9")
        .stderr_has("--target-version");
    plan(&["-e", "openshift_image_tag=v3.11.100"]).failure(2).stderr_has("(openshift_image_tag from -e ");
    plan(&["--target-version", "3.11.250"]).failure(2).stderr_has("the target v3.11.250 (--target-version)");
    // The same release, a minor-only tag, or the tag alone: no disagreement.
    plan(&["-e", "openshift_image_tag=v3.11.248"]).success();
    plan(&["-e", "openshift_image_tag=v3.11"]).success();
    plan(&["--target-version", "v3.11.240"]).success();
}

#[test]
fn certificate_expiry_settings_take_openshift_ansible_names() {
    let scenario = Scenario::new().file(
        "hosts",
        "[OSEv3:children]\nmasters\n[masters]\nm1\n[OSEv3:vars]\nopenshift_certificate_expiry_warning_days=180\nopenshift_certificate_expiry_fail_on_warn=False\n",
    );
    let plan = plan_json(&scenario.path("hosts"), &[]);
    assert_eq!(plan["certificate_expiry"]["warning_days"], json!(180));
    assert_eq!(plan["certificate_expiry"]["fail_on_warn"], json!(false));
    assert_eq!(
        plan["certificate_expiry"]["origins"]["warning_days"]["source"],
        "openshift_certificate_expiry_warning_days"
    );
    let plan = plan_json(&scenario.path("hosts"), &["-e", "upgrade_certificate_expiry_warning_days=90"]);
    assert_eq!(plan["certificate_expiry"]["warning_days"], json!(90), "-e and the canonical name win");
}

#[test]
fn a_certificate_window_that_is_not_a_number_is_bad_input_at_its_line() {
    let scenario =
        Scenario::new().file("hosts", "[masters]\nm1\n[all:vars]\nupgrade_certificate_expiry_warning_days=a year\n");
    Scenario::new()
        .arg("--inventory")
        .arg(scenario.path("hosts"))
        .arg("--plan")
        .failure(2)
        .stderr_has("hosts:4:1")
        .stderr_has("upgrade_certificate_expiry_warning_days")
        .stderr_has("not a whole number of days");
}
