//! Ansible's tests (`is changed`, `is match`, ...).

use minijinja::Error;
use minijinja::value::{Kwargs, Value, ValueKind};

use super::{regex_filters::*, values::*};
use crate::ansible_compat::boolean;
use crate::tasks::template::pyfmt::py_str;

pub(super) fn result_flag(value: &Value, key: &str, test: &str) -> Result<bool, Error> {
    if value.kind() != ValueKind::Map {
        return Err(err(format!("The '{test}' test expects a dictionary")));
    }
    Ok(get_key(value, key).is_some_and(|v| v.is_true()))
}

pub(super) fn changed(value: &Value) -> Result<bool, Error> {
    if value.kind() != ValueKind::Map {
        return Err(err("The 'changed' test expects a dictionary"));
    }
    if let Some(changed) = get_key(value, "changed") {
        return Ok(changed.is_true());
    }
    if let Some(results) = get_key(value, "results") {
        if is_seq(&results) {
            let items = items_of(&results, "changed")?;
            if items.first().is_some_and(|first| first.kind() == ValueKind::Map) {
                return Ok(items.iter().any(|r| get_key(r, "changed").is_some_and(|c| c.is_true())));
            }
        }
    }
    Ok(false)
}

pub(super) fn regex_test(value: &Value, pattern: &str, kwargs: Kwargs, anchored: bool) -> Result<bool, Error> {
    let ignorecase = kwargs.get::<Option<bool>>("ignorecase")?.unwrap_or(false);
    let multiline = kwargs.get::<Option<bool>>("multiline")?.unwrap_or(false);
    kwargs.assert_all_used()?;
    let text = py_str(value);
    let re = build_regex(pattern, ignorecase, multiline)?;
    Ok(match re.find(&text) {
        Some(_) if !anchored => true,
        _ if anchored => build_regex(&format!("\\A(?:{pattern})"), ignorecase, multiline)?.is_match(&text),
        _ => false,
    })
}

pub(super) fn regex_test_generic(value: &Value, pattern: Option<String>, kwargs: Kwargs) -> Result<bool, Error> {
    let match_type = kwargs.get::<Option<String>>("match_type")?.unwrap_or_else(|| "search".into());
    let pattern = match pattern {
        Some(p) => p,
        None => kwargs.get::<Option<String>>("pattern")?.unwrap_or_default(),
    };
    let anchored = match_type == "match";
    if match_type == "fullmatch" {
        let ignorecase = kwargs.get::<Option<bool>>("ignorecase")?.unwrap_or(false);
        let multiline = kwargs.get::<Option<bool>>("multiline")?.unwrap_or(false);
        kwargs.assert_all_used()?;
        return Ok(build_regex(&format!("\\A(?:{pattern})\\z"), ignorecase, multiline)?.is_match(&py_str(value)));
    }
    regex_test(value, &pattern, kwargs, anchored)
}

pub(super) fn truthy(value: &Value, kwargs: Kwargs) -> Result<bool, Error> {
    let convert_bool = kwargs.get::<Option<bool>>("convert_bool")?.unwrap_or(false);
    kwargs.assert_all_used()?;
    if convert_bool {
        // Ansible's `truthy(value, convert_bool=True)`: its boolean table first, Python's truth for the rest.
        let known = match value.kind() {
            ValueKind::Bool => Some(value.is_true()),
            ValueKind::String => boolean(&serde_json::Value::String(value.as_str().unwrap_or_default().to_owned())),
            ValueKind::Number => f64::try_from(value.clone())
                .ok()
                .and_then(serde_json::Number::from_f64)
                .and_then(|n| boolean(&serde_json::Value::Number(n))),
            _ => None,
        };
        if let Some(b) = known {
            return Ok(b);
        }
    }
    Ok(value.is_true())
}
