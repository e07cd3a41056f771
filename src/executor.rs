//! Carries out a plan: loads and checks everything first (bad input touches nothing), takes the lock, then runs the
//! phases in order and says, at the end, what was done and what is left. It never prints: reporters do.

use crate::console::errln;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use crate::error::{Error, Result};
use crate::events::SharedSink;
use crate::inventory::{Inventory, Vars};
use crate::journal::{DEFAULT_STATE_DIR, History, Journal, RunLock};
use crate::phase::batches::{StopHandle, StopSignal, stop_signal};
use crate::phase::manager::{self, preflight_failed};
use crate::phase::run::{RunOptions, RunParts, UpgradeRun, WriteFailures};
use crate::plan::expected::{Estimate, phase_batches};
use crate::plan::{Plan, plan_text, plan_text_brief};
use crate::redact::Redactor;
use crate::redact::sink::Redacting;
use crate::report::eta::Eta;
use crate::report::notify::{self, Notifier, NotifySettings};
use crate::report::output::OutputQueue;
use crate::report::{FanOut, files::ReportFiles, human::HumanReporter, json::JsonReporter, log::HostLogReporter};
use crate::session::{Remote, UpgradeRequest};
use crate::settings::{OutputFormat, TargetVersion};
use crate::strategy::final_soak;
use crate::strategy::{blue_green, hops, rollback};
use crate::tasks::connect::ConnectionPool;
use crate::tasks::engine::EngineOptions;
use crate::vocabulary::{ExitCode, Halt, Phase, StopReason, Summary};

/// How often the steps in flight are compared with their usual time.
const STALL_CHECK: Duration = Duration::from_secs(1);

/// How long the end of a run waits for its notifications to be sent (two receivers' timeouts and a margin).
const NOTIFY_FINISH: Duration = Duration::from_secs(2 * notify::TIMEOUT.as_secs() + 5);

/// `upgrade --inventory X`: the upgrade itself.
/// `reports`: the report files, opened before the inventory was read; written here once the run has a summary.
pub(crate) fn upgrade(
    request: &UpgradeRequest,
    inventory: Inventory,
    extra: Vars,
    remote: Remote,
    reports: &ReportFiles,
) -> Result<i32> {
    let Remote { runtime, connect, engine: engine_options } = remote;
    let started = std::time::Instant::now();
    let plan = Plan::build_for_run(&inventory, &extra, &request.plan)?;
    let target = target_of(&plan, request, &inventory)?;
    check_hook_files(&plan, &crate::tasks::ansible_core_of(&inventory, &extra))?;
    blue_green::check_surge_hooks(&plan)?;

    let hosts = crate::inventory::host_vars_json(&inventory, &extra);
    let notify = NotifySettings::read(&hosts, plan.masters.first().map(String::as_str), &inventory.path)?;

    let state_dir = request.state_dir.clone().unwrap_or_else(|| inventory.dir.join(DEFAULT_STATE_DIR));
    let mut lock = match RunLock::acquire(&state_dir) {
        Ok(lock) => lock,
        // A run of this state directory in its blue-green final soak rolls back itself when asked.
        Err(e) if request.rollback_blue_green => match ask_the_soaking_run(&state_dir, e)? {
            Some(lock) => lock,
            None => return Ok(ExitCode::Success.code()),
        },
        Err(e) => return Err(e),
    };
    // A soak a killed run left is over: its marker and any request left for it mean nothing now.
    let _ = std::fs::remove_file(final_soak::marker(&state_dir));
    let _ = std::fs::remove_file(final_soak::request(&state_dir));
    let (journal, history) = Journal::open(&state_dir, request.fresh)?;
    lock.name_run(journal.run_id())?;
    let playbooks = crate::playbooks::materialize(&state_dir.join("playbooks"))?;

    // Past this point every return goes through `drain_output`.
    let Reporting { redactor, stdout, sink, write_failures, stop_handle, stop, notifier } =
        reporting(request, &plan, &inventory, &hosts, &state_dir, engine_options.verbosity, notify);

    let base = RunBase {
        inventory: Arc::new(inventory),
        plan,
        extra,
        pool: Arc::new(ConnectionPool::new(hosts, connect.clone())),
        engine_options,
        sink: sink.clone(),
        playbooks,
        options: RunOptions {
            allow_skip_minor: request.allow_skip_minor,
            window: request.window,
            connect_timeout: connect.connect_timeout,
            state_dir: state_dir.canonicalize().unwrap_or_else(|_| state_dir.clone()),
        },
        write_failures,
        redactor: redactor.clone(),
    };
    let (summary, error) =
        runtime.block_on(carry_out(request, &base, &journal, history, &target, stop_handle, stop, &stdout));
    drop(lock);
    // The run's end reaches the receivers (each has its own timeout), bounded: a dead receiver never holds the exit.
    if let Some(notifier) = &notifier {
        notifier.finish(NOTIFY_FINISH);
    }
    // The reports are written whatever happened, a failed preflight included: CI reads them either way.
    let redacted = redactor.summary(&summary);
    let warnings = reports.write(&redacted, started.elapsed(), &base.options.state_dir);
    drain_output(&stdout, OUTPUT_DRAIN_IDLE);
    // The exit code stays the summary's, which the output has already said: a report that could not be written
    // (its file was opened before the run, so only a full disk does that) is a warning.
    for warning in warnings {
        errln!("warning: {}", redactor.text(&warning));
    }
    match error {
        Some(e) => Err(redactor.error(e)),
        None => Ok(summary.exit_code().code()),
    }
}

