//! The plan: a pure function from inventory and settings to phases and batches. Nothing here connects; `--plan`
//! prints it and the executor only carries it out.

pub mod artifacts;
pub(crate) mod check_apis;
pub mod live;
pub mod render;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use indexmap::IndexMap;
use serde_json::Value;

use crate::cluster_groups::ClusterGroups;
use crate::error::{Error, Result};
use crate::flavor::{self, Flavor, FlavorChoice};
use crate::inventory::{self, Inventory, Vars};
use crate::settings::{self, HookPoint, HostHooks, SettingFlags, Settings};

mod batches;
pub mod expected;

pub use batches::{
    NodeLabels, NodeSelection, batch_hosts, batch_nodes, select_and_batch, serial_batches, threshold_exceeded,
};
pub use render::{plan_json, plan_text, plan_text_brief};

pub use crate::vocabulary::Phase;

/// The phases `--phase` asks for, in run order, preflight always included. Empty means all.
pub fn select_phases(names: &[String]) -> Result<Vec<Phase>> {
    Phase::select(names).map_err(|name| {
        let valid: Vec<&str> = Phase::ALL.iter().map(|p| p.name()).collect();
        Error::input(format!("--phase: unknown phase `{name}`"))
            .hint(format!("use one or more of {} (comma-separated)", valid.join(", ")))
    })
}

/// What a plan is asked for (built from the command line by `commands`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PlanRequest {
    /// `--phase` as given (names, comma-separated or repeated); empty: every phase.
    pub phases: Vec<String>,
    /// `--limit`: an Ansible host pattern the nodes must match.
    pub limit: Option<String>,
    /// The run-wide settings given as flags; they win over the inventory.
    pub flags: SettingFlags,
}

/// One phase and the hosts it acts on, batch by batch. Preflight and verify have no batches: they act on the
/// plan's hosts as a whole (preflight) or on the cluster (verify).
#[derive(Debug, Clone, PartialEq)]
pub struct PhasePlan {
    pub phase: Phase,
    pub batches: Vec<Vec<String>>,
}

/// Where a node's labels came from in the offline evaluation.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct OfflineLabels {
    pub labels: BTreeMap<String, String>,
}

#[derive(Debug, Clone)]
pub struct Plan {
    /// The selected phases, in run order.
    pub phases: Vec<PhasePlan>,
    pub settings: Settings,
    /// Every host the run touches (preflight reaches all of them): masters, then etcd hosts, then nodes.
    pub hosts: Vec<String>,
    /// The masters, in inventory order (the first one drives the cluster API).
    pub masters: Vec<String>,
    /// The hook files of each host that has any, by host.
    pub hooks: IndexMap<String, HostHooks>,
    /// The cluster-level hooks (`upgrade_cluster_{pre,mid,post}_hook`), read from the first master's variables, where
    /// they run once.
    pub cluster_hooks: HostHooks,
    /// The labels each candidate node carries offline (`node_labels`, `openshift_node_group_name`), in order.
    pub node_labels: IndexMap<String, BTreeMap<String, String>>,
    /// The nodes (minus masters, after `--limit`) the label selector left out.
    pub nodes_not_selected: Vec<String>,
    /// The `--limit` pattern that restricted the nodes, if any.
    pub limit: Option<String>,
    /// The label selector is left to preflight, which evaluates it against the labels the cluster reports; the nodes
    /// phase then holds every candidate node.
    pub labels_from_cluster: bool,
    /// The hosts whose etcd is backed up (group `etcd`, else the first master), whether or not the phase is selected:
    /// a run that changes the control plane without a verified backup of this target takes one first.
    pub etcd_hosts: Vec<String>,
    /// The kubeadm steps' per-host settings (package manager, repository, plan check, timeouts) over the hosts to
    /// upgrade, each value with its origin and hosts.
    pub host_settings: Vec<crate::host_settings::HostSettingValue>,
    /// Which built-in steps upgrade the cluster, and why.
    pub flavor: FlavorChoice,
    /// The openshift flavour's package prefix (`origin`, `atomic-openshift`) and the packages it upgrades.
    pub openshift_packages: Option<flavor::OpenShiftPackages>,
    /// openshift-ansible target aliases passed over because they name only a minor release (`openshift_release=3.11`).
    pub target_passed_over: Vec<String>,
    /// The certificate expiry check of preflight.
    pub certificate_expiry: settings::CertificateExpiry,
    /// The update graph (and the other strategies): how the nodes are upgraded and along which versions.
    pub strategy: crate::strategy::Strategy,
    /// The inventory groups of the masters, the nodes and the etcd hosts, and why.
    pub groups: ClusterGroups,
}

