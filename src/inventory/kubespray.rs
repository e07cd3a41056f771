//! What kubespray's playbooks add to an inventory before anything runs (`playbooks/boilerplate.yml`, "Define groups
//! for legacy less structured inventories"): the group `k8s_cluster` of the hosts of `kube_control_plane`,
//! `kube_node` and `calico_rr` (and their older names), which inventories laid out for kubespray 2.26 and later no
//! longer declare, so that `group_vars/k8s_cluster/` (where `kube_version` lives) applies as it does under kubespray.

use std::path::Path;

use super::{Group, Inventory};
use crate::error::Result;
use crate::vault::VaultSecrets;

/// The groups kubespray gathers into `k8s_cluster`, with their older names.
const CLUSTER_MEMBERS: [&str; 7] =
    ["kube_control_plane", "kube-master", "kube_master", "kube_node", "kube-node", "calico_rr", "calico-rr"];

impl Inventory {
    /// Declares `k8s_cluster` as kubespray's playbooks do when the inventory has kubespray's groups and not it,
    /// with its `group_vars/`. Does nothing otherwise; `ansible-inventory` alone does not do this, kubespray does.
    pub fn define_kubespray_cluster_group(&mut self, vault: &VaultSecrets) -> Result<bool> {
        const NAME: &str = "k8s_cluster";
        let members: Vec<String> =
            CLUSTER_MEMBERS.iter().filter(|g| self.groups.contains_key(**g)).map(|g| g.to_string()).collect();
        if self.groups.contains_key(NAME) || !members.iter().any(|g| g.starts_with("kube")) {
            return Ok(false);
        }
        let mut group = Group::new(NAME);
        group.children = members;
        self.groups.insert(NAME.to_string(), group);
        self.refresh();
        let dir: &Path = &self.dir.clone();
        let vars = super::vars::load_group_file_vars(dir, NAME, vault)?;
        if let Some(g) = self.groups.get_mut(NAME) {
            g.file_vars = vars;
        }
        Ok(true)
    }
}
