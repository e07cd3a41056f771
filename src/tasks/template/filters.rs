//! Ansible's filters, tests and lookups for minijinja, written after ansible-core's own code
//! (lib/ansible/plugins/filter/core.py, mathstuff.py, test/core.py, lookup/{env,file,pipe,vars}.py) so that hooks
//! print and decide what they print and decide under Ansible.

use std::cmp::Ordering;
use std::sync::Arc;

use minijinja::value::{Kwargs, Rest, Serde, Value, ValueKind};
use minijinja::{Environment, Error, ErrorKind, State};

use super::pyfmt::{JsonStyle, py_json, py_str};
use crate::ansible_compat::{boolean, shell_quote};

/// The string `omit` stands for: the engine drops a module argument whose value is exactly this.
pub const OMIT: &str = "__omit_place_holder__upgrade__";

fn err(message: impl Into<String>) -> Error {
    Error::new(ErrorKind::InvalidOperation, message.into())
}

pub(crate) fn to_json(value: &Value) -> Result<serde_json::Value, Error> {
    if contains_undefined(value) {
        // Ansible fails on an undefined value inside a list or mapping; serialising it would make it null.
        return Err(Error::new(ErrorKind::UndefinedError, "a list or mapping holds an undefined value"));
    }
    serde_json::to_value(value).map_err(|e| err(format!("cannot convert value: {e}")))
}

/// Whether an undefined value sits anywhere inside a (literal) list or mapping.
pub(crate) fn contains_undefined(value: &Value) -> bool {
    match value.kind() {
        ValueKind::Undefined => true,
        ValueKind::Seq => value.try_iter().is_ok_and(|mut items| items.any(|v| contains_undefined(&v))),
        ValueKind::Map => value
            .try_iter()
            .is_ok_and(|mut keys| keys.any(|k| value.get_item(&k).is_ok_and(|v| contains_undefined(&v)))),
        _ => false,
    }
}

pub(crate) fn from_json(value: serde_json::Value) -> Value {
    Value::from(Serde(value))
}

/// `mapping[key]` if the key is there (and the value is a mapping).
fn get_key(value: &Value, key: &str) -> Option<Value> {
    value.get_item(&Value::from(key)).ok().filter(|v| !v.is_undefined())
}

fn is_string(value: &Value) -> bool {
    value.kind() == ValueKind::String
}

fn is_seq(value: &Value) -> bool {
    matches!(value.kind(), ValueKind::Seq | ValueKind::Iterable)
}

fn items_of(value: &Value, filter: &str) -> Result<Vec<Value>, Error> {
    match value.kind() {
        ValueKind::Seq | ValueKind::Iterable | ValueKind::Map | ValueKind::String => {
            Ok(value.try_iter().map_err(|e| err(format!("{filter}: {e}")))?.collect())
        }
        ValueKind::Undefined => Err(Error::from(ErrorKind::UndefinedError)),
        other => Err(err(format!("{filter} expects a list, got {other}"))),
    }
}

