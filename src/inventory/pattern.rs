//! Ansible host patterns (`InventoryManager.get_hosts` and `subset`): unions, `&` intersections, `!` exclusions,
//! shell wildcards, `~regex`, `[i]`/`[a:b]` subscripts, `@file`. Where Ansible only warns that a pattern matched
//! nothing, we stop with an input error: a `--limit` typo must not turn into "upgrade nothing" or "everything".

use std::collections::HashSet;
use std::path::Path;
use std::sync::LazyLock;

use regex::Regex;

use super::{Inventory, ranges};
use crate::error::{Error, Result};

static WITH_SUBSCRIPT: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^(?s)(.+)\[(?:(-?[0-9]+)|([0-9]+)([:-])([0-9]*))\]$").expect("valid regex"));
/// Ansible's `C.LOCALHOST`.
const IMPLICIT_LOCALHOST: [&str; 3] = ["localhost", "127.0.0.1", "::1"];
static COLON_PARTS: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"(?:[^\s:\[\]]|\[[^\]]*\])+").expect("valid regex"));

/// Ansible's `split_host_pattern`: commas separate; without commas, colons do (unless the whole pattern is a
/// host address, such as an IPv6 address or a host range).
pub(super) fn split_host_pattern(pattern: &str) -> Vec<String> {
    let parts: Vec<String> = if pattern.contains(',') {
        pattern.split(',').map(str::to_string).collect()
    } else if ranges::parse_address(pattern).is_some() {
        vec![pattern.to_string()]
    } else {
        COLON_PARTS.find_iter(pattern).map(|m| m.as_str().to_string()).collect()
    };
    parts.into_iter().map(|p| p.trim().to_string()).filter(|p| !p.is_empty()).collect()
}

pub(super) fn select(inv: &Inventory, pattern: &str) -> Result<Vec<String>> {
    let mut patterns = Vec::new();
    for part in split_host_pattern(pattern) {
        if let Some(file) = part.strip_prefix('@') {
            let path = Path::new(file);
            if !path.is_file() {
                return Err(Error::input(format!("limit file {file} not found (or not a file)"))
                    .hint("`@FILE` reads one host pattern per line from FILE"));
            }
            let text = super::read_text(path)?;
            patterns.extend(text.split('\n').map(|l| l.trim().to_string()));
        } else {
            patterns.push(part);
        }
    }
    let mut ordered: Vec<&str> = Vec::new();
    let mut intersections = Vec::new();
    let mut exclusions = Vec::new();
    for p in patterns.iter().filter(|p| !p.is_empty()) {
        match p.chars().next() {
            Some('!') => exclusions.push(p.as_str()),
            Some('&') => intersections.push(p.as_str()),
            _ => ordered.push(p.as_str()),
        }
    }
    if ordered.is_empty() {
        ordered.push("all");
    }
    ordered.extend(intersections);
    ordered.extend(exclusions);

    let mut hosts: Vec<String> = Vec::new();
    for p in ordered {
        if inv.hosts.contains_key(p) {
            hosts.push(p.to_string());
            continue;
        }
        let matched = match_one_pattern(inv, p)?;
        if p.starts_with('!') {
            let that: HashSet<&String> = matched.iter().collect();
            hosts.retain(|h| !that.contains(h));
        } else if p.starts_with('&') {
            let that: HashSet<&String> = matched.iter().collect();
            hosts.retain(|h| that.contains(h));
        } else {
            let existing: HashSet<String> = hosts.iter().cloned().collect();
            hosts.extend(matched.into_iter().filter(|h| !existing.contains(h)));
        }
    }
    let mut seen = HashSet::new();
    hosts.retain(|h| seen.insert(h.clone()));
    Ok(hosts)
}

