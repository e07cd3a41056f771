//! The modules that wait: `pause`, `wait_for`, `reboot`, `wait_for_connection`.

use std::time::{Duration, Instant, SystemTime};

use serde_json::{Map, Value, json};

use super::common::*;
use super::context::ModuleContext;
use crate::ansible_compat::shell_quote;
use crate::connection::{ConnectionError, SharedConnection};

pub(super) async fn pause(ctx: &ModuleContext, args: &Map<String, Value>) -> Map<String, Value> {
    let (seconds, minutes) = match (arg_int(args, "seconds"), arg_int(args, "minutes")) {
        (Ok(s), Ok(m)) => (s, m),
        (Err(e), _) | (_, Err(e)) => return failed(e),
    };
    let prompt = arg_str(args, "prompt");
    let start = SystemTime::now();
    let began = Instant::now();
    let mut user_input = String::new();
    // As Ansible: `minutes` wins over `seconds`, and a pause shorter than a second lasts one second.
    let (duration, unit) = match (seconds, minutes) {
        (_, Some(m)) => (Some(Duration::from_secs((m.max(0) as u64).saturating_mul(60).max(1))), "minutes"),
        (Some(s), None) => (Some(Duration::from_secs(s.max(1) as u64)), "seconds"),
        (None, None) => (None, "minutes"),
    };
    match duration {
        Some(d) => tokio::time::sleep(d).await,
        None => {
            let text = prompt.clone().unwrap_or_else(|| "Press enter to continue, Ctrl+C to interrupt".into());
            if ctx.options.assume_yes {
                // --yes answers the prompt.
            } else if let Some(prompter) = ctx.options.prompter.clone() {
                let _guard = ctx.prompt_lock.lock().await;
                let question = format!("[{}] {text}", ctx.host);
                match tokio::task::spawn_blocking(move || prompter(&question)).await {
                    Ok(Some(answer)) => user_input = answer,
                    _ => return failed("the pause prompt got no answer (input closed)"),
                }
            } else {
                return failed(format!(
                    "pause is waiting for a person to answer \"{text}\", but there is no terminal; run with --yes to answer it"
                ));
            }
        }
    }
    let took = began.elapsed().as_secs_f64();
    let amount = if unit == "minutes" { took / 60.0 } else { took };
    let stdout = format!("Paused for {} {unit}", python_round2(amount));
    obj(json!({
        "changed": false,
        "rc": 0,
        "stderr": "",
        "stdout": stdout,
        "start": timestamp(start),
        "stop": timestamp(SystemTime::now()),
        "delta": began.elapsed().as_secs(),
        "user_input": user_input,
        "echo": arg_bool(args, "echo", true),
    }))
}

/// `round(x, 2)` printed as Python prints a float: `1.0`, `1.01`, `0.5`.
pub(super) fn python_round2(x: f64) -> String {
    let r = (x * 100.0).round() / 100.0;
    let text = format!("{r:.2}");
    let text = text.trim_end_matches('0');
    if text.ends_with('.') { format!("{text}0") } else { text.to_string() }
}