/// Registers every filter, test and global function on the environment.
pub(super) fn register(env: &mut Environment<'static>) {
    // Filters.
    env.add_filter("default", default);
    env.add_filter("d", default);
    env.add_filter("bool", to_bool);
    env.add_filter("int", to_int);
    env.add_filter("float", to_float);
    env.add_filter("string", |v: &Value| py_str(v));
    env.add_filter("lower", |v: &Value| py_str(v).to_lowercase());
    env.add_filter("upper", |v: &Value| py_str(v).to_uppercase());
    env.add_filter("capitalize", capitalize);
    env.add_filter("trim", trim);
    env.add_filter("replace", replace);
    env.add_filter("join", join);
    env.add_filter("split", split);
    env.add_filter("length", length);
    env.add_filter("count", length);
    env.add_filter("union", union);
    env.add_filter("intersect", intersect);
    env.add_filter("difference", difference);
    env.add_filter("symmetric_difference", symmetric_difference);
    env.add_filter("flatten", flatten);
    env.add_filter("dict2items", dict2items);
    env.add_filter("items2dict", items2dict);
    env.add_filter("combine", combine);
    env.add_filter("regex_replace", regex_replace);
    env.add_filter("regex_search", regex_search);
    env.add_filter("regex_findall", regex_findall);
    env.add_filter("regex_escape", |v: &Value| regex::escape(&py_str(v)));
    env.add_filter("ternary", ternary);
    env.add_filter("to_json", to_json_filter);
    env.add_filter("to_nice_json", to_nice_json);
    env.add_filter("from_json", from_json_filter);
    env.add_filter("to_yaml", |v: &Value| -> Result<String, Error> { Ok(super::pyyaml::dump(&to_json(v)?, false)) });
    env.add_filter("to_nice_yaml", |v: &Value| -> Result<String, Error> {
        Ok(super::pyyaml::dump(&to_json(v)?, true))
    });
    env.add_filter("from_yaml", from_yaml);
    env.add_filter("basename", |v: &Value| basename(&py_str(v)).to_owned());
    env.add_filter("dirname", |v: &Value| dirname(&py_str(v)));
    env.add_filter("quote", |v: &Value| if v.is_none() { "''".to_owned() } else { shell_quote(&py_str(v)) });
    env.add_filter("b64encode", |v: &Value| base64_encode(py_str(v).as_bytes()));
    env.add_filter("b64decode", b64decode);
    env.add_filter("mandatory", mandatory);
    env.add_filter("type_debug", type_debug);
    env.add_filter("path_join", path_join);

    // Tests.
    env.add_test("version", version_compare);
    env.add_test("version_compare", version_compare);
    env.add_test("failed", |v: &Value| result_flag(v, "failed", "failed"));
    env.add_test("failure", |v: &Value| result_flag(v, "failed", "failure"));
    env.add_test("succeeded", |v: &Value| result_flag(v, "failed", "succeeded").map(|f| !f));
    env.add_test("success", |v: &Value| result_flag(v, "failed", "success").map(|f| !f));
    env.add_test("successful", |v: &Value| result_flag(v, "failed", "successful").map(|f| !f));
    env.add_test("skipped", |v: &Value| result_flag(v, "skipped", "skipped"));
    env.add_test("skip", |v: &Value| result_flag(v, "skipped", "skip"));
    env.add_test("unreachable", |v: &Value| result_flag(v, "unreachable", "unreachable"));
    env.add_test("reachable", |v: &Value| result_flag(v, "unreachable", "reachable").map(|f| !f));
    env.add_test("changed", changed);
    env.add_test("change", changed);
    env.add_test("match", |v: &Value, p: String, k: Kwargs| regex_test(v, &p, k, true));
    env.add_test("search", |v: &Value, p: String, k: Kwargs| regex_test(v, &p, k, false));
    env.add_test("regex", regex_test_generic);
    env.add_test("truthy", |v: &Value, k: Kwargs| truthy(v, k));
    env.add_test("falsy", |v: &Value, k: Kwargs| truthy(v, k).map(|t| !t));
    env.add_test("any", |v: &Value| -> Result<bool, Error> { Ok(items_of(v, "any")?.iter().any(Value::is_true)) });
    env.add_test("all", |v: &Value| -> Result<bool, Error> { Ok(items_of(v, "all")?.iter().all(Value::is_true)) });
    // Jinja: strings are sequences and iterable.
    env.add_test("sequence", |v: &Value| {
        matches!(v.kind(), ValueKind::Seq | ValueKind::Map | ValueKind::String | ValueKind::Iterable)
    });
    env.add_test("iterable", |v: &Value| {
        matches!(v.kind(), ValueKind::Seq | ValueKind::Map | ValueKind::String | ValueKind::Iterable)
    });

    env.set_unknown_method_callback(python_method);

    // Globals.
    env.add_global("omit", OMIT);
    env.add_function("lookup", |state: &State, name: String, terms: Rest<Value>, kwargs: Kwargs| {
        lookup(state, &name, &terms, kwargs, false)
    });
    env.add_function("query", |state: &State, name: String, terms: Rest<Value>, kwargs: Kwargs| {
        lookup(state, &name, &terms, kwargs, true)
    });
    env.add_function("q", |state: &State, name: String, terms: Rest<Value>, kwargs: Kwargs| {
        lookup(state, &name, &terms, kwargs, true)
    });
}

// ---- filters ----

