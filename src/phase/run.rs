//! What every phase of one upgrade run shares: the plan, the hosts' variables, the task engine and its connections,
//! the journal, the stop signal; and the one way a phase runs a step on a host: a task file through the engine.

use std::collections::BTreeSet;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock};
use std::time::{Duration, Instant};

use serde_json::{Map, Value};

use super::batches::{StopHandle, StopSignal};
use super::{HostOutcome, HostReport, Step};
use crate::cluster::ClusterNode;
use crate::events::{Event, EventSink, SharedSink, TaskStatus};
use crate::inventory::{self, Inventory, vars_to_json};
use crate::journal::{History, HostRecord, Journal, JournalEntry, utc_timestamp};
use crate::plan::{Phase, Plan};
use crate::settings::{HookPoint, TargetVersion};
use crate::tasks::Templar;
use crate::tasks::connect::ConnectionPool;
use crate::tasks::engine::{Engine, EngineOptions, RunOnce};
use crate::tasks::host_vars::HostVarsTable;
use crate::tasks::model::{Task, load_task_file};

/// Where a host's Kubernetes node name comes from, first found wins (openshift-ansible's names as aliases).
pub const NODE_NAME_VARIABLES: [&str; 3] = ["node_name", "openshift_kubelet_name_override", "openshift_hostname"];

/// A step that did not succeed, and why, in words for the operator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepFailure {
    pub step: Step,
    pub reason: String,
    pub unreachable: bool,
    /// The step did not run (or was cut short) because the run was interrupted and its grace period ran out.
    pub interrupted: bool,
}

impl StepFailure {
    /// The grace period after an interrupt ran out before (or, for a drain, during) `step`.
    pub fn interrupted(step: Step) -> StepFailure {
        StepFailure {
            step,
            reason: "interrupted: the grace period ran out, stopped at a safe point".into(),
            unreachable: false,
            interrupted: true,
        }
    }
}

pub struct UpgradeRun {
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
    redactor: Arc<crate::redact::Redactor>,
    extra: Map<String, Value>,
    task_vars: HostVarsTable,
    templar: Arc<Templar>,
    pool: Arc<ConnectionPool>,
    engine_options: EngineOptions,
    sink: Arc<EventGate>,
    playbooks: PathBuf,
    task_files: Mutex<HashMap<PathBuf, Arc<Vec<Task>>>>,
    /// None once the run has ended at once (`end_now`): nothing is recorded after its last line.
    journal: Mutex<Option<Journal>>,
    run_id: String,
    /// `run_once` in hooks means once per batch, as in a serial play: the hosts of a batch share one coordinator.
    run_once: Mutex<HashMap<String, Arc<RunOnce>>>,
    /// The nodes as the cluster reported them in preflight, by node name.
    pub cluster_before: Mutex<HashMap<String, ClusterNode>>,
    /// What each probed host had installed in preflight (`upgrade_host_version_command`), by inventory name.
    pub host_versions: Mutex<HashMap<String, String>>,
    pub write_failures: Arc<WriteFailures>,
    /// A SIGINT or SIGTERM arrived (a stop for a state directory that cannot be written is not an interrupt).
    interrupted: AtomicBool,
    /// The cluster-wide lock this run holds, and the task that renews it (cluster_lock.rs).
    pub cluster_lock: Mutex<Option<(super::cluster_lock::Holder, tokio::task::JoinHandle<()>)>>,
    /// The one reader of the cluster for nodes waiting to be Ready (poller.rs).
    pub poller: super::poller::NodePoller,
}

/// Failures to write the state directory (the journal, the host logs): ENOSPC, EROFS, EIO. The first one stops the
/// run as a first interrupt does (no new host starts, hosts in flight finish their sequence), since whatever is done
/// without a journal entry could not be resumed correctly; the run then ends with exit 1, never as a success. Each
/// kind of file is said once, on the reporters that still work (the terminal or the JSON stream).
pub struct WriteFailures {
    /// The first failure: (what and where, why).
    first: OnceLock<(String, String)>,
    said: Mutex<BTreeSet<&'static str>>,
    stop: Arc<StopHandle>,
    say: SharedSink,
}

impl WriteFailures {
    pub fn new(stop: Arc<StopHandle>, say: SharedSink) -> WriteFailures {
        WriteFailures { first: OnceLock::new(), said: Mutex::new(BTreeSet::new()), stop, say }
    }

