//! Verify: the cluster is read once more; every node this run upgraded must be Ready at the target, and every node
//! left unschedulable is listed with the command that makes it schedulable again.

use std::collections::HashMap;
use std::time::Instant;

use super::run::UpgradeRun;
use crate::cluster::ClusterNode;
use crate::error::Result;
use crate::vocabulary::Phase;
use crate::vocabulary::{HostOutcome, HostReport, LeftToOperator, Step};

/// What the upgraded hosts whose flavour probes them have installed now (`host_version.yml`), by host.
pub(crate) async fn installed_versions(
    run: &UpgradeRun,
    upgraded: &[String],
) -> HashMap<String, Result<String, String>> {
    let probed: Vec<&String> = upgraded.iter().filter(|h| run.probes_host_version(h)).collect();
    let reads = probed.into_iter().map(|host| async move {
        (host.clone(), super::cluster_reads::read_host_version(run, Phase::Verify, host).await)
    });
    super::fan_out(run.forks(), reads).await.into_iter().collect()
}

/// What the openshift flavour checks beyond the nodes (openshift/cluster_images.yml, read once from the first master):
/// by upgraded host, what is behind the target: the OpenShift release the API server reports and the images of the
/// control-plane pods (masters), the images of the SDN pods (every host); and the workloads left to the operator with
/// the image each runs. A read that fails is a problem of every upgraded host: a check that cannot read what it
/// checks fails. Other flavours: nothing.
pub(crate) async fn openshift_images(
    run: &UpgradeRun,
    upgraded: &[String],
) -> (HashMap<String, String>, Vec<LeftToOperator>) {
    let mut problems: HashMap<String, String> = HashMap::new();
    if run.plan.flavor.flavor != crate::flavor::Flavor::Openshift || upgraded.is_empty() {
        return (problems, Vec::new());
    }
    let file = run.playbook("cluster_images.yml");
    let facts = match run.run_step(Phase::Verify, &run.first_master, Step::Verify, &file, &[], None).await {
        Ok(facts) => facts,
        Err(f) => {
            for host in upgraded {
                problems.insert(host.clone(), format!("cannot read the cluster's images: {}", f.reason));
            }
            return (problems, Vec::new());
        }
    };
    let fact = |name: &str| facts.get(name).and_then(|v| v.as_str()).unwrap_or_default().to_string();
    let stdout = |name: &str| {
        facts.get(name).and_then(|r| r.get("stdout")).and_then(|v| v.as_str()).unwrap_or_default().to_string()
    };
    let mut add = |host: &str, problem: String| {
        problems.entry(host.to_string()).and_modify(|p| *p = format!("{p}; {problem}")).or_insert(problem);
    };
    let masters: Vec<&String> = upgraded.iter().filter(|h| run.plan.masters.contains(h)).collect();
    if !masters.is_empty() {
        let release = crate::cluster::openshift_release(&stdout("upgrade_openshift_version"));
        let image = fact("upgrade_openshift_control_plane_image");
        let pods = stdout("upgrade_control_plane_pods");
        for master in masters {
            match &release {
                Ok(r) if run.target.is_reported_by(r) => {}
                Ok(r) => add(master, format!("the API server reports OpenShift {r}, not {}", run.target)),
                Err(e) => add(master, e.clone()),
            }
            // A custom upgrade command is the whole upgrade: its control plane is the operator's.
            if run.render_for(master, "{{ upgrade_master_upgrade_command | default('') }}").is_empty() {
                let node = run.node_name(master);
                if let Err(e) =
                    crate::cluster::pods_not_at_image(&pods, &node, &["master-api-", "master-controllers-"], &image)
                {
                    add(master, e);
                }
            }
        }
    }
    if facts.get("upgrade_openshift_sdn").and_then(|v| crate::ansible_compat::boolean(v)) == Some(true) {
        let image = fact("upgrade_openshift_node_image");
        let pods = stdout("upgrade_sdn_pods");
        for host in upgraded {
            if let Err(e) = crate::cluster::pods_not_at_image(&pods, &run.node_name(host), &["sdn-", "ovs-"], &image) {
                add(
                    host,
                    format!("{e} (upgrade_openshift_sdn: false when the cluster does not run the OpenShift SDN)"),
                );
            }
        }
    }
    if problems.is_empty() {
        let release = crate::cluster::openshift_release(&stdout("upgrade_openshift_version")).unwrap_or_default();
        run.notice(
            None,
            format!(
                "verified the cluster's images: the API server reports OpenShift {release}, the control plane runs {}, \
                 the SDN of {} upgraded host(s) runs {}",
                fact("upgrade_openshift_control_plane_image"),
                upgraded.len(),
                fact("upgrade_openshift_node_image")
            ),
        );
    }
    let left = facts
        .get("upgrade_left_to_operator")
        .and_then(|r| r.get("results"))
        .and_then(|r| r.as_array())
        .map(|results| {
            results
                .iter()
                .filter_map(|r| {
                    let image = crate::cluster::workload_image(r.get("stdout")?.as_str()?)?;
                    let item = r.get("item")?;
                    let text = |k: &str| item.get(k).and_then(|v| v.as_str()).unwrap_or_default().to_string();
                    Some(LeftToOperator {
                        workload: format!("{}/{}", text("kind"), text("name")),
                        namespace: text("namespace"),
                        image,
                    })
                })
                .collect()
        })
        .unwrap_or_default();
    (problems, left)
}

