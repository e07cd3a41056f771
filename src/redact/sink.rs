//! The events, the summary and the sink as reporters may see them: every text a secret can reach, masked.

use std::sync::Arc;

use super::Redactor;
use crate::events::{Event, EventSink, SharedSink};
use crate::vocabulary::{HostOutcome, HostReport, Summary};

impl Redactor {
    fn report(&self, report: &mut HostReport) {
        match &mut report.outcome {
            HostOutcome::Skipped { reason } | HostOutcome::NotStarted { reason } => self.string(reason),
            HostOutcome::Failed { reason, .. } => self.string(reason),
            HostOutcome::Upgraded { .. } => {}
        }
    }

    /// The event as reporters may see it.
    pub(crate) fn event(&self, event: &Event) -> Event {
        let mut event = event.clone();
        match &mut event {
            Event::TaskStarted { task, .. } => self.string(&mut task.name),
            Event::TaskRetry { task, result, .. } | Event::TaskFinished { task, result, .. } => {
                self.string(&mut task.name);
                self.value(result);
            }
            Event::StepFinished { error: Some(error), .. } => self.string(error),
            Event::HostFinished { report } => self.report(report),
            Event::Notice { message, .. } => self.string(message),
            Event::RunFinished { summary } => self.summary_in_place(summary),
            _ => {}
        }
        event
    }

    /// The summary as the JUnit report shows it.
    pub(crate) fn summary(&self, summary: &Summary) -> Summary {
        let mut summary = summary.clone();
        self.summary_in_place(&mut summary);
        summary
    }

    fn summary_in_place(&self, summary: &mut Summary) {
        summary.hosts.iter_mut().for_each(|h| self.report(h));
        if let Some(stopped) = &mut summary.stopped {
            stopped.texts_mut().into_iter().for_each(|text| self.string(text));
        }
        for node in &mut summary.left_cordoned {
            self.string(&mut node.fix);
        }
    }
}

/// A sink that masks secrets in every event before the reporters behind it see it.
pub(crate) struct Redacting {
    pub redactor: Arc<Redactor>,
    pub inner: SharedSink,
}

impl EventSink for Redacting {
    fn event(&self, event: &Event) {
        if self.redactor.is_empty() {
            self.inner.event(event);
        } else {
            self.inner.event(&self.redactor.event(event));
        }
    }
}
