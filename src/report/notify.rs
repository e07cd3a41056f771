//! Notifications: the run's milestones (run started, phase started and finished, batch finished, host failed, stall,
//! paused and resumed, run finished, with the lock lost in it) sent as they happen to `upgrade_notify_command` (run on the controller,
//! one JSON event on its stdin) and `upgrade_notify_webhook_url` (an HTTP POST of the same JSON, or with
//! `upgrade_notify_webhook_format: slack` a `{"text": ...}` a person reads). They go through a bounded queue to a
//! thread of their own, each with a timeout, so a slow or dead receiver never slows the run; a receiver that fails
//! is said once and the run goes on. Events reach it masked (it sits behind the masking sink), and the webhook's
//! address, a secret for Slack, is never printed nor put on a command line.

use std::io::Write;
use std::process::{Command, Stdio};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::error::{Error, Result};
use crate::events::{Event, EventSink};
use crate::inventory::HostVarsJson;
use crate::vocabulary::HostOutcome;

/// Milestones waiting to be sent; past this, new ones are dropped (and that is said once).
const QUEUE: usize = 200;
/// How long one receiver may take with one event.
pub(crate) const TIMEOUT: Duration = Duration::from_secs(10);

/// What the inventory asks for (the first master's variables, as the cluster hooks).
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct NotifySettings {
    pub command: Option<String>,
    pub webhook_url: Option<String>,
    pub slack: bool,
}

impl NotifySettings {
    /// Reads the settings; a value that is not a plain string, or a format other than `json` or `slack`, is bad input.
    pub(crate) fn read(hosts: &HostVarsJson, first_master: Option<&str>, inventory: &std::path::Path) -> Result<Self> {
        let vars = first_master.and_then(|m| hosts.get(m));
        let text = |name: &str| -> Result<Option<String>> {
            match vars.and_then(|v| v.get(name)) {
                None | Some(Value::Null) => Ok(None),
                Some(Value::String(s)) if s.trim().is_empty() => Ok(None),
                Some(Value::String(s)) if !s.contains("{{") && !s.contains("{%") => Ok(Some(s.trim().to_string())),
                Some(_) => Err(Error::input(format!("{name} must be a plain string"))
                    .in_file(inventory)
                    .hint(format!("give {name} its value itself (it is read on the controller, not templated)"))),
            }
        };
        let webhook_url = text("upgrade_notify_webhook_url")?;
        if let Some(url) = &webhook_url {
            if !(url.starts_with("http://") || url.starts_with("https://")) {
                return Err(Error::input("upgrade_notify_webhook_url is not an http:// or https:// address")
                    .in_file(inventory)
                    .hint("give the webhook's whole address, e.g. https://hooks.slack.com/services/..."));
            }
        }
        let slack = match text("upgrade_notify_webhook_format")?.as_deref() {
            None | Some("json") => false,
            Some("slack") => true,
            Some(other) => {
                return Err(Error::input(format!("upgrade_notify_webhook_format: {other} is not a format"))
                    .in_file(inventory)
                    .hint("use json (the event itself, the default) or slack ({\"text\": ...})"));
            }
        };
        Ok(NotifySettings { command: text("upgrade_notify_command")?, webhook_url, slack })
    }

    pub(crate) fn any(&self) -> bool {
        self.command.is_some() || self.webhook_url.is_some()
    }
}

/// Sends the milestones; an event sink placed behind the masking.
pub(crate) struct Notifier {
    queue: Mutex<Option<SyncSender<Value>>>,
    shared: Arc<Shared>,
    worker: Mutex<Option<std::thread::JoinHandle<()>>>,
}

#[derive(Default)]
struct Shared {
    /// Where a failure is said (the run's sink), set once the sink exists.
    say: Mutex<Option<Weak<dyn EventSink>>>,
    /// Receivers whose failure was said already, and whether a full queue was.
    said: Mutex<std::collections::HashSet<&'static str>>,
}

