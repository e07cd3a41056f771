//! `slurp` (a host's file, base64) and `include_vars` (a controller-side YAML file's variables set for the host),
//! with ansible-core 2.19's results and messages.

use serde_json::{Map, Value, json};

use super::common::*;
use super::context::ModuleContext;
use crate::ansible_compat::shell_quote;

/// `slurp: src=PATH`: `content` (base64), `encoding`, `source`.
pub(super) async fn slurp(ctx: &ModuleContext, args: &Map<String, Value>) -> ModuleResult {
    let Some(src) = arg_str(args, "src").or_else(|| arg_str(args, "path")) else {
        return Ok(fail_json("missing required arguments: src"));
    };
    let q = shell_quote(&src);
    let script = format!(
        "if [ -d {q} ]; then echo dir; elif [ ! -e {q} ]; then echo missing; elif [ ! -r {q} ]; then echo unreadable; \
         else echo ok; base64 -w0 < {q}; fi"
    );
    let out = ctx.exec_reading_file(&script).await?;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (verdict, content) = text.split_once('\n').unwrap_or((text.trim(), ""));
    match verdict {
        "ok" => Ok(obj(json!({"content": content.trim(), "encoding": "base64", "source": src, "changed": false}))),
        "dir" => Ok(fail_json(format!("Source is a directory and must be a file: {src}"))),
        "missing" => Ok(fail_json(format!("File not found: {src}"))),
        "unreadable" => Ok(fail_json(format!("File is not readable: {src}"))),
        _ => Ok(fail_json(format!("Unable to slurp file: {src}"))),
    }
}

/// `include_vars: FILE` (or `file:`, with `name:` to put them under one key): found in `vars/` beside the task file
/// (a role's `vars/`), beside it, or as given. Ansible Vault: the file encrypted whole or `!vault` values in it.
pub(super) fn include_vars(ctx: &ModuleContext, args: &Map<String, Value>) -> Map<String, Value> {
    let Some(name) = arg_str(args, "file").or_else(|| arg_str(args, "_raw_params")) else {
        return fail_json("one of file or _raw_params is required");
    };
    let path = resolve_local(&ctx.task_file, &name, Some("vars"));
    if !path.is_file() {
        return fail_json(format!("Could not find or access '{name}'"));
    }
    // A file vault-encrypted whole, or holding `!vault` values, is decrypted with the invocation's passwords.
    let vars = match crate::inventory::decrypted_file_json(&path, &ctx.options.vault) {
        Ok(v) => v,
        Err(e) => {
            let place = e.location.as_ref().map(|l| format!("{l}: ")).unwrap_or_default();
            let hint = e.hint.as_ref().map(|h| format!(" ({h})")).unwrap_or_default();
            return fail_json(format!("{place}{}{hint}", e.message));
        }
    };
    let vars = match vars {
        Value::Object(map) => map,
        Value::Null => Map::new(),
        _ => return fail_json(format!("{} must be stored as a dictionary/hash", path.display())),
    };
    let facts = match arg_str(args, "name") {
        Some(key) => Map::from_iter([(key, Value::Object(vars))]),
        None => vars,
    };
    let abs = std::fs::canonicalize(&path).unwrap_or(path);
    obj(json!({
        "ansible_facts": facts,
        "ansible_included_var_files": [abs.display().to_string()],
        "changed": false,
    }))
}
