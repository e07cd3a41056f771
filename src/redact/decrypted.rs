//! The values decrypted from Ansible Vault in this process: every one is a secret, masked wherever
//! `upgrade_secret_vars` values are, whether or not a list names it. They are kept process-wide, as ansible-core keeps
//! its vault secrets in one context: one invocation reads one inventory, and every redactor built after the
//! inventory was read (the run's, the plan's, `restore`'s, `run-tasks`') and the error that ends the command see them.

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use serde_json::Value;

static DECRYPTED: Mutex<Vec<String>> = Mutex::new(Vec::new());
/// How many values `DECRYPTED` holds, read without its lock by every redactor on every text it masks.
static COUNT: AtomicUsize = AtomicUsize::new(0);

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
    COUNT.store(all.len(), Ordering::Release);
}

/// The values decrypted after the first `seen` (by a task's `include_vars` while a run goes on); empty without a
/// lock when there are none.
pub(crate) fn since(seen: usize) -> Vec<String> {
    if COUNT.load(Ordering::Acquire) <= seen {
        return Vec::new();
    }
    DECRYPTED
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
        .get(seen..)
        .map(<[String]>::to_vec)
        .unwrap_or_default()
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
