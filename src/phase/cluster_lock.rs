//! The cluster-wide lock: a lease in a ConfigMap (`kube-system/upgrade-lock` by default) that says which controller
//! drives the cluster, so two operators on two machines, or a CI job and a person, never upgrade one cluster at once.
//! The state directory's flock (journal.rs) only guards one controller; this one lives where every controller looks.
//!
//! It is client-go's leader election (resourcelock's ConfigMapLock) done through kubectl: the record's fields
//! (`holderIdentity`, `leaseDurationSeconds`, `acquireTime`, `renewTime`, `leaderTransitions`) and, for people, who
//! holds it (`holder` user@machine, `where` the state directory, `started`, `run`, `change_id`). The first take is
//! an atomic `create configmap` (AlreadyExists when it exists); every later change (a take-over of a stale or
//! released lease, a renewal, the release) is a `replace -f -` carrying the `metadata.resourceVersion` this run last
//! read, which the API server refuses with Conflict when anyone wrote in between: of two runs racing for one stale
//! lease exactly one wins, and a run never overwrites or removes a lease it does not hold. A ConfigMap, not a
//! `coordination.k8s.io` Lease: OpenShift 3.11 (Kubernetes 1.11) has no Lease API, and a ConfigMap with
//! compare-and-swap on its resourceVersion is the same guarantee on every cluster the tool supports.
//!
//! The holder is a controller id kept in the state directory (`controller-id`, random, made once), not user, host
//! or path: two containers or cloned VMs with the same names are two controllers. A re-run from the same state
//! directory takes its own lease back at once (this process holds the directory's flock, so the earlier writer is
//! dead); a copy of a state directory carries the id, and with it that right (README).
//!
//! Fencing: the holder renews every fifth of the TTL; not renewed for half the lease, the run starts no new host;
//! not renewed for the whole lease, or a renewal that finds another holder or no lease, the run stops every host at
//! its next safe point (as an interrupt past its grace period does) and ends with exit 1. A taker treats a lease as
//! stale only when `renewTime + leaseDurationSeconds` is past by its own clock, so the holder has stopped starting
//! anything by then (clock skew aside: README). While the only master's API server is restarted the lease is written
//! with a longer duration (`extend`), so that expected absence does not fence the run.
//!
//! The lock also carries a pause (`upgrade pause`, pause.rs at the top and phase/pause.rs): every write of this run
//! carries the pause as it last read it, and a write refused because someone paused or resumed meanwhile reads the
//! lock and is made again (`write_own`), so no renewal drops a pause and no pause fences the run.
//!
//! The commands are the task file cluster_lock.yml (docs/DESIGN.md's cluster-object shapes); this module decides.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};

use super::cluster_calls::ClusterCalls;
pub(crate) use super::lease::{
    Decision, Lease, Me, Stamp, controller_id, decide, epoch_ms, epoch_now, micro_time, write_pause,
};
use crate::error::{Error, Result};
use crate::vocabulary::Phase;
use crate::vocabulary::Step;

/// Default of `upgrade_cluster_lock_ttl`.
pub(crate) const DEFAULT_TTL: Duration = Duration::from_secs(15 * 60);

/// What one lock command did.
#[derive(Debug, Clone, Default)]
pub(crate) struct Outcome {
    pub rc: i64,
    pub stdout: String,
    pub stderr: String,
}

impl Outcome {
    pub(crate) fn already_exists(&self) -> bool {
        self.rc != 0 && (self.stderr.contains("AlreadyExists") || self.stderr.contains("already exists"))
    }
    pub(crate) fn not_found(&self) -> bool {
        self.rc != 0 && (self.stderr.contains("NotFound") || self.stderr.contains("not found"))
    }
    pub(crate) fn conflict(&self) -> bool {
        self.rc != 0 && (self.stderr.contains("(Conflict)") || self.stderr.contains("the object has been modified"))
    }
    pub(crate) fn reason(&self) -> String {
        let text = if self.stderr.trim().is_empty() { self.stdout.trim() } else { self.stderr.trim() };
        text.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("no output").to_string()
    }
}

