//! The hosts' own checks: what blocks a package upgrade, automatic updates, the custom flavour's commands.

use serde_json::Value;

use crate::error::{Error, Result};
use crate::phase::run::UpgradeRun;
use crate::tasks::host_vars::HostFacts;
use crate::vocabulary::Phase;
use crate::vocabulary::Step;

/// On every host to upgrade with the kubeadm flow: which package manager it uses and what the upgrade will do to its
/// Kubernetes repository file, said once per host; and, with apt and the built-in package commands, whether the
/// target's packages resolve from the repository as the upgrade will switch it (package_availability.yml, a dry form
/// that changes nothing). A host with no package manager, or whose repository lacks a target package, stops the run
/// here, before any host is changed: the first master's kubeadm plan check comes after.
pub(super) async fn check_hosts(run: &UpgradeRun, hosts: &[(String, Phase)]) -> Result<()> {
    let dry_run = [("upgrade_kubernetes_repo_dry_run", Value::Bool(true))];
    let checks = hosts.iter().filter(|(host, phase)| !custom_upgrade(run, host, *phase)).map(|(host, _)| {
        let file = run.playbook("package_availability.yml");
        let dry_run = &dry_run;
        async move {
            let result = run.run_step(Phase::Preflight, host, Step::HostCheck, &file, dry_run, None).await;
            (host, result)
        }
    });
    let mut failed = Vec::new();
    let mut unavailable = Vec::new();
    let mut not_packaged = Vec::new();
    for (host, result) in crate::phase::fan_out(run.forks(), checks).await {
        match result {
            Ok(facts) => {
                run.notice(Some(host), describe_host_check(run, host, &facts));
                if let Some(path) = binary_kubelet(&facts) {
                    not_packaged.push(format!("{host} ({path})"));
                }
                if let Some(missing) = describe_unavailable(&facts) {
                    unavailable.push(format!("{host}: {missing}"));
                }
            }
            Err(f) => failed.push(format!("{host}: {}", f.reason)),
        }
    }
    // Before anything else: the package flow on a host whose kubelet no package owns would leave it running the old
    // binaries with new packages beside them.
    if failed.is_empty() && !not_packaged.is_empty() {
        return Err(Error::hosts_failed(format!(
            "preflight: kubelet is owned by neither dpkg nor rpm on {}: those hosts run Kubernetes from downloaded \
             binaries (as kubespray installs them), and the package flow would install packages that nothing runs",
            not_packaged.join(", ")
        ))
        .hint(NOT_PACKAGED_HINT));
    }
    if failed.is_empty() && !unavailable.is_empty() {
        return Err(Error::hosts_failed(format!(
            "preflight: the target's packages do not resolve on {}",
            unavailable.join("; ")
        ))
        .hint(
            "put the target's packages in those repositories (a mirror that is behind: sync it), point \
             upgrade_kubernetes_repo_url at the mirror the repository file names, or choose a target they offer; \
             nothing was changed on any host",
        ));
    }
    if failed.is_empty() {
        return Ok(());
    }
    Err(Error::hosts_failed(format!("preflight: the package checks failed on {}", failed.join("; "))).hint(
        "set upgrade_package_manager (apt, dnf, yum) or the package commands on those hosts; nothing was changed",
    ))
}

/// What to do about hosts whose kubelet no package owns.
const NOT_PACKAGED_HINT: &str = "set upgrade_kubernetes_install_method: binaries for those hosts (the target's \
     kubeadm, kubelet and kubectl are then downloaded from upgrade_kubernetes_binaries_url, checked against their \
     published sha256 and put where the host's are), or upgrade them with your own commands \
     (upgrade_master_upgrade_command, upgrade_node_upgrade_command); nothing was changed on any host";

/// The kubelet of a host that no package owns (install_method.yml's `binary PATH`), when the package flow would
/// install the built-in packages there; `None` for a packaged kubelet, none at all, the operator's own commands or
/// the binaries install method.
pub(crate) fn binary_kubelet(facts: &HostFacts) -> Option<String> {
    let stdout = facts.get("upgrade_kubelet_install")?.get("stdout").and_then(Value::as_str)?.trim().to_string();
    let builtin = facts.get("upgrade_package_commands_builtin").is_some_and(|v| match &**v {
        Value::Bool(b) => *b,
        Value::String(s) => s.trim().eq_ignore_ascii_case("true"),
        _ => false,
    });
    let method = facts.get("upgrade_kubernetes_install_method").and_then(|v| v.as_str().map(|s| s.trim().to_string()));
    let path = stdout.strip_prefix("binary ")?;
    (builtin && method.as_deref() != Some("binaries")).then(|| path.to_string())
}

