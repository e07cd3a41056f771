//! Blue-green's final soak (README "Blue-green") on the real API server: once the blue node is evacuated it stays
//! cordoned for `upgrade_blue_green_final_soak_seconds`, the run says until when, and `--rollback-blue-green` during
//! the soak (from the same state directory, whose lock the soaking run holds) gives the workload back.

use std::path::PathBuf;
use std::time::Duration;

use crate::real_api::RealCluster;
use crate::support::Scenario;

const OLD: &str = "v1.33.5";
const TARGET: &str = "v1.34.4";

/// Blue b1 and green g1 (group new_nodes, already at the target, cordoned until the switch-over, as new nodes joined
/// for a blue-green upgrade are); the final soak given. Returns the cluster and its inventory.
fn blue_and_green(soak_seconds: u32) -> Option<(RealCluster, PathBuf)> {
    let cluster = RealCluster::at(OLD, &["m1"], &[("b1", OLD), ("g1", TARGET)])?
        .var("upgrade_nodes_strategy: blue-green")
        .var(&format!("upgrade_blue_green_final_soak_seconds: {soak_seconds}"));
    cluster.api.ok(&["cordon", "g1"]);
    let inventory = cluster.inventory(&cluster.api.kubectl_command());
    let text = std::fs::read_to_string(&inventory).expect("inventory");
    let text = text.replace("        g1:\n", "") + "    new_nodes:\n      hosts:\n        g1:\n";
    std::fs::write(&inventory, text).expect("inventory with new_nodes");
    Some((cluster, inventory))
}

fn unschedulable(cluster: &RealCluster, node: &str) -> bool {
    cluster.api.node(node)["spec"]["unschedulable"].as_bool().unwrap_or(false)
}

/// A soak that runs out: the run says until when, then that the soak is over; b1 stays cordoned, g1 takes the load,
/// and the run succeeds.
#[test]
fn the_blue_nodes_stay_cordoned_through_the_final_soak_and_the_run_says_until_when() {
    let Some((cluster, inventory)) = blue_and_green(3) else { return };
    let run = Scenario::on_cluster(&cluster.path(""), &inventory).run().expect_code(0);
    let output = run.output();
    assert!(
        output.contains(
            "blue-green final soak: the blue nodes (b1) stay cordoned for 3s (upgrade_blue_green_final_soak_seconds), \
             until "
        ),
        "{output}"
    );
    assert!(output.contains("blue-green final soak over (3s): the blue nodes stay cordoned"), "{output}");
    assert!(unschedulable(&cluster, "b1"), "b1 stays cordoned after the soak");
    assert!(!unschedulable(&cluster, "g1"), "g1 takes the load");
    assert!(!cluster.path(".upgrade-state/final-soak.json").exists(), "the soak's marker is gone with the soak");
}

/// `--rollback-blue-green` while the run soaks, from the same state directory: the soaking run is asked, gives the
/// workload back itself (b1 schedulable, g1 cordoned) and ends saying so (exit 1: it did not finish); the rollback
/// command waits for that and exits 0.
#[test]
fn a_rollback_during_the_final_soak_gives_the_workload_back_to_the_blue_nodes() {
    let Some((cluster, inventory)) = blue_and_green(300) else { return };
    let soaking = Scenario::on_cluster(&cluster.path(""), &inventory).spawn();
    let marker = cluster.path(".upgrade-state/final-soak.json");
    cluster.api.wait_for("the run in its final soak", Duration::from_secs(240), || marker.exists());
    assert!(unschedulable(&cluster, "b1"), "b1 is cordoned during the soak");
    Scenario::on_cluster(&cluster.path(""), &inventory)
        .arg("--rollback-blue-green")
        .run()
        .expect_code(0)
        .stderr_has("was asked to give the workload back to the blue nodes")
        .stderr_has("done: the soaking run gave the workload back");
    let run = soaking.finish_within(Duration::from_secs(120)).expect_code(1);
    run.output_has("rolled back during the final soak at the request of --rollback-blue-green");
    assert!(!unschedulable(&cluster, "b1"), "b1 takes the workload again");
    assert!(unschedulable(&cluster, "g1"), "g1 is unschedulable again");
    assert!(!marker.exists());
}
