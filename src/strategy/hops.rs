//! A target more than one edge of the update graph away is reached hop by hop, each hop a complete upgrade (its own
//! etcd backup and gate, control plane, nodes, verify). The journal records each hop as it starts, so a resumed run
//! continues in the hop it stopped in rather than starting the path again from the masters' version.

use crate::error::{Error, Result};
use crate::journal::{History, JournalEntry};
use crate::phase::run::UpgradeRun;
use crate::settings::TargetVersion;
use crate::strategy::UpdateGraph;
use crate::time_format::utc_timestamp;
use crate::vocabulary::Phase;

/// One hop of the path: `index` of `total` (1-based), from the version before it to `target`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Hop {
    pub index: usize,
    pub total: usize,
    pub from: TargetVersion,
    pub target: TargetVersion,
}

impl Hop {
    pub(crate) fn journal_entry(&self, run: &UpgradeRun, final_target: &TargetVersion) -> JournalEntry {
        JournalEntry::HopStarted {
            run: run.run_id(),
            time: utc_timestamp(std::time::SystemTime::now()),
            hop: self.index,
            hops: self.total,
            from: self.from.to_string(),
            target: self.target.to_string(),
            final_target: final_target.to_string(),
        }
    }

    pub(crate) fn describe(&self) -> String {
        format!("hop {} of {}: {} -> {}", self.index, self.total, self.from, self.target)
    }
}

/// Reads the version the masters run (the oldest, when an upgrade was cut short between them) and decides the hops
/// to `target`. An earlier run of the same path that stopped in a hop is continued there. Touches nothing.
pub(crate) async fn decide(probe: &UpgradeRun, graph: &UpdateGraph, target: &TargetVersion) -> Result<Vec<Hop>> {
    let running = running_version(probe).await?;
    let hops = path_from(graph, &running, target, &probe.history)?;
    check_every_hop(&hops, target, probe.plan.flavor.flavor, probe.options.allow_skip_minor)
        .map_err(|e| e.in_file(&graph.path))?;
    let resumed = probe.history.hop.as_ref().is_some_and(|h| {
        !h.finished
            && h.final_target == target.to_string()
            && hops.first().is_some_and(|f| f.target.to_string() == h.target)
    });
    if let (true, Some(first)) = (resumed, hops.first()) {
        probe.notice(None, format!("resuming the update path at {}, where an earlier run stopped", first.describe()));
    }
    Ok(hops)
}

/// Every hop is checked as preflight checks a target, before the first starts: a later hop that goes back, skips a
/// minor (unless allowed) or, in the openshift flavour, leaves the minor would otherwise be refused only after the
/// hops before it had upgraded the whole cluster.
pub(crate) fn check_every_hop(
    hops: &[Hop],
    target: &TargetVersion,
    flavor: crate::flavor::Flavor,
    allow_skip_minor: bool,
) -> Result<()> {
    for hop in hops {
        let (from, to) = (&hop.from, &hop.target);
        let which = || format!("hop {} of {} of the update path to {target} ({from} -> {to})", hop.index, hop.total);
        if to < from {
            return Err(Error::input(format!("{} goes back to an older version", which()))
                .hint("a downgrade is not supported: fix the update graph's edges; nothing was changed"));
        }
        let other_minor = to.major != from.major || to.minor != from.minor;
        if flavor == crate::flavor::Flavor::Openshift && other_minor {
            return Err(Error::input(format!(
                "{} leaves the minor release: the openshift flavour upgrades within a minor only (z-stream)",
                which()
            ))
            .hint("upgrade across minors with openshift-ansible's playbooks; nothing was changed"));
        }
        let skips_minor = to.major != from.major || to.minor > from.minor + 1;
        if skips_minor && !allow_skip_minor {
            return Err(Error::input(format!("{} skips a minor version", which())).hint(
                "give the graph an edge through every minor (or pass --allow-skip-minor if your distribution supports                  it); nothing was changed",
            ));
        }
    }
    Ok(())
}

/// The oldest version the masters run. An update graph names releases (OpenShift's 3.11.z, 4.17.z), so a master
/// whose flavour decides "at the target" from what it has installed (every OpenShift 3.11.z kubelet reports
/// v1.11.0+d4cacc0) counts by its installed version, read as preflight reads it; the others by their kubelet.
async fn running_version(probe: &UpgradeRun) -> Result<TargetVersion> {
    let probed: Vec<&String> = probe.plan.masters.iter().filter(|m| probe.probes_host_version(m)).collect();
    let mut versions = Vec::new();
    for master in &probed {
        let version =
            crate::phase::cluster_reads::read_host_version(probe, Phase::Preflight, master).await.map_err(|why| {
                Error::hosts_failed(format!("cannot read what {master} has installed: {why}"))
                    .hint("upgrade_host_version_command must print the installed version")
            })?;
        versions.extend(TargetVersion::parse(&version).ok());
    }
    if probed.len() < probe.plan.masters.len() {
        let cluster = crate::phase::cluster_reads::read_cluster(probe, Phase::Preflight).await?;
        let masters: Vec<String> =
            probe.plan.masters.iter().filter(|m| !probed.contains(m)).map(|m| probe.node_name(m)).collect();
        versions.extend(
            cluster
                .iter()
                .filter(|n| masters.contains(&n.name))
                .filter_map(|n| TargetVersion::parse(&n.kubelet_version).ok()),
        );
    }
    versions.into_iter().min().ok_or_else(|| {
        Error::hosts_failed("the cluster reports no version for the masters")
            .hint("check that the masters are nodes of the cluster (node_name) and report a kubelet version")
    })
}

