//! One host's upgrade sequence, as masters and nodes share it: the steps in order, each a task file run through
//! the engine, with the drain timeout, the uncordon-after-drain-failure rule and resume on top.

use std::time::{Duration, Instant};

use serde_json::Value;

use super::run::{StepFailure, UpgradeRun};
use super::shared_steps::{cut_at_abort, drain, hook, safe_point};
use crate::events::Event;
use crate::settings::HookPoint;
use crate::vocabulary::Phase;
use crate::vocabulary::{HostOutcome, HostReport, Step};

/// Whether the host is a master (control-plane phase) or a node (nodes phase): the hooks and files differ.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Role {
    Master,
    Node,
}

impl Role {
    fn phase(self) -> Phase {
        match self {
            Role::Master => Phase::ControlPlane,
            Role::Node => Phase::Nodes,
        }
    }
}

/// What one attempt at a host's sequence has done so far, for the clean-up after a failure or an interrupt.
#[derive(Debug, Default)]
struct Attempt {
    /// The node is unschedulable because of this run.
    cordoned: bool,
    /// The upgrade step ran (or had already run): the node must not be uncordoned half-way.
    upgraded: bool,
    /// When the cordon started and ended, and the parts of the window measured so far.
    clock: WindowClock,
}

/// The cordoned window as the steps go: its start (the cordon's), its end (the uncordon's) and the time of the steps
/// it is made of.
#[derive(Debug, Default)]
struct WindowClock {
    cordoned_at: Option<Instant>,
    uncordoned_at: Option<Instant>,
    parts: crate::vocabulary::CordonedWindow,
}

impl WindowClock {
    /// The whole window, when the node was cordoned and uncordoned by this sequence.
    fn window(&self) -> Option<crate::vocabulary::CordonedWindow> {
        let seconds = self.uncordoned_at?.checked_duration_since(self.cordoned_at?)?;
        let p = &self.parts;
        let other = seconds.saturating_sub(p.drain + p.upgrade + p.restart + p.ready);
        Some(crate::vocabulary::CordonedWindow { seconds, other, ..p.clone() })
    }
}

/// Runs `work` and adds the time it took to `part`.
async fn timed<T>(part: &mut Duration, work: impl std::future::Future<Output = T>) -> T {
    let started = Instant::now();
    let result = work.await;
    *part += started.elapsed();
    result
}

/// Runs the host's whole sequence and reports how it ended.
pub(crate) async fn upgrade_host(run: &UpgradeRun, host: &str, role: Role) -> HostReport {
    let phase = role.phase();
    let started = Instant::now();
    let node = run.node_name(host);
    // Read from the Node's own marks, not from the journal: a killed run's cordon is marked, so `--fresh`, another
    // state directory or another controller uncordon it as this run would (R7).
    let was_cordoned = super::node_marks::cordoned_by_someone_else(run, host);
    if !run.host_started(phase, host, was_cordoned).await {
        // Nothing is done to a host the journal cannot account for.
        return run.host_completed(phase, host, HostOutcome::NotStarted { reason: run.stop_reason() }, started).await;
    }
    if was_cordoned {
        run.notice(Some(host), format!("node {node} was cordoned before this run: it is upgraded and left cordoned"));
    }
    // A node that already reports the target (an earlier run got through its upgrade step, perhaps killed before it
    // could record it) is not upgraded again: the sequence goes on with the steps after the upgrade.
    let at_target = run.version_before(host).is_some_and(|v| run.target.is_reported_by(&v));
    let mut attempt = Attempt { cordoned: was_cordoned, upgraded: false, clock: WindowClock::default() };
    let outcome = match steps(run, host, role, was_cordoned, at_target, &mut attempt).await {
        Ok(()) => HostOutcome::Upgraded { left_cordoned: was_cordoned },
        Err(f) if passes_over(run, host, role, &f) => {
            let behavior = super::undrainable::behavior(run, host);
            let left_cordoned = attempt.cordoned && !was_cordoned;
            match super::undrainable::pass_over(run, host, behavior, &f, left_cordoned).await {
                Some(outcome) => outcome,
                None => HostOutcome::Failed { step: f.step, reason: f.reason, unreachable: false, left_cordoned },
            }
        }
        Err(f) => {
            // Not after the cluster lock was lost: another controller may hold the cluster now, and this run writes
            // nothing more to it; the node is left cordoned and listed (the summary's left_cordoned).
            if f.interrupted && !run.fence.lost() {
                uncordon_after_interrupt(run, host, role, was_cordoned, &mut attempt).await;
            }
            HostOutcome::Failed {
                step: f.step,
                reason: f.reason,
                unreachable: f.unreachable,
                left_cordoned: attempt.cordoned && !was_cordoned,
            }
        }
    };
    let window = attempt.clock.window();
    run.host_completed_with_window(phase, host, outcome, started, window).await
}