/// The version the run goes to: the plan's, none for a rollback (it goes back to what ran before), else refused.
fn target_of(plan: &Plan, request: &UpgradeRequest, inventory: &Inventory) -> Result<TargetVersion> {
    match plan.settings.target_version.value.clone() {
        Some(target) => Ok(target),
        // A rollback goes back to what ran before: it needs no target (journal entries say v0.0.0).
        None if request.rollback_blue_green => {
            Ok(TargetVersion { major: 0, minor: 0, patch: 0, suffix: String::new() })
        }
        None => {
            let hint = if plan.flavor.flavor == crate::flavor::Flavor::Openshift {
                let passed = if plan.target_passed_over.is_empty() {
                    String::new()
                } else {
                    format!(" ({} names no 3.11.z)", plan.target_passed_over.join(", "))
                };
                format!(
                    "set upgrade_target_version (or openshift_pkg_version=-3.11.z, openshift_image_tag=v3.11.z) in \
                     the inventory, or pass --target-version{passed}"
                )
            } else {
                "set upgrade_target_version in the inventory, or pass --target-version (e.g. v1.29.1)".to_string()
            };
            Err(Error::input("no target version").in_file(&inventory.path).hint(hint))
        }
    }
}

/// How the run is told: the secrets masked first, the terminal or JSON reporter, the host logs, and the failures to
/// write the state directory, which stop the run through the stop signal made here.
struct Reporting {
    redactor: Arc<Redactor>,
    stdout: OutputQueue,
    sink: SharedSink,
    write_failures: Arc<WriteFailures>,
    stop_handle: Arc<StopHandle>,
    stop: StopSignal,
    /// `upgrade_notify_command` / `upgrade_notify_webhook_url`, when set.
    notifier: Option<Arc<Notifier>>,
}

