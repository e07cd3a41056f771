//! SSH through the `openssh` crate with native multiplexing: one master connection per host, reused for every
//! command. The system `ssh` client does the protocol work, so `~/.ssh/config`, ProxyJump and agents keep working.
//!
//! The crate has no switch for arbitrary `-o` options, so every connection gets a private ssh config file (passed
//! with `-F`) that holds the inventory's settings, then includes `~/.ssh/config` and `/etc/ssh/ssh_config` — the
//! same first-match-wins order `ansible-playbook` gets by putting its options on the command line.

use std::fmt::Write as _;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use openssh::{ControlPersist, Session, SessionBuilder, Stdio};
use tokio::io::AsyncWriteExt;
use tokio::sync::{Mutex, Semaphore};

use super::{Connection, ConnectionError, ExecOutput, StdoutCapture};
use crate::ansible_compat::shell_quote;

mod settings;

pub use settings::SshSettings;
use settings::option_value;

/// sshd allows 10 sessions per connection by default (`MaxSessions`); stay under it so parallel commands on one host
/// (several hosts delegating to the first master, say) wait their turn instead of being refused.
const MAX_PARALLEL_SESSIONS: usize = 8;

/// How long a local timeout waits, past the remote one, for the host to report the kill before giving up on it.
const REMOTE_KILL_GRACE: Duration = Duration::from_secs(5);

/// The SSH connection to one host: a multiplexing master started on first use and reused by every command. If the
/// master goes away (the host rebooted, the master idled out), the next command starts a new one.
pub struct SshConnection {
    settings: SshSettings,
    builder: SessionBuilder,
    connect_timeout: Duration,
    default_timeout: Option<Duration>,
    session: Mutex<Option<Arc<Session>>>,
    sessions: Semaphore,
    /// Holds the generated config file and the control socket; lives as long as the connection.
    dir: tempfile::TempDir,
}

impl std::fmt::Debug for SshConnection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SshConnection").field("host", &self.settings.name).field("dir", &self.dir.path()).finish()
    }
}

impl SshConnection {
    /// Prepares the connection and starts the master, so an unreachable host or a bad host key shows up here.
    pub async fn connect(
        settings: SshSettings,
        accept_new_host_keys: bool,
        connect_timeout: Duration,
        default_timeout: Option<Duration>,
    ) -> Result<SshConnection, ConnectionError> {
        let dir = tempfile::Builder::new()
            .prefix("upgrade-ssh-")
            .tempdir()
            .map_err(|e| ConnectionError::Transport(format!("cannot create a temporary directory: {e}")))?;
        let config_path = dir.path().join("config");
        std::fs::write(&config_path, settings.config_file()?)
            .map_err(|e| ConnectionError::Transport(format!("cannot write {}: {e}", config_path.display())))?;
        // ssh refuses a ConnectTimeout past INT_MAX seconds (and then fails as if the host had no address).
        let connect_timeout = settings
            .connect_timeout
            .unwrap_or(connect_timeout)
            .clamp(Duration::from_secs(1), Duration::from_secs(i32::MAX as u64));
        let mut builder = SessionBuilder::default();
        builder
            .config_file(&config_path)
            .control_directory(dir.path())
            .known_hosts_check(settings.known_hosts_policy(accept_new_host_keys))
            .connect_timeout(connect_timeout)
            // A master left behind by a killed controller goes away on its own.
            .control_persist(ControlPersist::IdleFor(
                std::num::NonZeroUsize::new(300).unwrap_or(std::num::NonZeroUsize::MIN),
            ));
        let connection = SshConnection {
            settings,
            builder,
            connect_timeout,
            default_timeout,
            session: Mutex::new(None),
            sessions: Semaphore::new(MAX_PARALLEL_SESSIONS),
            dir,
        };
        connection.master().await?;
        Ok(connection)
    }

    pub fn settings(&self) -> &SshSettings {
        &self.settings
    }

