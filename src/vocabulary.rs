//! The words every layer shares: phases, host steps, how a host's sequence ended, what the run did and why it
//! stopped, and the process exit code. A leaf: it imports nothing from the crate, so events, the journal, the phases
//! and the reporters can all use it without importing each other.
//!
//! The serde names are the wire format of the JSON events, the journal and the summary: they must not change.

use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// A phase of an upgrade, as events, the journal and the reports name it. The first five are the phases a plan
/// holds (`--phase`), in run order; the others are the pseudo-phases recorded under their own name: the
/// configuration backup, the three cluster hooks and the blue-green rollback.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Phase {
    #[serde(rename = "preflight")]
    Preflight,
    #[serde(rename = "etcd-backup")]
    EtcdBackup,
    #[serde(rename = "control-plane")]
    ControlPlane,
    #[serde(rename = "nodes")]
    Nodes,
    #[serde(rename = "verify")]
    Verify,
    /// The configuration files copied beside the etcd snapshot (one record per master).
    #[serde(rename = "config-backup")]
    ConfigBackup,
    #[serde(rename = "cluster-pre-hook")]
    ClusterPreHook,
    #[serde(rename = "cluster-mid-hook")]
    ClusterMidHook,
    #[serde(rename = "cluster-post-hook")]
    ClusterPostHook,
    /// `upgrade --rollback-blue-green`.
    #[serde(rename = "rollback-blue-green")]
    RollbackBlueGreen,
}

impl Phase {
    /// The phases a plan can hold, in the order they run.
    pub const ALL: [Phase; 5] = [Phase::Preflight, Phase::EtcdBackup, Phase::ControlPlane, Phase::Nodes, Phase::Verify];

    pub fn name(self) -> &'static str {
        match self {
            Phase::Preflight => "preflight",
            Phase::EtcdBackup => "etcd-backup",
            Phase::ControlPlane => "control-plane",
            Phase::Nodes => "nodes",
            Phase::Verify => "verify",
            Phase::ConfigBackup => "config-backup",
            Phase::ClusterPreHook => "cluster-pre-hook",
            Phase::ClusterMidHook => "cluster-mid-hook",
            Phase::ClusterPostHook => "cluster-post-hook",
            Phase::RollbackBlueGreen => "rollback-blue-green",
        }
    }

    /// A phase a plan can hold, by the name `--phase` takes.
    pub fn from_name(name: &str) -> Option<Phase> {
        Phase::ALL.into_iter().find(|p| p.name() == name)
    }

    /// The phases `--phase` asks for, in run order, preflight always included; empty means all. `Err` is the first
    /// name that is not a phase.
    pub fn select(names: &[String]) -> Result<Vec<Phase>, String> {
        let names: Vec<&str> =
            names.iter().flat_map(|n| n.split(',')).map(str::trim).filter(|n| !n.is_empty()).collect();
        if names.is_empty() {
            return Ok(Phase::ALL.to_vec());
        }
        let mut wanted = std::collections::BTreeSet::from([Phase::Preflight]);
        for name in names {
            wanted.insert(Phase::from_name(name).ok_or_else(|| name.to_string())?);
        }
        Ok(wanted.into_iter().collect())
    }

    /// A cluster hook's pseudo-phase: the hook runs on the first master without cordoning it.
    pub fn is_cluster_hook(self) -> bool {
        matches!(self, Phase::ClusterPreHook | Phase::ClusterMidHook | Phase::ClusterPostHook)
    }
}

impl AsRef<str> for Phase {
    fn as_ref(&self) -> &str {
        self.name()
    }
}

