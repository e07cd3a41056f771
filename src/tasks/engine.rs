//! The task engine: runs a task list on one host with Ansible's semantics (when, loop, until/retries,
//! failed_when/changed_when, register, ignore_errors, block/rescue/always, run_once, delegate_to, become).
//!
//! It never prints: every result goes out as an `Event`.

use std::collections::HashMap;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};
use tokio::sync::OnceCell;

use super::connect::ConnectionPool;
use super::host_vars::{FactStore, HostFacts};
use super::model::{Action, Module, ModuleCall, Task};
use super::modules::{self, ModuleContext};
use super::{Templar, Vars};
use crate::connection::ConnectionError;
use crate::events::{Event, SharedSink, TaskRef, TaskStatus};

pub const NO_LOG_MESSAGE: &str =
    "the output has been hidden due to the fact that 'no_log: true' was specified for this result";

/// Answers a `pause` prompt; given only when a person is at a terminal.
pub type Prompter = Arc<dyn Fn(&str) -> Option<String> + Send + Sync>;

#[derive(Clone, Default)]
pub struct EngineOptions {
    /// `--yes`: `pause` prompts are answered without asking.
    pub assume_yes: bool,
    pub verbosity: u8,
    /// Every command run on a host stops after this long (on the host too).
    pub command_timeout: Option<Duration>,
    pub prompter: Option<Prompter>,
    /// Commands' stdout is read whole instead of within the bound of command output: for the run's own reads of
    /// the cluster (`get nodes -o json` of a 5,000-node cluster is tens of MB, and a cut one does not parse).
    pub whole_stdout: bool,
}

/// What the hosts of one run share.
pub struct Engine {
    pub templar: Arc<Templar>,
    pub sink: SharedSink,
    pub options: EngineOptions,
    pub pool: Arc<ConnectionPool>,
    pub run_once: Arc<RunOnce>,
    /// Where hosts keep their facts and registered results: shared by the hosts of a run (`hostvars` reads it), and
    /// by the steps of an upgrade, as facts persist from play to play in Ansible.
    pub facts: Arc<FactStore>,
    /// Serialises `pause` prompts, so hosts do not ask at once.
    prompt_lock: Arc<tokio::sync::Mutex<()>>,
}

impl Engine {
    pub fn new(templar: Arc<Templar>, sink: SharedSink, options: EngineOptions, pool: Arc<ConnectionPool>) -> Self {
        Engine {
            templar,
            sink,
            options,
            pool,
            run_once: Arc::new(RunOnce::default()),
            facts: FactStore::new(),
            prompt_lock: Default::default(),
        }
    }

    /// Runs `tasks` on one host. `vars` are its variables (inventory after precedence plus the magic ones:
    /// `inventory_hostname`, `groups`, `group_names`, `hostvars`, ...); `extra_vars` (`-e`) are applied again on top
    /// of facts set by tasks, since they win over everything in Ansible. The host starts with the facts it has in
    /// [`Engine::facts`] and leaves its new ones there.
    pub async fn run_host(
        &self,
        host: &str,
        vars: Map<String, Value>,
        extra_vars: Map<String, Value>,
        tasks: &[Task],
    ) -> HostOutcome {
        self.run_host_with(host, Vars::new(Value::Object(vars)), extra_vars, tasks).await
    }

    /// Like [`Engine::run_host`], with the variables already layered for templating, so that what every host
    /// shares (`hostvars`, `groups`) is one object rather than a copy per host.
    pub async fn run_host_with(
        &self,
        host: &str,
        vars: Vars,
        extra_vars: Map<String, Value>,
        tasks: &[Task],
    ) -> HostOutcome {
        let mut run = HostRun {
            engine: self,
            host: host.to_string(),
            base: vars,
            extra: Value::Object(extra_vars),
            seen: HashMap::new(),
            last_failure: None,
        };
        self.run_once.mark(host, false);
        let flow = run.run_list(tasks, Scope::default()).await;
        self.run_once.mark(host, true);
        let outcome = HostOutcome {
            failed: matches!(flow, Flow::Failed),
            unreachable: matches!(flow, Flow::Unreachable),
            facts: self.facts.get_json(host),
        };
        self.sink.event(&Event::HostFinished {
            host: host.to_string(),
            failed: outcome.failed,
            unreachable: outcome.unreachable,
        });
        outcome
    }
}

#[derive(Debug, Clone)]
pub struct HostOutcome {
    pub failed: bool,
    pub unreachable: bool,
    /// Facts and registered results the tasks left behind.
    pub facts: Map<String, Value>,
}

/// A `run_once` task runs on the first host of the run (in inventory order) still running it, as in Ansible; the
/// others take its outcome.
#[derive(Default)]
pub struct RunOnce {
    slots: std::sync::Mutex<HashMap<(PathBuf, usize, usize, u32), Arc<OnceCell<Shared>>>>,
    progress: std::sync::Mutex<Progress>,
    changed: tokio::sync::Notify,
}

/// Which hosts of the run have started and finished, to tell whose turn a run_once task is.
#[derive(Default)]
struct Progress {
    order: Vec<String>,
    /// The hosts that take a run_once task's facts and registered result: `order`, or the hosts of an upgrade batch.
    members: Vec<String>,
    /// Every host will start (forks >= hosts), so waiting for one not yet started cannot deadlock.
    all_start: bool,
    started: std::collections::HashSet<String>,
    finished: std::collections::HashSet<String>,
}

