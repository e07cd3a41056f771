//! Version comparison: `version` with loose, strict and semver.

use std::cmp::Ordering;

use minijinja::Error;
use minijinja::value::{Kwargs, Value};

use super::values::*;
use crate::tasks::template::pyfmt::py_str;

#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Part {
    Num(u128),
    Text(String),
}

/// distutils' LooseVersion: numbers and letter runs, everything else kept as text between them.
pub(super) fn loose_version(text: &str) -> Vec<Part> {
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

pub(super) fn compare_loose(a: &str, b: &str) -> Result<Ordering, String> {
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
pub(super) type StrictVersion = (u64, u64, u64, Option<(char, u64)>);

pub(super) fn strict_version(text: &str) -> Result<StrictVersion, String> {
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

pub(super) fn compare_strict(a: &str, b: &str) -> Result<Ordering, String> {
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
pub(super) fn compare_semver(a: &str, b: &str) -> Result<Ordering, String> {
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
pub(crate) fn version_compare(
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
