//! Progress bars for a person at a terminal: the whole run (phases), the current phase (batches), the current batch
//! (hosts), and one line per host in flight with its current step. Drawn on stderr, only when stderr is a terminal;
//! otherwise `None` and the human reporter prints plain timestamped lines (docs/DESIGN.md §5: indicatif drops output
//! when its target is hidden).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::events::Event;

use super::eta::Eta;
use super::running::RunningStep;

pub(crate) struct ProgressBars {
    multi: MultiProgress,
    color: bool,
    bars: Mutex<Bars>,
}

#[derive(Default)]
struct Bars {
    overall: Option<ProgressBar>,
    phase: Option<ProgressBar>,
    /// What the phase line says: its phase, and the batch in flight with its hosts done.
    label: PhaseLabel,
    hosts: HashMap<String, ProgressBar>,
}

/// How often every line is drawn again, so each spinner and elapsed time moves while its step waits.
const TICK: Duration = Duration::from_millis(200);

/// The phase line, in words: `nodes: batch 1 of 2 - 1 of 3 hosts done`; `preflight: running` while a phase has no
/// batches (no bar then: an empty one would look finished).
#[derive(Debug, Default, Clone, PartialEq)]
pub(crate) struct PhaseLabel {
    pub phase: String,
    /// (batch, batches, hosts in it, hosts done).
    pub batch: Option<(usize, usize, usize, usize)>,
    /// The phase's time left, as last estimated.
    pub left: Option<Duration>,
}

impl std::fmt::Display for PhaseLabel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.batch {
            None => write!(f, "{}: running", self.phase)?,
            Some((index, total, size, done)) => {
                let hosts = if size == 1 { "host" } else { "hosts" };
                write!(f, "{}: batch {index} of {total} - {done} of {size} {hosts} done", self.phase)?
            }
        }
        match self.left {
            Some(left) => write!(f, " - {}", about_left(left)),
            None => Ok(()),
        }
    }
}

/// `PAUSED by ops@ci at 2026-11-27T21:00:00Z (upgrade pause): batch 2 waits until `upgrade resume` (at most 24h,
/// upgrade_pause_timeout)`: what the progress display and the plain lines say of a pause.
pub(crate) fn paused_text(by: &str, at: &str, before: &str, timeout: Option<Duration>) -> String {
    let at = if at.is_empty() { String::new() } else { format!(" at {at}") };
    let limit = match timeout {
        Some(t) => format!("at most {}, upgrade_pause_timeout", crate::time_format::short_duration(t)),
        None => "for ever: upgrade_pause_timeout 0".to_string(),
    };
    format!(
        "PAUSED by {by}{at} (upgrade pause): what was in flight has finished; {before} waits, the cluster lock kept, \
         until `upgrade resume --inventory ...` ({limit})"
    )
}

/// `resumed by ops@ci after 42s: batch 2 starts`.
pub(crate) fn resumed_text(by: Option<&str>, before: &str, waited: Duration) -> String {
    let by = by.map(|b| format!(" by {b}")).unwrap_or_default();
    format!("resumed{by} after {}: {before} starts", crate::time_format::short_duration(waited))
}

/// `about 4m left`; `about 0s left` reads as `finishing`.
pub(crate) fn about_left(left: Duration) -> String {
    if left < Duration::from_secs(1) {
        "finishing".to_string()
    } else {
        format!("about {} left", crate::time_format::short_duration(left))
    }
}

impl ProgressBars {
    /// Bars on stderr, or `None` when stderr is not a terminal.
    pub(crate) fn on_stderr(color: bool) -> Option<ProgressBars> {
        use std::io::IsTerminal;
        if !std::io::stderr().is_terminal() {
            return None;
        }
        let multi = MultiProgress::with_draw_target(ProgressDrawTarget::stderr());
        if multi.is_hidden() {
            return None;
        }
        Some(ProgressBars { multi, color, bars: Mutex::new(Bars::default()) })
    }

