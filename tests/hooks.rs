//! Hook authors' tools over real SSH: `upgrade run-tasks` runs the example hooks on sshd hosts, `upgrade check`
//! rejects broken task files with file:line, and hosts that cannot be trusted or reached fail clearly.

use std::path::{Path, PathBuf};

use crate::support::sshd::TestSshd;
use crate::support::{Scenario, upgrade_with as upgrade};

fn repo(relative: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(relative)
}

/// Two inventory hosts on one real sshd (a master and a node), each with its own root directory.
fn inventory(dir: &Path, sshd: &TestSshd, extra: &str) -> PathBuf {
    let path = dir.join("hosts.ini");
    let text =
        format!("[masters]\n{}\n\n[nodes]\n{}\n\n[all:vars]\n{extra}\n", sshd.ini_host("h1"), sshd.ini_host("h2"));
    std::fs::write(&path, text).expect("inventory");
    path
}

#[test]
fn openshift_ansibles_documented_hook_runs_over_ssh_with_yes_and_refuses_to_prompt_without_a_terminal() {
    let dir = tempfile::tempdir().expect("dir");
    let sshd = TestSshd::start();
    let inv = inventory(dir.path(), &sshd, "");
    let hook = repo("hooks/openshift-example.yml");
    let hook = hook.to_str().expect("utf-8 path");

    let out = upgrade(&["run-tasks", hook, "--yes"], &inv);
    let all = out.output();
    assert_eq!(out.code, 0, "{out}");
    assert!(all.contains("[h1] ok: note the start of a master upgrade"), "{all}");
    assert!(all.contains("Master upgrade of h2 is about to start"), "{all}");
    assert!(all.contains("h1 ") && all.contains("ok=2"), "recap: {all}");

    // No terminal and no --yes: the prompt cannot be answered, and says so.
    let out = upgrade(&["run-tasks", hook], &inv);
    let all = out.output();
    assert_eq!(out.code, 1, "{out}");
    assert!(all.contains("--yes"), "the failure says how to answer prompts without a terminal: {all}");
}

#[test]
fn the_example_hooks_run_on_ssh_hosts() {
    let dir = tempfile::tempdir().expect("dir");
    let sshd = TestSshd::start();
    // The kubelet check stands in for a real kubelet; the marker goes to each host's own root.
    let inv = inventory(
        dir.path(),
        &sshd,
        "upgrade_kubelet_health_command=echo ok\nupgrade_verify_marker={{ host_root }}/verified",
    );
    for hook in ["hooks/master-pre-check.yml", "hooks/node-post-verify.yml"] {
        let path = repo(hook);
        let out = upgrade(&["run-tasks", path.to_str().expect("utf-8")], &inv);
        assert_eq!(out.code, 0, "{hook}: {out}");
    }
    let marker = std::fs::read_to_string(sshd.host_root("h2").join("verified")).expect("marker written over ssh");
    assert_eq!(marker, "verified h2: ok\n");
}

#[test]
fn check_rejects_broken_hook_files_with_their_line() {
    let dir = tempfile::tempdir().expect("dir");
    let sshd = TestSshd::start();
    std::fs::write(
        dir.path().join("bad.yml"),
        "- name: fine\n  debug:\n    msg: hi\n- name: typo in a module\n  comand: ls\n- name: bad template\n  debug:\n    msg: \"{{ oops\"\n",
    )
    .expect("hook");
    let inv = inventory(dir.path(), &sshd, "upgrade_node_pre_hook=bad.yml");
    let out = upgrade(&["check"], &inv);
    let all = out.output();
    assert_eq!(out.code, 2, "{out}");
    assert!(all.contains("bad.yml:4") || all.contains("bad.yml:5"), "the unknown module is located: {all}");
    assert!(all.contains("bad.yml:6") || all.contains("bad.yml:8"), "the template error is located: {all}");
}

#[test]
fn unreachable_hosts_and_changed_host_keys_fail_clearly() {
    let dir = tempfile::tempdir().expect("dir");
    let sshd = TestSshd::start();
    let task = dir.path().join("t.yml");
    std::fs::write(&task, "- command: \"true\"\n").expect("task");
    let task = task.to_str().expect("utf-8");

    // A known_hosts that holds another key for this host and port: a changed key, refused.
    let other = TestSshd::start();
    let forged = dir.path().join("known_hosts");
    std::fs::write(&forged, format!("[127.0.0.1]:{} {}\n", sshd.port(), other.host_public_key())).expect("kh");
    let changed = dir.path().join("changed.ini");
    let line = sshd.ini_host("h1").replace(&sshd.known_hosts().display().to_string(), &forged.display().to_string());
    std::fs::write(&changed, format!("[nodes]\n{line}\n")).expect("inventory");
    let out = upgrade(&["run-tasks", task, "--limit", "h1", "--accept-new-host-keys"], &changed);
    let all = out.output();
    assert_eq!(out.code, 1, "{out}");
    assert!(all.to_lowercase().contains("host key"), "the failure names the host key: {all}");

    // Nothing listens on the port: unreachable, said as such, and the run ends.
    let closed = dir.path().join("closed.ini");
    std::fs::write(&closed, "[nodes]\nh1 ansible_host=127.0.0.1 ansible_port=1\n").expect("inventory");
    let out = upgrade(&["run-tasks", task], &closed);
    let all = out.output();
    assert_eq!(out.code, 1, "{out}");
    assert!(all.contains("unreachable=1"), "{all}");
}

