//! Ansible task files: the model, templating, modules and the engine that runs them on a host.

pub mod template;

use crate::cli::{CheckArgs, RunTasksArgs};
use crate::error::{Error, Result};

/// `upgrade check`: validates inventory, settings and task files without connecting.
pub fn check_command(_args: &CheckArgs) -> Result<i32> {
    Err(Error::internal("check is not implemented yet"))
}

/// `upgrade run-tasks FILE`: runs one task file on inventory hosts.
pub fn run_tasks_command(_args: &RunTasksArgs) -> Result<i32> {
    Err(Error::internal("run-tasks is not implemented yet"))
}
