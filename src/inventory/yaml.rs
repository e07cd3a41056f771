//! Ansible's YAML inventory plugin (`plugins/inventory/yaml.py`): top-level keys are groups, each with `hosts`,
//! `vars` and `children`; unknown keys are skipped with a warning, as Ansible does.

use std::path::Path;

use serde_json::Value;

use super::builder::Builder;
use super::{Origin, Var, ranges};
use crate::error::{Error, Result};
use crate::vault::VaultSecrets;
use crate::yaml::{Node, NodeValue};

/// Ansible's `DataLoader.load` (`parsing/utils/yaml.py:from_yaml`) for inventory, vars and `-e` files: the text is
/// read as JSON first, and only when that fails as YAML. The two differ on scalars (`1e3` and `1.5e3` are numbers
/// in JSON, strings in YAML 1.1), so a JSON document takes its values from JSON and its positions from YAML.
pub(crate) fn load_data(text: &str, path: &Path) -> Result<Option<Node>> {
    let Ok(json) = serde_json::from_str::<Value>(text) else { return crate::yaml::parse(text, path) };
    match crate::yaml::parse(text, path) {
        Ok(Some(node)) => Ok(Some(overlay_json(&node, &json))),
        _ => Ok(Some(node_from_json(&json, 1, 1))),
    }
}

/// `node` with the values of `json`, keeping the positions of `node` where the two have the same shape.
fn overlay_json(node: &Node, json: &Value) -> Node {
    let value = match (&node.value, json) {
        (NodeValue::Map(entries), Value::Object(object)) if legacy_tag(object).is_none() => {
            let mut seen = std::collections::HashSet::new();
            let mut out = Vec::with_capacity(object.len());
            // JSON keeps the first position of a repeated key and its last value, as a Python dict does.
            for (k, v) in entries {
                let key = k.key_text();
                if !seen.insert(key.clone()) {
                    continue;
                }
                if let Some(j) = object.get(&key) {
                    let key_node = Node { value: NodeValue::Str(key), line: k.line, column: k.column };
                    out.push((key_node, overlay_json(v, j)));
                }
            }
            if out.len() != object.len() {
                return node_from_json(json, node.line, node.column);
            }
            NodeValue::Map(out)
        }
        (NodeValue::Seq(items), Value::Array(array)) if items.len() == array.len() => {
            NodeValue::Seq(items.iter().zip(array).map(|(n, j)| overlay_json(n, j)).collect())
        }
        _ => return node_from_json(json, node.line, node.column),
    };
    Node { value, line: node.line, column: node.column }
}

/// A JSON value as a node at one position. Ansible's JSON decoder turns `{"__ansible_vault": ...}` and
/// `{"__ansible_unsafe": ...}` into the tagged values YAML writes `!vault` and `!unsafe`.
fn node_from_json(json: &Value, line: usize, column: usize) -> Node {
    let at = |value| Node { value, line, column };
    let value = match json {
        Value::Null => NodeValue::Null,
        Value::Bool(b) => NodeValue::Bool(*b),
        Value::Number(n) => match (n.as_i64(), n.as_f64()) {
            (Some(i), _) => NodeValue::Int(i),
            (None, Some(f)) if n.is_f64() => NodeValue::Float(f),
            // Beyond i64: Python keeps the integer; text is closer to it than a rounded float.
            _ => NodeValue::Str(n.to_string()),
        },
        Value::String(s) => NodeValue::Str(s.clone()),
        Value::Array(items) => NodeValue::Seq(items.iter().map(|j| node_from_json(j, line, column)).collect()),
        Value::Object(object) => match legacy_tag(object) {
            Some((tag, inner)) => NodeValue::Tagged(tag.into(), Box::new(at(NodeValue::Str(inner.to_string())))),
            None => NodeValue::Map(
                object.iter().map(|(k, v)| (at(NodeValue::Str(k.clone())), node_from_json(v, line, column))).collect(),
            ),
        },
    };
    at(value)
}

