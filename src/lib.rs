//! `upgrade`: reads an Ansible inventory, plans an upgrade, and carries it out over SSH, phase by phase.

pub mod builtin_vars;
pub mod cli;
pub mod cluster;
mod commands;
pub mod connection;
pub mod drain_blockers;
pub mod error;
pub mod events;
pub mod executor;
pub mod flavor;
pub mod host_settings;
pub mod inventory;
pub mod journal;
pub mod phase;
pub mod plan;
pub mod playbooks;
pub mod redact;
pub mod report;
pub mod restore;
pub mod session;
pub mod settings;
pub mod strategy;
pub mod tasks;
pub mod unlock;
pub mod yaml;

#[cfg(test)]
mod fuzz_tests;

use std::ffi::OsString;

use clap::Parser;

use crate::cli::Cli;
use crate::error::Error;

/// Runs the command line and returns the process exit code. Errors are rendered here, once.
pub fn run<I: IntoIterator<Item = OsString>>(args: I) -> i32 {
    let cli = match Cli::try_parse_from(args) {
        Ok(cli) => cli,
        Err(err) => {
            let _ = err.print();
            // --help and --version are not failures; every usage error exits 2, like any bad input.
            return if err.use_stderr() { 2 } else { 0 };
        }
    };
    let outcome = commands::run(&cli);
    match outcome {
        Ok(code) => code,
        Err(err) => {
            report_error(&err);
            err.exit_code()
        }
    }
}

fn report_error(err: &Error) {
    eprintln!("error: {err}");
}
