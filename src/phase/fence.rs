//! The cluster lock's fence: why the run stopped driving the cluster. The lock (cluster_lock.rs) sets it, the run
//! (run.rs) reads it for every host it does not start; a leaf, so that neither holds the other.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

/// Why the run stopped driving the cluster, set once by the fence (cluster_lock.rs); read by `UpgradeRun::halt`.
#[derive(Debug, Default)]
pub(crate) struct Fence {
    /// The first stage's reason, replaced by the second's.
    pub(super) reason: Mutex<Option<String>>,
    /// Past the whole lease, or taken by another: the run no longer holds the lease (no clean-up writes either).
    pub(super) lost: AtomicBool,
}

impl Fence {
    pub(crate) fn reason(&self) -> Option<String> {
        self.reason.lock().ok().and_then(|r| r.clone())
    }

    pub(crate) fn lost(&self) -> bool {
        self.lost.load(Ordering::SeqCst)
    }
}
