//! Progress bars for a person at a terminal: the whole run (phases), the current phase (batches), the current batch
//! (hosts), and one line per host in flight with its current step. Drawn on stderr, only when stderr is a terminal;
//! otherwise `None` and the human reporter prints plain timestamped lines (docs/DESIGN.md §5: indicatif drops output
//! when its target is hidden).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use indicatif::{MultiProgress, ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::events::Event;

pub(crate) struct ProgressBars {
    multi: MultiProgress,
    color: bool,
    bars: Mutex<Bars>,
}

#[derive(Default)]
struct Bars {
    overall: Option<ProgressBar>,
    phase: Option<ProgressBar>,
    batch: Option<ProgressBar>,
    hosts: HashMap<String, ProgressBar>,
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

    fn bar(&self, len: u64, label: &str) -> ProgressBar {
        let style = self
            .style(
                "{prefix:>9.bold} [{bar:30.cyan/blue}] {pos}/{len} {msg} ({elapsed})",
                "{prefix:>9} [{bar:30}] {pos}/{len} {msg} ({elapsed})",
            )
            .progress_chars("=> ");
        let bar = self.multi.add(ProgressBar::new(len).with_style(style));
        bar.set_prefix(label.to_string());
        bar
    }

    fn spinner(&self, message: String) -> ProgressBar {
        let style = self.style("  {spinner:.green} {msg} ({elapsed})", "  {spinner} {msg} ({elapsed})");
        let bar = self.multi.add(ProgressBar::new_spinner().with_style(style));
        bar.set_message(message);
        bar
    }

    pub(crate) fn event(&self, event: &Event) {
        let Ok(mut bars) = self.bars.lock() else { return };
        match event {
            Event::RunStarted { phases, target, .. } => {
                let overall = self.bar(phases.len() as u64, "overall");
                overall.set_message(format!("upgrading to {target}"));
                // One ticking bar redraws them all (and spinners of hosts waiting on a long step).
                overall.enable_steady_tick(Duration::from_millis(120));
                bars.overall = Some(overall);
            }
            Event::PhaseStarted { phase } => {
                if let Some(overall) = &bars.overall {
                    overall.set_message(phase.name());
                }
                let bar = self.bar(0, "phase");
                bar.set_message(phase.name());
                bars.phase = Some(bar);
            }
            Event::BatchStarted { phase, index, total, hosts } => {
                if let Some(bar) = &bars.phase {
                    bar.set_length(*total as u64);
                    bar.set_position(index.saturating_sub(1) as u64);
                    bar.set_message(format!("{phase}: batches"));
                }
                let batch = self.bar(hosts.len() as u64, "batch");
                batch.set_message(format!("{index}/{total}: hosts"));
                if let Some(old) = bars.batch.replace(batch) {
                    old.finish_and_clear();
                }
            }
            Event::HostStarted { host, .. } => {
                let spinner = self.spinner(format!("[{host}] starting"));
                if let Some(old) = bars.hosts.insert(host.clone(), spinner) {
                    old.finish_and_clear();
                }
            }
            Event::StepStarted { host, step, .. } => {
                if let Some(spinner) = bars.hosts.get(host) {
                    spinner.set_message(format!("[{host}] {step}"));
                }
            }
            Event::HostFinished { report } => {
                if let Some(spinner) = bars.hosts.remove(&report.host) {
                    spinner.finish_and_clear();
                    self.multi.remove(&spinner);
                    if let Some(batch) = &bars.batch {
                        batch.inc(1);
                    }
                }
            }
            Event::BatchFinished { .. } => {
                if let Some(batch) = bars.batch.take() {
                    batch.finish_and_clear();
                    self.multi.remove(&batch);
                }
                if let Some(phase) = &bars.phase {
                    phase.inc(1);
                }
            }
            Event::PhaseFinished { .. } => {
                for bar in bars.batch.take().into_iter().chain(bars.phase.take()) {
                    bar.finish_and_clear();
                    self.multi.remove(&bar);
                }
                if let Some(overall) = &bars.overall {
                    overall.inc(1);
                }
            }
            Event::RunFinished { .. } | Event::Exiting => {
                let all = std::mem::take(&mut *bars);
                for bar in all.overall.into_iter().chain(all.phase).chain(all.batch).chain(all.hosts.into_values()) {
                    bar.finish_and_clear();
                }
                let _ = self.multi.clear();
            }
            _ => {}
        }
    }
}
