//! The `reboot` module over a real sshd whose "host" really goes away: the reboot command (run on the host, which is
//! this machine) kills the sshd listener and every session, writes a new boot id into the host's own file, and starts
//! the same sshd again on the same port a moment later. The module must ride out the lost connection and reconnect.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::support::sshd::TestSshd;
use crate::support::upgrade_with as upgrade;

/// A YAML double-quoted scalar (JSON's string syntax is valid YAML).
fn quoted(s: &str) -> String {
    serde_json::to_string(s).expect("json string")
}

/// One host `h1` on `sshd` whose boot id lives in `{{ host_root }}/boot_id`, and a task file.
fn setup(dir: &Path, sshd: &TestSshd, tasks: &str) -> (PathBuf, PathBuf) {
    std::fs::write(sshd.host_root("h1").join("boot_id"), "boot-1\n").expect("boot id");
    let inventory = dir.join("hosts.ini");
    std::fs::write(&inventory, format!("[nodes]\n{}\n", sshd.ini_host("h1"))).expect("inventory");
    let file = dir.join("reboot.yml");
    std::fs::write(&file, tasks).expect("tasks");
    (inventory, file)
}

#[test]
fn reboot_waits_for_the_host_to_come_back_with_a_new_boot_id_and_the_next_task_runs_there() {
    let dir = tempfile::tempdir().expect("dir");
    let sshd = TestSshd::start();
    let first_listener = sshd.pid();
    let reboot_command = sshd.restart_command(
        Duration::from_secs(2),
        "echo boot-2 > {{ host_root }}/boot_id; echo down >> {{ host_root }}/log",
    );
    let tasks = format!(
        "- name: reboot h1\n  reboot:\n    reboot_command: {}\n    boot_time_command: cat {{{{ host_root }}}}/boot_id\n    \
         reboot_timeout: 60\n  register: rebooted\n\
         - name: after the reboot\n  shell: cat {{{{ host_root }}}}/boot_id; echo up >> {{{{ host_root }}}}/log\n  register: after\n\
         - name: what the reboot reported\n  assert:\n    that:\n      - rebooted is changed\n      - rebooted.rebooted\n      \
         - rebooted.elapsed is number\n      - after.stdout == 'boot-2'\n",
        quoted(&reboot_command)
    );
    let (inventory, file) = setup(dir.path(), &sshd, &tasks);

    let out = upgrade(&["run-tasks", file.to_str().expect("utf-8")], &inventory);
    assert_eq!(out.code, 0, "{out}\n--- sshd log\n{}", sshd.log());
    // The host really went down and came back: its log shows the reboot before the next task, and the sshd now
    // listening is a new process.
    let log = std::fs::read_to_string(sshd.host_root("h1").join("log")).expect("host log");
    assert_eq!(log, "down\nup\n");
    let listener = std::fs::read_to_string(sshd.dir().join("sshd.pid")).expect("the restarted sshd wrote its pid");
    assert_ne!(listener.trim(), first_listener.to_string(), "sshd was restarted");
}

#[test]
fn a_host_that_never_comes_back_fails_with_ansibles_timeout_message() {
    let dir = tempfile::tempdir().expect("dir");
    let sshd = TestSshd::start();
    let tasks = format!(
        "- name: reboot h1\n  reboot:\n    reboot_command: {}\n    boot_time_command: cat {{{{ host_root }}}}/boot_id\n    \
         reboot_timeout: 3\n    connect_timeout: 2\n\
         - name: never reached\n  command: \"true\"\n",
        quoted(&sshd.crash_command("echo boot-2 > {{ host_root }}/boot_id"))
    );
    let (inventory, file) = setup(dir.path(), &sshd, &tasks);

    let out = upgrade(&["run-tasks", file.to_str().expect("utf-8")], &inventory);
    let all = out.output();
    assert_eq!(out.code, 1, "{out}");
    assert!(all.contains("Timed out waiting for last boot time check (timeout=3)"), "{all}");
    assert!(!all.contains("never reached"), "the host stops at the failed reboot: {all}");
}

#[test]
fn a_host_that_does_not_go_down_is_not_taken_for_one_that_came_back() {
    let dir = tempfile::tempdir().expect("dir");
    let sshd = TestSshd::start();
    let tasks = "- reboot:\n    reboot_command: /bin/true\n    boot_time_command: cat {{ host_root }}/boot_id\n    \
                 reboot_timeout: 2\n";
    let (inventory, file) = setup(dir.path(), &sshd, tasks);
    let out = upgrade(&["run-tasks", file.to_str().expect("utf-8")], &inventory);
    let all = out.output();
    assert_eq!(out.code, 1, "{out}");
    assert!(all.contains("Timed out waiting for last boot time check (timeout=2)"), "{all}");
}

