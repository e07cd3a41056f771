//! The validation between batches and between masters (README "Validation between batches"): before the first
//! cordon of a master or batch that follows another, the cluster must be valid `upgrade_validate_count` reads in a
//! row, `upgrade_validation_interval` apart, within `upgrade_validation_timeout` (`crate::cluster_validation` says
//! what valid is). Before the run's first cordon the cluster is read once for the standard it is held to (the
//! baseline): nothing has moved yet, so there is nothing to wait for. It sees the run through `ClusterCalls` only, so
//! the run can hold its state.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;
use std::time::Instant;

use serde_json::Value;

use super::cluster_calls::ClusterCalls;
use crate::cluster_validation::{Baseline, ClusterView, WorkloadRef, not_valid};
use crate::drain_blockers::DrainBlocker;
use crate::error::Error;
use crate::settings::{
    BATCH_SOAK, VALIDATE_COUNT, VALIDATION_INTERVAL, VALIDATION_TIMEOUT, ValidationSettings, validation_settings,
};
use crate::vocabulary::Step;

#[derive(Default)]
pub(crate) struct Validation {
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// Taken before the run's first cordon; `None` until then.
    baseline: Option<Baseline>,
    settings: Option<ValidationSettings>,
    /// The workloads with a pod on a node drained so far.
    watched: BTreeSet<WorkloadRef>,
    /// The master or batch started last (`batch 1`): the one a soak watches.
    last: Option<String>,
    /// The drain blockers found in the last read, for the check of the next drains (preflight/drain_blockers.rs):
    /// one pod list serves both.
    drain_blockers: Option<BTreeMap<String, Vec<DrainBlocker>>>,
}

impl Validation {
    /// The drain blockers of the cluster read last by the validation, once: `None` when it has not read since
    /// (validation off), so the caller reads them itself.
    pub(crate) fn take_drain_blockers(&self) -> Option<BTreeMap<String, Vec<DrainBlocker>>> {
        self.state.lock().ok().and_then(|mut s| s.drain_blockers.take())
    }

    /// `node` failed in this run: the failure threshold decided whether the run goes on; the validation does not
    /// hold the next batch for it.
    pub(crate) fn excuse(&self, node: &str) {
        if let Ok(mut state) = self.state.lock() {
            if let Some(baseline) = state.baseline.as_mut() {
                baseline.excuse(node);
            }
        }
    }
}

/// Why the next master or batch must not start.
pub(crate) enum Invalid {
    /// A setting renders to something that is not valid: an input error (exit 2); nothing was touched yet.
    Setting(Error),
    /// Not valid within the timeout, or the batch before failed its soak: what was not valid.
    NotValid(String),
}

/// The settings as the first master renders them.
fn settings(run: &impl ClusterCalls) -> Result<ValidationSettings, Error> {
    let read = |name: &str| run.render_for(run.first_master(), &format!("{{{{ {name} | default('') }}}}"));
    let (count, interval, timeout) = (read(VALIDATE_COUNT), read(VALIDATION_INTERVAL), read(VALIDATION_TIMEOUT));
    validation_settings(Some(&count), Some(&interval), Some(&timeout), Some(&read(BATCH_SOAK)))
}

/// Whether the run validates the cluster between batches (waiting for the evicted pods to be back); a setting that
/// does not render counts as off, the answer that assumes less.
pub(crate) fn validates_between_batches(run: &impl ClusterCalls) -> bool {
    settings(run).is_ok_and(|s| s.timeout.is_some())
}

