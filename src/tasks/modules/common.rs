//! What every module shares: the result shape, the options, reading arguments, Python's time formats.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use serde_json::{Map, Value};

use super::async_jobs::AsyncJobs;
use crate::ansible_compat::boolean;
use crate::connection::ConnectionError;

pub(super) type ModuleResult = Result<Map<String, Value>, ConnectionError>;

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
    /// The run's `async` jobs, for `async_status`.
    pub async_jobs: AsyncJobs,
    /// The invocation's vault passwords, for `include_vars` of an encrypted file.
    pub vault: crate::vault::VaultSecrets,
}

/// A failed result with Ansible's `msg`.
pub(crate) fn failed(msg: impl Into<String>) -> Map<String, Value> {
    let mut m = Map::new();
    m.insert("failed".into(), Value::Bool(true));
    m.insert("msg".into(), Value::String(msg.into()));
    m.insert("changed".into(), Value::Bool(false));
    m
}

/// A module's own failure, as ansible-core 2.19 reports `fail_json`: with its `exception` placeholder.
pub(crate) fn fail_json(msg: impl Into<String>) -> Map<String, Value> {
    let mut r = failed(msg);
    r.insert("exception".into(), Value::String(NO_TRACEBACK.into()));
    r
}

/// The name Ansible's `backup_local` gives a file's backup: the file's, the process id and the time.
pub(crate) fn backup_name(path: &str) -> String {
    let stamp = timestamp(SystemTime::now()).replace([' ', ':'], "@");
    format!("{path}.{}.{stamp}~", std::process::id())
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

pub(super) fn obj(v: Value) -> Map<String, Value> {
    match v {
        Value::Object(m) => m,
        _ => Map::new(),
    }
}

pub(super) fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

pub(super) fn arg_str(args: &Map<String, Value>, key: &str) -> Option<String> {
    args.get(key).filter(|v| !v.is_null()).map(text)
}

pub(super) fn arg_bool(args: &Map<String, Value>, key: &str, default: bool) -> bool {
    args.get(key).and_then(boolean).unwrap_or(default)
}

pub(super) fn arg_int(args: &Map<String, Value>, key: &str) -> Result<Option<i64>, String> {
    match args.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v
            .as_i64()
            .or_else(|| v.as_f64().map(|f| f as i64))
            .or_else(|| v.as_str().and_then(|s| s.trim().parse().ok()))
            .map(Some)
            .ok_or_else(|| format!("argument `{key}` must be a number, got {v}")),
    }
}

/// `2024-05-01 12:00:00.123456`, as Python's `datetime.now()` prints (UTC here).
pub fn timestamp(t: SystemTime) -> String {
    let d = t.duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default();
    let (year, month, day, hour, minute, second) = crate::time_format::civil(t);
    format!("{year:04}-{month:02}-{day:02} {hour:02}:{minute:02}:{second:02}.{:06}", d.subsec_micros())
}

/// `0:00:01.002003`, as Python prints a timedelta.
pub fn delta(d: Duration) -> String {
    let s = d.as_secs();
    format!("{}:{:02}:{:02}.{:06}", s / 3600, s % 3600 / 60, s % 60, d.subsec_micros())
}

pub(super) fn lines(s: &str) -> Value {
    Value::Array(s.lines().map(|l| Value::String(l.to_string())).collect())
}

pub const NO_TRACEBACK: &str = "(traceback unavailable)";

/// A unique name for a temporary file on the host.
pub(super) fn remote_tmp(stem: &str) -> String {
    static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let nanos = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default().subsec_nanos();
    format!("/tmp/.upgrade-{}-{n}-{nanos}-{stem}", std::process::id())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_print_like_python() {
        assert_eq!(
            timestamp(SystemTime::UNIX_EPOCH + Duration::from_micros(1_700_000_000_123_456)),
            "2023-11-14 22:13:20.123456"
        );
        assert_eq!(delta(Duration::from_micros(3_723_000_042)), "1:02:03.000042");
    }
}
