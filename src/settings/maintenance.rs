//! Maintenance windows (README "Maintenance windows"), as GKE's and AKS's: `upgrade_maintenance_window`, a recurring
//! window (`"Sat,Sun 01:00-05:00 Europe/Berlin"`: days, start-end, an IANA time zone, UTC when left out; an end at
//! or before the start runs past midnight into the next day), and `upgrade_maintenance_exclusions`, date ranges in
//! the window's time zone on which no window opens (`"2026-12-20..2027-01-02"`, or one date). Time zones and
//! daylight-saving changes are jiff's (the system's tz database), never hand-written offsets.

use std::time::Duration;

use jiff::civil::{Date, Time, Weekday};
use jiff::tz::TimeZone;
use jiff::{Timestamp, ZonedDateTime};
use serde_json::Value;

use crate::error::{Error, Result};
use crate::inventory::Vars;
use crate::settings::{DrainTimeout, located};

pub const MAINTENANCE_WINDOW: &str = "upgrade_maintenance_window";
pub const MAINTENANCE_EXCLUSIONS: &str = "upgrade_maintenance_exclusions";
pub const MAINTENANCE_MIN_REMAINING: &str = "upgrade_maintenance_min_remaining";

const DAYS: [(&str, Weekday); 7] = [
    ("mon", Weekday::Monday),
    ("tue", Weekday::Tuesday),
    ("wed", Weekday::Wednesday),
    ("thu", Weekday::Thursday),
    ("fri", Weekday::Friday),
    ("sat", Weekday::Saturday),
    ("sun", Weekday::Sunday),
];

#[derive(Debug, Clone)]
pub struct MaintenanceWindow {
    /// As written, for messages.
    pub text: String,
    days: Vec<Weekday>,
    start: Time,
    end: Time,
    zone: TimeZone,
    /// Inclusive date ranges on which no window opens.
    exclusions: Vec<(Date, Date)>,
}

fn day(word: &str) -> Option<Weekday> {
    let word = word.trim().to_ascii_lowercase();
    DAYS.iter().find(|(name, _)| word.len() >= 3 && name.starts_with(&word[..3]) && word.starts_with(name)).map(|d| d.1)
}

fn days_of(text: &str) -> std::result::Result<Vec<Weekday>, String> {
    let mut days = Vec::new();
    for part in text.split(',') {
        let bad = || format!("`{part}` is not a day (Mon, Tue, ... Sun) or a range of days (Mon-Fri)");
        match part.split_once('-') {
            Some((from, to)) => {
                let (mut d, to) = (day(from).ok_or_else(bad)?, day(to).ok_or_else(bad)?);
                loop {
                    days.push(d);
                    if d == to {
                        break;
                    }
                    d = d.next();
                }
            }
            None => days.push(day(part).ok_or_else(bad)?),
        }
    }
    Ok(days)
}

fn time_of(text: &str) -> std::result::Result<Time, String> {
    let (h, m) = text.split_once(':').ok_or_else(|| format!("`{text}` is not a time of day (HH:MM)"))?;
    let (h, m) = (h.parse::<i8>(), m.parse::<i8>());
    match (h, m) {
        (Ok(24), Ok(0)) => Ok(Time::MIN),
        (Ok(h), Ok(m)) => Time::new(h, m, 0, 0).map_err(|_| format!("`{text}` is not a time of day (HH:MM)")),
        _ => Err(format!("`{text}` is not a time of day (HH:MM)")),
    }
}

fn exclusion(text: &str) -> std::result::Result<(Date, Date), String> {
    let date = |t: &str| t.trim().parse::<Date>().map_err(|_| format!("`{}` is not a date (YYYY-MM-DD)", t.trim()));
    let (from, to) = match text.split_once("..") {
        Some((from, to)) => (date(from)?, date(to)?),
        None => (date(text)?, date(text)?),
    };
    if to < from {
        return Err(format!("the exclusion `{text}` ends before it starts"));
    }
    Ok((from, to))
}