impl Plan {
    pub fn phase(&self, phase: Phase) -> Option<&PhasePlan> {
        self.phases.iter().find(|p| p.phase == phase)
    }

    pub fn has_phase(&self, phase: Phase) -> bool {
        self.phase(phase).is_some()
    }

    /// Builds the plan from the inventory, the extra vars and the command line. Pure apart from checking that hook
    /// files exist.
    pub fn build(inventory: &Inventory, extra: &Vars, request: &PlanRequest) -> Result<Plan> {
        Plan::build_with(inventory, extra, request, false)
    }

    /// The plan of a real run: the label selector is not applied offline; preflight applies it to the labels the
    /// cluster reports, then re-batches the nodes it keeps.
    pub fn build_for_run(inventory: &Inventory, extra: &Vars, request: &PlanRequest) -> Result<Plan> {
        Plan::build_with(inventory, extra, request, true)
    }

    /// The plan in one pass down, as the README tells it: the phases asked for; the groups (masters, etcd, the
    /// nodes `--limit` keeps); each host's variables once; the settings and the flavour, resolved up front with
    /// their origins; the nodes selected, ordered and cut into batches; the hooks; the host settings; the phases.
    fn build_with(
        inventory: &Inventory,
        extra: &Vars,
        request: &PlanRequest,
        labels_from_cluster: bool,
    ) -> Result<Plan> {
        let selected = select_phases(&request.phases)?;
        let wants = |p: Phase| selected.contains(&p);
        let limit = request.limit.clone();
        let Groups { masters, etcd, candidates, cluster: groups } =
            groups(inventory, extra, limit.as_deref(), wants(Phase::Nodes))?;
        let host_vars = vars_once(inventory, extra, masters.iter().chain(&etcd).chain(&candidates))?;
        let vars_of = |hosts: &[String]| -> Vec<(&str, &Vars)> {
            hosts.iter().filter_map(|h| host_vars.get_key_value(h).map(|(k, v)| (k.as_str(), &**v))).collect()
        };
        let node_vars = vars_of(&candidates);

        let mut hosts: Vec<String> = masters.clone();
        let mut seen: HashSet<String> = hosts.iter().cloned().collect();
        if wants(Phase::EtcdBackup) {
            hosts.extend(etcd.iter().filter(|h| seen.insert((*h).clone())).cloned());
        }

        // The label filter needs the label setting, which is read over the candidate nodes.
        let provisional_all: Vec<String> =
            hosts.iter().chain(if wants(Phase::Nodes) { candidates.as_slice() } else { &[] }).cloned().collect();
        let provisional_all = dedup(provisional_all);
        let all_vars = vars_of(&provisional_all);
        let resolved = resolve_settings(request, inventory, extra, &node_vars, &all_vars, &masters, &candidates)?;
        let ResolvedSettings { settings, flavor, target_passed_over, openshift_packages, certificate_expiry } =
            resolved;
        if flavor.flavor == Flavor::Custom {
            let needs =
                |hosts: &[String], variable: &str| custom_command_set(inventory, &flavor, &host_vars, hosts, variable);
            if wants(Phase::ControlPlane) {
                needs(&masters, "upgrade_master_upgrade_command")?;
            }
            if wants(Phase::Nodes) {
                needs(&candidates, "upgrade_node_upgrade_command")?;
            }
        }
        let strategy = crate::strategy::Strategy::resolve(&node_vars, &all_vars, extra, inventory)?;

        let mut node_labels = IndexMap::new();
        let mut groups_cache = NodeGroupsCache::default();
        for &(host, vars) in &node_vars {
            node_labels.insert(host.to_string(), offline_labels(host, vars, &mut groups_cache)?);
        }
        // A run's plan leaves the selector to preflight, which reads the labels the cluster reports.
        let labels = if labels_from_cluster { NodeLabels::NotYet } else { NodeLabels::Offline };
        let selection = select_and_batch(
            &candidates,
            labels,
            wants(Phase::Nodes),
            &settings,
            &node_labels,
            inventory,
            flavor.flavor == Flavor::Openshift,
            |kept, _| Ok(strategy.order_offline(strategy.blue_green.blue(kept), &node_labels)),
        )?;
        let NodeSelection { nodes, left_out: nodes_not_selected, batches: node_batches } = selection;
        if wants(Phase::Nodes) {
            strategy.blue_green.check(&nodes, inventory)?;
            hosts.extend(nodes.iter().filter(|h| seen.insert((*h).clone())).cloned());
        }

        let (hooks, cluster_hooks) = hooks_of(inventory, &host_vars, &masters, &nodes, &wants)?;
        let upgraded: Vec<String> = dedup(
            masters
                .iter()
                .filter(|_| wants(Phase::ControlPlane) || !wants(Phase::Nodes))
                .chain(if wants(Phase::Nodes) { nodes.as_slice() } else { &[] })
                .cloned()
                .collect(),
        );
        let host_settings =
            crate::host_settings::resolve(flavor.flavor, settings.target_version.value.as_ref(), &vars_of(&upgraded))?;
        check_cluster_lock_ttl(masters.first().and_then(|m| host_vars.get(m).map(|v| &**v)))?;
        settings::check_validation_settings(masters.first().and_then(|m| host_vars.get(m).map(|v| &**v)))?;
        settings::check_maintenance_settings(masters.first().and_then(|m| host_vars.get(m).map(|v| &**v)))?;
        settings::check_pause_timeout(masters.first().and_then(|m| host_vars.get(m).map(|v| &**v)))?;
        let phases = phase_plans(&selected, &etcd, &masters, &node_batches);

        Ok(Plan {
            phases,
            settings,
            hosts,
            masters,
            hooks,
            cluster_hooks,
            node_labels,
            nodes_not_selected,
            limit,
            labels_from_cluster,
            etcd_hosts: etcd,
            host_settings,
            flavor,
            openshift_packages,
            target_passed_over,
            certificate_expiry,
            strategy,
            groups,
        })
    }
}

