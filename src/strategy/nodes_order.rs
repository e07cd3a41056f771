//! The order the nodes phase takes the nodes in: the inventory's (the default), or the Machine Config Operator's
//! `zone-age`: alphabetically by the `topology.kubernetes.io/zone` label, oldest first (`metadata.creationTimestamp`)
//! within a zone, and by age alone where there are no zones. The order is fixed before the batches are cut, so serial
//! (or `upgrade_nodes_max_unavailable`) then takes that many nodes at a time in that order.

use std::collections::BTreeMap;
use std::fmt;

use serde_json::Value;

use crate::error::{Error, Result};
use crate::settings::Shown;

pub(crate) const ZONE_LABEL: &str = "topology.kubernetes.io/zone";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum NodesOrder {
    #[default]
    Inventory,
    ZoneAge,
}

impl NodesOrder {
    pub fn parse(text: &str) -> Result<NodesOrder> {
        match text.trim().trim_matches(|c| c == '"' || c == '\'') {
            "inventory" => Ok(NodesOrder::Inventory),
            "zone-age" => Ok(NodesOrder::ZoneAge),
            other => Err(Error::input(format!("upgrade_nodes_order `{other}` is not an order this tool knows")).hint(
                "write inventory (the inventory's order, the default) or zone-age (by zone label, oldest first)",
            )),
        }
    }

    pub fn from_value(value: &Value) -> Result<NodesOrder> {
        match value {
            Value::String(s) => NodesOrder::parse(s),
            other => NodesOrder::parse(&other.to_string()),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            NodesOrder::Inventory => "inventory",
            NodesOrder::ZoneAge => "zone-age",
        }
    }
}

impl fmt::Display for NodesOrder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl Shown for NodesOrder {
    fn shown(&self) -> String {
        format!("`{self}`")
    }
}

/// What the order needs to know of one node.
pub(crate) struct NodeFacts<'a> {
    pub labels: Option<&'a BTreeMap<String, String>>,
    /// `metadata.creationTimestamp`; offline there is none.
    pub created: Option<&'a str>,
}

/// The hosts in zone-age order. A node without the zone label sorts as the empty zone (before the zoned ones), as a
/// plain comparison of the label's value has it; equal zones and ages keep the inventory's order. RFC 3339 UTC
/// timestamps, as the API server writes them, compare as text.
pub(crate) fn zone_age<'a>(hosts: &[String], facts: impl Fn(&str) -> NodeFacts<'a>) -> Vec<String> {
    let mut keyed: Vec<(String, String, usize, String)> = hosts
        .iter()
        .enumerate()
        .map(|(i, h)| {
            let f = facts(h);
            let zone = f.labels.and_then(|l| l.get(ZONE_LABEL)).cloned().unwrap_or_default();
            (zone, f.created.unwrap_or_default().to_string(), i, h.clone())
        })
        .collect();
    keyed.sort_by(|a, b| (&a.0, &a.1, a.2).cmp(&(&b.0, &b.1, b.2)));
    keyed.into_iter().map(|(_, _, _, h)| h).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zones_alphabetically_then_oldest_first_and_no_zone_as_the_empty_zone() {
        let labels = |zone: &str| -> BTreeMap<String, String> {
            if zone.is_empty() { BTreeMap::new() } else { BTreeMap::from([(ZONE_LABEL.to_string(), zone.to_string())]) }
        };
        let nodes: BTreeMap<&str, (BTreeMap<String, String>, &str)> = BTreeMap::from([
            ("b-new", (labels("b"), "2024-03-01T00:00:00Z")),
            ("b-old", (labels("b"), "2024-01-01T00:00:00Z")),
            ("a-1", (labels("a"), "2024-05-01T00:00:00Z")),
            ("none-new", (labels(""), "2024-02-01T00:00:00Z")),
            ("none-old", (labels(""), "2023-12-01T00:00:00Z")),
        ]);
        let hosts: Vec<String> = ["b-new", "b-old", "a-1", "none-new", "none-old"].map(String::from).to_vec();
        let ordered = zone_age(&hosts, |h| NodeFacts { labels: Some(&nodes[h].0), created: Some(nodes[h].1) });
        assert_eq!(ordered, ["none-old", "none-new", "a-1", "b-old", "b-new"]);
    }

    #[test]
    fn offline_without_ages_the_inventory_order_holds_within_a_zone() {
        let hosts: Vec<String> = ["n2", "n1"].map(String::from).to_vec();
        assert_eq!(zone_age(&hosts, |_| NodeFacts { labels: None, created: None }), ["n2", "n1"]);
        assert!(NodesOrder::parse("random").is_err());
        assert_eq!(NodesOrder::parse("zone-age").unwrap(), NodesOrder::ZoneAge);
    }
}
