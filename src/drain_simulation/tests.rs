//! The fit simulation, scenario by scenario: which pods a drain evicts, where they go, and why one stays Pending.

use serde_json::{Value, json};

use super::*;

/// A Ready, schedulable node with `cpu` and `memory` allocatable and room for 110 pods.
fn node(name: &str, cpu: &str, memory: &str) -> Value {
    json!({"metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
           "spec": {},
           "status": {"allocatable": {"cpu": cpu, "memory": memory, "pods": "110"},
                      "conditions": [{"type": "Ready", "status": "True"}]}})
}

/// `value` with `what` at `pointer` (a JSON pointer: `~1` is a `/` in a key), the objects on the way made.
fn with(mut value: Value, pointer: &str, what: Value) -> Value {
    let (parent, key) = pointer.rsplit_once('/').expect("a pointer");
    let key = key.replace("~1", "/");
    let mut at = &mut value;
    for part in parent.split('/').filter(|p| !p.is_empty()) {
        at = at.as_object_mut().expect("an object").entry(part.to_string()).or_insert_with(|| json!({}));
    }
    at.as_object_mut().expect("an object").insert(key.to_string(), what);
    value
}

/// A Running pod of a ReplicaSet, labelled app=NAME's prefix, on `node`, requesting `cpu` and `memory`.
fn pod(name: &str, node: &str, cpu: &str, memory: &str) -> Value {
    let app = name.split('-').next().unwrap_or(name);
    json!({"metadata": {"name": name, "namespace": "default", "labels": {"app": app},
                        "ownerReferences": [{"kind": "ReplicaSet", "name": app, "controller": true}]},
           "spec": {"nodeName": node, "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu, "memory": memory}}}]},
           "status": {"phase": "Running"}})
}

fn best_effort_pod(name: &str, node: &str) -> Value {
    with(pod(name, node, "0", "0"), "/spec/containers", json!([{"name": "c"}]))
}

fn lists(nodes: &[Value], pods: &[Value], pdbs: &[Value]) -> ClusterLists {
    let list = |items: &[Value]| json!({"kind": "List", "items": items}).to_string();
    ClusterLists::read(&list(pods), &list(pdbs), &list(nodes)).expect("the lists read")
}

fn batches(list: &[&[&str]]) -> Vec<Vec<String>> {
    list.iter().map(|b| b.iter().map(|n| n.to_string()).collect()).collect()
}

fn evicted<'a>(simulation: &'a BatchSimulation, pod: &str) -> &'a EvictedPod {
    simulation
        .evicted
        .iter()
        .find(|p| p.pod == format!("default/{pod}"))
        .unwrap_or_else(|| panic!("{pod} evicted: {simulation:#?}"))
}

/// One scenario: the cluster, n1 drained alone, and what becomes of the pod `web-1` (on n1).
struct Case {
    name: &'static str,
    nodes: Vec<Value>,
    pods: Vec<Value>,
    /// `placed on NODE`, or `pending: TEXT` with the text the reason holds.
    expect: &'static str,
}

