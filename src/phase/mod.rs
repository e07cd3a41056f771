//! The phases of an upgrade, in their fixed order, and the vocabulary they share: host steps and outcomes.

use std::fmt;
use std::time::Duration;

use serde::Serialize;

pub mod batches;
pub mod certificates;
pub mod cluster_hooks;
pub mod cluster_lock;
pub mod control_plane;
pub mod etcd_backup;
pub mod nodes;
pub mod poller;
pub mod preflight;
pub mod run;
pub mod sequence;
pub mod verify;

/// One step of a host's sequence; its name is what the output, the journal and the JSON events say.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Step {
    Connect,
    /// The cluster-wide lock taken, renewed or released (cluster_lock.yml).
    ClusterLock,
    ReadCluster,
    /// Preflight per host: the package manager found and the repository file read.
    HostCheck,
    /// Preflight on the first master: `kubeadm upgrade plan vX.Y.Z`.
    KubeadmPlan,
    /// Preflight on each etcd host: `etcdctl version`.
    EtcdctlCheck,
    Certificates,
    ReadVersion,
    Backup,
    PreDrainHook,
    PreHook,
    Cordon,
    Drain,
    Upgrade,
    MidHook,
    Restart,
    WaitReady,
    /// After a master's restart: the API server's /readyz and etcd's members healthy.
    ControlPlaneHealth,
    Uncordon,
    PostHook,
    /// A cluster-level hook, once per run on the first master (`upgrade_cluster_{pre,mid,post}_hook`).
    ClusterHook,
    /// After a master's health gate: the control-plane pods on every master Running and Ready.
    ControlPlanePods,
    /// Pending certificate signing requests read (and approved when allowed) while a node is waited for.
    Csr,
    /// The configuration files copied beside the etcd snapshot.
    ConfigBackup,
    Verify,
    /// Blue-green: a node labelled blue or green.
    Label,
    /// Blue-green: an evacuated blue node's object deleted from the cluster.
    DeleteNode,
    /// Blue-green: the controller-side hooks that add a new node before an old one is drained, and remove the old one.
    SurgeAddHook,
    SurgeRemoveHook,
}

impl Step {
    /// A step whose command prints what the run parses from the cluster (the node list, the pods): its output is
    /// read whole, since the bound of command output would cut the answer of a large cluster.
    pub fn reads_cluster(self) -> bool {
        matches!(self, Step::ReadCluster | Step::WaitReady)
    }

    pub fn name(self) -> &'static str {
        match self {
            Step::Connect => "connect",
            Step::ClusterLock => "cluster-lock",
            Step::ReadCluster => "read-cluster",
            Step::HostCheck => "host-check",
            Step::KubeadmPlan => "kubeadm-plan",
            Step::EtcdctlCheck => "etcdctl-check",
            Step::Certificates => "certificates",
            Step::ReadVersion => "read-version",
            Step::Backup => "etcd-backup",
            Step::PreDrainHook => "pre-drain-hook",
            Step::PreHook => "pre-hook",
            Step::Cordon => "cordon",
            Step::Drain => "drain",
            Step::Upgrade => "upgrade",
            Step::MidHook => "mid-hook",
            Step::Restart => "restart",
            Step::WaitReady => "wait-ready",
            Step::ControlPlaneHealth => "control-plane-health",
            Step::Uncordon => "uncordon",
            Step::PostHook => "post-hook",
            Step::ClusterHook => "cluster-hook",
            Step::ControlPlanePods => "control-plane-pods",
            Step::Csr => "csr",
            Step::ConfigBackup => "config-backup",
            Step::Verify => "verify",
            Step::Label => "label",
            Step::DeleteNode => "delete-node",
            Step::SurgeAddHook => "surge-add-hook",
            Step::SurgeRemoveHook => "surge-remove-hook",
        }
    }
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// How one host's sequence in one phase ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "status", rename_all = "kebab-case")]
pub enum HostOutcome {
    /// Upgraded; `left_cordoned` when it was cordoned before the run and so stays cordoned.
    Upgraded { left_cordoned: bool },
    /// Nothing to do, and why (already at the target, not selected by the label).
    Skipped { reason: String },
    /// A step failed. `left_cordoned` says whether the node is still unschedulable because of this run.
    Failed { step: Step, reason: String, unreachable: bool, left_cordoned: bool },
    /// Never started: an earlier failure stopped the phase, or the run was interrupted.
    NotStarted { reason: String },
}