impl Shared {
    fn once(&self, what: &'static str, message: String) {
        let first = self.said.lock().map(|mut s| s.insert(what)).unwrap_or(false);
        let sink = self.say.lock().ok().and_then(|s| s.as_ref().and_then(Weak::upgrade));
        if let (true, Some(sink)) = (first, sink) {
            sink.event(&Event::Notice { host: None, message });
        }
    }
}

impl Notifier {
    pub(crate) fn start(settings: NotifySettings) -> Arc<Notifier> {
        let (send, receive) = sync_channel(QUEUE);
        let shared = Arc::new(Shared::default());
        let worker_shared = shared.clone();
        let worker = std::thread::Builder::new()
            .name("notify".into())
            .spawn(move || deliver(&settings, &receive, &worker_shared))
            .ok();
        Arc::new(Notifier { queue: Mutex::new(Some(send)), shared, worker: Mutex::new(worker) })
    }

    /// Failures are said through `sink` (the run's, so they are masked and reach every output).
    pub(crate) fn say_through(&self, sink: Weak<dyn EventSink>) {
        if let Ok(mut say) = self.shared.say.lock() {
            *say = Some(sink);
        }
    }

    /// Sends what is queued, for at most `limit` (each receiver has its own timeout too): the run's end is sent.
    pub(crate) fn finish(&self, limit: Duration) {
        drop(self.queue.lock().ok().and_then(|mut q| q.take()));
        let Some(worker) = self.worker.lock().ok().and_then(|mut w| w.take()) else { return };
        let deadline = Instant::now() + limit;
        while !worker.is_finished() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        if worker.is_finished() {
            let _ = worker.join();
        }
    }
}

impl EventSink for Notifier {
    fn event(&self, event: &Event) {
        let Some(mut value) = milestone(event) else { return };
        if let Value::Object(m) = &mut value {
            m.insert("time".into(), json!(crate::time_format::utc_timestamp(std::time::SystemTime::now())));
        }
        let Ok(queue) = self.queue.lock() else { return };
        let Some(queue) = queue.as_ref() else { return };
        if let Err(TrySendError::Full(_)) = queue.try_send(value) {
            self.shared.once(
                "queue",
                format!(
                    "notifications: {QUEUE} are waiting for slow receivers; later ones are dropped until they catch up"
                ),
            );
        }
    }
}

/// The JSON of the events that are milestones; `None` for the rest.
fn milestone(event: &Event) -> Option<Value> {
    let wanted = match event {
        Event::RunStarted { .. }
        | Event::PhaseStarted { .. }
        | Event::PhaseFinished { .. }
        | Event::BatchFinished { .. }
        | Event::Stalled { .. }
        | Event::Paused { .. }
        | Event::Resumed { .. }
        | Event::RunFinished { .. } => true,
        Event::HostFinished { report } => matches!(report.outcome, HostOutcome::Failed { .. }),
        _ => false,
    };
    if !wanted {
        return None;
    }
    let mut value = super::json::event_json(event)?;
    if let (Event::HostFinished { .. }, Value::Object(m)) = (event, &mut value) {
        m.insert("event".into(), json!("host-failed"));
    }
    if let (Event::RunFinished { summary }, Value::Object(m)) = (event, &mut value) {
        // The hosts' list can be long: the receiver gets the counts and what went wrong.
        m.remove("hosts");
        let failed = summary.hosts.iter().filter(|h| h.outcome.is_failure()).count();
        m.insert("hosts_total".into(), json!(summary.hosts.len()));
        m.insert("hosts_failed".into(), json!(failed));
    }
    Some(value)
}

