//! Ansible's INI inventory plugin (`plugins/inventory/ini.py`), line for line: sections, host lines split with
//! shlex and their values evaluated as Python literals, `:vars` values evaluated the same way (everything after
//! the first `=`, stripped, so a trailing `# comment` stays in a value that is not a literal), `:children`
//! declared before their groups, and the same errors.

use std::path::Path;
use std::sync::LazyLock;

use indexmap::IndexMap;
use regex::Regex;

use super::builder::Builder;
use super::{Origin, Var, literal, ranges};
use crate::ansible_compat::shlex_split;
use crate::error::{Error, Location, Result};

static SECTION: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^\[([^:\]\s]+)(?::(\w+))?\]\s*(?:#.*)?$").expect("valid regex"));
static GROUP_NAME: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"^([^:\]\s]+)\s*(?:#.*)?$").expect("valid regex"));

#[derive(Clone, Copy, PartialEq, Debug)]
enum State {
    Hosts,
    Vars,
    Children,
}

struct Pending {
    line: usize,
    state: State,
    parents: Vec<String>,
}

pub(super) fn parse(builder: &mut Builder, text: &str, path: &Path) -> Result<()> {
    // Python reads the byte order mark as part of the first line, so Ansible's INI plugin fails on it too; say what
    // the invisible character is instead of showing it inside a "bad host pattern".
    if text.starts_with('\u{feff}') {
        return Err(Error::input(
            "this INI inventory starts with a UTF-8 byte order mark (BOM), which Ansible cannot read",
        )
        .at(Location::new(path, 1, 1))
        .hint("save the file as UTF-8 without BOM (e.g. `sed -i '1s/^\\xEF\\xBB\\xBF//' FILE`)"));
    }
    let mut pending: IndexMap<String, Pending> = IndexMap::new();
    let mut group = "ungrouped".to_string();
    let mut state = State::Hosts;
    for (index, raw) in python_splitlines(text).into_iter().enumerate() {
        let line_no = index + 1;
        let indent = raw.chars().take_while(|c| is_python_space(*c)).count() + 1;
        let line = raw.trim_matches(is_python_space);
        let at = |column: usize| Location::new(path, line_no, column);
        if line.is_empty() || line.starts_with(['#', ';']) {
            continue;
        }
        if let Some(caps) = SECTION.captures(line) {
            let name = caps.get(1).map_or("", |m| m.as_str()).to_string();
            let kind = caps.get(2).map(|m| m.as_str());
            state = match kind {
                None | Some("hosts") => State::Hosts,
                Some("children") => State::Children,
                Some("vars") => State::Vars,
                Some(other) => {
                    return Err(Error::input(format!("section [{name}:{other}] has unknown type: {other}"))
                        .at(at(indent))
                        .hint("a section is [group], [group:vars] or [group:children]"));
                }
            };
            if !builder.has_group(&name) {
                if state == State::Vars && !pending.contains_key(&name) {
                    pending.insert(name.clone(), Pending { line: line_no, state, parents: Vec::new() });
                }
                builder.add_group(&name, Some(at(indent)));
            }
            if state != State::Vars {
                match pending.get(&name).map(|p| p.state) {
                    Some(State::Children) => add_pending_children(builder, &name, &mut pending)
                        .map_err(|e| Error::input(e).at(at(indent)))?,
                    Some(State::Vars) => {
                        pending.shift_remove(&name);
                    }
                    _ => {}
                }
            }
            group = name;
            continue;
        } else if line.starts_with('[') && line.ends_with(']') {
            return Err(Error::input(format!("invalid section entry: `{line}`"))
                .at(at(indent))
                .hint("write [group], [group:vars] or [group:children], with no spaces or other characters"));
        }

        match state {
            State::Hosts => host_line(builder, line, &group, path, line_no, indent)?,
            State::Vars => {
                let Some((key, value)) = line.split_once('=') else {
                    return Err(Error::input(format!("expected key=value, got: {line}"))
                        .at(at(indent))
                        .hint(format!("lines under [{group}:vars] set one variable each: name=value")));
                };
                let (key, value) = (key.trim_matches(is_python_space), value.trim_matches(is_python_space));
                let value = literal::parse_value(value).map_err(|e| {
                    Error::input(e).at(at(indent)).hint("quote the value to keep it a string: name='value'")
                })?;
                let var = Var { value, origin: Origin::Inventory(at(indent)) };
                builder.set_group_var(&group, key, var).map_err(|e| {
                    Error::input(e).at(at(indent)).hint("ansible_group_priority takes a whole number, e.g. 10")
                })?;
            }
            State::Children => {
                let Some(caps) = GROUP_NAME.captures(line) else {
                    return Err(Error::input(format!("expected group name, got: {line}"))
                        .at(at(indent))
                        .hint(format!("lines under [{group}:children] name one group each")));
                };
                let child = caps.get(1).map_or("", |m| m.as_str()).to_string();
                if !builder.has_group(&child) {
                    match pending.get_mut(&child) {
                        Some(p) => p.parents.push(group.clone()),
                        None => {
                            pending.insert(
                                child,
                                Pending { line: line_no, state: State::Children, parents: vec![group.clone()] },
                            );
                        }
                    }
                } else {
                    builder.add_child(&group, &child).map_err(|e| {
                        Error::input(e).at(at(indent)).hint("a group cannot contain itself, directly or not")
                    })?;
                }
            }
        }
    }
    // Anything still pending was referred to and never declared; Ansible reports the first one.
    if let Some((name, decl)) = pending.first() {
        let location = Location::new(path, decl.line, 1);
        return Err(match decl.state {
            State::Vars => Error::input(format!("section [{name}:vars] not valid for undefined group '{name}'"))
                .at(location)
                .hint(format!("declare the group with a [{name}] or [{name}:children] section")),
            _ => {
                let parent = decl.parents.last().cloned().unwrap_or_default();
                Error::input(format!("section [{parent}:children] includes undefined group '{name}'"))
                    .at(location)
                    .hint(format!("declare the group with a [{name}] section (it may be empty), or remove the line"))
            }
        });
    }
    Ok(())
}

