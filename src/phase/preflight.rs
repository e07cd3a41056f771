//! Preflight: before anything moves, every host answers, the cluster is read, and the run is checked against it:
//! masters on one version, a target newer than that (no skipped minor unless allowed), masters already at the target
//! for a nodes-only run, a label selector that selects something. What is already at the target is skipped.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::Instant;

use serde_json::Value;

use super::cluster_reads::{read_cluster, read_host_versions, report_pending_csrs};
use super::run::UpgradeRun;
use crate::cluster::ClusterNode;
use crate::error::{Error, Result};
use crate::flavor::Flavor;
use crate::journal::History;
use crate::settings::TargetVersion;
use crate::tasks::host_vars::HostFacts;
use crate::vocabulary::Phase;
use crate::vocabulary::{HostOutcome, HostReport, Resume, Step};

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

pub(crate) async fn run(run: &std::sync::Arc<UpgradeRun>, strategy_checks: &[StrategyCheck]) -> Result<Preflight> {
    check_node_names(run)?;
    let ttl = super::cluster_lock::ttl(run.as_ref())?;
    check_reachable(run).await?;
    // Asking changes nothing; the lock is the first write, and a role without it would fail there less clearly.
    check_permissions(run).await?;
    take_cluster_lock(run, ttl).await?;
    super::certificates::check(run).await?;
    let cluster = read_cluster(run, Phase::Preflight).await?;
    // One copy, which the later phases keep as the cluster before the run.
    let by_name: std::sync::Arc<HashMap<String, ClusterNode>> =
        std::sync::Arc::new(cluster.into_iter().map(|n| (n.name.clone(), n)).collect());
    if let Ok(mut before) = run.cluster_before.lock() {
        *before = by_name.clone();
    }
    read_host_versions(run).await?;
    for check in strategy_checks {
        check(run, &by_name)?;
    }
    let decided = decide(run, &by_name)?;
    health_gate(run, &by_name, &decided)?;
    let upgrading: Vec<(String, Phase)> = decided
        .masters
        .iter()
        .map(|h| (h.clone(), Phase::ControlPlane))
        .chain(
            decided
                .node_batches
                .iter()
                .flatten()
                .filter(|h| !decided.nodes_skipped.contains_key(*h))
                .map(|h| (h.clone(), Phase::Nodes)),
        )
        .collect();
    // kured reboots no node while the run works: its lock is held from here (a lock a dead run of ours left is given
    // back even when there is nothing to do).
    super::kured_lock::hold(run.as_ref(), &run.kured_lock, !upgrading.is_empty() && !run.stop.is_stopping()).await?;
    // After a stop (a signal while the cluster was read, a state directory that cannot be written) no later phase
    // starts, so nothing more is checked: the kubeadm plan check installs kubeadm on the first master, which an
    // operator who pressed Ctrl-C did not ask for.
    if upgrading.is_empty() || stopped_between_checks(run) {
        return Ok(decided);
    }
    // The package manager, the repository switch and kubeadm's plan are the kubeadm flow's: the openshift flavour
    // installs with yum between its excluders, the custom flavour runs only the operator's commands.
    let kubeadm = run.plan.flavor.flavor == Flavor::Kubeadm;
    check_drain_blockers(run, &upgrading).await?;
    check_auto_updates(run, &upgrading).await;
    if kubeadm {
        check_hosts(run, &upgrading).await?;
        if stopped_between_checks(run) {
            return Ok(decided);
        }
    }
    // Every flavour takes the etcd backup with upgrade_etcdctl and asks it for the members' health after each master.
    if run.plan.has_phase(Phase::EtcdBackup) || !decided.masters.is_empty() {
        check_etcdctl(run).await?;
    }
    if kubeadm && !decided.masters.is_empty() && !stopped_between_checks(run) {
        kubeadm_plan(run).await?;
    }
    // After a signal preflight reads nothing more than it must.
    if !run.stop.is_stopping() {
        report_pending_csrs(run, Phase::Preflight).await;
    }
    Ok(decided)
}

