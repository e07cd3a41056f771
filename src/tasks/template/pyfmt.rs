//! How Python (and so Ansible) prints values: `str()` and `repr()` of the values a template handles, and
//! `json.dumps` with Python's separators. Templates print through these so that `{{ [1, 'a'] }}` inside a string
//! gives `[1, 'a']` and `{{ true }}` gives `True`, as Ansible does.

use minijinja::Value;
use minijinja::value::ValueKind;

/// Python's `str(value)`: strings as they are, everything else as `repr`.
pub(super) fn py_str(value: &Value) -> String {
    match value.kind() {
        ValueKind::String => value.as_str().map(str::to_owned).unwrap_or_else(|| value.to_string()),
        _ => py_repr(value),
    }
}

/// Python's `repr(value)`: `True`, `None`, `'text'`, `[1, 'a']`, `{'a': 1}`.
pub(super) fn py_repr(value: &Value) -> String {
    let mut out = String::new();
    write_repr(&mut out, value);
    out
}

fn write_repr(out: &mut String, value: &Value) {
    match value.kind() {
        ValueKind::Undefined => out.push_str("None"),
        ValueKind::None => out.push_str("None"),
        ValueKind::Bool => out.push_str(if value.is_true() { "True" } else { "False" }),
        ValueKind::Number => out.push_str(&py_number(value)),
        ValueKind::String => match value.as_str() {
            Some(s) => out.push_str(&py_str_repr(s)),
            None => out.push_str(&py_str_repr(&value.to_string())),
        },
        ValueKind::Bytes => {
            out.push('b');
            out.push_str(&py_str_repr(&String::from_utf8_lossy(value.as_bytes().unwrap_or_default())));
        }
        ValueKind::Seq | ValueKind::Iterable => {
            out.push('[');
            if let Ok(items) = value.try_iter() {
                for (i, item) in items.enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    write_repr(out, &item);
                }
            }
            out.push(']');
        }
        ValueKind::Map => {
            out.push('{');
            if let Ok(keys) = value.try_iter() {
                for (i, key) in keys.enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    write_repr(out, &key);
                    out.push_str(": ");
                    write_repr(out, &value.get_item(&key).unwrap_or_default());
                }
            }
            out.push('}');
        }
        _ => out.push_str(&value.to_string()),
    }
}

/// A number as Python prints it: integers plainly, floats always with a dot or an exponent (`1.0`, `1e+20`).
pub(super) fn py_number(value: &Value) -> String {
    if value.is_integer() {
        return value.to_string();
    }
    match f64::try_from(value.clone()) {
        Ok(f) => py_float(f),
        Err(_) => value.to_string(),
    }
}

/// Python's `repr(float)`: the shortest round-tripping digits, scientific below 1e-4 and from 1e16.
pub(super) fn py_float(f: f64) -> String {
    if f.is_nan() {
        return "nan".into();
    }
    if f.is_infinite() {
        return if f > 0.0 { "inf".into() } else { "-inf".into() };
    }
    let abs = f.abs();
    if abs != 0.0 && !(1e-4..1e16).contains(&abs) {
        // Rust gives `1e20` / `1.5e-7`; Python writes `1e+20` / `1.5e-07`.
        let s = format!("{f:e}");
        if let Some((mantissa, exp)) = s.split_once('e') {
            let (sign, digits) = match exp.strip_prefix('-') {
                Some(d) => ('-', d),
                None => ('+', exp),
            };
            return format!("{mantissa}e{sign}{digits:0>2}");
        }
        return s;
    }
    let s = format!("{f}");
    if s.contains('.') { s } else { format!("{s}.0") }
}

