//! Connections move bytes to and from one host: run a command, put a file, fetch a file, close.
//! They know nothing of tasks; become (sudo), templating and retries live above them.

pub mod capture;
pub mod local;
mod open;
pub mod ssh;

pub use open::{ConnectOptions, ConnectionKind, implicit_localhost_vars, open};

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

/// How much of a command's stdout is kept: within the bound of command output (`capture`), or all of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StdoutCapture {
    Bounded,
    Whole,
}

/// What a command left behind on the host.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExecOutput {
    /// The exit status; a command killed by a signal reports 128 + the signal number, as a shell would.
    pub status: i32,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
}

/// Why a host could not be used. A command that ran and failed is not an error: it is an `ExecOutput`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConnectionError {
    /// The host could not be reached (refused, no route, connect timeout, authentication failed).
    Unreachable(String),
    /// The host's key is unknown or has changed; the message says how to trust it.
    HostKey(String),
    /// The command outlasted its timeout; it was stopped on the host too.
    Timeout(Duration),
    /// Anything else on the way (a broken master connection, a local I/O error).
    Transport(String),
}

impl fmt::Display for ConnectionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConnectionError::Unreachable(m) => write!(f, "unreachable: {m}"),
            ConnectionError::HostKey(m) => write!(f, "host key check failed: {m}"),
            ConnectionError::Timeout(d) => write!(f, "command timed out after {}s", d.as_secs()),
            ConnectionError::Transport(m) => write!(f, "connection failed: {m}"),
        }
    }
}

impl std::error::Error for ConnectionError {}

#[async_trait::async_trait]
pub trait Connection: Send + Sync {
    /// Runs a shell command line (`sh -c`) with the given stdin. The timeout, when given, is enforced on the host
    /// too, so nothing keeps running there.
    async fn exec(
        &self,
        command: &str,
        stdin: Option<&[u8]>,
        timeout: Option<Duration>,
    ) -> Result<ExecOutput, ConnectionError> {
        self.exec_capturing(command, stdin, timeout, StdoutCapture::Bounded).await
    }

    /// Like `exec`, but stdout is read whole rather than within the bound of command output (`capture`): for a
    /// command that prints a file's content (`fetch`), however large.
    async fn exec_whole_stdout(
        &self,
        command: &str,
        stdin: Option<&[u8]>,
        timeout: Option<Duration>,
    ) -> Result<ExecOutput, ConnectionError> {
        self.exec_capturing(command, stdin, timeout, StdoutCapture::Whole).await
    }

    /// What `exec` and `exec_whole_stdout` both are: the one method a connection implements to run a command.
    async fn exec_capturing(
        &self,
        command: &str,
        stdin: Option<&[u8]>,
        timeout: Option<Duration>,
        stdout: StdoutCapture,
    ) -> Result<ExecOutput, ConnectionError>;

    /// Writes `data` to `path` on the host with the given mode, atomically (temp file + rename).
    async fn put(&self, data: &[u8], path: &str, mode: u32) -> Result<(), ConnectionError>;

    /// Reads a file from the host.
    async fn fetch(&self, path: &str) -> Result<Vec<u8>, ConnectionError>;

    /// Closes the connection (for SSH: the multiplexing master). Idempotent; a later command opens it again, which
    /// is how a module resets a connection it suspects is dead (Ansible's `reset`).
    async fn close(&self);

    /// Whether commands run on the controller itself (a reboot there would reboot the controller).
    fn is_local(&self) -> bool {
        false
    }
}

pub type SharedConnection = Arc<dyn Connection>;

/// Commands are assembled from untrusted pieces with Python's `shlex.quote`, as Ansible's own plugins do.
pub use crate::ansible_compat::shell_quote;
