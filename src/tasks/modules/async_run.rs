//! `async`/`poll`: a module run as a job of the run's `AsyncJobs` (see `async_jobs`), waited for or not. Apart from
//! `async_status` because it runs the modules through their dispatcher, which runs `async_status`.

use std::time::Duration;

use serde_json::{Map, Value, json};

use super::async_jobs::job_fields;
use super::common::*;
use super::context::ModuleContext;
use super::run;
use crate::tasks::Vars;
use crate::tasks::model::Module;

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
