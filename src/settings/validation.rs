//! The cluster validation between batches and between masters, as kOps validates between nodes
//! (`--validate-count`, `--validation-timeout`): `upgrade_validate_count` valid reads in a row (default 1),
//! `upgrade_validation_interval` apart (default 10s), within `upgrade_validation_timeout` (default 15m; 0 turns the
//! validation off). Read on the first master, as the other run-wide settings.

use std::time::Duration;

use serde_json::Value;

use super::limits::DrainTimeout;
use super::resolve::located;
use crate::error::{Error, Result};
use crate::inventory::Vars;

pub const VALIDATE_COUNT: &str = "upgrade_validate_count";
pub const VALIDATION_INTERVAL: &str = "upgrade_validation_interval";
pub const VALIDATION_TIMEOUT: &str = "upgrade_validation_timeout";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ValidationSettings {
    /// Valid reads in a row that make the cluster valid, 1 or more.
    pub count: u32,
    /// Between two reads, at least a second.
    pub interval: Duration,
    /// `None`: validation is off (`upgrade_validation_timeout: 0`).
    pub timeout: Option<Duration>,
}

impl Default for ValidationSettings {
    fn default() -> Self {
        ValidationSettings { count: 1, interval: Duration::from_secs(10), timeout: Some(Duration::from_secs(15 * 60)) }
    }
}

/// A value as text; `None` for a templated one (the run reads it rendered) or an empty one (the default).
fn text_of(value: &Value) -> Option<String> {
    let text = match value {
        Value::String(s) => s.trim().to_string(),
        Value::Number(n) => n.to_string(),
        Value::Null => return None,
        other => other.to_string(),
    };
    (!text.is_empty() && !text.contains("{{") && !text.contains("{%")).then_some(text)
}

/// The three settings from their texts (`None` or empty: the default). Errors name the variable and say what to write.
pub fn validation_settings(
    count: Option<&str>,
    interval: Option<&str>,
    timeout: Option<&str>,
) -> Result<ValidationSettings> {
    let mut settings = ValidationSettings::default();
    let given = |t: Option<&str>| t.map(str::trim).filter(|t| !t.is_empty()).map(str::to_string);
    if let Some(text) = given(count) {
        settings.count =
            crate::ansible_compat::unquote(&text).parse::<u32>().ok().filter(|n| *n >= 1).ok_or_else(|| {
                Error::input(format!("{VALIDATE_COUNT} `{text}` is not a whole number of 1 or more"))
                    .hint("write how many valid reads in a row make the cluster valid, e.g. 2 (the default is 1)")
            })?;
    }
    let duration = |name: &str, text: &str| {
        DrainTimeout::parse(text).map(|d| Duration::from_secs(d.seconds())).map_err(|_| {
            Error::input(format!("{name} `{text}` is not a duration"))
                .hint("write seconds (30) or a duration such as \"10s\" or \"15m\"")
        })
    };
    if let Some(text) = given(interval) {
        let interval = duration(VALIDATION_INTERVAL, &text)?;
        if interval.is_zero() {
            return Err(Error::input(format!("{VALIDATION_INTERVAL} is 0")).hint(
                "write at least one second, e.g. \"10s\"; to turn validation off set upgrade_validation_timeout: 0",
            ));
        }
        settings.interval = interval;
    }
    if let Some(text) = given(timeout) {
        let timeout = duration(VALIDATION_TIMEOUT, &text)?;
        settings.timeout = (!timeout.is_zero()).then_some(timeout);
    }
    Ok(settings)
}

/// Checks the first master's values as written, at their file and line (`check`, `--plan` and the run refuse a bad
/// one before anything connects); templated values are the run's to render and check.
pub fn check_validation_settings(first_master_vars: Option<&Vars>) -> Result<()> {
    let Some(vars) = first_master_vars else { return Ok(()) };
    for name in [VALIDATE_COUNT, VALIDATION_INTERVAL, VALIDATION_TIMEOUT] {
        let Some(var) = vars.get(name) else { continue };
        let Some(text) = text_of(&var.value) else { continue };
        let one = |n: &str| (n == name).then_some(text.as_str());
        validation_settings(one(VALIDATE_COUNT), one(VALIDATION_INTERVAL), one(VALIDATION_TIMEOUT))
            .map_err(|e| located(e, name, &var.origin))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_defaults_are_one_read_ten_seconds_apart_within_fifteen_minutes() {
        assert_eq!(validation_settings(None, None, None).unwrap(), ValidationSettings::default());
        let d = ValidationSettings::default();
        assert_eq!((d.count, d.interval.as_secs(), d.timeout.map(|t| t.as_secs())), (1, 10, Some(900)));
    }

    #[test]
    fn durations_and_counts_are_read_and_zero_timeout_turns_validation_off() {
        let s = validation_settings(Some("2"), Some("5s"), Some("10m")).unwrap();
        assert_eq!((s.count, s.interval.as_secs(), s.timeout.map(|t| t.as_secs())), (2, 5, Some(600)));
        assert_eq!(validation_settings(None, None, Some("0")).unwrap().timeout, None);
    }

    #[test]
    fn bad_values_are_input_errors_naming_the_variable() {
        for (count, interval, timeout, name) in [
            (Some("0"), None, None, VALIDATE_COUNT),
            (Some("two"), None, None, VALIDATE_COUNT),
            (None, Some("0"), None, VALIDATION_INTERVAL),
            (None, Some("soon"), None, VALIDATION_INTERVAL),
            (None, None, Some("-1"), VALIDATION_TIMEOUT),
        ] {
            let err = validation_settings(count, interval, timeout).unwrap_err();
            assert_eq!(err.exit_code(), 2);
            assert!(err.to_string().contains(name), "{err}");
        }
    }
}
