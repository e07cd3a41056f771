//! The built-in step task files, compiled into the binary so it works from anywhere. Each run writes them into
//! its state directory (they include each other by relative path), where an operator can also read what runs.

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::flavor::Flavor;

// Shared by every flavour (a flavour's own file may include or replace one).
const FILES: &[(&str, &str)] = &[
    ("cluster_csrs.yml", include_str!("../playbooks/cluster_csrs.yml")),
    ("cluster_lock.yml", include_str!("../playbooks/cluster_lock.yml")),
    ("kured_lock.yml", include_str!("../playbooks/kured_lock.yml")),
    ("auto_updates.yml", include_str!("../playbooks/auto_updates.yml")),
    ("cluster_state.yml", include_str!("../playbooks/cluster_state.yml")),
    ("cluster_workloads.yml", include_str!("../playbooks/cluster_workloads.yml")),
    ("drain_simulation.yml", include_str!("../playbooks/drain_simulation.yml")),
    ("cluster_validation.yml", include_str!("../playbooks/cluster_validation.yml")),
    ("cluster_permissions.yml", include_str!("../playbooks/cluster_permissions.yml")),
    ("config_backup.yml", include_str!("../playbooks/config_backup.yml")),
    ("control_plane_pods.yml", include_str!("../playbooks/control_plane_pods.yml")),
    ("control_plane_health.yml", include_str!("../playbooks/control_plane_health.yml")),
    ("cordon.yml", include_str!("../playbooks/cordon.yml")),
    ("defaults.yml", include_str!("../playbooks/defaults.yml")),
    ("delete_node.yml", include_str!("../playbooks/delete_node.yml")),
    ("drain.yml", include_str!("../playbooks/drain.yml")),
    ("etcd_backup.yml", include_str!("../playbooks/etcd_backup.yml")),
    ("etcdctl_check.yml", include_str!("../playbooks/etcdctl_check.yml")),
    ("host_facts.yml", include_str!("../playbooks/host_facts.yml")),
    ("label.yml", include_str!("../playbooks/label.yml")),
    ("master_restart.yml", include_str!("../playbooks/master_restart.yml")),
    ("node_ready_poll.yml", include_str!("../playbooks/node_ready_poll.yml")),
    ("node_poll.yml", include_str!("../playbooks/node_poll.yml")),
    ("node_restart.yml", include_str!("../playbooks/node_restart.yml")),
    ("reboot.yml", include_str!("../playbooks/reboot.yml")),
    ("restore.yml", include_str!("../playbooks/restore.yml")),
    ("uncordon.yml", include_str!("../playbooks/uncordon.yml")),
    ("wait_ready.yml", include_str!("../playbooks/wait_ready.yml")),
    ("host_version.yml", include_str!("../playbooks/host_version.yml")),
    ("api_removals_cluster.yml", include_str!("../playbooks/api_removals_cluster.yml")),
    ("api_removals_host.yml", include_str!("../playbooks/api_removals_host.yml")),
    ("certificate_files.yml", include_str!("../playbooks/certificate_files.yml")),
    // The kubeadm flavour's own steps: package manager, repository, kubeadm.
    ("kubeadm/certificate_expiry.yml", include_str!("../playbooks/kubeadm/certificate_expiry.yml")),
    ("kubeadm/kubeadm_plan.yml", include_str!("../playbooks/kubeadm/kubeadm_plan.yml")),
    ("kubeadm/kubeadm_plan_undo.yml", include_str!("../playbooks/kubeadm/kubeadm_plan_undo.yml")),
    ("kubeadm/kubernetes_repo.yml", include_str!("../playbooks/kubeadm/kubernetes_repo.yml")),
    ("kubeadm/master_upgrade.yml", include_str!("../playbooks/kubeadm/master_upgrade.yml")),
    ("kubeadm/node_upgrade.yml", include_str!("../playbooks/kubeadm/node_upgrade.yml")),
    ("kubeadm/package_availability.yml", include_str!("../playbooks/kubeadm/package_availability.yml")),
    ("kubeadm/install_method.yml", include_str!("../playbooks/kubeadm/install_method.yml")),
    ("kubeadm/kubernetes_binaries.yml", include_str!("../playbooks/kubeadm/kubernetes_binaries.yml")),
    ("kubeadm/package_lock.yml", include_str!("../playbooks/kubeadm/package_lock.yml")),
    ("kubeadm/package_manager.yml", include_str!("../playbooks/kubeadm/package_manager.yml")),
    ("kubeadm/artifacts.yml", include_str!("../playbooks/kubeadm/artifacts.yml")),
    ("kubeadm/prefetch.yml", include_str!("../playbooks/kubeadm/prefetch.yml")),
    ("kubeadm/target_sources.yml", include_str!("../playbooks/kubeadm/target_sources.yml")),
    ("kubeadm/kubeadm_config.yml", include_str!("../playbooks/kubeadm/kubeadm_config.yml")),
    // The custom flavour: only the operator's commands.
    ("custom/certificate_expiry.yml", include_str!("../playbooks/custom/certificate_expiry.yml")),
    ("custom/master_upgrade.yml", include_str!("../playbooks/custom/master_upgrade.yml")),
    ("custom/node_upgrade.yml", include_str!("../playbooks/custom/node_upgrade.yml")),
    // The openshift flavour (OpenShift 3.11 as openshift-ansible upgrades it).
    ("openshift/defaults.yml", include_str!("../playbooks/openshift/defaults.yml")),
    ("openshift/cluster_state.yml", include_str!("../playbooks/openshift/cluster_state.yml")),
    ("openshift/cluster_lock.yml", include_str!("../playbooks/openshift/cluster_lock.yml")),
    ("openshift/kured_lock.yml", include_str!("../playbooks/openshift/kured_lock.yml")),
    ("openshift/auto_updates.yml", include_str!("../playbooks/openshift/auto_updates.yml")),
    ("openshift/cluster_workloads.yml", include_str!("../playbooks/openshift/cluster_workloads.yml")),
    ("openshift/drain_simulation.yml", include_str!("../playbooks/openshift/drain_simulation.yml")),
    ("openshift/cluster_validation.yml", include_str!("../playbooks/openshift/cluster_validation.yml")),
    ("openshift/host_facts.yml", include_str!("../playbooks/openshift/host_facts.yml")),
    ("openshift/node_poll.yml", include_str!("../playbooks/openshift/node_poll.yml")),
    ("openshift/certificate_expiry.yml", include_str!("../playbooks/openshift/certificate_expiry.yml")),
    ("openshift/control_plane_health.yml", include_str!("../playbooks/openshift/control_plane_health.yml")),
    ("openshift/cordon.yml", include_str!("../playbooks/openshift/cordon.yml")),
    ("openshift/delete_node.yml", include_str!("../playbooks/openshift/delete_node.yml")),
    ("openshift/drain.yml", include_str!("../playbooks/openshift/drain.yml")),
    ("openshift/etcd_backup.yml", include_str!("../playbooks/openshift/etcd_backup.yml")),
    ("openshift/host_version.yml", include_str!("../playbooks/openshift/host_version.yml")),
    ("openshift/label.yml", include_str!("../playbooks/openshift/label.yml")),
    ("openshift/master_restart.yml", include_str!("../playbooks/openshift/master_restart.yml")),
    ("openshift/master_upgrade.yml", include_str!("../playbooks/openshift/master_upgrade.yml")),
    ("openshift/node_restart.yml", include_str!("../playbooks/openshift/node_restart.yml")),
    ("openshift/node_upgrade.yml", include_str!("../playbooks/openshift/node_upgrade.yml")),
    ("openshift/packages.yml", include_str!("../playbooks/openshift/packages.yml")),
    ("openshift/cluster_csrs.yml", include_str!("../playbooks/openshift/cluster_csrs.yml")),
    ("openshift/config_backup.yml", include_str!("../playbooks/openshift/config_backup.yml")),
    ("openshift/control_plane_pods.yml", include_str!("../playbooks/openshift/control_plane_pods.yml")),
    ("openshift/node_ready_poll.yml", include_str!("../playbooks/openshift/node_ready_poll.yml")),
    ("openshift/restore.yml", include_str!("../playbooks/openshift/restore.yml")),
    ("openshift/uncordon.yml", include_str!("../playbooks/openshift/uncordon.yml")),
    ("openshift/wait_ready.yml", include_str!("../playbooks/openshift/wait_ready.yml")),
    ("openshift/control_plane_images.yml", include_str!("../playbooks/openshift/control_plane_images.yml")),
    ("openshift/sdn_images.yml", include_str!("../playbooks/openshift/sdn_images.yml")),
    ("openshift/artifacts.yml", include_str!("../playbooks/openshift/artifacts.yml")),
    ("openshift/cluster_images.yml", include_str!("../playbooks/openshift/cluster_images.yml")),
    ("openshift/cluster_permissions.yml", include_str!("../playbooks/openshift/cluster_permissions.yml")),
];

