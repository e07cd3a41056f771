//! OpenShift 3.11's control plane as openshift-ansible moves it, over real sshd hosts with the fake cluster standing
//! in for `oc` 3.11 (and refusing what 3.11's oc refuses) and for the masters' kubelets, which run what their static
//! pod manifests name; a real etcd behind an etcdctl held to etcd 3.2's flags. The packages alone do not move the API
//! server and controllers: their images do, and verify checks what the cluster runs, not what was installed.

use crate::openshift::{OLD, OpenShiftCluster, TARGET};

const OLD_CONTROL_PLANE: &str = "registry.redhat.io/openshift3/ose-control-plane:v3.11.200";
const CONTROL_PLANE: &str = "registry.redhat.io/openshift3/ose-control-plane:v3.11.248";
const NODE: &str = "registry.redhat.io/openshift3/ose-node:v3.11.248";
const OLD_NODE: &str = "registry.redhat.io/openshift3/ose-node:v3.11.200";

#[test]
fn the_control_plane_and_the_sdn_move_to_the_targets_images_and_verify_reads_them_back() {
    let cluster = OpenShiftCluster::new([OLD, OLD, OLD]).with_etcd();
    let run = cluster.upgrade(&["--output", "json"]).expect_code(0);

    // The master's static pods: manifests pointed at the target's images, the pods running them, the manifests as
    // they were kept beside the static pod directory (never in it: the kubelet would run the copy).
    for (pod, file) in [("master-api", "apiserver.yaml"), ("master-controllers", "controller.yaml")] {
        assert_eq!(cluster.fake.image("m1", pod), CONTROL_PLANE, "m1's {pod} runs the target's image");
        assert!(cluster.fake.manifest("m1", file).contains(&format!("image: {CONTROL_PLANE}")), "{file}");
        let kept = cluster.fake.state_dir().join(format!("nodes/m1/pods-before-v{TARGET}/{file}"));
        let kept = std::fs::read_to_string(&kept).unwrap_or_else(|e| panic!("{}: {e}", kept.display()));
        assert!(kept.contains(&format!("image: {OLD_CONTROL_PLANE}")), "the copy is the manifest before: {kept}");
    }
    assert_eq!(cluster.fake.image("m1", "master-etcd"), "registry.redhat.io/rhel7/etcd:3.2.32", "as openshift-ansible");
    // The SDN: every upgraded host's pods restarted on the node image, in its own window.
    for host in ["m1", "n1", "n2"] {
        assert_eq!(cluster.fake.image(host, "sdn"), NODE, "{host}'s SDN pods");
    }
    let calls = cluster.fake.calls();
    let position = |node: &str, action: &str| {
        calls.iter().position(|c| c.node == node && c.action == action).unwrap_or_else(|| panic!("{node} {action}"))
    };
    let on_delete = calls.iter().position(|c| c.action == "patch-daemonset").expect("the DaemonSets made OnDelete");
    let tag = calls.iter().position(|c| c.action == "tag").expect("the node image tag moved");
    assert!(on_delete < tag, "OnDelete before the tag, or every node's SDN restarts at once");
    assert!(position("n1", "drain") < position("n1", "delete-sdn-pods"), "n1's SDN restarts in its window");
    // The pre-pull came before any manifest changed, on the master itself.
    assert!(position("m1", "pull") < position("m1", "master-restart-api"));

    // Verify read what the cluster runs: the release the API server reports, and named what is left to the operator.
    let summary: serde_json::Value =
        serde_json::from_str(run.stdout_text().lines().last().expect("the summary line")).expect("a JSON summary");
    assert_eq!(summary["event"], "summary");
    let left = summary["left_to_operator"].as_array().expect("left_to_operator in the summary");
    let router = left.iter().find(|w| w["workload"] == "dc/router").expect("the router is named");
    assert_eq!(router["image"], "registry.redhat.io/openshift3/ose-haproxy-router:v3.11.200");
    let reads: Vec<String> = cluster.actions_on("-");
    assert!(reads.contains(&"version-openshift".to_string()), "verify asked /version/openshift: {reads:?}");

    // A second run finds every host at the target, its control plane included.
    cluster.upgrade(&[]).expect_code(0).output_has("nothing to upgrade");
}

