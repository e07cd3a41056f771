//! The controller-side modules that look at variables: `debug`, `assert`, `fail`, `set_fact`.

use serde_json::{Map, Value, json};

use super::common::*;
use super::context::ModuleContext;
use crate::ansible_compat::boolean;
use crate::tasks::Vars;

pub(super) fn debug(ctx: &ModuleContext, args: &Map<String, Value>, vars: &Vars) -> Map<String, Value> {
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

pub(super) fn assert(ctx: &ModuleContext, args: &Map<String, Value>, vars: &Vars) -> Map<String, Value> {
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
            other => (boolean(other).unwrap_or(false), other.to_string()),
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

pub(super) fn fail(args: &Map<String, Value>) -> Map<String, Value> {
    let msg = args.get("msg").cloned().unwrap_or_else(|| "Failed as requested from task".into());
    obj(json!({"failed": true, "msg": msg, "changed": false, "exception": NO_TRACEBACK}))
}

pub(super) fn set_fact(args: &Map<String, Value>) -> Map<String, Value> {
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
