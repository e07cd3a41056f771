//! `upgrade plan --live`: the plan checked against the cluster and the hosts, changing nothing. It connects, reads the
//! cluster (nodes, versions, cordons, PodDisruptionBudgets, pods) and the hosts (package manager, free space, etcd's
//! database size), decides as preflight would, and says per host what the run would do, what would block its drain,
//! and the order of batches. Exit 0 when nothing would block, 1 when something would.
//!
//! Only reads: the lock is read (who holds it), never taken; the package check runs in its dry-run mode.

mod simulation;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use serde::Serialize;
use serde_json::Value;

use crate::drain_blockers::DrainBlocker;
use crate::drain_simulation::{BatchSimulation, Verdict};
use crate::error::{Error, Result};
use crate::events::{Event, EventSink};
use crate::inventory::{Inventory, Vars};
use crate::phase::run::UpgradeRun;
use crate::phase::{cluster_lock, cluster_reads, fan_out, preflight};
use crate::plan::Phase;
use crate::plan::expected::{Estimate, Expected};
use crate::session::{Remote, Session, UpgradeRequest};
use crate::vocabulary::Step;

/// One host as the live plan sees it.
#[derive(Debug, Clone, Serialize)]
pub struct LiveHost {
    pub host: String,
    pub node: String,
    /// `control-plane` or `nodes`: the phase that would upgrade it.
    pub phase: String,
    pub current_version: Option<String>,
    pub ready: Option<bool>,
    pub cordoned: Option<bool>,
    /// `upgrade`, `skip` or `blocked`.
    pub action: String,
    /// Why it is skipped or blocked.
    pub reason: Option<String>,
    pub drain_blockers: Vec<DrainBlocker>,
    /// 1-based, within its phase.
    pub batch: Option<usize>,
    /// "apt (detected)", or why it is unknown.
    pub package_manager: Option<String>,
    pub free_bytes: Option<u64>,
    pub etcd_db_size: Option<u64>,
    /// The flavour's certificate check (certificate_expiry.yml): how many were read and the first to expire.
    pub certificates: Option<String>,
    /// A certificate expires within `upgrade_certificate_expiry_warning_days`.
    pub certificates_expiring: bool,
}

#[derive(Debug, Clone, Serialize)]
pub struct LiveBatch {
    pub phase: String,
    pub hosts: Vec<String>,
    /// What its drains would evict, the budgets that would refuse, and whether the evicted pods fit on the nodes that
    /// stay (crate::drain_simulation).
    pub drain_simulation: BatchSimulation,
}

#[derive(Debug, Clone, Serialize)]
pub struct LivePlan {
    pub target: String,
    pub control_plane_version: Option<String>,
    /// Who holds the cluster-wide lock now (a run started now would be refused), if anyone.
    pub cluster_lock_holder: Option<String>,
    pub hosts: Vec<LiveHost>,
    pub batches: Vec<LiveBatch>,
    /// Problems not tied to one host (the lock, reads that failed, certificates that stop preflight): they block.
    pub problems: Vec<String>,
    /// What the run would warn about without stopping.
    pub notices: Vec<String>,
    /// Preflight's gate on what the minors crossed remove or require (null where it does not apply).
    pub api_removals: Option<crate::api_removals::Report>,
    pub blocked: bool,
    /// How long the run would take: its batches, from the times earlier runs on this inventory recorded.
    pub expected: Expected,
}

/// The live plan's run: the control plane's and the nodes' batches as the cluster leaves them (none when every host
/// is at the target), the other phases as planned.
fn expected_run(plan: &super::Plan, batches: &[LiveBatch], state_dir: &std::path::Path) -> Expected {
    let live = |phase: Phase| batches.iter().filter(|b| b.phase == phase.name()).count();
    let phases: Vec<(Phase, usize)> = super::expected::phase_batches(plan)
        .into_iter()
        .filter_map(|(phase, planned)| match phase {
            Phase::ControlPlane | Phase::Nodes => Some((phase, live(phase))).filter(|(_, n)| *n > 0),
            _ => Some((phase, planned)),
        })
        .collect();
    Estimate::from_state_dir(state_dir).run(&phases)
}

/// Keeps the notices (the reads' own messages); prints nothing: the plan is one document.
#[derive(Default)]
struct Collect {
    notices: Mutex<Vec<String>>,
}