/// `read`, `take` or `write` through cluster_lock.yml on the first master, with the action's variables.
pub(crate) async fn call(
    run: &impl ClusterCalls,
    action: &str,
    vars: &[(&str, Value)],
    quiet: bool,
) -> std::result::Result<Outcome, String> {
    let mut all: Vec<(&str, Value)> = vec![("upgrade_cluster_lock_action", Value::from(action))];
    all.extend(vars.iter().cloned());
    let file = run.playbook("cluster_lock.yml");
    let facts = if quiet {
        run.run_step_quietly(run.first_master(), Step::ClusterLock, &file, &all).await
    } else {
        run.run_step(Phase::Preflight, run.first_master(), Step::ClusterLock, &file, &all, None).await
    }
    .map_err(|f| f.reason)?;
    let result = facts.get(format!("upgrade_cluster_lock_{action}").as_str()).cloned().unwrap_or_default();
    let text = |key: &str| result.get(key).and_then(Value::as_str).unwrap_or_default().to_string();
    Ok(Outcome {
        rc: result.get("rc").and_then(Value::as_i64).unwrap_or(-1),
        stdout: text("stdout"),
        stderr: text("stderr"),
    })
}

/// Reads the lease: `Ok(None)` when there is none.
pub(crate) async fn read(run: &impl ClusterCalls, quiet: bool) -> std::result::Result<Option<Lease>, String> {
    let read = call(run, "read", &[], quiet).await?;
    if read.not_found() {
        return Ok(None);
    }
    if read.rc != 0 {
        return Err(read.reason());
    }
    Lease::parse(&read.stdout).map(Some).ok_or_else(|| format!("it cannot be read ({})", read.reason()))
}

/// `read`, waiting while the API server does not answer, for at most the first master's
/// `upgrade_control_plane_ready_timeout`: the only master's API server is away for a minute or two while a kubeadm
/// upgrade restarts it, and when an earlier run died there its upgrade command goes on on the master (the SSH
/// session outlives the controller). A re-run then waits for it as the earlier run would have, instead of failing;
/// an answer that refuses (Forbidden, a bad kubeconfig) fails at once, as does a stop.
async fn read_once_the_api_answers(run: &impl ClusterCalls) -> std::result::Result<Option<Lease>, String> {
    let mut wait = super::api_away::ApiWait::for_run(run);
    loop {
        match read(run, false).await {
            Err(why) if super::api_away::api_unavailable(&why) => {
                if !wait.again(run, &why).await {
                    return Err(wait.given_up(why));
                }
            }
            other => return other,
        }
    }
}

/// The ConfigMap's data for `me` holding it: the leader-election record's fields, then who, for people.
fn record(
    me: &Me,
    acquired: &str,
    renewed_ms: u64,
    duration: Duration,
    transitions: u64,
    progress: &str,
) -> Map<String, Value> {
    let mut data = Map::new();
    for (key, value) in [
        ("holderIdentity", me.id.clone()),
        ("leaseDurationSeconds", duration.as_secs().max(1).to_string()),
        ("acquireTime", acquired.to_string()),
        ("renewTime", micro_time(renewed_ms)),
        ("leaderTransitions", transitions.to_string()),
        ("holder", me.holder.clone()),
        ("where", me.location.clone()),
        ("started", me.started.clone()),
        ("run", me.run.clone()),
        ("change_id", me.change_id.clone()),
    ] {
        data.insert(key.to_string(), Value::String(value));
    }
    if !progress.is_empty() {
        data.insert("progress".to_string(), Value::String(progress.to_string()));
    }
    data
}

/// `namespace/name` of the lease.
pub(crate) fn lock_name(run: &impl ClusterCalls) -> String {
    run.render_for(
        run.first_master(),
        "{{ upgrade_cluster_lock_namespace | default('kube-system') }}/{{ upgrade_cluster_lock_name | default('upgrade-lock') }}",
    )
}

/// The atomic first take: `create configmap NAME --from-literal=K=V ... -o json`.
pub(crate) async fn create(
    run: &impl ClusterCalls,
    data: &Map<String, Value>,
    quiet: bool,
) -> std::result::Result<Outcome, String> {
    let literals: Vec<Value> =
        data.iter().map(|(k, v)| Value::String(format!("{k}={}", v.as_str().unwrap_or_default()))).collect();
    call(run, "take", &[("upgrade_cluster_lock_literals", Value::Array(literals))], quiet).await
}

