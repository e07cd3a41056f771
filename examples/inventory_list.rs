//! Prints an inventory the way `ansible-inventory -i PATH --list` does, for scripts/compare-inventory.sh.

fn main() {
    let Some(path) = std::env::args().nth(1) else {
        eprintln!("usage: inventory_list PATH");
        std::process::exit(2);
    };
    match upgrade::inventory::Inventory::load(std::path::Path::new(&path)) {
        Ok(inv) => println!("{}", serde_json::to_string_pretty(&inv.to_ansible_list()).unwrap_or_default()),
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(e.exit_code());
        }
    }
}
