//! What preflight decides for this run from the cluster as read: the pure decision and its inputs.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use crate::cluster::ClusterNode;
use crate::error::{Error, Result};
use crate::flavor::Flavor;
use crate::journal::History;
use crate::phase::run::UpgradeRun;
use crate::settings::TargetVersion;
use crate::vocabulary::Phase;
use crate::vocabulary::{HostOutcome, HostReport, Resume};

/// What preflight decided the later phases do.
#[derive(Debug, Default)]
pub(crate) struct Preflight {
    /// Masters still to upgrade, in order.
    pub masters: Vec<String>,
    /// The selected nodes cut into batches by serial, as the plan cuts them: nodes already at the target keep their
    /// place in their batch and are skipped there (see `nodes_skipped`).
    pub node_batches: Vec<Vec<String>>,
    /// Nodes of `node_batches` with nothing to do, and why.
    pub nodes_skipped: HashMap<String, String>,
    /// Masters with nothing to do, and why.
    pub skipped: Vec<HostReport>,
    /// The version the masters run.
    pub control_plane_version: Option<TargetVersion>,
    /// What this run takes over from earlier ones.
    pub resume: Resume,
}

/// A check a strategy asks preflight to make on the cluster as read (blue-green: the green nodes are ready to take
/// the load). The strategy offers it; preflight runs it and knows nothing of the strategy.
pub(crate) type StrategyCheck = fn(&UpgradeRun, &HashMap<String, ClusterNode>) -> Result<()>;

/// What preflight decides for this run, from the cluster as read: the pure decision, then the zone-age order and
/// the batches of the nodes selected, and what is taken over from earlier runs.
pub(crate) fn decide(run: &UpgradeRun, cluster: &HashMap<String, ClusterNode>) -> Result<Preflight> {
    let hosts = run
        .plan
        .masters
        .iter()
        .chain(run.plan.phase(Phase::Nodes).into_iter().flat_map(|p| p.batches.iter().flatten()));
    let hosts: Vec<&String> = hosts.collect();
    let input = DecisionInput {
        plan: &run.plan,
        target: &run.target,
        allow_skip_minor: run.options.allow_skip_minor,
        inventory: &run.inventory,
        history: &run.history,
        node_names: hosts.iter().map(|h| ((*h).clone(), run.node_name(h))).collect(),
        installed: run.host_versions.lock().map(|m| m.clone()).unwrap_or_default(),
        probes_installed: hosts.iter().filter(|h| run.probes_host_version(h)).map(|h| (*h).clone()).collect(),
    };
    let order = |kept: Vec<String>| crate::strategy::order::for_run(run, kept, cluster);
    let decision = decide_from(&input, cluster, &order, &mut |notice| run.notice(None, notice))?;
    let result = Preflight {
        masters: decision.masters,
        node_batches: decision.node_batches,
        nodes_skipped: decision.nodes_skipped,
        skipped: decision.skipped,
        control_plane_version: Some(decision.control_plane_version),
        ..Preflight::default()
    };
    let mut result = result;
    result.resume = resume(run, cluster, &result);
    Ok(result)
}

/// What the decision reads besides the cluster: the plan, the target, what earlier runs recorded, and how each
/// planned host is known (its node name, what it has installed when that is what counts).
pub(crate) struct DecisionInput<'a> {
    pub plan: &'a crate::plan::Plan,
    pub target: &'a TargetVersion,
    pub allow_skip_minor: bool,
    /// The inventory, for the batches (a node group's own serial).
    pub inventory: &'a crate::inventory::Inventory,
    pub history: &'a History,
    /// Each planned host's Kubernetes node name.
    pub node_names: HashMap<String, String>,
    /// What probed hosts have installed (`upgrade_host_version_command`), by inventory name.
    pub installed: HashMap<String, String>,
    /// Hosts whose "at the target" is decided from what they have installed, not from their kubelet.
    pub probes_installed: BTreeSet<String>,
}

impl DecisionInput<'_> {
    fn node_name<'h>(&'h self, host: &'h str) -> &'h str {
        self.node_names.get(host).map_or(host, String::as_str)
    }
}