impl EventSink for Collect {
    fn event(&self, event: &Event) {
        if let Event::Notice { host, message } = event {
            if let Ok(mut notices) = self.notices.lock() {
                notices.push(match host {
                    Some(h) => format!("[{h}] {message}"),
                    None => message.clone(),
                });
            }
        }
    }
}

/// Reads the cluster and the hosts as the upgrade `request` would, changing nothing; `commands` prints the result
/// (exit 1 when it is `blocked`).
pub fn live_plan(request: &UpgradeRequest, inventory: Inventory, extra: Vars, remote: Remote) -> Result<LivePlan> {
    let session = Session::open(request, inventory, extra, remote, Arc::new(Collect::default()))?;
    let Some(target) = session.target.clone() else {
        return Err(Error::input("no target version")
            .in_file(&session.inventory.path)
            .hint("set upgrade_target_version in the inventory, or pass --target-version (e.g. v1.29.1)"));
    };
    let run = session.run.clone();
    let outcome = session.runtime.block_on(async { build(&run, target.to_string()).await });
    session.close();
    outcome
}

async fn build(run: &Arc<UpgradeRun>, target: String) -> Result<LivePlan> {
    preflight::check_reachable(run).await?;
    let mut problems = Vec::new();
    let mut notices = Vec::new();
    // A released lease, or one not renewed within its lease, would be taken by a run started now.
    let ttl = cluster_lock::ttl(run.as_ref()).unwrap_or(cluster_lock::DEFAULT_TTL);
    let cluster_lock_holder = match cluster_lock::read(run.as_ref(), true).await {
        Ok(Some(lease)) if !lease.released() && lease.live(cluster_lock::epoch_ms(), ttl) => Some(lease.describe()),
        Ok(_) => None,
        Err(why) => {
            problems.push(format!("cannot read the cluster lock: {why}"));
            None
        }
    };
    if let Some(holder) = &cluster_lock_holder {
        problems.push(format!("the cluster lock is held by {holder}: a run started now would be refused"));
    }
    let cluster = cluster_reads::read_cluster(run, Phase::Preflight).await?;
    let by_name: std::collections::HashMap<String, crate::cluster::ClusterNode> =
        cluster.iter().map(|n| (n.name.clone(), n.clone())).collect();
    // As preflight: a flavour that decides "at the target" by what the host has installed (OpenShift 3.11, whose
    // every 3.11.z kubelet reports one version) is read on the hosts first, or every host looks a minor behind.
    cluster_reads::read_host_versions(run).await?;
    let decided = preflight::decide(run, &by_name)?;
    // One read of the pods and budgets serves the drain blockers and the drain simulation.
    let workloads = preflight::read_workloads(run, Phase::Preflight).await;
    let blockers = match workloads.clone().and_then(|(pods, pdbs)| crate::drain_blockers::find(&pods, &pdbs)) {
        Ok(found) => found,
        Err(why) => {
            problems.push(format!("drain blockers not checked: {why}"));
            BTreeMap::new()
        }
    };
    let facts = read_host_facts(run).await;
    let api_removals = read_api_removals(run, &by_name, &decided, &mut problems).await;

    let mut hosts = Vec::new();
    let mut batches = Vec::new();
    let skipped_masters: BTreeMap<&str, &str> = decided
        .skipped
        .iter()
        .filter_map(|r| match &r.outcome {
            crate::vocabulary::HostOutcome::Skipped { reason } => Some((r.host.as_str(), reason.as_str())),
            _ => None,
        })
        .collect();
    let installed = run.host_versions.lock().map(|m| m.clone()).unwrap_or_default();
    let mut package_problems = Vec::new();
    let mut add = |host: &str, phase: Phase, batch: Option<usize>, skip: Option<String>| {
        let node = run.node_name(host);
        let seen = by_name.get(&node);
        let drain_blockers = if skip.is_none() { blockers.get(&node).cloned().unwrap_or_default() } else { Vec::new() };
        let (action, reason) = match (&skip, seen) {
            (Some(why), _) => ("skip", Some(why.clone())),
            (None, None) => ("blocked", Some(format!("node {node} is not in the cluster"))),
            (None, Some(_)) if !drain_blockers.is_empty() => {
                ("blocked", Some(format!("{} drain blocker(s)", drain_blockers.len())))
            }
            (None, Some(_)) => ("upgrade", None),
        };
        let HostFacts {
            package_manager,
            free_bytes,
            etcd_db_size,
            certificates,
            certificates_expiring,
            certificates_unreadable: _,
            packages_missing,
        } = facts.get(host).cloned().unwrap_or_default();
        if let (None, Some(missing)) = (&skip, packages_missing) {
            package_problems
                .push(format!("{host}: the target's packages do not resolve, preflight would stop: {missing}"));
        }
        hosts.push(LiveHost {
            host: host.to_string(),
            node: node.clone(),
            phase: phase.name().to_string(),
            // What the host has installed where that decides (every OpenShift 3.11.z kubelet reports one version).
            current_version: seen.map(|n| installed.get(host).cloned().unwrap_or_else(|| n.kubelet_version.clone())),
            ready: seen.map(|n| n.ready),
            cordoned: seen.map(|n| n.unschedulable),
            action: action.to_string(),
            reason,
            drain_blockers,
            batch: if skip.is_none() { batch } else { None },
            package_manager,
            free_bytes,
            etcd_db_size,
            certificates,
            certificates_expiring,
        });
    };
    if run.plan.has_phase(Phase::ControlPlane) {
        let mut number = 0;
        for master in &run.plan.masters {
            let skip = skipped_masters.get(master.as_str()).map(|r| r.to_string());
            if skip.is_none() && decided.masters.contains(master) {
                number += 1;
                batches.push(LiveBatch {
                    phase: Phase::ControlPlane.name().into(),
                    hosts: vec![master.clone()],
                    drain_simulation: BatchSimulation::unreadable("not simulated yet"),
                });
                add(master, Phase::ControlPlane, Some(number), None);
            } else {
                add(master, Phase::ControlPlane, None, Some(skip.unwrap_or_else(|| "already done".into())));
            }
        }
    }
    if run.plan.has_phase(Phase::Nodes) {
        let mut number = 0;
        for batch in &decided.node_batches {
            let upgrading: Vec<String> =
                batch.iter().filter(|h| !decided.nodes_skipped.contains_key(*h)).cloned().collect();
            if !upgrading.is_empty() {
                number += 1;
                batches.push(LiveBatch {
                    phase: Phase::Nodes.name().into(),
                    hosts: upgrading,
                    drain_simulation: BatchSimulation::unreadable("not simulated yet"),
                });
            }
            for host in batch {
                let skip = decided.nodes_skipped.get(host).cloned();
                add(host, Phase::Nodes, Some(number), skip);
            }
        }
        for host in &run.plan.nodes_not_selected {
            add(host, Phase::Nodes, None, Some("not selected by the label selector".into()));
        }
    }
    problems.extend(package_problems);
    let hosts_of: Vec<Vec<String>> = batches.iter().map(|b| b.hosts.clone()).collect();
    let simulated = simulation::simulate(run, &workloads, &hosts_of).await;
    for (number, (batch, simulated)) in batches.iter_mut().zip(simulated).enumerate() {
        let verdict = match simulated.verdict {
            Verdict::Fits => None,
            Verdict::Blocked => Some("BLOCKED"),
            Verdict::Unreadable => Some("UNREADABLE"),
        };
        if let Some(verdict) = verdict {
            let (phase, hosts, why) = (&batch.phase, batch.hosts.join(", "), simulated.reasons.join("; "));
            problems.push(format!("drain simulation of batch {} ({phase}: {hosts}): {verdict}: {why}", number + 1));
        }
        batch.drain_simulation = simulated;
    }
    let expiring: Vec<&str> = hosts.iter().filter(|h| h.certificates_expiring).map(|h| h.host.as_str()).collect();
    if !expiring.is_empty() {
        let days = run.plan.certificate_expiry.warning_days.value;
        let stops = run.plan.certificate_expiry.fail_on_warn.value;
        let verdict = if stops {
            "preflight would stop (upgrade_certificate_expiry_fail_on_warn)"
        } else {
            "preflight would warn and go on"
        };
        let problem = format!("certificates expire within {days} days on {}: {verdict}", expiring.join(", "));
        if stops { problems.push(problem) } else { notices.push(problem) }
    }
    // As preflight: an end date that cannot be read stops it, unless upgrade_certificate_expiry_unreadable: warn.
    let unreadable: Vec<&String> = facts.values().flat_map(|f| &f.certificates_unreadable).collect();
    if !unreadable.is_empty() {
        let warn = run.plan.certificate_expiry.unreadable.value == crate::settings::UnreadableExpiry::Warn;
        for u in unreadable {
            if warn {
                notices.push(format!("certificate expiry not read (upgrade_certificate_expiry_unreadable: warn): {u}"));
            } else {
                problems.push(format!("certificate expiry not read, preflight would stop: {u}"));
            }
        }
    }
    let blocked = !problems.is_empty() || hosts.iter().any(|h| h.action == "blocked");
    let expected = expected_run(&run.plan, &batches, &run.options.state_dir);
    Ok(LivePlan {
        target,
        control_plane_version: decided.control_plane_version.map(|v| v.to_string()),
        cluster_lock_holder,
        hosts,
        batches,
        problems,
        notices,
        api_removals,
        blocked,
        expected,
    })
}

