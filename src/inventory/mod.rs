//! The Ansible inventory: hosts, groups and variables, read from the files operators already have
//! (YAML or INI, with `group_vars/` and `host_vars/` beside them), with Ansible's precedence.
//!
//! The reference is ansible-core: `plugins/inventory/{ini,yaml}.py` read the files, `inventory/data.py`,
//! `group.py` and `host.py` hold the model, `vars/manager.py` merges the variables.

mod builder;
mod extra_vars;
mod ini;
mod kubespray;
mod literal;
mod loader;
mod model;
mod pattern;
mod ranges;
mod vars;
pub(crate) use vars::decrypted_file_json;
pub(crate) mod vault_values;
mod yaml;

use std::path::{Path, PathBuf};

use indexmap::IndexMap;
use serde_json::Value;

use crate::error::{Error, Result};

pub use crate::vault::VaultSecrets;
pub use extra_vars::{parse_extra_vars, parse_extra_vars_with_vault};
pub use literal::parse_value as parse_python_literal;
pub(crate) use model::read_text;
pub use model::{Group, Host, Inventory, Origin, Var, Vars};
pub use ranges::{expand_host_pattern, python_int};

impl Inventory {
    /// Loads an inventory file, or every inventory file of a directory, plus `group_vars/` and `host_vars/`. A
    /// vault-encrypted file or `!vault` value is an error saying how to give its password: see [`Inventory::load_with_vault`].
    pub fn load(path: &Path) -> Result<Inventory> {
        Inventory::load_with_vault(path, &VaultSecrets::none())
    }

    /// The directory an inventory at `path` is read relative to (its `inventory_dir`, where `group_vars/` and the
    /// state directory are): the path itself when it is a directory (`is_dir`), else the file's own directory.
    pub fn dir_of(path: &Path, is_dir: bool) -> PathBuf {
        if is_dir {
            return path.to_path_buf();
        }
        match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        }
    }

    /// [`Inventory::load`] with vault passwords: files encrypted whole (inventory files, `group_vars/`, `host_vars/`)
    /// and `!vault` values are decrypted, and every decrypted value is a secret for every output.
    pub fn load_with_vault(path: &Path, vault: &VaultSecrets) -> Result<Inventory> {
        let meta = std::fs::metadata(path).map_err(|e| Error::read_file(path, e))?;
        let mut builder = builder::Builder::new();
        builder.vault = vault.clone();
        if meta.is_dir() {
            loader::load_dir(&mut builder, path)?;
        } else {
            loader::read_source(&mut builder, path)?;
        }
        let dir = Inventory::dir_of(path, meta.is_dir());
        let mut inventory = builder.finish(path.to_path_buf(), dir.clone())?;
        vars::load_vars_files(&mut inventory, &dir, vault)?;
        Ok(inventory)
    }

    /// Reads inventory text (YAML or INI, as `load` decides for a file of that name) without `group_vars/`:
    /// for tests and for callers that build inventories in memory.
    pub fn parse_str(text: &str, path: &Path) -> Result<Inventory> {
        let mut builder = builder::Builder::new();
        loader::parse_source(&mut builder, text, path)?;
        let dir = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        builder.finish(path.to_path_buf(), dir)
    }
}

/// Constructors for inventories built in code (tests, callers that synthesise hosts). After editing `hosts`,
/// `groups`, their `hosts` or `children` by hand, call [`Inventory::refresh`].
impl Inventory {
    /// An empty inventory: just `all` and `ungrouped`.
    pub fn new(path: PathBuf, dir: PathBuf) -> Inventory {
        Inventory { path, dir, hosts: IndexMap::new(), groups: IndexMap::new(), warnings: Vec::new() }.refreshed()
    }

    /// Recomputes what loading derives (parents, depths, `member_hosts`, hosts' `groups`, membership of `all`
    /// and `ungrouped`) after the inventory was edited by hand. Variables are left as they are.
    pub fn refresh(&mut self) {
        let taken = std::mem::replace(self, Inventory::empty());
        *self = taken.refreshed();
    }