/// A line a person reads in a chat channel.
pub(crate) fn slack_text(event: &Value) -> String {
    let s = |k: &str| event[k].as_str().unwrap_or("").to_string();
    let left = event["eta_seconds"]
        .as_u64()
        .map(|s| format!(" (about {} left)", crate::time_format::short_duration(Duration::from_secs(s))));
    match s("event").as_str() {
        "run-started" => format!("upgrade to {} started", s("target")),
        "phase-started" => format!("upgrade: phase {} started{}", s("phase"), left.unwrap_or_default()),
        "phase-finished" => {
            format!("upgrade: phase {} {}", s("phase"), if s("status") == "ok" { "done" } else { "FAILED" })
        }
        "batch-finished" => format!(
            "upgrade: {} batch {} finished, {} of {} failed{}",
            s("phase"),
            event["batch"],
            event["failed"],
            event["size"],
            left.unwrap_or_default()
        ),
        "host-failed" => format!("upgrade: {} FAILED in {} at {}: {}", s("host"), s("phase"), s("step"), s("reason")),
        "stall" => format!("upgrade: [{}] {}", s("host"), s("message")),
        "paused" => format!("upgrade: PAUSED by {} before {}: waiting for `upgrade resume`", s("by"), s("before")),
        "resumed" => format!(
            "upgrade: resumed{} after {}s: {} starts",
            event["by"].as_str().map(|by| format!(" by {by}")).unwrap_or_default(),
            event["waited_seconds"],
            s("before")
        ),
        "summary" => {
            let lost =
                event["cluster_lock_lost"].as_str().map(|w| format!("; cluster lock lost: {w}")).unwrap_or_default();
            format!(
                "upgrade to {} finished: {} (exit {}), {} hosts, {} failed{lost}",
                s("target"),
                s("status"),
                event["exit_code"],
                event["hosts_total"],
                event["hosts_failed"]
            )
        }
        other => format!("upgrade: {other}"),
    }
}

fn deliver(settings: &NotifySettings, queue: &Receiver<Value>, shared: &Shared) {
    for event in queue {
        let line = event.to_string();
        if let Some(command) = &settings.command {
            if let Err(why) = run_command(command, &line) {
                shared.once(
                    "command",
                    format!("upgrade_notify_command failed ({why}): the run goes on without it; said once"),
                );
            }
        }
        if let Some(url) = &settings.webhook_url {
            let body = if settings.slack { json!({"text": slack_text(&event)}).to_string() } else { line.clone() };
            if let Err(why) = post(url, &body) {
                shared.once(
                    "webhook",
                    format!(
                        "upgrade_notify_webhook_url: the POST failed ({why}): the run goes on without it; said once"
                    ),
                );
            }
        }
    }
}

/// `sh -c COMMAND` with the event on stdin, for at most [`TIMEOUT`].
fn run_command(command: &str, line: &str) -> std::result::Result<(), String> {
    let mut child = Command::new("sh")
        .args(["-c", command])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("cannot start it: {e}"))?;
    if let Some(mut stdin) = child.stdin.take() {
        let _ = stdin.write_all(format!("{line}\n").as_bytes());
    }
    wait(&mut child)
}

