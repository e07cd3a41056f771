//! Reporters: they turn the executor's events and results into what people and CI read.

pub mod human;
pub mod json;
pub mod junit;