/// A conditional write: `replace -f - -o json` of the whole ConfigMap carrying `resource_version`; Conflict when the
/// lease changed since.
pub(crate) async fn write(
    run: &impl ClusterCalls,
    resource_version: &str,
    data: &Map<String, Value>,
    quiet: bool,
) -> std::result::Result<Outcome, String> {
    let name = lock_name(run);
    let (namespace, short) = name.split_once('/').unwrap_or(("kube-system", name.as_str()));
    let object = json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": short, "namespace": namespace, "resourceVersion": resource_version},
        "data": data,
    });
    // Pretty: one member a line, the shape every kubectl reads (and the fake cluster too).
    let body = serde_json::to_string_pretty(&object).unwrap_or_default();
    call(run, "write", &[("upgrade_cluster_lock_object", Value::String(body))], quiet).await
}

/// `upgrade_cluster_lock_ttl` of the first master: seconds or a duration ("15m"); bad input is refused (exit 2)
/// before the lock is touched (the plan checks it too: `check_ttl_setting`).
pub(crate) fn ttl(run: &impl ClusterCalls) -> Result<Duration> {
    let text = run.render_for(run.first_master(), "{{ upgrade_cluster_lock_ttl | default('') }}");
    crate::settings::cluster_lock_ttl(&text)
}

/// The lease this run holds: what it last wrote, and the fence's clock.
pub(crate) struct Held {
    pub name: String,
    me: Me,
    ttl: Duration,
    state: Mutex<HeldState>,
    /// One write at a time: the renewer and `extend` share the resourceVersion.
    writing: tokio::sync::Mutex<()>,
    /// The run is ending: no more renewals (`stop_renewing`).
    ending: AtomicBool,
    /// The run's progress record (lock_progress.rs), written with every renewal and the release.
    progress: Mutex<String>,
}

struct HeldState {
    resource_version: String,
    /// The pause and the last resume as of `resource_version` (README "Pause from anywhere"): every write of this
    /// run carries them, and a write refused because someone paused or resumed meanwhile reads them again.
    paused: Option<Stamp>,
    resumed: Option<Stamp>,
    acquired: String,
    transitions: u64,
    /// When the last successful write was sent (monotonic): the lease holds from there for `duration`.
    confirmed: Instant,
    /// The duration the last successful write carried: what other controllers wait for.
    duration: Duration,
    /// Added to the TTL while the only master's API server is expected away (`extend`).
    extension: Duration,
    /// Warned of a failed renewal since the last success.
    warned: bool,
}

impl Held {
    /// The progress record to carry from the next write on.
    pub(crate) fn set_progress(&self, progress: String) {
        if let Ok(mut p) = self.progress.lock() {
            *p = progress;
        }
    }

    fn progress(&self) -> String {
        self.progress.lock().map(|p| p.clone()).unwrap_or_default()
    }

    fn lease_duration(&self, extension: Duration) -> Duration {
        self.ttl + extension
    }
}

/// Starts no new host: the lease has not been renewed for half its duration.
fn hold_back(run: &impl ClusterCalls, why: String) {
    let first = run.fence().reason.lock().map(|mut r| r.is_none() && r.replace(why.clone()).is_none()).unwrap_or(false);
    if first {
        run.stop_handle().stop();
        run.notice(None, format!("{why}: no new host starts; the run ends with exit 1 (re-run to resume)"));
    }
}

/// Stops every host at its next safe point: the run no longer holds the lease.
fn lose(run: &impl ClusterCalls, why: String) {
    if run.fence().lost.swap(true, Ordering::SeqCst) {
        return;
    }
    if let Ok(mut reason) = run.fence().reason.lock() {
        *reason = Some(why.clone());
    }
    let stop = run.stop_handle();
    stop.stop();
    stop.abort();
    run.notice(
        None,
        format!(
            "{why}: hosts in flight stop at their next safe point (a node this run cordoned is left cordoned and \
             listed: another controller may be driving the cluster now); the run ends with exit 1"
        ),
    );
}

