//! `command`, `shell` and `script`: a command line (or an uploaded script) run on the host, with Ansible's result.

use std::time::{Duration, Instant, SystemTime};

use serde_json::{Map, Value, json};

use super::common::*;
use super::context::{ModuleContext, read_local};
use crate::ansible_compat::{shell_quote, shlex_split};
use crate::connection::capture::bounded_text;
use crate::connection::{ConnectionError, ExecOutput};

pub(super) async fn path_exists(ctx: &ModuleContext, path: &str, chdir: Option<&str>) -> Result<bool, ConnectionError> {
    let cd = chdir.map(|d| format!("cd {} 2>/dev/null; ", shell_quote(d))).unwrap_or_default();
    // A glob, as Ansible's creates/removes accept: any match that exists.
    let check = format!("{cd}for f in {}; do [ -e \"$f\" ] && exit 0; done; exit 1", glob_word(path));
    Ok(ctx.exec(&check, None).await?.status == 0)
}

/// Quotes a path for the shell but leaves `*`, `?` and `[` active, so it still globs.
pub(super) fn glob_word(path: &str) -> String {
    let mut out = String::new();
    let mut plain = String::new();
    for c in path.chars() {
        if matches!(c, '*' | '?' | '[' | ']') {
            if !plain.is_empty() {
                out.push_str(&shell_quote(&std::mem::take(&mut plain)));
            }
            out.push(c);
        } else {
            plain.push(c);
        }
    }
    if !plain.is_empty() || out.is_empty() {
        out.push_str(&shell_quote(&plain));
    }
    out
}

pub(super) async fn command(ctx: &ModuleContext, args: &Map<String, Value>, shell: bool) -> ModuleResult {
    let raw = arg_str(args, "_raw_params").or_else(|| arg_str(args, "cmd"));
    let chdir = arg_str(args, "chdir");
    let (cmd_field, line) = if shell {
        let Some(raw) = raw else { return Ok(failed("no command given")) };
        let line = match arg_str(args, "executable") {
            Some(exe) => format!("{} -c {}", shell_quote(&exe), shell_quote(&raw)),
            None => raw.clone(),
        };
        (Value::String(raw), line)
    } else {
        let argv: Vec<String> = match (args.get("argv"), raw) {
            (Some(Value::Array(items)), _) => items.iter().map(text).collect(),
            (_, Some(raw)) => match shlex_split(&raw, false) {
                Ok(v) => v,
                Err(e) => return Ok(failed(format!("cannot split the command: {e}"))),
            },
            _ => Vec::new(),
        };
        if argv.is_empty() {
            return Ok(failed("no command given"));
        }
        let line = argv.iter().map(|a| shell_quote(a)).collect::<Vec<_>>().join(" ");
        (json!(argv), line)
    };
    let not_run = |msg: String, stdout: String| {
        obj(json!({
            "changed": false, "stdout": stdout.clone(), "stderr": "", "rc": 0, "cmd": cmd_field.clone(),
            "start": null, "end": null, "delta": null, "msg": msg,
            "stdout_lines": [stdout], "stderr_lines": [],
        }))
    };
    // Check mode says what it would do, as ansible-core's command module: "Would not run" where creates/removes
    // say so, else it would run (skipped when neither is given, since nothing tells what the command changes).
    let did = if ctx.check_mode { "Would" } else { "Did" };
    let (creates, removes) =
        (arg_str(args, "creates").filter(|s| !s.is_empty()), arg_str(args, "removes").filter(|s| !s.is_empty()));
    if let Some(creates) = &creates {
        if path_exists(ctx, creates, chdir.as_deref()).await? {
            return Ok(not_run(
                format!("{did} not run command since '{creates}' exists"),
                format!("skipped, since {creates} exists"),
            ));
        }
    }
    if let Some(removes) = &removes {
        if !path_exists(ctx, removes, chdir.as_deref()).await? {
            return Ok(not_run(
                format!("{did} not run command since '{removes}' does not exist"),
                format!("skipped, since {removes} does not exist"),
            ));
        }
    }
    if ctx.check_mode {
        let mut r = not_run("Command would have run if not in check mode".into(), String::new());
        r.insert("stdout_lines".into(), json!([]));
        if creates.is_none() && removes.is_none() {
            r.insert("skipped".into(), json!(true));
        } else {
            r.insert("changed".into(), json!(true));
        }
        return Ok(r);
    }
    let full = match &chdir {
        Some(dir) => format!("cd {} && {}", shell_quote(dir), line),
        None => line,
    };
    let stdin = arg_str(args, "stdin").map(|mut s| {
        if arg_bool(args, "stdin_add_newline", true) {
            s.push('\n');
        }
        s.into_bytes()
    });
    let (start, began) = (SystemTime::now(), Instant::now());
    let out = ctx.exec(&full, stdin.as_deref()).await?;
    let end = SystemTime::now();
    Ok(command_result(out, cmd_field, start, end, began.elapsed(), arg_bool(args, "strip_empty_ends", true)))
}

