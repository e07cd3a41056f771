//! Runs only inside the maintenance window (README "Maintenance windows"), as GKE and AKS do: outside
//! `upgrade_maintenance_window` (or on one of `upgrade_maintenance_exclusions`) the run refuses to start; a run in
//! progress stops at the next safe point (before a master or batch's first cordon, the nodes of the batches before
//! uncordoned) once too little of the window is left for what comes next: the batches' mean time so far, or
//! `upgrade_maintenance_min_remaining` when more. Windows overrun, so stopping at the end matters more than checking
//! at the start (rancher/system-upgrade-controller#63). Never between masters: the control-plane phase starts only if
//! it is predicted to fit whole (`upgrade_maintenance_min_remaining` per master). `--wait-for-window` waits for the
//! next window instead of stopping; `--ignore-maintenance-window` runs as if there were none.

use std::time::Duration;

use jiff::Timestamp;
use serde_json::Value;

use super::run::UpgradeRun;
use crate::error::{Error, Result};
use crate::settings::{
    MAINTENANCE_EXCLUSIONS, MAINTENANCE_MIN_REMAINING, MAINTENANCE_WINDOW, MaintenanceWindow, exclusion_texts,
    min_remaining, until,
};
use crate::vocabulary::{Phase, StopReason};

struct Settings {
    window: MaintenanceWindow,
    min_remaining: Duration,
}

/// The window as the first master renders it; `None` when there is none (or it is ignored).
fn settings(run: &UpgradeRun) -> Result<Option<Settings>> {
    if run.options.window.ignore {
        return Ok(None);
    }
    let read = |template: &str| run.render_for(&run.first_master, template).trim().to_string();
    let text = read(&format!("{{{{ {MAINTENANCE_WINDOW} | default('') }}}}"));
    if text.is_empty() {
        return Ok(None);
    }
    let excluded = read(&format!("{{{{ {MAINTENANCE_EXCLUSIONS} | default([]) | to_json }}}}"));
    let excluded = exclusion_texts(&serde_json::from_str::<Value>(&excluded).unwrap_or(Value::String(excluded)));
    let bad = |why: String| Error::input(why).hint("fix the maintenance window settings; nothing was changed");
    let window =
        MaintenanceWindow::parse(&text, &excluded).map_err(|why| bad(format!("{MAINTENANCE_WINDOW}: {why}")))?;
    let min_remaining = min_remaining(&read(&format!("{{{{ {MAINTENANCE_MIN_REMAINING} | default('') }}}}")))
        .map_err(|why| bad(format!("{MAINTENANCE_MIN_REMAINING}: {why}")))?;
    Ok(Some(Settings { window, min_remaining }))
}

/// Before anything else of the run: outside the window it refuses (exit 1), or waits with `--wait-for-window`.
pub(crate) async fn at_start(run: &UpgradeRun) -> Result<()> {
    let Some(s) = settings(run)? else { return Ok(()) };
    let now = Timestamp::now();
    if let Some(closes) = s.window.open_until(now) {
        run.notice(None, format!("inside the maintenance window ({}) until {}", s.window.text, s.window.local(closes)));
        return Ok(());
    }
    let next = next_said(&s.window, now);
    if run.options.window.wait {
        run.notice(None, format!("outside the maintenance window ({}): waiting for the next, {next}", s.window.text));
        if wait_for_opening(run, &s.window).await {
            return Ok(());
        }
        return Err(Error::hosts_failed("stopped while waiting for the maintenance window; nothing was changed"));
    }
    Err(Error::hosts_failed(format!(
        "outside the maintenance window ({}): the next window opens {next}; nothing was changed",
        s.window.text
    ))
    .hint("run again then, or with --wait-for-window to wait for it, or --ignore-maintenance-window to run now"))
}

fn next_said(window: &MaintenanceWindow, after: Timestamp) -> String {
    match window.next_opening(after) {
        Some(at) => window.local(at),
        None => "never within a year (the exclusions cover every window)".into(),
    }
}

/// Sleeps until a window is open; false when the run is asked to stop first.
async fn wait_for_opening(run: &UpgradeRun, window: &MaintenanceWindow) -> bool {
    loop {
        if window.open_until(Timestamp::now()).is_some() {
            return true;
        }
        if run.stop.is_stopping() {
            return false;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// Before the first cordon of a master or batch (`what`): why the run must stop here, if it must. The first master's
/// gate asks room for every master of the plan; later masters are not asked.
pub(crate) async fn before(run: &UpgradeRun, phase: Phase, what: &str) -> Option<StopReason> {
    let s = match settings(run) {
        Ok(Some(s)) => s,
        Ok(None) => return None,
        Err(e) => return Some(StopReason::Preflight { message: e.message.clone(), exit_code: e.code() }),
    };
    let needed = match phase {
        // Never between masters: the phase starts only if it fits whole.
        Phase::ControlPlane if !run.pace.first_master() => return None,
        Phase::ControlPlane => s.min_remaining * u32::try_from(run.plan.masters.len()).unwrap_or(1),
        _ => run.pace.mean_so_far().max(s.min_remaining),
    };
    loop {
        let now = Timestamp::now();
        let closes = s.window.open_until(now);
        let left = closes.map(|c| until(now, c));
        if left.is_some_and(|left| left > Duration::ZERO && left >= needed) {
            if phase == Phase::Nodes {
                run.pace.batch_starts();
            }
            return None;
        }
        let why = match (closes, left) {
            (Some(closes), Some(left)) => format!(
                "too little of the maintenance window is left for {what}: {}s until it closes at {}, {}s needed ({})",
                left.as_secs(),
                s.window.local(closes),
                needed.as_secs(),
                if needed == s.min_remaining { MAINTENANCE_MIN_REMAINING } else { "the batches' mean time so far" }
            ),
            _ => format!("the maintenance window ({}) has closed before {what}", s.window.text),
        };
        let next = next_said(&s.window, closes.unwrap_or(now));
        if !run.options.window.wait {
            return Some(StopReason::MaintenanceWindow { reason: format!("{why}; the next window opens {next}") });
        }
        run.notice(None, format!("{why}: waiting for the next window, {next} (--wait-for-window)"));
        let next_open = s.window.next_opening(closes.unwrap_or(now));
        while next_open.is_some_and(|at| Timestamp::now() < at) {
            if run.stop.is_stopping() {
                return None;
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        if next_open.is_none() {
            return Some(StopReason::MaintenanceWindow { reason: format!("{why}; no window opens within a year") });
        }
    }
}
