//! `loop`/`with_items`: the task once per item, the items' results gathered as Ansible does.

use serde_json::{Map, Value, json};

use super::*;
use crate::ansible_compat::python_type_name;

impl HostRun<'_> {
    pub(super) async fn execute_loop(
        &mut self,
        task: &Task,
        call: &ModuleCall,
        scope: &Scope,
        ctx: &Vars,
        items: &Value,
    ) -> Map<String, Value> {
        let rendered = match self.engine.templar.render_value(items, ctx) {
            Ok(v) => v,
            Err(e) => return failed(format!("{}: {}", Self::place(task), e.message)),
        };
        let mut list = match rendered {
            Value::Array(list) => list,
            other => {
                return failed(format!(
                    "{}: the `loop` value must resolve to a list, not {}",
                    Self::place(task),
                    python_type_name(&other)
                ));
            }
        };
        if task.loop_flatten {
            list = list.into_iter().flat_map(|i| if let Value::Array(inner) = i { inner } else { vec![i] }).collect();
        }
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