/// What an earlier version of this tool left (D1): the packages at the target, the control plane still on the old
/// images. The master is not at the target: it is upgraded again, and this time its control plane moves.
#[test]
fn a_master_whose_packages_are_at_the_target_but_whose_control_plane_is_not_is_upgraded() {
    let cluster = OpenShiftCluster::new([TARGET, TARGET, TARGET]).with_etcd();
    assert_eq!(cluster.fake.image("m1", "master-api"), CONTROL_PLANE, "init: the images of the installed release");
    // The control plane left behind, as a package-only upgrade leaves it.
    for file in ["apiserver.yaml", "controller.yaml"] {
        let path = cluster.fake.state_dir().join(format!("nodes/m1/pods/{file}"));
        let text = std::fs::read_to_string(&path).expect("manifest");
        std::fs::write(&path, text.replace(CONTROL_PLANE, OLD_CONTROL_PLANE)).expect("old manifest");
    }
    for pod in ["master-api", "master-controllers"] {
        std::fs::write(cluster.fake.state_dir().join(format!("nodes/m1/images/{pod}")), OLD_CONTROL_PLANE).unwrap();
    }
    cluster
        .upgrade(&[])
        .expect_code(0)
        .output_has("[n1] skipped: already at v3.11.248: installed on the host")
        .output_has("result: success");
    assert_eq!(cluster.fake.image("m1", "master-api"), CONTROL_PLANE, "m1's control plane moved this time");
    assert_eq!(cluster.fake.upgrades("m1"), 1, "m1 went through its upgrade");
}

/// A kubelet that does not run the new manifest (here: restarts that restart nothing): the health gate waits for the
/// upgraded master's own pods at the target's image and stops the run before anything else moves.
#[test]
fn a_master_whose_api_server_does_not_come_back_at_the_new_image_stops_the_run() {
    let cluster = OpenShiftCluster::new([OLD, OLD, OLD]).with_etcd();
    let restarts_nothing = ["upgrade_openshift_master_restart_command=true", "upgrade_node_restart_command=true"];
    let quick = ["upgrade_control_plane_ready_timeout=3", "upgrade_control_plane_ready_delay=1"];
    cluster
        .upgrade(&["-e", restarts_nothing[0], "-e", restarts_nothing[1], "-e", quick[0], "-e", quick[1]])
        .expect_code(1)
        .output_has("[m1] FAILED at control-plane-pods")
        .output_has(&format!("master-api-m1 runs {OLD_CONTROL_PLANE}, not {CONTROL_PLANE}"));
    assert!(cluster.actions_on("n1").is_empty(), "no node was touched: {:?}", cluster.actions_on("n1"));
}

/// With the per-master pod check off, verify still reads what the cluster runs: the API server's release and the
/// control-plane pods' images, and fails a run that left them behind (exit 1), instead of reporting success.
#[test]
fn verify_fails_a_run_whose_control_plane_still_runs_the_old_release() {
    let cluster = OpenShiftCluster::new([OLD, TARGET, TARGET]).with_etcd();
    let restarts_nothing = ["upgrade_openshift_master_restart_command=true", "upgrade_node_restart_command=true"];
    cluster
        .upgrade(&[
            "-e",
            restarts_nothing[0],
            "-e",
            restarts_nothing[1],
            "-e",
            "upgrade_control_plane_pods_check=false",
        ])
        .expect_code(1)
        .output_has("verify found problems")
        .output_has("the API server reports OpenShift v3.11.200, not v3.11.248")
        .output_has(&format!("master-api-m1 runs {OLD_CONTROL_PLANE}"));
}

/// A registry without the target's image: the pre-pull fails on the master and no manifest changes, so the kubelet
/// never loses the pod it runs.
#[test]
fn a_failed_pre_pull_stops_before_any_manifest_changes() {
    let cluster = OpenShiftCluster::new([OLD, OLD, OLD]).with_etcd();
    cluster.fake.set_cue("m1", "pull_fail", "");
    cluster.upgrade(&[]).expect_code(1).output_has("[m1] FAILED at upgrade").output_has("manifest for");
    assert!(cluster.fake.manifest("m1", "apiserver.yaml").contains(OLD_CONTROL_PLANE), "the manifest is untouched");
    assert_eq!(cluster.fake.image("m1", "master-api"), OLD_CONTROL_PLANE);
    assert_eq!(cluster.fake.image("n1", "sdn"), OLD_NODE, "nothing moved the SDN either");
}

