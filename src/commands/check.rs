//! `upgrade check`: validates the inventory, the settings and every hook and playbook task file, without
//! connecting to any host. Every problem is listed (exit 2 when there is any), not only the first.

use crate::console::{errln, outln};
use std::path::PathBuf;

use super::arguments::{extra_vars, load_inventory};
use super::vault::vault_secrets;
use crate::cli::CheckArgs;
use crate::inventory::{Inventory, Vars};
use crate::plan::{Plan, PlanRequest};
use crate::tasks::{check_task_file, check_task_file_with_notes};

pub(super) fn check(args: &CheckArgs) -> crate::error::Result<i32> {
    let mut problems = 0usize;
    let mut files: Vec<PathBuf> = Vec::new();
    let mut roles_path: Vec<PathBuf> = Vec::new();
    let mut ansible = crate::tasks::modules::AnsibleCore::default();
    let mut say = |e: crate::error::Error| {
        errln!("error: {}", crate::redact::Redactor::decrypted().error(e));
        problems += 1;
    };
    let loaded = vault_secrets(&args.inventory).and_then(|vault| Ok((load_inventory(&args.inventory, &vault)?, vault)));
    match loaded {
        Ok((inventory, vault)) => match extra_vars(&args.inventory, &vault) {
            Ok(extra) => {
                outln!("ok: {}", inventory.path.display());
                match check_settings(args, &inventory, &extra) {
                    Ok(()) => outln!("ok: settings and plan"),
                    Err(e) => say(e),
                }
                files.extend(crate::settings::hook_files(&inventory, &extra));
                roles_path = configured_roles_path(&inventory, &extra);
                ansible = crate::tasks::ansible_core_of(&inventory, &extra);
            }
            Err(e) => say(e),
        },
        Err(e) => say(e),
    }
    problems += check_builtin_playbooks();
    for f in &args.files {
        if !files.contains(f) {
            files.push(f.clone());
        }
    }
    for file in &files {
        let crate::tasks::TaskFileCheck { errors, notes } = check_task_file_with_notes(file, &roles_path, &ansible);
        for note in notes {
            outln!("note: {note}");
        }
        if errors.is_empty() {
            outln!("ok: {}", file.display());
        } else {
            problems += errors.len();
            for e in errors {
                errln!("error: {e}");
            }
        }
    }
    Ok(if problems > 0 { 2 } else { 0 })
}

/// Every host's `upgrade_roles_path` directories (relative ones against the inventory's directory), where a run
/// looks for the roles hooks import.
fn configured_roles_path(inventory: &Inventory, extra: &Vars) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = Vec::new();
    for host in inventory.hosts.keys() {
        let vars = inventory.host_vars(host, extra);
        for dir in crate::tasks::role_dirs::roles_path(vars.get("upgrade_roles_path").map(|v| &v.value)) {
            let dir = if dir.is_absolute() { dir } else { inventory.dir.join(dir) };
            if !dirs.contains(&dir) {
                dirs.push(dir);
            }
        }
    }
    dirs
}

/// The settings and the plan of an upgrade with this inventory, `-e` and `--limit`, as a run would build them.
fn check_settings(args: &CheckArgs, inventory: &Inventory, extra: &Vars) -> crate::error::Result<()> {
    let request = PlanRequest { limit: args.inventory.limit.clone(), ..PlanRequest::default() };
    Plan::build_for_run(inventory, extra, &request).map(|_| ())
}

/// Checks the built-in step files compiled into this binary; returns how many problems they have.
fn check_builtin_playbooks() -> usize {
    // A check that cannot read what it checks fails: the built-in files are written to a temporary directory first.
    let temp = match tempfile::tempdir() {
        Ok(temp) => temp,
        Err(e) => {
            errln!("error: cannot make a temporary directory to check the built-in playbooks in: {e}");
            return 1;
        }
    };
    let dir = match crate::playbooks::materialize(temp.path()) {
        Ok(dir) => dir,
        Err(e) => {
            errln!("error: {e}");
            return 1;
        }
    };
    let mut problems = 0;
    for name in crate::playbooks::names() {
        // defaults.yml holds the playbooks' default variables, not tasks.
        if name == "defaults.yml" {
            continue;
        }
        let errors = check_task_file(&dir.join(name));
        if errors.is_empty() {
            outln!("ok: built-in playbooks/{name}");
        }
        for e in &errors {
            errln!("error: built-in playbooks/{name}: {e}");
        }
        problems += errors.len();
    }
    problems
}
