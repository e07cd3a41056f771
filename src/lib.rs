//! `upgrade`: reads an Ansible inventory, plans an upgrade, and carries it out over SSH, phase by phase.

pub mod cli;
pub mod connection;
pub mod error;
pub mod events;
pub mod executor;
pub mod inventory;
pub mod plan;
pub mod settings;
pub mod yaml;

use std::ffi::OsString;

/// Runs the command line and returns the process exit code. Errors are rendered here, once.
pub fn run<I: IntoIterator<Item = OsString>>(_args: I) -> i32 {
    0
}
