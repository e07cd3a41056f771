//! What every phase of one upgrade run shares: the plan, the hosts' variables, the task engine and its connections,
//! the journal, the stop signal; and the one way a phase runs a step on a host: a task file through the engine.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Map, Value};

use std::future::Future;

use super::batches::{StopHandle, StopSignal};
use super::cluster_calls::ClusterCalls;
use super::fence::Fence;
pub(crate) use super::recorder::{Recorder, WriteFailures};
pub(crate) use super::step_runner::{StepFacts, StepFailure, StepRunner};
use crate::cluster::ClusterNode;
use crate::events::{Event, SharedSink};
use crate::inventory::{self, Inventory};
use crate::journal::{History, HostRecord, Journal, JournalEntry};
use crate::plan::Plan;
use crate::settings::{HookPoint, TargetVersion};
use crate::tasks::connect::ConnectionPool;
use crate::tasks::engine::EngineOptions;
use crate::tasks::host_vars::HostFacts;
use crate::time_format::utc_timestamp;
use crate::vocabulary::{Halt, HostOutcome, HostReport, Phase, Step};

pub(crate) struct UpgradeRun {
    pub inventory: Arc<Inventory>,
    pub plan: Plan,
    pub target: TargetVersion,
    /// The master that runs cluster commands (`delegate_to`).
    pub first_master: String,
    pub stop: StopSignal,
    pub history: History,
    /// One timestamp for the whole run (etcd backup directories).
    pub run_timestamp: String,
    pub options: RunOptions,
    /// Events and journal entries: how the run is told and recorded.
    pub recorder: Recorder,
    /// Runs task files on the hosts as steps.
    pub steps: StepRunner,
    /// The nodes as the cluster reported them in preflight, by node name.
    pub cluster_before: Mutex<Arc<HashMap<String, ClusterNode>>>,
    /// What each probed host had installed in preflight (`upgrade_host_version_command`), by inventory name.
    pub host_versions: Mutex<HashMap<String, String>>,
    /// A SIGINT or SIGTERM arrived (a stop for a state directory that cannot be written is not an interrupt).
    interrupted: AtomicBool,
    /// The cluster-wide lock this run holds, and the task that renews it and keeps its fence (cluster_lock.rs).
    pub cluster_lock: Mutex<Option<(Arc<super::cluster_lock::Held>, tokio::task::JoinHandle<()>)>>,
    /// The progress the cluster lock carries for `upgrade status` (lock_progress.rs).
    pub lock_progress: Mutex<super::lock_progress::Tracker>,
    /// Set when the run can no longer vouch for its cluster lock: it starts nothing more (cluster_lock.rs).
    pub fence: super::fence::Fence,
    /// kured's reboot lock, when this run holds it (kured_lock.rs).
    pub kured_lock: super::kured_lock::Slot,
    /// The one reader of the cluster for nodes waiting to be Ready (poller.rs).
    pub poller: super::poller::NodePoller,
    /// The validation between batches and between masters: the baseline and the workloads drained so far.
    pub validation: super::validation::Validation,
    /// What the gate on removed APIs let through on an acknowledgement, for the summary (api_removals.rs).
    pub api_removals_acknowledged: Mutex<Vec<String>>,
    /// A hop of an update path: the path's final target, through which the gate on removed APIs weighs the minors
    /// still to cross before this hop changes anything (api_removals.rs).
    pub api_removals_through: Mutex<Option<TargetVersion>>,
    /// The cluster's image repository as preflight read it for the masters' image pulls (prefetch.rs).
    pub image_repository: Mutex<Option<String>>,
    /// The drain blockers said so far, by node (preflight/drain_blockers.rs): a batch says only what changed.
    pub drain_blockers_said: Mutex<BTreeMap<String, Vec<crate::drain_blockers::DrainBlocker>>>,
    /// The batches' pace, for the maintenance window's prediction (maintenance.rs).
    pub pace: super::pace::Pace,
}

/// Settings of the run that are not in the plan.
#[derive(Debug, Clone, Default)]
pub(crate) struct RunOptions {
    pub allow_skip_minor: bool,
    /// `--ignore-maintenance-window`, `--wait-for-window` (maintenance.rs).
    pub window: WindowOverride,
    pub connect_timeout: Duration,
    /// The state directory, as the cluster lock names it.
    pub state_dir: PathBuf,
}

