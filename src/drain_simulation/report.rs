//! What the drain simulation says of one batch (printed by render.rs, carried as is in the live plan's JSON).

use serde::Serialize;

/// The verdict on one batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Verdict {
    /// Every evicted pod finds a place and no budget refuses for good.
    Fits,
    /// An evicted pod would stay Pending, or a budget allows no disruption at all.
    Blocked,
    /// A list it needs could not be read: never "fits".
    Unreadable,
}

/// An evicted pod and what becomes of it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct EvictedPod {
    pub pod: String,
    pub node: String,
    pub cpu_millis: i64,
    pub memory_bytes: i64,
    /// No CPU or memory request or limit: it needs a node, not room.
    pub best_effort: bool,
    /// `placed`, `pending` or `not-recreated` (no controller: `drain --force` deletes it for good).
    pub outcome: String,
    pub placed_on: Option<String>,
    /// Why it would stay Pending.
    pub reason: Option<String>,
}

/// A pod of a drained node the drain does not evict.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SkippedPod {
    pub pod: String,
    pub node: String,
    pub why: String,
}

/// A budget that would refuse evictions of the batch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BudgetRefusal {
    pub pdb: String,
    /// `status.disruptionsAllowed` as read now.
    pub allowed_now: i64,
    /// What the earlier batches leave of it for this one.
    pub left_for_batch: i64,
    /// This batch's evictions of pods it guards, and how many of them it would refuse.
    pub evictions: usize,
    pub refused: usize,
    /// It allows no disruption at all: the drain waits for it until its timeout.
    pub blocks: bool,
}

/// The evicted pods' requests against the room on the schedulable nodes that stay.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Capacity {
    /// The requests of the evicted pods to place (not the ones deleted for good).
    pub requested_cpu_millis: i64,
    pub requested_memory_bytes: i64,
    /// The allocatable left on the nodes that stay, before the evicted pods are placed.
    pub free_cpu_millis: i64,
    pub free_memory_bytes: i64,
    /// The schedulable nodes that stay (Ready, not cordoned, not in the batch) without a NoSchedule or NoExecute
    /// taint: the free room above is theirs.
    pub nodes: Vec<String>,
    /// The schedulable nodes that stay with such a taint, and it (`m1 (node-role.kubernetes.io/control-plane:
    /// NoSchedule)`): only pods that tolerate it go there, so their room is not counted above.
    pub tainted: Vec<String>,
    /// The other nodes and why they take nothing: `n1 (in this batch)`, `m1 (cordoned)`, `n9 (NotReady)`.
    pub excluded: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BatchSimulation {
    pub verdict: Verdict,
    /// Why it is blocked or unreadable.
    pub reasons: Vec<String>,
    pub evicted: Vec<EvictedPod>,
    pub skipped: Vec<SkippedPod>,
    pub budgets: Vec<BudgetRefusal>,
    pub capacity: Capacity,
}

impl BatchSimulation {
    pub fn unreadable(reason: &str) -> BatchSimulation {
        BatchSimulation {
            verdict: Verdict::Unreadable,
            reasons: vec![reason.to_string()],
            evicted: Vec::new(),
            skipped: Vec::new(),
            budgets: Vec::new(),
            capacity: Capacity::default(),
        }
    }
}
