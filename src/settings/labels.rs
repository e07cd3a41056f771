//! The label selector that picks the nodes to upgrade, and the nodes' labels as the inventory gives them.

use std::collections::BTreeMap;
use std::fmt;

use serde_json::Value;

use super::readers::*;
use crate::ansible_compat::unquote;
use crate::error::{Error, Result};

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

pub(super) const LABEL_HINT: &str = "write an equality selector such as \"region=group1\" or \"a=b,c!=d\"";

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
pub(super) fn check_label_name(name: &str) -> std::result::Result<(), &'static str> {
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

pub(super) fn check_label_key(key: &str) -> std::result::Result<(), &'static str> {
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

pub(super) fn check_label_value(value: &str) -> std::result::Result<(), &'static str> {
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