/// Every host's node name is a name Kubernetes can give a Node (a DNS-1123 subdomain: lower-case letters, digits,
/// `-` and `.`, alphanumeric at both ends, at most 253 characters), else bad input (exit 2) before anything is touched.
/// Such a name cannot reach a cluster command as anything but a name: a `;` or `$(...)` in `node_name` is refused
/// here, and the built-in steps quote it as well (N18).
fn check_node_names(run: &UpgradeRun) -> Result<()> {
    let bad: Vec<String> = run
        .plan
        .hosts
        .iter()
        .filter(|h| !is_dns1123_subdomain(&run.node_name(h)))
        .map(|h| format!("{h} ({:?})", run.node_name(h)))
        .collect();
    if bad.is_empty() {
        return Ok(());
    }
    Err(Error::input(format!("node names that are not Kubernetes node names: {}", bad.join(", ")))
        .in_file(&run.inventory.path)
        .hint(
            "a node name is lower-case letters, digits, `-` and `.` (a DNS-1123 subdomain); set node_name to the name \
             `kubectl get nodes` shows; nothing was touched",
        ))
}

pub(crate) fn is_dns1123_subdomain(name: &str) -> bool {
    let label_ok = |l: &str| {
        !l.is_empty()
            && l.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            && !l.starts_with('-')
            && !l.ends_with('-')
    };
    name.len() <= 253 && name.split('.').all(label_ok)
}

/// The hosts this run upgrades (masters to upgrade, selected nodes not at the target), as inventory names.
fn to_touch(decided: &Preflight) -> Vec<String> {
    let nodes = decided.node_batches.iter().flatten().filter(|h| !decided.nodes_skipped.contains_key(*h));
    decided.masters.iter().chain(nodes).cloned().collect()
}

/// The cluster's health before anything moves: every node the run will touch Ready (or accepted by name in
/// `upgrade_preflight_allow_not_ready`), the others that are not Ready said; when the masters move, no node left
/// behind more minors than the kubelet skew policy allows (`upgrade_max_kubelet_skew`).
fn health_gate(run: &UpgradeRun, cluster: &HashMap<String, ClusterNode>, decided: &Preflight) -> Result<()> {
    let allowed = run.host_list(&run.first_master, "upgrade_preflight_allow_not_ready");
    let touched = to_touch(decided);
    let touched_nodes: BTreeSet<String> = touched.iter().map(|h| run.node_name(h)).collect();
    let (mut refused, mut accepted) = (Vec::new(), Vec::new());
    for host in &touched {
        let node = run.node_name(host);
        // A node an earlier run of this target left half-way may be NotReady because of that run: it is finished.
        let resumed = unfinished(run, Phase::ControlPlane, host) || unfinished(run, Phase::Nodes, host);
        if cluster.get(&node).is_some_and(|n| !n.ready) && !resumed {
            if allowed.iter().any(|a| *a == node || a == host) { accepted.push(node) } else { refused.push(node) }
        }
    }
    let mut others: Vec<&str> =
        cluster.values().filter(|n| !n.ready && !touched_nodes.contains(&n.name)).map(|n| n.name.as_str()).collect();
    others.sort();
    if !others.is_empty() {
        run.notice(None, format!("not Ready, and not touched by this run: {}", others.join(", ")));
    }
    if !accepted.is_empty() {
        run.notice(
            None,
            format!("not Ready, upgraded anyway (upgrade_preflight_allow_not_ready): {}", accepted.join(", ")),
        );
    }
    if !refused.is_empty() {
        return Err(Error::hosts_failed(format!(
            "preflight: nodes this run would upgrade are not Ready: {}",
            refused.join(", ")
        ))
        .hint(
            "make them Ready first, or accept them by name in upgrade_preflight_allow_not_ready (a list) to upgrade \
             them as they are; nothing was changed",
        ));
    }
    // The openshift flavour's target is an OpenShift release (v3.11.248), not a kubelet version (v1.11.0): no skew
    // to compute, and 3.11 comes only from 3.10.
    if decided.masters.is_empty() || run.plan.flavor.flavor == Flavor::Openshift {
        return Ok(());
    }
    let skew = max_kubelet_skew(run);
    let target = &run.target;
    let mut behind: Vec<String> = cluster
        .values()
        .filter(|n| !touched_nodes.contains(&n.name))
        .filter_map(|n| TargetVersion::parse(&n.kubelet_version).ok().map(|v| (n, v)))
        .filter(|(_, v)| v.major != target.major || target.minor > v.minor + skew)
        .map(|(n, _)| format!("{} ({})", n.name, n.kubelet_version))
        .collect();
    behind.sort();
    if behind.is_empty() {
        return Ok(());
    }
    Err(Error::hosts_failed(format!(
        "preflight: after the masters move to {target}, these kubelets would be more than {skew} minor versions behind \
         (the supported skew): {}",
        behind.join(", ")
    ))
    .hint(
        "upgrade those nodes in steps first, or include them in this run (--limit, the label selector); \
         upgrade_max_kubelet_skew sets the allowed skew; nothing was changed",
    ))
}

