//! Blue-green node replacement (OpenShift 3.11's "blue-green cluster upgrades", ARO's add-one / drain-one /
//! remove-one cycle). The masters are upgraded in place; then the green nodes (inventory group `new_nodes`, already at
//! the target) take the load: blue and green are labelled, green made schedulable, blue unschedulable, and the blue
//! nodes are evacuated in serial batches, each with the node hooks, the drain timeout and the failure threshold.
//! Optional controller-side surge hooks add a new node before each blue one is drained and remove the old one after.
//! `upgrade --rollback-blue-green` makes blue schedulable and green unschedulable again.

use std::collections::{BTreeSet, HashMap};
use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use indexmap::IndexMap;
use serde_json::{Value, json};

use crate::cluster::ClusterNode;
use crate::error::{Error, Result};
use crate::events::Event;
use crate::inventory::{Inventory, Origin, Vars};
use crate::phase::batches::{BatchStop, StopSignal};
use crate::phase::nodes::run_in_batches;
use crate::phase::run::{StepFailure, UpgradeRun};
use crate::phase::sequence::{drain, hook, safe_point};
use crate::phase::{HostOutcome, HostReport, Step, Summary};
use crate::plan::Phase;
use crate::settings::{HookPoint, HostVarsRef, Setting, Shown, run_wide};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum NodesStrategy {
    #[default]
    InPlace,
    BlueGreen,
}

impl NodesStrategy {
    pub fn parse(text: &str) -> Result<NodesStrategy> {
        match text.trim().trim_matches(|c| c == '"' || c == '\'') {
            "in-place" => Ok(NodesStrategy::InPlace),
            "blue-green" => Ok(NodesStrategy::BlueGreen),
            other => Err(Error::input(format!("upgrade_nodes_strategy `{other}` is not a strategy this tool knows"))
                .hint("write in-place (upgrade each node, the default) or blue-green (evacuate the old nodes onto new ones)")),
        }
    }

    pub fn from_value(value: &Value) -> Result<NodesStrategy> {
        match value {
            Value::String(s) => NodesStrategy::parse(s),
            other => NodesStrategy::parse(&other.to_string()),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            NodesStrategy::InPlace => "in-place",
            NodesStrategy::BlueGreen => "blue-green",
        }
    }
}

impl fmt::Display for NodesStrategy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl Shown for NodesStrategy {
    fn shown(&self) -> String {
        format!("`{self}`")
    }
}

/// The controller-side hooks of one blue node.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SurgeHooks {
    pub add: Option<PathBuf>,
    pub remove: Option<PathBuf>,
}

/// The blue-green settings of a plan.
#[derive(Debug, Clone, PartialEq)]
pub struct BlueGreen {
    pub strategy: Setting<NodesStrategy>,
    /// `upgrade_green_group` (default `new_nodes`) and its hosts.
    pub green_group: String,
    pub green: Vec<String>,
    /// `upgrade_blue_green_label` (default `color`): the label key set to `blue` and `green`.
    pub label: String,
    /// `upgrade_blue_green_delete_nodes`: delete each evacuated blue node's object.
    pub delete_nodes: bool,
    /// The surge hooks of each node that has any.
    pub surge: IndexMap<String, SurgeHooks>,
}

const ADD_HOOK: &str = "upgrade_node_surge_add_hook";
const REMOVE_HOOK: &str = "upgrade_node_surge_remove_hook";

impl BlueGreen {
    pub fn enabled(&self) -> bool {
        self.strategy.value == NodesStrategy::BlueGreen
    }

