//! Ansible's result shapes and how a result reads: failed, unreachable, skipped, timed out, its status.

use std::time::Duration;

use serde_json::{Map, Value, json};

use crate::ansible_compat::boolean;
use crate::connection::capture::bounded_text;
use crate::events::TaskStatus;
use crate::tasks::modules::failed;

/// Ansible's internal `_ansible_*` keys of a result, which `register` does not keep and events do not carry.
pub(super) fn is_internal(key: &str) -> bool {
    key.starts_with("_ansible")
}

/// A result as `register` keeps it and events carry it: without Ansible's internal keys.
pub(super) fn clean(result: &Map<String, Value>) -> Value {
    Value::Object(result.iter().filter(|(k, _)| !is_internal(k)).map(|(k, v)| (k.clone(), v.clone())).collect())
}

/// A result as events show it: cleaned, and a `stdout` read whole (the run's own cluster reads, which it parses)
/// bounded as any command's output is, so a 5,000-node list is not written into every event and log at each poll.
pub(super) fn shown(result: &Map<String, Value>) -> Value {
    Value::Object(bounded_copy(result, true))
}

/// A copy of a result with its `stdout` bounded as events show it (the same copy when it is within the bound).
pub(super) fn with_bounded_stdout(result: &Map<String, Value>) -> Map<String, Value> {
    bounded_copy(result, false)
}

fn bounded_copy(result: &Map<String, Value>, clean: bool) -> Map<String, Value> {
    result
        .iter()
        .filter(|(k, _)| !(clean && is_internal(k)))
        .map(|(k, v)| match v {
            Value::String(text) if k == "stdout" => (k.clone(), Value::String(bounded_text(text).into_owned())),
            _ => (k.clone(), v.clone()),
        })
        .collect()
}

pub(super) fn flag(result: &Map<String, Value>, key: &str) -> bool {
    result.get(key).and_then(boolean).unwrap_or(false)
}

pub(super) fn status_of(result: &Map<String, Value>) -> TaskStatus {
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

pub(super) fn unreachable(msg: String) -> Map<String, Value> {
    let mut r = Map::new();
    r.insert("unreachable".into(), Value::Bool(true));
    r.insert("msg".into(), Value::String(msg));
    r.insert("changed".into(), Value::Bool(false));
    r
}

/// Why a task's attempts end before a module result is judged.
pub(super) enum StopTask {
    /// The task's `timeout:` passed.
    TimedOut,
    /// The task failed before its module ran (its arguments could not be rendered): this is its result.
    Failed(Map<String, Value>),
}

/// Ansible's (2.19) result for a task that outlasted its `timeout:`.
pub(super) fn timed_out(limit: Duration) -> Map<String, Value> {
    let seconds = limit.as_secs();
    let mut r = failed(format!("Timed out after {seconds} second(s)."));
    r.insert("timedout".into(), json!({ "period": seconds }));
    r
}

pub(super) fn skipped(false_condition: &str) -> Map<String, Value> {
    let mut r = Map::new();
    r.insert("changed".into(), Value::Bool(false));
    r.insert("skipped".into(), Value::Bool(true));
    r.insert("skip_reason".into(), Value::String("Conditional result was False".into()));
    r.insert("false_condition".into(), Value::String(false_condition.into()));
    r
}
