//! The certificate expiry check of preflight, every flavour: each host reads its certificates' end dates through the
//! flavour's `certificate_expiry.yml` (openssl on the files OpenShift 3.11 keeps; `kubeadm certs check-expiration` on
//! kubeadm masters), and the run stops before anything moves when one expires within the warning window, as
//! openshift-ansible's upgrade does (unless `upgrade_certificate_expiry_fail_on_warn: false`).

use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::Value;

use super::run::UpgradeRun;
use crate::error::{Error, Result};
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
        let stdout = |fact: &str| {
            facts.get(fact).and_then(|r| r.get("stdout")).and_then(Value::as_str).unwrap_or_default().to_string()
        };
        let (found, bad) = parse_openssl_listing(&host, &stdout("upgrade_certificate_files"));
        dates.extend(found);
        unreadable.extend(bad);
        dates.extend(parse_kubeadm_check_expiration(&host, &stdout("upgrade_kubeadm_certificates")));
    }
    for (host, line) in &unreadable {
        run.notice(Some(host), format!("certificate not read: {line}"));
    }
    let expiry = &run.plan.certificate_expiry;
    let now = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs() as i64).unwrap_or(0);
    let window = expiry.warning_days.value as i64 * 86_400;
    let mut expiring: Vec<&CertificateDate> = dates.iter().filter(|c| c.not_after - now < window).collect();
    expiring.sort_by_key(|c| c.not_after);
    if expiring.is_empty() {
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
    if expiry.fail_on_warn.value {
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
/// there. Returns the dates and the lines that say something else (openssl could not read the file).
pub(crate) fn parse_openssl_listing(host: &str, stdout: &str) -> (Vec<CertificateDate>, Vec<(String, String)>) {
    let mut dates = Vec::new();
    let mut bad = Vec::new();
    for line in stdout.lines().filter(|l| !l.trim().is_empty()) {
        let (file, rest) = line.split_once('\t').unwrap_or((line, ""));
        let rest = rest.trim();
        if rest == "-" {
            continue;
        }
        match rest.strip_prefix("notAfter=").and_then(parse_openssl_date) {
            Some(not_after) => dates.push(CertificateDate { host: host.into(), file: file.into(), not_after }),
            None => bad.push((host.to_string(), format!("{file}: {rest}"))),
        }
    }
    (dates, bad)
}

/// The rows of `kubeadm certs check-expiration`: `NAME  Nov 23, 2027 10:00 UTC  364d  ...`, certificates and CAs.
pub(crate) fn parse_kubeadm_check_expiration(host: &str, stdout: &str) -> Vec<CertificateDate> {
    let mut dates = Vec::new();
    for line in stdout.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        let Some(i) = words.iter().position(|w| month(w).is_some()) else { continue };
        if i == 0 || words.len() < i + 5 || words[i + 4] != "UTC" {
            continue;
        }
        let (Some(m), Some(d), Ok(y)) =
            (month(words[i]), words[i + 1].trim_end_matches(',').parse::<i64>().ok(), words[i + 2].parse::<i64>())
        else {
            continue;
        };
        let Some(secs) = clock(words[i + 3]) else { continue };
        dates.push(CertificateDate {
            host: host.into(),
            file: format!("kubeadm certificate {}", words[0]),
            not_after: days_from_civil(y, m, d) * 86_400 + secs,
        });
    }
    dates
}

/// openssl's `Nov 23 10:07:59 2027 GMT` (the day padded with a space when below 10).
fn parse_openssl_date(text: &str) -> Option<i64> {
    let words: Vec<&str> = text.split_whitespace().collect();
    let [mon, day, time, year, zone] = words.as_slice() else { return None };
    if *zone != "GMT" && *zone != "UTC" {
        return None;
    }
    let m = month(mon)?;
    let d: i64 = day.parse().ok()?;
    let y: i64 = year.parse().ok()?;
    Some(days_from_civil(y, m, d) * 86_400 + clock(time)?)
}

fn month(word: &str) -> Option<i64> {
    const MONTHS: [&str; 12] = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
    MONTHS.iter().position(|m| *m == word).map(|i| i as i64 + 1)
}

/// `HH:MM` or `HH:MM:SS` as seconds.
fn clock(text: &str) -> Option<i64> {
    let parts: Vec<i64> = text.split(':').map(|p| p.parse().ok()).collect::<Option<_>>()?;
    match parts.as_slice() {
        [h, m] => Some(h * 3600 + m * 60),
        [h, m, s] => Some(h * 3600 + m * 60 + s),
        _ => None,
    }
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's days_from_civil).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
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
            vec![("m1".to_string(), "/etc/etcd/ca.crt: Could not read certificate from /etc/etcd/ca.crt".into())]
        );
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
        let dates = parse_kubeadm_check_expiration("m1", out);
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