#[test]
fn a_failing_reboot_command_and_a_local_connection_are_reported_as_ansible_does() {
    let dir = tempfile::tempdir().expect("dir");
    let sshd = TestSshd::start();
    let tasks = "- reboot:\n    reboot_command: /bin/sh -c 'echo no permission >&2; exit 1'\n    \
                 boot_time_command: cat {{ host_root }}/boot_id\n";
    let (inventory, file) = setup(dir.path(), &sshd, tasks);
    let out = upgrade(&["run-tasks", file.to_str().expect("utf-8")], &inventory);
    let all = out.output();
    assert_eq!(out.code, 1, "{out}");
    assert!(all.contains("Reboot command failed. Error was: ', no permission'"), "{all}");

    // The controller is never rebooted: a local connection is refused before anything runs.
    let local = dir.path().join("local.ini");
    std::fs::write(&local, "[nodes]\nlocalhost ansible_connection=local\n").expect("inventory");
    let tasks = dir.path().join("local.yml");
    std::fs::write(&tasks, "- reboot:\n    reboot_command: /bin/false\n").expect("tasks");
    let out = upgrade(&["run-tasks", tasks.to_str().expect("utf-8")], &local);
    let all = out.output();
    assert_eq!(out.code, 1, "{out}");
    assert!(all.contains("Running reboot with local connection would reboot the control node."), "{all}");
}

#[test]
fn wait_for_connection_waits_for_a_host_that_is_down_when_the_run_starts() {
    let dir = tempfile::tempdir().expect("dir");
    let sshd = TestSshd::start();
    let tasks = "- wait_for_connection:\n    timeout: 60\n\
                 - command: cat {{ host_root }}/boot_id\n  register: after\n\
                 - assert:\n    that: after.stdout == 'boot-2'\n";
    let (inventory, file) = setup(dir.path(), &sshd, tasks);
    // The host goes down now and comes back three seconds later, while the run tries to reach it.
    let host_root = sshd.host_root("h1");
    let reboot =
        sshd.restart_command(Duration::from_secs(3), &format!("echo boot-2 > {}/boot_id", host_root.display()));
    let status = Command::new("/bin/sh").arg("-c").arg(&reboot).status().expect("run the reboot script");
    assert!(status.success());
    while std::net::TcpStream::connect(("127.0.0.1", sshd.port())).is_ok() {
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = upgrade(&["run-tasks", file.to_str().expect("utf-8")], &inventory);
    assert_eq!(out.code, 0, "{out}\n--- sshd log\n{}", sshd.log());
}

#[test]
fn wait_for_connection_rides_out_a_reboot_and_gives_up_on_a_host_that_stays_down() {
    let dir = tempfile::tempdir().expect("dir");
    let sshd = TestSshd::start();
    let tasks = "- name: bring the host down for two seconds\n  shell: REBOOT\n\
                 - name: wait for it\n  wait_for_connection:\n    delay: 1\n    timeout: 60\n  register: waited\n\
                 - command: cat {{ host_root }}/boot_id\n  register: after\n\
                 - assert:\n    that:\n      - waited is not failed\n      - after.stdout == 'boot-2'\n";
    let reboot = sshd.restart_command(Duration::from_secs(2), "echo boot-2 > {{ host_root }}/boot_id");
    let (inventory, file) = setup(dir.path(), &sshd, &tasks.replace("REBOOT", &quoted(&reboot)));
    let out = upgrade(&["run-tasks", file.to_str().expect("utf-8")], &inventory);
    assert_eq!(out.code, 0, "{out}\n--- sshd log\n{}", sshd.log());

    // A host that stays down: Ansible's message, with the last error.
    let tasks = "- wait_for_connection:\n    timeout: 2\n    connect_timeout: 1\n";
    let down = dir.path().join("down.ini");
    std::fs::write(&down, "[nodes]\nh1 ansible_host=127.0.0.1 ansible_port=1\n").expect("inventory");
    let file = dir.path().join("wait.yml");
    std::fs::write(&file, tasks).expect("tasks");
    let out = upgrade(&["run-tasks", file.to_str().expect("utf-8")], &down);
    let all = out.output();
    assert_eq!(out.code, 1, "{out}");
    assert!(all.contains("timed out waiting for ping module test:"), "{all}");
    assert!(!all.contains("unreachable=1"), "a host that stays down fails the task, as in Ansible: {all}");
}