    /// The live master, starting one if there is none.
    async fn master(&self) -> Result<Arc<Session>, ConnectionError> {
        let mut slot = self.session.lock().await;
        if let Some(session) = slot.as_ref() {
            return Ok(Arc::clone(session));
        }
        // ssh's ConnectTimeout covers the TCP connect and the banner; this also bounds a stalled authentication.
        let limit = self.connect_timeout.saturating_mul(2).saturating_add(Duration::from_secs(10));
        let started = tokio::time::timeout(limit, self.builder.connect_mux(&self.settings.address)).await;
        let session = match started {
            Ok(Ok(session)) => Arc::new(session),
            Ok(Err(err)) => return Err(self.connect_error(err)),
            Err(_) => {
                return Err(ConnectionError::Unreachable(format!(
                    "{} ({}): no SSH session after {}s",
                    self.settings.name,
                    self.settings.endpoint(),
                    limit.as_secs()
                )));
            }
        };
        *slot = Some(Arc::clone(&session));
        Ok(session)
    }

    /// Forgets a master that stopped answering, so the next command starts a new one.
    async fn forget(&self, dead: &Arc<Session>) {
        let mut slot = self.session.lock().await;
        if slot.as_ref().is_some_and(|s| Arc::ptr_eq(s, dead)) {
            *slot = None;
        }
    }

    fn connect_error(&self, err: openssh::Error) -> ConnectionError {
        let log = match &err {
            openssh::Error::Connect(io) => io.to_string(),
            other => {
                return ConnectionError::Transport(format!(
                    "{}: cannot start ssh: {}",
                    self.settings.name,
                    error_chain(other)
                ));
            }
        };
        classify_ssh_log(&self.settings, &log)
    }

    /// Runs the wrapped command on the master, starting a new master once if the old one is gone (the command
    /// cannot have started then, so trying again is safe).
    async fn spawn(
        &self,
        remote: &str,
        with_stdin: bool,
    ) -> Result<(Arc<Session>, openssh::Child<Arc<Session>>), ConnectionError> {
        let mut retried = false;
        loop {
            let session = self.master().await?;
            let spawned = Session::to_raw_command(Arc::clone(&session), remote)
                .stdin(if with_stdin { Stdio::piped() } else { Stdio::null() })
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .await;
            match spawned {
                Ok(child) => return Ok((session, child)),
                Err(openssh::Error::Disconnected) if !retried => {
                    self.forget(&session).await;
                    retried = true;
                }
                Err(err) => {
                    self.forget(&session).await;
                    return Err(ConnectionError::Transport(format!(
                        "{}: cannot start a command: {}",
                        self.settings.name,
                        error_chain(&err)
                    )));
                }
            }
        }
    }

    /// Runs the wrapped command. `whole_stdout` reads stdout to its end (a fetched file) instead of keeping it within
    /// the bound of command output.
    async fn run(
        &self,
        remote: String,
        stdin: Option<&[u8]>,
        whole_stdout: bool,
    ) -> Result<ExecOutput, ConnectionError> {
        // The marker is the wrapper's `$0`: it stays in the wrapper's argv whichever shell execs what.
        let marker = command_marker();
        let remote = format!("{remote} {marker}");
        let (session, mut child) = self.spawn(&remote, stdin.is_some()).await?;
        // Dropped before the command ends (a step cut at the end of an interrupt's grace period, a local timeout):
        // the command is killed on the host, as the local connection kills its process group.
        let mut kill_on_drop = RemoteKill { session: Some(Arc::clone(&session)), marker };
        let input = child.stdin().take();
        let mut out_pipe = child.stdout().take();
        let mut err_pipe = child.stderr().take();
        let write = async {
            if let (Some(mut pipe), Some(data)) = (input, stdin) {
                // A command that does not read its stdin closes the pipe early; that is not a failure.
                let _ = pipe.write_all(data).await;
                let _ = pipe.shutdown().await;
            }
        };
        // Bounded: a command that prints 200 MB keeps its first and last part (super::capture).
        let read_out = async {
            match out_pipe.as_mut() {
                Some(pipe) if whole_stdout => {
                    let mut buf = Vec::new();
                    let _ = tokio::io::AsyncReadExt::read_to_end(pipe, &mut buf).await;
                    buf
                }
                Some(pipe) => super::capture::read_bounded(pipe).await,
                None => Vec::new(),
            }
        };
        let read_err = async {
            match err_pipe.as_mut() {
                Some(pipe) => super::capture::read_bounded(pipe).await,
                None => Vec::new(),
            }
        };
        let ((), stdout, stderr) = tokio::join!(write, read_out, read_err);
        let waited = child.wait().await;
        kill_on_drop.session = None;
        let status = match waited {
            Ok(status) => {
                use std::os::unix::process::ExitStatusExt;
                status.code().unwrap_or_else(|| 128 + status.signal().unwrap_or(0))
            }
            // The crate reports exit status 127 as an error; it is a result like any other.
            Err(openssh::Error::Remote(e)) if e.kind() == std::io::ErrorKind::NotFound => 127,
            // No exit status: the master went away (the remote shell itself is never killed by a signal, see
            // `wrap_command`).
            Err(err) => {
                let alive = session.check().await.is_ok();
                if !alive {
                    self.forget(&session).await;
                }
                return Err(ConnectionError::Transport(format!(
                    "{} ({}): connection lost while running a command: {}",
                    self.settings.name,
                    self.settings.endpoint(),
                    if alive { error_chain(&err) } else { "the SSH master connection closed".to_string() }
                )));
            }
        };
        Ok(ExecOutput { status, stdout, stderr })
    }
}

