//! One reader of the cluster per run: every node waiting to be Ready at the target (after its restart) is served by
//! the same reads, whatever the number of nodes in flight. With one node waiting a read is `get node NAME -o json`;
//! with several it is `get nodes -o json`, once (node_poll.yml holds both shapes). Before, each node in flight polled
//! on its own: reads grew with nodes in flight.
//!
//! A node is looked at once after its restart, then the reads back off: a node that starts waiting is read at the
//! next read, which starts at once (at least `FIRST_GAP` after the one before); then the gaps double from
//! `FIRST_GAP` up to `upgrade_node_ready_delay`. Waiting a whole delay before the first look put up to one delay of
//! nothing into every node's cordoned window (a 1 s delay was a quarter of a benchmark's wall time).
//!
//! There is no background task: the waiters take turns as the reader. Whoever holds the read lock sleeps until the
//! interval since the last read is over, reads, publishes what it read and wakes the others; the others wait for that.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::cluster_calls::ClusterCalls;
use super::step_runner::StepFailure;
use crate::cluster::{ClusterNode, parse_node, parse_nodes_named};
use crate::settings::TargetVersion;
use crate::vocabulary::Step;

/// What the last read said about one node.
#[derive(Debug, Clone)]
enum Seen {
    Node(ClusterNode),
    /// The read failed (the cluster's own words), or the node was not in its answer.
    Failed(String),
}

#[derive(Default)]
struct State {
    /// Nodes waiting, with how many waiters each (a node name may be waited for once per host, normally once).
    waiting: BTreeMap<String, usize>,
    /// Per node: when the read that saw it started, and what it saw.
    seen: HashMap<String, (Instant, Seen)>,
    last_read: Option<Instant>,
    /// When the last node started waiting: a read started after it has looked at every node waiting now.
    newest_waiter: Option<Instant>,
    /// Reads started since the newest waiter came: the back-off's exponent.
    reads_since_newest: u32,
}

/// The shortest gap between two reads: the first look at a node that starts waiting, and the back-off's first step.
const FIRST_GAP: Duration = Duration::from_millis(100);

impl State {
    /// The gap before the next read: `FIRST_GAP` while a waiter has not been looked at since it came, then doubling
    /// up to `interval`.
    fn gap(&self, interval: Duration) -> Duration {
        let unseen = match (self.newest_waiter, self.last_read) {
            (Some(newest), Some(last)) => newest > last,
            _ => true,
        };
        if unseen {
            return FIRST_GAP.min(interval);
        }
        let backoff = FIRST_GAP.saturating_mul(1u32 << self.reads_since_newest.min(16));
        backoff.min(interval)
    }
}

#[derive(Default)]
pub(crate) struct NodePoller {
    state: Mutex<State>,
    read_turn: tokio::sync::Mutex<()>,
    generation: tokio::sync::watch::Sender<u64>,
    /// A node started waiting (wakes the reader sleeping through a back-off gap).
    arrived: tokio::sync::Notify,
}

impl NodePoller {
    fn register(&self, node: &str) {
        if let Ok(mut state) = self.state.lock() {
            *state.waiting.entry(node.to_string()).or_default() += 1;
            state.newest_waiter = Some(Instant::now());
            state.reads_since_newest = 0;
        }
        self.arrived.notify_one();
    }

    fn deregister(&self, node: &str) {
        if let Ok(mut state) = self.state.lock() {
            if let Some(count) = state.waiting.get_mut(node) {
                *count -= 1;
                if *count == 0 {
                    state.waiting.remove(node);
                    state.seen.remove(node);
                }
            }
        }
    }

    /// What a read that started after `since` said about `node`.
    fn seen_since(&self, node: &str, since: Instant) -> Option<Seen> {
        let state = self.state.lock().ok()?;
        state.seen.get(node).filter(|(at, _)| *at >= since).map(|(_, seen)| seen.clone())
    }

