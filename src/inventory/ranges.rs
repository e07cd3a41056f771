//! Host names with an optional port and `[x:y]` ranges, exactly as Ansible's `parse_address` and
//! `expand_hostname_range` read them (`node[01:20]`, `[a:f]`, `[1:10:2]`, several ranges in one name).

use std::sync::LazyLock;

use regex::Regex;

/// No real inventory has more hosts than this in one line; past it a typo like `[0:99999999]` would eat the memory.
const MAX_EXPANDED_HOSTS: usize = 1_000_000;

const NUMERIC_RANGE: &str = r"\[(?:[0-9]+:[0-9]+)(?::[0-9]+)?\]";
const ALPHANUMERIC_RANGE: &str = r"\[(?:[a-z]:[a-z]|[0-9]+:[0-9]+)(?::[0-9]+)?\]";

static BRACKETED_HOSTPORT: LazyLock<Regex> = LazyLock::new(|| Regex::new(r"^\[(.+)\]:([0-9]+)$").expect("valid regex"));
static HOSTPORT: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^((?:[^:\[\]]|\[[^\]]*\])*):([0-9]+)$").expect("valid regex"));
static IPV4: LazyLock<Regex> = LazyLock::new(|| {
    let c = format!(r"(?:[01]?[0-9]{{1,2}}|2[0-4][0-9]|25[0-5]|{NUMERIC_RANGE})");
    Regex::new(&format!(r"(?i)^(?:{c}\.){{3}}{c}$")).expect("valid regex")
});
static IPV6: LazyLock<Regex> = LazyLock::new(|| {
    let c = format!(r"(?:[0-9a-f]{{1,4}}|{NUMERIC_RANGE})");
    let alternatives = [
        format!(r"(?:{c}:){{7}}{c}"),
        format!(r"(?:{c}:){{1,6}}:"),
        format!(r"(?:{c}:)(?::{c}){{1,6}}"),
        format!(r"(?:{c}:){{2}}(?::{c}){{1,5}}"),
        format!(r"(?:{c}:){{3}}(?::{c}){{1,4}}"),
        format!(r"(?:{c}:){{4}}(?::{c}){{1,3}}"),
        format!(r"(?:{c}:){{5}}(?::{c}){{1,2}}"),
        format!(r"(?:{c}:){{6}}(?::{c})"),
        format!(r":(?::{c}){{1,6}}"),
        format!(r"{c}?::"),
        format!(r"(?:0:){{6}}(?:{c}\.){{3}}{c}"),
        format!(r"::(?:ffff:)?(?:{c}\.){{3}}{c}"),
    ];
    // Python's pattern anchors only the first alternative at the start and the last one at the end.
    let last = format!(r"(?:0:){{5}}ffff:(?:{c}\.){{3}}{c}$");
    Regex::new(&format!("(?i)^{}|{last}", alternatives.join("|"))).expect("valid regex")
});
static HOSTNAME: LazyLock<Regex> = LazyLock::new(|| {
    let r = ALPHANUMERIC_RANGE;
    // Python writes "may not end with - or _" as a lookbehind; here the last element is spelled out instead.
    let label = format!(r"(?:(?:\w|{r})(?:(?:[\w-]|{r})*(?:[^\W_]|{r}))?)");
    Regex::new(&format!(r"(?i)^{label}(?:\.{label})*$")).expect("valid regex")
});

/// Ansible's `parse_address(address, allow_ranges=True)`: the host part and the port, or `None` when the text is
/// not a host name, IPv4 or IPv6 address (possibly with ranges).
pub(super) fn parse_address(address: &str) -> Option<(String, Option<String>)> {
    let mut address = address.to_string();
    let mut port = None;
    for pattern in [&*BRACKETED_HOSTPORT, &*HOSTPORT] {
        if let Some(caps) = pattern.captures(&address) {
            let host = caps.get(1).map_or("", |m| m.as_str()).to_string();
            port = caps.get(2).map(|m| m.as_str().to_string());
            address = host;
        }
    }
    if IPV4.is_match(&address) || IPV6.is_match(&address) || HOSTNAME.is_match(&address) {
        Some((address, port))
    } else {
        None
    }
}

