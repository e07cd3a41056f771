//! The phase manager, in the spirit of k0sctl's: the stages of a run are a closed set (an enum, and a module each
//! that does the work), each with its name, whether it runs given what the run has done so far, and `run`. The
//! manager alone owns their order, the gates (preflight, the etcd backup, "nothing to do"), the "not started"
//! bookkeeping of hosts a stop left behind, and the summary.

use std::sync::Arc;
use std::time::Instant;

use super::batches::StopSignal;
use super::preflight::{self, Preflight};
use super::run::UpgradeRun;
use super::{cluster_hooks, control_plane, etcd_backup, nodes, shared_steps, verify};
use crate::error::Error;
use crate::events::Event;
use crate::journal::JournalEntry;
use crate::settings::HookPoint;
use crate::strategy::blue_green;
use crate::time_format::utc_timestamp;
use crate::vocabulary::{HostOutcome, HostReport, Phase, RunStatus, StopReason, Summary};

/// One stage of a run, in the order the manager runs them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    Preflight,
    EtcdBackup,
    ClusterHook(HookPoint),
    ControlPlane,
    Nodes,
    /// The cluster is read at the end whatever happened; the verify phase's checks run when it is planned.
    Verify,
}

const ORDER: [Stage; 8] = [
    Stage::Preflight,
    Stage::EtcdBackup,
    Stage::ClusterHook(HookPoint::ClusterPre),
    Stage::ControlPlane,
    Stage::ClusterHook(HookPoint::ClusterMid),
    Stage::Nodes,
    Stage::ClusterHook(HookPoint::ClusterPost),
    Stage::Verify,
];

/// What the manager does with a stage.
enum Go {
    Run,
    /// Nothing to do, or not planned.
    Skip,
    /// Planned, but an earlier stop means it does not start: its hosts are reported not started.
    NotStarted(Vec<String>),
}

/// What the stages of one run share: the run, what preflight decided, and the summary being written.
struct RunState<'a> {
    run: &'a Arc<UpgradeRun>,
    stop: &'a StopSignal,
    decided: Preflight,
    summary: Summary,
    /// The error that ended the run before anything moved (rendered at the top by the caller).
    error: Option<Error>,
}

impl RunState<'_> {
    /// Selected nodes not already at the target.
    fn nodes_to_upgrade(&self) -> Vec<String> {
        let skipped = &self.decided.nodes_skipped;
        self.decided.node_batches.iter().flatten().filter(|h| !skipped.contains_key(*h)).cloned().collect()
    }

    fn nothing_to_do(&self) -> bool {
        self.decided.masters.is_empty() && self.nodes_to_upgrade().is_empty()
    }

    fn upgrades_something(&self) -> bool {
        self.run.plan.has_phase(Phase::ControlPlane) || self.run.plan.has_phase(Phase::Nodes)
    }

    fn stopped(&self) -> bool {
        self.summary.stopped.is_some()
    }

    /// The gate holds for phase-by-phase runs too: a run that changes the control plane without a verified backup
    /// of this target (from this run or an earlier one) takes one first.
    fn implied_backup(&self) -> bool {
        let plan = &self.run.plan;
        !self.stopped()
            && !plan.has_phase(Phase::EtcdBackup)
            && plan.has_phase(Phase::ControlPlane)
            && !self.decided.masters.is_empty()
            && !etcd_backup::done_earlier(self.run)
    }

    /// Nodes already at the target are said to be skipped, whatever else happens to the nodes phase.
    async fn nodes_skipped_now(&self) -> Vec<HostReport> {
        let decided = &self.decided;
        let skipped = decided.node_batches.iter().flatten().filter_map(|h| {
            let outcome = HostOutcome::Skipped { reason: decided.nodes_skipped.get(h)?.clone() };
            Some(self.run.host_completed(Phase::Nodes, h, outcome, Instant::now()))
        });
        super::fan_out(self.run.forks(), skipped).await
    }
}