    /// Runs `f` (which prints lines) with the bars cleared, then draws them again below the new lines.
    pub(crate) fn suspend<R>(&self, f: impl FnOnce() -> R) -> R {
        self.multi.suspend(f)
    }

    fn style(&self, colored: &str, plain: &str) -> ProgressStyle {
        let template = if self.color { colored } else { plain };
        ProgressStyle::with_template(template).unwrap_or_else(|_| ProgressStyle::default_bar())
    }

    /// A bar with its own words and no fractions (`[=====>    ] nodes: batch 1 of 2 - 1 of 3 hosts done (1m02s)`).
    fn bar_style(&self) -> ProgressStyle {
        self.style(
            "{prefix:>9.bold} [{bar:30.cyan/blue}] {msg} ({elapsed})",
            "{prefix:>9} [{bar:30}] {msg} ({elapsed})",
        )
        .progress_chars("=> ")
    }

    /// A line with a moving spinner where a bar would say nothing yet.
    fn line_style(&self) -> ProgressStyle {
        self.style("{prefix:>9.bold} {spinner:.green} {msg} ({elapsed})", "{prefix:>9} {spinner} {msg} ({elapsed})")
    }

    fn bar(&self, len: u64, label: &str) -> ProgressBar {
        let bar = self.multi.add(ProgressBar::new(len).with_style(self.bar_style()));
        bar.set_prefix(label.to_string());
        bar.enable_steady_tick(TICK);
        bar
    }

    fn line(&self, label: &str) -> ProgressBar {
        let line = self.multi.add(ProgressBar::new_spinner().with_style(self.line_style()));
        line.set_prefix(label.to_string());
        line.enable_steady_tick(TICK);
        line
    }

    /// A host's line: its spinner and the time in its current step both move while the step waits.
    fn spinner(&self, message: String) -> ProgressBar {
        let style = self.style("  {spinner:.green} {msg} ({elapsed})", "  {spinner} {msg} ({elapsed})");
        let bar = self.multi.add(ProgressBar::new_spinner().with_style(style));
        bar.set_message(message);
        bar.enable_steady_tick(TICK);
        bar
    }