/// Takes the lease for this run, or refuses the run (exit 2) naming who holds it.
pub(crate) async fn take(run: &impl ClusterCalls, me: &Me, ttl: Duration) -> Result<Arc<Held>> {
    let name = lock_name(run);
    let failed = |why: String| {
        Error::hosts_failed(format!("cannot take the cluster lock {name}: {why}"))
            .hint("check upgrade_kubectl and the cluster credentials on the first master; nothing was changed")
    };
    // A few rounds: each lost race (AlreadyExists, Conflict) means another run wrote first, so the next read decides
    // again (and usually refuses).
    for _ in 0..3 {
        let found = read_once_the_api_answers(run).await.map_err(failed)?;
        let decision = decide(found.as_ref(), epoch_ms(), ttl, &me.id);
        let sent = Instant::now();
        let now = epoch_ms();
        let acquired = micro_time(now);
        let outcome = match (&decision, &found) {
            (Decision::Refuse, Some(lease)) => {
                return Err(Error::input(format!(
                    "another upgrade holds the cluster lock {name}: {}",
                    lease.describe()
                ))
                .hint(format!(
                    "wait for it to finish; if that run is dead, its lock goes stale {}s after its last renewal \
                     (its lease), or `upgrade unlock --inventory ... --force` releases it at once; nothing was changed",
                    lease.duration.unwrap_or(ttl).as_secs()
                )));
            }
            (Decision::Take, _) | (_, None) => {
                let data = record(me, &acquired, now, ttl, 0, "");
                let created = create(run, &data, false).await.map_err(failed)?;
                if created.already_exists() {
                    continue;
                }
                created
            }
            (Decision::Mine, Some(lease)) | (Decision::TakeOver { .. }, Some(lease)) => {
                let why = match decision {
                    Decision::Mine => Some(
                        "it is this controller's (this state directory's id), left by a run that is no longer \
                         running: taken back at once"
                            .to_string(),
                    ),
                    Decision::TakeOver { stale: true } => {
                        Some(format!("not renewed within its lease ({}s)", lease.duration.unwrap_or(ttl).as_secs()))
                    }
                    _ => None,
                };
                if let Some(why) = why {
                    run.notice(
                        None,
                        format!("warning: taking over the cluster lock {name} from {}: {why}", lease.describe()),
                    );
                }
                let transitions = lease.transitions + u64::from(lease.identity != me.id);
                let mut data = record(me, &acquired, now, ttl, transitions, "");
                // A pause made before this run (or during an earlier one) holds for it too.
                write_pause(lease.paused.as_ref(), lease.resumed.as_ref(), &mut data);
                let written = write(run, &lease.resource_version, &data, false).await.map_err(failed)?;
                if written.conflict() || written.not_found() {
                    continue;
                }
                written
            }
        };
        if outcome.rc != 0 {
            return Err(failed(outcome.reason()));
        }
        let written = Lease::parse(&outcome.stdout).filter(|l| !l.resource_version.is_empty());
        let Some(written) = written else {
            return Err(failed(format!("the cluster's answer names no resourceVersion ({})", outcome.reason())));
        };
        run.notice(None, format!("cluster lock {name} taken (run {}, controller {})", me.run, me.id));
        if let Some(paused) = &written.paused {
            run.notice(
                None,
                format!(
                    "the cluster's upgrades are paused (by {paused}): this run waits before its first master or batch \
                     until `upgrade resume --inventory ...`"
                ),
            );
        }
        return Ok(Arc::new(Held {
            name,
            me: me.clone(),
            ttl,
            state: Mutex::new(HeldState {
                resource_version: written.resource_version,
                paused: written.paused,
                resumed: written.resumed,
                acquired,
                transitions: written.transitions,
                confirmed: sent,
                duration: ttl,
                extension: Duration::ZERO,
                warned: false,
            }),
            writing: tokio::sync::Mutex::new(()),
            ending: AtomicBool::new(false),
            progress: Mutex::new(String::new()),
        }));
    }
    Err(failed("other runs kept changing it while this one tried to take it".into()))
}

/// What a conditional write of this run's own record came to.
enum Written {
    /// Written: the lock as the API server answered.
    Done(Box<Lease>),
    /// The lock is no longer this run's (`why`): the run must stop.
    Lost(String),
    /// Not written, for a reason that may pass (retried at the next renewal).
    Failed(String),
}