/// What the decision says, before the nodes are ordered and batched.
#[derive(Debug, PartialEq)]
pub(crate) struct Decision {
    /// Masters still to upgrade, in order.
    pub masters: Vec<String>,
    /// Masters with nothing to do.
    pub skipped: Vec<HostReport>,
    /// The nodes the label selects, in run order (`None` without a nodes phase).
    pub nodes_selected: Option<Vec<String>>,
    /// The selected nodes cut into batches by serial, as the plan cuts them.
    pub node_batches: Vec<Vec<String>>,
    /// Selected nodes with nothing to do, and why.
    pub nodes_skipped: HashMap<String, String>,
    /// The version the masters run.
    pub control_plane_version: TargetVersion,
}

/// The decision itself: every host the run upgrades is a node of the cluster, the masters run one version, the
/// target is not older and skips no minor (unless allowed), a nodes-only run finds the masters at the target, the
/// label selects something; hosts at the target are skipped unless an earlier run left them half-way. Pure: what
/// the operator should read is handed to `say` as it comes, even when the decision then refuses; `order` puts the
/// selected nodes in run order (the strategy's zone-age order).
pub(crate) fn decide_from(
    input: &DecisionInput<'_>,
    cluster: &HashMap<String, ClusterNode>,
    order: &dyn Fn(Vec<String>) -> Vec<String>,
    say: &mut dyn FnMut(String),
) -> Result<Decision> {
    let (plan, target) = (input.plan, input.target);

    // Every host the run upgrades must be a node the cluster knows.
    let nodes_phase: Vec<String> = plan.phase(Phase::Nodes).map(|p| p.batches.concat()).unwrap_or_default();
    let missing: Vec<String> = plan
        .masters
        .iter()
        .chain(&nodes_phase)
        .filter(|h| !cluster.contains_key(input.node_name(h)))
        .map(|h| {
            let node = input.node_name(h);
            if node == *h { h.clone() } else { format!("{h} (node_name {node})") }
        })
        .collect();
    if !missing.is_empty() {
        let known: Vec<&str> =
            cluster.keys().map(String::as_str).collect::<BTreeSet<_>>().into_iter().take(10).collect();
        return Err(Error::input(format!("the cluster has no node for: {}", missing.join(", ")))
            .in_file(&input.inventory.path)
            .hint(format!(
                "set node_name on those hosts to their Kubernetes node names (the cluster has: {})",
                known.join(", ")
            )));
    }

    // Each host's version: what it has installed when the flavour probes it, else its kubelet's.
    let text_of = |h: &String| {
        input.installed.get(h).cloned().unwrap_or_else(|| cluster[input.node_name(h)].kubelet_version.clone())
    };
    let version_of = |h: &String| TargetVersion::parse(&text_of(h)).ok();
    let current = control_plane_version(input, &text_of, say)?;
    check_target(input, &current)?;

    let unfinished = |phase: Phase, host: &str| input.history.unfinished(phase, host, &target.to_string());
    let skipped = |phase: Phase, host: &str, version: &TargetVersion| {
        let earlier = input.history.upgraded_earlier(phase, host);
        let reason = skip_reason(input.probes_installed.contains(host), earlier, version, target);
        let node = input.node_name(host);
        HostReport {
            phase,
            host: host.into(),
            node: (node != host).then(|| node.to_string()),
            outcome: HostOutcome::Skipped { reason },
            duration: std::time::Duration::ZERO,
            window: None,
        }
    };
    let mut decision = Decision {
        masters: Vec::new(),
        skipped: Vec::new(),
        nodes_selected: None,
        node_batches: Vec::new(),
        nodes_skipped: HashMap::new(),
        control_plane_version: current,
    };
    if plan.has_phase(Phase::ControlPlane) {
        for m in &plan.masters {
            match version_of(m) {
                Some(v) if v >= *target && !unfinished(Phase::ControlPlane, m) => {
                    decision.skipped.push(skipped(Phase::ControlPlane, m, &v))
                }
                _ => decision.masters.push(m.clone()),
            }
        }
    }
    if let Some(nodes_plan) = plan.phase(Phase::Nodes) {
        let candidates = nodes_plan.batches.concat();
        let labels_of = |h: &str| cluster.get(input.node_name(h)).map(|n| &n.labels);
        let selector = plan.settings.label.value.as_ref();
        let order = |kept: Vec<String>, left: &[String]| {
            if let (Some(selector), false) = (selector, left.is_empty()) {
                say(format!("label `{selector}` leaves out: {}", left.join(", ")));
            }
            Ok(order(kept))
        };
        // A percentage of serial is of all the nodes selected for the phase, as in the plan.
        let selection = crate::plan::select_and_batch(
            &candidates,
            crate::plan::NodeLabels::Cluster(&labels_of),
            true,
            &plan.settings,
            &plan.node_labels,
            input.inventory,
            plan.flavor.flavor == Flavor::Openshift,
            order,
        )?;
        let selected = selection.nodes;
        for h in &selected {
            match version_of(h) {
                // Blue nodes are evacuated whatever version they run.
                Some(v) if v >= *target && !unfinished(Phase::Nodes, h) && !plan.strategy.blue_green.enabled() => {
                    if let HostOutcome::Skipped { reason } = skipped(Phase::Nodes, h, &v).outcome {
                        decision.nodes_skipped.insert(h.clone(), reason);
                    }
                }
                _ => {}
            }
        }
        decision.nodes_selected = Some(selected);
        decision.node_batches = selection.batches;
    }
    Ok(decision)
}

