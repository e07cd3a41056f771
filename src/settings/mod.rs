//! The upgrade's settings: serial, label selector, max-fail-percentage, drain-timeout, hooks and target version.
//!
//! Each setting is a small type that parses from text (a flag, an INI `[g:vars]` string) and from a YAML/JSON value,
//! and prints back in a form that parses again. Where they are read from (flags, `-e`, inventory, with the
//! openshift-ansible aliases) is decided by [`resolve`]: a setting always knows its [`Origin`].

mod hooks;
mod labels;
mod limits;
mod maintenance;
mod max_fail_percentage;
mod readers;
mod resolve;
mod serial;
mod target;
#[cfg(test)]
mod tests;
mod validation;

pub use hooks::*;
pub use labels::*;
pub use limits::*;
pub use maintenance::*;
pub use max_fail_percentage::*;
pub use readers::*;
pub use resolve::*;
pub use serial::*;
pub use target::*;
pub use validation::*;
