//! The modules: each turns its (templated) arguments into commands on the host and returns Ansible's result fields.
//! One file per family: `command` (command, shell, script), `files` (copy, template, fetch, stat), `facts` (debug,
//! assert, fail, set_fact), `wait` (pause, wait_for, reboot, wait_for_connection), `file`, `service` (service,
//! systemd, systemd_service), `lineinfile` (and the write-back `blockinfile` shares), `blockinfile`, `uri`,
//! `get_url`, `vars_files` (slurp, include_vars), `packages` (package, apt, yum, dnf), `async_jobs` (async/poll, async_status); `context` is what they
//! run with. `meta` and `import_role`/`include_role` are run by the engine (they act on the run, not on a host).
//!
//! Every command goes through `ModuleContext::exec`, which adds the task's `environment` and wraps it for `become`,
//! so the connection below only moves bytes. The layers: `model` below, `modules` here, `engine` above; nothing
//! here imports the engine.

mod ansible_core;
mod async_jobs;
mod async_run;
mod async_status;
mod blockinfile;
mod command;
mod common;
mod context;
mod facts;
mod file;
mod files;
mod get_url;
mod lineinfile;
mod packages;
mod service;
mod uri;
mod vars_files;
mod wait;

use serde_json::{Map, Value};

use super::Vars;
use super::model::{CheckMode, Module, ModuleCall};
pub use ansible_core::AnsibleCore;
pub use async_jobs::AsyncJobs;
pub use async_run::run_async;
use command::{command, script};
use common::ModuleResult;
pub(crate) use common::failed;
pub use common::{EngineOptions, NO_TRACEBACK, Prompter, delta, resolve_local, timestamp};
pub use context::{BECOME_PROMPT, BecomePassword, ModuleContext};
use facts::{assert, debug, fail, set_fact};
pub use files::sha1_hex;
use files::{copy, fetch, stat, template};
use wait::{pause, reboot, wait_for, wait_for_connection};

pub async fn run(ctx: &ModuleContext, module: Module, args: &Map<String, Value>, vars: &Vars) -> ModuleResult {
    if ctx.check_mode {
        match module.check_mode() {
            CheckMode::Runs => {}
            CheckMode::Skips(result) => return Ok(result),
            CheckMode::ThroughAnsibleCore => {
                let call = ModuleCall { module, args: args.clone() }.through_ansible_core(module.name());
                return ansible_core::run(ctx, &call.args, vars).await;
            }
            CheckMode::Unsupported => {
                return Ok(failed(format!("`{}` cannot run in check mode here (`check_mode: true`)", module.name())));
            }
        }
    }
    match module {
        Module::Command => command(ctx, args, false).await,
        Module::Shell => command(ctx, args, true).await,
        Module::Script => script(ctx, args).await,
        Module::Copy => copy(ctx, args, None).await,
        Module::Template => template(ctx, args, vars).await,
        Module::Fetch => fetch(ctx, args).await,
        Module::Debug => Ok(debug(ctx, args, vars)),
        Module::Pause => Ok(pause(ctx, args).await),
        Module::Assert => Ok(assert(ctx, args, vars)),
        Module::Fail => Ok(fail(args)),
        Module::SetFact => Ok(set_fact(args)),
        Module::WaitFor => wait_for(ctx, args).await,
        Module::Stat => stat(ctx, args).await,
        Module::Reboot => reboot(ctx, args).await,
        Module::WaitForConnection => wait_for_connection(ctx, args).await,
        Module::File => file::file(ctx, args).await,
        Module::Service | Module::Systemd | Module::SystemdService => service::systemd(ctx, args).await,
        Module::Uri => uri::uri(ctx, args).await,
        Module::AsyncStatus => Ok(async_status::async_status(ctx, args)),
        Module::Lineinfile => lineinfile::lineinfile(ctx, args).await,
        Module::Blockinfile => blockinfile::blockinfile(ctx, args).await,
        Module::GetUrl => get_url::get_url(ctx, args).await,
        Module::Slurp => vars_files::slurp(ctx, args).await,
        Module::IncludeVars => Ok(vars_files::include_vars(ctx, args)),
        Module::Package => packages::package(ctx, args, vars).await,
        Module::Apt => packages::apt(ctx, args).await,
        Module::Yum | Module::Dnf => packages::dnf(ctx, args).await,
        Module::AnsibleCore => ansible_core::run(ctx, args, vars).await,
        // The engine runs `meta` itself (it acts on the run, not on the host); nothing reaches here.
        Module::Meta | Module::ImportRole | Module::IncludeRole => Ok(failed("run by the engine")),
    }
}
