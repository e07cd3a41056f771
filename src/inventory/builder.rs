//! Ansible's `InventoryData`: groups and hosts as the parsers add them, then `reconcile_inventory` (every group
//! under `all`, hosts in no group under `ungrouped`) and the derived data (depths, member hosts, host groups).

use std::collections::{HashMap, HashSet, VecDeque};
use std::path::{Path, PathBuf};

use indexmap::IndexMap;
use serde_json::Value;

use super::{Group, Host, Inventory, Origin, Var, Vars};
use crate::error::{Error, Location, Result};
use crate::vault::VaultSecrets;

pub(super) struct Builder {
    hosts: IndexMap<String, Host>,
    groups: IndexMap<String, Group>,
    /// Direct members of each group, to keep `add_host` linear.
    group_host_sets: HashMap<String, HashSet<String>>,
    /// The groups each host was added to directly.
    host_direct_groups: HashMap<String, Vec<String>>,
    warnings: Vec<String>,
    /// The file being read, absolute, for the `inventory_file` and `inventory_dir` host variables.
    current_source: Option<PathBuf>,
    /// The vault passwords `!vault` values and encrypted files are decrypted with.
    pub(super) vault: VaultSecrets,
    /// The file being read was vault-encrypted whole: every value it sets is a secret.
    pub(super) source_encrypted: bool,
}

impl Builder {
    pub(super) fn new() -> Builder {
        let mut b = Builder {
            hosts: IndexMap::new(),
            groups: IndexMap::new(),
            group_host_sets: HashMap::new(),
            host_direct_groups: HashMap::new(),
            warnings: Vec::new(),
            current_source: None,
            vault: VaultSecrets::none(),
            source_encrypted: false,
        };
        b.add_group("all", None);
        b.add_group("ungrouped", None);
        // Both exist, and `all` is not below `ungrouped`: this cannot fail.
        let _ = b.add_child("all", "ungrouped");
        b
    }

    /// A builder holding an inventory that was edited by hand, so `finish` can recompute what is derived.
    pub(super) fn from_inventory(inv: Inventory) -> (Builder, PathBuf, PathBuf) {
        let Inventory { path, dir, hosts, mut groups, warnings } = inv;
        for g in groups.values_mut() {
            g.parents.clear();
        }
        let mut b = Builder {
            hosts,
            groups: IndexMap::new(),
            group_host_sets: HashMap::new(),
            host_direct_groups: HashMap::new(),
            warnings,
            current_source: None,
            vault: VaultSecrets::none(),
            source_encrypted: false,
        };
        for name in b.hosts.keys() {
            b.host_direct_groups.insert(name.clone(), Vec::new());
        }
        let links: Vec<(String, Vec<String>, Vec<String>)> =
            groups.values().map(|g| (g.name.clone(), g.hosts.clone(), g.children.clone())).collect();
        for g in groups.values_mut() {
            g.hosts.clear();
            g.children.clear();
        }
        b.groups = groups;
        if !b.groups.contains_key("all") {
            b.add_group("all", None);
        }
        if !b.groups.contains_key("ungrouped") {
            b.add_group("ungrouped", None);
            let _ = b.add_child("all", "ungrouped");
        }
        for (group, hosts, children) in links {
            for h in hosts {
                b.add_host_to_group(&group, &h);
            }
            for c in children {
                // A hand-made loop is dropped rather than looped over.
                let _ = b.add_child(&group, &c);
            }
        }
        (b, path, dir)
    }

    pub(super) fn warn(&mut self, message: String) {
        self.warnings.push(message);
    }

    pub(super) fn has_group(&self, name: &str) -> bool {
        self.groups.contains_key(name)
    }

    /// Adds a group if it is new. Ansible (with its default `TRANSFORM_INVALID_GROUP_CHARS=never`) keeps odd
    /// characters and warns.
    pub(super) fn add_group(&mut self, name: &str, location: Option<Location>) {
        if self.groups.contains_key(name) {
            if let Some(g) = self.groups.get_mut(name) {
                if g.location.is_none() {
                    g.location = location;
                }
            }
            return;
        }
        let invalid = name.chars().next().is_some_and(|c| c.is_ascii_digit() || !(c.is_alphanumeric() || c == '_'))
            || name.chars().any(|c| !(c.is_alphanumeric() || c == '_'));
        if invalid {
            self.warnings.push(format!(
                "invalid character(s) in group name `{name}`: Ansible keeps it, but templates cannot use it as a name"
            ));
        }
        self.groups.insert(name.to_string(), Group { location, ..Group::new(name) });
    }