/// The groups a plan is made of: the masters, the etcd hosts (the first master when there is no etcd group) and
/// the nodes `--limit` keeps (the nodes group without the masters), each group named as `ClusterGroups` resolved it.
struct Groups {
    masters: Vec<String>,
    etcd: Vec<String>,
    candidates: Vec<String>,
    cluster: ClusterGroups,
}

fn groups(inventory: &Inventory, extra: &Vars, limit: Option<&str>, wants_nodes: bool) -> Result<Groups> {
    if inventory.hosts.is_empty() {
        // Say why there are no masters: an empty file, or a directory without inventory files.
        let (what, hint) = if inventory.path.is_dir() {
            (
                "the inventory directory holds no inventory with hosts",
                "put an INI or YAML inventory file in it, or pass the file itself to --inventory",
            )
        } else {
            (
                "the inventory has no hosts",
                "list the control-plane hosts in a `masters` group and the workers in `nodes` ([masters] in INI, \
                     all.children.masters in YAML)",
            )
        };
        return Err(Error::input(what).in_file(&inventory.path).hint(hint));
    }
    let groups = ClusterGroups::resolve(inventory, extra)?;
    let masters = match inventory.group_hosts(&groups.masters.name) {
        Some(hosts) if !hosts.is_empty() => hosts,
        found => {
            let name = &groups.masters.name;
            let what = if found.is_some() { format!("an empty `{name}` group") } else { format!("no `{name}` group") };
            return Err(Error::input(format!("the inventory has {what}")).in_file(&inventory.path).hint(
                "list the control-plane hosts in a `masters` group ([masters] in INI, all.children.masters in \
                 YAML), or name their group with upgrade_masters_group (kubespray's kube_control_plane is found \
                 without it)",
            ));
        }
    };
    let etcd = match inventory.group_hosts(&groups.etcd.name) {
        Some(hosts) if !hosts.is_empty() => hosts,
        _ => masters.iter().take(1).cloned().collect(),
    };
    let master_set: HashSet<&str> = masters.iter().map(String::as_str).collect();
    let all_nodes: Vec<String> = inventory
        .group_hosts(&groups.nodes.name)
        .unwrap_or_default()
        .into_iter()
        .filter(|h| !master_set.contains(h.as_str()))
        .collect();
    let candidates = match limit {
        Some(pattern) => {
            let allowed: HashSet<String> = inventory.select(pattern)?.into_iter().collect();
            let kept: Vec<String> = all_nodes.iter().filter(|h| allowed.contains(*h)).cloned().collect();
            if kept.is_empty() && !all_nodes.is_empty() && wants_nodes {
                return Err(Error::input(format!("--limit `{pattern}` selects none of the nodes to upgrade")).hint(
                    "name hosts of the `nodes` group that are not masters, or leave out the nodes phase \
                               with --phase",
                ));
            }
            kept
        }
        None => all_nodes,
    };
    Ok(Groups { masters, etcd, candidates, cluster: groups })
}