impl HostOutcome {
    pub fn is_failure(&self) -> bool {
        matches!(self, HostOutcome::Failed { .. })
    }
}

/// One host's result in one phase, for the summary, the JSON stream and the JUnit report.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HostReport {
    pub phase: String,
    pub host: String,
    /// The Kubernetes node name, when it differs from the inventory name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    #[serde(flatten)]
    pub outcome: HostOutcome,
    #[serde(serialize_with = "seconds")]
    pub duration: Duration,
}

fn seconds<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64((d.as_secs_f64() * 1000.0).round() / 1000.0)
}

/// What the run did, said once at the end: what was upgraded, skipped, failed, never started, and what is left.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Summary {
    pub target: String,
    pub hosts: Vec<HostReport>,
    /// Why the run stopped early, if it did (a failed master, the failure threshold, a signal, a preflight check).
    pub stopped: Option<String>,
    /// Nodes the cluster reports unschedulable at the end, with the command that makes each schedulable again; when
    /// the cluster cannot be read at the end, the nodes the hosts reported left cordoned.
    pub left_cordoned: Vec<CordonedNode>,
    /// Nodes the cluster reports not Ready at the end that this run did not upgrade (said apart: not this run's
    /// failures, but the cluster is not whole).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub not_ready_untouched: Vec<String>,
    /// Why the cluster could not be read at the end (then `left_cordoned` is what the hosts reported).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cluster_read_error: Option<String>,
    pub interrupted: bool,
    /// What this run took over from earlier, unfinished runs (absent on a first run).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resumed: Option<preflight::Resume>,
    /// The exit code of an error that stopped the run (a preflight check: 2 for bad input, 1 otherwise).
    #[serde(skip)]
    pub error_code: Option<i32>,
    /// The state directory could not be written (journal or host logs): the journal may be incomplete, so the run
    /// is never a success (exit 1, also when it was interrupted too).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state_error: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CordonedNode {
    pub node: String,
    /// Whether it was cordoned before this run (then leaving it so was on purpose).
    pub before_run: bool,
    pub fix: String,
}

impl Summary {
    /// A summary of nothing done yet, for `target`.
    pub fn empty(target: String) -> Summary {
        Summary {
            target,
            hosts: Vec::new(),
            stopped: None,
            left_cordoned: Vec::new(),
            not_ready_untouched: Vec::new(),
            cluster_read_error: None,
            interrupted: false,
            resumed: None,
            error_code: None,
            state_error: None,
        }
    }

    pub fn failed(&self) -> bool {
        self.stopped.is_some() || self.state_error.is_some() || self.hosts.iter().any(|h| h.outcome.is_failure())
    }

    /// The process exit code the summary calls for.
    pub fn exit_code(&self) -> i32 {
        if let Some(code) = self.error_code {
            code
        } else if self.state_error.is_some() {
            1
        } else if self.interrupted {
            130
        } else if self.failed() {
            1
        } else {
            0
        }
    }
}

/// Awaits futures together on the current task (they borrow the run) and returns their outputs in order.
pub async fn join_all<F: std::future::Future>(futures: impl Iterator<Item = F>) -> Vec<F::Output> {
    let mut pending: Vec<Option<std::pin::Pin<Box<F>>>> = futures.map(|f| Some(Box::pin(f))).collect();
    let mut outputs: Vec<Option<F::Output>> = pending.iter().map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut any_pending = false;
        for (slot, fut) in outputs.iter_mut().zip(pending.iter_mut()) {
            if let Some(f) = fut {
                match f.as_mut().poll(cx) {
                    std::task::Poll::Ready(v) => {
                        *slot = Some(v);
                        *fut = None;
                    }
                    std::task::Poll::Pending => any_pending = true,
                }
            }
        }
        if any_pending { std::task::Poll::Pending } else { std::task::Poll::Ready(()) }
    })
    .await;
    outputs.into_iter().flatten().collect()
}
