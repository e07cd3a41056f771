//! `lineinfile`: one line of a file on the host made present (replacing the last line a `regexp` or `search_string`
//! matches, or added after/before `insertafter`/`insertbefore`) or absent, as ansible-core 2.19's `present()` and
//! `absent()` decide it, line by line, with its messages (`line added`, `line replaced`, `N line(s) removed`,
//! `Destination X does not exist !`). The file is read from the host, changed here, and written back through a
//! temporary file beside it (checked with `validate` first when given); `mode`, `owner` and `group` apply after.
//! Regular expressions are the regex crate's (Python's `re` without look-around and backreferences in patterns).

use serde_json::{Map, Value, json};

use super::common::*;
use super::context::ModuleContext;
use crate::ansible_compat::shell_quote;
use crate::connection::ConnectionError;

/// Lines with their endings, as Python's `readlines()`.
fn read_lines(text: &str) -> Vec<String> {
    text.split_inclusive('\n').map(str::to_string).collect()
}

fn trim_eol(line: &str) -> &str {
    line.trim_end_matches(['\r', '\n'])
}

/// What Python's `re.search` sees of a line: its `$` also matches before a final newline, the regex crate's only at
/// the end, so the newline is left out.
fn searched(line: &str) -> &str {
    line.strip_suffix('\n').unwrap_or(line)
}

fn ends_with_eol(line: &str) -> bool {
    line.ends_with('\n') || line.ends_with('\r')
}

struct Spec {
    regexp: Option<regex::Regex>,
    search_string: Option<String>,
    line: String,
    insertafter: Option<String>,
    insertbefore: Option<String>,
    backrefs: bool,
    firstmatch: bool,
}

/// ansible-core's `present()`: the new lines and its message, or `None` when nothing changes.
fn present(spec: &Spec, mut lines: Vec<String>) -> Result<(Vec<String>, &'static str), String> {
    let ins_pattern = match (&spec.insertafter, &spec.insertbefore) {
        (Some(a), _) if a != "BOF" && a != "EOF" => Some(a),
        (None, Some(b)) if b != "BOF" => Some(b),
        _ => None,
    };
    let bre_ins = match ins_pattern {
        Some(p) => Some(regex::Regex::new(p).map_err(|e| format!("invalid regular expression {p:?}: {e}"))?),
        None => None,
    };
    let mut index = [-1i64, -1i64];
    let mut matched: Option<usize> = None;
    let mut exact_line_match = false;
    if let Some(re) = &spec.regexp {
        for (n, l) in lines.iter().enumerate() {
            if re.is_match(searched(l)) {
                index[0] = n as i64;
                matched = Some(n);
                if spec.firstmatch {
                    break;
                }
            }
        }
    }
    if let Some(s) = &spec.search_string {
        for (n, l) in lines.iter().enumerate() {
            if l.contains(s.as_str()) {
                index[0] = n as i64;
                matched = Some(n);
                if spec.firstmatch {
                    break;
                }
            }
        }
    }
    if matched.is_none() {
        for (n, l) in lines.iter().enumerate() {
            if spec.line == trim_eol(l) {
                index[0] = n as i64;
                exact_line_match = true;
            } else if bre_ins.as_ref().is_some_and(|re| re.is_match(searched(l))) {
                if spec.insertafter.is_some() {
                    index[1] = n as i64 + 1;
                    if spec.firstmatch {
                        break;
                    }
                }
                if spec.insertbefore.is_some() {
                    index[1] = n as i64;
                    if spec.firstmatch {
                        break;
                    }
                }
            }
        }
    }
    let with_eol = |l: &str| if l.ends_with('\n') { l.to_string() } else { format!("{l}\n") };
    let line = spec.line.as_str();
    let mut msg = "";
    let insertafter = spec.insertafter.as_deref();
    let insertbefore = spec.insertbefore.as_deref();
    if index[0] != -1 {
        let new_line = match (spec.backrefs, matched, &spec.regexp) {
            (true, Some(n), Some(re)) => match re.captures(searched(&lines[n])) {
                Some(caps) => {
                    let mut out = String::new();
                    caps.expand(&crate::tasks::template::python_replacement(line), &mut out);
                    out
                }
                None => line.to_string(),
            },
            _ => line.to_string(),
        };
        let new_line = with_eol(&new_line);
        let nothing_matched = spec.regexp.is_none() && spec.search_string.is_none() && matched.is_none();
        if nothing_matched && !exact_line_match {
            let i = index[1];
            if insertafter.is_some_and(|a| a != "EOF") {
                if lines.last().is_some_and(|l| !ends_with_eol(l)) {
                    if let Some(last) = lines.last_mut() {
                        last.push('\n');
                    }
                }
                if lines.len() as i64 == i {
                    if trim_eol(&lines[(i - 1) as usize]) != line {
                        lines.push(with_eol(line));
                        msg = "line added";
                    }
                } else if i >= 0 && trim_eol(&lines[i as usize]) != line {
                    lines.insert(i as usize, with_eol(line));
                    msg = "line added";
                }
            } else if insertbefore.is_some_and(|b| b != "BOF") {
                let at = i.max(0) as usize;
                let prev = if i <= 0 { lines.get(at) } else { lines.get((i - 1) as usize) };
                if prev.is_some_and(|p| trim_eol(p) != line) {
                    lines.insert(at, with_eol(line));
                    msg = "line added";
                }
            }
        } else if lines[index[0] as usize] != new_line {
            lines[index[0] as usize] = new_line;
            msg = "line replaced";
        }
    } else if spec.backrefs {
        // backrefs and no match: nothing, as Ansible.
    } else if insertbefore == Some("BOF") || insertafter == Some("BOF") {
        lines.insert(0, with_eol(line));
        msg = "line added";
    } else if insertafter == Some("EOF") || index[1] == -1 {
        if lines.last().is_some_and(|l| !ends_with_eol(l)) {
            lines.push("\n".into());
        }
        lines.push(with_eol(line));
        msg = "line added";
    } else if insertafter.is_some() && index[1] != -1 {
        let i = index[1] as usize;
        if lines.len() == i {
            if trim_eol(&lines[i - 1]) != line {
                lines.push(with_eol(line));
                msg = "line added";
            }
        } else if line != trim_eol(&lines[i]) {
            lines.insert(i, with_eol(line));
            msg = "line added";
        }
    } else {
        lines.insert(index[1] as usize, with_eol(line));
        msg = "line added";
    }
    Ok((lines, msg))
}

