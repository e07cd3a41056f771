//! `upgrade`: reads an Ansible inventory, plans an upgrade, and carries it out over SSH, phase by phase.
//!
//! Only the modules the integration tests, benches and examples drive are public; the rest is `pub(crate)`, so the
//! compiler reports what nothing uses (`unreachable_pub` keeps new items crate-private by default).
#![warn(unreachable_pub)]

pub(crate) mod ansible_compat;
pub(crate) mod builtin_vars;
pub(crate) mod cli;
pub(crate) mod console;
pub(crate) mod cluster;
pub mod cluster_groups;
mod commands;
pub mod connection;
pub mod drain_blockers;
pub mod error;
pub mod events;
pub(crate) mod executor;
pub(crate) mod flavor;
pub(crate) mod host_settings;
pub mod inventory;
pub(crate) mod journal;
pub(crate) mod phase;
pub mod plan;
pub(crate) mod playbooks;
pub(crate) mod redact;
pub(crate) mod report;
pub(crate) mod restore;
pub(crate) mod session;
pub mod settings;
pub(crate) mod strategy;
pub mod tasks;
pub(crate) mod time_format;
pub(crate) mod unlock;
pub mod vault;
pub(crate) mod vocabulary;
pub(crate) mod yaml;

#[cfg(test)]
mod fuzz_tests;

use crate::console::errln;
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
            let code = if err.use_stderr() { vocabulary::ExitCode::BadInput } else { vocabulary::ExitCode::Success };
            return code.code();
        }
    };
    let outcome = commands::run(&cli);
    match outcome {
        Ok(code) => code,
        Err(err) => {
            report_error(&err);
            err.code().code()
        }
    }
}

/// The error that ends the command, with every value decrypted from Ansible Vault masked.
fn report_error(err: &Error) {
    errln!("error: {}", redact::Redactor::decrypted().error(err.clone()));
}
