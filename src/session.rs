//! A run context for the commands that talk to the cluster but upgrade nothing (`upgrade plan --live`,
//! `upgrade unlock`): the inventory, the plan and the connections of an upgrade, the built-in step files in a
//! temporary directory, and a journal that keeps nothing (they leave nothing to resume and take no state-directory
//! lock, so they run beside an upgrade).

use std::sync::Arc;
use std::time::Duration;

use crate::cli::UpgradeArgs;
use crate::error::{Error, Result};
use crate::events::SharedSink;
use crate::inventory::{Inventory, parse_extra_vars};
use crate::journal::{DEFAULT_STATE_DIR, History, Journal};
use crate::phase::batches::stop_signal;
use crate::phase::run::{RunOptions, RunParts, UpgradeRun, WriteFailures};
use crate::plan::Plan;
use crate::settings::TargetVersion;
use crate::tasks::connect::{ConnectOptions, ConnectionPool};
use crate::tasks::engine::EngineOptions;

pub struct Session {
    pub runtime: tokio::runtime::Runtime,
    pub run: Arc<UpgradeRun>,
    pub inventory: Arc<Inventory>,
    /// The target when one is set (a plan needs it; unlock does not).
    pub target: Option<TargetVersion>,
    _playbooks: tempfile::TempDir,
}

impl Session {
    /// Loads and checks everything as an upgrade does (bad input: exit 2, nothing touched), connecting to nothing yet.
    pub fn open(args: &UpgradeArgs, sink: SharedSink) -> Result<Session> {
        let path = args.inventory.inventory.as_ref().ok_or_else(|| Error::input("--inventory is required"))?;
        let inventory = Inventory::load(path)?;
        let cwd = std::env::current_dir().unwrap_or_default();
        let extra = parse_extra_vars(&args.inventory.extra_vars, &cwd)?;
        let plan = Plan::build_for_run(&inventory, &extra, args)?;
        let target = plan.settings.target_version.value.clone();
        let playbooks_dir = tempfile::Builder::new()
            .prefix("upgrade-playbooks-")
            .tempdir()
            .map_err(|e| Error::internal(format!("cannot create a temporary directory: {e}")))?;
        let playbooks = crate::playbooks::materialize(playbooks_dir.path())?;
        let state_dir = args.state_dir.clone().unwrap_or_else(|| inventory.dir.join(DEFAULT_STATE_DIR));
        let runtime = crate::tasks::async_runtime()?;
        let hosts = crate::inventory::host_vars_json(&inventory, &extra);
        let connect = ConnectOptions {
            connect_timeout: Duration::from_secs(args.run.connect_timeout),
            accept_new_host_keys: args.run.accept_new_host_keys,
            command_timeout: None,
        };
        let redactor = Arc::new(crate::redact::Redactor::from_hosts(&hosts));
        let (stop_handle, stop) = stop_signal();
        let write_failures = Arc::new(WriteFailures::new(Arc::new(stop_handle), sink.clone()));
        let inventory = Arc::new(inventory);
        let run = Arc::new(UpgradeRun::new(RunParts {
            inventory: inventory.clone(),
            plan,
            // Unlock needs no target; the templates that read it are not run then.
            target: target.clone().unwrap_or_else(|| TargetVersion::parse("0.0.0").expect("a valid version")),
            extra,
            pool: Arc::new(ConnectionPool::new(hosts, connect.clone())),
            engine_options: EngineOptions {
                assume_yes: args.run.yes,
                verbosity: args.run.verbose,
                command_timeout: None,
                prompter: crate::tasks::terminal_prompter(),
                whole_stdout: false,
            },
            sink,
            playbooks,
            journal: Journal::detached()?,
            history: History::default(),
            stop,
            options: RunOptions {
                allow_skip_minor: args.allow_skip_minor,
                connect_timeout: connect.connect_timeout,
                state_dir: state_dir.canonicalize().unwrap_or(state_dir),
            },
            write_failures,
            redactor,
        }));
        Ok(Session { runtime, run, inventory, target, _playbooks: playbooks_dir })
    }

    /// Closes the connections.
    pub fn close(self) {
        let run = self.run.clone();
        self.runtime.block_on(async move { run.close().await });
    }
}