pub(super) async fn lineinfile(ctx: &ModuleContext, args: &Map<String, Value>) -> ModuleResult {
    let Some(path) = ["path", "dest", "destfile", "name"].iter().find_map(|k| arg_str(args, k)) else {
        return Ok(fail_json("missing required arguments: path"));
    };
    let state = arg_str(args, "state").unwrap_or_else(|| "present".into());
    let regexp_text = arg_str(args, "regexp").or_else(|| arg_str(args, "regex"));
    let search_string = arg_str(args, "search_string");
    let line = arg_str(args, "line").or_else(|| arg_str(args, "value"));
    let backrefs = arg_bool(args, "backrefs", false);
    if regexp_text.is_some() && search_string.is_some() {
        return Ok(fail_json("parameters are mutually exclusive: regexp|search_string"));
    }
    if state == "present" && line.is_none() {
        return Ok(fail_json("state is present but all of the following are missing: line"));
    }
    if backrefs && regexp_text.is_none() {
        return Ok(fail_json("regexp is required with backrefs=true"));
    }
    if state == "absent" && regexp_text.is_none() && search_string.is_none() && line.is_none() {
        return Ok(fail_json("one of line, search_string, or regexp is required with state=absent"));
    }
    let regexp = match &regexp_text {
        Some(p) => match regex::Regex::new(p) {
            Ok(re) => Some(re),
            Err(e) => return Ok(fail_json(format!("invalid regular expression {p:?}: {e}"))),
        },
        None => None,
    };
    let q = shell_quote(&path);
    let read = ctx.exec_reading_file(&format!("if [ -e {q} ]; then echo yes; cat {q}; else echo no; fi")).await?;
    if read.status != 0 {
        return Ok(fail_json(format!("cannot read {path}: {}", String::from_utf8_lossy(&read.stderr).trim())));
    }
    let text = String::from_utf8_lossy(&read.stdout).into_owned();
    let (exists, content) = match text.split_once('\n') {
        Some(("yes", rest)) => (true, rest.to_string()),
        _ => (false, String::new()),
    };
    let mut result = Map::new();
    let (new_lines, msg, found) = if state == "absent" {
        if !exists {
            return Ok(obj(json!({"changed": false, "msg": "file not present"})));
        }
        let lines = read_lines(&content);
        let before = lines.len();
        let kept: Vec<String> = lines
            .into_iter()
            .filter(|l| match (&regexp, &search_string, &line) {
                (Some(re), _, _) => !re.is_match(searched(l)),
                (None, Some(s), _) => !l.contains(s.as_str()),
                (None, None, Some(line)) => line != trim_eol(l),
                _ => true,
            })
            .collect();
        let removed = before - kept.len();
        let msg = if removed > 0 { format!("{removed} line(s) removed") } else { String::new() };
        (kept, msg, Some(removed))
    } else {
        if !exists && !arg_bool(args, "create", false) {
            let mut r = fail_json(format!("Destination {path} does not exist !"));
            r.insert("rc".into(), json!(257));
            return Ok(r);
        }
        let spec = Spec {
            regexp,
            search_string,
            line: line.unwrap_or_default(),
            insertafter: arg_str(args, "insertafter"),
            insertbefore: arg_str(args, "insertbefore"),
            backrefs,
            firstmatch: arg_bool(args, "firstmatch", false),
        };
        match present(&spec, read_lines(&content)) {
            Ok((lines, msg)) => (lines, msg.to_string(), None),
            Err(e) => return Ok(fail_json(e)),
        }
    };
    let new_content: String = new_lines.concat();
    let changed = !msg.is_empty();
    let mut backup = String::new();
    if changed && !ctx.check_mode {
        match write_back(ctx, args, &path, exists, new_content.as_bytes()).await? {
            Ok(b) => backup = b,
            Err(failure) => return Ok(failure),
        }
    }
    let (msg, changed) = apply_attributes(ctx, args, &path, msg, changed).await?;
    result.insert("changed".into(), json!(changed));
    if let Some(found) = found {
        result.insert("found".into(), json!(found));
    }
    result.insert("msg".into(), json!(msg));
    result.insert("backup".into(), json!(backup));
    Ok(result)
}

