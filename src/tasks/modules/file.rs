//! `file`: a path made a file, directory, symlink or nothing, with its mode, owner and group, as ansible-core 2.19's
//! `ansible.builtin.file` does (its states, its messages, its result fields). The host is read before and after with
//! `stat`, so `changed` says whether anything about the path differs, as Ansible's comparison of attributes does.
//! Not supported: `state: hard`, `modification_time`/`access_time`, SELinux contexts and `attributes`.

use serde_json::{Map, Value, json};

use super::common::*;
use super::context::ModuleContext;
use super::files::mode_text;
use crate::ansible_compat::shell_quote;
use crate::connection::ConnectionError;

/// What `stat` says of a path (not following a final symlink unless asked).
#[derive(Debug, Clone, PartialEq)]
pub(super) struct PathInfo {
    /// Ansible's name for the kind: `file`, `directory`, `link`, `hard` (a file with more than one link).
    pub(super) state: &'static str,
    mode: u32,
    uid: u64,
    gid: u64,
    owner: String,
    group: String,
    size: u64,
    /// A symlink's target.
    target: Option<String>,
}

/// `stat` of `path` (following symlinks with `follow`), `None` when nothing is there.
pub(super) async fn probe(ctx: &ModuleContext, path: &str, follow: bool) -> Result<Option<PathInfo>, ConnectionError> {
    let q = shell_quote(path);
    let flag = if follow { "-L " } else { "" };
    let script = format!(
        "if [ ! -e {q} ] && [ ! -L {q} ]; then echo absent; exit 0; fi; \
         stat {flag}-c '%f|%u|%g|%U|%G|%s|%h' {q} || exit 1; if [ -L {q} ]; then readlink {q}; fi"
    );
    let out = ctx.exec(&script, None).await?;
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let mut lines = stdout.lines();
    let first = lines.next().unwrap_or_default();
    if first == "absent" || out.status != 0 {
        return Ok(None);
    }
    let f: Vec<&str> = first.split('|').collect();
    let field = |i: usize| f.get(i).copied().unwrap_or_default();
    let num = |i: usize| field(i).parse::<u64>().unwrap_or(0);
    let raw = u32::from_str_radix(field(0), 16).unwrap_or(0);
    let state = match raw & 0o170000 {
        0o040000 => "directory",
        0o120000 => "link",
        0o100000 if num(6) > 1 => "hard",
        _ => "file",
    };
    let target = if state == "link" { lines.next().map(str::to_string) } else { None };
    Ok(Some(PathInfo {
        state,
        mode: raw & 0o7777,
        uid: num(1),
        gid: num(2),
        owner: field(3).to_string(),
        group: field(4).to_string(),
        size: num(5),
        target,
    }))
}

/// The path's fields Ansible adds to a result (`add_path_info`).
pub(super) fn add_path_info(result: &mut Map<String, Value>, info: Option<&PathInfo>) {
    let Some(info) = info else {
        result.insert("state".into(), json!("absent"));
        return;
    };
    result.insert("uid".into(), json!(info.uid));
    result.insert("gid".into(), json!(info.gid));
    result.insert("owner".into(), json!(info.owner));
    result.insert("group".into(), json!(info.group));
    result.insert("mode".into(), json!(format!("{:04o}", info.mode)));
    result.insert("state".into(), json!(info.state));
    result.insert("size".into(), json!(info.size));
}

/// The commands that give a path the task's mode, owner and group (recursively with `recurse`).
pub(super) fn attributes(args: &Map<String, Value>, q: &str, recurse: bool, link: bool) -> String {
    let r = if recurse { "-R " } else { "" };
    // A symlink's own owner is set with -h; its mode cannot be (Linux has no lchmod), as in Ansible.
    let h = if link { "-h " } else { "" };
    let mut out = String::new();
    if let Some(owner) = arg_str(args, "owner") {
        out.push_str(&format!(" && chown {h}{r}{} {q}", shell_quote(&owner)));
    }
    if let Some(group) = arg_str(args, "group") {
        out.push_str(&format!(" && chgrp {h}{r}{} {q}", shell_quote(&group)));
    }
    if let Some(mode) = args.get("mode").and_then(mode_text) {
        if !link {
            out.push_str(&format!(" && chmod {r}{} {q}", shell_quote(&mode)));
        }
    }
    out
}

/// What a recursive change would touch, as one text, to tell whether it changed anything below the top.
fn tree_listing(q: &str) -> String {
    format!("find {q} -mindepth 1 -exec stat -c '%n|%a|%u|%g' {{}} + 2>/dev/null | sort")
}