fn match_one_pattern(inv: &Inventory, pattern: &str) -> Result<Vec<String>> {
    let bare = pattern.strip_prefix(['&', '!']).unwrap_or(pattern);
    let (expr, subscript) = split_subscript(bare);
    let (hosts, matched_group) = enumerate_matches(inv, &expr)?;
    if hosts.is_empty() && !matched_group && expr != "all" {
        let mut groups: Vec<&str> = inv.groups.keys().map(String::as_str).collect();
        groups.sort();
        let shown = groups.iter().take(30).copied().collect::<Vec<_>>().join(", ");
        return Err(Error::input(format!("no host or group matches the pattern `{bare}`")).hint(format!(
            "the inventory's groups are: {shown}; host names and wildcards (`web*`, `~regex`) work too"
        )));
    }
    apply_subscript(hosts, subscript).ok_or_else(|| {
        Error::input(format!("no hosts matched the subscripted pattern `{bare}`"))
            .hint("subscripts count from 0 within the group: web[0], web[1:3], web[-1]")
    })
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Subscript {
    Index(i64),
    Range(i64, i64),
}

fn split_subscript(pattern: &str) -> (String, Option<Subscript>) {
    if pattern.starts_with('~') {
        return (pattern.to_string(), None);
    }
    let Some(caps) = WITH_SUBSCRIPT.captures(pattern) else { return (pattern.to_string(), None) };
    let expr = caps.get(1).map_or("", |m| m.as_str()).to_string();
    let int = |i: usize| caps.get(i).and_then(|m| m.as_str().parse::<i64>().ok());
    let subscript = if caps.get(2).is_some() {
        int(2).map(Subscript::Index)
    } else {
        let end = match caps.get(5).map(|m| m.as_str()) {
            Some("") | None => Some(-1),
            Some(_) => int(5),
        };
        int(3).zip(end).map(|(s, e)| Subscript::Range(s, e))
    };
    match subscript {
        Some(s) => (expr, Some(s)),
        None => (pattern.to_string(), None),
    }
}

/// `None` when an index is out of range (Ansible's IndexError).
fn apply_subscript(hosts: Vec<String>, subscript: Option<Subscript>) -> Option<Vec<String>> {
    let Some(subscript) = subscript else { return Some(hosts) };
    if hosts.is_empty() {
        return Some(hosts);
    }
    let len = hosts.len() as i64;
    let index = |i: i64| -> Option<String> {
        let i = if i < 0 { len + i } else { i };
        usize::try_from(i).ok().and_then(|i| hosts.get(i).cloned())
    };
    match subscript {
        Subscript::Index(i) | Subscript::Range(i, 0) => index(i).map(|h| vec![h]),
        Subscript::Range(start, end) => {
            let end = if end == -1 { len - 1 } else { end };
            let (start, stop) = (start.min(len), (end + 1).clamp(0, len));
            Some(if stop > start { hosts[start as usize..stop as usize].to_vec() } else { Vec::new() })
        }
    }
}

/// The hosts of every group the pattern names, then (for wildcards, regexes, or when no group matched) every
/// host whose name matches. Also says whether a group matched.
fn enumerate_matches(inv: &Inventory, pattern: &str) -> Result<(Vec<String>, bool)> {
    let matcher = compile(pattern)?;
    let mut results = Vec::new();
    let mut matched_group = false;
    for (name, group) in &inv.groups {
        if matcher.is_match(name) {
            matched_group = true;
            results.extend(group.member_hosts.iter().cloned());
        }
    }
    let wildcard = pattern.starts_with('~') || pattern.contains(['.', '?', '*', '[']);
    if !matched_group || wildcard {
        results.extend(inv.hosts.keys().filter(|h| matcher.is_match(h)).cloned());
    }
    // Ansible's implicit localhost: a pattern that is exactly a localhost name and matched nothing selects it,
    // as `ansible localhost` and `delegate_to: localhost` do without it in the inventory.
    if results.is_empty() && IMPLICIT_LOCALHOST.contains(&pattern) {
        results.push(pattern.to_string());
    }
    Ok((results, matched_group))
}

/// `~regex` matches at the start of a name (Python's `re.match`); anything else is a whole-name shell glob.
fn compile(pattern: &str) -> Result<Regex> {
    let source = match pattern.strip_prefix('~') {
        Some(re) => format!("^(?:{re})"),
        None => format!("^(?s:{})$", crate::ansible_compat::glob_to_regex(pattern)),
    };
    Regex::new(&source).map_err(|e| {
        Error::input(format!("invalid host list pattern `{pattern}`: {e}"))
            .hint("`~` starts a regular expression; check its brackets and escapes")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_patterns_like_ansible() {
        assert_eq!(split_host_pattern("a,b[1], c[2:3] , d"), vec!["a", "b[1]", "c[2:3]", "d"]);
        assert_eq!(split_host_pattern("web:&db:!old"), vec!["web", "&db", "!old"]);
        assert_eq!(split_host_pattern("node[1:3]"), vec!["node[1:3]"]);
        assert_eq!(split_host_pattern("fe80::1"), vec!["fe80::1"]);
        assert_eq!(split_host_pattern("a:b,c"), vec!["a:b", "c"]);
    }

    #[test]
    fn subscripts() {
        let hosts: Vec<String> = ["a", "b", "c", "d"].iter().map(|s| s.to_string()).collect();
        let sub = |p: &str| split_subscript(p).1;
        assert_eq!(apply_subscript(hosts.clone(), sub("g[0]")), Some(vec!["a".to_string()]));
        assert_eq!(apply_subscript(hosts.clone(), sub("g[-1]")), Some(vec!["d".to_string()]));
        assert_eq!(apply_subscript(hosts.clone(), sub("g[1:2]")).map(|v| v.len()), Some(2));
        assert_eq!(apply_subscript(hosts.clone(), sub("g[2:]")).map(|v| v.len()), Some(2));
        assert_eq!(apply_subscript(hosts.clone(), sub("g[9]")), None);
    }

    #[test]
    fn globs_translate() {
        let m = |p: &str, s: &str| compile(p).unwrap().is_match(s);
        assert!(m("web*", "web01"));
        assert!(!m("web*", "aweb01"));
        assert!(m("web?", "web1"));
        assert!(m("web[12]", "web2"));
        assert!(m("web[!12]", "web3"));
        assert!(m("n[a-c]", "nb"));
        assert!(m("~web\\d", "web1.example"));
        assert!(!m("~web\\d", "xweb1"));
    }
}
