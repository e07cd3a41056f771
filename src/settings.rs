//! The upgrade's settings: serial, label selector, max-fail-percentage, drain-timeout, hooks and target version.
//!
//! Each setting is a small type that parses from text (a flag, an INI `[g:vars]` string) and from a YAML/JSON value,
//! and prints back in a form that parses again. Where they are read from (flags, `-e`, inventory, with the
//! openshift-ansible aliases) is decided by [`resolve`]: a setting always knows its [`Origin`].

use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::ansible_compat::unquote;
use crate::error::{Error, Result};
use crate::inventory::{Origin, Var, Vars, python_int};

// ---------------------------------------------------------------------------------------------------------------
// serial

/// One entry of `serial`: a count of hosts or a percentage of the phase's hosts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SerialItem {
    /// A number of hosts; 0 or less means "all the rest", as in Ansible.
    Count(i64),
    /// A percentage of all hosts selected for the phase, rounded down, at least 1. Above 100 is allowed (Ansible
    /// accepts it: the batch is simply everything left).
    Percent(u32),
}

/// How many nodes are upgraded at once: an integer, `"N%"`, or a list of those (entry i sizes batch i, the last
/// entry repeats). Never empty.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Serial(Vec<SerialItem>);

const SERIAL_HINT: &str = "write a number of hosts (2), a percentage (\"25%\") or a list ([1, \"20%\", -1])";

impl Serial {
    pub fn one() -> Serial {
        Serial(vec![SerialItem::Count(1)])
    }

    pub fn new(items: Vec<SerialItem>) -> Option<Serial> {
        (!items.is_empty()).then_some(Serial(items))
    }

    pub fn items(&self) -> &[SerialItem] {
        &self.0
    }

    /// Parses `2`, `25%`, `[1, '20%', -1]` (YAML or Python list syntax, as INI `[g:vars]` carry it) or `1,20%,-1`.
    pub fn parse(text: &str) -> Result<Serial> {
        let trimmed = text.trim();
        if let Some(inner) = trimmed.strip_prefix('[') {
            let Some(inner) = inner.strip_suffix(']') else {
                return Err(serial_error(text, "has an opening `[` without a closing `]`"));
            };
            return Serial::parse_list(text, inner);
        }
        if trimmed.contains(',') {
            return Serial::parse_list(text, trimmed);
        }
        Ok(Serial(vec![serial_item(text, trimmed)?]))
    }

    fn parse_list(text: &str, inner: &str) -> Result<Serial> {
        if inner.trim().is_empty() {
            return Err(serial_error(text, "is an empty list").hint(SERIAL_HINT));
        }
        let items = inner.split(',').map(|part| serial_item(text, part)).collect::<Result<Vec<_>>>()?;
        Ok(Serial(items))
    }

    pub fn from_value(value: &Value) -> Result<Serial> {
        match value {
            Value::Array(items) if items.is_empty() => Err(serial_error("[]", "is an empty list")),
            Value::Array(items) => items
                .iter()
                .map(|item| match item {
                    Value::String(s) => serial_item(&value.to_string(), s),
                    Value::Number(_) => serial_number(item),
                    other => Err(serial_error(&other.to_string(), "is not a number or a percentage")),
                })
                .collect::<Result<Vec<_>>>()
                .map(Serial),
            Value::String(s) => Serial::parse(s),
            Value::Number(_) => Ok(Serial(vec![serial_number(value)?])),
            other => Err(serial_error(&other.to_string(), "is not a number, a percentage or a list")),
        }
    }

    /// The value as JSON: `2`, `"20%"` or `[1, "20%", -1]`.
    pub fn to_json(&self) -> Value {
        let item = |i: &SerialItem| match i {
            SerialItem::Count(n) => Value::from(*n),
            SerialItem::Percent(p) => Value::String(format!("{p}%")),
        };
        match self.0.as_slice() {
            [single] => item(single),
            items => Value::Array(items.iter().map(item).collect()),
        }
    }
}

fn serial_error(text: &str, what: &str) -> Error {
    Error::input(format!("serial `{}` {what}", text.trim())).hint(SERIAL_HINT)
}

fn serial_number(value: &Value) -> Result<SerialItem> {
    integral(value).map(SerialItem::Count).ok_or_else(|| serial_error(&value.to_string(), "is not a whole number"))
}

fn serial_item(whole: &str, part: &str) -> Result<SerialItem> {
    let item = unquote(part.trim());
    if let Some(number) = item.strip_suffix('%') {
        return match python_int(number) {
            Some(p) if p < 0 => Err(serial_error(whole, "has a negative percentage")),
            Some(p) => u32::try_from(p).map(SerialItem::Percent).map_err(|_| serial_error(whole, "is too large")),
            None => Err(serial_error(whole, "has a percentage that is not a whole number")),
        };
    }
    if item.is_empty() {
        return Err(serial_error(whole, "has an empty entry"));
    }
    python_int(item)
        .map(SerialItem::Count)
        .ok_or_else(|| serial_error(whole, "is not a number, a percentage or a list"))
}

impl fmt::Display for SerialItem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SerialItem::Count(n) => write!(f, "{n}"),
            SerialItem::Percent(p) => write!(f, "{p}%"),
        }
    }
}

impl fmt::Display for Serial {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0.as_slice() {
            [single] => write!(f, "{single}"),
            items => {
                let parts: Vec<String> = items
                    .iter()
                    .map(|i| match i {
                        SerialItem::Count(n) => n.to_string(),
                        SerialItem::Percent(p) => format!("\"{p}%\""),
                    })
                    .collect();
                write!(f, "[{}]", parts.join(", "))
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------------------------
// max-fail-percentage

/// The share of a batch that may fail before the run stops; it must be *exceeded*. 0..=100. Fractions are allowed,
/// as Ansible's `percent` field type reads a float.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MaxFailPercentage(f64);

const MAX_FAIL_HINT: &str = "write a percentage from 0 to 100, e.g. 0 (stop on any failure) or 25";

impl MaxFailPercentage {
    pub fn new(percent: f64) -> Option<MaxFailPercentage> {
        (percent.is_finite() && (0.0..=100.0).contains(&percent)).then_some(MaxFailPercentage(percent))
    }

    pub fn percent(self) -> f64 {
        self.0
    }

    /// Parses `30`, `30%` or `12.5` (Ansible strips a `%` and reads a float).
    pub fn parse(text: &str) -> Result<MaxFailPercentage> {
        let trimmed = unquote(text.trim());
        let number = trimmed.strip_suffix('%').unwrap_or(trimmed).trim();
        let percent: f64 = number.parse().map_err(|_| {
            Error::input(format!("max-fail-percentage `{}` is not a number", text.trim())).hint(MAX_FAIL_HINT)
        })?;
        MaxFailPercentage::new(percent).ok_or_else(|| {
            Error::input(format!("max-fail-percentage `{}` is outside 0..=100", text.trim())).hint(MAX_FAIL_HINT)
        })
    }

    pub fn from_value(value: &Value) -> Result<MaxFailPercentage> {
        match value {
            Value::Number(n) => {
                let percent = n.as_f64().unwrap_or(f64::NAN);
                MaxFailPercentage::new(percent).ok_or_else(|| {
                    Error::input(format!("max-fail-percentage `{n}` is outside 0..=100")).hint(MAX_FAIL_HINT)
                })
            }
            Value::String(s) => MaxFailPercentage::parse(s),
            other => Err(Error::input(format!("max-fail-percentage `{other}` is not a number")).hint(MAX_FAIL_HINT)),
        }
    }

    pub fn to_json(self) -> Value {
        if self.0.fract() == 0.0 { Value::from(self.0 as i64) } else { Value::from(self.0) }
    }
}

impl Default for MaxFailPercentage {
    fn default() -> Self {
        MaxFailPercentage(0.0)
    }
}

impl fmt::Display for MaxFailPercentage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.to_json())
    }
}

// ---------------------------------------------------------------------------------------------------------------
// upgrade_cluster_lock_ttl

