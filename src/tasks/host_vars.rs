//! Every host's variables for templating, with Ansible's magic variables (`inventory_hostname`, `group_names`,
//! `groups`, `hostvars`, ...), built once per run, and the facts hosts set while the run goes on.
//!
//! `hostvars` is live, as in Ansible: `hostvars[h]` is h's inventory variables with the facts (`set_fact`) and
//! registered results h has at that moment on top, and the extra vars (`-e`) above both. It is read lazily, one host
//! and one variable at a time, so a 5,000-host inventory costs nothing per lookup.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use minijinja::value::{Enumerator, Object, Serde, Value as Jinja};
use serde_json::{Map, Value};

use super::template::Vars;
use crate::inventory::{self, HostVarsJson, Inventory, vars_to_json};

pub use super::facts::HostFacts;

/// The facts (`set_fact`) and registered results of every host of one run, shared by every host's task engine and
/// read through `hostvars`. One per run: facts persist from one step (play) to the next, as in one playbook run.
#[derive(Debug, Default)]
pub struct FactStore {
    hosts: RwLock<HashMap<String, Arc<HostFacts>>>,
    /// Scalar facts, one copy per value for every host that has it: most of the defaults every step file applies
    /// (`upgrade_kubectl: kubectl`, ...) are the same on every host, 57 facts per host of a 5,000-host run.
    scalars: std::sync::Mutex<HashMap<String, Arc<Value>>>,
    /// The names of facts, one copy each.
    names: std::sync::Mutex<std::collections::HashSet<Arc<str>>>,
}

/// Longer scalars are not shared: they are rarely the same on two hosts.
const SHARED_SCALAR_MAX: usize = 256;

impl FactStore {
    pub fn new() -> Arc<FactStore> {
        Arc::new(FactStore::default())
    }

    /// The host's facts and registered results as they are now (a snapshot; nothing is copied).
    pub fn get(&self, host: &str) -> Option<Arc<HostFacts>> {
        let hosts = self.hosts.read().unwrap_or_else(|p| p.into_inner());
        hosts.get(host).cloned()
    }

    /// Sets facts of the host: each entry replaces the fact of that name.
    pub fn extend(&self, host: &str, facts: Map<String, Value>) {
        if facts.is_empty() {
            return;
        }
        let mut hosts = self.hosts.write().unwrap_or_else(|p| p.into_inner());
        let entry = hosts.entry(host.to_string()).or_default();
        // Copies the map of handles (not the values) only while a reader still holds the previous snapshot.
        Arc::make_mut(entry).extend(facts.into_iter().map(|(k, v)| (self.name(k), self.shared(v))));
    }

    /// The one copy of a fact's name.
    fn name(&self, name: String) -> Arc<str> {
        let Ok(mut names) = self.names.lock() else { return Arc::from(name) };
        if let Some(known) = names.get(name.as_str()) {
            return known.clone();
        }
        let name: Arc<str> = Arc::from(name);
        names.insert(name.clone());
        name
    }

    /// The one copy of a scalar value (a new handle for anything else).
    fn shared(&self, value: Value) -> Arc<Value> {
        let key = match &value {
            Value::String(s) if s.len() <= SHARED_SCALAR_MAX => format!("s{s}"),
            Value::Bool(_) | Value::Number(_) | Value::Null => format!("j{value}"),
            _ => return Arc::new(value),
        };
        let Ok(mut scalars) = self.scalars.lock() else { return Arc::new(value) };
        scalars.entry(key).or_insert_with(|| Arc::new(value)).clone()
    }

    /// Forgets one fact (a registered result) of the host.
    pub fn remove(&self, host: &str, name: &str) {
        let mut hosts = self.hosts.write().unwrap_or_else(|p| p.into_inner());
        if let Some(entry) = hosts.get_mut(host) {
            if entry.contains_key(name) {
                Arc::make_mut(entry).shift_remove(name);
            }
        }
    }

    /// Sets one fact (a registered result) of the host.
    pub fn insert(&self, host: &str, name: &str, value: Value) {
        let mut facts = Map::new();
        facts.insert(name.to_string(), value);
        self.extend(host, facts);
    }
}

