//! Control plane: masters one at a time; any failure stops the run before the next master.

use super::batches::StopSignal;
use super::run::UpgradeRun;
use super::sequence::{Role, upgrade_host};
use super::validation::Invalid;
use crate::events::Event;
use crate::vocabulary::Phase;
use crate::vocabulary::{HostOutcome, HostReport, StopReason};

/// Upgrades `masters` in order. Returns the reports and, when the phase stopped early, why.
pub(crate) async fn run(
    run: &UpgradeRun,
    masters: &[String],
    stop: &StopSignal,
) -> (Vec<HostReport>, Option<StopReason>) {
    let mut reports = Vec::new();
    let mut stopped: Option<StopReason> = None;
    for (index, master) in masters.iter().enumerate() {
        if stopped.is_none() && stop.is_stopping() {
            stopped = Some(StopReason::Halted(run.halt()));
        }
        if stopped.is_none() {
            // The cluster valid again after the master before (the first master takes the standard it is held to).
            stopped =
                validate_before(run, Phase::ControlPlane, &format!("master {master}"), std::slice::from_ref(master))
                    .await;
            if stopped.is_none() && stop.is_stopping() {
                stopped = Some(StopReason::Halted(run.halt()));
            }
        }
        if let Some(why) = &stopped {
            let outcome = HostOutcome::NotStarted { reason: why.to_string() };
            reports.push(run.host_completed(Phase::ControlPlane, master, outcome, std::time::Instant::now()).await);
            continue;
        }
        run.event(Event::BatchStarted {
            phase: Phase::ControlPlane,
            index: index + 1,
            total: masters.len(),
            hosts: vec![master.clone()],
        });
        run.write_progress().await;
        // The only master's API server is away while its upgrade restarts it: the lease is written with the
        // control-plane ready timeout more for that time, so the renewals it misses do not fence the run.
        let window = api_away_window(run, master);
        if let Some(window) = window {
            run.extend_cluster_lock(window).await;
        }
        let report = upgrade_host(run, master, Role::Master).await;
        if window.is_some() {
            run.extend_cluster_lock(std::time::Duration::ZERO).await;
        }
        let failed = report.outcome.is_failure();
        run.event(Event::BatchFinished {
            phase: Phase::ControlPlane,
            index: index + 1,
            failed: usize::from(failed),
            size: 1,
        });
        if failed {
            stopped = Some(StopReason::MasterFailed { master: master.clone() });
        }
        reports.push(report);
    }
    (reports, stopped)
}

/// The gate before the first cordon of `hosts` (`what` names them): a pause, the validation, the drain blockers, the
/// maintenance window; why the run must stop, if it must.
pub(crate) async fn validate_before(
    run: &UpgradeRun,
    phase: Phase,
    what: &str,
    hosts: &[String],
) -> Option<StopReason> {
    // First the pause: once resumed, the cluster is validated as it is then.
    if let Some(stop) = super::pause::before(run, what).await {
        return Some(stop);
    }
    if run.stop.is_stopping() {
        return None;
    }
    match super::validation::before(run, &run.validation, what, hosts).await {
        Ok(()) if run.stop.is_stopping() => None,
        Ok(()) => match super::preflight::recheck_drain_blockers(run, phase, what, hosts).await {
            // Last, right before the first cordon: too little of the maintenance window left (maintenance.rs).
            None if !run.stop.is_stopping() => super::maintenance::before(run, phase, what).await,
            other => other,
        },
        Err(Invalid::NotValid(reason)) => Some(StopReason::NotValid { reason }),
        Err(Invalid::Setting(e)) => {
            let message = match &e.hint {
                Some(hint) => format!("{} ({hint})", e.message),
                None => e.message.clone(),
            };
            Some(StopReason::Preflight { message, exit_code: e.code() })
        }
    }
}

/// How much longer the lease must hold while `master` is upgraded: `upgrade_control_plane_ready_timeout` (the bound
/// on the wait for its API server to answer again) when it is the inventory's only master, so the cluster's API is
/// away while it restarts; none with several masters (the API server of another answers meanwhile).
fn api_away_window(run: &UpgradeRun, master: &str) -> Option<std::time::Duration> {
    (run.plan.masters.len() <= 1).then(|| {
        std::time::Duration::from_secs(run.host_seconds(master, "upgrade_control_plane_ready_timeout", 300).max(1))
    })
}