impl fmt::Display for Phase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One step of a host's sequence. `name()` is what events and the journal say; the serde name (the variant in
/// kebab case: `backup` for `Backup`) is what a failed host's report says in the JSON summary.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Step {
    Connect,
    /// The cluster-wide lock taken, renewed or released (cluster_lock.yml).
    ClusterLock,
    /// kured's reboot lock read, taken or given back (kured_lock.yml).
    KuredLock,
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
    /// A node's hook before its cordon (`upgrade_node_pre_cordon_hook`, openshift-ansible's node pre hook).
    PreCordonHook,
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
    /// A hook of the operator's (task files run as a step), not a built-in step.
    pub fn is_hook(self) -> bool {
        matches!(
            self,
            Step::PreCordonHook
                | Step::PreDrainHook
                | Step::PreHook
                | Step::MidHook
                | Step::PostHook
                | Step::ClusterHook
                | Step::SurgeAddHook
                | Step::SurgeRemoveHook
        )
    }

    /// A step whose command prints what the run parses from the cluster (the node list, the pods): its output is
    /// read whole, since the bound of command output would cut the answer of a large cluster.
    pub fn reads_cluster(self) -> bool {
        matches!(self, Step::ReadCluster | Step::WaitReady)
    }

    pub const ALL: [Step; 31] = [
        Step::Connect,
        Step::ClusterLock,
        Step::KuredLock,
        Step::ReadCluster,
        Step::HostCheck,
        Step::KubeadmPlan,
        Step::EtcdctlCheck,
        Step::Certificates,
        Step::ReadVersion,
        Step::Backup,
        Step::PreCordonHook,
        Step::PreDrainHook,
        Step::PreHook,
        Step::Cordon,
        Step::Drain,
        Step::Upgrade,
        Step::MidHook,
        Step::Restart,
        Step::WaitReady,
        Step::ControlPlaneHealth,
        Step::Uncordon,
        Step::PostHook,
        Step::ClusterHook,
        Step::ControlPlanePods,
        Step::Csr,
        Step::ConfigBackup,
        Step::Verify,
        Step::Label,
        Step::DeleteNode,
        Step::SurgeAddHook,
        Step::SurgeRemoveHook,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Step::Connect => "connect",
            Step::ClusterLock => "cluster-lock",
            Step::KuredLock => "kured-lock",
            Step::ReadCluster => "read-cluster",
            Step::HostCheck => "host-check",
            Step::KubeadmPlan => "kubeadm-plan",
            Step::EtcdctlCheck => "etcdctl-check",
            Step::Certificates => "certificates",
            Step::ReadVersion => "read-version",
            Step::Backup => "etcd-backup",
            Step::PreCordonHook => "pre-cordon-hook",
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

    /// The step events and the journal call `name`.
    pub fn from_name(name: &str) -> Option<Step> {
        Step::ALL.into_iter().find(|s| s.name() == name)
    }
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Serde by `Step::name()` (`etcd-backup`), as events and the journal write a step: `#[serde(with = "step_name")]`.
pub(crate) mod step_name {
    use super::Step;

    pub(crate) fn serialize<S: serde::Serializer>(step: &Step, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(step.name())
    }

    pub(crate) fn deserialize<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Step, D::Error> {
        let name: std::borrow::Cow<'de, str> = serde::Deserialize::deserialize(d)?;
        Step::from_name(&name).ok_or_else(|| serde::de::Error::custom(format!("unknown step `{name}`")))
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
    /// Could not be drained and passed over by `upgrade_undrainable_node_behavior` (`quarantine`: left cordoned and
    /// labelled; `schedule`: uncordoned): not upgraded, not a failure for the threshold, but the run ends with exit 1.
    /// `blocked_by` names what refused the drain; `fix` is what finishes it later.
    PassedOver { behavior: String, blocked_by: Vec<String>, left_cordoned: bool, fix: String },
}

impl HostOutcome {
    pub fn is_failure(&self) -> bool {
        matches!(self, HostOutcome::Failed { .. })
    }

    /// Left below the target on purpose (a node that could not be drained): not a failure, not a success either.
    pub fn is_passed_over(&self) -> bool {
        matches!(self, HostOutcome::PassedOver { .. })
    }
}

/// One host's result in one phase, for the summary, the JSON stream and the JUnit report.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HostReport {
    pub phase: Phase,
    pub host: String,
    /// The Kubernetes node name, when it differs from the inventory name.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    #[serde(flatten)]
    pub outcome: HostOutcome,
    #[serde(serialize_with = "seconds")]
    pub duration: Duration,
    /// A node upgraded in place: how long it was out of service (cordon to uncordon) and what that time was spent on.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub window: Option<CordonedWindow>,
}

/// A node's cordoned window: from the start of its cordon to the end of its uncordon, with its parts. `other` is
/// what the parts do not cover (the cordon and uncordon themselves, hooks inside the window, the health gate of a
/// master). The upgrade's downloads belong to `upgrade`: prefetched before the cordon, they leave it.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct CordonedWindow {
    #[serde(serialize_with = "seconds")]
    pub seconds: Duration,
    #[serde(serialize_with = "seconds")]
    pub drain: Duration,
    #[serde(serialize_with = "seconds")]
    pub upgrade: Duration,
    #[serde(serialize_with = "seconds")]
    pub restart: Duration,
    #[serde(serialize_with = "seconds")]
    pub ready: Duration,
    #[serde(serialize_with = "seconds")]
    pub other: Duration,
}

