//! The modules: each turns its (templated) arguments into commands on the host and returns Ansible's result fields.
//!
//! Every command goes through `ModuleContext::exec`, which adds the task's `environment` and wraps it for `become`,
//! so the connection below only moves bytes.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use serde_json::{Map, Value, json};

use super::connect::ConnectionPool;
use super::engine::{EngineOptions, failed, parse_bool, resolve_local};
use super::model::Module;
use super::{Templar, Vars};
use crate::connection::{ConnectionError, ExecOutput, SharedConnection, shell_quote};

type ModuleResult = Result<Map<String, Value>, ConnectionError>;

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

    async fn exec_with(
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
            async move {
                if whole_stdout {
                    conn.exec_whole_stdout(&line, input.as_deref(), timeout).await
                } else {
                    conn.exec(&line, input.as_deref(), timeout).await
                }
            }
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
fn without_prompt(stderr: &[u8]) -> Vec<u8> {
    let text = String::from_utf8_lossy(stderr);
    if !text.contains(BECOME_PROMPT) {
        return stderr.to_vec();
    }
    text.replace(BECOME_PROMPT, "").into_bytes()
}

pub fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "NoneType",
        Value::Bool(_) => "bool",
        Value::Number(n) if n.is_f64() => "float",
        Value::Number(_) => "int",
        Value::String(_) => "str",
        Value::Array(_) => "list",
        Value::Object(_) => "dict",
    }
}

fn obj(v: Value) -> Map<String, Value> {
    match v {
        Value::Object(m) => m,
        _ => Map::new(),
    }
}

fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

fn arg_str(args: &Map<String, Value>, key: &str) -> Option<String> {
    args.get(key).filter(|v| !v.is_null()).map(text)
}

fn arg_bool(args: &Map<String, Value>, key: &str, default: bool) -> bool {
    args.get(key).and_then(parse_bool).unwrap_or(default)
}

fn arg_int(args: &Map<String, Value>, key: &str) -> Result<Option<i64>, String> {
    match args.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => v
            .as_i64()
            .or_else(|| v.as_f64().map(|f| f as i64))
            .or_else(|| v.as_str().and_then(|s| s.trim().parse().ok()))
            .map(Some)
            .ok_or_else(|| format!("argument `{key}` must be a number, got {v}")),
    }
}

pub async fn run(ctx: &ModuleContext, module: Module, args: &Map<String, Value>, vars: &Vars) -> ModuleResult {
    match module {
        Module::Command => command(ctx, args, false).await,
        Module::Shell => command(ctx, args, true).await,
        Module::Script => script(ctx, args).await,
        Module::Copy => copy(ctx, args, None).await,
        Module::Template => template(ctx, args, vars).await,
        Module::Fetch => fetch(ctx, args).await,
        Module::Debug => Ok(debug(ctx, args, vars)),
        Module::Pause => Ok(pause(ctx, args).await),
        Module::Assert => Ok(assert(ctx, args, vars)),
        Module::Fail => Ok(fail(args)),
        Module::SetFact => Ok(set_fact(args)),
        Module::WaitFor => wait_for(ctx, args).await,
        Module::Stat => stat(ctx, args).await,
        Module::Reboot => reboot(ctx, args).await,
        Module::WaitForConnection => wait_for_connection(ctx, args).await,
    }
}

/// `2024-05-01 12:00:00.123456`, as Python's `datetime.now()` prints (UTC here).
pub fn timestamp(t: SystemTime) -> String {
    let d = t.duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default();
    let (year, month, day, hour, minute, second) = crate::journal::civil(t);
    format!("{year:04}-{month:02}-{day:02} {hour:02}:{minute:02}:{second:02}.{:06}", d.subsec_micros())
}

/// `0:00:01.002003`, as Python prints a timedelta.
pub fn delta(d: Duration) -> String {
    let s = d.as_secs();
    format!("{}:{:02}:{:02}.{:06}", s / 3600, s % 3600 / 60, s % 60, d.subsec_micros())
}

