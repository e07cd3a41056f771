//! How long and how wide: the cluster lock's TTL, the drain timeout, `forks`.

use std::fmt;

use serde_json::Value;

use super::readers::*;
use crate::ansible_compat::unquote;
use crate::error::{Error, Result};

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

/// `upgrade_pause_timeout` (README "Pause from anywhere"): how long a paused run waits at its safe point before it
/// stops there.
pub const PAUSE_TIMEOUT: &str = "upgrade_pause_timeout";

/// The default: a pause forgotten overnight stops the run at its safe point (nothing cordoned) the next day rather
/// than holding the cluster lock for ever.
pub const DEFAULT_PAUSE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(24 * 3600);

/// `upgrade_pause_timeout` as written (empty: the default, 24h): seconds or a duration ("2h"); 0 waits for ever
/// (`None`), as `kubectl drain --timeout=0s` does.
pub fn pause_timeout(text: &str) -> Result<Option<std::time::Duration>> {
    let text = unquote(text.trim());
    if text.is_empty() {
        return Ok(Some(DEFAULT_PAUSE_TIMEOUT));
    }
    let seconds = DrainTimeout::parse(text)
        .map_err(|_| {
            Error::input(format!("{PAUSE_TIMEOUT} `{text}` is not a duration"))
                .hint("write seconds (3600) or a duration such as \"30m\" or \"24h\" (the default); 0 waits for ever")
        })?
        .seconds();
    Ok((seconds > 0).then(|| std::time::Duration::from_secs(seconds)))
}

/// Checks the first master's `upgrade_pause_timeout` as written, at its file and line (exit 2): `check`, `--plan`
/// and the run refuse it before anything connects; a templated value is the run's to render and check.
pub fn check_pause_timeout(first_master_vars: Option<&crate::inventory::Vars>) -> Result<()> {
    let Some(var) = first_master_vars.and_then(|v| v.get(PAUSE_TIMEOUT)) else { return Ok(()) };
    let text = match &var.value {
        Value::String(s) => s.clone(),
        Value::Null => return Ok(()),
        other => other.to_string(),
    };
    if text.contains("{{") || text.contains("{%") {
        return Ok(());
    }
    pause_timeout(&text).map(|_| ()).map_err(|e| super::located(e, PAUSE_TIMEOUT, &var.origin))
}

// drain-timeout

/// How long a node's drain may take, in seconds; 0 waits for ever.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DrainTimeout(u64);

pub(super) const DRAIN_HINT: &str =
    "write seconds (90) or a duration such as \"90s\", \"10m\" or \"1h30m\"; 0 waits for ever";

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

// forks

/// How many hosts the run reads or checks at once where it goes over every host (preflight, the etcd and
/// configuration backups, verify, `plan --live`): Ansible's `forks`. At least 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Forks(usize);

pub(super) const FORKS_HINT: &str = "write how many hosts may run at once, 1 or more (the default is 50)";

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
