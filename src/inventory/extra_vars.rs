//! `-e` arguments, as Ansible's `load_extra_vars` reads them: `@FILE` (YAML or JSON), inline YAML/JSON when the
//! argument starts with `{` or `[`, otherwise `key=value` pairs split by Ansible's `split_args`/`parse_kv`
//! (values stay strings). Later arguments win.

use std::path::Path;
use std::sync::LazyLock;

use regex::Regex;
use serde_json::Value;

use super::{Origin, Var, Vars};
use crate::error::{Error, Location, Result};

/// Parses `-e` arguments: `KEY=VALUE ...`, a JSON/YAML mapping, or `@FILE` (relative to `base_dir`, or the
/// current directory when `base_dir` is empty), later ones winning.
pub fn parse_extra_vars(args: &[String], base_dir: &Path) -> Result<Vars> {
    let mut vars = Vars::new();
    for arg in args {
        if arg.is_empty() {
            continue;
        }
        let origin = Origin::ExtraVars(arg.clone());
        if let Some(file) = arg.strip_prefix('@') {
            let path = if Path::new(file).is_absolute() || base_dir.as_os_str().is_empty() {
                Path::new(file).to_path_buf()
            } else {
                base_dir.join(file)
            };
            let mut file_vars = Vars::new();
            super::vars::load_file(&path, |_| Origin::Default, &mut file_vars).map_err(|e| {
                if e.hint.is_none() {
                    e.hint("-e @FILE takes a YAML or JSON file holding a mapping of variables")
                } else {
                    e
                }
            })?;
            for (k, v) in file_vars {
                vars.insert(k, Var { value: v.value, origin: Origin::ExtraVars(format!("@{}", path.display())) });
            }
        } else if arg.starts_with(['/', '.']) {
            return Err(Error::input(format!("please prepend extra_vars filename '{arg}' with '@'"))
                .hint(format!("write -e @{arg} to read variables from that file")));
        } else if arg.starts_with(['{', '[']) {
            let doc = super::yaml::load_data(arg, Path::new("-e")).map_err(|e| {
                Error::input(format!("-e {arg}: not valid YAML/JSON: {}", e.message))
                    .hint("quote the whole argument for the shell: -e '{\"name\": \"value\"}'")
            })?;
            let Some(entries) = doc.as_ref().and_then(|d| d.as_map()) else {
                return Err(invalid(arg));
            };
            for (k, v) in entries {
                super::yaml::reject_vault(v, k, Path::new("-e"))?;
                vars.insert(k.key_text(), Var { value: v.to_json(), origin: origin.clone() });
            }
        } else {
            for (k, v) in parse_kv(arg)? {
                vars.insert(k, Var { value: Value::String(v), origin: origin.clone() });
            }
        }
    }
    Ok(vars)
}

fn invalid(arg: &str) -> Error {
    Error::input(format!("invalid extra vars data supplied: '{arg}' could not be made into a dictionary"))
        .at(Location::file("-e"))
        .hint("pass name=value pairs, a YAML/JSON mapping such as '{\"name\": 1}', or @FILE")
}

/// Ansible's `parse_kv(args, check_raw=False)`: `key=value` tokens; anything else is collected under
/// `_raw_params`, as Ansible does.
pub fn parse_kv(args: &str) -> Result<Vec<(String, String)>> {
    let mut options: Vec<(String, String)> = Vec::new();
    let mut raw_params = Vec::new();
    for orig in split_args(args)? {
        let x = decode_escapes(&orig);
        // Ansible looks for the first `=` not preceded by a backslash, starting at the second character.
        let chars: Vec<char> = x.chars().collect();
        let pos = (1..chars.len()).find(|&i| chars[i] == '=' && chars[i - 1] != '\\');
        match pos {
            Some(pos) if x.contains('=') => {
                let k: String = chars[..pos].iter().collect();
                let v: String = chars[pos + 1..].iter().collect();
                let key = k.trim().to_string();
                let value = unquote(v.trim()).to_string();
                match options.iter_mut().find(|(existing, _)| *existing == key) {
                    Some(entry) => entry.1 = value,
                    None => options.push((key, value)),
                }
            }
            _ if x.contains('=') => raw_params.push(x.replace("\\=", "=")),
            _ => raw_params.push(orig),
        }
    }
    if !raw_params.is_empty() {
        options.push(("_raw_params".to_string(), raw_params.join(" ")));
    }
    Ok(options)
}

fn unquote(s: &str) -> &str {
    let b = s.as_bytes();
    if b.len() > 1 && b[0] == b[b.len() - 1] && (b[0] == b'"' || b[0] == b'\'') && b[b.len() - 2] != b'\\' {
        &s[1..s.len() - 1]
    } else {
        s
    }
}

static ESCAPES: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r#"\\U[0-9a-fA-F]{8}|\\u[0-9a-fA-F]{4}|\\x[0-9a-fA-F]{2}|\\[0-7]{1,3}|\\[\\'"abfnrtv]"#)
        .expect("valid regex")
});

/// Ansible's `_decode_escapes`: Python escape sequences in a `key=value` token.
fn decode_escapes(s: &str) -> String {
    ESCAPES
        .replace_all(s, |caps: &regex::Captures| {
            let m = &caps[0];
            let body = &m[1..];
            let decoded = match body.chars().next() {
                Some('U' | 'u' | 'x') => u32::from_str_radix(&body[1..], 16).ok().and_then(char::from_u32),
                Some('0'..='7') => u32::from_str_radix(body, 8).ok().and_then(char::from_u32),
                Some('\\') => Some('\\'),
                Some('\'') => Some('\''),
                Some('"') => Some('"'),
                Some('a') => Some('\x07'),
                Some('b') => Some('\x08'),
                Some('f') => Some('\x0c'),
                Some('n') => Some('\n'),
                Some('r') => Some('\r'),
                Some('t') => Some('\t'),
                Some('v') => Some('\x0b'),
                _ => None,
            };
            decoded.map(String::from).unwrap_or_else(|| m.to_string())
        })
        .into_owned()
}

