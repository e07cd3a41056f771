//! The template vocabulary the host variables and the templar share: what a host's facts are. A leaf: the templar
//! (template.rs) reads facts, the host variables (host_vars.rs) keep them, and neither needs the other for this.

use std::sync::Arc;

use serde_json::Value;

/// One host's facts and registered results, in the order they were first set. Each value is shared: a snapshot of
/// the map, which every task's variables hold while the task runs, copies no value, and a fact set while a snapshot
/// is held copies the others' handles only (the first master's registered node list is tens of MB on a large
/// cluster, and its tasks register while earlier tasks' snapshots are alive).
///
/// The names are shared too (`FactStore` (host_vars.rs) keeps one copy of each): every host has the same 57 defaults.
pub type HostFacts = indexmap::IndexMap<Arc<str>, Arc<Value>>;