/// `upgrade_cluster_lock_ttl` as written (empty: the default, 15 minutes): seconds or a duration ("15m"), at least
/// one second. The plan checks the first master's value with it (`check` and `--plan` refuse what the run would) and
/// the run reads it again, rendered.
pub fn cluster_lock_ttl(text: &str) -> Result<std::time::Duration> {
    if text.trim().is_empty() {
        return Ok(std::time::Duration::from_secs(15 * 60));
    }
    let parsed = DrainTimeout::parse(text)
        .map_err(|_| {
            Error::input(format!("upgrade_cluster_lock_ttl `{}` is not a duration", text.trim()))
                .hint("write seconds (900) or a duration such as \"15m\"; it must be more than 0")
        })?
        .seconds();
    if parsed == 0 {
        return Err(
            Error::input("upgrade_cluster_lock_ttl is 0").hint("write a duration of at least one second, e.g. \"15m\"")
        );
    }
    Ok(std::time::Duration::from_secs(parsed))
}

// ---------------------------------------------------------------------------------------------------------------
// drain-timeout

/// How long a node's drain may take, in seconds; 0 waits for ever.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DrainTimeout(u64);

const DRAIN_HINT: &str = "write seconds (90) or a duration such as \"90s\", \"10m\" or \"1h30m\"; 0 waits for ever";

impl DrainTimeout {
    pub fn from_secs(seconds: u64) -> DrainTimeout {
        DrainTimeout(seconds)
    }

    pub fn seconds(self) -> u64 {
        self.0
    }

    /// `None` when the drain may take for ever.
    pub fn limit(self) -> Option<std::time::Duration> {
        (self.0 > 0).then(|| std::time::Duration::from_secs(self.0))
    }

    /// Parses `90`, `90s`, `10m`, `1h30m`, `1h 30m`.
    pub fn parse(text: &str) -> Result<DrainTimeout> {
        let err = || Error::input(format!("drain timeout `{}` is not a duration", text.trim())).hint(DRAIN_HINT);
        let trimmed = unquote(text.trim());
        if trimmed.is_empty() {
            return Err(err());
        }
        if let Ok(seconds) = trimmed.parse::<u64>() {
            return Ok(DrainTimeout(seconds));
        }
        let mut total: u64 = 0;
        let mut rest = trimmed;
        while !rest.is_empty() {
            rest = rest.trim_start();
            let digits = rest.find(|c: char| !c.is_ascii_digit()).unwrap_or(rest.len());
            if digits == 0 {
                return Err(err());
            }
            let number: u64 = rest[..digits].parse().map_err(|_| err())?;
            rest = &rest[digits..];
            let unit_len = rest.find(|c: char| !c.is_ascii_alphabetic()).unwrap_or(rest.len());
            let factor = match &rest[..unit_len] {
                "s" | "sec" | "secs" | "second" | "seconds" => 1,
                "m" | "min" | "mins" | "minute" | "minutes" => 60,
                "h" | "hour" | "hours" => 3600,
                "d" | "day" | "days" => 86_400,
                _ => return Err(err()),
            };
            rest = rest[unit_len..].trim_start();
            total = number.checked_mul(factor).and_then(|s| total.checked_add(s)).ok_or_else(err)?;
        }
        Ok(DrainTimeout(total))
    }

    pub fn from_value(value: &Value) -> Result<DrainTimeout> {
        match value {
            Value::Number(n) => match integral(value) {
                Some(s) if s >= 0 => Ok(DrainTimeout(s as u64)),
                _ => Err(Error::input(format!("drain timeout `{n}` is not a whole number of seconds, 0 or more"))
                    .hint(DRAIN_HINT)),
            },
            Value::String(s) => DrainTimeout::parse(s),
            other => Err(Error::input(format!("drain timeout `{other}` is not a duration")).hint(DRAIN_HINT)),
        }
    }
}

impl fmt::Display for DrainTimeout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (h, m, s) = (self.0 / 3600, self.0 % 3600 / 60, self.0 % 60);
        if self.0 == 0 {
            return write!(f, "0");
        }
        if h > 0 {
            write!(f, "{h}h")?;
        }
        if m > 0 {
            write!(f, "{m}m")?;
        }
        if s > 0 {
            write!(f, "{s}s")?;
        }
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------------------------------
// forks

/// How many hosts the run reads or checks at once where it goes over every host (preflight, the etcd and
/// configuration backups, verify, `plan --live`): Ansible's `forks`. At least 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Forks(usize);

const FORKS_HINT: &str = "write how many hosts may run at once, 1 or more (the default is 50)";

impl Forks {
    pub fn new(forks: usize) -> Option<Forks> {
        (forks > 0).then_some(Forks(forks))
    }

    pub fn get(self) -> usize {
        self.0
    }

    pub fn parse(text: &str) -> Result<Forks> {
        let trimmed = unquote(text.trim());
        let forks: usize = trimmed
            .parse()
            .map_err(|_| Error::input(format!("forks `{}` is not a whole number", text.trim())).hint(FORKS_HINT))?;
        Forks::new(forks).ok_or_else(|| Error::input("forks must be 1 or more, not 0").hint(FORKS_HINT))
    }

    pub fn from_value(value: &Value) -> Result<Forks> {
        match value {
            Value::Number(n) => match integral(value).and_then(|i| usize::try_from(i).ok()) {
                Some(forks) => {
                    Forks::new(forks).ok_or_else(|| Error::input("forks must be 1 or more, not 0").hint(FORKS_HINT))
                }
                None => Err(Error::input(format!("forks `{n}` is not a whole number, 1 or more")).hint(FORKS_HINT)),
            },
            Value::String(s) => Forks::parse(s),
            other => Err(Error::input(format!("forks `{other}` is not a whole number")).hint(FORKS_HINT)),
        }
    }
}

impl Default for Forks {
    fn default() -> Self {
        Forks(50)
    }
}

impl fmt::Display for Forks {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

// ---------------------------------------------------------------------------------------------------------------
// label selector

/// One requirement of an equality-based selector.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LabelRequirement {
    Equals(String, String),
    NotEquals(String, String),
    Exists(String),
    NotExists(String),
}

/// A Kubernetes equality-based label selector: `k=v`, `k==v`, `k!=v`, `k`, `!k`, comma-separated (all must hold).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LabelSelector(Vec<LabelRequirement>);

const LABEL_HINT: &str = "write an equality selector such as \"region=group1\" or \"a=b,c!=d\"";

impl LabelSelector {
    pub fn requirements(&self) -> &[LabelRequirement] {
        &self.0
    }

    pub fn parse(text: &str) -> Result<LabelSelector> {
        let trimmed = unquote(text.trim());
        if trimmed.is_empty() {
            return Err(Error::input("the label selector is empty").hint(LABEL_HINT));
        }
        let err = |what: String| Error::input(format!("label selector `{trimmed}`: {what}")).hint(LABEL_HINT);
        let mut requirements = Vec::new();
        for part in trimmed.split(',').map(str::trim) {
            if part.is_empty() {
                return Err(err("has an empty requirement (two commas, or a trailing comma)".into()));
            }
            let requirement = if let Some((k, v)) = part.split_once("!=") {
                LabelRequirement::NotEquals(k.trim().into(), v.trim().into())
            } else if let Some((k, v)) = part.split_once("==") {
                LabelRequirement::Equals(k.trim().into(), v.trim().into())
            } else if let Some((k, v)) = part.split_once('=') {
                LabelRequirement::Equals(k.trim().into(), v.trim().into())
            } else if let Some(k) = part.strip_prefix('!') {
                LabelRequirement::NotExists(k.trim().into())
            } else if part.contains(" in ") || part.contains(" notin ") || part.contains('(') {
                return Err(err(format!("`{part}` is a set-based requirement; only =, == and != are supported")));
            } else {
                LabelRequirement::Exists(part.into())
            };
            let (key, value) = match &requirement {
                LabelRequirement::Equals(k, v) | LabelRequirement::NotEquals(k, v) => (k, Some(v)),
                LabelRequirement::Exists(k) | LabelRequirement::NotExists(k) => (k, None),
            };
            check_label_key(key).map_err(|why| err(format!("label key `{key}` {why}")))?;
            if let Some(value) = value {
                check_label_value(value).map_err(|why| err(format!("label value `{value}` {why}")))?;
            }
            requirements.push(requirement);
        }
        Ok(LabelSelector(requirements))
    }

