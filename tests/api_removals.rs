//! The gate on what the minors a run crosses remove or require (README "Removed APIs and flags: the gate"), on the
//! real API server (tests/support/apiserver.rs, v1.34.4) with kwok's nodes reporting older kubelets, and with the
//! real kubectl reading every master's own API server.
//!
//! Where a stand-in stays: v1.34.4 no longer serves policy/v1beta1, so no client can make its API server count a
//! policy/v1beta1 request; the master whose counters show one is the stand-in API server (support/kube_api.rs)
//! serving `/metrics` as an API server does. The real counter is read for real too: a deprecated version v1.34.4
//! still serves (networking.k8s.io/v1beta1, enabled with --runtime-config) is requested with kubectl, and
//! check-apis names it from the real API server's `apiserver_requested_deprecated_apis`.

use std::io::Write;

use serde_json::{Value, json};

use crate::real_api::RealCluster;
use crate::support::kube_api::KubeApi;

const V1_24: &str = "v1.24.17";

/// Helm 3's release secret for revision `revision` of `name`: data.release is base64 of base64 of gzip of the
/// release JSON, whose `manifest` holds the rendered objects.
fn helm_secret(name: &str, revision: u32, manifest: &str) -> String {
    let release = json!({"name": name, "namespace": "default", "version": revision, "manifest": manifest});
    let mut gzip = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gzip.write_all(release.to_string().as_bytes()).expect("gzip");
    let inner = data_encoding::BASE64.encode(&gzip.finish().expect("gzip"));
    json!({
        "apiVersion": "v1", "kind": "Secret", "type": "helm.sh/release.v1",
        "metadata": {"name": format!("sh.helm.release.v1.{name}.v{revision}"), "namespace": "default",
            "labels": {"name": name, "owner": "helm", "status": "deployed", "version": revision.to_string()}},
        "data": {"release": data_encoding::BASE64.encode(inner.as_bytes())},
    })
    .to_string()
}

fn found<'a>(report: &'a Value, what: &str, place: &str) -> Option<&'a Value> {
    report["findings"].as_array()?.iter().find(|f| {
        f["what"].as_str().is_some_and(|w| w.contains(what)) && f["where"].as_str().is_some_and(|p| p.contains(place))
    })
}

/// A cluster at 1.24 whose API server counted a policy/v1beta1 client: the run to 1.25 is refused with the table and
/// nothing touched; acknowledged, it goes on, and the journal and the summary (in the JSON events) say so.
#[test]
fn a_policy_v1beta1_client_refuses_1_24_to_1_25_until_the_minor_is_acknowledged() {
    let Some(cluster) = RealCluster::at_on_its_own_control_plane(V1_24, &["m1"], &[("n1", V1_24)]) else { return };
    let metrics = KubeApi::start(&[]);
    metrics.saw_deprecated_api("policy", "v1beta1", "podsecuritypolicies", "1.25");
    let cluster = cluster
        .var("upgrade_target_version: \"v1.25.16\"")
        .var(&format!("upgrade_api_removals_metrics_url: \"{}\"", metrics.url()));

    let refused = cluster
        .upgrade(&[])
        .expect_code(1)
        .output_has("policy/v1beta1 podsecuritypolicies")
        .output_has("Pod Security Admission")
        .output_has("upgrade_acknowledge_api_removals: [\"1.25\"]")
        .output_has("m1's API server counted since");
    assert_eq!(cluster.upgrades("m1") + cluster.upgrades("n1"), 0, "nothing touched\n{}", refused.output());
    assert_eq!(cluster.kubelet_version("n1"), V1_24);

    let cluster = cluster.var("upgrade_acknowledge_api_removals: [\"1.25\"]");
    let run = cluster.upgrade(&["--output", "json"]).expect_code(0);
    assert_eq!(cluster.kubelet_version("n1"), "v1.25.16", "{}", run.output());
    let events: Vec<Value> = run.stdout_text().lines().filter_map(|l| serde_json::from_str(l).ok()).collect();
    let finished = events.iter().find(|e| e["event"] == "summary").expect("the summary event");
    let acknowledged = finished["api_removals_acknowledged"].to_string();
    assert!(acknowledged.contains("1.25: policy/v1beta1 podsecuritypolicies"), "{finished}");
    let journal = std::fs::read_to_string(cluster.path(".upgrade-state/journal.jsonl")).expect("journal");
    let entry = journal
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|e| e["event"] == "api-removals-acknowledged")
        .unwrap_or_else(|| panic!("no acknowledgement in the journal:\n{journal}"));
    assert_eq!(entry["minor"], "1.25");
    assert!(entry["found"].to_string().contains("policy/v1beta1 podsecuritypolicies"), "{entry}");
}