fn reporting(
    request: &UpgradeRequest,
    plan: &Plan,
    inventory: &Inventory,
    hosts: &crate::inventory::HostVarsJson,
    state_dir: &Path,
    verbosity: u8,
    notify: NotifySettings,
) -> Reporting {
    let redactor = Arc::new(Redactor::from_hosts(hosts));
    let stdout = OutputQueue::stdout();
    // The usual times of this inventory's earlier runs: the expected duration, the time left and the stalls.
    let estimate = Estimate::from_state_dir(state_dir);
    let expected = estimate.plan(plan);
    let eta = Arc::new(Eta::new(estimate, phase_batches(plan)));
    let primary: SharedSink = match request.output {
        OutputFormat::Text => {
            // Only text mode prints the plan: in JSON mode stdout carries JSON lines and nothing else.
            if !request.rollback_blue_green {
                // The hooks once per set of hosts sharing them; every host's with -v (and with --plan).
                let text = if verbosity > 0 { plan_text(plan, inventory) } else { plan_text_brief(plan, inventory) };
                let _ = writeln!(stdout.writer(), "{}{}", redactor.text(&text), expected.line());
            }
            let state_dir = state_dir.canonicalize().unwrap_or_else(|_| state_dir.to_path_buf());
            Arc::new(HumanReporter::for_terminal(verbosity, &stdout).with_state_dir(&state_dir).with_eta(eta.clone()))
        }
        OutputFormat::Json => Arc::new(JsonReporter::new(stdout.writer()).with_eta(eta.clone())),
    };
    let (stop_handle, stop) = stop_signal();
    let stop_handle = Arc::new(stop_handle);
    // Secrets are masked before any reporter sees an event, the state directory's failure notices included (they
    // go to the primary reporter alone: the host logs may be what cannot be written).
    let say_failures: SharedSink = Arc::new(Redacting { redactor: redactor.clone(), inner: primary.clone() });
    let write_failures = Arc::new(WriteFailures::new(stop_handle.clone(), say_failures));
    let log_failures = write_failures.clone();
    let host_logs: SharedSink = Arc::new(HostLogReporter::new(
        &state_dir.join("logs"),
        Box::new(move |path, error| log_failures.failed("the host log", path, error)),
    ));
    // The time left is brought up to date before any reporter shows the event.
    let eta_sink: SharedSink = eta.clone();
    let mut sinks = vec![eta_sink, primary, host_logs];
    let notifier = notify.any().then(|| Notifier::start(notify));
    if let Some(notifier) = &notifier {
        sinks.push(notifier.clone());
    }
    let sink: SharedSink = Arc::new(Redacting { redactor: redactor.clone(), inner: Arc::new(FanOut(sinks)) });
    // A step that stalls is said in every output (the reporters, the host log, the notifications), once.
    eta.watch_stalls(Arc::downgrade(&sink), STALL_CHECK);
    if let Some(notifier) = &notifier {
        notifier.say_through(Arc::downgrade(&sink));
    }
    Reporting { redactor, stdout, sink, write_failures, stop_handle, stop, notifier }
}

/// `--rollback-blue-green` while another process holds the state directory: when that run is in its blue-green final
/// soak (its marker is there), the rollback is left to it as a request, and this waits until it is answered (`None`)
/// or the lock comes free (the soak ended first: the rollback then runs here). Otherwise the lock's own refusal.
fn ask_the_soaking_run(state_dir: &Path, refused: Error) -> Result<Option<RunLock>> {
    const WAIT: Duration = Duration::from_secs(180);
    let (marker, request) = (final_soak::marker(state_dir), final_soak::request(state_dir));
    let Ok(soak) = std::fs::read_to_string(&marker) else { return Err(refused) };
    std::fs::write(&request, "").map_err(|e| {
        Error::input(format!("cannot ask the soaking run to roll back: {}: {e}", request.display()))
            .hint("run --rollback-blue-green with another --state-dir, or once the soak is over")
    })?;
    errln!(
        "the run in its blue-green final soak ({}) was asked to give the workload back to the blue nodes",
        soak.trim()
    );
    let started = std::time::Instant::now();
    while started.elapsed() < WAIT {
        std::thread::sleep(Duration::from_millis(500));
        if !request.exists() {
            errln!("done: the soaking run gave the workload back to the blue nodes (its output says how each moved)");
            return Ok(None);
        }
        if let Ok(lock) = RunLock::acquire(state_dir) {
            return Ok(Some(lock));
        }
    }
    let _ = std::fs::remove_file(&request);
    Err(Error::hosts_failed(format!("the soaking run did not answer the rollback request within {}s", WAIT.as_secs()))
        .hint("run --rollback-blue-green again once that run has ended, or with another --state-dir"))
}