    fn refreshed(self) -> Inventory {
        let (builder, path, dir) = builder::Builder::from_inventory(self);
        let fallback = (path.clone(), dir.clone());
        builder.finish(path, dir).unwrap_or_else(|_| Inventory::empty_at(fallback.0, fallback.1))
    }

    fn empty() -> Inventory {
        Inventory::empty_at(PathBuf::new(), PathBuf::new())
    }

    fn empty_at(path: PathBuf, dir: PathBuf) -> Inventory {
        Inventory { path, dir, hosts: IndexMap::new(), groups: IndexMap::new(), warnings: Vec::new() }
    }
}

// The methods below are the contract the plan, the executor and the task engine rely on.
impl Inventory {
    /// The hosts of a group and of its descendants, in Ansible's order, without duplicates.
    /// `None` when there is no such group.
    pub fn group_hosts(&self, group: &str) -> Option<Vec<String>> {
        self.groups.get(group).map(|g| g.member_hosts.clone())
    }

    /// Ansible's `group_names`: the groups a host belongs to, directly or through children, sorted, without
    /// `all`. As in Ansible, a host in no group gets `["ungrouped"]`.
    pub fn group_names(&self, host: &str) -> Vec<String> {
        match self.hosts.get(host) {
            Some(h) => h.groups.iter().filter(|g| *g != "all").cloned().collect(),
            None => Vec::new(),
        }
    }

    /// Ansible's `groups` magic variable: every group (with `all` and `ungrouped`) and its hosts.
    pub fn groups(&self) -> IndexMap<String, Vec<String>> {
        self.groups.iter().map(|(name, g)| (name.clone(), g.member_hosts.clone())).collect()
    }

    /// A host's variables after Ansible's precedence (VariableManager with the default VARIABLE_PRECEDENCE),
    /// lowest first: `all`'s inventory vars, the other groups' inventory vars (by depth, priority, name),
    /// `group_vars/all`, the other groups' `group_vars/` (same order), the host's inventory vars, `host_vars/`,
    /// then `extra` (`-e`). Unknown hosts get the `all` layers and `extra`.
    pub fn host_vars(&self, host: &str, extra: &Vars) -> Vars {
        let mut vars = Vars::new();
        for layer in self.var_layers(host, extra) {
            for (k, v) in layer {
                vars.insert(k.clone(), v.clone());
            }
        }
        vars
    }

    /// A host's variables as `host_vars` merges them, as plain values (no origins): what templates, connections
    /// and the redactor read. Merged straight from the layers, without the origins' copies.
    pub fn host_values(&self, host: &str, extra: &Vars) -> serde_json::Map<String, Value> {
        let mut values = serde_json::Map::new();
        for layer in self.var_layers(host, extra) {
            for (k, v) in layer {
                values.insert(k.clone(), v.value.clone());
            }
        }
        values
    }

    /// One of a host's variables as `host_vars` would give it, read from the top layer down without merging the
    /// others: for a question asked of every host of a large inventory.
    pub fn host_var<'a>(&'a self, host: &str, name: &str, extra: &'a Vars) -> Option<&'a Var> {
        self.var_layers(host, extra).into_iter().rev().find_map(|layer| layer.get(name))
    }

    /// Every layer any host's variables are merged from: each group's and each host's inventory and file
    /// variables, then `extra`.
    pub fn every_var_layer<'a>(&'a self, extra: &'a Vars) -> impl Iterator<Item = &'a Vars> + Clone {
        let groups = self.groups.values().flat_map(|g| [&g.vars, &g.file_vars]);
        let hosts = self.hosts.values().flat_map(|h| [&h.vars, &h.file_vars]);
        groups.chain(hosts).chain(std::iter::once(extra))
    }

    /// The layers of a host's variables, lowest precedence first (see `host_vars`).
    fn var_layers<'a>(&'a self, host: &str, extra: &'a Vars) -> Vec<&'a Vars> {
        let all = self.groups.get("all");
        let host_entry = self.hosts.get(host);
        let mut groups: Vec<&Group> = host_entry
            .map(|h| h.groups.iter().filter(|g| *g != "all").filter_map(|g| self.groups.get(g)).collect())
            .unwrap_or_default();
        groups.sort_by(|a, b| (a.depth, a.priority, &a.name).cmp(&(b.depth, b.priority, &b.name)));
        let mut layers = Vec::with_capacity(2 * groups.len() + 5);
        layers.extend(all.map(|all| &all.vars));
        layers.extend(groups.iter().map(|g| &g.vars));
        layers.extend(all.map(|all| &all.file_vars));
        layers.extend(groups.iter().map(|g| &g.file_vars));
        if let Some(h) = host_entry {
            layers.push(&h.vars);
            layers.push(&h.file_vars);
        }
        layers.push(extra);
        layers
    }