/// A kubeadm cluster at 1.23 whose ClusterConfiguration (kube-system/kubeadm-config, v1beta4's list of extraArgs)
/// still passes the API server `--insecure-port`, which 1.24's kube-apiserver no longer knows: `kubeadm upgrade
/// apply` would write it into the new manifest and the API server would not start. The run to 1.24 is refused with
/// where the flag is, nothing touched; acknowledged, it goes on and the summary says what was crossed. Before that,
/// with no kubeadm-config at all, `check-apis` says the source unreadable.
#[test]
fn a_removed_api_server_flag_in_kubeadm_config_refuses_1_23_to_1_24_until_the_minor_is_acknowledged() {
    const V1_23: &str = "v1.23.17";
    let Some(cluster) = RealCluster::at_on_its_own_control_plane(V1_23, &["m1"], &[("n1", V1_23)]) else { return };
    // Without the ConfigMap a kubeadm cluster's configuration cannot be read: said, never "nothing found".
    cluster.api.ok(&["-n", "kube-system", "delete", "configmap", "kubeadm-config"]);
    let metrics = format!("upgrade_api_removals_metrics_url: \"{}\"", cluster.api.url());
    let cluster = cluster.var(&metrics);
    crate::support::Scenario::in_dir(cluster.dir.path())
        .env("NO_COLOR", "1")
        .args(["check-apis", "--inventory"])
        .arg(cluster.inventory(&cluster.api.kubectl_command()))
        .args(["--target", "v1.24.17"])
        .run()
        .expect_code(1)
        .stdout_has("UNREADABLE kubeadm-config on kube-system/kubeadm-config")
        .stdout_has("NotFound");
    cluster.api.apply(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: kubeadm-config\n  namespace: kube-system\ndata:\n  \
         ClusterConfiguration: |\n    apiVersion: kubeadm.k8s.io/v1beta4\n    kind: ClusterConfiguration\n    \
         imageRepository: registry.k8s.io\n    apiServer:\n      extraArgs:\n      - name: authorization-mode\n        \
         value: Node,RBAC\n      - name: insecure-port\n        value: \"0\"\n",
    );
    let cluster = cluster.var("upgrade_target_version: \"v1.24.17\"");

    let refused = cluster
        .upgrade(&[])
        .expect_code(1)
        .output_has("kube-apiserver flag --insecure-port")
        .output_has("kubeadm-config ClusterConfiguration apiServer.extraArgs")
        .output_has("upgrade_acknowledge_api_removals: [\"1.24\"]");
    assert!(!refused.output().contains("UNREADABLE"), "every source was read:\n{}", refused.output());
    assert_eq!(cluster.upgrades("m1") + cluster.upgrades("n1"), 0, "nothing touched\n{}", refused.output());
    assert_eq!(cluster.kubelet_version("n1"), V1_23);

    let cluster = cluster.var("upgrade_acknowledge_api_removals: [\"1.24\"]");
    let run = cluster.upgrade(&["--output", "json"]).expect_code(0);
    assert_eq!(cluster.kubelet_version("n1"), "v1.24.17", "{}", run.output());
    let events: Vec<Value> = run.stdout_text().lines().filter_map(|l| serde_json::from_str(l).ok()).collect();
    let finished = events.iter().find(|e| e["event"] == "summary").expect("the summary event");
    let acknowledged = finished["api_removals_acknowledged"].to_string();
    assert!(acknowledged.contains("1.24: kube-apiserver flag --insecure-port"), "{finished}");
    assert!(acknowledged.contains("kubeadm-config"), "{finished}");
}