    /// `what` names the kind of file (`the journal`, `the host log`); `error` says why the write failed.
    pub fn failed(&self, what: &'static str, path: &Path, error: &str) {
        let text = format!("cannot write {what} {}: {error}", path.display());
        let first = self.first.set((text.clone(), error.to_string())).is_ok();
        if first {
            self.stop.stop();
        }
        let new_kind = self.said.lock().map(|mut said| said.insert(what)).unwrap_or(false);
        if new_kind {
            self.say.event(&Event::Notice {
                host: None,
                message: format!(
                    "{text}: no new host starts; hosts in flight finish their sequence; the run ends with exit 1 \
                     (free space in the state directory or make it writable, then re-run the same command)"
                ),
            });
        }
    }

    /// The first write that failed, if any: which file and why.
    pub fn failure(&self) -> Option<&String> {
        self.first.get().map(|(text, _)| text)
    }

    /// Why the first write failed (`No space left on device`).
    pub fn reason(&self) -> Option<&String> {
        self.first.get().map(|(_, reason)| reason)
    }
}

/// Settings of the run that are not in the plan.
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    pub allow_skip_minor: bool,
    pub connect_timeout: Duration,
    /// The state directory, as the cluster lock names it.
    pub state_dir: PathBuf,
}

/// Parts of the run context built by the executor before any phase starts.
pub struct RunParts {
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

impl UpgradeRun {
    pub fn new(parts: RunParts) -> UpgradeRun {
        let first_master = parts.plan.masters.first().cloned().unwrap_or_default();
        let task_vars = HostVarsTable::new(&parts.inventory, &parts.extra);
        UpgradeRun {
            first_master,
            run_timestamp: crate::journal::compact_timestamp(std::time::SystemTime::now()),
            extra: vars_to_json(&parts.extra),
            task_vars,
            templar: Arc::new(Templar::new()),
            pool: parts.pool,
            engine_options: parts.engine_options,
            sink: Arc::new(EventGate { inner: parts.sink, open: RwLock::new(true) }),
            playbooks: parts.playbooks,
            task_files: Mutex::new(HashMap::new()),
            run_id: parts.journal.run_id().to_string(),
            journal: Mutex::new(Some(parts.journal)),
            cluster_before: Mutex::new(HashMap::new()),
            write_failures: parts.write_failures,
            interrupted: AtomicBool::new(false),
            cluster_lock: Mutex::new(None),
            poller: super::poller::NodePoller::default(),
            host_versions: Mutex::new(HashMap::new()),
            run_once: Mutex::new(HashMap::new()),
            inventory: parts.inventory,
            plan: parts.plan,
            target: parts.target,
            stop: parts.stop,
            history: parts.history,
            options: parts.options,
            redactor: parts.redactor,
        }
    }

    pub fn event(&self, event: Event) {
        self.sink.event(&event);
    }

    pub fn notice(&self, host: Option<&str>, message: impl Into<String>) {
        self.event(Event::Notice { host: host.map(str::to_string), message: message.into() });
    }

    /// Appends to the journal, its secrets masked; false when it could not be written (then the run stops: see
    /// `WriteFailures`) or the run has ended (`end_now`).
    pub fn record(&self, entry: JournalEntry) -> bool {
        let entry = self.redactor.serialized(entry);
        let (result, path) = match self.journal.lock().as_deref_mut() {
            Ok(Some(journal)) => (journal.record(&entry), journal.path().to_path_buf()),
            Ok(None) | Err(_) => return false,
        };
        match result {
            Ok(()) => true,
            Err(e) => {
                self.write_failures.failed("the journal", &path, &e.message);
                false
            }
        }
    }

    /// A signal asked the run to stop.
    pub fn mark_interrupted(&self) {
        self.interrupted.store(true, Ordering::SeqCst);
    }

    pub fn was_interrupted(&self) -> bool {
        self.interrupted.load(Ordering::SeqCst)
    }

    /// Why the run stops starting hosts, for the hosts it does not start.
    pub fn stop_reason(&self) -> String {
        match self.write_failures.reason() {
            Some(reason) => format!("the state directory could not be written ({reason})"),
            None => "the run was interrupted".into(),
        }
    }

    pub fn run_id(&self) -> String {
        self.run_id.clone()
    }

