use super::super::table::table;
use super::*;

fn scope(minors: &[Minor]) -> Scope<'_> {
    Scope { rows: table().expect("table"), minors, target: *minors.last().expect("a minor"), kubeadm_upgrade: false }
}

#[test]
fn the_metrics_name_a_deprecated_api_a_crossed_minor_removes_and_the_servers_start() {
    let text = "process_start_time_seconds 1.7e+09\n\
        apiserver_requested_deprecated_apis{group=\"policy\",removed_release=\"1.25\",resource=\"podsecuritypolicies\",subresource=\"\",version=\"v1beta1\"} 1\n\
        apiserver_requested_deprecated_apis{group=\"networking.k8s.io\",removed_release=\"1.37\",resource=\"servicecidrs\",subresource=\"\",version=\"v1beta1\"} 1\n";
    let (found, window) = metrics("m1", text, &scope(&[(1, 25)])).expect("read");
    assert_eq!(window.since, "2023-11-14T22:13:20Z");
    assert_eq!(found.len(), 2);
    assert_eq!(found[0].what, "policy/v1beta1 podsecuritypolicies");
    assert!(found[0].blocking && found[0].replacement.contains("Pod Security Admission"));
    assert!(!found[1].blocking, "1.37 is past the target: said, not blocking");
    assert!(metrics("m1", "upgrade-metrics-read-failed 1\n", &scope(&[(1, 25)])).unwrap_err().contains("exited 1"));
    assert!(metrics("m1", "", &scope(&[(1, 25)])).unwrap_err().contains("process_start_time_seconds"));
}

#[test]
fn an_object_applied_in_a_removed_version_is_found_by_its_annotation() {
    let list = serde_json::json!({"items": [{"metadata": {"name": "web", "namespace": "shop", "annotations": {
        "kubectl.kubernetes.io/last-applied-configuration":
            "{\"apiVersion\":\"autoscaling/v2beta2\",\"kind\":\"HorizontalPodAutoscaler\"}\n"}}},
        {"metadata": {"name": "api", "namespace": "shop"}}]});
    let found = last_applied(&list.to_string(), &scope(&[(1, 26)])).expect("list");
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].place, "shop/web (HorizontalPodAutoscaler, applied as autoscaling/v2beta2)");
    assert_eq!(found[0].minor, "1.26");
    assert!(last_applied("not json", &scope(&[(1, 26)])).is_err());
}

#[test]
fn a_kubelet_flag_the_target_removes_is_found_in_the_file_that_has_it() {
    let text = "=== upgrade-file flags /var/lib/kubelet/kubeadm-flags.env\n\
        KUBELET_KUBEADM_ARGS=\"--container-runtime=remote --pod-infra-container-image=registry.k8s.io/pause:3.9\"\n\
        === upgrade-file config /var/lib/kubelet/config.yaml\nkind: KubeletConfiguration\nfailCgroupV1: false\n\
        === upgrade-unreadable manifest /etc/kubernetes/manifests\n";
    let (found, unreadable, allowed, notes) = host_files("n1", text, &scope(&[(1, 35)]));
    assert!(notes.is_empty(), "{notes:?}");
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].what, "kubelet flag --pod-infra-container-image");
    assert_eq!(found[0].place, "n1:/var/lib/kubelet/kubeadm-flags.env");
    assert!(allowed);
    assert_eq!(unreadable.len(), 1);
    let (found, ..) = host_files("n1", text, &scope(&[(1, 27)]));
    assert_eq!(found[0].what, "kubelet flag --container-runtime");
}

#[test]
fn a_flag_kubeadm_upgrade_drops_from_its_own_file_is_a_note_where_kubeadm_upgrades_and_a_finding_elsewhere() {
    // kubeadm 1.34 writes --pod-infra-container-image into kubeadm-flags.env, the 1.35 kubelet has no such flag, and
    // 1.35's `kubeadm upgrade apply|node` removes it from that file before the new kubelet starts (found by
    // scripts/real-cluster, whose run this gate first refused).
    let text = "=== upgrade-file flags /var/lib/kubelet/kubeadm-flags.env\n\
        KUBELET_KUBEADM_ARGS=\"--pod-infra-container-image=10.77.0.1:5000/k8s/pause:3.10.1 --node-ip=10.77.0.11\"\n\
        === upgrade-file flags /etc/default/kubelet\n\
        KUBELET_EXTRA_ARGS=\"--pod-infra-container-image=registry.k8s.io/pause:3.10\"\n";
    let kubeadm = Scope { kubeadm_upgrade: true, ..scope(&[(1, 35)]) };
    let (found, _, _, notes) = host_files("n1", text, &kubeadm);
    assert_eq!(whats(&found), [("kubelet flag --pod-infra-container-image", "n1:/etc/default/kubelet")]);
    assert_eq!(notes.len(), 1, "{notes:?}");
    assert!(notes[0].starts_with("n1:/var/lib/kubelet/kubeadm-flags.env: kubelet flag --pod-infra-container-image"));
    assert!(notes[0].contains("postupgrade.go"), "{}", notes[0]);
    // Without kubeadm's upgrade (the custom flavour's commands), the file keeps the flag: a finding in both files.
    let (found, _, _, notes) = host_files("n1", text, &scope(&[(1, 35)]));
    assert_eq!(found.len(), 2, "{found:?}");
    assert!(notes.is_empty());
}

