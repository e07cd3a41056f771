//! The gate on what a Kubernetes minor removes or requires (APIs, flags, feature gates, host prerequisites): the
//! table (`table.rs`, from data/api_removals.tsv), what the cluster and the hosts show of it (`evidence.rs`, pure:
//! texts in, findings out), and the report both make. Reading the cluster and the hosts, and refusing the run, is the
//! preflight's (`phase::api_removals`).

pub(crate) mod evidence;
pub(crate) mod table;

use serde::Serialize;

use table::{Minor, minor_text};

/// One thing found that a crossed minor removes (or that a later one will).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    /// The minor that removes it (`1.25`).
    pub minor: String,
    /// `policy/v1beta1 poddisruptionbudgets`, `kubelet flag --network-plugin`, ...
    pub what: String,
    /// `client kubectl/v1.24.0 (12 calls)`, `default/web (Deployment, last-applied)`, `helm release app in ns`,
    /// `n1:/var/lib/kubelet/kubeadm-flags.env`, ...
    #[serde(rename = "where")]
    pub place: String,
    pub replacement: String,
    /// Which read found it: `metrics`, `audit-log`, `last-applied`, `helm`, `crd`, `host`.
    pub source: String,
    /// Where the table's row comes from (`guide`, `CHANGELOG-1.35`), or who said so (`api-server`, `crd-status`).
    pub reference: String,
    /// Removed by a minor this run crosses: it refuses the run unless that minor is acknowledged. False for what a
    /// later minor removes (said so it is not a surprise then).
    pub blocking: bool,
}

/// A source that could not be read: never "nothing found".
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Unreadable {
    pub source: String,
    #[serde(rename = "where")]
    pub place: String,
    pub why: String,
}

/// Since when one master's API server has counted (its counters start again at each restart).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Window {
    pub master: String,
    /// UTC, from its `process_start_time_seconds`.
    pub since: String,
}

/// What the gate found for one run (or one `check-apis`).
#[derive(Debug, Clone, Default, Serialize)]
pub struct Report {
    pub from: String,
    pub target: String,
    /// The minors the run crosses.
    pub minors: Vec<String>,
    pub findings: Vec<Finding>,
    pub unreadable: Vec<Unreadable>,
    /// The window the API servers' counters cover, per master.
    pub windows: Vec<Window>,
    /// What was read and what was not asked for (Helm when not opted in, no audit log path).
    pub notes: Vec<String>,
    /// The crossed minors acknowledged (`upgrade_acknowledge_api_removals`).
    pub acknowledged: Vec<String>,
    /// The crossed minors that refuse the run: something found or unreadable, not acknowledged.
    pub blocked_minors: Vec<String>,
    pub blocked: bool,
}

impl Report {
    pub(crate) fn new(from: Minor, target: Minor, minors: &[Minor]) -> Report {
        Report {
            from: minor_text(from),
            target: minor_text(target),
            minors: minors.iter().map(|m| minor_text(*m)).collect(),
            ..Report::default()
        }
    }

    /// Decides which crossed minors block: one with a blocking finding, or any while a source is unreadable (what
    /// could not be read may hold anything), unless acknowledged.
    pub(crate) fn decide(&mut self, acknowledged: &[String]) {
        let acked = |minor: &str| acknowledged.iter().any(|a| table::parse_minor(a) == table::parse_minor(minor));
        self.acknowledged = self.minors.iter().filter(|m| acked(m)).cloned().collect();
        self.blocked_minors = self
            .minors
            .iter()
            .filter(|m| !acked(m))
            .filter(|m| !self.unreadable.is_empty() || self.findings.iter().any(|f| f.blocking && &f.minor == *m))
            .cloned()
            .collect();
        self.blocked = !self.blocked_minors.is_empty();
    }

    /// Whether anything at all was found or left unread for the crossed minors.
    pub(crate) fn anything(&self) -> bool {
        !self.unreadable.is_empty() || self.findings.iter().any(|f| f.blocking)
    }

