//! Small readers shared by the settings: integers, text, type names.

use serde_json::Value;

pub(super) fn integral(value: &Value) -> Option<i64> {
    let n = value.as_number()?;
    n.as_i64().or_else(|| n.as_f64().filter(|f| f.fract() == 0.0 && f.abs() < 9e15).map(|f| f as i64))
}

pub(super) fn scalar_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Bool(true) => "true".into(),
        Value::Bool(false) => "false".into(),
        other => other.to_string(),
    }
}

pub(super) fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "a mapping",
    }
}

/// A Python literal (lists, dicts, tuples, quoted strings, numbers, True/False/None), the form an INI `[vars]`
/// section or a quoted YAML string can give structured values such as `openshift_node_groups`; read by the
/// inventory's own literal reader. `None` when the text is not one.
pub fn parse_python_literal(text: &str) -> Option<Value> {
    match crate::inventory::parse_python_literal(text) {
        Ok(Value::String(same)) if same == text => None,
        Ok(value) => Some(value),
        Err(_) => None,
    }
}
