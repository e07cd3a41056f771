//! Secrets kept out of every output. The values of the variables an inventory names in `upgrade_secret_vars` are
//! replaced by `********` in every event before any reporter sees it (human output, JSON lines, host logs, the
//! summary and its fix commands), in journal entries, and in the error a run ends with. A token inside
//! `upgrade_kubectl` (`kubectl --token={{ my_token }}` with `upgrade_secret_vars: [my_token]`) shows nowhere. The
//! become password is always masked.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::{Map, Value};

use crate::error::Error;
use crate::events::{Event, EventSink, SharedSink};
use crate::vocabulary::{HostOutcome, HostReport, Summary};

pub const MASK: &str = "********";

/// Always masked, as Ansible never shows them.
const BECOME_PASSWORD_VARIABLES: &[&str] = &["ansible_become_password", "ansible_become_pass"];

/// Values shorter than this are not masked: masking `1` or `ok` would garble every line and hide nothing.
pub const SHORTEST_SECRET: usize = 4;

/// The secret values of a run, longest first (a secret that contains another is masked whole).
#[derive(Debug, Default, Clone)]
pub struct Redactor {
    secrets: Vec<String>,
}

impl Redactor {
    pub fn new(values: impl IntoIterator<Item = String>) -> Redactor {
        let mut secrets: Vec<String> = Vec::new();
        for value in values {
            let value = value.trim().to_string();
            if value.chars().count() < SHORTEST_SECRET || secrets.contains(&value) {
                continue;
            }
            // As JSON escapes it too, so a secret with a quote or backslash is found in serialized text.
            let escaped = serde_json::to_string(&value).unwrap_or_default();
            let escaped = escaped.trim_matches('"').to_string();
            if escaped != value && !secrets.contains(&escaped) {
                secrets.push(escaped);
            }
            secrets.push(value);
        }
        secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
        Redactor { secrets }
    }

    /// The secrets the hosts' variables name in `upgrade_secret_vars` (each host its own list and values; a
    /// templated value is rendered with the host's variables).
    pub fn from_hosts(hosts: &HashMap<String, Map<String, Value>>) -> Redactor {
        let templar = crate::tasks::Templar::new();
        let mut values = Vec::new();
        for vars in hosts.values() {
            let mut names =
                vars.get("upgrade_secret_vars").and_then(crate::builtin_vars::secret_var_names).unwrap_or_default();
            // The sudo password is a secret whether or not the inventory says so.
            names.extend(BECOME_PASSWORD_VARIABLES.iter().map(|n| n.to_string()));
            let context = crate::tasks::Vars::new(Value::Object(vars.clone()));
            for name in names {
                let text = match vars.get(&name) {
                    Some(Value::String(s)) if s.contains("{{") || s.contains("{%") => {
                        templar.render_str(s, &context).unwrap_or_else(|_| s.clone())
                    }
                    Some(Value::String(s)) => s.clone(),
                    Some(Value::Number(n)) => n.to_string(),
                    _ => continue,
                };
                values.push(text);
            }
        }
        Redactor::new(values)
    }

    /// The secrets of every host of an inventory, `-e` included.
    pub fn for_inventory(inventory: &crate::inventory::Inventory, extra: &crate::inventory::Vars) -> Redactor {
        let hosts: HashMap<String, Map<String, Value>> = inventory
            .hosts
            .keys()
            .map(|h| (h.clone(), crate::inventory::vars_to_json(&inventory.host_vars(h, extra))))
            .collect();
        Redactor::from_hosts(&hosts)
    }

    pub fn is_empty(&self) -> bool {
        self.secrets.is_empty()
    }

    pub fn text(&self, text: &str) -> String {
        let mut out = text.to_string();
        for secret in &self.secrets {
            if out.contains(secret.as_str()) {
                out = out.replace(secret.as_str(), MASK);
            }
        }
        out
    }

    fn string(&self, s: &mut String) {
        if self.secrets.iter().any(|secret| s.contains(secret.as_str())) {
            *s = self.text(s);
        }
    }

    pub fn value(&self, value: &mut Value) {
        match value {
            Value::String(s) => self.string(s),
            Value::Array(items) => items.iter_mut().for_each(|v| self.value(v)),
            Value::Object(map) => map.values_mut().for_each(|v| self.value(v)),
            _ => {}
        }
    }