/// The file that carries out step file `name` for a flavour: the flavour's own (`kubeadm/master_upgrade.yml`,
/// `openshift/drain.yml`) when it has one, else the shared one (`drain.yml`).
pub(crate) fn for_flavor(flavor: Flavor, name: &str) -> String {
    let own = format!("{}/{name}", flavor.dir());
    if FILES.iter().any(|(file, _)| *file == own) { own } else { name.to_string() }
}

/// The names of the built-in step files.
pub(crate) fn names() -> impl Iterator<Item = &'static str> {
    FILES.iter().map(|(name, _)| *name)
}

/// The text of built-in step file `name` (`restore.yml`, `openshift/defaults.yml`), read without writing it out.
pub(crate) fn text(name: &str) -> Option<&'static str> {
    FILES.iter().find(|(file, _)| *file == name).map(|(_, text)| *text)
}

/// Writes the built-in step files into `dir` and returns it.
pub(crate) fn materialize(dir: &Path) -> Result<PathBuf> {
    let fail = |e: std::io::Error| {
        // Before the run starts: a refused start (exit 2), nothing was touched.
        Error::input(format!(
            "cannot write the built-in step files to {}: {}",
            dir.display(),
            crate::error::io_reason(&e)
        ))
        .hint("make the state directory writable, or choose another with --state-dir; nothing was touched")
    };
    std::fs::create_dir_all(dir).map_err(fail)?;
    for (name, text) in FILES {
        let path = dir.join(name);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(fail)?;
        }
        // Rewritten only when different, so a reader of the directory sees stable files.
        if std::fs::read_to_string(&path).ok().as_deref() != Some(*text) {
            std::fs::write(&path, text).map_err(fail)?;
        }
    }
    Ok(dir.to_path_buf())
}