    /// Adds a host (new hosts get `inventory_file`, `inventory_dir` and the port), and puts it in `group`.
    pub(super) fn add_host(
        &mut self,
        name: &str,
        group: Option<&str>,
        port: Option<&str>,
        location: &Location,
    ) -> Result<(), String> {
        if name.is_empty() {
            return Err("invalid empty host name".into());
        }
        if let Some(g) = group {
            if !self.groups.contains_key(g) {
                return Err(format!("could not find group {g} in inventory"));
            }
        }
        if !self.hosts.contains_key(name) {
            let mut vars = Vars::new();
            let origin = Origin::Inventory(location.clone());
            let (file, dir) = match &self.current_source {
                Some(src) => (
                    Value::String(src.display().to_string()),
                    Value::String(src.parent().map(|p| p.display().to_string()).unwrap_or_default()),
                ),
                None => (Value::Null, Value::Null),
            };
            vars.insert("inventory_file".into(), Var { value: file, origin: origin.clone() });
            vars.insert("inventory_dir".into(), Var { value: dir, origin: origin.clone() });
            if let Some(port) = port {
                let value = match port.parse::<u64>() {
                    Ok(p) => Value::from(p),
                    Err(_) => Value::String(port.to_string()),
                };
                vars.insert("ansible_port".into(), Var { value, origin });
            }
            self.hosts.insert(
                name.to_string(),
                Host {
                    name: name.to_string(),
                    vars,
                    file_vars: Vars::new(),
                    location: location.clone(),
                    groups: Vec::new(),
                },
            );
            self.host_direct_groups.insert(name.to_string(), Vec::new());
        }
        if let Some(g) = group {
            self.add_host_to_group(g, name);
        }
        Ok(())
    }

    fn add_host_to_group(&mut self, group: &str, host: &str) {
        let set = self.group_host_sets.entry(group.to_string()).or_default();
        if set.insert(host.to_string()) {
            if let Some(g) = self.groups.get_mut(group) {
                g.hosts.push(host.to_string());
            }
            self.host_direct_groups.entry(host.to_string()).or_default().push(group.to_string());
        }
    }

    /// Ansible's `add_child`: `child` may be a group or a host.
    pub(super) fn add_child(&mut self, parent: &str, child: &str) -> Result<(), String> {
        if !self.groups.contains_key(parent) {
            return Err(format!("{parent} is not a known group"));
        }
        if self.groups.contains_key(child) {
            self.add_child_group(parent, child)
        } else if self.hosts.contains_key(child) {
            self.add_host_to_group(parent, child);
            Ok(())
        } else {
            Err(format!("{child} is not a known host nor group"))
        }
    }

    fn add_child_group(&mut self, parent: &str, child: &str) -> Result<(), String> {
        if parent == child {
            return Err(format!("can't add group {parent} to itself"));
        }
        if self.groups.get(parent).is_some_and(|g| g.children.iter().any(|c| c == child)) {
            return Ok(());
        }
        if self.ancestors(parent).contains(child) {
            return Err(format!("adding group '{child}' as child to '{parent}' creates a recursive dependency loop"));
        }
        if let Some(p) = self.groups.get_mut(parent) {
            p.children.push(child.to_string());
        }
        if let Some(c) = self.groups.get_mut(child) {
            if !c.parents.iter().any(|p| p == parent) {
                c.parents.push(parent.to_string());
            }
        }
        Ok(())
    }

    fn ancestors(&self, group: &str) -> HashSet<String> {
        let mut seen = HashSet::new();
        let mut stack = vec![group.to_string()];
        while let Some(g) = stack.pop() {
            if let Some(grp) = self.groups.get(&g) {
                for p in &grp.parents {
                    if seen.insert(p.clone()) {
                        stack.push(p.clone());
                    }
                }
            }
        }
        seen
    }

    /// Ansible's `Group.set_variable`: `ansible_group_priority` sets the priority instead of a variable.
    pub(super) fn set_group_var(&mut self, group: &str, key: &str, var: Var) -> Result<(), String> {
        if self.source_encrypted {
            crate::redact::decrypted::remember(&var.value);
        }
        let Some(g) = self.groups.get_mut(group) else {
            return Err(format!("could not identify group or host named {group}"));
        };
        if key == "ansible_group_priority" {
            g.priority = python_int_of(&var.value)
                .ok_or_else(|| format!("ansible_group_priority must be an integer, got {}", var.value))?;
            return Ok(());
        }
        g.vars.insert(key.to_string(), var);
        Ok(())
    }

    pub(super) fn set_host_var(&mut self, host: &str, key: &str, var: Var) {
        if self.source_encrypted {
            crate::redact::decrypted::remember(&var.value);
        }
        if let Some(h) = self.hosts.get_mut(host) {
            h.vars.insert(key.to_string(), var);
        }
    }