    /// A second interrupt: the process exits without waiting for the hosts in flight, once the output queued so far
    /// is written (which can take seconds). The journal gets its last line and the reporters their last events now;
    /// from then on the tasks still running record nothing, say nothing and start no step, so the line that says
    /// the run ended stays the journal's last and `Exiting` the last event, and no host is touched while the output
    /// drains. Commands already running on hosts end on their own.
    pub fn end_now(&self, message: &str) {
        // Waits for events being reported now, then closes the gate to every later one.
        let Ok(mut open) = self.sink.open.write() else { return };
        self.sink.inner.event(&Event::Notice { host: None, message: message.to_string() });
        if let Ok(mut slot) = self.journal.lock() {
            if let Some(mut journal) = slot.take() {
                let entry = JournalEntry::RunFinished {
                    run: self.run_id(),
                    time: utc_timestamp(std::time::SystemTime::now()),
                    status: "interrupted".into(),
                };
                if let Err(e) = journal.record(&entry) {
                    self.write_failures.failed("the journal", journal.path(), &e.message);
                }
            }
        }
        self.sink.inner.event(&Event::Exiting);
        *open = false;
    }

    /// The run ended at once (`end_now`): nothing new starts.
    fn has_ended(&self) -> bool {
        self.journal.lock().map(|j| j.is_none()).unwrap_or(true)
    }

    /// A batch starts: its hosts share `run_once` results from now on.
    pub fn batch_started(&self, hosts: &[String]) {
        let shared = Arc::new(RunOnce::default());
        shared.set_members(hosts);
        if let Ok(mut slots) = self.run_once.lock() {
            for host in hosts {
                slots.insert(host.clone(), shared.clone());
            }
        }
    }

    pub fn pool(&self) -> &ConnectionPool {
        &self.pool
    }

    /// The Kubernetes node name of an inventory host: its `node_name` variable, else openshift-ansible's
    /// `openshift_kubelet_name_override`, else `openshift_hostname`, else its inventory name.
    pub fn node_name(&self, host: &str) -> String {
        let own = self.task_vars.own(host);
        NODE_NAME_VARIABLES
            .iter()
            .find_map(|name| own.get(*name).and_then(Value::as_str).map(str::trim).filter(|s| !s.is_empty()))
            .unwrap_or(host)
            .to_string()
    }

    /// A host variable rendered as text for the operator (e.g. the kubectl command in a fix hint).
    pub fn render_for(&self, host: &str, template: &str) -> String {
        let vars = self.task_vars.for_host(host, Map::new());
        self.templar.render_str(template, &vars).unwrap_or_else(|_| template.to_string())
    }

    /// The path of a built-in step file, as the run's flavour carries it out (`openshift/drain.yml` for `drain.yml`).
    pub fn playbook(&self, name: &str) -> PathBuf {
        self.playbooks.join(crate::playbooks::for_flavor(self.plan.flavor.flavor, name))
    }

    /// Whether "at the target" is decided for this host from what it has installed (`upgrade_host_version_command`,
    /// the openshift flavour's default) rather than from the kubelet version the cluster reports.
    pub fn probes_host_version(&self, host: &str) -> bool {
        self.plan.flavor.flavor.probes_installed_version_by_default()
            || self
                .task_vars
                .own(host)
                .get("upgrade_host_version_command")
                .and_then(Value::as_str)
                .is_some_and(|c| !c.trim().is_empty())
    }

    /// The host's version as preflight read it: what it has installed when probed, else its node's kubelet version.
    pub fn version_before(&self, host: &str) -> Option<String> {
        if let Some(v) = self.host_versions.lock().ok().and_then(|m| m.get(host).cloned()) {
            return Some(v);
        }
        let node = self.node_name(host);
        self.cluster_before.lock().ok().and_then(|c| c.get(&node).map(|n| n.kubelet_version.clone()))
    }

    /// A setting read from the host's variables as a boolean (Ansible's truth table), with a default.
    pub fn host_flag(&self, host: &str, name: &str, default: bool) -> bool {
        self.task_vars
            .own(host)
            .get(name)
            .map(|v| crate::ansible_compat::boolean(v).unwrap_or(default))
            .unwrap_or(default)
    }

