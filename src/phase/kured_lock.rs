//! kured's reboot lock, held for the run. kured (the Kubernetes reboot daemon) reboots a node only after its pod on
//! that node wrote the annotation `weave.works/kured-node-lock` on kured's own DaemonSet (kubereboot/kured
//! pkg/daemonsetlock): one lock for the whole cluster, JSON `{"nodeID":...,"metadata":{"unschedulable":...},
//! "created":RFC3339,"TTL":nanoseconds}`, taken only when absent (or expired by its TTL), removed after the reboot.
//! While the run holds it under its own name (`upgrade-tool:RUN-ID`), no kured pod reboots a node under the run.
//!
//! The take is `kubectl annotate` without `--overwrite`, refused by the API when the annotation has a value: of kured
//! and this run only one holds it. A lock whose nodeID starts with `upgrade-tool:` and is not this run's was left by a
//! run of ours that died (this run holds the cluster lease, so no other run of ours is alive): it is given back, then
//! taken. A lock kured holds (a node is rebooting) is waited for, up to `upgrade_kured_lock_wait` (default 600 s), then
//! the run is refused with nothing touched.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::cluster_calls::ClusterCalls;
use super::cluster_lock::Outcome;
use crate::error::{Error, Result};
use crate::vocabulary::{Phase, Step};

/// The nodeID prefix of every lock this tool takes.
pub(crate) const OURS: &str = "upgrade-tool:";

/// The lock this run holds.
#[derive(Debug, Clone)]
pub(crate) struct Held {
    /// `namespace/name` of kured's DaemonSet.
    pub daemonset: String,
    pub annotation: String,
    pub node_id: String,
}

/// Where the run keeps the lock it holds.
pub(crate) type Slot = Mutex<Option<Held>>;

/// Who holds kured's lock, as read from its DaemonSet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Holder {
    pub node_ids: Vec<String>,
    pub created: String,
    /// The lock's TTL as kured wrote it (0: none).
    pub ttl: Duration,
}

impl Holder {
    /// The lock a run of ours left (and not `me`): every holder named with our prefix.
    fn left_by_us(&self, me: &str) -> bool {
        !self.node_ids.is_empty() && self.node_ids.iter().all(|id| id.starts_with(OURS) && id != me)
    }

    fn describe(&self) -> String {
        let mut text = format!("held by {}", self.node_ids.join(", "));
        if !self.created.is_empty() {
            text.push_str(&format!(" since {}", self.created));
        }
        if !self.ttl.is_zero() {
            text.push_str(&format!(" (its TTL {}s)", self.ttl.as_secs()));
        }
        text
    }
}

/// The lock's holder in kured's DaemonSet JSON (`None`: not held). A single lock is `{"nodeID":...}`; kured with
/// `--concurrency` above 1 writes `{"maxOwners":N,"locks":[{"nodeID":...},...]}`. `Err`: a value that is neither.
pub(crate) fn holder(daemonset: &Value, annotation: &str) -> std::result::Result<Option<Holder>, String> {
    let Some(text) = daemonset.pointer("/metadata/annotations").and_then(|a| a.get(annotation)) else {
        return Ok(None);
    };
    let text = text.as_str().unwrap_or_default();
    let value: Value = serde_json::from_str(text).map_err(|e| format!("{annotation} is not JSON ({e}): {text}"))?;
    let one = |v: &Value| v.get("nodeID").and_then(Value::as_str).map(str::to_string);
    let ttl = |v: &Value| Duration::from_nanos(v.get("TTL").and_then(Value::as_u64).unwrap_or(0));
    let created = |v: &Value| v.get("created").and_then(Value::as_str).unwrap_or_default().to_string();
    if let Some(locks) = value.get("locks") {
        let locks = locks.as_array().cloned().unwrap_or_default();
        let node_ids: Vec<String> = locks.iter().filter_map(one).collect();
        if node_ids.is_empty() {
            return Ok(None);
        }
        return Ok(Some(Holder {
            node_ids,
            created: locks.first().map(created).unwrap_or_default(),
            ttl: Duration::ZERO,
        }));
    }
    match one(&value) {
        Some(id) => Ok(Some(Holder { node_ids: vec![id], created: created(&value), ttl: ttl(&value) })),
        None => Err(format!("{annotation} names no nodeID: {text}")),
    }
}

/// The value this run writes: kured's own shape, with TTL 0 (kured then judges it by its own `--lock-ttl`, which is
/// 0, never, by default).
pub(crate) fn lock_value(node_id: &str, created: &str) -> String {
    json!({"nodeID": node_id, "metadata": {"unschedulable": false}, "created": created, "TTL": 0}).to_string()
}

