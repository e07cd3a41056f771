//! Reporters: they turn the executor's events and results into what people and CI read.

pub(crate) mod eta;
pub(crate) mod files;
pub(crate) mod human;
pub(crate) mod json;
pub(crate) mod junit;
pub(crate) mod log;
pub(crate) mod notify;
pub(crate) mod output;
pub(crate) mod progress;
pub(crate) mod running;
pub(crate) mod summary_md;
pub(crate) mod timeline;

use crate::events::{Event, EventSink, SharedSink};

/// Sends every event to several reporters, in order.
pub(crate) struct FanOut(pub Vec<SharedSink>);

impl EventSink for FanOut {
    fn event(&self, event: &Event) {
        for sink in &self.0 {
            sink.event(event);
        }
    }
}
