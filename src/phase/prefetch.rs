//! Fetched before the windows (kubeadm flavour): at the end of preflight, once every check has passed, every host to
//! upgrade downloads the target's packages into its package manager's cache and every master to upgrade pulls the
//! target's control-plane images (kubeadm/prefetch.yml), all at once within `forks`. The install inside a node's
//! cordoned window then finds its packages on the host, so the window no longer holds the download.
//!
//! A host whose fetch fails there is said so and tries again right before its cordon (sequence.rs), where a second
//! failure fails the host before it is cordoned: the other hosts go on, as with a package lock held too long.
//!
//! Why the whole cluster in preflight, not the next batch while the current one runs: a host whose download fails
//! (a mirror without the file, a full disk, a proxy that refuses) fails before anything is cordoned on any host, not
//! in the middle of the nodes phase after the masters moved; the downloads overlap one another within `forks`, so
//! the run waits for about one download instead of one per batch; and nothing runs beside a batch, whose window it
//! could slow (the same link, the same disk). The cost is the cache's space on every host for the whole run (the
//! three packages: about 70 MB for pkgs.k8s.io's 1.29 on amd64), which the install's own clean-up gives back.

use serde_json::Value;

use super::run::{StepFacts, StepFailure, UpgradeRun};
use crate::error::{Error, Result};
use crate::vocabulary::{Phase, Step};

/// Downloads the target's packages on `hosts` (the kubeadm flow's, with the built-in package commands, unless
/// `upgrade_prefetch: false`) and pulls the control plane's images on `masters` (unless `upgrade_prepull_images:
/// false`) with the cluster's own image repository. A host where that fails is named in a warning: it tries again
/// before its cordon (`again_before_cordon`).
pub(crate) async fn before_the_windows(run: &UpgradeRun, hosts: &[String], masters: &[String]) -> Result<()> {
    // The inventory's own package commands download what they download.
    let own = |h: &String| {
        run.steps.host_sets(h, "upgrade_kubeadm_package_command")
            || run.steps.host_sets(h, "upgrade_kubelet_package_command")
    };
    let prefetch = |h: &String| run.host_flag(h, "upgrade_prefetch", true) && !own(h);
    let prepull = |h: &String| masters.contains(h) && run.host_flag(h, "upgrade_prepull_images", true);
    if !hosts.iter().any(|h| prefetch(h) || prepull(h)) {
        return Ok(());
    }
    let repository = if hosts.iter().any(prepull) { image_repository(run).await? } else { String::new() };
    if let Ok(mut kept) = run.image_repository.lock() {
        *kept = Some(repository.clone());
    }
    let fetches = hosts.iter().filter(|h| prefetch(h) || prepull(h)).map(|host| async move {
        let started = std::time::Instant::now();
        let result = fetch(run, Phase::Preflight, host, prepull(host)).await;
        (host, result, started.elapsed())
    });
    for (host, result, took) in super::fan_out(run.forks(), fetches).await {
        match result {
            Ok(facts) => say_fetched(run, host, &facts, took),
            Err(f) => run.notice(
                Some(host),
                format!(
                    "warning: could not fetch before the windows ({}): tried again right before its cordon",
                    f.reason
                ),
            ),
        }
    }
    Ok(())
}

/// Before the cordon of a host whose fetch in preflight failed (`upgrade_prefetch_done` unset): the same again; a
/// failure fails the host here, before it is cordoned. Nothing for a host that fetched, or fetches nothing.
pub(crate) async fn again_before_cordon(
    run: &UpgradeRun,
    phase: Phase,
    host: &str,
    master: bool,
) -> Result<(), StepFailure> {
    let prefetch = run.host_flag(host, "upgrade_prefetch", true);
    let prepull = master && run.host_flag(host, "upgrade_prepull_images", true);
    let done = run.steps.fact(host, "upgrade_prefetch_done").and_then(|v| crate::ansible_compat::boolean(&v));
    if !(prefetch || prepull) || done == Some(true) {
        return Ok(());
    }
    let started = std::time::Instant::now();
    let facts = fetch(run, phase, host, prepull).await?;
    say_fetched(run, host, &facts, started.elapsed());
    Ok(())
}

async fn fetch(run: &UpgradeRun, phase: Phase, host: &str, prepull: bool) -> Result<StepFacts, StepFailure> {
    let repository = run.image_repository.lock().ok().and_then(|r| r.clone()).unwrap_or_default();
    let vars = [
        ("upgrade_prepull_here", Value::Bool(prepull)),
        ("upgrade_kubeadm_image_repository", Value::String(repository)),
    ];
    run.run_step(phase, host, Step::HostCheck, &run.playbook("prefetch.yml"), &vars, None).await
}

fn say_fetched(run: &UpgradeRun, host: &str, facts: &StepFacts, took: std::time::Duration) {
    let ran = |name: &str| facts.get(name).and_then(|r| r.get("rc")).is_some();
    let mut what = Vec::new();
    if ran("upgrade_prefetch_packages") {
        what.push(format!(
            "downloaded kubeadm, kubelet and kubectl {}",
            run.target.to_string().trim_start_matches('v')
        ));
    }
    if ran("upgrade_prepull") {
        let repository = run.image_repository.lock().ok().and_then(|r| r.clone()).unwrap_or_default();
        let from = if repository.is_empty() { "kubeadm's default repository".to_string() } else { repository };
        what.push(format!("pulled the control plane's images of {} from {from}", run.target));
    }
    if !what.is_empty() {
        run.notice(Some(host), format!("before its window: {} ({} ms)", what.join("; "), took.as_millis()));
    }
}

/// The cluster's `imageRepository` (kubeadm-config's ClusterConfiguration, read on the first master), or
/// `upgrade_kubeadm_image_repository` when the inventory sets it; empty: kubeadm's default.
pub(crate) async fn image_repository(run: &UpgradeRun) -> Result<String> {
    let set = run.render_for(&run.first_master, "{{ upgrade_kubeadm_image_repository | default('') }}");
    if !set.trim().is_empty() {
        return Ok(set.trim().to_string());
    }
    let file = run.playbook("kubeadm_config.yml");
    let cannot = |why: String| {
        Error::hosts_failed(format!(
            "preflight: cannot read the cluster's image repository on {}: {why}",
            run.first_master
        ))
        .hint(
            "the masters' images are pulled from the repository kubeadm-config names; set \
                 upgrade_kubeadm_image_repository, or upgrade_prepull_images: false; no node was cordoned",
        )
    };
    let facts = run
        .run_step(Phase::Preflight, &run.first_master, Step::HostCheck, &file, &[], None)
        .await
        .map_err(|f| cannot(f.reason))?;
    let stdout = facts.get("upgrade_kubeadm_config").and_then(|r| r.get("stdout")).and_then(Value::as_str);
    let found = crate::cluster::kubeadm_image_repository(stdout.unwrap_or_default()).map_err(cannot)?;
    Ok(found.unwrap_or_default())
}