    /// The hosts an Ansible host pattern (`--limit`) selects, in the order Ansible evaluates them: `a,b` or
    /// `a:b` (union), `&g` (intersection), `!g` (exclusion), `*`/`?` wildcards, `~regex`, `g[0]`/`g[1:3]`
    /// subscripts, `@file` (one pattern a line), and the implicit `localhost` (`127.0.0.1`, `::1`) when the inventory
    /// has no such host. A part that matches nothing is an input error naming it.
    pub fn select(&self, pattern: &str) -> Result<Vec<String>> {
        pattern::select(self, pattern)
    }

    /// What `--limit PATTERN` leaves of a play on `hosts: all` (Ansible's `subset`): the hosts of `all`, in their
    /// order, that `select(pattern)` picks. Unlike `select`, the order is the inventory's, not the pattern's, and the
    /// implicit localhost is not part of `all`, so `localhost` alone leaves nothing.
    pub fn limit(&self, pattern: &str) -> Result<Vec<String>> {
        let allowed: std::collections::HashSet<String> = self.select(pattern)?.into_iter().collect();
        Ok(self.select("all")?.into_iter().filter(|h| allowed.contains(h)).collect())
    }
}

impl Inventory {
    /// What `ansible-inventory --list` prints: groups with their direct hosts and children, and every host's
    /// variables (Ansible's internal `inventory_file`/`inventory_dir` left out, as it does).
    pub fn to_ansible_list(&self) -> Value {
        let mut out = serde_json::Map::new();
        let mut hostvars = serde_json::Map::new();
        let no_extra = Vars::new();
        for name in self.hosts.keys() {
            let mut vars = vars_to_json(&self.host_vars(name, &no_extra));
            vars.remove("inventory_file");
            vars.remove("inventory_dir");
            // Like ansible-inventory, hosts without variables are left out of `hostvars`.
            if !vars.is_empty() {
                hostvars.insert(name.clone(), Value::Object(vars));
            }
        }
        out.insert("_meta".into(), serde_json::json!({ "hostvars": hostvars }));
        let mut stack = vec!["all".to_string()];
        let mut seen = std::collections::HashSet::new();
        while let Some(name) = stack.pop() {
            let Some(g) = self.groups.get(&name) else { continue };
            let mut entry = serde_json::Map::new();
            if name != "all" && !g.hosts.is_empty() {
                entry.insert("hosts".into(), Value::from(g.hosts.clone()));
            }
            if !g.children.is_empty() {
                entry.insert("children".into(), Value::from(g.children.clone()));
            }
            if !entry.is_empty() {
                out.insert(name.clone(), Value::Object(entry));
            }
            for c in g.children.iter().rev() {
                if seen.insert(c.clone()) {
                    stack.push(c.clone());
                }
            }
        }
        Value::Object(out)
    }
}

/// The plain values of a set of variables, for templating.
pub fn vars_to_json(vars: &Vars) -> serde_json::Map<String, Value> {
    vars.iter().map(|(k, v)| (k.clone(), v.value.clone())).collect()
}

/// Every host's variables as JSON (`-e` included), by inventory name.
pub type HostVarsJson = std::collections::HashMap<String, serde_json::Map<String, Value>>;

/// Every host's variables as JSON (`-e` included), by inventory name: what connections, templates and the redactor
/// start from. Built once per run and shared: each copy is about 2 KB per host.
pub fn host_vars_json(inventory: &Inventory, extra: &Vars) -> std::sync::Arc<HostVarsJson> {
    std::sync::Arc::new(inventory.hosts.keys().map(|h| (h.clone(), inventory.host_values(h, extra))).collect())
}

#[cfg(test)]
mod tests;
