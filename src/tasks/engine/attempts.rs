//! One run of a task (or of one loop item): `when`, then the module with `retries`/`until`/`delay` and the task's
//! `timeout:`, then `changed_when`/`failed_when`.

use std::time::Duration;

use serde_json::{Map, Value, json};

use super::*;

/// How often and how long a task's module may run.
struct Attempts {
    /// One run plus the retries.
    count: u32,
    delay: Duration,
    /// The task's `timeout:` for one run.
    limit: Option<Duration>,
}

impl HostRun<'_> {
    /// One run of the task (one loop item): when, args, the module with retries, changed_when/failed_when.
    // A little over 100 lines: the attempts loop carries the result, the variables and whether attempts ran out
    // together; its steps (settings, verdict, module context) are already apart.
    pub(super) async fn execute_once(
        &mut self,
        task: &Task,
        call: &ModuleCall,
        scope: &Scope,
        ctx: Vars,
    ) -> Map<String, Value> {
        let templar = self.engine.templar.clone();
        let mut conditions = scope.when.clone();
        conditions.extend(task.when.iter().cloned());
        match self.conditions_hold(&conditions, &ctx) {
            Ok(None) => {}
            Ok(Some(cond)) => return skipped(&cond),
            Err(msg) => return failed(format!("{}: {msg}", Self::place(task))),
        }
        let Attempts { count: retries, delay, limit: task_limit } = match self.attempts(task, &ctx) {
            Ok(a) => a,
            Err(e) => return failed(format!("{}: {e}", Self::place(task))),
        };
        let mut module_ctx = match self.module_context(task, scope, &ctx).await {
            Ok(m) => m,
            Err(result) => return result,
        };
        if let Some(limit) = task_limit {
            module_ctx.timeout = Some(module_ctx.timeout.map_or(limit, |t| t.min(limit)));
        }
        let job = match self.async_settings(task, &ctx) {
            Ok(job) => job,
            Err(e) => return failed(format!("{}: {e}", Self::place(task))),
        };
        let mut vars = ctx;
        let mut result = Map::new();
        let mut exhausted = true;
        for attempt in 1..=retries {
            let run = async {
                match render_args(&templar, call, &vars) {
                    Ok(args) => match run_module(&module_ctx, call.module, &args, &vars, job).await {
                        Ok(r) => Ok(Ok(r)),
                        Err(ConnectionError::Timeout(d)) if Some(d) == task_limit => Err(StopTask::TimedOut),
                        Err(ConnectionError::Timeout(d)) => {
                            Ok(Ok(failed(format!("command timed out after {}s", d.as_secs()))))
                        }
                        Err(e) => Ok(Err(unreachable(e.to_string()))),
                    },
                    // As Ansible: arguments that cannot be rendered (an undefined variable) fail the task at once,
                    // before `until` or a retry reads a result that has none of the module's fields.
                    Err(msg) => Err(StopTask::Failed(failed(format!("{}: {msg}", Self::place(task))))),
                }
            };
            let outcome = match task_limit {
                Some(limit) => tokio::time::timeout(limit, run).await.unwrap_or(Err(StopTask::TimedOut)),
                None => run.await,
            };
            result = match outcome {
                Ok(Ok(r)) => r,
                Ok(Err(unreachable)) => return unreachable,
                // As Ansible: the timeout ends the task at once, past failed_when and any retries left.
                Err(StopTask::TimedOut) => return timed_out(task_limit.unwrap_or_default()),
                Err(StopTask::Failed(result)) => return result,
            };
            // An action that skipped itself (uri or script in check mode) reports no `failed`, as Ansible's does.
            let skipped_itself = flag(&result, "skipped") && !result.contains_key("rc");
            if !result.contains_key("failed") && !skipped_itself {
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
            // The registered variable is made for what reads it next (changed_when/failed_when, then `until` and the
            // retry's name): a registered cluster read is tens of MB on a large cluster, copied each time.
            let judged = !result.contains_key("skipped");
            // `changed_when: false` reads nothing; only an expression may read the registered result.
            let expression = |conditions: &[Value]| conditions.iter().any(|c| !matches!(c, Value::Bool(_)));
            if let Some(name) = &task.register {
                if judged && (expression(&task.changed_when) || expression(&task.failed_when)) {
                    vars = vars.with(name, &clean(&result));
                }
            }
            if judged {
                self.judge(task, &mut result, &vars);
            }
            if retries <= 1 {
                exhausted = false;
                break;
            }
            if let Some(name) = &task.register {
                vars = vars.with(name, &clean(&result));
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

    /// `changed_when` and `failed_when` applied to a result (`vars` holds the registered result they may read).
    fn judge(&self, task: &Task, result: &mut Map<String, Value>, vars: &Vars) {
        if !task.changed_when.is_empty() {
            match self.all_true(&task.changed_when, vars) {
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
            match self.all_true(&task.failed_when, vars) {
                Ok(b) => {
                    result.insert("failed".into(), Value::Bool(b));
                    result.insert("failed_when_result".into(), Value::Bool(b));
                    if !b {
                        if let Some(exception) = result.remove("exception") {
                            result.insert("failed_when_suppressed_exception".into(), exception);
                        }
                    } else {
                        // ansible-core 2.19 gives a result that failed by `failed_when` alone these two (a message
                        // the module gave, even an empty one, is kept).
                        if !result.contains_key("msg") {
                            let unknown = "Task failed: Action failed: Unknown error.";
                            result.insert("msg".into(), Value::String(unknown.into()));
                        }
                        result.entry("exception").or_insert_with(|| Value::String(modules::NO_TRACEBACK.into()));
                    }
                }
                Err(msg) => {
                    result.insert("failed".into(), Value::Bool(true));
                    result.insert("failed_when_result".into(), Value::String(msg));
                }
            }
        }
    }

    /// How often and how long the module may run: Ansible runs it once plus `retries` more (`until` alone allows 3
    /// retries), `delay` seconds apart (5 by default), each run bounded by the task's `timeout:`.
    /// `async` and `poll` seconds, when the task runs its module as a job (poll 15 by default, as in Ansible).
    fn async_settings(&self, task: &Task, ctx: &Vars) -> Result<Option<(u64, u64)>, String> {
        let Some(limit) = &task.async_ else { return Ok(None) };
        let num = |v: &Value| -> Result<i64, String> {
            let r = self.engine.templar.render_value(v, ctx).map_err(|e| e.message)?;
            r.as_i64()
                .or_else(|| r.as_str().and_then(|s| s.trim().parse().ok()))
                .ok_or_else(|| format!("`{r}` is not a number"))
        };
        let limit = num(limit)?;
        let poll = match &task.poll {
            Some(p) => num(p)?,
            None => 15,
        };
        // `async: 0` runs the module as any other task, as in Ansible.
        Ok((limit > 0).then(|| (limit as u64, poll.max(0) as u64)))
    }

    fn attempts(&self, task: &Task, ctx: &Vars) -> Result<Attempts, String> {
        let templar = &self.engine.templar;
        let render_num = |v: &Option<Value>, default: i64| -> Result<i64, String> {
            match v {
                None => Ok(default),
                Some(v) => {
                    let r = templar.render_value(v, ctx).map_err(|e| e.message)?;
                    r.as_i64()
                        .or_else(|| r.as_str().and_then(|s| s.trim().parse().ok()))
                        .ok_or_else(|| format!("`{r}` is not a number"))
                }
            }
        };
        let retries = match &task.retries {
            Some(_) => render_num(&task.retries, 0)?.max(0).saturating_add(1),
            None if !task.until.is_empty() => 1 + 3,
            None => 1,
        };
        let delay = render_num(&task.delay, 5)?;
        // `timeout:` bounds one run of the module, as Ansible's alarm does; the command is stopped on the host too.
        let limit = match render_num(&task.timeout, 0)? {
            t if t < 0 => return Err(format!("`timeout` must be 0 or more seconds, not {t}")),
            t => (t > 0).then(|| Duration::from_secs(t as u64)),
        };
        Ok(Attempts {
            count: u32::try_from(retries).unwrap_or(u32::MAX),
            delay: Duration::from_secs(if delay < 0 { 1 } else { delay as u64 }),
            limit,
        })
    }

    pub(super) fn all_true(&self, conditions: &[Value], vars: &Vars) -> Result<bool, String> {
        self.conditions_hold(conditions, vars).map(|first_false| first_false.is_none())
    }
}

/// The module, run in place or as an `async` job.
async fn run_module(
    ctx: &ModuleContext,
    module: Module,
    args: &Map<String, Value>,
    vars: &Vars,
    job: Option<(u64, u64)>,
) -> Result<Map<String, Value>, ConnectionError> {
    match job {
        Some((limit, poll)) => modules::run_async(ctx, module, args, vars, limit, poll).await,
        None => modules::run(ctx, module, args, vars).await,
    }
}