    /// One read for every node waiting now, after the gap since the last read (`State::gap`).
    async fn read(&self, run: &impl ClusterCalls, interval: Duration, deadline: Instant) {
        // Woken when a node starts waiting: its first look is due sooner than the back-off's next read.
        loop {
            let due = self.state.lock().ok().and_then(|s| s.last_read.map(|last| last + s.gap(interval)));
            let Some(due) = due else { break };
            let now = Instant::now();
            if now >= due {
                break;
            }
            if now >= deadline {
                return; // the deadline came first
            }
            tokio::select! {
                _ = tokio::time::sleep_until(due.min(deadline).into()) => {}
                _ = self.arrived.notified() => {}
            }
        }
        let waiting: Vec<String> = self.state.lock().map(|s| s.waiting.keys().cloned().collect()).unwrap_or_default();
        if waiting.is_empty() {
            return;
        }
        let started = Instant::now();
        if let Ok(mut state) = self.state.lock() {
            state.last_read = Some(started);
            state.reads_since_newest = state.reads_since_newest.saturating_add(1);
        }
        let one = if waiting.len() == 1 { waiting[0].clone() } else { String::new() };
        let vars = [("upgrade_poll_node", Value::String(one.clone()))];
        let file = run.playbook("node_poll.yml");
        let result = run.run_step_quietly(run.first_master(), Step::WaitReady, &file, &vars).await;
        let register = if one.is_empty() { "upgrade_poll_all" } else { "upgrade_poll_one" };
        // Parsed where it lies in the fact store: the node list of a large cluster is tens of MB.
        let nodes: Result<Vec<ClusterNode>, String> = result.map_err(|f| f.reason).and_then(|facts| {
            let read = facts.get(register);
            let field = |key: &str| read.and_then(|r| r.get(key)).and_then(Value::as_str).unwrap_or_default();
            let rc = read.and_then(|r| r.get("rc")).and_then(Value::as_i64).unwrap_or(-1);
            if rc != 0 {
                return Err(format!("the cluster did not answer: {}", field("stderr").trim()));
            }
            if one.is_empty() {
                // `waiting` is sorted (the keys of a BTreeMap).
                parse_nodes_named(field("stdout"), |name| waiting.binary_search_by(|w| w.as_str().cmp(name)).is_ok())
            } else {
                parse_node(field("stdout")).map(|n| vec![n])
            }
        });
        run.forget(run.first_master(), register);
        if let Ok(mut state) = self.state.lock() {
            match nodes {
                Ok(nodes) => {
                    let mut by_name: HashMap<String, ClusterNode> =
                        nodes.into_iter().map(|n| (n.name.clone(), n)).collect();
                    for name in &waiting {
                        let seen = match by_name.remove(name) {
                            Some(node) => Seen::Node(node),
                            None => Seen::Failed(format!("node {name} is not in the cluster's answer")),
                        };
                        state.seen.insert(name.clone(), (started, seen));
                    }
                }
                Err(why) => {
                    for name in &waiting {
                        state.seen.insert(name.clone(), (started, Seen::Failed(why.clone())));
                    }
                }
            }
        }
    }
}