/// The hops from `running` to `target`, continuing the hop an earlier run of the same path stopped in.
pub(crate) fn path_from(
    graph: &UpdateGraph,
    running: &TargetVersion,
    target: &TargetVersion,
    history: &History,
) -> Result<Vec<Hop>> {
    let earlier = history.hop.as_ref().filter(|h| !h.finished && h.final_target == target.to_string());
    let resumed = earlier.and_then(|h| {
        let from = TargetVersion::parse(&h.from).ok()?;
        // The masters are at the hop's start or past it (never behind: that would be another cluster's journal).
        (from <= *running && graph.contains(&from)).then_some((from, h))
    });
    let from = resumed.as_ref().map_or(running.clone(), |(from, _)| from.clone());
    if !graph.contains(&from) {
        return Err(Error::input(format!("the masters run {from}, which is not a version of the update graph"))
            .in_file(&graph.path)
            .hint("use a graph that contains the running version (the update service's graph for this channel)"));
    }
    let Some(path) = graph.path(&from, target) else {
        let offered: Vec<String> = graph.targets(&from).into_iter().map(|(v, _)| v.to_string()).collect();
        let offered = if offered.is_empty() { "none".to_string() } else { offered.join(", ") };
        return Err(Error::input(format!(
            "the target {target} is not reachable from {from} in the update graph (no path of edges leads there)"
        ))
        .in_file(&graph.path)
        .hint(format!("pick a target the graph offers from {from}: {offered} (`upgrade versions` lists them)")));
    };
    // Hop numbers count from the start of the path an earlier run began, so a resumed hop keeps its number.
    let (offset, total) = match &resumed {
        Some((_, h)) if h.hops >= h.hop && path.len() == h.hops - h.hop + 1 => (h.hop - 1, h.hops),
        _ => (0, path.len()),
    };
    if path.is_empty() {
        // Already there (the masters at least): one run at the target finishes what is left, nodes included.
        return Ok(vec![Hop { index: 1, total: 1, from: from.clone(), target: target.clone() }]);
    }
    let mut hops = Vec::with_capacity(path.len());
    let mut previous = from;
    for (i, version) in path.into_iter().enumerate() {
        hops.push(Hop { index: offset + i + 1, total, from: previous, target: version.clone() });
        previous = version;
    }
    Ok(hops)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::journal::HopHistory;
    use crate::vocabulary::RunStatus;
    use std::path::Path;

    fn v(text: &str) -> TargetVersion {
        TargetVersion::parse(text).unwrap()
    }

    fn graph() -> UpdateGraph {
        let text = r#"{"nodes": [{"version": "1.28.5"}, {"version": "1.29.1"}, {"version": "1.30.2"}],
                       "edges": [[0, 1], [1, 2]]}"#;
        UpdateGraph::parse(text, Path::new("graph.json")).unwrap()
    }

    fn targets(hops: &[Hop]) -> Vec<(usize, usize, String)> {
        hops.iter().map(|h| (h.index, h.total, h.target.to_string())).collect()
    }

    #[test]
    fn a_target_two_edges_away_is_two_hops() {
        let hops = path_from(&graph(), &v("1.28.5"), &v("1.30.2"), &History::default()).unwrap();
        assert_eq!(targets(&hops), [(1, 2, "v1.29.1".into()), (2, 2, "v1.30.2".into())]);
        assert_eq!(hops[1].from, v("1.29.1"));
    }

    #[test]
    fn a_run_that_stopped_in_the_first_hop_continues_there_even_with_the_masters_past_it() {
        let mut history = History {
            hop: Some(HopHistory {
                hop: 1,
                hops: 2,
                from: "v1.28.5".into(),
                target: "v1.29.1".into(),
                final_target: "v1.30.2".into(),
                finished: false,
            }),
            ..History::default()
        };
        // The masters reached v1.29.1, the nodes of hop 1 did not: hop 1 runs again (its masters are skipped).
        let hops = path_from(&graph(), &v("1.29.1"), &v("1.30.2"), &history).unwrap();
        assert_eq!(targets(&hops), [(1, 2, "v1.29.1".into()), (2, 2, "v1.30.2".into())]);

        // Stopped in hop 2: it keeps its number.
        history.hop =
            Some(HopHistory { hop: 2, from: "v1.29.1".into(), target: "v1.30.2".into(), ..history.hop.unwrap() });
        let hops = path_from(&graph(), &v("1.29.1"), &v("1.30.2"), &history).unwrap();
        assert_eq!(targets(&hops), [(2, 2, "v1.30.2".into())]);
    }

    #[test]
    fn the_journal_keeps_the_last_hop_and_whether_its_run_succeeded() {
        use crate::journal::{Journal, JournalEntry};
        let dir = tempfile::tempdir().unwrap();
        let (mut journal, _) = Journal::open(dir.path(), false).unwrap();
        let run = journal.run_id().to_string();
        let hop = |hop: usize, target: &str| JournalEntry::HopStarted {
            run: run.clone(),
            time: "t".into(),
            hop,
            hops: 2,
            from: "v1.28.5".into(),
            target: target.into(),
            final_target: "v1.30.2".into(),
        };
        let finished = |status: RunStatus| JournalEntry::RunFinished { run: run.clone(), time: "t".into(), status };
        journal.record(&hop(1, "v1.29.1")).unwrap();
        journal.record(&finished(RunStatus::Success)).unwrap();
        journal.record(&hop(2, "v1.30.2")).unwrap();
        let second = journal.try_clone().unwrap();
        let last = second.history().unwrap().hop.unwrap();
        assert_eq!((last.hop, last.target.as_str(), last.finished), (2, "v1.30.2", false));
        journal.record(&finished(RunStatus::Interrupted)).unwrap();
        assert!(!journal.history().unwrap().hop.unwrap().finished, "an interrupted hop is not finished");
        journal.record(&finished(RunStatus::Success)).unwrap();
        assert!(journal.history().unwrap().hop.unwrap().finished);
    }

    #[test]
    fn every_hop_is_checked_before_the_first_skip_minor_downgrade_and_openshift_minors() {
        use crate::flavor::Flavor;
        let graph = |versions: &[&str]| {
            let nodes: Vec<String> = versions.iter().map(|v| format!("{{\"version\": \"{v}\"}}")).collect();
            let edges: Vec<String> = (1..versions.len()).map(|i| format!("[{}, {i}]", i - 1)).collect();
            let text = format!("{{\"nodes\": [{}], \"edges\": [{}]}}", nodes.join(", "), edges.join(", "));
            UpdateGraph::parse(&text, Path::new("graph.json")).unwrap()
        };
        let check = |versions: &[&str], flavor: Flavor, allow: bool| {
            let (first, last) = (v(versions[0]), v(versions[versions.len() - 1]));
            let hops = path_from(&graph(versions), &first, &last, &History::default()).unwrap();
            check_every_hop(&hops, &last, flavor, allow)
        };
        assert!(check(&["1.28.5", "1.29.1", "1.30.2"], Flavor::Kubeadm, false).is_ok());
        let err = check(&["1.28.5", "1.29.1", "1.31.0"], Flavor::Kubeadm, false).unwrap_err();
        assert!(
            err.message.contains("hop 2 of 2 of the update path to v1.31.0 (v1.29.1 -> v1.31.0) skips a minor"),
            "{err}"
        );
        assert_eq!(err.kind, crate::error::ErrorKind::Input, "bad input: exit 2");
        assert!(check(&["1.28.5", "1.29.1", "1.31.0"], Flavor::Kubeadm, true).is_ok(), "--allow-skip-minor");
        let err = check(&["1.28.5", "1.29.9", "1.29.1", "1.30.2"], Flavor::Kubeadm, false).unwrap_err();
        assert!(err.message.contains("hop 2 of 3") && err.message.contains("goes back"), "{err}");
        let err = check(&["3.11.100", "3.11.200", "3.12.0"], Flavor::Openshift, true).unwrap_err();
        assert!(err.message.contains("hop 2 of 2") && err.message.contains("within a minor"), "{err}");
    }

    #[test]
    fn an_unreachable_target_is_refused_with_what_the_graph_offers() {
        let err = path_from(&graph(), &v("1.30.2"), &v("1.29.1"), &History::default()).unwrap_err();
        assert!(err.message.contains("not reachable"), "{err}");
        let err = path_from(&graph(), &v("1.28.5"), &v("1.31.0"), &History::default()).unwrap_err();
        assert!(err.hint.as_deref().unwrap_or_default().contains("v1.29.1, v1.30.2"), "{err:?}");
        let err = path_from(&graph(), &v("1.27.0"), &v("1.29.1"), &History::default()).unwrap_err();
        assert!(err.message.contains("not a version of the update graph"), "{err}");
    }
}