fn configmap(cluster_configuration: &str) -> String {
    serde_json::json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "kubeadm-config", "namespace": "kube-system"},
        "data": {"ClusterConfiguration": cluster_configuration}})
    .to_string()
}

fn whats(found: &[Finding]) -> Vec<(&str, &str)> {
    found.iter().map(|f| (f.what.as_str(), f.place.as_str())).collect()
}

#[test]
fn kubeadm_config_v1beta3_extra_args_name_the_flags_and_gates_a_crossed_minor_removes() {
    let text = configmap(
        "apiVersion: kubeadm.k8s.io/v1beta3\nkind: ClusterConfiguration\napiServer:\n  extraArgs:\n    \
         insecure-port: \"0\"\n    enable-admission-plugins: NodeRestriction,PodSecurityPolicy\n    \
         feature-gates: \"EphemeralContainers=true,SomeGate=false\"\n    profiling: false\n\
         controllerManager:\n  extraArgs:\n    feature-gates: CSIMigration=true\nscheduler: {}\n",
    );
    let found = kubeadm_config(&text, &scope(&[(1, 24), (1, 25)])).expect("parses");
    let api_server = "kubeadm-config ClusterConfiguration apiServer.extraArgs";
    assert_eq!(
        whats(&found),
        vec![("kube-apiserver flag --insecure-port", api_server), ("admission plugin PodSecurityPolicy", api_server)]
    );
    assert!(found.iter().all(|f| f.blocking && f.source == "kubeadm-config"));
    // 1.27 removes the gates: the one of the API server and the one of the controller manager.
    let found = kubeadm_config(&text, &scope(&[(1, 26), (1, 27)])).expect("parses");
    assert_eq!(
        whats(&found),
        vec![
            ("control-plane feature gate EphemeralContainers", api_server),
            (
                "control-plane feature gate CSIMigration",
                "kubeadm-config ClusterConfiguration controllerManager.extraArgs"
            ),
        ]
    );
}

#[test]
fn kubeadm_config_v1beta4_extra_args_are_a_list_of_names_and_values() {
    let text = configmap(
        "apiVersion: kubeadm.k8s.io/v1beta4\nkind: ClusterConfiguration\napiServer:\n  extraArgs:\n  \
         - name: authorization-mode\n    value: Node,RBAC\n  - name: port\n    value: \"0\"\n\
         scheduler:\n  extraArgs:\n  - name: feature-gates\n    value: DefaultPodTopologySpread=true\n",
    );
    let found = kubeadm_config(&text, &scope(&[(1, 24)])).expect("parses");
    assert_eq!(
        whats(&found),
        vec![("kube-apiserver flag --port", "kubeadm-config ClusterConfiguration apiServer.extraArgs")]
    );
    let found = kubeadm_config(&text, &scope(&[(1, 26)])).expect("parses");
    assert_eq!(
        whats(&found),
        vec![(
            "control-plane feature gate DefaultPodTopologySpread",
            "kubeadm-config ClusterConfiguration scheduler.extraArgs"
        )]
    );
    // Nothing the crossed minor removes: nothing found (a clean configuration is not an error).
    assert!(kubeadm_config(&text, &scope(&[(1, 30)])).expect("parses").is_empty());
}

#[test]
fn kubeadm_feature_gates_kubeadm_no_longer_knows_are_found() {
    let text = configmap("kind: ClusterConfiguration\nfeatureGates:\n  IPv6DualStack: true\n  EtcdLearnerMode: true\n");
    let found = kubeadm_config(&text, &scope(&[(1, 24)])).expect("parses");
    let place = "kubeadm-config ClusterConfiguration featureGates";
    assert_eq!(whats(&found), vec![("kubeadm feature gate IPv6DualStack", place)]);
    assert!(kubeadm_config(&text, &scope(&[(1, 25)])).expect("parses").is_empty(), "gone before 1.25: not weighed");
}

#[test]
fn a_kubeadm_config_that_cannot_be_understood_is_an_error_never_nothing_found() {
    let scope = scope(&[(1, 24)]);
    assert!(kubeadm_config("Error from server (Forbidden)", &scope).unwrap_err().contains("not JSON"));
    assert!(kubeadm_config("{\"data\": {}}", &scope).unwrap_err().contains("no data.ClusterConfiguration"));
    let not_yaml = configmap("apiServer: [unclosed\n");
    assert!(kubeadm_config(&not_yaml, &scope).unwrap_err().contains("not YAML"), "{not_yaml}");
    let nameless = configmap("apiServer:\n  extraArgs:\n  - value: \"0\"\n");
    assert!(kubeadm_config(&nameless, &scope).unwrap_err().contains("without a name"));
    let scalar = configmap("apiServer:\n  extraArgs: oops\n");
    assert!(kubeadm_config(&scalar, &scope).unwrap_err().contains("neither a map nor a list"));
}