/// What the run knows of every host before any task runs: inventory variables (after precedence, `-e` included)
/// and groups.
struct Inventoried {
    own: Arc<HostVarsJson>,
    /// The inventory's host names in order, for iterating `hostvars`.
    order: Vec<String>,
    group_names: HashMap<String, Vec<String>>,
    extra: Map<String, Value>,
    /// What every host shares (`groups`, `inventory_dir`, `omit`, ...), converted for templates once.
    shared: Jinja,
}

/// Every host's variables for templating, computed once: what all hosts share (`groups`, `hostvars`) is one object
/// under each host's own variables, not a copy per host and step.
pub struct HostVarsTable {
    data: Arc<Inventoried>,
    facts: Arc<FactStore>,
    /// `shared` with `hostvars` added.
    shared: Jinja,
}

impl HostVarsTable {
    /// The table for a run, with an empty fact store (see [`HostVarsTable::facts`]).
    pub fn new(inventory: &Inventory, extra: &inventory::Vars) -> HostVarsTable {
        let own = crate::inventory::host_vars_json(inventory, extra);
        HostVarsTable::with_facts(inventory, extra, own, FactStore::new())
    }

    /// The table for a run whose hosts record their facts in `facts`; `own` is every host's variables, as
    /// `host_vars_json` makes them (shared with the connection pool).
    pub fn with_facts(
        inventory: &Inventory,
        extra: &inventory::Vars,
        own: Arc<HostVarsJson>,
        facts: Arc<FactStore>,
    ) -> HostVarsTable {
        let mut groups = Map::new();
        for name in inventory.groups.keys() {
            let hosts = inventory.group_hosts(name).unwrap_or_default();
            groups.insert(name.clone(), Value::Array(hosts.into_iter().map(Value::String).collect()));
        }
        let group_names = inventory.hosts.keys().map(|h| (h.clone(), inventory.group_names(h))).collect();
        let mut shared = Map::new();
        shared.insert("groups".into(), Value::Object(groups));
        shared.insert("inventory_dir".into(), Value::String(inventory.dir.display().to_string()));
        shared.insert("inventory_file".into(), Value::String(inventory.path.display().to_string()));
        shared.insert("ansible_check_mode".into(), Value::Bool(false));
        shared.insert("ansible_diff_mode".into(), Value::Bool(false));
        shared.insert("omit".into(), Value::String(crate::tasks::template::OMIT.to_string()));
        let data = Arc::new(Inventoried {
            own,
            order: inventory.hosts.keys().cloned().collect(),
            group_names,
            extra: vars_to_json(extra),
            shared: Jinja::from(Serde(&Value::Object(shared))),
        });
        let hostvars = Jinja::from_object(HostVars { data: data.clone(), facts: facts.clone() });
        let mut with_hostvars: Vec<(Jinja, Jinja)> = Vec::new();
        if let Ok(entries) = data.shared.try_iter() {
            for key in entries {
                let value = data.shared.get_item(&key).unwrap_or_default();
                with_hostvars.push((key, value));
            }
        }
        with_hostvars.push((Jinja::from("hostvars"), hostvars));
        let shared = Jinja::from_pairs(with_hostvars);
        HostVarsTable { data, facts, shared }
    }

    /// The store where the run's hosts record their facts; `hostvars` reads it.
    pub fn facts(&self) -> Arc<FactStore> {
        self.facts.clone()
    }

    pub fn own(&self, host: &str) -> &Map<String, Value> {
        static EMPTY: std::sync::OnceLock<Map<String, Value>> = std::sync::OnceLock::new();
        self.data.own.get(host).unwrap_or_else(|| EMPTY.get_or_init(Map::new))
    }

    /// The host's variables for a step: its own (with `more` on top) over what every host shares.
    pub fn for_host(&self, host: &str, more: Map<String, Value>) -> Vars {
        let mut vars = self.own(host).clone();
        vars.extend(magic_vars(&self.data, host));
        vars.extend(more);
        Vars::from_value(self.shared.clone()).layered_under(&Vars::new(Value::Object(vars)))
    }
}

/// The magic variables that differ from host to host.
fn magic_vars(data: &Inventoried, host: &str) -> [(String, Value); 3] {
    let group_names = data.group_names.get(host).cloned().unwrap_or_default();
    [
        ("inventory_hostname".into(), Value::String(host.to_string())),
        ("inventory_hostname_short".into(), Value::String(host.split('.').next().unwrap_or(host).to_string())),
        ("group_names".into(), Value::Array(group_names.into_iter().map(Value::String).collect())),
    ]
}

