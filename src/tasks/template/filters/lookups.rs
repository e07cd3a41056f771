//! Lookups: `env`, `file`, `pipe`, `vars`.

use std::sync::Arc;

use minijinja::value::{Kwargs, Value};
use minijinja::{Environment, Error, State};

use super::{collections::*, values::*};
use crate::tasks::template::pyfmt::py_str;

pub(super) fn lookup(
    state: &State,
    name: &str,
    terms: &[Value],
    kwargs: Kwargs,
    always_list: bool,
) -> Result<Value, Error> {
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
pub(super) fn resolve_file(state: &State, path: &str) -> Result<std::path::PathBuf, Error> {
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
pub(super) fn _assert_send_sync(_: Arc<Environment<'static>>) {}
