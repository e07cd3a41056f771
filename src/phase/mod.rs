//! The phases of an upgrade, each a module, and what runs them: the run context, the host sequences, the batches.
//! Their shared words (Step, HostOutcome, Summary...) are in `crate::vocabulary`.

pub(crate) mod api_away;
pub(crate) mod api_removals;
pub(crate) mod batches;
pub(crate) mod certificates;
pub(crate) mod cluster_calls;
pub(crate) mod cluster_hooks;
pub(crate) mod cluster_lock;
pub(crate) mod cluster_reads;
pub(crate) mod control_plane;
pub(crate) mod drain_fallback;
pub(crate) mod etcd_backup;
pub(crate) mod fence;
pub(crate) mod kured_lock;
pub(crate) mod lease;
pub(crate) mod lock_progress;
pub(crate) mod maintenance;
pub(crate) mod manager;
pub(crate) mod node_marks;
pub(crate) mod nodes;
pub(crate) mod pace;
pub(crate) mod pause;
pub(crate) mod poller;
pub(crate) mod prefetch;
pub(crate) mod preflight;
pub(crate) mod recorder;
pub(crate) mod run;
pub(crate) mod sequence;
pub(crate) mod shared_steps;
pub(crate) mod step_runner;
pub(crate) mod undrainable;
pub(crate) mod validation;
pub(crate) mod verify;

/// Awaits futures on the current task (they borrow the run), at most `forks` at once, and returns their outputs in
/// input order. The bound is Ansible's `forks`: a preflight over 5,000 hosts must not hold 5,000 commands (their
/// processes, descriptors and read buffers) at once. Only the futures that were woken are polled again.
///
/// No host future may wait for another one of the same fan-out to start (that one may be queued behind it): the
/// host steps run here share no `run_once` order (see `StepRunner::batch_started`).
pub(crate) async fn fan_out<F: std::future::Future>(
    forks: usize,
    futures: impl IntoIterator<Item = F>,
) -> Vec<F::Output> {
    use futures_util::StreamExt;
    futures_util::stream::iter(futures).buffered(forks.max(1)).collect().await
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    use super::fan_out;

    #[tokio::test(flavor = "current_thread")]
    async fn fan_out_keeps_input_order_and_never_runs_more_than_forks_at_once() {
        let in_flight = AtomicUsize::new(0);
        let most = AtomicUsize::new(0);
        let started = AtomicUsize::new(0);
        // Later inputs finish first, so the outputs come back out of order unless fan_out puts them back.
        let futures = (0..10u64).map(|i| {
            let (in_flight, most, started) = (&in_flight, &most, &started);
            async move {
                started.fetch_add(1, Ordering::SeqCst);
                let now = in_flight.fetch_add(1, Ordering::SeqCst) + 1;
                most.fetch_max(now, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(50 - 5 * i)).await;
                in_flight.fetch_sub(1, Ordering::SeqCst);
                i * i
            }
        });
        let outputs = fan_out(3, futures).await;
        assert_eq!(outputs, (0..10u64).map(|i| i * i).collect::<Vec<_>>());
        assert_eq!(most.load(Ordering::SeqCst), 3, "three at once, never more");
        assert_eq!(started.load(Ordering::SeqCst), 10);
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_fan_out_of_zero_forks_still_runs_everything_one_at_a_time() {
        let in_flight = AtomicUsize::new(0);
        let most = AtomicUsize::new(0);
        let futures = (0..4).map(|i| {
            let (in_flight, most) = (&in_flight, &most);
            async move {
                most.fetch_max(in_flight.fetch_add(1, Ordering::SeqCst) + 1, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(5)).await;
                in_flight.fetch_sub(1, Ordering::SeqCst);
                i
            }
        });
        assert_eq!(fan_out(0, futures).await, vec![0, 1, 2, 3]);
        assert_eq!(most.load(Ordering::SeqCst), 1);
    }

    #[tokio::test(flavor = "current_thread")]
    async fn an_empty_fan_out_is_empty() {
        assert!(fan_out(5, std::iter::empty::<std::future::Ready<u8>>()).await.is_empty());
    }
}
