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

/// A one-route HTTP server on loopback, as a node's health endpoint: `/healthz` answers JSON, after `not_before`
/// requests have been answered 503 (so `until` has something to wait for).
fn health_endpoint(not_before: usize) -> u16 {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("addr").port();
    std::thread::spawn(move || {
        for (n, stream) in listener.incoming().enumerate() {
            let Ok(mut stream) = stream else { continue };
            let mut buf = [0u8; 4096];
            let _ = stream.read(&mut buf);
            let (status, body) =
                if n < not_before { ("503 Service Unavailable", "{}") } else { ("200 OK", "{\"ok\": true}") };
            let _ = write!(
                stream,
                "HTTP/1.1 {status}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    port
}

#[test]
fn a_hook_with_a_role_service_file_uri_and_handlers_runs_over_ssh() {
    // The hosts run no systemd: systemctl is scripts/compare's stand-in, which keeps each host's units in files
    // under its root and logs what it was asked to do. Everything else is real: sshd, curl, the file system.
    let dir = tempfile::tempdir().expect("dir");
    let sshd = TestSshd::start();
    let port = health_endpoint(2);
    let stand_in = repo("scripts/compare/files/bin");
    let role = dir.path().join("roles/kubelet-config");
    std::fs::create_dir_all(role.join("tasks")).expect("role");
    std::fs::create_dir_all(role.join("handlers")).expect("role");
    std::fs::create_dir_all(role.join("defaults")).expect("role");
    std::fs::write(role.join("defaults/main.yml"), "max_pods: 110\n").expect("defaults");
    std::fs::write(
        role.join("tasks/main.yml"),
        "- name: the drop-in directory\n  file:\n    path: \"{{ host_root }}/kubelet.d\"\n    state: directory\n    mode: \"0750\"\n\
         - name: the setting\n  copy:\n    content: \"maxPods: {{ max_pods }}\\n\"\n    dest: \"{{ host_root }}/kubelet.d/pods.yaml\"\n  notify: restart kubelet\n",
    )
    .expect("tasks");
    // A handler does not inherit the notifying task's block (as in Ansible): it names the stand-in itself.
    std::fs::write(
        role.join("handlers/main.yml"),
        format!(
            "- name: restart kubelet\n  service:\n    name: kubelet\n    state: restarted\n  environment:\n    PATH: \"{}:/usr/bin:/bin\"\n    FAKE_SYSTEMD: \"{{{{ host_root }}}}/systemd\"\n",
            stand_in.display()
        ),
    )
    .expect("handlers");
    let hook = dir.path().join("maintenance.yml");
    std::fs::write(
        &hook,
        format!(
            "- environment:\n    PATH: \"{bin}:/usr/sbin:/usr/bin:/sbin:/bin\"\n    FAKE_SYSTEMD: \"{{{{ host_root }}}}/systemd\"\n  block:\n\
             \x20   - name: the unit the stand-in knows\n      shell: mkdir -p {{{{ host_root }}}}/systemd/units && echo active > {{{{ host_root }}}}/systemd/units/kubelet\n\
             \x20   - name: configure the kubelet\n      include_role:\n        name: kubelet-config\n      vars:\n        max_pods: 250\n\
             \x20   - meta: flush_handlers\n\
             \x20   - name: the kubelet is healthy again\n      uri:\n        url: http://127.0.0.1:{port}/healthz\n      register: health\n      until: health.status == 200 and health.json.ok\n      retries: 5\n      delay: 0\n\
             \x20   - name: it stays enabled\n      service:\n        name: kubelet\n        enabled: true\n",
            bin = stand_in.display()
        ),
    )
    .expect("hook");
    let inv = inventory(dir.path(), &sshd, "upgrade_node_pre_hook=maintenance.yml");
    let out = upgrade(&["check"], &inv);
    assert_eq!(out.code, 0, "check accepts the hook, its role and its handlers: {out}");
    let out = upgrade(&["run-tasks", hook.to_str().expect("utf-8"), "--limit", "h2"], &inv);
    assert_eq!(out.code, 0, "{out}");
    let root = sshd.host_root("h2");
    assert_eq!(std::fs::read_to_string(root.join("kubelet.d/pods.yaml")).expect("written"), "maxPods: 250\n");
    let log = std::fs::read_to_string(root.join("systemd/log")).expect("systemctl was asked");
    assert_eq!(log, "restart kubelet\nenable kubelet\n", "the handler ran once, at the flush, before the rest");
    // Run again: nothing changes, so nothing is notified and the kubelet is not restarted.
    let out = upgrade(&["run-tasks", hook.to_str().expect("utf-8"), "--limit", "h2"], &inv);
    assert_eq!(out.code, 0, "{out}");
    let log = std::fs::read_to_string(root.join("systemd/log")).expect("log");
    assert_eq!(log, "restart kubelet\nenable kubelet\n", "an unchanged file notifies nothing: {out}");
}