impl Stage {
    /// The phase its events and reports carry.
    fn phase(self) -> Phase {
        match self {
            Stage::Preflight => Phase::Preflight,
            Stage::EtcdBackup => Phase::EtcdBackup,
            Stage::ClusterHook(point) => cluster_hooks::phase_of(point),
            Stage::ControlPlane => Phase::ControlPlane,
            Stage::Nodes => Phase::Nodes,
            Stage::Verify => Phase::Verify,
        }
    }

    fn should_run(self, state: &RunState<'_>) -> Go {
        let plan = &state.run.plan;
        match self {
            Stage::Preflight | Stage::Verify => Go::Run,
            Stage::EtcdBackup if plan.has_phase(Phase::EtcdBackup) && state.nothing_to_do() => {
                state.run.notice(None, "etcd backup skipped: nothing will change");
                Go::Skip
            }
            Stage::EtcdBackup => {
                let wanted = plan.has_phase(Phase::EtcdBackup) || state.implied_backup();
                if wanted && !state.stopped() { Go::Run } else { Go::Skip }
            }
            // Each once per target (the journal remembers), when this run upgrades something; the post hook only
            // when the nodes are part of the run. A stop (or a stop asked for) starts none.
            Stage::ClusterHook(point) => {
                let wanted = state.upgrades_something() && !state.nothing_to_do();
                let wanted = wanted && (point != HookPoint::ClusterPost || plan.has_phase(Phase::Nodes));
                if wanted && !state.stopped() && !state.run.stop.is_stopping() { Go::Run } else { Go::Skip }
            }
            Stage::ControlPlane if !plan.has_phase(Phase::ControlPlane) => Go::Skip,
            Stage::ControlPlane if state.stopped() => Go::NotStarted(state.decided.masters.clone()),
            Stage::ControlPlane => Go::Run,
            Stage::Nodes if !plan.has_phase(Phase::Nodes) || state.nodes_to_upgrade().is_empty() => Go::Skip,
            Stage::Nodes if state.stopped() => Go::NotStarted(state.nodes_to_upgrade()),
            Stage::Nodes => Go::Run,
        }
    }

    /// What a stage that does not run still reports: the nodes already at the target.
    async fn skipped(self, state: &mut RunState<'_>) {
        if self == Stage::Nodes && state.run.plan.has_phase(Phase::Nodes) {
            let reports = state.nodes_skipped_now().await;
            state.summary.hosts.extend(reports);
        }
    }

    async fn run(self, state: &mut RunState<'_>) {
        let run = state.run;
        match self {
            Stage::Preflight => run_preflight(state).await,
            Stage::EtcdBackup => {
                let started = phase_started(run, Phase::EtcdBackup);
                // The phases with batches write it at each batch.
                run.write_progress().await;
                let (reports, open) = etcd_backup::run(run).await;
                state.summary.hosts.extend(reports);
                phase_finished(run, Phase::EtcdBackup, open, started);
                if !open {
                    state.summary.stopped = Some(StopReason::EtcdGate);
                }
            }
            Stage::ClusterHook(point) => {
                let Some(report) = cluster_hooks::run(run, point).await else { return };
                if let HostOutcome::Failed { reason, .. } = &report.outcome {
                    let variable = point.variables().0;
                    state.summary.stopped = Some(StopReason::ClusterHook { variable, reason: reason.clone() });
                }
                state.summary.hosts.push(report);
            }
            Stage::ControlPlane => {
                let started = phase_started(run, Phase::ControlPlane);
                let (reports, stopped) = control_plane::run(run, &state.decided.masters, state.stop).await;
                state.summary.hosts.extend(reports);
                phase_finished(run, Phase::ControlPlane, stopped.is_none(), started);
                state.summary.stopped = stopped;
            }
            Stage::Nodes => {
                let started = phase_started(run, Phase::Nodes);
                let decided = &state.decided;
                let (reports, stopped) = if run.plan.strategy.blue_green.enabled() {
                    blue_green::run(run, &decided.node_batches, state.stop).await
                } else {
                    nodes::run(run, &decided.node_batches, &decided.nodes_skipped, state.stop).await
                };
                state.summary.hosts.extend(reports);
                phase_finished(run, Phase::Nodes, stopped.is_none(), started);
                state.summary.stopped = stopped;
            }
            Stage::Verify => run_verify(state).await,
        }
    }
}