impl RunOnce {
    /// The hosts of the run in order. Without it, the first host to reach a run_once task runs it.
    pub fn set_order(&self, hosts: &[String], forks: usize) {
        if let Ok(mut p) = self.progress.lock() {
            p.order = hosts.to_vec();
            p.members = hosts.to_vec();
            p.all_start = forks >= hosts.len();
        }
    }

    fn mark(&self, host: &str, finished: bool) {
        if let Ok(mut p) = self.progress.lock() {
            if finished {
                p.finished.insert(host.to_string());
            } else {
                p.started.insert(host.to_string());
            }
        }
        self.changed.notify_waiters();
    }

    /// The hosts that share run_once results, without imposing an order on who runs them.
    pub fn set_members(&self, hosts: &[String]) {
        if let Ok(mut p) = self.progress.lock() {
            p.members = hosts.to_vec();
        }
    }

    /// The hosts that share run_once results.
    fn hosts(&self) -> Vec<String> {
        self.progress.lock().map(|p| p.members.clone()).unwrap_or_default()
    }

    /// No host before this one is still on its way to the task.
    fn my_turn(&self, host: &str) -> bool {
        let Ok(p) = self.progress.lock() else { return true };
        for earlier in p.order.iter().take_while(|h| h.as_str() != host) {
            let running = !p.finished.contains(earlier) && (p.all_start || p.started.contains(earlier));
            if running {
                return false;
            }
        }
        true
    }
}

#[derive(Clone)]
struct Shared {
    result: Map<String, Value>,
    /// Facts (`set_fact`) and the registered result, applied to every host.
    facts: Map<String, Value>,
    runner: String,
}

enum Flow {
    Continue,
    Failed,
    Unreachable,
}

/// What blocks pass down to their tasks.
#[derive(Clone, Default)]
struct Scope {
    vars: Map<String, Value>,
    when: Vec<Value>,
    become_: Option<Value>,
    become_user: Option<Value>,
    environment: Vec<Value>,
    ignore_errors: Option<Value>,
    no_log: Option<Value>,
    delegate_to: Option<String>,
    run_once: Option<Value>,
    /// The innermost enclosing block has a `rescue` section.
    rescuable: bool,
}

struct HostRun<'e> {
    engine: &'e Engine,
    host: String,
    base: Vars,
    extra: Value,
    /// How often this host reached each task, to tell repeated run_once tasks apart.
    seen: HashMap<(PathBuf, usize, usize), u32>,
    /// `ansible_failed_task` and `ansible_failed_result` of the last failure, for `rescue`.
    last_failure: Option<Map<String, Value>>,
}

type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Ansible's truth table for booleans written as text.
pub fn parse_bool(value: &Value) -> Option<bool> {
    match value {
        Value::Bool(b) => Some(*b),
        Value::Number(n) => Some(n.as_f64().is_some_and(|f| f != 0.0)),
        Value::String(s) => match s.trim().to_ascii_lowercase().as_str() {
            "yes" | "on" | "1" | "true" | "y" | "t" | "1.0" => Some(true),
            "no" | "off" | "0" | "false" | "n" | "f" | "0.0" | "" => Some(false),
            _ => None,
        },
        Value::Null => Some(false),
        _ => None,
    }
}

/// A result as `register` keeps it and events carry it: without Ansible's internal `_ansible_*` keys.
fn clean(result: &Map<String, Value>) -> Value {
    Value::Object(
        result.iter().filter(|(k, _)| !k.starts_with("_ansible")).map(|(k, v)| (k.clone(), v.clone())).collect(),
    )
}

fn flag(result: &Map<String, Value>, key: &str) -> bool {
    result.get(key).and_then(parse_bool).unwrap_or(false)
}

fn status_of(result: &Map<String, Value>) -> TaskStatus {
    if flag(result, "unreachable") {
        TaskStatus::Unreachable
    } else if flag(result, "failed") {
        TaskStatus::Failed
    } else if flag(result, "skipped") {
        TaskStatus::Skipped
    } else if flag(result, "changed") {
        TaskStatus::Changed
    } else {
        TaskStatus::Ok
    }
}

pub(crate) fn failed(msg: impl Into<String>) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("failed".into(), Value::Bool(true));
    m.insert("msg".into(), Value::String(msg.into()));
    m.insert("changed".into(), Value::Bool(false));
    m
}

fn unreachable(msg: String) -> Map<String, Value> {
    let mut r = Map::new();
    r.insert("unreachable".into(), Value::Bool(true));
    r.insert("msg".into(), Value::String(msg));
    r.insert("changed".into(), Value::Bool(false));
    r
}

/// A module run cut by the task's `timeout:`.
struct TaskTimedOut;

/// Ansible's (2.19) result for a task that outlasted its `timeout:`.
fn timed_out(limit: Duration) -> Map<String, Value> {
    let seconds = limit.as_secs();
    let mut r = failed(format!("Timed out after {seconds} second(s)."));
    r.insert("timedout".into(), json!({ "period": seconds }));
    r
}

