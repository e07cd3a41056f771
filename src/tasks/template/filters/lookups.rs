//! Lookups: `env`, `file`, `pipe`, `vars`, `fileglob`, `first_found` (controller-side, as Ansible's: they read the
//! machine `upgrade` runs on).

use std::path::{Path, PathBuf};
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
            "fileglob" => results.extend(fileglob(state, terms)?),
            "first_found" => results.extend(first_found(state, terms, &kwargs)?),
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

/// The directories of `ansible_search_path`, or the current directory.
fn search_dirs(state: &State) -> Result<Vec<PathBuf>, Error> {
    match state.lookup("ansible_search_path").filter(is_seq) {
        Some(dirs) => Ok(dirs.try_iter()?.map(|d| PathBuf::from(py_str(&d))).collect()),
        None => Ok(vec![PathBuf::from(".")]),
    }
}

/// `fileglob`: for each term, the files (not directories) its last component matches: in the term's directory, or
/// for a bare pattern in each search directory's `files/` and then the directory itself, the first that has any.
/// Sorted (Python's glob gives them in directory order).
fn fileglob(state: &State, terms: &[Value]) -> Result<Vec<Value>, Error> {
    let mut out = Vec::new();
    for term in terms {
        let term = py_str(term);
        let path = Path::new(&term);
        let pattern = path.file_name().map(|f| f.to_string_lossy().into_owned()).unwrap_or_default();
        let dirs: Vec<PathBuf> = match path.parent().filter(|d| !d.as_os_str().is_empty()) {
            // Absolute, as Ansible's results are (its search path is absolute).
            Some(dir) => vec![absolute(resolve_file(state, &dir.to_string_lossy())?)],
            None => search_dirs(state)?.into_iter().map(absolute).flat_map(|d| [d.join("files"), d]).collect(),
        };
        if let Some(found) = dirs.iter().map(|d| glob_files(d, &pattern)).find(|f| !f.is_empty()) {
            out.extend(found.into_iter().map(|p| Value::from(p.display().to_string())));
        }
    }
    Ok(out)
}

fn absolute(path: PathBuf) -> PathBuf {
    match std::env::current_dir() {
        Ok(cwd) if path.is_relative() => cwd.join(path.strip_prefix(".").unwrap_or(&path)),
        _ => path,
    }
}

/// The files of `dir` whose name matches the shell pattern (a name starting with `.` only if the pattern does, as
/// Python's glob).
fn glob_files(dir: &Path, pattern: &str) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
    let mut found: Vec<PathBuf> = entries
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|name| !name.starts_with('.') || pattern.starts_with('.'))
        .filter(|name| crate::ansible_compat::fnmatch(name, pattern))
        .map(|name| dir.join(name))
        .filter(|p| p.is_file())
        .collect();
    found.sort();
    found
}

/// `first_found`: the first of the candidate files that exists, as a list of one. Terms are names, lists of them, or
/// mappings with `files`, `paths` and `skip` (the lookup's own keywords give them for name terms); each path joined
/// with each file when `paths` is given (a mapping's
/// `paths` and `skip` replace those before it, as Ansible sets a mapping term's options). A relative candidate is looked for in the search directories' `files/`
/// and the directories themselves. None found: `[]` with `skip`, else Ansible's error.
fn first_found(state: &State, terms: &[Value], kwargs: &Kwargs) -> Result<Vec<Value>, Error> {
    let split = |v: Option<Value>, on: &[char]| -> Vec<String> {
        let Some(v) = v.filter(|v| !v.is_undefined() && !v.is_none()) else { return Vec::new() };
        let items: Vec<Value> =
            if is_seq(&v) { v.try_iter().map(|i| i.collect()).unwrap_or_default() } else { vec![v] };
        items.iter().flat_map(|i| py_str(i).split(on).map(str::to_string).collect::<Vec<_>>()).collect()
    };
    let mut paths: Option<Value> = kwargs.get("paths")?;
    let mut skip: bool = kwargs.get::<Option<bool>>("skip")?.unwrap_or(false);
    let mut candidates: Vec<String> = Vec::new();
    let mut pending: Vec<Value> = terms.iter().rev().cloned().collect();
    if pending.is_empty() {
        pending.extend(kwargs.get::<Option<Value>>("files")?);
    }
    while let Some(term) = pending.pop() {
        let files = if term.kind() == minijinja::value::ValueKind::Map {
            // As Ansible's set_options(direct=term): a mapping term's options replace the earlier ones.
            paths = term.get_attr("paths").ok().filter(|p| !p.is_undefined());
            skip = term.get_attr("skip").is_ok_and(|s| s.is_true());
            split(term.get_attr("files").ok(), &[',', ';'])
        } else if is_seq(&term) && term.kind() != minijinja::value::ValueKind::String {
            pending.extend(term.try_iter()?.collect::<Vec<_>>().into_iter().rev());
            continue;
        } else {
            vec![py_str(&term)]
        };
        let dirs = split(paths.clone(), &[',', ':', ';']);
        if dirs.is_empty() {
            candidates.extend(files);
        } else {
            for dir in &dirs {
                candidates.extend(files.iter().map(|f| Path::new(dir).join(f).display().to_string()));
            }
        }
    }
    let search = search_dirs(state)?;
    for candidate in candidates {
        let path = Path::new(&candidate);
        let found = if path.is_absolute() {
            Some(path.to_path_buf()).filter(|p| p.exists())
        } else {
            search.iter().flat_map(|d| [d.join("files").join(path), d.join(path)]).find(|p| p.exists())
        };
        if let Some(found) = found {
            return Ok(vec![Value::from(absolute(found).display().to_string())]);
        }
    }
    if skip {
        Ok(Vec::new())
    } else {
        Err(err("The lookup plugin 'first_found' failed: No file was found when using first_found.".to_string()))
    }
}

#[allow(dead_code)]
pub(super) fn _assert_send_sync(_: Arc<Environment<'static>>) {}