/// A node's drain that failed on its own (not interrupted, the host reachable, the lock held) and whose
/// `upgrade_undrainable_node_behavior` is not `fail`: the node is passed over rather than failed.
fn passes_over(run: &UpgradeRun, host: &str, role: Role, failure: &StepFailure) -> bool {
    role == Role::Node
        && failure.step == Step::Drain
        && !failure.interrupted
        && !failure.unreachable
        && !run.fence.lost()
        && super::undrainable::behavior(run, host) != super::undrainable::Behavior::Fail
}

/// Runs a built-in step after the safe-point check.
async fn step(
    run: &UpgradeRun,
    phase: Phase,
    host: &str,
    step: Step,
    file: &str,
    more: &[(&str, Value)],
) -> Result<(), StepFailure> {
    safe_point(run, step)?;
    let file = run.playbook(file);
    let work = run.run_step(phase, host, step, &file, more, None);
    // An uncordon that has started is let finish: it gives the node's capacity back, the very thing the clean-up
    // after an interrupt would do next.
    if step == Step::Uncordon {
        return work.await.map(|_| ());
    }
    cut_at_abort(run, phase, host, step, work).await.map(|_| ())
}

/// The node Ready at the target, read by the run's one poller (poller.rs), told as a step like the others.
async fn wait_ready_polled(run: &UpgradeRun, phase: Phase, host: &str) -> Result<(), StepFailure> {
    safe_point(run, Step::WaitReady)?;
    let started = Instant::now();
    let event = |ok: bool, error: Option<String>| Event::StepFinished {
        phase,
        host: host.into(),
        step: Step::WaitReady,
        ok,
        duration: started.elapsed(),
        error,
    };
    run.event(Event::StepStarted { phase, host: host.into(), step: Step::WaitReady });
    let result = super::poller::wait_ready(run, &run.poller, host).await;
    run.event(event(result.is_ok(), result.as_ref().err().map(|f| f.reason.clone())));
    if result.is_ok() {
        run.record_step_done(phase, host, Step::WaitReady).await;
    }
    result
}

/// Whether the host's dpkg lock is waited for before its cordon (package_lock.yml): the kubeadm flow with the built-in
/// package commands (the inventory's own commands and the other flavours take their own care).
fn waits_for_package_lock(run: &UpgradeRun, host: &str, role: Role) -> bool {
    let own = |variable: &str| run.steps.host_sets(host, variable);
    let custom = match role {
        Role::Master => "upgrade_master_upgrade_command",
        Role::Node => "upgrade_node_upgrade_command",
    };
    run.plan.flavor.flavor == crate::flavor::Flavor::Kubeadm
        && run.render_for(host, &format!("{{{{ {custom} | default('') }}}}")).trim().is_empty()
        && !own("upgrade_kubeadm_package_command")
        && !own("upgrade_kubelet_package_command")
}

