//! `blockinfile`: a block of lines between two marker lines kept in a file on the host (inserted at `insertafter`/
//! `insertbefore`, replaced where its markers are, or removed), as ansible-core 2.19's `blockinfile` places it, with
//! its messages (`Block inserted`, `Block removed`, `File created`, `Path X does not exist !`). Written back as
//! `lineinfile` writes (backup, validate, mode/owner/group).

use serde_json::{Map, Value, json};

use super::common::*;
use super::context::ModuleContext;
use super::lineinfile::{apply_attributes, write_back};
use crate::ansible_compat::shell_quote;

/// Puts the block where ansible-core does: in place of the old one (between its markers), else after the last line
/// `insertafter` matches (before the one `insertbefore` matches), at the start or the end.
fn place(lines: &mut Vec<String>, block: Vec<String>, markers: (&str, &str), ins: Insert<'_>) -> Result<(), String> {
    let (marker0, marker1) = markers;
    let (mut n0, mut n1) = (None, None);
    for (i, line) in lines.iter().enumerate() {
        if line == marker0 {
            n0 = Some(i);
        }
        if line == marker1 {
            n1 = Some(i);
        }
    }
    let at = match (n0, n1) {
        (Some(a), Some(b)) if a < b => {
            lines.drain(a..=b);
            a
        }
        (Some(a), Some(b)) => {
            lines.drain(b..=a);
            b
        }
        _ => match ins {
            Insert::After(p) | Insert::Before(p) => {
                let re = regex::Regex::new(p).map_err(|e| format!("invalid regular expression {p:?}: {e}"))?;
                let found = lines.iter().rposition(|l| re.is_match(l.strip_suffix('\n').unwrap_or(l)));
                match found {
                    None => lines.len(),
                    Some(i) if matches!(ins, Insert::After(_)) => i + 1,
                    Some(i) => i,
                }
            }
            Insert::Bof => 0,
            Insert::Eof => lines.len(),
        },
    };
    if at > 0 && !lines[at - 1].ends_with('\n') {
        lines[at - 1].push('\n');
    }
    lines.splice(at..at, block);
    Ok(())
}

#[derive(Clone, Copy)]
enum Insert<'a> {
    After(&'a str),
    Before(&'a str),
    Bof,
    Eof,
}

pub(super) async fn blockinfile(ctx: &ModuleContext, args: &Map<String, Value>) -> ModuleResult {
    let Some(path) = ["path", "dest", "destfile", "name"].iter().find_map(|k| arg_str(args, k)) else {
        return Ok(fail_json("missing required arguments: path"));
    };
    let present = arg_str(args, "state").unwrap_or_else(|| "present".into()) == "present";
    let block = arg_str(args, "block").or_else(|| arg_str(args, "content")).unwrap_or_default();
    let marker = arg_str(args, "marker").unwrap_or_else(|| "# {mark} ANSIBLE MANAGED BLOCK".into());
    let begin = arg_str(args, "marker_begin").unwrap_or_else(|| "BEGIN".into());
    let end = arg_str(args, "marker_end").unwrap_or_else(|| "END".into());
    let (insertafter, insertbefore) = (arg_str(args, "insertafter"), arg_str(args, "insertbefore"));
    let ins = match (insertafter.as_deref(), insertbefore.as_deref()) {
        (Some("EOF"), _) | (None, None) => Insert::Eof,
        (Some(a), _) => Insert::After(a),
        (None, Some("BOF")) => Insert::Bof,
        (None, Some(b)) => Insert::Before(b),
    };
    let q = shell_quote(&path);
    let read = ctx.exec_reading_file(&format!("if [ -e {q} ]; then echo yes; cat {q}; else echo no; fi")).await?;
    let text = String::from_utf8_lossy(&read.stdout).into_owned();
    let (exists, original) = match text.split_once('\n') {
        Some(("yes", rest)) => (true, Some(rest.to_string())),
        _ => (false, None),
    };
    if !exists {
        if !present {
            return Ok(obj(json!({"changed": false, "msg": format!("File {path} not present")})));
        }
        if !arg_bool(args, "create", false) {
            let mut r = fail_json(format!("Path {path} does not exist !"));
            r.insert("rc".into(), json!(257));
            return Ok(r);
        }
    }
    let mut lines: Vec<String> =
        original.as_deref().map(|o| o.split_inclusive('\n').map(str::to_string).collect()).unwrap_or_default();
    let marker0 = format!("{}\n", marker.replace("{mark}", &begin));
    let marker1 = format!("{}\n", marker.replace("{mark}", &end));
    let blocklines: Vec<String> = if present && !block.is_empty() {
        let block = if block.ends_with('\n') { block } else { format!("{block}\n") };
        std::iter::once(marker0.clone())
            .chain(block.split_inclusive('\n').map(str::to_string))
            .chain(std::iter::once(marker1.clone()))
            .collect()
    } else {
        Vec::new()
    };
    let removing = blocklines.is_empty();
    if let Err(e) = place(&mut lines, blocklines, (&marker0, &marker1), ins) {
        return Ok(fail_json(e));
    }
    let result_text: String = lines.concat();
    let (msg, changed) = match &original {
        Some(o) if *o == result_text => (String::new(), false),
        None => ("File created".to_string(), true),
        _ if removing => ("Block removed".to_string(), true),
        _ => ("Block inserted".to_string(), true),
    };
    let mut backup = None;
    if changed && !ctx.check_mode {
        match write_back(ctx, args, &path, exists, result_text.as_bytes()).await? {
            Ok(b) if !b.is_empty() => backup = Some(b),
            Ok(_) => {}
            Err(failure) => return Ok(failure),
        }
    }
    let (msg, changed) = apply_attributes(ctx, args, &path, msg, changed).await?;
    let mut result = obj(json!({"changed": changed, "msg": msg}));
    if let Some(b) = backup {
        result.insert("backup_file".into(), json!(b));
    }
    Ok(result)
}
