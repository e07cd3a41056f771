//! Filters on single values: `default`, `bool`, `int`, `float`, and the text filters.

use minijinja::value::{Kwargs, Rest, Value, ValueKind};
use minijinja::{Error, ErrorKind};

use super::{formats::*, values::*};
use crate::tasks::template::pyfmt::py_str;

/// `default(default_value='', boolean=False)`. The arguments are taken raw so that an undefined default stays
/// undefined (and fails when used) instead of turning into "no argument".
pub(super) fn default(value: &Value, args: Rest<Value>, kwargs: Kwargs) -> Result<Value, Error> {
    let default = match args.first() {
        Some(d) => d.clone(),
        None => kwargs.get::<Option<Value>>("default_value")?.unwrap_or_else(|| Value::from("")),
    };
    let boolean = match args.get(1) {
        Some(b) => b.is_true(),
        None => kwargs.get::<Option<bool>>("boolean")?.unwrap_or(false),
    };
    kwargs.assert_all_used()?;
    Ok(if value.is_undefined() || (boolean && !value.is_true()) { default } else { value.clone() })
}

/// Ansible's `bool`: 'yes', 'on', 'true', '1' (any case), 1 and True are true; everything else is false.
pub(crate) fn to_bool(value: &Value) -> Result<bool, Error> {
    Ok(match value.kind() {
        ValueKind::Bool => value.is_true(),
        ValueKind::String => {
            let s = value.as_str().unwrap_or_default().to_lowercase();
            matches!(s.as_str(), "yes" | "on" | "true" | "1")
        }
        ValueKind::Number => f64::try_from(value.clone()).map(|f| f == 1.0).unwrap_or(false),
        ValueKind::Undefined => return Err(Error::from(ErrorKind::UndefinedError)),
        _ => false,
    })
}

/// Python's `int(text, base)`: surrounding whitespace, a sign, underscores between digits, a base prefix.
pub(super) fn parse_py_int(text: &str, base: u32) -> Option<i64> {
    let t = text.trim();
    let (negative, t) = match t.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, t.strip_prefix('+').unwrap_or(t)),
    };
    let lower = t.to_ascii_lowercase();
    let digits = match base {
        16 => lower.strip_prefix("0x").unwrap_or(&lower),
        8 => lower.strip_prefix("0o").unwrap_or(&lower),
        2 => lower.strip_prefix("0b").unwrap_or(&lower),
        _ => &lower,
    };
    if digits.is_empty() || digits.starts_with('_') || digits.ends_with('_') || digits.contains("__") {
        return None;
    }
    let cleaned: String = digits.chars().filter(|c| *c != '_').collect();
    if cleaned.starts_with(['+', '-']) {
        return None;
    }
    let n = i64::from_str_radix(&cleaned, base).ok()?;
    Some(if negative { -n } else { n })
}

/// Python's `float(text)`.
pub(super) fn parse_py_float(text: &str) -> Option<f64> {
    let t = text.trim().replace('_', "");
    let lower = t.to_ascii_lowercase();
    let unsigned = lower.trim_start_matches(['+', '-']);
    if matches!(unsigned, "inf" | "infinity" | "nan") {
        return lower.parse::<f64>().ok();
    }
    if t.is_empty() || !t.chars().all(|c| c.is_ascii_digit() || matches!(c, '.' | 'e' | 'E' | '+' | '-')) {
        return None;
    }
    t.parse::<f64>().ok()
}