pub(super) fn command_result(
    out: ExecOutput,
    cmd: Value,
    start: SystemTime,
    end: SystemTime,
    took: Duration,
    strip: bool,
) -> Map<String, Value> {
    // In place: a cluster read of a 5,000-node cluster is 25 MB, copied once per conversion otherwise.
    let text = |bytes: Vec<u8>| {
        let mut text = String::from_utf8(bytes).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned());
        if strip {
            text.truncate(text.trim_end_matches(['\r', '\n']).len());
        }
        // A whole read grew by doubling: up to half of it would be kept empty in the fact store.
        if text.capacity() - text.len() > 64 * 1024 {
            text.shrink_to_fit();
        }
        text
    };
    let stdout = text(out.stdout);
    let stderr = text(out.stderr);
    // Whole only when the run reads the cluster (it parses `stdout`): the lines are of what is shown.
    let (stdout_lines, stderr_lines) = (lines(&bounded_text(&stdout)), lines(&stderr));
    // Built by moving the texts in (`json!` would copy them).
    let mut r = Map::new();
    r.insert("changed".into(), Value::Bool(true));
    r.insert("stdout".into(), Value::String(stdout));
    r.insert("stderr".into(), Value::String(stderr));
    r.insert("rc".into(), Value::from(out.status));
    r.insert("cmd".into(), cmd);
    r.insert("start".into(), Value::String(timestamp(start)));
    r.insert("end".into(), Value::String(timestamp(end)));
    r.insert("delta".into(), Value::String(delta(took)));
    r.insert("msg".into(), Value::String(String::new()));
    r.insert("stdout_lines".into(), stdout_lines);
    r.insert("stderr_lines".into(), stderr_lines);
    if out.status != 0 {
        r.insert("failed".into(), Value::Bool(true));
        r.insert("msg".into(), Value::String("non-zero return code".into()));
        // ansible-core 2.19 records that the module raised; a failed_when that clears the failure renames it.
        r.insert("exception".into(), Value::String(NO_TRACEBACK.into()));
    }
    r
}

pub(super) async fn script(ctx: &ModuleContext, args: &Map<String, Value>) -> ModuleResult {
    let Some(raw) = arg_str(args, "_raw_params").or_else(|| arg_str(args, "cmd")) else {
        return Ok(failed("script needs a path"));
    };
    let words = match shlex_split(&raw, false) {
        Ok(w) if !w.is_empty() => w,
        _ => return Ok(failed(format!("cannot split the script line `{raw}`"))),
    };
    let chdir = arg_str(args, "chdir");
    if let Some(creates) = arg_str(args, "creates").filter(|s| !s.is_empty()) {
        if path_exists(ctx, &creates, chdir.as_deref()).await? {
            return Ok(obj(
                json!({"changed": false, "msg": format!("{creates} exists, matching creates option"), "skipped": true, "rc": 0}),
            ));
        }
    }
    if let Some(removes) = arg_str(args, "removes").filter(|s| !s.is_empty()) {
        if !path_exists(ctx, &removes, chdir.as_deref()).await? {
            return Ok(obj(
                json!({"changed": false, "msg": format!("{removes} does not exist, matching removes option"), "skipped": true, "rc": 0}),
            ));
        }
    }
    let (_, data) = match read_local(ctx, &words[0], "files") {
        Ok(found) => found,
        Err(r) => return Ok(r),
    };
    // Check mode, as ansible-core's script action: changed where creates/removes say it would run, else skipped.
    if ctx.check_mode {
        return Ok(if args.contains_key("creates") || args.contains_key("removes") {
            obj(json!({"changed": true}))
        } else {
            obj(json!({"changed": false, "skipped": true, "msg": "Check mode is not supported for this task."}))
        });
    }
    let stem = std::path::Path::new(&words[0]).file_name().and_then(|n| n.to_str()).unwrap_or("script").to_string();
    let tmp = remote_tmp(&stem);
    let conn = ctx.connection.as_ref().ok_or_else(|| ConnectionError::Transport("no connection".into()))?;
    // Uploaded as the login user, run with become, removed afterwards whatever happens.
    let upload = conn
        .exec(&format!("umask 077; cat > {q} && chmod 0755 {q}", q = shell_quote(&tmp)), Some(&data), ctx.timeout)
        .await?;
    if upload.status != 0 {
        return Ok(failed(format!(
            "cannot copy the script to the host: {}",
            String::from_utf8_lossy(&upload.stderr).trim()
        )));
    }
    let mut line = shell_quote(&tmp);
    if let Some(exe) = arg_str(args, "executable") {
        line = format!("{} {line}", shell_quote(&exe));
    }
    for w in &words[1..] {
        line.push(' ');
        line.push_str(&shell_quote(w));
    }
    if let Some(dir) = &chdir {
        line = format!("cd {} && {line}", shell_quote(dir));
    }
    let (start, began) = (SystemTime::now(), Instant::now());
    let out = ctx.exec(&line, None).await;
    let _ = conn.exec(&format!("rm -f {}", shell_quote(&tmp)), None, ctx.timeout).await;
    let out = out?;
    let mut r = command_result(out, Value::Null, start, SystemTime::now(), began.elapsed(), false);
    for k in ["cmd", "start", "end", "delta"] {
        r.remove(k);
    }
    if r.get("failed").is_some() {
        r.insert("msg".into(), Value::String("non-zero return code".into()));
    } else {
        r.remove("msg");
    }
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn creates_and_removes_paths_still_glob() {
        assert_eq!(glob_word("/tmp/a b*.deb"), "'/tmp/a b'*.deb");
    }
}