    pub fn resolve(node_hosts: HostVarsRef<'_>, extra: &Vars, inventory: &Inventory) -> Result<BlueGreen> {
        let text = |s: &str| Ok(s.trim().trim_matches(|c| c == '"' || c == '\'').to_string());
        let value_text = |v: &Value| match v {
            Value::String(s) => text(s),
            other => Ok(other.to_string()),
        };
        let strategy = run_wide(
            "upgrade_nodes_strategy",
            None,
            ("upgrade_nodes_strategy", "upgrade_nodes_strategy"),
            node_hosts,
            extra,
            NodesStrategy::parse,
            NodesStrategy::from_value,
        )?
        .unwrap_or(Setting { value: NodesStrategy::InPlace, source: None, origin: Origin::Default });
        let read = |name: &str, default: &str| -> Result<String> {
            let found = run_wide(name, None, (name, name), node_hosts, extra, text, value_text)?;
            Ok(found.map(|s| s.value).filter(|v| !v.is_empty()).unwrap_or_else(|| default.to_string()))
        };
        let green_group = read("upgrade_green_group", "new_nodes")?;
        let label = read("upgrade_blue_green_label", "color")?;
        let delete_nodes = run_wide(
            "upgrade_blue_green_delete_nodes",
            None,
            ("upgrade_blue_green_delete_nodes", "upgrade_blue_green_delete_nodes"),
            node_hosts,
            extra,
            |s| bool_value(&Value::String(s.to_string())),
            bool_value,
        )?
        .is_some_and(|s| s.value);
        let mut surge = IndexMap::new();
        if strategy.value == NodesStrategy::BlueGreen {
            for (host, vars) in node_hosts {
                let hooks = SurgeHooks {
                    add: surge_hook(host, vars, ADD_HOOK, &inventory.dir)?,
                    remove: surge_hook(host, vars, REMOVE_HOOK, &inventory.dir)?,
                };
                if hooks != SurgeHooks::default() {
                    surge.insert(host.to_string(), hooks);
                }
            }
        }
        let green = inventory.group_hosts(&green_group).unwrap_or_default();
        Ok(BlueGreen { strategy, green_group, green, label, delete_nodes, surge })
    }

    /// Checks what the plan can check offline: something to take the load of the blue nodes.
    pub fn check(&self, blue: &[String], inventory: &Inventory) -> Result<()> {
        if !self.enabled() || blue.is_empty() {
            return Ok(());
        }
        let surging = blue.iter().all(|h| self.surge.get(h).is_some_and(|s| s.add.is_some()));
        if self.green.is_empty() && !surging {
            return Err(Error::input(format!(
                "upgrade_nodes_strategy is blue-green ({}) but the green group `{}` has no hosts",
                self.strategy.describe_origin(),
                self.green_group
            ))
            .in_file(&inventory.path)
            .hint(format!(
                "list the new nodes (already at the target) in group `{}` (or name another with upgrade_green_group), \
                 or give each old node an {ADD_HOOK} that adds its replacement",
                self.green_group
            )));
        }
        Ok(())
    }

    /// The blue nodes: the selected nodes that are not green.
    pub fn blue(&self, nodes: Vec<String>) -> Vec<String> {
        if !self.enabled() {
            return nodes;
        }
        let green: BTreeSet<&String> = self.green.iter().collect();
        nodes.into_iter().filter(|h| !green.contains(h)).collect()
    }

    pub fn plan_json(&self) -> Value {
        if !self.enabled() {
            return json!({"name": self.strategy.value.name(), "origin": self.strategy.describe_origin()});
        }
        let path = |p: &Option<PathBuf>| p.as_ref().map(|p| p.display().to_string());
        let surge: serde_json::Map<String, Value> = self
            .surge
            .iter()
            .map(|(h, s)| (h.clone(), json!({"add": path(&s.add), "remove": path(&s.remove)})))
            .collect();
        json!({
            "name": self.strategy.value.name(),
            "origin": self.strategy.describe_origin(),
            "green_group": self.green_group,
            "green": self.green,
            "label": self.label,
            "delete_nodes": self.delete_nodes,
            "surge_hooks": surge,
        })
    }