pub(super) async fn wait_for(ctx: &ModuleContext, args: &Map<String, Value>) -> ModuleResult {
    let int = |k: &str, d: i64| arg_int(args, k).map(|v| v.unwrap_or(d));
    let (timeout, delay, connect_timeout, sleep, port) =
        match (int("timeout", 300), int("delay", 0), int("connect_timeout", 5), int("sleep", 1), arg_int(args, "port"))
        {
            (Ok(t), Ok(d), Ok(c), Ok(s), Ok(p)) => (t.max(0), d.max(0), c.max(1), s.max(1), p),
            (Err(e), ..) | (_, Err(e), ..) | (_, _, Err(e), ..) | (.., Err(e), _) | (.., Err(e)) => {
                return Ok(failed(e));
            }
        };
    let host = arg_str(args, "host").unwrap_or_else(|| "127.0.0.1".into());
    let path = arg_str(args, "path");
    let regex = arg_str(args, "search_regex");
    let state = arg_str(args, "state").unwrap_or_else(|| "started".into());
    let absent = matches!(state.as_str(), "stopped" | "absent");
    if state == "stopped" && port.is_none() {
        return Ok(failed("state=stopped should only be used for checking a port in the wait_for module"));
    }
    if !matches!(state.as_str(), "started" | "present" | "stopped" | "absent") {
        return Ok(failed(format!("state `{state}` is not supported (started, present, stopped, absent)")));
    }
    let (check, what) = match (&port, &path) {
        (Some(port), _) => {
            let probe = format!(
                "timeout {connect_timeout} bash -c {} 2>/dev/null",
                shell_quote(&format!("exec 3<>/dev/tcp/{host}/{port}"))
            );
            (probe, format!("{host}:{port}"))
        }
        (None, Some(path)) => {
            let q = shell_quote(path);
            match &regex {
                Some(re) if !absent => (
                    format!("grep -E -q -- {} {q} 2>/dev/null", shell_quote(re)),
                    format!("search string {re} in {path}"),
                ),
                _ => (format!("[ -e {q} ]"), format!("file {path}")),
            }
        }
        (None, None) => (String::from("false"), String::new()),
    };
    let script = if port.is_none() && path.is_none() {
        // Neither port nor path: wait_for just sleeps for `timeout`.
        format!("sleep {}", delay.saturating_add(timeout))
    } else {
        let cond = if absent { format!("! {{ {check}; }}") } else { check };
        format!(
            "sleep {delay}; end=$(( $(date +%s) + {timeout} )); while :; do if {cond}; then exit 0; fi; \
             if [ $(date +%s) -ge $end ]; then exit 1; fi; sleep {sleep}; done"
        )
    };
    let began = Instant::now();
    let limit =
        Duration::from_secs(delay.saturating_add(timeout).saturating_add(connect_timeout).saturating_add(30) as u64);
    let out = ctx.exec_with(&script, None, Some(limit)).await?;
    let elapsed = began.elapsed().as_secs();
    // Ansible's wait_for names every target it could have waited on, null when not given.
    let r = obj(json!({"changed": false, "elapsed": elapsed, "state": state, "port": port, "path": path,
                           "search_regex": regex, "match_groups": [], "match_groupdict": {}}));
    if out.status != 0 && !what.is_empty() {
        let default = if absent {
            // Ansible names a path bare here, not as "file PATH".
            match (&port, &path) {
                (Some(p), _) => format!("Timeout when waiting for {host}:{p} to stop."),
                (None, Some(path)) => format!("Timeout when waiting for {path} to be absent."),
                (None, None) => String::new(),
            }
        } else {
            format!("Timeout when waiting for {what}")
        };
        // As ansible-core 2.19 reports a timeout: only the elapsed time with the failure.
        let mut r = obj(json!({"changed": false, "elapsed": elapsed, "failed": true, "exception": NO_TRACEBACK}));
        r.insert("msg".into(), Value::String(arg_str(args, "msg").unwrap_or(default)));
        return Ok(r);
    }
    Ok(r)
}

