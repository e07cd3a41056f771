//! The events, the summary and the sink as reporters may see them: every text a secret can reach, masked.

use std::sync::Arc;

use super::Redactor;
use crate::events::{Event, EventSink, SharedSink};
use crate::vocabulary::{HostOutcome, HostReport, Summary};

/// Every text of an event that can come from outside (command output, task names, messages, node names from the
/// cluster), for `f` to rewrite: masking secrets, and stripping terminal escapes before people read them.
pub(crate) fn each_text(event: &mut Event, f: &mut dyn FnMut(&mut String)) {
    match event {
        Event::TaskStarted { task, .. } => f(&mut task.name),
        Event::TaskRetry { task, result, .. } | Event::TaskFinished { task, result, .. } => {
            f(&mut task.name);
            each_value_text(result, f);
        }
        Event::StepFinished { error: Some(error), .. } => f(error),
        Event::HostFinished { report } => report_texts(report, f),
        Event::Notice { message, .. } => f(message),
        Event::RunFinished { summary } => summary_texts(summary, f),
        _ => {}
    }
}

fn each_value_text(value: &mut serde_json::Value, f: &mut dyn FnMut(&mut String)) {
    match value {
        serde_json::Value::String(s) => f(s),
        serde_json::Value::Array(items) => items.iter_mut().for_each(|v| each_value_text(v, f)),
        serde_json::Value::Object(map) => map.values_mut().for_each(|v| each_value_text(v, f)),
        _ => {}
    }
}

fn report_texts(report: &mut HostReport, f: &mut dyn FnMut(&mut String)) {
    if let Some(node) = &mut report.node {
        f(node);
    }
    match &mut report.outcome {
        HostOutcome::Skipped { reason } | HostOutcome::NotStarted { reason } | HostOutcome::Failed { reason, .. } => {
            f(reason)
        }
        HostOutcome::PassedOver { blocked_by, fix, .. } => {
            blocked_by.iter_mut().for_each(&mut *f);
            f(fix)
        }
        HostOutcome::Upgraded { .. } => {}
    }
}

/// Every text of a summary that can come from outside.
pub(crate) fn summary_texts(summary: &mut Summary, f: &mut dyn FnMut(&mut String)) {
    summary.hosts.iter_mut().for_each(|h| report_texts(h, f));
    if let Some(stopped) = &mut summary.stopped {
        stopped.texts_mut().into_iter().for_each(|text| f(text));
    }
    for node in &mut summary.left_cordoned {
        f(&mut node.node);
        f(&mut node.fix);
    }
    summary.not_ready_untouched.iter_mut().for_each(|n| f(n));
    summary.api_removals_acknowledged.iter_mut().for_each(|a| f(a));
    if let Some(error) = &mut summary.cluster_read_error {
        f(error);
    }
}

impl Redactor {
    /// The event as reporters may see it.
    pub(crate) fn event(&self, event: &Event) -> Event {
        let mut event = event.clone();
        each_text(&mut event, &mut |s| self.string(s));
        event
    }

    /// The summary as the JUnit report shows it.
    pub(crate) fn summary(&self, summary: &Summary) -> Summary {
        let mut summary = summary.clone();
        summary_texts(&mut summary, &mut |s| self.string(s));
        summary
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