/// The gate's report as preflight would weigh it (phase/api_removals.rs); a refusal is a problem of the plan.
async fn read_api_removals(
    run: &UpgradeRun,
    by_name: &std::collections::HashMap<String, crate::cluster::ClusterNode>,
    decided: &preflight::Preflight,
    problems: &mut Vec<String>,
) -> Option<crate::api_removals::Report> {
    if let Ok(mut before) = run.cluster_before.lock() {
        *before = Arc::new(by_name.clone());
    }
    let hosts = crate::phase::api_removals::hosts_to_upgrade(decided);
    match crate::phase::api_removals::report(run, Phase::Preflight, &hosts, decided.control_plane_version.as_ref())
        .await
    {
        Ok(Some(report)) => {
            if report.blocked {
                problems.push(format!(
                    "removed APIs and flags: preflight would refuse the run for {} (see the table)",
                    report.blocked_minors.join(", ")
                ));
            }
            Some(report)
        }
        Ok(None) => None,
        Err(e) => {
            problems.push(format!("removed APIs and flags not checked: {}", e.message));
            None
        }
    }
}

#[derive(Debug, Clone, Default)]
struct HostFacts {
    package_manager: Option<String>,
    free_bytes: Option<u64>,
    etcd_db_size: Option<u64>,
    certificates: Option<String>,
    certificates_expiring: bool,
    certificates_unreadable: Vec<String>,
    /// The target's packages that do not resolve from the host's repository (preflight would stop).
    packages_missing: Option<String>,
}

