//! Preflight: before anything moves, every host answers, the cluster is read, and the run is checked against it:
//! masters on one version, a target newer than that (no skipped minor unless allowed), masters already at the target
//! for a nodes-only run, a label selector that selects something. What is already at the target is skipped.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::Instant;

use serde_json::Value;

use super::run::UpgradeRun;
use super::{HostOutcome, HostReport, Step};
use crate::cluster::{ClusterNode, parse_node_list};
use crate::error::{Error, Result};
use crate::plan::{Phase, batch_hosts};
use crate::settings::TargetVersion;

/// What preflight decided the later phases do.
#[derive(Debug, Default)]
pub struct Preflight {
    /// Masters still to upgrade, in order.
    pub masters: Vec<String>,
    /// Nodes still to upgrade, cut into batches by serial.
    pub node_batches: Vec<Vec<String>>,
    /// Hosts with nothing to do, and why.
    pub skipped: Vec<HostReport>,
    /// The version the masters run.
    pub control_plane_version: Option<TargetVersion>,
}

pub async fn run(run: &UpgradeRun) -> Result<Preflight> {
    check_reachable(run).await?;
    let cluster = read_cluster(run, Phase::Preflight).await?;
    let by_name: HashMap<String, ClusterNode> = cluster.iter().map(|n| (n.name.clone(), n.clone())).collect();
    if let Ok(mut before) = run.cluster_before.lock() {
        *before = by_name.clone();
    }
    decide(run, &by_name)
}

/// Opens a connection to every host of the plan, at once, and runs `true`. Any host that does not answer stops the
/// run here, before anything is touched.
async fn check_reachable(run: &UpgradeRun) -> Result<()> {
    let started = Instant::now();
    let hosts = run.plan.hosts.clone();
    let probes = hosts.iter().map(|host| async move {
        let result = match run.pool().get(host).await {
            Ok(conn) => match conn
                .exec("true", None, Some(run.options.connect_timeout.max(std::time::Duration::from_secs(5))))
                .await
            {
                Ok(out) if out.status == 0 => Ok(()),
                Ok(out) => {
                    Err(format!("`true` exited {}: {}", out.status, String::from_utf8_lossy(&out.stderr).trim()))
                }
                Err(e) => Err(e.to_string()),
            },
            Err(e) => Err(e.to_string()),
        };
        (host.clone(), result)
    });
    let results = super::join_all(probes).await;
    let unreachable: Vec<String> =
        results.iter().filter_map(|(h, r)| r.as_ref().err().map(|e| format!("{h} ({e})"))).collect();
    if !unreachable.is_empty() {
        return Err(Error::hosts_failed(format!(
            "preflight: {} of {} hosts cannot be reached: {}",
            unreachable.len(),
            hosts.len(),
            unreachable.join("; ")
        ))
        .hint("fix their connection settings (ansible_host, ansible_port, ansible_user, keys) or leave them out with --limit; nothing was changed"));
    }
    run.notice(None, format!("all {} hosts reachable ({} ms)", hosts.len(), started.elapsed().as_millis()));
    Ok(())
}

/// Reads the cluster's nodes through the built-in `cluster_state.yml` on the first master.
pub async fn read_cluster(run: &UpgradeRun, phase: Phase) -> Result<Vec<ClusterNode>> {
    let facts = run
        .run_step(phase, &run.first_master, Step::ReadCluster, &run.playbook("cluster_state.yml"), &[], None)
        .await
        .map_err(|f| {
            Error::hosts_failed(format!("cannot read the cluster's nodes on {}: {}", run.first_master, f.reason))
                .hint("check upgrade_kubectl and the cluster credentials on the first master")
        })?;
    let stdout =
        facts.get("upgrade_cluster_nodes").and_then(|r| r.get("stdout")).and_then(Value::as_str).unwrap_or_default();
    parse_node_list(stdout).map_err(|e| {
        Error::hosts_failed(format!("cannot read the cluster's nodes on {}: {e}", run.first_master))
            .hint("upgrade_kubectl must print `get nodes -o json` (a Kubernetes NodeList)")
    })
}

fn version_of(node: &ClusterNode) -> Option<TargetVersion> {
    TargetVersion::parse(&node.kubelet_version).ok()
}

