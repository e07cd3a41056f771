//! The variables a template sees: a host's variables converted lazily, one top-level variable at a time, and
//! Ansible's lazy templating of variables whose values are templates themselves (`hostvars` too).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use minijinja::Environment;
// `merge_maps` looks keys up from the last map to the first: the top layer goes last.
use minijinja::value::{Enumerator, Object, Serde, Value, ValueKind, merge_maps};
use serde_json::Value as Json;

use super::source::{check_chain_length, escape_backslashes, is_template, single_expression, strip_builtin_prefix};
use crate::tasks::facts::HostFacts;

/// The variables a template sees. Cheap to clone; build one per host with [`Vars::new`] and layer task variables
/// and loop items on top with [`Vars::with`] / [`Vars::with_map`].
#[derive(Debug, Clone)]
pub struct Vars(pub(super) Value);

/// The host's variables as they came, converted to template values one top-level variable at a time, on first use.
#[derive(Debug)]
struct LazyVars {
    source: LazySource,
    converted: Mutex<HashMap<String, Value>>,
}

/// What a [`LazyVars`] reads from, shared with its owner rather than copied.
#[derive(Debug)]
enum LazySource {
    Json(Arc<Json>),
    /// A host's facts as the fact store holds them.
    Facts(Arc<HostFacts>),
}

impl LazySource {
    fn get(&self, key: &str) -> Option<&Json> {
        match self {
            LazySource::Json(json) => json.get(key),
            LazySource::Facts(facts) => facts.get(key).map(|v| &**v),
        }
    }

    fn keys(&self) -> Vec<Value> {
        match self {
            LazySource::Json(json) => {
                json.as_object().map(|m| m.keys().map(|k| Value::from(k.as_str())).collect()).unwrap_or_default()
            }
            LazySource::Facts(facts) => facts.keys().map(|k| Value::from(&**k)).collect(),
        }
    }
}

impl Object for LazyVars {
    fn get_value(self: &Arc<Self>, key: &Value) -> Option<Value> {
        let key = key.as_str()?;
        if let Ok(cache) = self.converted.lock() {
            if let Some(v) = cache.get(key) {
                return Some(v.clone());
            }
        }
        let value = Value::from(Serde(self.source.get(key)?));
        if let Ok(mut cache) = self.converted.lock() {
            cache.insert(key.to_owned(), value.clone());
        }
        Some(value)
    }

    fn enumerate(self: &Arc<Self>) -> Enumerator {
        Enumerator::Values(self.source.keys())
    }
}

/// The variables a template sees, with Ansible's lazy templating: a variable whose value is itself a template
/// (`upgrade_kubectl: "{{ tools }}/kubectl"`) is rendered, with the same variables, when it is used.
#[derive(Debug)]
struct Resolving {
    vars: Value,
    env: Arc<Environment<'static>>,
}

pub(super) fn resolving(env: &Arc<Environment<'static>>, vars: &Vars) -> Value {
    Value::from_object(Resolving { vars: vars.0.clone(), env: env.clone() })
}

thread_local! {
    /// How deep variables are being rendered inside variables on this thread: a variable that refers to itself
    /// stops here instead of recursing for ever.
    static NESTING: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
    /// The variables being rendered on this thread (by the variables they belong to, and name): one met again
    /// inside itself (`x: ["{{ x }}", "{{ x }}"]`) reads as undefined at once, as Ansible's recursive loop error,
    /// instead of branching until the nesting limit.
    static RENDERING: std::cell::RefCell<Vec<(usize, String)>> = const { std::cell::RefCell::new(Vec::new()) };
}

const MAX_NESTING: usize = 32;

impl Object for Resolving {
    fn get_value(self: &Arc<Self>, key: &Value) -> Option<Value> {
        let value = self.vars.get_item(key).ok().filter(|v| !v.is_undefined())?;
        let name = key.as_str().unwrap_or_default();
        // `hostvars[h].x` renders x with h's own variables, as Ansible does.
        if name == "hostvars" {
            return Some(Value::from_object(ResolvingHosts { hosts: value, env: self.env.clone() }));
        }
        // The magic variables are data, never templates of the operator's.
        if matches!(name, "groups" | "group_names" | "inventory_hostname") {
            return Some(value);
        }
        // A loop item is what the loop already rendered: its strings are data (ansible-core 2.19 does not template
        // them again), whatever markup they carry.
        let needs = if name == "item" { value.as_str().is_some_and(is_template) } else { contains_template(&value) };
        if !needs {
            return Some(value);
        }
        let me = (Arc::as_ptr(self) as usize, name.to_owned());
        let again = RENDERING.with(|r| r.borrow().contains(&me));
        if again {
            return None;
        }
        RENDERING.with(|r| r.borrow_mut().push(me));
        let rendered = self.render_nested(value);
        RENDERING.with(|r| {
            r.borrow_mut().pop();
        });
        rendered
    }

    fn enumerate(self: &Arc<Self>) -> Enumerator {
        match self.vars.try_iter() {
            Ok(keys) => Enumerator::Values(keys.collect()),
            Err(_) => Enumerator::Empty,
        }
    }
}

