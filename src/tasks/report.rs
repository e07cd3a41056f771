//! The text reporter of `run-tasks`: a line per task result as results arrive, then Ansible's PLAY RECAP.

use std::io::Write;
use std::sync::Mutex;

use indexmap::IndexMap;
use serde_json::Value;

use crate::events::{Event, EventSink, TaskStatus};

/// Per-host counts, as Ansible's recap has them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HostStats {
    pub ok: u32,
    pub changed: u32,
    pub unreachable: u32,
    pub failed: u32,
    pub skipped: u32,
    pub rescued: u32,
    pub ignored: u32,
}

impl HostStats {
    /// Counts one finished task the way Ansible's strategy does: `ok` includes changed tasks and ignored failures.
    pub fn count(&mut self, status: TaskStatus, result: &Value, ignored: bool, rescued: bool) {
        let changed = result.get("changed").and_then(Value::as_bool).unwrap_or(false);
        match status {
            TaskStatus::Ok => self.ok += 1,
            TaskStatus::Changed => {
                self.ok += 1;
                self.changed += 1;
            }
            TaskStatus::Skipped => self.skipped += 1,
            TaskStatus::Unreachable => self.unreachable += 1,
            TaskStatus::Failed if ignored => {
                self.ok += 1;
                self.ignored += 1;
                if changed {
                    self.changed += 1;
                }
            }
            TaskStatus::Failed if rescued => self.rescued += 1,
            TaskStatus::Failed => self.failed += 1,
        }
    }
}

/// Renders the recap lines: `host : ok=N changed=N unreachable=N failed=N skipped=N rescued=N ignored=N`.
pub fn recap_lines(stats: &IndexMap<String, HostStats>) -> Vec<String> {
    stats
        .iter()
        .map(|(host, s)| {
            format!(
                "{host:<26} : ok={:<4} changed={:<4} unreachable={:<4} failed={:<4} skipped={:<4} rescued={:<4} ignored={}",
                s.ok, s.changed, s.unreachable, s.failed, s.skipped, s.rescued, s.ignored
            )
        })
        .collect()
}

pub struct TextReporter {
    verbosity: u8,
    out: Mutex<Box<dyn Write + Send>>,
    stats: Mutex<IndexMap<String, HostStats>>,
}

impl TextReporter {
    pub fn new(verbosity: u8, out: Box<dyn Write + Send>, hosts: &[String]) -> Self {
        let stats = hosts.iter().map(|h| (h.clone(), HostStats::default())).collect();
        TextReporter { verbosity, out: Mutex::new(out), stats: Mutex::new(stats) }
    }

    pub fn stats(&self) -> IndexMap<String, HostStats> {
        self.stats.lock().map(|s| s.clone()).unwrap_or_default()
    }

    pub fn print_recap(&self) {
        let lines = recap_lines(&self.stats());
        if let Ok(mut out) = self.out.lock() {
            let _ = writeln!(out, "\nPLAY RECAP");
            for line in lines {
                let _ = writeln!(out, "{line}");
            }
            let _ = out.flush();
        }
    }
}

/// The lines a finished task prints: `[host] status: name`, then what a person needs to see of its result.
pub fn task_lines(
    host: &str,
    task: &crate::events::TaskRef,
    status: TaskStatus,
    result: &Value,
    ignored: bool,
    verbose: bool,
) -> Vec<String> {
    let mut text = format!("[{host}] {}: {}", status.as_str(), task.name);
    if matches!(status, TaskStatus::Failed | TaskStatus::Unreachable) {
        text.push_str(&format!(" ({}:{})", task.file.display(), task.line));
        if ignored {
            text.push_str(" ...ignoring");
        }
    }
    let mut lines = vec![text];
    if !(matches!(status, TaskStatus::Skipped) && !verbose) {
        lines.extend(detail_lines(result, verbose, status));
    }
    lines
}