/// The masters run one version (or, mid-way through a control-plane upgrade, the target and one older): that one.
pub(super) fn control_plane_version(
    input: &DecisionInput<'_>,
    text_of: &dyn Fn(&String) -> String,
    say: &mut dyn FnMut(String),
) -> Result<TargetVersion> {
    let (plan, target) = (input.plan, input.target);
    let mut master_versions: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for m in &plan.masters {
        // Grouped by release: masters at v1.29.1-eks-1 and v1.29.1-eks-2 run one version.
        let text = text_of(m);
        let version = TargetVersion::parse(&text).map(|v| v.release()).unwrap_or(text);
        master_versions.entry(version).or_default().push(m.clone());
    }
    // Masters split between the target and one older version: a control-plane upgrade an earlier run did not finish.
    let target_text = master_versions.keys().find(|v| target.is_reported_by(v)).cloned();
    if master_versions.len() == 2 && plan.has_phase(Phase::ControlPlane) {
        if let Some(at_target) = target_text {
            let done = master_versions.remove(&at_target).unwrap_or_default();
            say(format!("control-plane upgrade in progress: {} already at {at_target}", done.join(", ")));
        }
    }
    if master_versions.len() > 1 {
        let described: Vec<String> =
            master_versions.iter().map(|(v, hosts)| format!("{v} on {}", hosts.join(", "))).collect();
        return Err(Error::hosts_failed(format!("the masters run different versions: {}", described.join("; ")))
            .hint("bring every master to one version first (finish or repeat the control-plane upgrade)"));
    }
    let current_text = master_versions.keys().next().cloned().unwrap_or_default();
    TargetVersion::parse(&current_text).map_err(|_| {
        Error::hosts_failed(format!("the masters report version `{current_text}`, which is not major.minor.patch"))
    })
}

/// The target against the control plane's version: no downgrade, no skipped minor unless allowed, and nodes never
/// ahead of the masters.
pub(super) fn check_target(input: &DecisionInput<'_>, current: &TargetVersion) -> Result<()> {
    let (plan, target) = (input.plan, input.target);
    if *target < *current {
        return Err(Error::input(format!("the target {target} is older than the control plane's {current}"))
            .hint("a downgrade is not supported: give a newer --target-version / upgrade_target_version"));
    }
    // The openshift flavour moves a 3.11 cluster within its minor: packages, control-plane images, SDN. A minor
    // (3.10 -> 3.11) also switches repositories, migrates storage and updates the router, registry and image streams,
    // none of which the flavour does: done as a package swap it would leave kubelets newer than the API server.
    // --allow-skip-minor does not lift this: it is about the size of the step, not its kind.
    if plan.flavor.flavor == crate::flavor::Flavor::Openshift
        && (target.major != current.major || target.minor != current.minor)
    {
        return Err(Error::input(format!(
            "the openshift flavour upgrades within a minor release only (z-stream): the target {target} is another \
             minor than the control plane's {current}"
        ))
        .hint(format!(
            "upgrade across minors with openshift-ansible's playbooks for v{}_{} (playbooks/byo/openshift-cluster/\
             upgrades/v{}_{}/upgrade_control_plane.yml, then upgrade_nodes.yml), then use upgrade for the z-stream \
             releases of {}.{}",
            target.major, target.minor, target.major, target.minor, target.major, target.minor
        )));
    }
    let skips_minor = target.major != current.major || target.minor > current.minor + 1;
    if skips_minor && !input.allow_skip_minor {
        return Err(Error::input(format!(
            "the target {target} skips a minor version (the control plane runs {current})"
        ))
        .hint(format!(
            "upgrade one minor at a time (next: v{}.{}.x; the hops to {target}: {}), give an update graph \
             (upgrade_update_graph) to walk the path in one run, or pass --allow-skip-minor if your distribution \
             supports it",
            current.major,
            current.minor + 1,
            crate::strategy::graph::minor_hops(current, target).join(" -> ")
        )));
    }
    if plan.has_phase(Phase::Nodes) && !plan.has_phase(Phase::ControlPlane) && *current < *target {
        return Err(Error::input(format!("the nodes cannot go to {target} while the masters run {current}"))
            .hint("upgrade the control plane first: upgrade --phase control-plane, then --phase nodes"));
    }
    Ok(())
}

