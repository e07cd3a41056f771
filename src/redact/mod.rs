//! Secrets kept out of every output. The values of the variables an inventory names in `upgrade_secret_vars` are
//! replaced by `********` in every event before any reporter sees it (human output, JSON lines, host logs, the
//! summary and its fix commands), in journal entries, and in the error a run ends with. A token inside
//! `upgrade_kubectl` (`kubectl --token={{ my_token }}` with `upgrade_secret_vars: [my_token]`) shows nowhere. The
//! become password is always masked, and so is every value decrypted from Ansible Vault (`decrypted`).
//!
//! This module is the masking itself, which knows nothing of hosts or runs; `secrets` finds the secret values in the
//! hosts' variables and `sink` masks the events on their way to the reporters.

pub(crate) mod decrypted;
pub(crate) mod escapes;
pub(crate) mod secrets;
pub(crate) mod sink;

use crate::error::Error;

pub(crate) const MASK: &str = "********";

/// Values shorter than this are not masked: masking `1` or `ok` would garble every line and hide nothing.
pub(crate) const SHORTEST_SECRET: usize = 4;

/// The secret values of a run, longest first (a secret that contains another is masked whole).
#[derive(Debug, Default, Clone)]
pub(crate) struct Redactor {
    secrets: Vec<String>,
    /// With `Some(n)`, the values decrypted from Ansible Vault after the first n are secrets too.
    decrypted_seen: Option<usize>,
}

impl Redactor {
    pub(crate) fn new(values: impl IntoIterator<Item = String>) -> Redactor {
        Redactor { secrets: Self::prepared(values), decrypted_seen: None }
    }

    /// The values to mask, each also as JSON escapes it (so a secret with a quote or backslash is found in serialized
    /// text), longest first (a secret that contains another is masked whole), without those too short to mask.
    fn prepared(values: impl IntoIterator<Item = String>) -> Vec<String> {
        let mut secrets: Vec<String> = Vec::new();
        for value in values {
            let value = value.trim().to_string();
            if value.chars().count() < SHORTEST_SECRET || secrets.contains(&value) {
                continue;
            }
            let escaped = serde_json::to_string(&value).unwrap_or_default();
            let escaped = escaped.trim_matches('"').to_string();
            if escaped != value && !secrets.contains(&escaped) {
                secrets.push(escaped);
            }
            secrets.push(value);
        }
        secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
        secrets
    }

    /// The values decrypted since this redactor was made, prepared for masking.
    fn later(&self) -> Vec<String> {
        match self.decrypted_seen {
            Some(seen) => {
                let later = decrypted::since(seen);
                if later.is_empty() { later } else { Self::prepared(later) }
            }
            None => Vec::new(),
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.secrets.is_empty() && self.later().is_empty()
    }

    pub(crate) fn text(&self, text: &str) -> String {
        let mut out = text.to_string();
        for secret in self.secrets.iter().chain(&self.later()) {
            if out.contains(secret.as_str()) {
                out = out.replace(secret.as_str(), MASK);
            }
        }
        out
    }

    pub(crate) fn string(&self, s: &mut String) {
        let later = self.later();
        if self.secrets.iter().chain(&later).any(|secret| s.contains(secret.as_str())) {
            *s = self.text(s);
        }
    }

    #[cfg(test)]
    pub(crate) fn value(&self, value: &mut serde_json::Value) {
        match value {
            serde_json::Value::String(s) => self.string(s),
            serde_json::Value::Array(items) => items.iter_mut().for_each(|v| self.value(v)),
            serde_json::Value::Object(map) => map.values_mut().for_each(|v| self.value(v)),
            _ => {}
        }
    }

    /// An error as the operator reads it at the end of a run.
    pub(crate) fn error(&self, mut error: Error) -> Error {
        self.string(&mut error.message);
        if let Some(hint) = &mut error.hint {
            self.string(hint);
        }
        error
    }
}

impl Redactor {
    /// Only the values decrypted from Ansible Vault: for the error a command ends with, before any host is known.
    pub(crate) fn decrypted() -> Redactor {
        Redactor::new(decrypted::all()).with_later_decrypted()
    }

    /// This redactor also masks every value decrypted after it was made (a hook's `include_vars` of an encrypted
    /// file, read while the run goes on).
    pub(crate) fn with_later_decrypted(mut self) -> Redactor {
        self.decrypted_seen = Some(decrypted::all().len());
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::collections::HashMap;

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