#[test]
fn each_of_the_schedulers_filters_that_leave_a_pod_pending_is_honoured() {
    let web = || pod("web-1", "n1", "500m", "256Mi");
    let zone = |n: Value, z: &str| with(n, "/metadata/labels/topology.kubernetes.io~1zone", json!(z));
    let cases = vec![
        Case {
            name: "room on n2",
            nodes: vec![node("n1", "2", "4Gi"), node("n2", "2", "4Gi")],
            pods: vec![web()],
            expect: "placed on n2",
        },
        Case {
            name: "n2's CPU is taken",
            nodes: vec![node("n1", "2", "4Gi"), node("n2", "2", "4Gi")],
            pods: vec![web(), pod("big-1", "n2", "1800m", "1Gi")],
            expect: "pending: insufficient cpu on n2 (200m free)",
        },
        Case {
            name: "n2's memory is taken",
            nodes: vec![node("n1", "2", "4Gi"), node("n2", "2", "4Gi")],
            pods: vec![web(), pod("big-1", "n2", "100m", "3900Mi")],
            expect: "pending: insufficient memory on n2 (196Mi free)",
        },
        Case {
            name: "the most room wins",
            nodes: vec![node("n1", "2", "4Gi"), node("n2", "2", "4Gi"), node("n3", "4", "8Gi")],
            pods: vec![web()],
            expect: "placed on n3",
        },
        Case {
            name: "a node selector only n1 matches",
            nodes: vec![with(node("n1", "2", "4Gi"), "/metadata/labels/disk", json!("ssd")), node("n2", "2", "4Gi")],
            pods: vec![with(web(), "/spec/nodeSelector", json!({"disk": "ssd"}))],
            expect: "pending: node selector/affinity not matched on n2",
        },
        Case {
            name: "required node affinity to zone a, n2 in zone b",
            nodes: vec![
                zone(node("n1", "2", "4Gi"), "a"),
                zone(node("n2", "2", "4Gi"), "b"),
                zone(node("n3", "2", "4Gi"), "a"),
            ],
            pods: vec![with(
                web(),
                "/spec/affinity/nodeAffinity/requiredDuringSchedulingIgnoredDuringExecution/nodeSelectorTerms",
                json!([{"matchExpressions": [{"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["a"]}]}]),
            )],
            expect: "placed on n3",
        },
        Case {
            name: "a taint the pod does not tolerate",
            nodes: vec![
                node("n1", "2", "4Gi"),
                with(
                    node("n2", "2", "4Gi"),
                    "/spec/taints",
                    json!([{"key": "dedicated", "value": "db", "effect": "NoSchedule"}]),
                ),
            ],
            pods: vec![web()],
            expect: "pending: untolerated taint dedicated=db:NoSchedule on n2",
        },
        Case {
            name: "a taint the pod tolerates",
            nodes: vec![
                node("n1", "2", "4Gi"),
                with(
                    node("n2", "2", "4Gi"),
                    "/spec/taints",
                    json!([{"key": "dedicated", "value": "db", "effect": "NoExecute"}]),
                ),
            ],
            pods: vec![with(
                web(),
                "/spec/tolerations",
                json!([{"key": "dedicated", "operator": "Equal", "value": "db"}]),
            )],
            expect: "placed on n2",
        },
        Case {
            name: "a PreferNoSchedule taint does not keep it out",
            nodes: vec![
                node("n1", "2", "4Gi"),
                with(node("n2", "2", "4Gi"), "/spec/taints", json!([{"key": "x", "effect": "PreferNoSchedule"}])),
            ],
            pods: vec![web()],
            expect: "placed on n2",
        },
        Case {
            name: "a required anti-affinity to the web pod already on n2",
            nodes: vec![node("n1", "2", "4Gi"), node("n2", "2", "4Gi")],
            pods: vec![
                with(
                    web(),
                    "/spec/affinity/podAntiAffinity/requiredDuringSchedulingIgnoredDuringExecution",
                    json!([{"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": "kubernetes.io/hostname"}]),
                ),
                pod("web-2", "n2", "100m", "64Mi"),
            ],
            expect: "pending: pod anti-affinity (default/web-2 in the same kubernetes.io/hostname) on n2",
        },
        Case {
            name: "the pod on n2 repels it (anti-affinity the other way)",
            nodes: vec![node("n1", "2", "4Gi"), node("n2", "2", "4Gi")],
            pods: vec![
                web(),
                with(
                    pod("db-1", "n2", "100m", "64Mi"),
                    "/spec/affinity/podAntiAffinity/requiredDuringSchedulingIgnoredDuringExecution",
                    json!([{"labelSelector": {"matchExpressions": [{"key": "app", "operator": "In", "values": ["web"]}]},
                            "topologyKey": "kubernetes.io/hostname"}]),
                ),
            ],
            expect: "pending: pod anti-affinity of default/db-1 (same kubernetes.io/hostname) on n2",
        },
        Case {
            // Zone a is n1 alone: drained, it holds none, so zone b may hold at most one.
            name: "topology spread over zones when the only node of a zone is drained",
            nodes: vec![
                zone(node("n1", "2", "4Gi"), "a"),
                zone(node("n2", "2", "4Gi"), "b"),
                zone(node("n3", "2", "4Gi"), "b"),
            ],
            pods: vec![
                with(
                    web(),
                    "/spec/topologySpreadConstraints",
                    json!([{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "DoNotSchedule",
                            "labelSelector": {"matchLabels": {"app": "web"}}}]),
                ),
                pod("web-2", "n2", "100m", "64Mi"),
            ],
            expect: "pending: topology spread (topology.kubernetes.io/zone=b would hold 2, the emptiest 0: maxSkew 1) on n2, n3",
        },
        Case {
            name: "ScheduleAnyway spread does not keep it out",
            nodes: vec![zone(node("n1", "2", "4Gi"), "a"), zone(node("n2", "2", "4Gi"), "b")],
            pods: vec![
                with(
                    web(),
                    "/spec/topologySpreadConstraints",
                    json!([{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "ScheduleAnyway",
                            "labelSelector": {"matchLabels": {"app": "web"}}}]),
                ),
                pod("web-2", "n2", "100m", "64Mi"),
            ],
            expect: "placed on n2",
        },
        Case {
            name: "n2 cordoned and n3 NotReady take nothing",
            nodes: vec![
                node("n1", "2", "4Gi"),
                with(node("n2", "2", "4Gi"), "/spec/unschedulable", json!(true)),
                with(node("n3", "2", "4Gi"), "/status/conditions", json!([{"type": "Ready", "status": "False"}])),
            ],
            pods: vec![web()],
            expect: "pending: no schedulable node stays",
        },
        Case {
            name: "a node full of pods (allocatable pods)",
            nodes: vec![node("n1", "2", "4Gi"), with(node("n2", "2", "4Gi"), "/status/allocatable/pods", json!("1"))],
            pods: vec![web(), best_effort_pod("other-1", "n2")],
            expect: "pending: too many pods on n2 (1 max)",
        },
        Case {
            name: "a node that does not report its allocatable",
            nodes: vec![node("n1", "2", "4Gi"), with(node("n2", "2", "4Gi"), "/status/allocatable", json!({}))],
            pods: vec![web()],
            expect: "pending: allocatable cpu/memory not reported on n2",
        },
    ];
    for case in cases {
        let simulation = &lists(&case.nodes, &case.pods, &[]).simulate(&batches(&[&["n1"]]), true)[0];
        let web = evicted(simulation, "web-1");
        match case.expect.strip_prefix("pending: ") {
            Some(reason) => {
                assert_eq!(web.outcome, "pending", "{}: {simulation:#?}", case.name);
                let said = web.reason.as_deref().unwrap_or_default();
                assert!(said.contains(reason), "{}: `{said}` says `{reason}`", case.name);
                assert_eq!(simulation.verdict, Verdict::Blocked, "{}", case.name);
                assert!(
                    render(simulation, "").contains("Pending: default/web-1 (cpu 500m, memory 256Mi): "),
                    "{}",
                    case.name
                );
            }
            None => {
                let on = case.expect.strip_prefix("placed on ").expect("placed on NODE");
                assert_eq!(
                    (web.outcome.as_str(), web.placed_on.as_deref()),
                    ("placed", Some(on)),
                    "{}: {simulation:#?}",
                    case.name
                );
                assert_eq!(simulation.verdict, Verdict::Fits, "{}", case.name);
            }
        }
    }
}

#[test]
fn volumes_bound_to_a_node_or_a_zone_hold_the_pod_there() {
    let nodes = [
        with(node("n1", "2", "4Gi"), "/metadata/labels/topology.kubernetes.io~1zone", json!("a")),
        with(node("n2", "2", "4Gi"), "/metadata/labels/topology.kubernetes.io~1zone", json!("b")),
    ];
    let claimed = |name: &str, claim: &str| {
        with(
            pod(name, "n1", "100m", "64Mi"),
            "/spec/volumes",
            json!([{"name": "d", "persistentVolumeClaim": {"claimName": claim}}]),
        )
    };
    let pods = [
        claimed("local-1", "local"),
        claimed("zonal-1", "zonal"),
        claimed("free-1", "free"),
        claimed("lost-1", "lost"),
    ];
    let pvc = |name: &str, volume: &str| json!({"metadata": {"name": name, "namespace": "default"}, "spec": {"volumeName": volume}});
    let pvcs = json!({"items": [pvc("local", "pv-local"), pvc("zonal", "pv-zonal"), pvc("free", "pv-free"), pvc("lost", "pv-gone")]});
    let pvs = json!({"items": [
        {"metadata": {"name": "pv-local"}, "spec": {"local": {"path": "/mnt/disk"}, "nodeAffinity": {"required": {"nodeSelectorTerms":
            [{"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": ["n1"]}]}]}}}},
        {"metadata": {"name": "pv-zonal", "labels": {"topology.kubernetes.io/zone": "a"}}, "spec": {}},
        {"metadata": {"name": "pv-free"}, "spec": {}}]});
    let cluster = lists(&nodes, &pods, &[]);
    let drained = batches(&[&["n1"]]);
    assert!(cluster.needs_claims(&drained), "an evicted pod has a claim");
    let cluster = cluster.with_claims(Ok((pvcs.to_string(), pvs.to_string())));
    let simulation = &cluster.simulate(&drained, true)[0];
    let reason = |pod: &str| evicted(simulation, pod).reason.clone().unwrap_or_default();
    assert!(
        reason("local-1").contains("volume node affinity conflict (PersistentVolume pv-local) on n2"),
        "{}",
        reason("local-1")
    );
    assert!(
        reason("zonal-1")
            .contains("volume zone conflict (PersistentVolume pv-zonal in topology.kubernetes.io/zone=a) on n2")
    );
    assert_eq!(evicted(simulation, "free-1").placed_on.as_deref(), Some("n2"));
    assert!(
        reason("lost-1").contains("bound to PersistentVolume pv-gone, which does not exist"),
        "{}",
        reason("lost-1")
    );
    assert_eq!(simulation.verdict, Verdict::Blocked);
}

#[test]
fn lists_that_cannot_be_read_make_the_batch_unreadable_never_fits() {
    let nodes = [node("n1", "2", "4Gi"), node("n2", "2", "4Gi"), node("n3", "2", "4Gi")];
    let claimed = with(
        pod("db-1", "n2", "100m", "64Mi"),
        "/spec/volumes",
        json!([{"name": "d", "persistentVolumeClaim": {"claimName": "data"}}]),
    );
    let pods = [pod("web-1", "n1", "100m", "64Mi"), claimed];
    let cluster = lists(&nodes, &pods, &[]).with_claims(Err("cannot read the PersistentVolumes: Forbidden".into()));
    let simulations = cluster.simulate(&batches(&[&["n1"], &["n2"], &["n3"]]), true);
    let verdicts: Vec<Verdict> = simulations.iter().map(|s| s.verdict).collect();
    assert_eq!(verdicts, [Verdict::Fits, Verdict::Unreadable, Verdict::Unreadable]);
    assert!(simulations[1].reasons[0].contains("Forbidden"), "{:?}", simulations[1].reasons);
    assert!(simulations[2].reasons[0].starts_with("an earlier batch could not be simulated"));
    assert!(render(&simulations[1], "").starts_with("drain simulation: UNREADABLE: pod default/db-1's volumes"));

    assert!(ClusterLists::read("Error from server (Forbidden)", "{\"items\": []}", "{\"items\": []}").is_err());
    let err =
        ClusterLists::read("{\"items\": []}", "{\"items\": []}", "{\"kind\": \"List\"}").err().unwrap_or_default();
    assert!(err.starts_with("the cluster's node list is not a Kubernetes list"), "{err}");
    let bad = with(node("n1", "2", "4Gi"), "/status/allocatable/cpu", json!("lots"));
    let err = ClusterLists::read("{\"items\": []}", "{\"items\": []}", &json!({"items": [bad]}).to_string()).err();
    assert_eq!(err.as_deref(), Some("node n1: its allocatable cpu `lots` is not a quantity"));
}

#[test]
fn the_drain_skips_daemonset_mirror_and_finished_pods_and_bare_pods_are_not_placed_again() {
    let nodes = [node("n1", "2", "4Gi"), node("n2", "1", "1Gi")];
    let daemon = with(
        pod("proxy-n1", "n1", "100m", "64Mi"),
        "/metadata/ownerReferences",
        json!([{"kind": "DaemonSet", "controller": true}]),
    );
    let mirror = with(
        with(pod("etcd-n1", "n1", "100m", "64Mi"), "/metadata/ownerReferences", json!([])),
        "/metadata/annotations",
        json!({"kubernetes.io/config.mirror": "x"}),
    );
    let done = with(pod("job-1", "n1", "4", "8Gi"), "/status/phase", json!("Succeeded"));
    let bare = with(pod("bare-1", "n1", "4", "8Gi"), "/metadata/ownerReferences", json!([]));
    let pods = [daemon, mirror, done, bare, best_effort_pod("be-1", "n1"), pod("web-1", "n1", "500m", "256Mi")];
    let simulation = &lists(&nodes, &pods, &[]).simulate(&batches(&[&["n1"]]), true)[0];
    let skipped: Vec<(&str, &str)> =
        simulation.skipped.iter().map(|s| (s.pod.as_str(), s.why.split(':').next().unwrap_or_default())).collect();
    assert_eq!(
        skipped,
        [
            ("default/proxy-n1", "DaemonSet pod"),
            ("default/etcd-n1", "mirror (static) pod"),
            ("default/job-1", "finished (Succeeded)")
        ]
    );
    assert_eq!(evicted(simulation, "bare-1").outcome, "not-recreated", "deleted for good, it needs no room");
    assert_eq!(evicted(simulation, "be-1").placed_on.as_deref(), Some("n2"));
    assert_eq!(evicted(simulation, "web-1").placed_on.as_deref(), Some("n2"));
    assert_eq!(simulation.verdict, Verdict::Fits);
    assert_eq!((simulation.capacity.requested_cpu_millis, simulation.capacity.free_cpu_millis), (500, 1000));
    let text = render(simulation, "  ");
    assert!(text.contains("  best-effort (no requests, need a node, not room): default/be-1 (on n1)"), "{text}");
    assert!(text.contains("default/bare-1 (on n1; no controller: deleted for good)"), "{text}");
    assert!(text.contains("capacity: the evicted pods request cpu 500m, memory 256Mi; free on the 1 schedulable node(s) that stay (n2): cpu 1, memory 1Gi; taking nothing: n1 (in this batch)"), "{text}");
}

#[test]
fn pods_placed_in_one_batch_take_room_in_the_next_and_are_evicted_again_from_its_nodes() {
    let nodes = [node("n1", "2", "4Gi"), node("n2", "2", "4Gi"), node("n3", "2", "4Gi")];
    let pods = [pod("a-1", "n1", "1500m", "1Gi"), pod("b-1", "n2", "1", "1Gi"), pod("c-1", "n3", "1", "1Gi")];
    let simulations = lists(&nodes, &pods, &[]).simulate(&batches(&[&["n1"], &["n2"]]), true);
    assert_eq!(evicted(&simulations[0], "a-1").placed_on, None, "n2 and n3 have 1 CPU free each");
    // The second batch: n1 is back; b-1 goes there.
    assert_eq!(evicted(&simulations[1], "b-1").placed_on.as_deref(), Some("n1"));

    let pods = [pod("a-1", "n1", "500m", "1Gi"), pod("c-1", "n3", "1800m", "1Gi")];
    let simulations = lists(&nodes, &pods, &[]).simulate(&batches(&[&["n1"], &["n2"]]), true);
    assert_eq!(evicted(&simulations[0], "a-1").placed_on.as_deref(), Some("n2"));
    assert_eq!(evicted(&simulations[1], "a-1").node, "n2", "evicted again from where batch 1 put it");
    assert_eq!(evicted(&simulations[1], "a-1").placed_on.as_deref(), Some("n1"));
}

#[test]
fn budgets_refuse_with_what_earlier_batches_leave_unless_validation_brings_the_pods_back() {
    let nodes = [node("n1", "2", "4Gi"), node("n2", "2", "4Gi"), node("n3", "4", "8Gi")];
    let pods =
        [pod("web-1", "n1", "100m", "64Mi"), pod("web-2", "n2", "100m", "64Mi"), pod("db-1", "n2", "100m", "64Mi")];
    let pdb = |name: &str, app: &str, allowed: i64| {
        json!({"metadata": {"name": name, "namespace": "default"}, "spec": {"selector": {"matchLabels": {"app": app}}},
               "status": {"disruptionsAllowed": allowed}})
    };
    let cluster = lists(&nodes, &pods, &[pdb("web", "web", 1), pdb("db", "db", 0)]);
    let drained = batches(&[&["n1"], &["n2"]]);

    let validated = cluster.simulate(&drained, true);
    assert!(validated[0].budgets.is_empty(), "web allows the one eviction");
    assert_eq!(validated[1].budgets.len(), 1, "web is whole again; db allows none: {:#?}", validated[1].budgets);
    assert_eq!(validated[1].budgets[0].pdb, "default/db");
    assert!(validated[1].budgets[0].blocks);
    assert_eq!(validated[1].verdict, Verdict::Blocked);
    assert!(validated[1].reasons.iter().any(|r| r.contains("PodDisruptionBudget default/db allows no disruption")));

    let unvalidated = cluster.simulate(&drained, false);
    let web = unvalidated[1].budgets.iter().find(|b| b.pdb == "default/web").expect("web refuses");
    assert_eq!((web.allowed_now, web.left_for_batch, web.evictions, web.refused, web.blocks), (1, 0, 1, 1, false));
    let text = render(&unvalidated[1], "");
    assert!(
        text.contains("budget: PodDisruptionBudget default/web allows 1 disruption(s) now, 0 left for this batch; it evicts 1 of its pods: refuses 1 of them until the evicted pods are back"),
        "{text}"
    );
}

#[test]
fn requests_count_sidecars_init_containers_and_overhead_as_the_scheduler_does() {
    let mut p = pod("web-1", "n1", "200m", "100Mi");
    p = with(
        p,
        "/spec/initContainers",
        json!([
        {"name": "migrate", "resources": {"requests": {"cpu": "1", "memory": "50Mi"}}},
        {"name": "proxy", "restartPolicy": "Always", "resources": {"requests": {"cpu": "100m", "memory": "20Mi"}}}]),
    );
    p = with(p, "/spec/overhead", json!({"cpu": "10m"}));
    let cluster = lists(&[node("n1", "2", "4Gi")], &[p], &[]);
    // cpu: max(200m + 100m, 1) + 10m; memory: max(100Mi + 20Mi, 50Mi).
    assert_eq!(cluster.pods[0].requests, Resources { cpu: 1010, memory: 120 << 20 });
    assert!(!cluster.pods[0].best_effort);
}

/// The measurement behind the README's figure (ignored: it measures, it checks little): 1,000 nodes in 4 zones, 30
/// pods on each (a third spread over the zones, a tenth with a required anti-affinity per host), drained in 10
/// batches of 100. `cargo test --release --lib simulation_of_a_large_cluster -- --ignored --nocapture`.
#[test]
#[ignore]
fn simulation_of_a_large_cluster() {
    let nodes: Vec<Value> = (0..1000)
        .map(|i| {
            with(
                node(&format!("n{i}"), "16", "64Gi"),
                "/metadata/labels/topology.kubernetes.io~1zone",
                json!(format!("z{}", i % 4)),
            )
        })
        .collect();
    let mut pods = Vec::new();
    for i in 0..30_000 {
        let mut p = pod(&format!("app{}-{i}", i % 300), &format!("n{}", i % 1000), "100m", "128Mi");
        if i % 3 == 0 {
            p = with(
                p,
                "/spec/topologySpreadConstraints",
                json!([{"maxSkew": 5, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": "DoNotSchedule",
                        "labelSelector": {"matchLabels": {"app": format!("app{}", i % 300)}}}]),
            );
        }
        if i % 10 == 1 {
            p = with(
                p,
                "/spec/affinity/podAntiAffinity/requiredDuringSchedulingIgnoredDuringExecution",
                json!([{"labelSelector": {"matchLabels": {"app": format!("app{}", i % 300)}}, "topologyKey": "kubernetes.io/hostname"}]),
            );
        }
        pods.push(p);
    }
    let started = std::time::Instant::now();
    let cluster = lists(&nodes, &pods, &[]);
    let read = started.elapsed();
    let drained: Vec<Vec<String>> =
        (0..10).map(|b| (b * 100..(b + 1) * 100).map(|i| format!("n{i}")).collect()).collect();
    let simulations = cluster.simulate(&drained, true);
    let placed: usize = simulations.iter().flat_map(|s| &s.evicted).filter(|p| p.outcome == "placed").count();
    println!("read {read:?}, simulated 10 batches ({placed} pods placed) in {:?}", started.elapsed() - read);
    assert_eq!(simulations.len(), 10);
}