/// Python's `repr(str)`: single quotes unless the text holds a single quote and no double quote.
pub(super) fn py_str_repr(s: &str) -> String {
    let quote = if s.contains('\'') && !s.contains('"') { '"' } else { '\'' };
    let mut out = String::with_capacity(s.len() + 2);
    out.push(quote);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c if (c as u32) < 0x20 || c as u32 == 0x7f => out.push_str(&format!("\\x{:02x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push(quote);
    out
}

/// Python's `json.dumps` options that Ansible's `to_json` / `to_nice_json` use.
pub(super) struct JsonStyle {
    pub indent: Option<usize>,
    pub sort_keys: bool,
    pub ensure_ascii: bool,
    pub item_separator: &'static str,
    pub key_separator: &'static str,
}

impl JsonStyle {
    /// `json.dumps(x)`: `{"a": 1, "b": [1, 2]}`.
    pub(super) fn compact() -> Self {
        JsonStyle { indent: None, sort_keys: false, ensure_ascii: true, item_separator: ", ", key_separator: ": " }
    }
    /// `to_nice_json`: indent 4, sorted keys, `,` and `: ` separators.
    pub(super) fn nice(indent: usize) -> Self {
        JsonStyle {
            indent: Some(indent),
            sort_keys: true,
            ensure_ascii: true,
            item_separator: ",",
            key_separator: ": ",
        }
    }
}

/// Serialises like Python's `json.dumps` with the given style.
pub(super) fn py_json(value: &serde_json::Value, style: &JsonStyle) -> String {
    let mut out = String::new();
    write_json(&mut out, value, style, 0);
    out
}

fn write_json(out: &mut String, value: &serde_json::Value, style: &JsonStyle, depth: usize) {
    use serde_json::Value as J;
    let newline = |out: &mut String, depth: usize| {
        if let Some(indent) = style.indent {
            out.push('\n');
            out.push_str(&" ".repeat(indent.saturating_mul(depth)));
        }
    };
    // With an indent, Python's item separator loses its trailing space at line ends.
    let item_sep = if style.indent.is_some() { style.item_separator.trim_end() } else { style.item_separator };
    match value {
        J::Null => out.push_str("null"),
        J::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        J::Number(n) => match (n.as_i64(), n.as_u64(), n.as_f64()) {
            (Some(i), _, _) => out.push_str(&i.to_string()),
            (None, Some(u), _) => out.push_str(&u.to_string()),
            (None, None, Some(f)) => out.push_str(&py_json_float(f)),
            _ => out.push_str(&n.to_string()),
        },
        J::String(s) => write_json_str(out, s, style.ensure_ascii),
        J::Array(items) => {
            if items.is_empty() {
                out.push_str("[]");
                return;
            }
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push_str(item_sep);
                }
                newline(out, depth + 1);
                write_json(out, item, style, depth + 1);
            }
            newline(out, depth);
            out.push(']');
        }
        J::Object(map) => {
            if map.is_empty() {
                out.push_str("{}");
                return;
            }
            out.push('{');
            let mut entries: Vec<(&String, &serde_json::Value)> = map.iter().collect();
            if style.sort_keys {
                entries.sort_by(|a, b| a.0.cmp(b.0));
            }
            for (i, (k, v)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push_str(item_sep);
                }
                newline(out, depth + 1);
                write_json_str(out, k, style.ensure_ascii);
                out.push_str(style.key_separator);
                write_json(out, v, style, depth + 1);
            }
            newline(out, depth);
            out.push('}');
        }
    }
}

fn py_json_float(f: f64) -> String {
    if f.is_nan() {
        "NaN".into()
    } else if f.is_infinite() {
        if f > 0.0 { "Infinity".into() } else { "-Infinity".into() }
    } else {
        py_float(f)
    }
}

fn write_json_str(out: &mut String, s: &str, ensure_ascii: bool) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{08}' => out.push_str("\\b"),
            '\u{0c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c if ensure_ascii && (c as u32) > 0x7e => {
                let mut buf = [0u16; 2];
                for unit in c.encode_utf16(&mut buf) {
                    out.push_str(&format!("\\u{:04x}", unit));
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;
    use minijinja::value::Serde;

    #[test]
    fn prints_like_python() {
        let v = Value::from(Serde(serde_json::json!([1, "a", true, null, {"k": "it's"}, 1.0, 1e20])));
        assert_eq!(py_str(&v), "[1, 'a', True, None, {'k': \"it's\"}, 1.0, 1e+20]");
        assert_eq!(py_float(0.00001), "1e-05");
        assert_eq!(py_float(2.5), "2.5");
    }

    #[test]
    fn json_like_python() {
        let v = serde_json::json!({"b": [1, 2], "a": "é"});
        assert_eq!(py_json(&v, &JsonStyle::compact()), r#"{"b": [1, 2], "a": "\u00e9"}"#);
        assert_eq!(
            py_json(&v, &JsonStyle::nice(4)),
            "{\n    \"a\": \"\\u00e9\",\n    \"b\": [\n        1,\n        2\n    ]\n}"
        );
    }
}
