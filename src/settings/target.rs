//! The target version: what it is, how it parses and prints, what reports it.

use std::cmp::Ordering;
use std::fmt;

use serde_json::Value;

use crate::ansible_compat::unquote;
use crate::error::{Error, Result};

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

pub(super) const VERSION_HINT: &str = "write the release as major.minor.patch, e.g. v1.29.1 or 1.29.1";

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kubelet_version_with_a_distribution_suffix_is_the_target_and_another_release_is_not() {
        let target = TargetVersion::parse("v1.29.1").expect("target");
        for reported in ["v1.29.1", "1.29.1", "v1.29.1-eks-123", "v1.29.1-gke.1589018", "v1.29.1+k3s1"] {
            assert!(target.is_reported_by(reported), "{reported} is v1.29.1");
        }
        for reported in ["v1.29.0", "v1.29.10", "v1.28.1-eks-123", "v1.29", "", "unknown"] {
            assert!(!target.is_reported_by(reported), "{reported} is not v1.29.1");
        }
        let suffixed = TargetVersion::parse("v1.29.1+k3s1").expect("suffixed target");
        assert!(suffixed.is_reported_by("v1.29.1"), "the suffix does not take part in the comparison");
        assert_eq!(suffixed.release(), "v1.29.1");
        assert_eq!(suffixed.to_string(), "v1.29.1+k3s1");
    }
}
