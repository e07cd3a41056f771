//! A small YAML writer that prints the way PyYAML's `yaml.dump` does for the data hooks handle (`to_yaml`,
//! `to_nice_yaml`): sorted keys, plain scalars unless they would read back as something else, PyYAML's indentation.

use serde_json::Value as J;

/// `to_yaml` (`nice == false`: flow style for collections of scalars, indent 2) or `to_nice_yaml` (block style,
/// indent 4).
pub(super) fn dump(value: &J, nice: bool) -> String {
    let indent = if nice { 4 } else { 2 };
    let mut out = String::new();
    match value {
        J::Array(a) if !a.is_empty() && (nice || has_collection(value)) => {
            write_block_seq(&mut out, a, 0, indent, nice)
        }
        J::Object(m) if !m.is_empty() && (nice || has_collection(value)) => {
            write_block_map(&mut out, m, 0, indent, nice)
        }
        J::Array(_) | J::Object(_) => {
            out.push_str(&flow(value));
            out.push('\n');
        }
        scalar => {
            // Ansible's dumper leaves out PyYAML's `...` document end after a lone scalar.
            out.push_str(&scalar_text(scalar));
            out.push('\n');
        }
    }
    out
}

fn has_collection(value: &J) -> bool {
    match value {
        J::Array(a) => a.iter().any(|v| matches!(v, J::Array(_) | J::Object(_))),
        J::Object(m) => m.values().any(|v| matches!(v, J::Array(_) | J::Object(_))),
        _ => false,
    }
}

fn sorted(m: &serde_json::Map<String, J>) -> Vec<(&String, &J)> {
    let mut entries: Vec<_> = m.iter().collect();
    entries.sort_by(|a, b| a.0.cmp(b.0));
    entries
}

/// Whether a value is written on its own lines (a non-empty collection in block style).
fn is_block(value: &J, nice: bool) -> bool {
    match value {
        J::Array(a) => !a.is_empty() && (nice || has_collection(value)),
        J::Object(m) => !m.is_empty() && (nice || has_collection(value)),
        _ => false,
    }
}

fn write_block_map(out: &mut String, m: &serde_json::Map<String, J>, col: usize, indent: usize, nice: bool) {
    for (i, (k, v)) in sorted(m).into_iter().enumerate() {
        if i > 0 {
            out.push_str(&" ".repeat(col));
        }
        out.push_str(&scalar_text(&J::String(k.clone())));
        out.push(':');
        match v {
            J::Object(inner) if is_block(v, nice) => {
                out.push('\n');
                out.push_str(&" ".repeat(col + indent));
                write_block_map(out, inner, col + indent, indent, nice);
            }
            // PyYAML does not indent a sequence under a mapping key.
            J::Array(inner) if is_block(v, nice) => {
                out.push('\n');
                out.push_str(&" ".repeat(col));
                write_block_seq(out, inner, col, indent, nice);
            }
            other => {
                out.push(' ');
                out.push_str(&inline(other));
                out.push('\n');
            }
        }
    }
}

fn write_block_seq(out: &mut String, items: &[J], col: usize, indent: usize, nice: bool) {
    for (i, v) in items.iter().enumerate() {
        if i > 0 {
            out.push_str(&" ".repeat(col));
        }
        match v {
            // PyYAML pads the `-` of a block collection to the indent, but writes `- scalar` with one space.
            J::Object(inner) if is_block(v, nice) => {
                out.push('-');
                out.push_str(&" ".repeat(indent - 1));
                write_block_map(out, inner, col + indent, indent, nice)
            }
            J::Array(inner) if is_block(v, nice) => {
                out.push('-');
                out.push_str(&" ".repeat(indent - 1));
                write_block_seq(out, inner, col + indent, indent, nice)
            }
            other => {
                out.push_str("- ");
                out.push_str(&inline(other));
                out.push('\n');
            }
        }
    }
}

fn inline(value: &J) -> String {
    match value {
        J::Array(_) | J::Object(_) => flow(value),
        scalar => scalar_text(scalar),
    }
}