/// Checks the hosts upgraded by this run: Ready, and at the target by what they have installed (`installed`, for the
/// hosts the flavour probes) or by their kubelet version, and nothing the flavour moved left behind (`behind`, by
/// host). Returns a report per host checked.
pub(crate) async fn check_upgraded(
    run: &UpgradeRun,
    cluster: &HashMap<String, ClusterNode>,
    installed: &HashMap<String, Result<String, String>>,
    behind: &HashMap<String, String>,
    upgraded: &[String],
) -> Vec<HostReport> {
    // Concurrently, so that the journal's entries of many hosts share their syncs.
    let checks = upgraded.iter().map(|host| {
        let started = Instant::now();
        let node = run.node_name(host);
        let outcome = match cluster.get(&node) {
            None => failed(format!("node {node} is no longer in the cluster")),
            Some(n) if !n.ready => failed(format!("node {node} is not Ready")),
            Some(_) if installed.contains_key(host) => match &installed[host] {
                Err(reason) => failed(format!("cannot read what {host} has installed: {reason}")),
                Ok(v) if !run.target.is_reported_by(v) => {
                    failed(format!("{host} has {v} installed, not {}", run.target))
                }
                Ok(_) => HostOutcome::Upgraded { left_cordoned: false },
            },
            Some(n) if !run.target.is_reported_by(&n.kubelet_version) => {
                failed(format!("node {node} runs {}, not {}", n.kubelet_version, run.target))
            }
            Some(_) => HostOutcome::Upgraded { left_cordoned: false },
        };
        let outcome = match (outcome, behind.get(host)) {
            (HostOutcome::Upgraded { .. }, Some(problem)) => failed(problem.clone()),
            (outcome, _) => outcome,
        };
        run.host_completed(Phase::Verify, host, outcome, started)
    });
    super::fan_out(run.forks(), checks).await
}

/// The nodes of the whole cluster that are not Ready at the end and that this run did not upgrade, by node name.
pub(crate) fn not_ready_untouched(
    run: &UpgradeRun,
    cluster: &HashMap<String, ClusterNode>,
    upgraded: &[String],
) -> Vec<String> {
    let upgraded: Vec<String> = upgraded.iter().map(|h| run.node_name(h)).collect();
    let mut nodes: Vec<String> =
        cluster.values().filter(|n| !n.ready && !upgraded.contains(&n.name)).map(|n| n.name.clone()).collect();
    nodes.sort();
    nodes
}

pub(crate) fn failed(reason: String) -> HostOutcome {
    HostOutcome::Failed { step: Step::Verify, reason, unreachable: false, left_cordoned: false }
}
