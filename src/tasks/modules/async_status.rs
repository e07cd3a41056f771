//! `async_status`: what a job of the run's `AsyncJobs` (see `async_jobs`) has come to.

use serde_json::{Map, Value, json};

use super::async_jobs::job_fields;
use super::common::*;
use super::context::ModuleContext;

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