async fn steps(
    run: &UpgradeRun,
    host: &str,
    role: Role,
    was_cordoned: bool,
    at_target: bool,
    attempt: &mut Attempt,
) -> Result<(), StepFailure> {
    let phase = role.phase();
    let uncordon = super::node_marks::uncordon_vars(run, host, was_cordoned);

    match role {
        Role::Master => hook(run, phase, host, HookPoint::MasterPre, Step::PreHook).await?,
        // While the node still takes work (an acknowledgement pause, a check of the node in service); also for a
        // node an operator cordoned before the run, so the hook always runs at the same point of the sequence.
        Role::Node => hook(run, phase, host, HookPoint::NodePreCordon, Step::PreCordonHook).await?,
    }
    if waits_for_package_lock(run, host, role) {
        step(run, phase, host, Step::HostCheck, "package_lock.yml", &[]).await?;
        // What preflight could not fetch for this host is fetched now, while it still serves (prefetch.rs).
        safe_point(run, Step::HostCheck)?;
        super::prefetch::again_before_cordon(run, phase, host, role == Role::Master).await?;
    }
    attempt.clock.cordoned_at = Some(Instant::now());
    // Also for a node cordoned by someone else: its cordon stays theirs, but it gets the disruption guards.
    step(run, phase, host, Step::Cordon, "cordon.yml", &super::node_marks::cordon_vars(run, host, was_cordoned, true))
        .await?;
    if !was_cordoned {
        attempt.cordoned = true;
    }
    if role == Role::Node {
        hook(run, phase, host, HookPoint::NodePreDrain, Step::PreDrainHook).await?;
    }
    if let Err(failure) = timed(&mut attempt.clock.parts.drain, drain(run, phase, host)).await {
        if failure.interrupted {
            return Err(failure);
        }
        let failure = with_drain_timeout(run, failure);
        // `upgrade_drain_fallback: disable-eviction` retries a drain that timed out (drain_fallback.rs).
        match timed(&mut attempt.clock.parts.drain, super::drain_fallback::retry(run, phase, host, &failure)).await {
            Some(Ok(())) => {}
            Some(Err(f)) if f.interrupted => return Err(f),
            Some(Err(f)) => return Err(after_drain_failure(run, host, role, f, was_cordoned, attempt).await),
            None => return Err(after_drain_failure(run, host, role, failure, was_cordoned, attempt).await),
        }
    }
    if role == Role::Node {
        hook(run, phase, host, HookPoint::NodePre, Step::PreHook).await?;
    }
    safe_point(run, Step::Upgrade)?;
    let at_target = at_target || (upgrade_cut_short(run, phase, host) && now_at_target(run, phase, host).await);
    if upgrade_done_earlier(run, phase, host) || at_target {
        let why = if at_target { "the node already runs the target" } else { "the journal says it finished" };
        run.notice(Some(host), format!("the upgrade step ran in an earlier run ({why}): not repeated"));
        // Recorded again, so a run cut short after this one still knows.
        run.record_step_done(phase, host, Step::Upgrade).await;
    } else {
        let file = match role {
            Role::Master => "master_upgrade.yml",
            Role::Node => "node_upgrade.yml",
        };
        // From here on the node is half-way: it is not uncordoned by an interrupt, it is finished or left for a
        // re-run (which does not repeat this step).
        attempt.upgraded = true;
        if upgrade_cut_short(run, phase, host) {
            run.notice(
                Some(host),
                "an earlier run died while this host's upgrade command ran and the node does not report the target: \
                 the upgrade step runs again (its commands must be idempotent, as the kubeadm flow is)",
            );
        }
        run.record_step_started(phase, host, Step::Upgrade).await;
        // Not cut at the end of the grace period: a package swap or `kubeadm upgrade apply` killed half-way can
        // leave the host worse off than either version. It is bounded by the commands' own `timeout:` instead.
        let file = run.playbook(file);
        let upgrade = run.run_step(phase, host, Step::Upgrade, &file, &[], None);
        let facts = timed(&mut attempt.clock.parts.upgrade, upgrade).await?;
        if role == Role::Master {
            say_control_plane_moved(run, host, &facts);
        }
    }
    attempt.upgraded = true;
    match role {
        Role::Master => {
            hook(run, phase, host, HookPoint::MasterMid, Step::MidHook).await?;
            let restart = step(run, phase, host, Step::Restart, "master_restart.yml", &[]);
            timed(&mut attempt.clock.parts.restart, restart).await?;
            timed(&mut attempt.clock.parts.ready, wait_ready(run, phase, host)).await?;
            let etcd = [("upgrade_control_plane_etcd_host", Value::String(control_plane_etcd_host(run, host)))];
            step(run, phase, host, Step::ControlPlaneHealth, "control_plane_health.yml", &etcd).await?;
            control_plane_pods(run, phase, host).await?;
        }
        Role::Node => {
            let restart = step(run, phase, host, Step::Restart, "node_restart.yml", &[]);
            timed(&mut attempt.clock.parts.restart, restart).await?;
            timed(&mut attempt.clock.parts.ready, wait_ready(run, phase, host)).await?;
            hook(run, phase, host, HookPoint::NodeMid, Step::MidHook).await?;
        }
    }
    step(run, phase, host, Step::Uncordon, "uncordon.yml", &uncordon).await?;
    attempt.clock.uncordoned_at = Some(Instant::now());
    attempt.cordoned = was_cordoned;
    let post = match role {
        Role::Master => HookPoint::MasterPost,
        Role::Node => HookPoint::NodePost,
    };
    hook(run, phase, host, post, Step::PostHook).await
}

