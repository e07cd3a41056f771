//! Which inventory groups hold the masters, the nodes and the etcd hosts, and the target an inventory built for
//! kubespray names. openshift-ansible's layout (`masters`, `nodes`, `etcd`) is the default; the names are settings
//! (`upgrade_masters_group`, `upgrade_nodes_group`, `upgrade_etcd_group`, read from `all`'s variables, `group_vars/all`
//! or `-e`: they pick the groups, so no one group can set them); and kubespray's layout (`kube_control_plane`, or
//! the older `kube-master`/`kube_master`; `kube_node`/`kube-node`; `etcd`) is recognised without them, as the
//! flavour is guessed, and the plan says so.

use serde::Serialize;
use serde_json::Value;

use crate::error::{Error, Result};
use crate::inventory::{Inventory, Origin, Vars};
use crate::settings::{HostVarsRef, Setting, TargetVersion};

/// kubespray's names for the control-plane group, newest first (`kube-master` until 2.15, `kube_master` until 2.17).
const KUBESPRAY_MASTERS: [&str; 3] = ["kube_control_plane", "kube-master", "kube_master"];
/// kubespray's names for the workers' group (`kube-node` until 2.15).
const KUBESPRAY_NODES: [&str; 2] = ["kube_node", "kube-node"];

/// One role's group and why it is that one.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GroupChoice {
    pub name: String,
    /// `default`, `upgrade_masters_group at group_vars/all.yml:3`, `kubespray's layout: ...`.
    pub reason: String,
}

/// The groups of the three roles.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ClusterGroups {
    pub masters: GroupChoice,
    pub nodes: GroupChoice,
    pub etcd: GroupChoice,
    /// Why the inventory was taken as laid out by kubespray, when it was.
    pub kubespray: Option<String>,
}

impl Default for ClusterGroups {
    fn default() -> Self {
        let default = |name: &str| GroupChoice { name: name.to_string(), reason: "default".to_string() };
        ClusterGroups { masters: default("masters"), nodes: default("nodes"), etcd: default("etcd"), kubespray: None }
    }
}

impl ClusterGroups {
    /// The groups of this inventory: the settings where set (the group must exist), else kubespray's names when the
    /// inventory has no `masters` group and has kubespray's control-plane group, else openshift-ansible's names.
    pub fn resolve(inventory: &Inventory, extra: &Vars) -> Result<ClusterGroups> {
        // Variables of `all` (inventory, group_vars/all) and -e: what every host sees alike.
        let all_vars = inventory.host_vars("", extra);
        let setting = |variable: &str| -> Result<Option<GroupChoice>> {
            let Some(var) = all_vars.get(variable) else { return Ok(None) };
            let name = match &var.value {
                Value::String(s) if !s.trim().is_empty() => s.trim().to_string(),
                other => {
                    return Err(var.origin.locate(
                        Error::input(format!("{variable} must name an inventory group, not {other}"))
                            .hint("write the group's name, e.g. kube_control_plane"),
                    ));
                }
            };
            if !inventory.groups.contains_key(&name) {
                let mut known: Vec<&str> = inventory.groups.keys().map(String::as_str).collect();
                known.retain(|g| *g != "all" && *g != "ungrouped");
                return Err(var.origin.locate(
                    Error::input(format!("{variable} names the group `{name}`, which the inventory does not have"))
                        .hint(format!("name one of its groups: {}", known.join(", "))),
                ));
            }
            Ok(Some(GroupChoice { name, reason: format!("{variable} {}", describe(&var.origin)) }))
        };
        let mut groups = ClusterGroups::default();
        let kubespray_masters = KUBESPRAY_MASTERS.iter().find(|g| inventory.groups.contains_key(**g));
        if let (false, Some(found)) = (inventory.groups.contains_key("masters"), kubespray_masters) {
            groups.kubespray = Some(format!(
                "guessed: no `masters` group, and a `{found}` group; set upgrade_masters_group, upgrade_nodes_group, \
                 upgrade_etcd_group to override"
            ));
            let kubespray =
                |name: &str| GroupChoice { name: name.to_string(), reason: "kubespray's layout".to_string() };
            groups.masters = kubespray(found);
            if !inventory.groups.contains_key("nodes") {
                if let Some(nodes) = KUBESPRAY_NODES.iter().find(|g| inventory.groups.contains_key(**g)) {
                    groups.nodes = kubespray(nodes);
                }
            }
            if inventory.groups.contains_key("etcd") {
                groups.etcd = kubespray("etcd");
            }
        }
        if let Some(choice) = setting("upgrade_masters_group")? {
            groups.masters = choice;
        }
        if let Some(choice) = setting("upgrade_nodes_group")? {
            groups.nodes = choice;
        }
        if let Some(choice) = setting("upgrade_etcd_group")? {
            groups.etcd = choice;
        }
        Ok(groups)
    }