    fn report(&self, report: &mut HostReport) {
        match &mut report.outcome {
            HostOutcome::Skipped { reason } | HostOutcome::NotStarted { reason } => self.string(reason),
            HostOutcome::Failed { reason, .. } => self.string(reason),
            HostOutcome::Upgraded { .. } => {}
        }
    }

    /// The event as reporters may see it.
    pub fn event(&self, event: &Event) -> Event {
        let mut event = event.clone();
        match &mut event {
            Event::TaskStarted { task, .. } => self.string(&mut task.name),
            Event::TaskRetry { task, result, .. } | Event::TaskFinished { task, result, .. } => {
                self.string(&mut task.name);
                self.value(result);
            }
            Event::StepFinished { error: Some(error), .. } => self.string(error),
            Event::HostFinished { report } => self.report(report),
            Event::Notice { message, .. } => self.string(message),
            Event::RunFinished { summary } => self.summary_in_place(summary),
            _ => {}
        }
        event
    }

    /// The summary as the JUnit report shows it.
    pub fn summary(&self, summary: &Summary) -> Summary {
        let mut summary = summary.clone();
        self.summary_in_place(&mut summary);
        summary
    }

    fn summary_in_place(&self, summary: &mut Summary) {
        summary.hosts.iter_mut().for_each(|h| self.report(h));
        if let Some(stopped) = &mut summary.stopped {
            stopped.texts_mut().into_iter().for_each(|text| self.string(text));
        }
        for node in &mut summary.left_cordoned {
            self.string(&mut node.fix);
        }
    }

    /// An error as the operator reads it at the end of a run.
    pub fn error(&self, mut error: Error) -> Error {
        self.string(&mut error.message);
        if let Some(hint) = &mut error.hint {
            self.string(hint);
        }
        error
    }

    /// Anything serializable, through its JSON form (journal entries).
    pub fn serialized<T: serde::Serialize + serde::de::DeserializeOwned>(&self, item: T) -> T {
        if self.is_empty() {
            return item;
        }
        let Ok(mut value) = serde_json::to_value(&item) else { return item };
        self.value(&mut value);
        serde_json::from_value(value).unwrap_or(item)
    }
}

/// A sink that masks secrets in every event before the reporters behind it see it.
pub struct Redacting {
    pub redactor: Arc<Redactor>,
    pub inner: SharedSink,
}

impl EventSink for Redacting {
    fn event(&self, event: &Event) {
        if self.redactor.is_empty() {
            self.inner.event(event);
        } else {
            self.inner.event(&self.redactor.event(event));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn secrets_are_masked_in_text_values_and_json_escaped_text() {
        let r = Redactor::new(["s3cr3t-token".to_string(), "a\"quote".to_string(), "ok".to_string()]);
        assert_eq!(r.text("kubectl --token=s3cr3t-token uncordon n1"), "kubectl --token=******** uncordon n1");
        assert_eq!(r.text("ok stays"), "ok stays", "too short to mask");
        let mut v = json!({"cmd": ["x", "s3cr3t-token"], "stdout": "a\"quote here"});
        r.value(&mut v);
        assert_eq!(v, json!({"cmd": ["x", "********"], "stdout": "******** here"}));
        let line = serde_json::to_string(&json!({"m": "a\"quote"})).unwrap();
        assert_eq!(r.text(&line), r#"{"m":"********"}"#);
    }

    #[test]
    fn secret_values_come_from_the_variables_each_host_names() {
        let mut hosts = HashMap::new();
        let vars = json!({
            "upgrade_secret_vars": ["api_token", "missing"],
            "api_token": "{{ 'tok' ~ 'en-123' }}",
            "upgrade_kubectl": "kubectl --token={{ api_token }}",
            "ansible_become_password": "sudo-pw-1",
        });
        hosts.insert("m1".to_string(), vars.as_object().unwrap().clone());
        let r = Redactor::from_hosts(&hosts);
        assert_eq!(r.text("kubectl --token=token-123 get nodes"), "kubectl --token=******** get nodes");
        assert_eq!(r.text("echo sudo-pw-1"), "echo ********", "the become password without being listed");
    }
}