/// Writes this run's record, made by `data` from the state as last read, conditionally on its resourceVersion, with
/// the pause and the last resume as read. Refused because the lock changed while it is still this run's (someone
/// paused or resumed it, or this run's own write went through and only its answer was lost), it is read again and
/// written again: so a renewal never drops a pause, and a pause never drops a renewal.
async fn write_own(
    run: &impl ClusterCalls,
    held: &Held,
    data: impl Fn(&HeldState) -> Map<String, Value>,
) -> (Written, Instant) {
    for _ in 0..3 {
        let sent = Instant::now();
        let (rv, data) = match held.state.lock() {
            Ok(s) => {
                let mut data = data(&s);
                write_pause(s.paused.as_ref(), s.resumed.as_ref(), &mut data);
                (s.resource_version.clone(), data)
            }
            Err(_) => return (Written::Failed("internal error: the lease's state is poisoned".into()), sent),
        };
        let out = match write(run, &rv, &data, true).await {
            Ok(out) => out,
            Err(why) => return (Written::Failed(why), sent),
        };
        if out.rc == 0 {
            let written = Lease::parse(&out.stdout).filter(|l| !l.resource_version.is_empty());
            return match written {
                Some(lease) => (Written::Done(Box::new(lease)), sent),
                None => (Written::Failed(format!("the answer names no resourceVersion ({})", out.reason())), sent),
            };
        }
        if !(out.conflict() || out.not_found()) {
            return (Written::Failed(out.reason()), sent);
        }
        // Someone else wrote it (a pause, a take-over, `unlock --force`, a copy of this state directory) or removed
        // it. Still this very run's: its resourceVersion, pause and resume are this run's to carry on.
        let why = match read(run, true).await {
            Ok(Some(lease)) if lease.identity == held.me.id && lease.run == held.me.run => {
                held.adopt(&lease);
                continue;
            }
            Ok(None) => "it was removed".to_string(),
            Ok(Some(lease)) if lease.released() => "it was released by someone else (upgrade unlock --force?)".into(),
            Ok(Some(lease)) if lease.identity == held.me.id && lease.run != held.me.run => format!(
                "another run with this controller's id holds it (a copy of this state directory?): {}",
                lease.describe()
            ),
            Ok(Some(lease)) => format!("it is held by {}", lease.describe()),
            Err(e) => format!("it changed and cannot be read ({e})"),
        };
        return (Written::Lost(why), sent);
    }
    (Written::Failed("it kept changing while this run wrote it (pauses and resumes in a row?)".into()), Instant::now())
}

impl Held {
    /// Takes the resourceVersion, pause and resume of the lock as read: it is still this run's.
    fn adopt(&self, lease: &Lease) {
        if let Ok(mut s) = self.state.lock() {
            s.resource_version = lease.resource_version.clone();
            s.paused = lease.paused.clone();
            s.resumed = lease.resumed.clone();
        }
    }
}

/// The lock's pause and last resume, read at a safe point of the run (before a master or batch): a pause is seen at
/// once, not at the next renewal. Only a read, apart from the renewals (which it never holds up): a renewal refused
/// because of the pause reads the lock itself (`write_own`).
pub(crate) async fn read_pause(run: &impl ClusterCalls) -> std::result::Result<(Option<Stamp>, Option<Stamp>), String> {
    let lease = read(run, true).await?.ok_or_else(|| "it was removed".to_string())?;
    Ok((lease.paused, lease.resumed))
}

/// One renewal: a conditional write of this run's record with a fresh renewTime (and its progress record).
pub(crate) async fn renew(run: &impl ClusterCalls, held: &Held) {
    let _one = held.writing.lock().await;
    if run.fence().lost() || held.ending.load(Ordering::SeqCst) {
        return;
    }
    // The duration the write that went through carried: what other controllers wait for.
    let carried = Mutex::new(held.ttl);
    let (written, sent) = write_own(run, held, |s| {
        let duration = held.lease_duration(s.extension);
        if let Ok(mut c) = carried.lock() {
            *c = duration;
        }
        record(&held.me, &s.acquired, epoch_ms(), duration, s.transitions, &held.progress())
    })
    .await;
    match written {
        Written::Done(lease) => {
            let lease = *lease;
            if let Ok(mut s) = held.state.lock() {
                s.resource_version = lease.resource_version;
                s.paused = lease.paused;
                s.resumed = lease.resumed;
                s.confirmed = sent;
                s.duration = carried.lock().map(|c| *c).unwrap_or(held.ttl);
                s.warned = false;
            }
        }
        Written::Lost(why) => lose(run, format!("lost the cluster lock {}: {why}", held.name)),
        Written::Failed(why) => warn_once(run, held, why),
    }
}

