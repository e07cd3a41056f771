//! Control plane: masters one at a time; any failure stops the run before the next master.

use super::batches::StopSignal;
use super::run::UpgradeRun;
use super::sequence::{Role, upgrade_host};
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
        let report = upgrade_host(run, master, Role::Master).await;
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