/// Writes a file's new content through a temporary file beside it (checked with `validate` first when given, the
/// old file's mode and owner kept), after a `backup` copy when asked; `Ok(Ok(backup file or ""))`, or the failure.
pub(super) async fn write_back(
    ctx: &ModuleContext,
    args: &Map<String, Value>,
    path: &str,
    exists: bool,
    content: &[u8],
) -> Result<Result<String, Map<String, Value>>, ConnectionError> {
    let q = shell_quote(path);
    let tmp = shell_quote(&format!("{path}.upgrade-tmp"));
    let dir = std::path::Path::new(path).parent().map(|d| d.display().to_string()).unwrap_or_default();
    let mut script = String::new();
    let mut backup = String::new();
    if !exists && !dir.is_empty() {
        script.push_str(&format!("mkdir -p {} && ", shell_quote(&dir)));
    }
    if arg_bool(args, "backup", false) && exists {
        backup = backup_name(path);
        script.push_str(&format!("cp -p {q} {} && ", shell_quote(&backup)));
    }
    script.push_str(&format!("cat > {tmp}"));
    if let Some(validate) = arg_str(args, "validate") {
        if !validate.contains("%s") {
            return Ok(Err(fail_json(format!("validate must contain %s: {validate}"))));
        }
        script.push_str(&format!(" && {{ {} || {{ rm -f {tmp}; exit 97; }}; }}", validate.replace("%s", &tmp)));
    }
    if exists {
        script.push_str(&format!(
            " && chmod --reference={q} {tmp} 2>/dev/null; chown --reference={q} {tmp} 2>/dev/null; mv -f {tmp} {q}"
        ));
    } else {
        script.push_str(&format!(" && mv -f {tmp} {q}"));
    }
    let out = ctx.exec(&script, Some(content)).await?;
    let stderr = String::from_utf8_lossy(&out.stderr).trim().to_string();
    Ok(match out.status {
        0 => Ok(backup),
        97 => Err(fail_json(format!("failed to validate: {stderr}"))),
        _ => Err(fail_json(format!("cannot write {path}: {stderr}"))),
    })
}

/// `mode`, `owner`, `group` applied as Ansible's `check_file_attrs`: a change of them is named in the message.
pub(super) async fn apply_attributes(
    ctx: &ModuleContext,
    args: &Map<String, Value>,
    path: &str,
    msg: String,
    changed: bool,
) -> Result<(String, bool), ConnectionError> {
    let q = shell_quote(path);
    // In check mode the attributes are tried on a copy of the file, which tells whether they would change it.
    let (target, copy) = match ctx.check_mode {
        true => (shell_quote(&format!("{path}.upgrade-check")), true),
        false => (q.clone(), false),
    };
    let attrs = super::file::attributes(args, &target, false, false);
    if attrs.is_empty() || (copy && ctx.exec(&format!("[ -e {q} ]"), None).await?.status != 0) {
        return Ok((msg, changed));
    }
    let stat = format!("stat -c '%a %u %g' {target}");
    let script = match copy {
        true => {
            format!("cp -p {q} {target} && a=$({stat}); true{attrs}; b=$({stat}); rm -f {target}; [ \"$a\" = \"$b\" ]")
        }
        false => format!("a=$({stat}); true{attrs}; b=$({stat}); [ \"$a\" = \"$b\" ]"),
    };
    if ctx.exec(&script, None).await?.status == 0 {
        return Ok((msg, changed));
    }
    let what = "ownership, perms or SE linux context changed";
    Ok((if msg.is_empty() { what.to_string() } else { format!("{msg} and {what}") }, true))
}
