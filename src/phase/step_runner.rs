//! The one way a phase runs a step on a host: a task file through the task engine, with the hosts' variables, the
//! run's connections and a cache of parsed files; and the host settings read from the same variables.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Map, Value};

use crate::events::{Event, EventSink, SharedSink, TaskStatus};
use crate::flavor::Flavor;
use crate::inventory::{self, Inventory, vars_to_json};
use crate::tasks::Templar;
use crate::tasks::connect::ConnectionPool;
use crate::tasks::engine::{Engine, EngineOptions, RunOnce};
use crate::tasks::host_vars::{FactStore, HostVarsTable};
use crate::tasks::model::{Task, TaskFileCache};
use crate::vocabulary::Step;

/// Where a host's Kubernetes node name comes from, first found wins (openshift-ansible's names as aliases).
pub(crate) const NODE_NAME_VARIABLES: [&str; 3] =
    ["node_name", "openshift_kubelet_name_override", "openshift_hostname"];

/// The facts and registered results a host has after a step: the run's fact store's snapshot, shared, not copied.
pub(crate) type StepFacts = Arc<crate::tasks::host_vars::HostFacts>;

/// A step that did not succeed, and why, in words for the operator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct StepFailure {
    pub step: Step,
    pub reason: String,
    pub unreachable: bool,
    /// The step did not run (or was cut short) because the run was interrupted and its grace period ran out.
    pub interrupted: bool,
    /// The step ran out of its time limit: the step runner's own bound on its commands (or the poll's deadline),
    /// or a task's `timeout:` as the engine reports it (`timedout` in the result). Known from the runner, never from
    /// the words of the failure, so a command whose output says "timed out" is not taken for a timeout.
    pub timed_out: bool,
}

impl StepFailure {
    /// The grace period after an interrupt ran out before (or, for a drain, during) `step`.
    pub(crate) fn interrupted(step: Step) -> StepFailure {
        StepFailure {
            step,
            reason: "interrupted: the grace period ran out, stopped at a safe point".into(),
            unreachable: false,
            interrupted: true,
            timed_out: false,
        }
    }

    /// A step that failed for `reason`.
    pub(crate) fn new(step: Step, reason: String) -> StepFailure {
        StepFailure { step, reason, unreachable: false, interrupted: false, timed_out: false }
    }
}

/// Runs task files on hosts for the run: the engine, its connections, the hosts' variables, the parsed files.
pub(crate) struct StepRunner {
    /// `-e`: above everything, facts included.
    extra: Map<String, Value>,
    task_vars: HostVarsTable,
    templar: Arc<Templar>,
    pool: Arc<ConnectionPool>,
    engine_options: EngineOptions,
    /// Where the built-in step files were written.
    playbooks: PathBuf,
    task_files: Arc<TaskFileCache>,
    /// `run_once` in hooks means once per batch, as in a serial play: the hosts of a batch share one coordinator.
    run_once: Mutex<HashMap<String, Arc<RunOnce>>>,
}

impl StepRunner {
    pub(crate) fn new(
        inventory: &Inventory,
        extra: &inventory::Vars,
        pool: Arc<ConnectionPool>,
        engine_options: EngineOptions,
        playbooks: PathBuf,
    ) -> StepRunner {
        StepRunner {
            extra: vars_to_json(extra),
            task_vars: HostVarsTable::with_facts(inventory, extra, pool.host_vars().clone(), FactStore::new()),
            templar: Arc::new(Templar::new()),
            pool,
            engine_options,
            playbooks,
            task_files: Arc::default(),
            run_once: Mutex::new(HashMap::new()),
        }
    }

    /// A batch starts: its hosts share `run_once` results from now on.
    pub(crate) fn batch_started(&self, hosts: &[String]) {
        let shared = Arc::new(RunOnce::default());
        shared.set_members(hosts);
        if let Ok(mut slots) = self.run_once.lock() {
            for host in hosts {
                slots.insert(host.clone(), shared.clone());
            }
        }
    }

    pub(crate) fn pool(&self) -> &ConnectionPool {
        &self.pool
    }

    /// Forgets a result the run registered for itself once it has read it (the poller's node list: tens of MB on a
    /// large cluster, else kept until the next poll replaces it, two lists alive at once).
    pub(crate) fn forget(&self, host: &str, name: &str) {
        self.task_vars.facts().remove(host, name);
    }

