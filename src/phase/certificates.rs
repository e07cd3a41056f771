//! The certificate expiry check of preflight, every flavour: each host reads its certificates' end dates through the
//! flavour's `certificate_expiry.yml` (openssl on the files OpenShift 3.11 keeps; `kubeadm certs check-expiration` on
//! kubeadm masters), and the run stops before anything moves when one expires within the warning window, as
//! openshift-ansible's upgrade does (unless `upgrade_certificate_expiry_fail_on_warn: false`).

use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::Value;

use super::run::UpgradeRun;
use crate::error::{Error, Result};
use crate::redact::escapes::strip_terminal_escapes;
use crate::time_format::days_from_civil;
use crate::vocabulary::Phase;
use crate::vocabulary::Step;

/// One certificate's end date as a host reported it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CertificateDate {
    pub host: String,
    /// The file (openssl) or kubeadm's name for the certificate (`kubeadm: apiserver`).
    pub file: String,
    /// Seconds since the epoch, UTC.
    pub not_after: i64,
}

impl CertificateDate {
    /// `2027-11-23 10:07:59 UTC`.
    pub(crate) fn date(&self) -> String {
        let at = UNIX_EPOCH + std::time::Duration::from_secs(self.not_after.max(0) as u64);
        let (y, mo, d, h, mi, s) = crate::time_format::civil(at);
        format!("{y:04}-{mo:02}-{d:02} {h:02}:{mi:02}:{s:02} UTC")
    }
}

/// A certificate whose end date could not be read: the host, the file (or kubeadm's row) and the text as it was
/// printed (without terminal escapes), for the message that names them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Unreadable {
    pub host: String,
    pub file: String,
    pub text: String,
}

impl std::fmt::Display for Unreadable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}: could not read {:?}", self.host, self.file, self.text)
    }
}

/// What one host's run of `certificate_expiry.yml` says: the end dates read, and what could not be read. A fact
/// that is there (the task ran) but says nothing readable counts as unreadable: a check that cannot read what it
/// checks fails.
pub(crate) fn read_facts(
    host: &str,
    facts: &crate::tasks::host_vars::HostFacts,
) -> (Vec<CertificateDate>, Vec<Unreadable>) {
    let stdout = |fact: &str| {
        let result = facts.get(fact)?;
        // A task skipped by its `when` (a host that is not a kubeadm master) has nothing to read, on purpose.
        if result.get("skipped").and_then(Value::as_bool) == Some(true) {
            return None;
        }
        Some(result.get("stdout").and_then(Value::as_str).unwrap_or_default().to_string())
    };
    let (mut dates, mut bad) = match stdout("upgrade_certificate_files") {
        Some(out) => parse_openssl_listing(host, &out),
        None => (Vec::new(), Vec::new()),
    };
    if let Some(out) = stdout("upgrade_kubeadm_certificates") {
        let (found, unread) = parse_kubeadm_check_expiration(host, &out);
        dates.extend(found);
        bad.extend(unread);
    }
    (dates, bad)
}