/// Runs the stages in order; returns the summary and, when preflight stopped the run, its error (rendered at the
/// top by the caller).
pub(crate) async fn run(run: &Arc<UpgradeRun>, stop: &StopSignal) -> (Summary, Option<Error>) {
    let phases: Vec<Phase> = run.plan.phases.iter().map(|p| p.phase).collect();
    // A run after one that finished with success starts afresh (hosts at the target are skipped); only a run after
    // one that was cut short, failed or was interrupted resumes it.
    let earlier_succeeded = matches!(&run.history.last_end, Some((RunStatus::Success, _)));
    let resumed = run.history.runs > 0 && !earlier_succeeded;
    let change_id = Some(run.change_id()).filter(|c| !c.is_empty());
    run.event(Event::RunStarted {
        run: run.run_id(),
        target: run.target.to_string(),
        phases,
        resumed,
        change_id: change_id.clone(),
    });
    if let Some((RunStatus::Success, ended)) = &run.history.last_end {
        run.notice(
            None,
            format!(
                "the earlier run from this state directory finished with success at {ended}: this run starts afresh \
                 (not a resume); hosts already at the target are skipped"
            ),
        );
    }
    run.record(JournalEntry::RunStarted {
        run: run.run_id(),
        time: utc_timestamp(std::time::SystemTime::now()),
        target: run.target.to_string(),
        change_id: change_id.clone(),
    });
    let mut state = RunState {
        run,
        stop,
        decided: Preflight::default(),
        summary: Summary { change_id, ..Summary::empty(run.target.to_string()) },
        error: None,
    };
    for stage in ORDER {
        match stage.should_run(&state) {
            Go::Run => stage.run(&mut state).await,
            Go::Skip => stage.skipped(&mut state).await,
            Go::NotStarted(hosts) => {
                stage.skipped(&mut state).await;
                let reports = not_started(run, stage.phase(), &hosts, &state.summary.stopped).await;
                state.summary.hosts.extend(reports);
            }
        }
        // A failed check before anything moved ends the run here: nothing was touched.
        if state.error.is_some() {
            break;
        }
    }
    state.summary.interrupted = run.was_interrupted();
    state.summary.api_removals_acknowledged =
        run.api_removals_acknowledged.lock().map(|a| a.clone()).unwrap_or_default();
    state.summary.cluster_lock_lost = run.fence.reason();
    release_kured_lock(run).await;
    // The release carries the result: `upgrade status` shows the last run's when none is in progress.
    run.finish_progress(state.summary.exit_code().status().name());
    release_cluster_lock(run).await;
    finish(run, &mut state.summary);
    (state.summary, state.error)
}

