//! Running hosts batch by batch: every host of a batch at once, each finishing its own sequence, then the
//! failure threshold decides whether the next batch starts.

use std::future::Future;

use tokio::sync::watch;

use crate::vocabulary::HostOutcome;

/// Set by the signal handler; checked before anything new starts. Two levels: *stopping* (no new host starts,
/// hosts in flight finish their sequence) and *aborting* (the grace period is over: hosts in flight stop at the next
/// safe point, between steps).
#[derive(Clone, Debug)]
pub(crate) struct StopSignal {
    rx: watch::Receiver<u8>,
}

/// The sending side, kept by whoever handles signals.
#[derive(Debug)]
pub(crate) struct StopHandle {
    tx: watch::Sender<u8>,
}

const STOPPING: u8 = 1;
const ABORTING: u8 = 2;

pub(crate) fn stop_signal() -> (StopHandle, StopSignal) {
    let (tx, rx) = watch::channel(0);
    (StopHandle { tx }, StopSignal { rx })
}

impl StopHandle {
    /// No new host starts; hosts in flight finish.
    pub(crate) fn stop(&self) {
        self.tx.send_if_modified(|level| raise(level, STOPPING));
    }

    /// Hosts in flight stop at their next safe point.
    pub(crate) fn abort(&self) {
        self.tx.send_if_modified(|level| raise(level, ABORTING));
    }
}

fn raise(level: &mut u8, to: u8) -> bool {
    let changed = *level < to;
    *level = (*level).max(to);
    changed
}

impl StopSignal {
    /// A signal that never fires, for the batch tests that run without a signal handler.
    #[cfg(test)]
    pub(crate) fn never() -> StopSignal {
        let (tx, rx) = watch::channel(0);
        // Keep the sender alive for ever so `stopped()` waits rather than returning at once.
        std::mem::forget(tx);
        StopSignal { rx }
    }

    pub(crate) fn is_stopping(&self) -> bool {
        *self.rx.borrow() >= STOPPING
    }

    pub(crate) fn is_aborting(&self) -> bool {
        *self.rx.borrow() >= ABORTING
    }

    /// Resolves when the grace period is over and hosts in flight must stop.
    pub(crate) async fn aborted(&mut self) {
        self.reached(ABORTING).await
    }

    async fn reached(&mut self, level: u8) {
        while *self.rx.borrow_and_update() < level {
            if self.rx.changed().await.is_err() {
                std::future::pending::<()>().await;
            }
        }
    }
}

/// Why the batches stopped before the last one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum BatchStop {
    /// The failures of batch `batch` (1-based) exceeded the threshold.
    Threshold { batch: usize, failed: usize, size: usize },
    /// A stop was requested (a signal).
    Interrupted,
    /// The gate before a batch said no (the cluster not valid after the batch before).
    Gate(crate::vocabulary::StopReason),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BatchesResult {
    /// Every host of every batch, in batch order, with its outcome (`NotStarted` for hosts never reached).
    pub outcomes: Vec<(String, HostOutcome)>,
    pub stopped: Option<BatchStop>,
}

/// Runs the batches in order. `run_host` runs one host's whole sequence; `exceeded(batch, failed, size)` is the
/// failure threshold, asked after each batch (1-based); `gate(index, hosts)` is asked before a batch starts (a reason
/// stops the run there); `on_batch(index, hosts)` is told when a batch starts, and the batch starts once the future
/// it returns is done.
pub(crate) async fn run_batches<F, Fut, B, BFut>(
    batches: &[Vec<String>],
    stop: &StopSignal,
    exceeded: impl Fn(usize, usize, usize) -> bool,
    mut gate: impl AsyncFnMut(usize, &[String]) -> Option<crate::vocabulary::StopReason>,
    mut on_batch: B,
    run_host: F,
) -> BatchesResult
where
    F: Fn(String) -> Fut,
    Fut: Future<Output = HostOutcome> + Send + 'static,
    B: FnMut(usize, &[String]) -> BFut,
    BFut: Future<Output = ()>,
{
    let mut outcomes = Vec::new();
    let mut stopped = None;
    for (index, batch) in batches.iter().enumerate() {
        if stopped.is_none() && stop.is_stopping() {
            stopped = Some(BatchStop::Interrupted);
        }
        if stopped.is_none() {
            stopped = gate(index + 1, batch).await.map(BatchStop::Gate);
            if stopped.is_none() && stop.is_stopping() {
                stopped = Some(BatchStop::Interrupted);
            }
        }
        if let Some(reason) = &stopped {
            let why = match reason {
                BatchStop::Threshold { batch, .. } => format!("batch {batch} failed past max-fail-percentage"),
                BatchStop::Interrupted => "the run was interrupted".to_string(),
                BatchStop::Gate(reason) => reason.to_string(),
            };
            outcomes.extend(batch.iter().map(|h| (h.clone(), HostOutcome::NotStarted { reason: why.clone() })));
            continue;
        }
        on_batch(index + 1, batch).await;
        let results = run_all(batch.iter().map(|h| run_host(h.clone()))).await;
        let failed = results.iter().filter(|o| o.is_failure()).count();
        outcomes.extend(batch.iter().cloned().zip(results));
        let over = exceeded(index + 1, failed, batch.len());
        // An interrupt during the batch is why the run stops, even when its interrupted hosts tip the threshold.
        if stop.is_stopping() {
            stopped = Some(BatchStop::Interrupted);
        } else if over {
            stopped = Some(BatchStop::Threshold { batch: index + 1, failed, size: batch.len() });
        }
    }
    BatchesResult { outcomes, stopped }
}

