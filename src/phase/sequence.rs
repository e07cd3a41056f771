//! One host's upgrade sequence, as masters and nodes share it: the steps in order, each a task file run through
//! the engine, with the drain timeout, the uncordon-after-drain-failure rule and resume on top.

use std::time::Instant;

use serde_json::Value;

use super::run::{StepFailure, UpgradeRun};
use super::{HostOutcome, HostReport, Step};
use crate::plan::Phase;
use crate::settings::HookPoint;

/// Whether the host is a master (control-plane phase) or a node (nodes phase): the hooks and files differ.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
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

/// Runs the host's whole sequence and reports how it ended.
pub async fn upgrade_host(run: &UpgradeRun, host: &str, role: Role) -> HostReport {
    let phase = role.phase();
    let started = Instant::now();
    run.host_started(phase, host);
    let node = run.node_name(host);
    let was_cordoned =
        run.cluster_before.lock().ok().and_then(|c| c.get(&node).map(|n| n.unschedulable)).unwrap_or(false)
            && !cordoned_by_earlier_run(run, phase, host);
    if was_cordoned {
        run.notice(Some(host), format!("node {node} was cordoned before this run: it is upgraded and left cordoned"));
    }
    let mut cordoned = was_cordoned;
    let outcome = match steps(run, host, role, was_cordoned, &mut cordoned).await {
        Ok(()) => HostOutcome::Upgraded { left_cordoned: was_cordoned },
        Err(f) => {
            HostOutcome::Failed { step: f.step, reason: f.reason, unreachable: f.unreachable, left_cordoned: cordoned }
        }
    };
    run.host_completed(phase, host, outcome, started)
}

/// A node found cordoned that an earlier run of ours cordoned is not "cordoned before the run": it gets uncordoned.
fn cordoned_by_earlier_run(run: &UpgradeRun, phase: Phase, host: &str) -> bool {
    run.history.host(phase.name(), host).is_some_and(|h| h.steps_done.iter().any(|s| s == Step::Cordon.name()))
}

async fn steps(
    run: &UpgradeRun,
    host: &str,
    role: Role,
    was_cordoned: bool,
    cordoned: &mut bool,
) -> Result<(), StepFailure> {
    let phase = role.phase();
    let was = [("upgrade_node_was_cordoned", Value::Bool(was_cordoned))];
    let drain_limit = run.plan.settings.drain_timeout.value.limit();

    match role {
        Role::Master => run.run_hook(phase, host, HookPoint::MasterPre, Step::PreHook).await?,
        Role::Node => {}
    }
    if !was_cordoned {
        run.run_step(phase, host, Step::Cordon, &run.playbook("cordon.yml"), &[], None).await?;
        *cordoned = true;
    }
    if role == Role::Node {
        run.run_hook(phase, host, HookPoint::NodePreDrain, Step::PreDrainHook).await?;
    }
    if let Err(failure) = run.run_step(phase, host, Step::Drain, &run.playbook("drain.yml"), &[], drain_limit).await {
        return Err(after_drain_failure(run, host, role, failure, was_cordoned, cordoned).await);
    }
    if role == Role::Node {
        run.run_hook(phase, host, HookPoint::NodePre, Step::PreHook).await?;
    }
    if upgrade_done_earlier(run, phase, host) {
        run.notice(Some(host), "the upgrade step finished in an earlier run: not repeated");
    } else {
        let file = match role {
            Role::Master => "master_upgrade.yml",
            Role::Node => "node_upgrade.yml",
        };
        run.run_step(phase, host, Step::Upgrade, &run.playbook(file), &[], None).await?;
    }
    match role {
        Role::Master => {
            run.run_hook(phase, host, HookPoint::MasterMid, Step::MidHook).await?;
            run.run_step(phase, host, Step::Restart, &run.playbook("master_restart.yml"), &[], None).await?;
            run.run_step(phase, host, Step::WaitReady, &run.playbook("wait_ready.yml"), &[], None).await?;
        }
        Role::Node => {
            run.run_step(phase, host, Step::Restart, &run.playbook("node_restart.yml"), &[], None).await?;
            run.run_step(phase, host, Step::WaitReady, &run.playbook("wait_ready.yml"), &[], None).await?;
            run.run_hook(phase, host, HookPoint::NodeMid, Step::MidHook).await?;
        }
    }
    run.run_step(phase, host, Step::Uncordon, &run.playbook("uncordon.yml"), &was, None).await?;
    *cordoned = was_cordoned;
    let post = match role {
        Role::Master => HookPoint::MasterPost,
        Role::Node => HookPoint::NodePost,
    };
    run.run_hook(phase, host, post, Step::PostHook).await
}

/// The journal says the upgrade step of this host finished, for this target, in the attempt that was cut short.
fn upgrade_done_earlier(run: &UpgradeRun, phase: Phase, host: &str) -> bool {
    let same_target = run.history.target.as_deref() == Some(run.target.to_string().as_str());
    same_target
        && run
            .history
            .host(phase.name(), host)
            .is_some_and(|h| h.in_flight && h.steps_done.iter().any(|s| s == Step::Upgrade.name()))
}

/// A drain that failed or outlasted the drain timeout: the node is not upgraded, and gets its capacity back
/// (uncordoned) unless it was cordoned before the run or the operator said to keep it cordoned.
async fn after_drain_failure(
    run: &UpgradeRun,
    host: &str,
    role: Role,
    mut failure: StepFailure,
    was_cordoned: bool,
    cordoned: &mut bool,
) -> StepFailure {
    let limit = run.plan.settings.drain_timeout.value;
    if failure.reason.contains("timed out") && limit.seconds() > 0 {
        failure.reason = format!("drain timed out after {limit}");
    }
    let keep = !run.host_flag(host, "upgrade_uncordon_after_drain_failure", true);
    if was_cordoned || keep || failure.unreachable {
        return failure;
    }
    let phase = role.phase();
    let was = [("upgrade_node_was_cordoned", Value::Bool(false))];
    match run.run_step(phase, host, Step::Uncordon, &run.playbook("uncordon.yml"), &was, None).await {
        Ok(_) => {
            *cordoned = false;
            run.notice(Some(host), "uncordoned again after the failed drain, so its capacity comes back");
        }
        Err(f) => run.notice(Some(host), format!("could not uncordon after the failed drain: {}", f.reason)),
    }
    failure
}