fn lines(s: &str) -> Value {
    Value::Array(s.lines().map(|l| Value::String(l.to_string())).collect())
}

/// POSIX shell-like splitting (Python's `shlex.split`), for `command`.
pub fn shlex_split(s: &str) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut in_word = false;
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(c) => cur.push(c),
                        None => return Err("No closing quotation".into()),
                    }
                }
            }
            '"' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            Some(c @ ('"' | '\\' | '$' | '`')) => cur.push(c),
                            Some(c) => {
                                cur.push('\\');
                                cur.push(c);
                            }
                            None => return Err("No closing quotation".into()),
                        },
                        Some(c) => cur.push(c),
                        None => return Err("No closing quotation".into()),
                    }
                }
            }
            '\\' => {
                in_word = true;
                if let Some(c) = chars.next() {
                    cur.push(c);
                }
            }
            c if c.is_whitespace() => {
                if in_word {
                    out.push(std::mem::take(&mut cur));
                    in_word = false;
                }
            }
            c => {
                in_word = true;
                cur.push(c);
            }
        }
    }
    if in_word {
        out.push(cur);
    }
    Ok(out)
}

async fn path_exists(ctx: &ModuleContext, path: &str, chdir: Option<&str>) -> Result<bool, ConnectionError> {
    let cd = chdir.map(|d| format!("cd {} 2>/dev/null; ", shell_quote(d))).unwrap_or_default();
    // A glob, as Ansible's creates/removes accept: any match that exists.
    let check = format!("{cd}for f in {}; do [ -e \"$f\" ] && exit 0; done; exit 1", glob_word(path));
    Ok(ctx.exec(&check, None).await?.status == 0)
}