fn setting(run: &impl ClusterCalls, name: &str, default: &str) -> String {
    let text = run.render_for(run.first_master(), &format!("{{{{ {name} | default('{default}') }}}}"));
    let text = text.trim();
    if text.is_empty() { default.to_string() } else { text.to_string() }
}

fn annotation(run: &impl ClusterCalls) -> String {
    setting(run, "upgrade_kured_lock_annotation", "weave.works/kured-node-lock")
}

fn daemonset(run: &impl ClusterCalls) -> String {
    format!(
        "{}/{}",
        setting(run, "upgrade_kured_namespace", "kube-system"),
        setting(run, "upgrade_kured_daemonset", "kured")
    )
}

/// One action of kured_lock.yml on the first master.
async fn call(run: &impl ClusterCalls, action: &str, pair: Option<String>) -> std::result::Result<Outcome, String> {
    let mut vars: Vec<(&str, Value)> = vec![("upgrade_kured_lock_action", Value::from(action))];
    if let Some(pair) = pair {
        vars.push(("upgrade_kured_lock_pair", Value::from(pair)));
    }
    let file = run.playbook("kured_lock.yml");
    let facts = run
        .run_step(Phase::Preflight, run.first_master(), Step::KuredLock, &file, &vars, None)
        .await
        .map_err(|f| f.reason)?;
    let result = facts.get(format!("upgrade_kured_lock_{action}").as_str()).cloned().unwrap_or_default();
    let text = |key: &str| result.get(key).and_then(Value::as_str).unwrap_or_default().to_string();
    Ok(Outcome {
        rc: result.get("rc").and_then(Value::as_i64).unwrap_or(-1),
        stdout: text("stdout"),
        stderr: text("stderr"),
    })
}

/// What the DaemonSet says: `Ok(None)` when kured is not installed, else who holds its lock.
async fn read(run: &impl ClusterCalls, annotation: &str) -> std::result::Result<Option<Option<Holder>>, String> {
    let out = call(run, "read", None).await?;
    if out.rc != 0 {
        return Err(out.reason());
    }
    if out.stdout.trim().is_empty() {
        return Ok(None);
    }
    let object: Value = serde_json::from_str(&out.stdout).map_err(|e| format!("its DaemonSet cannot be read: {e}"))?;
    holder(&object, annotation).map(Some)
}

async fn remove(run: &impl ClusterCalls, annotation: &str) -> std::result::Result<(), String> {
    let out = call(run, "release", Some(format!("{annotation}-"))).await?;
    if out.rc != 0 { Err(out.reason()) } else { Ok(()) }
}

/// In preflight, with the cluster lease held: gives back a lock a dead run of ours left, then, when the run will
/// change something (`take`), takes kured's lock for the run, waiting while kured holds it. Not installed: nothing.
pub(crate) async fn hold(run: &impl ClusterCalls, slot: &Slot, take: bool) -> Result<()> {
    if !run.host_flag(run.first_master(), "upgrade_kured_lock", true) {
        return Ok(());
    }
    let annotation = annotation(run);
    let daemonset = daemonset(run);
    let me = format!("{OURS}{}", run.run_id());
    let failed = |why: String| {
        Error::hosts_failed(format!("cannot read kured's reboot lock on the DaemonSet {daemonset}: {why}")).hint(
            "let upgrade_kubectl read and annotate that DaemonSet, or set upgrade_kured_lock: false when kured is \
             not installed or its reboots are stopped otherwise; nothing was changed",
        )
    };
    let wait = Duration::from_secs(run.host_seconds(run.first_master(), "upgrade_kured_lock_wait", 600));
    let delay = Duration::from_secs(run.host_seconds(run.first_master(), "upgrade_kured_lock_delay", 10).max(1));
    let started = Instant::now();
    let mut said_waiting = false;
    let mut lost_races = 0;
    loop {
        let Some(found) = read(run, &annotation).await.map_err(&failed)? else {
            return Ok(());
        };
        match found {
            Some(h) if h.left_by_us(&me) => {
                run.notice(
                    None,
                    format!(
                        "kured's reboot lock on {daemonset} was left by a run of ours that is no longer running ({}): \
                         given back",
                        h.describe()
                    ),
                );
                remove(run, &annotation).await.map_err(&failed)?;
                continue;
            }
            Some(h) if h.node_ids.iter().any(|id| *id == me) => return Ok(()),
            None if !take => return Ok(()),
            None => {
                let now = crate::time_format::utc_timestamp(std::time::SystemTime::now());
                let out = call(run, "take", Some(format!("{annotation}={}", lock_value(&me, &now))))
                    .await
                    .map_err(&failed)?;
                if out.rc == 0 {
                    if let Ok(mut held_slot) = slot.lock() {
                        *held_slot =
                            Some(Held { daemonset: daemonset.clone(), annotation: annotation.clone(), node_id: me });
                    }
                    run.notice(
                        None,
                        format!(
                            "kured's reboot lock on {daemonset} taken for the run: kured reboots no node until it ends"
                        ),
                    );
                    return Ok(());
                }
                // Refused because it has a value (kured took it between the read and the take): read again, a few
                // times at most. Refused otherwise (RBAC, an API that cannot annotate): that is the answer.
                let lost_race = out.stderr.contains("already has a value")
                    || out.stderr.contains("(Conflict)")
                    || out.stderr.contains("the object has been modified");
                lost_races += 1;
                if !lost_race || lost_races > 5 {
                    return Err(failed(format!("the take was refused: {}", out.reason())));
                }
                continue;
            }
            Some(_) if !take => return Ok(()),
            Some(h) => {
                if started.elapsed() >= wait {
                    return Err(Error::input(format!(
                        "kured holds its reboot lock on {daemonset} ({}): a node is being rebooted; waited {}s",
                        h.describe(),
                        started.elapsed().as_secs()
                    ))
                    .hint(format!(
                        "re-run when kured has rebooted that node and given its lock back (upgrade_kured_lock_wait sets \
                         how long to wait); if no kured reboot is under way, remove it with `kubectl -n {} annotate \
                         daemonset {} {annotation}-`; nothing was changed",
                        daemonset.split('/').next().unwrap_or("kube-system"),
                        daemonset.rsplit('/').next().unwrap_or("kured"),
                    )));
                }
                if !said_waiting {
                    said_waiting = true;
                    run.notice(
                        None,
                        format!(
                            "kured holds its reboot lock on {daemonset} ({}): a node is being rebooted; waiting up to {}s \
                             for it to be given back",
                            h.describe(),
                            wait.as_secs()
                        ),
                    );
                }
                if run.stop().is_stopping() {
                    return Ok(());
                }
                tokio::time::sleep(delay).await;
            }
        }
    }
}

