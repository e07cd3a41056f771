//! `get_url`: a file downloaded onto the host, as ansible-core 2.19's `get_url` decides it: kept when it exists and
//! matches `checksum` (or the server says it is not modified since), replaced when the download differs, checked
//! against `checksum` (`sha256:HEX`), with `mode`/`owner`/`group`, `backup`, `force`, `headers`, `timeout`,
//! `validate_certs` and basic auth; its result (`dest`, `url`, `status_code`, `msg`, `checksum_src`,
//! `checksum_dest`, `md5sum`) and messages. The download is made by `curl` on the host, as `uri`'s request is.

use serde_json::{Map, Value, json};

use super::common::*;
use super::context::ModuleContext;
use super::file::{add_path_info, probe};
use super::lineinfile::apply_attributes;
use crate::ansible_compat::shell_quote;
use crate::connection::ConnectionError;

/// `fail_json` with the fields the result has gathered so far.
fn fail_with(msg: impl Into<String>, base: &Map<String, Value>) -> Map<String, Value> {
    let mut r = fail_json(msg);
    for (k, v) in base {
        r.entry(k.clone()).or_insert(v.clone());
    }
    r
}

/// `sha256sum` and friends for an algorithm Ansible names.
fn digest_tool(algorithm: &str) -> Option<&'static str> {
    Some(match algorithm {
        "md5" => "md5sum",
        "sha1" => "sha1sum",
        "sha224" => "sha224sum",
        "sha256" => "sha256sum",
        "sha384" => "sha384sum",
        "sha512" => "sha512sum",
        _ => return None,
    })
}

async fn digest(ctx: &ModuleContext, tool: &str, path: &str) -> Result<String, ConnectionError> {
    let out = ctx.exec(&format!("{tool} < {}", shell_quote(path)), None).await?;
    Ok(String::from_utf8_lossy(&out.stdout).split_whitespace().next().unwrap_or_default().to_string())
}

