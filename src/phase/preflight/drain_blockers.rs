//! What would block the drains of the hosts to upgrade, said or fatal.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::error::{Error, Result};
use crate::phase::run::UpgradeRun;
use crate::vocabulary::Phase;
use crate::vocabulary::Step;

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
        let list: Vec<String> = blockers.iter().map(ToString::to_string).collect();
        let verdict = if fatal { "" } else { "warning: " };
        run.notice(Some(host), format!("{verdict}its drain would meet: {}", list.join("; ")));
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
    let facts = run
        .run_step(phase, &run.first_master, Step::ReadCluster, &run.playbook("cluster_workloads.yml"), &[], None)
        .await
        .map_err(|f| format!("cannot read the pods and PodDisruptionBudgets on {}: {}", run.first_master, f.reason))?;
    let stdout = |name: &str| {
        facts.get(name).and_then(|r| r.get("stdout")).and_then(Value::as_str).unwrap_or_default().to_string()
    };
    crate::drain_blockers::find(&stdout("upgrade_cluster_pods"), &stdout("upgrade_cluster_pdbs"))
}