    pub fn from_value(value: &Value) -> Result<LabelSelector> {
        match value {
            Value::String(s) => LabelSelector::parse(s),
            // A YAML mapping {region: group1} reads naturally as "region=group1".
            Value::Object(map) if !map.is_empty() => {
                let parts: Vec<String> = map.iter().map(|(k, v)| format!("{k}={}", scalar_text(v))).collect();
                LabelSelector::parse(&parts.join(","))
            }
            other => Err(Error::input(format!("label selector `{other}` is not a string")).hint(LABEL_HINT)),
        }
    }

    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.0.iter().all(|r| match r {
            LabelRequirement::Equals(k, v) => labels.get(k) == Some(v),
            // As in Kubernetes, `k!=v` also matches objects without the label.
            LabelRequirement::NotEquals(k, v) => labels.get(k) != Some(v),
            LabelRequirement::Exists(k) => labels.contains_key(k),
            LabelRequirement::NotExists(k) => !labels.contains_key(k),
        })
    }
}

impl fmt::Display for LabelRequirement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LabelRequirement::Equals(k, v) => write!(f, "{k}={v}"),
            LabelRequirement::NotEquals(k, v) => write!(f, "{k}!={v}"),
            LabelRequirement::Exists(k) => write!(f, "{k}"),
            LabelRequirement::NotExists(k) => write!(f, "!{k}"),
        }
    }
}

impl fmt::Display for LabelSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = self.0.iter().map(ToString::to_string).collect();
        write!(f, "{}", parts.join(","))
    }
}

/// Kubernetes label names: at most 63 characters, alphanumerics with `-`, `_`, `.` inside.
fn check_label_name(name: &str) -> std::result::Result<(), &'static str> {
    if name.is_empty() {
        return Err("has an empty name");
    }
    if name.len() > 63 {
        return Err("has a name longer than 63 characters");
    }
    let ok_inner = name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    let ok_ends =
        name.starts_with(|c: char| c.is_ascii_alphanumeric()) && name.ends_with(|c: char| c.is_ascii_alphanumeric());
    if ok_inner && ok_ends {
        Ok(())
    } else {
        Err("must be alphanumerics, `-`, `_` or `.`, beginning and ending with an alphanumeric")
    }
}

fn check_label_key(key: &str) -> std::result::Result<(), &'static str> {
    match key.split_once('/') {
        Some((prefix, name)) => {
            let prefix_ok = !prefix.is_empty()
                && prefix.len() <= 253
                && prefix.split('.').all(|part| {
                    !part.is_empty()
                        && part.chars().all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
                        && !part.starts_with('-')
                        && !part.ends_with('-')
                });
            if !prefix_ok {
                return Err("has a prefix that is not a DNS subdomain (lowercase, e.g. node-role.kubernetes.io/)");
            }
            check_label_name(name)
        }
        None => check_label_name(key),
    }
}

fn check_label_value(value: &str) -> std::result::Result<(), &'static str> {
    if value.is_empty() { Ok(()) } else { check_label_name(value) }
}

/// Labels written as a mapping (`{a: b}`), a `"a=b,c=d"` string, or a list of `"a=b"` (openshift_node_groups).
pub fn labels_from_value(value: &Value) -> Option<BTreeMap<String, String>> {
    let mut labels = BTreeMap::new();
    match value {
        Value::Object(map) => {
            for (k, v) in map {
                labels.insert(k.clone(), scalar_text(v));
            }
        }
        Value::String(s) => {
            let s = s.trim();
            if s.starts_with('{') || s.starts_with('[') {
                return labels_from_value(&parse_python_literal(s)?);
            }
            for pair in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
                let (k, v) = pair.split_once('=')?;
                labels.insert(k.trim().to_string(), v.trim().to_string());
            }
        }
        Value::Array(items) => {
            for item in items {
                let (k, v) = item.as_str()?.split_once('=')?;
                labels.insert(k.trim().to_string(), v.trim().to_string());
            }
        }
        Value::Null => {}
        _ => return None,
    }
    Some(labels)
}

// ---------------------------------------------------------------------------------------------------------------
// target version

/// A Kubernetes release, `v1.29.1` or `1.29.1`. Comparison looks at major, minor and patch only: a kubelet that
/// reports `v1.29.1+k3s1` is at target `1.29.1`.
#[derive(Debug, Clone)]
pub struct TargetVersion {
    pub major: u64,
    pub minor: u64,
    pub patch: u64,
    /// Anything after the patch number (`-rc.1`, `+k3s1`), kept for display.
    pub suffix: String,
}

const VERSION_HINT: &str = "write the release as major.minor.patch, e.g. v1.29.1 or 1.29.1";

impl TargetVersion {
    pub fn parse(text: &str) -> Result<TargetVersion> {
        let err = || Error::input(format!("version `{}` is not major.minor.patch", text.trim())).hint(VERSION_HINT);
        let trimmed = unquote(text.trim());
        let bare = trimmed.strip_prefix('v').or_else(|| trimmed.strip_prefix('V')).unwrap_or(trimmed);
        let end = bare.find(['-', '+']).unwrap_or(bare.len());
        let (numbers, suffix) = bare.split_at(end);
        let parts: Vec<&str> = numbers.split('.').collect();
        let [major, minor, patch] = parts.as_slice() else {
            return Err(err());
        };
        let number = |s: &str| {
            if s.is_empty() || !s.chars().all(|c| c.is_ascii_digit()) { None } else { s.parse::<u64>().ok() }
        };
        Ok(TargetVersion {
            major: number(major).ok_or_else(err)?,
            minor: number(minor).ok_or_else(err)?,
            patch: number(patch).ok_or_else(err)?,
            suffix: suffix.to_string(),
        })
    }

    pub fn from_value(value: &Value) -> Result<TargetVersion> {
        match value {
            Value::String(s) => TargetVersion::parse(s),
            other => Err(Error::input(format!("version `{other}` is not major.minor.patch")).hint(VERSION_HINT)),
        }
    }

    fn key(&self) -> (u64, u64, u64) {
        (self.major, self.minor, self.patch)
    }

    /// Whether a kubelet that reports `reported` runs this release. The one comparison of a node's version with a
    /// target, in every phase: major.minor.patch only, so a distribution suffix (`v1.29.1-eks-123`,
    /// `v1.29.1-gke.1589018`, `v1.29.1+k3s1`) does not make a node differ from `1.29.1` (wait_ready.yml strips it
    /// the same way, with `upgrade_target_release`).
    pub fn is_reported_by(&self, reported: &str) -> bool {
        TargetVersion::parse(reported).is_ok_and(|v| v == *self)
    }

    /// `v1.29.1` without the suffix: how versions that differ only by a distribution suffix are grouped.
    pub fn release(&self) -> String {
        format!("v{}.{}.{}", self.major, self.minor, self.patch)
    }
}

impl PartialEq for TargetVersion {
    fn eq(&self, other: &Self) -> bool {
        self.key() == other.key()
    }
}
impl Eq for TargetVersion {}
impl PartialOrd for TargetVersion {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for TargetVersion {
    fn cmp(&self, other: &Self) -> Ordering {
        self.key().cmp(&other.key())
    }
}

impl fmt::Display for TargetVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "v{}.{}.{}{}", self.major, self.minor, self.patch, self.suffix)
    }
}

// ---------------------------------------------------------------------------------------------------------------
// hooks

