//! The cluster lock's lease record, pure: who holds it (this controller and run), how it reads and prints, whether it
//! is live, and what a run decides from it. cluster_lock.rs reads and writes it on the cluster.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::Value;

use crate::error::{Error, Result};

/// The file of the state directory that keeps this controller's id.
const CONTROLLER_ID_FILE: &str = "controller-id";

/// This controller and run, as its lease names them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Me {
    /// The controller id (`holderIdentity`): what decides whose lease it is.
    pub id: String,
    /// user@machine, for people.
    pub holder: String,
    /// The state directory, for people.
    pub location: String,
    /// When the run took the lease (UTC).
    pub started: String,
    pub run: String,
    /// `upgrade_change_id`, the change ticket (may be empty).
    pub change_id: String,
}

impl Me {
    pub(crate) fn new(id: &str, run: &str, state_dir: &str, change_id: &str) -> Me {
        Me {
            id: id.to_string(),
            holder: operator(),
            location: state_dir.to_string(),
            started: crate::time_format::utc_timestamp(SystemTime::now()),
            run: run.to_string(),
            change_id: change_id.to_string(),
        }
    }
}

/// Who is at this machine, as the lease names people: `user@machine`.
pub(crate) fn operator() -> String {
    let user = std::env::var("USER").or_else(|_| std::env::var("LOGNAME")).unwrap_or_else(|_| "unknown".into());
    format!("{user}@{}", crate::journal::host_name())
}

/// Who did something to the lock, and when (UTC): a pause (`paused_by`, `paused_at`) or a resume (`resumed_by`,
/// `resumed_at`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Stamp {
    /// user@machine, as the holder is named.
    pub by: String,
    pub at: String,
}

impl Stamp {
    pub(crate) fn now() -> Stamp {
        Stamp { by: operator(), at: crate::time_format::utc_timestamp(SystemTime::now()) }
    }

    /// Read from the data keys `{prefix}_by` and `{prefix}_at`; `None` when `{prefix}_by` is absent or empty.
    fn read(data: &serde_json::Map<String, Value>, prefix: &str) -> Option<Stamp> {
        let text = |key: String| data.get(&key).and_then(Value::as_str).unwrap_or_default().to_string();
        let by = text(format!("{prefix}_by"));
        (!by.is_empty()).then(|| Stamp { by, at: text(format!("{prefix}_at")) })
    }

    fn write(stamp: Option<&Stamp>, data: &mut serde_json::Map<String, Value>, prefix: &str) {
        let (by, at) = (format!("{prefix}_by"), format!("{prefix}_at"));
        match stamp {
            Some(s) => {
                data.insert(by, Value::String(s.by.clone()));
                data.insert(at, Value::String(s.at.clone()));
            }
            None => {
                data.remove(&by);
                data.remove(&at);
            }
        }
    }
}

impl std::fmt::Display for Stamp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.at.is_empty() { write!(f, "{}", self.by) } else { write!(f, "{} at {}", self.by, self.at) }
    }
}

/// The data keys of the pause (README "Pause from anywhere").
pub(crate) const PAUSE_KEYS: [&str; 2] = ["paused", "resumed"];

/// Writes the pause and the last resume into a lock's data: every writer of the lock carries them as it read them,
/// so no write drops a pause (they change only through `upgrade pause` and `upgrade resume`).
pub(crate) fn write_pause(paused: Option<&Stamp>, resumed: Option<&Stamp>, data: &mut serde_json::Map<String, Value>) {
    Stamp::write(paused, data, PAUSE_KEYS[0]);
    Stamp::write(resumed, data, PAUSE_KEYS[1]);
}

/// The lease as read from the cluster.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Lease {
    pub resource_version: String,
    /// `holderIdentity`; empty when released.
    pub identity: String,
    /// `leaseDurationSeconds` as its holder wrote it.
    pub duration: Option<Duration>,
    pub acquired: String,
    /// `renewTime`, milliseconds since the epoch (the holder's clock).
    pub renewed_ms: Option<u64>,
    pub transitions: u64,
    pub holder: String,
    pub location: String,
    pub started: String,
    pub run: String,
    pub change_id: String,
    /// The run's progress record (lock_progress.rs, JSON), when its run wrote one.
    pub progress: String,
    /// `upgrade pause`: who paused the cluster's upgrades, and when; `None` when not paused.
    pub paused: Option<Stamp>,
    /// `upgrade resume`: who last resumed, and when (kept until the next pause).
    pub resumed: Option<Stamp>,
}

