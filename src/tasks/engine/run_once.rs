//! `run_once`: the first host still running a task runs it; the others wait and take its outcome.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::{Map, Value};
use tokio::sync::OnceCell;

use super::{HostRun, ModuleCall, Scope, Task, Vars};

/// A `run_once` task runs on the first host of the run (in inventory order) still running it, as in Ansible; the
/// others take its outcome.
#[derive(Default)]
pub struct RunOnce {
    slots: std::sync::Mutex<HashMap<(Arc<std::path::Path>, usize, usize, u32), Arc<OnceCell<Shared>>>>,
    progress: std::sync::Mutex<Progress>,
    changed: tokio::sync::Notify,
}

/// Which hosts of the run have started and finished, to tell whose turn a run_once task is.
#[derive(Default)]
pub(super) struct Progress {
    order: Vec<String>,
    /// The hosts that take a run_once task's facts and registered result: `order`, or the hosts of an upgrade batch.
    members: Vec<String>,
    /// Every host will start (forks >= hosts), so waiting for one not yet started cannot deadlock.
    all_start: bool,
    started: std::collections::HashSet<String>,
    finished: std::collections::HashSet<String>,
}

impl RunOnce {
    /// The hosts of the run in order. Without it, the first host to reach a run_once task runs it.
    pub fn set_order(&self, hosts: &[String], forks: usize) {
        if let Ok(mut p) = self.progress.lock() {
            p.order = hosts.to_vec();
            p.members = hosts.to_vec();
            p.all_start = forks >= hosts.len();
        }
    }

    pub(super) fn mark(&self, host: &str, finished: bool) {
        if let Ok(mut p) = self.progress.lock() {
            if finished {
                p.finished.insert(host.to_string());
            } else {
                p.started.insert(host.to_string());
            }
        }
        self.changed.notify_waiters();
    }

    /// The hosts that share run_once results, without imposing an order on who runs them.
    pub fn set_members(&self, hosts: &[String]) {
        if let Ok(mut p) = self.progress.lock() {
            p.members = hosts.to_vec();
        }
    }

    /// The hosts that share run_once results.
    fn hosts(&self) -> Vec<String> {
        self.progress.lock().map(|p| p.members.clone()).unwrap_or_default()
    }

    /// No host before this one is still on its way to the task.
    fn my_turn(&self, host: &str) -> bool {
        let Ok(p) = self.progress.lock() else { return true };
        for earlier in p.order.iter().take_while(|h| h.as_str() != host) {
            let running = !p.finished.contains(earlier) && (p.all_start || p.started.contains(earlier));
            if running {
                return false;
            }
        }
        true
    }
}

#[derive(Clone)]
pub(super) struct Shared {
    pub(super) result: Map<String, Value>,
    /// Facts (`set_fact`) and the registered result, applied to every host.
    pub(super) facts: Map<String, Value>,
    pub(super) runner: String,
}

impl HostRun<'_> {
    /// The outcome of a run_once task (the `nth` time this host reaches it, in `key`): this host runs it when no
    /// earlier host is still on its way to it, else it waits for the one that does.
    pub(super) async fn run_once_shared(
        &mut self,
        task: &Task,
        call: &ModuleCall,
        scope: &Scope,
        ctx: &Vars,
        key: (Arc<std::path::Path>, usize, usize, u32),
        bypass_host_loop: bool,
    ) -> Shared {
        let slot = {
            let mut slots = match self.engine.run_once.slots.lock() {
                Ok(s) => s,
                Err(poisoned) => poisoned.into_inner(),
            };
            slots.entry(key).or_default().clone()
        };
        let run_once = self.engine.run_once.clone();
        loop {
            if let Some(shared) = slot.get() {
                return shared.clone();
            }
            if run_once.my_turn(&self.host) {
                let shared = slot
                    .get_or_init(|| async {
                        let before = self.facts().unwrap_or_default();
                        let result = self.execute(task, call, scope, ctx).await;
                        let after = self.facts().unwrap_or_default();
                        let facts = after
                            .iter()
                            .filter(|&(k, v)| before.get(&**k) != Some(v))
                            .map(|(k, v)| (k.to_string(), (**v).clone()))
                            .collect::<Map<String, Value>>();
                        // As Ansible, the facts and registered result of a run_once task are every host's at
                        // once: `hostvars[other]` shows them even before that host moves on.
                        if !bypass_host_loop {
                            for host in run_once.hosts() {
                                self.engine.facts.extend(&host, facts.clone());
                            }
                        }
                        Shared { result, facts, runner: self.host.clone() }
                    })
                    .await
                    .clone();
                run_once.changed.notify_waiters();
                return shared;
            }
            // Wait for an earlier host to run the task or to stop; register interest before checking again so
            // no wake-up is missed.
            let notified = run_once.changed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if slot.get().is_none() && !run_once.my_turn(&self.host) {
                notified.await;
            }
        }
    }
}
