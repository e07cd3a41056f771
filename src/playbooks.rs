//! The built-in step task files, compiled into the binary so it works from anywhere. Each run writes them into
//! its state directory (they include each other by relative path), where an operator can also read what runs.

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

const FILES: &[(&str, &str)] = &[
    ("cluster_lock.yml", include_str!("../playbooks/cluster_lock.yml")),
    ("cluster_state.yml", include_str!("../playbooks/cluster_state.yml")),
    ("cluster_workloads.yml", include_str!("../playbooks/cluster_workloads.yml")),
    ("control_plane_health.yml", include_str!("../playbooks/control_plane_health.yml")),
    ("cordon.yml", include_str!("../playbooks/cordon.yml")),
    ("defaults.yml", include_str!("../playbooks/defaults.yml")),
    ("drain.yml", include_str!("../playbooks/drain.yml")),
    ("etcd_backup.yml", include_str!("../playbooks/etcd_backup.yml")),
    ("etcdctl_check.yml", include_str!("../playbooks/etcdctl_check.yml")),
    ("host_facts.yml", include_str!("../playbooks/host_facts.yml")),
    ("kubeadm_plan.yml", include_str!("../playbooks/kubeadm_plan.yml")),
    ("kubernetes_repo.yml", include_str!("../playbooks/kubernetes_repo.yml")),
    ("master_restart.yml", include_str!("../playbooks/master_restart.yml")),
    ("master_upgrade.yml", include_str!("../playbooks/master_upgrade.yml")),
    ("node_poll.yml", include_str!("../playbooks/node_poll.yml")),
    ("node_restart.yml", include_str!("../playbooks/node_restart.yml")),
    ("node_upgrade.yml", include_str!("../playbooks/node_upgrade.yml")),
    ("package_manager.yml", include_str!("../playbooks/package_manager.yml")),
    ("reboot.yml", include_str!("../playbooks/reboot.yml")),
    ("uncordon.yml", include_str!("../playbooks/uncordon.yml")),
    ("wait_ready.yml", include_str!("../playbooks/wait_ready.yml")),
];

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
        // Rewritten only when different, so a reader of the directory sees stable files.
        if std::fs::read_to_string(&path).ok().as_deref() != Some(*text) {
            std::fs::write(&path, text).map_err(fail)?;
        }
    }
    Ok(dir.to_path_buf())
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_built_in_step_file_parses() {
        let dir = tempfile::tempdir().unwrap();
        let dir = super::materialize(dir.path()).unwrap();
        for (name, _) in super::FILES {
            let errors = crate::tasks::check_task_file(&dir.join(name));
            assert!(errors.is_empty() || *name == "defaults.yml", "{name}: {errors:?}");
        }
    }
}