impl Resolving {
    /// A variable's value with the templates in it rendered: the value itself when it is a template, and, as in
    /// Ansible, the templated strings of a list of strings (`files: ["{{ root }}/ca.crt"]`). Mappings are left as
    /// they are: registered results are mappings, and their text (a file's content) is data.
    fn render_nested(self: &Arc<Self>, value: Value) -> Option<Value> {
        match value.kind() {
            ValueKind::String => match value.as_str().filter(|s| is_template(s)) {
                Some(text) => self.render_text(text),
                None => Some(value),
            },
            ValueKind::Seq if contains_template(&value) => {
                let items = value.try_iter().ok()?.map(|v| self.render_nested(v)).collect::<Option<Vec<_>>>()?;
                Some(Value::from(items))
            }
            _ => Some(value),
        }
    }

    fn render_text(self: &Arc<Self>, text: &str) -> Option<Value> {
        if check_chain_length(text, false).is_err() {
            return None;
        }
        let depth = NESTING.with(|n| n.get());
        if depth >= MAX_NESTING {
            return None;
        }
        NESTING.with(|n| n.set(depth + 1));
        let context = Value::from_dyn_object(self.clone());
        let stripped = strip_builtin_prefix(text);
        let source = escape_backslashes(&stripped);
        // One `{{ expr }}` keeps its native type; anything else (`{{ a }}/x {{ b }}` too) renders to text.
        let compiled = single_expression(&source).and_then(|expr| self.env.compile_expression(expr).ok());
        let rendered = match compiled {
            Some(expr) => expr.eval(context),
            None => self.env.render_str(&source, context).map(Value::from),
        };
        NESTING.with(|n| n.set(depth));
        // A variable that cannot be rendered reads as undefined, so the error names it rather than running its
        // raw text.
        rendered.ok()
    }
}

/// Whether a value is a template, or a list of strings with a template among them.
pub(super) fn contains_template(value: &Value) -> bool {
    match value.kind() {
        ValueKind::String => value.as_str().is_some_and(is_template),
        ValueKind::Seq => value.try_iter().is_ok_and(|items| {
            let mut any = false;
            for item in items {
                match item.as_str() {
                    Some(text) => any |= is_template(text),
                    None => return false,
                }
            }
            any
        }),
        _ => false,
    }
}

/// `hostvars` for templates: each host's variables, resolving templated values with that host's variables.
#[derive(Debug)]
struct ResolvingHosts {
    hosts: Value,
    env: Arc<Environment<'static>>,
}

impl Object for ResolvingHosts {
    fn get_value(self: &Arc<Self>, key: &Value) -> Option<Value> {
        let vars = self.hosts.get_item(key).ok().filter(|v| !v.is_undefined())?;
        Some(Value::from_object(Resolving { vars, env: self.env.clone() }))
    }

    fn enumerate(self: &Arc<Self>) -> Enumerator {
        match self.hosts.try_iter() {
            Ok(keys) => Enumerator::Values(keys.collect()),
            Err(_) => Enumerator::Empty,
        }
    }
}

impl Vars {
    /// No variables at all.
    pub fn empty() -> Vars {
        Vars::new(Json::Object(Default::default()))
    }

    /// Variables from a JSON object (anything else counts as no variables). Nothing is copied or converted now.
    pub fn new(json: Json) -> Vars {
        Vars::shared(Arc::new(json))
    }

    /// Like [`Vars::new`], sharing an object the caller keeps too (e.g. `hostvars` for every host).
    pub fn shared(json: Arc<Json>) -> Vars {
        Vars(Value::from_object(LazyVars { source: LazySource::Json(json), converted: Mutex::new(HashMap::new()) }))
    }

    /// Variables from a template value that is a map (or an object behaving as one).
    pub(crate) fn from_value(value: Value) -> Vars {
        Vars(value)
    }

    /// These variables with one more on top (`item`, a registered result, ...).
    pub fn with(&self, name: &str, value: &Json) -> Vars {
        let top = Value::from_pairs([(name.to_owned(), Value::from(Serde(value)))]);
        Vars(merge_maps([self.0.clone(), top]))
    }

    /// These variables with every entry of a JSON object on top (task `vars:`, `set_fact`s).
    pub fn with_map(&self, map: &Json) -> Vars {
        match map.as_object() {
            Some(m) if !m.is_empty() => Vars(merge_maps([self.0.clone(), Value::from(Serde(map))])),
            _ => self.clone(),
        }
    }

    /// These variables with a host's facts on top, as [`Vars::with_map`], without copying them: each fact is
    /// converted when a template first reads it. For a host's facts, which hold every registered result of the run
    /// so far (on the first master, the cluster's whole node list), and are layered under every task.
    pub fn with_facts(&self, facts: Arc<HostFacts>) -> Vars {
        if facts.is_empty() {
            return self.clone();
        }
        let top =
            Value::from_object(LazyVars { source: LazySource::Facts(facts), converted: Mutex::new(HashMap::new()) });
        Vars(merge_maps([self.0.clone(), top]))
    }

    /// These variables with `top` over them.
    pub fn layered_under(&self, top: &Vars) -> Vars {
        Vars(merge_maps([self.0.clone(), top.0.clone()]))
    }

    /// One variable as JSON, if it is defined.
    pub fn get(&self, name: &str) -> Option<Json> {
        let v = self.0.get_attr(name).ok().filter(|v| !v.is_undefined())?;
        serde_json::to_value(&v).ok()
    }

    pub(super) fn lookup(&self, name: &str) -> Option<Value> {
        self.0.get_attr(name).ok().filter(|v| !v.is_undefined())
    }
}

impl From<&Json> for Vars {
    fn from(json: &Json) -> Vars {
        Vars::new(json.clone())
    }
}

impl From<Json> for Vars {
    fn from(json: Json) -> Vars {
        Vars::new(json)
    }
}