/// The places in a host's sequence where an operator's task file runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum HookPoint {
    MasterPre,
    MasterMid,
    MasterPost,
    /// Before the node is cordoned, while it still takes work (an acknowledgement pause, a check of the node in
    /// service). openshift-ansible has no such point: its `openshift_node_upgrade_pre_hook` runs after the cordon and
    /// the drain (release-3.11 upgrade_nodes.yml), so that alias stays with `NodePre`.
    NodePreCordon,
    NodePreDrain,
    NodePre,
    NodeMid,
    NodePost,
    /// Once per run, on the first master: before the control plane, between it and the nodes, after the nodes.
    ClusterPre,
    ClusterMid,
    ClusterPost,
}

impl HookPoint {
    pub const MASTER: [HookPoint; 3] = [HookPoint::MasterPre, HookPoint::MasterMid, HookPoint::MasterPost];
    pub const NODE: [HookPoint; 5] = [
        HookPoint::NodePreCordon,
        HookPoint::NodePreDrain,
        HookPoint::NodePre,
        HookPoint::NodeMid,
        HookPoint::NodePost,
    ];
    pub const CLUSTER: [HookPoint; 3] = [HookPoint::ClusterPre, HookPoint::ClusterMid, HookPoint::ClusterPost];

    /// Short name for output: `pre`, `mid`, `post`, `pre-cordon`, `pre-drain`.
    pub fn name(self) -> &'static str {
        match self {
            HookPoint::MasterPre | HookPoint::NodePre => "pre",
            HookPoint::MasterMid | HookPoint::NodeMid => "mid",
            HookPoint::MasterPost | HookPoint::NodePost => "post",
            HookPoint::NodePreCordon => "pre-cordon",
            HookPoint::NodePreDrain => "pre-drain",
            HookPoint::ClusterPre => "cluster-pre",
            HookPoint::ClusterMid => "cluster-mid",
            HookPoint::ClusterPost => "cluster-post",
        }
    }

    /// Stable key for machine-readable output.
    pub fn key(self) -> &'static str {
        match self {
            HookPoint::MasterPre => "master_pre",
            HookPoint::MasterMid => "master_mid",
            HookPoint::MasterPost => "master_post",
            HookPoint::NodePreCordon => "node_pre_cordon",
            HookPoint::NodePreDrain => "node_pre_drain",
            HookPoint::NodePre => "node_pre",
            HookPoint::NodeMid => "node_mid",
            HookPoint::NodePost => "node_post",
            HookPoint::ClusterPre => "cluster_pre",
            HookPoint::ClusterMid => "cluster_mid",
            HookPoint::ClusterPost => "cluster_post",
        }
    }

    /// The canonical variable and the openshift-ansible alias (the canonical one again where there is none).
    pub fn variables(self) -> (&'static str, &'static str) {
        match self {
            HookPoint::MasterPre => ("upgrade_master_pre_hook", "openshift_master_upgrade_pre_hook"),
            HookPoint::MasterMid => ("upgrade_master_mid_hook", "openshift_master_upgrade_hook"),
            HookPoint::MasterPost => ("upgrade_master_post_hook", "openshift_master_upgrade_post_hook"),
            // openshift-ansible has no hook before the cordon: no alias.
            HookPoint::NodePreCordon => ("upgrade_node_pre_cordon_hook", "upgrade_node_pre_cordon_hook"),
            HookPoint::NodePreDrain => ("upgrade_node_pre_drain_hook", "openshift_node_upgrade_pre_drain_hook"),
            HookPoint::NodePre => ("upgrade_node_pre_hook", "openshift_node_upgrade_pre_hook"),
            HookPoint::NodeMid => ("upgrade_node_mid_hook", "openshift_node_upgrade_hook"),
            HookPoint::NodePost => ("upgrade_node_post_hook", "openshift_node_upgrade_post_hook"),
            // openshift-ansible has no cluster-level hooks: no alias.
            HookPoint::ClusterPre => ("upgrade_cluster_pre_hook", "upgrade_cluster_pre_hook"),
            HookPoint::ClusterMid => ("upgrade_cluster_mid_hook", "upgrade_cluster_mid_hook"),
            HookPoint::ClusterPost => ("upgrade_cluster_post_hook", "upgrade_cluster_post_hook"),
        }
    }
}

/// A hook task file one host runs, resolved to a path that exists.
#[derive(Debug, Clone, PartialEq)]
pub struct Hook {
    pub path: PathBuf,
    /// The variable that named it (canonical or alias) and where that was set.
    pub variable: String,
    pub origin: Origin,
}

/// A host's hooks by hook point; only the points that are set.
pub type HostHooks = BTreeMap<HookPoint, Hook>;

/// Reads the hooks of `points` from one host's variables; relative paths resolve against `base_dir`.
pub fn resolve_hooks(host: &str, vars: &Vars, points: &[HookPoint], base_dir: &Path) -> Result<HostHooks> {
    let mut hooks = HostHooks::new();
    for &point in points {
        let (canonical, alias) = point.variables();
        let Some((name, var)) = pick(vars, canonical, alias) else { continue };
        let Some(path) = hook_file(host, name, var, base_dir)? else { continue };
        hooks.insert(point, Hook { path, variable: name.to_string(), origin: var.origin.clone() });
    }
    Ok(hooks)
}

/// The task file a hook variable names, checked: a path (not another type, not a template) to a file that exists.
/// The one place hooks are resolved: the hooks of every hook point (`resolve_hooks`) and blue-green's surge hooks.
pub(crate) fn hook_file(host: &str, name: &str, var: &Var, base_dir: &Path) -> Result<Option<PathBuf>> {
    let path = match hook_path(&var.value, base_dir) {
        Ok(None) => return Ok(None),
        Ok(Some(path)) => path,
        Err(type_name) => {
            return Err(located(
                Error::input(format!("{name} (for {host}) is {type_name}, not a path to a task file"))
                    .hint("set it to the path of an Ansible task list, e.g. hooks/pre.yml"),
                name,
                &var.origin,
            ));
        }
    };
    if let Value::String(text) = &var.value {
        reject_template(name, text.trim(), &var.origin)?;
    }
    if !path.is_file() {
        return Err(located(
            Error::input(format!("{name} (for {host}) names {}, which does not exist", path.display())).hint(format!(
                "create the task file, or fix the path (relative paths resolve against {})",
                base_dir.display()
            )),
            name,
            &var.origin,
        ));
    }
    Ok(Some(path))
}

/// The task file a hook variable's value names, resolved the one way the run, `upgrade check` and blue-green's surge
/// hooks all use: trimmed, `~/` expanded, relative paths against `base_dir`. `Ok(None)` when unset or empty; the
/// value's type name when it is not a string.
pub fn hook_path(value: &Value, base_dir: &Path) -> std::result::Result<Option<PathBuf>, &'static str> {
    match value {
        Value::Null => Ok(None),
        Value::String(s) if s.trim().is_empty() => Ok(None),
        Value::String(s) => Ok(Some(resolve_path(s.trim(), base_dir))),
        other => Err(type_name(other)),
    }
}

/// The inventory variables that name hook files: ours and openshift-ansible's, and blue-green's surge hooks.
pub const HOOK_VARIABLES: &[&str] = &[
    "upgrade_master_pre_hook",
    "upgrade_master_mid_hook",
    "upgrade_master_post_hook",
    "upgrade_node_pre_cordon_hook",
    "upgrade_node_pre_drain_hook",
    "upgrade_node_pre_hook",
    "upgrade_node_mid_hook",
    "upgrade_node_post_hook",
    "upgrade_cluster_pre_hook",
    "upgrade_cluster_mid_hook",
    "upgrade_cluster_post_hook",
    "openshift_master_upgrade_pre_hook",
    "openshift_master_upgrade_hook",
    "openshift_master_upgrade_post_hook",
    "openshift_node_upgrade_pre_drain_hook",
    "openshift_node_upgrade_pre_hook",
    "openshift_node_upgrade_hook",
    "openshift_node_upgrade_post_hook",
    "upgrade_node_surge_add_hook",
    "upgrade_node_surge_remove_hook",
];

