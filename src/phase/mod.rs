//! The phases of an upgrade, each a module, and what runs them: the run context, the host sequences, the batches.
//! Their shared words (Step, HostOutcome, Summary...) are in `crate::vocabulary`.

pub(crate) mod batches;
pub(crate) mod certificates;
pub(crate) mod cluster_hooks;
pub(crate) mod cluster_lock;
pub(crate) mod control_plane;
pub(crate) mod etcd_backup;
pub(crate) mod manager;
pub(crate) mod nodes;
pub(crate) mod poller;
pub(crate) mod preflight;
pub(crate) mod recorder;
pub(crate) mod run;
pub(crate) mod sequence;
pub(crate) mod step_runner;
pub(crate) mod verify;

/// Awaits futures together on the current task (they borrow the run) and returns their outputs in order.
pub(crate) async fn join_all<F: std::future::Future>(futures: impl Iterator<Item = F>) -> Vec<F::Output> {
    let mut pending: Vec<Option<std::pin::Pin<Box<F>>>> = futures.map(|f| Some(Box::pin(f))).collect();
    let mut outputs: Vec<Option<F::Output>> = pending.iter().map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut any_pending = false;
        for (slot, fut) in outputs.iter_mut().zip(pending.iter_mut()) {
            if let Some(f) = fut {
                match f.as_mut().poll(cx) {
                    std::task::Poll::Ready(v) => {
                        *slot = Some(v);
                        *fut = None;
                    }
                    std::task::Poll::Pending => any_pending = true,
                }
            }
        }
        if any_pending { std::task::Poll::Pending } else { std::task::Poll::Ready(()) }
    })
    .await;
    outputs.into_iter().flatten().collect()
}