impl CordonedWindow {
    /// `12.3 s (drain 1.0, upgrade 8.1, restart 0.5, ready 0.2, other 2.5)`.
    pub fn describe(&self) -> String {
        let s = |d: &Duration| format!("{:.1}", d.as_secs_f64());
        format!(
            "{} s (drain {}, upgrade {}, restart {}, ready {}, other {})",
            s(&self.seconds),
            s(&self.drain),
            s(&self.upgrade),
            s(&self.restart),
            s(&self.ready),
            s(&self.other)
        )
    }
}

/// Durations on the wire: seconds with millisecond precision.
pub(crate) fn seconds_f64(d: &Duration) -> f64 {
    (d.as_secs_f64() * 1000.0).round() / 1000.0
}

fn seconds<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(seconds_f64(d))
}

/// The process exit code: the one map from how a run or a command ended to its status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExitCode {
    Success,
    /// Hosts failed, the run stopped on the threshold, or the controller failed (the state directory).
    Failed,
    /// Bad input or usage: nothing was touched.
    BadInput,
    /// A signal (SIGINT, SIGTERM) stopped the run.
    Interrupted,
}

impl ExitCode {
    pub fn code(self) -> i32 {
        match self {
            ExitCode::Success => 0,
            ExitCode::Failed => 1,
            ExitCode::BadInput => 2,
            ExitCode::Interrupted => 130,
        }
    }

    /// How the run ended, as the journal's last line and the JSON summary say it.
    pub fn status(self) -> RunStatus {
        match self {
            ExitCode::Success => RunStatus::Success,
            ExitCode::Interrupted => RunStatus::Interrupted,
            ExitCode::Failed | ExitCode::BadInput => RunStatus::Failed,
        }
    }
}

/// How a run ended: the journal's `run-finished` status and the JSON summary's `status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RunStatus {
    Success,
    Interrupted,
    Failed,
}

impl RunStatus {
    pub fn name(self) -> &'static str {
        match self {
            RunStatus::Success => "success",
            RunStatus::Interrupted => "interrupted",
            RunStatus::Failed => "failed",
        }
    }
}

/// Why the run stops starting hosts: a signal, or a state directory that cannot be written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Halt {
    Interrupted,
    /// The first write that failed, and why (`No space left on device`).
    StateNotWritable(String),
    /// The cluster lock was not renewed in time, or another controller holds it now (the whole sentence).
    ClusterLock(String),
}

impl Halt {
    fn texts_mut(&mut self) -> Vec<&mut String> {
        match self {
            Halt::Interrupted => Vec::new(),
            Halt::StateNotWritable(reason) | Halt::ClusterLock(reason) => vec![reason],
        }
    }
}

impl fmt::Display for Halt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Halt::Interrupted => f.write_str("the run was interrupted"),
            Halt::StateNotWritable(reason) => write!(f, "the state directory could not be written ({reason})"),
            Halt::ClusterLock(reason) => f.write_str(reason),
        }
    }
}