impl Lease {
    /// Reads `get configmap NAME -o json` (or what `create`/`replace -o json` answer). A lock written by an earlier
    /// version of this tool (no `holderIdentity`, seconds in `renewed`) reads as held by a controller that is never
    /// this one, renewed when it said.
    pub(crate) fn parse(json: &str) -> Option<Lease> {
        let object: Value = serde_json::from_str(json).ok()?;
        let data = object.get("data").and_then(Value::as_object).cloned().unwrap_or_default();
        let text = |key: &str| data.get(key).and_then(Value::as_str).unwrap_or_default().to_string();
        let number = |key: &str| text(key).trim().parse::<u64>().ok();
        let mut lease = Lease {
            resource_version: object
                .pointer("/metadata/resourceVersion")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
            identity: text("holderIdentity"),
            duration: number("leaseDurationSeconds").filter(|s| *s > 0).map(Duration::from_secs),
            acquired: text("acquireTime"),
            renewed_ms: parse_micro_time(&text("renewTime")),
            transitions: number("leaderTransitions").unwrap_or(0),
            holder: text("holder"),
            location: text("where"),
            started: text("started"),
            run: text("run"),
            change_id: text("change_id"),
            progress: text("progress"),
            paused: Stamp::read(&data, PAUSE_KEYS[0]),
            resumed: Stamp::read(&data, PAUSE_KEYS[1]),
        };
        if !data.contains_key("holderIdentity") {
            let annotated = object
                .pointer("/metadata/annotations")
                .and_then(|a| a.get("upgrade/renewed"))
                .and_then(Value::as_str)
                .and_then(|s| s.trim().parse::<u64>().ok());
            lease.renewed_ms = annotated.max(number("renewed")).map(|s| s * 1000);
            lease.identity = format!("an earlier version of upgrade: {} {}", lease.holder, lease.location);
        }
        Some(lease)
    }

    /// The data to write back as read, with every field this tool reads (`upgrade unlock`'s release, `upgrade pause`
    /// and `upgrade resume` change only their own keys in it).
    pub(crate) fn data(&self) -> serde_json::Map<String, Value> {
        let mut data = serde_json::Map::new();
        for (key, value) in [
            ("holderIdentity", self.identity.clone()),
            ("leaseDurationSeconds", self.duration.map(|d| d.as_secs()).unwrap_or(1).max(1).to_string()),
            ("acquireTime", self.acquired.clone()),
            ("renewTime", self.renewed_ms.map(micro_time).unwrap_or_default()),
            ("leaderTransitions", self.transitions.to_string()),
            ("holder", self.holder.clone()),
            ("where", self.location.clone()),
            ("started", self.started.clone()),
            ("run", self.run.clone()),
            ("change_id", self.change_id.clone()),
        ] {
            data.insert(key.to_string(), Value::String(value));
        }
        if !self.progress.is_empty() {
            data.insert("progress".to_string(), Value::String(self.progress.clone()));
        }
        write_pause(self.paused.as_ref(), self.resumed.as_ref(), &mut data);
        data
    }

    /// No run holds it: released at the end of a run, or by `upgrade unlock`.
    pub(crate) fn released(&self) -> bool {
        self.identity.is_empty()
    }

    /// How long ago it was renewed, by this machine's clock.
    pub(crate) fn renewed_ago(&self, now_ms: u64) -> Option<Duration> {
        self.renewed_ms.map(|r| Duration::from_millis(now_ms.saturating_sub(r)))
    }

    /// Renewed within its lease (its own `leaseDurationSeconds`, else `ttl`): its holder may be alive and driving
    /// the cluster. A lease whose renewal time cannot be read counts as live: nothing proves its holder dead.
    pub(crate) fn live(&self, now_ms: u64, ttl: Duration) -> bool {
        let duration = self.duration.unwrap_or(ttl);
        match self.renewed_ms {
            Some(renewed) => now_ms <= renewed.saturating_add(duration.as_millis() as u64),
            None => true,
        }
    }

    /// "root@ci-7 (state directory /srv/c1/.upgrade-state), run 20261123T105800Z-4242, controller 3f.., started
    /// ..., renewed 40s ago, change CHG-1".
    pub(crate) fn describe(&self) -> String {
        let mut text = if self.holder.is_empty() { "an unnamed holder".to_string() } else { self.holder.clone() };
        if !self.location.is_empty() {
            text.push_str(&format!(" (state directory {})", self.location));
        }
        if !self.run.is_empty() {
            text.push_str(&format!(", run {}", self.run));
        }
        if !self.identity.is_empty() && !self.identity.starts_with("an earlier version") {
            text.push_str(&format!(", controller {}", self.identity));
        }
        if !self.started.is_empty() {
            text.push_str(&format!(", started {}", self.started));
        }
        if let Some(ago) = self.renewed_ago(epoch_ms()) {
            text.push_str(&format!(", renewed {}s ago", ago.as_secs()));
        }
        if let Some(d) = self.duration {
            text.push_str(&format!(" (lease {}s)", d.as_secs()));
        }
        if !self.change_id.is_empty() {
            text.push_str(&format!(", change {}", self.change_id));
        }
        text
    }
}

/// What a run does with the lease it read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Decision {
    /// There is none: create it (atomic; AlreadyExists when another run was faster).
    Take,
    /// This controller's own, left by a run from this state directory that is no longer running: take it back.
    Mine,
    /// Released, or not renewed within its lease: take it over with a conditional write.
    TakeOver { stale: bool },
    /// Another controller's, renewed within its lease.
    Refuse,
}

