//! The run's one reader of the cluster: nodes waiting to be Ready are served by shared reads, whatever their number
//! (`get node NAME` when one waits, `get nodes` when several do); a node is looked at once after its restart, then
//! the reads back off from 0.1 s up to `upgrade_node_ready_delay` (how far apart they are: poller.rs's unit tests).

use crate::upgrade::{TestCluster, nodes, spec};

#[test]
fn three_nodes_waiting_at_once_share_list_reads_that_back_off_up_to_the_interval() {
    let list = nodes(3, "region=a");
    let cluster = TestCluster::new(&spec(&list)).var("upgrade_nodes_serial: 3").var("upgrade_node_ready_delay: 1");
    for n in ["n1", "n2", "n3"] {
        cluster.fake.set_cue(n, "ready_after_reads", "3");
    }
    cluster.upgrade(&[]).expect_code(0).stdout_has("result: success");

    let log = std::fs::read_to_string(cluster.fake.state_dir().join("calls.log")).unwrap();
    let lines: Vec<Vec<&str>> = log.lines().map(|l| l.split('\t').collect()).collect();
    let first_restart = lines.iter().position(|l| l[2] == "restart" && l[1].starts_with('n')).expect("a node restart");
    let last_uncordon = lines.iter().rposition(|l| l[2] == "uncordon" && l[1].starts_with('n')).expect("uncordon");
    let reads: Vec<&Vec<&str>> =
        lines[first_restart..last_uncordon].iter().filter(|l| l[2] == "get-node" || l[2] == "get-nodes").collect();
    assert!(reads.iter().any(|l| l[2] == "get-nodes"), "several nodes waiting: one list read serves them: {reads:?}");
    // Each node needs 3 NotReady reads then a Ready one: reading per node would be 12 reads or more.
    assert!(reads.len() < 12, "the nodes shared their reads: {} reads {reads:?}", reads.len());
    // How far apart the reads are is the back-off's (poller.rs's unit test of its gaps): the times the fake cluster
    // logs are when each kubectl process got to write, which a loaded machine delays by any amount.
}