/// Why a run stopped early. Its text is the summary's `stopped`; a stop that carries an exit code (a failed check
/// before anything moved) decides the run's exit code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StopReason {
    /// A check before anything moved failed (preflight, the update path's decision); `message` is the error's.
    Preflight { message: String, exit_code: ExitCode },
    /// The cluster could not be read before a blue-green rollback moved anything.
    ClusterUnreadable { message: String, exit_code: ExitCode },
    /// A signal or a failed write arrived while preflight ran: no later phase started.
    DuringPreflight(Halt),
    /// The etcd backup gate stayed closed.
    EtcdGate,
    /// A cluster hook failed (`variable` names it).
    ClusterHook { variable: &'static str, reason: String },
    /// A master failed: the masters after it were not started.
    MasterFailed { master: String },
    /// Batch `batch` (1-based) had more failures than max-fail-percentage allows. `blue`: blue-green evacuation.
    Threshold { batch: usize, failed: usize, size: usize, max_fail: String, blue: bool },
    /// The cluster was not valid within `upgrade_validation_timeout` before a master or batch, or a batch failed its
    /// soak: `reason` names what was not valid.
    NotValid { reason: String },
    /// With `upgrade_fail_on_drain_blockers: true`, the drain blockers read again before a master or batch found
    /// some (or could not be read): `reason` names them.
    DrainBlockers { reason: String },
    /// A signal or a failed write stopped the control plane before a master.
    Halted(Halt),
    /// A signal or a failed write stopped the batches of the nodes phase (`blue`: blue-green evacuation).
    HaltedBatches { halt: Halt, blue: bool },
    /// Blue-green's switch-over failed on `host`.
    SwitchOver { host: String, step: Step, reason: String },
    /// Blue-green: the green nodes could not take the load before batch `batch` (0: before the switch-over).
    GreenNotReady { batch: usize, reason: String },
    /// Too little of the maintenance window was left for the next master or batch (`reason` says how much, and when
    /// the next window opens).
    MaintenanceWindow { reason: String },
    /// The cluster's upgrades stayed paused (`upgrade pause`) past `upgrade_pause_timeout` before a master or batch
    /// (`reason` says who paused, since when, and before what).
    PauseTimeout { reason: String },
    /// Blue-green: a rollback came during the final soak (`reason` says from where, and what was moved).
    RolledBack { reason: String },
    /// A signal or a failed write arrived between two hops of an update path.
    BetweenHops { halt: Halt, next: String, target: String },
    /// The journal's last entry could not be written.
    JournalLastEntry(String),
}

impl StopReason {
    /// The exit code this stop imposes on the run, if it decides one.
    pub fn exit_code(&self) -> Option<ExitCode> {
        match self {
            StopReason::Preflight { exit_code, .. } | StopReason::ClusterUnreadable { exit_code, .. } => {
                Some(*exit_code)
            }
            _ => None,
        }
    }

    /// The texts it carries from outside (error messages, command output), for masking secrets.
    pub fn texts_mut(&mut self) -> Vec<&mut String> {
        match self {
            StopReason::Preflight { message, .. } | StopReason::ClusterUnreadable { message, .. } => vec![message],
            StopReason::ClusterHook { reason, .. }
            | StopReason::SwitchOver { reason, .. }
            | StopReason::GreenNotReady { reason, .. }
            | StopReason::NotValid { reason }
            | StopReason::DrainBlockers { reason }
            | StopReason::RolledBack { reason }
            | StopReason::MaintenanceWindow { reason }
            | StopReason::PauseTimeout { reason } => vec![reason],
            StopReason::MasterFailed { master } => vec![master],
            StopReason::DuringPreflight(halt) | StopReason::Halted(halt) | StopReason::HaltedBatches { halt, .. } => {
                halt.texts_mut()
            }
            StopReason::BetweenHops { halt, .. } => halt.texts_mut(),
            StopReason::JournalLastEntry(failure) => vec![failure],
            StopReason::EtcdGate | StopReason::Threshold { .. } => Vec::new(),
        }
    }

    /// The reason of a failed check before anything moved, without the `preflight: ` its text begins with.
    pub fn check_failed(&self) -> Option<&str> {
        match self {
            StopReason::Preflight { message, .. } | StopReason::ClusterUnreadable { message, .. } => Some(message),
            _ => None,
        }
    }
}

