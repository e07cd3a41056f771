//! `upgrade check`: validates the inventory, the settings and every hook and playbook task file, without
//! connecting to any host. Every problem is listed (exit 2 when there is any), not only the first.

use std::path::PathBuf;

use super::arguments::{extra_vars, load_inventory};
use crate::cli::CheckArgs;
use crate::inventory::{Inventory, Vars};
use crate::plan::{Plan, PlanRequest};
use crate::tasks::check_task_file;

pub(super) fn check(args: &CheckArgs) -> crate::error::Result<i32> {
    let mut problems = 0usize;
    let mut files: Vec<PathBuf> = Vec::new();
    let mut say = |e: crate::error::Error| {
        eprintln!("error: {e}");
        problems += 1;
    };
    match load_inventory(&args.inventory) {
        Ok(inventory) => match extra_vars(&args.inventory) {
            Ok(extra) => {
                println!("ok: {}", inventory.path.display());
                match check_settings(args, &inventory, &extra) {
                    Ok(()) => println!("ok: settings and plan"),
                    Err(e) => say(e),
                }
                files.extend(crate::settings::hook_files(&inventory, &extra));
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
        let errors = check_task_file(file);
        if errors.is_empty() {
            println!("ok: {}", file.display());
        } else {
            problems += errors.len();
            for e in errors {
                eprintln!("error: {e}");
            }
        }
    }
    Ok(if problems > 0 { 2 } else { 0 })
}

/// The settings and the plan of an upgrade with this inventory, `-e` and `--limit`, as a run would build them.
fn check_settings(args: &CheckArgs, inventory: &Inventory, extra: &Vars) -> crate::error::Result<()> {
    let request = PlanRequest { limit: args.inventory.limit.clone(), ..PlanRequest::default() };
    Plan::build_for_run(inventory, extra, &request).map(|_| ())
}

/// Checks the built-in step files compiled into this binary; returns how many problems they have.
fn check_builtin_playbooks() -> usize {
    let Ok(dir) = tempfile::tempdir() else { return 0 };
    let Ok(dir) = crate::playbooks::materialize(dir.path()) else { return 0 };
    let mut problems = 0;
    for name in crate::playbooks::names() {
        // defaults.yml holds the playbooks' default variables, not tasks.
        if name == "defaults.yml" {
            continue;
        }
        let errors = check_task_file(&dir.join(name));
        if errors.is_empty() {
            println!("ok: built-in playbooks/{name}");
        }
        for e in &errors {
            eprintln!("error: built-in playbooks/{name}: {e}");
        }
        problems += errors.len();
    }
    problems
}
