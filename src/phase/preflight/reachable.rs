//! Every host of the plan answers, before anything is touched.

use std::time::Instant;

use crate::error::{Error, Result};
use crate::phase::run::UpgradeRun;

/// Opens a connection to every host of the plan, `forks` at a time, and runs `true`. Any host that does not answer stops the
/// run here, before anything is touched.
pub(crate) async fn check_reachable(run: &UpgradeRun) -> Result<()> {
    let started = Instant::now();
    let hosts = run.plan.hosts.clone();
    let probes = hosts.iter().map(|host| async move {
        let result = match run.pool().get(host).await {
            Ok(conn) => match conn
                .exec("true", None, Some(run.options.connect_timeout.max(std::time::Duration::from_secs(5))))
                .await
            {
                Ok(out) if out.status == 0 => Ok(()),
                Ok(out) => {
                    Err(format!("`true` exited {}: {}", out.status, String::from_utf8_lossy(&out.stderr).trim()))
                }
                Err(e) => Err(e.to_string()),
            },
            Err(e) => Err(e.to_string()),
        };
        (host.clone(), result)
    });
    let results = crate::phase::fan_out(run.forks(), probes).await;
    let unreachable: Vec<String> =
        results.iter().filter_map(|(h, r)| r.as_ref().err().map(|e| format!("{h} ({e})"))).collect();
    if !unreachable.is_empty() {
        return Err(Error::hosts_failed(format!(
            "preflight: {} of {} hosts cannot be reached: {}",
            unreachable.len(),
            hosts.len(),
            unreachable.join("; ")
        ))
        .hint("fix their connection settings (ansible_host, ansible_port, ansible_user, keys) or leave them out with --limit; nothing was changed"));
    }
    run.notice(None, format!("all {} hosts reachable ({} ms)", hosts.len(), started.elapsed().as_millis()));
    Ok(())
}