/// One read of the four lists through cluster_validation.yml; why it could not be read otherwise.
async fn read(run: &impl ClusterCalls) -> Result<ClusterView, String> {
    let file = run.playbook("cluster_validation.yml");
    let facts = run.run_step_quietly(run.first_master(), Step::ReadCluster, &file, &[]).await.map_err(|f| f.reason)?;
    let mut texts = Vec::new();
    for (register, what) in [
        ("upgrade_validation_nodes", "get nodes"),
        ("upgrade_validation_pods", "get pods"),
        ("upgrade_validation_workloads", "get deployments,statefulsets,daemonsets,replicasets"),
        ("upgrade_validation_pdbs", "get pdb"),
    ] {
        let result = facts.get(register);
        let field = |k: &str| result.and_then(|r| r.get(k)).and_then(Value::as_str).unwrap_or_default().to_string();
        let rc = result.and_then(|r| r.get("rc")).and_then(Value::as_i64).unwrap_or(-1);
        if rc != 0 {
            return Err(format!("`{what}` exited {rc}: {}", field("stderr").trim()));
        }
        texts.push(field("stdout"));
    }
    for register in ["upgrade_validation_nodes", "upgrade_validation_pods", "upgrade_validation_workloads"] {
        run.forget(run.first_master(), register);
    }
    ClusterView::read(&texts[0], &texts[1], &texts[2], &texts[3])
}

/// One read, its drain blockers kept for the check of the next drains.
async fn read_and_keep_blockers(run: &impl ClusterCalls, validation: &Validation) -> Result<ClusterView, String> {
    let view = read(run).await?;
    if let Ok(mut state) = validation.state.lock() {
        state.drain_blockers = Some(view.drain_blockers.clone());
    }
    Ok(view)
}

/// Before the first cordon of `hosts` (`what`: `master m2`, `batch 3`): the baseline when nothing has moved yet,
/// else the wait until the cluster is valid. `Ok` also when validation is off or a stop was asked for (the caller
/// sees the stop).
pub(crate) async fn before(
    run: &impl ClusterCalls,
    validation: &Validation,
    what: &str,
    hosts: &[String],
) -> Result<(), Invalid> {
    let nodes: Vec<String> = hosts.iter().map(|h| run.node_name(h)).collect();
    let first = validation.state.lock().map(|s| s.baseline.is_none()).unwrap_or(true);
    let settings = if first {
        let settings = settings(run).map_err(Invalid::Setting)?;
        if let Ok(mut state) = validation.state.lock() {
            state.settings = Some(settings);
        }
        settings
    } else {
        validation.state.lock().ok().and_then(|s| s.settings).unwrap_or_default()
    };
    let Some(timeout) = settings.timeout else { return Ok(()) };
    if first {
        take_baseline(run, validation, what, &nodes).await?;
        remember(validation, what);
        return Ok(());
    }
    wait_until_valid(run, validation, &settings, timeout, what, &nodes).await?;
    if !settings.soak.is_zero() && !run.stop().is_stopping() {
        let soaked = validation.state.lock().ok().and_then(|s| s.last.clone()).unwrap_or_default();
        soak(run, validation, &settings, &soaked).await?;
    }
    remember(validation, what);
    Ok(())
}

fn remember(validation: &Validation, what: &str) {
    if let Ok(mut state) = validation.state.lock() {
        state.last = Some(what.to_string());
    }
}

/// What is not valid in one read, or why it could not be read; `next_nodes` empty: no budget is asked about.
async fn problems(
    run: &impl ClusterCalls,
    validation: &Validation,
    next_nodes: &[String],
) -> (Vec<String>, Option<ClusterView>) {
    match read_and_keep_blockers(run, validation).await {
        Err(why) => (vec![format!("a read of the cluster that works ({why})")], None),
        Ok(view) => {
            let problems = validation
                .state
                .lock()
                .ok()
                .and_then(|s| s.baseline.as_ref().map(|b| not_valid(&view, b, &s.watched, next_nodes)))
                .unwrap_or_default();
            (problems, Some(view))
        }
    }
}

