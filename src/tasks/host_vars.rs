//! Every host's variables for templating, with Ansible's magic variables (`inventory_hostname`, `group_names`,
//! `groups`, `hostvars`, ...), built once per run.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::{Map, Value};

use super::template::Vars;
use crate::inventory::{self, Inventory, vars_to_json};

/// Every host's variables for templating, computed once: what all hosts share (`groups`, `hostvars`) is one object
/// under each host's own variables, not a copy per host and step.
pub struct HostVarsTable {
    own: HashMap<String, Map<String, Value>>,
    shared: Arc<Value>,
    group_names: HashMap<String, Vec<String>>,
}

impl HostVarsTable {
    pub fn new(inventory: &Inventory, extra: &inventory::Vars) -> HostVarsTable {
        let mut own = HashMap::new();
        let mut hostvars = Map::new();
        for host in inventory.hosts.keys() {
            let vars = vars_to_json(&inventory.host_vars(host, extra));
            let mut hv = vars.clone();
            hv.insert("inventory_hostname".into(), Value::String(host.clone()));
            hostvars.insert(host.clone(), Value::Object(hv));
            own.insert(host.clone(), vars);
        }
        let mut groups = Map::new();
        for name in inventory.groups.keys() {
            let hosts = inventory.group_hosts(name).unwrap_or_default();
            groups.insert(name.clone(), Value::Array(hosts.into_iter().map(Value::String).collect()));
        }
        let group_names = inventory.hosts.keys().map(|h| (h.clone(), inventory.group_names(h))).collect();
        let mut shared = Map::new();
        shared.insert("groups".into(), Value::Object(groups));
        shared.insert("hostvars".into(), Value::Object(hostvars));
        shared.insert("inventory_dir".into(), Value::String(inventory.dir.display().to_string()));
        shared.insert("inventory_file".into(), Value::String(inventory.path.display().to_string()));
        shared.insert("ansible_check_mode".into(), Value::Bool(false));
        shared.insert("ansible_diff_mode".into(), Value::Bool(false));
        shared.insert("omit".into(), Value::String(crate::tasks::template::OMIT.to_string()));
        HostVarsTable { own, shared: Arc::new(Value::Object(shared)), group_names }
    }

    pub fn own(&self, host: &str) -> &Map<String, Value> {
        static EMPTY: std::sync::OnceLock<Map<String, Value>> = std::sync::OnceLock::new();
        self.own.get(host).unwrap_or_else(|| EMPTY.get_or_init(Map::new))
    }

    /// The host's variables for a step: its own (with `more` on top) over what every host shares.
    pub fn for_host(&self, host: &str, more: Map<String, Value>) -> Vars {
        let mut vars = self.own(host).clone();
        let group_names = self.group_names.get(host).cloned().unwrap_or_default();
        vars.insert("inventory_hostname".into(), Value::String(host.to_string()));
        vars.insert(
            "inventory_hostname_short".into(),
            Value::String(host.split('.').next().unwrap_or(host).to_string()),
        );
        vars.insert("group_names".into(), Value::Array(group_names.into_iter().map(Value::String).collect()));
        vars.extend(more);
        Vars::shared(self.shared.clone()).layered_under(&Vars::new(Value::Object(vars)))
    }
}
