//! Picks and opens the connection a host's variables ask for.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, Value};

use super::local::LocalConnection;
use super::ssh::{SshConnection, SshSettings};
use super::{Connection, ConnectionError, ExecOutput, SharedConnection, StdoutCapture};

/// Run-wide connection settings (from the command line).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectOptions {
    /// `--accept-new-host-keys`: trust unknown host keys on first use (a changed key still fails).
    pub accept_new_host_keys: bool,
    /// How long to wait for a host to answer (ssh's `ConnectTimeout`); `ansible_ssh_timeout` overrides it per host.
    pub connect_timeout: Duration,
    /// The limit for commands run without one of their own.
    pub command_timeout: Option<Duration>,
}

impl Default for ConnectOptions {
    /// Ansible's defaults: strict host keys, a 10 s connect timeout, no command timeout.
    fn default() -> Self {
        ConnectOptions { accept_new_host_keys: false, connect_timeout: Duration::from_secs(10), command_timeout: None }
    }
}

/// The kinds of connection `ansible_connection` can name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConnectionKind {
    Ssh,
    Local,
}

impl ConnectionKind {
    /// Reads `ansible_connection` (default `ssh`; Ansible's `smart` and `paramiko` mean ssh here too).
    pub fn from_vars(host: &str, vars: &Map<String, Value>) -> Result<Self, ConnectionError> {
        let name = match vars.get("ansible_connection") {
            None | Some(Value::Null) => return Ok(ConnectionKind::Ssh),
            Some(Value::String(s)) => s.trim(),
            Some(other) => {
                return Err(ConnectionError::Unreachable(format!(
                    "{host}: ansible_connection must be a string, not `{other}`"
                )));
            }
        };
        match name.strip_prefix("ansible.builtin.").unwrap_or(name) {
            "ssh" | "smart" | "paramiko" | "paramiko_ssh" | "" => Ok(ConnectionKind::Ssh),
            "local" => Ok(ConnectionKind::Local),
            other => Err(ConnectionError::Unreachable(format!(
                "{host}: ansible_connection `{other}` is not supported (use ssh or local)"
            ))),
        }
    }
}

/// The variables Ansible gives `localhost` when a play names it without the inventory listing it: an implicit
/// local connection. A host called `localhost` that *is* in the inventory connects the way its variables say
/// (ssh unless `ansible_connection: local`), as in Ansible; callers add these only for the implicit one.
pub fn implicit_localhost_vars() -> Map<String, Value> {
    let mut vars = Map::new();
    vars.insert("ansible_connection".into(), Value::String("local".into()));
    vars
}

/// Opens the connection for one host from its variables (after precedence and templating). For ssh this starts the
/// multiplexing master, so an unreachable host or a bad host key is reported here, once.
pub async fn open(
    host: &str,
    vars: &Map<String, Value>,
    options: &ConnectOptions,
) -> Result<SharedConnection, ConnectionError> {
    match ConnectionKind::from_vars(host, vars)? {
        ConnectionKind::Local => match options.command_timeout {
            None => Ok(Arc::new(LocalConnection)),
            Some(limit) => Ok(Arc::new(DefaultTimeout { inner: LocalConnection, limit })),
        },
        ConnectionKind::Ssh => {
            let settings = SshSettings::from_vars(host, vars)?;
            let connection = SshConnection::connect(
                settings,
                options.accept_new_host_keys,
                options.connect_timeout,
                options.command_timeout,
            )
            .await?;
            Ok(Arc::new(connection))
        }
    }
}

/// A connection whose commands get the run's timeout when they bring none of their own.
struct DefaultTimeout<C> {
    inner: C,
    limit: Duration,
}

#[async_trait::async_trait]
impl<C: Connection> Connection for DefaultTimeout<C> {
    async fn exec_capturing(
        &self,
        command: &str,
        stdin: Option<&[u8]>,
        timeout: Option<Duration>,
        stdout: StdoutCapture,
    ) -> Result<ExecOutput, ConnectionError> {
        self.inner.exec_capturing(command, stdin, timeout.or(Some(self.limit)), stdout).await
    }
    async fn put(&self, data: &[u8], path: &str, mode: u32) -> Result<(), ConnectionError> {
        self.inner.put(data, path, mode).await
    }
    async fn fetch(&self, path: &str) -> Result<Vec<u8>, ConnectionError> {
        self.inner.fetch(path).await
    }
    async fn close(&self) {
        self.inner.close().await
    }
    fn is_local(&self) -> bool {
        self.inner.is_local()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn kind(v: Value) -> Result<ConnectionKind, ConnectionError> {
        ConnectionKind::from_vars("h", v.as_object().unwrap())
    }

    #[test]
    fn ansible_connection_picks_the_kind() {
        assert_eq!(kind(json!({})).unwrap(), ConnectionKind::Ssh);
        assert_eq!(kind(json!({"ansible_connection": "smart"})).unwrap(), ConnectionKind::Ssh);
        assert_eq!(kind(json!({"ansible_connection": "paramiko"})).unwrap(), ConnectionKind::Ssh);
        assert_eq!(kind(json!({"ansible_connection": "local"})).unwrap(), ConnectionKind::Local);
        assert_eq!(kind(json!({"ansible_connection": "ansible.builtin.local"})).unwrap(), ConnectionKind::Local);
        assert!(kind(json!({"ansible_connection": "winrm"})).unwrap_err().to_string().contains("winrm"));
        assert_eq!(kind(Value::Object(implicit_localhost_vars())).unwrap(), ConnectionKind::Local);
    }

    #[tokio::test]
    async fn local_hosts_open_without_ssh() {
        let conn = open("localhost", &implicit_localhost_vars(), &ConnectOptions::default()).await.unwrap();
        assert_eq!(conn.exec("echo ok", None, None).await.unwrap().stdout, b"ok\n");
    }
}