fn detail_lines(result: &Value, verbose: bool, status: TaskStatus) -> Vec<String> {
    let mut out = Vec::new();
    let show = |key: &str| result.get(key).filter(|v| !v.is_null() && *v != "" && **v != Value::Array(vec![]));
    let failed = matches!(status, TaskStatus::Failed | TaskStatus::Unreachable);
    if let Some(censored) = result.get("censored") {
        out.push(format!("    {}", censored.as_str().unwrap_or_default()));
        return out;
    }
    if let Some(msg) = show("msg") {
        if verbose || failed || result.get("msg").is_some() && !result.get("rc").is_some() {
            let text = match msg {
                Value::String(s) => s.clone(),
                other => serde_json::to_string_pretty(other).unwrap_or_default(),
            };
            for line in text.lines() {
                out.push(format!("    msg: {line}"));
            }
        }
    }
    if verbose {
        for key in ["stdout", "stderr"] {
            if let Some(Value::String(s)) = show(key) {
                for line in s.lines() {
                    out.push(format!("    {key}: {line}"));
                }
            }
        }
        if let Some(results) = result.get("results").and_then(Value::as_array) {
            for item in results {
                let label = item.get("ansible_loop_var").and_then(Value::as_str).and_then(|v| item.get(v));
                let label = label.map(|l| l.to_string()).unwrap_or_default();
                out.push(format!("    item {label}: {}", item_status(item)));
            }
        }
        // debug: var prints `{"name": value}`.
        if result.get("msg").is_none() && result.get("rc").is_none() {
            for (k, v) in result.as_object().into_iter().flatten() {
                if !matches!(k.as_str(), "changed" | "failed" | "skipped" | "skip_reason" | "false_condition") {
                    out.push(format!("    {k}: {v}"));
                }
            }
        }
    } else if failed {
        if let Some(Value::String(s)) = show("stderr") {
            for line in s.lines() {
                out.push(format!("    stderr: {line}"));
            }
        }
        if let Some(results) = result.get("results").and_then(Value::as_array) {
            for item in results.iter().filter(|i| i.get("failed").and_then(Value::as_bool) == Some(true)) {
                let label = item.get("ansible_loop_var").and_then(Value::as_str).and_then(|v| item.get(v));
                let msg = item.get("msg").and_then(Value::as_str).unwrap_or_default();
                out.push(format!("    item {}: failed: {msg}", label.map(|l| l.to_string()).unwrap_or_default()));
            }
        }
    }
    out
}

fn item_status(item: &Value) -> &'static str {
    let f = |k: &str| item.get(k).and_then(Value::as_bool).unwrap_or(false);
    if f("failed") {
        "failed"
    } else if f("skipped") {
        "skipped"
    } else if f("changed") {
        "changed"
    } else {
        "ok"
    }
}

impl EventSink for TextReporter {
    fn event(&self, event: &Event) {
        let Event::TaskFinished { host, task, status, result, ignored, rescued, .. } = event else { return };
        if let Ok(mut stats) = self.stats.lock() {
            stats.entry(host.clone()).or_default().count(*status, result, *ignored, *rescued);
        }
        let lines = task_lines(host, task, *status, result, *ignored, self.verbosity > 0);
        if let Ok(mut out) = self.out.lock() {
            for line in lines {
                let _ = writeln!(out, "{line}");
            }
            let _ = out.flush();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn recap_counts_like_ansible() {
        let mut s = HostStats::default();
        s.count(TaskStatus::Changed, &json!({"changed": true}), false, false);
        s.count(TaskStatus::Ok, &json!({}), false, false);
        s.count(TaskStatus::Failed, &json!({"changed": true}), true, false);
        s.count(TaskStatus::Failed, &json!({}), false, true);
        s.count(TaskStatus::Skipped, &json!({}), false, false);
        assert_eq!(s, HostStats { ok: 3, changed: 2, unreachable: 0, failed: 0, skipped: 1, rescued: 1, ignored: 1 });
        let mut stats = IndexMap::new();
        stats.insert("node1".to_string(), s);
        assert_eq!(
            recap_lines(&stats)[0],
            "node1                      : ok=3    changed=2    unreachable=0    failed=0    skipped=1    rescued=1    ignored=1"
        );
    }
}