impl fmt::Display for StopReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            // Most preflight errors already say where they come from ("preflight: ..."): said once.
            StopReason::Preflight { message, .. } if message.starts_with("preflight:") => f.write_str(message),
            StopReason::Preflight { message, .. } => write!(f, "preflight: {message}"),
            StopReason::ClusterUnreadable { message, .. } => f.write_str(message),
            StopReason::DuringPreflight(halt) => write!(f, "{halt} during preflight: no later phase was started"),
            StopReason::EtcdGate => f.write_str("the etcd backup failed: nothing else was started"),
            StopReason::ClusterHook { variable, reason } => {
                write!(f, "the {variable} failed: {reason}; nothing after it was started")
            }
            StopReason::MasterFailed { master } => {
                write!(f, "master {master} failed; the masters after it were not started")
            }
            StopReason::Threshold { batch, failed, size, max_fail, blue: false } => write!(
                f,
                "batch {batch}: {failed} of {size} nodes failed, more than max-fail-percentage {max_fail} allows; \
                 the later batches were not started"
            ),
            StopReason::Threshold { batch, failed, size, max_fail, blue: true } => write!(
                f,
                "batch {batch}: {failed} of {size} blue nodes failed, more than max-fail-percentage {max_fail} \
                 allows; the later batches were not evacuated (`upgrade --rollback-blue-green` switches back)"
            ),
            StopReason::NotValid { reason } => write!(
                f,
                "{reason}; the masters and batches after it were not started (re-run to go on once the cluster is \
                 whole)"
            ),
            StopReason::DrainBlockers { reason } => write!(
                f,
                "{reason}; the masters and batches after it were not started (resolve them, or set \
                 upgrade_fail_on_drain_blockers: false, and re-run)"
            ),
            StopReason::MaintenanceWindow { reason } => write!(
                f,
                "{reason}; the masters and batches after it were not started, the nodes of the batches before are \
                 schedulable (re-run in the next window: it resumes from the journal)"
            ),
            StopReason::PauseTimeout { reason } => write!(
                f,
                "{reason}; the masters and batches after it were not started, the nodes of the batches before are \
                 schedulable (`upgrade resume --inventory ...`, then re-run: it resumes from the journal)"
            ),
            StopReason::RolledBack { reason } => write!(f, "blue-green: {reason}; the run did not finish"),
            StopReason::Halted(halt) => write!(f, "{halt}"),
            StopReason::HaltedBatches { halt, blue: false } => {
                write!(f, "{halt}; nodes not yet started were left alone")
            }
            StopReason::HaltedBatches { halt, blue: true } => {
                write!(f, "{halt}; blue nodes not yet started were left alone")
            }
            StopReason::SwitchOver { host, step, reason } => write!(
                f,
                "blue-green switch-over failed on {host} at {step}: {reason}; run `upgrade --rollback-blue-green` to \
                 switch back"
            ),
            StopReason::GreenNotReady { batch: 0, reason } => write!(
                f,
                "blue-green: {reason}; nothing was switched over (no blue node cordoned); make the green nodes Ready \
                 and re-run"
            ),
            StopReason::GreenNotReady { batch, reason } => write!(
                f,
                "blue-green: {reason}; batch {batch} and the later ones were not evacuated; make the green nodes \
                 Ready and schedulable and re-run, or `upgrade --rollback-blue-green` to switch back"
            ),
            StopReason::BetweenHops { halt, next, target } => write!(
                f,
                "{halt} between two hops: the hop to {next} and the later ones were not started; re-run the same \
                 command to continue the update path to {target}"
            ),
            StopReason::JournalLastEntry(failure) => {
                write!(f, "the journal's last entry could not be written ({failure})")
            }
        }
    }
}

impl Serialize for StopReason {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// What the run did, said once at the end: what was upgraded, skipped, failed, never started, and what is left.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Summary {
    pub target: String,
    pub hosts: Vec<HostReport>,
    /// Why the run stopped early, if it did (a failed master, the failure threshold, a signal, a preflight check).
    pub stopped: Option<StopReason>,
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
    pub resumed: Option<Resume>,
    /// The state directory could not be written (journal or host logs): the journal may be incomplete, so the run
    /// is never a success (exit 1, also when it was interrupted too).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state_error: Option<String>,
    /// What the flavour does not move and the operator does (OpenShift: the router, the registry, the consoles,
    /// the node sync DaemonSet), with the image each runs at the end.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub left_to_operator: Vec<LeftToOperator>,
    /// Why the run stopped driving the cluster: its cluster lock was not renewed in time or another controller took
    /// it. Never a success (exit 1).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cluster_lock_lost: Option<String>,
    /// `upgrade_change_id`, the change ticket the run was made under (absent when not set).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub change_id: Option<String>,
    /// The minors the gate on removed APIs and flags let the run cross on the operator's acknowledgement
    /// (`upgrade_acknowledge_api_removals`), each with what had been found: `1.25: policy/v1beta1 ... (metrics)`.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub api_removals_acknowledged: Vec<String>,
}