/// `hostvars`: every inventory host, by name.
#[derive(Debug)]
struct HostVars {
    data: Arc<Inventoried>,
    facts: Arc<FactStore>,
}

impl std::fmt::Debug for Inventoried {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Inventoried").field("hosts", &self.order.len()).finish()
    }
}

impl Object for HostVars {
    fn get_value(self: &Arc<Self>, key: &Jinja) -> Option<Jinja> {
        let host = key.as_str()?;
        if !self.data.own.contains_key(host) {
            return None;
        }
        Some(Jinja::from_object(HostView {
            host: host.to_string(),
            facts: self.facts.get(host),
            hostvars: self.clone(),
        }))
    }

    fn enumerate(self: &Arc<Self>) -> Enumerator {
        Enumerator::Values(self.data.order.iter().map(|h| Jinja::from(h.as_str())).collect())
    }
}

/// `hostvars[host]`: the host's facts (as they were when it was looked up) over its inventory variables, with
/// `-e` above both, as Ansible's `get_vars` for a host without a play.
#[derive(Debug)]
struct HostView {
    host: String,
    facts: Option<Arc<HostFacts>>,
    hostvars: Arc<HostVars>,
}

impl HostView {
    fn data(&self) -> &Inventoried {
        &self.hostvars.data
    }

    fn json(&self, key: &str) -> Option<&Value> {
        let data = self.data();
        data.extra
            .get(key)
            .or_else(|| self.facts.as_ref().and_then(|f| f.get(key)).map(|v| &**v))
            .or_else(|| data.own.get(&self.host).and_then(|own| own.get(key)))
    }
}

impl Object for HostView {
    fn get_value(self: &Arc<Self>, key: &Jinja) -> Option<Jinja> {
        let name = key.as_str()?;
        if let Some(value) = self.json(name) {
            return Some(Jinja::from(Serde(value)));
        }
        if name == "hostvars" {
            return Some(Jinja::from_dyn_object(self.hostvars.clone()));
        }
        if let Some((_, value)) = magic_vars(self.data(), &self.host).into_iter().find(|(k, _)| k == name) {
            return Some(Jinja::from(Serde(value)));
        }
        self.data().shared.get_item(key).ok().filter(|v| !v.is_undefined())
    }