/// Ansible's reboot action: read the boot time, run the reboot command (a connection that drops under it is
/// expected), then poll until the boot time differs and the test command succeeds, reconnecting as needed. Each of
/// the two waits gets `reboot_timeout` seconds, as in Ansible.
pub(super) async fn reboot(ctx: &ModuleContext, args: &Map<String, Value>) -> ModuleResult {
    let Some(conn) = ctx.connection.clone() else { return Ok(failed("no connection for this module")) };
    if conn.is_local() {
        return Ok(obj(json!({"changed": false, "elapsed": 0, "rebooted": false, "failed": true,
            "msg": "Running reboot with local connection would reboot the control node."})));
    }
    if ctx.check_mode {
        return Ok(obj(json!({"changed": true, "elapsed": 0, "rebooted": true})));
    }
    let int = |k: &str, d: i64| arg_int(args, k).map(|v| v.unwrap_or(d));
    let (reboot_timeout, pre_delay, post_delay, connect_timeout) = match (
        int("reboot_timeout", 600),
        int("pre_reboot_delay", 0),
        int("post_reboot_delay", 0),
        arg_int(args, "connect_timeout"),
    ) {
        (Ok(t), Ok(pre), Ok(post), Ok(c)) => (t, pre.max(0), post.max(0), c),
        (Err(e), ..) | (_, Err(e), ..) | (_, _, Err(e), _) | (.., Err(e)) => return Ok(failed(e)),
    };
    // A connect_timeout bounds each attempt while the host is away; otherwise ssh's own connect timeout does, and
    // a command on a connection that hangs is given up after a while.
    let attempt_limit = match connect_timeout {
        Some(c) if c > 0 => Duration::from_secs(c as u64),
        _ => REBOOT_ATTEMPT_LIMIT,
    };
    let boot_time_command = arg_str(args, "boot_time_command")
        .filter(|c| !c.is_empty())
        .unwrap_or_else(|| DEFAULT_BOOT_TIME_COMMAND.into());
    let test_command = arg_str(args, "test_command").unwrap_or_else(|| "whoami".into());

    let previous = match boot_time(ctx, &boot_time_command, None).await? {
        Ok(t) => t,
        Err(msg) => return Ok(obj(json!({"failed": true, "reboot": false, "msg": msg}))),
    };

    let shutdown = match shutdown_command(ctx, args, pre_delay).await? {
        Ok(line) => line,
        Err(result) => return Ok(result),
    };
    // The host may go down under the command: a lost connection means the reboot has begun, as in Ansible.
    let reboot_result = match ctx.exec(&shutdown, None).await {
        Ok(out) => Some(out),
        Err(_) => None,
    };
    let start = Instant::now();
    if let Some(out) = reboot_result.filter(|out| out.status != 0) {
        return Ok(obj(json!({
            "failed": true,
            "rebooted": false,
            "elapsed": start.elapsed().as_secs(),
            "msg": format!(
                "Reboot command failed. Error was: '{}, {}'",
                String::from_utf8_lossy(&out.stdout).trim(),
                String::from_utf8_lossy(&out.stderr).trim()
            ),
        })));
    }
    if post_delay > 0 {
        tokio::time::sleep(Duration::from_secs(post_delay as u64)).await;
    }
    let timeout = Duration::from_secs(reboot_timeout.max(0) as u64);
    let booted = until_success_or_timeout(&conn, timeout, || async {
        match boot_time(ctx, &boot_time_command, Some(attempt_limit)).await? {
            Ok(now) if !now.is_empty() && now != previous => Ok(Ok(())),
            Ok(_) => Ok(Err("boot time has not changed".to_string())),
            Err(msg) => Ok(Err(msg)),
        }
    })
    .await;
    let tested = match booted {
        true => {
            until_success_or_timeout(&conn, timeout, || async {
                let out = ctx.exec_with(&test_command, None, Some(attempt_limit)).await?;
                if out.status == 0 {
                    Ok(Ok(()))
                } else {
                    Ok(Err(format!(
                        "Test command failed: {} {}",
                        String::from_utf8_lossy(&out.stderr),
                        String::from_utf8_lossy(&out.stdout)
                    )))
                }
            })
            .await
        }
        false => false,
    };
    let elapsed = start.elapsed().as_secs();
    if !booted || !tested {
        let what = if booted { "post-reboot test command" } else { "last boot time check" };
        return Ok(obj(json!({
            "failed": true,
            "rebooted": true,
            "elapsed": elapsed,
            "msg": format!("Timed out waiting for {what} (timeout={reboot_timeout})"),
        })));
    }
    Ok(obj(json!({"changed": true, "rebooted": true, "elapsed": elapsed})))
}

