//! `import_role` and `include_role`: a role's tasks run in place, with its `defaults/` (below the inventory's
//! variables, as Ansible ranks role defaults), its `vars/` and the task's `vars:` (above them), and its
//! `handlers/main.yml` for what its tasks notify. Roles are found as ansible-core finds them for the playbook that
//! would use the hook (`super::super::role_dirs`), then in each directory of `upgrade_roles_path` (a list or
//! `:`-separated) and of `ANSIBLE_ROLES_PATH`.
//! `include_role`'s `apply` gives the role's tasks its keywords as a block around them would.
//! Not supported: running the tasks of a role's `meta/main.yml` dependencies (only their `library/` is used, for
//! modules ansible-core runs), argument specs, `public`.

use std::path::PathBuf;

use super::*;
use crate::tasks::role_dirs::{find_role, role_file, roles_path};

/// The role a task names, with what it takes from it.
pub struct RoleCall {
    pub name: String,
    pub tasks_from: Option<String>,
    pub vars_from: Option<String>,
    pub defaults_from: Option<String>,
}

impl RoleCall {
    pub fn from_args(args: &Map<String, Value>) -> RoleCall {
        let text = |k: &str| args.get(k).and_then(Value::as_str).map(str::to_string);
        RoleCall {
            name: text("name").or_else(|| text("role")).unwrap_or_default(),
            tasks_from: text("tasks_from"),
            vars_from: text("vars_from"),
            defaults_from: text("defaults_from"),
        }
    }
}

/// `include_role`'s `apply` keywords as the block they stand for (the parser let through only a block's keywords).
fn applied_block(apply: &Map<String, Value>) -> Task {
    let get = |k: &str| apply.get(k).cloned();
    let text = |k: &str| match apply.get(k) {
        Some(Value::String(s)) => Some(s.clone()),
        Some(Value::Null) | None => None,
        Some(other) => Some(other.to_string()),
    };
    Task {
        when: match apply.get("when") {
            Some(Value::Array(items)) => items.clone(),
            Some(Value::Null) | None => Vec::new(),
            Some(Value::Number(n)) => vec![Value::String(n.to_string())],
            Some(one) => vec![one.clone()],
        },
        vars: match apply.get("vars") {
            Some(Value::Object(vars)) => vars.clone(),
            _ => Map::new(),
        },
        become_: get("become"),
        become_user: get("become_user"),
        environment: get("environment"),
        ignore_errors: get("ignore_errors"),
        no_log: get("no_log"),
        delegate_to: text("delegate_to"),
        run_once: get("run_once"),
        throttle: get("throttle"),
        check_mode: get("check_mode"),
        ..Task::default()
    }
}

/// A role's variables file as a mapping (an empty or missing file: none).
fn read_vars(path: Option<PathBuf>) -> Result<Map<String, Value>, String> {
    let Some(path) = path else { return Ok(Map::new()) };
    let text = std::fs::read_to_string(&path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    match crate::yaml::parse(&text, &path) {
        Ok(Some(node)) => match node.to_json() {
            Value::Object(map) => Ok(map),
            Value::Null => Ok(Map::new()),
            _ => Err(format!("{}: a vars file is a mapping of names to values", path.display())),
        },
        Ok(None) => Ok(Map::new()),
        Err(e) => Err(e.to_string()),
    }
}

impl HostRun<'_> {
    pub(super) async fn run_role(&mut self, task: &Task, call: &ModuleCall, scope: &Scope) -> Flow {
        let import = call.module == Module::ImportRole;
        let outer = Self::child_scope(task, scope);
        let mut inner = outer.clone();
        let ctx = self.context(&outer, &Map::new());
        let tref = self.task_ref(task, &ctx);
        let ignore = self.ignore_errors(task, &outer, &ctx);
        let fail = |this: &Self, msg: String| {
            this.finish(&tref, task, &failed(format!("{}: {msg}", Self::place(task))), Instant::now(), &outer, ignore);
            if ignore { Flow::Continue } else { Flow::Failed }
        };
        // include_role settles its own `when` once; an imported role's tasks each inherit it, as in Ansible.
        if !import {
            match self.conditions_hold(&inner.when, &ctx) {
                Ok(None) => inner.when.clear(),
                Ok(Some(cond)) => {
                    self.finish(&tref, task, &skipped(&cond), Instant::now(), &outer, ignore);
                    return Flow::Continue;
                }
                Err(msg) => return fail(self, msg),
            }
        }
        let args = match render_args(&self.engine.templar, call, &ctx) {
            Ok(args) => args,
            Err(msg) => return fail(self, msg),
        };
        let role = RoleCall::from_args(&args);
        // Relative directories of upgrade_roles_path are the inventory's, as hook paths are (and as check reads them).
        let inventory_dir = ctx.get("inventory_dir").and_then(|v| v.as_str().map(PathBuf::from));
        let search: Vec<PathBuf> = roles_path(ctx.get("upgrade_roles_path").as_ref())
            .into_iter()
            .map(|d| match &inventory_dir {
                Some(base) if d.is_relative() => base.join(d),
                _ => d,
            })
            .collect();
        let Some(dir) = find_role(&task.location.file, &role.name, &search) else {
            return fail(self, format!("the role '{}' was not found", role.name));
        };
        let Some(tasks_file) = role_file(&dir, "tasks", role.tasks_from.as_deref()) else {
            let from = role.tasks_from.as_deref().unwrap_or("main");
            return fail(self, format!("Could not find specified file in role: tasks/{from}"));
        };
        let defaults = match read_vars(role_file(&dir, "defaults", role.defaults_from.as_deref())) {
            Ok(v) => v,
            Err(msg) => return fail(self, msg),
        };
        let vars = match read_vars(role_file(&dir, "vars", role.vars_from.as_deref())) {
            Ok(v) => v,
            Err(msg) => return fail(self, msg),
        };
        // Defaults rank below everything the host already has; role vars above the inventory, below the task's
        // own `vars:` (already in the scope, so put back after them).
        let mut layered = Map::new();
        for (k, v) in defaults {
            if ctx.get(&k).is_none() {
                layered.insert(k, v);
            }
        }
        layered.extend(vars);
        for (k, v) in &task.vars {
            layered.insert(k.clone(), v.clone());
        }
        let mut vars = scope.vars.clone();
        vars.extend(layered);
        inner.vars = vars;
        // `apply` (as written, so its templates render per task): a block around the role's tasks.
        if let Some(Value::Object(apply)) = call.args.get("apply").filter(|_| !import) {
            inner = Self::child_scope(&applied_block(apply), &inner);
        }
        let tasks = match self.engine.task_files.load(&tasks_file) {
            Ok(tasks) => tasks,
            Err(e) => return fail(self, e.to_string()),
        };
        // Ansible reports an include_role as ok (`included: ROLE for HOST`) before its tasks; an import shows nothing.
        if !import {
            let mut included = Map::new();
            included.insert("changed".into(), Value::Bool(false));
            included.insert("include".into(), Value::String(role.name.clone()));
            self.finish(&tref, task, &included, Instant::now(), &outer, ignore);
        }
        self.run_list(&tasks, inner).await
    }
}