impl SshConnection {
    async fn exec_as(
        &self,
        command: &str,
        stdin: Option<&[u8]>,
        timeout: Option<Duration>,
        whole_stdout: bool,
    ) -> Result<ExecOutput, ConnectionError> {
        let _permit = self
            .sessions
            .acquire()
            .await
            .map_err(|_| ConnectionError::Transport(format!("{}: connection closed", self.settings.name)))?;
        let limit = timeout.or(self.default_timeout);
        let remote = wrap_command(command, limit);
        let started = Instant::now();
        let Some(limit) = limit else {
            return self.run(remote, stdin, whole_stdout).await;
        };
        match tokio::time::timeout(
            remote_limit(limit).saturating_add(REMOTE_KILL_GRACE),
            self.run(remote, stdin, whole_stdout),
        )
        .await
        {
            // `timeout -s KILL` on the host: the wrapper shell reports 137 once the limit has passed.
            Ok(Ok(out)) if out.status == 137 && started.elapsed() >= limit => Err(ConnectionError::Timeout(limit)),
            Ok(result) => result,
            Err(_) => Err(ConnectionError::Timeout(limit)),
        }
    }
}

#[async_trait::async_trait]
impl Connection for SshConnection {
    async fn exec_capturing(
        &self,
        command: &str,
        stdin: Option<&[u8]>,
        timeout: Option<Duration>,
        stdout: StdoutCapture,
    ) -> Result<ExecOutput, ConnectionError> {
        self.exec_as(command, stdin, timeout, stdout == StdoutCapture::Whole).await
    }

