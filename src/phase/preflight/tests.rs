// The moved tests read the parent as the single file it was: what each file of it imports, and more.
#![allow(unused_imports)]

use super::{
    cluster_access::*, decision::*, drain_blockers::*, health_gate::*, host_checks::*, lock::*, node_names::*,
    reachable::*,
};
use crate::cluster::ClusterNode;
use crate::error::{Error, Result};
use crate::flavor::Flavor;
use crate::journal::History;
use crate::phase::run::UpgradeRun;
use crate::settings::TargetVersion;
use crate::tasks::host_vars::HostFacts;
use crate::vocabulary::Phase;
use crate::vocabulary::{HostOutcome, HostReport, Resume, Step};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::time::Instant;

use super::*;
use crate::error::{ErrorKind, Location};
use crate::inventory::{Group, Host, Inventory, Vars};
use crate::journal::{HostHistory, HostRecord};
use crate::plan::{Plan, PlanRequest};
use crate::settings::SettingFlags;

/// Three masters (m1 first) and two nodes, every host its own node.
fn plan(phases: &[&str]) -> (Plan, Inventory) {
    let dir = std::env::temp_dir();
    let mut inv = Inventory::new(dir.join("hosts"), dir);
    for (group, hosts) in [("masters", &["m1", "m2"][..]), ("etcd", &["m1"]), ("nodes", &["m1", "m2", "n1", "n2"])] {
        for h in hosts {
            inv.hosts.entry(h.to_string()).or_insert_with(|| Host::new(h, Location::new("hosts", 1, 1)));
        }
        let mut g = Group::new(group);
        g.hosts = hosts.iter().map(|h| h.to_string()).collect();
        inv.groups.insert(group.to_string(), g);
    }
    inv.refresh();
    let request = PlanRequest {
        phases: phases.iter().map(|p| p.to_string()).collect(),
        flags: SettingFlags { target_version: Some("v1.29.1".into()), ..SettingFlags::default() },
        ..PlanRequest::default()
    };
    (Plan::build(&inv, &Vars::new(), &request).unwrap(), inv)
}

fn cluster(versions: &[(&str, &str)]) -> HashMap<String, ClusterNode> {
    versions
        .iter()
        .map(|(name, version)| {
            let node = ClusterNode {
                name: name.to_string(),
                labels: BTreeMap::new(),
                unschedulable: false,
                kubelet_version: version.to_string(),
                ready: true,
                created: String::new(),
                annotations: BTreeMap::new(),
            };
            (name.to_string(), node)
        })
        .collect()
}

fn history(entries: &[(Phase, &str, HostHistory)]) -> History {
    let hosts = entries.iter().map(|(p, h, hh)| ((*p, h.to_string()), hh.clone())).collect();
    History { hosts, runs: 1, ..History::default() }
}

fn in_flight() -> HostHistory {
    HostHistory { in_flight: true, target: Some("v1.29.1".into()), ..HostHistory::default() }
}

fn upgraded() -> HostHistory {
    HostHistory { finished: Some(HostRecord::Upgraded), target: Some("v1.29.1".into()), ..HostHistory::default() }
}

/// What a case expects: masters to upgrade, skipped masters, nodes to upgrade, skipped nodes with their reason,
/// and a notice containing this text (or none); or an error of this kind whose message contains this text.
enum Want {
    Decided {
        masters: &'static [&'static str],
        skipped: &'static [&'static str],
        nodes: &'static [&'static str],
        skipped_nodes: &'static [(&'static str, &'static str)],
        notice: Option<&'static str>,
    },
    Refused(ErrorKind, &'static str),
}

// Long because it is a table: one row per case, then one loop that checks them all.
#[test]
fn only_kubernetes_node_names_pass() {
    for ok in ["n1", "node-1", "ip-10-0-0-1.eu-west-1.compute.internal", "10.0.0.1", "a"] {
        assert!(is_dns1123_subdomain(ok), "{ok}");
    }
    let long = "a".repeat(254);
    for bad in ["", "n02;touch${IFS}/tmp/x", "n1 n2", "$(id)", "N1", "-n1", "n1-", "a..b", "n1\n", long.as_str()] {
        assert!(!is_dns1123_subdomain(bad), "{bad}");
    }
}