/// The flavour's certificate check on one host (the file preflight runs): "3 read, first to expire: FILE on DATE",
/// whether one expires within the window, and the certificates whose end date could not be read.
async fn certificate_expiry(run: &UpgradeRun, host: &str) -> (Option<String>, bool, Vec<String>) {
    let file = run.playbook("certificate_expiry.yml");
    let facts = match run.run_step(Phase::Preflight, host, Step::Certificates, &file, &[], None).await {
        Ok(facts) => facts,
        Err(f) => return (Some(format!("unknown: {}", f.reason)), false, Vec::new()),
    };
    let (dates, unreadable) = crate::phase::certificates::read_facts(host, &facts);
    let unreadable: Vec<String> = unreadable.iter().map(ToString::to_string).collect();
    let Some(first) = dates.iter().min_by_key(|c| c.not_after) else { return (None, false, unreadable) };
    let now = cluster_lock::epoch_now() as i64;
    let window = run.plan.certificate_expiry.warning_days.value as i64 * 86_400;
    let expiring = first.not_after - now < window;
    let said = format!("{} read, first to expire: {} on {}", dates.len(), first.file, first.date());
    (Some(said), expiring, unreadable)
}

/// On every host at once: the package manager (kubernetes_repo.yml in its dry-run mode), the free space and, on etcd
/// hosts, etcd's database size (host_facts.yml). A read that fails leaves its value unknown.
async fn read_host_facts(run: &UpgradeRun) -> BTreeMap<String, HostFacts> {
    let kubeadm = run.plan.flavor.flavor == crate::flavor::Flavor::Kubeadm;
    let reads = run.plan.hosts.iter().map(|host| async move {
        let mut facts = HostFacts::default();
        // The package manager and repository are the kubeadm flow's (the other flavours install their own way).
        // As preflight: the repository file as the switch will make it, and whether the target's packages resolve
        // from it (package_availability.yml, a dry form: a temporary list directory and source list).
        if kubeadm {
            let dry_run = [("upgrade_kubernetes_repo_dry_run", Value::Bool(true))];
            let repo = run.playbook("package_availability.yml");
            facts.package_manager =
                Some(match run.run_step(Phase::Preflight, host, Step::HostCheck, &repo, &dry_run, None).await {
                    Ok(found) => {
                        facts.packages_missing = preflight::describe_unavailable(&found);
                        preflight::describe_host_check(run, host, &found)
                    }
                    Err(f) => format!("unknown: {}", f.reason),
                });
        }
        (facts.certificates, facts.certificates_expiring, facts.certificates_unreadable) =
            certificate_expiry(run, host).await;
        let is_etcd = [("upgrade_is_etcd_host", Value::Bool(run.plan.etcd_hosts.contains(host)))];
        let file = run.playbook("host_facts.yml");
        if let Ok(found) = run.run_step(Phase::Preflight, host, Step::HostCheck, &file, &is_etcd, None).await {
            let stdout = |name: &str| found.get(name).and_then(|r| r.get("stdout")).and_then(Value::as_str);
            facts.free_bytes = stdout("upgrade_host_df").and_then(|s| s.trim().parse::<u64>().ok()).map(|k| k * 1024);
            facts.etcd_db_size =
                stdout("upgrade_host_etcd_status").and_then(|s| serde_json::from_str::<Value>(s).ok()).and_then(|v| {
                    v.as_array()?.iter().filter_map(|e| e.pointer("/Status/dbSize").and_then(Value::as_u64)).max()
                });
        }
        (host.clone(), facts)
    });
    fan_out(run.forks(), reads).await.into_iter().collect()
}

