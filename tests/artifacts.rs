//! `upgrade artifacts` on the two demo inventories: the packages and images an upgrade to their target needs, for
//! filling a mirror. The demo's stand-ins answer as the tools do (testing/fake-cluster: `kubeadm config images
//! list`, the kubeadm-config ConfigMap, the DaemonSet list); they stay because the demos must run with nothing but
//! Rust. The real kubeadm path (the target's kubeadm unpacked from the repository) is tested on the Debian hosts
//! (debian.rs).

use serde_json::{Value, json};

use crate::support::Scenario;
use crate::support::demo::{Demo, HOSTS};

#[test]
fn the_kubeadm_demo_lists_its_packages_and_kubeadms_images_with_the_clusters_image_repository() {
    let demo = Demo::new();
    std::fs::write(demo.fake.state_dir().join("image_repository"), "mirror.example:5000/k8s\n").unwrap();
    let run = Scenario::in_dir(demo.dir.path())
        .args(["artifacts", "--inventory"])
        .arg(demo.path("hosts.yml"))
        .args(["--output", "json", "--target", "v1.29.0"])
        .run()
        .expect_code(0);
    let found: Value = serde_json::from_str(run.stdout_text()).expect("one JSON document");
    assert_eq!(found["target"], "v1.29.0", "--target wins over the inventory's v1.29.1");
    assert_eq!(found["flavor"], "kubeadm");
    // The demo installs with its own commands (upgrade_kubeadm_package_command): no repository to name.
    let packages = &found["packages"][0];
    assert_eq!(packages["manager"], "the inventory's own package commands");
    assert_eq!(packages["hosts"], json!(HOSTS));
    assert_eq!(packages["packages"], json!(["kubeadm 1.29.0", "kubelet 1.29.0", "kubectl 1.29.0"]));
    let images: Vec<&str> = found["images"][0]["images"].as_array().unwrap().iter().filter_map(Value::as_str).collect();
    assert_eq!(
        images,
        [
            "mirror.example:5000/k8s/kube-apiserver:v1.29.0",
            "mirror.example:5000/k8s/kube-controller-manager:v1.29.0",
            "mirror.example:5000/k8s/kube-scheduler:v1.29.0",
            "mirror.example:5000/k8s/kube-proxy:v1.29.0",
            "mirror.example:5000/k8s/coredns:v1.11.1",
            "mirror.example:5000/k8s/pause:3.9",
            "mirror.example:5000/k8s/etcd:3.5.10-0",
        ]
    );
    let source = found["images"][0]["source"].as_str().unwrap();
    assert!(source.contains("--image-repository mirror.example:5000/k8s on master-1"), "{source}");
    // Read only: nothing cordoned, upgraded or pulled.
    let actions: Vec<String> = demo.fake.calls().into_iter().map(|c| c.action).collect();
    assert!(actions.iter().all(|a| a.starts_with("get") || a.starts_with("list")), "only reads: {actions:?}");
}

#[test]
fn the_openshift_demo_lists_the_yum_packages_of_masters_and_nodes_and_the_images_of_the_release() {
    let inventory = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("inventories/demo-openshift/hosts");
    let run = Scenario::new().args(["artifacts", "--inventory"]).arg(&inventory).run().expect_code(0);
    let run = run.stdout_has("Artifacts of the upgrade to v3.11.248 (openshift flavour)");
    let run = run.stdout_has("  yum (hosts: master-1, master-2, master-3)\n    atomic-openshift-3.11.248\n");
    let run = run.stdout_has("    atomic-openshift-clients-3.11.248\n");
    let run = run.stdout_has("  yum (hosts: infra-1, node-1, node-2, node-3, node-4)\n");
    let mut run = run.stdout_has("    atomic-openshift-docker-excluder-3.11.248\n");
    for image in [
        "registry.redhat.io/openshift3/ose-control-plane:v3.11.248",
        "registry.redhat.io/openshift3/ose-node:v3.11.248",
        "registry.redhat.io/openshift3/ose-pod:v3.11.248",
        "registry.redhat.io/rhel7/etcd:3.2.32",
    ] {
        run = run.stdout_has(&format!("    {image}\n"));
    }
}

#[test]
fn artifacts_without_a_target_is_bad_input_naming_the_inventory() {
    let demo = Demo::new();
    let hosts = std::fs::read_to_string(demo.path("hosts.yml")).unwrap();
    std::fs::write(demo.path("hosts.yml"), hosts.replace("    upgrade_target_version: v1.29.1\n", "")).unwrap();
    let run = Scenario::in_dir(demo.dir.path()).args(["artifacts", "--inventory"]).arg(demo.path("hosts.yml")).run();
    run.expect_code(2).output_has("no target version").output_has("--target");
    assert!(demo.fake.calls().is_empty(), "no host or cluster was reached");
}