    /// A setting read from the host's variables as a list of names: a YAML list, or comma-separated text (INI).
    pub fn host_list(&self, host: &str, name: &str) -> Vec<String> {
        let scalar = |v: &Value| match v {
            Value::String(s) => s.trim().to_string(),
            other => other.to_string(),
        };
        match self.task_vars.own(host).get(name) {
            Some(Value::Array(items)) => items.iter().map(scalar).filter(|s| !s.is_empty()).collect(),
            Some(Value::String(text)) => {
                let text = text.trim().trim_start_matches('[').trim_end_matches(']');
                text.split(',')
                    .map(|s| s.trim().trim_matches(['"', '\'']).to_string())
                    .filter(|s| !s.is_empty())
                    .collect()
            }
            Some(Value::Null) | None => Vec::new(),
            Some(other) => vec![scalar(other)],
        }
    }

    fn load(&self, file: &Path) -> Result<Arc<Vec<Task>>, String> {
        if let Some(tasks) = self.task_files.lock().ok().and_then(|m| m.get(file).cloned()) {
            return Ok(tasks);
        }
        let tasks = Arc::new(load_task_file(file).map_err(|e| e.to_string())?);
        if let Ok(mut files) = self.task_files.lock() {
            files.insert(file.to_path_buf(), tasks.clone());
        }
        Ok(tasks)
    }

    /// The variables every step of a host sees besides its own: who it is in the cluster and what the run does.
    fn step_vars(&self, host: &str) -> Map<String, Value> {
        let mut vars = Map::new();
        vars.insert("node_name".into(), Value::String(self.node_name(host)));
        vars.insert("upgrade_target_version".into(), Value::String(self.target.to_string()));
        vars.insert("upgrade_first_master".into(), Value::String(self.first_master.clone()));
        vars.insert("upgrade_is_first_master".into(), Value::Bool(host == self.first_master));
        vars.insert(
            "upgrade_drain_timeout_seconds".into(),
            Value::from(self.plan.settings.drain_timeout.value.seconds()),
        );
        vars.insert("upgrade_etcd_backup_timestamp".into(), Value::String(self.run_timestamp.clone()));
        vars
    }

    /// Runs one task file on a host as one step of its sequence. `more` adds or overrides step variables;
    /// `timeout` bounds every command of the step (on the host too). Returns the facts the tasks left.
    pub async fn run_step(
        &self,
        phase: impl AsRef<str>,
        host: &str,
        step: Step,
        file: &Path,
        more: &[(&str, Value)],
        timeout: Option<Duration>,
    ) -> Result<Map<String, Value>, StepFailure> {
        if self.has_ended() {
            return Err(StepFailure::interrupted(step));
        }
        let started = Instant::now();
        let phase = phase.as_ref();
        self.event(Event::StepStarted { phase: phase.into(), host: host.into(), step });
        let result = self.run_step_inner(host, step, file, more, timeout).await;
        self.step_finished(phase, host, step, started, result.as_ref().err());
        result
    }

