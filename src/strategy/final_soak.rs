//! Blue-green's final soak (README "Blue-green", as GKE's `nodePoolSoakDuration` and AKS's
//! `finalSoakDurationInMinutes`): once every blue node is evacuated, the run keeps them cordoned for
//! `upgrade_blue_green_final_soak_seconds`, says until when, and watches for a rollback before it finishes.
//!
//! `upgrade --rollback-blue-green` during the soak: from another state directory (or another machine) it runs as
//! always and the soaking run sees a blue node schedulable again; from the same state directory, whose lock the
//! soaking run holds, the rollback command leaves a request beside the lock (`rollback-requested`) and the soaking run,
//! which holds the locks, gives the workload back itself (the same moves as the rollback). `final-soak.json` says
//! which process soaks until when, so the rollback command knows to ask rather than refuse.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use crate::cluster::ClusterNode;
use crate::phase::run::UpgradeRun;
use crate::strategy::nodes_strategy::FINAL_SOAK;
use crate::time_format::utc_timestamp;
use crate::vocabulary::{HostOutcome, HostReport, Phase, StopReason};

/// Written by the soaking run in its state directory for as long as it soaks.
pub(crate) const MARKER: &str = "final-soak.json";
/// Left by `--rollback-blue-green` for the soaking run; removed by it once the workload is given back.
pub(crate) const REQUEST: &str = "rollback-requested";
/// How often the soaking run reads the cluster for a rollback made elsewhere.
const CLUSTER_EVERY: Duration = Duration::from_secs(10);

pub(crate) fn marker(state_dir: &Path) -> PathBuf {
    state_dir.join(MARKER)
}

pub(crate) fn request(state_dir: &Path) -> PathBuf {
    state_dir.join(REQUEST)
}

/// The final soak after the evacuation of `evacuated` (the blue nodes this run evacuated); why the run stops, when a
/// rollback came during it. `None` when there is no soak, the soak ended with the blue nodes still cordoned, or the
/// run is stopping.
pub(crate) async fn final_soak(run: &UpgradeRun, evacuated: &[HostReport]) -> Option<StopReason> {
    let seconds = run.plan.strategy.blue_green.final_soak_seconds;
    let blue: Vec<String> = evacuated
        .iter()
        .filter(|r| matches!(r.outcome, HostOutcome::Upgraded { .. }))
        .map(|r| run.node_name(&r.host))
        .collect();
    if seconds == 0 || blue.is_empty() || run.stop.is_stopping() {
        return None;
    }
    let state_dir = run.options.state_dir.clone();
    let until = SystemTime::now() + Duration::from_secs(seconds);
    let body = serde_json::json!({"pid": std::process::id(), "until": utc_timestamp(until)});
    if let Err(e) = std::fs::write(marker(&state_dir), body.to_string()) {
        run.notice(
            None,
            format!("could not write {} ({e}): a rollback must come from another state directory", MARKER),
        );
    }
    let _ = std::fs::remove_file(request(&state_dir));
    let inventory = run.inventory.path.display();
    run.notice(
        None,
        format!(
            "blue-green final soak: the blue nodes ({}) stay cordoned for {seconds}s ({FINAL_SOAK}), until {}; \
             `upgrade --inventory {inventory} --rollback-blue-green` gives the workload back to them, during the soak \
             or after it",
            blue.join(", "),
            utc_timestamp(until)
        ),
    );
    let stopped = watch(run, &state_dir, &blue, Instant::now() + Duration::from_secs(seconds)).await;
    let _ = std::fs::remove_file(marker(&state_dir));
    if stopped.is_none() && !run.stop.is_stopping() {
        run.notice(
            None,
            format!(
                "blue-green final soak over ({seconds}s): the blue nodes stay cordoned; `--rollback-blue-green` still \
                 gives the workload back to them"
            ),
        );
    }
    stopped
}

/// Until `end`: each second the request file, each `CLUSTER_EVERY` the cluster.
async fn watch(run: &UpgradeRun, state_dir: &Path, blue: &[String], end: Instant) -> Option<StopReason> {
    let mut next_read = Instant::now() + CLUSTER_EVERY;
    while Instant::now() < end {
        tokio::time::sleep(Duration::from_secs(1).min(end.saturating_duration_since(Instant::now()))).await;
        if run.stop.is_stopping() {
            return None;
        }
        if request(state_dir).exists() {
            return Some(roll_back_here(run, state_dir).await);
        }
        if Instant::now() >= next_read {
            next_read = Instant::now() + CLUSTER_EVERY;
            if let Ok(nodes) = crate::phase::cluster_reads::read_cluster(run, Phase::Nodes).await {
                let back: Vec<&String> =
                    blue.iter().filter(|b| nodes.iter().any(|n| &n.name == *b && !n.unschedulable)).collect();
                if !back.is_empty() {
                    let names: Vec<&str> = back.iter().map(|s| s.as_str()).collect();
                    return Some(StopReason::RolledBack {
                        reason: format!(
                            "blue node(s) {} schedulable again during the final soak (a rollback from elsewhere)",
                            names.join(", ")
                        ),
                    });
                }
            }
        }
    }
    None
}

/// A rollback asked for from this state directory: the soaking run makes the rollback's moves itself.
async fn roll_back_here(run: &UpgradeRun, state_dir: &Path) -> StopReason {
    run.notice(None, "blue-green final soak: a rollback was asked for; giving the workload back to the blue nodes");
    let cluster: HashMap<String, ClusterNode> = match crate::phase::cluster_reads::read_cluster(run, Phase::Nodes).await
    {
        Ok(nodes) => nodes.into_iter().map(|n| (n.name.clone(), n)).collect(),
        Err(e) => {
            let _ = std::fs::remove_file(request(state_dir));
            return StopReason::RolledBack {
                reason: format!(
                    "a rollback was asked for during the final soak, but the cluster could not be read ({}); \
                     nothing was moved: run --rollback-blue-green again",
                    e.message
                ),
            };
        }
    };
    let moved = super::rollback::give_back(run, &cluster).await;
    let failed: Vec<String> = moved
        .iter()
        .filter_map(|r| match &r.outcome {
            HostOutcome::Failed { reason, .. } => Some(format!("{}: {reason}", r.host)),
            _ => None,
        })
        .collect();
    // The request goes once it is answered: the rollback command waits for that.
    let _ = std::fs::remove_file(request(state_dir));
    StopReason::RolledBack {
        reason: if failed.is_empty() {
            "rolled back during the final soak at the request of --rollback-blue-green: the blue nodes are schedulable \
             again, the green ones unschedulable"
                .into()
        } else {
            format!(
                "a rollback during the final soak did not finish ({}): run --rollback-blue-green again",
                failed.join("; ")
            )
        },
    }
}