/// The run itself, under one watcher of the signals: every hop of the update path, or the blue-green rollback; then
/// the connections closed.
#[allow(clippy::too_many_arguments)]
async fn carry_out(
    request: &UpgradeRequest,
    base: &RunBase,
    journal: &Journal,
    history: History,
    target: &TargetVersion,
    stop_handle: Arc<StopHandle>,
    stop: StopSignal,
    stdout: &OutputQueue,
) -> (Summary, Option<Error>) {
    let grace = request.grace_period;
    // One watcher for the whole invocation (every hop of an update path, or the rollback): it speaks through the
    // run context in progress, and its stop is the one every hop and the write failures share.
    let current = Arc::new(CurrentRun::default());
    let signals = tokio::spawn(watch_signals(stop_handle, current.clone(), grace, stdout.clone()));
    let result = if request.rollback_blue_green {
        match base.run(target.clone(), journal, history, stop.clone()) {
            Ok(run) => {
                let run = current.set(run);
                let (mut summary, error) = rollback::rollback(&run).await;
                summary.interrupted |= run.was_interrupted();
                if let Some(failure) = run.recorder.write_failures.failure() {
                    summary.state_error = Some(failure.clone());
                }
                (summary, error)
            }
            Err(e) => (Summary { stopped: Some(preflight_failed(&e)), ..Summary::empty(target.to_string()) }, Some(e)),
        }
    } else {
        run_hops(base, journal, history, target, &stop, &current).await
    };
    signals.abort();
    match current.get() {
        // Also kills the commands cut at the end of the grace period before the connections close.
        Some(run) => run.close().await,
        None => base.pool.close_all().await,
    }
    result
}

/// Before exiting, queued output is written for as long as the reader keeps taking it; a reader that takes
/// nothing for this long is given up on (the run itself is over by then).
const OUTPUT_DRAIN_IDLE: Duration = Duration::from_secs(30);
/// The same after a second interrupt: the operator asked to exit now.
const OUTPUT_DRAIN_IDLE_ON_EXIT: Duration = Duration::from_secs(10);

fn drain_output(stdout: &OutputQueue, idle: Duration) {
    let unwritten = stdout.drain(idle);
    if unwritten > 0 {
        errln!(
            "warning: stdout was not read for {}s: the last {unwritten} bytes of output were not written",
            idle.as_secs()
        );
    }
}

/// What every run context of one invocation shares (one per hop of an update path).
struct RunBase {
    inventory: Arc<Inventory>,
    plan: Plan,
    extra: crate::inventory::Vars,
    pool: Arc<ConnectionPool>,
    engine_options: EngineOptions,
    sink: SharedSink,
    playbooks: PathBuf,
    options: RunOptions,
    /// One for the invocation: a journal or log write that fails in one hop stops the hops after it.
    write_failures: Arc<WriteFailures>,
    redactor: Arc<Redactor>,
}

impl RunBase {
    fn run(&self, target: TargetVersion, journal: &Journal, history: History, stop: StopSignal) -> Result<UpgradeRun> {
        let mut extra = self.extra.clone();
        if self.plan.settings.target_version.value.as_ref() != Some(&target) {
            // A hop of an update path: its own target, not the final one a `-e` gave, is what its steps see.
            extra.shift_remove("upgrade_target_version");
        }
        Ok(UpgradeRun::new(RunParts {
            inventory: self.inventory.clone(),
            plan: self.plan.clone(),
            target,
            extra,
            pool: self.pool.clone(),
            engine_options: self.engine_options.clone(),
            sink: self.sink.clone(),
            playbooks: self.playbooks.clone(),
            journal: journal.try_clone()?,
            history,
            stop,
            options: self.options.clone(),
            write_failures: self.write_failures.clone(),
            redactor: self.redactor.clone(),
        }))
    }
}

/// The run context in progress (the update path's probe, a hop, the rollback), for the signal watcher, which lives
/// as long as the invocation. An interrupt is remembered, so a context made after it (the next hop is not started,
/// but the probe's successor may be) still says the run was interrupted.
#[derive(Default)]
struct CurrentRun {
    run: std::sync::Mutex<Option<Arc<UpgradeRun>>>,
    interrupted: std::sync::atomic::AtomicBool,
}

