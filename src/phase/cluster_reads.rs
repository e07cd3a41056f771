//! The run's own reads of the cluster, shared by preflight, the in-place sequence, verify, blue-green, the update
//! path and the live plan: the nodes, what a host has installed, the pending certificate signing requests.

use std::collections::HashMap;

use serde_json::Value;

use super::run::UpgradeRun;
use crate::cluster::{ClusterNode, parse_node_list};
use crate::error::{Error, Result};
use crate::settings::TargetVersion;
use crate::vocabulary::{Phase, Step};

/// Reads the pending certificate signing requests and says which there are (nothing is approved here).
pub(crate) async fn report_pending_csrs(run: &UpgradeRun, phase: Phase) {
    match pending_csrs(run, phase).await {
        Ok(pending) if pending.is_empty() => {}
        Ok(pending) => {
            let names: Vec<String> = pending
                .iter()
                .map(|c| if c.requestor.is_empty() { c.name.clone() } else { format!("{} ({})", c.name, c.requestor) })
                .collect();
            run.notice(None, format!("pending certificate signing requests: {}", names.join(", ")));
        }
        Err(why) => run.notice(None, format!("could not read the certificate signing requests: {why}")),
    }
}

/// `get csr -o json` through cluster_csrs.yml; the pending requests, or why they could not be read.
pub(crate) async fn pending_csrs(
    run: &UpgradeRun,
    phase: Phase,
) -> std::result::Result<Vec<crate::cluster::PendingCsr>, String> {
    let file = run.playbook("cluster_csrs.yml");
    let facts = run.run_step(phase, &run.first_master, Step::Csr, &file, &[], None).await.map_err(|f| f.reason)?;
    let result = facts.get("upgrade_cluster_csrs");
    let rc = result.and_then(|r| r.get("rc")).and_then(Value::as_i64).unwrap_or(0);
    let text = |k: &str| result.and_then(|r| r.get(k)).and_then(Value::as_str).unwrap_or_default().trim().to_string();
    if rc != 0 {
        return Err(format!("`get csr -o json` exited {rc}: {}", text("stderr")));
    }
    crate::cluster::parse_pending_csrs(&text("stdout"))
}

/// Reads, on every host the run may upgrade whose flavour says so, what it has installed (`host_version.yml`):
/// OpenShift 3.11.z releases all report one kubelet version, so the package decides "at the target".
pub(crate) async fn read_host_versions(run: &UpgradeRun) -> Result<()> {
    let nodes = run.plan.phase(Phase::Nodes).map(|p| p.batches.concat()).unwrap_or_default();
    // Blue-green's green nodes must already run the target: read by the same rule as the hosts upgraded in place.
    let bg = &run.plan.strategy.blue_green;
    let green = if bg.enabled() && run.plan.has_phase(Phase::Nodes) { bg.green.as_slice() } else { &[] };
    let hosts: Vec<String> =
        run.plan.masters.iter().chain(&nodes).chain(green).filter(|h| run.probes_host_version(h)).cloned().collect();
    let reads = hosts.iter().map(|host| async move { (host, read_host_version(run, Phase::Preflight, host).await) });
    let mut versions = HashMap::new();
    for (host, result) in super::fan_out(run.forks(), reads).await {
        let version = result.map_err(|reason| {
            Error::hosts_failed(format!("cannot read what {host} has installed: {reason}")).hint(
                "upgrade_host_version_command must print the installed version (openshift: rpm -q --qf %{VERSION} \
                 atomic-openshift-node, or origin-node for openshift_deployment_type=origin)",
            )
        })?;
        versions.insert(host.clone(), version);
    }
    if let Ok(mut known) = run.host_versions.lock() {
        known.extend(versions);
    }
    Ok(())
}

/// What the host has installed now, as `upgrade_host_version_command` prints it (checked to be a version).
pub(crate) async fn read_host_version(
    run: &UpgradeRun,
    phase: Phase,
    host: &str,
) -> std::result::Result<String, String> {
    let facts = run
        .run_step(phase, host, Step::ReadVersion, &run.playbook("host_version.yml"), &[], None)
        .await
        .map_err(|f| f.reason)?;
    let stdout = facts
        .get("upgrade_host_version")
        .and_then(|r| r.get("stdout"))
        .and_then(Value::as_str)
        .unwrap_or_default()
        .trim()
        .to_string();
    let Ok(installed) = TargetVersion::parse(&stdout) else {
        return Err(format!("upgrade_host_version_command printed `{stdout}`, not a version"));
    };
    // An OpenShift master runs its control plane from images the packages do not carry: it is at the older of what
    // it has installed and what its static pods' manifests name (openshift/host_version.yml).
    let images = facts
        .get("upgrade_control_plane_manifest_images")
        .and_then(|r| r.get("stdout"))
        .and_then(Value::as_str)
        .unwrap_or_default();
    Ok(match crate::cluster::oldest_image_release(images) {
        Some((release, text)) if release < installed => text,
        _ => stdout,
    })
}

/// Reads the cluster's nodes through the built-in `cluster_state.yml` on the first master.
/// In preflight, while the API server does not answer at all, the read is asked again for as long as the first
/// question's wait allows (preflight/cluster_access.rs): an upgrade an earlier, dead run left going on the only master
/// restarts etcd and then the API server one after the other, so that the API server can be away again after it
/// answered the run's first question.
pub(crate) async fn read_cluster(run: &UpgradeRun, phase: Phase) -> Result<Vec<ClusterNode>> {
    let mut wait = super::api_away::ApiWait::for_run(run);
    let file = run.playbook("cluster_state.yml");
    let facts = loop {
        match run.run_step(phase, &run.first_master, Step::ReadCluster, &file, &[], None).await {
            Ok(facts) => break facts,
            Err(f)
                if phase == Phase::Preflight
                    && super::api_away::api_unavailable(&f.reason)
                    && wait.again(run, &f.reason).await => {}
            Err(f) => {
                let why = wait.given_up(f.reason);
                return Err(Error::hosts_failed(format!(
                    "cannot read the cluster's nodes on {}: {why}",
                    run.first_master
                ))
                .hint("check upgrade_kubectl and the cluster credentials on the first master"));
            }
        }
    };
    let stdout =
        facts.get("upgrade_cluster_nodes").and_then(|r| r.get("stdout")).and_then(Value::as_str).unwrap_or_default();
    let nodes = parse_node_list(stdout).map_err(|e| {
        Error::hosts_failed(format!("cannot read the cluster's nodes on {}: {e}", run.first_master))
            .hint("upgrade_kubectl must print `get nodes -o json` (a Kubernetes NodeList)")
    });
    // Parsed, the list is forgotten, as the poller forgets its reads: on a 5,000-node cluster it is 25 MB, which the
    // first master's facts would otherwise hold to the end of the run.
    run.steps.forget(&run.first_master, "upgrade_cluster_nodes");
    nodes
}
