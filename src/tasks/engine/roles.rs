//! `import_role` and `include_role`: a role's tasks run in place, with its `defaults/` (below the inventory's
//! variables, as Ansible ranks role defaults), its `vars/` and the task's `vars:` (above them), and its
//! `handlers/main.yml` for what its tasks notify. Roles are found as ansible-core finds them for the playbook that
//! would use the hook (`super::super::role_dirs`), then in each directory of `upgrade_roles_path` (a list or
//! `:`-separated) and of `ANSIBLE_ROLES_PATH`.
//! `include_role`'s `apply` gives the role's tasks its keywords as a block around them would.
//! A role's `meta/main.yml` dependencies run first, recursively, each before the role needing it, with its own
//! defaults and vars and the params meta gives it; their defaults and vars are the role's too (below its own). As in
//! ansible-core a dependency already run on the host is not run again unless its meta says `allow_duplicates: true`
//! or it is given other params; the role included or imported itself always runs.
//! Not supported: argument specs, `public`, dependencies named by a template.

use std::path::{Path, PathBuf};

use super::*;
use crate::tasks::role_dirs::{
    RoleDependency, allows_duplicates, find_role, role_dependency_entries, role_file, roles_path,
};

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
        // The role's dependencies run where the role does: under an import's `when`, after an include's.
        let dep_scope = inner.clone();
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
        let (mut defaults, mut vars) = match dependency_vars(&dir, &mut vec![dir.clone()]) {
            Ok(layers) => layers,
            Err(msg) => return fail(self, msg),
        };
        match role_vars(&dir, role.defaults_from.as_deref(), role.vars_from.as_deref()) {
            Ok((own_defaults, own_vars)) => {
                defaults.extend(own_defaults);
                vars.extend(own_vars);
            }
            Err(msg) => return fail(self, msg),
        }
        // The task's own `vars:` are already in the scope; put back above the role's vars.
        inner = self.role_scope(scope, &inner, defaults, vars, &task.vars);
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
        match self.run_dependencies(&dir, &dep_scope, vec![dir.clone()]).await {
            Ok(Flow::Continue) => {}
            Ok(stop) => return stop,
            Err(msg) => return fail(self, msg),
        }
        self.run_list(&tasks, inner).await
    }

    /// `scope` with a role's variables: its defaults below everything the host already has (as Ansible ranks role
    /// defaults), its vars above the inventory, then `over` (the task's vars or a dependency's params) above those.
    fn role_scope(
        &self,
        visible: &Scope,
        base: &Scope,
        defaults: Map<String, Value>,
        vars: Map<String, Value>,
        over: &Map<String, Value>,
    ) -> Scope {
        let ctx = self.context(visible, &Map::new());
        let mut layered: Map<String, Value> = defaults.into_iter().filter(|(k, _)| ctx.get(k).is_none()).collect();
        layered.extend(vars);
        layered.extend(over.clone());
        let mut scope = base.clone();
        let mut all = visible.vars.clone();
        all.extend(layered);
        scope.vars = all;
        scope
    }

    /// Runs the dependencies of the role in `dir` (theirs first), each once per host unless it allows duplicates or
    /// is given other params. `chain` is the roles being entered, to refuse a dependency cycle.
    fn run_dependencies<'a>(
        &'a mut self,
        dir: &'a Path,
        scope: &'a Scope,
        chain: Vec<PathBuf>,
    ) -> BoxFuture<'a, Result<Flow, String>> {
        Box::pin(async move {
            for dep in role_dependency_entries(dir) {
                let dep_dir = found_dependency(dir, &dep, &chain)?;
                let mut deeper = chain.clone();
                deeper.push(dep_dir.clone());
                // The dependency's `when` applies to its own dependencies' tasks too, as a block around them would.
                let mut guarded = scope.clone();
                guarded.when.extend(dep.when.iter().cloned());
                match self.run_dependencies(&dep_dir, &guarded, deeper.clone()).await? {
                    Flow::Continue => {}
                    stop => return Ok(stop),
                }
                let key = (
                    std::fs::canonicalize(&dep_dir).unwrap_or(dep_dir.clone()),
                    Value::Object(dep.params.clone()).to_string(),
                );
                if !self.dependencies_run.insert(key) && !allows_duplicates(&dep_dir) {
                    continue;
                }
                let Some(tasks_file) = role_file(&dep_dir, "tasks", None) else { continue };
                let (mut defaults, mut vars) = dependency_vars(&dep_dir, &mut deeper)?;
                let (own_defaults, own_vars) = role_vars(&dep_dir, None, None)?;
                defaults.extend(own_defaults);
                vars.extend(own_vars);
                let inner = self.role_scope(scope, &guarded, defaults, vars, &dep.params);
                let tasks = self.engine.task_files.load(&tasks_file).map_err(|e| e.to_string())?;
                match self.run_list(&tasks, inner).await {
                    Flow::Continue => {}
                    stop => return Ok(stop),
                }
            }
            Ok(Flow::Continue)
        })
    }
}

/// A role's defaults and its vars.
type RoleVars = (Map<String, Value>, Map<String, Value>);

/// A role's defaults and vars files (`main` unless named).
fn role_vars(dir: &Path, defaults_from: Option<&str>, vars_from: Option<&str>) -> Result<RoleVars, String> {
    Ok((read_vars(role_file(dir, "defaults", defaults_from))?, read_vars(role_file(dir, "vars", vars_from))?))
}

/// The defaults and vars of the dependencies of the role in `dir`, recursively (a dependency's own after those of
/// its dependencies, so nearer ones win): ansible-core gives a role's tasks those of the roles it depends on.
fn dependency_vars(dir: &Path, chain: &mut Vec<PathBuf>) -> Result<RoleVars, String> {
    let (mut defaults, mut vars) = (Map::new(), Map::new());
    for dep in role_dependency_entries(dir) {
        let dep_dir = found_dependency(dir, &dep, chain)?;
        chain.push(dep_dir.clone());
        let (deeper_defaults, deeper_vars) = dependency_vars(&dep_dir, chain)?;
        chain.pop();
        let (own_defaults, own_vars) = role_vars(&dep_dir, None, None)?;
        defaults.extend(deeper_defaults);
        defaults.extend(own_defaults);
        vars.extend(deeper_vars);
        vars.extend(own_vars);
    }
    Ok((defaults, vars))
}

/// Where a dependency of the role in `dir` is, or why it cannot run: not found, named by a template, or a role
/// already being entered (a dependency cycle, which would run without end).
fn found_dependency(dir: &Path, dep: &RoleDependency, chain: &[PathBuf]) -> Result<PathBuf, String> {
    let meta = dir.join("meta").display().to_string();
    let Some(dep_dir) = dep.dir.clone() else {
        return Err(if dep.name.contains("{{") {
            format!(
                "{meta}: the dependency '{}' is named by a template, which upgrade does not run; name the role",
                dep.name
            )
        } else {
            format!(
                "{meta}: the dependency '{}' was not found beside the role, in its roles tree or in ANSIBLE_ROLES_PATH",
                dep.name
            )
        });
    };
    if chain.iter().any(|entered| same_dir(entered, &dep_dir)) {
        return Err(format!(
            "{meta}: the dependency '{}' depends on itself through the roles it needs; break the cycle",
            dep.name
        ));
    }
    Ok(dep_dir)
}

fn same_dir(a: &Path, b: &Path) -> bool {
    match (std::fs::canonicalize(a), std::fs::canonicalize(b)) {
        (Ok(a), Ok(b)) => a == b,
        _ => a == b,
    }
}