/// The wait-ready step of `host`: its node Ready at the target within `upgrade_node_ready_timeout`, read by the
/// run's one poller every `upgrade_node_ready_delay` seconds.
pub(crate) async fn wait_ready(run: &impl ClusterCalls, poller: &NodePoller, host: &str) -> Result<(), StepFailure> {
    let fail = |reason: String| StepFailure::new(Step::WaitReady, reason);
    let seconds = |template: &str, default: u64| {
        run.render_for(host, template)
            .trim()
            .parse::<f64>()
            .ok()
            .filter(|s| *s >= 0.0)
            .map(|s| s as u64)
            .unwrap_or(default)
    };
    let timeout = seconds("{{ upgrade_node_ready_timeout | default(600) }}", 600);
    let interval = Duration::from_secs(
        run.render_for(run.first_master(), "{{ upgrade_node_ready_delay | default(5) }}")
            .trim()
            .parse::<u64>()
            .unwrap_or(5)
            .max(1),
    );
    let node = run.node_name(host);
    let registered = Instant::now();
    let deadline = registered + Duration::from_secs(timeout);
    let mut generation = poller.generation.subscribe();
    poller.register(&node);
    // A flavour that reads "at the target" from what the host has installed (OpenShift 3.11: every 3.11.z reports one
    // kubelet version) waits for Ready only, as its own wait_ready.yml does.
    let wants_version = !run.probes_host_version(host);
    let at = if wants_version { format!(" at {}", run.target()) } else { String::new() };
    let outcome = loop {
        if let Some(Seen::Node(seen)) = poller.seen_since(&node, registered) {
            let at_target = TargetVersion::parse(&seen.kubelet_version).ok().as_ref() == Some(run.target());
            if (at_target || !wants_version) && seen.ready {
                break Ok(());
            }
        }
        if Instant::now() >= deadline {
            let said = match poller.seen_since(&node, registered) {
                Some(Seen::Node(seen)) => format!(
                    "it reports {}, Ready={}",
                    if seen.kubelet_version.is_empty() { "no version" } else { &seen.kubelet_version },
                    if seen.ready { "True" } else { "False" }
                ),
                Some(Seen::Failed(why)) => why,
                None => "the cluster was not read in time".to_string(),
            };
            break Err(fail(format!("node {node} is not Ready{at} after {timeout}s: {said}")));
        }
        if run.stop().is_aborting() {
            break Err(StepFailure::interrupted(Step::WaitReady));
        }
        match poller.read_turn.try_lock() {
            Ok(turn) => {
                poller.read(run, interval, deadline).await;
                drop(turn);
                // Published after the turn is free, so a woken waiter can take it when this one is done.
                poller.generation.send_modify(|g| *g += 1);
            }
            Err(_) => {
                // Another waiter reads: wait for what it publishes (or the deadline).
                let _ = tokio::time::timeout_at(deadline.into(), generation.changed()).await;
            }
        }
    };
    poller.deregister(&node);
    outcome
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reads_are_a_first_gap_apart_for_a_new_waiter_then_back_off_doubling_up_to_the_interval() {
        let interval = Duration::from_secs(1);
        let start = Instant::now();
        let at = |ms: u64| start + Duration::from_millis(ms);
        // Nothing read yet, or a waiter that came after the last read: looked at after the first gap.
        assert_eq!(State::default().gap(interval), FIRST_GAP);
        let unseen = State { last_read: Some(at(0)), newest_waiter: Some(at(5)), ..State::default() };
        assert_eq!(unseen.gap(interval), FIRST_GAP);
        // Every waiter seen: 0.2 s, 0.4 s, 0.8 s, then the interval.
        let gaps: Vec<u64> = (1..=5)
            .map(|reads| {
                let seen = State {
                    last_read: Some(at(10)),
                    newest_waiter: Some(at(5)),
                    reads_since_newest: reads,
                    ..State::default()
                };
                seen.gap(interval).as_millis() as u64
            })
            .collect();
        assert_eq!(gaps, [200, 400, 800, 1000, 1000]);
        // Never shorter than the first gap, never longer than an interval below it.
        assert_eq!(State::default().gap(Duration::from_millis(50)), Duration::from_millis(50));
    }

    /// A node restarted while the reads had backed off to the whole delay is looked at after the first gap, not a
    /// delay after the last read: its first look does not hold its cordoned window open.
    #[test]
    fn a_node_that_starts_waiting_after_the_reads_backed_off_is_due_for_a_look_after_the_first_gap() {
        let interval = Duration::from_secs(5);
        let poller = NodePoller::default();
        let last_read = Instant::now().checked_sub(Duration::from_millis(1)).unwrap_or_else(Instant::now);
        if let Ok(mut state) = poller.state.lock() {
            state.last_read = Some(last_read);
            state.newest_waiter = last_read.checked_sub(Duration::from_millis(1));
            state.reads_since_newest = 10;
        }
        let gap = || poller.state.lock().map(|s| s.gap(interval)).unwrap_or_default();
        assert_eq!(gap(), interval, "nobody new waits: backed off to the interval");
        poller.register("n1");
        assert_eq!(gap(), FIRST_GAP, "n1 came after the last read");
    }
}
