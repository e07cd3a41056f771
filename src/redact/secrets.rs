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
        values.extend(super::decrypted::all());
        Redactor::new(values).with_later_decrypted()
    }

    /// The secrets of every host of an inventory, `-e` included.
    pub(crate) fn for_inventory(inventory: &crate::inventory::Inventory, extra: &crate::inventory::Vars) -> Redactor {
        Redactor::from_hosts(&crate::inventory::host_vars_json(inventory, extra))
    }
}