impl CurrentRun {
    fn set(&self, run: UpgradeRun) -> Arc<UpgradeRun> {
        let run = Arc::new(run);
        if self.interrupted.load(std::sync::atomic::Ordering::SeqCst) {
            run.mark_interrupted();
        }
        if let Ok(mut slot) = self.run.lock() {
            *slot = Some(run.clone());
        }
        run
    }

    fn get(&self) -> Option<Arc<UpgradeRun>> {
        self.run.lock().ok().and_then(|slot| slot.clone())
    }

    fn mark_interrupted(&self) {
        self.interrupted.store(true, std::sync::atomic::Ordering::SeqCst);
        if let Some(run) = self.get() {
            run.mark_interrupted();
        }
    }
}

/// Runs the phases once per hop: once for the target, or, with an update graph, once per edge of the path to it.
/// A hop that does not succeed ends the run; a re-run continues in that hop. Every hop shares the invocation's stop:
/// a signal or a state directory that cannot be written, even between two hops, starts no further hop.
async fn run_hops(
    base: &RunBase,
    journal: &Journal,
    history: History,
    target: &TargetVersion,
    stop: &StopSignal,
    current: &CurrentRun,
) -> (Summary, Option<Error>) {
    let failed = |e: Error| {
        let summary = Summary { stopped: Some(preflight_failed(&e)), ..Summary::empty(target.to_string()) };
        (summary, Some(e))
    };
    let hops = match &base.plan.strategy.update_graph {
        None => None,
        Some(graph) => {
            let probe = match base.run(target.clone(), journal, history.clone(), stop.clone()) {
                Ok(probe) => current.set(probe),
                Err(e) => return failed(e),
            };
            match hops::decide(&probe, &graph.value, target).await {
                Ok(hops) => Some(hops),
                Err(e) => return failed(e),
            }
        }
    };
    let hops = hops.filter(|h| h.len() > 1 || h.first().is_some_and(|h| h.total > 1));
    if hops.as_ref().is_some_and(|h| h.len() > 1)
        && base.plan.strategy.blue_green.enabled()
        && base.plan.has_phase(Phase::Nodes)
    {
        return failed(
            Error::input(format!("blue-green nodes cannot follow an update path of several hops to {target}"))
                .in_file(&base.inventory.path)
                .hint(
                    "walk the path with the control plane first (--phase etcd-backup,control-plane,verify), then run \
                     the blue-green nodes phase at the final target",
                ),
        );
    }
    let Some(hops) = hops else {
        let run = match base.run(target.clone(), journal, history, stop.clone()) {
            Ok(run) => current.set(run),
            Err(e) => return failed(e),
        };
        return manager::run(&run, stop).await;
    };
    let mut all: Option<Summary> = None;
    let mut history = Some(history);
    for hop in hops {
        if let Some(mut done) = all.take().filter(|_| stop.is_stopping()) {
            // The hops before succeeded, then a signal or a failed write asked the run to stop: it ends here, and a
            // re-run starts at this hop.
            let last = current.get();
            let halt = last.as_ref().map_or(Halt::Interrupted, |run| run.halt());
            let stopped = StopReason::BetweenHops { halt, next: hop.target.to_string(), target: target.to_string() };
            if let Some(run) = &last {
                run.notice(None, stopped.to_string());
                done.interrupted |= run.was_interrupted();
            }
            done.state_error = base.write_failures.failure().cloned();
            done.stopped = Some(stopped);
            return (done, None);
        }
        // Each hop reads the journal as the hops before it left it.
        let known = match history.take().map_or_else(|| journal.history(), Ok) {
            Ok(known) => known,
            Err(e) => return failed(e),
        };
        let run = match base.run(hop.target.clone(), journal, known, stop.clone()) {
            Ok(run) => current.set(run),
            Err(e) => return failed(e),
        };
        if let Ok(mut through) = run.api_removals_through.lock() {
            *through = Some(target.clone());
        }
        run.record(hop.journal_entry(&run, target));
        run.notice(None, format!("update path to {target}: {}", hop.describe()));
        let (summary, error) = manager::run(&run, stop).await;
        let ok = error.is_none() && summary.exit_code() == ExitCode::Success;
        let merged = match all.take() {
            None => summary,
            Some(mut earlier) => {
                earlier.hosts.extend(summary.hosts);
                earlier.api_removals_acknowledged.extend(summary.api_removals_acknowledged);
                let acknowledged = earlier.api_removals_acknowledged;
                Summary {
                    hosts: earlier.hosts,
                    target: target.to_string(),
                    api_removals_acknowledged: acknowledged,
                    ..summary
                }
            }
        };
        if !ok {
            return (merged, error);
        }
        all = Some(merged);
    }
    (all.unwrap_or_else(|| failed(Error::internal("the update path has no hop")).0), None)
}