    async fn put(&self, data: &[u8], path: &str, mode: u32) -> Result<(), ConnectionError> {
        let target = Path::new(path);
        let dir = target.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
        let name = target.file_name().and_then(|n| n.to_str()).unwrap_or("file");
        let tmp = dir.join(format!(".{name}.upgrade-tmp.{}", unique_suffix()));
        let tmp = shell_quote(&tmp.to_string_lossy());
        let script = format!(
            "cat > {tmp} && chmod {mode:o} {tmp} && mv -f {tmp} {dest} || {{ rc=$?; rm -f {tmp}; exit $rc; }}",
            mode = mode & 0o7777,
            dest = shell_quote(path),
        );
        let out = self.exec(&script, Some(data), None).await?;
        if out.status != 0 {
            return Err(ConnectionError::Transport(format!(
                "{}: cannot write {path}: {}",
                self.settings.name,
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
        Ok(())
    }

    async fn fetch(&self, path: &str) -> Result<Vec<u8>, ConnectionError> {
        // A file, not command output: read whole, however large (an etcd snapshot).
        let out = self.exec_as(&format!("cat -- {}", shell_quote(path)), None, None, true).await?;
        if out.status != 0 {
            return Err(ConnectionError::Transport(format!(
                "{}: cannot read {path}: {}",
                self.settings.name,
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
        Ok(out.stdout)
    }

    async fn close(&self) {
        let session = self.session.lock().await.take();
        if let Some(session) = session {
            match Arc::try_unwrap(session) {
                Ok(session) => {
                    let _ = session.close().await;
                }
                // Commands still hold it: the last one to finish drops it, which stops the master.
                Err(shared) => drop(shared),
            }
        }
    }
}

/// The command line sent to the host. The login shell may be anything, so the command always runs under
/// `/bin/sh -c`, as Ansible does. An outer `/bin/sh` that does not `exec` its last command reports a command killed
/// by a signal as 128+N (the mux protocol would otherwise report no status at all), and runs the command under
/// `timeout -s KILL` when there is a limit, so nothing keeps running on the host after we gave up on it.
pub fn wrap_command(command: &str, limit: Option<Duration>) -> String {
    let inner = format!("/bin/sh -c {}", shell_quote(command));
    let script = match limit {
        None => format!("{inner}; exit $?"),
        Some(limit) => format!(
            "if command -v timeout >/dev/null 2>&1; then timeout -s KILL {} {inner}; else {inner}; fi; exit $?",
            remote_limit(limit).as_secs()
        ),
    };
    format!("/bin/sh -c {}", shell_quote(&script))
}

/// The host counts whole seconds (busybox's `timeout` takes no fractions), never less than the limit.
fn remote_limit(limit: Duration) -> Duration {
    Duration::from_secs(limit.as_secs().saturating_add(u64::from(limit.subsec_nanos() > 0))).max(Duration::from_secs(1))
}

/// Turns what `ssh` logged on a failed connect into an error the user can act on.
pub fn classify_ssh_log(settings: &SshSettings, log: &str) -> ConnectionError {
    let who = format!("{} ({})", settings.name, settings.endpoint());
    let known_hosts = option_value(&settings.args, "userknownhostsfile")
        .and_then(|v| v.split_whitespace().next().map(str::to_string))
        .unwrap_or_else(|| "~/.ssh/known_hosts".to_string());
    let port = settings.port.filter(|p| *p != 22).map(|p| format!("-p {p} ")).unwrap_or_default();
    let keyscan = format!("ssh-keyscan {port}{} >> {known_hosts}", settings.address);
    if log.contains("REMOTE HOST IDENTIFICATION HAS CHANGED")
        || log.contains("Host key for") && log.contains("has changed")
    {
        let entry = match settings.port.filter(|p| *p != 22) {
            Some(p) => format!("[{}]:{p}", settings.address),
            None => settings.address.clone(),
        };
        return ConnectionError::HostKey(format!(
            "{who}: the host key has CHANGED since it was recorded in {known_hosts} (the host was reinstalled, or \
             someone is intercepting the connection). If the change is expected, check the new fingerprint, then \
             replace the old entry: `ssh-keygen -f {known_hosts} -R '{entry}' && {keyscan}`. \
             --accept-new-host-keys does not accept changed keys"
        ));
    }
    if log.contains("Host key verification failed") || log.contains("host key is known for") {
        return ConnectionError::HostKey(format!(
            "{who}: the host key is not known and host keys are checked strictly. Check the host's fingerprint, \
             then trust it with `{keyscan}`, or pass --accept-new-host-keys to accept unknown keys on first use"
        ));
    }
    let reason = log
        .lines()
        .map(str::trim)
        .rfind(|l| !l.is_empty() && !l.starts_with("Warning: Permanently added"))
        .unwrap_or("ssh exited without saying why")
        .trim_start_matches("ssh: ");
    ConnectionError::Unreachable(format!("{who}: {reason}"))
}

/// An `openssh::Error` with its causes, since the crate's own messages are generic.
fn error_chain(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        let _ = write!(text, ": {cause}");
        source = cause.source();
    }
    text
}

/// A word given to each command's wrapper shell as its `$0` (`/bin/sh -c '...' upgrade-cmd-PID-N`), so the
/// command's processes can be found on the host to kill them.
fn command_marker() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    format!("upgrade-cmd-{}-{}", std::process::id(), COUNTER.fetch_add(1, Ordering::Relaxed))
}

/// Kills, on the host, the session of a command whose future was dropped before it ended. sshd starts each
/// command in a session of its own, and nothing in our wrapper leaves it (GNU `timeout` makes a process group, not
/// a session), so killing the session kills the command and every child it started. The processes are found by
/// the marker in the command line; `[u]` keeps the kill script from matching its own.
fn kill_script(marker: &str) -> String {
    let pattern = format!("[{}]{}", &marker[..1], &marker[1..]);
    format!(
        "for f in $(grep -la '{pattern}' /proc/[0-9]*/cmdline 2>/dev/null); do \
         s=$(cut -d' ' -f6 \"${{f%/cmdline}}/stat\" 2>/dev/null); \
         if [ -n \"$s\" ] && [ \"$s\" -gt 1 ]; then pkill -KILL -s \"$s\"; fi; done; exit 0"
    )
}

/// The kills started by dropped commands, so a run can let them reach the hosts before it closes its connections.
static PENDING_KILLS: std::sync::Mutex<Vec<tokio::task::JoinHandle<()>>> = std::sync::Mutex::new(Vec::new());

struct RemoteKill {
    session: Option<Arc<Session>>,
    marker: String,
}

impl Drop for RemoteKill {
    fn drop(&mut self) {
        let Some(session) = self.session.take() else { return };
        let Ok(runtime) = tokio::runtime::Handle::try_current() else { return };
        let script = kill_script(&self.marker);
        let kill = runtime.spawn(async move {
            let command = Session::to_raw_command(session, script);
            let _ = tokio::time::timeout(Duration::from_secs(10), async move {
                let mut command = command;
                command.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null()).status().await
            })
            .await;
        });
        if let Ok(mut pending) = PENDING_KILLS.lock() {
            pending.retain(|k| !k.is_finished());
            pending.push(kill);
        }
    }
}

/// Waits (at most `limit`) for the kills of dropped commands to reach their hosts.
pub async fn finish_pending_kills(limit: Duration) {
    let pending: Vec<_> = PENDING_KILLS.lock().map(|mut p| std::mem::take(&mut *p)).unwrap_or_default();
    let _ = tokio::time::timeout(limit, async {
        for kill in pending {
            let _ = kill.await;
        }
    })
    .await;
}

fn unique_suffix() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    format!("{}.{}", std::process::id(), COUNTER.fetch_add(1, Ordering::Relaxed))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn vars(v: serde_json::Value) -> serde_json::Map<String, serde_json::Value> {
        v.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn limits_past_any_clock_saturate_instead_of_overflowing() {
        // A drain timeout or ansible_ssh_timeout of 18446744073709551615 is an operator's "for ever".
        let script = wrap_command("true", Some(Duration::MAX));
        assert!(script.contains(&u64::MAX.to_string()), "{script}");
        assert_eq!(remote_limit(Duration::MAX).saturating_add(REMOTE_KILL_GRACE), Duration::MAX);
    }

    #[test]
    fn classifies_ssh_failures() {
        let s = SshSettings::from_vars(
            "n1",
            &vars(json!({"ansible_host": "127.0.0.1", "ansible_port": 2022,
                          "ansible_ssh_common_args": "-o UserKnownHostsFile=/tmp/kh"})),
        )
        .unwrap();
        let unknown = "No ED25519 host key is known for [127.0.0.1]:2022 and you have requested strict checking.\r\n\
                       Host key verification failed.";
        match classify_ssh_log(&s, unknown) {
            ConnectionError::HostKey(m) => {
                assert!(m.contains("ssh-keyscan -p 2022 127.0.0.1 >> /tmp/kh"), "{m}");
                assert!(m.contains("--accept-new-host-keys"), "{m}");
            }
            other => panic!("{other:?}"),
        }
        let changed =
            "@@@@@@@\r\n@    WARNING: REMOTE HOST IDENTIFICATION HAS CHANGED!     @\r\nHost key verification failed.";
        match classify_ssh_log(&s, changed) {
            ConnectionError::HostKey(m) => assert!(m.contains("CHANGED") && m.contains("ssh-keygen"), "{m}"),
            other => panic!("{other:?}"),
        }
        assert_eq!(
            classify_ssh_log(&s, "ssh: connect to host 127.0.0.1 port 2022: Connection refused\r\n"),
            ConnectionError::Unreachable(
                "n1 (127.0.0.1:2022): connect to host 127.0.0.1 port 2022: Connection refused".into()
            )
        );
    }

    #[test]
    fn wraps_commands_for_the_remote_shell() {
        // The wrapped line is what the login shell runs: run it through a local shell to check the quoting.
        let line = wrap_command("printf '%s|' \"$0\" 'it'\\''s'; kill -TERM $$", None);
        let out = std::process::Command::new("/bin/sh").arg("-c").arg(&line).output().unwrap();
        assert_eq!(String::from_utf8_lossy(&out.stdout), "/bin/sh|it's|");
        // Killed by a signal, yet the outer shell reports it as a status.
        assert_eq!(out.status.code(), Some(128 + 15));
        let timed = wrap_command("sleep 9", Some(Duration::from_millis(1500)));
        assert!(timed.contains("timeout -s KILL 2 /bin/sh -c"), "{timed}");
    }
}