#[test]
fn a_gate_set_against_the_value_a_crossed_minor_locks_it_to_is_found_and_one_set_to_it_is_not() {
    let text = "=== upgrade-file config /var/lib/kubelet/config.yaml\nkind: KubeletConfiguration\n\
        featureGates:\n  CSIMigration: false  # keep in-tree volumes\n  RotateKubeletServerCertificate: true\n\
        === upgrade-file manifest /etc/kubernetes/manifests/kube-controller-manager.yaml\n\
        spec:\n  containers:\n  - command:\n    - kube-controller-manager\n    - --feature-gates=CSIMigration=true\n";
    let (found, ..) = host_files("m1", text, &scope(&[(1, 25)]));
    assert_eq!(
        whats(&found),
        vec![("kubelet feature gate CSIMigration=false (locked to true)", "m1:/var/lib/kubelet/config.yaml")]
    );
    // The same gate set false on the controller manager is found there too.
    let text = text.replace("--feature-gates=CSIMigration=true", "--feature-gates=CSIMigration=False");
    let (found, ..) = host_files("m1", &text, &scope(&[(1, 25)]));
    assert_eq!(found.len(), 2, "{found:?}");
    assert_eq!(found[1].what, "control-plane feature gate CSIMigration=false (locked to true)");
    assert_eq!(found[1].place, "m1:/etc/kubernetes/manifests/kube-controller-manager.yaml");
    // Two minors on, the gate is gone: named whatever its value.
    let (found, ..) = host_files("m1", &text, &scope(&[(1, 27)]));
    assert_eq!(found[0].what, "kubelet feature gate CSIMigration");
}

#[test]
fn cgroup_v1_is_refused_from_1_35_unless_the_kubelet_allows_it_and_an_old_runtime_is_named() {
    let (found, ..) = host_system("n1", Ok("tmpfs\n=== swaps\nFilename\n"), None, false, &scope(&[(1, 35)]));
    assert_eq!(found[0].what, "host requirement cgroup-v2");
    let (found, _, notes) =
        host_system("n1", Ok("tmpfs\n=== swaps\nFilename\n/swap file\n"), None, true, &scope(&[(1, 35)]));
    assert!(found.is_empty());
    assert!(notes.iter().any(|n| n.contains("swap is on")), "{notes:?}");
    let crictl = "Version:  0.1.0\nRuntimeName:  containerd\nRuntimeVersion:  v1.7.13\nRuntimeApiVersion:  v1\n";
    let (found, ..) = host_system("n1", Ok("cgroup2fs\n"), Some(Ok(crictl)), false, &scope(&[(1, 35), (1, 36)]));
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].what, "host requirement containerd>=2.0");
    let (_, unreadable, _) =
        host_system("n1", Ok("cgroup2fs\n"), Some(Err("no crictl".into())), false, &scope(&[(1, 36)]));
    assert_eq!(unreadable[0].source, "container runtime");
}

#[test]
fn a_stale_stored_version_of_a_crd_is_found() {
    let list = serde_json::json!({"items": [{"metadata": {"name": "widgets.example.com"},
        "spec": {"versions": [{"name": "v1", "served": true}, {"name": "v1beta1", "served": false}]},
        "status": {"storedVersions": ["v1beta1", "v1"]}}]});
    let found = crds(&list.to_string(), &scope(&[(1, 34)])).expect("list");
    assert_eq!(found.len(), 1);
    assert!(found[0].what.contains("stores v1beta1"));
}

#[test]
fn the_latest_revision_of_a_helm_release_is_read_through_its_two_base64s_and_gzip() {
    use std::io::Write;
    let release = |manifest: &str| {
        let json = serde_json::json!({"name": "app", "version": 2, "manifest": manifest}).to_string();
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        gz.write_all(json.as_bytes()).expect("gzip");
        let inner = data_encoding::BASE64.encode(&gz.finish().expect("gzip"));
        data_encoding::BASE64.encode(inner.as_bytes())
    };
    let psp = "---\n# Source: app/templates/psp.yaml\napiVersion: policy/v1beta1\nkind: PodSecurityPolicy\nmetadata:\n  name: restricted\nspec:\n  privileged: false\n";
    let secret = |version: &str, data: String| {
        serde_json::json!({"metadata": {"namespace": "apps",
        "name": format!("sh.helm.release.v1.app.v{version}"), "labels": {"name": "app", "owner": "helm", "version": version}},
        "data": {"release": data}})
    };
    let list = serde_json::json!({"items": [secret("1", release("")), secret("2", release(psp))]});
    let (found, unreadable) = helm(&list.to_string(), &scope(&[(1, 25)])).expect("list");
    assert!(unreadable.is_empty());
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].place, "helm release app (namespace apps, revision 2): PodSecurityPolicy restricted");
    let broken = serde_json::json!({"items": [secret("3", "%%%".into())]});
    assert_eq!(helm(&broken.to_string(), &scope(&[(1, 25)])).expect("list").1.len(), 1);
}
