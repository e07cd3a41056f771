//! The timeline picture of a run (`upgrade report --html/--svg`), drawn from its journal: one row per host with its
//! steps as bars on a time axis (a node's cordoned window shaded, failures in red, hooks marked), the phases as bands,
//! and a table of durations, slowest first. One self-contained file: inline SVG and CSS, no script, no link.

use std::fmt::Write;

use crate::journal::{HostRecord, JournalEntry};
use crate::time_format::parse_utc_millis;
use crate::vocabulary::{Phase, Step};

/// A step drawn as a bar: from the entry before it on its host to its end, in seconds from the run's start.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Bar {
    pub host: String,
    pub phase: Phase,
    pub step: String,
    pub from: f64,
    pub to: f64,
    pub failed: bool,
    pub hook: bool,
}

#[derive(Debug, Clone, Default)]
pub(crate) struct Timeline {
    pub run: String,
    pub target: String,
    /// Seconds from the run's start to its last entry.
    pub length: f64,
    pub hosts: Vec<String>,
    pub bars: Vec<Bar>,
    /// (host, from, to): from the end of its cordon to the end of its uncordon (or the run's end).
    pub cordoned: Vec<(String, f64, f64)>,
    pub phases: Vec<(Phase, f64, f64)>,
    /// (host, phase, why) of the hosts that failed.
    pub failures: Vec<(String, Phase, String)>,
}

/// The timeline of run `run` (the last one when `None`) of these journal entries.
pub(crate) fn build(entries: &[JournalEntry], run: Option<&str>) -> Result<Timeline, String> {
    let runs: Vec<(&str, &str, &str)> = entries
        .iter()
        .filter_map(|e| match e {
            JournalEntry::RunStarted { run, time, target, .. } => Some((run.as_str(), time.as_str(), target.as_str())),
            _ => None,
        })
        .collect();
    let chosen = match run {
        Some(id) => runs.iter().find(|(r, _, _)| *r == id).copied().ok_or_else(|| {
            let known: Vec<&str> = runs.iter().map(|(r, _, _)| *r).collect();
            format!(
                "no run {id} in the journal (its runs: {})",
                if known.is_empty() { "none".into() } else { known.join(", ") }
            )
        })?,
        None => runs.last().copied().ok_or("the journal records no run")?,
    };
    let (id, started, target) = chosen;
    let start = parse_utc_millis(started).ok_or("the run's start time cannot be read")? as f64 / 1000.0;
    let mut timeline = Timeline { run: id.to_string(), target: target.to_string(), ..Timeline::default() };
    let mut last: std::collections::HashMap<(Phase, String), f64> = std::collections::HashMap::new();
    let mut cordon_end: std::collections::HashMap<String, f64> = std::collections::HashMap::new();
    for entry in entries {
        let (run, time, phase, host) = match entry {
            JournalEntry::HostStarted { run, time, phase, host, .. }
            | JournalEntry::StepStarted { run, time, phase, host, .. }
            | JournalEntry::StepDone { run, time, phase, host, .. }
            | JournalEntry::HostFinished { run, time, phase, host, .. } => (run, time, *phase, host),
            _ => continue,
        };
        if run != id {
            continue;
        }
        let Some(at) = parse_utc_millis(time).map(|ms| ms as f64 / 1000.0 - start) else { continue };
        timeline.length = timeline.length.max(at);
        if !timeline.hosts.contains(host) {
            timeline.hosts.push(host.clone());
        }
        match timeline.phases.iter_mut().find(|(p, _, _)| *p == phase) {
            Some(band) => band.2 = band.2.max(at),
            None => timeline.phases.push((phase, if phase == Phase::Preflight { 0.0 } else { at }, at)),
        }
        let key = (phase, host.clone());
        let from = last.get(&key).copied().unwrap_or(at);
        match entry {
            JournalEntry::StepDone { step, .. } => {
                timeline.bars.push(bar(host, phase, *step, from, at, false));
                if *step == Step::Cordon {
                    cordon_end.insert(host.clone(), at);
                } else if *step == Step::Uncordon {
                    if let Some(cordoned) = cordon_end.remove(host) {
                        timeline.cordoned.push((host.clone(), cordoned, at));
                    }
                }
            }
            JournalEntry::HostFinished { outcome: HostRecord::Failed, detail, .. } => {
                let step = detail.split(':').next().unwrap_or("").trim().to_string();
                timeline.bars.push(Bar {
                    host: host.clone(),
                    phase,
                    hook: step.contains("hook"),
                    step: if step.is_empty() { "failed".into() } else { step },
                    from,
                    to: at,
                    failed: true,
                });
                timeline.failures.push((host.clone(), phase, detail.clone()));
            }
            _ => {}
        }
        last.insert(key, at);
    }
    // A node still cordoned at the end: shaded to the end of the run.
    for (host, from) in cordon_end {
        timeline.cordoned.push((host, from, timeline.length));
    }
    timeline.cordoned.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(timeline)
}