    /// The table for people: what, where, removed in, replacement; then the unreadable sources and the windows.
    pub(crate) fn render(&self) -> String {
        let clean = |t: &str| crate::redact::escapes::strip_terminal_escapes(t).to_string();
        let mut lines = Vec::new();
        let minors = if self.minors.is_empty() { "none".to_string() } else { self.minors.join(", ") };
        lines.push(format!("removed APIs and flags, {} -> {} (minors crossed: {minors}):", self.from, self.target));
        let rows: Vec<[String; 5]> = self
            .findings
            .iter()
            .map(|f| {
                let removed = if f.blocking { f.minor.clone() } else { format!("{} (later)", f.minor) };
                [clean(&f.what), clean(&f.place), removed, clean(&f.replacement), f.source.clone()]
            })
            .collect();
        if rows.is_empty() {
            lines.push("  nothing found in what was read".into());
        } else {
            let header = ["WHAT", "WHERE", "REMOVED IN", "REPLACEMENT", "FOUND BY"].map(String::from);
            let widths: Vec<usize> = (0..5)
                .map(|i| rows.iter().chain(std::iter::once(&header)).map(|r| r[i].chars().count()).max().unwrap_or(0))
                .collect();
            for row in std::iter::once(&header).chain(&rows) {
                let cells: Vec<String> = (0..5).map(|i| format!("{:<w$}", row[i], w = widths[i])).collect();
                lines.push(format!("  {}", cells.join("  ").trim_end()));
            }
        }
        for u in &self.unreadable {
            lines.push(format!("  UNREADABLE {} on {}: {}", u.source, clean(&u.place), clean(&u.why)));
        }
        for w in &self.windows {
            lines.push(format!("  {}'s API server counted since {} (its counters restart with it)", w.master, w.since));
        }
        for note in &self.notes {
            lines.push(format!("  note: {}", clean(note)));
        }
        if !self.acknowledged.is_empty() {
            lines.push(format!("  acknowledged (upgrade_acknowledge_api_removals): {}", self.acknowledged.join(", ")));
        }
        if self.blocked {
            lines.push(format!("  BLOCKED: {}", self.blocked_minors.join(", ")));
        }
        lines.join("\n")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn finding(minor: &str, blocking: bool) -> Finding {
        Finding {
            minor: minor.into(),
            what: "policy/v1beta1 podsecuritypolicies".into(),
            place: "clients of m1's API server".into(),
            replacement: "-".into(),
            source: "metrics".into(),
            reference: "guide".into(),
            blocking,
        }
    }

    #[test]
    fn a_finding_blocks_its_minor_until_acknowledged_and_a_later_one_blocks_nothing() {
        let mut report = Report::new((1, 24), (1, 26), &[(1, 25), (1, 26)]);
        report.findings = vec![finding("1.25", true), finding("1.37", false)];
        report.decide(&[]);
        assert_eq!(report.blocked_minors, vec!["1.25"]);
        assert!(report.render().contains("BLOCKED: 1.25"), "{}", report.render());
        report.decide(&["v1.25".into()]);
        assert!(!report.blocked);
        assert_eq!(report.acknowledged, vec!["1.25"]);
    }

    #[test]
    fn an_unreadable_source_blocks_every_crossed_minor_not_acknowledged() {
        let mut report = Report::new((1, 24), (1, 26), &[(1, 25), (1, 26)]);
        report.unreadable.push(Unreadable { source: "metrics".into(), place: "m2".into(), why: "Forbidden".into() });
        report.decide(&["1.25".into()]);
        assert_eq!(report.blocked_minors, vec!["1.26"]);
        assert!(report.render().contains("UNREADABLE metrics on m2: Forbidden"));
        report.decide(&["1.25".into(), "1.26".into()]);
        assert!(!report.blocked);
    }
}
