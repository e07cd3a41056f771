//! Taking the cluster lock in preflight, and stopping between checks when it is not renewed.

use crate::error::Result;
use crate::phase::run::UpgradeRun;

/// The cluster-wide lock, before the cluster is read; renewed and fenced from now on (released by the executor at
/// the end). The holder is this state directory's controller id.
pub(super) async fn take_cluster_lock(run: &std::sync::Arc<UpgradeRun>, ttl: std::time::Duration) -> Result<()> {
    use crate::phase::cluster_lock;
    let id = cluster_lock::controller_id(&run.options.state_dir)?;
    let state_dir = run.options.state_dir.display().to_string();
    let me = cluster_lock::Me::new(&id, &run.run_id(), &state_dir, &run.change_id());
    let held = cluster_lock::take(run.as_ref(), &me, ttl).await?;
    let renewer = tokio::spawn(cluster_lock::keep_renewed(run.clone(), held.clone()));
    if let Ok(mut slot) = run.cluster_lock.lock() {
        *slot = Some((held, renewer));
    }
    Ok(())
}

/// A stop asked for while preflight runs (a signal, a state directory that cannot be written) ends preflight at the
/// next check: the run starts no later phase, so the checks left could only delay the exit, and one of them is not
/// read-only (the kubeadm plan check installs kubeadm on the first master). What was decided so far is returned, so
/// the summary can say which hosts were not started.
pub(super) fn stopped_between_checks(run: &UpgradeRun) -> bool {
    if !run.stop.is_stopping() {
        return false;
    }
    run.notice(None, format!("{}: preflight's remaining checks were not run", run.stop_reason()));
    true
}
