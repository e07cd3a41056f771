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
