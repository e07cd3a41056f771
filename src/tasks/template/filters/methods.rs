//! Python's string, list and dict methods called on values (`x.startswith(...)`).

use minijinja::value::{Value, ValueKind};
use minijinja::{Error, ErrorKind, State};

use super::{formats::*, scalars::*, values::*};
use crate::tasks::template::pyfmt::py_str;

/// The Python `str`, `dict` and `list` methods hooks call on values (`x.split(',')`, `d.items()`, `s.startswith()`).
pub(super) fn python_method(state: &mut State, value: &Value, method: &str, args: &[Value]) -> Result<Value, Error> {
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
