//! Every host's node name is a name Kubernetes can give a Node.

use crate::error::{Error, Result};
use crate::phase::run::UpgradeRun;

/// Every host's node name is a name Kubernetes can give a Node (a DNS-1123 subdomain: lower-case letters, digits,
/// `-` and `.`, alphanumeric at both ends, at most 253 characters), else bad input (exit 2) before anything is touched.
/// Such a name cannot reach a cluster command as anything but a name: a `;` or `$(...)` in `node_name` is refused
/// here, and the built-in steps quote it as well (N18).
pub(super) fn check_node_names(run: &UpgradeRun) -> Result<()> {
    let bad: Vec<String> = run
        .plan
        .hosts
        .iter()
        .filter(|h| !is_dns1123_subdomain(&run.node_name(h)))
        .map(|h| format!("{h} ({:?})", run.node_name(h)))
        .collect();
    if bad.is_empty() {
        return Ok(());
    }
    Err(Error::input(format!("node names that are not Kubernetes node names: {}", bad.join(", ")))
        .in_file(&run.inventory.path)
        .hint(
            "a node name is lower-case letters, digits, `-` and `.` (a DNS-1123 subdomain); set node_name to the name \
             `kubectl get nodes` shows; nothing was touched",
        ))
}

pub(crate) fn is_dns1123_subdomain(name: &str) -> bool {
    let label_ok = |l: &str| {
        !l.is_empty()
            && l.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
            && !l.starts_with('-')
            && !l.ends_with('-')
    };
    name.len() <= 253 && name.split('.').all(label_ok)
}