pub(crate) async fn check(run: &UpgradeRun) -> Result<()> {
    let hosts = run.plan.hosts.clone();
    let file = run.playbook("certificate_expiry.yml");
    let reads = hosts.iter().map(|host| {
        let file = file.clone();
        async move { (host.clone(), run.run_step(Phase::Preflight, host, Step::Certificates, &file, &[], None).await) }
    });
    let results = super::fan_out(run.forks(), reads).await;
    let mut dates = Vec::new();
    let mut unreadable = Vec::new();
    for (host, result) in results {
        let facts = result.map_err(|f| {
            Error::hosts_failed(format!("cannot read the certificates of {host}: {}", f.reason)).hint(
                "check upgrade_openssl / upgrade_kubeadm on the host, or the certificate file variables \
                 (upgrade_certificate_expiry_*_files)",
            )
        })?;
        let (found, bad) = read_facts(&host, &facts);
        dates.extend(found);
        unreadable.extend(bad);
    }
    let expiry = &run.plan.certificate_expiry;
    let warn_unreadable = expiry.unreadable.value == crate::settings::UnreadableExpiry::Warn;
    if warn_unreadable {
        for u in &unreadable {
            run.notice(
                Some(&u.host),
                format!("certificate expiry not read (upgrade_certificate_expiry_unreadable: warn): {u}"),
            );
        }
    }
    let now = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs() as i64).unwrap_or(0);
    let window = expiry.warning_days.value as i64 * 86_400;
    let mut expiring: Vec<&CertificateDate> = dates.iter().filter(|c| c.not_after - now < window).collect();
    expiring.sort_by_key(|c| c.not_after);
    let not_read = (!warn_unreadable && !unreadable.is_empty()).then(|| {
        let listed: Vec<String> = unreadable.iter().map(ToString::to_string).collect();
        format!(
            "the expiry of {} certificate(s) could not be read ({}):\n  {}",
            unreadable.len(),
            expiry.unreadable.describe_origin(),
            listed.join("\n  ")
        )
    });
    if expiring.is_empty() {
        if let Some(message) = not_read {
            return Err(Error::hosts_failed(message).hint(
                "a date that cannot be read is not a date that is far away: check upgrade_openssl / upgrade_kubeadm \
                 on the host, or set upgrade_certificate_expiry_unreadable: warn to upgrade anyway; nothing was \
                 changed",
            ));
        }
        if !dates.is_empty() {
            run.notice(
                None,
                format!(
                    "certificates: {} checked, none expires within {} days",
                    dates.len(),
                    expiry.warning_days.value
                ),
            );
        }
        return Ok(());
    }
    let listed: Vec<String> = expiring
        .iter()
        .map(|c| {
            let left = (c.not_after - now).div_euclid(86_400);
            let when = if c.not_after <= now { "expired".to_string() } else { format!("in {left} days") };
            format!("{}: {} expires {} ({when})", c.host, c.file, c.date())
        })
        .collect();
    let message = format!(
        "{} certificate(s) expire within {} days ({}):\n  {}",
        expiring.len(),
        expiry.warning_days.value,
        expiry.warning_days.describe_origin(),
        listed.join("\n  ")
    );
    if expiry.fail_on_warn.value || not_read.is_some() {
        let message = match &not_read {
            Some(not_read) => format!("{message}\nand {not_read}"),
            None => message,
        };
        return Err(Error::hosts_failed(message).hint(
            "renew them first (openshift-ansible: playbooks/redeploy-certificates.yml; kubeadm: kubeadm certs renew), \
             or set upgrade_certificate_expiry_warning_days lower, or upgrade_certificate_expiry_fail_on_warn: false \
             to upgrade anyway; nothing was changed",
        ));
    }
    run.notice(None, format!("{message} (upgrade_certificate_expiry_fail_on_warn is false: going on)"));
    Ok(())
}

/// `FILE<TAB>notAfter=Nov 23 10:07:59 2027 GMT` lines (certificate_files.yml); `FILE<TAB>-` is a file that is not
/// there. Returns the dates and what says something else (openssl could not read the file, or printed the date in
/// a shape not understood): those are never taken as "far away".
pub(crate) fn parse_openssl_listing(host: &str, stdout: &str) -> (Vec<CertificateDate>, Vec<Unreadable>) {
    let mut dates = Vec::new();
    let mut bad = Vec::new();
    for line in stdout.lines().filter(|l| !l.trim().is_empty()) {
        let line = strip_terminal_escapes(line);
        let (file, rest) = line.split_once('\t').unwrap_or((&line, ""));
        let rest = rest.trim();
        if rest == "-" {
            continue;
        }
        match rest.strip_prefix("notAfter=").and_then(|d| parse_openssl_date(d.trim())) {
            Some(not_after) => dates.push(CertificateDate { host: host.into(), file: file.into(), not_after }),
            None => bad.push(Unreadable { host: host.into(), file: file.into(), text: rest.into() }),
        }
    }
    (dates, bad)
}