/// At the end of the run, whatever happened (not after the cluster lease was lost: the controller that holds the
/// cluster now gives a lock of ours back itself): removes kured's lock when it still names this run.
pub(crate) async fn release(run: &impl ClusterCalls, slot: &Slot) {
    let Some(held) = slot.lock().ok().and_then(|mut slot| slot.take()) else { return };
    if run.fence().lost() {
        return;
    }
    let still_ours = match read(run, &held.annotation).await {
        Ok(Some(Some(h))) => h.node_ids.iter().any(|id| *id == held.node_id),
        Ok(_) => false,
        Err(why) => {
            run.notice(None, format!("warning: cannot read kured's reboot lock on {}: {why}", held.daemonset));
            return;
        }
    };
    if !still_ours {
        run.notice(
            None,
            format!("warning: kured's reboot lock on {} is no longer this run's: left alone", held.daemonset),
        );
        return;
    }
    match remove(run, &held.annotation).await {
        Ok(()) => run.notice(None, format!("kured's reboot lock on {} given back", held.daemonset)),
        Err(why) => {
            run.notice(None, format!("warning: cannot give kured's reboot lock on {} back: {why}", held.daemonset))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ANN: &str = "weave.works/kured-node-lock";

    fn ds(value: &str) -> Value {
        json!({"metadata": {"annotations": {ANN: value}}})
    }

    #[test]
    fn kureds_lock_shapes_are_read() {
        assert_eq!(holder(&json!({"metadata": {}}), ANN), Ok(None));
        let single = holder(&ds(r#"{"nodeID":"n1","metadata":{"unschedulable":false},"created":"2026-01-01T00:00:00Z","TTL":60000000000}"#), ANN)
            .unwrap()
            .unwrap();
        assert_eq!(single.node_ids, ["n1"]);
        assert_eq!(single.ttl, Duration::from_secs(60));
        let multi = holder(&ds(r#"{"maxOwners":2,"locks":[{"nodeID":"a"},{"nodeID":"b"}]}"#), ANN).unwrap().unwrap();
        assert_eq!(multi.node_ids, ["a", "b"]);
        assert_eq!(holder(&ds(r#"{"maxOwners":2,"locks":[]}"#), ANN), Ok(None));
        assert!(holder(&ds("not json"), ANN).is_err());
        let ours = holder(&ds(&lock_value("upgrade-tool:r1", "2026-01-01T00:00:00Z")), ANN).unwrap().unwrap();
        assert!(ours.left_by_us("upgrade-tool:r2"));
        assert!(!ours.left_by_us("upgrade-tool:r1"));
        assert!(!single.left_by_us("upgrade-tool:r2"));
    }
}