pub(super) async fn file(ctx: &ModuleContext, args: &Map<String, Value>) -> ModuleResult {
    let Some(path) = arg_str(args, "path").or_else(|| arg_str(args, "dest")).or_else(|| arg_str(args, "name")) else {
        return Ok(failed("missing required arguments: path"));
    };
    let path = path.trim_end_matches('/').to_string();
    let path = if path.is_empty() { "/".to_string() } else { path };
    let q = shell_quote(&path);
    let follow = arg_bool(args, "follow", true);
    let recurse = arg_bool(args, "recurse", false);
    let force = arg_bool(args, "force", false);
    let src = arg_str(args, "src");
    let before = probe(ctx, &path, false).await?;
    let prev_state = before.as_ref().map_or("absent", |b| b.state);
    // As Ansible: no state keeps what is there; a new path is a directory with `recurse`, else a file.
    let state = match arg_str(args, "state") {
        Some(s) => s,
        None if prev_state != "absent" => prev_state.to_string(),
        None if recurse => "directory".into(),
        None => "file".into(),
    };
    if recurse && state != "directory" {
        return Ok(failed("recurse option requires state to be 'directory'"));
    }
    let fail_with_path = |msg: String| {
        let mut r = fail_json(msg);
        r.insert("path".into(), json!(path));
        r
    };
    let (script, link) = match state.as_str() {
        "absent" => {
            let mut result = Map::new();
            result.insert("path".into(), json!(path));
            if before.is_none() {
                result.insert("changed".into(), json!(false));
            } else {
                let out = ctx.exec(&format!("rm -rf -- {q}"), None).await?;
                if out.status != 0 {
                    let err = String::from_utf8_lossy(&out.stderr).trim().to_string();
                    return Ok(fail_with_path(format!("rmtree failed: {err}")));
                }
                result.insert("changed".into(), json!(true));
            }
            result.insert("state".into(), json!("absent"));
            return Ok(result);
        }
        "file" => match prev_state {
            "absent" => return Ok(fail_with_path(format!("file ({path}) is absent, cannot continue"))),
            "file" | "hard" => (String::from("true"), false),
            "link" if follow => (String::from("true"), false),
            other => return Ok(fail_with_path(format!("file ({path}) is {other}, cannot continue"))),
        },
        "directory" => match prev_state {
            // Each missing parent is made with the task's attributes, as Ansible makes them one by one.
            "absent" => {
                let mut parts = String::new();
                let mut made = String::new();
                for component in path.split('/').filter(|c| !c.is_empty()) {
                    parts.push('/');
                    parts.push_str(component);
                    let p = if path.starts_with('/') { parts.clone() } else { parts[1..].to_string() };
                    let pq = shell_quote(&p);
                    made.push_str(&format!(
                        " && if [ ! -e {pq} ]; then mkdir {pq}{}; fi",
                        attributes(args, &pq, false, false)
                    ));
                }
                (format!("true{made}"), false)
            }
            "directory" => (String::from("true"), false),
            "link" if follow => (String::from("true"), false),
            other => return Ok(fail_with_path(format!("{path} already exists as a {other}"))),
        },
        "touch" => (format!("touch {q}"), false),
        "link" => {
            let Some(src) = src.clone() else {
                return Ok(fail_with_path("src is required for creating new symlinks".into()));
            };
            match prev_state {
                "link" if before.as_ref().and_then(|b| b.target.as_deref()) == Some(src.as_str()) => {
                    (String::from("true"), true)
                }
                "absent" | "link" => (format!("ln -sfn {} {q}", shell_quote(&src)), true),
                "file" | "hard" if force => (format!("rm -f -- {q} && ln -s {} {q}", shell_quote(&src)), true),
                "directory" if force => (format!("rmdir -- {q} 2>/dev/null && ln -s {} {q}", shell_quote(&src)), true),
                other => {
                    return Ok(fail_with_path(format!("refusing to convert from {other} to symlink for {path}")));
                }
            }
        }
        other => {
            return Ok(failed(format!(
                "value of state must be one of: absent, directory, file, hard, link, touch, got: {other}"
            )));
        }
    };
    let tree = recurse && state == "directory";
    let listing_before = if tree { ctx.exec(&tree_listing(&q), None).await?.stdout } else { Vec::new() };
    let full = format!("{script}{}", attributes(args, &q, tree, link));
    let out = ctx.exec(&full, None).await?;
    if out.status != 0 {
        let err = String::from_utf8_lossy(&out.stderr).trim().to_string();
        return Ok(fail_with_path(format!("{path}: {err}")));
    }
    let after = probe(ctx, &path, follow && !link).await?;
    let listing_after = if tree { ctx.exec(&tree_listing(&q), None).await?.stdout } else { Vec::new() };
    let before_followed = if follow && !link && prev_state == "link" { probe(ctx, &path, true).await? } else { before };
    let changed = state == "touch" || before_followed != after || listing_before != listing_after;
    let mut result = Map::new();
    // Ansible names the path `dest` for a link (with its `src`) and a touch, `path` otherwise.
    if state == "link" {
        result.insert("dest".into(), json!(path));
        result.insert("src".into(), json!(src));
    } else if state == "touch" {
        result.insert("dest".into(), json!(path));
    } else {
        result.insert("path".into(), json!(path));
    }
    result.insert("changed".into(), json!(changed));
    add_path_info(&mut result, after.as_ref());
    Ok(result)
}