/// Runs every host's sequence as its own task and returns the outcomes in batch order. A host task that panics
/// fails that host instead of the run.
async fn run_all<Fut>(futures: impl Iterator<Item = Fut>) -> Vec<HostOutcome>
where
    Fut: Future<Output = HostOutcome> + Send + 'static,
{
    let mut set = tokio::task::JoinSet::new();
    let mut outputs = Vec::new();
    for (index, fut) in futures.enumerate() {
        set.spawn(async move { (index, fut.await) });
        outputs.push(None);
    }
    while let Some(joined) = set.join_next().await {
        if let Ok((index, outcome)) = joined {
            outputs[index] = Some(outcome);
        }
    }
    outputs
        .into_iter()
        .map(|o| {
            o.unwrap_or_else(|| HostOutcome::Failed {
                step: crate::vocabulary::Step::Connect,
                reason: "internal error: the host's task stopped unexpectedly".into(),
                unreachable: false,
                left_cordoned: false,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vocabulary::Step;
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    fn failed() -> HostOutcome {
        HostOutcome::Failed { step: Step::Upgrade, reason: "boom".into(), unreachable: false, left_cordoned: true }
    }

    fn batches(spec: &[&[&str]]) -> Vec<Vec<String>> {
        spec.iter().map(|b| b.iter().map(|h| h.to_string()).collect()).collect()
    }

    /// Ansible's rule: strictly exceeded, and a batch that failed whole always stops.
    fn exceeds(pct: usize) -> impl Fn(usize, usize, usize) -> bool {
        move |_, failed, size| failed == size || failed * 100 > pct * size
    }

    #[tokio::test]
    async fn a_batch_over_the_threshold_stops_the_later_ones() {
        let plan = batches(&[&["a", "b", "c", "d"], &["e"]]);
        let result =
            run_batches(
                &plan,
                &StopSignal::never(),
                exceeds(49),
                async |_, _| None,
                |_, _| async {},
                |h| async move {
                    if h == "a" || h == "b" { failed() } else { HostOutcome::Upgraded { left_cordoned: false } }
                },
            )
            .await;
        assert_eq!(result.stopped, Some(BatchStop::Threshold { batch: 1, failed: 2, size: 4 }));
        assert!(matches!(result.outcomes[4].1, HostOutcome::NotStarted { .. }));
    }

    #[tokio::test]
    async fn failures_at_the_threshold_go_on() {
        let plan = batches(&[&["a", "b", "c", "d"], &["e"]]);
        let result =
            run_batches(
                &plan,
                &StopSignal::never(),
                exceeds(50),
                async |_, _| None,
                |_, _| async {},
                |h| async move {
                    if h == "a" || h == "b" { failed() } else { HostOutcome::Upgraded { left_cordoned: false } }
                },
            )
            .await;
        assert_eq!(result.stopped, None);
        assert_eq!(result.outcomes[4].1, HostOutcome::Upgraded { left_cordoned: false });
    }

    #[tokio::test]
    async fn hosts_of_a_batch_run_at_once_and_all_finish() {
        let plan = batches(&[&["a", "b", "c"]]);
        let running = Arc::new(Mutex::new((0, 0)));
        let result = run_batches(
            &plan,
            &StopSignal::never(),
            exceeds(0),
            async |_, _| None,
            |_, _| async {},
            |_| {
                let running = running.clone();
                async move {
                    {
                        let mut r = running.lock().unwrap();
                        r.0 += 1;
                        r.1 = r.1.max(r.0);
                    }
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    running.lock().unwrap().0 -= 1;
                    failed()
                }
            },
        )
        .await;
        assert_eq!(running.lock().unwrap().1, 3, "all three hosts were in flight together");
        assert_eq!(result.outcomes.iter().filter(|(_, o)| o.is_failure()).count(), 3);
    }

    #[tokio::test]
    async fn a_stop_lets_the_batch_finish_and_starts_nothing_new() {
        let plan = batches(&[&["a"], &["b"]]);
        let (handle, signal) = stop_signal();
        let handle = Arc::new(handle);
        let result = run_batches(
            &plan,
            &signal,
            exceeds(100),
            async |_, _| None,
            |_, _| async {},
            |_| {
                let handle = handle.clone();
                async move {
                    handle.stop();
                    HostOutcome::Upgraded { left_cordoned: false }
                }
            },
        )
        .await;
        assert_eq!(result.stopped, Some(BatchStop::Interrupted));
        assert_eq!(result.outcomes[0].1, HostOutcome::Upgraded { left_cordoned: false });
        assert!(matches!(result.outcomes[1].1, HostOutcome::NotStarted { .. }));
    }
}