fn bar(host: &str, phase: Phase, step: Step, from: f64, to: f64, failed: bool) -> Bar {
    let name = step.to_string();
    Bar { host: host.to_string(), phase, hook: name.contains("hook"), step: name, from, to, failed }
}

const LABELS: f64 = 150.0;
const WIDTH: f64 = 1000.0;
const ROW: f64 = 24.0;
const TOP: f64 = 46.0;

/// The picture alone: an SVG document.
pub(crate) fn svg(timeline: &Timeline) -> String {
    let length = timeline.length.max(1.0);
    let x = |t: f64| LABELS + t / length * WIDTH;
    let height = TOP + ROW * timeline.hosts.len() as f64 + 10.0;
    let mut out = String::new();
    let _ = writeln!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" class="timeline" width="{}" height="{height}" viewBox="0 0 {} {height}" font-family="sans-serif" font-size="12">"#,
        LABELS + WIDTH + 20.0,
        LABELS + WIDTH + 20.0
    );
    let _ = writeln!(
        out,
        "<style>.phase{{fill:#eef2f7}}.phase:nth-of-type(2n){{fill:#e2e8f0}}.step{{fill:#4a90d9}}.hook{{fill:#9b59b6}}\
         .failed{{fill:#d62728}}.cordoned{{fill:#f5b041;fill-opacity:0.35}}</style>"
    );
    for (phase, from, to) in &timeline.phases {
        let _ = writeln!(
            out,
            r#"<g class="band" data-phase="{phase}"><rect class="phase" x="{:.1}" y="0" width="{:.1}" height="{height}"/><text x="{:.1}" y="14">{phase}</text></g>"#,
            x(*from),
            (x(*to) - x(*from)).max(1.0),
            x(*from) + 2.0
        );
    }
    for tick in 0..=4 {
        let t = length * tick as f64 / 4.0;
        let label = crate::time_format::short_duration(std::time::Duration::from_secs_f64(t));
        let _ = writeln!(out, r#"<text class="tick" x="{:.1}" y="34" text-anchor="middle">{label}</text>"#, x(t));
    }
    for (row, host) in timeline.hosts.iter().enumerate() {
        let y = TOP + ROW * row as f64;
        let _ = writeln!(out, r#"<g class="row" data-host="{}">"#, escape(host));
        let _ = writeln!(out, r#"<text x="4" y="{:.1}">{}</text>"#, y + 15.0, escape(host));
        for (_, from, to) in timeline.cordoned.iter().filter(|(h, _, _)| h == host) {
            let _ = writeln!(
                out,
                r#"<rect class="cordoned" x="{:.1}" y="{y:.1}" width="{:.1}" height="{ROW}"><title>{} cordoned {}</title></rect>"#,
                x(*from),
                (x(*to) - x(*from)).max(2.0),
                escape(host),
                seconds(to - from)
            );
        }
        for b in timeline.bars.iter().filter(|b| &b.host == host) {
            let class = if b.failed {
                "step failed"
            } else if b.hook {
                "step hook"
            } else {
                "step"
            };
            let _ = writeln!(
                out,
                r#"<rect class="{class}" data-step="{}" data-phase="{}" x="{:.1}" y="{:.1}" width="{:.1}" height="{:.1}"><title>{} {}: {} ({})</title></rect>"#,
                escape(&b.step),
                b.phase,
                x(b.from),
                y + 4.0,
                (x(b.to) - x(b.from)).max(2.0),
                ROW - 8.0,
                escape(host),
                b.phase,
                escape(&b.step),
                seconds(b.to - b.from)
            );
        }
        out.push_str("</g>\n");
    }
    out.push_str("</svg>\n");
    out
}

/// The page: the picture, the failures and the durations table (slowest steps first).
pub(crate) fn html(timeline: &Timeline) -> String {
    let mut out = String::new();
    let title = format!("upgrade run {} to {}", escape(&timeline.run), escape(&timeline.target));
    let _ = writeln!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{title}</title>\n<style>body{{font-family:sans-serif;margin:1em}}\
         table{{border-collapse:collapse}}td,th{{border:1px solid #ccc;padding:2px 8px;text-align:left}}.failed{{color:#d62728}}</style></head><body>"
    );
    let _ = writeln!(
        out,
        "<h1>{title}</h1>\n<p>{} hosts, {} long. Bars: steps (blue), hooks (purple), failures (red); shaded: a node cordoned.</p>",
        timeline.hosts.len(),
        seconds(timeline.length)
    );
    out.push_str(&svg(timeline));
    if !timeline.failures.is_empty() {
        out.push_str("<h2>Failures</h2>\n<ul id=\"failures\">\n");
        for (host, phase, why) in &timeline.failures {
            let _ = writeln!(out, "<li class=\"failed\">{} ({phase}): {}</li>", escape(host), escape(why));
        }
        out.push_str("</ul>\n");
    }
    out.push_str("<h2>Durations, slowest first</h2>\n<table id=\"durations\"><tr><th>host</th><th>phase</th><th>step</th><th>seconds</th></tr>\n");
    let mut bars: Vec<&Bar> = timeline.bars.iter().collect();
    bars.sort_by(|a, b| (b.to - b.from).total_cmp(&(a.to - a.from)));
    for b in bars {
        let class = if b.failed { " class=\"failed\"" } else { "" };
        let _ = writeln!(
            out,
            "<tr{class}><td>{}</td><td>{}</td><td>{}</td><td>{:.0}</td></tr>",
            escape(&b.host),
            b.phase,
            escape(&b.step),
            b.to - b.from
        );
    }
    out.push_str("</table>\n</body></html>\n");
    out
}

fn seconds(s: f64) -> String {
    crate::time_format::short_duration(std::time::Duration::from_secs_f64(s.max(0.0)))
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_host_gets_its_steps_its_cordoned_window_and_its_failure_from_the_journal() {
        let lines = [
            r#"{"event":"run-started","run":"r1","time":"2026-11-22T00:00:00Z","target":"v1.29.1"}"#,
            r#"{"event":"host-started","run":"r1","time":"2026-11-22T00:00:10Z","phase":"nodes","host":"n1"}"#,
            r#"{"event":"step-done","run":"r1","time":"2026-11-22T00:00:11Z","phase":"nodes","host":"n1","step":"cordon"}"#,
            r#"{"event":"step-done","run":"r1","time":"2026-11-22T00:00:40Z","phase":"nodes","host":"n1","step":"drain"}"#,
            r#"{"event":"host-finished","run":"r1","time":"2026-11-22T00:01:00Z","phase":"nodes","host":"n1","outcome":"failed","detail":"upgrade: apt <broke>"}"#,
        ];
        let entries: Vec<JournalEntry> = lines.iter().map(|l| serde_json::from_str(l).expect("entry")).collect();
        let timeline = build(&entries, None).expect("a timeline");
        assert_eq!(timeline.hosts, ["n1"]);
        assert_eq!(timeline.bars.len(), 3);
        assert_eq!((timeline.bars[1].step.as_str(), timeline.bars[1].from, timeline.bars[1].to), ("drain", 11.0, 40.0));
        assert!(timeline.bars[2].failed && timeline.bars[2].step == "upgrade");
        assert_eq!(timeline.cordoned, [("n1".to_string(), 11.0, 60.0)], "still cordoned at the end");
        let page = html(&timeline);
        assert!(page.contains("upgrade: apt &lt;broke&gt;"), "{page}");
        assert!(!page.contains("<script"), "no script");
        assert!(build(&entries, Some("r9")).unwrap_err().contains("no run r9 in the journal (its runs: r1)"));
    }
}
