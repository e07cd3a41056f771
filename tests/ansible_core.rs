//! Modules `upgrade` does not implement, run through ansible-core itself (src/tasks/modules/ansible_core.rs), on
//! real sshd hosts with the ansible-core of the test virtualenv (target/ansible-venv, made by
//! scripts/install-test-deps; `UPGRADE_TEST_ANSIBLE` names another `ansible`). Without it these tests say SKIPPED,
//! and fail under CI.

use std::path::{Path, PathBuf};

use crate::support::Scenario;
use crate::support::sshd::TestSshd;

/// The `ansible` command of the test virtualenv.
fn ansible() -> Option<PathBuf> {
    let path = std::env::var_os("UPGRADE_TEST_ANSIBLE")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("target/ansible-venv/bin/ansible"));
    if path.with_file_name("ansible-playbook").exists() {
        return Some(path);
    }
    let why = format!("no ansible-core at {} (scripts/install-test-deps makes it)", path.display());
    if std::env::var_os("CI").is_some() {
        panic!("{why}");
    }
    eprintln!("SKIPPED: {why}");
    None
}

/// The hook of tests/fixtures/ansible-core-hook copied beside an inventory of two sshd hosts.
fn hook_and_inventory(sshd: &TestSshd, ansible_command: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("dir");
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/ansible-core-hook");
    let status = std::process::Command::new("cp").arg("-a").arg(fixture).arg(dir.path().join("hook")).status();
    assert!(status.expect("cp").success());
    let mut text = String::from("all:\n  vars:\n");
    text.push_str(&format!("    upgrade_ansible_command: \"{ansible_command}\"\n"));
    text.push_str("    ansible_python_interpreter: /usr/bin/python3\n");
    text.push_str(&format!("    probe_path: \"{}/{{{{ inventory_hostname }}}}.probe\"\n", dir.path().display()));
    text.push_str("  children:\n    masters:\n      hosts:\n");
    text.push_str(&sshd.yaml_host("h1", 8));
    text.push_str("    nodes:\n      hosts:\n");
    text.push_str(&sshd.yaml_host("h2", 8));
    let inventory = dir.path().join("hosts.yml");
    std::fs::write(&inventory, text).expect("inventory");
    (dir, inventory)
}

#[test]
fn modules_upgrade_does_not_implement_run_through_ansible_core_with_the_hosts_connection_and_the_tasks_environment() {
    let Some(ansible) = ansible() else { return };
    let sshd = TestSshd::start();
    let (dir, inventory) = hook_and_inventory(&sshd, &ansible.display().to_string());
    let out = Scenario::in_dir(dir.path()).args(["run-tasks", "hook/hook.yml", "--inventory"]).arg(&inventory).run();
    assert_eq!(out.code, 0, "{out}");
    for host in ["h1", "h2"] {
        let note = std::fs::read_to_string(dir.path().join(format!("{host}.probe"))).expect("the module wrote");
        assert_eq!(note, format!("written for {host}"));
    }
    let check = Scenario::in_dir(dir.path()).args(["check", "--inventory"]).arg(&inventory).arg("hook/hook.yml").run();
    let text = check.output();
    assert_eq!(check.code, 0, "{check}");
    for (line, module) in
        [("hook.yml:2:3", "ping"), ("main.yml:1:3", "node_probe"), ("hook.yml:9:3", "ansible.builtin.ping")]
    {
        assert!(
            text.lines().any(|l| l.starts_with("note: ")
                && l.contains(line)
                && l.contains(&format!("module `{module}` runs through ansible-core (ansible-playbook [core"))),
            "{module}: {text}"
        );
    }
}

#[test]
fn without_ansible_core_check_refuses_the_file_naming_the_task_and_why() {
    let sshd = TestSshd::start();
    let (dir, inventory) = hook_and_inventory(&sshd, "/nonexistent/bin/ansible");
    let check = Scenario::in_dir(dir.path()).args(["check", "--inventory"]).arg(&inventory).arg("hook/hook.yml").run();
    let text = check.output();
    assert_eq!(check.code, 2, "{check}");
    assert!(
        text.contains(
            "hook.yml:2:3: task \"a builtin module upgrade does not implement\": unknown module `ping`: \
                       ansible-core is needed to run it and was not found"
        ),
        "{text}"
    );
    assert!(text.contains("fix upgrade_ansible_command"), "{text}");
    assert_eq!(text.matches("hint: a module upgrade does not implement").count(), 1, "the hint once: {text}");
}
