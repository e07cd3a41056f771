//! The file modules: `copy`, `template`, `fetch`, `stat`.

use std::path::PathBuf;

use serde_json::{Map, Value, json};

use super::common::*;
use super::context::{ModuleContext, read_local};
use crate::ansible_compat::shell_quote;
use crate::connection::ConnectionError;
use crate::tasks::Vars;

/// Octal text for chmod: YAML's `0644` arrives as 420 and means 0o644, as in Ansible.
pub(super) fn mode_text(mode: &Value) -> Option<String> {
    match mode {
        Value::Number(n) => n.as_u64().map(|m| format!("0{m:o}")),
        Value::String(s) if !s.is_empty() => Some(s.clone()),
        _ => None,
    }
}

pub(super) async fn copy(ctx: &ModuleContext, args: &Map<String, Value>, rendered: Option<Vec<u8>>) -> ModuleResult {
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

pub(super) enum CopyOutcome {
    Done(Map<String, Value>),
    IsDir,
}

pub(super) async fn copy_to(
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
    let mut backup_file = None;
    let exists = remote_sum.is_some();
    if remote_sum.as_deref() != Some(checksum) && (force || !exists) {
        written = true;
        let tmp = format!("{dest}.upgrade-tmp");
        let t = shell_quote(&tmp);
        let mut line = String::new();
        // `backup`: the file as it was, kept beside it under Ansible's backup name.
        if arg_bool(args, "backup", false) && exists {
            let backup = backup_name(dest);
            line.push_str(&format!("cp -p {q} {} && ", shell_quote(&backup)));
            backup_file = Some(backup);
        }
        line.push_str(&format!("cat > {t}"));
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
    if let Some(backup) = backup_file {
        r.insert("backup_file".into(), Value::String(backup));
    }
    if !written {
        // Ansible hands an unchanged file to the `file` module, whose result names it `path` as well.
        r.insert("path".into(), Value::String(dest.to_string()));
    }
    Ok(CopyOutcome::Done(r))
}

pub(super) async fn template(ctx: &ModuleContext, args: &Map<String, Value>, vars: &Vars) -> ModuleResult {
    let Some(src) = arg_str(args, "src") else { return Ok(failed("src is required")) };
    let (path, data) = match read_local(ctx, &src, "templates") {
        Ok(found) => found,
        Err(r) => return Ok(r),
    };
    let source = String::from_utf8_lossy(&data).into_owned();
    let rendered = match ctx.templar.render_file(&source, vars) {
        Ok(s) => s,
        Err(e) => return Ok(failed(format!("{}: {}", path.display(), e.message))),
    };
    copy(ctx, args, Some(rendered.into_bytes())).await
}

pub(super) async fn fetch(ctx: &ModuleContext, args: &Map<String, Value>) -> ModuleResult {
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

pub(super) async fn stat(ctx: &ModuleContext, args: &Map<String, Value>) -> ModuleResult {
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
    fn sha1_matches_known_vectors() {
        assert_eq!(sha1_hex(b""), "da39a3ee5e6b4b0d3255bfef95601890afd80709");
        assert_eq!(sha1_hex(b"abc"), "a9993e364706816aba3e25717850c26c9cd0d89d");
        assert_eq!(sha1_hex(&[b'a'; 1000]), "291e9a6c66994949b57ba5e650361e98fc36b1ba");
    }

    #[test]
    fn modes_read_as_ansible_does() {
        assert_eq!(mode_text(&json!(420)).as_deref(), Some("0644"));
        assert_eq!(mode_text(&json!("0755")).as_deref(), Some("0755"));
    }
}