fn warn_once(run: &impl ClusterCalls, held: &Held, why: String) {
    let first = held.state.lock().map(|mut s| !std::mem::replace(&mut s.warned, true)).unwrap_or(false);
    if first {
        run.notice(
            None,
            format!(
                "warning: cannot renew the cluster lock {}: {why} (retried; not renewed for half its lease, no new \
                 host starts; for the whole lease, the run stops)",
                held.name
            ),
        );
    }
}

/// Renews the lease every fifth of the TTL, and fences the run by the time since the last successful renewal, until
/// the task is aborted (the end of the run). A fifth: two renewals fall within the first half of the lease, so one
/// slow or failed renewal alone does not stop the run.
pub(crate) async fn keep_renewed(run: Arc<impl ClusterCalls + 'static>, held: Arc<Held>) {
    let run = &*run;
    let every = renewal_period(held.ttl);
    let renewing = async {
        // On a fixed beat from when the take was sent (the lease counts from there, a slow take included), not
        // after each renewal: the time a renewal takes is not added to the next.
        let taken = held.state.lock().map(|s| s.confirmed).unwrap_or_else(|_| Instant::now());
        let mut next = tokio::time::Instant::from_std(taken) + every;
        loop {
            tokio::time::sleep_until(next).await;
            next = (next + every).max(tokio::time::Instant::now());
            if run.fence().lost() {
                return;
            }
            renew(run, &held).await;
        }
    };
    // Apart from the renewals: a renewal that hangs (an API that does not answer) must not stop the clock.
    let watching = async {
        loop {
            tokio::time::sleep(Duration::from_millis(100)).await;
            let Ok((since, duration)) = held.state.lock().map(|s| (s.confirmed.elapsed(), s.duration)) else {
                continue;
            };
            if since >= duration {
                lose(
                    run,
                    format!(
                        "lost the cluster lock {}: not renewed for {:.1}s, its whole lease: another controller may \
                         take it over now",
                        held.name,
                        since.as_secs_f64()
                    ),
                );
                return;
            }
            if since >= duration / 2 && run.fence().reason().is_none() {
                hold_back(
                    run,
                    format!(
                        "the cluster lock {} has not been renewed for {:.1}s, half its {}s lease",
                        held.name,
                        since.as_secs_f64(),
                        duration.as_secs()
                    ),
                );
            }
        }
    };
    tokio::join!(renewing, watching);
}

/// How often the lease is renewed: a fifth of the TTL, at least every 200 ms.
pub(crate) fn renewal_period(ttl: Duration) -> Duration {
    (ttl / 5).max(Duration::from_millis(200))
}

/// While the only master's API server is away (its upgrade and restart), the lease is written with
/// `upgrade_control_plane_ready_timeout` more: renewals may fail that long without fencing the run, and another
/// controller waits that long more before it takes a dead run's lease. `Duration::ZERO` ends the window. The write
/// is made at once, before the API goes away; if it fails the run keeps its plain lease (said).
pub(crate) async fn extend(run: &impl ClusterCalls, held: &Held, extension: Duration) {
    if let Ok(mut s) = held.state.lock() {
        s.extension = extension;
    }
    renew(run, held).await;
    let duration = held.state.lock().map(|s| s.duration).unwrap_or(held.ttl);
    if !extension.is_zero() && duration < held.lease_duration(extension) && !run.fence().lost() {
        run.notice(
            None,
            format!(
                "warning: the cluster lock {} could not be extended for the API server's restart: the run keeps its {}s \
                 lease and stops if the API server stays away that long",
                held.name,
                duration.as_secs()
            ),
        );
    }
}

/// Waits, for a few seconds at most, for a renewal under way to end, and starts no more: the run is ending.
pub(crate) async fn stop_renewing(held: &Held) {
    held.ending.store(true, Ordering::SeqCst);
    let _ = tokio::time::timeout(Duration::from_secs(5), held.writing.lock()).await;
}