async fn run_preflight(state: &mut RunState<'_>) {
    let run = state.run;
    let started = phase_started(run, Phase::Preflight);
    // Preflight's cluster calls (the lock, the node list, the checks) are steps like any other: past the grace period
    // of an interrupt the one under way is cut (its command killed) and the run ends here, nothing touched (N9).
    let mut aborted = state.stop.clone();
    let result = tokio::select! {
        result = preflight::run(run, &[blue_green::check_green]) => result,
        _ = aborted.aborted() => Err(Error {
            kind: crate::error::ErrorKind::Interrupted,
            ..Error::hosts_failed(format!(
                "{}: preflight was cut when the grace period ran out (a cluster or host call had not answered); \
                 nothing was touched",
                run.stop_reason()
            ))
        }
        .hint("re-run the same command once the cluster answers")),
    };
    let decided = match result {
        Ok(decided) => decided,
        Err(e) => {
            phase_finished(run, Phase::Preflight, false, started);
            state.summary.stopped = Some(preflight_failed(&e));
            state.error = Some(e);
            return;
        }
    };
    if !decided.resume.is_empty() {
        state.summary.resumed = Some(decided.resume.clone());
    }
    for report in &decided.skipped {
        run.event(Event::HostFinished { report: report.clone() });
    }
    state.summary.hosts.extend(decided.skipped.iter().cloned());
    phase_finished(run, Phase::Preflight, true, started);
    // A stop asked for while preflight ran (a signal, a state directory that cannot be written) starts nothing more.
    if state.stop.is_stopping() {
        state.summary.stopped = Some(StopReason::DuringPreflight(run.halt()));
    }
    state.decided = decided;
    if !state.upgrades_something() {
        let current = state.decided.control_plane_version.as_ref().map_or_else(|| "?".into(), |v| v.to_string());
        run.notice(None, format!("preflight passed: the control plane runs {current}, the target is {}", run.target));
    } else if state.nothing_to_do() {
        run.notice(None, format!("nothing to upgrade: every selected host already runs {}", run.target));
    }
    if state.implied_backup() {
        run.notice(
            None,
            "the control plane is about to change and no verified etcd backup of this target exists: taking one first",
        );
    }
}

/// Reads the cluster at the end, to say what is left cordoned; with the verify phase, checks every upgraded host.
async fn run_verify(state: &mut RunState<'_>) {
    let run = state.run;
    let summary = &mut state.summary;
    let verifying = run.plan.has_phase(Phase::Verify);
    let started = verifying.then(|| phase_started(run, Phase::Verify));
    if verifying {
        run.write_progress().await;
    }
    let upgraded: Vec<String> = summary
        .hosts
        .iter()
        .filter(|r| matches!(r.outcome, HostOutcome::Upgraded { .. }))
        .filter(|r| r.phase == Phase::ControlPlane || r.phase == Phase::Nodes)
        .map(|r| r.host.clone())
        .collect();
    match shared_steps::final_state(run).await {
        Ok(cluster) => {
            if verifying {
                let upgraded = blue_green::to_verify(run, upgraded);
                let installed = verify::installed_versions(run, &upgraded).await;
                let (behind, left_to_operator) = verify::openshift_images(run, &upgraded).await;
                summary.left_to_operator = left_to_operator;
                let checks = verify::check_upgraded(run, &cluster, &installed, &behind, &upgraded).await;
                summary.not_ready_untouched = verify::not_ready_untouched(run, &cluster, &upgraded);
                let ok = checks.iter().all(|r| !r.outcome.is_failure());
                summary.hosts.extend(checks);
                if let Some(started) = started {
                    phase_finished(run, Phase::Verify, ok, started);
                }
            }
            summary.left_cordoned = shared_steps::left_cordoned(run, &cluster);
        }
        Err(e) => {
            run.notice(None, format!("could not read the cluster at the end: {e}"));
            summary.left_cordoned = shared_steps::left_cordoned_by_hosts(run, &summary.hosts);
            summary.cluster_read_error = Some(e.message.clone());
            if let Some(started) = started {
                // A check that cannot read what it checks fails: every host it should have verified fails verify
                // with the reason (exit 1, a failed `verify` suite in JUnit); with nothing upgraded, the cluster as
                // a whole (the first master read it) is what could not be verified.
                let upgraded = blue_green::to_verify(run, upgraded);
                let hosts = if upgraded.is_empty() { vec![run.first_master.clone()] } else { upgraded };
                let reason = format!("not verified: {}", e.message);
                let checks = hosts.iter().map(|host| {
                    let outcome = verify::failed(reason.clone());
                    run.host_completed(Phase::Verify, host, outcome, Instant::now())
                });
                let checks = super::fan_out(run.forks(), checks).await;
                summary.hosts.extend(checks);
                phase_finished(run, Phase::Verify, false, started);
            }
        }
    }
}

