//! `max-fail-percentage`: how many failed hosts of a batch stop the run.

use std::fmt;

use serde_json::Value;

use crate::ansible_compat::unquote;
use crate::error::{Error, Result};

/// The share of a batch that may fail before the run stops; it must be *exceeded*. 0..=100. Fractions are allowed,
/// as Ansible's `percent` field type reads a float.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MaxFailPercentage(f64);

pub(super) const MAX_FAIL_HINT: &str = "write a percentage from 0 to 100, e.g. 0 (stop on any failure) or 25";

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
