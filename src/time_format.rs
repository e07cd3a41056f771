//! Dates as the journal, the JSON events and file names write them, in UTC, without a date crate.

use std::time::{SystemTime, UNIX_EPOCH};

/// `2026-11-22T00:27:42Z`
pub(crate) fn utc_timestamp(t: SystemTime) -> String {
    // Every event and log line is stamped, thousands a second in a wide batch: the text of the current second is
    // made once per thread.
    thread_local!(static LAST: std::cell::RefCell<(u64, String)> = const { std::cell::RefCell::new((0, String::new())) });
    let secs = t.duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    LAST.with(|last| {
        let mut last = last.borrow_mut();
        if last.0 != secs || last.1.is_empty() {
            let (y, mo, d, h, mi, s) = civil(t);
            *last = (secs, format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}Z"));
        }
        last.1.clone()
    })
}

/// `20261122T002742Z`: for file and directory names.
pub(crate) fn compact_timestamp(t: SystemTime) -> String {
    let (y, mo, d, h, mi, s) = civil(t);
    format!("{y:04}{mo:02}{d:02}T{h:02}{mi:02}{s:02}Z")
}

/// A time as UTC (year, month, day, hour, minute, second): Howard Hinnant's days-to-civil, to avoid a date crate.
pub(crate) fn civil(t: SystemTime) -> (i64, u32, u32, u32, u32, u32) {
    let secs = t.duration_since(UNIX_EPOCH).map(|d| d.as_secs() as i64).unwrap_or(0);
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d, (rem / 3600) as u32, (rem % 3600 / 60) as u32, (rem % 60) as u32)
}

/// Reads `YYYY-MM-DDTHH:MM:SS[.fraction]Z` (RFC 3339 in UTC, as client-go, the cluster lock and the journal write it: milliseconds since the epoch).
pub(crate) fn parse_utc_millis(text: &str) -> Option<u64> {
    let text = text.trim().strip_suffix('Z')?;
    let (date, time) = text.split_once('T')?;
    let mut d = date.split('-').map(|p| p.parse::<i64>().ok());
    let (y, m, day) = (d.next()??, d.next()??, d.next()??);
    let (clock, fraction) = time.split_once('.').unwrap_or((time, ""));
    let mut c = clock.split(':').map(|p| p.parse::<i64>().ok());
    let (h, mi, s) = (c.next()??, c.next()??, c.next()??);
    if !(1..=12).contains(&m) || !(1..=31).contains(&day) || h > 23 || mi > 59 || s > 60 {
        return None;
    }
    let ms = if fraction.is_empty() {
        0
    } else {
        let digits: String = fraction.chars().chain("000".chars()).take(3).collect();
        digits.parse::<i64>().ok()?
    };
    let secs = days_from_civil(y, m, day) * 86_400 + h * 3600 + mi * 60 + s;
    u64::try_from(secs * 1000 + ms).ok()
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's days_from_civil).
pub(crate) fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// `12s`, `4m05s`, `2h10m`.
pub(crate) fn short_duration(d: std::time::Duration) -> String {
    let s = d.as_secs();
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m{:02}s", s / 60, s % 60),
        _ => format!("{}h{:02}m", s / 3600, (s % 3600) / 60),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn timestamps_are_utc() {
        let t = UNIX_EPOCH + Duration::from_secs(1_795_307_262);
        assert_eq!(utc_timestamp(t), "2026-11-22T00:27:42Z");
        // The text of a second is kept per thread: another second, and the epoch itself, are not mistaken for it.
        assert_eq!(utc_timestamp(t + Duration::from_millis(1500)), "2026-11-22T00:27:43Z");
        assert_eq!(utc_timestamp(UNIX_EPOCH), "1970-01-01T00:00:00Z");
        assert_eq!(utc_timestamp(t), "2026-11-22T00:27:42Z");
        assert_eq!(compact_timestamp(UNIX_EPOCH), "19700101T000000Z");
        assert_eq!(utc_timestamp(UNIX_EPOCH + Duration::from_secs(951_782_400)), "2000-02-29T00:00:00Z");
    }
}
