//! Reporters: they turn the executor's events and results into what people and CI read.

pub mod human;
pub mod json;
pub mod junit;
pub mod log;
pub mod output;
pub mod progress;

use crate::events::{Event, EventSink, SharedSink};

/// Sends every event to several reporters, in order.
pub struct FanOut(pub Vec<SharedSink>);

impl EventSink for FanOut {
    fn event(&self, event: &Event) {
        for sink in &self.0 {
            sink.event(event);
        }
    }
}
