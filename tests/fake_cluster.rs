//! The scripted fake cluster API (testing/fake-cluster/) answers the command shapes of docs/DESIGN.md's command table,
//! keeps state, obeys its cues and logs every call in order.

use std::process::Output;
use std::time::Duration;

use serde_json::Value;

use crate::support::fake_cluster::FakeCluster;

const DRAIN_FLAGS: [&str; 3] = ["--ignore-daemonsets", "--delete-emptydir-data", "--force"];

fn cluster() -> FakeCluster {
    FakeCluster::init(
        "# three nodes\n\
         master-1 v1.28.5 node-role.kubernetes.io/control-plane=\n\
         node-1 1.28.5 region=group1,zone=a\n\
         \n\
         node-2 v1.28.5 region=group2 cordoned notready\n",
    )
}

fn ok(out: &Output) -> String {
    assert!(
        out.status.success(),
        "expected success, got {:?}\nstdout: {}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn failed(out: &Output) -> String {
    assert_eq!(
        out.status.code(),
        Some(1),
        "expected exit 1, got {:?}; stdout: {}",
        out.status,
        String::from_utf8_lossy(&out.stdout)
    );
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn drain(cluster: &FakeCluster, node: &str, extra: &[&str]) -> Output {
    let mut args = vec!["drain", node];
    args.extend(DRAIN_FLAGS);
    args.extend(extra);
    cluster.run("kubectl", &args)
}

fn nodes(cluster: &FakeCluster) -> Vec<Value> {
    let text = ok(&cluster.run("kubectl", &["get", "nodes", "-o", "json"]));
    let list: Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("not JSON ({e}):\n{text}"));
    assert_eq!(list["kind"], "List");
    list["items"].as_array().expect("items").clone()
}

fn ready_status(node: &Value) -> String {
    let conditions = node["status"]["conditions"].as_array().expect("conditions");
    let ready = conditions.iter().find(|c| c["type"] == "Ready").expect("a Ready condition");
    ready["status"].as_str().expect("status").to_string()
}

#[test]
fn get_nodes_is_a_standard_node_list() {
    let cluster = cluster();
    let items = nodes(&cluster);
    let names: Vec<&str> = items.iter().map(|n| n["metadata"]["name"].as_str().unwrap_or("")).collect();
    assert_eq!(names, ["master-1", "node-1", "node-2"]);

    let node1 = &items[1];
    assert_eq!(node1["kind"], "Node");
    assert_eq!(node1["status"]["nodeInfo"]["kubeletVersion"], "v1.28.5", "versions are reported with their v");
    assert_eq!(node1["metadata"]["labels"]["region"], "group1");
    assert_eq!(node1["metadata"]["labels"]["zone"], "a");
    assert_eq!(node1["metadata"]["labels"]["kubernetes.io/hostname"], "node-1");
    assert_eq!(node1["spec"].get("unschedulable"), None, "left out when false, like the API server");
    assert_eq!(ready_status(node1), "True");
    assert_eq!(items[0]["metadata"]["labels"]["node-role.kubernetes.io/control-plane"], "");

    let node2 = &items[2];
    assert_eq!(node2["spec"]["unschedulable"], true);
    assert_eq!(ready_status(node2), "False");
}

#[test]
fn get_one_node_and_unknown_nodes() {
    let cluster = cluster();
    let text = ok(&cluster.run("kubectl", &["get", "node", "node-1", "-o", "json"]));
    let node: Value = serde_json::from_str(&text).expect("JSON");
    assert_eq!(node["metadata"]["name"], "node-1");

    let err = failed(&cluster.run("kubectl", &["get", "node", "nope", "-o", "json"]));
    assert!(err.contains(r#"nodes "nope" not found"#), "{err}");
    let err = failed(&cluster.run("kubectl", &["cordon", "nope"]));
    assert!(err.contains("NotFound"), "{err}");
    failed(&cluster.run("kubectl", &["get", "nodes"]));
}

#[test]
fn cordon_drain_uncordon_change_the_node() {
    let cluster = cluster();
    assert!(!cluster.is_cordoned("node-1"));
    assert_eq!(ok(&cluster.run("kubectl", &["cordon", "node-1"])), "node/node-1 cordoned\n");
    assert!(cluster.is_cordoned("node-1"));
    assert_eq!(ok(&cluster.run("kubectl", &["uncordon", "node-1"])), "node/node-1 uncordoned\n");
    assert!(!cluster.is_cordoned("node-1"));

    let out = ok(&drain(&cluster, "node-1", &["--timeout=30s"]));
    assert!(out.contains("node/node-1 drained"), "{out}");
    assert!(cluster.is_cordoned("node-1"), "drain cordons");
    assert_eq!(nodes(&cluster)[1]["spec"]["unschedulable"], true);
}

#[test]
fn drain_needs_the_flags_kubectl_needs() {
    let cluster = cluster();
    let err = failed(&cluster.run("kubectl", &["drain", "node-1", "--force", "--delete-emptydir-data"]));
    assert!(err.contains("--ignore-daemonsets"), "{err}");
    let err = failed(&cluster.run("kubectl", &["drain", "node-1", "--force", "--ignore-daemonsets"]));
    assert!(err.contains("--delete-emptydir-data"), "{err}");
    let err = failed(&drain(&cluster, "node-1", &["--timeout=ten"]));
    assert!(err.contains("--timeout"), "{err}");
    let err = failed(&drain(&cluster, "node-1", &["--bogus"]));
    assert!(err.contains("unknown flag: --bogus"), "{err}");
}

#[test]
fn oc_adm_does_the_same() {
    let cluster = cluster();
    ok(&cluster.run("oc", &["adm", "cordon", "master-1"]));
    assert!(cluster.is_cordoned("master-1"));
    ok(&cluster.run("oc", &["adm", "drain", "master-1", "--ignore-daemonsets", "--delete-emptydir-data", "--force"]));
    ok(&cluster.run("oc", &["adm", "uncordon", "master-1"]));
    assert!(!cluster.is_cordoned("master-1"));
    assert_eq!(nodes(&cluster).len(), 3);
}

#[test]
fn a_hanging_drain_hangs_until_killed() {
    let cluster = cluster();
    cluster.set_cue("node-1", "drain_hang", "");
    let mut args = vec!["drain", "node-1"];
    args.extend(DRAIN_FLAGS);
    args.push("--timeout=1s"); // a stuck kubectl ignores its own timeout: the tool must end it
    let mut child = cluster
        .command("kubectl", &args)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn");
    std::thread::sleep(Duration::from_millis(2500));
    assert!(child.try_wait().expect("try_wait").is_none(), "the drain returned instead of hanging");
    assert!(cluster.is_cordoned("node-1"), "the hanging drain cordoned first");
    child.kill().expect("kill");
    let status = child.wait().expect("wait");
    assert!(!status.success());
}

#[test]
fn a_slow_drain_fails_on_its_timeout_like_kubectl() {
    let cluster = cluster();
    cluster.set_cue("node-1", "drain_hang", "30");
    let err = failed(&drain(&cluster, "node-1", &["--timeout=1s"]));
    assert!(err.contains("global timeout reached: 1s"), "{err}");

    cluster.set_cue("node-2", "drain_hang", "1");
    ok(&drain(&cluster, "node-2", &["--timeout=20s"]));
}

#[test]
fn a_failing_drain_exits_non_zero() {
    let cluster = cluster();
    cluster.set_cue("node-1", "drain_fail", "");
    let err = failed(&drain(&cluster, "node-1", &[]));
    assert!(err.contains("disruption budget"), "{err}");
    cluster.set_cue("node-2", "drain_fail", "custom reason");
    assert!(failed(&drain(&cluster, "node-2", &[])).contains("custom reason"));
}

#[test]
fn kubeadm_and_the_node_upgrade_set_the_version_and_count() {
    let cluster = cluster();
    let out = ok(&cluster.run("kubeadm", &["--node", "master-1", "upgrade", "apply", "v1.29.1", "--yes"]));
    assert!(out.contains("v1.29.1"), "{out}");
    let cp = std::fs::read_to_string(cluster.state_dir().join("control_plane_version")).expect("control_plane_version");
    assert_eq!(cp.trim(), "v1.29.1");
    ok(&cluster.run("kubeadm", &["--node", "node-1", "upgrade", "node"]));
    assert_eq!(cluster.version("node-1"), "v1.28.5", "kubeadm upgrade node does not change the kubelet");

    ok(&cluster.run("fake-node", &["--node", "node-1", "upgrade", "1.29.1"]));
    assert_eq!(cluster.version("node-1"), "v1.29.1");
    assert_eq!(cluster.upgrades("node-1"), 1);
    assert_eq!(nodes(&cluster)[1]["status"]["nodeInfo"]["kubeletVersion"], "v1.29.1");
    ok(&cluster.run("fake-node", &["--node", "node-1", "upgrade", "v1.29.1"]));
    assert_eq!(cluster.upgrades("node-1"), 2, "the counter counts every upgrade");
    assert_eq!(cluster.upgrades("node-2"), 0);

    // The not-ready node becomes ready on restart.
    assert!(!cluster.is_ready("node-2"));
    ok(&cluster.run("fake-node", &["--node", "node-2", "restart"]));
    assert!(cluster.is_ready("node-2"));
}

#[test]
fn kubeadm_apply_needs_yes_and_a_version() {
    let cluster = cluster();
    let err = failed(&cluster.run("kubeadm", &["--node", "master-1", "upgrade", "apply", "v1.29.1"]));
    assert!(err.contains("Are you sure"), "{err}");
    failed(&cluster.run("kubeadm", &["--node", "master-1", "upgrade", "apply", "1.29", "--yes"]));
    let err = failed(&cluster.run("kubeadm", &["upgrade", "node"]));
    assert!(err.contains("--node"), "the node side must know its node: {err}");
}

#[test]
fn upgrade_and_ready_cues() {
    let cluster = cluster();
    cluster.set_cue("node-1", "upgrade_fail", "");
    failed(&cluster.run("kubeadm", &["--node", "node-1", "upgrade", "node"]));
    let err = failed(&cluster.run("fake-node", &["--node", "node-1", "upgrade", "v1.29.1"]));
    assert!(err.contains("upgrade_fail"), "{err}");
    assert_eq!(cluster.version("node-1"), "v1.28.5", "a failed upgrade changes nothing");
    assert_eq!(cluster.upgrades("node-1"), 0);

    cluster.set_cue("master-1", "ready_fail", "");
    ok(&cluster.run("fake-node", &["--node", "master-1", "upgrade", "v1.29.1"]));
    ok(&cluster.run("fake-node", &["--node", "master-1", "restart"]));
    assert!(!cluster.is_ready("master-1"));
    assert_eq!(ready_status(&nodes(&cluster)[0]), "False");

    cluster.set_cue("node-2", "report_version", "v1.27.0");
    assert_eq!(nodes(&cluster)[2]["status"]["nodeInfo"]["kubeletVersion"], "v1.27.0");
}

#[test]
fn the_call_log_keeps_the_order_of_calls() {
    let cluster = cluster();
    ok(&cluster.run("kubectl", &["get", "nodes", "-o", "json"]));
    ok(&cluster.run("kubectl", &["cordon", "node-1"]));
    ok(&drain(&cluster, "node-1", &[]));
    ok(&cluster.run("kubeadm", &["--node", "node-1", "upgrade", "node"]));
    ok(&cluster.run("fake-node", &["--node", "node-1", "upgrade", "v1.29.1"]));
    ok(&cluster.run("fake-node", &["--node", "node-1", "restart"]));
    ok(&cluster.run("kubectl", &["uncordon", "node-1"]));
    ok(&cluster.run("kubectl", &["cordon", "node-2"]));

    assert_eq!(cluster.actions_on("node-1"), ["cordon", "drain", "kubeadm-node", "upgrade", "restart", "uncordon"]);
    let calls = cluster.calls();
    assert_eq!(calls.len(), 8);
    assert_eq!((calls[0].node.as_str(), calls[0].action.as_str()), ("-", "get-nodes"));
    assert_eq!(calls[2].argv, "kubectl drain node-1 --ignore-daemonsets --delete-emptydir-data --force");
    assert_eq!(calls[7].node, "node-2");
}

#[test]
fn the_command_variables_drive_the_fake_through_a_shell() {
    let cluster = cluster();
    // What the executor does with the command variables: template them with the host's variables, run them in sh.
    let render =
        |value: &str| value.replace("{{ node_name }}", "node-1").replace("{{ upgrade_target_version }}", "1.29.1");
    let vars: std::collections::HashMap<_, _> = cluster.command_vars().into_iter().collect();
    let run = |command: String| {
        let out = std::process::Command::new("sh").arg("-c").arg(&command).output().expect("sh");
        ok(&out);
    };
    run(format!("{} cordon node-1", render(&vars["upgrade_kubectl"])));
    run(format!("{} upgrade node", render(&vars["upgrade_kubeadm"])));
    run(render(&vars["upgrade_kubeadm_package_command"]));
    run(render(&vars["upgrade_kubelet_package_command"]));
    run(render(&vars["upgrade_node_restart_command"]));
    run(render(&vars["upgrade_master_restart_command"]));
    assert_eq!(cluster.version("node-1"), "v1.29.1");
    assert_eq!(cluster.upgrades("node-1"), 1);
    assert_eq!(cluster.actions_on("node-1"), ["cordon", "kubeadm-node", "upgrade", "restart", "restart"]);
}

#[test]
fn the_state_directory_can_come_from_the_environment() {
    let cluster = cluster();
    let out = std::process::Command::new(FakeCluster::script_dir().join("kubectl"))
        .args(["cordon", "node-1"])
        .env("FAKE_CLUSTER_DIR", cluster.state_dir())
        .output()
        .expect("run");
    ok(&out);
    assert!(cluster.is_cordoned("node-1"));
}

#[test]
fn a_seed_file_creates_the_state_on_first_use_only() {
    let dir = tempfile::tempdir().expect("temp dir");
    let seed = dir.path().join("cluster.txt");
    std::fs::write(&seed, "node-1 v1.28.5 region=a\nnode-2 v1.28.5 -\n").expect("seed");
    let state = dir.path().join("state");
    let kubectl = |args: &[&str]| {
        std::process::Command::new(FakeCluster::script_dir().join("kubectl"))
            .arg("--state")
            .arg(&state)
            .arg("--seed")
            .arg(&seed)
            .args(args)
            .env_remove("FAKE_CLUSTER_DIR")
            .output()
            .expect("run")
    };
    ok(&kubectl(&["cordon", "node-1"]));
    let text = ok(&kubectl(&["get", "nodes", "-o", "json"]));
    let list: Value = serde_json::from_str(&text).expect("JSON");
    assert_eq!(list["items"].as_array().map(Vec::len), Some(2));
    assert_eq!(list["items"][0]["spec"]["unschedulable"], true, "the second call did not re-seed");
}

#[test]
fn the_demo_etcdctl_answers_the_playbook_shapes() {
    let dir = tempfile::tempdir().expect("temp dir");
    let etcdctl = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("inventories/demo/bin/etcdctl");
    let run = |args: &[&str]| std::process::Command::new(&etcdctl).args(args).output().expect("run");
    let status: Value =
        serde_json::from_str(&ok(&run(&["--endpoints=http://127.0.0.1:2379", "endpoint", "status", "-w", "json"])))
            .expect("JSON");
    assert!(status[0]["Status"]["dbSize"].as_u64().unwrap_or(0) > 0);
    let snapshot = dir.path().join("snapshot.db").display().to_string();
    ok(&run(&["--endpoints=http://127.0.0.1:2379", "snapshot", "save", &snapshot]));
    let check: Value = serde_json::from_str(&ok(&run(&["snapshot", "status", &snapshot, "-w", "json"]))).expect("JSON");
    assert!(check["totalSize"].as_u64().unwrap_or(0) > 0 && check["revision"].as_u64().unwrap_or(0) > 0, "{check}");
    std::fs::write(&snapshot, "garbage").expect("write");
    failed(&run(&["snapshot", "status", &snapshot, "-w", "json"]));
}

#[test]
fn init_rejects_bad_lines() {
    for bad in ["node-1\n", "node-1 v1.28.5 region\n", "node-1 v1.28.5 - sleepy\n", "a b\"c v1.28.5 -\n"] {
        let dir = tempfile::tempdir().expect("temp dir");
        let mut child = std::process::Command::new(FakeCluster::script_dir().join("fake-cluster"))
            .args(["init", "--state"])
            .arg(dir.path())
            .stdin(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("spawn");
        use std::io::Write;
        child.stdin.take().expect("stdin").write_all(bad.as_bytes()).expect("write");
        let out = child.wait_with_output().expect("wait");
        assert!(!out.status.success(), "init accepted {bad:?}");
    }
}

#[test]
fn the_fake_answers_readyz_kubeadm_plan_and_daemon_reload_for_the_kubeadm_steps() {
    let cluster = cluster();
    assert_eq!(ok(&cluster.run("kubectl", &["get", "--raw", "/readyz"])), "ok");
    std::fs::write(cluster.state_dir().join("readyz_fail"), "").expect("cue");
    let err = failed(&cluster.run("kubectl", &["get", "--raw", "/readyz"]));
    assert!(err.contains("readyz check failed"), "{err}");

    let plan = ok(&cluster.run("kubeadm", &["--node", "master-1", "upgrade", "plan", "v1.29.1"]));
    assert!(plan.contains("kubeadm upgrade apply v1.29.1"), "{plan}");
    failed(&cluster.run("kubeadm", &["--node", "master-1", "upgrade", "plan", "1.29"]));
    cluster.set_cue("master-1", "plan_fail", "");
    let err = failed(&cluster.run("kubeadm", &["--node", "master-1", "upgrade", "plan", "v1.29.1"]));
    assert!(err.contains("FATAL"), "{err}");

    ok(&cluster.run("fake-node", &["--node", "node-1", "daemon-reload"]));
    assert_eq!(cluster.actions_on("master-1"), ["kubeadm-plan", "kubeadm-plan"]);
    assert_eq!(cluster.actions_on("node-1"), ["daemon-reload"]);
    assert_eq!(cluster.actions_on("-"), ["readyz", "readyz"]);
}

#[test]
fn configmaps_are_created_once_even_by_racing_callers_then_read_annotated_and_deleted() {
    let cluster = cluster();
    let create = |value: &str| {
        let literal = format!("--from-literal=run={value}");
        cluster.command("kubectl", &["-n", "kube-system", "create", "configmap", "lock", &literal]).output().unwrap()
    };
    // Twenty creates at once: exactly one wins, the others get AlreadyExists.
    let racers: Vec<std::process::Child> = (0..20)
        .map(|i| {
            let literal = format!("--from-literal=run=r{i}");
            let mut command =
                cluster.command("kubectl", &["-n", "kube-system", "create", "configmap", "lock", &literal]);
            command.stdout(std::process::Stdio::null()).stderr(std::process::Stdio::piped());
            command.spawn().unwrap()
        })
        .collect();
    let outputs: Vec<Output> = racers.into_iter().map(|c| c.wait_with_output().unwrap()).collect();
    assert_eq!(outputs.iter().filter(|o| o.status.success()).count(), 1);
    assert!(outputs.iter().filter(|o| !o.status.success()).all(|o| failed(o).contains("AlreadyExists")));
    assert!(failed(&create("again")).contains("already exists"));

    ok(&cluster
        .run("kubectl", &["-n", "kube-system", "annotate", "configmap", "lock", "--overwrite", "upgrade/renewed=5"]));
    let object: Value = serde_json::from_str(&ok(
        &cluster.run("kubectl", &["-n", "kube-system", "get", "configmap", "lock", "-o", "json"])
    ))
    .unwrap();
    assert_eq!(object["metadata"]["annotations"]["upgrade/renewed"], "5");
    assert!(object["data"]["run"].as_str().unwrap().starts_with('r'));
    assert!(
        failed(&cluster.run("kubectl", &["get", "configmap", "lock", "-o", "json"])).contains("NotFound"),
        "another namespace"
    );
    ok(&cluster.run("kubectl", &["-n", "kube-system", "delete", "configmap", "lock"]));
    ok(&create("after"));
}

#[test]
fn pods_and_budgets_follow_the_cues() {
    let cluster = cluster();
    cluster.set_cue("node-1", "pdb_pod", "guarded");
    cluster.set_cue("node-2", "unmanaged_pod", "bare");
    cluster.set_cue("node-2", "emptydir_pod", "cache");
    let pods: Value = serde_json::from_str(&ok(&cluster.run("kubectl", &["get", "pods", "-A", "-o", "json"]))).unwrap();
    let pdbs: Value = serde_json::from_str(&ok(&cluster.run("kubectl", &["get", "pdb", "-A", "-o", "json"]))).unwrap();
    let blockers = upgrade::drain_blockers::find(&pods.to_string(), &pdbs.to_string()).unwrap();
    let said: Vec<String> = blockers.values().flatten().map(ToString::to_string).collect();
    assert_eq!(said.len(), 3, "{said:?}");
    assert!(said[0].starts_with("PodDisruptionBudget default/guarded-pdb allows 0 disruptions"), "{said:?}");
    assert!(
        said[1].starts_with("pod default/bare has no controller")
            && said[2].starts_with("pod default/cache has an emptyDir")
    );
    let actions: Vec<String> = cluster.calls().into_iter().map(|c| c.action).collect();
    assert_eq!(actions, ["get-pods", "get-pdbs"]);
}

/// An OpenShift 3.11 host as the openshift flavour sees it: yum refuses while excluded, rpm reports what yum
/// installed, master-restart and the API health endpoint answer, and 3.11's oc knows only --delete-local-data.
#[test]
fn openshift_hosts_answer_yum_rpm_excluders_and_master_restart() {
    let cluster = FakeCluster::init("m1 v1.11.0+d4cacc0 node-role.kubernetes.io/master=true rpm=3.11.200\n");
    let on_m1 = |tool: &str, args: &[&str]| {
        let mut all = vec!["--node", "m1"];
        all.extend(args);
        cluster.run(tool, &all)
    };
    assert_eq!(ok(&on_m1("rpm", &["-q", "--qf", "%{VERSION}", "atomic-openshift-node"])).trim(), "3.11.200");
    assert_eq!(cluster.excluder("m1", "atomic-openshift-excluder"), "excluded");
    let install = ["install", "-y", "atomic-openshift-3.11.248", "atomic-openshift-node-3.11.248"];
    let err = failed(&on_m1("yum", &install));
    assert!(err.contains("No package atomic-openshift-3.11.248 available"), "{err}");
    ok(&on_m1("excluder", &["atomic-openshift-excluder", "unexclude"]));
    ok(&on_m1("yum", &install));
    assert_eq!(cluster.package_version("m1"), "3.11.248");
    assert_eq!(cluster.version("m1"), "v1.11.0+d4cacc0", "the kubelet reports what every 3.11.z reports");
    ok(&on_m1("excluder", &["atomic-openshift-excluder", "exclude"]));
    assert_eq!(cluster.excluder("m1", "atomic-openshift-excluder"), "excluded");

    ok(&on_m1("master-restart", &["api"]));
    ok(&on_m1("master-restart", &["controllers"]));
    assert_eq!(ok(&cluster.run("oc", &["get", "--raw", "/healthz/ready"])).trim(), "ok");
    let err =
        failed(&cluster.run("oc", &["adm", "drain", "m1", "--ignore-daemonsets", "--delete-emptydir-data", "--force"]));
    assert!(err.contains("unknown flag: --delete-emptydir-data") && err.contains("oc 3.11"), "{err}");
    // kubespray's drain fallback flag came with kubectl 1.18: 3.11's oc refuses it, so upgrade_drain_fallback:
    // disable-eviction is refused on the openshift flavour.
    let fallback =
        ["adm", "drain", "m1", "--ignore-daemonsets", "--delete-local-data", "--force", "--disable-eviction"];
    let err = failed(&cluster.run("oc", &fallback));
    assert!(err.contains("unknown flag: --disable-eviction") && err.contains("oc 3.11"), "{err}");
    let err = failed(&cluster.run("kubectl", &fallback[1..]));
    assert!(err.contains("unknown flag: --disable-eviction") && err.contains("kubectl 1.11"), "{err}");
    ok(&cluster.run("oc", &["adm", "drain", "m1", "--ignore-daemonsets", "--delete-local-data", "--force"]));
    assert_eq!(
        cluster.actions_on("m1"),
        ["yum", "unexclude", "yum", "exclude", "master-restart-api", "master-restart-controllers", "drain"]
    );
}

/// The fake speaks oc 3.11 and kubectl 1.11 on an OpenShift 3.11 cluster: what those versions do not have (`-A`,
/// top-level `oc drain`) is refused as they refuse it, so a built-in step that passes a newer flag fails its test.
#[test]
fn an_openshift_cluster_refuses_what_oc_3_11_and_kubectl_1_11_do_not_have() {
    let cluster = FakeCluster::init("m1 v1.11.0+d4cacc0 node-role.kubernetes.io/master=true rpm=3.11.200\n");
    let err = failed(&cluster.run("oc", &["get", "pods", "-A", "-o", "json"]));
    assert!(err.contains("unknown shorthand flag: 'A' in -A"), "{err}");
    let err = failed(&cluster.run("kubectl", &["get", "pdb", "-A", "-o", "json"]));
    assert!(err.contains("unknown shorthand flag: 'A' in -A") && err.contains("kubectl 1.11"), "{err}");
    ok(&cluster.run("oc", &["get", "pods", "--all-namespaces", "-o", "json"]));
    ok(&cluster.run("oc", &["get", "pdb", "--all-namespaces", "-o", "json"]));
    let err = failed(&cluster.run("oc", &["cordon", "m1"]));
    assert!(err.contains("unknown command \"cordon\""), "oc 3.11 cordons only under adm: {err}");
    ok(&cluster.run("oc", &["adm", "cordon", "m1"]));
    // A kubeadm cluster's kubectl is recent: -A is fine there.
    let kubeadm = FakeCluster::init("n1 v1.29.1 -\n");
    ok(&kubeadm.run("kubectl", &["get", "pods", "-A", "-o", "json"]));
}

/// The images of an OpenShift 3.11 cluster: a master's static pods run what its manifests name once restarted, the
/// API server reports the oldest release its masters run, and the SDN DaemonSets follow the node image tag, all at
/// once while they roll and one node at a time once they are OnDelete.
#[test]
fn openshift_images_follow_manifests_tags_and_the_sdn_update_strategy() {
    let cluster = FakeCluster::init(
        "m1 v1.11.0+d4cacc0 node-role.kubernetes.io/master=true rpm=3.11.200\n\
         m2 v1.11.0+d4cacc0 node-role.kubernetes.io/master=true rpm=3.11.200\n\
         n1 v1.11.0+d4cacc0 node-role.kubernetes.io/compute=true rpm=3.11.200\n",
    );
    let old = "registry.redhat.io/openshift3/ose-control-plane:v3.11.200";
    assert_eq!(cluster.image("m1", "master-api"), old);
    let version = |c: &FakeCluster| ok(&c.run("oc", &["get", "--raw", "/version/openshift"]));
    assert!(version(&cluster).contains("\"gitVersion\": \"v3.11.200\""), "{}", version(&cluster));

    // A manifest that names another image: the pod runs it once the kubelet restarts it.
    let manifest = cluster.state_dir().join("nodes/m1/pods/apiserver.yaml");
    let text = std::fs::read_to_string(&manifest).expect("m1's apiserver.yaml");
    std::fs::write(&manifest, text.replace("v3.11.200", "v3.11.248")).expect("moved manifest");
    assert_eq!(cluster.image("m1", "master-api"), old, "not before its restart");
    ok(&cluster.run("master-restart", &["--node", "m1", "api"]));
    assert_eq!(cluster.image("m1", "master-api"), "registry.redhat.io/openshift3/ose-control-plane:v3.11.248");
    assert!(version(&cluster).contains("v3.11.200"), "m2 still answers 3.11.200: {}", version(&cluster));

    // The SDN: rolling, a new tag moves every node's pods at once; OnDelete, only the pods deleted.
    let node_image = "registry.redhat.io/openshift3/ose-node:v3.11.248";
    let tag = ["-n", "openshift-sdn", "tag", "--source=docker", "--reference", node_image, "openshift-sdn/node:v3.11"];
    let rolling = FakeCluster::init("n1 v1.11.0+d4cacc0 - rpm=3.11.200\nn2 v1.11.0+d4cacc0 - rpm=3.11.200\n");
    ok(&rolling.run("oc", &tag));
    assert_eq!(rolling.image("n2", "sdn"), node_image, "RollingUpdate restarts every node's SDN");
    for ds in ["sdn", "ovs"] {
        let on_delete = r#"{"spec": {"updateStrategy": {"type": "OnDelete"}}}"#;
        ok(&cluster.run("oc", &["-n", "openshift-sdn", "patch", "daemonset", ds, "-p", on_delete]));
    }
    ok(&cluster.run("oc", &tag));
    assert_eq!(cluster.image("n1", "sdn"), "registry.redhat.io/openshift3/ose-node:v3.11.200");
    ok(&cluster.run("oc", &["-n", "openshift-sdn", "delete", "pods", "--field-selector=spec.nodeName=n1"]));
    assert_eq!(cluster.image("n1", "sdn"), node_image);
    assert_eq!(cluster.image("m1", "sdn"), "registry.redhat.io/openshift3/ose-node:v3.11.200");
    let pods = ok(&cluster.run("oc", &["get", "pods", "-n", "openshift-sdn", "-o", "json"]));
    assert!(pods.contains("\"sdn-n1\"") && pods.contains(node_image), "{pods}");
}

#[test]
fn kubeadm_certs_check_expiration_prints_kubeadms_table() {
    let cluster = cluster();
    std::fs::write(cluster.state_dir().join("certs_expire_days"), "12").expect("cue");
    let table = ok(&cluster.run("kubeadm", &["certs", "check-expiration"]));
    assert!(table.contains("CERTIFICATE AUTHORITY"), "{table}");
    let apiserver = table.lines().find(|l| l.starts_with("apiserver ")).expect("an apiserver row");
    assert!(apiserver.contains(" UTC ") && apiserver.contains("12d"), "{apiserver}");
}

#[test]
fn one_configmap_store_serves_the_lock_and_kubeadm_config_and_both_pod_listings() {
    let cluster = cluster();
    ok(&cluster.run("kubectl", &["-n", "kube-system", "create", "configmap", "upgrade-lock", "--from-literal=run=r1"]));
    let kubeadm: Value = serde_json::from_str(&ok(
        &cluster.run("kubectl", &["get", "configmap", "kubeadm-config", "-n", "kube-system", "-o", "json"])
    ))
    .unwrap();
    assert!(kubeadm["data"]["ClusterConfiguration"].as_str().unwrap().contains("kubernetesVersion: v"), "{kubeadm}");
    assert!(
        failed(&cluster.run("kubectl", &["get", "configmap", "kubeadm-config", "-o", "json"])).contains("NotFound")
    );
    let lock: Value = serde_json::from_str(&ok(
        &cluster.run("kubectl", &["-n", "kube-system", "get", "configmap", "upgrade-lock", "-o", "json"])
    ))
    .unwrap();
    assert_eq!(lock["data"]["run"], "r1");
    // The control-plane pods of one namespace, and every namespace's workloads.
    let control_plane: Value = serde_json::from_str(&ok(
        &cluster.run("kubectl", &["get", "pods", "-n", "kube-system", "-l", "component=etcd", "-o", "json"])
    ))
    .unwrap();
    let items = control_plane["items"].as_array().unwrap();
    assert!(!items.is_empty() && items.iter().all(|p| p["metadata"]["labels"]["component"] == "etcd"), "{items:?}");
    let all: Value = serde_json::from_str(&ok(&cluster.run("kubectl", &["get", "pods", "-A", "-o", "json"]))).unwrap();
    assert!(all["items"].as_array().unwrap().iter().any(|p| p["metadata"]["namespace"] == "default"), "{all}");
}