/// A cluster workload the upgrade does not move, as verify found it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LeftToOperator {
    /// `dc/router`, `deployment/webconsole`, ...
    pub workload: String,
    pub namespace: String,
    pub image: String,
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
            left_to_operator: Vec::new(),
            cluster_read_error: None,
            interrupted: false,
            resumed: None,
            state_error: None,
            cluster_lock_lost: None,
            change_id: None,
            api_removals_acknowledged: Vec::new(),
        }
    }

    pub fn failed(&self) -> bool {
        self.stopped.is_some()
            || self.state_error.is_some()
            || self.hosts.iter().any(|h| h.outcome.is_failure() || h.outcome.is_passed_over())
    }

    /// The process exit code the summary calls for. A state directory that could not be written is never a
    /// success, an interrupted run included: its journal may be incomplete.
    pub fn exit_code(&self) -> ExitCode {
        if let Some(code) = self.stopped.as_ref().and_then(StopReason::exit_code) {
            code
        } else if self.state_error.is_some() || self.cluster_lock_lost.is_some() {
            ExitCode::Failed
        } else if self.interrupted {
            ExitCode::Interrupted
        } else if self.failed() {
            ExitCode::Failed
        } else {
            ExitCode::Success
        }
    }
}

/// What a run takes over from earlier, unfinished ones (from the journal, checked against the cluster).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Resume {
    /// Hosts an earlier run upgraded, skipped now (they run the target).
    pub done_earlier: Vec<String>,
    /// Hosts in flight when an earlier run stopped: their sequence starts again.
    pub in_flight_restarted: Vec<String>,
    /// Hosts that failed in an earlier run: tried again.
    pub failed_retried: Vec<String>,
    /// Nodes found cordoned by an earlier run of ours.
    pub cordoned_by_earlier_run: Vec<String>,
}

impl Resume {
    pub fn is_empty(&self) -> bool {
        self.done_earlier.is_empty()
            && self.in_flight_restarted.is_empty()
            && self.failed_retried.is_empty()
            && self.cordoned_by_earlier_run.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_match_the_wire() {
        for step in Step::ALL {
            assert_eq!(Step::from_name(step.name()), Some(step));
        }
        for phase in Phase::ALL {
            assert_eq!(Phase::from_name(phase.name()), Some(phase));
            assert_eq!(serde_json::to_value(phase).unwrap(), serde_json::json!(phase.name()));
        }
        assert_eq!(serde_json::to_value(Phase::ClusterPreHook).unwrap(), "cluster-pre-hook");
        // The summary's failed step is the variant in kebab case, events say the step's name: both are on the wire.
        assert_eq!(serde_json::to_value(Step::Backup).unwrap(), "backup");
        assert_eq!(Step::Backup.name(), "etcd-backup");
    }

    #[test]
    fn one_exit_code_map() {
        let codes: Vec<i32> =
            [ExitCode::Success, ExitCode::Failed, ExitCode::BadInput, ExitCode::Interrupted].map(ExitCode::code).into();
        assert_eq!(codes, [0, 1, 2, 130]);
        let mut summary = Summary::empty("v1.29.1".into());
        assert_eq!(summary.exit_code(), ExitCode::Success);
        summary.interrupted = true;
        assert_eq!(summary.exit_code(), ExitCode::Interrupted);
        summary.state_error = Some("cannot write the journal".into());
        assert_eq!(summary.exit_code(), ExitCode::Failed, "a state write failure wins over an interrupt");
        summary.stopped = Some(StopReason::Preflight { message: "bad".into(), exit_code: ExitCode::BadInput });
        assert_eq!(summary.exit_code(), ExitCode::BadInput);
        assert_eq!(summary.stopped.as_ref().unwrap().to_string(), "preflight: bad");
    }

    #[test]
    fn a_preflight_stop_says_preflight_once() {
        let stop = |message: &str| StopReason::Preflight { message: message.into(), exit_code: ExitCode::Failed };
        assert_eq!(stop("preflight: etcdctl does not run on m1").to_string(), "preflight: etcdctl does not run on m1");
        assert_eq!(stop("the window is closed").to_string(), "preflight: the window is closed");
    }
}
