//! What the run needs of the cluster before it moves: etcdctl, the permissions it asks for, kubeadm's plan.

use serde_json::Value;

use crate::error::{Error, Result};
use crate::phase::run::UpgradeRun;
use crate::vocabulary::Phase;
use crate::vocabulary::Step;

/// `etcdctl version` on every etcd host: the backup and the control-plane health gate need it.
pub(super) async fn check_etcdctl(run: &UpgradeRun) -> Result<()> {
    let checks = run.plan.etcd_hosts.iter().map(|host| async move {
        let file = run.playbook("etcdctl_check.yml");
        (host, run.run_step(Phase::Preflight, host, Step::EtcdctlCheck, &file, &[], None).await)
    });
    let failed: Vec<String> = crate::phase::fan_out(run.forks(), checks)
        .await
        .into_iter()
        .filter_map(|(host, r)| r.err().map(|f| format!("{host}: {}", f.reason)))
        .collect();
    if failed.is_empty() {
        return Ok(());
    }
    Err(Error::hosts_failed(format!("preflight: etcdctl does not run on {}", failed.join("; "))).hint(
        "install the etcd client on the etcd hosts, or set upgrade_etcdctl to run etcdctl inside the etcd static pod \
         (`crictl exec` form, see the README); nothing was changed",
    ))
}

/// Whether the run's cluster credentials may do what the run will do (cluster_permissions.yml: `auth can-i` for each
/// of upgrade_cluster_permissions), before anything moves: a role that lacks `create pods/eviction` would otherwise
/// be found with the first node cordoned. Every answer that is not `yes` is listed, an error as much as a `no`.
pub(super) async fn check_permissions(run: &UpgradeRun) -> Result<()> {
    if !run.host_flag(&run.first_master, "upgrade_cluster_permissions_check", true) {
        return Ok(());
    }
    let file = run.playbook("cluster_permissions.yml");
    // The first question the run asks the cluster: while the API server does not answer at all (the only master's
    // is restarted by an upgrade an earlier, dead run left going on it), asked again for as long as the lock's
    // first read waits (cluster_lock.rs), instead of failing the re-run.
    let mut wait = crate::phase::api_away::ApiWait::for_run(run);
    let missing = loop {
        let facts =
            run.run_step(Phase::Preflight, &run.first_master, Step::ReadCluster, &file, &[], None).await.map_err(
                |f| Error::hosts_failed(format!("preflight: cannot ask the cluster what the run may do: {}", f.reason)),
            )?;
        let (missing, away) = unanswered_permissions(&facts);
        match away {
            Some(why) if wait.again(run, &why).await => continue,
            _ => break missing,
        }
    };
    if missing.is_empty() {
        return Ok(());
    }
    Err(Error::hosts_failed(format!(
        "preflight: the cluster credentials of upgrade_kubectl may not: {}",
        missing.join("; ")
    ))
    .hint(
        "grant them (examples/rbac/upgrade.yaml is a role with exactly what a run needs), or run with other \
         credentials; upgrade_cluster_permissions_check: false skips this check; nothing was changed",
    ))
}

/// The results of cluster_permissions.yml's questions that were asked (not skipped).
fn permission_results(facts: &crate::phase::step_runner::StepFacts) -> Vec<Value> {
    facts
        .get("upgrade_cluster_permissions_checked")
        .and_then(|r| r.get("results"))
        .and_then(|r| r.as_array())
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .filter(|r| r.get("skipped").and_then(Value::as_bool) != Some(true))
        .collect()
}

/// Every question whose answer is not `yes`, said for the operator; and, when the API server did not answer one
/// of them at all, why (kubectl's words): the answers are then asked again.
fn unanswered_permissions(facts: &crate::phase::step_runner::StepFacts) -> (Vec<String>, Option<String>) {
    let mut away = None;
    let missing: Vec<String> = permission_results(facts)
        .iter()
        .filter_map(|r| {
            let question = r.get("item").and_then(Value::as_str).unwrap_or_default();
            let answer = r.get("stdout").and_then(Value::as_str).unwrap_or_default().trim();
            match answer {
                "yes" => None,
                "no" => Some(question.to_string()),
                _ => {
                    let stderr = r.get("stderr").and_then(Value::as_str).unwrap_or_default().trim();
                    let why = if stderr.is_empty() { answer } else { stderr };
                    let why = crate::redact::escapes::strip_terminal_escapes(why);
                    if crate::phase::api_away::api_unavailable(&why) {
                        away.get_or_insert_with(|| why.lines().last().unwrap_or_default().to_string());
                    }
                    Some(format!("{question} (no answer: {why})"))
                }
            }
        })
        .collect();
    (missing, away)
}

/// `kubeadm upgrade plan vX.Y.Z` on the first master (kubeadm_plan.yml): kubeadm's own checks before any node moves.
pub(super) async fn kubeadm_plan(run: &UpgradeRun) -> Result<()> {
    let file = run.playbook("kubeadm_plan.yml");
    let host = &run.first_master;
    match run.run_step(Phase::Preflight, host, Step::KubeadmPlan, &file, &[], None).await {
        Ok(facts) => {
            if facts.get("upgrade_kubeadm_plan").and_then(|r| r.get("rc")).is_some() {
                run.notice(Some(host), format!("kubeadm upgrade plan {} passed", run.target));
            }
            Ok(())
        }
        Err(f) => {
            // A refusal leaves the host as it found it: the repository file and kubeadm put back.
            let undo = run.playbook("kubeadm_plan_undo.yml");
            let undone = match run.run_step(Phase::Preflight, host, Step::KubeadmPlan, &undo, &[], None).await {
                Ok(_) => "the repository file and kubeadm were put back as they were".to_string(),
                Err(u) => format!("putting the repository file and kubeadm back failed too ({}): check them", u.reason),
            };
            Err(Error::hosts_failed(format!("preflight: {}", f.reason)).hint(format!(
                "fix what kubeadm reports, or set upgrade_kubeadm_plan_check: false to skip this check; no node was \
                 cordoned; on {host} {undone}"
            )))
        }
    }
}