    pub fn plan_text(&self) -> Vec<String> {
        if !self.enabled() {
            return Vec::new();
        }
        let mut lines = vec![
            format!("Nodes strategy: blue-green ({})", self.strategy.describe_origin()),
            format!(
                "  green (group {}, must be Ready at the target): {}",
                self.green_group,
                if self.green.is_empty() { "none (surge hooks add them)".to_string() } else { self.green.join(", ") }
            ),
            format!(
                "  label {0}=blue / {0}=green; green made schedulable, blue unschedulable, then the blue nodes of the \
                 nodes phase are evacuated in its batches (not upgraded); their node objects are {1}",
                self.label,
                if self.delete_nodes { "deleted (upgrade_blue_green_delete_nodes)" } else { "kept" }
            ),
        ];
        for (host, hooks) in &self.surge {
            let show = |p: &Option<PathBuf>| p.as_ref().map_or("-".to_string(), |p| p.display().to_string());
            lines.push(format!("  {host} surge hooks: add {}, remove {}", show(&hooks.add), show(&hooks.remove)));
        }
        lines
    }
}

fn bool_value(value: &Value) -> Result<bool> {
    crate::tasks::engine::parse_bool(value).ok_or_else(|| {
        Error::input(format!("upgrade_blue_green_delete_nodes `{value}` is not a boolean")).hint("write true or false")
    })
}

fn surge_hook(host: &str, vars: &Vars, name: &str, base_dir: &std::path::Path) -> Result<Option<PathBuf>> {
    let Some(var) = vars.get(name) else { return Ok(None) };
    let path = match crate::settings::hook_path(&var.value, base_dir) {
        Ok(None) => return Ok(None),
        Ok(Some(path)) => path,
        Err(_) => {
            return Err(crate::settings::located(
                Error::input(format!("{name} (for {host}) is not a path to a task file"))
                    .hint("set it to the path of an Ansible task list, e.g. hooks/surge_add.yml"),
                name,
                &var.origin,
            ));
        }
    };
    if !path.is_file() {
        return Err(crate::settings::located(
            Error::input(format!("{name} (for {host}) names {}, which does not exist", path.display()))
                .hint(format!("create the task file, or fix the path (relative to {})", base_dir.display())),
            name,
            &var.origin,
        ));
    }
    Ok(Some(path))
}