/// A check before anything moved failed: the summary says so, and the error's kind is the run's exit code.
pub(crate) fn preflight_failed(e: &Error) -> StopReason {
    StopReason::Preflight { message: e.message.clone(), exit_code: e.code() }
}

async fn not_started(run: &UpgradeRun, phase: Phase, hosts: &[String], why: &Option<StopReason>) -> Vec<HostReport> {
    let reason = why.as_ref().map_or_else(|| "an earlier phase stopped the run".into(), ToString::to_string);
    let mut reports = Vec::new();
    for h in hosts {
        let outcome = HostOutcome::NotStarted { reason: reason.clone() };
        reports.push(run.host_completed(phase, h, outcome, Instant::now()).await);
    }
    reports
}

fn phase_started(run: &UpgradeRun, phase: Phase) -> Instant {
    run.event(Event::PhaseStarted { phase });
    Instant::now()
}

fn phase_finished(run: &UpgradeRun, phase: Phase, ok: bool, started: Instant) {
    run.event(Event::PhaseFinished { phase, ok, duration: started.elapsed() });
}

/// kured's reboot lock goes back whatever happened, before the cluster lease (bounded as the lease's release is
/// after the grace period of an interrupt).
async fn release_kured_lock(run: &UpgradeRun) {
    let release = super::kured_lock::release(run, &run.kured_lock);
    if run.stop.is_aborting() {
        if tokio::time::timeout(RELEASE_AFTER_ABORT, release).await.is_err() {
            run.notice(None, "warning: kured's reboot lock was not given back: the cluster did not answer");
        }
    } else {
        release.await;
    }
}

/// How long the release of the cluster lock may take once the grace period of an interrupt is over.
const RELEASE_AFTER_ABORT: std::time::Duration = std::time::Duration::from_secs(5);

/// The cluster-wide lock goes before the summary: the run is over for whoever waits for it.
async fn release_cluster_lock(run: &UpgradeRun) {
    let held = run.cluster_lock.lock().ok().and_then(|mut slot| slot.take());
    if let Some((held, renewer)) = held {
        // A renewal under way is let finish first (for a few seconds at most): cut, its kubectl would be killed
        // half-way, and the release after it would carry a resourceVersion it may have just made stale.
        super::cluster_lock::stop_renewing(&held).await;
        renewer.abort();
        // Also after the fence stopped the run: the write is conditional, so it releases the lease only when no
        // one took it meanwhile (an outage on this side that ended), and leaves another holder's alone.
        // Past the grace period of an interrupt an API that does not answer does not hold the exit: the release is
        // given a bounded time (a lease left held goes stale after its TTL; a re-run from this state directory takes
        // it back at once).
        let release = super::cluster_lock::release(run, &held);
        if run.stop.is_aborting() {
            if tokio::time::timeout(RELEASE_AFTER_ABORT, release).await.is_err() {
                run.notice(
                    None,
                    format!(
                        "warning: the cluster lock {} was not released: the cluster did not answer within {}s",
                        held.name,
                        RELEASE_AFTER_ABORT.as_secs()
                    ),
                );
            }
        } else {
            release.await;
        }
    }
}

/// The journal's last entry and the summary event.
fn finish(run: &UpgradeRun, summary: &mut Summary) {
    let recorded = run.record(JournalEntry::RunFinished {
        run: run.run_id(),
        time: utc_timestamp(std::time::SystemTime::now()),
        status: summary.exit_code().status(),
    });
    // Checked after the last entry, so a journal that failed on it too never reads as a success.
    if let Some(failure) = run.recorder.write_failures.failure() {
        summary.state_error = Some(failure.clone());
        if summary.stopped.is_none() && !recorded {
            summary.stopped = Some(StopReason::JournalLastEntry(failure.clone()));
        }
    }
    run.event(Event::RunFinished { summary: summary.clone() });
}
