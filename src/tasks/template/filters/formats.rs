//! Filters between formats and paths: `ternary`, JSON, YAML, base64, `basename`/`dirname`, `type_debug`, `mandatory`.

use minijinja::Error;
use minijinja::value::{Kwargs, Value, ValueKind};

use super::values::*;
use crate::tasks::template::pyfmt::{JsonStyle, py_json, py_str};

pub(super) fn ternary(value: &Value, true_val: Value, false_val: Value, none_val: Option<Value>) -> Value {
    match none_val {
        Some(n) if value.is_none() && !n.is_none() => n,
        _ if value.is_true() => true_val,
        _ => false_val,
    }
}

pub(super) fn to_json_filter(value: &Value, kwargs: Kwargs) -> Result<String, Error> {
    let mut style = JsonStyle::compact();
    if let Some(indent) = kwargs.get::<Option<usize>>("indent")? {
        style.indent = Some(indent);
        style.item_separator = ",";
    }
    style.sort_keys = kwargs.get::<Option<bool>>("sort_keys")?.unwrap_or(false);
    style.ensure_ascii = kwargs.get::<Option<bool>>("ensure_ascii")?.unwrap_or(true);
    kwargs.assert_all_used()?;
    Ok(py_json(&to_json(value)?, &style))
}

pub(super) const MAX_JSON_INDENT: usize = 1000;

pub(super) fn to_nice_json(value: &Value, indent: Option<usize>, kwargs: Kwargs) -> Result<String, Error> {
    let indent = match indent {
        Some(i) => i,
        None => kwargs.get::<Option<usize>>("indent")?.unwrap_or(4),
    };
    // Python would try (and fail with MemoryError); an absurd indent must not take the controller's memory.
    if indent > MAX_JSON_INDENT {
        return Err(err(format!("to_nice_json: indent {indent} is too large (at most {MAX_JSON_INDENT})")));
    }
    let mut style = JsonStyle::nice(indent);
    style.sort_keys = kwargs.get::<Option<bool>>("sort_keys")?.unwrap_or(true);
    style.ensure_ascii = kwargs.get::<Option<bool>>("ensure_ascii")?.unwrap_or(true);
    kwargs.assert_all_used()?;
    Ok(py_json(&to_json(value)?, &style))
}

pub(super) fn from_json_filter(value: &Value) -> Result<Value, Error> {
    let text = py_str(value);
    serde_json::from_str::<serde_json::Value>(&text).map(from_json).map_err(|e| err(format!("from_json: {e}")))
}

pub(super) fn from_yaml(value: &Value) -> Result<Value, Error> {
    if value.is_none() {
        return Ok(Value::from(()));
    }
    if !is_string(value) {
        return Ok(value.clone());
    }
    let text = value.as_str().unwrap_or_default();
    match crate::yaml::parse(text, std::path::Path::new("<from_yaml>")) {
        Ok(Some(node)) => Ok(from_json(node.to_json())),
        Ok(None) => Ok(Value::from(())),
        Err(e) => Err(err(format!("from_yaml: {}", e.message))),
    }
}

/// Python's `os.path.basename`.
pub(crate) fn basename(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// Python's `os.path.dirname`.
pub(crate) fn dirname(path: &str) -> String {
    let i = path.rfind('/').map(|i| i + 1).unwrap_or(0);
    let head = &path[..i];
    if !head.is_empty() && head.chars().any(|c| c != '/') {
        head.trim_end_matches('/').to_owned()
    } else {
        head.to_owned()
    }
}

pub(super) const B64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

pub(super) fn base64_encode(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [chunk[0], *chunk.get(1).unwrap_or(&0), *chunk.get(2).unwrap_or(&0)];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(B64[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

pub(super) fn base64_decode(text: &str) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(text.len() / 4 * 3);
    let mut acc = 0u32;
    let mut bits = 0;
    for c in text.bytes() {
        if c == b'=' {
            break;
        }
        if c.is_ascii_whitespace() {
            continue;
        }
        let v = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' | b'-' => 62,
            b'/' | b'_' => 63,
            _ => return None,
        };
        acc = (acc << 6) | u32::from(v);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    Some(out)
}

pub(super) fn b64decode(value: &Value) -> Result<String, Error> {
    let bytes = base64_decode(&py_str(value)).ok_or_else(|| err("b64decode: invalid base64 input"))?;
    String::from_utf8(bytes).map_err(|_| err("b64decode: the decoded bytes are not UTF-8"))
}

pub(super) fn mandatory(value: &Value, msg: Option<String>) -> Result<Value, Error> {
    if value.is_undefined() {
        return Err(err(msg.unwrap_or_else(|| "Mandatory variable not defined.".into())));
    }
    Ok(value.clone())
}

/// Python's type name of a value, as `type_debug` and Ansible's messages say it.
pub(crate) fn py_type(value: &Value) -> &'static str {
    match value.kind() {
        ValueKind::Undefined => "AnsibleUndefined",
        ValueKind::None => "NoneType",
        ValueKind::Bool => "bool",
        ValueKind::Number if value.is_integer() => "int",
        ValueKind::Number => "float",
        ValueKind::String => "str",
        ValueKind::Bytes => "bytes",
        ValueKind::Seq | ValueKind::Iterable => "list",
        ValueKind::Map => "dict",
        _ => "object",
    }
}

pub(super) fn py_class(value: &Value) -> String {
    format!("<class '{}'>", py_type(value))
}

pub(super) fn type_debug(value: &Value) -> &'static str {
    py_type(value)
}

pub(super) fn path_join(value: &Value) -> Result<String, Error> {
    let parts: Vec<String> =
        if is_string(value) { vec![py_str(value)] } else { items_of(value, "path_join")?.iter().map(py_str).collect() };
    let mut out = String::new();
    for part in parts {
        if part.starts_with('/') {
            out = part;
        } else if out.is_empty() || out.ends_with('/') {
            out.push_str(&part);
        } else {
            out.push('/');
            out.push_str(&part);
        }
    }
    Ok(out)
}