fn skipped(false_condition: &str) -> Map<String, Value> {
    let mut r = Map::new();
    r.insert("changed".into(), Value::Bool(false));
    r.insert("skipped".into(), Value::Bool(true));
    r.insert("skip_reason".into(), Value::String("Conditional result was False".into()));
    r.insert("false_condition".into(), Value::String(false_condition.into()));
    r
}

impl HostRun<'_> {
    /// The variables a task sees, lowest precedence first: inventory, block and task vars, facts and registered
    /// results, extra vars.
    fn context(&self, scope: &Scope, task_vars: &Map<String, Value>) -> Vars {
        let templar = &self.engine.templar;
        let mut ctx = self.base.clone();
        // Block and task vars may refer to other variables; resolve them once, in order.
        for (k, v) in scope.vars.iter().chain(task_vars) {
            let resolved = templar.render_value(v, &ctx).unwrap_or_else(|_| v.clone());
            ctx = ctx.with(k, &resolved);
        }
        let ctx = match self.facts() {
            Some(facts) => ctx.with_facts(facts),
            None => ctx,
        };
        ctx.with_map(&self.extra)
    }

    /// The host's facts and registered results as they are now.
    fn facts(&self) -> Option<Arc<HostFacts>> {
        self.engine.facts.get(&self.host)
    }

    fn set_facts(&self, facts: Map<String, Value>) {
        self.engine.facts.extend(&self.host, facts);
    }

    fn task_ref(&self, task: &Task, ctx: &Vars) -> TaskRef {
        let name = match &task.name {
            Some(name) => match self.engine.templar.render(name, ctx) {
                Ok(Value::String(s)) => s,
                Ok(other) => other.to_string(),
                Err(_) => name.clone(),
            },
            None => task.display_name(),
        };
        TaskRef { name, file: task.location.file.clone(), line: task.location.line }
    }

    /// `hook.yml:3:3: task "x"`: where a templating error happened.
    fn place(task: &Task) -> String {
        format!("{}: task \"{}\"", task.location, task.display_name())
    }

    fn run_list<'a>(&'a mut self, tasks: &'a [Task], scope: Scope) -> BoxFuture<'a, Flow> {
        Box::pin(async move {
            for task in tasks {
                match self.run_task(task, &scope).await {
                    Flow::Continue => {}
                    stop => return stop,
                }
            }
            Flow::Continue
        })
    }

    fn run_task<'a>(&'a mut self, task: &'a Task, scope: &'a Scope) -> BoxFuture<'a, Flow> {
        Box::pin(async move {
            match &task.action {
                Action::Block { block, rescue, always } => self.run_block(task, block, rescue, always, scope).await,
                Action::Include { file } => self.run_include(task, file, scope).await,
                Action::Module(call) => self.run_module_task(task, call, scope).await,
            }
        })
    }

    fn child_scope(task: &Task, scope: &Scope) -> Scope {
        let mut child = scope.clone();
        child.vars.extend(task.vars.iter().map(|(k, v)| (k.clone(), v.clone())));
        child.when.extend(task.when.iter().cloned());
        let inherit = |mine: &Option<Value>, theirs: &Option<Value>| mine.clone().or_else(|| theirs.clone());
        child.become_ = inherit(&task.become_, &scope.become_);
        child.become_user = inherit(&task.become_user, &scope.become_user);
        child.ignore_errors = inherit(&task.ignore_errors, &scope.ignore_errors);
        child.no_log = inherit(&task.no_log, &scope.no_log);
        child.run_once = inherit(&task.run_once, &scope.run_once);
        child.delegate_to = task.delegate_to.clone().or_else(|| scope.delegate_to.clone());
        child.environment.extend(task.environment.iter().cloned());
        child
    }

    async fn run_block(
        &mut self,
        task: &Task,
        block: &[Task],
        rescue: &[Task],
        always: &[Task],
        scope: &Scope,
    ) -> Flow {
        let mut inner = Self::child_scope(task, scope);
        inner.rescuable = !rescue.is_empty();
        let mut flow = self.run_list(block, inner.clone()).await;
        if matches!(flow, Flow::Failed) && !rescue.is_empty() {
            let mut rescue_scope = inner.clone();
            rescue_scope.rescuable = scope.rescuable;
            if let Some(last) = self.last_failure.clone() {
                rescue_scope.vars.extend(last);
            }
            flow = self.run_list(rescue, rescue_scope).await;
        }
        if !always.is_empty() {
            let mut always_scope = inner;
            always_scope.rescuable = scope.rescuable;
            if let Some(last) = self.last_failure.clone() {
                always_scope.vars.extend(last);
            }
            // Unreachable hosts stop at once; failed ones still run `always`.
            if !matches!(flow, Flow::Unreachable) {
                let after = self.run_list(always, always_scope).await;
                if matches!(flow, Flow::Continue) {
                    flow = after;
                }
            }
        }
        flow
    }

    async fn run_include(&mut self, task: &Task, file: &str, scope: &Scope) -> Flow {
        let scope = Self::child_scope(task, scope);
        let ctx = self.context(&scope, &Map::new());
        let tref = self.task_ref(task, &ctx);
        let ignore = self.ignore_errors(task, &scope, &ctx);
        let fail = |this: &Self, msg: String| {
            this.finish(&tref, task, failed(msg), Instant::now(), &scope, ignore);
            if ignore { Flow::Continue } else { Flow::Failed }
        };
        // A looped include runs the file once per item, with the loop (and index) variable set for its tasks.
        let items: Vec<Option<(usize, Value)>> = match &task.loop_items {
            None => vec![None],
            Some(items) => match self.engine.templar.render_value(items, &ctx) {
                Ok(Value::Array(list)) => {
                    let list = if task.loop_flatten {
                        list.into_iter().flat_map(|i| if let Value::Array(v) = i { v } else { vec![i] }).collect()
                    } else {
                        list
                    };
                    list.into_iter().enumerate().map(Some).collect()
                }
                Ok(other) => {
                    let msg = format!(
                        "{}: the `loop` value must resolve to a list, not {}",
                        Self::place(task),
                        modules::type_name(&other)
                    );
                    return fail(self, msg);
                }
                Err(e) => return fail(self, format!("{}: {}", Self::place(task), e.message)),
            },
        };
        for entry in items {
            let mut inner = scope.clone();
            if let Some((index, item)) = &entry {
                let loop_var = task.loop_var.clone().unwrap_or_else(|| "item".into());
                inner.vars.insert("ansible_loop_var".into(), json!(loop_var));
                inner.vars.insert(loop_var, item.clone());
                if let Some(index_var) = &task.index_var {
                    inner.vars.insert("ansible_index_var".into(), json!(index_var));
                    inner.vars.insert(index_var.clone(), json!(index));
                }
            }
            let ctx = self.context(&inner, &Map::new());
            match self.conditions_hold(&inner.when, &ctx) {
                Ok(None) => {}
                Ok(Some(false_condition)) => {
                    self.finish(&tref, task, skipped(&false_condition), Instant::now(), &inner, ignore);
                    continue;
                }
                Err(msg) => return fail(self, format!("{}: {msg}", Self::place(task))),
            }
            let name = match self.engine.templar.render(file, &ctx) {
                Ok(Value::String(s)) => s,
                Ok(other) => other.to_string(),
                Err(e) => return fail(self, format!("{}: {}", Self::place(task), e.message)),
            };
            let path = resolve_local(&task.location.file, &name, None);
            let tasks = match super::model::load_task_file(&path) {
                Ok(tasks) => tasks,
                Err(e) => return fail(self, format!("{}: {e}", Self::place(task))),
            };
            // Ansible reports each include (each item of a looped one) as ok before running its tasks.
            let mut included = Map::new();
            included.insert("changed".into(), Value::Bool(false));
            included.insert("include".into(), Value::String(name));
            if let Some((_, item)) = &entry {
                included.insert(task.loop_var.clone().unwrap_or_else(|| "item".into()), item.clone());
            }
            self.finish(&tref, task, included, Instant::now(), &inner, ignore);
            // The include's own `when` is settled; the included tasks inherit the rest of its keywords.
            inner.when.clear();
            match self.run_list(&tasks, inner).await {
                Flow::Continue => {}
                stop => return stop,
            }
        }
        Flow::Continue
    }

    /// `Ok(None)` when every condition holds, `Ok(Some(cond))` with the first false one, `Err` on a template error.
    fn conditions_hold(&self, conditions: &[Value], ctx: &Vars) -> Result<Option<String>, String> {
        for cond in conditions {
            let (holds, text) = match cond {
                Value::Bool(b) => (*b, if *b { "True".to_string() } else { "False".to_string() }),
                Value::String(s) => match self.engine.templar.eval_condition(cond, ctx) {
                    Ok(b) => (b, s.clone()),
                    Err(e) => return Err(format!("the conditional check '{s}' failed: {}", e.message)),
                },
                other => (parse_bool(other).unwrap_or(false), other.to_string()),
            };
            if !holds {
                return Ok(Some(text));
            }
        }
        Ok(None)
    }

    fn finish(
        &self,
        tref: &TaskRef,
        task: &Task,
        result: Map<String, Value>,
        started: Instant,
        scope: &Scope,
        ignore_errors: bool,
    ) -> TaskStatus {
        let status = status_of(&result);
        let ignored = status == TaskStatus::Failed && ignore_errors;
        let no_log = task.no_log.as_ref().or(scope.no_log.as_ref()).and_then(parse_bool).unwrap_or(false);
        let shown = if no_log {
            let mut censored = Map::new();
            censored.insert("censored".into(), Value::String(NO_LOG_MESSAGE.into()));
            for key in ["changed", "failed", "skipped", "unreachable"] {
                if let Some(v) = result.get(key) {
                    censored.insert(key.into(), v.clone());
                }
            }
            Value::Object(censored)
        } else {
            clean(&result)
        };
        self.engine.sink.event(&Event::TaskFinished {
            host: self.host.clone(),
            task: tref.clone(),
            status,
            result: shown,
            duration: started.elapsed(),
            ignored,
            rescued: status == TaskStatus::Failed && !ignored && scope.rescuable,
        });
        status
    }

    /// `ignore_errors`, templated as Ansible does (`ignore_errors: "{{ role == 'db' }}"`).
    fn ignore_errors(&self, task: &Task, scope: &Scope, ctx: &Vars) -> bool {
        let Some(value) = task.ignore_errors.as_ref().or(scope.ignore_errors.as_ref()) else { return false };
        self.engine.templar.render_value(value, ctx).ok().as_ref().and_then(parse_bool).unwrap_or(false)
    }

    async fn run_module_task(&mut self, task: &Task, call: &ModuleCall, scope: &Scope) -> Flow {
        let key = (task.location.file.clone(), task.location.line, task.location.column);
        let nth = {
            let n = self.seen.entry(key.clone()).or_insert(0);
            *n += 1;
            *n
        };
        let ctx = self.context(scope, &task.vars);
        let tref = self.task_ref(task, &ctx);
        self.engine.sink.event(&Event::TaskStarted { host: self.host.clone(), task: tref.clone() });
        let started = Instant::now();
        let explicit_run_once = match task.run_once.as_ref().or(scope.run_once.as_ref()) {
            Some(v) => self.engine.templar.render_value(v, &ctx).ok().as_ref().and_then(parse_bool).unwrap_or(false),
            None => false,
        };
        // Ansible runs `pause` once for all hosts (its action bypasses the host loop): the first host pauses and
        // reports it; the others neither report it nor get its registered result.
        let bypass_host_loop = call.module == Module::Pause && !explicit_run_once;
        let run_once = explicit_run_once || bypass_host_loop;

        let result = if run_once {
            let slot = {
                let mut slots = match self.engine.run_once.slots.lock() {
                    Ok(s) => s,
                    Err(poisoned) => poisoned.into_inner(),
                };
                slots.entry((key.0, key.1, key.2, nth)).or_default().clone()
            };
            let run_once = self.engine.run_once.clone();
            let shared = loop {
                if let Some(shared) = slot.get() {
                    break shared.clone();
                }
                if run_once.my_turn(&self.host) {
                    let shared = slot
                        .get_or_init(|| async {
                            let before = self.facts().unwrap_or_default();
                            let result = self.execute(task, call, scope, &ctx).await;
                            let after = self.facts().unwrap_or_default();
                            let facts = after
                                .iter()
                                .filter(|(k, v)| before.get(k.as_str()) != Some(*v))
                                .map(|(k, v)| (k.clone(), (**v).clone()))
                                .collect::<Map<String, Value>>();
                            // As Ansible, the facts and registered result of a run_once task are every host's at
                            // once: `hostvars[other]` shows them even before that host moves on.
                            if !bypass_host_loop {
                                for host in run_once.hosts() {
                                    self.engine.facts.extend(&host, facts.clone());
                                }
                            }
                            Shared { result, facts, runner: self.host.clone() }
                        })
                        .await
                        .clone();
                    run_once.changed.notify_waiters();
                    break shared;
                }
                // Wait for an earlier host to run the task or to stop; register interest before checking again so
                // no wake-up is missed.
                let notified = run_once.changed.notified();
                tokio::pin!(notified);
                notified.as_mut().enable();
                if slot.get().is_none() && !run_once.my_turn(&self.host) {
                    notified.await;
                }
            };
            if shared.runner != self.host {
                if !bypass_host_loop {
                    self.set_facts(shared.facts);
                }
                // Ansible reports a run_once task for the host that ran it only: the others take its facts and
                // registered result without a line or a count of their own.
                let ignore = self.ignore_errors(task, scope, &ctx);
                // A failed run_once task fails every host (Ansible marks them all failed).
                return match status_of(&shared.result) {
                    TaskStatus::Failed if !ignore => self.record_failure(&tref, call, &shared.result),
                    _ => Flow::Continue,
                };
            }
            shared.result
        } else {
            self.execute(task, call, scope, &ctx).await
        };
        let ignore = self.ignore_errors(task, scope, &ctx);
        let status = self.finish(&tref, task, result.clone(), started, scope, ignore);
        match status {
            TaskStatus::Unreachable => Flow::Unreachable,
            TaskStatus::Failed if ignore => Flow::Continue,
            TaskStatus::Failed => self.record_failure(&tref, call, &result),
            _ => Flow::Continue,
        }
    }

    /// Keeps `ansible_failed_task` and `ansible_failed_result` for a `rescue` to see.
    fn record_failure(&mut self, tref: &TaskRef, call: &ModuleCall, result: &Map<String, Value>) -> Flow {
        let failed_task = json!({
            "name": tref.name,
            "action": call.module.name(),
            "file": tref.file.display().to_string(),
            "line": tref.line,
        });
        let mut last = Map::new();
        last.insert("ansible_failed_task".into(), failed_task);
        last.insert("ansible_failed_result".into(), clean(result));
        self.last_failure = Some(last);
        Flow::Failed
    }

    /// Runs a module task (loop, when, retries, conditions) and records its registered result and facts.
    async fn execute(&mut self, task: &Task, call: &ModuleCall, scope: &Scope, ctx: &Vars) -> Map<String, Value> {
        let result = match &task.loop_items {
            None => self.execute_once(task, call, scope, ctx.clone()).await,
            Some(items) => self.execute_loop(task, call, scope, ctx, items).await,
        };
        if let Some(name) = &task.register {
            self.engine.facts.insert(&self.host, name, clean(&result));
        }
        result
    }

    async fn execute_loop(
        &mut self,
        task: &Task,
        call: &ModuleCall,
        scope: &Scope,
        ctx: &Vars,
        items: &Value,
    ) -> Map<String, Value> {
        let rendered = match self.engine.templar.render_value(items, ctx) {
            Ok(v) => v,
            Err(e) => return failed(format!("{}: {}", Self::place(task), e.message)),
        };
        let mut list = match rendered {
            Value::Array(list) => list,
            other => {
                return failed(format!(
                    "{}: the `loop` value must resolve to a list, not {}",
                    Self::place(task),
                    modules::type_name(&other)
                ));
            }
        };
        if task.loop_flatten {
            list = list.into_iter().flat_map(|i| if let Value::Array(inner) = i { inner } else { vec![i] }).collect();
        }
        if list.is_empty() {
            let mut r = Map::new();
            r.insert("changed".into(), Value::Bool(false));
            r.insert("skipped".into(), Value::Bool(true));
            r.insert("skipped_reason".into(), Value::String("No items in the list".into()));
            r.insert("results".into(), Value::Array(Vec::new()));
            return r;
        }
        let loop_var = task.loop_var.clone().unwrap_or_else(|| "item".into());
        let mut results = Vec::new();
        let (mut changed, mut any_failed, mut all_skipped) = (false, false, true);
        for (index, item) in list.into_iter().enumerate() {
            let mut item_ctx = ctx.with("ansible_loop_var", &Value::String(loop_var.clone())).with(&loop_var, &item);
            if let Some(index_var) = &task.index_var {
                item_ctx = item_ctx.with("ansible_index_var", &json!(index_var)).with(index_var, &json!(index));
            }
            let mut res = self.execute_once(task, call, scope, item_ctx.clone()).await;
            res.insert(loop_var.clone(), item.clone());
            res.insert("ansible_loop_var".into(), Value::String(loop_var.clone()));
            if let Some(index_var) = &task.index_var {
                res.insert(index_var.clone(), json!(index));
                res.insert("ansible_index_var".into(), json!(index_var));
            }
            if let Some(label) = &task.loop_label {
                if let Ok(l) = self.engine.templar.render(label, &item_ctx) {
                    res.insert("_ansible_item_label".into(), l);
                }
            }
            changed |= flag(&res, "changed");
            any_failed |= flag(&res, "failed") || flag(&res, "unreachable");
            all_skipped &= flag(&res, "skipped");
            results.push(clean(&res));
        }
        let mut out = Map::new();
        out.insert("results".into(), Value::Array(results));
        out.insert("skipped".into(), Value::Bool(all_skipped));
        out.insert("changed".into(), Value::Bool(changed));
        let msg = if any_failed {
            out.insert("failed".into(), Value::Bool(true));
            "One or more items failed"
        } else if all_skipped {
            "All items skipped"
        } else {
            "All items completed"
        };
        out.insert("msg".into(), Value::String(msg.into()));
        out
    }

    /// One run of the task (one loop item): when, args, the module with retries, changed_when/failed_when.
    async fn execute_once(&mut self, task: &Task, call: &ModuleCall, scope: &Scope, ctx: Vars) -> Map<String, Value> {
        let templar = self.engine.templar.clone();
        let mut conditions = scope.when.clone();
        conditions.extend(task.when.iter().cloned());
        match self.conditions_hold(&conditions, &ctx) {
            Ok(None) => {}
            Ok(Some(cond)) => return skipped(&cond),
            Err(msg) => return failed(format!("{}: {msg}", Self::place(task))),
        }
        let render_num = |v: &Option<Value>, default: i64| -> Result<i64, String> {
            match v {
                None => Ok(default),
                Some(v) => {
                    let r = templar.render_value(v, &ctx).map_err(|e| e.message)?;
                    r.as_i64()
                        .or_else(|| r.as_str().and_then(|s| s.trim().parse().ok()))
                        .ok_or_else(|| format!("`{r}` is not a number"))
                }
            }
        };
        // Ansible: one run plus `retries` more; `until` alone allows 3 retries; the delay defaults to 5 s.
        let retries = match &task.retries {
            Some(_) => render_num(&task.retries, 0).map(|r| r.max(0).saturating_add(1)),
            None if !task.until.is_empty() => Ok(1 + 3),
            None => Ok(1),
        };
        let delay = render_num(&task.delay, 5);
        let (retries, delay) = match (retries, delay) {
            (Ok(r), Ok(d)) => {
                (u32::try_from(r).unwrap_or(u32::MAX), Duration::from_secs(if d < 0 { 1 } else { d as u64 }))
            }
            (Err(e), _) | (_, Err(e)) => return failed(format!("{}: {e}", Self::place(task))),
        };
        // `timeout:` bounds one run of the module, as Ansible's alarm does; the command is stopped on the host too.
        let task_limit = match render_num(&task.timeout, 0) {
            Ok(t) if t < 0 => {
                return failed(format!("{}: `timeout` must be 0 or more seconds, not {t}", Self::place(task)));
            }
            Ok(t) => (t > 0).then(|| Duration::from_secs(t as u64)),
            Err(e) => return failed(format!("{}: {e}", Self::place(task))),
        };
        let mut module_ctx = match self.module_context(task, scope, &ctx).await {
            Ok(m) => m,
            Err(result) => return result,
        };
        if let Some(limit) = task_limit {
            module_ctx.timeout = Some(module_ctx.timeout.map_or(limit, |t| t.min(limit)));
        }
        let mut vars = ctx;
        let mut result = Map::new();
        let mut exhausted = true;
        for attempt in 1..=retries {
            let run = async {
                match render_args(&templar, call, &vars) {
                    Ok(args) => match modules::run(&module_ctx, call.module, &args, &vars).await {
                        Ok(r) => Ok(Ok(r)),
                        Err(ConnectionError::Timeout(d)) if Some(d) == task_limit => Err(TaskTimedOut),
                        Err(ConnectionError::Timeout(d)) => {
                            Ok(Ok(failed(format!("command timed out after {}s", d.as_secs()))))
                        }
                        Err(e) => Ok(Err(unreachable(e.to_string()))),
                    },
                    Err(msg) => Ok(Ok(failed(format!("{}: {msg}", Self::place(task))))),
                }
            };
            let outcome = match task_limit {
                Some(limit) => tokio::time::timeout(limit, run).await.unwrap_or(Err(TaskTimedOut)),
                None => run.await,
            };
            result = match outcome {
                Ok(Ok(r)) => r,
                Ok(Err(unreachable)) => return unreachable,
                // As Ansible: the timeout ends the task at once, past failed_when and any retries left.
                Err(TaskTimedOut) => return timed_out(task_limit.unwrap_or_default()),
            };
            if !result.contains_key("failed") {
                let rc_failed = result.get("rc").is_some_and(|rc| rc != &json!(0) && rc != &json!("0"));
                result.insert("failed".into(), Value::Bool(rc_failed));
            }
            if retries > 1 {
                result.insert("attempts".into(), json!(attempt));
            }
            result.entry("changed").or_insert(Value::Bool(false));
            if let Some(facts) = result.get("ansible_facts") {
                vars = vars.with_map(facts);
            }
            if let Some(name) = &task.register {
                vars = vars.with(name, &clean(&result));
            }
            if !result.contains_key("skipped") {
                if !task.changed_when.is_empty() {
                    match self.all_true(&task.changed_when, &vars) {
                        Ok(b) => {
                            result.insert("changed".into(), Value::Bool(b));
                        }
                        Err(msg) => {
                            result.insert("failed".into(), Value::Bool(true));
                            result.insert("changed_when_result".into(), Value::String(msg));
                        }
                    }
                }
                if !task.failed_when.is_empty() {
                    match self.all_true(&task.failed_when, &vars) {
                        Ok(b) => {
                            result.insert("failed".into(), Value::Bool(b));
                            result.insert("failed_when_result".into(), Value::Bool(b));
                            if !b {
                                if let Some(exception) = result.remove("exception") {
                                    result.insert("failed_when_suppressed_exception".into(), exception);
                                }
                            }
                        }
                        Err(msg) => {
                            result.insert("failed".into(), Value::Bool(true));
                            result.insert("failed_when_result".into(), Value::String(msg));
                        }
                    }
                }
                if let Some(name) = &task.register {
                    vars = vars.with(name, &clean(&result));
                }
            }
            if retries <= 1 {
                exhausted = false;
                break;
            }
            let done =
                if task.until.is_empty() { Ok(!flag(&result, "failed")) } else { self.all_true(&task.until, &vars) };
            match done {
                Ok(true) => {
                    exhausted = false;
                    break;
                }
                Ok(false) => {}
                Err(msg) => {
                    result.insert("failed".into(), Value::Bool(true));
                    result.insert("msg".into(), Value::String(format!("{}: {msg}", Self::place(task))));
                    exhausted = false;
                    break;
                }
            }
            if attempt < retries {
                result.insert("retries".into(), json!(retries));
                self.engine.sink.event(&Event::TaskRetry {
                    host: self.host.clone(),
                    task: self.task_ref(task, &vars),
                    attempt,
                    retries: retries - 1,
                    result: clean(&result),
                });
                tokio::time::sleep(delay).await;
            }
        }
        if exhausted {
            // As Ansible: out of attempts, the task failed and `attempts` is the number of retries allowed.
            result.insert("attempts".into(), json!(retries - 1));
            result.insert("failed".into(), Value::Bool(true));
        }
        if let Some(facts) = result.get("ansible_facts").and_then(Value::as_object) {
            if !flag(&result, "failed") {
                self.set_facts(facts.clone());
            }
        }
        result
    }

    fn all_true(&self, conditions: &[Value], vars: &Vars) -> Result<bool, String> {
        self.conditions_hold(conditions, vars).map(|first_false| first_false.is_none())
    }

    /// Where and how the module runs: the (delegated) connection, become, environment.
    async fn module_context(
        &self,
        task: &Task,
        scope: &Scope,
        ctx: &Vars,
    ) -> Result<ModuleContext, Map<String, Value>> {
        let templar = &self.engine.templar;
        let place = Self::place(task);
        let render_str = |v: &str| -> Result<String, Map<String, Value>> {
            match templar.render(v, ctx) {
                Ok(Value::String(s)) => Ok(s),
                Ok(other) => Ok(other.to_string()),
                Err(e) => Err(failed(format!("{place}: {}", e.message))),
            }
        };
        let delegate = match task.delegate_to.as_ref().or(scope.delegate_to.as_ref()) {
            Some(d) => Some(render_str(d)?),
            None => None,
        };
        let target = delegate.clone().unwrap_or_else(|| self.host.clone());
        let var = |name: &str| ctx.get(name);
        let become_value = task.become_.clone().or_else(|| scope.become_.clone()).or_else(|| var("ansible_become"));
        let become_on = match become_value {
            Some(v) => templar.render_value(&v, ctx).ok().as_ref().and_then(parse_bool).unwrap_or(false),
            None => false,
        };
        let become_user = if become_on {
            let user =
                task.become_user.clone().or_else(|| scope.become_user.clone()).or_else(|| var("ansible_become_user"));
            let user = match user {
                Some(Value::String(s)) => render_str(&s)?,
                Some(Value::Null) | None => "root".into(),
                Some(other) => other.to_string(),
            };
            let method = var("ansible_become_method").and_then(|m| m.as_str().map(str::to_string));
            let method = method.unwrap_or_else(|| "sudo".into());
            if method != "sudo" {
                return Err(failed(format!("{place}: become method `{method}` is not supported (only sudo)")));
            }
            Some(user)
        } else {
            None
        };
        // Ansible's names for the sudo password; templated like any variable (a vault-decrypted `-e @file` value).
        let become_password =
            match (&become_user, var("ansible_become_password").or_else(|| var("ansible_become_pass"))) {
                (Some(_), Some(v)) if !v.is_null() => match templar.render_value(&v, ctx) {
                    Ok(Value::String(p)) if !p.is_empty() => Some(modules::BecomePassword::new(&p)),
                    Ok(Value::String(_)) => None,
                    Ok(other) => Some(modules::BecomePassword::new(&other.to_string())),
                    Err(e) => return Err(failed(format!("{place}: ansible_become_password: {}", e.message))),
                },
                _ => None,
            };
        let mut environment: Vec<(String, String)> = Vec::new();
        for env in scope.environment.iter().chain(task.environment.iter()) {
            match templar.render_value(env, ctx) {
                Ok(Value::Object(map)) => {
                    for (k, v) in map {
                        let v = match v {
                            Value::String(s) => s,
                            other => other.to_string(),
                        };
                        environment.retain(|(name, _)| name != &k);
                        environment.push((k, v));
                    }
                }
                Ok(other) => return Err(failed(format!("{place}: `environment` must be a mapping, got {other}"))),
                Err(e) => return Err(failed(format!("{place}: {}", e.message))),
            }
        }
        let needs_host = !matches!(
            call_module(task),
            Some(Module::Debug | Module::SetFact | Module::Assert | Module::Fail | Module::Pause)
        );
        let connection = if needs_host {
            match self.engine.pool.get(&target).await {
                Ok(c) => Some(c),
                // wait_for_connection waits for exactly this: it tries again through the pool.
                Err(_) if call_module(task) == Some(Module::WaitForConnection) => None,
                Err(e) => return Err(unreachable(e.to_string())),
            }
        } else {
            None
        };
        Ok(ModuleContext {
            connection,
            become_user,
            become_password,
            environment,
            timeout: self.engine.options.command_timeout,
            task_file: task.location.file.clone(),
            host: self.host.clone(),
            templar: self.engine.templar.clone(),
            options: self.engine.options.clone(),
            prompt_lock: self.engine.prompt_lock.clone(),
            pool: Some(self.engine.pool.clone()),
            target,
        })
    }
}