/// `check-apis` from 1.24 to 1.27 on the real API server: a Helm release holding a PodSecurityPolicy (named by its
/// release), an HPA applied as autoscaling/v2beta2 (by its annotation), a CRD with a stale stored version, a kubelet
/// flag 1.27 removes on the host that has it (not on the one that does not), the real API server's own counter of a
/// deprecated version requested with kubectl, and a second master whose /metrics is forbidden: unreadable, said so.
#[test]
fn check_apis_names_what_the_cluster_stores_applies_is_asked_and_runs_on_and_what_it_could_not_read() {
    let Some(cluster) = RealCluster::at_on_its_own_control_plane(V1_24, &["m1", "m2"], &[("n1", V1_24), ("n2", V1_24)])
    else {
        return;
    };
    let forbidden = KubeApi::start(&[]);
    forbidden.forbid_metrics();
    let dir = cluster.dir.path().display().to_string();
    let psp = "---\n# Source: shop/templates/psp.yaml\napiVersion: policy/v1beta1\nkind: PodSecurityPolicy\nmetadata:\n  name: shop-restricted\nspec:\n  privileged: false\n";
    cluster.api.apply(&helm_secret("shop", 1, ""));
    cluster.api.apply(&helm_secret("shop", 2, psp));
    let applied = r#"{"apiVersion":"autoscaling/v2beta2","kind":"HorizontalPodAutoscaler","metadata":{"name":"web","namespace":"default"}}"#;
    // What `kubectl apply` of an autoscaling/v2beta2 manifest left on a cluster that still served it.
    cluster.api.apply(
        &json!({"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "web"},
                "minReplicas": 1, "maxReplicas": 3}})
        .to_string(),
    );
    // Written with annotate: apply and create both write their own annotation over the one an older apply left.
    let annotation = format!("kubectl.kubernetes.io/last-applied-configuration={applied}\n");
    cluster.api.ok(&["annotate", "--overwrite", "hpa", "web", &annotation]);
    let schema = json!({"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}});
    cluster.api.apply(
        &json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "widgets.example.com"},
            "spec": {"group": "example.com", "scope": "Namespaced",
                "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
                "versions": [{"name": "v1beta1", "served": false, "storage": false, "schema": schema},
                             {"name": "v1", "served": true, "storage": true, "schema": schema}]}})
        .to_string(),
    );
    cluster.api.ok(&[
        "patch",
        "crd",
        "widgets.example.com",
        "--subresource=status",
        "--type=merge",
        "-p",
        r#"{"status":{"storedVersions":["v1beta1","v1"]}}"#,
    ]);
    std::fs::write(
        cluster.path("n1-flags.env"),
        "KUBELET_KUBEADM_ARGS=\"--container-runtime=remote --container-runtime-endpoint=unix:///run/containerd/containerd.sock\"\n",
    )
    .expect("n1's flags");
    std::fs::write(cluster.path("n2-flags.env"), "KUBELET_KUBEADM_ARGS=\"--node-ip=10.0.0.2\"\n").expect("n2's flags");
    // The real API server counts a request for a version it serves deprecated.
    cluster.api.ok(&["get", "servicecidrs.v1beta1.networking.k8s.io"]);

    let urls = format!(
        "upgrade_api_removals_metrics_url: \"{{{{ {{'m1': '{}', 'm2': '{}'}}[inventory_hostname] }}}}\"",
        cluster.api.url(),
        forbidden.url()
    );
    let cluster = cluster
        .var(&urls)
        .var("upgrade_api_removals_read_helm: true")
        .var(&format!("upgrade_kubelet_flags_files: [\"{dir}/{{{{ inventory_hostname }}}}-flags.env\"]"))
        .var(&format!("upgrade_kubelet_config_file: \"{dir}/{{{{ inventory_hostname }}}}-config.yaml\""))
        .var(&format!("upgrade_static_pod_dir: \"{dir}/{{{{ inventory_hostname }}}}-manifests\""))
        .var("upgrade_container_runtime_version_command: \"printf 'RuntimeName: containerd\\\\nRuntimeVersion: v1.7.13\\\\nRuntimeApiVersion: v1\\\\n'\"");
    let inventory = cluster.inventory(&cluster.api.kubectl_command());
    let check = crate::support::Scenario::in_dir(cluster.dir.path())
        .env("NO_COLOR", "1")
        .args(["check-apis", "--inventory"])
        .arg(&inventory)
        .args(["--target", "v1.27.16", "--output", "json"])
        .run()
        .expect_code(1);
    let report = check.json();
    let all = serde_json::to_string_pretty(&report).unwrap_or_default();
    assert_eq!(report["minors"], json!(["1.25", "1.26", "1.27"]), "{report}");

    let helm =
        found(&report, "policy/v1beta1 podsecuritypolicies", "helm release shop").unwrap_or_else(|| panic!("{all}"));
    assert_eq!(helm["where"], "helm release shop (namespace default, revision 2): PodSecurityPolicy shop-restricted");
    assert_eq!(helm["minor"], "1.25");

    let hpa = found(&report, "autoscaling/v2beta2 horizontalpodautoscalers", "default/web")
        .unwrap_or_else(|| panic!("{all}"));
    assert_eq!(hpa["source"], "last-applied");
    assert_eq!(hpa["minor"], "1.26");
    assert_eq!(hpa["replacement"], "autoscaling/v2 (since 1.23)");

    let crd = found(&report, "widgets.example.com stores v1beta1", "crd").unwrap_or_else(|| panic!("{all}"));
    assert_eq!(crd["blocking"], true);

    let flag = found(&report, "kubelet flag --container-runtime", "n1:").unwrap_or_else(|| panic!("{all}"));
    assert_eq!(flag["where"], format!("n1:{dir}/n1-flags.env"));
    assert_eq!(flag["minor"], "1.27");
    assert!(found(&report, "kubelet flag", "n2:").is_none(), "n2 has no removed flag: {all}");

    let counted =
        found(&report, "networking.k8s.io/v1beta1 servicecidrs", "m1's API server").unwrap_or_else(|| panic!("{all}"));
    assert_eq!(counted["source"], "metrics");
    assert_eq!(counted["minor"], "1.37", "the removal release the real API server reports");
    assert_eq!(counted["blocking"], false, "removed after the target: said, not blocking");
    assert!(found(&report, "servicecidrs", "m2").is_none(), "m2's counters were not read: {all}");

    let unreadable = report["unreadable"].as_array().cloned().unwrap_or_default();
    let m2 = unreadable.iter().find(|u| u["source"] == "metrics").unwrap_or_else(|| panic!("{report}"));
    assert!(m2["where"].as_str().unwrap_or_default().starts_with("m2's API server"), "{m2}");
    assert!(m2["why"].as_str().unwrap_or_default().contains("Forbidden"), "{m2}");
    assert_eq!(report["windows"].as_array().map(Vec::len), Some(1), "only m1's window is known: {report}");
    assert_eq!(report["blocked_minors"], json!(["1.25", "1.26", "1.27"]));

    // The same in text: the table, and the unreadable source said as such.
    crate::support::Scenario::in_dir(cluster.dir.path())
        .env("NO_COLOR", "1")
        .args(["check-apis", "--inventory"])
        .arg(&inventory)
        .args(["--target", "v1.27.16"])
        .run()
        .expect_code(1)
        .stdout_has("WHAT")
        .stdout_has("helm release shop")
        .stdout_has("UNREADABLE metrics on m2's API server");
}