/// Each host's variables once: the settings, the labels and the hooks all read them. Checked for the run's own
/// variables a host may not set. The hosts of one range (`node[0001:2400]`) have the same groups and the same
/// variables of their own, so one merge serves them all: a 5,000-host inventory merges a handful, not 5,000.
fn vars_once<'a>(
    inventory: &Inventory,
    extra: &Vars,
    hosts: impl Iterator<Item = &'a String>,
) -> Result<IndexMap<String, Arc<Vars>>> {
    let mut host_vars: IndexMap<String, Arc<Vars>> = IndexMap::new();
    // The last merge made for each set of groups, with the host it was made for.
    let mut last_merge: HashMap<&[String], (&crate::inventory::Host, Arc<Vars>)> = HashMap::new();
    let same_layer = |a: &Vars, b: &Vars| a.len() == b.len() && a.iter().eq(b.iter());
    for host in hosts {
        if host_vars.contains_key(host) {
            continue;
        }
        let Some(entry) = inventory.hosts.get(host) else {
            host_vars.insert(host.clone(), Arc::new(inventory.host_vars(host, extra)));
            continue;
        };
        let vars = match last_merge.get(entry.groups.as_slice()) {
            Some((previous, vars))
                if same_layer(&previous.vars, &entry.vars) && same_layer(&previous.file_vars, &entry.file_vars) =>
            {
                vars.clone()
            }
            _ => {
                let vars = Arc::new(inventory.host_vars(host, extra));
                last_merge.insert(entry.groups.as_slice(), (entry, vars.clone()));
                vars
            }
        };
        host_vars.insert(host.clone(), vars);
    }
    for (host, vars) in &host_vars {
        crate::builtin_vars::check_host(host, vars)?;
    }
    Ok(host_vars)
}

/// The settings and the flavour, resolved once, up front, with their origins: the plan is built from these.
struct ResolvedSettings {
    settings: Settings,
    flavor: FlavorChoice,
    target_passed_over: Vec<String>,
    openshift_packages: Option<flavor::OpenShiftPackages>,
    certificate_expiry: settings::CertificateExpiry,
}

fn resolve_settings(
    request: &PlanRequest,
    inventory: &Inventory,
    extra: &Vars,
    node_vars: &[(&str, &Vars)],
    all_vars: &[(&str, &Vars)],
    masters: &[String],
    candidates: &[String],
) -> Result<ResolvedSettings> {
    let mut settings = settings::resolve(&request.flags, node_vars, all_vars, extra)?;
    let flavor = flavor::choose(inventory, all_vars)?;
    let mut target_passed_over = Vec::new();
    if flavor.flavor == Flavor::Openshift && settings.target_version.value.is_none() {
        let (target, passed_over) = settings::resolve_openshift_target(all_vars, extra)?;
        if let Some(target) = target {
            settings.target_version = target;
        }
        target_passed_over = passed_over;
    }
    if flavor.flavor == Flavor::Openshift {
        settings::check_openshift_image_tag(&settings.target_version, all_vars, extra)?;
    }
    if flavor.flavor != Flavor::Openshift && settings.target_version.value.is_none() {
        // kubespray sets kube_version for the cluster's hosts (k8s_cluster), not for etcd hosts of their own.
        let cluster_vars: Vec<(&str, &Vars)> =
            all_vars.iter().filter(|(h, _)| masters.iter().chain(candidates).any(|m| m == h)).copied().collect();
        if let Some(target) = crate::cluster_groups::kubespray_target(&cluster_vars, extra)? {
            settings.target_version = target;
        }
    }
    let openshift_packages = match flavor.flavor {
        Flavor::Openshift => {
            let first = all_vars.first().map(|(_, v)| *v);
            let service_type = first.map(flavor::openshift_service_type).transpose()?.unwrap_or("atomic-openshift");
            Some(flavor::openshift_packages(service_type))
        }
        _ => None,
    };
    let certificate_expiry =
        settings::resolve_certificate_expiry(all_vars, extra, flavor.flavor.default_certificate_warning_days())?;
    Ok(ResolvedSettings { settings, flavor, target_passed_over, openshift_packages, certificate_expiry })
}