/// Quotes a path for the shell but leaves `*`, `?` and `[` active, so it still globs.
fn glob_word(path: &str) -> String {
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

async fn command(ctx: &ModuleContext, args: &Map<String, Value>, shell: bool) -> ModuleResult {
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
            (_, Some(raw)) => match shlex_split(&raw) {
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
    if let Some(creates) = arg_str(args, "creates").filter(|s| !s.is_empty()) {
        if path_exists(ctx, &creates, chdir.as_deref()).await? {
            return Ok(not_run(
                format!("Did not run command since '{creates}' exists"),
                format!("skipped, since {creates} exists"),
            ));
        }
    }
    if let Some(removes) = arg_str(args, "removes").filter(|s| !s.is_empty()) {
        if !path_exists(ctx, &removes, chdir.as_deref()).await? {
            return Ok(not_run(
                format!("Did not run command since '{removes}' does not exist"),
                format!("skipped, since {removes} does not exist"),
            ));
        }
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

fn command_result(
    out: ExecOutput,
    cmd: Value,
    start: SystemTime,
    end: SystemTime,
    took: Duration,
    strip: bool,
) -> Map<String, Value> {
    let mut stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let mut stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    if strip {
        stdout = stdout.trim_end_matches(['\r', '\n']).to_string();
        stderr = stderr.trim_end_matches(['\r', '\n']).to_string();
    }
    let mut r = obj(json!({
        "changed": true,
        "stdout": stdout,
        "stderr": stderr,
        "rc": out.status,
        "cmd": cmd,
        "start": timestamp(start),
        "end": timestamp(end),
        "delta": delta(took),
        "msg": "",
        "stdout_lines": lines(&stdout),
        "stderr_lines": lines(&stderr),
    }));
    if out.status != 0 {
        r.insert("failed".into(), Value::Bool(true));
        r.insert("msg".into(), Value::String("non-zero return code".into()));
        // ansible-core 2.19 records that the module raised; a failed_when that clears the failure renames it.
        r.insert("exception".into(), Value::String(NO_TRACEBACK.into()));
    }
    r
}

pub const NO_TRACEBACK: &str = "(traceback unavailable)";

fn read_local(ctx: &ModuleContext, name: &str, sub: &str) -> Result<(PathBuf, Vec<u8>), Map<String, Value>> {
    let path = resolve_local(&ctx.task_file, name, Some(sub));
    std::fs::read(&path)
        .map(|data| (path.clone(), data))
        .map_err(|e| failed(format!("Could not find or access '{name}' (looked for {}): {e}", path.display())))
}

/// A unique name for a temporary file on the host.
fn remote_tmp(stem: &str) -> String {
    static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let nanos = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default().subsec_nanos();
    format!("/tmp/.upgrade-{}-{n}-{nanos}-{stem}", std::process::id())
}

async fn script(ctx: &ModuleContext, args: &Map<String, Value>) -> ModuleResult {
    let Some(raw) = arg_str(args, "_raw_params").or_else(|| arg_str(args, "cmd")) else {
        return Ok(failed("script needs a path"));
    };
    let words = match shlex_split(&raw) {
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

/// Octal text for chmod: YAML's `0644` arrives as 420 and means 0o644, as in Ansible.
fn mode_text(mode: &Value) -> Option<String> {
    match mode {
        Value::Number(n) => n.as_u64().map(|m| format!("0{m:o}")),
        Value::String(s) if !s.is_empty() => Some(s.clone()),
        _ => None,
    }
}

async fn copy(ctx: &ModuleContext, args: &Map<String, Value>, rendered: Option<Vec<u8>>) -> ModuleResult {
    let Some(mut dest) = arg_str(args, "dest") else { return Ok(failed("dest is required")) };
    let (data, src_name) = match (rendered, args.get("content"), arg_str(args, "src")) {
        (Some(data), _, src) => (data, src),
        (None, Some(content), _) if !content.is_null() => {
            let text = match content {
                Value::String(s) => s.clone(),
                other => serde_json::to_string(other).unwrap_or_default(),
            };
            (text.into_bytes(), None)
        }
        (None, _, Some(src)) => match read_local(ctx, &src, "files") {
            Ok((_, data)) => (data, Some(src)),
            Err(r) => return Ok(r),
        },
        _ => return Ok(failed("src (or content) is required")),
    };
    let checksum = sha1_hex(&data);
    let base = src_name.as_deref().and_then(|s| std::path::Path::new(s).file_name()).and_then(|n| n.to_str());
    if dest.ends_with('/') {
        match base {
            Some(base) => dest.push_str(base),
            None => return Ok(failed(format!("dest {dest} is a directory; content needs a file name"))),
        }
    }
    match copy_to(ctx, args, &data, &dest, &checksum).await? {
        CopyOutcome::Done(r) => Ok(r),
        CopyOutcome::IsDir => match base {
            Some(base) => {
                let inner = format!("{}/{base}", dest.trim_end_matches('/'));
                match copy_to(ctx, args, &data, &inner, &checksum).await? {
                    CopyOutcome::Done(r) => Ok(r),
                    CopyOutcome::IsDir => Ok(failed(format!("{inner} is a directory"))),
                }
            }
            None => Ok(failed(format!("dest {dest} is a directory; content needs a file name"))),
        },
    }
}

enum CopyOutcome {
    Done(Map<String, Value>),
    IsDir,
}

async fn copy_to(
    ctx: &ModuleContext,
    args: &Map<String, Value>,
    data: &[u8],
    dest: &str,
    checksum: &str,
) -> Result<CopyOutcome, ConnectionError> {
    let q = shell_quote(dest);
    let probe = ctx
        .exec(
            &format!(
                "if [ -d {q} ]; then echo dir; elif [ -e {q} ]; then sha1sum < {q} | cut -c1-40; stat -c %a {q}; fi"
            ),
            None,
        )
        .await?;
    let probe_out = String::from_utf8_lossy(&probe.stdout).into_owned();
    if probe_out.trim() == "dir" {
        return Ok(CopyOutcome::IsDir);
    }
    let mut it = probe_out.lines();
    let remote_sum = it.next().map(|s| s.trim().to_string());
    let remote_mode = it.next().map(|s| s.trim().to_string());
    let mode = args.get("mode").and_then(mode_text);
    let force = arg_bool(args, "force", true);
    let mut changed = false;
    let mut written = false;
    let exists = remote_sum.is_some();
    if remote_sum.as_deref() != Some(checksum) && (force || !exists) {
        written = true;
        let tmp = format!("{dest}.upgrade-tmp");
        let t = shell_quote(&tmp);
        let mut line = format!("cat > {t}");
        if let Some(m) = &mode {
            line.push_str(&format!(" && chmod {} {t}", shell_quote(m)));
        } else if let Some(existing) = &remote_mode {
            line.push_str(&format!(" && chmod {} {t}", shell_quote(existing)));
        }
        line.push_str(&format!(" && mv -f {t} {q} || {{ rc=$?; rm -f {t}; exit $rc; }}"));
        let out = ctx.exec(&line, Some(data)).await?;
        if out.status != 0 {
            return Ok(CopyOutcome::Done(failed(format!(
                "cannot write {dest}: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ))));
        }
        changed = true;
    } else if let Some(m) = &mode {
        let wanted = u32::from_str_radix(m.trim_start_matches('0'), 8).ok();
        let current = remote_mode.as_deref().and_then(|r| u32::from_str_radix(r, 8).ok());
        if wanted.is_none() || wanted != current {
            let out = ctx.exec(&format!("chmod {} {q}", shell_quote(m)), None).await?;
            if out.status != 0 {
                return Ok(CopyOutcome::Done(failed(format!(
                    "cannot chmod {dest}: {}",
                    String::from_utf8_lossy(&out.stderr).trim()
                ))));
            }
            changed = wanted.is_none() || wanted != current;
        }
    }
    for key in ["owner", "group"] {
        if let Some(who) = arg_str(args, key) {
            let flag = if key == "owner" { "" } else { ":" };
            let out = ctx.exec(&format!("chown {flag}{} {q}", shell_quote(&who)), None).await?;
            if out.status != 0 {
                return Ok(CopyOutcome::Done(failed(format!(
                    "cannot chown {dest}: {}",
                    String::from_utf8_lossy(&out.stderr).trim()
                ))));
            }
        }
    }
    let mut r =
        obj(json!({"changed": changed, "dest": dest, "checksum": checksum, "size": data.len(), "state": "file"}));
    if let Some(m) = mode {
        r.insert("mode".into(), Value::String(m));
    }
    if !written {
        // Ansible hands an unchanged file to the `file` module, whose result names it `path` as well.
        r.insert("path".into(), Value::String(dest.to_string()));
    }
    Ok(CopyOutcome::Done(r))
}

async fn template(ctx: &ModuleContext, args: &Map<String, Value>, vars: &Vars) -> ModuleResult {
    let Some(src) = arg_str(args, "src") else { return Ok(failed("src is required")) };
    let (path, data) = match read_local(ctx, &src, "templates") {
        Ok(found) => found,
        Err(r) => return Ok(r),
    };
    let source = String::from_utf8_lossy(&data).into_owned();
    let rendered = match ctx.templar.render_str(&source, vars) {
        Ok(s) => s,
        Err(e) => return Ok(failed(format!("{}: {}", path.display(), e.message))),
    };
    copy(ctx, args, Some(rendered.into_bytes())).await
}

async fn fetch(ctx: &ModuleContext, args: &Map<String, Value>) -> ModuleResult {
    let (Some(src), Some(dest)) = (arg_str(args, "src"), arg_str(args, "dest")) else {
        return Ok(failed("src and dest are required"));
    };
    let out = ctx.exec_reading_file(&format!("cat {}", shell_quote(&src))).await?;
    if out.status != 0 {
        let msg = "the remote file does not exist, not transferring, ignored";
        if arg_bool(args, "fail_on_missing", true) {
            return Ok(obj(
                json!({"failed": true, "msg": "the remote file does not exist", "file": src, "changed": false}),
            ));
        }
        return Ok(obj(json!({"changed": false, "msg": msg, "file": src})));
    }
    let base_dir = ctx.task_file.parent().map(PathBuf::from).unwrap_or_default();
    let dest_path = if arg_bool(args, "flat", false) {
        let mut d = dest.clone();
        if d.ends_with('/') {
            d.push_str(std::path::Path::new(&src).file_name().and_then(|n| n.to_str()).unwrap_or("file"));
        }
        base_dir.join(d)
    } else {
        base_dir.join(&dest).join(&ctx.host).join(src.trim_start_matches('/'))
    };
    let checksum = sha1_hex(&out.stdout);
    let current = std::fs::read(&dest_path).ok().map(|d| sha1_hex(&d));
    let changed = current.as_deref() != Some(checksum.as_str());
    if changed {
        if let Some(parent) = dest_path.parent() {
            if let Err(e) = std::fs::create_dir_all(parent) {
                return Ok(failed(format!("cannot create {}: {e}", parent.display())));
            }
        }
        if let Err(e) = std::fs::write(&dest_path, &out.stdout) {
            return Ok(failed(format!("cannot write {}: {e}", dest_path.display())));
        }
    }
    let mut r = obj(json!({
        "changed": changed,
        "checksum": checksum,
        "remote_checksum": checksum,
        "dest": dest_path.display().to_string(),
    }));
    if !changed {
        // As Ansible's fetch: only a copy already up to date names the remote `file`.
        r.insert("file".into(), Value::String(src));
    }
    Ok(r)
}

fn debug(ctx: &ModuleContext, args: &Map<String, Value>, vars: &Vars) -> Map<String, Value> {
    let verbosity = arg_int(args, "verbosity").ok().flatten().unwrap_or(0);
    if i64::from(ctx.options.verbosity) < verbosity {
        return obj(json!({"skipped_reason": "Verbosity threshold not met.", "skipped": true, "changed": false}));
    }
    if let Some(var) = arg_str(args, "var") {
        // ansible-core 2.19 shows the template error in place of the value, with a warning.
        let (value, warning) = match ctx.templar.eval_expression(&var, vars) {
            Ok(v) => (v, None),
            Err(e) => (
                Value::String(format!("<< error 1 - {} >>", e.message)),
                Some(format!("Encountered 1 template error.\nerror 1 - {}", e.message)),
            ),
        };
        let mut r = Map::new();
        r.insert(var, value);
        if let Some(w) = warning {
            r.insert("warnings".into(), json!([w]));
        }
        r.insert("changed".into(), Value::Bool(false));
        r.insert("failed".into(), Value::Bool(false));
        return r;
    }
    let msg = args.get("msg").cloned().unwrap_or_else(|| Value::String("Hello world!".into()));
    obj(json!({"msg": msg, "changed": false, "failed": false}))
}

async fn pause(ctx: &ModuleContext, args: &Map<String, Value>) -> Map<String, Value> {
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
fn python_round2(x: f64) -> String {
    let r = (x * 100.0).round() / 100.0;
    let text = format!("{r:.2}");
    let text = text.trim_end_matches('0');
    if text.ends_with('.') { format!("{text}0") } else { text.to_string() }
}

fn assert(ctx: &ModuleContext, args: &Map<String, Value>, vars: &Vars) -> Map<String, Value> {
    let conditions: Vec<Value> = match args.get("that") {
        Some(Value::Array(items)) => items.clone(),
        Some(other) => vec![other.clone()],
        None => return failed("conditional required in \"that\" string"),
    };
    for cond in conditions {
        let (holds, text) = match &cond {
            Value::Bool(b) => (*b, if *b { "True".into() } else { "False".into() }),
            Value::String(s) => match ctx.templar.eval_condition(&cond, vars) {
                Ok(b) => (b, s.clone()),
                Err(e) => return failed(format!("The conditional check '{s}' failed. The error was: {}", e.message)),
            },
            other => (parse_bool(other).unwrap_or(false), other.to_string()),
        };
        if !holds {
            let msg =
                args.get("fail_msg").or_else(|| args.get("msg")).cloned().unwrap_or_else(|| "Assertion failed".into());
            return obj(json!({"failed": true, "evaluated_to": false, "assertion": text, "msg": msg, "changed": false,
                       "exception": NO_TRACEBACK}));
        }
    }
    let msg = args.get("success_msg").cloned().unwrap_or_else(|| "All assertions passed".into());
    obj(json!({"changed": false, "msg": msg}))
}

fn fail(args: &Map<String, Value>) -> Map<String, Value> {
    let msg = args.get("msg").cloned().unwrap_or_else(|| "Failed as requested from task".into());
    obj(json!({"failed": true, "msg": msg, "changed": false, "exception": NO_TRACEBACK}))
}

fn set_fact(args: &Map<String, Value>) -> Map<String, Value> {
    let mut facts = Map::new();
    for (k, v) in args {
        if k == "cacheable" {
            continue;
        }
        // ansible-core 2.19 keeps `k=v` text as text (`flag=yes` is "yes").
        facts.insert(k.clone(), v.clone());
    }
    if facts.is_empty() {
        return failed("No key/value pairs provided, at least one is required for this action to succeed");
    }
    obj(json!({"ansible_facts": facts, "changed": false}))
}

async fn wait_for(ctx: &ModuleContext, args: &Map<String, Value>) -> ModuleResult {
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

async fn stat(ctx: &ModuleContext, args: &Map<String, Value>) -> ModuleResult {
    let Some(path) = arg_str(args, "path") else { return Ok(failed("path is required")) };
    let q = shell_quote(&path);
    let follow = if arg_bool(args, "follow", false) { "-L " } else { "" };
    let want_sum = arg_bool(args, "get_checksum", true);
    let algo = arg_str(args, "checksum_algorithm").unwrap_or_else(|| "sha1".into());
    let sum_tool = match algo.as_str() {
        "sha1" => "sha1sum",
        "sha224" => "sha224sum",
        "sha256" => "sha256sum",
        "sha384" => "sha384sum",
        "sha512" => "sha512sum",
        "md5" => "md5sum",
        other => return Ok(failed(format!("checksum_algorithm `{other}` is not supported"))),
    };
    let script = format!(
        "if [ ! -e {q} ] && [ ! -L {q} ]; then echo absent; exit 0; fi; \
         stat {follow}-c '%f|%s|%a|%u|%g|%U|%G|%Y|%X|%Z|%i|%h|%d' {q} || exit 1; \
         r=0; w=0; x=0; [ -r {q} ] && r=1; [ -w {q} ] && w=1; [ -x {q} ] && x=1; echo \"$r|$w|$x\"; \
         if [ {sum} = 1 ] && [ -f {q} ] && [ -r {q} ]; then {sum_tool} < {q} | cut -d' ' -f1; fi; \
         if [ -L {q} ]; then readlink {q}; fi",
        sum = if want_sum { 1 } else { 0 }
    );
    let out = ctx.exec(&script, None).await?;
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let mut lines = stdout.lines();
    let first = lines.next().unwrap_or_default();
    if first == "absent" {
        return Ok(obj(json!({"changed": false, "stat": {"exists": false}})));
    }
    if out.status != 0 {
        return Ok(failed(format!("cannot stat {path}: {}", String::from_utf8_lossy(&out.stderr).trim())));
    }
    let f: Vec<&str> = first.split('|').collect();
    let field = |i: usize| f.get(i).copied().unwrap_or_default();
    let num = |i: usize| field(i).parse::<u64>().unwrap_or(0);
    let raw_mode = u32::from_str_radix(field(0), 16).unwrap_or(0);
    let kind = raw_mode & 0o170000;
    let perms = raw_mode & 0o7777;
    let access: Vec<bool> = lines.next().unwrap_or("0|0|0").split('|').map(|b| b == "1").collect();
    let mut st = obj(json!({
        "exists": true,
        "path": path,
        "mode": format!("{perms:04o}"),
        "isdir": kind == 0o040000,
        "isreg": kind == 0o100000,
        "islnk": kind == 0o120000,
        "ischr": kind == 0o020000,
        "isblk": kind == 0o060000,
        "isfifo": kind == 0o010000,
        "issock": kind == 0o140000,
        "size": num(1),
        "uid": num(3),
        "gid": num(4),
        "pw_name": field(5),
        "gr_name": field(6),
        "mtime": num(7),
        "atime": num(8),
        "ctime": num(9),
        "inode": num(10),
        "nlink": num(11),
        "dev": num(12),
        "readable": access.first().copied().unwrap_or(false),
        "writeable": access.get(1).copied().unwrap_or(false),
        "executable": access.get(2).copied().unwrap_or(false),
        "isuid": perms & 0o4000 != 0,
        "isgid": perms & 0o2000 != 0,
        "rusr": perms & 0o400 != 0, "wusr": perms & 0o200 != 0, "xusr": perms & 0o100 != 0,
        "rgrp": perms & 0o040 != 0, "wgrp": perms & 0o020 != 0, "xgrp": perms & 0o010 != 0,
        "roth": perms & 0o004 != 0, "woth": perms & 0o002 != 0, "xoth": perms & 0o001 != 0,
    }));
    let rest: Vec<&str> = lines.collect();
    let mut rest = rest.into_iter();
    if want_sum && kind == 0o100000 && st.get("readable") == Some(&Value::Bool(true)) {
        if let Some(sum) = rest.next() {
            st.insert("checksum".into(), Value::String(sum.trim().to_string()));
        }
    }
    if kind == 0o120000 {
        if let Some(target) = rest.next() {
            st.insert("lnk_source".into(), Value::String(target.to_string()));
            st.insert("lnk_target".into(), Value::String(target.to_string()));
        }
    }
    Ok(obj(json!({"changed": false, "stat": st})))
}

/// Ansible's reboot action: read the boot time, run the reboot command (a connection that drops under it is
/// expected), then poll until the boot time differs and the test command succeeds, reconnecting as needed. Each of
/// the two waits gets `reboot_timeout` seconds, as in Ansible.
async fn reboot(ctx: &ModuleContext, args: &Map<String, Value>) -> ModuleResult {
    let Some(conn) = ctx.connection.clone() else { return Ok(failed("no connection for this module")) };
    if conn.is_local() {
        return Ok(obj(json!({"changed": false, "elapsed": 0, "rebooted": false, "failed": true,
            "msg": "Running reboot with local connection would reboot the control node."})));
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

    let (shutdown_bin, shutdown_args) = match arg_str(args, "reboot_command") {
        Some(command) if command.is_empty() || command.starts_with(' ') => {
            return Ok(failed(format!("reboot_command `{command}` does not start with a command")));
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
                return Ok(failed(format!("'search_paths' must be a string or flat list of strings, got {other}")));
            }
        };
        match find_command(ctx, &shutdown_bin, &paths).await? {
            Some(path) => path,
            None => {
                let listed = paths.iter().map(|p| format!("'{p}'")).collect::<Vec<_>>().join(", ");
                return Ok(failed(format!("Unable to find command \"{shutdown_bin}\" in search paths: [{listed}]")));
            }
        }
    };
    // The host may go down under the command: a lost connection means the reboot has begun, as in Ansible.
    let reboot_result = match ctx.exec(&format!("{shutdown_path} {shutdown_args}"), None).await {
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

const DEFAULT_BOOT_TIME_COMMAND: &str = "cat /proc/sys/kernel/random/boot_id";
const DEFAULT_SEARCH_PATHS: [&str; 5] = ["/sbin", "/bin", "/usr/sbin", "/usr/bin", "/usr/local/sbin"];
/// How long one attempt to reach a rebooting host may take when the task sets no `connect_timeout`.
const REBOOT_ATTEMPT_LIMIT: Duration = Duration::from_secs(30);

/// The host's boot time (its boot id on Linux), or Ansible's message when the command fails.
async fn boot_time(
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
async fn find_command(ctx: &ModuleContext, name: &str, paths: &[String]) -> Result<Option<String>, ConnectionError> {
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
async fn until_success_or_timeout<F, Fut>(conn: &SharedConnection, timeout: Duration, mut attempt: F) -> bool
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
async fn wait_for_connection(ctx: &ModuleContext, args: &Map<String, Value>) -> ModuleResult {
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

/// SHA-1 (what Ansible's `checksum` fields hold), small enough to keep here rather than add a crate.
pub fn sha1_hex(data: &[u8]) -> String {
    let mut h: [u32; 5] = [0x67452301, 0xEFCDAB89, 0x98BADCFE, 0x10325476, 0xC3D2E1F0];
    let mut msg = data.to_vec();
    let bit_len = (data.len() as u64).wrapping_mul(8);
    msg.push(0x80);
    while msg.len() % 64 != 56 {
        msg.push(0);
    }
    msg.extend_from_slice(&bit_len.to_be_bytes());
    for chunk in msg.chunks_exact(64) {
        let mut w = [0u32; 80];
        for (i, word) in chunk.chunks_exact(4).enumerate() {
            w[i] = u32::from_be_bytes([word[0], word[1], word[2], word[3]]);
        }
        for i in 16..80 {
            w[i] = (w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16]).rotate_left(1);
        }
        let [mut a, mut b, mut c, mut d, mut e] = h;
        for (i, wi) in w.iter().enumerate() {
            let (f, k) = match i {
                0..=19 => ((b & c) | (!b & d), 0x5A827999),
                20..=39 => (b ^ c ^ d, 0x6ED9EBA1),
                40..=59 => ((b & c) | (b & d) | (c & d), 0x8F1BBCDC),
                _ => (b ^ c ^ d, 0xCA62C1D6),
            };
            let t = a.rotate_left(5).wrapping_add(f).wrapping_add(e).wrapping_add(k).wrapping_add(*wi);
            e = d;
            d = c;
            c = b.rotate_left(30);
            b = a;
            a = t;
        }
        for (x, y) in h.iter_mut().zip([a, b, c, d, e]) {
            *x = x.wrapping_add(y);
        }
    }
    h.iter().map(|x| format!("{x:08x}")).collect()
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
        };
        assert_eq!(
            ctx.command_line("id -un"),
            r#"sudo -H -S -n -u postgres /bin/sh -c 'export A='\''x y'\''; id -un'"#
        );
        assert_eq!(
            ctx.command_line_for("id -un", true),
            r#"sudo -H -S -p '[upgrade: sudo password]' -u postgres /bin/sh -c 'export A='\''x y'\''; id -un'"#
        );
    }

    #[test]
    fn sha1_matches_known_vectors() {
        assert_eq!(sha1_hex(b""), "da39a3ee5e6b4b0d3255bfef95601890afd80709");
        assert_eq!(sha1_hex(b"abc"), "a9993e364706816aba3e25717850c26c9cd0d89d");
        assert_eq!(sha1_hex(&[b'a'; 1000]), "291e9a6c66994949b57ba5e650361e98fc36b1ba");
    }

    #[test]
    fn shlex_splits_like_python() {
        assert_eq!(shlex_split(r#"echo "a b" 'c d' e\ f"#).unwrap(), ["echo", "a b", "c d", "e f"]);
        assert!(shlex_split("echo 'open").is_err());
    }

    #[test]
    fn times_print_like_python() {
        assert_eq!(
            timestamp(SystemTime::UNIX_EPOCH + Duration::from_micros(1_700_000_000_123_456)),
            "2023-11-14 22:13:20.123456"
        );
        assert_eq!(delta(Duration::from_micros(3_723_000_042)), "1:02:03.000042");
    }

    #[test]
    fn durations_print_as_python_rounds_them() {
        assert_eq!(python_round2(1.0), "1.0");
        assert_eq!(python_round2(1.0149), "1.01");
        assert_eq!(python_round2(0.5), "0.5");
    }

    #[test]
    fn modes_read_as_ansible_does() {
        assert_eq!(mode_text(&json!(420)).as_deref(), Some("0644"));
        assert_eq!(mode_text(&json!("0755")).as_deref(), Some("0755"));
        assert_eq!(glob_word("/tmp/a b*.deb"), "'/tmp/a b'*.deb");
    }
}