    /// Runs one task file on a host again and again, as one step, until `check` accepts the facts it leaves, for at
    /// most `timeout` (`delay` between attempts). `check` says what is still wrong; the last of that is the failure.
    /// A failing run of the file counts as "not yet" (the API server may be restarting).
    #[allow(clippy::too_many_arguments)]
    pub async fn poll_step<T>(
        &self,
        phase: impl AsRef<str>,
        host: &str,
        step: Step,
        file: &Path,
        more: &[(&str, Value)],
        timeout: Duration,
        delay: Duration,
        mut check: impl FnMut(&Map<String, Value>) -> Result<T, String>,
    ) -> Result<T, StepFailure> {
        let phase = phase.as_ref();
        let started = Instant::now();
        self.event(Event::StepStarted { phase: phase.into(), host: host.into(), step });
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
                break Err(StepFailure { step, reason, unreachable: false, interrupted: false });
            }
            tokio::time::sleep(delay).await;
        };
        self.step_finished(phase, host, step, started, result.as_ref().err());
        result
    }

    /// Says a step ended (its event) and, when it succeeded, records it in the journal.
    fn step_finished(&self, phase: &str, host: &str, step: Step, started: Instant, failure: Option<&StepFailure>) {
        self.event(Event::StepFinished {
            phase: phase.into(),
            host: host.into(),
            step,
            ok: failure.is_none(),
            duration: started.elapsed(),
            error: failure.map(|f| f.reason.clone()),
        });
        if failure.is_none() {
            self.record_step_done(phase, host, step);
        }
    }

    /// Runs a task file on a host without step events or journal entries: one attempt of a step the caller
    /// reports itself (a poll), or a call outside any host's sequence (the lock's renewals).
    pub async fn run_step_quietly(
        &self,
        host: &str,
        step: Step,
        file: &Path,
        more: &[(&str, Value)],
    ) -> Result<Map<String, Value>, StepFailure> {
        self.run_step_inner(host, step, file, more, None).await
    }

    /// A setting read from the host's variables as whole seconds (a number or numeric text), with a default.
    pub fn host_seconds(&self, host: &str, name: &str, default: u64) -> u64 {
        let text = self.render_for(host, &format!("{{{{ {name} | default('') }}}}"));
        text.trim().parse().unwrap_or(default)
    }

    async fn run_step_inner(
        &self,
        host: &str,
        step: Step,
        file: &Path,
        more: &[(&str, Value)],
        timeout: Option<Duration>,
    ) -> Result<Map<String, Value>, StepFailure> {
        let fail = |reason: String| StepFailure { step, reason, unreachable: false, interrupted: false };
        let mut tasks = self.load(file).map_err(fail)?;
        // `upgrade_no_log: true`: the built-in steps' results are censored as `no_log` censors a task's (hooks keep
        // their own `no_log`).
        if file.starts_with(&self.playbooks) && self.host_flag(host, "upgrade_no_log", false) {
            let mut hidden = (*tasks).clone();
            for task in &mut hidden {
                task.no_log = Some(Value::Bool(true));
            }
            tasks = Arc::new(hidden);
        }
        let mut step_vars = Map::new();
        let own = self.task_vars.own(host);
        for (k, v) in self.step_vars(host) {
            // The inventory's own value wins (an operator's node_name), except for what the run decides.
            if k != "node_name" || !own.contains_key(&k) {
                step_vars.insert(k, v);
            }
        }
        for (k, v) in more {
            step_vars.insert((*k).to_string(), v.clone());
        }
        // What the run decides for this step sits above the facts earlier steps left, as include parameters do in
        // Ansible (a `default(...)` fact of an earlier step must not hide this step's value), and under `-e`.
        let mut params = step_vars.clone();
        params.extend(self.extra.clone());
        let vars = self.task_vars.for_host(host, step_vars);
        let capture = Arc::new(FailureCapture { inner: self.sink.clone(), failure: Mutex::new(None) });
        let mut options = self.engine_options.clone();
        if timeout.is_some() {
            options.command_timeout = timeout;
        }
        options.whole_stdout = step.reads_cluster();
        let mut engine = Engine::new(self.templar.clone(), capture.clone(), options, self.pool.clone());
        // One fact store for the whole run: facts persist from step to step as from play to play in Ansible, and a
        // hook on one host reads through `hostvars` what a hook on another registered.
        engine.facts = self.task_vars.facts();
        if let Some(shared) = self.run_once.lock().ok().and_then(|m| m.get(host).cloned()) {
            engine.run_once = shared;
        }
        let outcome = engine.run_host_with(host, vars, params, &tasks).await;
        if outcome.failed || outcome.unreachable {
            let reason = capture.failure.lock().ok().and_then(|f| f.clone()).unwrap_or_else(|| {
                if outcome.unreachable { "host unreachable".into() } else { "a task failed".into() }
            });
            return Err(StepFailure { step, reason, unreachable: outcome.unreachable, interrupted: false });
        }
        Ok(outcome.facts)
    }

    /// Whether the host has a hook at `point`.
    pub fn has_hook(&self, host: &str, point: HookPoint) -> bool {
        self.plan.hooks.get(host).is_some_and(|h| h.contains_key(&point))
    }

    /// Records that a step starts (the upgrade step: see `JournalEntry::StepStarted`).
    pub fn record_step_started(&self, phase: impl AsRef<str>, host: &str, step: Step) {
        let (run, time, phase, host, step) = self.step_fields(phase, host, step);
        let _ = self.record(JournalEntry::StepStarted { run, time, phase, host, step });
    }

    /// Records a step as done (run now, or done by an earlier run).
    pub fn record_step_done(&self, phase: impl AsRef<str>, host: &str, step: Step) {
        let (run, time, phase, host, step) = self.step_fields(phase, host, step);
        let _ = self.record(JournalEntry::StepDone { run, time, phase, host, step });
    }

    fn step_fields(&self, phase: impl AsRef<str>, host: &str, step: Step) -> (String, String, String, String, String) {
        let time = utc_timestamp(std::time::SystemTime::now());
        (self.run_id(), time, phase.as_ref().into(), host.into(), step.name().into())
    }

    /// Runs the host's hook at `point`, if it has one.
    pub async fn run_hook(&self, phase: Phase, host: &str, point: HookPoint, step: Step) -> Result<(), StepFailure> {
        let Some(hook) = self.plan.hooks.get(host).and_then(|h| h.get(&point)).cloned() else { return Ok(()) };
        self.run_step(phase, host, step, &hook.path, &[], None).await.map(|_| ())
    }

    /// Tells the reporters and the journal that a host's sequence starts. False when the journal could not say so:
    /// then the host must not start (a re-run could not tell what this run did to it).
    pub fn host_started(&self, phase: impl AsRef<str>, host: &str, was_cordoned: bool) -> bool {
        let phase = phase.as_ref();
        self.event(Event::HostStarted { phase: phase.into(), host: host.into() });
        self.record(JournalEntry::HostStarted {
            run: self.run_id(),
            time: utc_timestamp(std::time::SystemTime::now()),
            phase: phase.into(),
            host: host.into(),
            was_cordoned,
        })
    }

    /// Tells the reporters and the journal how a host's sequence ended, and returns its report.
    pub fn host_completed(
        &self,
        phase: impl AsRef<str>,
        host: &str,
        outcome: HostOutcome,
        started: Instant,
    ) -> HostReport {
        let phase = phase.as_ref();
        let node = self.node_name(host);
        let report = HostReport {
            phase: phase.into(),
            host: host.into(),
            node: (node != host).then_some(node),
            outcome,
            duration: started.elapsed(),
        };
        let (record, detail) = match &report.outcome {
            HostOutcome::Upgraded { .. } => (Some(HostRecord::Upgraded), String::new()),
            HostOutcome::Skipped { reason } => (Some(HostRecord::Skipped), reason.clone()),
            HostOutcome::Failed { step, reason, .. } => (Some(HostRecord::Failed), format!("{step}: {reason}")),
            HostOutcome::NotStarted { .. } => (None, String::new()),
        };
        if let Some(outcome) = record {
            let _ = self.record(JournalEntry::HostFinished {
                run: self.run_id(),
                time: utc_timestamp(std::time::SystemTime::now()),
                phase: phase.into(),
                host: host.into(),
                outcome,
                detail,
            });
        }
        self.event(Event::HostCompleted { report: report.clone() });
        report
    }

    pub async fn close(&self) {
        // Commands cut at the end of the grace period are killed on their hosts before the masters close.
        crate::connection::ssh::finish_pending_kills(Duration::from_secs(10)).await;
        self.pool.close_all().await;
    }
}

