//! `ansible_connection: local`: commands run on the controller itself.

use std::process::Stdio;
use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tokio::process::Command;

use super::{Connection, ConnectionError, ExecOutput, StdoutCapture};

#[derive(Debug, Default)]
pub struct LocalConnection;

/// The process group of a running command, killed on drop unless cleared once the command has ended.
struct GroupGuard(Option<libc::pid_t>);

impl Drop for GroupGuard {
    fn drop(&mut self) {
        if let Some(pgid) = self.0 {
            // The whole process group, so children of the shell stop too. Not through kill(1): procps'
            // `kill -KILL -PID` reads `-PID` as a signal and kills process group 9 instead.
            // SAFETY: killpg only sends a signal; pgid is our child's own group (process_group(0)).
            unsafe {
                libc::killpg(pgid, libc::SIGKILL);
            }
        }
    }
}

impl LocalConnection {
    async fn run(
        &self,
        command: &str,
        stdin: Option<&[u8]>,
        timeout: Option<Duration>,
        whole_stdout: bool,
    ) -> Result<ExecOutput, ConnectionError> {
        let mut child = Command::new("/bin/sh")
            .arg("-c")
            .arg(command)
            .stdin(if stdin.is_some() { Stdio::piped() } else { Stdio::null() })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .process_group(0)
            .spawn()
            .map_err(|e| ConnectionError::Transport(format!("cannot start /bin/sh: {e}")))?;
        let input = child.stdin.take();
        let stdout = child.stdout.take();
        let stderr = child.stderr.take();
        // Kills the command's whole process group if this exec ends before the command does: on a timeout, and
        // when the caller drops the future (a drain cut short by an interrupt), so no grandchild is left behind.
        let mut group = GroupGuard(child.id().and_then(|p| libc::pid_t::try_from(p).ok()).filter(|p| *p > 1));
        // Stdin is written while the output is read: a command that echoes more than a pipe buffer would
        // otherwise block on its stdout while we block on its stdin.
        let write = async move {
            if let (Some(data), Some(mut pipe)) = (stdin, input) {
                // A command that does not read its stdin closes the pipe early; that is not our failure.
                let _ = pipe.write_all(data).await;
            }
        };
        // Bounded: a command that prints 200 MB keeps its first and last part (super::capture).
        let read_out = async move {
            match stdout {
                Some(mut pipe) if whole_stdout => {
                    let mut buf = Vec::new();
                    let _ = tokio::io::AsyncReadExt::read_to_end(&mut pipe, &mut buf).await;
                    buf
                }
                Some(pipe) => super::capture::read_bounded(pipe).await,
                None => Vec::new(),
            }
        };
        let read_err = async move {
            match stderr {
                Some(pipe) => super::capture::read_bounded(pipe).await,
                None => Vec::new(),
            }
        };
        let wait = async move {
            let ((), stdout, stderr, status) = tokio::join!(write, read_out, read_err, child.wait());
            status.map(|status| std::process::Output { status, stdout, stderr })
        };
        let output = match timeout {
            Some(limit) => match tokio::time::timeout(limit, wait).await {
                Ok(out) => out,
                Err(_) => return Err(ConnectionError::Timeout(limit)),
            },
            None => wait.await,
        };
        group.0 = None;
        let output = output.map_err(|e| ConnectionError::Transport(e.to_string()))?;
        let status = output.status.code().unwrap_or_else(|| {
            use std::os::unix::process::ExitStatusExt;
            128 + output.status.signal().unwrap_or(0)
        });
        Ok(ExecOutput { status, stdout: output.stdout, stderr: output.stderr })
    }
}

#[async_trait::async_trait]
impl Connection for LocalConnection {
    async fn exec_capturing(
        &self,
        command: &str,
        stdin: Option<&[u8]>,
        timeout: Option<Duration>,
        stdout: StdoutCapture,
    ) -> Result<ExecOutput, ConnectionError> {
        self.run(command, stdin, timeout, stdout == StdoutCapture::Whole).await
    }

    async fn put(&self, data: &[u8], path: &str, mode: u32) -> Result<(), ConnectionError> {
        use std::os::unix::fs::PermissionsExt;
        let target = std::path::Path::new(path);
        let dir = target.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(std::path::Path::new("."));
        let tmp = dir.join(format!(".{}.upgrade-tmp", target.file_name().and_then(|n| n.to_str()).unwrap_or("file")));
        let io = |e: std::io::Error| ConnectionError::Transport(format!("cannot write {path}: {e}"));
        tokio::fs::write(&tmp, data).await.map_err(io)?;
        tokio::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(mode)).await.map_err(io)?;
        tokio::fs::rename(&tmp, target).await.map_err(io)
    }

    async fn fetch(&self, path: &str) -> Result<Vec<u8>, ConnectionError> {
        tokio::fs::read(path).await.map_err(|e| ConnectionError::Transport(format!("cannot read {path}: {e}")))
    }

    async fn close(&self) {}

    fn is_local(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn runs_commands_and_reports_status() {
        let c = LocalConnection;
        let out = c.exec("echo hi; echo err >&2; exit 3", None, None).await.unwrap();
        assert_eq!((out.status, out.stdout.as_slice(), out.stderr.as_slice()), (3, &b"hi\n"[..], &b"err\n"[..]));
        let out = c.exec("cat", Some(b"piped"), None).await.unwrap();
        assert_eq!(out.stdout, b"piped");
    }

    #[tokio::test]
    async fn timeout_stops_the_command() {
        let err = LocalConnection.exec("sleep 5", None, Some(Duration::from_millis(200))).await.unwrap_err();
        assert_eq!(err, ConnectionError::Timeout(Duration::from_millis(200)));
    }
}
