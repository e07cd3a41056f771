//! A module call's arguments as the module gets them: rendered, with `omit` dropped.

use serde_json::{Map, Value};

use crate::tasks::model::{Module, ModuleCall};
use crate::tasks::{Templar, Vars};

/// Templates a module's arguments. `assert: that` and `debug: var` hold bare expressions, evaluated by the module.
pub(super) fn render_args(templar: &Templar, call: &ModuleCall, vars: &Vars) -> Result<Map<String, Value>, String> {
    let mut out = Map::new();
    for (k, v) in &call.args {
        let bare = matches!((call.module, k.as_str()), (Module::Assert, "that") | (Module::Debug, "var"));
        let value = if bare { v.clone() } else { templar.render_value(v, vars).map_err(|e| e.message)? };
        if let Some(value) = without_omit(value) {
            out.insert(k.clone(), value);
        }
    }
    Ok(out)
}

/// Ansible drops `omit` wherever it lands in module arguments: an argument, a mapping entry or a list item.
pub(super) fn without_omit(value: Value) -> Option<Value> {
    match value {
        v if crate::tasks::template::is_omit(&v) => None,
        Value::Array(items) => Some(Value::Array(items.into_iter().filter_map(without_omit).collect())),
        Value::Object(map) => {
            Some(Value::Object(map.into_iter().filter_map(|(k, v)| without_omit(v).map(|v| (k, v))).collect()))
        }
        other => Some(other),
    }
}
