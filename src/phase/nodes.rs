//! Nodes: batches sized by serial, every node of a batch in flight at once, the failure threshold checked after
//! each batch.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use super::batches::{BatchStop, StopSignal, run_batches};
use super::run::UpgradeRun;
use super::sequence::{Role, upgrade_host};
use crate::events::Event;
use crate::plan::threshold_exceeded;
use crate::vocabulary::Phase;
use crate::vocabulary::{HostOutcome, HostReport, StopReason};

/// Upgrades the batches in order. Returns the reports and, when the phase stopped early, why.
pub(crate) async fn run(
    run: &Arc<UpgradeRun>,
    batches: &[Vec<String>],
    skip: &HashMap<String, String>,
    stop: &StopSignal,
) -> (Vec<HostReport>, Option<StopReason>) {
    let skip = Arc::new(skip.clone());
    let max_fail = run.plan.settings.max_fail_percentage.value;
    let (reports, stopped) = run_in_batches(run, batches, stop, |run, host| {
        let skip = skip.clone();
        async move {
            match skip.get(&host) {
                // Already at the target: it keeps its place in the batch and is said to be skipped there.
                Some(reason) => {
                    let outcome = HostOutcome::Skipped { reason: reason.clone() };
                    run.host_completed(Phase::Nodes, &host, outcome, std::time::Instant::now()).await
                }
                None => upgrade_host(&run, &host, Role::Node).await,
            }
        }
    })
    .await;
    let stopped = stopped.map(|stop| match stop {
        BatchStop::Threshold { batch, failed, size } => {
            StopReason::Threshold { batch, failed, size, max_fail: max_fail.to_string(), blue: false }
        }
        BatchStop::Interrupted => StopReason::HaltedBatches { halt: run.halt(), blue: false },
        BatchStop::Gate(reason) => reason,
    });
    (reports, stopped)
}

/// Runs `per_host` for every host of the nodes phase, batch by batch, with the batch events and the failure
/// threshold after each batch. Hosts never started are reported here.
pub(crate) async fn run_in_batches<F, Fut>(
    run: &Arc<UpgradeRun>,
    batches: &[Vec<String>],
    stop: &StopSignal,
    per_host: F,
) -> (Vec<HostReport>, Option<BatchStop>)
where
    F: Fn(Arc<UpgradeRun>, String) -> Fut,
    Fut: std::future::Future<Output = HostReport> + Send + 'static,
{
    run_numbered_batches(run, batches, 0, batches.len(), stop, per_host).await
}

/// One batch of several (`index` 0-based of `total`), numbered in its events and its stop as a part of the whole:
/// blue-green checks the green nodes between batches.
pub(crate) async fn run_in_batches_from<F, Fut>(
    run: &Arc<UpgradeRun>,
    batch: &[String],
    index: usize,
    total: usize,
    stop: &StopSignal,
    per_host: F,
) -> (Vec<HostReport>, Option<BatchStop>)
where
    F: Fn(Arc<UpgradeRun>, String) -> Fut,
    Fut: std::future::Future<Output = HostReport> + Send + 'static,
{
    run_numbered_batches(run, &[batch.to_vec()], index, total, stop, per_host).await
}

async fn run_numbered_batches<F, Fut>(
    run: &Arc<UpgradeRun>,
    batches: &[Vec<String>],
    offset: usize,
    total: usize,
    stop: &StopSignal,
    per_host: F,
) -> (Vec<HostReport>, Option<BatchStop>)
where
    F: Fn(Arc<UpgradeRun>, String) -> Fut,
    Fut: std::future::Future<Output = HostReport> + Send + 'static,
{
    let max_fail = run.plan.settings.max_fail_percentage.value;
    let phase = Phase::Nodes;
    let finished: Arc<Mutex<HashMap<String, HostReport>>> = Arc::default();
    let result = run_batches(
        batches,
        stop,
        |index, failed, size| {
            let index = index + offset;
            run.event(Event::BatchFinished { phase, index, failed, size });
            threshold_exceeded(failed, size, max_fail)
        },
        async |index, hosts| {
            let what = format!("batch {}", index + offset);
            super::control_plane::validate_before(run, phase, &what, hosts).await
        },
        |index, hosts| {
            let index = index + offset;
            run.batch_started(hosts);
            run.event(Event::BatchStarted { phase, index, total, hosts: hosts.to_vec() });
            run.write_progress()
        },
        |host| {
            let (finished, report) = (finished.clone(), per_host(run.clone(), host.clone()));
            async move {
                let report = report.await;
                let outcome = report.outcome.clone();
                if let Ok(mut finished) = finished.lock() {
                    finished.insert(host, report);
                }
                outcome
            }
        },
    )
    .await;

    let mut finished = finished.lock().map(|mut f| std::mem::take(&mut *f)).unwrap_or_default();
    let mut reports = Vec::new();
    for (host, outcome) in result.outcomes {
        // Hosts that ran reported themselves, with their timings; the others are said here.
        match finished.remove(&host) {
            Some(report) => reports.push(report),
            None => {
                // run_batches says "interrupted" for any stop; a stop for the state directory says so instead.
                let outcome = match outcome {
                    HostOutcome::NotStarted { reason } if reason == "the run was interrupted" => {
                        HostOutcome::NotStarted { reason: run.stop_reason() }
                    }
                    other => other,
                };
                reports.push(run.host_completed(Phase::Nodes, &host, outcome, std::time::Instant::now()).await)
            }
        }
    }
    let stopped = result.stopped.map(|s| match s {
        BatchStop::Threshold { batch, failed, size } => BatchStop::Threshold { batch: batch + offset, failed, size },
        other => other,
    });
    (reports, stopped)
}
