//! `upgrade versions --inventory X [--from VERSION]`: the targets the update graph offers from the running version
//! (read from the cluster on the first master, or given), and the path of hops to each. Changes nothing.

use std::path::PathBuf;
use std::sync::Arc;

use serde_json::{Value, json};

use crate::error::{Error, Result};
use crate::events::{Event, EventSink};
use crate::inventory::{Inventory, Vars};
use crate::session::Remote;
use crate::settings::TargetVersion;
use crate::strategy::{Strategy, UpdateGraph};
use crate::tasks::engine::EngineOptions;

/// The targets the update graph offers from a running version, and the hops to each.
pub(crate) struct OfferedVersions {
    graph: PathBuf,
    from: TargetVersion,
    /// Where the running version came from: `--from`, or the cluster.
    read_from: &'static str,
    targets: Vec<(TargetVersion, Vec<TargetVersion>)>,
}

/// The versions offered from `from` (`--from`), or from the version the masters run, read on the first master.
pub(crate) fn versions(
    inventory: &Inventory,
    extra: &Vars,
    from: Option<&str>,
    remote: Remote,
) -> Result<OfferedVersions> {
    let all: Vec<(String, Vars)> = inventory.hosts.keys().map(|h| (h.clone(), inventory.host_vars(h, extra))).collect();
    let refs: Vec<(&str, &Vars)> = all.iter().map(|(h, v)| (h.as_str(), v)).collect();
    let strategy = Strategy::resolve(&[], &refs, extra, inventory)?;
    let graph = strategy.update_graph.map(|g| g.value).ok_or_else(|| {
        Error::input("the inventory sets no update graph")
            .in_file(&inventory.path)
            .hint("set upgrade_update_graph to the update service's graph (a JSON file), e.g. in [all:vars]")
    })?;
    let (from, read_from) = match from {
        Some(text) => (
            TargetVersion::parse(text).map_err(|e| Error { message: format!("--from: {}", e.message), ..e })?,
            "--from",
        ),
        None => read_running_version(inventory, extra, remote)?,
    };
    let targets = offered(&graph, &from)?;
    Ok(OfferedVersions { graph: graph.path.clone(), from, read_from, targets })
}

impl OfferedVersions {
    /// One JSON document (`--output json`).
    pub(crate) fn json(&self) -> String {
        let list: Vec<Value> = self
            .targets
            .iter()
            .map(|(v, path)| json!({"version": v.to_string(), "path": path.iter().map(ToString::to_string).collect::<Vec<_>>()}))
            .collect();
        let doc = json!({"graph": self.graph.display().to_string(), "from": self.from.to_string(), "targets": list});
        format!("{}\n", serde_json::to_string_pretty(&doc).unwrap_or_default())
    }

    /// For people.
    pub(crate) fn text(&self) -> String {
        let (from, read_from) = (&self.from, self.read_from);
        let mut text = format!("Update graph: {}\nRunning version: {from} ({read_from})\n", self.graph.display());
        if self.targets.is_empty() {
            text.push_str("No newer version is offered from it.\n");
        } else {
            text.push_str("Targets offered:\n");
            for (version, path) in &self.targets {
                let hops: Vec<String> = path.iter().map(ToString::to_string).collect();
                let count = if path.len() == 1 { "1 hop".to_string() } else { format!("{} hops", path.len()) };
                text.push_str(&format!("  {:<12} {} ({count})\n", version.to_string(), hops.join(" -> ")));
            }
        }
        text
    }
}

fn offered(graph: &UpdateGraph, from: &TargetVersion) -> Result<Vec<(TargetVersion, Vec<TargetVersion>)>> {
    if !graph.contains(from) {
        let known: Vec<String> = graph.versions().iter().map(ToString::to_string).collect();
        return Err(Error::input(format!("{from} is not a version of the update graph"))
            .in_file(&graph.path)
            .hint(format!("the graph knows: {}", known.join(", "))));
    }
    Ok(graph.targets(from))
}

/// Events of the cluster read are not shown: the command prints only its answer (errors say what failed).
struct Quiet;

impl EventSink for Quiet {
    fn event(&self, _: &Event) {}
}

