//! The commands: with cli.rs and lib.rs, the only code that knows the command line. Each turns its arguments into
//! the plain requests the domain takes. The inventory with `-e`, the async runtime and the connection options are
//! built here, one way for every command.

mod arguments;
mod artifacts;
mod check;
mod check_apis;
mod pause;
mod plan;
mod report;
mod restore;
mod run_tasks;
mod status;
mod unlock;
mod upgrade;
mod vault;
mod versions;

use crate::cli::{Cli, Command};
use crate::error::{Error, Result};

/// Runs the command the command line names and returns its exit code; an error is rendered by `lib::run`.
pub(crate) fn run(cli: &Cli) -> Result<i32> {
    match &cli.command {
        Some(Command::Check(args)) => check::check(args),
        Some(Command::CheckApis(args)) => check_apis::check_apis(args),
        Some(Command::RunTasks(args)) => run_tasks::run_tasks(args),
        Some(Command::Restore(args)) => restore::restore(args),
        Some(Command::Plan(args)) => plan::plan(args),
        Some(Command::Unlock(args)) => unlock::unlock(args),
        Some(Command::Pause(args)) => pause::pause(args, true),
        Some(Command::Resume(args)) => pause::pause(args, false),
        Some(Command::Status(args)) => status::status(args),
        Some(Command::Report(args)) => report::report(args),
        Some(Command::Versions(args)) => versions::versions(args),
        Some(Command::Artifacts(args)) => artifacts::artifacts(args),
        None if cli.upgrade.live && !cli.upgrade.plan => Err(Error::input("--live is a kind of plan").hint(
            "write `upgrade plan --live --inventory X` (or --plan --live): it reads the cluster and changes nothing",
        )),
        None if cli.upgrade.plan => plan::plan(&cli.upgrade),
        None => upgrade::upgrade(&cli.upgrade),
    }
}