/// `default(default_value='', boolean=False)`. The arguments are taken raw so that an undefined default stays
/// undefined (and fails when used) instead of turning into "no argument".
fn default(value: &Value, args: Rest<Value>, kwargs: Kwargs) -> Result<Value, Error> {
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
pub(super) fn to_bool(value: &Value) -> Result<bool, Error> {
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
fn parse_py_int(text: &str, base: u32) -> Option<i64> {
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
fn parse_py_float(text: &str) -> Option<f64> {
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

fn to_int(value: &Value, default: Option<Value>, base: Option<u32>, kwargs: Kwargs) -> Result<Value, Error> {
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

fn to_float(value: &Value, default: Option<Value>) -> Result<Value, Error> {
    let default = default.unwrap_or(Value::from(0.0));
    Ok(match value.kind() {
        ValueKind::Bool => Value::from(if value.is_true() { 1.0 } else { 0.0 }),
        ValueKind::Number => f64::try_from(value.clone()).map(Value::from).unwrap_or(default),
        ValueKind::String => parse_py_float(value.as_str().unwrap_or_default()).map(Value::from).unwrap_or(default),
        ValueKind::Undefined => return Err(Error::from(ErrorKind::UndefinedError)),
        _ => default,
    })
}

fn capitalize(value: &Value) -> String {
    let s = py_str(value);
    let mut chars = s.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars.flat_map(char::to_lowercase)).collect(),
        None => String::new(),
    }
}

fn trim(value: &Value, chars: Option<String>) -> String {
    let s = py_str(value);
    match chars {
        Some(chars) => s.trim_matches(|c| chars.contains(c)).to_owned(),
        None => s.trim().to_owned(),
    }
}

fn replace(value: &Value, old: String, new: String, count: Option<usize>) -> String {
    let s = py_str(value);
    match count {
        Some(n) => s.replacen(&old, &new, n),
        None => s.replace(&old, &new),
    }
}

fn join(value: &Value, separator: Option<String>, kwargs: Kwargs) -> Result<String, Error> {
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
fn split(value: &Value, separator: Option<String>, maxsplit: Option<i64>) -> Result<Value, Error> {
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

fn length(value: &Value) -> Result<usize, Error> {
    match value.kind() {
        ValueKind::String => Ok(value.as_str().unwrap_or_default().chars().count()),
        ValueKind::Undefined => Err(Error::from(ErrorKind::UndefinedError)),
        _ => value.len().ok_or_else(|| err(format!("object of type '{}' has no len()", py_type(value)))),
    }
}

fn unique_in_order(items: impl IntoIterator<Item = Value>) -> Vec<Value> {
    let mut out: Vec<Value> = Vec::new();
    for item in items {
        if !out.contains(&item) {
            out.push(item);
        }
    }
    out
}

fn union(a: &Value, b: &Value) -> Result<Value, Error> {
    let mut all = items_of(a, "union")?;
    all.extend(items_of(b, "union")?);
    Ok(Value::from(unique_in_order(all)))
}

fn intersect(a: &Value, b: &Value) -> Result<Value, Error> {
    let other = items_of(b, "intersect")?;
    Ok(Value::from(unique_in_order(items_of(a, "intersect")?.into_iter().filter(|x| other.contains(x)))))
}

fn difference(a: &Value, b: &Value) -> Result<Value, Error> {
    let other = items_of(b, "difference")?;
    Ok(Value::from(unique_in_order(items_of(a, "difference")?.into_iter().filter(|x| !other.contains(x)))))
}

fn symmetric_difference(a: &Value, b: &Value) -> Result<Value, Error> {
    let left = items_of(a, "symmetric_difference")?;
    let right = items_of(b, "symmetric_difference")?;
    let both = intersect(a, b)?;
    let both: Vec<Value> = items_of(&both, "symmetric_difference")?;
    let all = unique_in_order(left.into_iter().chain(right));
    Ok(Value::from(all.into_iter().filter(|x| !both.contains(x)).collect::<Vec<_>>()))
}

fn flatten(value: &Value, levels: Option<i64>, kwargs: Kwargs) -> Result<Value, Error> {
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

fn dict2items(value: &Value, kwargs: Kwargs) -> Result<Value, Error> {
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

fn items2dict(value: &Value, kwargs: Kwargs) -> Result<Value, Error> {
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

fn merge_hash(
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

fn combine(terms: Rest<Value>, kwargs: Kwargs) -> Result<Value, Error> {
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

type RegexCache = std::sync::Mutex<std::collections::HashMap<(String, bool, bool), regex::Regex>>;

/// Compiled patterns, so a regex filter in a loop or on every host compiles once (cleared when it grows large).
static REGEX_CACHE: std::sync::LazyLock<RegexCache> = std::sync::LazyLock::new(Default::default);

fn build_regex(pattern: &str, ignorecase: bool, multiline: bool) -> Result<regex::Regex, Error> {
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

fn regex_replace(
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

fn regex_search(value: &Value, pattern: String, groups: Rest<String>, kwargs: Kwargs) -> Result<Value, Error> {
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

fn regex_findall(value: &Value, pattern: String, kwargs: Kwargs) -> Result<Value, Error> {
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

fn ternary(value: &Value, true_val: Value, false_val: Value, none_val: Option<Value>) -> Value {
    match none_val {
        Some(n) if value.is_none() && !n.is_none() => n,
        _ if value.is_true() => true_val,
        _ => false_val,
    }
}

fn to_json_filter(value: &Value, kwargs: Kwargs) -> Result<String, Error> {
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

const MAX_JSON_INDENT: usize = 1000;

fn to_nice_json(value: &Value, indent: Option<usize>, kwargs: Kwargs) -> Result<String, Error> {
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

fn from_json_filter(value: &Value) -> Result<Value, Error> {
    let text = py_str(value);
    serde_json::from_str::<serde_json::Value>(&text).map(from_json).map_err(|e| err(format!("from_json: {e}")))
}

fn from_yaml(value: &Value) -> Result<Value, Error> {
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
pub(super) fn basename(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// Python's `os.path.dirname`.
pub(super) fn dirname(path: &str) -> String {
    let i = path.rfind('/').map(|i| i + 1).unwrap_or(0);
    let head = &path[..i];
    if !head.is_empty() && head.chars().any(|c| c != '/') {
        head.trim_end_matches('/').to_owned()
    } else {
        head.to_owned()
    }
}

const B64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

fn base64_encode(bytes: &[u8]) -> String {
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

fn base64_decode(text: &str) -> Option<Vec<u8>> {
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

fn b64decode(value: &Value) -> Result<String, Error> {
    let bytes = base64_decode(&py_str(value)).ok_or_else(|| err("b64decode: invalid base64 input"))?;
    String::from_utf8(bytes).map_err(|_| err("b64decode: the decoded bytes are not UTF-8"))
}

fn mandatory(value: &Value, msg: Option<String>) -> Result<Value, Error> {
    if value.is_undefined() {
        return Err(err(msg.unwrap_or_else(|| "Mandatory variable not defined.".into())));
    }
    Ok(value.clone())
}

/// Python's type name of a value, as `type_debug` and Ansible's messages say it.
pub(super) fn py_type(value: &Value) -> &'static str {
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

fn py_class(value: &Value) -> String {
    format!("<class '{}'>", py_type(value))
}

fn type_debug(value: &Value) -> &'static str {
    py_type(value)
}

fn path_join(value: &Value) -> Result<String, Error> {
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

// ---- Python methods ----

/// The Python `str`, `dict` and `list` methods hooks call on values (`x.split(',')`, `d.items()`, `s.startswith()`).
fn python_method(state: &mut State, value: &Value, method: &str, args: &[Value]) -> Result<Value, Error> {
    let unknown =
        || Error::new(ErrorKind::UnknownMethod, format!("{} object has no attribute '{method}'", py_type(value)));
    let arg_str = |i: usize| args.get(i).filter(|v| !v.is_none()).map(py_str);
    match value.kind() {
        ValueKind::String => {
            let s = value.as_str().unwrap_or_default();
            Ok(match method {
                "upper" => Value::from(s.to_uppercase()),
                "lower" => Value::from(s.to_lowercase()),
                "title" => state.apply_filter("title", std::slice::from_ref(value))?,
                "capitalize" => Value::from(capitalize(value)),
                "strip" => Value::from(trim(value, arg_str(0))),
                "lstrip" => Value::from(match arg_str(0) {
                    Some(chars) => s.trim_start_matches(|c| chars.contains(c)),
                    None => s.trim_start(),
                }),
                "rstrip" => Value::from(match arg_str(0) {
                    Some(chars) => s.trim_end_matches(|c| chars.contains(c)),
                    None => s.trim_end(),
                }),
                "split" => split(value, arg_str(0), args.get(1).and_then(Value::as_i64))?,
                "rsplit" if args.get(1).is_none() => split(value, arg_str(0), None)?,
                "splitlines" => Value::from(s.lines().map(str::to_owned).collect::<Vec<_>>()),
                "startswith" | "endswith" => {
                    let prefixes: Vec<String> = match args.first() {
                        Some(a) if is_seq(a) => items_of(a, method)?.iter().map(py_str).collect(),
                        Some(a) => vec![py_str(a)],
                        None => return Err(err(format!("{method}() takes at least 1 argument (0 given)"))),
                    };
                    Value::from(prefixes.iter().any(|p| {
                        if method == "startswith" { s.starts_with(p.as_str()) } else { s.ends_with(p.as_str()) }
                    }))
                }
                "replace" => {
                    let (Some(old), Some(new)) = (arg_str(0), arg_str(1)) else {
                        return Err(err("replace() takes at least 2 arguments"));
                    };
                    Value::from(replace(value, old, new, args.get(2).and_then(Value::as_usize)))
                }
                "find" => Value::from(match arg_str(0).and_then(|p| s.find(&p)) {
                    Some(byte) => s[..byte].chars().count() as i64,
                    None => -1,
                }),
                "count" => Value::from(
                    arg_str(0)
                        .map(|p| if p.is_empty() { s.chars().count() + 1 } else { s.matches(&p).count() })
                        .unwrap_or(0),
                ),
                "join" => {
                    let items = args.first().map(|a| items_of(a, "join")).transpose()?.unwrap_or_default();
                    Value::from(items.iter().map(py_str).collect::<Vec<_>>().join(s))
                }
                "isdigit" => Value::from(!s.is_empty() && s.chars().all(|c| c.is_ascii_digit())),
                "isalpha" => Value::from(!s.is_empty() && s.chars().all(char::is_alphabetic)),
                "isalnum" => Value::from(!s.is_empty() && s.chars().all(char::is_alphanumeric)),
                "isspace" => Value::from(!s.is_empty() && s.chars().all(char::is_whitespace)),
                "islower" => Value::from(s.chars().any(char::is_lowercase) && !s.chars().any(char::is_uppercase)),
                "isupper" => Value::from(s.chars().any(char::is_uppercase) && !s.chars().any(char::is_lowercase)),
                _ => return Err(unknown()),
            })
        }
        ValueKind::Map => Ok(match method {
            "items" => state.apply_filter("items", std::slice::from_ref(value))?,
            "keys" => Value::from(value.try_iter()?.collect::<Vec<_>>()),
            "values" => {
                Value::from(value.try_iter()?.map(|k| value.get_item(&k).unwrap_or_default()).collect::<Vec<_>>())
            }
            "get" => {
                let key = args.first().cloned().unwrap_or_default();
                match value.get_item(&key) {
                    Ok(v) if !v.is_undefined() => v,
                    _ => args.get(1).cloned().unwrap_or(Value::from(())),
                }
            }
            _ => return Err(unknown()),
        }),
        ValueKind::Seq => {
            let items = items_of(value, method)?;
            let needle = args.first().cloned().unwrap_or_default();
            Ok(match method {
                "index" => match items.iter().position(|x| *x == needle) {
                    Some(i) => Value::from(i),
                    None => return Err(err(format!("{} is not in list", py_str(&needle)))),
                },
                "count" => Value::from(items.iter().filter(|x| **x == needle).count()),
                _ => return Err(unknown()),
            })
        }
        _ => Err(unknown()),
    }
}

// ---- tests ----

fn result_flag(value: &Value, key: &str, test: &str) -> Result<bool, Error> {
    if value.kind() != ValueKind::Map {
        return Err(err(format!("The '{test}' test expects a dictionary")));
    }
    Ok(get_key(value, key).is_some_and(|v| v.is_true()))
}

fn changed(value: &Value) -> Result<bool, Error> {
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

fn regex_test(value: &Value, pattern: &str, kwargs: Kwargs, anchored: bool) -> Result<bool, Error> {
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

fn regex_test_generic(value: &Value, pattern: Option<String>, kwargs: Kwargs) -> Result<bool, Error> {
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

fn truthy(value: &Value, kwargs: Kwargs) -> Result<bool, Error> {
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

// ---- versions ----

#[derive(Debug, Clone, PartialEq, Eq)]
enum Part {
    Num(u128),
    Text(String),
}

/// distutils' LooseVersion: numbers and letter runs, everything else kept as text between them.
fn loose_version(text: &str) -> Vec<Part> {
    let mut parts = Vec::new();
    let mut rest = text;
    while !rest.is_empty() {
        let first = rest.chars().next().unwrap_or('.');
        let len = if first.is_ascii_digit() {
            rest.find(|c: char| !c.is_ascii_digit()).unwrap_or(rest.len())
        } else if first.is_ascii_lowercase() {
            rest.find(|c: char| !c.is_ascii_lowercase()).unwrap_or(rest.len())
        } else if first == '.' {
            1
        } else {
            rest.find(|c: char| c.is_ascii_digit() || c.is_ascii_lowercase() || c == '.').unwrap_or(rest.len())
        };
        let token = &rest[..len];
        rest = &rest[len..];
        if token == "." {
            continue;
        }
        parts.push(match token.parse::<u128>() {
            Ok(n) => Part::Num(n),
            Err(_) => Part::Text(token.to_owned()),
        });
    }
    parts
}

fn compare_loose(a: &str, b: &str) -> Result<Ordering, String> {
    let (a, b) = (loose_version(a), loose_version(b));
    for (x, y) in a.iter().zip(b.iter()) {
        let ord = match (x, y) {
            (Part::Num(x), Part::Num(y)) => x.cmp(y),
            (Part::Text(x), Part::Text(y)) => x.cmp(y),
            (Part::Num(_), Part::Text(_)) => {
                return Err("'<' not supported between instances of 'int' and 'str'".into());
            }
            (Part::Text(_), Part::Num(_)) => {
                return Err("'<' not supported between instances of 'str' and 'int'".into());
            }
        };
        if ord != Ordering::Equal {
            return Ok(ord);
        }
    }
    Ok(a.len().cmp(&b.len()))
}

/// distutils' StrictVersion: `N.N[.N][(a|b)N]`.
/// major, minor, patch and the optional `a1`/`b2` pre-release.
type StrictVersion = (u64, u64, u64, Option<(char, u64)>);

fn strict_version(text: &str) -> Result<StrictVersion, String> {
    let invalid = || format!("invalid version number '{text}'");
    let re = regex::Regex::new(r"^(\d+)\.(\d+)(\.(\d+))?([ab](\d+))?$").map_err(|e| e.to_string())?;
    let caps = re.captures(text).ok_or_else(invalid)?;
    let num = |i: usize| -> Result<u64, String> {
        caps.get(i).map(|m| m.as_str().parse::<u64>().map_err(|_| invalid())).unwrap_or(Ok(0))
    };
    let pre = match caps.get(5) {
        Some(m) => Some((m.as_str().chars().next().unwrap_or('a'), num(6)?)),
        None => None,
    };
    Ok((num(1)?, num(2)?, num(4)?, pre))
}

fn compare_strict(a: &str, b: &str) -> Result<Ordering, String> {
    let (a, b) = (strict_version(a)?, strict_version(b)?);
    let base = (a.0, a.1, a.2).cmp(&(b.0, b.1, b.2));
    if base != Ordering::Equal {
        return Ok(base);
    }
    Ok(match (a.3, b.3) {
        (None, None) => Ordering::Equal,
        (None, Some(_)) => Ordering::Greater,
        (Some(_), None) => Ordering::Less,
        (Some(x), Some(y)) => x.cmp(&y),
    })
}

/// Semantic versioning 2.0 precedence (Ansible's SemanticVersion).
fn compare_semver(a: &str, b: &str) -> Result<Ordering, String> {
    fn parse(text: &str) -> Result<(u64, u64, u64, Vec<Part>), String> {
        let invalid = || format!("invalid semantic version '{text}'");
        let core_and_pre = text.split('+').next().unwrap_or(text);
        let (core, pre) = match core_and_pre.split_once('-') {
            Some((c, p)) => (c, Some(p)),
            None => (core_and_pre, None),
        };
        let nums: Vec<&str> = core.split('.').collect();
        if nums.len() != 3 {
            return Err(invalid());
        }
        let n = |s: &str| s.parse::<u64>().map_err(|_| invalid());
        let pre = pre
            .map(|p| {
                p.split('.')
                    .map(|id| match id.parse::<u128>() {
                        Ok(n) => Part::Num(n),
                        Err(_) => Part::Text(id.to_owned()),
                    })
                    .collect()
            })
            .unwrap_or_default();
        Ok((n(nums[0])?, n(nums[1])?, n(nums[2])?, pre))
    }
    let (a, b) = (parse(a)?, parse(b)?);
    let base = (a.0, a.1, a.2).cmp(&(b.0, b.1, b.2));
    if base != Ordering::Equal {
        return Ok(base);
    }
    Ok(match (a.3.is_empty(), b.3.is_empty()) {
        (true, true) => Ordering::Equal,
        (true, false) => Ordering::Greater,
        (false, true) => Ordering::Less,
        (false, false) => {
            for (x, y) in a.3.iter().zip(b.3.iter()) {
                let ord = match (x, y) {
                    (Part::Num(x), Part::Num(y)) => x.cmp(y),
                    (Part::Text(x), Part::Text(y)) => x.cmp(y),
                    (Part::Num(_), Part::Text(_)) => Ordering::Less,
                    (Part::Text(_), Part::Num(_)) => Ordering::Greater,
                };
                if ord != Ordering::Equal {
                    return Ok(ord);
                }
            }
            a.3.len().cmp(&b.3.len())
        }
    })
}

/// Ansible's `version` test (and `version_compare`): `value is version('1.28', '>=', strict=false)`.
pub(super) fn version_compare(
    value: &Value,
    version: Value,
    operator: Option<String>,
    kwargs: Kwargs,
) -> Result<bool, Error> {
    let operator = match operator {
        Some(op) => op,
        None => kwargs.get::<Option<String>>("operator")?.unwrap_or_else(|| "eq".into()),
    };
    let strict: Option<bool> = kwargs.get("strict")?;
    let version_type: Option<String> = kwargs.get("version_type")?;
    kwargs.assert_all_used()?;
    if strict.is_some() && version_type.is_some() {
        return Err(err("Cannot specify both 'strict' and 'version_type'"));
    }
    if !value.is_true() {
        return Err(err("Input version value cannot be empty"));
    }
    if !version.is_true() {
        return Err(err("Version parameter to compare against cannot be empty"));
    }
    let kind = if strict == Some(true) { "strict".to_owned() } else { version_type.unwrap_or_else(|| "loose".into()) };
    let op = match operator.as_str() {
        "==" | "=" | "eq" => "eq",
        "<" | "lt" => "lt",
        "<=" | "le" => "le",
        ">" | "gt" => "gt",
        ">=" | "ge" => "ge",
        "!=" | "<>" | "ne" => "ne",
        other => {
            return Err(err(format!(
                "Invalid operator type ({other}). Must be one of '==', '=', 'eq', '<', 'lt', '<=', 'le', '>', 'gt', \
                 '>=', 'ge', '!=', '<>', 'ne'"
            )));
        }
    };
    let (a, b) = (py_str(value), py_str(&version));
    let ordering = match kind.as_str() {
        "loose" => compare_loose(&a, &b),
        "strict" => compare_strict(&a, &b),
        "semver" | "semantic" => compare_semver(&a, &b),
        other => {
            return Err(err(format!(
                "Invalid version type ({other}). Must be one of 'loose', 'strict', 'semver', 'semantic', 'pep440'"
            )));
        }
    }
    .map_err(|e| err(format!("Version comparison failed: {e}")))?;
    Ok(match op {
        "eq" => ordering == Ordering::Equal,
        "ne" => ordering != Ordering::Equal,
        "lt" => ordering == Ordering::Less,
        "le" => ordering != Ordering::Greater,
        "gt" => ordering == Ordering::Greater,
        _ => ordering != Ordering::Less,
    })
}

// ---- lookups ----

fn lookup(state: &State, name: &str, terms: &[Value], kwargs: Kwargs, always_list: bool) -> Result<Value, Error> {
    let name = name.strip_prefix("ansible.builtin.").unwrap_or(name);
    let wantlist = kwargs.get::<Option<bool>>("wantlist")?.unwrap_or(false);
    let errors = kwargs.get::<Option<String>>("errors")?.unwrap_or_else(|| "strict".into());
    let default: Option<Value> = kwargs.get("default")?;
    let mut results: Vec<Value> = Vec::new();
    let outcome: Result<(), Error> = (|| {
        match name {
            "env" => {
                for term in terms {
                    let var = py_str(term);
                    match std::env::var(&var) {
                        Ok(v) => results.push(Value::from(v)),
                        Err(_) => results.push(default.clone().unwrap_or(Value::from(""))),
                    }
                }
            }
            "file" => {
                let rstrip = kwargs.get::<Option<bool>>("rstrip")?.unwrap_or(true);
                let lstrip = kwargs.get::<Option<bool>>("lstrip")?.unwrap_or(false);
                for term in terms {
                    let path = resolve_file(state, &py_str(term))?;
                    let text = std::fs::read_to_string(&path).map_err(|e| {
                        err(format!("The 'file' lookup had an issue accessing the file '{}': {e}", path.display()))
                    })?;
                    let text = if rstrip { text.trim_end() } else { text.as_str() };
                    let text = if lstrip { text.trim_start() } else { text };
                    results.push(Value::from(text));
                }
            }
            "pipe" => {
                for term in terms {
                    let command = py_str(term);
                    let output = std::process::Command::new("/bin/sh")
                        .arg("-c")
                        .arg(&command)
                        .output()
                        .map_err(|e| err(format!("lookup_plugin.pipe({command}) failed: {e}")))?;
                    if !output.status.success() {
                        return Err(err(format!(
                            "lookup_plugin.pipe({command}) returned {}",
                            output.status.code().unwrap_or(-1)
                        )));
                    }
                    results.push(Value::from(String::from_utf8_lossy(&output.stdout).trim_end().to_owned()));
                }
            }
            "vars" => {
                for term in terms {
                    let var = py_str(term);
                    match state.lookup(&var).filter(|v| !v.is_undefined()) {
                        Some(v) => results.push(v),
                        None => match &default {
                            Some(d) => results.push(d.clone()),
                            None => return Err(err(format!("No variable found with this name: {var}"))),
                        },
                    }
                }
            }
            "items" | "list" | "flattened" => {
                for term in terms {
                    if is_seq(term) && name != "list" {
                        results.extend(
                            flatten(term, None, Kwargs::from_iter(std::iter::empty::<(&str, Value)>()))?.try_iter()?,
                        );
                    } else {
                        results.push(term.clone());
                    }
                }
            }
            other => return Err(err(format!("lookup plugin ({other}) not found"))),
        }
        Ok(())
    })();
    if let Err(e) = outcome {
        match errors.as_str() {
            "ignore" | "warn" => {
                return Ok(if always_list || wantlist { Value::from(Vec::<Value>::new()) } else { Value::from(()) });
            }
            _ => return Err(e),
        }
    }
    let _ = kwargs.assert_all_used();
    if always_list || wantlist {
        return Ok(Value::from(results));
    }
    // lookup() joins several results with commas; a single one comes back as it is.
    Ok(match results.len() {
        0 => Value::from(Vec::<Value>::new()),
        1 => results.pop().unwrap_or_default(),
        _ => Value::from(results.iter().map(py_str).collect::<Vec<_>>().join(",")),
    })
}

/// Where `lookup('file', path)` finds a relative path: each directory of `ansible_search_path` (and its
/// `files/`), then the current directory, as Ansible searches the task's own directory first.
fn resolve_file(state: &State, path: &str) -> Result<std::path::PathBuf, Error> {
    let p = std::path::Path::new(path);
    if p.is_absolute() {
        return Ok(p.to_path_buf());
    }
    if let Some(dirs) = state.lookup("ansible_search_path").filter(is_seq) {
        for dir in dirs.try_iter()? {
            let dir = std::path::PathBuf::from(py_str(&dir));
            for candidate in [dir.join("files").join(p), dir.join(p)] {
                if candidate.exists() {
                    return Ok(candidate);
                }
            }
        }
    }
    Ok(p.to_path_buf())
}

#[allow(dead_code)]
fn _assert_send_sync(_: Arc<Environment<'static>>) {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loose_versions_compare_like_distutils() {
        assert_eq!(compare_loose("1.29.1", "1.28"), Ok(Ordering::Greater));
        assert_eq!(compare_loose("1.10", "1.9"), Ok(Ordering::Greater));
        assert_eq!(compare_loose("1.2", "1.2.0"), Ok(Ordering::Less));
        assert!(compare_loose("v1.29.1", "1.28").is_err());
        assert_eq!(compare_loose("4.11.0-0.nightly", "4.11.0"), Ok(Ordering::Greater));
    }

    #[test]
    fn python_replacements() {
        assert_eq!(python_replacement(r"\1-\g<2>-\g<name>$"), "${1}-${2}-${name}$$");
    }

    #[test]
    fn base64_round_trip() {
        for s in ["", "a", "ab", "abc", "abcd", "héllo wörld"] {
            let e = base64_encode(s.as_bytes());
            assert_eq!(base64_decode(&e).as_deref(), Some(s.as_bytes()));
        }
        assert_eq!(base64_encode(b"hello"), "aGVsbG8=");
    }

    #[test]
    fn paths_like_python() {
        assert_eq!(basename("/a/b.txt"), "b.txt");
        assert_eq!(basename("/a/b/"), "");
        assert_eq!(dirname("/a/b.txt"), "/a");
        assert_eq!(dirname("/a"), "/");
        assert_eq!(dirname("a"), "");
        assert_eq!(dirname("a/b/"), "a/b");
        assert_eq!(shell_quote("it's"), "'it'\"'\"'s'");
        assert_eq!(shell_quote("/etc/x.conf"), "/etc/x.conf");
    }
}
