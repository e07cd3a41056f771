//! `upgrade`: reads an Ansible inventory, plans an upgrade, and carries it out over SSH, phase by phase.
//!
//! Only the modules the integration tests, benches and examples drive are public; the rest is `pub(crate)`, so the
//! compiler reports what nothing uses (`unreachable_pub` keeps new items crate-private by default).
#![warn(unreachable_pub)]

pub(crate) mod ansible_compat;
pub mod api_removals;
pub(crate) mod builtin_vars;
pub(crate) mod cli;
pub(crate) mod cluster;
pub mod cluster_groups;
pub(crate) mod cluster_validation;
mod commands;
pub mod connection;
pub(crate) mod console;
pub mod drain_blockers;
pub mod drain_simulation;
pub mod error;
pub mod events;
pub(crate) mod executor;
pub(crate) mod flavor;
pub(crate) mod host_settings;
pub mod inventory;
pub(crate) mod journal;
pub(crate) mod label_selector;
pub(crate) mod pause;
pub(crate) mod phase;
pub mod plan;
pub(crate) mod playbooks;
pub(crate) mod redact;
pub(crate) mod report;
pub(crate) mod restore;
pub(crate) mod session;
pub mod settings;
pub(crate) mod status;
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
    let args: Vec<OsString> = args.into_iter().collect();
    let cli = match Cli::try_parse_from(&args) {
        Ok(cli) => cli,
        Err(err) => {
            let _ = err.print();
            if let Some(hint) = usage_hint(&args) {
                errln!("  hint: {hint}");
            }
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

/// A pointer to the fix for the mistakes a new user makes first: a bare inventory path, and the dry-run flags of
/// other tools, which `upgrade` spells `--plan` (offline) and `plan --live` (reads the cluster, changes nothing).
fn usage_hint(args: &[OsString]) -> Option<String> {
    let words: Vec<String> = args.iter().skip(1).map(|a| a.to_string_lossy().into_owned()).collect();
    if let Some(flag) = words.iter().find(|w| matches!(w.as_str(), "--check" | "--dry-run" | "-C" | "--diff")) {
        return Some(format!(
            "`{flag}` is not an option of upgrade: `upgrade --inventory FILE --plan` prints what would be done \
             without contacting any host, and `upgrade plan --live --inventory FILE` reads the cluster and shows \
             what would happen, changing nothing"
        ));
    }
    let first = words.first()?;
    let is_path = !first.starts_with('-') && std::path::Path::new(first).exists();
    is_path.then(|| format!("to upgrade from this inventory, name it with --inventory: `upgrade --inventory {first}`"))
}

/// The error that ends the command, with every value decrypted from Ansible Vault masked.
fn report_error(err: &Error) {
    errln!("error: {}", redact::Redactor::decrypted().error(err.clone()));
}