    /// A fact the host's steps set (`set_fact`, `register`), as it is now.
    pub(crate) fn fact(&self, host: &str, name: &str) -> Option<Value> {
        self.task_vars.facts().get(host)?.get(name).map(|v| (**v).clone())
    }

    /// One of the host's own variables (inventory and `-e`, not facts).
    pub(crate) fn own(&self, host: &str, name: &str) -> Option<Value> {
        self.task_vars.own(host).get(name).cloned()
    }

    /// The Kubernetes node name of an inventory host: its `node_name` variable, else openshift-ansible's
    /// `openshift_kubelet_name_override`, else `openshift_hostname`, else its inventory name.
    pub(crate) fn node_name(&self, host: &str) -> String {
        let own = self.task_vars.own(host);
        NODE_NAME_VARIABLES
            .iter()
            .find_map(|name| own.get(*name).and_then(Value::as_str).map(str::trim).filter(|s| !s.is_empty()))
            .unwrap_or(host)
            .to_string()
    }

    /// A host variable rendered as text for the operator (e.g. the kubectl command in a fix hint).
    pub(crate) fn render_for(&self, host: &str, template: &str) -> String {
        self.render_for_with(host, template, Map::new())
    }

    /// [`StepRunner::render_for`] with step variables above the host's own.
    pub(crate) fn render_for_with(&self, host: &str, template: &str, step_vars: Map<String, Value>) -> String {
        let vars = self.task_vars.for_host(host, step_vars);
        self.templar.render_str(template, &vars).unwrap_or_else(|_| template.to_string())
    }

    /// The path of a built-in step file as `flavor` carries it out (`openshift/drain.yml` for `drain.yml`).
    pub(crate) fn playbook(&self, flavor: Flavor, name: &str) -> PathBuf {
        self.playbooks.join(crate::playbooks::for_flavor(flavor, name))
    }

    /// Whether the host's variables (the inventory's and `-e`, not facts) set `name`.
    pub(crate) fn host_sets(&self, host: &str, name: &str) -> bool {
        self.task_vars.own(host).get(name).is_some()
    }

    /// A setting read from the host's variables as a boolean (Ansible's truth table), with a default.
    pub(crate) fn host_flag(&self, host: &str, name: &str, default: bool) -> bool {
        self.task_vars
            .own(host)
            .get(name)
            .map(|v| crate::ansible_compat::boolean(v).unwrap_or(default))
            .unwrap_or(default)
    }