impl MaintenanceWindow {
    /// `"Sat,Sun 01:00-05:00 Europe/Berlin"` and the exclusions; the error says what is wrong.
    pub fn parse(text: &str, exclusions: &[String]) -> std::result::Result<MaintenanceWindow, String> {
        let words: Vec<&str> = text.split_whitespace().collect();
        let (days, span, zone) = match words.as_slice() {
            [days, span] => (*days, *span, "UTC"),
            [days, span, zone] => (*days, *span, *zone),
            _ => return Err(format!("`{text}` is not DAYS START-END [TIME ZONE]")),
        };
        let (start, end) = span.split_once('-').ok_or_else(|| format!("`{span}` is not START-END (01:00-05:00)"))?;
        let zone = TimeZone::get(zone).map_err(|_| format!("`{zone}` is not a time zone the system knows"))?;
        let exclusions = exclusions.iter().map(|e| exclusion(e)).collect::<std::result::Result<_, _>>()?;
        Ok(MaintenanceWindow {
            text: text.to_string(),
            days: days_of(days)?,
            start: time_of(start)?,
            end: time_of(end)?,
            zone,
            exclusions,
        })
    }

    /// The window that opens on `date` (local), as (opens, closes); `None` on a day without one.
    fn on(&self, date: Date) -> Option<(Timestamp, Timestamp)> {
        if !self.days.contains(&date.weekday()) || self.exclusions.iter().any(|(from, to)| *from <= date && date <= *to)
        {
            return None;
        }
        let opens = date.to_datetime(self.start).to_zoned_datetime(self.zone.clone()).ok()?;
        let end_day = if self.end <= self.start { date.tomorrow().ok()? } else { date };
        let closes = end_day.to_datetime(self.end).to_zoned_datetime(self.zone.clone()).ok()?;
        Some((opens.timestamp(), closes.timestamp()))
    }

    fn today(&self, now: Timestamp) -> Date {
        now.to_zoned_datetime(self.zone.clone()).date()
    }

    /// When the window open at `now` closes; `None` when none is open.
    pub fn open_until(&self, now: Timestamp) -> Option<Timestamp> {
        let today = self.today(now);
        [today.yesterday().ok(), Some(today)]
            .into_iter()
            .flatten()
            .filter_map(|d| self.on(d))
            .find(|(opens, closes)| *opens <= now && now < *closes)
            .map(|(_, closes)| closes)
    }

    /// When the next window opens after `now` (within a year and the exclusions); `None` when none does.
    pub fn next_opening(&self, now: Timestamp) -> Option<Timestamp> {
        let mut date = self.today(now).yesterday().ok()?;
        for _ in 0..800 {
            if let Some((opens, closes)) = self.on(date) {
                if opens > now || (opens <= now && now < closes) {
                    return Some(opens.max(now));
                }
            }
            date = date.tomorrow().ok()?;
        }
        None
    }

    /// A moment as the operator reads it, in the window's time zone (`Sat 2026-11-28 01:00 CET`).
    pub fn local(&self, at: Timestamp) -> String {
        let zoned: ZonedDateTime = at.to_zoned_datetime(self.zone.clone());
        zoned.strftime("%a %Y-%m-%d %H:%M %Z").to_string()
    }
}

/// How long from `now` until `later` (zero when past).
pub fn until(now: Timestamp, later: Timestamp) -> Duration {
    Duration::try_from(later.duration_since(now)).unwrap_or(Duration::ZERO)
}

/// The exclusions as written: a list of strings, or one string of comma-separated ranges.
pub fn exclusion_texts(value: &Value) -> Vec<String> {
    match value {
        Value::Array(items) => items.iter().map(|i| i.as_str().map_or_else(|| i.to_string(), str::to_string)).collect(),
        Value::String(s) if !s.trim().is_empty() => s.split(',').map(|p| p.trim().to_string()).collect(),
        _ => Vec::new(),
    }
}