#[test]
fn check_reads_the_settings_as_a_run_would() {
    let dir = tempfile::tempdir().expect("dir");
    let sshd = TestSshd::start();
    let inv = inventory(dir.path(), &sshd, "upgrade_nodes_serial=abc");
    let out = upgrade(&["check"], &inv);
    let all = out.output();
    assert_eq!(out.code, 2, "{out}");
    assert!(all.contains("hosts.ini:") && all.contains("serial `abc`"), "{all}");
}

#[test]
fn every_module_and_become_run_over_ssh() {
    let dir = tempfile::tempdir().expect("dir");
    let sshd = TestSshd::start();
    std::fs::write(dir.path().join("motd.j2"), "{{ inventory_hostname }} runs {{ greeting | upper }}\n").expect("j2");
    std::fs::write(dir.path().join("hello.sh"), "#!/bin/sh\necho \"script says $1\"\n").expect("script");
    let tasks = r#"
- command: echo one
  register: c
- shell: echo two | tr a-z A-Z
  register: s
- script: hello.sh world
  register: sc
- copy:
    content: "copied\n"
    dest: "{{ host_root }}/copied.txt"
    mode: "0600"
  register: cp
- copy:
    content: "copied\n"
    dest: "{{ host_root }}/copied.txt"
    mode: "0600"
  register: cp_again
- template:
    src: motd.j2
    dest: "{{ host_root }}/motd"
- fetch:
    src: "{{ host_root }}/motd"
    dest: "fetched/"
- stat:
    path: "{{ host_root }}/copied.txt"
  register: st
- wait_for:
    path: "{{ host_root }}/motd"
    timeout: 5
- set_fact:
    summary: "{{ c.stdout }} {{ s.stdout }} {{ sc.stdout | trim }}"
- pause:
    seconds: 1
- fail:
    msg: expected
  ignore_errors: true
- assert:
    that:
      - cp is changed
      - cp_again is not changed
      - st.stat.exists and st.stat.mode == '0600'
      - summary == 'one TWO script says world'
- command: id -un
  become: true
  become_user: nobody
  register: who
- assert:
    that: who.stdout == 'nobody'
- debug:
    msg: "all modules ok on {{ inventory_hostname }}"
"#;
    std::fs::write(dir.path().join("all.yml"), tasks).expect("tasks");
    let inv = inventory(dir.path(), &sshd, "greeting=hello");
    let out = Scenario::in_dir(dir.path()).args(["run-tasks", "all.yml", "--inventory"]).arg(&inv).run();
    let all = out.output();
    assert_eq!(out.code, 0, "{out}");
    assert!(all.contains("all modules ok on h1") && all.contains("all modules ok on h2"), "{all}");
    assert_eq!(
        std::fs::read_to_string(sshd.host_root("h2").join("motd")).expect("templated over ssh"),
        "h2 runs HELLO\n"
    );
    let fetched = dir.path().join("fetched/h1").join(sshd.host_root("h1").strip_prefix("/").expect("abs")).join("motd");
    assert_eq!(std::fs::read_to_string(&fetched).expect("fetched over ssh"), "h1 runs HELLO\n");
}

#[test]
fn unsafe_inventory_values_are_never_templated_as_in_ansible() {
    let dir = tempfile::tempdir().expect("dir");
    std::fs::write(
        dir.path().join("hosts.yml"),
        "all:\n  hosts:\n    h1:\n      ansible_connection: local\n      pw: !unsafe 'p{{x}}%{% if %}'\n      \
         multi: !unsafe \"\\n{{ a }}\\n\"\n      lst: !unsafe ['{{ a }}', 'plain']\n      uses_pw: \"pw is {{ pw }}\"\n",
    )
    .expect("inventory");
    // What each value renders to goes into a file, compared below: a condition would template its own literals.
    std::fs::write(
        dir.path().join("t.yml"),
        "- copy:\n    content: \"{{ item.1 }}\"\n    dest: \"out-{{ item.0 }}\"\n  loop:\n    \
         - [pw, \"{{ pw }}\"]\n    - [multi, \"{{ multi }}\"]\n    - [lst, \"{{ lst | to_json }}\"]\n    \
         - [uses, \"{{ uses_pw }}\"]\n    - [hv, \"{{ hostvars['h1'].pw }}\"]\n",
    )
    .expect("tasks");
    let out = Scenario::in_dir(dir.path()).args(["run-tasks", "t.yml", "--inventory", "hosts.yml"]).run();
    assert_eq!(out.code, 0, "{out}");
    let read = |name: &str| std::fs::read_to_string(dir.path().join(format!("out-{name}"))).expect("rendered file");
    assert_eq!(read("pw"), "p{{x}}%{% if %}");
    assert_eq!(read("multi"), "\n{{ a }}\n");
    assert_eq!(read("lst"), r#"["{{ a }}", "plain"]"#);
    assert_eq!(read("uses"), "pw is p{{x}}%{% if %}");
    assert_eq!(read("hv"), "p{{x}}%{% if %}");
}
