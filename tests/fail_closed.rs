//! Checks that cannot read what they check fail (issue 21, item 6): verify's final node list, a certificate's end
//! date, the live plan's pod list; and what comes from the cluster reaches the terminal without escape sequences.
//! Faults are injected by wrapper scripts in the test's directory, in front of the fake cluster, as the fault
//! report's reproductions do.

use crate::upgrade::{MASTERS, TARGET, TestCluster};

/// A `kubectl` in the cluster's directory that answers `ARGS` (exactly) with `answer` (exit 0) while `flag` exists
/// (removing it when `once`), and passes everything else to the fake cluster.
fn kubectl_answering(cluster: &TestCluster, args: &str, answer: &str, flag: &std::path::Path, once: bool) -> String {
    let script = cluster.path("kubectl-wrapper");
    let answer_file = cluster.path("kubectl-answer");
    std::fs::write(&answer_file, answer).expect("answer");
    let remove = if once { format!("rm -f {};", flag.display()) } else { String::new() };
    cluster.write(
        "kubectl-wrapper",
        &format!(
            "#!/bin/sh\nif [ \"$*\" = \"{args}\" ] && [ -e {flag} ]; then {remove} cat {answer}; exit 0; fi\nexec {kubectl} \"$@\"\n",
            flag = flag.display(),
            answer = answer_file.display(),
            kubectl = cluster.fake.kubectl_command()
        ),
    );
    format!("sh {}", script.display())
}

#[test]
fn verify_whose_final_node_list_cannot_be_parsed_fails_with_the_reason_in_the_summary_and_junit() {
    let cluster = TestCluster::new(&[("n1", "region=a")]).var("upgrade_node_post_hook: hooks/post.yml");
    // n1's post hook (the last step of the last host) arms a proxy that cuts the next node list short, exit 0.
    let flag = cluster.path("cut-short");
    cluster.write("hooks/post.yml", &format!("- name: arm the fault\n  command: touch {}\n", flag.display()));
    let kubectl = kubectl_answering(&cluster, "get nodes -o json", "{\"kind\": \"List\", \"items\": [", &flag, true);
    let junit = cluster.path("junit.xml");
    let extra = serde_json::json!({ "upgrade_kubectl": kubectl }).to_string();
    let run = cluster.upgrade(&["-e", &extra, "--output", "json", "--junit", &junit.display().to_string()]);
    let run = run.expect_code(1);
    assert!(!flag.exists(), "the scenario: verify's read got the cut answer\n{run}");
    let summary: serde_json::Value = run
        .stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|e| e["event"] == "summary")
        .unwrap_or_else(|| run.fail("no summary"));
    assert_eq!(summary["status"], "failed", "{summary}");
    assert!(
        summary["cluster_read_error"].as_str().is_some_and(|e| e.contains("not a Kubernetes NodeList")),
        "{summary}"
    );
    let verify_failures: Vec<&serde_json::Value> = summary["hosts"]
        .as_array()
        .expect("hosts")
        .iter()
        .filter(|h| h["phase"] == "verify" && h["status"] == "failed")
        .collect();
    let hosts: Vec<&str> = verify_failures.iter().filter_map(|h| h["host"].as_str()).collect();
    assert_eq!(hosts, ["m1", "m2", "m3", "n1"], "every upgraded host failed verify\n{summary}");
    assert!(verify_failures.iter().all(|h| h["reason"].as_str().is_some_and(|r| r.contains("not verified"))));
    let xml = std::fs::read_to_string(&junit).expect("junit");
    assert!(xml.contains("<testsuite name=\"verify\" tests=\"4\" failures=\"4\""), "{xml}");
    assert!(xml.contains("not a Kubernetes NodeList"), "{xml}");
    // The upgrade itself went through: only what verify could not read failed.
    for host in MASTERS.into_iter().chain(["n1"]) {
        assert_eq!(cluster.fake.version(host), TARGET, "{host}");
    }
}

/// A cluster whose hosts read one certificate file through a stand-in openssl printing `printed`.
fn with_certificate(printed: &str) -> TestCluster {
    let cluster = TestCluster::new(&[("n1", "region=a")]);
    let cert = cluster.path("ca.crt");
    cluster.write("ca.crt", "not read: the stand-in openssl prints the date\n");
    cluster.write("openssl", &format!("#!/bin/sh\nprintf '%s\\n' '{printed}'\n"));
    let openssl = cluster.path("openssl");
    cluster
        .var(&format!("upgrade_certificate_expiry_files: ['{}']", cert.display()))
        .var(&format!("upgrade_openssl: \"sh {}\"", openssl.display()))
}