/// The plugin base's `_expand_hostpattern`: host names (ranges expanded) and the port, if one was given.
pub fn expand_host_pattern(pattern: &str) -> Result<(Vec<String>, Option<String>), String> {
    let (name, port) = match parse_address(pattern) {
        Some((name, port)) => (name, port),
        None => (pattern.to_string(), None),
    };
    if name.contains('[') {
        let mut out = Vec::new();
        expand_hostname_range(&name, &mut out)?;
        Ok((out, port))
    } else {
        Ok((vec![name], port))
    }
}

const ASCII_LETTERS: &str = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";

/// Ansible's `expand_hostname_range`, appending to `out`.
pub(super) fn expand_hostname_range(line: &str, out: &mut Vec<String>) -> Result<(), String> {
    // Ansible replaces the first `[` and then the first `]` by `|` and needs exactly three pieces.
    let replaced = line.replacen('[', "|", 1).replacen(']', "|", 1);
    let parts: Vec<&str> = replaced.split('|').collect();
    let [head, nrange, tail] = parts[..] else {
        return Err(format!("`{line}` is not a valid host range"));
    };
    let bounds: Vec<&str> = nrange.split(':').collect();
    if bounds.len() != 2 && bounds.len() != 3 {
        return Err("host range must be begin:end or begin:end:step".into());
    }
    let beg = if bounds[0].is_empty() { "0" } else { bounds[0] };
    let end = bounds[1];
    let step = bounds.get(2).copied();
    if end.is_empty() {
        return Err("host range must specify end value".into());
    }
    let width = if beg.starts_with('0') && beg.chars().count() > 1 {
        let width = beg.chars().count();
        if width != end.chars().count() {
            return Err("host range must specify equal-length begin and end formats".into());
        }
        Some(width)
    } else {
        None
    };
    let step_value = || match step {
        None => Ok(1),
        Some(s) => python_int(s).ok_or_else(|| format!("invalid step `{s}` in host range")),
    };
    let fill = |s: String| match width {
        Some(w) => zfill(&s, w),
        None => s,
    };

    let mut items: Vec<String> = Vec::new();
    let alpha = match (ASCII_LETTERS.find(beg), ASCII_LETTERS.find(end)) {
        (Some(b), Some(e)) => match step_value() {
            Ok(0) | Err(_) => None, // Python's ValueError here falls through to the numeric attempt
            Ok(step) => {
                if b > e {
                    return Err("host range must have begin <= end".into());
                }
                let letters: Vec<char> = ASCII_LETTERS.chars().collect();
                Some(python_slice(&letters, b, e + 1, step))
            }
        },
        _ => None,
    };
    match alpha {
        Some(chars) => items.extend(chars.into_iter().map(|c| c.to_string())),
        None => {
            let b = python_int(beg).ok_or_else(|| format!("invalid begin `{beg}` in host range"))?;
            let e = python_int(end).ok_or_else(|| format!("invalid end `{end}` in host range"))?;
            let step = step_value()?;
            if step == 0 {
                return Err("host range step must not be zero".into());
            }
            let count = range_len(b, e.saturating_add(1), step);
            if count.saturating_add(out.len()) > MAX_EXPANDED_HOSTS {
                return Err(format!("host range `{nrange}` expands to too many hosts"));
            }
            let mut i = b;
            while (step > 0 && i <= e) || (step < 0 && i > e.saturating_add(1)) {
                items.push(i.to_string());
                match i.checked_add(step) {
                    Some(next) => i = next,
                    None => break,
                }
            }
        }
    }
    for item in items {
        let name = format!("{head}{}{tail}", fill(item));
        if name.contains('[') {
            expand_hostname_range(&name, out)?;
        } else {
            out.push(name);
        }
        if out.len() > MAX_EXPANDED_HOSTS {
            return Err(format!("host range in `{line}` expands to too many hosts"));
        }
    }
    Ok(())
}

fn range_len(start: i64, stop: i64, step: i64) -> usize {
    let (start, stop, step) = (start as i128, stop as i128, step as i128);
    let n = if step > 0 { (stop - start + step - 1) / step } else { (start - stop - step - 1) / -step };
    usize::try_from(n.max(0)).unwrap_or(usize::MAX)
}

