//! An API server that does not answer at all (refused, unreachable, timed out, not yet serving), told apart from one
//! that answers no: the only master's API server is away for a minute or two while a kubeadm upgrade restarts it,
//! and a run started then (a re-run after a controller died during that upgrade, whose kubeadm goes on on the
//! master) waits for it instead of failing.

use std::time::{Duration, Instant};

use super::cluster_calls::ClusterCalls;

/// How long a run asks again while the API server does not answer: the first master's
/// `upgrade_control_plane_ready_timeout` (the bound on the wait for its API server after its own upgrade), saying so
/// once.
pub(crate) struct ApiWait {
    limit: Duration,
    started: Instant,
    told: bool,
}

impl ApiWait {
    /// The pause between two tries.
    const PAUSE: Duration = Duration::from_secs(2);

    pub(crate) fn for_run(run: &impl ClusterCalls) -> ApiWait {
        let limit = run.host_seconds(run.first_master(), "upgrade_control_plane_ready_timeout", 300);
        ApiWait { limit: Duration::from_secs(limit), started: Instant::now(), told: false }
    }

    /// After a try the API server did not answer (`why`, kubectl's words): whether to try again, once the pause is
    /// over. No when the wait is over or the run is stopping.
    pub(crate) async fn again(&mut self, run: &impl ClusterCalls, why: &str) -> bool {
        if self.started.elapsed() >= self.limit || run.stop().is_stopping() {
            return false;
        }
        if !self.told {
            self.told = true;
            run.notice(None, waiting_for_the_api(why, self.limit));
        }
        tokio::time::sleep(Self::PAUSE).await;
        true
    }

    /// `why` the last try failed, with how long the API server was waited for when it was.
    pub(crate) fn given_up(&self, why: String) -> String {
        if self.told {
            format!("{why} (the API server did not answer for {}s)", self.started.elapsed().as_secs())
        } else {
            why
        }
    }
}

/// Whether a kubectl failure says the API server did not answer at all (refused, unreachable, timed out, not yet
/// serving), as opposed to an answer that refuses the request (Forbidden, NotFound, Conflict).
pub(crate) fn api_unavailable(reason: &str) -> bool {
    const AWAY: [&str; 12] = [
        "connection refused",
        // kubectl's own: "The connection to the server HOST:PORT was refused - did you specify the right host or port?"
        "was refused - did you specify the right host",
        "unable to connect to the server",
        "tls handshake timeout",
        "i/o timeout",
        "connection reset by peer",
        "no route to host",
        "the server is currently unable to handle the request",
        "serviceunavailable",
        "the server was unable to return a response in the time allotted",
        "context deadline exceeded",
        "http2: server sent goaway",
    ];
    let reason = reason.to_lowercase();
    AWAY.iter().any(|away| reason.contains(away))
}

/// What the operator is told when a run waits for the API server to answer.
fn waiting_for_the_api(why: &str, limit: Duration) -> String {
    format!(
        "the API server does not answer ({why}): waiting up to {}s for it (upgrade_control_plane_ready_timeout), \
         as it does while an upgrade of the only master restarts it",
        limit.as_secs()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_an_api_server_that_does_not_answer_is_waited_for() {
        for away in [
            "The connection to the server 10.0.0.1:6443 was refused - did you specify the right host or port?",
            "Unable to connect to the server: net/http: TLS handshake timeout",
            "Unable to connect to the server: dial tcp 10.0.0.1:6443: i/o timeout",
            "Error from server (ServiceUnavailable): the server is currently unable to handle the request",
        ] {
            assert!(api_unavailable(away), "{away}");
        }
        for answered in [
            "Error from server (Forbidden): configmaps \"upgrade-lock\" is forbidden: User \"u\" cannot get",
            "Error from server (NotFound): configmaps \"upgrade-lock\" not found",
            "error: error loading config file \"/nope\": open /nope: no such file or directory",
            "Operation cannot be fulfilled on configmaps \"upgrade-lock\": the object has been modified",
        ] {
            assert!(!api_unavailable(answered), "{answered}");
        }
    }
}
