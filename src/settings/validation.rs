//! The cluster validation between batches and between masters, as kOps validates between nodes
//! (`--validate-count`, `--validation-timeout`): `upgrade_validate_count` valid reads in a row (default 1),
//! `upgrade_validation_interval` apart (default 10s), within `upgrade_validation_timeout` (default 15m; 0 turns the
//! validation off); then `upgrade_batch_soak_seconds` (default 0) of watching. Read on the first master, as the other
//! run-wide settings.

use std::time::Duration;

use serde_json::Value;

use super::limits::DrainTimeout;
use super::resolve::located;
use crate::error::{Error, Result};
use crate::inventory::Vars;

pub const VALIDATE_COUNT: &str = "upgrade_validate_count";
pub const VALIDATION_INTERVAL: &str = "upgrade_validation_interval";
pub const VALIDATION_TIMEOUT: &str = "upgrade_validation_timeout";
pub const BATCH_SOAK: &str = "upgrade_batch_soak_seconds";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ValidationSettings {
    /// Valid reads in a row that make the cluster valid, 1 or more.
    pub count: u32,
    /// Between two reads, at least a second.
    pub interval: Duration,
    /// `None`: validation is off (`upgrade_validation_timeout: 0`).
    pub timeout: Option<Duration>,
    /// How long a batch that validated is watched before the next starts (`upgrade_batch_soak_seconds`, GKE's
    /// `batchSoakDuration`, AKS's `nodeSoakDurationInMinutes`); zero: no soak.
    pub soak: Duration,
}

impl Default for ValidationSettings {
    fn default() -> Self {
        ValidationSettings {
            count: 1,
            interval: Duration::from_secs(10),
            timeout: Some(Duration::from_secs(15 * 60)),
            soak: Duration::ZERO,
        }
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

/// The settings from their texts (`None` or empty: the default). Errors name the variable and say what to write.
pub fn validation_settings(
    count: Option<&str>,
    interval: Option<&str>,
    timeout: Option<&str>,
    soak: Option<&str>,
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
    if let Some(text) = given(soak) {
        settings.soak = duration(BATCH_SOAK, &text)?;
        // The soak watches what the validation reads, from the standard it took before the run.
        if settings.timeout.is_none() && !settings.soak.is_zero() {
            return Err(Error::input(format!("{BATCH_SOAK} is {text} but {VALIDATION_TIMEOUT} is 0 (validation off)"))
                .hint(
                    "the soak watches what the validation between batches reads: give upgrade_validation_timeout a \
                       duration, or set upgrade_batch_soak_seconds: 0",
                ));
        }
    }
    Ok(settings)
}

/// Checks the first master's values as written, at their file and line (`check`, `--plan` and the run refuse a bad
/// one before anything connects); templated values are the run's to render and check.
pub fn check_validation_settings(first_master_vars: Option<&Vars>) -> Result<()> {
    let Some(vars) = first_master_vars else { return Ok(()) };
    let written = |name: &str| vars.get(name).and_then(|var| text_of(&var.value));
    for name in [VALIDATE_COUNT, VALIDATION_INTERVAL, VALIDATION_TIMEOUT, BATCH_SOAK] {
        let Some(var) = vars.get(name) else { continue };
        let Some(text) = text_of(&var.value) else { continue };
        let one = |n: &str| (n == name).then_some(text.as_str());
        // The soak is checked with the timeout it depends on.
        let timeout = if name == BATCH_SOAK { written(VALIDATION_TIMEOUT) } else { None };
        let timeout = timeout.as_deref().or(one(VALIDATION_TIMEOUT));
        validation_settings(one(VALIDATE_COUNT), one(VALIDATION_INTERVAL), timeout, one(BATCH_SOAK))
            .map_err(|e| located(e, name, &var.origin))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_defaults_are_one_read_ten_seconds_apart_within_fifteen_minutes() {
        assert_eq!(validation_settings(None, None, None, None).unwrap(), ValidationSettings::default());
        let d = ValidationSettings::default();
        assert_eq!((d.count, d.interval.as_secs(), d.timeout.map(|t| t.as_secs())), (1, 10, Some(900)));
    }

    #[test]
    fn durations_and_counts_are_read_and_zero_timeout_turns_validation_off() {
        let s = validation_settings(Some("2"), Some("5s"), Some("10m"), Some("30")).unwrap();
        assert_eq!((s.count, s.interval.as_secs(), s.timeout.map(|t| t.as_secs())), (2, 5, Some(600)));
        assert_eq!(s.soak.as_secs(), 30);
        assert_eq!(validation_settings(None, None, Some("0"), None).unwrap().timeout, None);
    }

    #[test]
    fn bad_values_are_input_errors_naming_the_variable() {
        for (count, interval, timeout, soak, name) in [
            (Some("0"), None, None, None, VALIDATE_COUNT),
            (Some("two"), None, None, None, VALIDATE_COUNT),
            (None, Some("0"), None, None, VALIDATION_INTERVAL),
            (None, Some("soon"), None, None, VALIDATION_INTERVAL),
            (None, None, Some("-1"), None, VALIDATION_TIMEOUT),
            (None, None, None, Some("long"), BATCH_SOAK),
            // A soak without the validation it watches with.
            (None, None, Some("0"), Some("60"), BATCH_SOAK),
        ] {
            let err = validation_settings(count, interval, timeout, soak).unwrap_err();
            assert_eq!(err.exit_code(), 2);
            assert!(err.to_string().contains(name), "{err}");
        }
    }
}