/// An earlier run of the same target started this host's sequence and did not finish it (cut short or failed): it
/// runs again even when the node already reports the target, to finish what is left (restart, uncordon, hooks).
pub(super) fn unfinished(run: &UpgradeRun, phase: Phase, host: &str) -> bool {
    run.history.unfinished(phase, host, &run.target.to_string())
}

/// Why a host at (or past) the target is skipped. `installed`: its version is what it has installed, said so because
/// the cluster's kubelet version may read the same before and after (OpenShift 3.11.z).
pub(super) fn skip_reason(installed: bool, earlier: bool, version: &TargetVersion, target: &TargetVersion) -> String {
    if installed {
        if earlier {
            format!("upgraded by an earlier run (has {version} installed)")
        } else if version > target {
            format!("already has {version} installed, newer than the target")
        } else {
            format!("already at {version}: installed on the host")
        }
    } else if earlier {
        format!("upgraded by an earlier run (runs {version})")
    } else if version > target {
        format!("already runs {version}, newer than the target")
    } else {
        format!("already at {version}")
    }
}

/// What this run takes over from earlier ones, said to the operator now and in the summary.
pub(super) fn resume(run: &UpgradeRun, cluster: &HashMap<String, ClusterNode>, decided: &Preflight) -> Resume {
    let mut resume = Resume::default();
    let earlier = |phase: Phase, host: &str| run.history.host(phase, host);
    let skipped = decided
        .skipped
        .iter()
        .map(|r| (Phase::ControlPlane, &r.host))
        .chain(decided.nodes_skipped.keys().map(|h| (Phase::Nodes, h)));
    for (phase, host) in skipped {
        if run.history.upgraded_earlier(phase, host) {
            resume.done_earlier.push(host.clone());
        }
    }
    let to_run = decided.masters.iter().map(|h| (Phase::ControlPlane, h));
    let to_run = to_run.chain(
        decided
            .node_batches
            .iter()
            .flatten()
            .filter(|h| !decided.nodes_skipped.contains_key(*h))
            .map(|h| (Phase::Nodes, h)),
    );
    for (phase, host) in to_run {
        match earlier(phase, host) {
            Some(h) if h.in_flight => {
                resume.in_flight_restarted.push(host.clone());
                run.notice(
                    Some(host),
                    "was in flight when an earlier run stopped: its sequence starts again from the top",
                );
            }
            Some(h) if h.finished == Some(crate::journal::HostRecord::Failed) => {
                resume.failed_retried.push(host.clone());
                run.notice(Some(host), "failed in an earlier run: tried again");
            }
            _ => {}
        }
    }
    // Every node of the cluster, not only those this run upgrades: a node can be left cordoned by an earlier run and
    // be out of this run's plan (a narrower --limit or --label). Read from the Node's mark, not the journal, so a run
    // from another state directory or controller is seen too.
    let mut left: Vec<String> = cluster
        .values()
        .filter(|n| n.cordoned_by_run().is_some_and(|r| r != run.run_id()))
        .map(|n| n.name.clone())
        .collect();
    left.sort();
    resume.cordoned_by_earlier_run = left;
    if !resume.cordoned_by_earlier_run.is_empty() {
        run.notice(
            None,
            format!(
                "nodes left cordoned by an earlier run: {} (each is uncordoned when its sequence finishes; the summary \
                 lists any still cordoned at the end)",
                resume.cordoned_by_earlier_run.join(", ")
            ),
        );
    }
    resume
}