pub(super) fn to_int(value: &Value, default: Option<Value>, base: Option<u32>, kwargs: Kwargs) -> Result<Value, Error> {
    let default = match default {
        Some(d) => d,
        None => kwargs.get::<Option<Value>>("default")?.unwrap_or(Value::from(0)),
    };
    let base = match base {
        Some(b) => b,
        None => kwargs.get::<Option<u32>>("base")?.unwrap_or(10),
    };
    kwargs.assert_all_used()?;
    if !(2..=36).contains(&base) {
        return Err(err(format!("int() base must be >= 2 and <= 36, not {base}")));
    }
    Ok(match value.kind() {
        ValueKind::Bool => Value::from(i64::from(value.is_true())),
        ValueKind::Number if value.is_integer() => value.clone(),
        ValueKind::Number => match f64::try_from(value.clone()) {
            Ok(f) if f.is_finite() => Value::from(f.trunc() as i64),
            _ => default,
        },
        ValueKind::String => {
            let s = value.as_str().unwrap_or_default();
            match parse_py_int(s, base) {
                Some(n) => Value::from(n),
                None => match parse_py_float(s) {
                    Some(f) if f.is_finite() => Value::from(f.trunc() as i64),
                    _ => default,
                },
            }
        }
        ValueKind::Undefined => return Err(Error::from(ErrorKind::UndefinedError)),
        _ => default,
    })
}

pub(super) fn to_float(value: &Value, default: Option<Value>) -> Result<Value, Error> {
    let default = default.unwrap_or(Value::from(0.0));
    Ok(match value.kind() {
        ValueKind::Bool => Value::from(if value.is_true() { 1.0 } else { 0.0 }),
        ValueKind::Number => f64::try_from(value.clone()).map(Value::from).unwrap_or(default),
        ValueKind::String => parse_py_float(value.as_str().unwrap_or_default()).map(Value::from).unwrap_or(default),
        ValueKind::Undefined => return Err(Error::from(ErrorKind::UndefinedError)),
        _ => default,
    })
}

pub(super) fn capitalize(value: &Value) -> String {
    let s = py_str(value);
    let mut chars = s.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars.flat_map(char::to_lowercase)).collect(),
        None => String::new(),
    }
}

pub(super) fn trim(value: &Value, chars: Option<String>) -> String {
    let s = py_str(value);
    match chars {
        Some(chars) => s.trim_matches(|c| chars.contains(c)).to_owned(),
        None => s.trim().to_owned(),
    }
}

pub(super) fn replace(value: &Value, old: String, new: String, count: Option<usize>) -> String {
    let s = py_str(value);
    match count {
        Some(n) => s.replacen(&old, &new, n),
        None => s.replace(&old, &new),
    }
}

pub(super) fn join(value: &Value, separator: Option<String>, kwargs: Kwargs) -> Result<String, Error> {
    let attribute: Option<String> = kwargs.get("attribute")?;
    let separator = match separator {
        Some(s) => s,
        None => kwargs.get::<Option<String>>("d")?.unwrap_or_default(),
    };
    kwargs.assert_all_used()?;
    let items = items_of(value, "join")?;
    let parts: Result<Vec<String>, Error> = items
        .iter()
        .map(|item| match &attribute {
            Some(attr) => item.get_attr(attr).map(|v| py_str(&v)),
            None => Ok(py_str(item)),
        })
        .collect();
    Ok(parts?.join(&separator))
}

/// Python's `str.split(sep=None, maxsplit=-1)`.
pub(super) fn split(value: &Value, separator: Option<String>, maxsplit: Option<i64>) -> Result<Value, Error> {
    let s = py_str(value);
    let max = maxsplit.filter(|m| *m >= 0).map(|m| m as usize);
    let parts: Vec<String> = match separator.filter(|s| !s.is_empty()) {
        Some(sep) => match max {
            Some(m) => s.splitn(m + 1, sep.as_str()).map(str::to_owned).collect(),
            None => s.split(sep.as_str()).map(str::to_owned).collect(),
        },
        None => {
            let mut out = Vec::new();
            let mut rest = s.trim_start();
            while !rest.is_empty() {
                if max.is_some_and(|m| out.len() == m) {
                    out.push(rest.to_owned());
                    break;
                }
                let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
                out.push(rest[..end].to_owned());
                rest = rest[end..].trim_start();
            }
            out
        }
    };
    Ok(Value::from(parts))
}

pub(super) fn length(value: &Value) -> Result<usize, Error> {
    match value.kind() {
        ValueKind::String => Ok(value.as_str().unwrap_or_default().chars().count()),
        ValueKind::Undefined => Err(Error::from(ErrorKind::UndefinedError)),
        _ => value.len().ok_or_else(|| err(format!("object of type '{}' has no len()", py_type(value)))),
    }
}