/// Every hook file any host of the inventory names (by [`hook_path`], as a run resolves it), without duplicates.
pub fn hook_files(inventory: &crate::inventory::Inventory, extra: &Vars) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = Vec::new();
    for host in inventory.hosts.keys() {
        let vars = inventory.host_vars(host, extra);
        for name in HOOK_VARIABLES {
            let Some(Ok(Some(path))) = vars.get(*name).map(|v| hook_path(&v.value, &inventory.dir)) else { continue };
            if !files.contains(&path) {
                files.push(path);
            }
        }
    }
    files
}

pub(crate) fn resolve_path(text: &str, base_dir: &Path) -> PathBuf {
    if let Some(rest) = text.strip_prefix("~/") {
        if let Some(home) = std::env::var_os("HOME") {
            return PathBuf::from(home).join(rest);
        }
    }
    let path = PathBuf::from(text);
    if path.is_absolute() { path } else { base_dir.join(path) }
}

// ---------------------------------------------------------------------------------------------------------------
// where run-wide settings come from

/// A setting's value, the variable or flag that gave it, and where that was.
#[derive(Debug, Clone, PartialEq)]
pub struct Setting<T> {
    pub value: T,
    /// The variable name (`upgrade_nodes_serial`, an alias) or flag (`--serial`); `None` for the default.
    pub source: Option<String>,
    pub origin: Origin,
}

impl<T> Setting<T> {
    fn default(value: T) -> Setting<T> {
        Setting { value, source: None, origin: Origin::Default }
    }

    /// "default", "--serial", "upgrade_nodes_serial at hosts:12:1", "upgrade_nodes_serial from -e ...".
    pub fn describe_origin(&self) -> String {
        match (&self.source, &self.origin) {
            (_, Origin::Default) => "default".into(),
            (_, Origin::Flag(flag)) => flag.clone(),
            (Some(var), Origin::ExtraVars(arg)) => format!("{var} from -e {arg}"),
            (Some(var), origin) => format!("{var} at {origin}"),
            (None, origin) => origin.to_string(),
        }
    }
}

/// Nodes whose `upgrade_nodes_serial` comes from one place (a group's variables): batched on their own, with that
/// serial, when node groups set different ones.
#[derive(Debug, Clone, PartialEq)]
pub struct SerialGroup {
    pub serial: Setting<Serial>,
    pub hosts: Vec<String>,
}

/// The run-wide settings, each with its origin.
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    pub serial: Setting<Serial>,
    /// Set when the node groups carry different serials (else empty: `serial` holds for every node).
    pub serial_groups: Vec<SerialGroup>,
    pub label: Setting<Option<LabelSelector>>,
    pub max_fail_percentage: Setting<MaxFailPercentage>,
    pub drain_timeout: Setting<DrainTimeout>,
    pub target_version: Setting<Option<TargetVersion>>,
    pub forks: Setting<Forks>,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            serial: Setting::default(Serial::one()),
            serial_groups: Vec::new(),
            label: Setting::default(None),
            max_fail_percentage: Setting::default(MaxFailPercentage::default()),
            drain_timeout: Setting::default(DrainTimeout::default()),
            target_version: Setting::default(None),
            forks: Setting::default(Forks::default()),
        }
    }
}

/// The run-wide settings given on the command line, as the operator wrote them: each wins over the inventory and
/// `-e`, and is said to come from its flag (`--serial`, ...).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SettingFlags {
    pub serial: Option<String>,
    pub label: Option<String>,
    pub max_fail_percentage: Option<String>,
    pub drain_timeout: Option<String>,
    pub target_version: Option<String>,
    pub forks: Option<String>,
}

/// How a command's output is written: text for people, JSON for CI.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OutputFormat {
    #[default]
    Text,
    Json,
}

/// The variables of one host after precedence (`Inventory::host_vars`), by host name.
pub type HostVarsRef<'a> = &'a [(&'a str, &'a Vars)];

/// Resolves the run-wide settings: a flag wins; otherwise the hosts of the phase a setting governs (`node_hosts`
/// for serial, label, max-fail-percentage and drain-timeout; `all_hosts` for the target version) must agree on the
/// value their variables give (`-e` included, as it is on top of every host's variables).
pub fn resolve(
    flags: &SettingFlags,
    node_hosts: HostVarsRef<'_>,
    all_hosts: HostVarsRef<'_>,
    extra: &Vars,
) -> Result<Settings> {
    let serial_of = |hosts: HostVarsRef<'_>| -> Result<Setting<Serial>> {
        let serial = match run_wide(
            "--serial",
            flags.serial.as_deref(),
            ("upgrade_nodes_serial", "openshift_upgrade_nodes_serial"),
            hosts,
            extra,
            Serial::parse,
            Serial::from_value,
        )? {
            Some(serial) => Some(serial),
            // The Machine Config Operator's name for the same thing (nodes upgraded at once); serial wins over it.
            None => run_wide(
                "--serial",
                None,
                ("upgrade_nodes_max_unavailable", "upgrade_nodes_max_unavailable"),
                hosts,
                extra,
                Serial::parse,
                Serial::from_value,
            )?,
        };
        Ok(serial.unwrap_or_else(|| Setting::default(Serial::one())))
    };
    // Serial may differ between node groups (infra one at a time, compute 20%): each group is batched on its own.
    let mut serial_groups: Vec<SerialGroup> = Vec::new();
    if flags.serial.is_none() {
        for &(host, vars) in node_hosts {
            let serial = serial_of(&[(host, vars)])?;
            match serial_groups.iter_mut().find(|g| g.serial.value == serial.value && g.serial.origin == serial.origin)
            {
                Some(group) => group.hosts.push(host.to_string()),
                None => serial_groups.push(SerialGroup { serial, hosts: vec![host.to_string()] }),
            }
        }
    }
    let serial = match serial_groups.first() {
        Some(first) if serial_groups.len() > 1 => first.serial.clone(),
        _ => {
            serial_groups.clear();
            serial_of(node_hosts)?
        }
    };
    let label = run_wide(
        "--label",
        flags.label.as_deref(),
        ("upgrade_nodes_label", "openshift_upgrade_nodes_label"),
        node_hosts,
        extra,
        |s| optional(s, LabelSelector::parse),
        |v| optional_value(v, LabelSelector::parse, LabelSelector::from_value),
    )?
    .unwrap_or_else(|| Setting::default(None));
    let max_fail_percentage = run_wide(
        "--max-fail-percentage",
        flags.max_fail_percentage.as_deref(),
        ("upgrade_nodes_max_fail_percentage", "openshift_upgrade_nodes_max_fail_percentage"),
        node_hosts,
        extra,
        MaxFailPercentage::parse,
        MaxFailPercentage::from_value,
    )?
    .unwrap_or_else(|| Setting::default(MaxFailPercentage::default()));
    let drain_timeout = run_wide(
        "--drain-timeout",
        flags.drain_timeout.as_deref(),
        ("upgrade_nodes_drain_timeout", "openshift_upgrade_nodes_drain_timeout"),
        node_hosts,
        extra,
        DrainTimeout::parse,
        DrainTimeout::from_value,
    )?
    .unwrap_or_else(|| Setting::default(DrainTimeout::default()));
    let target_version = run_wide(
        "--target-version",
        flags.target_version.as_deref(),
        ("upgrade_target_version", "upgrade_target_version"),
        all_hosts,
        extra,
        |s| optional(s, TargetVersion::parse),
        |v| optional_value(v, TargetVersion::parse, TargetVersion::from_value),
    )?
    .unwrap_or_else(|| Setting::default(None));
    let forks = run_wide(
        "--forks",
        flags.forks.as_deref(),
        ("upgrade_forks", "upgrade_forks"),
        all_hosts,
        extra,
        Forks::parse,
        Forks::from_value,
    )?
    .unwrap_or_else(|| Setting::default(Forks::default()));
    Ok(Settings { serial, serial_groups, label, max_fail_percentage, drain_timeout, target_version, forks })
}