/// The live plan for people.
pub fn render(plan: &LivePlan) -> String {
    let mut out = format!(
        "live plan: target {}, control plane at {}\n",
        plan.target,
        plan.control_plane_version.as_deref().unwrap_or("?")
    );
    for problem in &plan.problems {
        out.push_str(&format!("problem: {problem}\n"));
    }
    for notice in &plan.notices {
        out.push_str(&format!("warning: {notice}\n"));
    }
    if let Some(report) = &plan.api_removals {
        out.push_str(&report.render());
        out.push('\n');
    }
    for host in &plan.hosts {
        let version = host.current_version.as_deref().unwrap_or("not in the cluster");
        let mut state = Vec::new();
        if host.cordoned == Some(true) {
            state.push("cordoned");
        }
        if host.ready == Some(false) {
            state.push("NotReady");
        }
        let state = if state.is_empty() { String::new() } else { format!(" ({})", state.join(", ")) };
        let action = match (&host.action[..], &host.reason, host.batch) {
            ("upgrade", _, Some(b)) => format!("upgrade in {} batch {b}", host.phase),
            ("blocked", Some(why), _) => format!("BLOCKED: {why}"),
            (a, Some(why), _) => format!("{a}: {why}"),
            (a, None, _) => a.to_string(),
        };
        out.push_str(&format!("{} [{}] {version}{state}: {action}\n", host.host, host.node));
        for blocker in &host.drain_blockers {
            out.push_str(&format!("  drain blocker: {blocker}\n"));
        }
        let mut facts = Vec::new();
        if let Some(pm) = &host.package_manager {
            facts.push(pm.clone());
        }
        if let Some(free) = host.free_bytes {
            facts.push(format!("free {} MiB", free / (1024 * 1024)));
        }
        if let Some(db) = host.etcd_db_size {
            facts.push(format!("etcd db {} MiB", db.div_ceil(1024 * 1024)));
        }
        if let Some(certificates) = &host.certificates {
            facts.push(format!("certificates: {certificates}"));
        }
        if !facts.is_empty() {
            out.push_str(&format!("  host: {}\n", facts.join("; ")));
        }
    }
    out.push_str("order of batches:\n");
    for (i, batch) in plan.batches.iter().enumerate() {
        out.push_str(&format!("  {}. {}: {}\n", i + 1, batch.phase, batch.hosts.join(", ")));
        out.push_str(&crate::drain_simulation::render(&batch.drain_simulation, "     "));
    }
    out.push_str(&format!("{}\n", plan.expected.line()));
    let blocked = plan.hosts.iter().filter(|h| h.action == "blocked").count();
    out.push_str(&if plan.blocked {
        format!(
            "result: BLOCKED ({blocked} host(s) blocked, {} problem(s)): the run would stop or fail\n",
            plan.problems.len()
        )
    } else {
        "result: nothing blocks\n".to_string()
    });
    // Names, reasons and notices come from the cluster and the hosts: none may write escapes to the terminal.
    crate::redact::escapes::strip_terminal_escapes(&out).into_owned()
}