    /// A setting read from the host's variables as a list of names: a YAML list, or comma-separated text (INI).
    pub(crate) fn host_list(&self, host: &str, name: &str) -> Vec<String> {
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

    /// A setting read from the host's variables as whole seconds (a number or numeric text), with a default.
    pub(crate) fn host_seconds(&self, host: &str, name: &str, default: u64) -> u64 {
        let text = self.render_for(host, &format!("{{{{ {name} | default('') }}}}"));
        text.trim().parse().unwrap_or(default)
    }

    fn load(&self, file: &Path) -> Result<Arc<Vec<Task>>, String> {
        self.task_files.load(file).map_err(|e| e.to_string())
    }

    /// Runs `file` on `host` as `step` with `step_vars` (what the run decides for this step); `timeout` bounds
    /// every command of it. The engine's task events go to `sink`. Returns the facts the tasks left.
    pub(crate) async fn run_file(
        &self,
        host: &str,
        step: Step,
        file: &Path,
        step_vars: Map<String, Value>,
        timeout: Option<Duration>,
        sink: SharedSink,
    ) -> Result<StepFacts, StepFailure> {
        let started = Instant::now();
        let mut tasks = self.load(file).map_err(|reason| StepFailure::new(step, reason))?;
        // `upgrade_no_log: true`: the built-in steps' results are censored as `no_log` censors a task's (hooks keep
        // their own `no_log`).
        if file.starts_with(&self.playbooks) && self.host_flag(host, "upgrade_no_log", false) {
            let mut hidden = (*tasks).clone();
            for task in &mut hidden {
                task.no_log = Some(Value::Bool(true));
            }
            tasks = Arc::new(hidden);
        }
        // What the run decides for this step sits above the facts earlier steps left, as include parameters do in
        // Ansible (a `default(...)` fact of an earlier step must not hide this step's value), and under `-e`.
        let mut params = step_vars.clone();
        params.extend(self.extra.clone());
        let vars = self.task_vars.for_host(host, step_vars);
        let capture =
            Arc::new(FailureCapture { inner: sink, failure: Mutex::new(None), timed_out: AtomicBool::new(false) });
        let mut options = self.engine_options.clone();
        if timeout.is_some() {
            options.command_timeout = timeout;
        }
        options.whole_stdout = step.reads_cluster();
        let mut engine = Engine::new(self.templar.clone(), capture.clone(), options, self.pool.clone());
        // One fact store for the whole run: facts persist from step to step as from play to play in Ansible, and a
        // hook on one host reads through `hostvars` what a hook on another registered.
        engine.facts = self.task_vars.facts();
        engine.task_files = self.task_files.clone();
        if let Some(shared) = self.run_once.lock().ok().and_then(|m| m.get(host).cloned()) {
            engine.run_once = shared;
        }
        let outcome = engine.run_host_with(host, vars, params, &tasks).await;
        if outcome.failed || outcome.unreachable {
            let reason = capture.failure.lock().ok().and_then(|f| f.clone()).unwrap_or_else(|| {
                if outcome.unreachable { "host unreachable".into() } else { "a task failed".into() }
            });
            // The runner's bound on the step's commands ends a command at the limit, so a failure at or past it is
            // that bound (the connection reports it only as text in the task's result).
            let timed_out =
                capture.timed_out.load(Ordering::SeqCst) || timeout.is_some_and(|limit| started.elapsed() >= limit);
            return Err(StepFailure { unreachable: outcome.unreachable, timed_out, ..StepFailure::new(step, reason) });
        }
        Ok(outcome.facts)
    }
}

/// Passes events on and keeps the first failure that failed the host (not one that was ignored or rescued), so a
/// step can say why it failed.
struct FailureCapture {
    inner: SharedSink,
    failure: Mutex<Option<String>>,
    /// The failure that failed the host was a task's `timeout:` (the engine's `timedout` field, as in Ansible).
    timed_out: AtomicBool,
}

impl EventSink for FailureCapture {
    fn event(&self, event: &Event) {
        if let Event::TaskFinished { task, status, result, ignored: false, rescued: false, .. } = event {
            if matches!(status, TaskStatus::Failed | TaskStatus::Unreachable) {
                if let Ok(mut slot) = self.failure.lock() {
                    if slot.is_none() {
                        *slot = Some(format!("{}: {}", task.name, failure_message(result)));
                        self.timed_out.store(result.get("timedout").is_some(), Ordering::SeqCst);
                    }
                }
            }
        }
        self.inner.event(event);
    }
}

/// The most telling line of a failed task's result: a package manager's first error (its cause), else the last line
/// of stderr.
fn failure_message(result: &Value) -> String {
    let text = |key: &str| result.get(key).and_then(Value::as_str).map(str::trim).filter(|s| !s.is_empty());
    let mut message = text("msg").unwrap_or("failed").to_string();
    if let Some(stderr) = text("stderr") {
        let last = stderr.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or(stderr);
        let cause = first_package_error(stderr).or_else(|| text("stdout").and_then(first_package_error));
        message = format!("{message} ({})", cause.unwrap_or(last));
    } else if let Some(rc) = result.get("rc").and_then(Value::as_i64) {
        if rc != 0 && message == "non-zero return code" {
            message = format!("{message} {rc}");
        }
    }
    message
}

/// apt's first error line: apt ends a failed install with a generic line (`E: Unable to fetch some archives, maybe run
/// apt-get update or try with --fix-missing?`, `E: Some index files failed to download. They have been ignored, or
/// old ones used instead.`) after the one that names the cause (`E: Failed to fetch http://.../kubelet_1.29.1-1.1_amd64.deb
/// 404 Not Found`, `Err:1 ...`).
fn first_package_error(text: &str) -> Option<&str> {
    text.lines().map(str::trim).find(|l| l.starts_with("E: ") || l.starts_with("Err:") || l.contains("Failed to fetch"))
}
