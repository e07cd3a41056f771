//! The secret values of a run: those of the variables each host names in `upgrade_secret_vars`, and the become
//! password, rendered with the host's variables when templated.

use std::collections::HashMap;

use serde_json::{Map, Value};

use super::Redactor;

/// Always masked, as Ansible never shows them.
const BECOME_PASSWORD_VARIABLES: &[&str] = &["ansible_become_password", "ansible_become_pass"];

impl Redactor {
    /// The secrets the hosts' variables name in `upgrade_secret_vars` (each host its own list and values; a
    /// templated value is rendered with the host's variables).
    pub(crate) fn from_hosts(hosts: &HashMap<String, Map<String, Value>>) -> Redactor {
        let templar = crate::tasks::Templar::new();
        let mut values = Vec::new();
        for vars in hosts.values() {
            let mut names =
                vars.get("upgrade_secret_vars").and_then(crate::builtin_vars::secret_var_names).unwrap_or_default();
            // The sudo password is a secret whether or not the inventory says so.
            names.extend(BECOME_PASSWORD_VARIABLES.iter().map(|n| n.to_string()));
            for name in names {
                let text = match vars.get(&name) {
                    Some(Value::String(s)) if s.contains("{{") || s.contains("{%") => {
                        // Only a templated secret needs the host's variables as a context (a copy of them all).
                        let context = crate::tasks::Vars::new(Value::Object(vars.clone()));
                        templar.render_str(s, &context).unwrap_or_else(|_| s.clone())
                    }
                    Some(Value::String(s)) => s.clone(),
                    Some(Value::Number(n)) => n.to_string(),
                    _ => continue,
                };
                values.push(text);
            }
        }
        values.extend(super::decrypted::all());
        Redactor::new(values).with_later_decrypted()
    }

    /// The secrets of every host of an inventory, `-e` included. Read layer by layer (each group's, each host's,
    /// `-e`) rather than from every host's merged variables, which a 5,000-host plan would merge for this alone;
    /// only a templated list or secret, which a host's own variables render, needs the merge.
    pub(crate) fn for_inventory(inventory: &crate::inventory::Inventory, extra: &crate::inventory::Vars) -> Redactor {
        Redactor::from_layers(inventory.every_var_layer(extra))
            .unwrap_or_else(|| Redactor::from_hosts(&crate::inventory::host_vars_json(inventory, extra)))
    }

    /// The values, in any layer, of every variable any layer names in `upgrade_secret_vars`, and of the become
    /// password. A superset of what `from_hosts` finds: a variable one host calls secret is masked wherever it is
    /// set, and so is a value a higher layer overrides. None when a list or such a value is templated.
    fn from_layers<'a>(layers: impl Iterator<Item = &'a crate::inventory::Vars> + Clone) -> Option<Redactor> {
        let mut names: Vec<String> = BECOME_PASSWORD_VARIABLES.iter().map(|n| n.to_string()).collect();
        for layer in layers.clone() {
            if let Some(var) = layer.get("upgrade_secret_vars") {
                names.extend(crate::builtin_vars::secret_var_names(&var.value)?);
            }
        }
        names.sort();
        names.dedup();
        let mut values = Vec::new();
        for layer in layers {
            for name in &names {
                match layer.get(name).map(|var| &var.value) {
                    Some(Value::String(s)) if s.contains("{{") || s.contains("{%") => return None,
                    Some(Value::String(s)) => values.push(s.clone()),
                    Some(Value::Number(n)) => values.push(n.to_string()),
                    _ => {}
                }
            }
        }
        values.extend(super::decrypted::all());
        Some(Redactor::new(values))
    }
}