/// On the scripted fake cluster (1.28 -> 1.29, which removes flowcontrol.apiserver.k8s.io/v1beta2): an
/// acknowledgement that is not a minor is bad input (exit 2, nothing touched); a /metrics the run's credentials may
/// not read refuses the run as unreadable, never as "nothing found", and the acknowledgement of 1.29 lets it go on.
#[test]
fn an_unreadable_metrics_refuses_the_run_until_acknowledged_and_an_acknowledgement_must_be_a_minor() {
    let cluster = crate::upgrade::TestCluster::new(&[("n1", "region=a")]);
    std::fs::write(cluster.fake.state_dir().join("metrics_forbidden"), "").expect("cue");
    let refused = cluster.upgrade(&[]).expect_code(1).stdout_has("UNREADABLE metrics on m1's API server");
    assert!(refused.output().contains("Forbidden"), "{}", refused.output());
    assert_eq!(cluster.fake.upgrades("n1") + cluster.fake.upgrades("m1"), 0, "nothing touched\n{}", refused.output());

    let bad = crate::upgrade::TestCluster::new(&[("n1", "region=a")]).var("upgrade_acknowledge_api_removals: [next]");
    bad.upgrade(&[]).expect_code(2).output_has("upgrade_acknowledge_api_removals: `next` is not a minor");
    assert_eq!(bad.fake.upgrades("m1"), 0);

    let cluster = cluster.var("upgrade_acknowledge_api_removals: [\"1.29\"]");
    cluster.upgrade(&[]).expect_code(0).stdout_has("crossed on acknowledgement");
}