/// An HTTP POST of `body` to `url` by the controller's `curl` (https, proxies and redirects as the site set them up).
/// The address goes on curl's stdin as its configuration, never on its command line (`ps` shows that).
fn post(url: &str, body: &str) -> std::result::Result<(), String> {
    let mut data = tempfile::NamedTempFile::new().map_err(|e| format!("cannot write the request: {e}"))?;
    data.write_all(body.as_bytes()).map_err(|e| format!("cannot write the request: {e}"))?;
    let config = format!(
        "url = \"{}\"\nrequest = \"POST\"\nheader = \"Content-Type: application/json\"\ndata-binary = \"@{}\"\n",
        url.replace('\\', "\\\\").replace('"', "\\\""),
        data.path().display()
    );
    let mut child = Command::new("curl")
        .args([
            "--silent",
            "--fail",
            "--output",
            "/dev/null",
            "--max-time",
            &TIMEOUT.as_secs().to_string(),
            "--config",
            "-",
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("cannot start curl: {e}"))?;
    if let Some(mut stdin) = child.stdin.take() {
        let _ = stdin.write_all(config.as_bytes());
    }
    wait(&mut child).map_err(|why| why.replace("exit status", "curl exit status"))
}

/// Waits for a receiver, at most [`TIMEOUT`] (then it is killed).
fn wait(child: &mut std::process::Child) -> std::result::Result<(), String> {
    let deadline = Instant::now() + TIMEOUT + Duration::from_secs(1);
    loop {
        match child.try_wait() {
            Ok(Some(status)) if status.success() => return Ok(()),
            Ok(Some(status)) => return Err(status.to_string()),
            Ok(None) if Instant::now() >= deadline => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!("no answer within {} s", TIMEOUT.as_secs()));
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => return Err(e.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vocabulary::Phase;

    #[test]
    fn a_receiver_that_hangs_never_slows_the_run_and_a_full_queue_is_said_once() {
        // The receiver hangs until the test lets it go (it then leaves a file): neither the events nor the end may
        // wait for it, so it is still hanging, its file not there, after both.
        let dir = tempfile::tempdir().unwrap();
        let (gate, answered) = (dir.path().join("gate"), dir.path().join("answered"));
        // It also lets go once the directory has gone with the test: the notifications still queued start receivers
        // after the gate opened, which would otherwise poll for ever, processes left behind by every run.
        let command = format!(
            "while [ ! -e '{gate}' ] && [ -d '{dir}' ]; do sleep 0.05; done; touch '{answered}' 2>/dev/null",
            gate = gate.display(),
            dir = dir.path().display(),
            answered = answered.display()
        );
        let notifier = Notifier::start(NotifySettings { command: Some(command), ..NotifySettings::default() });
        let said = Arc::new(crate::events::EventLog::default());
        let sink: Arc<dyn EventSink> = said.clone();
        notifier.say_through(Arc::downgrade(&sink));
        for _ in 0..(QUEUE + 50) {
            notifier.event(&Event::PhaseStarted { phase: Phase::Nodes });
        }
        let notices: Vec<Event> = said.events().into_iter().filter(|e| matches!(e, Event::Notice { .. })).collect();
        assert_eq!(notices.len(), 1, "{notices:?}");
        notifier.finish(Duration::from_millis(200));
        assert!(!answered.exists(), "the events and the end did not wait for the hanging receiver");
        std::fs::write(&gate, "").unwrap();
    }

    #[test]
    fn only_milestones_are_sent_and_a_failed_host_is_named_so() {
        assert!(
            milestone(&Event::StepStarted {
                phase: Phase::Nodes,
                host: "n1".into(),
                step: crate::vocabulary::Step::Drain
            })
            .is_none()
        );
        let failed = Event::HostFinished {
            report: crate::vocabulary::HostReport {
                phase: Phase::Nodes,
                host: "n1".into(),
                node: None,
                outcome: HostOutcome::Failed {
                    step: crate::vocabulary::Step::Drain,
                    reason: "drain timed out".into(),
                    unreachable: false,
                    left_cordoned: true,
                },
                duration: Duration::from_secs(3),
                window: None,
            },
        };
        let value = milestone(&failed).expect("a failed host is a milestone");
        assert_eq!(value["event"], "host-failed");
        assert_eq!(slack_text(&value), "upgrade: n1 FAILED in nodes at drain: drain timed out");
    }

    #[test]
    fn a_pause_and_a_resume_are_milestones_a_person_reads() {
        let paused = Event::Paused {
            by: "ops@laptop".into(),
            at: "2026-11-27T21:00:00Z".into(),
            before: "batch 2".into(),
            timeout: Some(Duration::from_secs(60)),
        };
        let value = milestone(&paused).expect("a pause is a milestone");
        assert_eq!((value["event"].as_str(), value["timeout_seconds"].as_u64()), (Some("paused"), Some(60)));
        assert_eq!(slack_text(&value), "upgrade: PAUSED by ops@laptop before batch 2: waiting for `upgrade resume`");
        let resumed =
            Event::Resumed { by: Some("oncall@ci".into()), before: "batch 2".into(), waited: Duration::from_secs(42) };
        let value = milestone(&resumed).expect("a resume is a milestone");
        assert_eq!(slack_text(&value), "upgrade: resumed by oncall@ci after 42s: batch 2 starts");
    }
}
