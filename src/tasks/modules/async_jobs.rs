//! `async`/`poll` and `async_status`, with ansible-core 2.19's results. A task with `async: N` runs its module as a
//! job: with `poll: P` the task waits for it, asking every P seconds, and fails with Ansible's message when it has
//! not finished within N seconds; with `poll: 0` the task returns at once with the job's id (`ansible_job_id`) and
//! a later `async_status: jid=...` (in an `until` loop, usually) reports it, `finished` once done, with the module's
//! result. Ansible's job runs under `async_wrapper` on the host; here it runs on the controller, over the host's
//! connection, for the length of the run: the job is the same for the task, but it does not outlive `upgrade`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use serde_json::{Map, Value, json};

/// The run's jobs by id: `None` while running, the module's result once it has finished.
#[derive(Clone, Default)]
pub struct AsyncJobs(Arc<Mutex<HashMap<String, (String, Option<Map<String, Value>>)>>>);

impl AsyncJobs {
    pub(super) fn get(&self, jid: &str) -> Option<(String, Option<Map<String, Value>>)> {
        self.0.lock().ok()?.get(jid).cloned()
    }
    pub(super) fn set(&self, jid: &str, results_file: &str, result: Option<Map<String, Value>>) {
        if let Ok(mut jobs) = self.0.lock() {
            jobs.insert(jid.to_string(), (results_file.to_string(), result));
        }
    }
    pub(super) fn remove(&self, jid: &str) {
        if let Ok(mut jobs) = self.0.lock() {
            jobs.remove(jid);
        }
    }
}

/// The fields Ansible gives a job's result.
pub(super) fn job_fields(result: &mut Map<String, Value>, jid: &str, results_file: &str, finished: bool) {
    result.insert("ansible_job_id".into(), json!(jid));
    result.insert("results_file".into(), json!(results_file));
    result.insert("started".into(), json!(true));
    result.insert("finished".into(), json!(finished));
}
