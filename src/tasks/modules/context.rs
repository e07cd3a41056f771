//! What a module runs with: the host's connection, `become`, the task's environment and timeout. Every command
//! goes through `ModuleContext::exec`, which adds the environment and wraps it for `become`, so the connection
//! below only moves bytes.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use super::common::*;
use crate::ansible_compat::shell_quote;
use crate::connection::{ConnectionError, ExecOutput, SharedConnection, StdoutCapture};
use crate::tasks::Templar;
use crate::tasks::connect::ConnectionPool;
use serde_json::{Map, Value};

#[derive(Clone)]
pub struct ModuleContext {
    /// `None` for modules that run on the controller only (debug, set_fact, assert, fail, pause).
    pub connection: Option<SharedConnection>,
    /// `Some(user)` when the task runs with `become`.
    pub become_user: Option<String>,
    /// `ansible_become_password` (or `ansible_become_pass`): fed to `sudo -S` on stdin when sudo asks for it; never
    /// on a command line, in a result or an event.
    pub become_password: Option<BecomePassword>,
    pub environment: Vec<(String, String)>,
    pub timeout: Option<Duration>,
    pub task_file: PathBuf,
    pub host: String,
    pub templar: Arc<Templar>,
    pub options: EngineOptions,
    pub prompt_lock: Arc<tokio::sync::Mutex<()>>,
    /// The run's connections, for `wait_for_connection` to try a host again that could not be reached.
    pub pool: Option<Arc<ConnectionPool>>,
    /// The host the module acts on (the delegate when there is one).
    pub target: String,
    /// The task runs in check mode (`check_mode: true`): the module changes nothing and says what it would change.
    pub check_mode: bool,
}

/// The prompt sudo is told to print (`-p`) when it reads the become password, so it can be taken out of stderr
/// rather than mixed into the command's output, as Ansible's sudo plugin does with its own prompt.
pub const BECOME_PROMPT: &str = "[upgrade: sudo password]";

/// A become password, and whether sudo on the target asks for it (found out once per task, with `sudo -n true`: a
/// password written to a sudo that does not ask would reach the command's stdin instead).
#[derive(Clone)]
pub struct BecomePassword {
    password: Arc<str>,
    asked: Arc<tokio::sync::OnceCell<bool>>,
}

impl BecomePassword {
    pub fn new(password: &str) -> BecomePassword {
        BecomePassword { password: password.into(), asked: Default::default() }
    }
}

impl std::fmt::Debug for BecomePassword {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("BecomePassword(********)")
    }
}

impl ModuleContext {
    /// The command line as it runs on the host: environment exported, then wrapped in sudo as Ansible's sudo become
    /// plugin does (`sudo -H -S -n -u USER /bin/sh -c '...'`).
    pub fn command_line(&self, command: &str) -> String {
        self.command_line_for(command, false)
    }

    /// With `with_password`, sudo reads the password from stdin behind its known prompt (`-p`) instead of failing
    /// (`-n`), as Ansible's sudo plugin does when a become password is set.
    fn command_line_for(&self, command: &str, with_password: bool) -> String {
        let mut inner = String::new();
        for (k, v) in &self.environment {
            inner.push_str(&format!("export {}={}; ", k, shell_quote(v)));
        }
        inner.push_str(command);
        let how = if with_password { format!("-p {}", shell_quote(BECOME_PROMPT)) } else { "-n".to_string() };
        match &self.become_user {
            Some(user) => format!("sudo -H -S {how} -u {} /bin/sh -c {}", shell_quote(user), shell_quote(&inner)),
            None => inner,
        }
    }

    pub(super) async fn exec_with(
        &self,
        command: &str,
        stdin: Option<&[u8]>,
        timeout: Option<Duration>,
    ) -> Result<ExecOutput, ConnectionError> {
        self.exec_shaped(command, stdin, timeout, self.options.whole_stdout).await
    }

