//! `notify` and handlers, and `meta`, as ansible-core 2.19 runs them: a task that reports changed notifies handlers
//! by name or `listen` topic; they run at `meta: flush_handlers` or when the host's task list ends (a hook file's
//! end is its play's end), each once per host however often it was notified, in the order they are defined, and
//! not on a host that failed. A hook's handlers are those of its role (`tasks/x.yml` -> `handlers/main.yml` beside
//! `tasks/`) or, for a task file outside a role, `handlers/main.yml` in its own directory.
//!
//! `meta`: `flush_handlers` runs the notified handlers now; `end_host` ends this host's task list without failing it;
//! `end_play` ends it for every host of the run (hosts run independently here, so another host ends at its next
//! task, where Ansible's linear strategy ends them all at that same task); `noop` does nothing.

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;

use super::*;

/// The handlers file for tasks read from `task_file`, when there is one: the role's, for a file anywhere under a
/// role's `tasks/` (`tasks/upgrade/x.yml` too) or in its `handlers/`, else `handlers/main.yml` beside the file.
pub fn handlers_file(task_file: &Path) -> Option<PathBuf> {
    let dir = task_file.parent()?;
    // A handler that notifies another (`restart master` -> `verify API server`) is read from `handlers/` itself.
    let role_part = |a: &Path| a.file_name().is_some_and(|n| n == "tasks" || n == "handlers");
    let base = dir.ancestors().find(|a| role_part(a)).and_then(Path::parent);
    let base = base.unwrap_or(dir);
    ["main.yml", "main.yaml"].iter().map(|name| base.join("handlers").join(name)).find(|p| p.is_file())
}

/// Ansible's message for a `notify` that names no handler.
pub fn handler_not_found(name: &str) -> String {
    format!(
        "The requested handler '{name}' was not found in either the main handlers list nor in the listening handlers list"
    )
}

/// Whether a handler answers to `name`: its own name or one of its `listen` topics.
pub fn answers_to(handler: &Task, name: &str) -> bool {
    handler.name.as_deref() == Some(name) || handler.listen.iter().any(|l| l == name)
}

impl HostRun<'_> {
    /// Remembers the handlers a changed task notifies; `Err` with Ansible's message when one is not found.
    pub(super) fn notify(&mut self, task: &Task) -> Result<(), String> {
        let Some(file) = handlers_file(&task.location.file) else {
            return Err(handler_not_found(&task.notify[0]));
        };
        let handlers = self.engine.task_files.load(&file).map_err(|e| e.to_string())?;
        for name in &task.notify {
            let matching: Vec<usize> =
                handlers.iter().enumerate().filter(|(_, h)| answers_to(h, name)).map(|(i, _)| i).collect();
            if matching.is_empty() {
                return Err(handler_not_found(name));
            }
            for index in matching {
                if !self.notified.contains(&(file.clone(), index)) {
                    self.notified.push((file.clone(), index));
                }
            }
        }
        Ok(())
    }

    /// Runs the notified handlers, each once, in the order their files define them, and forgets them.
    pub(super) async fn flush_handlers(&mut self) -> Flow {
        while !self.notified.is_empty() {
            let file = self.notified[0].0.clone();
            let mut indices: Vec<usize> = self.notified.iter().filter(|(f, _)| *f == file).map(|(_, i)| *i).collect();
            self.notified.retain(|(f, _)| *f != file);
            indices.sort_unstable();
            let handlers = match self.engine.task_files.load(&file) {
                Ok(h) => h,
                Err(_) => return Flow::Failed,
            };
            for index in indices {
                if let Some(handler) = handlers.get(index) {
                    match self.run_task(handler, &Scope::default()).await {
                        Flow::Continue => {}
                        stop => return stop,
                    }
                }
            }
        }
        Flow::Continue
    }

    /// `meta: ACTION`, run here: it acts on the run, not on the host.
    pub(super) async fn run_meta(&mut self, task: &Task, call: &ModuleCall, scope: &Scope) -> Flow {
        let action = call.args.get("_raw_params").and_then(Value::as_str).unwrap_or_default().trim().to_string();
        let ctx = self.context(scope, &task.vars);
        let mut when = scope.when.clone();
        when.extend(task.when.iter().cloned());
        match self.conditions_hold(&when, &ctx) {
            Ok(None) => {}
            // A meta task whose condition is false does nothing and, as in Ansible, shows nothing.
            Ok(Some(_)) => return Flow::Continue,
            Err(msg) => {
                let tref = self.task_ref(task, &ctx);
                self.finish(
                    &tref,
                    task,
                    &failed(format!("{}: {msg}", Self::place(task))),
                    Instant::now(),
                    scope,
                    false,
                );
                return Flow::Failed;
            }
        }
        match action.as_str() {
            "flush_handlers" => self.flush_handlers().await,
            "end_host" => Flow::Ended,
            "end_play" => {
                self.engine.play_ended.store(true, Ordering::SeqCst);
                Flow::Ended
            }
            _ => Flow::Continue,
        }
    }
}