    /// `reconcile_inventory`, then what Ansible computes lazily (depths, `get_hosts`, host groups).
    pub(super) fn finish(mut self, path: PathBuf, dir: PathBuf) -> Result<Inventory> {
        let orphans: Vec<String> =
            self.groups.values().filter(|g| g.name != "all" && g.parents.is_empty()).map(|g| g.name.clone()).collect();
        for g in orphans {
            self.add_child("all", &g).map_err(|e| Error::input(e).in_file(&path))?;
        }
        let mut drop_from_ungrouped: HashSet<String> = HashSet::new();
        let mut add_to_ungrouped: Vec<String> = Vec::new();
        for host in self.hosts.keys() {
            let direct = self.host_direct_groups.get(host).map(Vec::as_slice).unwrap_or_default();
            let others = direct.iter().any(|g| g != "all" && g != "ungrouped");
            if direct.iter().any(|g| g == "ungrouped") {
                if others {
                    drop_from_ungrouped.insert(host.clone());
                }
            } else if !others {
                add_to_ungrouped.push(host.clone());
            }
        }
        if !drop_from_ungrouped.is_empty() {
            if let Some(u) = self.groups.get_mut("ungrouped") {
                u.hosts.retain(|h| !drop_from_ungrouped.contains(h));
            }
        }
        for host in add_to_ungrouped {
            self.add_host_to_group("ungrouped", &host);
        }

        self.compute_depths();
        self.compute_members();
        Ok(Inventory { path, dir, hosts: self.hosts, groups: self.groups, warnings: self.warnings })
    }

    /// Depth = the longest chain of parents up to `all`, which is what Ansible's incremental updates converge to.
    fn compute_depths(&mut self) {
        let mut pending_parents: HashMap<String, usize> =
            self.groups.values().map(|g| (g.name.clone(), g.parents.len())).collect();
        let mut queue: VecDeque<String> =
            self.groups.values().filter(|g| g.parents.is_empty()).map(|g| g.name.clone()).collect();
        while let Some(name) = queue.pop_front() {
            let (depth, children) = match self.groups.get(&name) {
                Some(g) => (g.depth, g.children.clone()),
                None => continue,
            };
            for child in children {
                if let Some(c) = self.groups.get_mut(&child) {
                    c.depth = c.depth.max(depth + 1);
                }
                if let Some(n) = pending_parents.get_mut(&child) {
                    *n = n.saturating_sub(1);
                    if *n == 0 {
                        queue.push_back(child);
                    }
                }
            }
        }
    }

    /// `Group.get_hosts()` for every group (own hosts, then descendants level by level), and each host's groups.
    fn compute_members(&mut self) {
        let names: Vec<String> = self.groups.keys().cloned().collect();
        let mut host_groups: HashMap<String, Vec<String>> = HashMap::new();
        for name in &names {
            let mut ordered: Vec<&str> = vec![name.as_str()];
            let mut seen: HashSet<&str> = HashSet::from([name.as_str()]);
            let mut level: Vec<&str> = vec![name.as_str()];
            while !level.is_empty() {
                let mut next = Vec::new();
                for g in &level {
                    if let Some(grp) = self.groups.get(*g) {
                        for c in &grp.children {
                            if seen.insert(c.as_str()) {
                                ordered.push(c.as_str());
                                next.push(c.as_str());
                            }
                        }
                    }
                }
                level = next;
            }
            let mut members: Vec<String> = Vec::new();
            let mut member_set: HashSet<&str> = HashSet::new();
            for g in &ordered {
                if let Some(grp) = self.groups.get(*g) {
                    for h in &grp.hosts {
                        if member_set.insert(h.as_str()) {
                            members.push(h.clone());
                        }
                    }
                }
            }
            for h in &members {
                host_groups.entry(h.clone()).or_default().push(name.clone());
            }
            if let Some(grp) = self.groups.get_mut(name) {
                grp.member_hosts = members;
            }
        }
        for (host, mut groups) in host_groups {
            groups.sort();
            if let Some(h) = self.hosts.get_mut(&host) {
                h.groups = groups;
            }
        }
    }

    pub(super) fn set_current_source(&mut self, path: &Path) {
        self.current_source = Some(absolute(path));
    }
}

/// Python's `int(value)` for a variable value.
fn python_int_of(value: &Value) -> Option<i64> {
    match value {
        Value::Bool(b) => Some(*b as i64),
        Value::Number(n) => n.as_i64().or_else(|| n.as_f64().map(|f| f.trunc() as i64)),
        Value::String(s) => super::ranges::python_int(s),
        _ => None,
    }
}

/// The absolute, normalised path (`unfrackpath` without following links).
fn absolute(path: &Path) -> PathBuf {
    let abs = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let mut out = PathBuf::new();
    for c in abs.components() {
        match c {
            std::path::Component::CurDir => {}
            std::path::Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}