/// The openshift-ansible names a 3.11 target may be given by when `upgrade_target_version` is not set, in the order
/// they are tried: the package version (`-3.11.248`, what yum installs), the image tag (`v3.11.248`), the release
/// (`3.11.248`; a bare `3.11` names no 3.11.z and is passed over).
pub const OPENSHIFT_TARGET_ALIASES: [&str; 3] = ["openshift_pkg_version", "openshift_image_tag", "openshift_release"];

/// A target found under an openshift-ansible name, and the aliases passed over (`openshift_release=3.11`).
pub type OpenShiftTarget = (Option<Setting<Option<TargetVersion>>>, Vec<String>);

/// The target from the first of [`OPENSHIFT_TARGET_ALIASES`] the hosts set (they must agree on it), and the
/// aliases passed over because they name only a minor release.
pub fn resolve_openshift_target(all_hosts: HostVarsRef<'_>, extra: &Vars) -> Result<OpenShiftTarget> {
    let mut passed_over = Vec::new();
    for alias in OPENSHIFT_TARGET_ALIASES {
        // openshift_pkg_version is written with yum's separator in front: `-3.11.248`.
        let parse_one = |text: &str| {
            let text = unquote(text.trim());
            TargetVersion::parse(text.strip_prefix('-').unwrap_or(text))
        };
        let parse = |text: &str| optional(text, parse_one);
        let minor_only = |text: &str| {
            let bare = unquote(text.trim()).trim_start_matches(['-', 'v']);
            bare.split('.').count() == 2
                && bare.split('.').all(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_digit()))
        };
        let found = all_hosts.iter().find_map(|(_, vars)| vars.get(alias)).or_else(|| extra.get(alias));
        if let Some(Value::String(text)) = found.map(|v| &v.value) {
            if minor_only(text) {
                passed_over.push(format!("{alias}={text}"));
                continue;
            }
        }
        let setting = run_wide("--target-version", None, (alias, alias), all_hosts, extra, parse, |v| {
            optional_value(v, parse_one, TargetVersion::from_value)
        })?;
        if let Some(setting) = setting.filter(|s| s.value.is_some()) {
            return Ok((Some(setting), passed_over));
        }
    }
    Ok((None, passed_over))
}

/// Refuses a target that names another release than a set `openshift_image_tag`: the image tag is what moves the
/// control plane's images in openshift-ansible, the target what the packages go to, so a disagreement would leave the
/// two parts of a host on different 3.11.z releases. A minor-only tag (`v3.11`) names no release and is passed over;
/// one that is not a version (`latest`) is not ours to judge unless it is the target itself.
pub fn check_openshift_image_tag(
    target: &Setting<Option<TargetVersion>>,
    all_hosts: HostVarsRef<'_>,
    extra: &Vars,
) -> Result<()> {
    const TAG: &str = "openshift_image_tag";
    let Some(wanted) = &target.value else { return Ok(()) };
    if target.source.as_deref() == Some(TAG) {
        return Ok(());
    }
    let release = |text: &str| -> Result<Option<TargetVersion>> {
        let bare = unquote(text.trim());
        Ok(TargetVersion::parse(bare).ok().filter(|_| bare.trim_start_matches('v').split('.').count() >= 3))
    };
    let tag = run_wide(TAG, None, (TAG, TAG), all_hosts, extra, release, |v| match v {
        Value::String(s) => release(s),
        _ => Ok(None),
    })?;
    let Some(tag) = tag else { return Ok(()) };
    let Some(named) = &tag.value else { return Ok(()) };
    let same = |a: &TargetVersion, b: &TargetVersion| (a.major, a.minor, a.patch) == (b.major, b.minor, b.patch);
    if same(wanted, named) {
        return Ok(());
    }
    let err = Error::input(format!(
        "the target {wanted} ({}) and {TAG} {named} ({}) name different releases",
        target.describe_origin(),
        tag.describe_origin()
    ))
    .hint(format!(
        "set them to the same release ({TAG} moves the control plane's images, the target the packages), or pass \
         --target-version / set upgrade_target_version to the release you mean and {TAG} to the same (v{}.{}.{})",
        wanted.major, wanted.minor, wanted.patch
    ));
    // `-e` is already named in the message; a file origin adds its place.
    match &tag.origin {
        Origin::ExtraVars(_) => Err(err),
        origin => Err(origin.locate(err)),
    }
}

/// The certificate expiry check of preflight: how many days ahead a certificate must still be valid, and whether
/// one expiring sooner stops the run (`false`: it is reported and the run goes on).
#[derive(Debug, Clone, PartialEq)]
pub struct CertificateExpiry {
    pub warning_days: Setting<u64>,
    pub fail_on_warn: Setting<bool>,
    /// `upgrade_certificate_expiry_unreadable`: what a certificate whose end date cannot be read does.
    pub unreadable: Setting<UnreadableExpiry>,
}

/// What preflight does with a certificate whose end date it cannot read: fail (the default: a date that cannot be
/// read is not a date far away) or warn and go on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnreadableExpiry {
    Fail,
    Warn,
}

impl fmt::Display for UnreadableExpiry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            UnreadableExpiry::Fail => "fail",
            UnreadableExpiry::Warn => "warn",
        })
    }
}

/// `upgrade_certificate_expiry_warning_days` (alias `openshift_certificate_expiry_warning_days`) and
/// `upgrade_certificate_expiry_fail_on_warn` (alias `openshift_certificate_expiry_fail_on_warn`), over every host.
pub fn resolve_certificate_expiry(
    all_hosts: HostVarsRef<'_>,
    extra: &Vars,
    default_days: u64,
) -> Result<CertificateExpiry> {
    let days = |text: &str| {
        unquote(text.trim()).parse::<u64>().map_err(|_| {
            Error::input(format!("`{}` is not a whole number of days", text.trim()))
                .hint("write the number of days, e.g. 180")
        })
    };
    let warning_days = run_wide(
        "upgrade_certificate_expiry_warning_days",
        None,
        ("upgrade_certificate_expiry_warning_days", "openshift_certificate_expiry_warning_days"),
        all_hosts,
        extra,
        days,
        |v| match integral(v) {
            Some(n) if n >= 0 => Ok(n as u64),
            _ => days(&scalar_text(v)),
        },
    )?
    .unwrap_or_else(|| Setting::default(default_days));
    let truth = |text: &str| {
        crate::ansible_compat::boolean(&Value::String(unquote(text.trim()).to_string()))
            .ok_or_else(|| Error::input(format!("`{}` is not true or false", text.trim())).hint("write true or false"))
    };
    let fail_on_warn = run_wide(
        "upgrade_certificate_expiry_fail_on_warn",
        None,
        ("upgrade_certificate_expiry_fail_on_warn", "openshift_certificate_expiry_fail_on_warn"),
        all_hosts,
        extra,
        truth,
        |v| match v {
            Value::Bool(b) => Ok(*b),
            other => truth(&scalar_text(other)),
        },
    )?
    .unwrap_or_else(|| Setting::default(true));
    let fail_or_warn = |text: &str| match unquote(text.trim()) {
        "fail" => Ok(UnreadableExpiry::Fail),
        "warn" => Ok(UnreadableExpiry::Warn),
        other => Err(Error::input(format!("`{other}` is neither fail nor warn")).hint("write fail or warn")),
    };
    let unreadable = run_wide(
        "upgrade_certificate_expiry_unreadable",
        None,
        ("upgrade_certificate_expiry_unreadable", "upgrade_certificate_expiry_unreadable"),
        all_hosts,
        extra,
        fail_or_warn,
        |v| fail_or_warn(&scalar_text(v)),
    )?
    .unwrap_or_else(|| Setting::default(UnreadableExpiry::Fail));
    Ok(CertificateExpiry { warning_days, fail_on_warn, unreadable })
}

/// How a setting's value reads in a message.
pub(crate) trait Shown {
    fn shown(&self) -> String;
}