    /// Follows the run; `eta` (fed the event already) gives the time left.
    pub(crate) fn event(&self, event: &Event, eta: Option<&Eta>) {
        let Ok(mut bars) = self.bars.lock() else { return };
        let bars = &mut *bars;
        bars.label.left = eta.and_then(Eta::phase_left_now);
        let run_left = eta.and_then(Eta::left).map(|left| format!(" - {} in the run", about_left(left)));
        let run_left = run_left.unwrap_or_default();
        match event {
            Event::RunStarted { phases, target, .. } => {
                let overall = self.bar(phases.len() as u64, "overall");
                overall.set_message(format!("upgrading to {target}: {} phases", phases.len()));
                bars.overall = Some(overall);
            }
            Event::PhaseStarted { phase } => {
                if let Some(overall) = &bars.overall {
                    // Preflight, and the backup a control-plane run takes first, run even when not asked for.
                    let (done, asked) = (overall.position(), overall.length().unwrap_or(0));
                    let all = asked.max(done + 1);
                    overall.set_length(all);
                    overall.set_message(format!("phase {} of {all}: {phase}{run_left}", done + 1));
                }
                bars.label = PhaseLabel { phase: phase.name().to_string(), batch: None, left: bars.label.left };
                let line = self.line("phase");
                line.set_message(bars.label.to_string());
                if let Some(old) = bars.phase.replace(line) {
                    old.finish_and_clear();
                    self.multi.remove(&old);
                }
            }
            Event::BatchStarted { index, total, hosts, .. } => {
                bars.label.batch = Some((*index, *total, hosts.len(), 0));
                // The phase's line becomes a bar of this batch's hosts.
                let bar = self.bar(hosts.len() as u64, "phase");
                bar.set_message(bars.label.to_string());
                if let Some(old) = bars.phase.replace(bar) {
                    old.finish_and_clear();
                    self.multi.remove(&old);
                }
            }
            Event::HostStarted { host, .. } => {
                let spinner = self.spinner(format!("[{host}] starting"));
                if let Some(old) = bars.hosts.insert(host.clone(), spinner) {
                    old.finish_and_clear();
                    self.multi.remove(&old);
                }
            }
            Event::StepStarted { host, step, .. } => {
                if let Some(spinner) = bars.hosts.get(host) {
                    // The time shown is the step's: a drain that hangs counts up from its own start.
                    spinner.reset_elapsed();
                    spinner.set_message(format!("[{host}] {}", RunningStep::new(*step).label()));
                }
            }
            Event::HostFinished { report } => {
                if let Some(spinner) = bars.hosts.remove(&report.host) {
                    spinner.finish_and_clear();
                    self.multi.remove(&spinner);
                }
                if let Some((_, _, size, done)) = &mut bars.label.batch {
                    *done = (*done + 1).min(*size);
                    if let Some(phase) = &bars.phase {
                        phase.set_position(*done as u64);
                        phase.set_message(bars.label.to_string());
                    }
                }
            }
            // The phase line says the pause while the run waits, and what it said before once resumed.
            Event::Paused { by, at, before, timeout } => {
                if let Some(phase) = &bars.phase {
                    phase.set_message(paused_text(by, at, before, *timeout));
                }
            }
            Event::Resumed { .. } => {
                if let Some(phase) = &bars.phase {
                    phase.set_message(bars.label.to_string());
                }
            }
            Event::PhaseFinished { .. } => {
                if let Some(phase) = bars.phase.take() {
                    phase.finish_and_clear();
                    self.multi.remove(&phase);
                }
                if let Some(overall) = &bars.overall {
                    overall.inc(1);
                }
            }
            Event::RunFinished { .. } | Event::Exiting => {
                let all = std::mem::take(bars);
                for bar in all.overall.into_iter().chain(all.phase).chain(all.hosts.into_values()) {
                    bar.finish_and_clear();
                }
                let _ = self.multi.clear();
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::PhaseLabel;
    use std::time::Duration;

    #[test]
    fn a_pause_says_who_what_waits_and_for_how_long_and_a_resume_what_starts() {
        let text =
            super::paused_text("ops@laptop", "2026-11-27T21:00:00Z", "batch 2", Some(Duration::from_secs(86400)));
        assert_eq!(
            text,
            "PAUSED by ops@laptop at 2026-11-27T21:00:00Z (upgrade pause): what was in flight has finished; batch 2 \
             waits, the cluster lock kept, until `upgrade resume --inventory ...` (at most 24h00m, upgrade_pause_timeout)"
        );
        assert!(
            super::paused_text("ops@laptop", "", "master m2", None).ends_with("(for ever: upgrade_pause_timeout 0)")
        );
        assert_eq!(
            super::resumed_text(Some("oncall@ci"), "batch 2", Duration::from_secs(42)),
            "resumed by oncall@ci after 42s: batch 2 starts"
        );
        assert_eq!(super::resumed_text(None, "batch 2", Duration::from_secs(3)), "resumed after 3s: batch 2 starts");
    }

    #[test]
    fn the_phase_line_says_batch_and_hosts_in_words_and_a_phase_without_batches_is_running() {
        let mut label = PhaseLabel { phase: "preflight".into(), batch: None, left: None };
        assert_eq!(label.to_string(), "preflight: running");
        label = PhaseLabel { phase: "nodes".into(), batch: Some((1, 2, 3, 1)), left: None };
        assert_eq!(label.to_string(), "nodes: batch 1 of 2 - 1 of 3 hosts done");
        label.batch = Some((2, 3, 1, 0));
        assert_eq!(label.to_string(), "nodes: batch 2 of 3 - 0 of 1 host done");
        label.left = Some(Duration::from_secs(245));
        assert_eq!(label.to_string(), "nodes: batch 2 of 3 - 0 of 1 host done - about 4m05s left");
    }
}
