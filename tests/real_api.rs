//! Against the real Kubernetes API server (tests/support/apiserver.rs: kube-apiserver, the controller manager, the
//! scheduler built from k8s.io/kubernetes, kwok's simulated kubelets): what the stand-ins cannot prove, because a
//! misunderstanding of the API would be the same on both sides.

use std::time::Duration;

use crate::support::apiserver::KubeControlPlane;

#[test]
fn the_real_control_plane_starts_and_kwok_makes_its_nodes_ready() {
    let Some(api) = KubeControlPlane::start() else { return };
    api.add_node("n1", "v1.33.5", &[]);
    api.wait_nodes_ready(&["n1"]);
    let node = api.node("n1");
    assert_eq!(node["status"]["nodeInfo"]["kubeletVersion"], "v1.33.5", "{node}");
    let version = api.ok(&["version", "-o", "json"]);
    assert!(version.contains("\"gitVersion\": \"v1.34.4\""), "{version}");
    let _ = Duration::from_secs(1);
}
