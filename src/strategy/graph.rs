//! The update graph (OpenShift Update Service format): which versions a cluster may go to from which, and the path
//! of hops to a target more than one edge away.
//!
//! `{"nodes": [{"version": "1.28.5"}, ...], "edges": [[0, 1], ...]}`: an edge is a pair of indices into `nodes`,
//! from the older release to the one it may update to. Other keys (`payload`, `metadata`, `conditionalEdges`) are
//! ignored, so a graph saved from the update service's `/api/upgrades_info/v1/graph` reads as it is.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::error::{Error, Location, Result};
use crate::settings::TargetVersion;

#[derive(Debug, Clone, PartialEq)]
pub struct UpdateGraph {
    /// The file it was read from, for messages.
    pub path: PathBuf,
    versions: Vec<TargetVersion>,
    /// For each node, the nodes an edge leads to.
    next: Vec<Vec<usize>>,
}

#[derive(Deserialize)]
struct GraphFile {
    nodes: Vec<GraphNode>,
    #[serde(default)]
    edges: Vec<(i64, i64)>,
}

#[derive(Deserialize)]
struct GraphNode {
    version: String,
}

const GRAPH_HINT: &str = "write the update service's graph format: {\"nodes\": [{\"version\": \"1.28.5\"}, ...], \"edges\": [[0, 1], ...]} \
     (an edge is a pair of indices into nodes, from the older version to the newer)";

impl UpdateGraph {
    pub fn load(path: &Path) -> Result<UpdateGraph> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            // No location of its own: the caller points at the variable that named the file.
            Error::input(format!("cannot read the update graph {}: {e}", path.display()))
                .hint("upgrade_update_graph names a JSON file, relative to the inventory's directory")
        })?;
        UpdateGraph::parse(&text, path)
    }

    pub fn parse(text: &str, path: &Path) -> Result<UpdateGraph> {
        let file: GraphFile = serde_json::from_str(text).map_err(|e| {
            Error::input(format!("the update graph is not valid: {e}"))
                .at(Location::new(path, e.line(), e.column()))
                .hint(GRAPH_HINT)
        })?;
        let mut versions = Vec::with_capacity(file.nodes.len());
        for (i, node) in file.nodes.iter().enumerate() {
            let version = TargetVersion::parse(&node.version).map_err(|e| {
                Error::input(format!("the update graph's node {i}: {}", e.message)).in_file(path).hint(GRAPH_HINT)
            })?;
            if let Some(j) = versions.iter().position(|v| v == &version) {
                return Err(Error::input(format!("the update graph lists {version} twice (nodes {j} and {i})"))
                    .in_file(path)
                    .hint("each release is one node of the graph"));
            }
            versions.push(version);
        }
        let mut next = vec![Vec::new(); versions.len()];
        for (from, to) in &file.edges {
            let index = |i: i64| usize::try_from(i).ok().filter(|&i| i < versions.len());
            let (Some(f), Some(t)) = (index(*from), index(*to)) else {
                return Err(Error::input(format!(
                    "the update graph's edge [{from}, {to}] names a node that does not exist (it has {} nodes)",
                    versions.len()
                ))
                .in_file(path)
                .hint(GRAPH_HINT));
            };
            if !next[f].contains(&t) {
                next[f].push(t);
            }
        }
        Ok(UpdateGraph { path: path.to_path_buf(), versions, next })
    }

    pub fn contains(&self, version: &TargetVersion) -> bool {
        self.index(version).is_some()
    }

    fn index(&self, version: &TargetVersion) -> Option<usize> {
        self.versions.iter().position(|v| v == version)
    }

    /// Every version the graph offers from `from`, each with the path to it (the hops, `from` left out), by version.
    pub fn targets(&self, from: &TargetVersion) -> Vec<(TargetVersion, Vec<TargetVersion>)> {
        let Some(start) = self.index(from) else { return Vec::new() };
        let previous = self.search(start);
        let mut found: Vec<(TargetVersion, Vec<TargetVersion>)> = (0..self.versions.len())
            .filter(|&i| i != start && previous[i].is_some())
            .map(|i| (self.versions[i].clone(), self.walk_back(&previous, start, i)))
            .collect();
        found.sort_by(|a, b| a.0.cmp(&b.0));
        found
    }

    /// The hops from `from` to `to` (`to` last, `from` left out): the fewest edges; among paths as short, the one
    /// through the newest releases (the latest patch of each minor carries its fixes). `None` when unreachable.
    pub fn path(&self, from: &TargetVersion, to: &TargetVersion) -> Option<Vec<TargetVersion>> {
        let (start, end) = (self.index(from)?, self.index(to)?);
        if start == end {
            return Some(Vec::new());
        }
        let previous = self.search(start);
        previous[end].map(|_| self.walk_back(&previous, start, end))
    }

    /// Breadth-first from `start`, newest neighbours first, so the first path found to a node is the preferred one.
    fn search(&self, start: usize) -> Vec<Option<usize>> {
        let mut previous: Vec<Option<usize>> = vec![None; self.versions.len()];
        let mut seen = vec![false; self.versions.len()];
        seen[start] = true;
        let mut queue = VecDeque::from([start]);
        while let Some(at) = queue.pop_front() {
            let mut next = self.next[at].clone();
            next.sort_by(|a, b| self.versions[*b].cmp(&self.versions[*a]));
            for n in next {
                if !seen[n] {
                    seen[n] = true;
                    previous[n] = Some(at);
                    queue.push_back(n);
                }
            }
        }
        previous
    }

    fn walk_back(&self, previous: &[Option<usize>], start: usize, end: usize) -> Vec<TargetVersion> {
        let mut path = vec![self.versions[end].clone()];
        let mut at = end;
        while let Some(p) = previous[at] {
            if p == start {
                break;
            }
            path.push(self.versions[p].clone());
            at = p;
        }
        path.reverse();
        path
    }

    /// The versions of the graph, oldest first.
    pub fn versions(&self) -> Vec<TargetVersion> {
        let mut all = self.versions.clone();
        all.sort();
        all
    }
}

