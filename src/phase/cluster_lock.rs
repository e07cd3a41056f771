//! The cluster-wide lock: a ConfigMap (`kube-system/upgrade-lock` by default) that says which run drives the cluster,
//! so two operators on two machines, or a CI job and a person, never upgrade one cluster at once. The state
//! directory's flock (journal.rs) only guards one controller; this one lives where every controller looks.
//!
//! Taken after preflight has reached every host and before it reads the cluster: a second run is refused (exit 2,
//! naming the holder) before it reads a cluster another run is changing and draws conclusions from it (masters on two
//! versions, nodes cordoned by someone else). Renewed every third of `upgrade_cluster_lock_ttl` while the run goes
//! on, released at its end. A lock not renewed for the TTL is stale (its run died) and taken over with a warning; a
//! lock written from this very state directory on this machine is taken over at once, since this process holds the
//! directory's flock and so its writer cannot be alive.
//!
//! The commands are the task file cluster_lock.yml (docs/DESIGN.md's cluster-object shapes); this module decides.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::Value;

use super::run::UpgradeRun;
use crate::error::{Error, Result};
use crate::vocabulary::Phase;
use crate::vocabulary::Step;

/// Default of `upgrade_cluster_lock_ttl`.
pub(crate) const DEFAULT_TTL: Duration = Duration::from_secs(15 * 60);

/// What the lock says about its holder.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Holder {
    /// user@machine of the controller.
    pub holder: String,
    /// The state directory of the run.
    pub location: String,
    /// When the run took the lock (UTC).
    pub started: String,
    pub run: String,
    /// The last renewal, seconds since the epoch (the controller's clock).
    pub renewed: Option<u64>,
}

impl Holder {
    /// This controller, for the run `run`.
    pub(crate) fn this_run(run: &str, state_dir: &str) -> Holder {
        let user = std::env::var("USER").or_else(|_| std::env::var("LOGNAME")).unwrap_or_else(|_| "unknown".into());
        Holder {
            holder: format!("{user}@{}", crate::journal::host_name()),
            location: state_dir.to_string(),
            started: crate::time_format::utc_timestamp(SystemTime::now()),
            run: run.to_string(),
            renewed: Some(epoch_now()),
        }
    }

    /// Reads `get configmap NAME -o json`: the data the take wrote, and the renewal annotation when newer.
    pub(crate) fn parse(json: &str) -> Option<Holder> {
        let object: Value = serde_json::from_str(json).ok()?;
        let data = object.get("data").and_then(Value::as_object).cloned().unwrap_or_default();
        let text = |key: &str| data.get(key).and_then(Value::as_str).unwrap_or_default().to_string();
        let annotated = object
            .pointer("/metadata/annotations")
            .and_then(|a| a.get("upgrade/renewed"))
            .and_then(Value::as_str)
            .and_then(|s| s.trim().parse::<u64>().ok());
        let written = text("renewed").trim().parse::<u64>().ok();
        Some(Holder {
            holder: text("holder"),
            location: text("where"),
            started: text("started"),
            run: text("run"),
            renewed: annotated.max(written),
        })
    }

    /// "root@ci-7 (state directory /srv/c1/.upgrade-state), run 20261123T105800Z-4242, started ..., renewed 40s ago".
    pub(crate) fn describe(&self) -> String {
        let mut text = if self.holder.is_empty() { "an unnamed holder".to_string() } else { self.holder.clone() };
        if !self.location.is_empty() {
            text.push_str(&format!(" (state directory {})", self.location));
        }
        if !self.run.is_empty() {
            text.push_str(&format!(", run {}", self.run));
        }
        if !self.started.is_empty() {
            text.push_str(&format!(", started {}", self.started));
        }
        if let Some(renewed) = self.renewed {
            text.push_str(&format!(", renewed {}s ago", epoch_now().saturating_sub(renewed)));
        }
        text
    }

    /// Not renewed for longer than `ttl`. A lock being written this instant (no renewal yet) is not stale.
    pub(crate) fn is_stale(&self, ttl: Duration, now: u64) -> bool {
        self.renewed.is_some_and(|renewed| now.saturating_sub(renewed) > ttl.as_secs())
    }
}