fn legacy_tag(object: &serde_json::Map<String, Value>) -> Option<(&'static str, &str)> {
    if object.len() != 1 {
        return None;
    }
    let (key, value) = object.iter().next()?;
    let text = value.as_str()?;
    match key.as_str() {
        "__ansible_vault" => Some(("vault", text)),
        "__ansible_unsafe" => Some(("unsafe", text)),
        _ => None,
    }
}

/// Nesting of `children:` deeper than this is not an inventory anyone writes; it keeps recursion bounded.
const MAX_DEPTH: usize = 256;

pub(super) fn parse(builder: &mut Builder, doc: &Node, path: &Path) -> Result<()> {
    let Some(entries) = doc.as_map() else {
        return Err(Error::input("a YAML inventory must be a mapping of groups")
            .at(doc.location(path))
            .hint("start the file with `all:` and put hosts, vars and children under it"));
    };
    if let Some((key, _)) = entries.iter().find(|(k, v)| k.key_text() == "plugin" && !is_falsy(v)) {
        return Err(Error::input("this is an inventory plugin configuration file, not a YAML inventory")
            .at(key.location(path))
            .hint("inventory plugins are not supported: export the inventory with `ansible-inventory -i FILE --list -y` and use that"));
    }
    for (key, value) in entries {
        parse_group(builder, key, value, path, 0)?;
    }
    Ok(())
}

/// Returns the group's name, as Ansible's `_parse_group` does (even when the definition was skipped).
fn parse_group(builder: &mut Builder, key: &Node, data: &Node, path: &Path, depth: usize) -> Result<String> {
    if depth > MAX_DEPTH {
        return Err(Error::input("groups are nested too deeply").at(key.location(path)));
    }
    let name = group_name(key, path)?;
    let data = untag(data);
    if !(data.is_null() || data.as_map().is_some()) {
        builder.warn(format!(
            "{}: skipping '{name}' as it is not a valid group definition (found {})",
            key.location(path),
            data.type_name()
        ));
        return Ok(name);
    }
    builder.add_group(&name, Some(key.location(path)));
    let Some(sections) = data.as_map() else { return Ok(name) };

    for (section_key, section) in sections {
        let section_name = section_key.key_text();
        let section = untag(section);
        let is_known = matches!(section_name.as_str(), "vars" | "children" | "hosts");
        // A bare string is allowed for these sections: `hosts: web1` means `hosts: {web1: null}`.
        let single = match &section.value {
            NodeValue::Str(s) if is_known => Some((section.clone(), s.clone())),
            _ => None,
        };
        if is_known && single.is_none() && !(section.is_null() || section.as_map().is_some()) {
            return Err(Error::input(format!(
                "invalid \"{section_name}\" entry for \"{name}\" group: it must be a mapping, found {}",
                section.type_name()
            ))
            .at(section.location(path))
            .hint(format!("write `{section_name}:` followed by indented `name: value` entries")));
        }
        if !is_known {
            if section.is_null() {
                continue;
            }
            let why = if section.as_map().is_some() {
                "only \"vars\", \"children\" and \"hosts\" are valid".to_string()
            } else {
                format!("it is not a mapping, it is {}", section.type_name())
            };
            builder.warn(format!(
                "{}: skipping key ({section_name}) in group ({name}): {why}",
                section_key.location(path)
            ));
            continue;
        }
        let entries: Vec<(Node, Node)> = match single {
            Some((node, text)) => {
                let key = Node { value: NodeValue::Str(text), line: node.line, column: node.column };
                let null = Node { value: NodeValue::Null, line: node.line, column: node.column };
                vec![(key, null)]
            }
            None => section.as_map().map(<[_]>::to_vec).unwrap_or_default(),
        };
        match section_name.as_str() {
            "vars" => {
                for (var_key, value) in &entries {
                    let var = to_var(value, var_key, path, &builder.vault)?;
                    builder
                        .set_group_var(&name, &var_key.key_text(), var)
                        .map_err(|e| Error::input(e).at(var_key.location(path)))?;
                }
            }
            "children" => {
                for (child_key, child) in &entries {
                    let child_name = parse_group(builder, child_key, child, path, depth + 1)?;
                    builder.add_child(&name, &child_name).map_err(|e| {
                        Error::input(e)
                            .at(child_key.location(path))
                            .hint("a child group needs a mapping (or nothing) under its name, and no loops")
                    })?;
                }
            }
            _ => {
                for (host_key, host_vars) in &entries {
                    parse_host(builder, &name, host_key, host_vars, path)?;
                }
            }
        }
    }
    Ok(name)
}

