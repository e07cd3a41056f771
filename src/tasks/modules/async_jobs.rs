//! `async`/`poll` and `async_status`, with ansible-core 2.19's results. A task with `async: N` runs its module as a
//! job: with `poll: P` the task waits for it, asking every P seconds, and fails with Ansible's message when it has
//! not finished within N seconds; with `poll: 0` the task returns at once with the job's id (`ansible_job_id`) and
//! a later `async_status: jid=...` (in an `until` loop, usually) reports it, `finished` once done, with the module's
//! result. Ansible's job runs under `async_wrapper` on the host; here it runs on the controller, over the host's
//! connection, for the length of the run: the job is the same for the task, but it does not outlive `upgrade`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Map, Value, json};

use super::*;

/// The run's jobs by id: `None` while running, the module's result once it has finished.
#[derive(Clone, Default)]
pub struct AsyncJobs(Arc<Mutex<HashMap<String, (String, Option<Map<String, Value>>)>>>);

impl AsyncJobs {
    fn get(&self, jid: &str) -> Option<(String, Option<Map<String, Value>>)> {
        self.0.lock().ok()?.get(jid).cloned()
    }
    fn set(&self, jid: &str, results_file: &str, result: Option<Map<String, Value>>) {
        if let Ok(mut jobs) = self.0.lock() {
            jobs.insert(jid.to_string(), (results_file.to_string(), result));
        }
    }
    fn remove(&self, jid: &str) {
        if let Ok(mut jobs) = self.0.lock() {
            jobs.remove(jid);
        }
    }
}

/// The fields Ansible gives a job's result.
fn job_fields(result: &mut Map<String, Value>, jid: &str, results_file: &str, finished: bool) {
    result.insert("ansible_job_id".into(), json!(jid));
    result.insert("results_file".into(), json!(results_file));
    result.insert("started".into(), json!(true));
    result.insert("finished".into(), json!(finished));
}

/// Runs a module as a job of at most `limit` seconds; waits for it asking every `poll` seconds, or not at all.
pub async fn run_async(
    ctx: &ModuleContext,
    module: Module,
    args: &Map<String, Value>,
    vars: &Vars,
    limit: u64,
    poll: u64,
) -> ModuleResult {
    static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().subsec_nanos();
    let jid = format!("j{:012}.{}", (u64::from(nanos) * 7919 + n) % 1_000_000_000_000, std::process::id());
    let home = match &ctx.connection {
        Some(_) => String::from_utf8_lossy(&ctx.exec("echo \"$HOME\"", None).await?.stdout).trim().to_string(),
        None => std::env::var("HOME").unwrap_or_default(),
    };
    let results_file = format!("{home}/.ansible_async/{jid}");
    let jobs = ctx.options.async_jobs.clone();
    jobs.set(&jid, &results_file, None);
    let job = {
        let (ctx, args, vars, jobs, jid, results_file) =
            (ctx.clone(), args.clone(), vars.clone(), jobs.clone(), jid.clone(), results_file.clone());
        async move {
            let result = match tokio::time::timeout(Duration::from_secs(limit), run(&ctx, module, &args, &vars)).await {
                Ok(Ok(result)) => result,
                Ok(Err(e)) => failed(e.to_string()),
                // async_wrapper's words for a job it stopped at its time.
                Err(_) => failed("Timeout exceeded"),
            };
            jobs.set(&jid, &results_file, Some(result));
        }
    };
    let handle = tokio::spawn(job);
    if poll == 0 {
        let mut started = Map::new();
        started.insert("changed".into(), json!(true));
        started.insert("failed".into(), json!(false));
        job_fields(&mut started, &jid, &results_file, false);
        return Ok(started);
    }
    // As Ansible's executor: look every `poll` seconds while the job's time lasts, counting the polls rather than
    // the clock; a job past its time has been stopped and says so ("Timeout exceeded").
    let mut time_left = limit as i64;
    while time_left > 0 {
        tokio::time::sleep(Duration::from_secs(poll)).await;
        if let Some((_, Some(mut result))) = jobs.get(&jid) {
            jobs.remove(&jid);
            job_fields(&mut result, &jid, &results_file, true);
            return Ok(result);
        }
        time_left -= poll as i64;
    }
    handle.abort();
    jobs.remove(&jid);
    let mut r = failed(format!("async task did not complete within the requested time - {limit}s"));
    r.insert("exception".into(), json!(NO_TRACEBACK));
    let mut job = Map::new();
    job_fields(&mut job, &jid, &results_file, false);
    for key in ["stderr", "stdout"] {
        job.insert(key.into(), json!(""));
        job.insert(format!("{key}_lines"), json!([]));
    }
    r.insert("async_result".into(), Value::Object(job));
    Ok(r)
}

/// `async_status: jid=... [mode=status|cleanup]`.
pub(super) fn async_status(ctx: &ModuleContext, args: &Map<String, Value>) -> Map<String, Value> {
    let jid = arg_str(args, "jid").unwrap_or_default();
    let jobs = &ctx.options.async_jobs;
    let mode = arg_str(args, "mode").unwrap_or_else(|| "status".into());
    let Some((results_file, result)) = jobs.get(&jid) else {
        let mut r = failed("could not find job");
        r.insert("exception".into(), json!(NO_TRACEBACK));
        let home = std::env::var("HOME").unwrap_or_default();
        job_fields(&mut r, &jid, &format!("{home}/.ansible_async/{jid}"), true);
        for key in ["stderr", "stdout"] {
            r.insert(key.into(), json!(""));
            r.insert(format!("{key}_lines"), json!([]));
        }
        return r;
    };
    if mode == "cleanup" {
        jobs.remove(&jid);
        return obj(json!({"ansible_job_id": jid, "erased": results_file, "changed": false}));
    }
    match result {
        Some(mut result) => {
            job_fields(&mut result, &jid, &results_file, true);
            result
        }
        None => {
            let mut running = Map::new();
            running.insert("changed".into(), json!(false));
            job_fields(&mut running, &jid, &results_file, false);
            for key in ["stderr", "stdout"] {
                running.insert(key.into(), json!(""));
                running.insert(format!("{key}_lines"), json!([]));
            }
            running
        }
    }
}