/// The oldest version the masters run, read as a run reads it (the flavour's own task files): what a master has
/// installed where that decides "at the target" (the openshift flavour, or `upgrade_host_version_command`: an update
/// graph names OpenShift releases, never the v1.11.0+d4cacc0 every 3.11.z kubelet reports), else the kubelet version
/// the cluster reports (`cluster_state.yml` on the first master).
fn read_running_version(inventory: &Inventory, extra: &Vars, remote: Remote) -> Result<(TargetVersion, &'static str)> {
    let groups = crate::cluster_groups::ClusterGroups::resolve(inventory, extra)?;
    let masters = inventory.group_hosts(&groups.masters.name).filter(|m| !m.is_empty()).ok_or_else(|| {
        Error::input(format!("the inventory has no `{}` group to read the cluster from", groups.masters.name))
            .in_file(&inventory.path)
            .hint("list the control-plane hosts in `masters`, or give the running version with --from")
    })?;
    let scratch = tempfile::tempdir().map_err(|e| Error::internal(format!("cannot create a temp directory: {e}")))?;
    let playbooks = crate::playbooks::materialize(scratch.path())?;
    // The flavour's own cluster read (openshift: `oc`), as the upgrade itself would run it.
    let host_vars: Vec<(String, Vars)> =
        inventory.hosts.keys().map(|h| (h.clone(), inventory.host_vars(h, extra))).collect();
    let all_vars: Vec<(&str, &Vars)> = host_vars.iter().map(|(h, v)| (h.as_str(), v)).collect();
    let flavor = crate::flavor::choose(inventory, &all_vars)?.flavor;
    let Remote { runtime, connect, .. } = remote;
    let run_file =
        |name: &str, hosts: &[String], extra: &Vars| -> Result<Vec<(String, crate::tasks::engine::HostOutcome)>> {
            let file = playbooks.join(crate::playbooks::for_flavor(flavor, name));
            let tasks = crate::tasks::model::load_task_file(&file)?;
            // The node list is parsed whole: read whole too (see EngineOptions::whole_stdout).
            let options = EngineOptions { assume_yes: true, whole_stdout: true, ..EngineOptions::default() };
            Ok(runtime.block_on(crate::tasks::run_tasks(
                inventory,
                extra,
                hosts,
                &tasks,
                hosts.len().max(1),
                options,
                connect.clone(),
                Arc::new(Quiet),
            )))
        };
    let stdout_of = |facts: &crate::tasks::host_vars::HostFacts, register: &str| {
        facts.get(register).and_then(|r| r.get("stdout")).and_then(Value::as_str).unwrap_or_default().to_string()
    };

    let probes = |m: &String| {
        flavor.probes_installed_version_by_default()
            || inventory
                .host_vars(m, extra)
                .get("upgrade_host_version_command")
                .and_then(|v| v.value.as_str().map(|c| !c.trim().is_empty()))
                .unwrap_or(false)
    };
    if masters.iter().all(probes) {
        let mut versions = Vec::new();
        let mut outcomes = Vec::new();
        for master in &masters {
            // The executor gives every step its host's node name; the command may name it (`--node {{ node_name }}`)
            // before defaults.yml derives it.
            let own = inventory.host_vars(master, extra);
            let node = crate::phase::step_runner::NODE_NAME_VARIABLES
                .iter()
                .find_map(|name| own.get(*name).and_then(|v| v.value.as_str()).map(str::trim).filter(|s| !s.is_empty()))
                .unwrap_or(master)
                .to_string();
            let mut with_node = extra.clone();
            with_node.insert(
                "node_name".to_string(),
                crate::inventory::Var { value: Value::String(node), origin: crate::inventory::Origin::Default },
            );
            outcomes.extend(run_file("host_version.yml", std::slice::from_ref(master), &with_node)?);
        }
        for (host, outcome) in outcomes {
            let version = stdout_of(&outcome.facts, "upgrade_host_version");
            match TargetVersion::parse(version.trim()) {
                Ok(v) if !outcome.failed && !outcome.unreachable => versions.push(v),
                _ => {
                    let why = if outcome.unreachable {
                        "unreachable".to_string()
                    } else if outcome.failed {
                        "upgrade_host_version_command failed".to_string()
                    } else {
                        format!("upgrade_host_version_command printed `{}`, not a version", version.trim())
                    };
                    return Err(Error::hosts_failed(format!("cannot read what {host} has installed: {why}")).hint(
                        "check upgrade_host_version_command and the connection to the masters, or give the running \
                         version with --from",
                    ));
                }
            }
        }
        let oldest = versions.into_iter().min().ok_or_else(|| Error::internal("no master was read"))?;
        return Ok((oldest, "the masters, as installed"));
    }

    let first = masters[0].clone();
    let outcomes = run_file("cluster_state.yml", std::slice::from_ref(&first), extra)?;
    let cannot = |why: String| {
        Error::hosts_failed(format!("cannot read the cluster's nodes on {first}: {why}")).hint(
            "check upgrade_kubectl and the connection to the first master, or give the running version with --from",
        )
    };
    let facts = match outcomes.into_iter().next() {
        Some((_, o)) if !o.failed && !o.unreachable => o.facts,
        Some((_, o)) if o.unreachable => return Err(cannot("unreachable".into())),
        _ => return Err(cannot("`get nodes -o json` failed".into())),
    };
    let stdout = stdout_of(&facts, "upgrade_cluster_nodes");
    let nodes = crate::cluster::parse_node_list(&stdout).map_err(cannot)?;
    let names: Vec<String> = masters
        .iter()
        .map(|m| {
            inventory
                .host_vars(m, extra)
                .get("node_name")
                .and_then(|v| v.value.as_str().map(str::to_string))
                .unwrap_or_else(|| m.clone())
        })
        .collect();
    let oldest = nodes
        .iter()
        .filter(|n| names.contains(&n.name))
        .filter_map(|n| TargetVersion::parse(&n.kubelet_version).ok())
        .min()
        .ok_or_else(|| cannot("no master is a node of the cluster".into()))?;
    Ok((oldest, "the masters, read from the cluster"))
}