/// The custom flavour runs only the operator's commands: every host it upgrades must name its command.
fn custom_command_set(
    inventory: &Inventory,
    flavor: &FlavorChoice,
    host_vars: &IndexMap<String, Arc<Vars>>,
    hosts: &[String],
    variable: &str,
) -> Result<()> {
    for host in hosts {
        let set = host_vars
            .get(host)
            .and_then(|v| v.get(variable))
            .is_some_and(|v| v.value.as_str().is_some_and(|s| !s.trim().is_empty()));
        if !set {
            return Err(Error::input(format!(
                "upgrade_flavor is custom ({}) but {host} has no {variable}",
                flavor.why
            ))
            .in_file(&inventory.path)
            .hint(format!(
                "the custom flavour runs only your commands: set {variable} (the whole upgrade of one \
                     host), or choose upgrade_flavor kubeadm or openshift"
            )));
        }
    }
    Ok(())
}

/// The hooks of the hosts the plan upgrades (masters, the nodes selected), and the cluster hooks, read on the first
/// master, all through `settings::resolve_hooks`.
fn hooks_of(
    inventory: &Inventory,
    host_vars: &IndexMap<String, Arc<Vars>>,
    masters: &[String],
    nodes: &[String],
    wants: &dyn Fn(Phase) -> bool,
) -> Result<(IndexMap<String, HostHooks>, HostHooks)> {
    let mut hooks: IndexMap<String, HostHooks> = IndexMap::new();
    let mut add_hooks = |host: &String, points: &[HookPoint]| -> Result<()> {
        let Some(vars) = host_vars.get(host) else { return Ok(()) };
        let found = settings::resolve_hooks(host, vars, points, &inventory.dir)?;
        if !found.is_empty() {
            hooks.entry(host.clone()).or_default().extend(found);
        }
        Ok(())
    };
    if wants(Phase::ControlPlane) {
        for host in masters {
            add_hooks(host, &HookPoint::MASTER)?;
        }
    }
    if wants(Phase::Nodes) {
        for host in nodes {
            add_hooks(host, &HookPoint::NODE)?;
        }
    }
    let cluster_hooks = match masters.first().and_then(|m| host_vars.get(m).map(|v| (m, v))) {
        Some((first, vars)) if wants(Phase::ControlPlane) || wants(Phase::Nodes) => {
            settings::resolve_hooks(first, vars, &HookPoint::CLUSTER, &inventory.dir)?
        }
        _ => HostHooks::new(),
    };
    Ok((hooks, cluster_hooks))
}

/// The run reads the cluster lock's TTL on the first master and refuses a bad one: `check` and `--plan` refuse it
/// too, at its line, before anything connects.
fn check_cluster_lock_ttl(first_master_vars: Option<&Vars>) -> Result<()> {
    let Some(var) = first_master_vars.and_then(|v| v.get("upgrade_cluster_lock_ttl")) else { return Ok(()) };
    let text = match &var.value {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Null => None,
        other => Some(other.to_string()),
    };
    if let Some(text) = text.filter(|t| !t.contains("{{") && !t.contains("{%")) {
        settings::cluster_lock_ttl(&text).map_err(|e| settings::located(e, "upgrade_cluster_lock_ttl", &var.origin))?;
    }
    Ok(())
}

/// Each phase asked for with its batches: etcd-backup on the etcd hosts, the masters one at a time, the nodes'
/// batches.
fn phase_plans(
    selected: &[Phase],
    etcd: &[String],
    masters: &[String],
    node_batches: &[Vec<String>],
) -> Vec<PhasePlan> {
    selected
        .iter()
        .map(|&phase| PhasePlan {
            phase,
            batches: match phase {
                Phase::Preflight | Phase::Verify => Vec::new(),
                Phase::EtcdBackup => vec![etcd.to_vec()],
                Phase::ControlPlane => masters.iter().map(|m| vec![m.clone()]).collect(),
                Phase::Nodes => node_batches.to_vec(),
                // The pseudo-phases (cluster hooks, config backup) are never selected: `Phase::select`.
                _ => Vec::new(),
            },
        })
        .collect()
}

fn dedup(hosts: Vec<String>) -> Vec<String> {
    let mut seen = HashSet::new();
    hosts.into_iter().filter(|h| seen.insert(h.clone())).collect()
}

// ---------------------------------------------------------------------------------------------------------------
// offline labels

