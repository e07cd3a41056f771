//! The built-in step task files, compiled into the binary so it works from anywhere. Each run writes them into
//! its state directory (they include each other by relative path), where an operator can also read what runs.

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::flavor::Flavor;

const FILES: &[(&str, &str)] = &[
    ("cluster_state.yml", include_str!("../playbooks/cluster_state.yml")),
    ("control_plane_health.yml", include_str!("../playbooks/control_plane_health.yml")),
    ("cordon.yml", include_str!("../playbooks/cordon.yml")),
    ("defaults.yml", include_str!("../playbooks/defaults.yml")),
    ("drain.yml", include_str!("../playbooks/drain.yml")),
    ("etcd_backup.yml", include_str!("../playbooks/etcd_backup.yml")),
    ("etcdctl_check.yml", include_str!("../playbooks/etcdctl_check.yml")),
    ("kubeadm_plan.yml", include_str!("../playbooks/kubeadm_plan.yml")),
    ("kubernetes_repo.yml", include_str!("../playbooks/kubernetes_repo.yml")),
    ("master_restart.yml", include_str!("../playbooks/master_restart.yml")),
    ("master_upgrade.yml", include_str!("../playbooks/master_upgrade.yml")),
    ("node_restart.yml", include_str!("../playbooks/node_restart.yml")),
    ("node_upgrade.yml", include_str!("../playbooks/node_upgrade.yml")),
    ("package_manager.yml", include_str!("../playbooks/package_manager.yml")),
    ("reboot.yml", include_str!("../playbooks/reboot.yml")),
    ("uncordon.yml", include_str!("../playbooks/uncordon.yml")),
    ("wait_ready.yml", include_str!("../playbooks/wait_ready.yml")),
    ("host_version.yml", include_str!("../playbooks/host_version.yml")),
    ("certificate_expiry.yml", include_str!("../playbooks/certificate_expiry.yml")),
    ("certificate_files.yml", include_str!("../playbooks/certificate_files.yml")),
    ("custom/certificate_expiry.yml", include_str!("../playbooks/custom/certificate_expiry.yml")),
    ("openshift/defaults.yml", include_str!("../playbooks/openshift/defaults.yml")),
    ("openshift/cluster_state.yml", include_str!("../playbooks/openshift/cluster_state.yml")),
    ("openshift/certificate_expiry.yml", include_str!("../playbooks/openshift/certificate_expiry.yml")),
    ("openshift/control_plane_health.yml", include_str!("../playbooks/openshift/control_plane_health.yml")),
    ("openshift/cordon.yml", include_str!("../playbooks/openshift/cordon.yml")),
    ("openshift/drain.yml", include_str!("../playbooks/openshift/drain.yml")),
    ("openshift/etcd_backup.yml", include_str!("../playbooks/openshift/etcd_backup.yml")),
    ("openshift/host_version.yml", include_str!("../playbooks/openshift/host_version.yml")),
    ("openshift/master_restart.yml", include_str!("../playbooks/openshift/master_restart.yml")),
    ("openshift/master_upgrade.yml", include_str!("../playbooks/openshift/master_upgrade.yml")),
    ("openshift/node_restart.yml", include_str!("../playbooks/openshift/node_restart.yml")),
    ("openshift/node_upgrade.yml", include_str!("../playbooks/openshift/node_upgrade.yml")),
    ("openshift/packages.yml", include_str!("../playbooks/openshift/packages.yml")),
    ("openshift/uncordon.yml", include_str!("../playbooks/openshift/uncordon.yml")),
    ("openshift/wait_ready.yml", include_str!("../playbooks/openshift/wait_ready.yml")),
];

/// The file that carries out step file `name` for a flavour: the flavour's own (`openshift/drain.yml`) when it has
/// one, else the shared one (today's kubeadm steps, which also run the custom flavour's commands).
pub fn for_flavor(flavor: Flavor, name: &str) -> String {
    let own = match flavor {
        Flavor::Openshift => format!("openshift/{name}"),
        Flavor::Custom => format!("custom/{name}"),
        Flavor::Kubeadm => return name.to_string(),
    };
    if FILES.iter().any(|(file, _)| *file == own) { own } else { name.to_string() }
}

/// The names of the built-in step files.
pub fn names() -> impl Iterator<Item = &'static str> {
    FILES.iter().map(|(name, _)| *name)
}

/// Writes the built-in step files into `dir` and returns it.
pub fn materialize(dir: &Path) -> Result<PathBuf> {
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
        assert_eq!(super::for_flavor(Flavor::Custom, "certificate_expiry.yml"), "custom/certificate_expiry.yml");
        assert_eq!(super::for_flavor(Flavor::Custom, "node_upgrade.yml"), "node_upgrade.yml");
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
