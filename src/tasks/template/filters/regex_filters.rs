//! The regular-expression filters, with Python's replacement syntax.

use minijinja::Error;
use minijinja::value::{Kwargs, Rest, Value};

use super::{collections::*, values::*};
use crate::tasks::template::pyfmt::py_str;

pub(super) fn build_regex(pattern: &str, ignorecase: bool, multiline: bool) -> Result<regex::Regex, Error> {
    let key = (pattern.to_owned(), ignorecase, multiline);
    if let Some(re) = REGEX_CACHE.lock().ok().and_then(|cache| cache.get(&key).cloned()) {
        return Ok(re);
    }
    let re = regex::RegexBuilder::new(pattern)
        .case_insensitive(ignorecase)
        .multi_line(multiline)
        .build()
        .map_err(|e| err(format!("invalid regular expression {pattern:?}: {e}")))?;
    if let Ok(mut cache) = REGEX_CACHE.lock() {
        if cache.len() >= 512 {
            cache.clear();
        }
        cache.insert(key, re.clone());
    }
    Ok(re)
}

/// Python's `re.sub` replacement syntax (`\1`, `\g<1>`, `\g<name>`) in the regex crate's (`${1}`, `${name}`).
pub fn python_replacement(replacement: &str) -> String {
    let mut out = String::with_capacity(replacement.len());
    let chars: Vec<char> = replacement.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '$' {
            out.push_str("$$");
        } else if c == '\\' && i + 1 < chars.len() {
            let next = chars[i + 1];
            if next.is_ascii_digit() {
                let mut j = i + 1;
                while j < chars.len() && j < i + 3 && chars[j].is_ascii_digit() {
                    j += 1;
                }
                let group: String = chars[i + 1..j].iter().collect();
                out.push_str(&format!("${{{group}}}"));
                i = j;
                continue;
            }
            if next == 'g' && chars.get(i + 2) == Some(&'<') {
                if let Some(end) = chars[i + 3..].iter().position(|c| *c == '>') {
                    let group: String = chars[i + 3..i + 3 + end].iter().collect();
                    out.push_str(&format!("${{{group}}}"));
                    i += 4 + end;
                    continue;
                }
            }
            match next {
                'n' => out.push('\n'),
                't' => out.push('\t'),
                'r' => out.push('\r'),
                '\\' => out.push('\\'),
                other => {
                    out.push('\\');
                    out.push(other);
                }
            }
            i += 2;
            continue;
        } else {
            out.push(c);
        }
        i += 1;
    }
    out
}

pub(super) fn regex_replace(
    value: &Value,
    pattern: Option<String>,
    replacement: Option<String>,
    kwargs: Kwargs,
) -> Result<String, Error> {
    let pattern = match pattern {
        Some(p) => p,
        None => kwargs.get::<Option<String>>("pattern")?.unwrap_or_default(),
    };
    let replacement = match replacement {
        Some(r) => r,
        None => kwargs.get::<Option<String>>("replacement")?.unwrap_or_default(),
    };
    let ignorecase = kwargs.get::<Option<bool>>("ignorecase")?.unwrap_or(false);
    let multiline = kwargs.get::<Option<bool>>("multiline")?.unwrap_or(false);
    let count = kwargs.get::<Option<usize>>("count")?.unwrap_or(0);
    let mandatory_count = kwargs.get::<Option<usize>>("mandatory_count")?.unwrap_or(0);
    kwargs.assert_all_used()?;
    let text = py_str(value);
    let re = build_regex(&pattern, ignorecase, multiline)?;
    let matches = re.find_iter(&text).count();
    let subs = if count == 0 { matches } else { matches.min(count) };
    if mandatory_count != 0 && mandatory_count != subs {
        return Err(err(format!(
            "'{pattern}' should match {mandatory_count} times, but matches {count} times in '{text}'"
        )));
    }
    Ok(re.replacen(&text, count, python_replacement(&replacement).as_str()).into_owned())
}

pub(super) fn regex_search(
    value: &Value,
    pattern: String,
    groups: Rest<String>,
    kwargs: Kwargs,
) -> Result<Value, Error> {
    let ignorecase = kwargs.get::<Option<bool>>("ignorecase")?.unwrap_or(false);
    let multiline = kwargs.get::<Option<bool>>("multiline")?.unwrap_or(false);
    kwargs.assert_all_used()?;
    enum Group {
        Index(usize),
        Name(String),
    }
    let mut wanted = Vec::new();
    for arg in groups.iter() {
        if let Some(rest) = arg.strip_prefix("\\g<").and_then(|r| r.strip_suffix('>')) {
            match rest.parse::<usize>() {
                Ok(n) => wanted.push(Group::Index(n)),
                Err(_) => wanted.push(Group::Name(rest.to_owned())),
            }
        } else if let Some(n) = arg.strip_prefix('\\').and_then(|r| r.parse::<usize>().ok()) {
            wanted.push(Group::Index(n));
        } else {
            return Err(err("Unknown argument"));
        }
    }
    let text = py_str(value);
    let re = build_regex(&pattern, ignorecase, multiline)?;
    let Some(caps) = re.captures(&text) else {
        return Ok(Value::from(()));
    };
    if wanted.is_empty() {
        return Ok(Value::from(caps.get(0).map(|m| m.as_str()).unwrap_or_default()));
    }
    let mut out = Vec::new();
    for group in wanted {
        let m = match &group {
            Group::Index(n) => {
                if *n >= caps.len() {
                    return Err(err("no such group"));
                }
                caps.get(*n)
            }
            Group::Name(name) => {
                if !re.capture_names().any(|n| n == Some(name.as_str())) {
                    return Err(err("no such group"));
                }
                caps.name(name)
            }
        };
        out.push(m.map(|m| Value::from(m.as_str())).unwrap_or(Value::from(())));
    }
    Ok(Value::from(out))
}

pub(super) fn regex_findall(value: &Value, pattern: String, kwargs: Kwargs) -> Result<Value, Error> {
    let ignorecase = kwargs.get::<Option<bool>>("ignorecase")?.unwrap_or(false);
    let multiline = kwargs.get::<Option<bool>>("multiline")?.unwrap_or(false);
    kwargs.assert_all_used()?;
    let text = py_str(value);
    let re = build_regex(&pattern, ignorecase, multiline)?;
    let groups = re.captures_len() - 1;
    let mut out = Vec::new();
    for caps in re.captures_iter(&text) {
        let group = |i: usize| Value::from(caps.get(i).map(|m| m.as_str()).unwrap_or_default());
        match groups {
            0 => out.push(group(0)),
            1 => out.push(group(1)),
            n => out.push(Value::from((1..=n).map(group).collect::<Vec<_>>())),
        }
    }
    Ok(Value::from(out))
}
