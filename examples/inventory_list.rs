//! Prints an inventory the way `ansible-inventory -i PATH --list` does, for scripts/compare-inventory.sh.
//! With `--bench N` it loads the inventory N times and prints the mean load time instead (scripts/bench-inventory.sh).

use std::path::Path;
use std::time::Instant;

use upgrade::inventory::Inventory;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (path, runs) = match args.as_slice() {
        [path] => (path, None),
        [flag, n, path] if flag == "--bench" => (path, n.parse::<u32>().ok()),
        _ => {
            eprintln!("usage: inventory_list [--bench N] PATH");
            std::process::exit(2);
        }
    };
    let load = || {
        Inventory::load(Path::new(path)).unwrap_or_else(|e| {
            eprintln!("{e}");
            std::process::exit(e.exit_code());
        })
    };
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
