use serde_json::{Value, json};

use super::*;

fn node(name: &str, ready: bool) -> Value {
    json!({"metadata": {"name": name}, "status": {"conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}],
        "nodeInfo": {"kubeletVersion": "v1.34.4"}}})
}

fn pod(ns: &str, name: &str, node: &str, owner: Option<(&str, &str)>, ready: bool, labels: Value) -> Value {
    let owners = owner.map(|(k, n)| json!([{"kind": k, "name": n, "controller": true}])).unwrap_or(json!([]));
    json!({"metadata": {"namespace": ns, "name": name, "labels": labels, "ownerReferences": owners},
        "spec": {"nodeName": node},
        "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}]}})
}

fn list(items: Vec<Value>) -> String {
    json!({"kind": "List", "items": items}).to_string()
}

fn deployment(name: &str, desired: i64, available: i64) -> Vec<Value> {
    vec![
        json!({"kind": "Deployment", "metadata": {"namespace": "default", "name": name},
            "spec": {"replicas": desired}, "status": {"availableReplicas": available}}),
        json!({"kind": "ReplicaSet", "metadata": {"namespace": "default", "name": format!("{name}-rs"),
            "ownerReferences": [{"kind": "Deployment", "name": name, "controller": true}]},
            "spec": {"replicas": desired}, "status": {"availableReplicas": available}}),
    ]
}

fn view(nodes: Vec<Value>, pods: Vec<Value>, controllers: Vec<Value>, budgets: Vec<Value>) -> ClusterView {
    ClusterView::read(&list(nodes), &list(pods), &list(controllers), &list(budgets)).unwrap()
}

fn web_pod(node: &str) -> Value {
    pod("default", &format!("web-{node}"), node, Some(("ReplicaSet", "web-rs")), true, json!({"app": "web"}))
}

#[test]
fn a_deployment_evicted_from_a_drained_node_is_waited_for_until_it_is_available_again() {
    let before = view(vec![node("n1", true), node("n2", true)], vec![web_pod("n1")], deployment("web", 4, 4), vec![]);
    let baseline = Baseline::of(&before);
    let watched = before.workloads_on(&["n1".to_string()]);
    assert_eq!(
        watched.iter().map(|w| w.to_string()).collect::<Vec<_>>(),
        ["default/web"],
        "the ReplicaSet's Deployment"
    );
    let after = view(vec![node("n1", true), node("n2", true)], vec![], deployment("web", 4, 3), vec![]);
    assert_eq!(not_valid(&after, &baseline, &watched, &[]), ["default/web: 3/4 available"]);
    let back = view(vec![node("n1", true), node("n2", true)], vec![], deployment("web", 4, 4), vec![]);
    assert!(not_valid(&back, &baseline, &watched, &[]).is_empty());
}

#[test]
fn a_node_ready_before_the_run_must_be_ready_again_and_one_not_ready_before_is_not_waited_for() {
    let before = view(vec![node("n1", true), node("n2", false)], vec![], vec![], vec![]);
    let baseline = Baseline::of(&before);
    let now = view(vec![node("n1", false), node("n2", false)], vec![], vec![], vec![]);
    assert_eq!(not_valid(&now, &baseline, &BTreeSet::new(), &[]), ["node n1 to be Ready (it was before the run)"]);
    // A node this run failed is the threshold's: not waited for.
    let mut excused = baseline.clone();
    excused.excuse("n1");
    assert!(not_valid(&now, &excused, &BTreeSet::new(), &[]).is_empty());
    // Deleted (blue-green and the surge cycle delete the nodes they replace): not waited for.
    let deleted = view(vec![node("n2", false)], vec![], vec![], vec![]);
    assert!(not_valid(&deleted, &baseline, &BTreeSet::new(), &[]).is_empty());
}

#[test]
fn a_kube_system_pod_ready_before_must_be_again_and_a_crash_looping_one_is_only_reported() {
    let dns = pod("kube-system", "coredns-a", "n1", Some(("ReplicaSet", "coredns-rs")), true, json!({}));
    let looping = pod("kube-system", "broken", "n1", None, false, json!({}));
    let before = view(vec![node("n1", true)], vec![dns, looping.clone()], vec![], vec![]);
    let baseline = Baseline::of(&before);
    assert_eq!(baseline.not_ready_before, ["kube-system/broken"]);
    let dns_down = pod("kube-system", "coredns-a", "n1", Some(("ReplicaSet", "coredns-rs")), false, json!({}));
    let now = view(vec![node("n1", true)], vec![dns_down, looping], vec![], vec![]);
    assert_eq!(
        not_valid(&now, &baseline, &BTreeSet::new(), &[]),
        ["kube-system/coredns-a to be Running and Ready (it was before the run)"]
    );
}

#[test]
fn a_budget_over_a_pod_of_the_next_batch_must_allow_a_disruption_matched_by_expressions_too() {
    let budget = json!({"metadata": {"namespace": "default", "name": "web"},
        "spec": {"selector": {"matchExpressions": [{"key": "app", "operator": "In", "values": ["web"]}]}},
        "status": {"disruptionsAllowed": 0}});
    let mut allowing = budget.clone();
    allowing["status"]["disruptionsAllowed"] = json!(1);
    let before = view(vec![node("n2", true)], vec![web_pod("n2")], vec![], vec![allowing]);
    let baseline = Baseline::of(&before);
    let now = view(vec![node("n2", true)], vec![web_pod("n2")], vec![], vec![budget.clone()]);
    let problems = not_valid(&now, &baseline, &BTreeSet::new(), &["n2".to_string()]);
    assert_eq!(
        problems,
        ["PodDisruptionBudget default/web to allow a disruption (it allows 0; it guards default/web-n2 on n2)"]
    );
    // Not the next batch's pod: nothing to wait for.
    assert!(not_valid(&now, &baseline, &BTreeSet::new(), &["n3".to_string()]).is_empty());
    // A budget that allowed no disruption before the run is not waited for: waiting will not change it.
    let blocked_from_the_start = Baseline::of(&now);
    assert!(not_valid(&now, &blocked_from_the_start, &BTreeSet::new(), &["n2".to_string()]).is_empty());
}

#[test]
fn a_list_that_cannot_be_read_is_an_error_never_valid() {
    let nodes = list(vec![]);
    assert!(ClusterView::read(&nodes, "{}", &list(vec![]), &list(vec![])).is_err());
    assert!(ClusterView::read(&nodes, &list(vec![]), "not json", &list(vec![])).is_err());
}