/// The reporters behind a gate that `UpgradeRun::end_now` closes for good after the run's last events.
struct EventGate {
    inner: SharedSink,
    /// Read for every event (reporters are called concurrently); written once, to close.
    open: RwLock<bool>,
}

impl EventSink for EventGate {
    fn event(&self, event: &Event) {
        if let Ok(open) = self.open.read() {
            if *open {
                self.inner.event(event);
            }
        }
    }
}

/// Passes events on and keeps the first failure that failed the host (not one that was ignored or rescued), so a
/// step can say why it failed.
struct FailureCapture {
    inner: SharedSink,
    failure: Mutex<Option<String>>,
}

impl EventSink for FailureCapture {
    fn event(&self, event: &Event) {
        if let Event::TaskFinished { task, status, result, ignored: false, rescued: false, .. } = event {
            if matches!(status, TaskStatus::Failed | TaskStatus::Unreachable) {
                if let Ok(mut slot) = self.failure.lock() {
                    slot.get_or_insert_with(|| format!("{}: {}", task.name, failure_message(result)));
                }
            }
        }
        self.inner.event(event);
    }
}

/// The most telling line of a failed task's result.
fn failure_message(result: &Value) -> String {
    let text = |key: &str| result.get(key).and_then(Value::as_str).map(str::trim).filter(|s| !s.is_empty());
    let mut message = text("msg").unwrap_or("failed").to_string();
    if let Some(stderr) = text("stderr") {
        let last = stderr.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or(stderr);
        message = format!("{message} ({last})");
    } else if let Some(rc) = result.get("rc").and_then(Value::as_i64) {
        if rc != 0 && message == "non-zero return code" {
            message = format!("{message} {rc}");
        }
    }
    message
}