fn flow(value: &J) -> String {
    match value {
        J::Array(a) => format!("[{}]", a.iter().map(flow).collect::<Vec<_>>().join(", ")),
        J::Object(m) => format!(
            "{{{}}}",
            sorted(m)
                .into_iter()
                .map(|(k, v)| format!("{}: {}", scalar_text(&J::String(k.clone())), flow(v)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        scalar => scalar_text(scalar),
    }
}

fn scalar_text(value: &J) -> String {
    match value {
        J::Null => "null".into(),
        J::Bool(b) => if *b { "true" } else { "false" }.into(),
        J::Number(n) => match n.as_f64() {
            Some(f) if !n.is_i64() && !n.is_u64() => {
                let s = super::pyfmt::py_float(f);
                // PyYAML writes exponents with a mantissa dot: 1.0e+20.
                match s.split_once('e') {
                    Some((m, e)) if !m.contains('.') => format!("{m}.0e{e}"),
                    _ => s,
                }
            }
            _ => n.to_string(),
        },
        J::String(s) => yaml_string(s),
        J::Array(_) | J::Object(_) => flow(value),
    }
}

fn reads_as_other_type(s: &str) -> bool {
    // PyYAML's resolver: these words in lower, Title or UPPER case only.
    let lower = s.to_ascii_lowercase();
    let cased = s == lower || s == s.to_ascii_uppercase() || s == capitalized(&lower);
    if cased && matches!(lower.as_str(), "yes" | "no" | "true" | "false" | "on" | "off" | "null") || s == "~" {
        return true;
    }
    let t = s.trim_start_matches(['+', '-']).replace('_', "");
    if t.is_empty() {
        return false;
    }
    t.chars().all(|c| c.is_ascii_digit())
        || t.parse::<f64>().is_ok() && t.chars().any(|c| c.is_ascii_digit())
        || matches!(t.to_ascii_lowercase().as_str(), ".inf" | ".nan")
        || (t.starts_with("0x") && t.len() > 2 && t[2..].chars().all(|c| c.is_ascii_hexdigit()))
        || (t.starts_with("0o") && t.len() > 2)
        || t.contains(':') && t.split(':').all(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_digit() || c == '.'))
}

/// A plain scalar cannot start with a YAML indicator, except a `-` that does not start a sequence entry.
fn starts_with_indicator(s: &str, first: char) -> bool {
    if first == '-' {
        return s.len() == 1 || s.starts_with("- ") || s.starts_with("---");
    }
    "?:,[]{}#&*!|>'\"%@`".contains(first)
}

fn capitalized(s: &str) -> String {
    let mut chars = s.chars();
    chars.next().map(|c| c.to_ascii_uppercase().to_string() + chars.as_str()).unwrap_or_default()
}

fn yaml_string(s: &str) -> String {
    if s.is_empty() {
        return "''".into();
    }
    if s.chars().any(|c| c.is_control() && c != '\n') || s.contains('\n') {
        let mut out = String::from("\"");
        for c in s.chars() {
            match c {
                '"' => out.push_str("\\\""),
                '\\' => out.push_str("\\\\"),
                '\n' => out.push_str("\\n"),
                '\t' => out.push_str("\\t"),
                '\r' => out.push_str("\\r"),
                c if c.is_control() => out.push_str(&format!("\\x{:02X}", c as u32)),
                c => out.push(c),
            }
        }
        out.push('"');
        return out;
    }
    let first = s.chars().next().unwrap_or(' ');
    let needs_quotes = reads_as_other_type(s)
        || s.starts_with(' ')
        || s.ends_with(' ')
        || starts_with_indicator(s, first)
        || s.contains(": ")
        || s.contains(" #")
        || s.ends_with(':')
        || s.starts_with("---")
        || s.starts_with("...");
    if needs_quotes { format!("'{}'", s.replace('\'', "''")) } else { s.to_owned() }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn dumps_like_pyyaml() {
        assert_eq!(dump(&json!({"b": [1, 2], "a": "x"}), false), "a: x\nb: [1, 2]\n");
        assert_eq!(dump(&json!({"a": 1}), false), "{a: 1}\n");
        assert_eq!(dump(&json!("abc"), false), "abc\n");
        assert_eq!(dump(&json!({"a": {"b": "yes"}}), true), "a:\n    b: 'yes'\n");
    }
}
