//! Our results against ansible-core's own on the same files (scripts/compare-with-ansible): every fixture inventory
//! against `ansible-inventory --list`, host patterns against `ansible PATTERN --list-hosts`, the task files of
//! scripts/compare/ against `ansible-playbook` on the same local hosts, and Ansible Vault texts. One test of the ci
//! profile, started early beside the others: ansible-core's results are recorded in the test cache and read back
//! while their inputs stay the same (scripts/ansible-reference), so on a warm machine it mostly waits on its hosts.
//! Without the test virtualenv (target/ansible-venv, made by scripts/install-test-deps) it says SKIPPED outside CI;
//! with `CI` set the script makes the virtualenv first, and a comparison that cannot run fails.

use std::path::Path;
use std::process::Command;

#[test]
fn inventories_patterns_task_files_and_vault_texts_give_what_ansible_core_gives() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let venv = root.join("target/ansible-venv");
    if std::env::var_os("CI").is_none() && !venv.join("bin/ansible-playbook").exists() {
        eprintln!("SKIPPED: no ansible-core at {} (scripts/install-test-deps makes it)", venv.display());
        return;
    }
    let status = Command::new(root.join("scripts/compare-with-ansible")).status().expect("run compare-with-ansible");
    assert!(
        status.success(),
        "scripts/compare-with-ansible: a result differs from ansible-core's, or a comparison could not run (above)"
    );
}