/// The rows of `kubeadm certs check-expiration`: `NAME  Nov 23, 2027 10:00 UTC  364d  ...`, certificates and CAs
/// (an RFC 3339 date is read too). Progress lines (`[check-expiration] ...`), the headers and kubeadm's
/// `!MISSING! NAME` rows (a certificate that is not there, as with an external etcd) are passed over; any other row
/// whose date is not read is returned as unreadable, and so is output with no certificate row at all.
pub(crate) fn parse_kubeadm_check_expiration(host: &str, stdout: &str) -> (Vec<CertificateDate>, Vec<Unreadable>) {
    let mut dates = Vec::new();
    let mut bad = Vec::new();
    let mut missing = 0;
    for line in stdout.lines() {
        let line = strip_terminal_escapes(line);
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            [] => continue,
            [first, ..] if first.starts_with('[') => continue,
            ["CERTIFICATE", ..] if words.contains(&"EXPIRES") => continue,
            ["!MISSING!", ..] => {
                missing += 1;
                continue;
            }
            _ => {}
        }
        let name = words[0];
        match kubeadm_row_date(&words[1..]) {
            Some(not_after) => dates.push(CertificateDate {
                host: host.into(),
                file: format!("kubeadm certificate {name}"),
                not_after,
            }),
            None => bad.push(Unreadable {
                host: host.into(),
                file: format!("kubeadm certificate {name}"),
                text: line.trim().to_string(),
            }),
        }
    }
    if dates.is_empty() && bad.is_empty() && missing == 0 {
        bad.push(Unreadable {
            host: host.into(),
            file: "kubeadm certs check-expiration".into(),
            text: strip_terminal_escapes(stdout.trim()).into_owned(),
        });
    }
    (dates, bad)
}

/// The date after a row's name: `Nov 23, 2027 10:00 UTC` (kubeadm's table) or one RFC 3339 word.
fn kubeadm_row_date(words: &[&str]) -> Option<i64> {
    if let [mon, day, year, time, "UTC", ..] = words {
        let (m, d, y) = (month(mon)?, day.strip_suffix(',')?.parse::<i64>().ok()?, year.parse::<i64>().ok()?);
        return civil_seconds(y, m, d, clock(time)?);
    }
    parse_iso_date(words.first()?)
}

/// openssl's end date: its default `Nov 23 10:07:59 2027 GMT` (the day padded with a space when below 10), and
/// OpenSSL 3's `-dateopt iso_8601` `2027-11-23 10:07:59Z`; an RFC 3339 form with `T` or an offset is read too.
fn parse_openssl_date(text: &str) -> Option<i64> {
    let words: Vec<&str> = text.split_whitespace().collect();
    match words.as_slice() {
        [mon, day, time, year, "GMT" | "UTC"] => {
            civil_seconds(year.parse().ok()?, month(mon)?, day.parse().ok()?, clock(time)?)
        }
        [date, time] => parse_iso_date(&format!("{date}T{time}")),
        [date, time, "UTC" | "GMT"] => parse_iso_date(&format!("{date}T{time}Z")),
        [one] => parse_iso_date(one),
        _ => None,
    }
}

/// `2027-11-23T10:07:59Z`, with `+HH:MM`/`-HH:MM` instead of `Z`, seconds optional, fractions ignored. A date
/// without a zone is not read: the hours would be a guess.
fn parse_iso_date(text: &str) -> Option<i64> {
    let (date, time) = text.split_once(['T', 't'])?;
    let [y, m, d] = date.split('-').collect::<Vec<_>>()[..] else { return None };
    let (y, m, d) = (y.parse::<i64>().ok()?, m.parse::<i64>().ok()?, d.parse::<i64>().ok()?);
    let (clock_text, offset) = if let Some(t) = time.strip_suffix(['Z', 'z']) {
        (t, 0)
    } else {
        let at = time.rfind(['+', '-'])?;
        let (t, zone) = time.split_at(at);
        let sign = if zone.starts_with('-') { -1 } else { 1 };
        let (h, mi) = zone[1..].split_once(':')?;
        let (h, mi) = (h.parse::<i64>().ok()?, mi.parse::<i64>().ok()?);
        if h > 23 || mi > 59 {
            return None;
        }
        (t, sign * (h * 3600 + mi * 60))
    };
    let clock_text = clock_text.split_once('.').map_or(clock_text, |(whole, _)| whole);
    Some(civil_seconds(y, m, d, clock(clock_text)?)? - offset)
}

