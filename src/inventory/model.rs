//! The inventory as it is held: hosts, groups, variables and where each value came from. A leaf of the inventory:
//! the parsers, the builder and the loader all fill it, and it calls none of them.

use std::fmt;
use std::path::{Path, PathBuf};

use indexmap::IndexMap;
use serde_json::Value;

use crate::error::{Error, Location, Result};

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

impl Origin {
    /// Puts an error about a variable at the place the variable was set (a file and line, or the `-e` argument).
    pub fn locate(&self, err: Error) -> Error {
        match self {
            Origin::Inventory(l) | Origin::GroupVars(l) | Origin::HostVars(l) => err.at(l.clone()),
            Origin::ExtraVars(arg) => Error { message: format!("{} (from -e {arg})", err.message), ..err },
            Origin::Flag(_) | Origin::Default => err,
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
    /// Variables from inventory files: `inventory_file`/`inventory_dir`, the port of `host:port`, inline
    /// `key=value` or YAML host vars, later declarations winning.
    pub vars: Vars,
    /// Variables from `host_vars/NAME*` files; they win over `vars`.
    pub file_vars: Vars,
    /// Where the host was first declared.
    pub location: Location,
    /// Every group the host belongs to, directly or through child groups, `all` and `ungrouped` included,
    /// sorted by name. Computed when the inventory is loaded.
    pub groups: Vec<String>,
}

#[derive(Debug, Clone)]
pub struct Group {
    pub name: String,
    /// Hosts declared directly in this group, in file order.
    pub hosts: Vec<String>,
    /// Child groups, in file order.
    pub children: Vec<String>,
    /// Parent groups, in the order the links were made.
    pub parents: Vec<String>,
    /// Variables from inventory files (`[g:vars]`, `vars:`).
    pub vars: Vars,
    /// Variables from `group_vars/NAME*` files.
    pub file_vars: Vars,
    /// Where the group was first declared, when it was.
    pub location: Option<Location>,
    /// Ansible's group depth: the longest chain of parents up to `all` (0 for `all`).
    pub depth: usize,
    /// `ansible_group_priority` (default 1): among groups of one depth, a higher priority wins.
    pub priority: i64,
    /// Ansible's `Group.get_hosts()`: this group's hosts, then its descendants' (breadth first), without
    /// duplicates. Computed when the inventory is loaded.
    pub member_hosts: Vec<String>,
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
    /// What Ansible would warn about (skipped YAML keys, odd group names), for the reporters to show.
    pub warnings: Vec<String>,
}

impl Host {
    /// A host with no variables and no groups yet.
    pub fn new(name: &str, location: Location) -> Host {
        Host { name: name.to_string(), vars: Vars::new(), file_vars: Vars::new(), location, groups: Vec::new() }
    }
}

impl Group {
    /// A group with no hosts, children or variables yet.
    pub fn new(name: &str) -> Group {
        Group {
            name: name.to_string(),
            hosts: Vec::new(),
            children: Vec::new(),
            parents: Vec::new(),
            vars: Vars::new(),
            file_vars: Vars::new(),
            location: None,
            depth: 0,
            priority: 1,
            member_hosts: Vec::new(),
        }
    }
}

/// Reads a user's file as UTF-8 text.
pub(crate) fn read_text(path: &Path) -> Result<String> {
    let bytes = std::fs::read(path).map_err(|e| Error::read_file(path, e))?;
    String::from_utf8(bytes).map_err(|e| {
        Error::input("this file is not UTF-8 text (a binary file, or another encoding)")
            .at(Location::new(path, line_of_offset(e.as_bytes(), e.utf8_error().valid_up_to()), 0))
            .hint("save the file as UTF-8")
    })
}

fn line_of_offset(bytes: &[u8], offset: usize) -> usize {
    bytes.iter().take(offset).filter(|b| **b == b'\n').count() + 1
}