/// What package_availability.yml found missing on a host (`kubeadm 1.29.9, kubelet 1.29.9 not in deb ... /`, or
/// the index that could not be read), `None` when everything resolves or the check did not run.
pub(crate) fn describe_unavailable(facts: &HostFacts) -> Option<String> {
    let result = facts.get("upgrade_package_availability")?;
    let stdout = result.get("stdout").and_then(Value::as_str)?;
    let lines: Vec<&str> = stdout.lines().filter_map(|l| l.strip_prefix("line: ")).collect();
    let looked_in = if lines.is_empty() { "no repository line".to_string() } else { lines.join(" | ") };
    if stdout.lines().next() == Some("update-failed") {
        let cause = stdout.lines().nth(1).unwrap_or("apt-get update failed");
        return Some(format!("apt-get update of {looked_in} failed: {cause}"));
    }
    let missing: Vec<&str> = stdout.lines().filter_map(|l| l.strip_prefix("missing ")).collect();
    if missing.is_empty() {
        return None;
    }
    Some(format!("{} not in {looked_in}", missing.join(", ")))
}

/// On every host to upgrade: automatic package upgrades enabled there (unattended-upgrades, apt's daily upgrade
/// timer, dnf-automatic) are named as a warning. Never stops the run: the package holds keep the Kubernetes packages
/// where the run puts them; what else could move is said. A host where this cannot be read says nothing.
pub(super) async fn check_auto_updates(run: &UpgradeRun, hosts: &[(String, Phase)]) {
    let checks = hosts.iter().map(|(host, _)| async move {
        let file = run.playbook("auto_updates.yml");
        (host, run.run_step(Phase::Preflight, host, Step::HostCheck, &file, &[], None).await)
    });
    for (host, result) in crate::phase::fan_out(run.forks(), checks).await {
        let Ok(facts) = result else { continue };
        let stdout = facts
            .get("upgrade_auto_updates")
            .and_then(|r| r.get("stdout"))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        let enabled = enabled_auto_updates(&stdout);
        if !enabled.is_empty() {
            run.notice(Some(host), format!(
                "warning: automatic package upgrades are enabled on this host ({}): the package holds (the excluders \
                 on OpenShift) keep the Kubernetes packages where the run puts them, but the container runtime, the kernel and other \
                 packages can still change during the run (and a kernel update can ask for a reboot); stop them \
                 for the maintenance window",
                enabled.join(", ")
            ));
        }
    }
}

/// The units of `UNIT STATE` lines (`systemctl is-enabled`) that are enabled.
pub(crate) fn enabled_auto_updates(stdout: &str) -> Vec<String> {
    stdout
        .lines()
        .filter_map(|l| l.split_once(char::is_whitespace))
        .filter(|(_, state)| matches!(state.trim(), "enabled" | "enabled-runtime" | "alias"))
        .map(|(unit, _)| unit.to_string())
        .collect()
}

/// The host's upgrade is the operator's own command, not the kubeadm flow.
pub(super) fn custom_upgrade(run: &UpgradeRun, host: &str, phase: Phase) -> bool {
    let variable =
        if phase == Phase::ControlPlane { "upgrade_master_upgrade_command" } else { "upgrade_node_upgrade_command" };
    !run.render_for(host, &format!("{{{{ {variable} | default('') }}}}")).trim().is_empty()
}

/// "package manager apt (detected); /etc/apt/sources.list.d/kubernetes.list: v1.28 -> v1.29 at the upgrade ...".
pub(crate) fn describe_host_check(run: &UpgradeRun, host: &str, facts: &HostFacts) -> String {
    let text = |name: &str| facts.get(name).and_then(|v| v.as_str()).map(str::trim).unwrap_or_default().to_string();
    let resolved = text("upgrade_package_manager_resolved");
    let how = if text("upgrade_package_manager") == "auto" { "detected" } else { "upgrade_package_manager" };
    let manager = if resolved == "none" {
        "package manager: none found (the package commands are the inventory's own)".to_string()
    } else {
        format!("package manager: {resolved} ({how})")
    };
    let file = text("upgrade_kubernetes_repo_file");
    let outcome = facts.get("upgrade_kubernetes_repo");
    let stdout = outcome.and_then(|o| o.get("stdout")).and_then(Value::as_str).unwrap_or_default().trim().to_string();
    let words: Vec<&str> = stdout.split_whitespace().collect();
    let minor = format!("v{}.{}", run.target.major, run.target.minor);
    let repo = if !run.host_flag(host, "upgrade_kubernetes_repo_manage", true) {
        "repository file not managed (upgrade_kubernetes_repo_manage: false)".to_string()
    } else if file.is_empty() {
        "no repository file to manage".to_string()
    } else {
        match words.as_slice() {
            ["would-switch", have, want] => {
                format!(
                    "repository {file}: {have} -> {want} before the first package install (a copy kept as {file}.{have}.bak)"
                )
            }
            ["unchanged", want] => format!("repository {file}: already at {want}"),
            ["no-minor"] => format!(
                "repository {file} names no pkgs.k8s.io minor: left alone (make sure it offers {minor} packages)"
            ),
            ["absent"] => {
                format!("repository {file} does not exist: left alone (make sure {minor} packages are reachable)")
            }
            _ => format!("repository {file}: {stdout}"),
        }
    };
    format!("{manager}; {repo}")
}