pub(crate) fn epoch_now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0)
}

/// What one lock command did.
#[derive(Debug, Clone, Default)]
pub(crate) struct Outcome {
    pub rc: i64,
    pub stdout: String,
    pub stderr: String,
}

impl Outcome {
    fn already_exists(&self) -> bool {
        self.rc != 0 && (self.stderr.contains("AlreadyExists") || self.stderr.contains("already exists"))
    }
    fn not_found(&self) -> bool {
        self.rc != 0 && (self.stderr.contains("NotFound") || self.stderr.contains("not found"))
    }
    fn reason(&self) -> String {
        let text = if self.stderr.trim().is_empty() { self.stdout.trim() } else { self.stderr.trim() };
        text.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or("no output").to_string()
    }
}

/// `take`, `read`, `renew` or `release` through cluster_lock.yml on the first master.
pub(crate) async fn call(
    run: &UpgradeRun,
    action: &str,
    holder: &Holder,
    quiet: bool,
) -> std::result::Result<Outcome, String> {
    let vars = [
        ("upgrade_cluster_lock_action", Value::from(action)),
        ("upgrade_cluster_lock_holder", Value::from(holder.holder.clone())),
        ("upgrade_cluster_lock_where", Value::from(holder.location.clone())),
        ("upgrade_cluster_lock_started", Value::from(holder.started.clone())),
        ("upgrade_cluster_lock_run", Value::from(holder.run.clone())),
        ("upgrade_cluster_lock_renewed", Value::from(epoch_now().to_string())),
    ];
    let file = run.playbook("cluster_lock.yml");
    let facts = if quiet {
        run.run_step_quietly(&run.first_master, Step::ClusterLock, &file, &vars).await
    } else {
        run.run_step(Phase::Preflight, &run.first_master, Step::ClusterLock, &file, &vars, None).await
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

/// `upgrade_cluster_lock_ttl` of the first master: seconds or a duration ("15m"); bad input is refused (exit 2)
/// before the lock is touched.
pub(crate) fn ttl(run: &UpgradeRun) -> Result<Duration> {
    let text = run.render_for(&run.first_master, "{{ upgrade_cluster_lock_ttl | default('') }}");
    if text.trim().is_empty() {
        return Ok(DEFAULT_TTL);
    }
    let parsed = crate::settings::DrainTimeout::parse(&text)
        .map_err(|_| {
            Error::input(format!("upgrade_cluster_lock_ttl `{}` is not a duration", text.trim()))
                .hint("write seconds (900) or a duration such as \"15m\"; it must be more than 0")
        })?
        .seconds();
    if parsed == 0 {
        return Err(
            Error::input("upgrade_cluster_lock_ttl is 0").hint("write a duration of at least one second, e.g. \"15m\"")
        );
    }
    Ok(Duration::from_secs(parsed))
}

fn lock_name(run: &UpgradeRun) -> String {
    run.render_for(
        &run.first_master,
        "{{ upgrade_cluster_lock_namespace | default('kube-system') }}/{{ upgrade_cluster_lock_name | default('upgrade-lock') }}",
    )
}

/// Takes the lock for this run, or refuses the run (exit 2) naming who holds it.
pub(crate) async fn take(run: &UpgradeRun, me: &Holder, ttl: Duration) -> Result<()> {
    let name = lock_name(run);
    let failed = |why: String| {
        Error::hosts_failed(format!("cannot take the cluster lock {name}: {why}"))
            .hint("check upgrade_kubectl and the cluster credentials on the first master; nothing was changed")
    };
    // Twice at most: once, and once more after a stale lock was removed.
    for attempt in 0..2 {
        let taken = call(run, "take", me, false).await.map_err(failed)?;
        if taken.rc == 0 {
            run.notice(None, format!("cluster lock {name} taken (run {})", me.run));
            return Ok(());
        }
        if !taken.already_exists() {
            return Err(failed(taken.reason()));
        }
        let read = call(run, "read", me, false).await.map_err(failed)?;
        if read.not_found() && attempt == 0 {
            continue; // released between our create and our read: try again
        }
        let Some(holder) = Holder::parse(&read.stdout) else {
            return Err(failed(format!("it exists but cannot be read ({})", read.reason())));
        };
        let ours = holder.holder == me.holder && holder.location == me.location;
        let stale = holder.is_stale(ttl, epoch_now());
        if attempt == 1 || !(ours || stale) {
            return Err(Error::input(format!("another upgrade holds the cluster lock {name}: {}", holder.describe()))
                .hint(format!(
                    "wait for it to finish; if that run is dead, its lock goes stale {}s after its last renewal \
                     (upgrade_cluster_lock_ttl), or remove it with `upgrade unlock --inventory ...`; nothing was changed",
                    ttl.as_secs()
                )));
        }
        let why = if ours {
            "it was left by an earlier run from this state directory on this machine, which is no longer running"
                .to_string()
        } else {
            format!("not renewed for more than {}s (upgrade_cluster_lock_ttl)", ttl.as_secs())
        };
        run.notice(None, format!("warning: taking over the cluster lock {name} from {}: {why}", holder.describe()));
        let released = call(run, "release", me, false).await.map_err(failed)?;
        if released.rc != 0 && !released.not_found() {
            return Err(failed(released.reason()));
        }
    }
    Err(failed("another run took it at the same moment".into()))
}

/// Renews the lock every third of the TTL until the task is aborted. A renewal that fails is said, not fatal: the
/// run keeps its lock for the rest of the TTL and the next renewal may succeed.
pub(crate) async fn keep_renewed(run: std::sync::Arc<UpgradeRun>, me: Holder, ttl: Duration) {
    let every = (ttl / 3).max(Duration::from_secs(1));
    loop {
        tokio::time::sleep(every).await;
        match call(&run, "renew", &me, true).await {
            Ok(out) if out.rc == 0 => {}
            Ok(out) => run.notice(None, format!("warning: cannot renew the cluster lock: {}", out.reason())),
            Err(why) => run.notice(None, format!("warning: cannot renew the cluster lock: {why}")),
        }
    }
}

/// Releases the lock when it is still this run's (a run that lost it to a takeover leaves the new holder's alone).
pub(crate) async fn release(run: &UpgradeRun, me: &Holder) {
    let name = lock_name(run);
    let read = match call(run, "read", me, true).await {
        Ok(read) => read,
        Err(why) => return run.notice(None, format!("warning: cannot release the cluster lock {name}: {why}")),
    };
    match Holder::parse(&read.stdout) {
        Some(holder) if holder.run == me.run => match call(run, "release", me, true).await {
            Ok(out) if out.rc == 0 => run.notice(None, format!("cluster lock {name} released")),
            Ok(out) => run.notice(None, format!("warning: cannot release the cluster lock {name}: {}", out.reason())),
            Err(why) => run.notice(None, format!("warning: cannot release the cluster lock {name}: {why}")),
        },
        Some(holder) => run.notice(
            None,
            format!("warning: the cluster lock {name} is no longer this run's ({}): left alone", holder.describe()),
        ),
        None if read.not_found() => run.notice(None, format!("warning: the cluster lock {name} was already gone")),
        None => run.notice(None, format!("warning: cannot release the cluster lock {name}: {}", read.reason())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lock_is_stale_only_after_its_ttl_without_renewal() {
        let json = r#"{"metadata":{"annotations":{"upgrade/renewed":"1000"}},
                       "data":{"holder":"ops@ci","where":"/srv/s","started":"t","run":"r1","renewed":"900"}}"#;
        let holder = Holder::parse(json).unwrap();
        assert_eq!(holder.renewed, Some(1000), "the later of the take and the last renewal");
        assert!(!holder.is_stale(Duration::from_secs(900), 1900));
        assert!(holder.is_stale(Duration::from_secs(900), 1901));
        let being_written = Holder::parse(r#"{"metadata":{},"data":{}}"#).unwrap();
        assert!(!being_written.is_stale(Duration::from_secs(1), u64::MAX));
        assert!(holder.describe().starts_with("ops@ci (state directory /srv/s), run r1"));
    }
}