    /// For a command that prints a file's content: stdout whole, not bounded like command output.
    pub async fn exec_reading_file(&self, command: &str) -> Result<ExecOutput, ConnectionError> {
        self.exec_shaped(command, None, None, true).await
    }

    async fn exec_shaped(
        &self,
        command: &str,
        stdin: Option<&[u8]>,
        timeout: Option<Duration>,
        whole_stdout: bool,
    ) -> Result<ExecOutput, ConnectionError> {
        let conn = self
            .connection
            .as_ref()
            .ok_or_else(|| ConnectionError::Transport("no connection for this module".into()))?;
        let timeout = timeout.or(self.timeout);
        let run = |conn: &SharedConnection, line: String, input: Option<Vec<u8>>| {
            let conn = conn.clone();
            let stdout = if whole_stdout { StdoutCapture::Whole } else { StdoutCapture::Bounded };
            async move { conn.exec_capturing(&line, input.as_deref(), timeout, stdout).await }
        };
        let (Some(user), Some(become_password)) = (&self.become_user, &self.become_password) else {
            return run(conn, self.command_line(command), stdin.map(<[u8]>::to_vec)).await;
        };
        let asked = become_password
            .asked
            .get_or_try_init(|| async {
                let probe = conn.exec(&format!("sudo -n -u {} true", shell_quote(user)), None, timeout).await?;
                Ok::<bool, ConnectionError>(probe.status != 0)
            })
            .await?;
        if !*asked {
            return run(conn, self.command_line(command), stdin.map(<[u8]>::to_vec)).await;
        }
        // sudo reads one line (byte by byte) for the password; the rest of stdin is the command's.
        let mut input = Vec::with_capacity(become_password.password.len() + 1 + stdin.map_or(0, <[u8]>::len));
        input.extend_from_slice(become_password.password.as_bytes());
        input.push(b'\n');
        input.extend_from_slice(stdin.unwrap_or_default());
        let mut out = run(conn, self.command_line_for(command, true), Some(input)).await?;
        out.stderr = without_prompt(&out.stderr);
        Ok(out)
    }

    pub async fn exec(&self, command: &str, stdin: Option<&[u8]>) -> Result<ExecOutput, ConnectionError> {
        self.exec_with(command, stdin, None).await
    }
}

/// stderr without sudo's password prompt (printed once per attempt, without a newline).
pub(super) fn without_prompt(stderr: &[u8]) -> Vec<u8> {
    let text = String::from_utf8_lossy(stderr);
    if !text.contains(BECOME_PROMPT) {
        return stderr.to_vec();
    }
    text.replace(BECOME_PROMPT, "").into_bytes()
}

pub(super) fn read_local(ctx: &ModuleContext, name: &str, sub: &str) -> Result<(PathBuf, Vec<u8>), Map<String, Value>> {
    let path = resolve_local(&ctx.task_file, name, Some(sub));
    std::fs::read(&path)
        .map(|data| (path.clone(), data))
        .map_err(|e| failed(format!("Could not find or access '{name}' (looked for {}): {e}", path.display())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn become_wraps_the_command_as_ansibles_sudo_plugin() {
        let ctx = ModuleContext {
            connection: None,
            become_user: Some("postgres".into()),
            become_password: None,
            environment: vec![("A".into(), "x y".into())],
            timeout: None,
            task_file: PathBuf::from("hook.yml"),
            host: "h".into(),
            templar: Arc::new(Templar::new()),
            options: EngineOptions::default(),
            prompt_lock: Default::default(),
            pool: None,
            target: "h".into(),
            check_mode: false,
        };
        assert_eq!(
            ctx.command_line("id -un"),
            r#"sudo -H -S -n -u postgres /bin/sh -c 'export A='"'"'x y'"'"'; id -un'"#
        );
        assert_eq!(
            ctx.command_line_for("id -un", true),
            r#"sudo -H -S -p '[upgrade: sudo password]' -u postgres /bin/sh -c 'export A='"'"'x y'"'"'; id -un'"#
        );
    }
}
