//! Prints an inventory the way `ansible-inventory -i PATH --list` does, for scripts/compare-inventory.sh.
//! With `--bench N` it loads the inventory N times and prints the mean load time instead (scripts/bench-inventory.sh).
//! With `--limit PATTERN` it prints the hosts `Inventory::select` picks, one a line, in our order
//! (scripts/compare-limit.sh compares them with `ansible -i PATH PATTERN --list-hosts`); with `--subset PATTERN`
//! those of `Inventory::limit` (against `ansible -i PATH all --limit PATTERN --list-hosts`).
//! `--vault-id LABEL@SOURCE` and `--vault-password-file FILE` (repeatable, before the rest) give vault passwords, as
//! `upgrade` takes them (scripts/compare-vault.sh).

use std::path::Path;
use std::time::Instant;

use upgrade::inventory::{Inventory, VaultSecrets};

fn main() {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let (mut vault_ids, mut password_files) = (Vec::new(), Vec::new());
    while args.len() >= 2 && (args[0] == "--vault-id" || args[0] == "--vault-password-file") {
        let value = args.remove(1);
        if args.remove(0) == "--vault-id" {
            vault_ids.push(value);
        } else {
            password_files.push(value.into());
        }
    }
    let vault = VaultSecrets::from_sources(&vault_ids, &password_files).unwrap_or_else(|e| {
        eprintln!("{e}");
        std::process::exit(e.exit_code());
    });
    let (path, runs, limit) = match args.as_slice() {
        [path] => (path, None, None),
        [flag, n, path] if flag == "--bench" => (path, n.parse::<u32>().ok(), None),
        [flag, pattern, path] if flag == "--limit" || flag == "--subset" => (path, None, Some((flag, pattern))),
        _ => {
            eprintln!(
                "usage: inventory_list [--vault-id LABEL@SOURCE | --vault-password-file FILE]... \
                 [--bench N | --limit PATTERN | --subset PATTERN] PATH"
            );
            std::process::exit(2);
        }
    };
    let load = || {
        Inventory::load_with_vault(Path::new(path), &vault).unwrap_or_else(|e| {
            eprintln!("{e}");
            std::process::exit(e.exit_code());
        })
    };
    if let Some((flag, pattern)) = limit {
        let inventory = load();
        let selected = if flag == "--limit" { inventory.select(pattern) } else { inventory.limit(pattern) };
        match selected {
            Ok(hosts) => hosts.iter().for_each(|h| println!("{h}")),
            Err(e) => {
                eprintln!("{e}");
                std::process::exit(e.exit_code());
            }
        }
        return;
    }
    match runs {
        Some(runs) => {
            let start = Instant::now();
            let mut hosts = 0;
            for _ in 0..runs.max(1) {
                hosts = load().hosts.len();
            }
            let mean = start.elapsed().as_secs_f64() * 1000.0 / f64::from(runs.max(1));
            println!("{hosts} hosts: {mean:.2} ms per load");
        }
        None => println!("{}", serde_json::to_string_pretty(&load().to_ansible_list()).unwrap_or_default()),
    }
}