/// After a master's health gate: the control-plane pods on every master Running and Ready (at least one each), polled
/// for upgrade_control_plane_ready_timeout seconds; `upgrade_control_plane_pods_check: false` leaves it out.
async fn control_plane_pods(run: &UpgradeRun, phase: Phase, host: &str) -> Result<(), StepFailure> {
    if !run.host_flag(host, "upgrade_control_plane_pods_check", true) {
        return Ok(());
    }
    safe_point(run, Step::ControlPlanePods)?;
    let masters: Vec<String> = run.plan.masters.iter().map(|m| run.node_name(m)).collect();
    let timeout = Duration::from_secs(run.host_seconds(host, "upgrade_control_plane_ready_timeout", 300));
    let delay = Duration::from_secs(run.host_seconds(host, "upgrade_control_plane_ready_delay", 5).max(1));
    let file = run.playbook("control_plane_pods.yml");
    run.poll_step(phase, host, Step::ControlPlanePods, &file, &[], timeout, delay, |facts| {
        let stdout = facts
            .get("upgrade_control_plane_pods")
            .and_then(|r| r.get("stdout"))
            .and_then(Value::as_str)
            .unwrap_or_default();
        crate::cluster::control_plane_pods_problem(stdout, &masters)
            .and_then(|()| control_plane_at_image(run, host, facts, stdout))
            .map_err(|why| format!("the control plane is not healthy after {}'s upgrade: {why}", run.node_name(host)))
    })
    .await
}

/// OpenShift 3.11: says which static pod manifests the upgrade step pointed at which image
/// (openshift/control_plane_images.yml), so the run shows the control plane moving, not only the packages.
fn say_control_plane_moved(run: &UpgradeRun, host: &str, facts: &crate::tasks::host_vars::HostFacts) {
    let Some(moved) = facts.get("upgrade_static_pod_images").and_then(|v| v.as_array()) else { return };
    let said: Vec<String> = moved
        .iter()
        .filter_map(|m| Some(format!("{} -> {}", m.get("file")?.as_str()?, m.get("image")?.as_str()?)))
        .collect();
    if !said.is_empty() {
        run.notice(Some(host), format!("control plane: {}", said.join(", ")));
    }
}

/// OpenShift 3.11: the API server and controllers of the master just upgraded run the target's control-plane image
/// (`upgrade_openshift_control_plane_image`, openshift/defaults.yml), and its etcd the etcd image when its manifest
/// was moved (openshift/control_plane_images.yml). Other flavours: nothing to check here.
fn control_plane_at_image(
    run: &UpgradeRun,
    host: &str,
    facts: &crate::tasks::host_vars::HostFacts,
    pods: &str,
) -> Result<(), String> {
    let fact = |name: &str| facts.get(name).and_then(|v| v.as_str()).unwrap_or_default().to_string();
    // The custom command is the whole upgrade: what it does to the control plane is the operator's.
    if run.plan.flavor.flavor != crate::flavor::Flavor::Openshift || !fact("upgrade_master_upgrade_command").is_empty()
    {
        return Ok(());
    }
    let image = fact("upgrade_openshift_control_plane_image");
    if image.is_empty() {
        return Err("the target's control-plane image is not known (upgrade_openshift_control_plane_image)".into());
    }
    let node = run.node_name(host);
    crate::cluster::pods_not_at_image(pods, &node, &["master-api-", "master-controllers-"], &image)?;
    let etcd_moved = facts
        .get("upgrade_static_pod_images")
        .and_then(|v| v.as_array())
        .is_some_and(|moved| moved.iter().any(|m| m.get("file").and_then(Value::as_str) == Some("etcd.yaml")));
    if etcd_moved {
        crate::cluster::pods_not_at_image(pods, &node, &["master-etcd-"], &fact("upgrade_openshift_etcd_image"))?;
    }
    Ok(())
}

