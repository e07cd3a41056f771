//! The values decrypted from Ansible Vault in this process: every one is a secret, masked wherever
//! `upgrade_secret_vars` values are, whether or not a list names it. They are kept process-wide, as ansible-core keeps
//! its vault secrets in one context: one invocation reads one inventory, and every redactor built after the
//! inventory was read (the run's, the plan's, `restore`'s, `run-tasks`') and the error that ends the command see them.

use std::sync::Mutex;

use serde_json::Value;

static DECRYPTED: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// Records a decrypted value (a `!vault` value, or each value of a vault-encrypted file): its strings and numbers,
/// at every depth. Booleans and nulls are not secrets anyone can keep (masking `true` would garble every line).
pub(crate) fn remember(value: &Value) {
    let mut found = Vec::new();
    leaves(value, &mut found);
    if found.is_empty() {
        return;
    }
    let mut all = DECRYPTED.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    for text in found {
        if !all.contains(&text) {
            all.push(text);
        }
    }
}

fn leaves(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::String(s) => {
            out.push(s.clone());
            // A multi-line secret (a key, a certificate) also shows line by line in command output.
            if s.contains('\n') {
                out.extend(s.lines().map(str::to_string));
            }
        }
        Value::Number(n) => out.push(n.to_string()),
        Value::Array(items) => items.iter().for_each(|v| leaves(v, out)),
        Value::Object(map) => map.values().for_each(|v| leaves(v, out)),
        Value::Bool(_) | Value::Null => {}
    }
}

/// Every value decrypted so far.
pub(crate) fn all() -> Vec<String> {
    DECRYPTED.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).clone()
}

impl super::Redactor {
    /// Only the values decrypted from Ansible Vault: for the error a command ends with, before any host is known.
    pub(crate) fn decrypted() -> super::Redactor {
        super::Redactor::new(all())
    }
}