/// Seconds since the epoch of a checked civil date and time of day (UTC).
fn civil_seconds(y: i64, m: i64, d: i64, secs: i64) -> Option<i64> {
    if !(1..=12).contains(&m) || !(1..=31).contains(&d) || !(0..100_000).contains(&y) {
        return None;
    }
    Some(days_from_civil(y, m, d) * 86_400 + secs)
}

fn month(word: &str) -> Option<i64> {
    const MONTHS: [&str; 12] = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
    // English only, as openssl and kubeadm print them whatever the locale; a full name is read too.
    let word = word.trim_end_matches(',');
    if word.len() < 3 || !word.is_ascii() {
        return None;
    }
    let i = MONTHS.iter().position(|m| m.eq_ignore_ascii_case(&word[..3]))?;
    const FULL: [&str; 12] = [
        "january",
        "february",
        "march",
        "april",
        "may",
        "june",
        "july",
        "august",
        "september",
        "october",
        "november",
        "december",
    ];
    (word.len() == 3 || FULL[i].eq_ignore_ascii_case(word)).then_some(i as i64 + 1)
}

/// `HH:MM` or `HH:MM:SS` as seconds (60 seconds: a leap second).
fn clock(text: &str) -> Option<i64> {
    let parts: Vec<i64> = text.split(':').map(|p| p.parse().ok()).collect::<Option<_>>()?;
    match parts.as_slice() {
        [h @ 0..=23, m @ 0..=59] => Some(h * 3600 + m * 60),
        [h @ 0..=23, m @ 0..=59, s @ 0..=60] => Some(h * 3600 + m * 60 + s),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn openssl_end_dates_are_read_and_missing_files_passed_over() {
        let out = "/etc/origin/master/ca.crt\tnotAfter=Nov 23 10:07:59 2027 GMT\n\
                   /etc/etcd/peer.crt\tnotAfter=Mar  3 00:00:00 2026 GMT\n\
                   /etc/etcd/server.crt\t-\n\
                   /etc/etcd/ca.crt\tCould not read certificate from /etc/etcd/ca.crt\n";
        let (dates, bad) = parse_openssl_listing("m1", out);
        assert_eq!(dates.len(), 2);
        assert_eq!(dates[0].date(), "2027-11-23 10:07:59 UTC");
        assert_eq!(dates[1].date(), "2026-03-03 00:00:00 UTC");
        assert_eq!(
            bad,
            vec![Unreadable {
                host: "m1".into(),
                file: "/etc/etcd/ca.crt".into(),
                text: "Could not read certificate from /etc/etcd/ca.crt".into()
            }]
        );
    }

    #[test]
    fn openssl_end_dates_in_the_common_shapes_are_read() {
        let want = "2020-01-01 00:00:00 UTC";
        for printed in [
            "notAfter=Jan  1 00:00:00 2020 GMT",
            "notAfter=Jan 01 00:00:00 2020 GMT",
            "notAfter=2020-01-01 00:00:00Z",
            "notAfter=2020-01-01T00:00:00Z",
            "notAfter=2020-01-01T01:30:00+01:30",
            "notAfter=2020-01-01 00:00:00 UTC",
            "notAfter=\u{1b}[1;31mJan  1 00:00:00 2020 GMT\u{1b}[0m",
        ] {
            let (dates, bad) = parse_openssl_listing("m1", &format!("/ca.crt\t{printed}\n"));
            assert!(bad.is_empty(), "{printed:?}: {bad:?}");
            assert_eq!(dates.iter().map(CertificateDate::date).collect::<Vec<_>>(), [want], "{printed:?}");
        }
    }

    #[test]
    fn an_openssl_end_date_that_cannot_be_read_is_returned_with_its_file_and_text() {
        for printed in [
            "notAfter=janv.  1 00:00:00 2020 GMT",
            "notAfter=",
            "",
            "notAfter=2020-01-01 00:00:00",
            "notAfter=Jan 32 00:00:00 2020 GMT",
            "notAfter=Jan  1 25:00:00 2020 GMT",
            "notAfter=1/1/2020",
            "\u{1b}[31m\u{1b}[0m",
        ] {
            let (dates, bad) = parse_openssl_listing("m1", &format!("/etc/ca.crt\t{printed}\n"));
            assert!(dates.is_empty(), "{printed:?} was read as {dates:?}");
            assert_eq!(bad.len(), 1, "{printed:?}");
            assert_eq!(bad[0].file, "/etc/ca.crt");
            assert!(!bad[0].text.contains('\u{1b}'), "printed without escapes: {:?}", bad[0].text);
            assert!(bad[0].to_string().starts_with("m1: /etc/ca.crt: could not read"), "{}", bad[0]);
        }
    }

    #[test]
    fn kubeadm_rows_in_another_shape_or_no_rows_at_all_are_unreadable() {
        let out = "CERTIFICATE   EXPIRES                 RESIDUAL TIME\n\
                   admin.conf    2020-01-01T00:00:00Z    <invalid>\n\
                   apiserver     1 janv. 2020            <invalid>\n\
                   !MISSING! etcd-server\n";
        let (dates, bad) = parse_kubeadm_check_expiration("m1", out);
        assert_eq!(
            dates.iter().map(|c| (c.file.as_str(), c.date())).collect::<Vec<_>>(),
            [("kubeadm certificate admin.conf", "2020-01-01 00:00:00 UTC".to_string())]
        );
        assert_eq!(bad.len(), 1, "{bad:?}");
        assert_eq!(bad[0].file, "kubeadm certificate apiserver");
        assert!(bad[0].text.contains("1 janv. 2020"), "{bad:?}");

        for nothing in ["", "\n", "Error: unknown command \"check-expiration\"\n"] {
            let (dates, bad) = parse_kubeadm_check_expiration("m1", nothing);
            assert!(dates.is_empty());
            assert_eq!(bad.len(), 1, "{nothing:?} says nothing readable: {bad:?}");
        }
    }

    #[test]
    fn kubeadm_check_expiration_rows_are_read() {
        let out = "\
[check-expiration] Reading configuration from the cluster...

CERTIFICATE                EXPIRES                  RESIDUAL TIME   CERTIFICATE AUTHORITY   EXTERNALLY MANAGED
admin.conf                 Nov 23, 2027 10:00 UTC   364d            ca                      no
apiserver                  Jan 02, 2026 08:30 UTC   39d             ca                      no

CERTIFICATE AUTHORITY   EXPIRES                  RESIDUAL TIME   EXTERNALLY MANAGED
ca                      Nov 21, 2034 10:00 UTC   9y              no
";
        let (dates, bad) = parse_kubeadm_check_expiration("m1", out);
        assert!(bad.is_empty(), "{bad:?}");
        let shown: Vec<(String, String)> = dates.iter().map(|c| (c.file.clone(), c.date())).collect();
        assert_eq!(
            shown,
            vec![
                ("kubeadm certificate admin.conf".to_string(), "2027-11-23 10:00:00 UTC".to_string()),
                ("kubeadm certificate apiserver".to_string(), "2026-01-02 08:30:00 UTC".to_string()),
                ("kubeadm certificate ca".to_string(), "2034-11-21 10:00:00 UTC".to_string()),
            ]
        );
    }

    #[test]
    fn civil_dates_agree_with_the_journals_clock() {
        for (y, m, d) in [(1970, 1, 1), (2000, 2, 29), (2000, 3, 1), (2027, 11, 23), (2099, 12, 31)] {
            let at = UNIX_EPOCH + std::time::Duration::from_secs(days_from_civil(y, m, d) as u64 * 86_400);
            let (cy, cm, cd, ..) = crate::time_format::civil(at);
            assert_eq!((cy, i64::from(cm), i64::from(cd)), (y, m, d));
        }
    }
}
