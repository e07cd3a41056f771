//! Filters on lists and mappings: set operations, `flatten`, `dict2items`/`items2dict`, `combine`.

use minijinja::Error;
use minijinja::value::{Kwargs, Rest, Value, ValueKind};

use super::{formats::*, values::*};
use crate::tasks::template::pyfmt::py_str;

pub(super) fn unique_in_order(items: impl IntoIterator<Item = Value>) -> Vec<Value> {
    let mut out: Vec<Value> = Vec::new();
    for item in items {
        if !out.contains(&item) {
            out.push(item);
        }
    }
    out
}

pub(super) fn union(a: &Value, b: &Value) -> Result<Value, Error> {
    let mut all = items_of(a, "union")?;
    all.extend(items_of(b, "union")?);
    Ok(Value::from(unique_in_order(all)))
}

pub(super) fn intersect(a: &Value, b: &Value) -> Result<Value, Error> {
    let other = items_of(b, "intersect")?;
    Ok(Value::from(unique_in_order(items_of(a, "intersect")?.into_iter().filter(|x| other.contains(x)))))
}

pub(super) fn difference(a: &Value, b: &Value) -> Result<Value, Error> {
    let other = items_of(b, "difference")?;
    Ok(Value::from(unique_in_order(items_of(a, "difference")?.into_iter().filter(|x| !other.contains(x)))))
}

pub(super) fn symmetric_difference(a: &Value, b: &Value) -> Result<Value, Error> {
    let left = items_of(a, "symmetric_difference")?;
    let right = items_of(b, "symmetric_difference")?;
    let both = intersect(a, b)?;
    let both: Vec<Value> = items_of(&both, "symmetric_difference")?;
    let all = unique_in_order(left.into_iter().chain(right));
    Ok(Value::from(all.into_iter().filter(|x| !both.contains(x)).collect::<Vec<_>>()))
}

pub(super) fn flatten(value: &Value, levels: Option<i64>, kwargs: Kwargs) -> Result<Value, Error> {
    let levels = match levels {
        Some(l) => Some(l),
        None => kwargs.get::<Option<i64>>("levels")?,
    };
    let skip_nulls = kwargs.get::<Option<bool>>("skip_nulls")?.unwrap_or(true);
    kwargs.assert_all_used()?;
    fn walk(items: Vec<Value>, levels: Option<i64>, skip_nulls: bool, out: &mut Vec<Value>) -> Result<(), Error> {
        for item in items {
            let is_null = item.is_none() || matches!(item.as_str(), Some("None") | Some("null"));
            if skip_nulls && is_null {
                continue;
            }
            if is_seq(&item) && levels.is_none_or(|l| l >= 1) {
                walk(items_of(&item, "flatten")?, levels.map(|l| l - 1), skip_nulls, out)?;
            } else {
                out.push(item);
            }
        }
        Ok(())
    }
    let mut out = Vec::new();
    walk(items_of(value, "flatten")?, levels, skip_nulls, &mut out)?;
    Ok(Value::from(out))
}

pub(super) fn dict2items(value: &Value, kwargs: Kwargs) -> Result<Value, Error> {
    let key_name: String = kwargs.get::<Option<String>>("key_name")?.unwrap_or_else(|| "key".into());
    let value_name: String = kwargs.get::<Option<String>>("value_name")?.unwrap_or_else(|| "value".into());
    kwargs.assert_all_used()?;
    if value.kind() != ValueKind::Map {
        return Err(err(format!("dict2items requires a dictionary, got {} instead.", py_class(value))));
    }
    let mut out = Vec::new();
    for key in value.try_iter()? {
        let item = value.get_item(&key)?;
        out.push(Value::from_pairs([(key_name.clone(), key), (value_name.clone(), item)]));
    }
    Ok(Value::from(out))
}

