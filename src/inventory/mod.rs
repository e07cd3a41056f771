//! The Ansible inventory: hosts, groups and variables, read from the files operators already have
//! (YAML or INI, with `group_vars/` and `host_vars/` beside them), with Ansible's precedence.

use std::fmt;
use std::path::{Path, PathBuf};

use indexmap::IndexMap;
use serde_json::Value;

use crate::error::{Location, Result};

/// Where a variable's value came from, so the plan can say why a setting has the value it has.
#[derive(Debug, Clone, PartialEq)]
pub enum Origin {
    /// Our built-in default.
    Default,
    /// Set in an inventory file (INI or YAML), at this place.
    Inventory(Location),
    /// Set in a `group_vars/` file.
    GroupVars(Location),
    /// Set in a `host_vars/` file.
    HostVars(Location),
    /// Given with `-e`: the argument as written, or the file of `-e @file`.
    ExtraVars(String),
    /// Given with a command-line flag such as `--serial`.
    Flag(String),
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Origin::Default => write!(f, "default"),
            Origin::Inventory(loc) | Origin::GroupVars(loc) | Origin::HostVars(loc) => write!(f, "{loc}"),
            Origin::ExtraVars(arg) => write!(f, "-e {arg}"),
            Origin::Flag(flag) => write!(f, "{flag}"),
        }
    }
}

/// A variable's value and where it was set.
#[derive(Debug, Clone, PartialEq)]
pub struct Var {
    pub value: Value,
    pub origin: Origin,
}

/// Variables by name, in the order they were first set.
pub type Vars = IndexMap<String, Var>;

#[derive(Debug, Clone)]
pub struct Host {
    pub name: String,
    /// The host's own variables: inline in the inventory, then `host_vars/` on top.
    pub vars: Vars,
    /// Where the host was first declared.
    pub location: Location,
}

#[derive(Debug, Clone)]
pub struct Group {
    pub name: String,
    /// Hosts declared directly in this group, in file order.
    pub hosts: Vec<String>,
    /// Child groups, in file order.
    pub children: Vec<String>,
    /// Variables from inventory files (`[g:vars]`, `vars:`), then `group_vars/g` on top.
    pub vars: Vars,
    /// Where the group was first declared, when it was.
    pub location: Option<Location>,
}

#[derive(Debug, Clone)]
pub struct Inventory {
    /// What the operator passed to `--inventory`.
    pub path: PathBuf,
    /// The directory relative paths (hooks, `group_vars/`) resolve against.
    pub dir: PathBuf,
    /// Every host, in the order Ansible first meets them.
    pub hosts: IndexMap<String, Host>,
    /// Every group, `all` and `ungrouped` included.
    pub groups: IndexMap<String, Group>,
}

impl Inventory {
    /// Loads an inventory file, or every inventory file of a directory, plus `group_vars/` and `host_vars/`.
    pub fn load(path: &Path) -> Result<Inventory> {
        Err(crate::error::Error::input("inventory loading is not implemented yet").in_file(path))
    }
}

// The methods below are the contract the plan, the executor and the task engine rely on. The bodies are
// placeholders until the real readers land.
impl Inventory {
    /// The hosts of a group and of its descendants, in Ansible's order, without duplicates.
    /// `None` when there is no such group.
    pub fn group_hosts(&self, group: &str) -> Option<Vec<String>> {
        let mut out: Vec<String> = Vec::new();
        let mut stack = vec![group.to_string()];
        let mut seen_groups = std::collections::HashSet::new();
        self.groups.get(group)?;
        while let Some(g) = stack.pop() {
            if !seen_groups.insert(g.clone()) {
                continue;
            }
            if let Some(grp) = self.groups.get(&g) {
                for h in &grp.hosts {
                    if !out.contains(h) {
                        out.push(h.clone());
                    }
                }
                stack.extend(grp.children.iter().rev().cloned());
            }
        }
        Some(out)
    }

    /// The groups a host belongs to, directly or through children, sorted, without `all` and `ungrouped`
    /// (Ansible's `group_names`).
    pub fn group_names(&self, host: &str) -> Vec<String> {
        let mut names: Vec<String> = self
            .groups
            .keys()
            .filter(|g| *g != "all" && *g != "ungrouped")
            .filter(|g| self.group_hosts(g).is_some_and(|hs| hs.iter().any(|h| h == host)))
            .cloned()
            .collect();
        names.sort();
        names
    }

    /// A host's variables after Ansible's precedence, with `extra` (`-e`) on top.
    pub fn host_vars(&self, host: &str, extra: &Vars) -> Vars {
        let mut vars = Vars::new();
        for g in self.groups.values().filter(|g| g.name == "all" || self.group_names(host).contains(&g.name)) {
            vars.extend(g.vars.iter().map(|(k, v)| (k.clone(), v.clone())));
        }
        if let Some(h) = self.hosts.get(host) {
            vars.extend(h.vars.iter().map(|(k, v)| (k.clone(), v.clone())));
        }
        vars.extend(extra.iter().map(|(k, v)| (k.clone(), v.clone())));
        vars
    }

    /// The hosts an Ansible host pattern (`--limit`) selects, in inventory order.
    pub fn select(&self, pattern: &str) -> Result<Vec<String>> {
        let mut out = Vec::new();
        for part in pattern.split([',', ':']).filter(|p| !p.is_empty()) {
            match self.group_hosts(part) {
                Some(hosts) => out.extend(hosts),
                None if self.hosts.contains_key(part) => out.push(part.to_string()),
                None => {
                    return Err(crate::error::Error::input(format!("no host or group matches `{part}`"))
                        .hint("check the name against the inventory"));
                }
            }
        }
        Ok(out)
    }
}

/// Parses `-e` arguments: `KEY=VALUE ...`, a JSON/YAML mapping, or `@FILE`, later ones winning.
pub fn parse_extra_vars(args: &[String], _base_dir: &Path) -> Result<Vars> {
    let mut vars = Vars::new();
    for arg in args {
        for pair in arg.split_whitespace() {
            if let Some((k, v)) = pair.split_once('=') {
                let var = Var { value: Value::String(v.to_string()), origin: Origin::ExtraVars(arg.clone()) };
                vars.insert(k.to_string(), var);
            }
        }
    }
    Ok(vars)
}

/// The plain values of a set of variables, for templating.
pub fn vars_to_json(vars: &Vars) -> serde_json::Map<String, Value> {
    vars.iter().map(|(k, v)| (k.clone(), v.value.clone())).collect()
}