/// The flavour does what openshift-ansible's z-stream upgrade does and no more: a 3.10 cluster asked for 3.11 is
/// refused before anything moves (a package swap would leave kubelets newer than the API server), whatever
/// --allow-skip-minor says.
#[test]
fn a_minor_upgrade_is_refused_with_openshift_ansibles_playbooks_named_and_nothing_touched() {
    let cluster = OpenShiftCluster::new(["3.10.45", "3.10.45", "3.10.45"]).with_etcd();
    cluster
        .upgrade(&["--allow-skip-minor"])
        .expect_code(2)
        .output_has("the openshift flavour upgrades within a minor release only")
        .output_has("upgrades/v3_11/upgrade_control_plane.yml");
    for host in ["m1", "n1", "n2"] {
        assert!(
            !cluster.actions_on(host).iter().any(|a| a == "cordon" || a == "yum"),
            "{host} was touched: {:?}",
            cluster.actions_on(host)
        );
    }
}

/// oc 3.11 has no `-A`: the drain blockers are read with --all-namespaces, so they are checked on 3.11 too, and a
/// run that makes them fatal is not refused for a read that failed on a flag.
#[test]
fn drain_blockers_are_read_with_flags_oc_3_11_has() {
    let cluster = OpenShiftCluster::new([TARGET, OLD, TARGET]).with_etcd();
    cluster.fake.set_cue("n1", "pdb_pod", "guarded");
    cluster
        .upgrade(&["--phase", "nodes", "-e", "upgrade_fail_on_drain_blockers=true"])
        .expect_code(1)
        .output_has("PodDisruptionBudget default/guarded-pdb allows 0 disruptions")
        .check("the lists were read", |o| !o.output().contains("drain blockers not checked"));
    assert!(cluster.actions_on("n1").iter().all(|a| a != "cordon"), "refused before the cordon");
}

/// The README's OpenShift demo as a new user runs it (./reset, then the upgrade), on a private copy: 3 masters, an
/// infra and 4 compute nodes, with stand-ins that speak oc 3.11 and etcdctl 3.2 (no `-A`, no `--cluster`), ends in
/// success with the control plane moved and verify reading it back.
#[test]
fn the_openshift_demo_upgrades_three_masters_with_tools_that_speak_3_11_and_ends_in_success() {
    let repo = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = tempfile::Builder::new().prefix("upgrade-demo-openshift-").tempdir().expect("temp dir");
    let copy = |from: &std::path::Path, to: &std::path::Path| {
        let out = std::process::Command::new("cp").arg("-R").arg(from).arg(to).output().expect("cp");
        assert!(out.status.success(), "cp {}: {}", from.display(), String::from_utf8_lossy(&out.stderr));
    };
    std::fs::create_dir_all(dir.path().join("inventories/demo/bin")).expect("demo dir");
    copy(&repo.join("inventories/demo-openshift"), &dir.path().join("inventories/demo-openshift"));
    copy(&repo.join("inventories/demo/bin/etcdctl"), &dir.path().join("inventories/demo/bin/etcdctl"));
    std::os::unix::fs::symlink(repo.join("testing"), dir.path().join("testing")).expect("testing link");
    let inventory = dir.path().join("inventories/demo-openshift");
    for leftover in [".state", ".upgrade-state"] {
        let _ = std::fs::remove_dir_all(inventory.join(leftover));
    }
    let reset = std::process::Command::new(inventory.join("reset")).arg("--fast").output().expect("run reset");
    assert!(reset.status.success(), "reset: {}", String::from_utf8_lossy(&reset.stderr));

    let run = crate::support::Scenario::in_dir(dir.path()).inventory(inventory.join("hosts")).run();
    let run = run.expect_code(0).output_has("result: success");
    for master in ["master-1", "master-2", "master-3"] {
        assert!(
            run.output().contains(&format!("[{master}] control plane: apiserver.yaml -> {CONTROL_PLANE}")),
            "{master}'s control plane moved: {}",
            run.output()
        );
    }
    assert!(run.output().contains("verified the cluster's images: the API server reports OpenShift v3.11.248"));
    let fake = crate::support::fake_cluster::FakeCluster::at(&inventory.join(".state/cluster"));
    for master in ["master-1", "master-2", "master-3"] {
        assert_eq!(fake.image(master, "master-api"), CONTROL_PLANE);
        assert_eq!(fake.upgrades(master), 1);
    }
}