/// Without a graph, kubeadm's rule: one minor at a time. The hops from `from` to `to`, one per minor (`vX.Y.x` for
/// the minors in between, whose patch the operator picks; `to` itself last).
pub(crate) fn minor_hops(from: &TargetVersion, to: &TargetVersion) -> Vec<String> {
    if from.major != to.major || to.minor <= from.minor {
        return vec![to.to_string()];
    }
    let mut hops: Vec<String> = (from.minor + 1..to.minor).map(|m| format!("v{}.{m}.x", from.major)).collect();
    hops.push(to.to_string());
    hops
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(text: &str) -> TargetVersion {
        TargetVersion::parse(text).unwrap()
    }

    fn graph(text: &str) -> UpdateGraph {
        UpdateGraph::parse(text, Path::new("graph.json")).unwrap()
    }

    const GRAPH: &str = r#"{"nodes": [{"version": "1.28.5"}, {"version": "1.29.0"}, {"version": "1.29.1"},
        {"version": "1.30.2"}, {"version": "1.31.0"}],
        "edges": [[0, 1], [0, 2], [1, 3], [2, 3], [3, 4]]}"#;

    #[test]
    fn a_direct_edge_is_one_hop_and_a_far_target_a_path_through_the_newest_releases() {
        let g = graph(GRAPH);
        assert_eq!(g.path(&v("1.28.5"), &v("v1.29.0")), Some(vec![v("1.29.0")]));
        assert_eq!(g.path(&v("1.28.5"), &v("1.30.2")), Some(vec![v("1.29.1"), v("1.30.2")]));
        assert_eq!(g.path(&v("1.28.5"), &v("1.31.0")).map(|p| p.len()), Some(3));
        assert_eq!(g.path(&v("1.28.5"), &v("1.28.5")), Some(vec![]));
    }

    #[test]
    fn a_version_without_a_path_or_outside_the_graph_is_unreachable() {
        let g = graph(GRAPH);
        assert_eq!(g.path(&v("1.30.2"), &v("1.29.1")), None, "no edge goes back");
        assert_eq!(g.path(&v("1.28.5"), &v("1.32.0")), None);
        assert_eq!(g.path(&v("1.27.0"), &v("1.29.1")), None);
    }

    #[test]
    fn targets_lists_every_reachable_version_with_its_path() {
        let g = graph(GRAPH);
        let targets = g.targets(&v("1.29.1"));
        let shown: Vec<(String, usize)> = targets.iter().map(|(t, p)| (t.to_string(), p.len())).collect();
        assert_eq!(shown, [("v1.30.2".to_string(), 1), ("v1.31.0".to_string(), 2)]);
    }

    #[test]
    fn a_bad_graph_names_what_is_wrong() {
        let err = UpdateGraph::parse(r#"{"nodes": [{"version": "1.28.5"}], "edges": [[0, 3]]}"#, Path::new("g"));
        assert!(err.unwrap_err().message.contains("edge [0, 3]"));
        let err = UpdateGraph::parse("{\"nodes\": [\n  {\"version\": 1}]}", Path::new("g")).unwrap_err();
        assert_eq!(err.location.as_ref().map(|l| l.line), Some(2), "{err}");
        let err = UpdateGraph::parse(r#"{"nodes": [{"version": "4.x"}]}"#, Path::new("g")).unwrap_err();
        assert!(err.message.contains("node 0"), "{err}");
    }

    #[test]
    fn without_a_graph_the_hops_are_one_minor_each() {
        assert_eq!(minor_hops(&v("1.28.5"), &v("1.31.2")), ["v1.29.x", "v1.30.x", "v1.31.2"]);
        assert_eq!(minor_hops(&v("1.28.5"), &v("1.29.2")), ["v1.29.2"]);
    }
}