    /// The line the plan prints: `kubespray's layout (guessed: ...): masters = `kube_control_plane`, ...`.
    pub fn describe(&self) -> String {
        let one = |role: &str, g: &GroupChoice| match (&self.kubespray, g.reason.as_str()) {
            (Some(_), "kubespray's layout") => format!("{role} = `{}`", g.name),
            _ => format!("{role} = `{}` ({})", g.name, g.reason),
        };
        let roles =
            format!("{}, {}, {}", one("masters", &self.masters), one("nodes", &self.nodes), one("etcd", &self.etcd));
        match &self.kubespray {
            Some(why) => format!("kubespray's layout ({why}): {roles}"),
            None => roles,
        }
    }

    /// Whether every group is openshift-ansible's default: the plan need not say anything.
    pub fn is_default(&self) -> bool {
        self == &ClusterGroups::default()
    }
}

fn describe(origin: &Origin) -> String {
    match origin {
        Origin::ExtraVars(arg) => format!("from -e {arg}"),
        other => format!("at {other}"),
    }
}

/// kubespray's `kube_version` (`v1.29.1`, in `group_vars/k8s_cluster/k8s-cluster.yml`) as the target, when
/// `upgrade_target_version` (or `--target-version`) did not set one: the hosts must agree on it, as on any run-wide
/// setting. The plan names `kube_version` and where it was set.
pub fn kubespray_target(all_hosts: HostVarsRef<'_>, extra: &Vars) -> Result<Option<Setting<Option<TargetVersion>>>> {
    const NAME: &str = "kube_version";
    let parse_one = |text: &str| TargetVersion::parse(text);
    let parse = |text: &str| if text.trim().is_empty() { Ok(None) } else { parse_one(text).map(Some) };
    let setting =
        crate::settings::run_wide("--target-version", None, (NAME, NAME), all_hosts, extra, parse, |v| match v {
            Value::String(s) => parse(s),
            Value::Null => Ok(None),
            other => TargetVersion::from_value(other).map(Some),
        })
        .map_err(|e| match e.hint {
            Some(_) => e,
            None => e.hint("kube_version names the release kubespray installs (v1.29.1); upgrade_target_version wins"),
        })?;
    Ok(setting.filter(|s| s.value.is_some()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn groups(text: &str, extra: &[&str]) -> Result<ClusterGroups> {
        let inventory = Inventory::parse_str(text, Path::new("hosts.ini")).unwrap();
        let extra = crate::inventory::parse_extra_vars(
            &extra.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
            Path::new(""),
        )?;
        ClusterGroups::resolve(&inventory, &extra)
    }

    #[test]
    fn openshift_ansible_names_are_the_default_and_say_nothing() {
        let g = groups("[masters]\nm1\n[nodes]\nn1\n[etcd]\nm1\n", &[]).unwrap();
        assert!(g.is_default() && g.kubespray.is_none());
    }

    #[test]
    fn kubespray_layouts_old_and_new_are_recognised() {
        let g = groups("[kube_control_plane]\nnode1\n[etcd]\nnode1\n[kube_node]\nnode1\nnode2\n[k8s_cluster:children]\nkube_control_plane\nkube_node\n", &[]).unwrap();
        assert!(
            g.kubespray
                .as_deref()
                .unwrap()
                .starts_with("guessed: no `masters` group, and a `kube_control_plane` group")
        );
        assert_eq!(
            (g.masters.name.as_str(), g.nodes.name.as_str(), g.etcd.name.as_str()),
            ("kube_control_plane", "kube_node", "etcd")
        );
        assert_eq!(g.masters.reason, "kubespray's layout");
        let old = groups("[kube-master]\nm1\n[kube-node]\nn1\n", &[]).unwrap();
        assert_eq!((old.masters.name.as_str(), old.nodes.name.as_str()), ("kube-master", "kube-node"));
        let older = groups("[kube_master]\nm1\n[kube_node]\nn1\n", &[]).unwrap();
        assert_eq!(older.masters.name, "kube_master");
    }

    #[test]
    fn the_settings_win_and_must_name_a_group() {
        let text = "[cp]\nm1\n[workers]\nn1\n[kube_control_plane]\nm1\n[all:vars]\nupgrade_masters_group=cp\nupgrade_nodes_group=workers\n";
        let g = groups(text, &[]).unwrap();
        assert_eq!((g.masters.name.as_str(), g.nodes.name.as_str()), ("cp", "workers"));
        assert!(g.masters.reason.starts_with("upgrade_masters_group at hosts.ini:"), "{}", g.masters.reason);
        let err = groups(text, &["upgrade_etcd_group=etcd-hosts"]).unwrap_err();
        assert!(err.message.contains("names the group `etcd-hosts`, which the inventory does not have"), "{err}");
        assert!(err.hint.unwrap().contains("cp, workers"));
    }
}