/// The lease decision, as a function of what was read, this machine's clock, the TTL and this controller's id.
pub(crate) fn decide(read: Option<&Lease>, now_ms: u64, ttl: Duration, my_id: &str) -> Decision {
    match read {
        None => Decision::Take,
        Some(lease) if !my_id.is_empty() && lease.identity == my_id => Decision::Mine,
        Some(lease) if lease.released() => Decision::TakeOver { stale: false },
        Some(lease) if !lease.live(now_ms, ttl) => Decision::TakeOver { stale: true },
        Some(_) => Decision::Refuse,
    }
}

pub(crate) fn epoch_now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0)
}

pub(crate) fn epoch_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0)
}

/// client-go's MicroTime: `2026-11-24T10:00:00.123456Z`.
pub(crate) fn micro_time(ms: u64) -> String {
    let t = UNIX_EPOCH + Duration::from_millis(ms);
    let (y, mo, d, h, mi, s) = crate::time_format::civil(t);
    format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}.{:06}Z", (ms % 1000) * 1000)
}

pub(crate) use crate::time_format::parse_utc_millis as parse_micro_time;

/// This controller's id, made once per state directory (`controller-id`, random) and kept: what the lease names as
/// its holder. Bad input (exit 2) when it can be neither read nor made.
pub(crate) fn controller_id(state_dir: &std::path::Path) -> Result<String> {
    let path = state_dir.join(CONTROLLER_ID_FILE);
    let cannot = |e: std::io::Error| {
        Error::input(format!("cannot keep this controller's id in {}: {e}", path.display()))
            .hint("the state directory must be writable; nothing was changed")
    };
    if let Ok(text) = std::fs::read_to_string(&path) {
        let id = text.trim();
        if id.len() >= 16 && id.chars().all(|c| c.is_ascii_alphanumeric() || c == '-') {
            return Ok(id.to_string());
        }
    }
    let mut bytes = [0u8; 16];
    use std::io::Read;
    std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut bytes)).map_err(cannot)?;
    let id: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    // Written beside, then renamed: a kill -9 never leaves half an id.
    let partial = state_dir.join(format!("{CONTROLLER_ID_FILE}.{}", std::process::id()));
    std::fs::write(&partial, format!("{id}\n")).map_err(cannot)?;
    std::fs::rename(&partial, &path).map_err(cannot)?;
    Ok(id)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A lease held by `holder`, renewed at `renewed_ms` by its holder's clock, for `duration_s` seconds (or the
    /// reader's TTL when the holder wrote none).
    fn held(holder: &str, renewed_ms: Option<u64>, duration_s: Option<u64>) -> Lease {
        Lease { identity: holder.into(), renewed_ms, duration: duration_s.map(Duration::from_secs), ..Lease::default() }
    }

    #[test]
    fn a_lease_is_taken_when_absent_taken_back_when_mine_taken_over_when_released_or_stale_else_refused() {
        let ttl = Duration::from_secs(30);
        assert_eq!(decide(None, 0, ttl, "me"), Decision::Take);
        assert_eq!(decide(Some(&held("me", Some(1_000), Some(30))), 2_000, ttl, "me"), Decision::Mine);
        assert_eq!(
            decide(Some(&held("", Some(1_000), Some(30))), 2_000, ttl, "me"),
            Decision::TakeOver { stale: false }
        );
        let other = held("other", Some(1_000), Some(30));
        assert_eq!(decide(Some(&other), 31_000, ttl, "me"), Decision::Refuse, "renewed exactly one lease ago");
        assert_eq!(decide(Some(&other), 31_001, ttl, "me"), Decision::TakeOver { stale: true });
        assert_eq!(decide(Some(&held("other", None, Some(30))), u64::MAX, ttl, "me"), Decision::Refuse, "unreadable");
        // An empty id of ours is never taken as the holder's (an empty holder is a released lease).
        assert_eq!(decide(Some(&held("", Some(1_000), Some(30))), 2_000, ttl, ""), Decision::TakeOver { stale: false });
    }

    proptest! {
        /// Whatever the clocks say, another controller's lease renewed within its duration is refused by every
        /// reader, and a reader that takes it over does so only once that duration has passed by its own clock;
        /// once stale, it stays stale as the reader's clock goes on.
        #[test]
        fn a_live_lease_of_another_controller_is_never_taken_over(
            renewed in 0u64..10_000_000,
            duration_s in proptest::option::of(1u64..3_600),
            ttl_s in 1u64..3_600,
            now in 0u64..20_000_000,
            later in 0u64..1_000_000,
        ) {
            let ttl = Duration::from_secs(ttl_s);
            let lease = held("holder", Some(renewed), duration_s);
            let expires = renewed + duration_s.unwrap_or(ttl_s) * 1000;
            for reader in ["a", "b"] {
                let decision = decide(Some(&lease), now, ttl, reader);
                if now <= expires {
                    prop_assert_eq!(decision, Decision::Refuse);
                } else {
                    prop_assert_eq!(decision, Decision::TakeOver { stale: true });
                    let after = decide(Some(&lease), now + later, ttl, reader);
                    prop_assert_eq!(after, Decision::TakeOver { stale: true });
                }
            }
            // The holder itself takes its own lease back, live or not: it is the same controller.
            prop_assert_eq!(decide(Some(&lease), now, ttl, "holder"), Decision::Mine);
        }
    }
}
