//! What the cluster lock, kured's lock and the node poller need of a run, and no more: run a step file on the first
//! master (with or without its events), read a host's setting, tell the operator, the stop signals and the fence.
//! The run (run.rs) provides it and holds their state; they never see the run, so the run can hold them.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;

use super::batches::{StopHandle, StopSignal};
use super::fence::Fence;
use super::step_runner::{StepFacts, StepFailure};
use crate::settings::TargetVersion;
use crate::vocabulary::{Phase, Step};

pub(crate) trait ClusterCalls: Send + Sync {
    /// The master that runs cluster commands (`delegate_to`).
    fn first_master(&self) -> &str;
    fn run_id(&self) -> String;
    fn target(&self) -> &TargetVersion;
    /// The path of a built-in step file, as the run's flavour carries it out.
    fn playbook(&self, name: &str) -> PathBuf;
    /// A host variable rendered as text, with what the run decides for the host's steps.
    fn render_for(&self, host: &str, template: &str) -> String;
    fn host_flag(&self, host: &str, name: &str, default: bool) -> bool;
    fn host_seconds(&self, host: &str, name: &str, default: u64) -> u64;
    /// The Kubernetes node name of an inventory host.
    fn node_name(&self, host: &str) -> String;
    /// Whether "at the target" is decided from what the host has installed rather than from its kubelet.
    fn probes_host_version(&self, host: &str) -> bool;
    fn notice(&self, host: Option<&str>, message: String);
    fn fence(&self) -> &Fence;
    fn stop(&self) -> &StopSignal;
    /// Stops new hosts (and, with `abort`, hosts in flight at their next safe point).
    fn stop_handle(&self) -> &StopHandle;
    /// Drops a registered result the host no longer needs (the poller's node lists).
    fn forget(&self, host: &str, name: &str);
    /// Runs a task file on a host as one step (its events and journal entries).
    fn run_step(
        &self,
        phase: Phase,
        host: &str,
        step: Step,
        file: &Path,
        more: &[(&str, Value)],
        timeout: Option<Duration>,
    ) -> impl Future<Output = Result<StepFacts, StepFailure>> + Send;
    /// Runs a task file on a host without step events or journal entries.
    fn run_step_quietly(
        &self,
        host: &str,
        step: Step,
        file: &Path,
        more: &[(&str, Value)],
    ) -> impl Future<Output = Result<StepFacts, StepFailure>> + Send;
}