fn add_pending_children(
    builder: &mut Builder,
    group: &str,
    pending: &mut IndexMap<String, Pending>,
) -> Result<(), String> {
    let parents = pending.get(group).map(|p| p.parents.clone()).unwrap_or_default();
    pending.shift_remove(group);
    for parent in parents {
        builder.add_child(&parent, group)?;
        if pending.get(&parent).is_some_and(|p| p.state == State::Children) {
            add_pending_children(builder, &parent, pending)?;
        }
    }
    Ok(())
}

fn host_line(builder: &mut Builder, line: &str, group: &str, path: &Path, line_no: usize, column: usize) -> Result<()> {
    let at = Location::new(path, line_no, column);
    let tokens = shlex_split(line, true).map_err(|e| {
        Error::input(format!("error parsing host definition `{line}`: {e}"))
            .at(at.clone())
            .hint("close every quote; quote values that contain spaces: name=\"a value\"")
    })?;
    let Some(pattern) = tokens.first() else {
        return Err(Error::input(format!("expected a host name, got: {line}")).at(at));
    };
    let (hostnames, port) = ranges::expand_host_pattern(pattern).map_err(|e| {
        let err = Error::input(format!("bad host pattern `{pattern}`: {e}")).at(at.clone());
        if line.trim_start().starts_with('[') && !line.contains(']') {
            err.hint("a section header needs its closing bracket: [group], [group:vars] or [group:children]")
        } else {
            err.hint("ranges look like node[01:20], node[a:f] or node[1:10:2]")
        }
    })?;
    if pattern.trim().ends_with(':') && port.is_none() {
        return Err(Error::input(format!(
            "invalid host pattern `{pattern}`: ending in ':' is not allowed, this character is reserved to provide a port"
        ))
        .at(at)
        .hint("write host:PORT, or remove the trailing ':'"));
    }
    if hostnames.iter().any(|h| h.trim() == "---") {
        return Err(Error::input(format!(
            "invalid host pattern `{pattern}`: '---' is normally a sign this is a YAML file"
        ))
        .at(at)
        .hint("give a YAML inventory a .yml or .yaml extension, or check that it is valid YAML"));
    }
    let mut vars = Vec::new();
    for token in &tokens[1..] {
        let Some((key, value)) = token.split_once('=') else {
            return Err(Error::input(format!("expected key=value host variable assignment, got: {token}"))
                .at(Location::new(path, line_no, token_column(line, token, column)))
                .hint("host variables are name=value; quote values with spaces: name=\"a value\""));
        };
        let loc = Location::new(path, line_no, token_column(line, key, column));
        let value = literal::parse_value(value)
            .map_err(|e| Error::input(e).at(loc.clone()).hint("quote the value to keep it a string: name='value'"))?;
        vars.push((key.to_string(), Var { value, origin: Origin::Inventory(loc) }));
    }
    for host in &hostnames {
        builder
            .add_host(host, Some(group), port.as_deref(), &at)
            .map_err(|e| Error::input(e).at(at.clone()).hint("give each host line a host name first"))?;
        for (key, var) in &vars {
            builder.set_host_var(host, key, var.clone());
        }
    }
    Ok(())
}

/// The 1-based column where `needle` first appears in the line (best effort: tokens lose their quotes).
fn token_column(line: &str, needle: &str, indent: usize) -> usize {
    match line.find(needle) {
        Some(i) if !needle.is_empty() => indent + line[..i].chars().count(),
        _ => indent,
    }
}

/// Python's `str.isspace` for the characters `strip()` removes.
fn is_python_space(c: char) -> bool {
    c.is_whitespace() || ('\x1c'..='\x1f').contains(&c)
}

/// Python's `str.splitlines()`: \n, \r\n, \r, \v, \f, \x1c-\x1e, \x85, \u2028, \u2029 all end a line.
fn python_splitlines(text: &str) -> Vec<&str> {
    let mut lines = Vec::new();
    let mut start = 0;
    let mut chars = text.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        let is_break =
            matches!(c, '\n' | '\r' | '\x0b' | '\x0c' | '\x1c' | '\x1d' | '\x1e' | '\u{85}' | '\u{2028}' | '\u{2029}');
        if is_break {
            lines.push(&text[start..i]);
            let mut end = i + c.len_utf8();
            if c == '\r' {
                if let Some((j, '\n')) = chars.peek().copied() {
                    chars.next();
                    end = j + 1;
                }
            }
            start = end;
        }
    }
    if start < text.len() {
        lines.push(&text[start..]);
    }
    lines
}