#[test]
fn a_certificate_end_date_that_cannot_be_read_stops_preflight_unless_told_to_warn() {
    // One shape end to end (with escapes, which the message must not print); every other unreadable shape is the
    // parser's unit test (phase::certificates: an openssl end date that cannot be read ...).
    let printed = "notAfter=\u{1b}[31m\u{1b}[0m";
    let cluster = with_certificate(printed);
    let run = cluster.upgrade(&[]).expect_code(1);
    let run = run.stderr_has("the expiry of 4 certificate(s) could not be read").stderr_has("ca.crt: could not read");
    let run = run.stderr_has("upgrade_certificate_expiry_unreadable: warn");
    assert!(!run.stderr.contains('\u{1b}'), "printed without escapes\n{run}");
    assert!(cluster.fake.calls().iter().all(|c| c.action != "cordon"), "nothing was touched: {printed:?}");
    assert_eq!(cluster.fake.upgrades("m1"), 0);
    // OpenSSL 3's `-dateopt iso_8601` shape is read: a certificate that expired in 2020 stops the run as expired.
    let cluster = with_certificate("notAfter=2020-01-01 00:00:00Z");
    cluster.upgrade(&[]).expect_code(1).stderr_has("ca.crt expires 2020-01-01 00:00:00 UTC (expired)");
    assert_eq!(cluster.fake.upgrades("m1"), 0);

    let cluster =
        with_certificate("notAfter=janv.  1 00:00:00 2020 GMT").var("upgrade_certificate_expiry_unreadable: warn");
    // Told to warn, preflight says so and passes (what follows it is every other test's).
    let run = cluster.upgrade(&["--phase", "preflight"]).expect_code(0);
    drop(run.stdout_has("certificate expiry not read (upgrade_certificate_expiry_unreadable: warn)"));
    cluster
        .upgrade(&["-e", "upgrade_certificate_expiry_unreadable=maybe"])
        .expect_code(2)
        .stderr_has("`maybe` is neither fail nor warn");
}

#[test]
fn kubeadm_certificate_rows_in_a_shape_not_understood_stop_preflight() {
    let cluster = TestCluster::new(&[("n1", "region=a")]);
    let kubeadm = cluster.path("kubeadm-wrapper");
    cluster.write(
        "kubeadm-wrapper",
        &format!(
            "#!/bin/sh\ncase \"$*\" in *\"certs check-expiration\"*) printf 'CERTIFICATE   EXPIRES   RESIDUAL TIME\\n\
             admin.conf    1 janv. 2030    <invalid>\\n'; exit 0;; esac\nexec {} \"$@\"\n",
            cluster.fake.kubeadm_command()
        ),
    );
    let extra = serde_json::json!({ "upgrade_kubeadm": format!("sh {}", kubeadm.display()) }).to_string();
    let run = cluster.upgrade(&["-e", &extra]).expect_code(1);
    drop(run.stderr_has("kubeadm certificate admin.conf: could not read \"admin.conf    1 janv. 2030    <invalid>\""));
    assert!(cluster.fake.calls().iter().all(|c| c.action != "cordon"), "nothing was touched");
}

#[test]
fn a_live_plan_whose_pod_list_cannot_be_read_is_blocked_and_names_from_the_cluster_print_without_escapes() {
    let cluster = TestCluster::new(&[("n1", "region=a")]);
    let flag = cluster.path("armed");
    std::fs::write(&flag, "").expect("arm");
    let args = "get pods --all-namespaces -o json";
    let kubectl = kubectl_answering(&cluster, args, r#"{"kind": "List", "items": {"a": 5}}"#, &flag, false);
    let extra = serde_json::json!({ "upgrade_kubectl": kubectl }).to_string();
    let run = cluster.upgrade(&["--plan", "--live", "-e", &extra]).expect_code(1);
    drop(run.stdout_has(
        "problem: drain blockers not checked: the cluster's pod list is not a Kubernetes list: `items` is not a list",
    ));

    // A bare pod whose name holds a clear-screen and a window-title sequence (JSON-escaped, as the API sends it).
    let pods = r#"{"kind": "List", "items": [{"metadata": {"name": "evil\u001b[2J\u001b]0;owned\u0007pod", "namespace": "default"},
        "spec": {"nodeName": "n1"}, "status": {"phase": "Running"}}]}"#;
    let kubectl = kubectl_answering(&cluster, args, pods, &flag, false);
    let extra = serde_json::json!({ "upgrade_kubectl": kubectl }).to_string();
    let run = cluster.upgrade(&["--plan", "--live", "-e", &extra]).expect_code(1);
    let run = run.stdout_has("drain blocker: pod default/evilpod has no controller");
    assert!(!run.stdout.contains('\u{1b}') && !run.stdout.contains('\u{7}'), "no escape reaches stdout\n{run}");
    // The run itself says the same blocker as a warning, without the escapes either.
    let run = cluster.upgrade(&["-e", &extra]).expect_code(0);
    let run = run.stdout_has("its drain would meet: pod default/evilpod has no controller");
    assert!(!run.stdout.contains('\u{1b}'), "no escape reaches stdout\n{run}");
}

