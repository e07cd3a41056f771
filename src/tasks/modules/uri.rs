//! `uri`: an HTTP request made from the host, as ansible-core 2.19's `ansible.builtin.uri` makes it (method, body
//! and body_format, headers, status_code, return_content, validate_certs, ca_path, client_cert/client_key, timeout,
//! basic auth, follow_redirects)
//! and with its result: `status`, `url`, `msg` (`OK (N bytes)`), every response header as a key (lower case, `-` as
//! `_`), `json` for a JSON body, `content` with return_content, `redirected`, `elapsed`, `cookies`. Ansible's module
//! runs Python's urllib on the host; here `curl` on the host makes the request (a host without curl fails the task
//! saying so). Usable in `until` loops like any module.

use serde_json::{Map, Value, json};

use super::common::*;
use super::context::ModuleContext;
use crate::ansible_compat::shell_quote;

const MARK: &str = "\n--upgrade-uri-headers--\n";
const BODY_MARK: &str = "\n--upgrade-uri-body--\n";

/// `status_code: 200`, `[200, 201]`, `"200,201"`.
fn status_codes(v: Option<&Value>) -> Result<Vec<i64>, String> {
    let items: Vec<Value> = match v {
        None | Some(Value::Null) => return Ok(vec![200]),
        Some(Value::Array(items)) => items.clone(),
        Some(Value::String(s)) => s.split(',').map(|p| Value::String(p.trim().to_string())).collect(),
        Some(other) => vec![other.clone()],
    };
    items
        .iter()
        .map(|i| {
            i.as_i64().or_else(|| i.as_str().and_then(|s| s.trim().parse().ok())).ok_or_else(|| {
                format!("Elements value for option 'status_code' is of type {i} and we were unable to convert to int")
            })
        })
        .collect()
}

/// `application/x-www-form-urlencoded` text of a mapping, as Ansible's `form_urlencoded`.
fn form_urlencoded(body: &Value) -> String {
    let enc = |s: &str| {
        s.bytes()
            .map(|b| match b {
                b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
                b' ' => "+".to_string(),
                _ => format!("%{b:02X}"),
            })
            .collect::<String>()
    };
    match body {
        Value::Object(map) => {
            map.iter().map(|(k, v)| format!("{}={}", enc(k), enc(&text(v)))).collect::<Vec<_>>().join("&")
        }
        other => text(other),
    }
}

