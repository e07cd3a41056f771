//! `group_vars/` and `host_vars/` beside the inventory, as Ansible's `host_group_vars` plugin finds them:
//! for an entity NAME, the first of `NAME` (a file, or a directory read recursively in sorted order), `NAME.yml`,
//! `NAME.yaml`, `NAME.json`. Hidden and backup (`~`) files are skipped; empty files are ignored.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use super::{Inventory, Origin, Var, Vars};
use crate::error::{Error, Location, Result};
use crate::vault::VaultSecrets;

const EXTENSIONS: [&str; 3] = [".yml", ".yaml", ".json"];

pub(super) fn load_vars_files(inventory: &mut Inventory, base: &Path, vault: &VaultSecrets) -> Result<()> {
    if let Some(dir) = VarsDir::open(&base.join("group_vars"))? {
        let names: Vec<String> = inventory.groups.keys().cloned().collect();
        for name in names {
            let vars = dir.load(&name, Origin::GroupVars, vault)?;
            if let Some(g) = inventory.groups.get_mut(&name) {
                g.file_vars = vars;
            }
        }
    }
    if let Some(dir) = VarsDir::open(&base.join("host_vars"))? {
        let names: Vec<String> = inventory.hosts.keys().cloned().collect();
        for name in names {
            let vars = dir.load(&name, Origin::HostVars, vault)?;
            if let Some(h) = inventory.hosts.get_mut(&name) {
                h.file_vars = vars;
            }
        }
    }
    Ok(())
}

/// The `group_vars/` of one group added after the inventory was read (kubespray's `k8s_cluster`).
pub(super) fn load_group_file_vars(base: &Path, group: &str, vault: &VaultSecrets) -> Result<Vars> {
    match VarsDir::open(&base.join("group_vars"))? {
        Some(dir) => dir.load(group, Origin::GroupVars, vault),
        None => Ok(Vars::new()),
    }
}

/// A `group_vars/` or `host_vars/` directory, listed once so thousands of hosts cost one `readdir`.
struct VarsDir {
    path: PathBuf,
    entries: HashSet<String>,
}

impl VarsDir {
    fn open(path: &Path) -> Result<Option<VarsDir>> {
        if !path.is_dir() {
            return Ok(None);
        }
        let mut entries = HashSet::new();
        for entry in std::fs::read_dir(path).map_err(|e| Error::read_file(path, e))? {
            let entry = entry.map_err(|e| Error::read_file(path, e))?;
            entries.insert(entry.file_name().to_string_lossy().into_owned());
        }
        Ok(Some(VarsDir { path: path.to_path_buf(), entries }))
    }

    fn load(&self, name: &str, origin: fn(Location) -> Origin, vault: &VaultSecrets) -> Result<Vars> {
        let mut vars = Vars::new();
        // Ansible skips names that look like absolute paths (chroot-style host names).
        if name.starts_with('/') {
            return Ok(vars);
        }
        let candidates = std::iter::once(name.to_string()).chain(EXTENSIONS.iter().map(|ext| format!("{name}{ext}")));
        for candidate in candidates {
            if !self.entries.contains(&candidate) {
                continue;
            }
            let full = self.path.join(&candidate);
            let mut files = Vec::new();
            if full.is_dir() {
                dir_files(&full, &mut files)?;
            } else {
                files.push(full);
            }
            for file in files {
                load_file(&file, origin, &mut vars, vault)?;
            }
            break;
        }
        Ok(vars)
    }
}

/// Ansible's `_get_dir_vars_files`: sorted, recursive into directories without an extension.
fn dir_files(dir: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
    let mut names: Vec<std::ffi::OsString> = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(|e| Error::read_file(dir, e))? {
        names.push(entry.map_err(|e| Error::read_file(dir, e))?.file_name());
    }
    names.sort();
    for name in names {
        let text = name.to_string_lossy();
        if text.starts_with('.') || text.ends_with('~') {
            continue;
        }
        let full = dir.join(&name);
        let ext = Path::new(&*text).extension().map(|e| format!(".{}", e.to_string_lossy()));
        if full.is_dir() && ext.is_none() {
            dir_files(&full, out)?;
        } else if full.is_file() && ext.as_deref().is_none_or(|e| EXTENSIONS.contains(&e)) {
            out.push(full);
        }
    }
    Ok(())
}

/// One vars file: a YAML (or JSON) mapping, its keys on top of `vars`. A file vault-encrypted whole is decrypted,
/// and every value in it is a secret.
pub(super) fn load_file(
    path: &Path,
    origin: fn(Location) -> Origin,
    vars: &mut Vars,
    vault: &VaultSecrets,
) -> Result<()> {
    let (text, encrypted) = super::vault_values::file_text(path, vault)?;
    let Some(doc) = super::yaml::load_data(&text, path)? else { return Ok(()) };
    if doc.is_null() {
        return Ok(());
    }
    let Some(entries) = doc.as_map() else {
        return Err(Error::input(format!("variables file must be a mapping, found {}", doc.type_name()))
            .at(doc.location(path))
            .hint("write one `name: value` per line at the top level"));
    };
    for (key, value) in entries {
        let value = super::vault_values::decrypted_json(value, key, path, vault)?;
        if encrypted {
            crate::redact::decrypted::remember(&value);
        }
        vars.insert(key.key_text(), Var { value, origin: origin(key.location(path)) });
    }
    Ok(())
}

/// A vars file read by a task (`include_vars`): its data as JSON, decrypted when the file is vault-encrypted whole
/// (every value then a secret) and every `!vault` value in it decrypted (each a secret).
pub(crate) fn decrypted_file_json(path: &Path, vault: &VaultSecrets) -> Result<serde_json::Value> {
    let (text, encrypted) = super::vault_values::file_text(path, vault)?;
    let Some(node) = super::yaml::load_data(&text, path)? else { return Ok(serde_json::Value::Null) };
    let value = super::vault_values::decrypt_node(&node, &|n: &crate::yaml::Node| n.location(path), vault)?.to_json();
    if encrypted {
        crate::redact::decrypted::remember(&value);
    }
    Ok(value)
}