fn call_module(task: &Task) -> Option<Module> {
    match &task.action {
        Action::Module(call) => Some(call.module),
        _ => None,
    }
}

/// Templates a module's arguments. `assert: that` and `debug: var` hold bare expressions, evaluated by the module.
fn render_args(templar: &Templar, call: &ModuleCall, vars: &Vars) -> Result<Map<String, Value>, String> {
    let mut out = Map::new();
    for (k, v) in &call.args {
        let bare = matches!((call.module, k.as_str()), (Module::Assert, "that") | (Module::Debug, "var"));
        let value = if bare { v.clone() } else { templar.render_value(v, vars).map_err(|e| e.message)? };
        if let Some(value) = without_omit(value) {
            out.insert(k.clone(), value);
        }
    }
    Ok(out)
}

/// Ansible drops `omit` wherever it lands in module arguments: an argument, a mapping entry or a list item.
fn without_omit(value: Value) -> Option<Value> {
    match value {
        v if super::template::is_omit(&v) => None,
        Value::Array(items) => Some(Value::Array(items.into_iter().filter_map(without_omit).collect())),
        Value::Object(map) => {
            Some(Value::Object(map.into_iter().filter_map(|(k, v)| without_omit(v).map(|v| (k, v))).collect()))
        }
        other => Some(other),
    }
}

/// A controller-side file a task names (`script`, `copy: src`, `template: src`, `include_tasks`): absolute as given,
/// else in the `sub` directory (`files/`, `templates/`) beside the task file or its parent, beside the task file,
/// or under the current directory.
pub fn resolve_local(task_file: &Path, name: &str, sub: Option<&str>) -> PathBuf {
    let path = Path::new(name);
    if path.is_absolute() {
        return path.to_path_buf();
    }
    let dir = task_file.parent().unwrap_or(Path::new("."));
    let mut candidates = Vec::new();
    if let Some(sub) = sub {
        candidates.push(dir.join(sub).join(path));
        if let Some(parent) = dir.parent() {
            candidates.push(parent.join(sub).join(path));
        }
    }
    candidates.push(dir.join(path));
    candidates.push(path.to_path_buf());
    candidates.iter().find(|c| c.exists()).cloned().unwrap_or_else(|| dir.join(path))
}