/// What the command line says of the maintenance window.
#[derive(Debug, Clone, Copy, Default)]
pub struct WindowOverride {
    pub ignore: bool,
    pub wait: bool,
}

/// Parts of the run context built by the executor before any phase starts.
pub(crate) struct RunParts {
    pub inventory: Arc<Inventory>,
    pub plan: Plan,
    pub target: TargetVersion,
    pub extra: inventory::Vars,
    pub pool: Arc<ConnectionPool>,
    pub engine_options: EngineOptions,
    pub sink: SharedSink,
    pub playbooks: PathBuf,
    pub journal: Journal,
    pub history: History,
    pub stop: StopSignal,
    pub options: RunOptions,
    pub write_failures: Arc<WriteFailures>,
    /// Masks `upgrade_secret_vars` values; events are masked by the sink already, journal entries here.
    pub redactor: Arc<crate::redact::Redactor>,
}

/// How long a batch waits at most for its progress record to be written to the cluster lock.
const PROGRESS_WRITE_LIMIT: Duration = Duration::from_secs(10);

impl UpgradeRun {
    pub(crate) fn new(parts: RunParts) -> UpgradeRun {
        let first_master = parts.plan.masters.first().cloned().unwrap_or_default();
        UpgradeRun {
            first_master,
            run_timestamp: crate::time_format::compact_timestamp(std::time::SystemTime::now()),
            steps: StepRunner::new(&parts.inventory, &parts.extra, parts.pool, parts.engine_options, parts.playbooks),
            recorder: Recorder::new(parts.sink, parts.journal, parts.redactor, parts.write_failures),
            cluster_before: Mutex::default(),
            interrupted: AtomicBool::new(false),
            cluster_lock: Mutex::new(None),
            lock_progress: Mutex::new(
                super::lock_progress::Tracker::new(&parts.plan).with_eta(&parts.plan, &parts.options.state_dir),
            ),
            fence: super::fence::Fence::default(),
            kured_lock: std::sync::Mutex::new(None),
            poller: super::poller::NodePoller::default(),
            validation: super::validation::Validation::default(),
            api_removals_acknowledged: Mutex::default(),
            api_removals_through: Mutex::default(),
            image_repository: Mutex::new(None),
            drain_blockers_said: Mutex::default(),
            pace: super::pace::Pace::default(),
            host_versions: Mutex::new(HashMap::new()),
            inventory: parts.inventory,
            plan: parts.plan,
            target: parts.target,
            stop: parts.stop,
            history: parts.history,
            options: parts.options,
        }
    }

    pub(crate) fn event(&self, event: Event) {
        self.follow_progress(&event);
        self.recorder.event(event);
    }

    /// The run ended with `result`: the record the cluster lock's release carries says so.
    pub(crate) fn finish_progress(&self, result: &str) {
        let Ok(mut tracker) = self.lock_progress.lock() else { return };
        tracker.finish(result);
        let held = self.cluster_lock.lock().ok().and_then(|slot| slot.as_ref().map(|(held, _)| held.clone()));
        if let Some(held) = held {
            held.set_progress(tracker.json());
        }
    }

    /// Keeps the progress record the cluster lock carries (written at each phase and batch: `write_progress`).
    fn follow_progress(&self, event: &Event) {
        let Ok(mut tracker) = self.lock_progress.lock() else { return };
        // Most events (tasks, steps) change nothing of it: the record is made again only when it changed.
        if !tracker.event(event) {
            return;
        }
        let held = self.cluster_lock.lock().ok().and_then(|slot| slot.as_ref().map(|(held, _)| held.clone()));
        if let Some(held) = held {
            held.set_progress(tracker.json());
        }
    }

    /// The cluster-wide lock this run holds, once taken in preflight.
    pub(crate) fn held_cluster_lock(&self) -> Option<Arc<super::cluster_lock::Held>> {
        self.cluster_lock.lock().ok().and_then(|slot| slot.as_ref().map(|(held, _)| held.clone()))
    }