pub(super) async fn get_url(ctx: &ModuleContext, args: &Map<String, Value>) -> ModuleResult {
    let mut result = Map::new();
    let (Some(url), Some(mut dest)) = (arg_str(args, "url"), arg_str(args, "dest")) else {
        return Ok(fail_with("missing required arguments: url, dest", &result));
    };
    result.insert("changed".into(), json!(false));
    result.insert("checksum_dest".into(), Value::Null);
    result.insert("checksum_src".into(), Value::Null);
    result.insert("dest".into(), json!(dest));
    result.insert("elapsed".into(), json!(0));
    result.insert("url".into(), json!(url));
    let force = arg_bool(args, "force", false);
    let checksum = match arg_str(args, "checksum").filter(|c| !c.is_empty()) {
        None => None,
        Some(c) => {
            let Some((algorithm, hex)) = c.split_once(':') else {
                return Ok(fail_with("The checksum parameter has to be in format <algorithm>:<checksum>", &result));
            };
            let hex: String =
                hex.chars().filter(|c| c.is_alphanumeric() || *c == '_').collect::<String>().to_lowercase();
            if hex.is_empty() || !hex.chars().all(|c| c.is_ascii_hexdigit()) {
                return Ok(fail_with("The checksum format is invalid", &result));
            }
            let Some(tool) = digest_tool(algorithm) else {
                return Ok(fail_with(format!("Could not hash file with algorithm '{algorithm}'"), &result));
            };
            Some((tool, hex))
        }
    };
    let before = probe(ctx, &dest, true).await?;
    let dest_is_dir = before.as_ref().is_some_and(|b| b.state == "directory");
    let mut since = false;
    if !dest_is_dir && before.is_some() {
        let mut mismatch = false;
        if let (false, Some((tool, hex))) = (force, &checksum) {
            mismatch = digest(ctx, tool, &dest).await? != *hex;
            if !mismatch {
                let (_, changed) = apply_attributes(ctx, args, &dest, String::new(), false).await?;
                result.insert("changed".into(), json!(changed));
                let msg =
                    if changed { "file already exists but file attributes changed" } else { "file already exists" };
                result.insert("msg".into(), json!(msg));
                add_path_info(&mut result, probe(ctx, &dest, true).await?.as_ref());
                return Ok(result);
            }
        }
        // An existing file is downloaded again only if the server has a newer one (If-Modified-Since), unless
        // forced or its checksum did not match.
        since = !force && !mismatch;
    }
    if dest_is_dir {
        let name = url.split(['?', '#']).next().unwrap_or(&url).rsplit('/').next().unwrap_or("index.html");
        let name = if name.is_empty() { "index.html" } else { name };
        dest = format!("{}/{name}", dest.trim_end_matches('/'));
        result.insert("dest".into(), json!(dest));
    }
    let parent = std::path::Path::new(&dest).parent().map(|p| p.display().to_string()).unwrap_or_else(|| ".".into());
    let tmp = format!("{parent}/.upgrade-get_url-{}", std::process::id());
    let mut curl = format!(
        "curl -sS -L -o {} -w '%{{http_code}} %{{size_download}}\\n' --max-time {}",
        shell_quote(&tmp),
        arg_int(args, "timeout").ok().flatten().unwrap_or(10)
    );
    if since {
        curl.push_str(&format!(" -z {}", shell_quote(&dest)));
    }
    if !arg_bool(args, "validate_certs", true) {
        curl.push_str(" -k");
    }
    if let Some(user) = arg_str(args, "url_username").or_else(|| arg_str(args, "username")) {
        let password = arg_str(args, "url_password").or_else(|| arg_str(args, "password")).unwrap_or_default();
        curl.push_str(&format!(" -u {}", shell_quote(&format!("{user}:{password}"))));
    }
    if let Some(Value::Object(headers)) = args.get("headers") {
        for (k, v) in headers {
            curl.push_str(&format!(" -H {}", shell_quote(&format!("{k}: {}", text(v)))));
        }
    }
    curl.push_str(&format!(" {}", shell_quote(&url)));
    let started = std::time::Instant::now();
    if ctx.exec(&format!("[ -d {} ]", shell_quote(&parent)), None).await?.status != 0 {
        return Ok(fail_with(format!("Destination {parent} does not exist"), &result));
    }
    let out = ctx.exec(&format!("command -v curl >/dev/null || exit 127; {curl}"), None).await?;
    result.insert("elapsed".into(), json!(started.elapsed().as_secs()));
    if out.status == 127 {
        return Ok(fail_with("get_url needs curl on the host: install curl there", &result));
    }
    let written = String::from_utf8_lossy(&out.stdout).into_owned();
    let mut written = written.split_whitespace();
    let code: i64 = written.next().and_then(|c| c.parse().ok()).unwrap_or(-1);
    let size = written.next().unwrap_or("unknown").to_string();
    let cleanup = format!("rm -f {}", shell_quote(&tmp));
    if code == 304 {
        ctx.exec(&cleanup, None).await?;
        result.insert("msg".into(), json!("HTTP Error 304: Not Modified"));
        result.insert("status_code".into(), json!(304));
        return Ok(result);
    }
    if code != 200 {
        ctx.exec(&cleanup, None).await?;
        let mut r = fail_with("Request failed", &result);
        r.insert("status_code".into(), json!(code));
        let response = if code < 0 || out.status != 0 {
            format!("Request failed: {}", String::from_utf8_lossy(&out.stderr).trim())
        } else {
            format!("HTTP Error {code}")
        };
        r.insert("response".into(), json!(response));
        return Ok(r);
    }
    result.insert("src".into(), json!(tmp));
    let checksum_src = digest(ctx, "sha1sum", &tmp).await?;
    result.insert("checksum_src".into(), json!(checksum_src));
    if before.is_some() && !dest_is_dir || probe(ctx, &dest, true).await?.is_some() {
        result.insert("checksum_dest".into(), json!(digest(ctx, "sha1sum", &dest).await?));
    }
    if let Some((tool, hex)) = &checksum {
        let got = digest(ctx, tool, &tmp).await?;
        if got != *hex {
            ctx.exec(&cleanup, None).await?;
            return Ok(fail_with(format!("The checksum for {tmp} did not match {hex}; it was {got}."), &result));
        }
    }
    let changed = result.get("checksum_dest").and_then(Value::as_str) != Some(checksum_src.as_str());
    if changed {
        let q = shell_quote(&dest);
        let mut script = String::new();
        if arg_bool(args, "backup", false) && result.get("checksum_dest").is_some_and(|v| !v.is_null()) {
            let backup = backup_name(&dest);
            script.push_str(&format!("cp -p {q} {} && ", shell_quote(&backup)));
            result.insert("backup_file".into(), json!(backup));
        }
        script.push_str(&format!("mv -f {} {q}", shell_quote(&tmp)));
        let moved = ctx.exec(&script, None).await?;
        if moved.status != 0 {
            ctx.exec(&cleanup, None).await?;
            let err = String::from_utf8_lossy(&moved.stderr).trim().to_string();
            return Ok(fail_with(format!("failed to copy {tmp} to {dest}: {err}"), &result));
        }
    } else {
        ctx.exec(&cleanup, None).await?;
    }
    let (_, changed) = apply_attributes(ctx, args, &dest, String::new(), changed).await?;
    result.insert("changed".into(), json!(changed));
    result.insert("md5sum".into(), json!(digest(ctx, "md5sum", &dest).await?));
    result.insert("msg".into(), json!(format!("OK ({size} bytes)")));
    result.insert("status_code".into(), json!(200));
    add_path_info(&mut result, probe(ctx, &dest, true).await?.as_ref());
    Ok(result)
}
