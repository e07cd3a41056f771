//! `throttle`: at most N hosts run a task at once, as Ansible's worker limit for the task does. The hosts of a run
//! share one semaphore per task (its place in its file); a host holds its permit for the whole task (every loop item
//! and retry), as an Ansible worker holds the host's whole task.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use serde_json::Value;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::{HostRun, Scope, Task, Vars};

type TaskPlace = (Arc<Path>, usize, usize);

/// The semaphores of the throttled tasks of a run.
#[derive(Default)]
pub struct Throttles {
    tasks: std::sync::Mutex<HashMap<TaskPlace, Arc<Semaphore>>>,
}

impl Throttles {
    /// Waits for one of the task's `limit` places. The first host to reach the task sets its limit.
    async fn enter(&self, place: TaskPlace, limit: usize) -> Option<OwnedSemaphorePermit> {
        let semaphore = {
            let mut tasks = self.tasks.lock().ok()?;
            tasks.entry(place).or_insert_with(|| Arc::new(Semaphore::new(limit))).clone()
        };
        semaphore.acquire_owned().await.ok()
    }
}

impl HostRun<'_> {
    /// The task's `throttle` (its own, else its block's), rendered; `Ok(None)` when it sets no limit (unset or 0).
    pub(super) fn throttle_limit(&self, task: &Task, scope: &Scope, ctx: &Vars) -> Result<Option<usize>, String> {
        let Some(value) = task.throttle.as_ref().or(scope.throttle.as_ref()) else { return Ok(None) };
        let rendered = self.engine.templar.render_value(value, ctx).map_err(|e| e.message)?;
        let limit = rendered.as_i64().or_else(|| rendered.as_str().and_then(|s| s.trim().parse().ok()));
        match limit {
            Some(n) if n > 0 => Ok(Some(n as usize)),
            Some(_) => Ok(None),
            None => {
                let shown = match &rendered {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                };
                Err(format!("the field 'throttle' has an invalid value ({shown}), and could not be converted to int"))
            }
        }
    }

    /// Waits until fewer than `limit` hosts run the task; the permit lets the next one in when dropped.
    pub(super) async fn enter_throttled(&self, task: &Task, limit: usize) -> Option<OwnedSemaphorePermit> {
        let place = (task.location.file.clone(), task.location.line, task.location.column);
        self.engine.throttles.enter(place, limit).await
    }
}