pub(super) async fn uri(ctx: &ModuleContext, args: &Map<String, Value>) -> ModuleResult {
    let Some(url) = arg_str(args, "url") else { return Ok(fail_json("missing required arguments: url")) };
    let method = arg_str(args, "method").unwrap_or_else(|| "GET".into()).to_uppercase();
    if method.is_empty() || !method.chars().all(|c| c.is_ascii_uppercase()) {
        return Ok(fail_json("Parameter 'method' needs to be a single word in uppercase, like GET or POST."));
    }
    let codes = match status_codes(args.get("status_code")) {
        Ok(c) => c,
        Err(msg) => return Ok(fail_json(msg)),
    };
    let return_content = arg_bool(args, "return_content", false);
    let timeout = arg_int(args, "timeout").ok().flatten().unwrap_or(30);
    let body_format = arg_str(args, "body_format").unwrap_or_else(|| "raw".into()).to_lowercase();
    let mut headers: Vec<(String, String)> = match args.get("headers") {
        Some(Value::Object(h)) => h.iter().map(|(k, v)| (k.clone(), text(v))).collect(),
        _ => Vec::new(),
    };
    let has_type = headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("content-type"));
    let body = match args.get("body").filter(|b| !b.is_null()) {
        None => None,
        Some(b) => Some(match body_format.as_str() {
            "json" => {
                if !has_type {
                    headers.push(("Content-Type".into(), "application/json".into()));
                }
                match b {
                    Value::String(s) => s.clone(),
                    other => serde_json::to_string(other).unwrap_or_default(),
                }
            }
            "form-urlencoded" => {
                if !has_type {
                    headers.push(("Content-Type".into(), "application/x-www-form-urlencoded".into()));
                }
                form_urlencoded(b)
            }
            _ => text(b),
        }),
    };
    let mut curl = format!(
        "curl -sS -o \"$t.body\" -D \"$t.headers\" -w '%{{http_code}}\\n%{{url_effective}}\\n' --max-time {timeout} -X {}",
        shell_quote(&method)
    );
    if !arg_bool(args, "validate_certs", true) {
        curl.push_str(" -k");
    }
    for (arg, flag) in [("ca_path", "--cacert"), ("client_cert", "--cert"), ("client_key", "--key")] {
        if let Some(path) = arg_str(args, arg) {
            curl.push_str(&format!(" {flag} {}", shell_quote(&path)));
        }
    }
    // Ansible's default `safe` follows redirects of GET and HEAD only; `all`/`yes` any; `no`/`none` none.
    let follow = arg_str(args, "follow_redirects").unwrap_or_else(|| "safe".into());
    if matches!(follow.as_str(), "all" | "yes" | "urllib2")
        || (follow == "safe" && matches!(method.as_str(), "GET" | "HEAD"))
    {
        curl.push_str(" -L");
    }
    if let Some(user) = arg_str(args, "url_username").or_else(|| arg_str(args, "user")) {
        let password = arg_str(args, "url_password").or_else(|| arg_str(args, "password")).unwrap_or_default();
        curl.push_str(&format!(" -u {}", shell_quote(&format!("{user}:{password}"))));
    }
    for (k, v) in &headers {
        curl.push_str(&format!(" -H {}", shell_quote(&format!("{k}: {v}"))));
    }
    if body.is_some() {
        curl.push_str(" --data-binary @-");
    }
    curl.push_str(&format!(" {}", shell_quote(&url)));
    let script = format!(
        "command -v curl >/dev/null || {{ echo 'uri needs curl on the host' >&2; exit 127; }}; \
         t=$(mktemp) || exit 1; {curl}; rc=$?; printf '{m}'; cat \"$t.headers\" 2>/dev/null; printf '{b}'; \
         cat \"$t.body\" 2>/dev/null; rm -f \"$t\" \"$t.body\" \"$t.headers\"; exit $rc",
        m = MARK.replace('\n', "\\n"),
        b = BODY_MARK.replace('\n', "\\n"),
    );
    let started = std::time::Instant::now();
    let out = ctx.exec(&script, body.as_deref().map(str::as_bytes)).await?;
    let elapsed = started.elapsed().as_secs();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).trim().to_string();
    if out.status == 127 && stderr.contains("uri needs curl") {
        return Ok(fail_json(format!("{stderr}: install curl there, or make the request with `command`")));
    }
    let (written, rest) = stdout.split_once(MARK).unwrap_or((&stdout, ""));
    let (header_text, content) = rest.split_once(BODY_MARK).unwrap_or((rest, ""));
    let mut w = written.lines();
    let code: i64 = w.next().and_then(|c| c.trim().parse().ok()).unwrap_or(0);
    let effective = w.next().unwrap_or(&url).to_string();
    let mut result = Map::new();
    if code == 0 {
        // No response: urllib's words for what curl met (refused, unknown name, timed out), else curl's own.
        let stderr = match out.status {
            7 => "<urlopen error [Errno 111] Connection refused>".to_string(),
            6 => "<urlopen error [Errno -2] Name or service not known>".to_string(),
            28 => "<urlopen error timed out>".to_string(),
            _ => stderr,
        };
        result.insert("status".into(), json!(-1));
        result.insert("url".into(), json!(url));
        result.insert("msg".into(), json!(format!("Request failed: {stderr}")));
        result.insert("redirected".into(), json!(false));
        result.insert("elapsed".into(), json!(elapsed));
        result.insert("changed".into(), json!(false));
        let msg = format!("Status code was -1 and not {codes:?}: Request failed: {stderr}");
        let mut r = fail_json(msg);
        for (k, v) in result {
            r.entry(k).or_insert(v);
        }
        return Ok(r);
    }
    // The last response's headers (each redirect adds a block).
    let block = header_text.split("\r\n\r\n").filter(|b| b.trim_start().starts_with("HTTP/")).last().unwrap_or("");
    let mut lines = block.lines();
    let status_line = lines.next().unwrap_or_default();
    let reason = status_line.splitn(3, ' ').nth(2).unwrap_or("").trim().to_string();
    let mut header_map = Map::new();
    for line in lines {
        if let Some((k, v)) = line.split_once(':') {
            header_map.insert(k.trim().to_lowercase().replace('-', "_"), json!(v.trim()));
        }
    }
    let content_type = header_map.get("content_type").and_then(Value::as_str).unwrap_or("").to_lowercase();
    let sub_type = content_type.split(';').next().unwrap_or("").split('/').nth(1).unwrap_or("").to_string();
    let sub_type = sub_type.rsplit('+').next().unwrap_or("").to_string();
    let maybe_json = matches!(sub_type.as_str(), "json" | "javascript");
    for (k, v) in &header_map {
        result.insert(k.clone(), v.clone());
    }
    let ok = codes.contains(&code);
    let msg = if (200..400).contains(&code) {
        let length = header_map.get("content_length").and_then(Value::as_str).unwrap_or("unknown");
        format!("OK ({length} bytes)")
    } else {
        format!("HTTP Error {code}: {reason}")
    };
    result.insert("url".into(), json!(effective));
    result.insert("status".into(), json!(code));
    result.insert("redirected".into(), json!(effective != url));
    result.insert("elapsed".into(), json!(elapsed));
    result.insert("changed".into(), json!(false));
    result.insert("cookies".into(), json!({}));
    result.insert("cookies_string".into(), json!(""));
    if maybe_json {
        if let Ok(parsed) = serde_json::from_str::<Value>(content) {
            result.insert("json".into(), parsed);
        }
    }
    if return_content {
        result.insert("content".into(), json!(content));
    }
    if !ok {
        let mut r = fail_json(format!("Status code was {code} and not {codes:?}: {msg}"));
        for (k, v) in result {
            r.entry(k).or_insert(v);
        }
        r.insert("changed".into(), json!(false));
        return Ok(r);
    }
    result.insert("msg".into(), json!(msg));
    Ok(result)
}
