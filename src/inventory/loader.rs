//! Ansible's inventory plugin chain: which parser reads which file of an inventory file or directory. The loader
//! calls the parsers, and they fill the builder; the builder calls neither.

use std::path::Path;

use super::builder::Builder;
use crate::error::{Error, Result};

const YAML_EXTENSIONS: [&str; 3] = ["yaml", "yml", "json"];

/// Extensions Ansible skips in an inventory directory (`INVENTORY_IGNORE_EXTS`).
const IGNORED_EXTENSIONS: [&str; 12] =
    [".pyc", ".pyo", ".swp", ".bak", "~", ".rpm", ".md", ".txt", ".rst", ".orig", ".cfg", ".retry"];

/// Ansible's plugin chain for one file: the yaml plugin takes `.yml`/`.yaml`/`.json` or no extension when the
/// file is a YAML mapping; otherwise the ini plugin.
pub(super) fn parse_source(builder: &mut Builder, text: &str, path: &Path) -> Result<()> {
    builder.set_current_source(path);
    let yaml_wants = match python_extension(path) {
        None => true,
        Some(ext) => YAML_EXTENSIONS.contains(&ext.as_str()),
    };
    let mut yaml_error = None;
    if yaml_wants {
        match super::yaml::load_data(text, path) {
            Ok(Some(doc)) if doc.as_map().is_some() => return super::yaml::parse(builder, &doc, path),
            Ok(_) => {}
            Err(e) => yaml_error = Some(e),
        }
    }
    match super::ini::parse(builder, text, path) {
        Ok(()) => Ok(()),
        Err(ini_error) => match (yaml_error, python_extension(path)) {
            (Some(y), Some(ext)) if YAML_EXTENSIONS.contains(&ext.as_str()) => Err(y),
            _ => Err(ini_error),
        },
    }
}

/// Reads and parses one inventory file, decrypting it first when it is vault-encrypted whole (ansible-core's
/// loader does so for every plugin).
pub(super) fn read_source(builder: &mut Builder, path: &Path) -> Result<()> {
    let (text, encrypted) = super::vault_values::file_text(path, &builder.vault)?;
    builder.source_encrypted = encrypted;
    let parsed = parse_source(builder, &text, path);
    builder.source_encrypted = false;
    parsed
}

/// `os.path.splitext`'s extension, without the dot: leading dots of the name do not start one.
fn python_extension(path: &Path) -> Option<String> {
    let name = path.file_name()?.to_string_lossy();
    let trimmed = name.trim_start_matches('.');
    let dot = trimmed.rfind('.')?;
    Some(trimmed[dot + 1..].to_string())
}

/// Every inventory file of a directory, sorted, recursively, skipping what Ansible skips.
pub(super) fn load_dir(builder: &mut Builder, dir: &Path) -> Result<()> {
    let entries = std::fs::read_dir(dir).map_err(|e| Error::read_file(dir, e))?;
    let mut names: Vec<std::ffi::OsString> = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| Error::read_file(dir, e))?;
        names.push(entry.file_name());
    }
    names.sort();
    for name in names {
        let text_name = name.to_string_lossy();
        if is_ignored(&text_name) {
            continue;
        }
        let full = dir.join(&name);
        if full.is_dir() {
            load_dir(builder, &full)?;
        } else if let Some(why) = not_an_inventory_file(&full, &builder.vault) {
            builder.warn(format!("skipped {} in the inventory directory: {why}", full.display()));
        } else {
            read_source(builder, &full).map_err(|e| in_a_directory(e, dir))?;
        }
    }
    Ok(())
}

/// A file of an inventory directory that does not parse: the error says it was read because it is in the directory.
fn in_a_directory(mut error: Error, dir: &Path) -> Error {
    let why = format!(
        "every file of the inventory directory {} is read as an inventory, as Ansible reads it (hidden files, \
         group_vars/, host_vars/, .md/.txt/.cfg and the like, scripts and task lists are passed over): move this file \
         out of it, or name the inventory file itself with --inventory",
        dir.display()
    );
    error.hint = Some(match error.hint.take() {
        Some(hint) => format!("{hint}; {why}"),
        None => why,
    });
    error
}

/// Why a file of an inventory directory is no inventory file we read, as Ansible's plugins pass it over with
/// `Unable to parse ... as an inventory source` and go on: an executable script or program (Ansible's script plugin
/// runs it as a dynamic inventory; we run no inventory scripts), or YAML that is not a mapping (task files kept beside
/// the inventory: Ansible's yaml plugin says the structure should be a dictionary). An executable without `#!` is
/// read as a file, as Ansible's ini plugin reads it once running it failed.
fn not_an_inventory_file(path: &Path, vault: &crate::vault::VaultSecrets) -> Option<String> {
    use std::os::unix::fs::PermissionsExt;
    let executable = std::fs::metadata(path).is_ok_and(|m| m.permissions().mode() & 0o111 != 0);
    if executable {
        let bytes = std::fs::read(path).unwrap_or_default();
        let program = bytes.starts_with(b"#!") || std::str::from_utf8(&bytes).is_err();
        if program {
            return Some(
                "an executable, which Ansible would run as an inventory script; upgrade runs none: write its output \
                 (`SCRIPT --list`) to a .json file in the directory, or move the file out of it"
                    .to_string(),
            );
        }
    }
    let yaml_named = python_extension(path).is_some_and(|ext| YAML_EXTENSIONS.contains(&ext.as_str()));
    if yaml_named {
        let (text, _) = super::vault_values::file_text(path, vault).ok()?;
        if let Ok(Some(doc)) = super::yaml::load_data(&text, path) {
            if doc.as_map().is_none() {
                return Some(
                    "YAML that is not a mapping (a task file?), which Ansible's yaml plugin does not read as an \
                     inventory either"
                        .to_string(),
                );
            }
        }
    }
    None
}

fn is_ignored(name: &str) -> bool {
    name.starts_with('.')
        || matches!(name, "host_vars" | "group_vars" | "vars_plugins")
        || IGNORED_EXTENSIONS.iter().any(|ext| name.ends_with(ext))
}