/// openshift-ansible 3.11's default node groups (roles/openshift_facts/defaults/main.yml).
fn default_node_group_labels(group: &str) -> &'static [&'static str] {
    match group {
        "node-config-master" => &["node-role.kubernetes.io/master=true"],
        "node-config-infra" => &["node-role.kubernetes.io/infra=true"],
        "node-config-compute" => &["node-role.kubernetes.io/compute=true"],
        "node-config-all-in-one" => &[
            "node-role.kubernetes.io/master=true",
            "node-role.kubernetes.io/infra=true",
            "node-role.kubernetes.io/compute=true",
        ],
        // The -crio variants carry the same role labels plus the runtime.
        "node-config-master-crio" => &["node-role.kubernetes.io/master=true", "runtime=cri-o"],
        "node-config-infra-crio" => &["node-role.kubernetes.io/infra=true", "runtime=cri-o"],
        "node-config-compute-crio" => &["node-role.kubernetes.io/compute=true", "runtime=cri-o"],
        "node-config-all-in-one-crio" => &[
            "node-role.kubernetes.io/master=true",
            "node-role.kubernetes.io/infra=true",
            "node-role.kubernetes.io/compute=true",
            "runtime=cri-o",
        ],
        _ => &[],
    }
}

/// `openshift_node_groups` parsed once per distinct value (most hosts share the one from `[OSEv3:vars]`).
#[derive(Default)]
struct NodeGroupsCache {
    last: Option<(Value, BTreeMap<String, Vec<String>>)>,
}

impl NodeGroupsCache {
    fn groups(&mut self, host: &str, var: &inventory::Var) -> Result<&BTreeMap<String, Vec<String>>> {
        let stale = self.last.as_ref().is_none_or(|(value, _)| value != &var.value);
        if stale {
            let parsed = parse_node_groups(&var.value).ok_or_else(|| {
                var.origin.locate(
                    Error::input(format!(
                        "openshift_node_groups (for {host}) is not a list of {{name: ..., labels: [\"k=v\", ...]}}"
                    ))
                    .hint(
                        "write it as openshift-ansible documents it, e.g. [{'name': 'node-config-compute', \
                           'labels': ['node-role.kubernetes.io/compute=true']}]",
                    ),
                )
            })?;
            self.last = Some((var.value.clone(), parsed));
        }
        match &self.last {
            Some((_, groups)) => Ok(groups),
            None => Err(Error::internal("openshift_node_groups cache is empty")),
        }
    }
}

fn parse_node_groups(value: &Value) -> Option<BTreeMap<String, Vec<String>>> {
    let parsed;
    let value = match value {
        Value::String(s) => {
            parsed = settings::parse_python_literal(s)?;
            &parsed
        }
        other => other,
    };
    let mut groups = BTreeMap::new();
    for group in value.as_array()? {
        let name = group.get("name")?.as_str()?.to_string();
        let labels = match group.get("labels") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(items)) => items.iter().map(|l| l.as_str().map(str::to_string)).collect::<Option<_>>()?,
            Some(_) => return None,
        };
        groups.insert(name, labels);
    }
    Some(groups)
}

/// A node's labels as far as the inventory tells: those of its openshift node group, then `node_labels` on top.
fn offline_labels(host: &str, vars: &Vars, groups: &mut NodeGroupsCache) -> Result<BTreeMap<String, String>> {
    let mut labels = BTreeMap::new();
    let mut add = |pair: &str| {
        if let Some((k, v)) = pair.split_once('=') {
            labels.insert(k.trim().to_string(), v.trim().to_string());
        }
    };
    if let Some(Value::String(group)) = vars.get("openshift_node_group_name").map(|v| &v.value) {
        match vars.get("openshift_node_groups") {
            Some(var) => {
                if let Some(list) = groups.groups(host, var)?.get(group.as_str()) {
                    list.iter().for_each(|l| add(l));
                }
            }
            None => default_node_group_labels(group).iter().for_each(|l| add(l)),
        }
    }
    if let Some(var) = vars.get("node_labels") {
        let own = settings::labels_from_value(&var.value).ok_or_else(|| {
            var.origin.locate(
                Error::input(format!("node_labels (for {host}) is not a mapping of labels or a \"k=v,k2=v2\" string"))
                    .hint("write node_labels as a mapping, e.g. {region: group1}, or as \"region=group1,zone=a\""),
            )
        })?;
        labels.extend(own);
    }
    Ok(labels)
}

#[cfg(test)]
mod tests;
