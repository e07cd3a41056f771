//! Where and how a module runs: the (delegated) connection, `become`, the task's environment, its arguments.

use serde_json::{Map, Value};

use super::*;

impl HostRun<'_> {
    /// Where and how the module runs: the (delegated) connection, become, environment.
    pub(super) async fn module_context(
        &self,
        task: &Task,
        scope: &Scope,
        ctx: &Vars,
    ) -> Result<ModuleContext, Map<String, Value>> {
        let render_str = |v: &str| self.render_text(task, v, ctx);
        let delegate = match task.delegate_to.as_ref().or(scope.delegate_to.as_ref()) {
            Some(d) => Some(render_str(d)?),
            None => None,
        };
        let target = delegate.clone().unwrap_or_else(|| self.host.clone());
        let (become_user, become_password) = self.become_settings(task, scope, ctx)?;
        let environment = self.environment(task, scope, ctx)?;
        let check_mode = match task.check_mode.as_ref().or(scope.check_mode.as_ref()) {
            Some(v) => match self.engine.templar.render_value(v, ctx) {
                Ok(rendered) => boolean(&rendered).unwrap_or(false),
                Err(e) => return Err(failed(format!("{}: check_mode: {}", Self::place(task), e.message))),
            },
            None => false,
        };
        let needs_host = !matches!(
            call_module(task),
            Some(
                Module::Debug
                    | Module::SetFact
                    | Module::Assert
                    | Module::Fail
                    | Module::Pause
                    | Module::Meta
                    | Module::ImportRole
                    | Module::IncludeRole
                    | Module::AsyncStatus
                    | Module::IncludeVars
                    | Module::AnsibleCore
            )
        );
        let connection = if needs_host {
            match self.engine.pool.get(&target).await {
                Ok(c) => Some(c),
                // wait_for_connection waits for exactly this: it tries again through the pool.
                Err(_) if call_module(task) == Some(Module::WaitForConnection) => None,
                Err(e) => return Err(unreachable(e.to_string())),
            }
        } else {
            None
        };
        Ok(ModuleContext {
            connection,
            become_user,
            become_password,
            environment,
            timeout: self.engine.options.command_timeout,
            task_file: task.location.file.to_path_buf(),
            host: self.host.clone(),
            templar: self.engine.templar.clone(),
            options: self.engine.options.clone(),
            prompt_lock: self.engine.prompt_lock.clone(),
            pool: Some(self.engine.pool.clone()),
            target,
            check_mode,
        })
    }

    /// A task keyword's template rendered as text; a template error fails the task, naming it.
    fn render_text(&self, task: &Task, template: &str, ctx: &Vars) -> Result<String, Map<String, Value>> {
        match self.engine.templar.render(template, ctx) {
            Ok(Value::String(s)) => Ok(s),
            Ok(other) => Ok(other.to_string()),
            Err(e) => Err(failed(format!("{}: {}", Self::place(task), e.message))),
        }
    }

    /// `become` and its user and password, from the task, its blocks or the host's `ansible_become*` variables.
    fn become_settings(
        &self,
        task: &Task,
        scope: &Scope,
        ctx: &Vars,
    ) -> Result<(Option<String>, Option<modules::BecomePassword>), Map<String, Value>> {
        let templar = &self.engine.templar;
        let place = Self::place(task);
        let render_str = |v: &str| self.render_text(task, v, ctx);
        let var = |name: &str| ctx.get(name);
        let become_value = task.become_.clone().or_else(|| scope.become_.clone()).or_else(|| var("ansible_become"));
        let become_on = match become_value {
            Some(v) => templar.render_value(&v, ctx).ok().as_ref().and_then(boolean).unwrap_or(false),
            None => false,
        };
        let become_user = if become_on {
            let user =
                task.become_user.clone().or_else(|| scope.become_user.clone()).or_else(|| var("ansible_become_user"));
            let user = match user {
                Some(Value::String(s)) => render_str(&s)?,
                Some(Value::Null) | None => "root".into(),
                Some(other) => other.to_string(),
            };
            let method = var("ansible_become_method").and_then(|m| m.as_str().map(str::to_string));
            let method = method.unwrap_or_else(|| "sudo".into());
            if method != "sudo" {
                return Err(failed(format!("{place}: become method `{method}` is not supported (only sudo)")));
            }
            Some(user)
        } else {
            None
        };
        // Ansible's names for the sudo password; templated like any variable (a vault-decrypted `-e @file` value).
        let become_password =
            match (&become_user, var("ansible_become_password").or_else(|| var("ansible_become_pass"))) {
                (Some(_), Some(v)) if !v.is_null() => match templar.render_value(&v, ctx) {
                    Ok(Value::String(p)) if !p.is_empty() => Some(modules::BecomePassword::new(&p)),
                    Ok(Value::String(_)) => None,
                    Ok(other) => Some(modules::BecomePassword::new(&other.to_string())),
                    Err(e) => return Err(failed(format!("{place}: ansible_become_password: {}", e.message))),
                },
                _ => None,
            };
        Ok((become_user, become_password))
    }

    /// The task's `environment`, its blocks' first: a name set again keeps the last value, at the end.
    fn environment(&self, task: &Task, scope: &Scope, ctx: &Vars) -> Result<Vec<(String, String)>, Map<String, Value>> {
        let templar = &self.engine.templar;
        let place = Self::place(task);
        let mut environment: Vec<(String, String)> = Vec::new();
        for env in scope.environment.iter().chain(task.environment.iter()) {
            match templar.render_value(env, ctx) {
                Ok(Value::Object(map)) => {
                    for (k, v) in map {
                        let v = match v {
                            Value::String(s) => s,
                            other => other.to_string(),
                        };
                        environment.retain(|(name, _)| name != &k);
                        environment.push((k, v));
                    }
                }
                Ok(other) => return Err(failed(format!("{place}: `environment` must be a mapping, got {other}"))),
                Err(e) => return Err(failed(format!("{place}: {}", e.message))),
            }
        }
        Ok(environment)
    }
}

pub(super) fn call_module(task: &Task) -> Option<Module> {
    match &task.action {
        Action::Module(call) => Some(call.module),
        _ => None,
    }
}
