//! `loop`/`with_items`/`with_fileglob`/`with_first_found`: the task once per item, the items' results gathered as
//! Ansible does.

use serde_json::{Map, Value, json};

use super::*;
use crate::ansible_compat::python_type_name;
use crate::tasks::template::TemplateErrorKind;

/// Why a task's loop has no list.
pub(super) enum NoLoopList {
    /// A variable its items use is undefined: as Ansible, the task's `when` is asked first, and a task it skips is
    /// skipped, not failed (k3s-ansible's airgap `with_fileglob` over an undefined `airgap_dir` under
    /// `when: airgap_dir is defined`).
    Undefined(String),
    Failed(String),
}

impl NoLoopList {
    pub(super) fn into_message(self) -> String {
        match self {
            NoLoopList::Undefined(msg) | NoLoopList::Failed(msg) => msg,
        }
    }
}

impl HostRun<'_> {
    /// The list a task loops over: its rendered `loop` (flattened one level for `with_items`), or, for a
    /// `with_LOOKUP`, what `query('LOOKUP', *terms)` gives for the rendered terms (a single term is a list of one).
    pub(super) fn loop_list(&self, task: &Task, items: &Value, ctx: &Vars) -> Result<Vec<Value>, NoLoopList> {
        let place = |msg: &str| format!("{}: {msg}", Self::place(task));
        let rendered = self.engine.templar.render_value(items, ctx).map_err(|e| match e.kind {
            TemplateErrorKind::Undefined => NoLoopList::Undefined(place(&e.message)),
            _ => NoLoopList::Failed(place(&e.message)),
        })?;
        if let Some(lookup) = &task.loop_lookup {
            let terms = match rendered {
                Value::Array(terms) => terms,
                one => vec![one],
            };
            let vars = ctx.with("__loop_lookup", &json!(lookup)).with("__loop_terms", &Value::Array(terms));
            return match self.engine.templar.eval_expression("query(__loop_lookup, *__loop_terms)", &vars) {
                Ok(Value::Array(list)) => Ok(list),
                Ok(other) => Ok(vec![other]),
                Err(e) => Err(NoLoopList::Failed(place(&e.message))),
            };
        }
        match rendered {
            Value::Array(list) if task.loop_flatten => {
                Ok(list.into_iter().flat_map(|i| if let Value::Array(inner) = i { inner } else { vec![i] }).collect())
            }
            Value::Array(list) => Ok(list),
            other => Err(NoLoopList::Failed(place(&format!(
                "the `loop` value must resolve to a list, not {}",
                python_type_name(&other)
            )))),
        }
    }

    pub(super) async fn execute_loop(
        &mut self,
        task: &Task,
        call: &ModuleCall,
        scope: &Scope,
        ctx: &Vars,
        items: &Value,
    ) -> Map<String, Value> {
        let list = match self.loop_list(task, items, ctx) {
            Ok(list) => list,
            Err(NoLoopList::Failed(msg)) => return failed(msg),
            Err(NoLoopList::Undefined(msg)) => {
                let mut conditions = scope.when.clone();
                conditions.extend(task.when.iter().cloned());
                return match self.conditions_hold(&conditions, ctx) {
                    Ok(Some(cond)) => skipped(&cond),
                    Ok(None) => failed(msg),
                    Err(why) => failed(format!("{}: {why}", Self::place(task))),
                };
            }
        };
        if list.is_empty() {
            let mut r = Map::new();
            r.insert("changed".into(), Value::Bool(false));
            r.insert("skipped".into(), Value::Bool(true));
            r.insert("skipped_reason".into(), Value::String("No items in the list".into()));
            r.insert("results".into(), Value::Array(Vec::new()));
            return r;
        }
        let loop_var = task.loop_var.clone().unwrap_or_else(|| "item".into());
        let mut results = Vec::new();
        let (mut changed, mut any_failed, mut all_skipped) = (false, false, true);
        for (index, item) in list.into_iter().enumerate() {
            let mut item_ctx = ctx.with("ansible_loop_var", &Value::String(loop_var.clone())).with(&loop_var, &item);
            if let Some(index_var) = &task.index_var {
                item_ctx = item_ctx.with("ansible_index_var", &json!(index_var)).with(index_var, &json!(index));
            }
            let mut res = self.execute_once(task, call, scope, item_ctx.clone()).await;
            res.insert(loop_var.clone(), item.clone());
            res.insert("ansible_loop_var".into(), Value::String(loop_var.clone()));
            if let Some(index_var) = &task.index_var {
                res.insert(index_var.clone(), json!(index));
                res.insert("ansible_index_var".into(), json!(index_var));
            }
            if let Some(label) = &task.loop_label {
                if let Ok(l) = self.engine.templar.render(label, &item_ctx) {
                    res.insert("_ansible_item_label".into(), l);
                }
            }
            changed |= flag(&res, "changed");
            any_failed |= flag(&res, "failed") || flag(&res, "unreachable");
            all_skipped &= flag(&res, "skipped");
            results.push(clean(&res));
        }
        let mut out = Map::new();
        out.insert("results".into(), Value::Array(results));
        out.insert("skipped".into(), Value::Bool(all_skipped));
        out.insert("changed".into(), Value::Bool(changed));
        let msg = if any_failed {
            out.insert("failed".into(), Value::Bool(true));
            "One or more items failed"
        } else if all_skipped {
            "All items skipped"
        } else {
            "All items completed"
        };
        out.insert("msg".into(), Value::String(msg.into()));
        out
    }
}
