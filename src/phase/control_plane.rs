//! Control plane: masters one at a time; any failure stops the run before the next master.

use super::batches::StopSignal;
use super::run::UpgradeRun;
use super::sequence::{Role, upgrade_host};
use super::{HostOutcome, HostReport};
use crate::events::Event;
use crate::plan::Phase;

/// Upgrades `masters` in order. Returns the reports and, when the phase stopped early, why.
pub async fn run(run: &UpgradeRun, masters: &[String], stop: &StopSignal) -> (Vec<HostReport>, Option<String>) {
    let mut reports = Vec::new();
    let mut stopped: Option<String> = None;
    for (index, master) in masters.iter().enumerate() {
        if stopped.is_none() && stop.is_stopping() {
            stopped = Some(run.stop_reason());
        }
        if let Some(why) = &stopped {
            reports.push(run.host_completed(
                Phase::ControlPlane,
                master,
                HostOutcome::NotStarted { reason: why.clone() },
                std::time::Instant::now(),
            ));
            continue;
        }
        run.event(Event::BatchStarted {
            phase: Phase::ControlPlane.name().into(),
            index: index + 1,
            total: masters.len(),
            hosts: vec![master.clone()],
        });
        let report = upgrade_host(run, master, Role::Master).await;
        let failed = report.outcome.is_failure();
        run.event(Event::BatchFinished {
            phase: Phase::ControlPlane.name().into(),
            index: index + 1,
            failed: usize::from(failed),
            size: 1,
        });
        if failed {
            stopped = Some(format!("master {master} failed; the masters after it were not started"));
        }
        reports.push(report);
    }
    (reports, stopped)
}
