//! Cluster-level hooks: task files that act on the cluster as a whole (storage migration, role reconciliation,
//! router and registry updates), run once per upgrade on the first master, at three points: before the control
//! plane, between the control plane and the nodes, after the nodes. Each is a step of its own in the events, the
//! journal (as the pseudo-phase `cluster-pre-hook`, ...) and the JUnit report; a failing one stops the run there.

use std::time::Instant;

use super::run::UpgradeRun;
use crate::journal::HostRecord;
use crate::settings::HookPoint;
use crate::vocabulary::{HostOutcome, HostReport, Phase, Step};

/// The pseudo-phase the hook point's step carries in events, journal and JUnit: `cluster-pre-hook`, ...
pub(crate) fn phase_of(point: HookPoint) -> Phase {
    match point {
        HookPoint::ClusterMid => Phase::ClusterMidHook,
        HookPoint::ClusterPost => Phase::ClusterPostHook,
        _ => Phase::ClusterPreHook,
    }
}

/// Runs the cluster hook at `point` on the first master, unless none is set or an earlier run of the same target
/// already ran it to the end (a resumed phase-by-phase upgrade does not repeat cluster-wide work). `None` when
/// nothing ran.
pub(crate) async fn run(run: &UpgradeRun, point: HookPoint) -> Option<HostReport> {
    let hook = run.plan.cluster_hooks.get(&point)?.clone();
    let phase = phase_of(point);
    let host = run.first_master.clone();
    let started = Instant::now();
    if done_earlier(run, phase, &host) {
        let reason = format!("ran to the end in an earlier run for {}", run.target);
        return Some(run.host_completed(phase, &host, HostOutcome::Skipped { reason }, started).await);
    }
    if !run.host_started(phase, &host, false).await {
        let outcome = HostOutcome::NotStarted { reason: run.stop_reason() };
        return Some(run.host_completed(phase, &host, outcome, started).await);
    }
    let outcome = match run.run_step(phase, &host, Step::ClusterHook, &hook.path, &[], None).await {
        Ok(_) => HostOutcome::Upgraded { left_cordoned: false },
        Err(f) => {
            HostOutcome::Failed { step: f.step, reason: f.reason, unreachable: f.unreachable, left_cordoned: false }
        }
    };
    Some(run.host_completed(phase, &host, outcome, started).await)
}

fn done_earlier(run: &UpgradeRun, phase: Phase, host: &str) -> bool {
    run.history.finished_for(phase, host, &run.target.to_string(), &[HostRecord::Upgraded])
}