fn decide(run: &UpgradeRun, cluster: &HashMap<String, ClusterNode>) -> Result<Preflight> {
    let target = &run.target;
    let plan = &run.plan;
    let mut result = Preflight::default();

    // Every host the run upgrades must be a node the cluster knows.
    let nodes_phase: Vec<String> = plan.phase(Phase::Nodes).map(|p| p.batches.concat()).unwrap_or_default();
    let missing: Vec<String> = plan
        .masters
        .iter()
        .chain(&nodes_phase)
        .filter(|h| !cluster.contains_key(&run.node_name(h)))
        .map(|h| {
            let node = run.node_name(h);
            if node == *h { h.clone() } else { format!("{h} (node_name {node})") }
        })
        .collect();
    if !missing.is_empty() {
        let known: Vec<&str> =
            cluster.keys().map(String::as_str).collect::<BTreeSet<_>>().into_iter().take(10).collect();
        return Err(Error::input(format!("the cluster has no node for: {}", missing.join(", ")))
            .in_file(&run.inventory.path)
            .hint(format!(
                "set node_name on those hosts to their Kubernetes node names (the cluster has: {})",
                known.join(", ")
            )));
    }

    // Masters run one version.
    let mut master_versions: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for m in &plan.masters {
        let node = &cluster[&run.node_name(m)];
        master_versions.entry(node.kubelet_version.clone()).or_default().push(m.clone());
    }
    if master_versions.len() > 1 {
        let described: Vec<String> =
            master_versions.iter().map(|(v, hosts)| format!("{v} on {}", hosts.join(", "))).collect();
        return Err(Error::hosts_failed(format!("the masters run different versions: {}", described.join("; ")))
            .hint("bring every master to one version first (finish or repeat the control-plane upgrade)"));
    }
    let (current_text, _) = master_versions.iter().next().map(|(v, h)| (v.clone(), h.clone())).unwrap_or_default();
    let current = TargetVersion::parse(&current_text).map_err(|_| {
        Error::hosts_failed(format!("the masters report version `{current_text}`, which is not major.minor.patch"))
    })?;

    if *target < current {
        return Err(Error::input(format!("the target {target} is older than the control plane's {current}"))
            .hint("a downgrade is not supported: give a newer --target-version / upgrade_target_version"));
    }
    let skips_minor = target.major != current.major || target.minor > current.minor + 1;
    if skips_minor && !run.options.allow_skip_minor {
        return Err(Error::input(format!(
            "the target {target} skips a minor version (the control plane runs {current})"
        ))
        .hint(format!(
            "upgrade one minor at a time (next: v{}.{}.x), or pass --allow-skip-minor if your distribution supports it",
            current.major,
            current.minor + 1
        )));
    }
    if plan.has_phase(Phase::Nodes) && !plan.has_phase(Phase::ControlPlane) && current < *target {
        return Err(Error::input(format!("the nodes cannot go to {target} while the masters run {current}"))
            .hint("upgrade the control plane first: upgrade --phase control-plane, then --phase nodes"));
    }
    result.control_plane_version = Some(current.clone());

    if plan.has_phase(Phase::ControlPlane) {
        for m in &plan.masters {
            let node = &cluster[&run.node_name(m)];
            match version_of(node) {
                Some(v) if v >= *target => result.skipped.push(skipped(run, Phase::ControlPlane, m, &v)),
                _ => result.masters.push(m.clone()),
            }
        }
    }

    if let Some(nodes_plan) = plan.phase(Phase::Nodes) {
        let candidates = nodes_plan.batches.concat();
        let selected: Vec<String> = match &plan.settings.label.value {
            Some(selector) => {
                let (kept, left): (Vec<String>, Vec<String>) =
                    candidates.iter().cloned().partition(|h| selector.matches(&cluster[&run.node_name(h)].labels));
                if kept.is_empty() {
                    let mut present = BTreeSet::new();
                    for h in &candidates {
                        present.extend(cluster[&run.node_name(h)].labels.iter().map(|(k, v)| format!("{k}={v}")));
                    }
                    let shown: Vec<String> = present.into_iter().take(12).collect();
                    return Err(Error::input(format!(
                        "label selector `{selector}` ({}) matches none of the {} nodes, by the labels the cluster reports",
                        plan.settings.label.describe_origin(),
                        candidates.len()
                    ))
                    .hint(format!("the nodes have these labels: {}", shown.join(", "))));
                }
                if !left.is_empty() {
                    run.notice(None, format!("label `{selector}` leaves out: {}", left.join(", ")));
                }
                kept
            }
            None => candidates,
        };
        let mut to_upgrade = Vec::new();
        for h in selected {
            let node = &cluster[&run.node_name(&h)];
            match version_of(node) {
                Some(v) if v >= *target => result.skipped.push(skipped(run, Phase::Nodes, &h, &v)),
                _ => to_upgrade.push(h),
            }
        }
        result.node_batches = batch_hosts(&to_upgrade, &plan.settings.serial.value);
    }

    report_resume(run, cluster);
    Ok(result)
}

fn skipped(run: &UpgradeRun, phase: Phase, host: &str, version: &TargetVersion) -> HostReport {
    let node = run.node_name(host);
    let earlier =
        run.history.host(phase.name(), host).and_then(|h| h.finished) == Some(crate::journal::HostRecord::Upgraded);
    let reason = if earlier {
        format!("upgraded by an earlier run (runs {version})")
    } else if *version > run.target {
        format!("already runs {version}, newer than the target")
    } else {
        format!("already at {version}")
    };
    HostReport {
        phase: phase.name().into(),
        host: host.into(),
        node: (node != host).then_some(node),
        outcome: HostOutcome::Skipped { reason },
        duration: std::time::Duration::ZERO,
    }
}

/// Tells the operator what an earlier, unfinished run left: hosts in flight, nodes it left cordoned.
fn report_resume(run: &UpgradeRun, cluster: &HashMap<String, ClusterNode>) {
    if run.history.runs == 0 {
        return;
    }
    for ((phase, host), history) in &run.history.hosts {
        if history.in_flight {
            run.notice(
                Some(host),
                format!("was in flight ({phase}) when an earlier run stopped: its sequence starts again from the top"),
            );
        }
        let node = run.node_name(host);
        if cluster.get(&node).is_some_and(|n| n.unschedulable) && history.steps_done.iter().any(|s| s == "cordon") {
            run.notice(Some(host), format!("node {node} is still cordoned by an earlier run"));
        }
    }
}
