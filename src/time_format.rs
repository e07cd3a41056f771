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
