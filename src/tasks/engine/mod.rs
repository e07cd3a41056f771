//! The task engine: runs a task list on one host with Ansible's semantics (when, loop, until/retries,
//! failed_when/changed_when, register, ignore_errors, block/rescue/always, run_once, delegate_to, become).
//!
//! It never prints: every result goes out as an `Event`.
//!
//! Here: hosts, task lists, blocks, includes and one task's outcome. Apart: `run_once` (who runs a run_once task
//! and how the others take its outcome), `loops`, `attempts` (one run with retries, `until` and `timeout:`,
//! judged by changed_when/failed_when), `module_context` (connection, become, environment, arguments) and
//! `results` (Ansible's result shapes). The engine sits on `modules`, which sits on `model`.

mod args;
mod attempts;
mod handlers;
mod loops;
mod module_context;
mod results;
mod roles;
mod run_once;
mod throttle;

use std::collections::HashMap;
use std::future::Future;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Instant;

use serde_json::{Map, Value, json};

use super::connect::ConnectionPool;
use super::host_vars::{FactStore, HostFacts};
use super::model::{Action, Module, ModuleCall, Task, TaskFileCache};
use super::modules::{self, ModuleContext, failed};
pub use super::modules::{EngineOptions, Prompter, resolve_local};
use super::{Templar, Vars};
use crate::ansible_compat::boolean;
use crate::connection::ConnectionError;
use crate::events::{Event, SharedSink, TaskRef, TaskStatus};
use args::render_args;
pub use handlers::{answers_to, handler_not_found, handlers_file};
use results::{
    StopTask, clean, flag, is_internal, shown, skipped, status_of, timed_out, unreachable, with_bounded_stdout,
};
pub use roles::RoleCall;
pub use run_once::RunOnce;
pub use throttle::Throttles;

pub const NO_LOG_MESSAGE: &str =
    "the output has been hidden due to the fact that 'no_log: true' was specified for this result";

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
    /// Task files as parsed, shared by the includes of every host (and by the steps of an upgrade).
    pub task_files: Arc<TaskFileCache>,
    /// Serialises `pause` prompts, so hosts do not ask at once.
    prompt_lock: Arc<tokio::sync::Mutex<()>>,
    /// A host ran `meta: end_play`: the others run no further task.
    play_ended: std::sync::atomic::AtomicBool,
    /// The `throttle`d tasks' limits on the hosts running them at once.
    throttles: Throttles,
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
            task_files: Arc::default(),
            prompt_lock: Default::default(),
            play_ended: Default::default(),
            throttles: Default::default(),
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
            notified: Vec::new(),
            dependencies_run: std::collections::HashSet::new(),
        };
        self.run_once.mark(host, false);
        let mut flow = run.run_list(tasks, Scope::default()).await;
        // The end of a hook's task list is its play's end: the handlers still notified run now.
        if matches!(flow, Flow::Continue) {
            flow = run.flush_handlers().await;
        }
        self.run_once.mark(host, true);
        let outcome = HostOutcome {
            failed: matches!(flow, Flow::Failed),
            unreachable: matches!(flow, Flow::Unreachable),
            facts: self.facts.get(host).unwrap_or_default(),
        };
        self.sink.event(&Event::TaskListFinished {
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
    /// Facts and registered results the tasks left behind: the fact store's snapshot, shared, not copied (the first
    /// master's registered cluster reads are tens of MB on a large cluster).
    pub facts: Arc<HostFacts>,
}

enum Flow {
    Continue,
    Failed,
    Unreachable,
    /// `meta: end_host` / `end_play`: the host's task list ends here, not failed.
    Ended,
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
    throttle: Option<Value>,
    check_mode: Option<Value>,
    /// The innermost enclosing block has a `rescue` section.
    rescuable: bool,
}

struct HostRun<'e> {
    engine: &'e Engine,
    host: String,
    base: Vars,
    extra: Value,
    /// How often this host reached each task, to tell repeated run_once tasks apart.
    seen: HashMap<(std::sync::Arc<std::path::Path>, usize, usize), u32>,
    /// `ansible_failed_task` and `ansible_failed_result` of the last failure, for `rescue`.
    last_failure: Option<Map<String, Value>>,
    /// Handlers notified and not yet run: their file and position in it.
    notified: Vec<(PathBuf, usize)>,
    /// Role dependencies this host has run, by directory and params: ansible-core runs one once per play.
    dependencies_run: std::collections::HashSet<(PathBuf, String)>,
}

type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