macro_rules! shown_by_display {
    ($($t:ty),*) => {$(
        impl Shown for $t {
            fn shown(&self) -> String {
                format!("`{self}`")
            }
        }
    )*};
}
shown_by_display!(
    Serial,
    MaxFailPercentage,
    DrainTimeout,
    Forks,
    LabelSelector,
    TargetVersion,
    UnreadableExpiry,
    u64,
    bool
);

impl<T: fmt::Display> Shown for Option<T> {
    fn shown(&self) -> String {
        match self {
            Some(v) => format!("`{v}`"),
            None => "nothing".into(),
        }
    }
}

/// An empty string means "not set" (an inventory may carry `upgrade_nodes_label=`).
fn optional<T>(text: &str, parse: impl Fn(&str) -> Result<T>) -> Result<Option<T>> {
    if unquote(text.trim()).is_empty() { Ok(None) } else { parse(text).map(Some) }
}

/// An optional setting from a variable's value: null or blank text means unset.
fn optional_value<T>(
    value: &Value,
    parse: impl Fn(&str) -> Result<T>,
    from_value: impl Fn(&Value) -> Result<T>,
) -> Result<Option<T>> {
    match value {
        Value::Null => Ok(None),
        Value::String(s) => optional(s, parse),
        other => from_value(other).map(Some),
    }
}

#[allow(clippy::too_many_arguments)]
pub(crate) fn run_wide<T: PartialEq + Shown>(
    flag: &str,
    flag_value: Option<&str>,
    (canonical, alias): (&str, &str),
    hosts: HostVarsRef<'_>,
    extra: &Vars,
    parse: impl Fn(&str) -> Result<T>,
    from_value: impl Fn(&Value) -> Result<T>,
) -> Result<Option<Setting<T>>> {
    if let Some(text) = flag_value {
        let value = parse(text).map_err(|e| Error { message: format!("{flag}: {}", e.message), ..e })?;
        return Ok(Some(Setting { value, source: Some(flag.to_string()), origin: Origin::Flag(flag.to_string()) }));
    }
    let read = |name: &str, var: &Var| -> Result<T> {
        if let Value::String(s) = &var.value {
            reject_template(name, s, &var.origin)?;
        }
        from_value(&var.value).map_err(|e| located(e, name, &var.origin))
    };
    // With no host to read from, `-e` still applies.
    if hosts.is_empty() {
        return match pick(extra, canonical, alias) {
            Some((name, var)) => Ok(Some(Setting {
                value: read(name, var)?,
                source: Some(name.to_string()),
                origin: var.origin.clone(),
            })),
            None => Ok(None),
        };
    }
    let mut first: Option<(&str, Option<Setting<T>>)> = None;
    let mut last_origin: Option<&Origin> = None;
    for (host, vars) in hosts {
        let found = pick(vars, canonical, alias);
        // Most hosts share one origin (`[all:vars]`, a group file): parse each origin once.
        if let (Some((_, var)), Some(prev)) = (found, last_origin) {
            if &var.origin == prev {
                continue;
            }
        }
        let setting = match found {
            Some((name, var)) => {
                last_origin = Some(&var.origin);
                Some(Setting { value: read(name, var)?, source: Some(name.to_string()), origin: var.origin.clone() })
            }
            None => None,
        };
        match &first {
            None => first = Some((host, setting)),
            Some((first_host, first_setting)) => {
                let same = match (first_setting, &setting) {
                    (Some(a), Some(b)) => a.value == b.value,
                    (None, None) => true,
                    _ => false,
                };
                if !same {
                    let show = |s: &Option<Setting<T>>| match s {
                        Some(s) => format!("{} ({})", s.value.shown(), s.describe_origin()),
                        None => "not set (the default)".to_string(),
                    };
                    let mut err = Error::input(format!(
                        "hosts disagree on {canonical}: {first_host} has {}, {host} has {}",
                        show(first_setting),
                        show(&setting)
                    ))
                    .hint(format!(
                        "set {canonical} once for the whole phase ([all:vars], group_vars/all.yml or the phase's \
                         group), or pass {flag}"
                    ));
                    if let Some(Setting {
                        origin: Origin::Inventory(l) | Origin::GroupVars(l) | Origin::HostVars(l),
                        ..
                    }) = &setting
                    {
                        err = err.at(l.clone());
                    }
                    return Err(err);
                }
            }
        }
    }
    Ok(first.and_then(|(_, s)| s))
}

/// The canonical variable, else the alias; an alias given with `-e` still beats a canonical name from the inventory.
fn pick<'a>(vars: &'a Vars, canonical: &'a str, alias: &'a str) -> Option<(&'a str, &'a Var)> {
    let c = vars.get(canonical).map(|v| (canonical, v));
    let a = vars.get(alias).map(|v| (alias, v));
    match (c, a) {
        (Some(c), Some(a)) => {
            let c_extra = matches!(c.1.origin, Origin::ExtraVars(_));
            let a_extra = matches!(a.1.origin, Origin::ExtraVars(_));
            Some(if a_extra && !c_extra { a } else { c })
        }
        (c, a) => c.or(a),
    }
}

fn reject_template(name: &str, text: &str, origin: &Origin) -> Result<()> {
    if text.contains("{{") || text.contains("{%") {
        return Err(located(
            Error::input(format!("{name} is templated (`{text}`); templated settings are not supported yet"))
                .hint(format!("write the value of {name} literally")),
            name,
            origin,
        ));
    }
    Ok(())
}

/// Puts the error at the variable's place when it was set in a file, and says which variable it was.
pub(crate) fn located(mut err: Error, name: &str, origin: &Origin) -> Error {
    if !err.message.contains(name) {
        err.message = format!("{name}: {}", err.message);
    }
    origin.locate(err)
}

// ---------------------------------------------------------------------------------------------------------------
// small readers shared by the settings

fn integral(value: &Value) -> Option<i64> {
    let n = value.as_number()?;
    n.as_i64().or_else(|| n.as_f64().filter(|f| f.fract() == 0.0 && f.abs() < 9e15).map(|f| f as i64))
}

fn scalar_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Bool(true) => "true".into(),
        Value::Bool(false) => "false".into(),
        other => other.to_string(),
    }
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "a mapping",
    }
}

