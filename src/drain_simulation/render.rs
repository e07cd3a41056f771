//! The drain simulation of one batch for people, under the batch's line of the live plan.

use super::quantity::{show_bytes, show_millicores};
use super::report::{BatchSimulation, EvictedPod, Verdict};

fn requests(pod: &EvictedPod) -> String {
    if pod.best_effort {
        "no requests".into()
    } else {
        format!("cpu {}, memory {}", show_millicores(pod.cpu_millis), show_bytes(pod.memory_bytes))
    }
}

/// The first `shown` of `items`, and how many more (a batch of a large cluster has thousands of pods and the nodes
/// that stay thousands of names; `--output json` lists them all).
fn listed(items: &[String], shown: usize) -> String {
    match items.len() {
        0 => "none".into(),
        n if n > shown => format!("{} and {} more", items[..shown].join(", "), n - shown),
        _ => items.join(", "),
    }
}

/// The simulation of a batch for people, one line each, indented under the batch's line.
pub fn render(simulation: &BatchSimulation, indent: &str) -> String {
    let mut out = String::new();
    let mut line = |text: String| out.push_str(&format!("{indent}{text}\n"));
    match simulation.verdict {
        Verdict::Fits => line("drain simulation: fits".into()),
        Verdict::Blocked => line(format!("drain simulation: BLOCKED: {}", simulation.reasons.join("; "))),
        Verdict::Unreadable => {
            line(format!("drain simulation: UNREADABLE: {}", simulation.reasons.join("; ")));
            return out;
        }
    }
    let (best_effort, sized): (Vec<&EvictedPod>, Vec<&EvictedPod>) =
        simulation.evicted.iter().partition(|p| p.best_effort && p.outcome != "not-recreated");
    let evicts: Vec<String> = sized
        .iter()
        .map(|p| match p.outcome.as_str() {
            "not-recreated" => format!("{} (on {}; no controller: deleted for good)", p.pod, p.node),
            _ => format!("{} (on {}; {})", p.pod, p.node, requests(p)),
        })
        .collect();
    line(format!("evicts: {}", listed(&evicts, 20)));
    if !best_effort.is_empty() {
        let pods: Vec<String> = best_effort.iter().map(|p| format!("{} (on {})", p.pod, p.node)).collect();
        line(format!("best-effort (no requests, need a node, not room): {}", listed(&pods, 20)));
    }
    // Grouped by why (every node of a batch has its DaemonSet pods): the first few named, JSON has them all.
    let mut skipped: Vec<(&str, Vec<String>)> = Vec::new();
    for pod in &simulation.skipped {
        let named = format!("{} (on {})", pod.pod, pod.node);
        match skipped.iter_mut().find(|(why, _)| *why == pod.why) {
            Some((_, pods)) => pods.push(named),
            None => skipped.push((&pod.why, vec![named])),
        }
    }
    for (why, pods) in skipped {
        line(format!("not evicted, {why}: {}", listed(&pods, 5)));
    }
    for budget in &simulation.budgets {
        let verdict = if budget.blocks {
            "refuses every eviction (the drain waits until its timeout)".to_string()
        } else {
            format!("refuses {} of them until the evicted pods are back (the drain retries)", budget.refused)
        };
        line(format!(
            "budget: PodDisruptionBudget {} allows {} disruption(s) now, {} left for this batch; it evicts {} of its \
             pods: {verdict}",
            budget.pdb, budget.allowed_now, budget.left_for_batch, budget.evictions
        ));
    }
    if !simulation.evicted.iter().any(|p| p.outcome != "not-recreated") {
        return out;
    }
    let c = &simulation.capacity;
    line(format!(
        "capacity: the evicted pods request cpu {}, memory {}; free on the {} schedulable node(s) that stay ({}): cpu \
         {}, memory {}{}{}",
        show_millicores(c.requested_cpu_millis),
        show_bytes(c.requested_memory_bytes),
        c.nodes.len(),
        listed(&c.nodes, 5),
        show_millicores(c.free_cpu_millis),
        show_bytes(c.free_memory_bytes),
        if c.tainted.is_empty() {
            String::new()
        } else {
            format!("; tainted, only for pods that tolerate it: {}", listed(&c.tainted, 5))
        },
        if c.excluded.is_empty() { String::new() } else { format!("; taking nothing: {}", listed(&c.excluded, 5)) }
    ));
    for pod in simulation.evicted.iter().filter(|p| p.outcome == "pending") {
        line(format!("Pending: {} ({}): {}", pod.pod, requests(pod), pod.reason.as_deref().unwrap_or("no node fits")));
    }
    out
}