#[test]
fn a_master_whose_own_api_server_is_not_ready_stops_the_run_though_the_load_balancer_answers_ok() {
    let cluster = TestCluster::new(&[("n1", "region=a")]).var("upgrade_control_plane_ready_timeout: 2");
    // m2's API server crash-loops; the first master's kubeconfig (the load balancer) answers ok all along.
    cluster.fake.set_cue("m2", "apiserver_unhealthy", "");
    let run = cluster.upgrade(&[]).expect_code(1);
    let run = run
        .stdout_has("[m2] FAILED at control-plane-health")
        .stdout_has("its own API server (https://m2:6443) did not answer ok");
    assert_eq!(cluster.fake.version("m3"), "v1.28.5", "the next master was not started\n{run}");
    assert_eq!(cluster.fake.upgrades("m3"), 0);
    assert!(cluster.fake.calls().iter().all(|c| c.node != "m3" || c.action != "drain"), "m3 untouched");
    // The probes went to each master's own API server, m1's and m2's, on the master itself.
    let probed: Vec<String> =
        cluster.fake.calls().into_iter().filter(|c| c.action == "readyz" && c.node != "-").map(|c| c.node).collect();
    assert!(probed.contains(&"m1".to_string()) && probed.contains(&"m2".to_string()), "{probed:?}");
    // The scenario: the first master's kubeconfig answers ok all the while; only m2's own API server does not.
    let shared = cluster.fake.run("kubectl", &["get", "--raw", "/readyz"]);
    assert_eq!((shared.status.success(), String::from_utf8_lossy(&shared.stdout).to_string()), (true, "ok".into()));
    let own = cluster.fake.run("kubectl", &["--server=https://m2:6443", "get", "--raw", "/readyz"]);
    assert!(!own.status.success(), "m2's own API server fails /readyz");
}

#[test]
fn a_resumed_masters_re_read_of_the_cluster_is_labelled_with_the_control_plane_phase() {
    let cluster = TestCluster::new(&[("n1", "region=a")]);
    let delay = cluster.fake.state_dir().join("delay");
    std::fs::write(&delay, "3\n").expect("slow upgrades");
    // kill -9 while m1's upgrade command runs; the orphaned command finishes on its own.
    let mut first = cluster.scenario(&[]).spawn();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !cluster.fake.calls().iter().any(|c| c.node == "m1" && c.action.starts_with("kubeadm-apply")) {
        assert!(std::time::Instant::now() < deadline, "m1's upgrade never started: {:?}", cluster.fake.calls());
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    first.kill().expect("kill -9");
    let _ = first.wait();
    std::fs::remove_file(&delay).expect("fast again");
    // The orphaned `kubeadm upgrade apply` ends within its 3 s; the re-run then finds the step cut short and reads
    // the cluster to see whether m1 got there.
    std::thread::sleep(std::time::Duration::from_secs(4));
    let run = cluster.upgrade(&["--output", "json"]).expect_code(0);
    let reads: Vec<String> = run
        .stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|e| e["event"] == "step-started" && e["step"] == "read-cluster" && e["phase"] != "preflight")
        .filter_map(|e| e["phase"].as_str().map(str::to_string))
        .collect();
    assert_eq!(reads.first().map(String::as_str), Some("control-plane"), "m1's re-read is the control plane's\n{run}");
    assert!(!reads.contains(&"nodes".to_string()), "{reads:?}\n{run}");
}

#[test]
fn an_update_path_whose_later_hop_skips_a_minor_or_goes_back_is_refused_before_the_first_hop() {
    for (versions, says) in [
        (r#"[{"version": "1.28.5"}, {"version": "1.29.1"}, {"version": "1.31.0"}]"#, "skips a minor version"),
        (
            r#"[{"version": "1.28.5"}, {"version": "1.29.9"}, {"version": "1.29.1"}, {"version": "1.31.0"}]"#,
            "goes back",
        ),
    ] {
        let cluster = TestCluster::new(&[("n1", "region=a")]).var("upgrade_update_graph: graph.json");
        let count = serde_json::from_str::<Vec<serde_json::Value>>(versions).expect("versions").len();
        let edges: Vec<String> = (1..count).map(|i| format!("[{}, {i}]", i - 1)).collect();
        cluster.write("graph.json", &format!(r#"{{"nodes": {versions}, "edges": [{}]}}"#, edges.join(", ")));
        let run = cluster.upgrade(&["--target-version", "v1.31.0"]).expect_code(2).stderr_has(says);
        let run = run.stderr_has("of the update path to v1.31.0");
        let writes: Vec<String> =
            cluster.fake.calls().into_iter().map(|c| c.action).filter(|a| !a.starts_with("get")).collect();
        assert!(writes.iter().all(|a| a.ends_with("configmap")), "nothing but the lock was touched: {writes:?}\n{run}");
        for host in MASTERS.into_iter().chain(["n1"]) {
            assert_eq!(cluster.fake.upgrades(host), 0, "{host} untouched\n{run}");
        }
    }
}
