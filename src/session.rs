//! A run context for the commands that talk to the cluster but upgrade nothing (`upgrade plan --live`,
//! `upgrade unlock`): the inventory, the plan and the connections of an upgrade, the built-in step files in a
//! temporary directory, and a journal that keeps nothing (they leave nothing to resume and take no state-directory
//! lock, so they run beside an upgrade).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::error::{Error, Result};
use crate::events::SharedSink;
use crate::inventory::{Inventory, Vars};
use crate::journal::{DEFAULT_STATE_DIR, History, Journal};
use crate::phase::batches::stop_signal;
use crate::phase::run::{RunOptions, RunParts, UpgradeRun, WriteFailures};
use crate::plan::{Plan, PlanRequest};
use crate::settings::{OutputFormat, TargetVersion};
use crate::tasks::connect::{ConnectOptions, ConnectionPool};
use crate::tasks::engine::EngineOptions;

/// What an upgrade (or its live plan, or `unlock`) is asked to do: the command line as plain values.
#[derive(Debug, Clone, Default)]
pub struct UpgradeRequest {
    pub plan: PlanRequest,
    pub output: OutputFormat,
    pub allow_skip_minor: bool,
    /// `--ignore-maintenance-window`, `--wait-for-window`.
    pub window: crate::phase::run::WindowOverride,
    /// Where the journal, lock and host logs live; `None`: `.upgrade-state` next to the inventory.
    pub state_dir: Option<PathBuf>,
    /// Ignore the journal of an earlier run.
    pub fresh: bool,
    pub rollback_blue_green: bool,
    /// After a first interrupt, how long hosts in flight may take to finish their sequence.
    pub grace_period: Duration,
    pub junit: Option<PathBuf>,
    /// `--summary-md FILE`: the Markdown summary for CI.
    pub summary_md: Option<PathBuf>,
}

/// What every command that reaches hosts shares, built once by `commands` from the command line: the runtime, how
/// to connect, and how tasks run (`--yes`, `-v`, the terminal's prompter).
pub struct Remote {
    pub runtime: tokio::runtime::Runtime,
    pub connect: ConnectOptions,
    pub engine: EngineOptions,
}

pub(crate) struct Session {
    pub runtime: tokio::runtime::Runtime,
    pub run: Arc<UpgradeRun>,
    pub inventory: Arc<Inventory>,
    /// The target when one is set (a plan needs it; unlock does not).
    pub target: Option<TargetVersion>,
    _playbooks: tempfile::TempDir,
}

impl Session {
    /// Loads and checks everything as an upgrade does (bad input: exit 2, nothing touched), connecting to nothing yet.
    pub(crate) fn open(
        request: &UpgradeRequest,
        inventory: Inventory,
        extra: Vars,
        remote: Remote,
        sink: SharedSink,
    ) -> Result<Session> {
        let Remote { runtime, connect, engine } = remote;
        let plan = Plan::build_for_run(&inventory, &extra, &request.plan)?;
        let target = plan.settings.target_version.value.clone();
        let playbooks_dir = tempfile::Builder::new()
            .prefix("upgrade-playbooks-")
            .tempdir()
            .map_err(|e| Error::internal(format!("cannot create a temporary directory: {e}")))?;
        let playbooks = crate::playbooks::materialize(playbooks_dir.path())?;
        let state_dir = request.state_dir.clone().unwrap_or_else(|| inventory.dir.join(DEFAULT_STATE_DIR));
        let hosts = crate::inventory::host_vars_json(&inventory, &extra);
        let redactor = Arc::new(crate::redact::Redactor::from_hosts(&hosts));
        let (stop_handle, stop) = stop_signal();
        let write_failures = Arc::new(WriteFailures::new(Arc::new(stop_handle), sink.clone()));
        let inventory = Arc::new(inventory);
        let run = Arc::new(UpgradeRun::new(RunParts {
            inventory: inventory.clone(),
            plan,
            // Unlock needs no target; the templates that read it are not run then.
            target: target.clone().unwrap_or_else(|| TargetVersion {
                major: 0,
                minor: 0,
                patch: 0,
                suffix: String::new(),
            }),
            extra,
            pool: Arc::new(ConnectionPool::new(hosts, connect.clone())),
            engine_options: engine,
            sink,
            playbooks,
            journal: Journal::detached()?,
            history: History::default(),
            stop,
            options: RunOptions {
                allow_skip_minor: request.allow_skip_minor,
                window: request.window,
                connect_timeout: connect.connect_timeout,
                state_dir: state_dir.canonicalize().unwrap_or(state_dir),
            },
            write_failures,
            redactor,
        }));
        Ok(Session { runtime, run, inventory, target, _playbooks: playbooks_dir })
    }

    /// Closes the connections.
    pub(crate) fn close(self) {
        let run = self.run.clone();
        self.runtime.block_on(async move { run.close().await });
    }
}
