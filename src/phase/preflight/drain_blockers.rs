//! What would block the drains of the hosts to upgrade, said or fatal.

use std::collections::BTreeMap;
use std::sync::MutexGuard;

use serde_json::Value;

use crate::drain_blockers::DrainBlocker;
use crate::error::{Error, Result};
use crate::phase::run::UpgradeRun;
use crate::vocabulary::{Phase, Step, StopReason};

/// What would block the drains of the hosts to upgrade (drain_blockers.rs): said as warnings, or fatal with
/// `upgrade_fail_on_drain_blockers: true` (then a cluster whose pods cannot be read is fatal too).
pub(super) async fn check_drain_blockers(run: &UpgradeRun, hosts: &[(String, Phase)]) -> Result<()> {
    let fatal = run.host_flag(&run.first_master, "upgrade_fail_on_drain_blockers", false);
    let found = match read_drain_blockers(run, Phase::Preflight).await {
        Ok(found) => found,
        Err(why) if fatal => {
            return Err(Error::hosts_failed(format!("preflight: cannot check the drains: {why}"))
                .hint("fix the reads, or set upgrade_fail_on_drain_blockers: false; nothing was changed"));
        }
        Err(why) => {
            run.notice(None, format!("warning: drain blockers not checked: {why}"));
            return Ok(());
        }
    };
    let mut blocked = Vec::new();
    for (host, _) in hosts {
        let Some(blockers) = found.get(&run.node_name(host)) else { continue };
        let verdict = if fatal { "" } else { "warning: " };
        run.notice(Some(host), format!("{verdict}its drain would meet: {}", listed(blockers)));
        said(run).insert(run.node_name(host), blockers.clone());
        blocked.push(host.clone());
    }
    if fatal && !blocked.is_empty() {
        return Err(Error::hosts_failed(format!("preflight: drain blockers on {}", blocked.join(", "))).hint(
            "resolve them (relax the PodDisruptionBudgets, give the pods controllers, move local data) or set \
             upgrade_fail_on_drain_blockers: false to go on with warnings; `upgrade plan --live` lists them; nothing was \
             changed",
        ));
    }
    Ok(())
}

/// Reads the cluster's pods and PodDisruptionBudgets (cluster_workloads.yml) and finds the drain blockers by node.
pub(crate) async fn read_drain_blockers(
    run: &UpgradeRun,
    phase: Phase,
) -> std::result::Result<BTreeMap<String, Vec<crate::drain_blockers::DrainBlocker>>, String> {
    let (pods, pdbs) = read_workloads(run, phase).await?;
    crate::drain_blockers::find(&pods, &pdbs)
}

/// The texts of `get pods --all-namespaces -o json` and `get pdb --all-namespaces -o json` (cluster_workloads.yml),
/// or why they could not be read.
pub(crate) async fn read_workloads(run: &UpgradeRun, phase: Phase) -> std::result::Result<(String, String), String> {
    let facts = run
        .run_step(phase, &run.first_master, Step::ReadCluster, &run.playbook("cluster_workloads.yml"), &[], None)
        .await
        .map_err(|f| format!("cannot read the pods and PodDisruptionBudgets on {}: {}", run.first_master, f.reason))?;
    let stdout = |name: &str| {
        facts.get(name).and_then(|r| r.get("stdout")).and_then(Value::as_str).unwrap_or_default().to_string()
    };
    Ok((stdout("upgrade_cluster_pods"), stdout("upgrade_cluster_pdbs")))
}

/// Before the first cordon of `hosts` (`what`: `batch 2`, `master m2`): their drain blockers read again, as they
/// change while the run goes (a budget created, a bare pod scheduled, replicas scaled down). From the validation's
/// read just taken when it is on (one pod list for both), else read here. What changed since it was said is said; with
/// `upgrade_fail_on_drain_blockers: true` a blocker, or lists that cannot be read, stop the run before `what`.
pub(crate) async fn recheck_drain_blockers(
    run: &UpgradeRun,
    phase: Phase,
    what: &str,
    hosts: &[String],
) -> Option<StopReason> {
    let fatal = run.host_flag(&run.first_master, "upgrade_fail_on_drain_blockers", false);
    let found = match run.validation.take_drain_blockers() {
        Some(found) => found,
        None => match read_drain_blockers(run, phase).await {
            Ok(found) => found,
            Err(why) if fatal => {
                let reason = format!("the drain blockers could not be read again before {what}: {why}");
                return Some(StopReason::DrainBlockers { reason });
            }
            Err(why) => {
                run.notice(None, format!("warning: drain blockers not checked again before {what}: {why}"));
                return None;
            }
        },
    };
    let mut blocked = Vec::new();
    for host in hosts {
        let node = run.node_name(host);
        let now = found.get(&node).cloned().unwrap_or_default();
        let before = said(run).get(&node).cloned().unwrap_or_default();
        if !now.is_empty() {
            blocked.push(format!("{host} ({})", listed(&now)));
        }
        if now == before {
            continue;
        }
        let verdict = if fatal { "" } else { "warning: " };
        let message = if now.is_empty() {
            format!("before {what}: its drain no longer meets what was said (read again)")
        } else {
            format!("{verdict}before {what}, read again: its drain would meet: {}", listed(&now))
        };
        run.notice(Some(host), message);
        said(run).insert(node, now);
    }
    (fatal && !blocked.is_empty()).then(|| StopReason::DrainBlockers {
        reason: format!("drain blockers before {what} (upgrade_fail_on_drain_blockers): {}", blocked.join("; ")),
    })
}

fn said(run: &UpgradeRun) -> MutexGuard<'_, BTreeMap<String, Vec<DrainBlocker>>> {
    run.drain_blockers_said.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn listed(blockers: &[DrainBlocker]) -> String {
    blockers.iter().map(ToString::to_string).collect::<Vec<_>>().join("; ")
}