    /// Writes the progress record to the cluster lock now (a phase or batch starts), so `upgrade status` is never
    /// more than a batch behind; a write that does not answer within [`PROGRESS_WRITE_LIMIT`] is left to the next
    /// renewal (the fence counts from the last write that succeeded, whatever happens here).
    pub(crate) fn write_progress(&self) -> impl std::future::Future<Output = ()> + '_ {
        let held = self.cluster_lock.lock().ok().and_then(|slot| slot.as_ref().map(|(held, _)| held.clone()));
        async move {
            if let Some(held) = held {
                let _ = tokio::time::timeout(PROGRESS_WRITE_LIMIT, super::cluster_lock::renew(self, &held)).await;
            }
        }
    }

    pub(crate) fn notice(&self, host: Option<&str>, message: impl Into<String>) {
        self.recorder.notice(host, message);
    }

    /// Appends to the journal: see `Recorder::record`.
    pub(crate) fn record(&self, entry: JournalEntry) -> bool {
        self.recorder.record(entry)
    }

    /// Appends to the journal, syncing with the other hosts in flight: see `Recorder::record_durably`.
    pub(crate) async fn record_durably(&self, entry: JournalEntry) -> bool {
        self.recorder.record_durably(entry).await
    }

    /// A signal asked the run to stop.
    pub(crate) fn mark_interrupted(&self) {
        self.interrupted.store(true, Ordering::SeqCst);
    }

    pub(crate) fn was_interrupted(&self) -> bool {
        self.interrupted.load(Ordering::SeqCst)
    }

    /// Why the run stops starting hosts, for the hosts it does not start.
    pub(crate) fn stop_reason(&self) -> String {
        self.halt().to_string()
    }

    /// Why the run stops starting hosts, as a value: a lost cluster lock is said first (another controller may be
    /// driving the cluster), then a failed write, then an interrupt.
    pub(crate) fn halt(&self) -> Halt {
        if let Some(reason) = self.fence.reason() {
            return Halt::ClusterLock(reason);
        }
        match self.recorder.write_failures.reason() {
            Some(reason) => Halt::StateNotWritable(reason.clone()),
            None => Halt::Interrupted,
        }
    }

    /// `upgrade_change_id` of the first master: the change ticket the run is made under, for audit (the cluster
    /// lock, the summary). Empty when not set.
    pub(crate) fn change_id(&self) -> String {
        self.render_for(&self.first_master, "{{ upgrade_change_id | default('') }}").trim().to_string()
    }

    pub(crate) fn run_id(&self) -> String {
        self.recorder.run_id().to_string()
    }

    /// A second interrupt: see `Recorder::end_now`.
    pub(crate) fn end_now(&self, message: &str) {
        self.recorder.end_now(message);
    }

    /// A batch starts: its hosts share `run_once` results from now on.
    pub(crate) fn batch_started(&self, hosts: &[String]) {
        self.steps.batch_started(hosts);
    }

    /// How many hosts a step that goes over every host runs on at once (`--forks`, `upgrade_forks`).
    pub(crate) fn forks(&self) -> usize {
        self.plan.settings.forks.value.get()
    }

    pub(crate) fn pool(&self) -> &ConnectionPool {
        self.steps.pool()
    }

    /// The Kubernetes node name of an inventory host: see `StepRunner::node_name`.
    pub(crate) fn node_name(&self, host: &str) -> String {
        self.steps.node_name(host)
    }

    /// A host variable rendered as text for the operator (e.g. the kubectl command in a fix hint).
    /// With what the run decides for the host's steps (`node_name`, `upgrade_target_version`, ...): a setting that
    /// refers to them (`upgrade_node_upgrade_command: "... {{ node_name }}"`) reads as its steps will read it.
    pub(crate) fn render_for(&self, host: &str, template: &str) -> String {
        self.steps.render_for_with(host, template, self.decided_vars(host))
    }

    /// The path of a built-in step file, as the run's flavour carries it out (`openshift/drain.yml` for `drain.yml`).
    pub(crate) fn playbook(&self, name: &str) -> PathBuf {
        self.steps.playbook(self.plan.flavor.flavor, name)
    }

    /// Whether "at the target" is decided for this host from what it has installed (`upgrade_host_version_command`,
    /// the openshift flavour's default) rather than from the kubelet version the cluster reports.
    pub(crate) fn probes_host_version(&self, host: &str) -> bool {
        self.plan.flavor.flavor.probes_installed_version_by_default()
            || self
                .steps
                .own(host, "upgrade_host_version_command")
                .as_ref()
                .and_then(Value::as_str)
                .is_some_and(|c| !c.trim().is_empty())
    }

    /// The host's version as preflight read it: what it has installed when probed, else its node's kubelet version.
    pub(crate) fn version_before(&self, host: &str) -> Option<String> {
        if let Some(v) = self.host_versions.lock().ok().and_then(|m| m.get(host).cloned()) {
            return Some(v);
        }
        let node = self.node_name(host);
        self.cluster_before.lock().ok().and_then(|c| c.get(&node).map(|n| n.kubelet_version.clone()))
    }

    /// A setting read from the host's variables as a boolean (Ansible's truth table), with a default.
    pub(crate) fn host_flag(&self, host: &str, name: &str, default: bool) -> bool {
        self.steps.host_flag(host, name, default)
    }

    /// A setting read from the host's variables as a list of names: a YAML list, or comma-separated text (INI).
    pub(crate) fn host_list(&self, host: &str, name: &str) -> Vec<String> {
        self.steps.host_list(host, name)
    }

    /// The variables every step of a host sees besides its own: who it is in the cluster and what the run does.
    /// What the run decides for every step of the host, as its tasks see it: the inventory's own `node_name` wins.
    fn decided_vars(&self, host: &str) -> Map<String, Value> {
        let mut vars = self.step_vars(host);
        if self.steps.own(host, "node_name").is_some() {
            vars.remove("node_name");
        }
        vars
    }

    fn step_vars(&self, host: &str) -> Map<String, Value> {
        let mut vars = Map::new();
        vars.insert("node_name".into(), Value::String(self.node_name(host)));
        vars.insert("upgrade_target_version".into(), Value::String(self.target.to_string()));
        vars.insert("upgrade_first_master".into(), Value::String(self.first_master.clone()));
        vars.insert("upgrade_is_first_master".into(), Value::Bool(host == self.first_master));
        // The groups the plan took the masters and etcd hosts from (kubespray's names, or the settings').
        vars.insert("upgrade_masters_group".into(), Value::String(self.plan.groups.masters.name.clone()));
        vars.insert("upgrade_etcd_group".into(), Value::String(self.plan.groups.etcd.name.clone()));
        vars.insert(
            "upgrade_drain_timeout_seconds".into(),
            Value::from(self.plan.settings.drain_timeout.value.seconds()),
        );
        vars.insert("upgrade_etcd_backup_timestamp".into(), Value::String(self.run_timestamp.clone()));
        vars
    }

    /// Runs one task file on a host as one step of its sequence. `more` adds or overrides step variables;
    /// `timeout` bounds every command of the step (on the host too). Returns the facts the tasks left.
    pub(crate) async fn run_step(
        &self,
        phase: Phase,
        host: &str,
        step: Step,
        file: &Path,
        more: &[(&str, Value)],
        timeout: Option<Duration>,
    ) -> Result<StepFacts, StepFailure> {
        if self.recorder.has_ended() {
            return Err(StepFailure::interrupted(step));
        }
        let started = Instant::now();
        self.event(Event::StepStarted { phase, host: host.into(), step });
        let result = self.run_step_inner(host, step, file, more, timeout).await;
        self.step_finished(phase, host, step, started, result.as_ref().err()).await;
        result
    }

    /// Runs one task file on a host again and again, as one step, until `check` accepts the facts it leaves, for at
    /// most `timeout` (`delay` between attempts). `check` says what is still wrong; the last of that is the failure.
    /// A failing run of the file counts as "not yet" (the API server may be restarting).
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn poll_step<T>(
        &self,
        phase: Phase,
        host: &str,
        step: Step,
        file: &Path,
        more: &[(&str, Value)],
        timeout: Duration,
        delay: Duration,
        mut check: impl FnMut(&HostFacts) -> Result<T, String>,
    ) -> Result<T, StepFailure> {
        let started = Instant::now();
        self.event(Event::StepStarted { phase, host: host.into(), step });
        let result = loop {
            let why = match self.run_step_inner(host, step, file, more, None).await {
                Ok(facts) => match check(&facts) {
                    Ok(value) => break Ok(value),
                    Err(why) => why,
                },
                Err(f) if f.unreachable => break Err(f),
                Err(f) => f.reason,
            };
            if started.elapsed() >= timeout || self.stop.is_aborting() {
                let reason = format!("{why} (still so after {}s)", started.elapsed().as_secs());
                break Err(StepFailure { timed_out: true, ..StepFailure::new(step, reason) });
            }
            tokio::time::sleep(delay).await;
        };
        self.step_finished(phase, host, step, started, result.as_ref().err()).await;
        result
    }

    /// Says a step ended (its event) and, when it succeeded, records it in the journal.
    async fn step_finished(
        &self,
        phase: Phase,
        host: &str,
        step: Step,
        started: Instant,
        failure: Option<&StepFailure>,
    ) {
        self.event(Event::StepFinished {
            phase,
            host: host.into(),
            step,
            ok: failure.is_none(),
            duration: started.elapsed(),
            error: failure.map(|f| f.reason.clone()),
        });
        if failure.is_none() {
            self.record_step_done(phase, host, step).await;
        }
    }

    /// Runs a task file on a host without step events or journal entries: one attempt of a step the caller
    /// reports itself (a poll), or a call outside any host's sequence (the lock's renewals).
    pub(crate) async fn run_step_quietly(
        &self,
        host: &str,
        step: Step,
        file: &Path,
        more: &[(&str, Value)],
    ) -> Result<StepFacts, StepFailure> {
        self.run_step_inner(host, step, file, more, None).await
    }

    /// A setting read from the host's variables as whole seconds (a number or numeric text), with a default.
    pub(crate) fn host_seconds(&self, host: &str, name: &str, default: u64) -> u64 {
        self.steps.host_seconds(host, name, default)
    }

    /// The step variables of the run (`step_vars`) plus `more`, then the task file through the engine.
    async fn run_step_inner(
        &self,
        host: &str,
        step: Step,
        file: &Path,
        more: &[(&str, Value)],
        timeout: Option<Duration>,
    ) -> Result<StepFacts, StepFailure> {
        let mut step_vars = self.decided_vars(host);
        for (k, v) in more {
            step_vars.insert((*k).to_string(), v.clone());
        }
        self.steps.run_file(host, step, file, step_vars, timeout, self.recorder.sink()).await
    }

    /// Whether the host has a hook at `point`.
    pub(crate) fn has_hook(&self, host: &str, point: HookPoint) -> bool {
        self.plan.hooks.get(host).is_some_and(|h| h.contains_key(&point))
    }

    /// Records that a step starts (the upgrade step: see `JournalEntry::StepStarted`).
    pub(crate) async fn record_step_started(&self, phase: Phase, host: &str, step: Step) {
        let (run, time, phase, host, step) = self.step_fields(phase, host, step);
        let _ = self.record_durably(JournalEntry::StepStarted { run, time, phase, host, step }).await;
    }

    /// Records a step as done (run now, or done by an earlier run).
    pub(crate) async fn record_step_done(&self, phase: Phase, host: &str, step: Step) {
        let (run, time, phase, host, step) = self.step_fields(phase, host, step);
        let _ = self.record_durably(JournalEntry::StepDone { run, time, phase, host, step }).await;
    }

    fn step_fields(&self, phase: Phase, host: &str, step: Step) -> (String, String, Phase, String, Step) {
        let time = utc_timestamp(std::time::SystemTime::now());
        (self.run_id(), time, phase, host.into(), step)
    }

    /// Runs the host's hook at `point`, if it has one.
    pub(crate) async fn run_hook(
        &self,
        phase: Phase,
        host: &str,
        point: HookPoint,
        step: Step,
    ) -> Result<(), StepFailure> {
        let Some(hook) = self.plan.hooks.get(host).and_then(|h| h.get(&point)).cloned() else { return Ok(()) };
        self.run_step(phase, host, step, &hook.path, &[], None).await.map(|_| ())
    }

    /// Tells the reporters and the journal that a host's sequence starts. False when the journal could not say so:
    /// then the host must not start (a re-run could not tell what this run did to it).
    pub(crate) async fn host_started(&self, phase: Phase, host: &str, was_cordoned: bool) -> bool {
        self.event(Event::HostStarted { phase, host: host.into() });
        self.record_durably(JournalEntry::HostStarted {
            run: self.run_id(),
            time: utc_timestamp(std::time::SystemTime::now()),
            phase,
            host: host.into(),
            was_cordoned,
        })
        .await
    }

    /// Tells the reporters and the journal how a host's sequence ended, and returns its report.
    pub(crate) async fn host_completed(
        &self,
        phase: Phase,
        host: &str,
        outcome: HostOutcome,
        started: Instant,
    ) -> HostReport {
        self.host_completed_with_window(phase, host, outcome, started, None).await
    }

    /// `host_completed` of a node upgraded in place, with its cordoned window (sequence.rs measures it).
    pub(crate) async fn host_completed_with_window(
        &self,
        phase: Phase,
        host: &str,
        outcome: HostOutcome,
        started: Instant,
        window: Option<crate::vocabulary::CordonedWindow>,
    ) -> HostReport {
        let node = self.node_name(host);
        let report = HostReport {
            phase,
            host: host.into(),
            node: (node != host).then_some(node),
            outcome,
            duration: started.elapsed(),
            window,
        };
        if report.outcome.is_failure() {
            self.validation.excuse(&self.node_name(host));
        }
        let (record, detail) = match &report.outcome {
            HostOutcome::Upgraded { .. } => (Some(HostRecord::Upgraded), String::new()),
            HostOutcome::Skipped { reason } => (Some(HostRecord::Skipped), reason.clone()),
            HostOutcome::Failed { step, reason, .. } => (Some(HostRecord::Failed), format!("{step}: {reason}")),
            HostOutcome::NotStarted { .. } => (None, String::new()),
            // Not upgraded: a re-run tries it again, as it does a failed host.
            HostOutcome::PassedOver { behavior, blocked_by, .. } => {
                (Some(HostRecord::Failed), format!("drain: passed over ({behavior}): {}", blocked_by.join("; ")))
            }
        };
        if let Some(outcome) = record {
            let _ = self
                .record_durably(JournalEntry::HostFinished {
                    run: self.run_id(),
                    time: utc_timestamp(std::time::SystemTime::now()),
                    phase,
                    host: host.into(),
                    outcome,
                    detail,
                })
                .await;
        }
        self.event(Event::HostFinished { report: report.clone() });
        report
    }

    /// Writes the cluster lock's lease with `extension` more than its TTL (zero: back to the TTL), when the run holds
    /// it: see `cluster_lock::extend`.
    pub(crate) async fn extend_cluster_lock(&self, extension: Duration) {
        let held = self.cluster_lock.lock().ok().and_then(|slot| slot.as_ref().map(|(h, _)| h.clone()));
        if let Some(held) = held {
            super::cluster_lock::extend(self, &held, extension).await;
        }
    }

    pub(crate) async fn close(&self) {
        // Commands cut at the end of the grace period are killed on their hosts before the masters close.
        crate::connection::ssh::finish_pending_kills(Duration::from_secs(10)).await;
        self.steps.pool().close_all().await;
    }
}