/// `upgrade_maintenance_min_remaining`: seconds or a duration, 0 when left out.
pub fn min_remaining(text: &str) -> std::result::Result<Duration, String> {
    if text.trim().is_empty() {
        return Ok(Duration::ZERO);
    }
    DrainTimeout::parse(text.trim())
        .map(|d| Duration::from_secs(d.seconds()))
        .map_err(|_| format!("`{}` is not a duration (seconds, or \"30m\", \"1h\")", text.trim()))
}

fn templated(value: &Value) -> bool {
    value.to_string().contains("{{") || value.to_string().contains("{%")
}

/// Checks the first master's values as written, at their file and line (exit 2); templated values are the run's.
pub fn check_maintenance_settings(first_master_vars: Option<&Vars>) -> Result<()> {
    let Some(vars) = first_master_vars else { return Ok(()) };
    let hint = "write the window as DAYS START-END TIME-ZONE, e.g. \"Sat,Sun 01:00-05:00 Europe/Berlin\", and the \
                exclusions as dates or ranges, e.g. [\"2026-12-20..2027-01-02\"]";
    let exclusions = vars.get(MAINTENANCE_EXCLUSIONS).filter(|v| !templated(&v.value));
    if let Some(window) = vars.get(MAINTENANCE_WINDOW).filter(|v| !templated(&v.value)) {
        let text = window.value.as_str().unwrap_or_default();
        let excluded = exclusions.map(|e| exclusion_texts(&e.value)).unwrap_or_default();
        if let Err(why) = MaintenanceWindow::parse(text, &[]) {
            return Err(located(
                Error::input(format!("{MAINTENANCE_WINDOW}: {why}")).hint(hint),
                MAINTENANCE_WINDOW,
                &window.origin,
            ));
        }
        if let (Some(e), Err(why)) = (exclusions, MaintenanceWindow::parse(text, &excluded)) {
            return Err(located(
                Error::input(format!("{MAINTENANCE_EXCLUSIONS}: {why}")).hint(hint),
                MAINTENANCE_EXCLUSIONS,
                &e.origin,
            ));
        }
    }
    if let Some(var) = vars.get(MAINTENANCE_MIN_REMAINING).filter(|v| !templated(&v.value)) {
        let text = var.value.as_str().map_or_else(|| var.value.to_string(), str::to_string);
        min_remaining(&text).map_err(|why| {
            located(
                Error::input(format!("{MAINTENANCE_MIN_REMAINING}: {why}")).hint(hint),
                MAINTENANCE_MIN_REMAINING,
                &var.origin,
            )
        })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> Timestamp {
        text.parse().unwrap()
    }

    #[test]
    fn a_weekend_window_in_berlin_is_open_in_berlin_time_across_daylight_saving() {
        let w = MaintenanceWindow::parse("Sat,Sun 01:00-05:00 Europe/Berlin", &[]).unwrap();
        // Sat 2026-11-28 01:30 in Berlin (CET, UTC+1) is 00:30 UTC.
        assert_eq!(w.open_until(at("2026-11-28T00:30:00Z")), Some(at("2026-11-28T04:00:00Z")));
        assert_eq!(w.open_until(at("2026-11-28T04:00:00Z")), None, "closed at 05:00 Berlin");
        assert_eq!(w.open_until(at("2026-11-27T23:30:00Z")), None, "Sat 00:30 Berlin: not yet");
        // In summer (CEST, UTC+2) the same local hours are an hour earlier in UTC.
        assert_eq!(w.open_until(at("2026-06-27T23:30:00Z")), Some(at("2026-06-28T03:00:00Z")));
        // Wednesday: the next window is Saturday 01:00 Berlin.
        assert_eq!(w.next_opening(at("2026-11-25T12:00:00Z")), Some(at("2026-11-28T00:00:00Z")));
        assert_eq!(w.local(at("2026-11-28T00:00:00Z")), "Sat 2026-11-28 01:00 CET");
    }

    #[test]
    fn a_window_past_midnight_and_exclusions_and_ranges_of_days() {
        let w = MaintenanceWindow::parse("Mon-Fri 22:00-02:00", &["2026-11-25".into()]).unwrap();
        // Tuesday 23:00 UTC: open until Wednesday 02:00.
        assert_eq!(w.open_until(at("2026-11-24T23:00:00Z")), Some(at("2026-11-25T02:00:00Z")));
        // Wednesday 01:00: Tuesday's window still (it opened on Tuesday, not excluded).
        assert_eq!(w.open_until(at("2026-11-25T01:00:00Z")), Some(at("2026-11-25T02:00:00Z")));
        // Wednesday 23:00: excluded; the next opens Thursday 22:00.
        assert_eq!(w.open_until(at("2026-11-25T23:00:00Z")), None);
        assert_eq!(w.next_opening(at("2026-11-25T23:00:00Z")), Some(at("2026-11-26T22:00:00Z")));
        let holidays = MaintenanceWindow::parse("Sat 01:00-05:00", &["2026-11-01..2026-12-31".into()]).unwrap();
        assert_eq!(holidays.next_opening(at("2026-11-25T00:00:00Z")), Some(at("2027-01-02T01:00:00Z")));
    }

    #[test]
    fn bad_settings_are_input_errors_at_their_line_and_templated_ones_are_the_runs() {
        use crate::error::Location;
        use crate::inventory::{Origin, Var};
        let vars = |pairs: &[(&str, Value)]| -> Vars {
            pairs
                .iter()
                .map(|(k, v)| {
                    let origin = Origin::Inventory(Location::new("hosts.yml", 7, 5));
                    (k.to_string(), Var { value: v.clone(), origin })
                })
                .collect()
        };
        for (name, value, why) in [
            (MAINTENANCE_WINDOW, Value::from("Sat 01:00-05:00 Mars/Olympus"), "is not a time zone"),
            (MAINTENANCE_EXCLUSIONS, serde_json::json!(["2026-13-01"]), "is not a date"),
            (MAINTENANCE_MIN_REMAINING, Value::from("soon"), "is not a duration"),
        ] {
            let mut pairs = vec![(name, value)];
            if name != MAINTENANCE_WINDOW {
                pairs.push((MAINTENANCE_WINDOW, Value::from("Sat 01:00-05:00")));
            }
            let err = check_maintenance_settings(Some(&vars(&pairs))).unwrap_err();
            assert_eq!(err.exit_code(), 2, "{name}");
            let said = err.to_string();
            assert!(said.contains(name) && said.contains(why) && said.contains("hosts.yml:7"), "{said}");
        }
        let templated = vars(&[(MAINTENANCE_WINDOW, Value::from("{{ window }}"))]);
        assert!(check_maintenance_settings(Some(&templated)).is_ok());
    }

    #[test]
    fn what_is_not_a_window_says_why() {
        for (bad, why) in [
            ("Sat 01:00", "is not START-END"),
            ("Sat", "is not DAYS START-END"),
            ("Caturday 01:00-05:00", "`Caturday` is not a day"),
            ("Sat 1am-5am", "is not a time of day"),
            ("Sat 01:00-05:00 Mars/Olympus", "`Mars/Olympus` is not a time zone"),
        ] {
            let err = MaintenanceWindow::parse(bad, &[]).unwrap_err();
            assert!(err.contains(why), "{bad}: {err}");
        }
        let err = MaintenanceWindow::parse("Sat 01:00-05:00", &["2026-12-31..2026-12-01".into()]).unwrap_err();
        assert!(err.contains("ends before it starts"), "{err}");
        assert!(min_remaining("soon").is_err());
        assert_eq!(min_remaining("30m"), Ok(Duration::from_secs(1800)));
    }
}
