//! The real kubeadm cluster of `scripts/real-cluster` as a test of the ci profile: two nodes at v1.34.4 (the control
//! plane on the first) taken to v1.35.4 by `upgrade --inventory`, killed with SIGKILL in the control plane and again
//! in a node and run again until it finishes, while a workload behind a PodDisruptionBudget is requested every 50 ms.
//! It fails when one workload request failed or any check of the report (testing/real-cluster/report) does not hold.
//!
//! The ci profile starts it first, beside the other tests (its own test group, one thread): the cluster spends about
//! two thirds of its time waiting on itself (kubeadm, the kubelet and the pods starting), time the other tests use.
//! It needs root (network and mount namespaces) and the cluster's builds. Outside CI it says SKIPPED without root,
//! and the script says NOT RUN without the builds (it does not start them from a test); with `CI` set the script
//! builds what is missing first, and a missing part fails.

use std::path::Path;
use std::process::Command;

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    unsafe { libc::geteuid() == 0 }
}

#[test]
fn a_real_kubeadm_cluster_crosses_a_minor_with_upgrade_killed_twice_and_no_workload_request_failing() {
    let in_ci = std::env::var_os("CI").is_some();
    if !is_root() {
        assert!(!in_ci, "the real cluster needs root (network and mount namespaces); CI runs it as root");
        eprintln!("SKIPPED: the real cluster needs root: sudo scripts/real-cluster test");
        return;
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/real-cluster");
    let mut command = Command::new(&script);
    command.arg("test").env("UPGRADE_BIN", env!("CARGO_BIN_EXE_upgrade"));
    if !in_ci {
        // Outside CI the builds are not started from a test: without them the script says NOT RUN and exits 0.
        command.arg("--cached-only");
    }
    let status = command.status().expect("run scripts/real-cluster");
    assert!(
        status.success(),
        "scripts/real-cluster test failed ({status}): its report and logs are in /var/tmp/upgrade-real-cluster-last/ \
         (UPGRADE_REAL_CLUSTER_STATE moves it, with -last added)"
    );
}