#[test]
fn the_decision_table() {
    const OLD: &str = "v1.28.5";
    const NEW: &str = "v1.29.1";
    let all_old = [("m1", OLD), ("m2", OLD), ("n1", OLD), ("n2", OLD)];
    #[rustfmt::skip]
    // (name, arguments, kubelet versions, earlier runs, --allow-skip-minor, expected)
    type Case<'a> = (&'a str, Vec<&'a str>, Vec<(&'a str, &'a str)>, History, bool, Want);
    let cases: Vec<Case> = vec![
        (
            "everything to do",
            vec![],
            all_old.to_vec(),
            History::default(),
            false,
            Want::Decided {
                masters: &["m1", "m2"],
                skipped: &[],
                nodes: &["n1", "n2"],
                skipped_nodes: &[],
                notice: None,
            },
        ),
        (
            "a node at the target is skipped",
            vec![],
            vec![("m1", OLD), ("m2", OLD), ("n1", NEW), ("n2", OLD)],
            History::default(),
            false,
            Want::Decided {
                masters: &["m1", "m2"],
                skipped: &[],
                nodes: &["n1", "n2"],
                skipped_nodes: &[("n1", "already at v1.29.1")],
                notice: None,
            },
        ),
        (
            "a node newer than the target is skipped",
            vec![],
            vec![("m1", OLD), ("m2", OLD), ("n1", "v1.29.3"), ("n2", OLD)],
            History::default(),
            false,
            Want::Decided {
                masters: &["m1", "m2"],
                skipped: &[],
                nodes: &["n1", "n2"],
                skipped_nodes: &[("n1", "already runs v1.29.3, newer than the target")],
                notice: None,
            },
        ),
        (
            "an earlier run upgraded it",
            vec![],
            vec![("m1", OLD), ("m2", OLD), ("n1", NEW), ("n2", OLD)],
            history(&[(Phase::Nodes, "n1", upgraded())]),
            false,
            Want::Decided {
                masters: &["m1", "m2"],
                skipped: &[],
                nodes: &["n1", "n2"],
                skipped_nodes: &[("n1", "upgraded by an earlier run (runs v1.29.1)")],
                notice: None,
            },
        ),
        (
            "a node at the target left half-way runs again",
            vec![],
            vec![("m1", OLD), ("m2", OLD), ("n1", NEW), ("n2", OLD)],
            history(&[(Phase::Nodes, "n1", in_flight())]),
            false,
            Want::Decided {
                masters: &["m1", "m2"],
                skipped: &[],
                nodes: &["n1", "n2"],
                skipped_nodes: &[],
                notice: None,
            },
        ),
        (
            "masters split between the target and one older: in progress",
            vec![],
            vec![("m1", NEW), ("m2", OLD), ("n1", OLD), ("n2", OLD)],
            History::default(),
            false,
            Want::Decided {
                masters: &["m2"],
                skipped: &["m1"],
                nodes: &["n1", "n2"],
                skipped_nodes: &[],
                notice: Some("control-plane upgrade in progress: m1 already at v1.29.1"),
            },
        ),
        (
            "masters on two older versions",
            vec![],
            vec![("m1", "v1.27.3"), ("m2", OLD), ("n1", OLD), ("n2", OLD)],
            History::default(),
            false,
            Want::Refused(ErrorKind::HostsFailed, "the masters run different versions"),
        ),
        (
            "a downgrade",
            vec![],
            vec![("m1", "v1.30.0"), ("m2", "v1.30.0"), ("n1", OLD), ("n2", OLD)],
            History::default(),
            false,
            Want::Refused(ErrorKind::Input, "older than the control plane's v1.30.0"),
        ),
        (
            "a skipped minor",
            vec![],
            vec![("m1", "v1.27.3"), ("m2", "v1.27.3"), ("n1", OLD), ("n2", OLD)],
            History::default(),
            false,
            Want::Refused(ErrorKind::Input, "skips a minor version"),
        ),
        (
            "a skipped minor, allowed",
            vec![],
            vec![("m1", "v1.27.3"), ("m2", "v1.27.3"), ("n1", OLD), ("n2", OLD)],
            History::default(),
            true,
            Want::Decided {
                masters: &["m1", "m2"],
                skipped: &[],
                nodes: &["n1", "n2"],
                skipped_nodes: &[],
                notice: None,
            },
        ),
        (
            "nodes before the masters",
            vec!["nodes"],
            all_old.to_vec(),
            History::default(),
            false,
            Want::Refused(ErrorKind::Input, "the nodes cannot go to v1.29.1 while the masters run v1.28.5"),
        ),
        (
            "nodes after the masters",
            vec!["nodes"],
            vec![("m1", NEW), ("m2", NEW), ("n1", OLD), ("n2", OLD)],
            History::default(),
            false,
            Want::Decided { masters: &[], skipped: &[], nodes: &["n1", "n2"], skipped_nodes: &[], notice: None },
        ),
        (
            "a host the cluster does not know",
            vec![],
            vec![("m1", OLD), ("m2", OLD), ("n1", OLD)],
            History::default(),
            false,
            Want::Refused(ErrorKind::Input, "the cluster has no node for: n2"),
        ),
    ];
    for (name, phases, versions, history, allow_skip_minor, want) in cases {
        let (plan, inventory) = plan(&phases);
        let target = TargetVersion::parse(NEW).unwrap();
        let input = DecisionInput {
            plan: &plan,
            target: &target,
            allow_skip_minor,
            inventory: &inventory,
            history: &history,
            node_names: HashMap::new(),
            installed: HashMap::new(),
            probes_installed: BTreeSet::new(),
        };
        let mut notices = Vec::new();
        let got = decide_from(&input, &cluster(&versions), &|kept| kept, &mut |n| notices.push(n));
        match (want, got) {
            (Want::Decided { masters, skipped, nodes, skipped_nodes, notice }, Ok(d)) => {
                assert_eq!(d.masters, masters, "{name}: masters");
                let skipped_got: Vec<&str> = d.skipped.iter().map(|r| r.host.as_str()).collect();
                assert_eq!(skipped_got, skipped, "{name}: skipped masters");
                assert_eq!(d.nodes_selected.unwrap_or_default(), nodes, "{name}: nodes");
                let skipped_nodes: HashMap<String, String> =
                    skipped_nodes.iter().map(|(h, r)| (h.to_string(), r.to_string())).collect();
                assert_eq!(d.nodes_skipped, skipped_nodes, "{name}: skipped nodes");
                match notice {
                    Some(text) => assert!(notices.iter().any(|n| n.contains(text)), "{name}: {notices:?}"),
                    None => assert!(notices.is_empty(), "{name}: {notices:?}"),
                }
            }
            (Want::Refused(kind, text), Err(e)) => {
                assert_eq!(e.kind, kind, "{name}: {e}");
                assert!(e.message.contains(text), "{name}: {e}");
            }
            (Want::Decided { .. }, Err(e)) => panic!("{name}: refused: {e}"),
            (Want::Refused(..), Ok(d)) => panic!("{name}: decided {d:?}"),
        }
    }
}