impl HostRun<'_> {
    /// The variables a task sees, lowest precedence first: inventory, block and task vars, facts and registered
    /// results, extra vars.
    pub(super) fn context(&self, scope: &Scope, task_vars: &Map<String, Value>) -> Vars {
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
    pub(super) fn facts(&self) -> Option<Arc<HostFacts>> {
        self.engine.facts.get(&self.host)
    }
    pub(super) fn set_facts(&self, facts: Map<String, Value>) {
        self.engine.facts.extend(&self.host, facts);
    }
    pub(super) fn task_ref(&self, task: &Task, ctx: &Vars) -> TaskRef {
        let name = match &task.name {
            Some(name) => match self.engine.templar.render(name, ctx) {
                Ok(Value::String(s)) => s,
                Ok(other) => other.to_string(),
                Err(_) => name.clone(),
            },
            None => task.display_name(),
        };
        TaskRef { name, file: task.location.file.to_path_buf(), line: task.location.line }
    }
    /// `hook.yml:3:3: task "x"`: where a templating error happened.
    pub(super) fn place(task: &Task) -> String {
        format!("{}: task \"{}\"", task.location, task.display_name())
    }
    pub(super) fn run_list<'a>(&'a mut self, tasks: &'a [Task], scope: Scope) -> BoxFuture<'a, Flow> {
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
    pub(super) fn run_task<'a>(&'a mut self, task: &'a Task, scope: &'a Scope) -> BoxFuture<'a, Flow> {
        Box::pin(async move {
            if self.engine.play_ended.load(std::sync::atomic::Ordering::SeqCst) {
                return Flow::Ended;
            }
            match &task.action {
                Action::Module(call) if call.module == Module::Meta => self.run_meta(task, call, scope).await,
                Action::Module(call) if matches!(call.module, Module::ImportRole | Module::IncludeRole) => {
                    self.run_role(task, call, scope).await
                }
                Action::Block { block, rescue, always } => self.run_block(task, block, rescue, always, scope).await,
                Action::Include { file, import: true } => self.run_import(task, file, scope).await,
                Action::Include { file, import: false } => self.run_include(task, file, scope).await,
                Action::Module(call) => self.run_module_task(task, call, scope).await,
            }
        })
    }
    pub(super) fn child_scope(task: &Task, scope: &Scope) -> Scope {
        let mut child = scope.clone();
        child.vars.extend(task.vars.iter().map(|(k, v)| (k.clone(), v.clone())));
        child.when.extend(task.when.iter().cloned());
        let inherit = |mine: &Option<Value>, theirs: &Option<Value>| mine.clone().or_else(|| theirs.clone());
        child.become_ = inherit(&task.become_, &scope.become_);
        child.become_user = inherit(&task.become_user, &scope.become_user);
        child.ignore_errors = inherit(&task.ignore_errors, &scope.ignore_errors);
        child.no_log = inherit(&task.no_log, &scope.no_log);
        child.run_once = inherit(&task.run_once, &scope.run_once);
        child.throttle = inherit(&task.throttle, &scope.throttle);
        child.check_mode = inherit(&task.check_mode, &scope.check_mode);
        child.delegate_to = task.delegate_to.clone().or_else(|| scope.delegate_to.clone());
        child.environment.extend(task.environment.iter().cloned());
        child
    }
    pub(super) async fn run_block(
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
            if !matches!(flow, Flow::Unreachable | Flow::Ended) {
                let after = self.run_list(always, always_scope).await;
                if matches!(flow, Flow::Continue) {
                    flow = after;
                }
            }
        }
        flow
    }
    /// `import_tasks` is static in Ansible: the file's tasks take the import's place, each inheriting its keywords,
    /// its `when` among them (a false one skips each task, not the import); the import itself reports nothing.
    pub(super) async fn run_import(&mut self, task: &Task, file: &str, scope: &Scope) -> Flow {
        let scope = Self::child_scope(task, scope);
        let ctx = self.context(&scope, &Map::new());
        let loaded = match self.engine.templar.render(file, &ctx) {
            Ok(name) => {
                let name = name.as_str().map(str::to_string).unwrap_or_else(|| name.to_string());
                let path = resolve_local(&task.location.file, &name, None);
                self.engine.task_files.load(&path).map_err(|e| format!("{}: {e}", Self::place(task)))
            }
            Err(e) => Err(format!("{}: {}", Self::place(task), e.message)),
        };
        match loaded {
            Ok(tasks) => self.run_list(&tasks, scope).await,
            Err(msg) => {
                let ignore = self.ignore_errors(task, &scope, &ctx);
                self.finish(&self.task_ref(task, &ctx), task, &failed(msg), Instant::now(), &scope, ignore);
                if ignore { Flow::Continue } else { Flow::Failed }
            }
        }
    }
    pub(super) async fn run_include(&mut self, task: &Task, file: &str, scope: &Scope) -> Flow {
        let scope = Self::child_scope(task, scope);
        let ctx = self.context(&scope, &Map::new());
        let tref = self.task_ref(task, &ctx);
        let ignore = self.ignore_errors(task, &scope, &ctx);
        let fail = |this: &Self, msg: String| {
            this.finish(&tref, task, &failed(msg), Instant::now(), &scope, ignore);
            if ignore { Flow::Continue } else { Flow::Failed }
        };
        // A looped include runs the file once per item, with the loop (and index) variable set for its tasks.
        let items: Vec<Option<(usize, Value)>> = match &task.loop_items {
            None => vec![None],
            Some(items) => match self.loop_list(task, items, &ctx) {
                Ok(list) => list.into_iter().enumerate().map(Some).collect(),
                Err(no_list) => return fail(self, no_list.into_message()),
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
                    self.finish(&tref, task, &skipped(&false_condition), Instant::now(), &inner, ignore);
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
            let tasks = match self.engine.task_files.load(&path) {
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
            self.finish(&tref, task, &included, Instant::now(), &inner, ignore);
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
    pub(super) fn conditions_hold(&self, conditions: &[Value], ctx: &Vars) -> Result<Option<String>, String> {
        for cond in conditions {
            let (holds, text) = match cond {
                Value::Bool(b) => (*b, if *b { "True".to_string() } else { "False".to_string() }),
                Value::String(s) => match self.engine.templar.eval_condition(cond, ctx) {
                    Ok(b) => (b, s.clone()),
                    Err(e) => return Err(format!("the conditional check '{s}' failed: {}", e.message)),
                },
                other => (boolean(other).unwrap_or(false), other.to_string()),
            };
            if !holds {
                return Ok(Some(text));
            }
        }
        Ok(None)
    }
    pub(super) fn finish(
        &self,
        tref: &TaskRef,
        task: &Task,
        result: &Map<String, Value>,
        started: Instant,
        scope: &Scope,
        ignore_errors: bool,
    ) -> TaskStatus {
        let status = status_of(result);
        let ignored = status == TaskStatus::Failed && ignore_errors;
        let no_log = task.no_log.as_ref().or(scope.no_log.as_ref()).and_then(boolean).unwrap_or(false);
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
            shown(result)
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
    pub(super) fn ignore_errors(&self, task: &Task, scope: &Scope, ctx: &Vars) -> bool {
        let Some(value) = task.ignore_errors.as_ref().or(scope.ignore_errors.as_ref()) else { return false };
        self.engine.templar.render_value(value, ctx).ok().as_ref().and_then(boolean).unwrap_or(false)
    }

    pub(super) async fn run_module_task(&mut self, task: &Task, call: &ModuleCall, scope: &Scope) -> Flow {
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
            Some(v) => self.engine.templar.render_value(v, &ctx).ok().as_ref().and_then(boolean).unwrap_or(false),
            None => false,
        };
        // Ansible runs `pause` once for all hosts (its action bypasses the host loop): the first host pauses and
        // reports it; the others neither report it nor get its registered result.
        let bypass_host_loop = call.module == Module::Pause && !explicit_run_once;
        let run_once = explicit_run_once || bypass_host_loop;

        let result = if run_once {
            let shared =
                self.run_once_shared(task, call, scope, &ctx, (key.0, key.1, key.2, nth), bypass_host_loop).await;
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
            match self.throttle_limit(task, scope, &ctx) {
                Ok(None) => self.execute(task, call, scope, &ctx).await,
                Ok(Some(limit)) => {
                    let _place = self.enter_throttled(task, limit).await;
                    self.execute(task, call, scope, &ctx).await
                }
                Err(msg) => failed(format!("{}: {msg}", Self::place(task))),
            }
        };
        let mut result = result;
        // A changed task notifies its handlers; one that names no handler fails, as the play does in Ansible.
        if status_of(&result) == TaskStatus::Changed && !task.notify.is_empty() {
            if let Err(msg) = self.notify(task) {
                result = failed(format!("{}: {msg}", Self::place(task)));
            }
        }
        let ignore = self.ignore_errors(task, scope, &ctx);
        let status = self.finish(&tref, task, &result, started, scope, ignore);
        match status {
            TaskStatus::Unreachable => Flow::Unreachable,
            TaskStatus::Failed if ignore => Flow::Continue,
            TaskStatus::Failed => self.record_failure(&tref, call, &result),
            _ => Flow::Continue,
        }
    }
    /// Keeps `ansible_failed_task` and `ansible_failed_result` for a `rescue` to see.
    pub(super) fn record_failure(&mut self, tref: &TaskRef, call: &ModuleCall, result: &Map<String, Value>) -> Flow {
        let failed_task = json!({
            "name": tref.name,
            "action": call.module_name(),
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
    pub(super) async fn execute(
        &mut self,
        task: &Task,
        call: &ModuleCall,
        scope: &Scope,
        ctx: &Vars,
    ) -> Map<String, Value> {
        let result = match &task.loop_items {
            None => self.execute_once(task, call, scope, ctx.clone()).await,
            Some(items) => self.execute_loop(task, call, scope, ctx, items).await,
        };
        let Some(name) = &task.register else { return result };
        // The whole result moves into the fact store; the task goes on with a copy whose `stdout` is bounded as the
        // events show it, so a registered cluster read (tens of MB on a large cluster) is never copied.
        let going_on = with_bounded_stdout(&result);
        let mut registered = result;
        registered.retain(|k, _| !is_internal(k));
        self.engine.facts.insert(&self.host, name, Value::Object(registered));
        going_on
    }
}