/// The command line that reboots the host: `reboot_command`, or Ansible's `shutdown -r`, found in `search_paths`
/// when not given as an absolute path. `Err` is the module's failed result.
async fn shutdown_command(
    ctx: &ModuleContext,
    args: &Map<String, Value>,
    pre_delay: i64,
) -> Result<Result<String, Map<String, Value>>, ConnectionError> {
    let (shutdown_bin, shutdown_args) = match arg_str(args, "reboot_command") {
        Some(command) if command.is_empty() || command.starts_with(' ') => {
            return Ok(Err(failed(format!("reboot_command `{command}` does not start with a command"))));
        }
        Some(command) => match command.split_once(' ') {
            Some((bin, rest)) => (bin.to_string(), rest.to_string()),
            None => (command, String::new()),
        },
        None => {
            let msg = arg_str(args, "msg").unwrap_or_else(|| "Reboot initiated by Ansible".into());
            ("shutdown".to_string(), format!("-r {} \"{msg}\"", pre_delay / 60))
        }
    };
    let shutdown_path = if shutdown_bin.starts_with('/') {
        shutdown_bin
    } else {
        let paths: Vec<String> = match args.get("search_paths") {
            None | Some(Value::Null) => DEFAULT_SEARCH_PATHS.iter().map(|p| p.to_string()).collect(),
            Some(Value::Array(items)) if items.iter().all(Value::is_string) => items.iter().map(text).collect(),
            Some(Value::String(s)) => s.split(',').map(|p| p.trim().to_string()).collect(),
            Some(other) => {
                return Ok(Err(failed(format!(
                    "'search_paths' must be a string or flat list of strings, got {other}"
                ))));
            }
        };
        match find_command(ctx, &shutdown_bin, &paths).await? {
            Some(path) => path,
            None => {
                let listed = paths.iter().map(|p| format!("'{p}'")).collect::<Vec<_>>().join(", ");
                return Ok(Err(failed(format!(
                    "Unable to find command \"{shutdown_bin}\" in search paths: [{listed}]"
                ))));
            }
        }
    };
    Ok(Ok(format!("{shutdown_path} {shutdown_args}")))
}

pub(super) const DEFAULT_BOOT_TIME_COMMAND: &str = "cat /proc/sys/kernel/random/boot_id";

pub(super) const DEFAULT_SEARCH_PATHS: [&str; 5] = ["/sbin", "/bin", "/usr/sbin", "/usr/bin", "/usr/local/sbin"];

/// How long one attempt to reach a rebooting host may take when the task sets no `connect_timeout`.
pub(super) const REBOOT_ATTEMPT_LIMIT: Duration = Duration::from_secs(30);