/// `seq[start:stop:step]` for non-negative start/stop as Python slices it.
fn python_slice(seq: &[char], start: usize, stop: usize, step: i64) -> Vec<char> {
    let len = seq.len() as i64;
    let (start, stop) = (start as i64, (stop as i64).min(len));
    let mut out = Vec::new();
    if step > 0 {
        let mut i = start;
        while i < stop {
            if let Some(c) = seq.get(i as usize) {
                out.push(*c);
            }
            i += step;
        }
    } else {
        let mut i = start.min(len - 1);
        while i > stop {
            if let Some(c) = usize::try_from(i).ok().and_then(|i| seq.get(i)) {
                out.push(*c);
            }
            i += step;
        }
    }
    out
}

/// Python's `str.zfill`.
fn zfill(s: &str, width: usize) -> String {
    let len = s.chars().count();
    if len >= width {
        return s.to_string();
    }
    let pad = "0".repeat(width - len);
    match s.strip_prefix(['-', '+']) {
        Some(rest) => format!("{}{pad}{rest}", &s[..1]),
        None => format!("{pad}{s}"),
    }
}

/// Python's `int(text)` for what an inventory can hold: surrounding whitespace, a sign, digits with single `_`.
pub fn python_int(text: &str) -> Option<i64> {
    let t = text.trim();
    let (negative, digits) = match t.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, t.strip_prefix('+').unwrap_or(t)),
    };
    if digits.is_empty() || digits.starts_with('_') || digits.ends_with('_') || digits.contains("__") {
        return None;
    }
    let clean: String = digits.chars().filter(|c| *c != '_').collect();
    if !clean.chars().all(|c| c.is_ascii_digit()) {
        return None;
    }
    let value: i64 = clean.parse().ok()?;
    Some(if negative { -value } else { value })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn expand(p: &str) -> Result<Vec<String>, String> {
        expand_host_pattern(p).map(|(h, _)| h)
    }

    #[test]
    fn ranges_expand_like_ansible() {
        let table: &[(&str, &[&str])] = &[
            ("node[1:3]", &["node1", "node2", "node3"]),
            ("node[01:03]", &["node01", "node02", "node03"]),
            ("node[08:11].example.com", &["node08", "node09", "node10", "node11"]),
            ("db[a:c]", &["dba", "dbb", "dbc"]),
            ("h[1:10:3]", &["h1", "h4", "h7", "h10"]),
            ("h[:2]", &["h0", "h1", "h2"]),
            ("r[1:2]-n[a:b]", &["r1-na", "r1-nb", "r2-na", "r2-nb"]),
            ("x[A:C]", &["xA", "xB", "xC"]),
            ("plain", &["plain"]),
        ];
        for (pattern, want) in table {
            let got = expand(pattern).unwrap_or_else(|e| panic!("{pattern}: {e}"));
            let want: Vec<String> = if pattern.starts_with("node[08") {
                want.iter().map(|w| format!("{w}.example.com")).collect()
            } else {
                want.iter().map(|w| w.to_string()).collect()
            };
            assert_eq!(got, want, "{pattern}");
        }
    }

    #[test]
    fn bad_ranges_are_errors() {
        for p in ["n[1:]", "n[01:3]", "n[c:a]", "n[1:2:0]", "n[1:2:3:4]", "n[x]", "n[1:2"] {
            assert!(expand(p).is_err(), "{p} should fail");
        }
        assert!(expand("n[0:99999999]").is_err());
    }

    #[test]
    fn ports_split_off_like_parse_address() {
        assert_eq!(expand_host_pattern("web1:2222").unwrap(), (vec!["web1".to_string()], Some("2222".to_string())));
        assert_eq!(expand_host_pattern("10.0.0.1:22").unwrap().1, Some("22".to_string()));
        assert_eq!(expand_host_pattern("[::1]:22").unwrap(), (vec!["::1".to_string()], Some("22".to_string())));
        assert_eq!(expand_host_pattern("fe80::1").unwrap(), (vec!["fe80::1".to_string()], None));
        assert_eq!(
            expand_host_pattern("n[1:2]:22").unwrap(),
            (vec!["n1".to_string(), "n2".to_string()], Some("22".to_string()))
        );
        // Not a host name Ansible recognises: kept whole, no port.
        assert_eq!(expand_host_pattern("bad_:22").unwrap(), (vec!["bad_:22".to_string()], None));
    }
}