pub(super) fn items2dict(value: &Value, kwargs: Kwargs) -> Result<Value, Error> {
    let key_name: String = kwargs.get::<Option<String>>("key_name")?.unwrap_or_else(|| "key".into());
    let value_name: String = kwargs.get::<Option<String>>("value_name")?.unwrap_or_else(|| "value".into());
    kwargs.assert_all_used()?;
    if !is_seq(value) {
        return Err(err(format!("items2dict requires a list, got {} instead.", py_class(value))));
    }
    let mut out = Vec::new();
    for item in value.try_iter()? {
        let k = get_key(&item, &key_name);
        let v = get_key(&item, &value_name);
        match (k, v) {
            (Some(k), Some(v)) => out.push((k, v)),
            _ => {
                return Err(err(format!(
                    "items2dict requires each dictionary in the list to contain the keys '{key_name}' and \
                     '{value_name}', got {} instead.",
                    py_str(value)
                )));
            }
        }
    }
    Ok(Value::from_pairs(out))
}

pub(super) fn merge_hash(
    x: serde_json::Map<String, serde_json::Value>,
    y: serde_json::Map<String, serde_json::Value>,
    recursive: bool,
    list_merge: &str,
) -> serde_json::Map<String, serde_json::Value> {
    use serde_json::Value as J;
    if x.is_empty() || x == y {
        return y;
    }
    if y.is_empty() {
        return x;
    }
    let mut x = x;
    for (key, y_value) in y {
        let Some(x_value) = x.get_mut(&key) else {
            x.insert(key, y_value);
            continue;
        };
        match (x_value, y_value) {
            (J::Object(xm), J::Object(ym)) => {
                *xm = if recursive { merge_hash(std::mem::take(xm), ym, recursive, list_merge) } else { ym };
            }
            (J::Array(xl), J::Array(yl)) => match list_merge {
                "append" => xl.extend(yl),
                "prepend" => {
                    let old = std::mem::replace(xl, yl);
                    xl.extend(old);
                }
                "append_rp" => {
                    xl.retain(|z| !yl.contains(z));
                    xl.extend(yl);
                }
                "prepend_rp" => {
                    let old: Vec<J> = std::mem::take(xl).into_iter().filter(|z| !yl.contains(z)).collect();
                    *xl = yl;
                    xl.extend(old);
                }
                "keep" => {}
                _ => *xl = yl,
            },
            (slot, y_value) => *slot = y_value,
        }
    }
    x
}

pub(super) fn combine(terms: Rest<Value>, kwargs: Kwargs) -> Result<Value, Error> {
    let recursive = kwargs.get::<Option<bool>>("recursive")?.unwrap_or(false);
    let list_merge = kwargs.get::<Option<String>>("list_merge")?.unwrap_or_else(|| "replace".into());
    if kwargs.assert_all_used().is_err() {
        return Err(err("'recursive' and 'list_merge' are the only valid keyword arguments"));
    }
    if !matches!(list_merge.as_str(), "replace" | "keep" | "append" | "prepend" | "append_rp" | "prepend_rp") {
        return Err(err(format!(
            "merge_hash: 'list_merge' argument can only be equal to 'replace', 'keep', 'append', 'prepend', \
             'append_rp' or 'prepend_rp'; got '{list_merge}'"
        )));
    }
    let mut dicts = Vec::new();
    for term in terms.iter() {
        if is_seq(term) {
            dicts.extend(items_of(term, "combine")?);
        } else {
            dicts.push(term.clone());
        }
    }
    let mut maps = Vec::new();
    for d in dicts {
        match to_json(&d)? {
            serde_json::Value::Object(m) => maps.push(m),
            _ => return Err(err(format!("failed to combine variables, expected dicts but got a '{}'", py_type(&d)))),
        }
    }
    let Some(mut result) = maps.pop() else {
        return Ok(Value::from_pairs(std::iter::empty::<(String, Value)>()));
    };
    while let Some(lower) = maps.pop() {
        result = merge_hash(lower, result, recursive, &list_merge);
    }
    Ok(from_json(serde_json::Value::Object(result)))
}

pub(super) type RegexCache = std::sync::Mutex<std::collections::HashMap<(String, bool, bool), regex::Regex>>;

/// Compiled patterns, so a regex filter in a loop or on every host compiles once (cleared when it grows large).
pub(super) static REGEX_CACHE: std::sync::LazyLock<RegexCache> = std::sync::LazyLock::new(Default::default);