fn parse_host(builder: &mut Builder, group: &str, key: &Node, vars: &Node, path: &Path) -> Result<()> {
    let at = key.location(path);
    let pattern = match &untag(key).value {
        NodeValue::Str(s) => s.clone(),
        _ => {
            return Err(Error::input(format!("host pattern {} must be a string", key.key_text()))
                .at(at)
                .hint("enclose integers and floats in quotation marks"));
        }
    };
    let (hostnames, port) = ranges::expand_host_pattern(&pattern).map_err(|e| {
        Error::input(format!("bad host pattern `{pattern}`: {e}"))
            .at(at.clone())
            .hint("ranges look like node[01:20], node[a:f] or node[1:10:2]")
    })?;
    let vars = untag(vars);
    let entries: &[(Node, Node)] = if is_falsy(vars) {
        &[]
    } else {
        match vars.as_map() {
            Some(m) => m,
            None => {
                return Err(Error::input(format!(
                    "the variables of host `{pattern}` must be a mapping, found {}",
                    vars.type_name()
                ))
                .at(vars.location(path))
                .hint("write the host as `name:` with indented `variable: value` lines, or `name:` alone"));
            }
        }
    };
    let mut parsed = Vec::with_capacity(entries.len());
    for (var_key, value) in entries {
        parsed.push((var_key.key_text(), to_var(value, var_key, path, &builder.vault)?));
    }
    for host in &hostnames {
        builder
            .add_host(host, Some(group), port.as_deref(), &at)
            .map_err(|e| Error::input(e).at(at.clone()).hint("give every host a name"))?;
        for (k, var) in &parsed {
            builder.set_host_var(host, k, var.clone());
        }
    }
    Ok(())
}

fn group_name(key: &Node, path: &Path) -> Result<String> {
    match &untag(key).value {
        NodeValue::Str(s) if !s.is_empty() => Ok(s.clone()),
        NodeValue::Str(_) => {
            Err(Error::input("invalid empty group name").at(key.location(path)).hint("name the group"))
        }
        _ => Err(Error::input(format!("invalid group name {}: expected a string", key.key_text()))
            .at(key.location(path))
            .hint("quote the group name")),
    }
}

/// A variable from a YAML value, its `!vault` values decrypted, keeping where it was set.
pub(super) fn to_var(value: &Node, key: &Node, path: &Path, vault: &VaultSecrets) -> Result<Var> {
    let value = super::vault_values::decrypted_json(value, key, path, vault)?;
    Ok(Var { value, origin: Origin::Inventory(key.location(path)) })
}

fn untag(node: &Node) -> &Node {
    match &node.value {
        NodeValue::Tagged(tag, inner) if !tag.ends_with("vault") => untag(inner),
        _ => node,
    }
}

/// Python's truthiness, for `host_vars or {}`.
fn is_falsy(node: &Node) -> bool {
    match &node.value {
        NodeValue::Null => true,
        NodeValue::Bool(b) => !b,
        NodeValue::Int(i) => *i == 0,
        NodeValue::Float(f) => *f == 0.0,
        NodeValue::Str(s) => s.is_empty(),
        NodeValue::Seq(items) => items.is_empty(),
        NodeValue::Map(entries) => entries.is_empty(),
        NodeValue::Tagged(..) => false,
    }
}
