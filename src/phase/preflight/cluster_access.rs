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
    let facts =
        run.run_step(Phase::Preflight, &run.first_master, Step::ReadCluster, &file, &[], None).await.map_err(|f| {
            Error::hosts_failed(format!("preflight: cannot ask the cluster what the run may do: {}", f.reason))
        })?;
    let results = facts
        .get("upgrade_cluster_permissions_checked")
        .and_then(|r| r.get("results"))
        .and_then(|r| r.as_array())
        .cloned()
        .unwrap_or_default();
    let missing: Vec<String> = results
        .iter()
        .filter(|r| r.get("skipped").and_then(Value::as_bool) != Some(true))
        .filter_map(|r| {
            let question = r.get("item").and_then(Value::as_str).unwrap_or_default();
            let answer = r.get("stdout").and_then(Value::as_str).unwrap_or_default().trim();
            match answer {
                "yes" => None,
                "no" => Some(question.to_string()),
                _ => {
                    let stderr = r.get("stderr").and_then(Value::as_str).unwrap_or_default().trim();
                    let why = if stderr.is_empty() { answer } else { stderr };
                    Some(format!("{question} (no answer: {})", crate::redact::escapes::strip_terminal_escapes(why)))
                }
            }
        })
        .collect();
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