/// The few things the cluster lock, kured's lock and the poller take of the run: see `ClusterCalls`.
impl ClusterCalls for UpgradeRun {
    fn first_master(&self) -> &str {
        &self.first_master
    }

    fn run_id(&self) -> String {
        UpgradeRun::run_id(self)
    }

    fn target(&self) -> &TargetVersion {
        &self.target
    }

    fn playbook(&self, name: &str) -> PathBuf {
        UpgradeRun::playbook(self, name)
    }

    fn render_for(&self, host: &str, template: &str) -> String {
        UpgradeRun::render_for(self, host, template)
    }

    fn host_flag(&self, host: &str, name: &str, default: bool) -> bool {
        UpgradeRun::host_flag(self, host, name, default)
    }

    fn host_seconds(&self, host: &str, name: &str, default: u64) -> u64 {
        UpgradeRun::host_seconds(self, host, name, default)
    }

    fn node_name(&self, host: &str) -> String {
        UpgradeRun::node_name(self, host)
    }

    fn probes_host_version(&self, host: &str) -> bool {
        UpgradeRun::probes_host_version(self, host)
    }

    fn notice(&self, host: Option<&str>, message: String) {
        UpgradeRun::notice(self, host, message)
    }

    fn fence(&self) -> &Fence {
        &self.fence
    }

    fn stop(&self) -> &StopSignal {
        &self.stop
    }

    fn stop_handle(&self) -> &StopHandle {
        self.recorder.write_failures.stop_handle()
    }

    fn forget(&self, host: &str, name: &str) {
        self.steps.forget(host, name)
    }

    fn run_step(
        &self,
        phase: Phase,
        host: &str,
        step: Step,
        file: &Path,
        more: &[(&str, Value)],
        timeout: Option<Duration>,
    ) -> impl Future<Output = Result<StepFacts, StepFailure>> + Send {
        UpgradeRun::run_step(self, phase, host, step, file, more, timeout)
    }

    fn run_step_quietly(
        &self,
        host: &str,
        step: Step,
        file: &Path,
        more: &[(&str, Value)],
    ) -> impl Future<Output = Result<StepFacts, StepFailure>> + Send {
        UpgradeRun::run_step_quietly(self, host, step, file, more)
    }
}