/// Ansible's `split_args`: split on spaces, but keep quoted strings and Jinja blocks together (quotes kept).
pub fn split_args(args: &str) -> Result<Vec<String>> {
    let mut params: Vec<String> = Vec::new();
    if args.is_empty() {
        return Ok(params);
    }
    let items: Vec<&str> = args.split('\n').collect();
    let mut quote_char: Option<char> = None;
    let mut inside_quotes = false;
    let (mut print_depth, mut block_depth, mut comment_depth) = (0i64, 0i64, 0i64);
    for (item_idx, item) in items.iter().enumerate() {
        let mut line_continuation = false;
        for (idx, token) in item.split(' ').enumerate() {
            if token.is_empty() && idx != 0 {
                if params.is_empty() {
                    params.push(String::new());
                }
                if let Some(last) = params.last_mut() {
                    last.push(' ');
                }
                continue;
            }
            if token == "\\" && !inside_quotes {
                line_continuation = true;
                continue;
            }
            let was_inside_quotes = inside_quotes;
            quote_char = quote_state(token, quote_char);
            inside_quotes = quote_char.is_some();
            let mut appended = false;
            let in_jinja = print_depth > 0 || block_depth > 0 || comment_depth > 0;
            if inside_quotes && !was_inside_quotes && !in_jinja {
                params.push(token.to_string());
                appended = true;
            } else if in_jinja || inside_quotes || was_inside_quotes {
                if params.is_empty() {
                    params.push(String::new());
                }
                if let Some(last) = params.last_mut() {
                    if idx > 0 {
                        last.push(' ');
                    }
                    last.push_str(token);
                }
                appended = true;
            }
            for (depth, open, close) in
                [(&mut print_depth, "{{", "}}"), (&mut block_depth, "{%", "%}"), (&mut comment_depth, "{#", "#}")]
            {
                let before = *depth;
                let (opens, closes) = (token.matches(open).count() as i64, token.matches(close).count() as i64);
                if opens != closes {
                    *depth = (*depth + opens - closes).max(0);
                }
                if *depth != before && !appended {
                    params.push(token.to_string());
                    appended = true;
                }
            }
            let in_jinja = print_depth > 0 || block_depth > 0 || comment_depth > 0;
            if !in_jinja && !inside_quotes && !appended && !token.is_empty() {
                params.push(token.to_string());
            }
        }
        if items.len() > 1 && item_idx != items.len() - 1 && !line_continuation {
            if params.is_empty() {
                params.push(String::new());
            }
            if let Some(last) = params.last_mut() {
                last.push('\n');
            }
        }
    }
    if print_depth > 0 || block_depth > 0 || comment_depth > 0 || inside_quotes {
        return Err(Error::input(format!(
            "failed at splitting arguments, either an unbalanced jinja2 block or quotes: {args}"
        ))
        .hint("close every quote and every {{ }} / {% %} block"));
    }
    Ok(params)
}

fn quote_state(token: &str, mut quote_char: Option<char>) -> Option<char> {
    let mut prev: Option<char> = None;
    for c in token.chars() {
        if (c == '"' || c == '\'') && prev != Some('\\') {
            match quote_char {
                Some(q) if q == c => quote_char = None,
                Some(_) => {}
                None => quote_char = Some(c),
            }
        }
        prev = Some(c);
    }
    quote_char
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn values(vars: &Vars) -> serde_json::Map<String, Value> {
        super::super::vars_to_json(vars)
    }

    #[test]
    fn key_value_pairs_are_strings() {
        let vars = parse_extra_vars(&["a=1 b='two words' c=\"x=y\"".to_string()], Path::new("")).unwrap();
        assert_eq!(values(&vars), json!({"a": "1", "b": "two words", "c": "x=y"}).as_object().unwrap().clone());
        assert_eq!(vars["a"].origin, Origin::ExtraVars("a=1 b='two words' c=\"x=y\"".into()));
    }

    #[test]
    fn json_and_yaml_mappings_keep_types() {
        let vars = parse_extra_vars(&["{\"n\": 3, \"l\": [1, 2]}".into(), "{m: yes}".into()], Path::new("")).unwrap();
        assert_eq!(values(&vars), json!({"n": 3, "l": [1, 2], "m": true}).as_object().unwrap().clone());
        assert!(parse_extra_vars(&["[1, 2]".into()], Path::new("")).is_err());
    }

    #[test]
    fn files_are_read_relative_to_base_dir() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("vars.yml"), "upgrade_nodes_serial: 2\n").unwrap();
        let vars = parse_extra_vars(&["@vars.yml".into(), "x=1".into()], dir.path()).unwrap();
        assert_eq!(vars["upgrade_nodes_serial"].value, json!(2));
        assert!(matches!(&vars["upgrade_nodes_serial"].origin, Origin::ExtraVars(s) if s.ends_with("vars.yml")));
        assert!(parse_extra_vars(&["@missing.yml".into()], dir.path()).is_err());
        assert!(parse_extra_vars(&["./vars.yml".into()], dir.path()).is_err());
    }

    #[test]
    fn later_arguments_win_and_free_words_go_to_raw_params() {
        let vars = parse_extra_vars(&["a=1".into(), "a=2 word".into()], Path::new("")).unwrap();
        assert_eq!(vars["a"].value, json!("2"));
        assert_eq!(vars["_raw_params"].value, json!("word"));
        assert!(parse_extra_vars(&["a='open".into()], Path::new("")).is_err());
    }
}