#[cfg(test)]
mod tests {
    use crate::flavor::Flavor;

    #[test]
    fn a_flavour_runs_its_own_file_where_it_has_one_and_the_shared_one_elsewhere() {
        assert_eq!(super::for_flavor(Flavor::Openshift, "drain.yml"), "openshift/drain.yml");
        assert_eq!(super::for_flavor(Flavor::Openshift, "reboot.yml"), "reboot.yml");
        assert_eq!(super::for_flavor(Flavor::Kubeadm, "drain.yml"), "drain.yml");
        assert_eq!(super::for_flavor(Flavor::Kubeadm, "master_upgrade.yml"), "kubeadm/master_upgrade.yml");
        assert_eq!(super::for_flavor(Flavor::Kubeadm, "kubeadm_plan.yml"), "kubeadm/kubeadm_plan.yml");
        assert_eq!(super::for_flavor(Flavor::Custom, "certificate_expiry.yml"), "custom/certificate_expiry.yml");
        assert_eq!(super::for_flavor(Flavor::Custom, "node_upgrade.yml"), "custom/node_upgrade.yml");
        assert_eq!(super::for_flavor(Flavor::Custom, "wait_ready.yml"), "wait_ready.yml");
        // Blue-green's steps: shared, with oc for openshift.
        assert_eq!(super::for_flavor(Flavor::Kubeadm, "label.yml"), "label.yml");
        assert_eq!(super::for_flavor(Flavor::Custom, "delete_node.yml"), "delete_node.yml");
        assert_eq!(super::for_flavor(Flavor::Openshift, "label.yml"), "openshift/label.yml");
        assert_eq!(super::for_flavor(Flavor::Openshift, "delete_node.yml"), "openshift/delete_node.yml");
    }

    /// Every step the executor runs resolves, for every flavour, to a built-in file; the kubeadm preflight checks
    /// only for kubeadm, the one flavour that runs them.
    #[test]
    fn every_step_the_executor_runs_has_a_file_in_every_flavour() {
        let steps = [
            "cluster_state.yml",
            "certificate_expiry.yml",
            "host_version.yml",
            "etcdctl_check.yml",
            "etcd_backup.yml",
            "cordon.yml",
            "drain.yml",
            "master_upgrade.yml",
            "node_upgrade.yml",
            "master_restart.yml",
            "node_restart.yml",
            "wait_ready.yml",
            "control_plane_health.yml",
            "uncordon.yml",
            "label.yml",
            "delete_node.yml",
        ];
        let names: Vec<&str> = super::names().collect();
        for flavor in Flavor::ALL {
            for step in steps {
                let file = super::for_flavor(flavor, step);
                assert!(names.contains(&file.as_str()), "{flavor}: {step} -> {file}");
            }
        }
        for step in ["kubernetes_repo.yml", "kubeadm_plan.yml"] {
            let file = super::for_flavor(Flavor::Kubeadm, step);
            assert!(names.contains(&file.as_str()), "{step} -> {file}");
        }
    }

    /// The files include each other by a path relative to the including file, as they are written into the state
    /// directory: every literal include names a built-in file.
    #[test]
    fn every_include_names_a_built_in_file() {
        let names: Vec<&str> = super::names().collect();
        for (name, text) in super::FILES {
            let dir = std::path::Path::new(name).parent().unwrap_or(std::path::Path::new(""));
            for line in text.lines() {
                let Some(target) = line.trim().trim_start_matches("- ").strip_prefix("include_tasks:") else {
                    continue;
                };
                let mut path: Vec<&str> = dir.iter().filter_map(|c| c.to_str()).collect();
                for part in target.trim().split('/') {
                    match part {
                        ".." => {
                            assert!(path.pop().is_some(), "{name}: {target} leaves the playbooks directory");
                        }
                        part => path.push(part),
                    }
                }
                let resolved = path.join("/");
                assert!(names.contains(&resolved.as_str()), "{name} includes {target}: no built-in {resolved}");
            }
        }
    }

    #[test]
    fn every_built_in_step_file_parses() {
        let dir = tempfile::tempdir().unwrap();
        let dir = super::materialize(dir.path()).unwrap();
        for (name, _) in super::FILES {
            let errors = crate::tasks::check_task_file(&dir.join(name));
            assert!(errors.is_empty() || name.ends_with("defaults.yml"), "{name}: {errors:?}");
        }
    }
}