/// Releases the lease when it is still this run's: a conditional write with no holder, so a run that lost it never
/// touches the new holder's. The ConfigMap stays (released), as client-go leaves its lock objects: a delete cannot be
/// made conditional with kubectl 1.11, and a delete after the write could remove a lease another run just took. A
/// pause stays too: it is the operator's, for the runs to come.
pub(crate) async fn release(run: &impl ClusterCalls, held: &Held) {
    let _one = held.writing.lock().await;
    let (written, _) = write_own(run, held, |s| {
        let mut data = record(&held.me, &s.acquired, epoch_ms(), held.ttl, s.transitions, &held.progress());
        data.insert("holderIdentity".into(), Value::String(String::new()));
        data
    })
    .await;
    match written {
        Written::Done(_) => run.notice(None, format!("cluster lock {} released", held.name)),
        Written::Lost(why) => run.notice(
            None,
            format!("warning: the cluster lock {} is no longer this run's ({why}): left alone", held.name),
        ),
        Written::Failed(why) => {
            run.notice(None, format!("warning: cannot release the cluster lock {}: {why}", held.name))
        }
    }
}

/// `upgrade unlock`: marks the lease released with a conditional write on what was read (so a renewal in between
/// wins and nothing is lost). Its holder, if alive, finds it at its next renewal and stops. A pause stays.
pub(crate) async fn force_release(run: &impl ClusterCalls, lease: &Lease) -> std::result::Result<Outcome, String> {
    let mut lease = lease.clone();
    // The holder the operator chose to release may renew (or write its progress) between the read and this write:
    // then it is read again and, still the same run, released at its new version; anyone else's lease is left.
    for _ in 0..3 {
        let mut data = lease.data();
        data.insert("holderIdentity".into(), Value::String(String::new()));
        data.insert("renewTime".into(), Value::String(micro_time(epoch_ms())));
        let out = write(run, &lease.resource_version, &data, true).await?;
        if !out.conflict() {
            return Ok(out);
        }
        match read(run, true).await? {
            Some(now) if now.identity == lease.identity && now.run == lease.run => lease = now,
            _ => return Err(format!("it changed while this command ran (another holder?): {}", out.reason())),
        }
    }
    Err("its holder kept renewing it while this command tried to release it: try again".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::phase::lease::parse_micro_time;

    fn lease(identity: &str, renewed_s: u64, duration_s: u64) -> Lease {
        Lease {
            resource_version: "7".into(),
            identity: identity.into(),
            duration: Some(Duration::from_secs(duration_s)),
            renewed_ms: Some(renewed_s * 1000),
            ..Lease::default()
        }
    }

    #[test]
    fn the_lease_decision_takes_takes_back_takes_over_or_refuses() {
        let ttl = Duration::from_secs(900);
        assert_eq!(decide(None, 5_000_000, ttl, "me"), Decision::Take);
        // Mine whatever its age: this process holds the state directory whose id it carries.
        assert_eq!(decide(Some(&lease("me", 4_999, 10)), 5_000_000, ttl, "me"), Decision::Mine);
        // Another controller's, renewed within its own lease (10 s), not the taker's TTL: refused until 10 s passed.
        let other = lease("them", 4_990, 10);
        assert_eq!(decide(Some(&other), 5_000_000, ttl, "me"), Decision::Refuse);
        assert_eq!(decide(Some(&other), 5_000_001, ttl, "me"), Decision::TakeOver { stale: true });
        // Released: free at once.
        assert_eq!(decide(Some(&lease("", 4_999, 10)), 5_000_000, ttl, "me"), Decision::TakeOver { stale: false });
        // An empty id of ours never matches a released lease as "mine".
        assert_eq!(decide(Some(&lease("", 4_999, 10)), 5_000_000, ttl, ""), Decision::TakeOver { stale: false });
        // A renewal time that cannot be read proves nothing: refused.
        let unreadable = Lease { renewed_ms: None, ..lease("them", 0, 10) };
        assert_eq!(decide(Some(&unreadable), u64::MAX, ttl, "me"), Decision::Refuse);
        // No duration written: the taker's TTL.
        let no_duration = Lease { duration: None, ..lease("them", 4_000, 0) };
        assert_eq!(decide(Some(&no_duration), 4_900_000, ttl, "me"), Decision::Refuse);
        assert_eq!(decide(Some(&no_duration), 4_900_001, ttl, "me"), Decision::TakeOver { stale: true });
    }

    #[test]
    fn a_lease_reads_back_as_written_and_an_old_lock_is_never_ours() {
        let me = Me {
            id: "c0ffee".into(),
            holder: "ops@ci".into(),
            location: "/srv/s".into(),
            started: "t".into(),
            run: "r1".into(),
            change_id: "CHG-7".into(),
        };
        let data = record(&me, "2026-11-24T10:00:00.000000Z", 1_795_600_000_250, Duration::from_secs(30), 2, "");
        let json = json!({"metadata": {"resourceVersion": "41"}, "data": data}).to_string();
        let lease = Lease::parse(&json).unwrap();
        assert_eq!(lease.resource_version, "41");
        assert_eq!(lease.identity, "c0ffee");
        assert_eq!(lease.renewed_ms, Some(1_795_600_000_250));
        assert_eq!(lease.duration, Some(Duration::from_secs(30)));
        assert_eq!(lease.transitions, 2);
        assert!(lease.describe().starts_with("ops@ci (state directory /srv/s), run r1, controller c0ffee"));
        assert!(lease.describe().ends_with(", change CHG-7"));

        let old = r#"{"metadata":{"annotations":{"upgrade/renewed":"1000"}},
                      "data":{"holder":"ops@ci","where":"/srv/s","started":"t","run":"r1","renewed":"900"}}"#;
        let old = Lease::parse(old).unwrap();
        assert_eq!(old.renewed_ms, Some(1_000_000), "the later of the take and the last renewal");
        assert!(!old.released());
        assert_eq!(decide(Some(&old), 1_000_000, Duration::from_secs(900), "ops@ci /srv/s"), Decision::Refuse);
        assert_eq!(decide(Some(&old), 1_900_001, Duration::from_secs(900), "x"), Decision::TakeOver { stale: true });
    }

    #[test]
    fn a_lease_with_a_pause_reads_back_as_written_and_writes_back_unchanged() {
        let me = Me { id: "c0ffee".into(), holder: "ops@ci".into(), run: "r1".into(), ..Me::default() };
        let mut data = record(&me, "2026-11-24T10:00:00.000000Z", 1_795_600_000_250, Duration::from_secs(30), 2, "{}");
        let paused = Stamp { by: "oncall@laptop".into(), at: "2026-11-24T10:05:00Z".into() };
        let resumed = Stamp { by: "ops@ci".into(), at: "2026-11-24T09:00:00Z".into() };
        write_pause(Some(&paused), Some(&resumed), &mut data);
        let json = json!({"metadata": {"resourceVersion": "41"}, "data": data}).to_string();
        let lease = Lease::parse(&json).unwrap();
        assert_eq!(lease.paused.as_ref(), Some(&paused));
        assert_eq!(lease.resumed.as_ref(), Some(&resumed));
        assert_eq!(paused.to_string(), "oncall@laptop at 2026-11-24T10:05:00Z");
        // What `unlock`, `pause` and `resume` write back is what was read, key for key.
        assert_eq!(lease.data(), data);
        let again = Lease::parse(&json!({"metadata": {"resourceVersion": "41"}, "data": lease.data()}).to_string());
        assert_eq!(again.as_ref(), Some(&lease));
        // A renewal's record carries no pause of its own: the run adds the one it read (`write_own`).
        write_pause(None, None, &mut data);
        let cleared = Lease::parse(&json!({"data": data}).to_string()).unwrap();
        assert_eq!((cleared.paused, cleared.resumed), (None, None));
        assert!(!data.keys().any(|k| k.starts_with("paused") || k.starts_with("resumed")), "{data:?}");
    }

    #[test]
    fn micro_times_round_trip() {
        assert_eq!(micro_time(0), "1970-01-01T00:00:00.000000Z");
        assert_eq!(micro_time(1_795_307_262_123), "2026-11-22T00:27:42.123000Z");
        assert_eq!(parse_micro_time("2026-11-22T00:27:42.123000Z"), Some(1_795_307_262_123));
        assert_eq!(parse_micro_time("2026-11-22T00:27:42Z"), Some(1_795_307_262_000));
        assert_eq!(parse_micro_time("2000-02-29T00:00:00.5Z"), Some(951_782_400_500));
        assert_eq!(parse_micro_time("2026-13-22T00:27:42Z"), None);
        assert_eq!(parse_micro_time("yesterday"), None);
    }

    #[test]
    fn a_controller_id_is_made_once_and_kept() {
        let dir = tempfile::tempdir().unwrap();
        let id = controller_id(dir.path()).unwrap();
        assert_eq!(id.len(), 32);
        assert_eq!(controller_id(dir.path()).unwrap(), id);
        let other = tempfile::tempdir().unwrap();
        assert_ne!(controller_id(other.path()).unwrap(), id);
    }
}