    fn enumerate(self: &Arc<Self>) -> Enumerator {
        let data = self.data();
        let mut keys: Vec<&str> = Vec::new();
        let own = data.own.get(&self.host).into_iter().flat_map(|m| m.keys().map(String::as_str));
        let facts = self.facts.iter().flat_map(|m| m.keys().map(|k| &**k));
        for key in own.chain(facts).chain(data.extra.keys().map(String::as_str)) {
            if !keys.contains(&key) {
                keys.push(key);
            }
        }
        let magic = ["inventory_hostname", "inventory_hostname_short", "group_names"];
        for key in magic {
            if !keys.contains(&key) {
                keys.push(key);
            }
        }
        Enumerator::Values(keys.into_iter().map(Jinja::from).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tasks::Templar;
    use serde_json::json;

    fn table(dir: &std::path::Path, extra: &[&str]) -> HostVarsTable {
        let path = dir.join("hosts");
        std::fs::write(&path, "[web]\nh1 role=db tmpl=\"{{ role }}-x\"\nh2 role=web\n[web:vars]\ntier=backend\n")
            .unwrap();
        let inventory = Inventory::load(&path).unwrap();
        let extra: Vec<String> = extra.iter().map(|s| s.to_string()).collect();
        let extra = crate::inventory::parse_extra_vars(&extra, dir).unwrap();
        HostVarsTable::new(&inventory, &extra)
    }

    #[test]
    fn hostvars_show_facts_set_after_the_vars_were_built() {
        let dir = tempfile::tempdir().unwrap();
        let table = table(dir.path(), &[]);
        let templar = Templar::new();
        let vars = table.for_host("h2", Map::new());
        assert!(templar.render("{{ hostvars['h1'].x | default('none') }}", &vars).unwrap() == json!("none"));
        table.facts().insert("h1", "x", json!({"stdout": "hi"}));
        table.facts().insert("h1", "role", json!("fact-role"));
        assert_eq!(templar.render("{{ hostvars['h1'].x.stdout }}", &vars).unwrap(), json!("hi"));
        assert_eq!(templar.render("{{ hostvars.h1.role }}", &vars).unwrap(), json!("fact-role"));
        assert_eq!(templar.render("{{ hostvars['h2'].role }}", &vars).unwrap(), json!("web"));
    }

    #[test]
    fn a_forgotten_result_is_gone_for_later_readers_and_a_snapshot_taken_before_keeps_it() {
        let store = FactStore::new();
        store.insert("m1", "upgrade_poll_all", json!({"stdout": "the node list"}));
        store.insert("m1", "node_name", json!("m1"));
        let before = store.get("m1").unwrap();
        store.remove("m1", "upgrade_poll_all");
        store.remove("m1", "never_set");
        let after = store.get("m1").unwrap();
        assert!(after.get("upgrade_poll_all").is_none());
        assert_eq!(after.get("node_name").map(|v| (**v).clone()), Some(json!("m1")));
        assert_eq!(before.get("upgrade_poll_all").map(|v| (**v).clone()), Some(json!({"stdout": "the node list"})));
    }

    #[test]
    fn equal_scalar_facts_of_two_hosts_are_one_value_and_unequal_ones_stay_apart() {
        let store = FactStore::new();
        for host in ["n1", "n2"] {
            store.insert(host, "upgrade_kubectl", json!("kubectl"));
            store.insert(host, "as_text", json!("true"));
            store.insert(host, "as_bool", json!(true));
            store.insert(host, "node_name", json!(host));
        }
        let (n1, n2) = (store.get("n1").unwrap(), store.get("n2").unwrap());
        assert!(Arc::ptr_eq(&n1["upgrade_kubectl"], &n2["upgrade_kubectl"]));
        assert_eq!(*n1["as_text"], json!("true"));
        assert_eq!(*n1["as_bool"], json!(true));
        assert_eq!(*n1["node_name"], json!("n1"));
        assert_eq!(*n2["node_name"], json!("n2"));
        // The names too: one copy of `node_name` for both hosts.
        let name = |facts: &HostFacts| facts.get_key_value("node_name").map(|(k, _)| k.clone()).unwrap();
        assert!(Arc::ptr_eq(&name(&n1), &name(&n2)));
    }

    #[test]
    fn extra_vars_win_over_facts_in_hostvars() {
        let dir = tempfile::tempdir().unwrap();
        let table = table(dir.path(), &["role=from-e"]);
        table.facts().insert("h1", "role", json!("fact-role"));
        let vars = table.for_host("h1", Map::new());
        assert_eq!(Templar::new().render("{{ hostvars['h1'].role }}", &vars).unwrap(), json!("from-e"));
    }

    #[test]
    fn hostvars_render_templated_values_with_the_host_s_own_variables() {
        let dir = tempfile::tempdir().unwrap();
        let table = table(dir.path(), &[]);
        let vars = table.for_host("h2", Map::new());
        let templar = Templar::new();
        assert_eq!(templar.render("{{ hostvars['h1'].tmpl }}", &vars).unwrap(), json!("db-x"));
        assert_eq!(templar.render("{{ hostvars['h1'].inventory_hostname }}", &vars).unwrap(), json!("h1"));
        assert_eq!(templar.render("{{ hostvars['h1'].group_names }}", &vars).unwrap(), json!(["web"]));
        assert_eq!(templar.render("{{ hostvars['h1'].groups.web }}", &vars).unwrap(), json!(["h1", "h2"]));
        assert_eq!(templar.render("{{ hostvars | list }}", &vars).unwrap(), json!(["h1", "h2"]));
        assert_eq!(templar.render("{{ 'h1' in hostvars }}", &vars).unwrap(), json!(true));
        assert_eq!(templar.render("{{ hostvars['nope'] is defined }}", &vars).unwrap(), json!(false));
        let err = templar.render("{{ hostvars['h1'].missing }}", &vars).unwrap_err();
        assert!(err.message.contains("missing"), "{}", err.message);
    }
}