/// A Python literal (lists, dicts, tuples, quoted strings, numbers, True/False/None), the form an INI `[vars]`
/// section or a quoted YAML string can give structured values such as `openshift_node_groups`; read by the
/// inventory's own literal reader. `None` when the text is not one.
pub fn parse_python_literal(text: &str) -> Option<Value> {
    match crate::inventory::parse_python_literal(text) {
        Ok(Value::String(same)) if same == text => None,
        Ok(value) => Some(value),
        Err(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn items(s: &Serial) -> Vec<SerialItem> {
        s.items().to_vec()
    }

    #[test]
    fn serial_reads_every_form_operators_write() {
        use SerialItem::*;
        for (text, want) in [
            ("2", vec![Count(2)]),
            ("'2'", vec![Count(2)]),
            ("25%", vec![Percent(25)]),
            ("150%", vec![Percent(150)]),
            ("[1, '20%', -1]", vec![Count(1), Percent(20), Count(-1)]),
            ("[1, \"20%\", -1]", vec![Count(1), Percent(20), Count(-1)]),
            ("1,20%,-1", vec![Count(1), Percent(20), Count(-1)]),
            ("[3]", vec![Count(3)]),
            ("0", vec![Count(0)]),
        ] {
            assert_eq!(items(&Serial::parse(text).unwrap()), want, "{text}");
        }
        for (value, want) in [
            (json!(2), vec![Count(2)]),
            (json!("20%"), vec![Percent(20)]),
            (json!([1, "20%", -1]), vec![Count(1), Percent(20), Count(-1)]),
            (json!(["2", 3]), vec![Count(2), Count(3)]),
        ] {
            assert_eq!(items(&Serial::from_value(&value).unwrap()), want, "{value}");
        }
    }

    #[test]
    fn serial_refuses_nonsense_with_a_hint() {
        for text in ["abc", "-1%", "[]", "[", "1,,2", "2.5", "%", "x%", ""] {
            let err = Serial::parse(text).unwrap_err();
            assert!(err.message.contains("serial"), "{text}: {err}");
            assert!(err.hint.is_some(), "{text}");
        }
        for value in [json!([]), json!(true), json!(2.5), json!({"a": 1}), json!([[1]])] {
            assert!(Serial::from_value(&value).is_err(), "{value}");
        }
    }

    #[test]
    fn forks_are_whole_numbers_from_one() {
        assert_eq!(Forks::parse("5").unwrap().get(), 5);
        assert_eq!(Forks::parse(" '12' ").unwrap().get(), 12);
        assert_eq!(Forks::from_value(&json!(3)).unwrap().get(), 3);
        assert_eq!(Forks::from_value(&json!("4")).unwrap().get(), 4);
        assert_eq!(Forks::default().get(), 50);
        for bad in ["0", "-1", "many", "", "2.5"] {
            assert!(Forks::parse(bad).is_err(), "{bad}");
        }
        for bad in [json!(0), json!(-3), json!(1.5), json!(true), json!(null)] {
            assert!(Forks::from_value(&bad).is_err(), "{bad}");
        }
        assert_eq!(Forks::parse(&Forks::new(9).unwrap().to_string()).unwrap().get(), 9);
    }

    #[test]
    fn serial_prints_back_what_parses_again() {
        for text in ["2", "20%", "[1, \"20%\", -1]", "-1"] {
            let s = Serial::parse(text).unwrap();
            assert_eq!(s.to_string(), text);
            assert_eq!(Serial::parse(&s.to_string()).unwrap(), s);
        }
        assert_eq!(Serial::parse("1,20%,-1").unwrap().to_json(), json!([1, "20%", -1]));
    }

    #[test]
    fn max_fail_percentage_is_liberal_where_ansible_is() {
        for (text, want) in [("30", 30.0), ("30%", 30.0), ("0", 0.0), ("100", 100.0), ("12.5", 12.5), ("'49'", 49.0)] {
            assert_eq!(MaxFailPercentage::parse(text).unwrap().percent(), want, "{text}");
        }
        for text in ["101", "-1", "abc", "", "nan", "inf"] {
            assert!(MaxFailPercentage::parse(text).is_err(), "{text}");
        }
        assert!(MaxFailPercentage::from_value(&json!(101)).is_err());
        assert!(MaxFailPercentage::from_value(&json!(true)).is_err());
        assert_eq!(MaxFailPercentage::from_value(&json!(49)).unwrap().to_string(), "49");
        assert_eq!(MaxFailPercentage::from_value(&json!("12.5%")).unwrap().to_string(), "12.5");
    }

    #[test]
    fn drain_timeout_reads_seconds_and_durations() {
        for (text, want) in
            [("0", 0), ("90", 90), ("90s", 90), ("10m", 600), ("1h30m", 5400), ("1h 30m 5s", 5405), ("2d", 172_800)]
        {
            assert_eq!(DrainTimeout::parse(text).unwrap().seconds(), want, "{text}");
        }
        for text in ["", "abc", "-5", "10x", "m", "1.5h", "99999999999999999999h"] {
            assert!(DrainTimeout::parse(text).is_err(), "{text}");
        }
        assert_eq!(DrainTimeout::from_value(&json!(600)).unwrap().seconds(), 600);
        assert!(DrainTimeout::from_value(&json!(-1)).is_err());
        for secs in [0, 59, 90, 3600, 5405] {
            let d = DrainTimeout::from_secs(secs);
            assert_eq!(DrainTimeout::parse(&d.to_string()).unwrap(), d);
        }
        assert_eq!(DrainTimeout::from_secs(5400).to_string(), "1h30m");
    }

    #[test]
    fn label_selectors_match_like_kubernetes() {
        let labels: BTreeMap<String, String> = [("region", "group1"), ("node-role.kubernetes.io/compute", "true")]
            .map(|(k, v)| (k.into(), v.into()))
            .into();
        for (selector, want) in [
            ("region=group1", true),
            ("region==group1", true),
            ("region!=group1", false),
            ("region=group2", false),
            ("zone!=a", true),
            ("node-role.kubernetes.io/compute=true,region=group1", true),
            ("node-role.kubernetes.io/compute=true,region=group2", false),
            ("region", true),
            ("!region", false),
            ("!zone", true),
            ("region=", false),
        ] {
            assert_eq!(LabelSelector::parse(selector).unwrap().matches(&labels), want, "{selector}");
        }
        for bad in ["", "a=b,", "=b", "a b=c", "-a=b", "a=b c", "env in (a,b)", "Example.com/a=b", &"x".repeat(64)] {
            assert!(LabelSelector::parse(bad).is_err(), "{bad}");
        }
        let s = LabelSelector::parse(" a==b , c!=d ,e, !f").unwrap();
        assert_eq!(s.to_string(), "a=b,c!=d,e,!f");
        assert_eq!(LabelSelector::parse(&s.to_string()).unwrap(), s);
    }

    #[test]
    fn target_versions_compare_by_release() {
        let v = TargetVersion::parse("v1.29.1").unwrap();
        assert_eq!(v, TargetVersion::parse("1.29.1").unwrap());
        assert_eq!(v.to_string(), "v1.29.1");
        assert_eq!(v, TargetVersion::parse("v1.29.1+k3s1").unwrap());
        assert!(v < TargetVersion::parse("1.30.0").unwrap());
        assert!(v > TargetVersion::parse("1.28.15").unwrap());
        assert!(v < TargetVersion::parse("1.29.10").unwrap());
        for bad in ["", "1.29", "v1.x.1", "1.29.1.2", "latest", "v-1.2.3"] {
            assert!(TargetVersion::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn distribution_suffixes_do_not_make_a_node_differ_from_its_target() {
        let target = TargetVersion::parse("1.29.1").unwrap();
        for reported in ["v1.29.1", "1.29.1", "v1.29.1-eks-123", "v1.29.1-gke.1589018", "v1.29.1+k3s1"] {
            assert!(target.is_reported_by(reported), "{reported}");
            assert_eq!(TargetVersion::parse(reported).unwrap().release(), "v1.29.1", "{reported}");
        }
        assert!(TargetVersion::parse("v1.11.0").unwrap().is_reported_by("v1.11.0+d4cacc0"));
        for other in ["v1.29.10", "v1.29.0-eks-1", "v1.30.1+k3s1", "1.29", "garbage", ""] {
            assert!(!target.is_reported_by(other), "{other}");
        }
    }

    #[test]
    fn python_literals_from_ini_vars() {
        let v = parse_python_literal(
            "[{'name': 'node-config-compute', 'labels': ['node-role.kubernetes.io/compute=true', \"a=b\"]}, \
             {'name': 'x', 'labels': [], 'edits': None, 'ok': True, 'n': -2}]",
        )
        .unwrap();
        assert_eq!(v[0]["labels"][1], json!("a=b"));
        assert_eq!(v[1]["edits"], Value::Null);
        assert_eq!(v[1]["n"], json!(-2));
        assert!(parse_python_literal("[1, 2").is_none());
        assert!(parse_python_literal("{'a' 1}").is_none());
        assert!(parse_python_literal(&"[".repeat(1000)).is_none());
    }

    #[test]
    fn labels_come_from_mappings_strings_and_lists() {
        let want: BTreeMap<String, String> = [("a", "b"), ("c", "d")].map(|(k, v)| (k.into(), v.into())).into();
        assert_eq!(labels_from_value(&json!({"a": "b", "c": "d"})).unwrap(), want);
        assert_eq!(labels_from_value(&json!("a=b, c=d")).unwrap(), want);
        assert_eq!(labels_from_value(&json!(["a=b", "c=d"])).unwrap(), want);
        assert_eq!(labels_from_value(&json!("{'a': 'b', 'c': 'd'}")).unwrap(), want);
        assert!(labels_from_value(&json!("nolabel")).is_none());
    }
}