/// Waits until the node is Ready at the target. With `upgrade_approve_node_csrs: true` each poll approves the
/// pending CSRs of this node (a kubelet that rotated its certificate waits for them); otherwise a wait that fails
/// says which CSRs of the node are pending.
async fn wait_ready(run: &UpgradeRun, phase: Phase, host: &str) -> Result<(), StepFailure> {
    let node = run.node_name(host);
    if !run.host_flag(host, "upgrade_approve_node_csrs", false) {
        let Err(mut failure) = wait_ready_polled(run, phase, host).await else {
            return Ok(());
        };
        if !failure.interrupted && !failure.unreachable {
            if let Ok(pending) = super::cluster_reads::pending_csrs(run, phase).await {
                let names: Vec<&str> =
                    pending.iter().filter(|c| c.node() == Some(node.as_str())).map(|c| c.name.as_str()).collect();
                if !names.is_empty() {
                    failure.reason = format!(
                        "{}; its kubelet waits for pending certificate signing requests: {} (approve them with \
                         `certificate approve NAME`, or set upgrade_approve_node_csrs: true)",
                        failure.reason,
                        names.join(", ")
                    );
                }
            }
        }
        return Err(failure);
    }
    safe_point(run, Step::WaitReady)?;
    let timeout = Duration::from_secs(run.host_seconds(host, "upgrade_node_ready_timeout", 600));
    let delay = Duration::from_secs(run.host_seconds(host, "upgrade_node_ready_delay", 5).max(1));
    let file = run.playbook("node_ready_poll.yml");
    let wants_version = !run.probes_host_version(host);
    let at = if wants_version { format!(" at {}", run.target) } else { String::new() };
    let started = Instant::now();
    run.event(Event::StepStarted { phase, host: host.into(), step: Step::WaitReady });
    let mut to_approve: Vec<String> = Vec::new();
    let result = loop {
        let more = [("upgrade_csrs_to_approve", Value::from(to_approve.clone()))];
        let why = match run.run_step_quietly(host, Step::WaitReady, &file, &more).await {
            Err(f) => f.reason,
            Ok(facts) => {
                if !to_approve.is_empty() {
                    run.notice(Some(host), format!("approved the pending CSRs of {node}: {}", to_approve.join(", ")));
                }
                let text = |name: &str| {
                    facts
                        .get(name)
                        .and_then(|r| r.get("stdout"))
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_string()
                };
                let seen = crate::cluster::parse_node(&text("upgrade_node_poll"));
                // As the poller: a flavour that reads "at the target" from the host (OpenShift 3.11, whose every
                // 3.11.z kubelet reports one version) waits for Ready only; verify reads the installed version.
                let at_target =
                    |n: &crate::cluster::ClusterNode| !wants_version || run.target.is_reported_by(&n.kubelet_version);
                if seen.as_ref().is_ok_and(|n| n.ready && at_target(n)) {
                    break Ok(());
                }
                to_approve = crate::cluster::parse_pending_csrs(&text("upgrade_cluster_csrs"))
                    .unwrap_or_default()
                    .into_iter()
                    .filter(|c| c.node() == Some(node.as_str()))
                    .map(|c| c.name)
                    .collect();
                match seen {
                    Ok(n) => {
                        format!("node {node} is not Ready{at}: it reports {}, Ready={}", n.kubelet_version, n.ready)
                    }
                    Err(e) => format!("node {node} could not be read: {e}"),
                }
            }
        };
        if started.elapsed() >= timeout || run.stop.is_aborting() {
            let reason = format!("{why} after {}s", timeout.as_secs());
            break Err(StepFailure { timed_out: true, ..StepFailure::new(Step::WaitReady, reason) });
        }
        if to_approve.is_empty() {
            tokio::time::sleep(delay).await;
        }
    };
    run.event(Event::StepFinished {
        phase,
        host: host.into(),
        step: Step::WaitReady,
        ok: result.is_ok(),
        duration: started.elapsed(),
        error: result.as_ref().err().map(|f| f.reason.clone()),
    });
    if result.is_ok() {
        run.record_step_done(phase, host, Step::WaitReady).await;
    }
    result
}