/// The soak of the master or batch before (`soaked`): for `upgrade_batch_soak_seconds`, every
/// `upgrade_validation_interval`, the cluster must stay valid (its nodes Ready, the workloads available); the first
/// read that is not fails it.
async fn soak(
    run: &impl ClusterCalls,
    validation: &Validation,
    settings: &ValidationSettings,
    soaked: &str,
) -> Result<(), Invalid> {
    let seconds = settings.soak.as_secs();
    let until = std::time::SystemTime::now() + settings.soak;
    let (h, m, s) = {
        let (_, _, _, h, m, s) = crate::time_format::civil(until);
        (h, m, s)
    };
    run.notice(None, format!("soaking {soaked} for {seconds}s ({BATCH_SOAK}), until {h:02}:{m:02}:{s:02} UTC"));
    let end = Instant::now() + settings.soak;
    loop {
        let wait = settings.interval.min(end.saturating_duration_since(Instant::now()));
        tokio::time::sleep(wait).await;
        if run.stop().is_stopping() {
            return Ok(());
        }
        let (problems, _) = problems(run, validation, &[]).await;
        if !problems.is_empty() {
            return Err(Invalid::NotValid(format!(
                "{soaked} failed its soak of {seconds}s ({BATCH_SOAK}): {}",
                problems.join("; ")
            )));
        }
        if Instant::now() >= end {
            run.notice(None, format!("{soaked} soaked {seconds}s: the cluster stayed valid"));
            return Ok(());
        }
    }
}

/// Reads until the cluster is valid `count` reads in a row, or the timeout passes.
async fn wait_until_valid(
    run: &impl ClusterCalls,
    validation: &Validation,
    settings: &ValidationSettings,
    timeout: std::time::Duration,
    what: &str,
    nodes: &[String],
) -> Result<(), Invalid> {
    let deadline = Instant::now() + timeout;
    let mut valid_in_a_row = 0;
    let mut last_said = String::new();
    loop {
        let problems = match problems(run, validation, nodes).await {
            (problems, None) => problems,
            (problems, Some(view)) => {
                if problems.is_empty() {
                    valid_in_a_row += 1;
                    if valid_in_a_row >= settings.count {
                        if settings.count > 1 || !last_said.is_empty() {
                            run.notice(None, format!("cluster valid before {what} ({valid_in_a_row} reads in a row)"));
                        }
                        if let Ok(mut state) = validation.state.lock() {
                            state.watched.extend(view.workloads_on(nodes));
                        }
                        return Ok(());
                    }
                    run.notice(None, format!("cluster valid before {what}: {valid_in_a_row}/{} reads", settings.count));
                    last_said.clear();
                }
                problems
            }
        };
        if !problems.is_empty() {
            valid_in_a_row = 0;
            let said = problems.join("; ");
            if said != last_said {
                run.notice(None, format!("before {what}: waiting for {said}"));
                last_said = said;
            }
        }
        if run.stop().is_stopping() {
            return Ok(());
        }
        if Instant::now() + settings.interval > deadline {
            let said = if problems.is_empty() {
                format!("only {valid_in_a_row} of {} valid reads in a row", settings.count)
            } else {
                problems.join("; ")
            };
            return Err(Invalid::NotValid(format!(
                "the cluster was not valid within {VALIDATION_TIMEOUT} {}s before {what}: {said}",
                timeout.as_secs()
            )));
        }
        tokio::time::sleep(settings.interval.min(deadline.saturating_duration_since(Instant::now()))).await;
    }
}

/// The standard before anything moved: a read that fails stops the run here, before the first cordon.
async fn take_baseline(
    run: &impl ClusterCalls,
    validation: &Validation,
    what: &str,
    nodes: &[String],
) -> Result<(), Invalid> {
    let view = read_and_keep_blockers(run, validation).await.map_err(|why| {
        Invalid::NotValid(format!(
            "the cluster could not be read for the validation between batches before {what}: {why} (set \
             {VALIDATION_TIMEOUT}: 0 to run without it)"
        ))
    })?;
    let baseline = Baseline::of(&view);
    if !baseline.not_ready_before.is_empty() {
        run.notice(
            None,
            format!(
                "not Running and Ready before the run, not waited for between batches: {}",
                baseline.not_ready_before.join(", ")
            ),
        );
    }
    if let Ok(mut state) = validation.state.lock() {
        state.watched.extend(view.workloads_on(nodes));
        state.baseline = Some(baseline);
    }
    Ok(())
}