/// Every surge hook must be a valid task list before anything is touched.
pub fn check_surge_hooks(plan: &crate::plan::Plan) -> Result<()> {
    let bg = &plan.strategy.blue_green;
    let mut seen = BTreeSet::new();
    for (path, variable) in bg.surge.values().flat_map(|s| [(&s.add, ADD_HOOK), (&s.remove, REMOVE_HOOK)]) {
        let Some(path) = path.as_ref().filter(|p| seen.insert((*p).clone())) else { continue };
        if let Some(first) = crate::tasks::check_task_file(path).into_iter().next() {
            return Err(
                first.hint(format!("fix the hook file named by {variable}; `upgrade check` lists every problem"))
            );
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------------------------
// preflight and verify

/// Preflight: every green node is a node of the cluster, Ready, at the target.
pub fn check_green(run: &UpgradeRun, cluster: &HashMap<String, ClusterNode>) -> Result<()> {
    let bg = &run.plan.strategy.blue_green;
    if !bg.enabled() || !run.plan.has_phase(Phase::Nodes) {
        return Ok(());
    }
    let mut problems = Vec::new();
    for host in &bg.green {
        let node = run.node_name(host);
        match cluster.get(&node) {
            None => problems.push(format!("{node} is not a node of the cluster")),
            Some(n) if !n.ready => problems.push(format!("{node} is not Ready")),
            // What the host has installed when the flavour decides "at the target" from it (openshift: every
            // 3.11.z node reports one kubelet version), else the kubelet's.
            Some(n) => {
                let running = run.version_before(host).unwrap_or_else(|| n.kubelet_version.clone());
                if !run.target.is_reported_by(&running) {
                    problems.push(format!("{node} runs {running}, not {}", run.target))
                }
            }
        }
    }
    if problems.is_empty() {
        return Ok(());
    }
    Err(Error::hosts_failed(format!("the green nodes are not ready to take the load: {}", problems.join("; "))).hint(
        format!(
            "join the new nodes of group `{}` to the cluster at {} and wait until they are Ready; nothing was changed",
            bg.green_group, run.target
        ),
    ))
}

/// The hosts verify checks: with blue-green, the green nodes instead of the evacuated blue ones.
pub fn to_verify(run: &UpgradeRun, upgraded: Vec<String>) -> Vec<String> {
    let bg = &run.plan.strategy.blue_green;
    if !bg.enabled() {
        return upgraded;
    }
    let blue: BTreeSet<String> =
        run.plan.phase(Phase::Nodes).map(|p| p.batches.concat()).unwrap_or_default().into_iter().collect();
    let mut hosts: Vec<String> = upgraded.into_iter().filter(|h| !blue.contains(h)).collect();
    if run.plan.has_phase(Phase::Nodes) {
        hosts.extend(bg.green.iter().cloned());
    }
    hosts
}

// ---------------------------------------------------------------------------------------------------------------
// the nodes phase, blue-green

fn label_pair(run: &UpgradeRun, color: &str) -> Value {
    Value::String(format!("{}={color}", run.plan.strategy.blue_green.label))
}

/// Runs a built-in step on each host in turn; the first failure is returned with its host.
async fn each(
    run: &UpgradeRun,
    hosts: &[String],
    step: Step,
    file: &str,
    more: &[(&str, Value)],
) -> std::result::Result<(), (String, StepFailure)> {
    for host in hosts {
        run.run_step(Phase::Nodes, host, step, &run.playbook(file), more, None).await.map_err(|f| (host.clone(), f))?;
    }
    Ok(())
}

/// Labels blue and green, makes green schedulable and blue unschedulable, then evacuates the blue nodes batch by
/// batch. Returns the reports of the blue nodes and, when the phase stopped early, why.
pub async fn run(
    run: &Arc<UpgradeRun>,
    batches: &[Vec<String>],
    stop: &StopSignal,
) -> (Vec<HostReport>, Option<String>) {
    let bg = &run.plan.strategy.blue_green;
    // Blue nodes an earlier run evacuated (for this target) are not evacuated again.
    let done: BTreeSet<String> = batches.iter().flatten().filter(|h| evacuated_earlier(run, h)).cloned().collect();
    let blue: Vec<String> = batches.iter().flatten().filter(|h| !done.contains(*h)).cloned().collect();
    let mut reports: Vec<HostReport> = done
        .iter()
        .map(|h| {
            run.host_completed(
                Phase::Nodes,
                h,
                HostOutcome::Skipped { reason: "evacuated by an earlier run (blue)".into() },
                Instant::now(),
            )
        })
        .collect();
    if blue.is_empty() {
        return (reports, None);
    }
    let blue_label = [("upgrade_node_label", label_pair(run, "blue"))];
    let green_label = [("upgrade_node_label", label_pair(run, "green"))];
    let schedulable = [("upgrade_node_was_cordoned", Value::Bool(false))];
    let switched = async {
        each(run, &blue, Step::Label, "label.yml", &blue_label).await?;
        each(run, &bg.green, Step::Label, "label.yml", &green_label).await?;
        each(run, &bg.green, Step::Uncordon, "uncordon.yml", &schedulable).await?;
        each(run, &blue, Step::Cordon, "cordon.yml", &[]).await
    }
    .await;
    if let Err((host, failure)) = switched {
        let why = format!("blue-green switch-over failed on {host} at {}: {}", failure.step, failure.reason);
        reports.extend(blue.iter().map(|h| {
            run.host_completed(Phase::Nodes, h, HostOutcome::NotStarted { reason: why.clone() }, Instant::now())
        }));
        return (reports, Some(format!("{why}; run `upgrade --rollback-blue-green` to switch back")));
    }
    run.notice(
        None,
        format!(
            "blue-green: {} green node(s) schedulable, {} blue node(s) unschedulable; evacuating the blue nodes",
            bg.green.len(),
            blue.len()
        ),
    );

    let batches: Vec<Vec<String>> = batches
        .iter()
        .map(|b| b.iter().filter(|h| !done.contains(*h)).cloned().collect::<Vec<_>>())
        .filter(|b| !b.is_empty())
        .collect();
    let max_fail = run.plan.settings.max_fail_percentage.value;
    let (evacuated, stopped) =
        run_in_batches(run, &batches, stop, |run, host| async move { evacuate(&run, &host).await }).await;
    reports.extend(evacuated);
    let stopped = stopped.map(|stop| match stop {
        BatchStop::Threshold { batch, failed, size } => format!(
            "batch {batch}: {failed} of {size} blue nodes failed, more than max-fail-percentage {max_fail} allows; \
             the later batches were not evacuated (`upgrade --rollback-blue-green` switches back)"
        ),
        BatchStop::Interrupted => format!("{}; blue nodes not yet started were left alone", run.stop_reason()),
    });
    (reports, stopped)
}

/// One blue node: surge-add hook, pre-drain hook, drain, pre hook, delete (when asked), surge-remove hook, post hook.
/// A failure leaves the node unschedulable (it is blue: the green nodes carry the load; rollback makes it schedulable).
async fn evacuate(run: &UpgradeRun, host: &str) -> HostReport {
    let started = Instant::now();
    let node = run.node_name(host);
    // Recorded so that a rollback leaves an operator's own cordon alone.
    let was_cordoned =
        run.cluster_before.lock().ok().and_then(|c| c.get(&node).map(|n| n.unschedulable)).unwrap_or(false);
    run.host_started(Phase::Nodes, host, was_cordoned);
    let outcome = match evacuate_steps(run, host, &node).await {
        Ok(deleted) => {
            let what = if deleted { "evacuated and its node object deleted" } else { "evacuated, left unschedulable" };
            run.notice(Some(host), format!("blue node {node} {what}"));
            HostOutcome::Upgraded { left_cordoned: false }
        }
        Err(mut f) => {
            let limit = run.plan.settings.drain_timeout.value;
            if f.step == Step::Drain && f.reason.contains("timed out") && limit.seconds() > 0 {
                f.reason = format!("drain timed out after {limit}");
            }
            HostOutcome::Failed { step: f.step, reason: f.reason, unreachable: f.unreachable, left_cordoned: true }
        }
    };
    run.host_completed(Phase::Nodes, host, outcome, started)
}

async fn evacuate_steps(run: &UpgradeRun, host: &str, node: &str) -> std::result::Result<bool, StepFailure> {
    let bg = &run.plan.strategy.blue_green;
    let surge = bg.surge.get(host).cloned().unwrap_or_default();
    if let Some(file) = &surge.add {
        surge_hook_step(run, host, node, Step::SurgeAddHook, file).await?;
    }
    hook(run, Phase::Nodes, host, HookPoint::NodePreDrain, Step::PreDrainHook).await?;
    drain(run, Phase::Nodes, host).await?;
    hook(run, Phase::Nodes, host, HookPoint::NodePre, Step::PreHook).await?;
    if bg.delete_nodes {
        safe_point(run, Step::DeleteNode)?;
        run.run_step(Phase::Nodes, host, Step::DeleteNode, &run.playbook("delete_node.yml"), &[], None).await?;
    }
    if let Some(file) = &surge.remove {
        surge_hook_step(run, host, node, Step::SurgeRemoveHook, file).await?;
    }
    hook(run, Phase::Nodes, host, HookPoint::NodePost, Step::PostHook).await?;
    Ok(bg.delete_nodes)
}

/// A surge hook runs on the controller (`localhost`), told which node it replaces.
async fn surge_hook_step(
    run: &UpgradeRun,
    host: &str,
    node: &str,
    step: Step,
    file: &std::path::Path,
) -> std::result::Result<(), StepFailure> {
    safe_point(run, step)?;
    let more = [
        ("upgrade_replaced_host", Value::String(host.to_string())),
        ("upgrade_replaced_node", Value::String(node.to_string())),
    ];
    run.run_step(Phase::Nodes, "localhost", step, file, &more, None).await.map(|_| ())
}

/// The journal says an earlier run evacuated this blue node for the same target.
fn evacuated_earlier(run: &UpgradeRun, host: &str) -> bool {
    let target = run.target.to_string();
    run.history.host(Phase::Nodes.name(), host).is_some_and(|h| {
        h.finished == Some(crate::journal::HostRecord::Upgraded) && !h.in_flight && h.target.as_deref() == Some(&target)
    })
}

// ---------------------------------------------------------------------------------------------------------------
// rollback

/// `upgrade --rollback-blue-green`: blue nodes schedulable again, green nodes unschedulable. Deleted blue nodes
/// cannot come back this way (they must rejoin the cluster) and are said to be gone.
pub async fn rollback(run: &UpgradeRun) -> (Summary, Option<Error>) {
    let bg = &run.plan.strategy.blue_green;
    let mut summary = Summary::empty(run.target.to_string());
    if !bg.enabled() {
        let e = Error::input("--rollback-blue-green: the inventory does not use the blue-green strategy")
            .in_file(&run.inventory.path)
            .hint("set upgrade_nodes_strategy: blue-green (and the green group) as for the run being rolled back");
        summary.error_code = Some(e.exit_code());
        return (summary, Some(e));
    }
    run.event(Event::RunStarted {
        run: run.run_id(),
        target: run.target.to_string(),
        phases: vec!["rollback-blue-green".into()],
        resumed: false,
    });
    let cluster: HashMap<String, ClusterNode> = match crate::phase::preflight::read_cluster(run, Phase::Preflight).await
    {
        Ok(nodes) => nodes.into_iter().map(|n| (n.name.clone(), n)).collect(),
        Err(e) => {
            summary.stopped = Some(e.message.clone());
            summary.error_code = Some(e.exit_code());
            return (summary, Some(e));
        }
    };
    let blue: Vec<String> = run.plan.phase(Phase::Nodes).map(|p| p.batches.concat()).unwrap_or_default();
    let moves = blue
        .iter()
        .map(|h| (h, Step::Uncordon, "uncordon.yml"))
        .chain(bg.green.iter().map(|h| (h, Step::Cordon, "cordon.yml")));
    let schedulable = [("upgrade_node_was_cordoned", Value::Bool(false))];
    for (host, step, file) in moves {
        let started = Instant::now();
        let node = run.node_name(host);
        let cordoned_before =
            step == Step::Uncordon && run.history.host(Phase::Nodes.name(), host).is_some_and(|h| h.was_cordoned);
        let outcome = if !cluster.contains_key(&node) {
            HostOutcome::Skipped { reason: format!("node {node} is not in the cluster (deleted?): it must rejoin") }
        } else if cordoned_before {
            HostOutcome::Skipped { reason: format!("node {node} was cordoned before the blue-green run: left so") }
        } else {
            let more: &[(&str, Value)] = if step == Step::Uncordon { &schedulable } else { &[] };
            match run.run_step(Phase::Nodes, host, step, &run.playbook(file), more, None).await {
                Ok(_) => HostOutcome::Upgraded { left_cordoned: false },
                Err(f) => {
                    HostOutcome::Failed { step, reason: f.reason, unreachable: f.unreachable, left_cordoned: false }
                }
            }
        };
        let report = HostReport {
            phase: "rollback-blue-green".into(),
            host: host.clone(),
            node: (node != *host).then_some(node),
            outcome,
            duration: started.elapsed(),
        };
        run.event(Event::HostCompleted { report: report.clone() });
        summary.hosts.push(report);
    }
    if let Ok(after) = crate::phase::verify::final_state(run).await {
        summary.left_cordoned = crate::phase::verify::left_cordoned(run, &after);
    }
    run.event(Event::RunFinished { summary: summary.clone() });
    (summary, None)
}