/// Where the health gate after `master` asks etcd for its members' health: the master itself when it is an etcd host,
/// else the first etcd host that is a master; nowhere ('') when etcd does not run on the masters (external etcd).
fn control_plane_etcd_host(run: &UpgradeRun, master: &str) -> String {
    let etcd = &run.plan.etcd_hosts;
    if etcd.iter().any(|h| h == master) {
        return master.to_string();
    }
    etcd.iter().find(|h| run.plan.masters.contains(h)).cloned().unwrap_or_default()
}

/// Past the grace period, a node this run cordoned and did not upgrade gets its capacity back.
async fn uncordon_after_interrupt(run: &UpgradeRun, host: &str, role: Role, was_cordoned: bool, attempt: &mut Attempt) {
    if !attempt.cordoned || was_cordoned || attempt.upgraded {
        return;
    }
    let was = super::node_marks::uncordon_vars(run, host, false);
    match run.run_step(role.phase(), host, Step::Uncordon, &run.playbook("uncordon.yml"), &was, None).await {
        Ok(_) => {
            attempt.cordoned = false;
            run.notice(Some(host), "interrupted before its upgrade: uncordoned again");
        }
        Err(f) => run.notice(Some(host), format!("could not uncordon after the interrupt: {}", f.reason)),
    }
}

/// The journal says an earlier run started this host's upgrade step and died before it ended.
fn upgrade_cut_short(run: &UpgradeRun, phase: Phase, host: &str) -> bool {
    run.history.step_of_unfinished(phase, host, &run.target.to_string(), Step::Upgrade, false)
}

/// Reads the node from the cluster now (not as preflight saw it): an upgrade command left running by a killed run
/// may have finished since.
/// The reads are labelled with the host's own phase (a master's re-read is the control plane's, not the nodes').
async fn now_at_target(run: &UpgradeRun, phase: Phase, host: &str) -> bool {
    if run.probes_host_version(host) {
        return super::cluster_reads::read_host_version(run, phase, host)
            .await
            .is_ok_and(|v| run.target.is_reported_by(&v));
    }
    let node = run.node_name(host);
    match super::cluster_reads::read_cluster(run, phase).await {
        Ok(nodes) => {
            nodes.iter().find(|n| n.name == node).is_some_and(|n| run.target.is_reported_by(&n.kubelet_version))
        }
        Err(_) => false,
    }
}

/// The journal says the upgrade step of this host finished, for this target, in an attempt that did not finish.
fn upgrade_done_earlier(run: &UpgradeRun, phase: Phase, host: &str) -> bool {
    run.history.step_of_unfinished(phase, host, &run.target.to_string(), Step::Upgrade, true)
}

/// A drain that outlasted the drain timeout says so rather than what the cut-off command said.
fn with_drain_timeout(run: &UpgradeRun, mut failure: StepFailure) -> StepFailure {
    let limit = run.plan.settings.drain_timeout.value;
    if failure.timed_out && limit.seconds() > 0 {
        failure.reason = format!("drain timed out after {limit}");
    }
    failure
}

/// A drain that failed or outlasted the drain timeout: the node is not upgraded, and gets its capacity back
/// (uncordoned) unless it was cordoned before the run or the operator said to keep it cordoned.
async fn after_drain_failure(
    run: &UpgradeRun,
    host: &str,
    role: Role,
    failure: StepFailure,
    was_cordoned: bool,
    attempt: &mut Attempt,
) -> StepFailure {
    // A node quarantined stays cordoned (undrainable.rs); `schedule` and `fail` give the capacity back.
    let quarantine = role == Role::Node
        && !failure.interrupted
        && super::undrainable::behavior(run, host) == super::undrainable::Behavior::Quarantine;
    let keep = quarantine || !run.host_flag(host, "upgrade_uncordon_after_drain_failure", true);
    if was_cordoned || keep || failure.unreachable {
        return failure;
    }
    let phase = role.phase();
    let was = super::node_marks::uncordon_vars(run, host, false);
    match run.run_step(phase, host, Step::Uncordon, &run.playbook("uncordon.yml"), &was, None).await {
        Ok(_) => {
            attempt.cordoned = false;
            run.notice(Some(host), "uncordoned again after the failed drain, so its capacity comes back");
        }
        Err(f) => run.notice(Some(host), format!("could not uncordon after the failed drain: {}", f.reason)),
    }
    failure
}