/// The host's boot time (its boot id on Linux), or Ansible's message when the command fails.
pub(super) async fn boot_time(
    ctx: &ModuleContext,
    command: &str,
    limit: Option<Duration>,
) -> Result<Result<String, String>, ConnectionError> {
    let out = ctx.exec_with(command, None, limit).await?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    if out.status != 0 {
        return Ok(Err(format!(
            "reboot: failed to get host boot time info, rc: {}, stdout: {stdout}, stderr: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        )));
    }
    Ok(Ok(stdout.trim().to_string()))
}

/// Where `name` lives in the first of `paths` that holds it (Ansible runs `find` there: PATH is not used).
pub(super) async fn find_command(
    ctx: &ModuleContext,
    name: &str,
    paths: &[String],
) -> Result<Option<String>, ConnectionError> {
    let dirs = paths.iter().map(|p| shell_quote(p)).collect::<Vec<_>>().join(" ");
    let script = format!(
        "for d in {dirs}; do if [ -e \"$d\"/{n} ]; then printf '%s\\n' \"$d\"/{n}; exit 0; fi; done; exit 1",
        n = shell_quote(name)
    );
    let out = ctx.exec(&script, None).await?;
    let found = String::from_utf8_lossy(&out.stdout).trim().to_string();
    Ok(Some(found).filter(|f| out.status == 0 && !f.is_empty()))
}

/// Ansible's `do_until_success_or_timeout` for the reboot action: retries `attempt` with exponential backoff (1, 2,
/// 4, 8, then 12 seconds, plus up to a second of jitter) until it succeeds or `timeout` has passed. A connection
/// failure resets the connection, so the next attempt connects anew. True when an attempt succeeded.
pub(super) async fn until_success_or_timeout<F, Fut>(conn: &SharedConnection, timeout: Duration, mut attempt: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<Result<(), String>, ConnectionError>>,
{
    let deadline = Instant::now() + timeout;
    let mut fail_count: u32 = 0;
    while Instant::now() < deadline {
        match attempt().await {
            Ok(Ok(())) => return true,
            Ok(Err(_)) => {}
            Err(_) => conn.close().await,
        }
        let jitter = Duration::from_millis(u64::from(
            SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default().subsec_millis(),
        ));
        let backoff = Duration::from_secs(2u64.saturating_pow(fail_count.min(10)).min(12)) + jitter;
        fail_count = fail_count.saturating_add(1);
        // Sleeping past the deadline would only delay the verdict.
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        tokio::time::sleep(backoff.min(left)).await;
    }
    false
}

/// Ansible's wait_for_connection: after `delay`, try a command on the host every `sleep` seconds, each attempt on a
/// fresh connection, until one answers or `timeout` has passed.
pub(super) async fn wait_for_connection(ctx: &ModuleContext, args: &Map<String, Value>) -> ModuleResult {
    let int = |k: &str, d: i64| arg_int(args, k).map(|v| v.unwrap_or(d));
    let (connect_timeout, delay, sleep, timeout) =
        match (int("connect_timeout", 5), int("delay", 0), int("sleep", 1), int("timeout", 600)) {
            (Ok(c), Ok(d), Ok(s), Ok(t)) => (c.max(1) as u64, d.max(0) as u64, s.max(0) as u64, t.max(0) as u64),
            (Err(e), ..) | (_, Err(e), ..) | (_, _, Err(e), _) | (.., Err(e)) => return Ok(failed(e)),
        };
    let start = Instant::now();
    if delay > 0 {
        tokio::time::sleep(Duration::from_secs(delay)).await;
    }
    let deadline = Instant::now() + Duration::from_secs(timeout);
    let mut error = String::from("the connection was not tried");
    while Instant::now() < deadline {
        let conn = match (&ctx.connection, &ctx.pool) {
            (Some(conn), _) => Ok(conn.clone()),
            (None, Some(pool)) => pool.get_again(&ctx.target).await,
            (None, None) => Err(ConnectionError::Transport("no connection for this module".into())),
        };
        let answered = match conn {
            Ok(conn) => {
                // As Ansible resets the connection before each ping: the answer must come over a new one.
                conn.close().await;
                let limit = Duration::from_secs(connect_timeout);
                match conn.exec(&ctx.command_line("echo pong"), None, Some(limit)).await {
                    Ok(out) if out.status == 0 && out.stdout.starts_with(b"pong") => Ok(()),
                    Ok(out) => Err(format!(
                        "ping test failed: rc {}: {}",
                        out.status,
                        String::from_utf8_lossy(&out.stderr).trim()
                    )),
                    Err(e) => Err(e.to_string()),
                }
            }
            Err(e) => Err(e.to_string()),
        };
        match answered {
            Ok(()) => return Ok(obj(json!({"changed": false, "elapsed": start.elapsed().as_secs()}))),
            Err(e) => error = e,
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            break;
        }
        tokio::time::sleep(Duration::from_secs(sleep).min(left)).await;
    }
    Ok(obj(json!({
        "failed": true,
        "changed": false,
        "elapsed": start.elapsed().as_secs(),
        "msg": format!("timed out waiting for ping module test: {error}"),
    })))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_print_as_python_rounds_them() {
        assert_eq!(python_round2(1.0), "1.0");
        assert_eq!(python_round2(1.0149), "1.01");
        assert_eq!(python_round2(0.5), "0.5");
    }
}