/// Every hook file must be a valid task list before anything is touched.
fn check_hook_files(plan: &Plan, ansible: &crate::tasks::modules::AnsibleCore) -> Result<()> {
    let mut seen = std::collections::BTreeSet::new();
    for hooks in plan.hooks.values().chain(std::iter::once(&plan.cluster_hooks)) {
        for hook in hooks.values() {
            if !seen.insert(hook.path.clone()) {
                continue;
            }
            let errors = crate::tasks::check_task_file_with_notes(&hook.path, &[], ansible).errors;
            if let Some(first) = errors.into_iter().next() {
                return Err(first.hint(format!(
                    "fix the hook file named by {} ({}); `upgrade check` lists every problem",
                    hook.variable, hook.origin
                )));
            }
        }
    }
    Ok(())
}

/// The first SIGINT or SIGTERM stops starting new hosts; hosts in flight finish their sequence, for at most `grace`:
/// then they stop at their next safe point. A second signal exits at once: the journal is already on disk, entry by
/// entry, and gets a last line saying the run was interrupted.
async fn watch_signals(stop: Arc<StopHandle>, current: Arc<CurrentRun>, grace: Duration, stdout: OutputQueue) {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut int), Ok(mut term)) = (signal(SignalKind::interrupt()), signal(SignalKind::terminate())) else {
        return;
    };
    let mut received = 0;
    let grace_over = tokio::time::sleep(Duration::MAX / 4);
    tokio::pin!(grace_over);
    loop {
        tokio::select! {
            _ = int.recv() => {},
            _ = term.recv() => {},
            _ = &mut grace_over, if received == 1 => {
                stop.abort();
                if let Some(run) = current.get() { run.notice(
                    None,
                    format!(
                        "the grace period ({}s) is over: hosts in flight stop at their next safe point; nodes cordoned \
                         but not yet upgraded are uncordoned",
                        grace.as_secs()
                    ),
                ); }
                // Only once.
                grace_over.as_mut().reset(tokio::time::Instant::now() + Duration::from_secs(86_400 * 365));
                continue;
            }
        }
        received += 1;
        if received == 1 {
            current.mark_interrupted();
            stop.stop();
            grace_over.as_mut().reset(tokio::time::Instant::now() + grace);
            if let Some(run) = current.get() {
                run.notice(
                    None,
                    format!(
                        "interrupted: no new host starts; hosts in flight finish their sequence within {}s \
                     (--grace-period), then stop at a safe point (interrupt again to exit at once)",
                        grace.as_secs()
                    ),
                );
            }
        } else {
            if let Some(run) = current.get() {
                run.end_now("interrupted again: exiting now; re-run the same command to resume");
            }
            // What the reporters queued is written first, in order, unless the reader has stopped reading. The wait
            // blocks this thread for up to OUTPUT_DRAIN_IDLE_ON_EXIT: the runtime is told, so the tasks queued on this
            // worker move to another one instead of stalling with it (they start nothing new: see `end_now`).
            tokio::task::block_in_place(|| drain_output(&stdout, OUTPUT_DRAIN_IDLE_ON_EXIT));
            // Commands already running on hosts end on their own (a re-run starts those hosts' sequences again).
            // The run lock is let go by the kernel as the process ends.
            std::process::exit(ExitCode::Interrupted.code());
        }
    }
}