/// Kubernetes' version skew policy: kubelets may be 3 minors older than the API server from 1.28 on, 2 before.
fn max_kubelet_skew(run: &UpgradeRun) -> u64 {
    let default = if run.target.major == 1 && run.target.minor < 28 { 2 } else { 3 };
    let text = run.render_for(&run.first_master, "{{ upgrade_max_kubelet_skew | default('') }}");
    text.trim().parse().unwrap_or(default)
}

/// What would block the drains of the hosts to upgrade (drain_blockers.rs): said as warnings, or fatal with
/// `upgrade_fail_on_drain_blockers: true` (then a cluster whose pods cannot be read is fatal too).
async fn check_drain_blockers(run: &UpgradeRun, hosts: &[(String, Phase)]) -> Result<()> {
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

/// The cluster-wide lock, before the cluster is read; renewed and fenced from now on (released by the executor at
/// the end). The holder is this state directory's controller id.
async fn take_cluster_lock(run: &std::sync::Arc<UpgradeRun>, ttl: std::time::Duration) -> Result<()> {
    use super::cluster_lock;
    let id = cluster_lock::controller_id(&run.options.state_dir)?;
    let state_dir = run.options.state_dir.display().to_string();
    let me = cluster_lock::Me::new(&id, &run.run_id(), &state_dir, &run.change_id());
    let held = cluster_lock::take(run.as_ref(), &me, ttl).await?;
    let renewer = tokio::spawn(cluster_lock::keep_renewed(run.clone(), held.clone()));
    if let Ok(mut slot) = run.cluster_lock.lock() {
        *slot = Some((held, renewer));
    }
    Ok(())
}

/// A stop asked for while preflight runs (a signal, a state directory that cannot be written) ends preflight at the
/// next check: the run starts no later phase, so the checks left could only delay the exit, and one of them is not
/// read-only (the kubeadm plan check installs kubeadm on the first master). What was decided so far is returned, so
/// the summary can say which hosts were not started.
fn stopped_between_checks(run: &UpgradeRun) -> bool {
    if !run.stop.is_stopping() {
        return false;
    }
    run.notice(None, format!("{}: preflight's remaining checks were not run", run.stop_reason()));
    true
}

/// On every host to upgrade with the kubeadm flow: which package manager it uses and what the upgrade will do to its
/// Kubernetes repository file, said once per host; and, with apt and the built-in package commands, whether the
/// target's packages resolve from the repository as the upgrade will switch it (package_availability.yml, a dry form
/// that changes nothing). A host with no package manager, or whose repository lacks a target package, stops the run
/// here, before any host is changed: the first master's kubeadm plan check comes after.
async fn check_hosts(run: &UpgradeRun, hosts: &[(String, Phase)]) -> Result<()> {
    let dry_run = [("upgrade_kubernetes_repo_dry_run", Value::Bool(true))];
    let checks = hosts.iter().filter(|(host, phase)| !custom_upgrade(run, host, *phase)).map(|(host, _)| {
        let file = run.playbook("package_availability.yml");
        let dry_run = &dry_run;
        async move {
            let result = run.run_step(Phase::Preflight, host, Step::HostCheck, &file, dry_run, None).await;
            (host, result)
        }
    });
    let mut failed = Vec::new();
    let mut unavailable = Vec::new();
    for (host, result) in super::fan_out(run.forks(), checks).await {
        match result {
            Ok(facts) => {
                run.notice(Some(host), describe_host_check(run, host, &facts));
                if let Some(missing) = describe_unavailable(&facts) {
                    unavailable.push(format!("{host}: {missing}"));
                }
            }
            Err(f) => failed.push(format!("{host}: {}", f.reason)),
        }
    }
    if failed.is_empty() && !unavailable.is_empty() {
        return Err(Error::hosts_failed(format!(
            "preflight: the target's packages do not resolve on {}",
            unavailable.join("; ")
        ))
        .hint(
            "put the target's packages in those repositories (a mirror that is behind: sync it), point \
             upgrade_kubernetes_repo_url at the mirror the repository file names, or choose a target they offer; \
             nothing was changed on any host",
        ));
    }
    if failed.is_empty() {
        return Ok(());
    }
    Err(Error::hosts_failed(format!("preflight: the package checks failed on {}", failed.join("; "))).hint(
        "set upgrade_package_manager (apt, dnf, yum) or the package commands on those hosts; nothing was changed",
    ))
}

/// What package_availability.yml found missing on a host (`kubeadm 1.29.9, kubelet 1.29.9 not in deb ... /`, or
/// the index that could not be read), `None` when everything resolves or the check did not run.
fn describe_unavailable(facts: &HostFacts) -> Option<String> {
    let result = facts.get("upgrade_package_availability")?;
    let stdout = result.get("stdout").and_then(Value::as_str)?;
    let lines: Vec<&str> = stdout.lines().filter_map(|l| l.strip_prefix("line: ")).collect();
    let looked_in = if lines.is_empty() { "no repository line".to_string() } else { lines.join(" | ") };
    if stdout.lines().next() == Some("update-failed") {
        let cause = stdout.lines().nth(1).unwrap_or("apt-get update failed");
        return Some(format!("apt-get update of {looked_in} failed: {cause}"));
    }
    let missing: Vec<&str> = stdout.lines().filter_map(|l| l.strip_prefix("missing ")).collect();
    if missing.is_empty() {
        return None;
    }
    Some(format!("{} not in {looked_in}", missing.join(", ")))
}

/// On every host to upgrade: automatic package upgrades enabled there (unattended-upgrades, apt's daily upgrade
/// timer, dnf-automatic) are named as a warning. Never stops the run: the package holds keep the Kubernetes packages
/// where the run puts them; what else could move is said. A host where this cannot be read says nothing.
async fn check_auto_updates(run: &UpgradeRun, hosts: &[(String, Phase)]) {
    let checks = hosts.iter().map(|(host, _)| async move {
        let file = run.playbook("auto_updates.yml");
        (host, run.run_step(Phase::Preflight, host, Step::HostCheck, &file, &[], None).await)
    });
    for (host, result) in super::fan_out(run.forks(), checks).await {
        let Ok(facts) = result else { continue };
        let stdout = facts
            .get("upgrade_auto_updates")
            .and_then(|r| r.get("stdout"))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        let enabled = enabled_auto_updates(&stdout);
        if !enabled.is_empty() {
            run.notice(Some(host), format!(
                "warning: automatic package upgrades are enabled on this host ({}): the package holds (the excluders \
                 on OpenShift) keep the Kubernetes packages where the run puts them, but the container runtime, the kernel and other \
                 packages can still change during the run (and a kernel update can ask for a reboot); stop them \
                 for the maintenance window",
                enabled.join(", ")
            ));
        }
    }
}

/// The units of `UNIT STATE` lines (`systemctl is-enabled`) that are enabled.
pub(crate) fn enabled_auto_updates(stdout: &str) -> Vec<String> {
    stdout
        .lines()
        .filter_map(|l| l.split_once(char::is_whitespace))
        .filter(|(_, state)| matches!(state.trim(), "enabled" | "enabled-runtime" | "alias"))
        .map(|(unit, _)| unit.to_string())
        .collect()
}

/// The host's upgrade is the operator's own command, not the kubeadm flow.
fn custom_upgrade(run: &UpgradeRun, host: &str, phase: Phase) -> bool {
    let variable =
        if phase == Phase::ControlPlane { "upgrade_master_upgrade_command" } else { "upgrade_node_upgrade_command" };
    !run.render_for(host, &format!("{{{{ {variable} | default('') }}}}")).trim().is_empty()
}

/// "package manager apt (detected); /etc/apt/sources.list.d/kubernetes.list: v1.28 -> v1.29 at the upgrade ...".
pub(crate) fn describe_host_check(run: &UpgradeRun, host: &str, facts: &HostFacts) -> String {
    let text = |name: &str| facts.get(name).and_then(|v| v.as_str()).map(str::trim).unwrap_or_default().to_string();
    let resolved = text("upgrade_package_manager_resolved");
    let how = if text("upgrade_package_manager") == "auto" { "detected" } else { "upgrade_package_manager" };
    let manager = if resolved == "none" {
        "package manager: none found (the package commands are the inventory's own)".to_string()
    } else {
        format!("package manager: {resolved} ({how})")
    };
    let file = text("upgrade_kubernetes_repo_file");
    let outcome = facts.get("upgrade_kubernetes_repo");
    let stdout = outcome.and_then(|o| o.get("stdout")).and_then(Value::as_str).unwrap_or_default().trim().to_string();
    let words: Vec<&str> = stdout.split_whitespace().collect();
    let minor = format!("v{}.{}", run.target.major, run.target.minor);
    let repo = if !run.host_flag(host, "upgrade_kubernetes_repo_manage", true) {
        "repository file not managed (upgrade_kubernetes_repo_manage: false)".to_string()
    } else if file.is_empty() {
        "no repository file to manage".to_string()
    } else {
        match words.as_slice() {
            ["would-switch", have, want] => {
                format!(
                    "repository {file}: {have} -> {want} before the first package install (a copy kept as {file}.{have}.bak)"
                )
            }
            ["unchanged", want] => format!("repository {file}: already at {want}"),
            ["no-minor"] => format!(
                "repository {file} names no pkgs.k8s.io minor: left alone (make sure it offers {minor} packages)"
            ),
            ["absent"] => {
                format!("repository {file} does not exist: left alone (make sure {minor} packages are reachable)")
            }
            _ => format!("repository {file}: {stdout}"),
        }
    };
    format!("{manager}; {repo}")
}

/// `etcdctl version` on every etcd host: the backup and the control-plane health gate need it.
async fn check_etcdctl(run: &UpgradeRun) -> Result<()> {
    let checks = run.plan.etcd_hosts.iter().map(|host| async move {
        let file = run.playbook("etcdctl_check.yml");
        (host, run.run_step(Phase::Preflight, host, Step::EtcdctlCheck, &file, &[], None).await)
    });
    let failed: Vec<String> = super::fan_out(run.forks(), checks)
        .await
        .into_iter()
        .filter_map(|(host, r)| r.err().map(|f| format!("{host}: {}", f.reason)))
        .collect();
    if failed.is_empty() {
        return Ok(());
    }
    Err(Error::hosts_failed(format!("preflight: etcdctl does not run on {}", failed.join("; "))).hint(
        "install the etcd client on the etcd hosts, or set upgrade_etcdctl to run etcdctl inside the etcd static pod \
         (`crictl exec` form, see the README); nothing was changed",
    ))
}

/// Whether the run's cluster credentials may do what the run will do (cluster_permissions.yml: `auth can-i` for each
/// of upgrade_cluster_permissions), before anything moves: a role that lacks `create pods/eviction` would otherwise
/// be found with the first node cordoned. Every answer that is not `yes` is listed, an error as much as a `no`.
async fn check_permissions(run: &UpgradeRun) -> Result<()> {
    if !run.host_flag(&run.first_master, "upgrade_cluster_permissions_check", true) {
        return Ok(());
    }
    let file = run.playbook("cluster_permissions.yml");
    let facts =
        run.run_step(Phase::Preflight, &run.first_master, Step::ReadCluster, &file, &[], None).await.map_err(|f| {
            Error::hosts_failed(format!("preflight: cannot ask the cluster what the run may do: {}", f.reason))
        })?;
    let results = facts
        .get("upgrade_cluster_permissions_checked")
        .and_then(|r| r.get("results"))
        .and_then(|r| r.as_array())
        .cloned()
        .unwrap_or_default();
    let missing: Vec<String> = results
        .iter()
        .filter(|r| r.get("skipped").and_then(Value::as_bool) != Some(true))
        .filter_map(|r| {
            let question = r.get("item").and_then(Value::as_str).unwrap_or_default();
            let answer = r.get("stdout").and_then(Value::as_str).unwrap_or_default().trim();
            match answer {
                "yes" => None,
                "no" => Some(question.to_string()),
                _ => {
                    let stderr = r.get("stderr").and_then(Value::as_str).unwrap_or_default().trim();
                    let why = if stderr.is_empty() { answer } else { stderr };
                    Some(format!("{question} (no answer: {})", crate::redact::escapes::strip_terminal_escapes(why)))
                }
            }
        })
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    Err(Error::hosts_failed(format!(
        "preflight: the cluster credentials of upgrade_kubectl may not: {}",
        missing.join("; ")
    ))
    .hint(
        "grant them (examples/rbac/upgrade.yaml is a role with exactly what a run needs), or run with other \
         credentials; upgrade_cluster_permissions_check: false skips this check; nothing was changed",
    ))
}

/// `kubeadm upgrade plan vX.Y.Z` on the first master (kubeadm_plan.yml): kubeadm's own checks before any node moves.
async fn kubeadm_plan(run: &UpgradeRun) -> Result<()> {
    let file = run.playbook("kubeadm_plan.yml");
    let host = &run.first_master;
    match run.run_step(Phase::Preflight, host, Step::KubeadmPlan, &file, &[], None).await {
        Ok(facts) => {
            if facts.get("upgrade_kubeadm_plan").and_then(|r| r.get("rc")).is_some() {
                run.notice(Some(host), format!("kubeadm upgrade plan {} passed", run.target));
            }
            Ok(())
        }
        Err(f) => Err(Error::hosts_failed(format!("preflight: {}", f.reason)).hint(
            "fix what kubeadm reports, or set upgrade_kubeadm_plan_check: false to skip this check; no node was cordoned",
        )),
    }
}

/// Opens a connection to every host of the plan, `forks` at a time, and runs `true`. Any host that does not answer stops the
/// run here, before anything is touched.
pub(crate) async fn check_reachable(run: &UpgradeRun) -> Result<()> {
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
    let results = super::fan_out(run.forks(), probes).await;
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
fn control_plane_version(
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
fn check_target(input: &DecisionInput<'_>, current: &TargetVersion) -> Result<()> {
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
fn unfinished(run: &UpgradeRun, phase: Phase, host: &str) -> bool {
    run.history.unfinished(phase, host, &run.target.to_string())
}

/// Why a host at (or past) the target is skipped. `installed`: its version is what it has installed, said so because
/// the cluster's kubelet version may read the same before and after (OpenShift 3.11.z).
fn skip_reason(installed: bool, earlier: bool, version: &TargetVersion, target: &TargetVersion) -> String {
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
fn resume(run: &UpgradeRun, cluster: &HashMap<String, ClusterNode>, decided: &Preflight) -> Resume {
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

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, BTreeSet, HashMap};

    use super::*;
    use crate::error::{ErrorKind, Location};
    use crate::inventory::{Group, Host, Inventory, Vars};
    use crate::journal::{HostHistory, HostRecord};
    use crate::plan::{Plan, PlanRequest};
    use crate::settings::SettingFlags;

    /// Three masters (m1 first) and two nodes, every host its own node.
    fn plan(phases: &[&str]) -> (Plan, Inventory) {
        let dir = std::env::temp_dir();
        let mut inv = Inventory::new(dir.join("hosts"), dir);
        for (group, hosts) in [("masters", &["m1", "m2"][..]), ("etcd", &["m1"]), ("nodes", &["m1", "m2", "n1", "n2"])]
        {
            for h in hosts {
                inv.hosts.entry(h.to_string()).or_insert_with(|| Host::new(h, Location::new("hosts", 1, 1)));
            }
            let mut g = Group::new(group);
            g.hosts = hosts.iter().map(|h| h.to_string()).collect();
            inv.groups.insert(group.to_string(), g);
        }
        inv.refresh();
        let request = PlanRequest {
            phases: phases.iter().map(|p| p.to_string()).collect(),
            flags: SettingFlags { target_version: Some("v1.29.1".into()), ..SettingFlags::default() },
            ..PlanRequest::default()
        };
        (Plan::build(&inv, &Vars::new(), &request).unwrap(), inv)
    }

    fn cluster(versions: &[(&str, &str)]) -> HashMap<String, ClusterNode> {
        versions
            .iter()
            .map(|(name, version)| {
                let node = ClusterNode {
                    name: name.to_string(),
                    labels: BTreeMap::new(),
                    unschedulable: false,
                    kubelet_version: version.to_string(),
                    ready: true,
                    created: String::new(),
                    annotations: BTreeMap::new(),
                };
                (name.to_string(), node)
            })
            .collect()
    }

    fn history(entries: &[(Phase, &str, HostHistory)]) -> History {
        let hosts = entries.iter().map(|(p, h, hh)| ((*p, h.to_string()), hh.clone())).collect();
        History { hosts, runs: 1, ..History::default() }
    }

    fn in_flight() -> HostHistory {
        HostHistory { in_flight: true, target: Some("v1.29.1".into()), ..HostHistory::default() }
    }

    fn upgraded() -> HostHistory {
        HostHistory { finished: Some(HostRecord::Upgraded), target: Some("v1.29.1".into()), ..HostHistory::default() }
    }

    /// What a case expects: masters to upgrade, skipped masters, nodes to upgrade, skipped nodes with their reason,
    /// and a notice containing this text (or none); or an error of this kind whose message contains this text.
    enum Want {
        Decided {
            masters: &'static [&'static str],
            skipped: &'static [&'static str],
            nodes: &'static [&'static str],
            skipped_nodes: &'static [(&'static str, &'static str)],
            notice: Option<&'static str>,
        },
        Refused(ErrorKind, &'static str),
    }

    // Long because it is a table: one row per case, then one loop that checks them all.
    #[test]
    fn only_kubernetes_node_names_pass() {
        for ok in ["n1", "node-1", "ip-10-0-0-1.eu-west-1.compute.internal", "10.0.0.1", "a"] {
            assert!(is_dns1123_subdomain(ok), "{ok}");
        }
        let long = "a".repeat(254);
        for bad in ["", "n02;touch${IFS}/tmp/x", "n1 n2", "$(id)", "N1", "-n1", "n1-", "a..b", "n1\n", long.as_str()] {
            assert!(!is_dns1123_subdomain(bad), "{bad}");
        }
    }

    #[test]
    fn the_decision_table() {
        const OLD: &str = "v1.28.5";
        const NEW: &str = "v1.29.1";
        let all_old = [("m1", OLD), ("m2", OLD), ("n1", OLD), ("n2", OLD)];
        #[rustfmt::skip]
        // (name, arguments, kubelet versions, earlier runs, --allow-skip-minor, expected)
        type Case<'a> = (&'a str, Vec<&'a str>, Vec<(&'a str, &'a str)>, History, bool, Want);
        let cases: Vec<Case> = vec![
            (
                "everything to do",
                vec![],
                all_old.to_vec(),
                History::default(),
                false,
                Want::Decided {
                    masters: &["m1", "m2"],
                    skipped: &[],
                    nodes: &["n1", "n2"],
                    skipped_nodes: &[],
                    notice: None,
                },
            ),
            (
                "a node at the target is skipped",
                vec![],
                vec![("m1", OLD), ("m2", OLD), ("n1", NEW), ("n2", OLD)],
                History::default(),
                false,
                Want::Decided {
                    masters: &["m1", "m2"],
                    skipped: &[],
                    nodes: &["n1", "n2"],
                    skipped_nodes: &[("n1", "already at v1.29.1")],
                    notice: None,
                },
            ),
            (
                "a node newer than the target is skipped",
                vec![],
                vec![("m1", OLD), ("m2", OLD), ("n1", "v1.29.3"), ("n2", OLD)],
                History::default(),
                false,
                Want::Decided {
                    masters: &["m1", "m2"],
                    skipped: &[],
                    nodes: &["n1", "n2"],
                    skipped_nodes: &[("n1", "already runs v1.29.3, newer than the target")],
                    notice: None,
                },
            ),
            (
                "an earlier run upgraded it",
                vec![],
                vec![("m1", OLD), ("m2", OLD), ("n1", NEW), ("n2", OLD)],
                history(&[(Phase::Nodes, "n1", upgraded())]),
                false,
                Want::Decided {
                    masters: &["m1", "m2"],
                    skipped: &[],
                    nodes: &["n1", "n2"],
                    skipped_nodes: &[("n1", "upgraded by an earlier run (runs v1.29.1)")],
                    notice: None,
                },
            ),
            (
                "a node at the target left half-way runs again",
                vec![],
                vec![("m1", OLD), ("m2", OLD), ("n1", NEW), ("n2", OLD)],
                history(&[(Phase::Nodes, "n1", in_flight())]),
                false,
                Want::Decided {
                    masters: &["m1", "m2"],
                    skipped: &[],
                    nodes: &["n1", "n2"],
                    skipped_nodes: &[],
                    notice: None,
                },
            ),
            (
                "masters split between the target and one older: in progress",
                vec![],
                vec![("m1", NEW), ("m2", OLD), ("n1", OLD), ("n2", OLD)],
                History::default(),
                false,
                Want::Decided {
                    masters: &["m2"],
                    skipped: &["m1"],
                    nodes: &["n1", "n2"],
                    skipped_nodes: &[],
                    notice: Some("control-plane upgrade in progress: m1 already at v1.29.1"),
                },
            ),
            (
                "masters on two older versions",
                vec![],
                vec![("m1", "v1.27.3"), ("m2", OLD), ("n1", OLD), ("n2", OLD)],
                History::default(),
                false,
                Want::Refused(ErrorKind::HostsFailed, "the masters run different versions"),
            ),
            (
                "a downgrade",
                vec![],
                vec![("m1", "v1.30.0"), ("m2", "v1.30.0"), ("n1", OLD), ("n2", OLD)],
                History::default(),
                false,
                Want::Refused(ErrorKind::Input, "older than the control plane's v1.30.0"),
            ),
            (
                "a skipped minor",
                vec![],
                vec![("m1", "v1.27.3"), ("m2", "v1.27.3"), ("n1", OLD), ("n2", OLD)],
                History::default(),
                false,
                Want::Refused(ErrorKind::Input, "skips a minor version"),
            ),
            (
                "a skipped minor, allowed",
                vec![],
                vec![("m1", "v1.27.3"), ("m2", "v1.27.3"), ("n1", OLD), ("n2", OLD)],
                History::default(),
                true,
                Want::Decided {
                    masters: &["m1", "m2"],
                    skipped: &[],
                    nodes: &["n1", "n2"],
                    skipped_nodes: &[],
                    notice: None,
                },
            ),
            (
                "nodes before the masters",
                vec!["nodes"],
                all_old.to_vec(),
                History::default(),
                false,
                Want::Refused(ErrorKind::Input, "the nodes cannot go to v1.29.1 while the masters run v1.28.5"),
            ),
            (
                "nodes after the masters",
                vec!["nodes"],
                vec![("m1", NEW), ("m2", NEW), ("n1", OLD), ("n2", OLD)],
                History::default(),
                false,
                Want::Decided { masters: &[], skipped: &[], nodes: &["n1", "n2"], skipped_nodes: &[], notice: None },
            ),
            (
                "a host the cluster does not know",
                vec![],
                vec![("m1", OLD), ("m2", OLD), ("n1", OLD)],
                History::default(),
                false,
                Want::Refused(ErrorKind::Input, "the cluster has no node for: n2"),
            ),
        ];
        for (name, phases, versions, history, allow_skip_minor, want) in cases {
            let (plan, inventory) = plan(&phases);
            let target = TargetVersion::parse(NEW).unwrap();
            let input = DecisionInput {
                plan: &plan,
                target: &target,
                allow_skip_minor,
                inventory: &inventory,
                history: &history,
                node_names: HashMap::new(),
                installed: HashMap::new(),
                probes_installed: BTreeSet::new(),
            };
            let mut notices = Vec::new();
            let got = decide_from(&input, &cluster(&versions), &|kept| kept, &mut |n| notices.push(n));
            match (want, got) {
                (Want::Decided { masters, skipped, nodes, skipped_nodes, notice }, Ok(d)) => {
                    assert_eq!(d.masters, masters, "{name}: masters");
                    let skipped_got: Vec<&str> = d.skipped.iter().map(|r| r.host.as_str()).collect();
                    assert_eq!(skipped_got, skipped, "{name}: skipped masters");
                    assert_eq!(d.nodes_selected.unwrap_or_default(), nodes, "{name}: nodes");
                    let skipped_nodes: HashMap<String, String> =
                        skipped_nodes.iter().map(|(h, r)| (h.to_string(), r.to_string())).collect();
                    assert_eq!(d.nodes_skipped, skipped_nodes, "{name}: skipped nodes");
                    match notice {
                        Some(text) => assert!(notices.iter().any(|n| n.contains(text)), "{name}: {notices:?}"),
                        None => assert!(notices.is_empty(), "{name}: {notices:?}"),
                    }
                }
                (Want::Refused(kind, text), Err(e)) => {
                    assert_eq!(e.kind, kind, "{name}: {e}");
                    assert!(e.message.contains(text), "{name}: {e}");
                }
                (Want::Decided { .. }, Err(e)) => panic!("{name}: refused: {e}"),
                (Want::Refused(..), Ok(d)) => panic!("{name}: decided {d:?}"),
            }
        }
    }

    #[test]
    fn an_installed_version_decides_and_is_said_so() {
        let (plan, inventory) = plan(&["control-plane"]);
        let target = TargetVersion::parse("v1.29.1").unwrap();
        let history = History::default();
        let input = DecisionInput {
            plan: &plan,
            target: &target,
            allow_skip_minor: false,
            inventory: &inventory,
            history: &history,
            node_names: HashMap::from([("m2".to_string(), "master-2".to_string())]),
            installed: HashMap::from([
                ("m1".to_string(), "v1.29.1".to_string()),
                ("m2".to_string(), "v1.29.1".to_string()),
            ]),
            probes_installed: BTreeSet::from(["m1".to_string(), "m2".to_string()]),
        };
        // The kubelets still say the old version: what is installed counts.
        let cluster = cluster(&[("m1", "v1.29.0"), ("master-2", "v1.29.0"), ("n1", "v1.29.0"), ("n2", "v1.29.0")]);
        let d = decide_from(&input, &cluster, &|kept| kept, &mut |_| {}).unwrap();
        assert!(d.masters.is_empty());
        let m2 = &d.skipped[1];
        assert_eq!((m2.host.as_str(), m2.node.as_deref()), ("m2", Some("master-2")));
        assert_eq!(m2.outcome, HostOutcome::Skipped { reason: "already at v1.29.1: installed on the host".into() });
    }
}