#[test]
fn an_installed_version_decides_and_is_said_so() {
    let (plan, inventory) = plan(&["control-plane"]);
    let target = TargetVersion::parse("v1.29.1").unwrap();
    let history = History::default();
    let input = DecisionInput {
        plan: &plan,
        target: &target,
        allow_skip_minor: false,
        inventory: &inventory,
        history: &history,
        node_names: HashMap::from([("m2".to_string(), "master-2".to_string())]),
        installed: HashMap::from([
            ("m1".to_string(), "v1.29.1".to_string()),
            ("m2".to_string(), "v1.29.1".to_string()),
        ]),
        probes_installed: BTreeSet::from(["m1".to_string(), "m2".to_string()]),
    };
    // The kubelets still say the old version: what is installed counts.
    let cluster = cluster(&[("m1", "v1.29.0"), ("master-2", "v1.29.0"), ("n1", "v1.29.0"), ("n2", "v1.29.0")]);
    let d = decide_from(&input, &cluster, &|kept| kept, &mut |_| {}).unwrap();
    assert!(d.masters.is_empty());
    let m2 = &d.skipped[1];
    assert_eq!((m2.host.as_str(), m2.node.as_deref()), ("m2", Some("master-2")));
    assert_eq!(m2.outcome, HostOutcome::Skipped { reason: "already at v1.29.1: installed on the host".into() });
}
