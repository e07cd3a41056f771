//! The task engine on `ansible_connection: local` hosts: every module and key, Ansible's result fields and control
//! flow, and errors that name the file and line.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{Value, json};
use upgrade::error::Location;
use upgrade::events::{Event, EventLog, TaskStatus};
use upgrade::inventory::{Host, Inventory, Origin, Var, Vars};
use upgrade::tasks::connect::ConnectOptions;
use upgrade::tasks::engine::{EngineOptions, HostOutcome};
use upgrade::tasks::model::load_task_file;
use upgrade::tasks::{check_task_file, check_task_file_with_notes, hook_files, run_tasks};

/// A scratch directory with an inventory of local hosts, each with its own `host_dir`.
struct Scenario {
    dir: tempfile::TempDir,
    inventory: Inventory,
    extra: Vars,
    options: EngineOptions,
}

fn var(value: Value) -> Var {
    Var { value, origin: Origin::Default }
}

impl Scenario {
    fn new(hosts: &[&str]) -> Scenario {
        let dir = tempfile::tempdir().expect("temp dir");
        let mut inventory = Inventory::new(dir.path().join("hosts"), dir.path().to_path_buf());
        for name in hosts {
            let host_dir = dir.path().join(name);
            std::fs::create_dir_all(&host_dir).expect("host dir");
            let mut host = Host::new(name, Location::new(dir.path().join("hosts"), 1, 1));
            host.vars.insert("ansible_connection".into(), var(json!("local")));
            host.vars.insert("host_dir".into(), var(json!(host_dir.display().to_string())));
            inventory.hosts.insert(name.to_string(), host);
        }
        inventory.refresh();
        Scenario { dir, inventory, extra: Vars::new(), options: EngineOptions::default() }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    fn host_dir(&self, host: &str) -> PathBuf {
        self.path().join(host)
    }

    fn write(&self, name: &str, text: &str) -> PathBuf {
        let path = self.path().join(name);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).expect("dir");
        }
        std::fs::write(&path, text).expect("write");
        path
    }

    fn set_host_var(&mut self, host: &str, name: &str, value: Value) {
        if let Some(h) = self.inventory.hosts.get_mut(host) {
            h.vars.insert(name.into(), var(value));
        }
    }

    /// Runs a task file on every host; returns the events and each host's outcome.
    fn run(&self, tasks: &str) -> Run {
        let file = self.write("hook.yml", tasks);
        self.run_file(&file)
    }

    fn run_file(&self, file: &Path) -> Run {
        let tasks = load_task_file(file).unwrap_or_else(|e| panic!("{e}"));
        let hosts: Vec<String> = self.inventory.hosts.keys().cloned().collect();
        let log = EventLog::new();
        let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("runtime");
        let outcomes = runtime.block_on(run_tasks(
            &self.inventory,
            &self.extra,
            &hosts,
            &tasks,
            20,
            self.options.clone(),
            ConnectOptions::default(),
            log.clone(),
        ));
        Run { log, outcomes }
    }
}

struct Run {
    log: Arc<EventLog>,
    outcomes: Vec<(String, HostOutcome)>,
}

impl Run {
    fn outcome(&self, host: &str) -> &HostOutcome {
        &self.outcomes.iter().find(|(h, _)| h == host).expect("host ran").1
    }
    /// A registered variable or fact a host ended with.
    fn fact(&self, host: &str, name: &str) -> Value {
        self.outcome(host).facts.get(name).map(|v| (**v).clone()).unwrap_or(Value::Null)
    }
    fn statuses(&self, host: &str) -> Vec<(String, TaskStatus)> {
        self.log.results(host).into_iter().map(|(n, s, _)| (n, s)).collect()
    }
    fn result(&self, host: &str, task: &str) -> Value {
        self.log.results(host).into_iter().find(|(n, _, _)| n == task).map(|(_, _, r)| r).unwrap_or(Value::Null)
    }
}

#[test]
fn command_and_shell_give_ansibles_result_fields() {
    let s = Scenario::new(&["h1"]);
    let run = s.run(
        r#"
- name: command
  command: printf 'a\nb\n'
  register: c
- name: shell
  shell: echo out; echo err >&2; exit 3
  register: sh
  ignore_errors: true
- name: chdir and stdin
  command: cat
  args:
    chdir: "{{ host_dir }}"
    stdin: hello
  register: cat
- name: environment
  shell: echo "$GREETING from $PWD"
  args:
    chdir: /
  environment:
    GREETING: hi there
  register: env
"#,
    );
    let c = run.fact("h1", "c");
    assert_eq!(c["stdout"], "a\nb");
    assert_eq!(c["stdout_lines"], json!(["a", "b"]));
    assert_eq!(c["rc"], 0);
    assert_eq!(c["cmd"], json!(["printf", "a\\nb\\n"]));
    assert_eq!((c["changed"].clone(), c["failed"].clone(), c["msg"].clone()), (json!(true), json!(false), json!("")));
    for key in ["start", "end", "delta", "stderr", "stderr_lines"] {
        assert!(c.get(key).is_some(), "{key} missing from {c}");
    }
    let sh = run.fact("h1", "sh");
    assert_eq!((sh["rc"].clone(), sh["stdout"].clone(), sh["stderr"].clone()), (json!(3), json!("out"), json!("err")));
    assert_eq!((sh["failed"].clone(), sh["msg"].clone()), (json!(true), json!("non-zero return code")));
    assert_eq!(sh["cmd"], "echo out; echo err >&2; exit 3");
    assert_eq!(run.fact("h1", "cat")["stdout"], "hello");
    assert_eq!(run.fact("h1", "env")["stdout"], "hi there from /");
    assert!(!run.outcome("h1").failed);
}

#[test]
fn creates_and_removes_skip_the_command() {
    let s = Scenario::new(&["h1"]);
    let run = s.run(
        r#"
- command: touch {{ host_dir }}/made creates={{ host_dir }}/made
  register: first
- command: touch {{ host_dir }}/made creates={{ host_dir }}/made
  register: second
- command: rm {{ host_dir }}/absent removes={{ host_dir }}/absent
  register: third
"#,
    );
    assert_eq!(run.fact("h1", "first")["changed"], true);
    let second = run.fact("h1", "second");
    assert_eq!(second["changed"], false);
    assert_eq!(second["rc"], 0);
    let made = s.host_dir("h1").join("made").display().to_string();
    assert_eq!(second["msg"], format!("Did not run command since '{made}' exists"));
    assert_eq!(second["stdout"], format!("skipped, since {made} exists"));
    assert!(run.fact("h1", "third")["msg"].as_str().unwrap_or_default().contains("does not exist"));
}

#[test]
fn until_retries_and_counts_attempts() {
    let s = Scenario::new(&["h1"]);
    let run = s.run(
        r#"
- name: count up to three
  shell: n=$(cat {{ host_dir }}/n 2>/dev/null || echo 0); n=$((n+1)); echo $n > {{ host_dir }}/n; echo $n
  register: counter
  until: counter.stdout == "3"
  retries: 5
  delay: 0
- name: never
  command: "false"
  register: never
  until: never.rc == 0
  retries: 2
  delay: 0
  ignore_errors: true
"#,
    );
    let counter = run.fact("h1", "counter");
    assert_eq!((counter["attempts"].clone(), counter["stdout"].clone()), (json!(3), json!("3")));
    assert_eq!(counter["failed"], false);
    let never = run.fact("h1", "never");
    assert_eq!((never["failed"].clone(), never["attempts"].clone()), (json!(true), json!(2)));
    let retries = run.log.events().iter().filter(|e| matches!(e, Event::TaskRetry { .. })).count();
    assert_eq!(retries, 2 + 2, "two retries before success, two for the failing task");
}

#[test]
fn a_retried_command_with_an_undefined_variable_fails_naming_the_variable() {
    // openshift-ansible's etcd health check: ansible-core fails the task at once with
    // "'etcdctlv2' is undefined"; it must not run `until` over a result that has no `rc`.
    let s = Scenario::new(&["h1"]);
    let run = s.run(
        "- name: health\n  command: \"{{ etcdctlv2 }} cluster-health\"\n  register: r\n  until: r.rc == 0\n  retries: 3\n  delay: 0\n",
    );
    let msg = run.result("h1", "health")["msg"].as_str().unwrap_or_default().to_string();
    assert!(msg.contains("'etcdctlv2' is undefined"), "{msg}");
    assert!(!msg.contains("has no attribute"), "{msg}");
    let retries = run.log.events().iter().filter(|e| matches!(e, Event::TaskRetry { .. })).count();
    assert_eq!(retries, 0, "arguments that cannot be rendered are not retried");
}

#[test]
fn file_makes_directories_files_links_and_removes_them_reporting_changed_as_ansible() {
    let s = Scenario::new(&["h1"]);
    let run = s.run(
        r#"
- name: dir
  file: {path: "{{ host_dir }}/a/b", state: directory, mode: "0750"}
  register: dir
- name: dir again
  file: {path: "{{ host_dir }}/a/b", state: directory, mode: "0750"}
  register: dir_again
- name: touch
  file: {path: "{{ host_dir }}/a/b/f", state: touch}
- name: mode
  file: {path: "{{ host_dir }}/a/b/f", mode: "0600"}
  register: mode
- name: link
  file: {src: "{{ host_dir }}/a/b/f", dest: "{{ host_dir }}/l", state: link}
  register: link
- name: missing
  file: {path: "{{ host_dir }}/none", state: file}
  register: missing
  ignore_errors: true
- name: absent
  file: {path: "{{ host_dir }}/a", state: absent}
  register: absent
"#,
    );
    assert_eq!(
        (run.fact("h1", "dir")["changed"].clone(), run.fact("h1", "dir")["mode"].clone()),
        (json!(true), json!("0750"))
    );
    assert_eq!(run.fact("h1", "dir_again")["changed"], false);
    assert_eq!(
        (run.fact("h1", "mode")["changed"].clone(), run.fact("h1", "mode")["mode"].clone()),
        (json!(true), json!("0600"))
    );
    assert_eq!(run.fact("h1", "link")["state"], "link");
    assert_eq!(std::fs::read_link(s.host_dir("h1").join("l")).expect("a symlink"), s.host_dir("h1").join("a/b/f"));
    let missing = run.fact("h1", "missing");
    assert_eq!(
        missing["msg"],
        format!("file ({}) is absent, cannot continue", s.host_dir("h1").join("none").display())
    );
    assert_eq!(
        (run.fact("h1", "absent")["changed"].clone(), run.fact("h1", "absent")["state"].clone()),
        (json!(true), json!("absent"))
    );
    assert!(!s.host_dir("h1").join("a").exists());
}

#[test]
fn service_and_systemd_start_enable_and_restart_through_systemctl() {
    // The host runs no systemd: scripts/compare's stand-in systemctl keeps the units' state in files.
    let s = Scenario::new(&["h1"]);
    let bin = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/compare/files/bin");
    std::fs::create_dir_all(s.host_dir("h1").join("systemd/units")).expect("dir");
    std::fs::write(s.host_dir("h1").join("systemd/units/kubelet"), "inactive\n").expect("unit");
    let run = s.run(&format!(
        r#"
- environment:
    PATH: "{}:/usr/sbin:/usr/bin:/sbin:/bin"
    FAKE_SYSTEMD: "{{{{ host_dir }}}}/systemd"
  block:
    - name: start
      service: {{name: kubelet, state: started, enabled: true}}
      register: start
    - name: again
      service: {{name: kubelet, state: started, enabled: true}}
      register: again
    - name: restart
      systemd: {{name: kubelet, state: restarted, daemon_reload: true}}
      register: restart
    - name: missing
      systemd: {{name: nothing, state: started}}
      register: missing
      ignore_errors: true
"#,
        bin.display()
    ));
    let start = run.fact("h1", "start");
    assert_eq!(
        (start["changed"].clone(), start["enabled"].clone(), start["state"].clone()),
        (json!(true), json!(true), json!("started"))
    );
    assert_eq!(start["status"]["ActiveState"], "inactive", "status is the unit as it was found, as in Ansible");
    assert_eq!(run.fact("h1", "again")["changed"], false);
    assert_eq!(run.fact("h1", "restart")["changed"], true);
    assert_eq!(run.fact("h1", "missing")["msg"], "Could not find the requested service nothing: host");
    let log = std::fs::read_to_string(s.host_dir("h1").join("systemd/log")).expect("log");
    assert_eq!(log, "enable kubelet\nstart kubelet\ndaemon-reload\nrestart kubelet\n");
}

#[test]
fn notified_handlers_run_once_per_host_in_definition_order_at_the_end_of_the_file() {
    let s = Scenario::new(&["h1"]);
    s.write(
        "role/handlers/main.yml",
        "- name: restart a\n  shell: echo a >> {{ host_dir }}/log\n\
         - name: restart b\n  shell: echo b >> {{ host_dir }}/log\n  listen: restart things\n",
    );
    let file = s.write(
        "role/tasks/main.yml",
        "- name: one\n  command: \"true\"\n  notify: restart things\n\
         - name: two\n  command: \"true\"\n  notify: [restart a, restart things]\n\
         - name: three\n  shell: echo tasks done >> {{ host_dir }}/log\n",
    );
    assert!(check_task_file(&file).is_empty(), "{:?}", check_task_file(&file));
    let run = s.run_file(&file);
    assert!(!run.outcome("h1").failed);
    let log = std::fs::read_to_string(s.host_dir("h1").join("log")).expect("log");
    assert_eq!(log, "tasks done\na\nb\n", "each handler once, after the tasks, in the order they are defined");

    // A notify that names no handler is refused by check with Ansible's message.
    let bad = s.write("role/tasks/bad.yml", "- name: x\n  command: \"true\"\n  notify: restart nothing\n");
    let errors: Vec<String> = check_task_file(&bad).iter().map(|e| e.to_string()).collect();
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(errors[0].contains("The requested handler 'restart nothing' was not found"), "{}", errors[0]);
}

#[test]
fn roles_are_found_beside_the_hook_with_their_defaults_vars_and_tasks_from() {
    let mut s = Scenario::new(&["h1"]);
    s.set_host_var("h1", "colour", json!("inventory-blue"));
    s.write("roles/paint/defaults/main.yml", "colour: default-red\nshade: light\n");
    s.write("roles/paint/vars/main.yml", "brush: role-brush\n");
    s.write("roles/paint/tasks/main.yml", "- set_fact:\n    painted: \"{{ colour }} {{ shade }} {{ brush }}\"\n");
    s.write("roles/paint/tasks/other.yml", "- set_fact:\n    other: \"{{ shade }}\"\n");
    let hook = s.write(
        "hook.yml",
        "- import_role:\n    name: paint\n- include_role:\n    name: paint\n    tasks_from: other\n  vars:\n    shade: dark\n",
    );
    assert!(check_task_file(&hook).is_empty(), "{:?}", check_task_file(&hook));
    let run = s.run_file(&hook);
    assert_eq!(
        run.fact("h1", "painted"),
        json!("inventory-blue light role-brush"),
        "defaults rank below the inventory"
    );
    assert_eq!(run.fact("h1", "other"), json!("dark"), "the task's vars rank above the role's defaults");

    let missing = s.write("missing.yml", "- include_role:\n    name: nowhere\n");
    let errors: Vec<String> = check_task_file(&missing).iter().map(|e| e.to_string()).collect();
    assert!(errors.len() == 1 && errors[0].contains("the role 'nowhere' was not found"), "{errors:?}");
    // A roles directory named by upgrade_roles_path (as `upgrade check` passes it) is searched too.
    s.write("elsewhere/nowhere/tasks/main.yml", "- debug: msg=found\n");
    assert!(check_task_file_with_notes(&missing, &[s.path().join("elsewhere")], &Default::default()).errors.is_empty());
}

/// A role's `meta/main.yml` dependencies run before it, with their own defaults (which the role sees too) and the
/// params meta gives them; one already run on the host is not run again unless its meta allows duplicates or it is
/// given other params, as in ansible-core 2.19 (scripts/compare/role_dependencies.yml). `upgrade check` checks the
/// dependencies' tasks too, and ends on roles that depend on each other.
#[test]
fn role_dependencies_run_first_once_unless_duplicates_are_allowed_or_params_differ() {
    let s = Scenario::new(&["h1"]);
    let note = |what: &str| format!("- set_fact:\n    order: \"{{{{ (order | default([])) + [{what}] }}}}\"\n");
    s.write("roles/base/defaults/main.yml", "base_word: from-base-defaults\n");
    s.write("roles/base/tasks/main.yml", &note("'base ' ~ base_word"));
    s.write("roles/twice/meta/main.yml", "allow_duplicates: true\n");
    s.write("roles/twice/tasks/main.yml", &note("'twice'"));
    for user in ["uses_a", "uses_b"] {
        s.write(&format!("roles/{user}/meta/main.yml"), "dependencies:\n  - base\n");
        s.write(&format!("roles/{user}/tasks/main.yml"), &note(&format!("'{user} ' ~ base_word")));
    }
    s.write("roles/uses_twice/meta/main.yml", "dependencies:\n  - role: twice\n  - role: twice\n");
    s.write("roles/uses_twice/tasks/main.yml", &note("'uses_twice'"));
    s.write("roles/custom/meta/main.yml", "dependencies:\n  - role: base\n    base_word: from-params\n  - uses_a\n");
    s.write("roles/custom/tasks/main.yml", &note("'custom'"));
    let hook = s.write(
        "hook.yml",
        "- include_role:\n    name: uses_a\n- import_role:\n    name: uses_b\n- include_role:\n    name: uses_twice\n\
         - include_role:\n    name: custom\n",
    );
    assert!(check_task_file(&hook).is_empty(), "{:?}", check_task_file(&hook));
    assert_eq!(
        s.run_file(&hook).fact("h1", "order"),
        json!([
            "base from-base-defaults",
            "uses_a from-base-defaults",
            "uses_b from-base-defaults",
            "twice",
            "twice",
            "uses_twice",
            "base from-params",
            "uses_a from-base-defaults",
            "custom"
        ])
    );

    // check reads the dependencies' tasks (here a notify naming no handler) and ends on a dependency cycle.
    s.write("roles/broken/tasks/main.yml", "- command: \"true\"\n  notify: restart nothing\n");
    s.write("roles/ping/meta/main.yml", "dependencies:\n  - pong\n  - broken\n");
    s.write("roles/ping/tasks/main.yml", &note("'ping'"));
    s.write("roles/pong/meta/main.yml", "dependencies:\n  - ping\n");
    s.write("roles/pong/tasks/main.yml", &note("'pong'"));
    let cyclic = s.write("cyclic.yml", "- include_role:\n    name: ping\n");
    let errors: Vec<String> = check_task_file(&cyclic).iter().map(|e| e.to_string()).collect();
    assert_eq!(errors.len(), 2, "{errors:?}");
    assert!(errors.iter().any(|e| e.contains("the dependency 'ping' depends on itself")), "{errors:?}");
    assert!(
        errors.iter().any(|e| e.contains("roles/broken/tasks/main.yml") && e.contains("restart nothing")),
        "{errors:?}"
    );
}

/// Roles are found where the playbook that would use the hook finds them: kubespray's
/// `roles/remove-node/pre-remove` imports `remove_node/pre_remove` of the same roles tree, and openshift-ansible's
/// `playbooks/.../docker/tasks/upgrade.yml` imports `container_runtime` from `docker/roles` beside its `tasks/`.
#[test]
fn roles_are_found_in_the_roles_tree_and_beside_a_playbooks_tasks_directory() {
    let s = Scenario::new(&["h1"]);
    s.write("ks/roles/remove_node/pre_remove/tasks/main.yml", "- set_fact:\n    drained: yes\n");
    let compat =
        s.write("ks/roles/remove-node/pre-remove/tasks/main.yml", "- import_role:\n    name: remove_node/pre_remove\n");
    assert!(check_task_file(&compat).is_empty(), "{:?}", check_task_file(&compat));
    assert_eq!(s.run_file(&compat).fact("h1", "drained"), json!(true));

    s.write("osa/docker/roles/container_runtime/tasks/docker_restart.yml", "- set_fact:\n    restarted: yes\n");
    let upgrade = s.write(
        "osa/docker/tasks/upgrade.yml",
        "- import_role:\n    name: container_runtime\n    tasks_from: docker_restart.yml\n",
    );
    assert!(check_task_file(&upgrade).is_empty(), "{:?}", check_task_file(&upgrade));
    assert_eq!(s.run_file(&upgrade).fact("h1", "restarted"), json!(true));
}

/// `with_fileglob` and `with_first_found` loop over the lookup's answer (k3s-ansible's airgap role); terms that use
/// an undefined variable skip the task when its `when` does, as ansible-core asks `when` before failing on them.
#[test]
fn with_fileglob_and_with_first_found_loop_over_what_the_lookup_finds() {
    let s = Scenario::new(&["h1"]);
    let dir = s.path().join("airgap");
    std::fs::create_dir_all(&dir).expect("mkdir");
    for f in ["k3s-amd64", "images.tar", "more.tar"] {
        std::fs::write(dir.join(f), "").expect("write");
    }
    let hook = s.write(
        "airgap.yml",
        r#"- name: images
  debug:
    msg: "{{ item | basename }}"
  with_fileglob:
    - "{{ airgap_dir }}/*.tar"
    - "{{ airgap_dir }}/*.tar.zst"
  register: images
- name: binary
  debug:
    msg: "{{ item | basename }}"
  with_first_found:
    - files:
        - "{{ airgap_dir }}/k3s-arm64"
        - "{{ airgap_dir }}/k3s-amd64"
      skip: true
  register: binary
- name: not airgapped
  debug:
    msg: "{{ item }}"
  with_fileglob: "{{ no_such_dir }}/*.tar"
  when: no_such_dir is defined
  register: skipped_glob
"#,
    );
    assert!(check_task_file(&hook).is_empty(), "{:?}", check_task_file(&hook));
    let run = s.run(&format!("- set_fact:\n    airgap_dir: {}\n- import_tasks: {}\n", dir.display(), hook.display()));
    let msgs = |name: &str| -> Vec<Value> {
        run.fact("h1", name)["results"].as_array().expect("results").iter().map(|r| r["msg"].clone()).collect()
    };
    assert_eq!(msgs("images"), [json!("images.tar"), json!("more.tar")]);
    assert_eq!(msgs("binary"), [json!("k3s-amd64")]);
    assert_eq!(run.fact("h1", "skipped_glob")["skipped"], json!(true), "{}", run.fact("h1", "skipped_glob"));
}

#[test]
fn an_async_job_left_running_is_followed_with_async_status() {
    let s = Scenario::new(&["h1"]);
    let run = s.run(
        r#"
- name: start
  shell: sleep 1; echo done
  async: 30
  poll: 0
  register: job
- name: follow
  async_status: {jid: "{{ job.ansible_job_id }}"}
  register: status
  until: status.finished
  retries: 10
  delay: 1
- name: waited for
  command: echo waited
  async: 10
  poll: 1
  register: waited
"#,
    );
    let job = run.fact("h1", "job");
    assert_eq!((job["finished"].clone(), job["started"].clone()), (json!(false), json!(true)));
    let status = run.fact("h1", "status");
    assert_eq!((status["finished"].clone(), status["stdout"].clone()), (json!(true), json!("done")));
    assert!(status["attempts"].as_i64().unwrap_or(0) >= 1);
    assert_eq!(run.fact("h1", "waited")["stdout"], "waited");
}

#[test]
fn lineinfile_replaces_adds_and_removes_lines_as_ansible() {
    let s = Scenario::new(&["h1"]);
    std::fs::write(s.host_dir("h1").join("f.conf"), "a=1\n[s]\nkey=2\n").expect("file");
    let run = s.run(
        r#"
- name: replace
  lineinfile: {path: "{{ host_dir }}/f.conf", regexp: '^key=(\d)$', line: 'key=\1\1', backrefs: true}
  register: replace
- name: after
  lineinfile: {path: "{{ host_dir }}/f.conf", line: 'b=2', insertafter: '^\[s\]'}
- name: again
  lineinfile: {path: "{{ host_dir }}/f.conf", line: 'b=2', insertafter: '^\[s\]'}
  register: again
- name: remove
  lineinfile: {path: "{{ host_dir }}/f.conf", regexp: '^a=', state: absent}
  register: remove
"#,
    );
    assert_eq!(run.fact("h1", "replace")["msg"], "line replaced");
    assert_eq!(run.fact("h1", "again")["changed"], false);
    assert_eq!(run.fact("h1", "remove")["msg"], "1 line(s) removed");
    let text = std::fs::read_to_string(s.host_dir("h1").join("f.conf")).expect("file");
    assert_eq!(text, "[s]\nb=2\nkey=22\n");
}

#[test]
fn blockinfile_keeps_one_block_between_its_markers() {
    let s = Scenario::new(&["h1"]);
    std::fs::write(s.host_dir("h1").join("f.conf"), "a=1\n").expect("file");
    let run = s.run(
        r#"
- name: add
  blockinfile: {path: "{{ host_dir }}/f.conf", block: "b=2"}
  register: add
- name: replace
  blockinfile: {path: "{{ host_dir }}/f.conf", block: "b=3"}
- name: again
  blockinfile: {path: "{{ host_dir }}/f.conf", block: "b=3"}
  register: again
"#,
    );
    assert_eq!(run.fact("h1", "add")["msg"], "Block inserted");
    assert_eq!(run.fact("h1", "again")["changed"], false);
    let text = std::fs::read_to_string(s.host_dir("h1").join("f.conf")).expect("file");
    assert_eq!(text, "a=1\n# BEGIN ANSIBLE MANAGED BLOCK\nb=3\n# END ANSIBLE MANAGED BLOCK\n");
}

#[test]
fn commands_removed_warn_argument_is_accepted_ignored_and_noted() {
    let s = Scenario::new(&["h1"]);
    let file = s.write(
        "hook.yml",
        "- name: old style\n  command: echo hi warn=false\n  register: a\n- name: args\n  shell: echo there\n  args:\n    warn: no\n",
    );
    let checked = check_task_file_with_notes(&file, &[], &Default::default());
    assert!(checked.errors.is_empty(), "{:?}", checked.errors);
    assert_eq!(checked.notes.len(), 2, "{:?}", checked.notes);
    assert!(
        checked.notes[0].contains("hook.yml:1") && checked.notes[0].contains("`warn` was removed"),
        "{:?}",
        checked.notes
    );
    let run = s.run_file(&file);
    assert_eq!(run.fact("h1", "a")["stdout"], "hi", "the argument is not passed to the command");
}

#[test]
fn check_calls_a_keyword_a_keyword_a_module_a_module_and_gives_the_hint_once() {
    let s = Scenario::new(&["h1"]);
    let file = s.write(
        "hook.yml",
        "- name: restart\n  command: systemctl restart kubelet\n  diff: false\n\
         - name: wait\n  command: sleep 1\n  debugger: on_failed\n\
         - name: scale\n  oc_obj: {name: x}\n\
         - import_tasks: missing.yml\n",
    );
    let errors: Vec<String> = check_task_file(&file).iter().map(|e| e.to_string()).collect();
    let joined = errors.join("\n");
    assert!(joined.contains("the keyword `diff` is not supported"), "{joined}");
    assert!(joined.contains("the keyword `debugger` is not supported"), "{joined}");
    assert!(joined.contains("unknown module `oc_obj`"), "{joined}");
    assert!(joined.contains("task \"import_tasks missing.yml\""), "named as written: {joined}");
    assert_eq!(joined.matches("supported modules:").count(), 1, "the list is given once per file: {joined}");
}

#[test]
fn loops_collect_results_and_fail_when_one_item_fails() {
    let s = Scenario::new(&["h1"]);
    let run = s.run(
        r#"
- name: loop
  shell: "test {{ item }} -lt 3"
  loop: [1, 2, 3]
  register: looped
  ignore_errors: yes
- name: with_items and loop_var
  debug:
    msg: "{{ host }}"
  with_items: [[a, b], c]
  loop_control:
    loop_var: host
  register: names
"#,
    );
    let looped = run.fact("h1", "looped");
    assert_eq!(looped["msg"], "One or more items failed");
    assert_eq!(looped["failed"], true);
    let results = looped["results"].as_array().expect("results");
    assert_eq!(results.len(), 3);
    assert_eq!(results[0]["item"], 1);
    assert_eq!(results[0]["ansible_loop_var"], "item");
    assert_eq!(results[2]["rc"], 1);
    assert_eq!(results[2]["failed"], true);
    let names = run.fact("h1", "names");
    assert_eq!(names["msg"], "All items completed");
    let msgs: Vec<Value> = names["results"].as_array().expect("results").iter().map(|r| r["msg"].clone()).collect();
    assert_eq!(msgs, [json!("a"), json!("b"), json!("c")]);
    assert_eq!(run.statuses("h1")[0].1, TaskStatus::Failed);
}

#[test]
fn failed_when_changed_when_and_ignore_errors() {
    let s = Scenario::new(&["h1"]);
    let run = s.run(
        r#"
- name: grep finds nothing, which is fine
  shell: grep -q nothing /dev/null
  register: g
  failed_when: g.rc not in [0, 1]
  changed_when: false
- name: output says failure
  command: echo FAILED
  register: o
  failed_when: "'FAILED' in o.stdout"
  ignore_errors: true
- name: still runs
  debug:
    msg: "{{ o.failed_when_result }}"
"#,
    );
    let g = run.fact("h1", "g");
    assert_eq!((g["rc"].clone(), g["failed"].clone(), g["changed"].clone()), (json!(1), json!(false), json!(false)));
    assert_eq!(g["failed_when_result"], false);
    assert_eq!(run.fact("h1", "o")["failed"], true);
    let statuses = run.statuses("h1");
    assert_eq!(
        statuses.iter().map(|(_, s)| *s).collect::<Vec<_>>(),
        [TaskStatus::Ok, TaskStatus::Failed, TaskStatus::Ok]
    );
    assert_eq!(run.result("h1", "still runs")["msg"], true);
    assert!(!run.outcome("h1").failed);
}

#[test]
fn a_failure_stops_the_host_and_only_that_host() {
    let mut s = Scenario::new(&["good", "bad"]);
    s.set_host_var("bad", "broken", json!(true));
    let run = s.run(
        r#"
- name: fail on one host
  fail:
    msg: "{{ inventory_hostname }} is broken"
  when: broken | default(false)
- name: after
  debug:
    msg: continued
"#,
    );
    assert!(run.outcome("bad").failed);
    assert!(!run.outcome("good").failed);
    assert_eq!(run.result("bad", "fail on one host")["msg"], "bad is broken");
    assert_eq!(run.statuses("bad").len(), 1);
    assert_eq!(run.statuses("good").iter().map(|(_, s)| *s).collect::<Vec<_>>(), [TaskStatus::Skipped, TaskStatus::Ok]);
}

#[test]
fn rescue_and_always_run_in_order_with_the_failed_task() {
    let s = Scenario::new(&["h1"]);
    let run = s.run(
        r#"
- name: guarded
  block:
    - shell: echo block >> {{ host_dir }}/order
    - name: breaks
      command: "false"
    - shell: echo never >> {{ host_dir }}/order
  rescue:
    - shell: echo "rescue {{ ansible_failed_task.name }} {{ ansible_failed_result.rc }}" >> {{ host_dir }}/order
  always:
    - shell: echo always >> {{ host_dir }}/order
- name: after the block
  shell: echo after >> {{ host_dir }}/order
- block:
    - command: "false"
  always:
    - shell: echo always-again >> {{ host_dir }}/order
- shell: echo not-reached >> {{ host_dir }}/order
"#,
    );
    let order = std::fs::read_to_string(s.host_dir("h1").join("order")).expect("order file");
    assert_eq!(order, "block\nrescue breaks 1\nalways\nafter\nalways-again\n");
    assert!(run.outcome("h1").failed, "a failure without rescue fails the host even after always");
    let rescued = run.log.events().iter().any(|e| matches!(e, Event::TaskFinished { rescued: true, .. }));
    assert!(rescued);
}

#[test]
fn run_once_runs_on_the_first_host_and_shares_the_result() {
    let s = Scenario::new(&["h1", "h2", "h3"]);
    let shared = s.path().join("shared");
    let run = s.run(&format!(
        r#"
- name: once
  shell: echo "{{{{ inventory_hostname }}}}" >> {shared}; cat {shared} | wc -l
  register: once
  run_once: true
- name: everyone sees it
  debug:
    msg: "{{{{ once.stdout | trim }}}}"
"#,
        shared = shared.display()
    ));
    let lines = std::fs::read_to_string(&shared).expect("shared file");
    assert_eq!(lines.lines().count(), 1, "{lines}");
    for host in ["h1", "h2", "h3"] {
        assert_eq!(run.fact(host, "once")["stdout"].as_str().map(str::trim), Some("1"));
        assert_eq!(run.result(host, "everyone sees it")["msg"], "1");
    }
}

#[test]
fn set_fact_persists_and_skipped_results_are_registered() {
    let s = Scenario::new(&["h1"]);
    let run = s.run(
        r#"
- set_fact:
    greeting: hello
    count: "{{ 40 + 2 }}"
- set_fact: flag=yes
- name: skipped
  command: echo never
  when: greeting == "bye"
  register: skipped_one
- name: use them
  debug:
    msg: "{{ greeting }} {{ count }} {{ flag }} {{ skipped_one.skipped }}"
- name: debug var
  debug:
    var: count
- name: debug undefined var
  debug:
    var: nothing_here
"#,
    );
    let sk = run.fact("h1", "skipped_one");
    assert_eq!(
        sk,
        json!({"changed": false, "skipped": true, "skip_reason": "Conditional result was False", "false_condition": "greeting == \"bye\""})
    );
    assert_eq!(run.fact("h1", "count"), 42);
    assert_eq!(run.fact("h1", "flag"), "yes", "ansible-core 2.19 keeps k=v text as text");
    assert!(run.result("h1", "use them")["msg"].as_str().unwrap_or_default().starts_with("hello 42 "));
    assert_eq!(run.result("h1", "debug var")["count"], 42);
    // ansible-core 2.19 prints the template error in place of the value and warns.
    let undefined = run.result("h1", "debug undefined var");
    let shown = undefined["nothing_here"].as_str().unwrap_or_default();
    assert!(shown.starts_with("<< error 1 - ") && shown.contains("nothing_here"), "{undefined}");
    assert!(undefined["warnings"][0].as_str().is_some_and(|w| w.starts_with("Encountered 1 template error.")));
}

#[test]
fn delegate_to_localhost_works_for_a_host_we_cannot_reach() {
    let mut s = Scenario::new(&["remote"]);
    s.set_host_var("remote", "ansible_connection", json!("ssh"));
    // Nothing listens on port 1: the host itself cannot be reached.
    s.set_host_var("remote", "ansible_host", json!("127.0.0.1"));
    s.set_host_var("remote", "ansible_port", json!(1));
    let run = s.run(
        r#"
- name: on the controller
  command: echo "for {{ inventory_hostname }}"
  delegate_to: localhost
  register: local
- name: local_action form
  local_action: command echo local-action
  register: la
- name: on the host itself
  command: "true"
"#,
    );
    assert_eq!(run.fact("remote", "local")["stdout"], "for remote");
    assert_eq!(run.fact("remote", "la")["stdout"], "local-action");
    let last = run.statuses("remote").last().cloned().expect("a result");
    assert_eq!(last.1, TaskStatus::Unreachable);
    assert!(run.outcome("remote").unreachable);
    let msg = run.result("remote", "on the host itself")["msg"].as_str().unwrap_or_default().to_string();
    assert!(msg.contains("127.0.0.1") && msg.contains("unreachable"), "{msg}");
}

#[test]
fn files_copy_template_fetch_stat_script() {
    let s = Scenario::new(&["h1"]);
    s.write("templates/motd.j2", "host {{ inventory_hostname }} at {{ version }}\n");
    s.write("files/hello.sh", "#!/bin/sh\necho \"script says $1\"\n");
    let run = s.run(
        r#"
- copy:
    content: "one\n"
    dest: "{{ host_dir }}/c.txt"
    mode: 0600
  register: copy1
- copy:
    content: "one\n"
    dest: "{{ host_dir }}/c.txt"
    mode: 0600
  register: copy2
- template:
    src: motd.j2
    dest: "{{ host_dir }}/motd"
  vars:
    version: "1.29"
  register: tpl
- stat:
    path: "{{ host_dir }}/c.txt"
  register: st
- stat:
    path: "{{ host_dir }}/missing"
  register: missing
- fetch:
    src: "{{ host_dir }}/motd"
    dest: fetched/
    flat: yes
  register: fetched
- script: hello.sh world
  register: sc
"#,
    );
    let copy1 = run.fact("h1", "copy1");
    assert_eq!(copy1["changed"], true);
    assert_eq!(copy1["checksum"], "c7059bb19433cc3cabaa6236c83d56668a843dd2");
    assert_eq!(run.fact("h1", "copy2")["changed"], false);
    assert_eq!(std::fs::read_to_string(s.host_dir("h1").join("motd")).expect("motd"), "host h1 at 1.29\n");
    assert_eq!(run.fact("h1", "tpl")["changed"], true);
    let st = &run.fact("h1", "st")["stat"];
    assert_eq!(
        (st["exists"].clone(), st["isreg"].clone(), st["isdir"].clone()),
        (json!(true), json!(true), json!(false))
    );
    assert_eq!((st["size"].clone(), st["mode"].clone()), (json!(4), json!("0600")));
    assert_eq!(st["checksum"], "c7059bb19433cc3cabaa6236c83d56668a843dd2");
    assert_eq!(run.fact("h1", "missing")["stat"], json!({"exists": false}));
    assert_eq!(std::fs::read_to_string(s.path().join("fetched/motd")).expect("fetched"), "host h1 at 1.29\n");
    assert_eq!(run.fact("h1", "fetched")["changed"], true);
    let sc = run.fact("h1", "sc");
    assert_eq!(
        (sc["rc"].clone(), sc["stdout"].clone(), sc["changed"].clone()),
        (json!(0), json!("script says world\n"), json!(true))
    );
}

#[test]
fn assert_fail_wait_for_and_pause() {
    let mut s = Scenario::new(&["h1"]);
    s.options.assume_yes = true;
    let run = s.run(
        r#"
- assert:
    that:
      - 1 + 1 == 2
      - inventory_hostname == "h1"
    success_msg: fine
  register: a1
- assert:
    that: inventory_hostname == "other"
    fail_msg: "not {{ inventory_hostname }}"
  register: a2
  ignore_errors: true
- fail:
  ignore_errors: true
  register: f
- shell: (sleep 1; touch {{ host_dir }}/ready) &
- wait_for:
    path: "{{ host_dir }}/ready"
    timeout: 10
  register: w
- wait_for:
    path: "{{ host_dir }}/never"
    timeout: 1
  register: w2
  ignore_errors: true
- pause:
    seconds: 1
  register: p
- pause:
    prompt: Press enter to continue
"#,
    );
    assert_eq!(run.fact("h1", "a1")["msg"], "fine");
    let a2 = run.fact("h1", "a2");
    assert_eq!((a2["failed"].clone(), a2["msg"].clone()), (json!(true), json!("not h1")));
    assert_eq!(a2["assertion"], "inventory_hostname == \"other\"");
    assert_eq!(a2["evaluated_to"], false);
    assert_eq!(a2["exception"], "(traceback unavailable)");
    assert_eq!(run.fact("h1", "f")["msg"], "Failed as requested from task");
    assert_eq!(run.fact("h1", "w")["failed"], false);
    let w2 = run.fact("h1", "w2");
    assert_eq!(w2["failed"], true);
    assert!(w2.get("path").is_none(), "a timeout reports only the elapsed time: {w2}");
    assert!(w2["msg"].as_str().unwrap_or_default().starts_with("Timeout when waiting for file"), "{w2}");
    let paused = run.fact("h1", "p")["stdout"].as_str().unwrap_or_default().to_string();
    assert!(paused.starts_with("Paused for 1.") && paused.ends_with(" seconds"), "{paused}");
    assert!(!run.outcome("h1").failed);
}

#[test]
fn pause_with_a_prompt_fails_without_a_terminal_unless_yes() {
    let s = Scenario::new(&["h1"]);
    let run = s.run("- pause:\n    prompt: Press enter to continue\n");
    assert!(run.outcome("h1").failed);
    let msg = run.log.results("h1")[0].2["msg"].as_str().unwrap_or_default().to_string();
    assert!(msg.contains("--yes") && msg.contains("no terminal"), "{msg}");
}

#[test]
fn no_log_hides_output_from_events_but_keeps_the_registered_value() {
    let s = Scenario::new(&["h1"]);
    let run = s.run("- name: secret\n  command: echo s3cret\n  register: out\n  no_log: true\n");
    let shown = run.result("h1", "secret");
    assert_eq!(
        shown["censored"],
        "the output has been hidden due to the fact that 'no_log: true' was specified for this result"
    );
    assert!(!shown.to_string().contains("s3cret"));
    assert_eq!(run.fact("h1", "out")["stdout"], "s3cret");
}

#[test]
fn include_tasks_vars_and_block_keywords_are_inherited() {
    let s = Scenario::new(&["h1"]);
    s.write("inc/other.yml", "- name: included\n  debug:\n    msg: \"{{ who }} {{ level }}\"\n");
    let run = s.run(
        r#"
- block:
    - include_tasks: inc/other.yml
      vars:
        who: inner
  vars:
    level: block
- block:
    - name: inherited when
      debug:
        msg: never
  when: false
- name: extra vars win over set_fact
  set_fact:
    target: from-task
- debug:
    msg: "{{ target }}"
  register: t
"#,
    );
    assert_eq!(run.result("h1", "included")["msg"], "inner block");
    // As Ansible, the include itself is reported (ok) before the tasks it brings in.
    let statuses = run.statuses("h1");
    assert_eq!(statuses[0], ("include_tasks inc/other.yml".to_string(), TaskStatus::Ok));
    assert_eq!(statuses[1], ("included".to_string(), TaskStatus::Ok));
    assert_eq!(statuses[2], ("inherited when".to_string(), TaskStatus::Skipped));
    assert_eq!(run.fact("h1", "t")["msg"], "from-task");
}

#[test]
fn extra_vars_win_over_set_fact() {
    let mut s = Scenario::new(&["h1"]);
    s.extra.insert("target".into(), var(json!("from-cli")));
    let run = s.run("- set_fact:\n    target: from-task\n- debug:\n    msg: \"{{ target }}\"\n  register: t\n");
    assert_eq!(run.fact("h1", "t")["msg"], "from-cli");
}

#[test]
fn template_errors_name_the_file_line_and_task() {
    let s = Scenario::new(&["h1"]);
    let run = s.run("- debug:\n    msg: ok\n- name: broken\n  debug:\n    msg: \"{{ undefined_thing }}\"\n");
    let msg = run.result("h1", "broken")["msg"].as_str().unwrap_or_default().to_string();
    assert!(msg.contains("hook.yml:3:3: task \"broken\""), "{msg}");
    assert!(msg.contains("undefined"), "{msg}");
    assert!(run.outcome("h1").failed);
}

#[test]
fn become_wraps_commands_in_sudo() {
    let s = Scenario::new(&["h1"]);
    // The tests run as root with sudo installed (scripts/install-test-deps), as a fleet's deploy user would have it.
    let run = s.run("- command: id -un\n  become: true\n  become_user: nobody\n  register: who\n");
    let who = run.fact("h1", "who");
    assert_eq!((who["rc"].clone(), who["stdout"].clone()), (json!(0), json!("nobody")), "{who}");
}

#[test]
fn the_example_hooks_run() {
    let mut s = Scenario::new(&["master1", "node1"]);
    s.options.assume_yes = true;
    for host in ["master1", "node1"] {
        let marker = s.host_dir(host).join("verified").display().to_string();
        s.set_host_var(host, "upgrade_verify_marker", json!(marker));
        s.set_host_var(host, "upgrade_kubelet_health_command", json!("echo ok"));
    }
    let hooks = Path::new(env!("CARGO_MANIFEST_DIR")).join("hooks");
    let run = s.run_file(&hooks.join("openshift-example.yml"));
    assert_eq!(
        run.result("master1", "note the start of a master upgrade")["msg"],
        "Master upgrade of master1 is about to start"
    );
    assert!(!run.outcome("master1").failed && !run.outcome("node1").failed);
    let run = s.run_file(&hooks.join("node-post-verify.yml"));
    assert!(!run.outcome("node1").failed, "{:?}", run.log.results("node1"));
    let marker = std::fs::read_to_string(s.host_dir("node1").join("verified")).expect("marker");
    assert!(marker.starts_with("verified node1: ok"), "{marker}");
    let run = s.run_file(&hooks.join("master-pre-check.yml"));
    let statuses = run.statuses("master1");
    assert_eq!(statuses.len(), 3, "{statuses:?}");
}

#[test]
fn check_reports_every_problem_with_its_line() {
    let s = Scenario::new(&["h1"]);
    let bad = s.write(
        "bad.yml",
        "- name: typo\n  comand: ls\n- name: bad template\n  debug:\n    msg: \"{{ x | }}\"\n- include_tasks: nowhere.yml\n",
    );
    let errors: Vec<String> = check_task_file(&bad).iter().map(|e| e.to_string()).collect();
    assert_eq!(errors.len(), 3, "{errors:?}");
    // The module is checked where its task starts: ansible-core is asked whether it has it.
    assert!(errors[0].contains("bad.yml:1:3") && errors[0].contains("unknown module `comand`"), "{}", errors[0]);
    assert!(errors[1].contains("bad.yml:3:3") && errors[1].contains("bad template"), "{}", errors[1]);
    assert!(errors[2].contains("nowhere.yml"), "{}", errors[2]);
    let yaml = s.write("yaml.yml", "- name: x\n  debug: {msg: [1, 2\n");
    assert!(check_task_file(&yaml)[0].location.as_ref().is_some_and(|l| l.line >= 2));
    for hook in ["master-pre-check.yml", "node-post-verify.yml", "openshift-example.yml"] {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("hooks").join(hook);
        assert!(check_task_file(&path).is_empty(), "{hook}: {:?}", check_task_file(&path));
    }
}

/// kubespray's drain retry (roles/upgrade/pre-upgrade/tasks/drain.yml) includes its own file from `rescue:` with a
/// counter. `run-tasks` runs it three times; the static check reads each file once instead of recursing for ever.
#[test]
fn a_task_file_that_includes_itself_is_checked_without_a_crash() {
    let s = Scenario::new(&["h1"]);
    let own = s.write(
        "self.yml",
        "- name: retry counter\n  set_fact:\n    n: \"{{ 0 if n is undefined else n | int + 1 }}\"\n\
         - name: again\n  include_tasks: self.yml\n  when: n | int < 3\n",
    );
    assert!(check_task_file(&own).is_empty(), "{:?}", check_task_file(&own));
    // A longer cycle, with a mistake in the second file: reported once, not once per turn of the cycle.
    let a = s.write("a.yml", "- include_tasks: b.yml\n");
    s.write("b.yml", "- name: typo\n  comand: ls\n- import_tasks: ./a.yml\n");
    let errors: Vec<String> = check_task_file(&a).iter().map(|e| e.to_string()).collect();
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(errors[0].contains("b.yml:1:3") && errors[0].contains("comand"), "{}", errors[0]);
    let run = s.run_file(&own);
    assert_eq!(run.fact("h1", "n"), json!(3), "run-tasks follows the counter to its end");
}

/// A small deterministic generator (xorshift64*): the same cases on every run, no dependency.
struct Shapes(u64);

impl Shapes {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 33) as usize % n.max(1)
    }

    /// A task of one of the shapes hooks have; includes and roles point at any file or role of the case (itself, one
    /// that includes it back, or one that does not exist), blocks nest them.
    fn task(&mut self, files: usize, roles: usize, depth: usize) -> Value {
        let target = self.below(files + 1); // files: one past the last does not exist
        match self.below(if depth > 2 { 7 } else { 9 }) {
            0 => json!({"include_tasks": format!("f{target}.yml"), "when": "n | default(0) | int < 3"}),
            1 => json!({"import_tasks": format!("f{target}.yml")}),
            2 => json!({"import_role": {"name": format!("r{}", self.below(roles + 1))}}),
            3 => json!({"include_role": {"name": format!("r{}", self.below(roles + 1)), "tasks_from": "main"}}),
            4 => json!({"name": "loop", "debug": {"msg": "{{ item }}"}, "loop": [1, 2], "notify": "h"}),
            5 => json!({"set_fact": {"n": "{{ 0 if n is undefined else n | int + 1 }}"}}),
            6 => json!({"include_tasks": "{{ 'f' ~ n | default(0) ~ '.yml' }}"}),
            _ => {
                let block: Vec<Value> = (0..1 + self.below(3)).map(|_| self.task(files, roles, depth + 1)).collect();
                let rescue: Vec<Value> = (0..self.below(3)).map(|_| self.task(files, roles, depth + 1)).collect();
                json!({"block": block, "rescue": rescue, "always": [self.task(files, roles, depth + 1)]})
            }
        }
    }
}

/// The static check never crashes (issue 26): generated include graphs (self-includes, cycles through other files
/// and through roles, includes from `rescue:`, missing files and roles) and task shapes are checked to the end, each
/// problem found being one the shapes can have. A stack overflow would abort the test binary.
#[test]
fn the_check_ends_on_generated_include_graphs_and_task_shapes() {
    let mut shapes = Shapes(0x9E37_79B9_7F4A_7C15);
    let expected = ["does not exist", "was not found", "there are no handlers for this file"];
    for case in 0..150 {
        let s = Scenario::new(&[]);
        let (files, roles) = (1 + shapes.below(5), shapes.below(3));
        let write_tasks = |shapes: &mut Shapes, path: &str, prefix: &str| {
            let tasks: Vec<Value> = (0..1 + shapes.below(4)).map(|_| shapes.task(files, roles, 0)).collect();
            // JSON is YAML; a role's tasks include the top files through `../../../`.
            let text = serde_json::to_string_pretty(&tasks).expect("json").replace("\"f", &format!("\"{prefix}f"));
            s.write(path, &text);
        };
        for f in 0..files {
            write_tasks(&mut shapes, &format!("f{f}.yml"), "");
        }
        for r in 0..roles {
            write_tasks(&mut shapes, &format!("roles/r{r}/tasks/main.yml"), "../../../");
            if shapes.below(2) == 0 {
                s.write(&format!("roles/r{r}/handlers/main.yml"), "- name: h\n  debug: msg=handled\n");
            }
        }
        let errors = check_task_file(&s.path().join("f0.yml"));
        for e in &errors {
            let text = e.to_string();
            assert!(expected.iter().any(|x| text.contains(x)), "case {case}: unexpected problem: {text}");
        }
        let again = check_task_file(&s.path().join("f0.yml"));
        assert_eq!(again.len(), errors.len(), "case {case}: a second check finds the same");
    }
}

#[test]
fn hook_files_come_from_every_hosts_variables() {
    let mut s = Scenario::new(&["m1", "n1"]);
    s.set_host_var("m1", "openshift_master_upgrade_pre_hook", json!("hooks/pre.yml"));
    s.set_host_var("n1", "upgrade_node_post_hook", json!("/abs/post.yml"));
    s.set_host_var("m1", "upgrade_node_post_hook", json!("/abs/post.yml"));
    let files = hook_files(&s.inventory, &Vars::new());
    assert_eq!(files.len(), 2, "{files:?}");
    assert!(files.contains(&s.path().join("hooks/pre.yml")) && files.contains(&PathBuf::from("/abs/post.yml")));
}

/// The values ansible-core 2.19.14 registered for scripts/compare/semantics.yml (recorded with
/// scripts/compare-ansible.sh's play wrapper), without its final dump task.
#[test]
fn registered_values_match_ansible_core_on_the_comparison_file() {
    let s = Scenario::new(&["h1"]);
    let compare = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/compare");
    let text = std::fs::read_to_string(compare.join("semantics.yml")).expect("comparison file");
    let without_dump = text.split("- name: dump").next().unwrap_or_default();
    std::fs::copy(compare.join("semantics.j2"), s.path().join("semantics.j2")).expect("template");
    let run = s.run(without_dump);
    let drop_volatile = |mut v: Value| {
        if let Some(m) = v.as_object_mut() {
            for k in ["start", "end", "delta"] {
                m.remove(k);
            }
        }
        v
    };
    assert_eq!(
        drop_volatile(run.fact("h1", "reg_command")),
        json!({"changed": true, "stdout": "hello", "stderr": "", "rc": 0, "cmd": ["echo", "hello"], "msg": "",
               "stdout_lines": ["hello"], "stderr_lines": [], "failed": false})
    );
    assert_eq!(
        run.fact("h1", "reg_skipped"),
        json!({"changed": false, "skipped": true, "skip_reason": "Conditional result was False",
               "false_condition": "inventory_hostname == \"nobody\""})
    );
    let until = run.fact("h1", "reg_until");
    assert_eq!(
        (until["attempts"].clone(), until["stdout"].clone(), until["failed"].clone()),
        (json!(2), json!("2"), json!(false))
    );
    assert_eq!(
        drop_volatile(run.fact("h1", "reg_exhausted")),
        json!({"changed": true, "stdout": "", "stderr": "", "rc": 1, "cmd": ["false"], "failed": true,
               "msg": "non-zero return code", "stdout_lines": [], "stderr_lines": [], "attempts": 1,
               "exception": "(traceback unavailable)"})
    );
    assert_eq!(
        drop_volatile(run.fact("h1", "reg_failed_when")),
        json!({"changed": false, "stdout": "", "stderr": "", "rc": 1, "cmd": "exit 1", "failed": false,
               "msg": "non-zero return code", "stdout_lines": [], "stderr_lines": [], "failed_when_result": false,
               "failed_when_suppressed_exception": "(traceback unavailable)"})
    );
    let looped = run.fact("h1", "reg_loop");
    assert_eq!(
        (looped["skipped"].clone(), looped["changed"].clone(), looped["failed"].clone(), looped["msg"].clone()),
        (json!(false), json!(true), json!(true), json!("One or more items failed"))
    );
    assert_eq!(looped["results"][1]["item"], 2);
    assert_eq!(run.fact("h1", "rescued_task"), "breaks");
    assert_eq!(run.fact("h1", "rescued_rc"), 1);
    assert_eq!(run.fact("h1", "always_ran"), true);
    assert_eq!(run.fact("h1", "answer"), 42);
    assert_eq!(
        std::fs::read_to_string(s.host_dir("h1").join("rendered")).expect("rendered"),
        "host h1 says hello 42\nline 1\nline 2\n"
    );
    // PLAY RECAP of ansible-playbook for the whole file was ok=10 changed=6 skipped=1 rescued=1 ignored=2;
    // without the dump task (changed) that is ok=9 changed=5.
    let mut stats = upgrade::tasks::report::HostStats::default();
    for event in run.log.events() {
        if let Event::TaskFinished { host, status, result, ignored, rescued, .. } = event {
            if host == "h1" {
                stats.count(status, &result, ignored, rescued);
            }
        }
    }
    let expected = upgrade::tasks::report::HostStats {
        ok: 9,
        changed: 5,
        unreachable: 0,
        failed: 0,
        skipped: 1,
        rescued: 1,
        ignored: 2,
    };
    assert_eq!(stats, expected);
}

#[test]
fn the_builtin_playbooks_pass_check() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("playbooks");
    let Ok(entries) = std::fs::read_dir(&dir) else { return };
    // The shared files and each flavour's folder (kubeadm/, openshift/, custom/).
    let mut paths: Vec<std::path::PathBuf> = Vec::new();
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            paths.extend(std::fs::read_dir(&path).into_iter().flatten().flatten().map(|e| e.path()));
        } else {
            paths.push(path);
        }
    }
    let mut problems = Vec::new();
    for path in paths {
        let is_task_file =
            path.extension().is_some_and(|x| x == "yml") && path.file_name().is_some_and(|n| n != "defaults.yml");
        if is_task_file {
            problems.extend(check_task_file(&path).into_iter().map(|e| e.to_string()));
        }
    }
    assert!(problems.is_empty(), "{problems:#?}");
}

#[test]
fn omit_drops_the_argument_wherever_it_lands() {
    let s = Scenario::new(&["h1"]);
    let run = s.run(
        r#"
- command:
    cmd: pwd
    chdir: "{{ workdir | default(omit) }}"
  register: omitted
- command:
    argv: ["echo", "{{ omit }}", "kept"]
  register: in_list
"#,
    );
    assert_eq!(run.fact("h1", "omitted")["rc"], 0, "{}", run.fact("h1", "omitted"));
    assert_eq!(run.fact("h1", "in_list")["stdout"], "kept");
}

#[test]
fn loop_control_index_var_counts_items_from_zero() {
    let s = Scenario::new(&["h1"]);
    let run = s.run(
        r#"
- debug:
    msg: "{{ idx }}:{{ item }}"
  loop: [zero, one]
  loop_control:
    index_var: idx
  register: indexed
"#,
    );
    let results = run.fact("h1", "indexed")["results"].clone();
    assert_eq!(results[1]["msg"], "1:one");
    assert_eq!((results[1]["idx"].clone(), results[1]["ansible_index_var"].clone()), (json!(1), json!("idx")));
}

#[test]
fn ignore_errors_is_templated() {
    let mut s = Scenario::new(&["h1", "h2"]);
    s.set_host_var("h1", "role", json!("db"));
    s.set_host_var("h2", "role", json!("web"));
    let run = s.run(
        r#"
- block:
    - command: /bin/false
  ignore_errors: "{{ role == 'db' }}"
  rescue:
    - set_fact:
        rescued: true
"#,
    );
    assert_eq!(run.fact("h1", "rescued"), Value::Null);
    assert_eq!(run.fact("h2", "rescued"), json!(true));
}

#[test]
fn include_tasks_runs_once_per_loop_item_and_counts_as_ok() {
    let s = Scenario::new(&["h1"]);
    s.write("step.yml", "- set_fact:\n    steps: \"{{ steps | default([]) + [step] }}\"\n");
    let run = s.run(
        r#"
- name: each step
  include_tasks: step.yml
  loop: [a, b]
  loop_control:
    loop_var: step
"#,
    );
    assert_eq!(run.fact("h1", "steps"), json!(["a", "b"]));
    let includes: Vec<_> = run.statuses("h1").into_iter().filter(|(n, _)| n == "each step").collect();
    assert_eq!(includes, vec![("each step".to_string(), TaskStatus::Ok); 2]);
}

/// `import_tasks` is static, as in Ansible: its `when` goes to each imported task (a false one skips each of them and
/// is registered by each), the import itself reports nothing, and a loop on it is refused.
#[test]
fn import_tasks_gives_its_when_to_each_task_and_reports_nothing_itself() {
    let s = Scenario::new(&["h1"]);
    s.write("step.yml", "- name: first\n  command: echo one\n  register: last\n- name: second\n  debug: msg=two\n");
    let run = s.run(
        r#"
- name: the import
  import_tasks: step.yml
  when: nothing is defined
"#,
    );
    assert_eq!(
        run.statuses("h1"),
        [("first".to_string(), TaskStatus::Skipped), ("second".to_string(), TaskStatus::Skipped)]
    );
    assert_eq!(run.fact("h1", "last")["skipped"], json!(true));
    let looped = s.write("looped.yml", "- import_tasks: step.yml\n  loop: [a, b]\n");
    let errors: Vec<String> = check_task_file(&looped).iter().map(|e| e.to_string()).collect();
    assert!(errors.len() == 1 && errors[0].contains("You cannot use loops on 'import_tasks'"), "{errors:?}");
}

#[test]
fn run_once_is_reported_for_the_host_that_ran_it_only() {
    let s = Scenario::new(&["h1", "h2"]);
    let run = s.run("- name: once\n  command: echo once\n  run_once: true\n  register: once\n");
    let reported: Vec<_> = ["h1", "h2"].iter().filter(|h| run.statuses(h).iter().any(|(n, _)| n == "once")).collect();
    assert_eq!(reported.len(), 1, "{reported:?}");
    assert_eq!(run.fact("h1", "once")["stdout"], "once");
    assert_eq!(run.fact("h2", "once")["stdout"], "once");
}

#[test]
fn run_once_runs_on_the_first_host_in_order_even_when_another_arrives_first() {
    let s = Scenario::new(&["h1", "h2"]);
    let run = s.run(
        r#"
- command: sleep 1
  when: inventory_hostname == "h1"
- command: "echo {{ inventory_hostname }}"
  run_once: true
  register: once
"#,
    );
    assert_eq!(run.fact("h1", "once")["stdout"], "h1");
    assert_eq!(run.fact("h2", "once")["stdout"], "h1");
}

#[test]
fn set_fact_and_register_show_through_hostvars_of_the_host_itself() {
    let mut s = Scenario::new(&["h1"]);
    s.set_host_var("h1", "role", json!("db"));
    let run = s.run(
        r#"
- set_fact:
    x: from-fact
    cached: "{{ role }}-cached"
    cacheable: true
- command: echo registered
  register: reg
- name: read
  debug:
    msg: "{{ hostvars[inventory_hostname].x }} {{ hostvars[inventory_hostname]['cached'] }} {{ hostvars['h1'].reg.stdout }} {{ hostvars.h1.role }}"
"#,
    );
    assert_eq!(run.result("h1", "read")["msg"], "from-fact db-cached registered db");
}

#[test]
fn a_host_reads_what_another_registered_after_both_passed_a_run_once_task() {
    let s = Scenario::new(&["h1", "h2"]);
    let run = s.run(
        r#"
- name: only h1
  command: echo "from {{ inventory_hostname }}"
  register: h1_only
  when: inventory_hostname == 'h1'
# h2 passes a run_once task only once h1, before it in inventory order, has reached it.
- name: meet
  debug:
    msg: met
  run_once: true
- name: read
  debug:
    msg: "{{ hostvars['h1'].h1_only.stdout }} {{ h1_only.skipped | default(false) }}"
"#,
    );
    assert_eq!(run.result("h2", "read")["msg"], "from h1 True");
    assert_eq!(run.result("h1", "read")["msg"], "from h1 False");
}

#[test]
fn extra_vars_win_over_facts_in_hostvars_too() {
    let mut s = Scenario::new(&["h1"]);
    s.extra.insert("target".into(), var(json!("from-cli")));
    let run = s.run(
        "- set_fact:\n    target: from-task\n    other: fact\n- name: read\n  debug:\n    msg: \"{{ hostvars['h1'].target }} {{ hostvars['h1'].other }}\"\n",
    );
    assert_eq!(run.result("h1", "read")["msg"], "from-cli fact");
}

#[test]
fn with_delegate_to_hostvars_of_inventory_hostname_are_the_delegating_host_s() {
    let s = Scenario::new(&["h1", "h2"]);
    let run = s.run(
        r#"
- set_fact:
    mine: "{{ inventory_hostname }}-fact"
- name: delegated
  command: echo "{{ inventory_hostname }} {{ hostvars[inventory_hostname].mine }} {{ mine }}"
  delegate_to: h2
  register: delegated
  when: inventory_hostname == 'h1'
"#,
    );
    assert_eq!(run.fact("h1", "delegated")["stdout"], "h1 h1-fact h1-fact");
}

#[test]
fn a_task_timeout_cuts_the_command_and_fails_with_ansibles_message() {
    let s = Scenario::new(&["h1"]);
    let pid_file = s.host_dir("h1").join("pid");
    let started = std::time::Instant::now();
    let run = s.run(&format!(
        "- name: hangs\n  shell: echo $$ > {}; exec sleep 30\n  timeout: 2\n- name: never reached\n  debug: msg=x\n",
        pid_file.display()
    ));
    let took = started.elapsed();
    let result = run.result("h1", "hangs");
    assert_eq!(result["msg"], "Timed out after 2 second(s).", "{result}");
    assert_eq!(result["timedout"]["period"], 2, "{result}");
    assert_eq!(result["failed"], true);
    assert!(run.outcome("h1").failed);
    assert!(took < std::time::Duration::from_secs(20), "the task ran {took:?}, not ~2 s");
    // The command is gone, not left running.
    let gone = crate::support::process_ends_within(&pid_file, std::time::Duration::from_secs(5));
    assert!(gone, "sleep 30 still runs");
}

#[test]
fn a_task_timeout_is_templated_bypasses_retries_and_can_be_ignored() {
    let s = Scenario::new(&["h1"]);
    let run = s.run(
        "- name: slow\n  command: sleep 5\n  timeout: \"{{ 1 }}\"\n  retries: 3\n  delay: 0\n  until: false\n  \
         ignore_errors: true\n  register: slow\n- name: quick enough\n  command: \"true\"\n  timeout: 10\n",
    );
    let slow = run.fact("h1", "slow");
    assert_eq!(slow["msg"], "Timed out after 1 second(s).", "{slow}");
    assert!(slow.get("attempts").is_none(), "no retry after a timeout, as Ansible: {slow}");
    assert!(!run.outcome("h1").failed);
    assert_eq!(run.result("h1", "quick enough")["rc"], 0);
}

#[test]
fn a_negative_task_timeout_is_refused_by_check() {
    let s = Scenario::new(&["h1"]);
    let bad = s.write("bad.yml", "- name: x\n  command: \"true\"\n  timeout: -1\n");
    let errors: Vec<String> = check_task_file(&bad).iter().map(|e| e.to_string()).collect();
    assert!(errors.iter().any(|e| e.contains("bad.yml:3") && e.contains("timeout")), "{errors:?}");
}

#[test]
fn a_become_password_never_reaches_a_command_when_sudo_does_not_ask_for_it() {
    let mut s = Scenario::new(&["h1"]);
    // Root's sudo asks for no password: the password must not be written to the command's stdin instead.
    s.set_host_var("h1", "ansible_become_password", json!("pw-that-must-stay-hidden"));
    let run = s.run("- shell: cat; id -un\n  become: true\n  register: out\n");
    let out = run.fact("h1", "out");
    assert_eq!(out["stdout"], "root", "{out}");
    let events = format!("{:?}", run.log.results("h1"));
    assert!(!events.contains("pw-that-must-stay-hidden"), "{events}");
}

#[test]
fn fetch_reads_a_file_whole_though_command_output_is_bounded() {
    let s = Scenario::new(&["h1"]);
    let big: Vec<u8> = (0..3_000_000u32).map(|i| b'a' + (i % 23) as u8).collect();
    let src = s.host_dir("h1").join("snapshot.db");
    std::fs::write(&src, &big).expect("write");
    let dest = s.path().join("fetched").join("snapshot.db");
    let run = s.run(&format!(
        "- fetch:\n    src: {}\n    dest: {}\n    flat: true\n- shell: cat {}\n  register: printed\n",
        src.display(),
        dest.display(),
        src.display()
    ));
    assert!(!run.outcome("h1").failed, "{:?}", run.log.results("h1"));
    assert_eq!(std::fs::read(&dest).expect("fetched"), big, "the fetched file is whole");
    let printed = run.fact("h1", "printed")["stdout"].as_str().unwrap_or_default().to_string();
    assert!(printed.len() < 1_200_000 && printed.contains("bytes of output dropped"), "{}", printed.len());
}

#[test]
fn throttle_lets_only_that_many_hosts_run_the_task_at_once() {
    let s = Scenario::new(&["h1", "h2", "h3"]);
    // Each host takes a lock directory shared by all hosts (one per task: hosts go from task to task on their own)
    // for a while: a second host inside at the same time finds it taken and fails. Throttled to 1, no host collides; a block's throttle holds for its tasks; unthrottled,
    // the hosts (20 forks) run the task together and collide.
    let lock = s.path().join("lock");
    let run = s.run(&format!(
        r#"
- name: one at a time
  shell: mkdir {lock} && sleep 0.4 && rmdir {lock}
  throttle: 1
  register: one
- name: limited block
  throttle: "{{{{ 0 + 1 }}}}"
  block:
    - name: one at a time in the block
      shell: mkdir {lock}-block && sleep 0.4 && rmdir {lock}-block
- name: all at once
  shell: mkdir {lock}-free && sleep 2 && rmdir {lock}-free
  ignore_errors: true
  register: together
- name: no limit
  command: "true"
  throttle: 0
"#,
        lock = lock.display()
    ));
    for host in ["h1", "h2", "h3"] {
        assert!(!run.outcome(host).failed, "{host}: {:?}", run.statuses(host));
        assert_eq!(run.fact(host, "one")["rc"], 0);
        assert_eq!(run.result(host, "no limit")["rc"], 0);
    }
    let collided = ["h1", "h2", "h3"].iter().filter(|h| run.fact(h, "together")["rc"] != 0).count();
    assert!(collided >= 1, "without throttle the hosts run the task together");
}

#[test]
fn a_throttle_that_is_not_a_number_fails_the_task_as_ansible_says() {
    let s = Scenario::new(&["h1"]);
    let run = s.run("- name: odd\n  command: \"true\"\n  throttle: \"{{ 'many' }}\"\n");
    assert!(run.outcome("h1").failed);
    let msg = run.result("h1", "odd")["msg"].as_str().unwrap_or_default().to_string();
    assert!(
        msg.contains("the field 'throttle' has an invalid value (many), and could not be converted to int"),
        "{msg}"
    );
}

#[test]
fn check_mode_true_says_what_would_change_and_changes_nothing() {
    let mut s = Scenario::new(&["h1", "h2"]);
    s.set_host_var("h1", "dry", json!(true));
    s.set_host_var("h2", "dry", json!(false));
    for host in ["h1", "h2"] {
        std::fs::write(s.host_dir(host).join("f.conf"), "a=1\n").expect("file");
    }
    let run = s.run(
        r#"
- name: would add a line
  lineinfile: {path: "{{ host_dir }}/f.conf", line: "b=2"}
  check_mode: true
  register: line
- name: would add a block
  blockinfile: {path: "{{ host_dir }}/f.conf", block: "c=3"}
  check_mode: true
  register: block
- name: would run
  command: touch {{ host_dir }}/touched
  check_mode: true
  register: cmd
- name: would run, creates says
  command: touch {{ host_dir }}/touched
  args: {creates: "{{ host_dir }}/touched"}
  check_mode: true
  register: creates
- name: runs
  command: touch {{ host_dir }}/ran
  check_mode: false
- name: no check mode in uri
  uri: {url: "http://127.0.0.1:9/"}
  check_mode: true
  register: uri
- name: checked where dry
  check_mode: "{{ dry }}"
  block:
    - name: in the block
      lineinfile: {path: "{{ host_dir }}/f.conf", line: "d=4"}
      register: inner
"#,
    );
    for host in ["h1", "h2"] {
        assert!(!run.outcome(host).failed, "{host}: {:?}", run.statuses(host));
        assert_eq!(run.fact(host, "line")["changed"], true);
        assert_eq!(run.fact(host, "line")["msg"], "line added");
        assert_eq!(run.fact(host, "block")["changed"], true);
        assert_eq!(run.fact(host, "cmd")["skipped"], true);
        assert_eq!(run.fact(host, "cmd")["msg"], "Command would have run if not in check mode");
        assert_eq!(run.fact(host, "creates")["changed"], true);
        assert_eq!(run.fact(host, "uri")["msg"], "This action (uri) does not support check mode.");
        assert_eq!(run.fact(host, "inner")["changed"], true);
        assert!(!s.host_dir(host).join("touched").exists(), "check mode ran the command on {host}");
        assert!(s.host_dir(host).join("ran").exists(), "check_mode: false runs the command on {host}");
    }
    let text = |host| std::fs::read_to_string(s.host_dir(host).join("f.conf")).expect("file");
    assert_eq!(text("h1"), "a=1\n", "check mode left the file as it was");
    assert_eq!(text("h2"), "a=1\nd=4\n", "the block's check_mode is false on h2");
}

#[test]
fn check_refuses_a_template_in_check_mode_and_sends_file_to_ansible_core() {
    let s = Scenario::new(&["h1"]);
    let file = s.write(
        "hook.yml",
        "- name: render\n  template: {src: a.j2, dest: /tmp/a}\n  check_mode: true\n\
         - name: dir\n  file: {path: /tmp/d, state: directory}\n  check_mode: true\n",
    );
    let tasks = load_task_file(
        &s.write("ok.yml", "- name: dir\n  file: {path: /tmp/d, state: directory}\n  check_mode: true\n"),
    )
    .expect("reads");
    // No ansible-core where this one points: the file task is refused for that reason.
    let missing = upgrade::tasks::modules::AnsibleCore::from_vars(|k| {
        (k == "upgrade_ansible_command").then(|| json!("/nonexistent/bin/ansible"))
    });
    let checked = check_task_file_with_notes(&file, &[], &missing);
    let joined = checked.errors.iter().map(|e| e.to_string()).collect::<Vec<_>>().join("\n");
    assert!(joined.contains("hook.yml:1:3: task \"render\": `template` cannot run in check mode here"), "{joined}");
    assert!(
        joined.contains(
            "hook.yml:4:3: task \"dir\": `file` in check mode runs through ansible-core: ansible-core is needed"
        ),
        "file in check mode goes to ansible-core: {joined}"
    );
    assert_eq!(checked.errors.len(), 2, "{joined}");
    let upgrade::tasks::model::Action::Module(call) = &tasks[0].action else { panic!("a module") };
    assert_eq!(call.module_name(), "file");
    assert_eq!(call.module, upgrade::tasks::model::Module::AnsibleCore);
}

#[test]
fn include_role_apply_gives_every_task_of_the_role_its_keywords() {
    let mut s = Scenario::new(&["db", "web"]);
    s.set_host_var("db", "tier", json!("db"));
    s.set_host_var("web", "tier", json!("web"));
    s.write(
        "roles/apply/tasks/main.yml",
        "- name: env\n  shell: echo ${APPLIED:-none}\n  register: env\n  check_mode: false\n\
         - name: write\n  lineinfile: {path: \"{{ host_dir }}/f.conf\", line: \"{{ applied_var }}\", create: true}\n\
         - name: counted\n  shell: echo x >> {{ host_dir }}/count\n",
    );
    let hook = s.write(
        "hook.yml",
        r#"
- include_role:
    name: apply
    apply:
      environment: {APPLIED: from-apply}
      vars: {applied_var: "{{ tier }}-line"}
      check_mode: "{{ tier == 'db' }}"
      when: tier != 'none'
      tags: [x]
- include_role:
    name: apply
    apply:
      when: tier == 'web'
  vars:
    applied_var: again
"#,
    );
    assert!(check_task_file(&hook).is_empty(), "{:?}", check_task_file(&hook));
    let run = s.run_file(&hook);
    for host in ["db", "web"] {
        assert!(!run.outcome(host).failed, "{host}: {:?}", run.statuses(host));
    }
    let file = |host: &str, name: &str| std::fs::read_to_string(s.host_dir(host).join(name)).unwrap_or_default();
    assert_eq!(file("web", "f.conf"), "web-line\nagain\n", "apply's vars and the include's vars reach the tasks");
    assert_eq!(
        file("db", "f.conf"),
        "",
        "apply's check_mode holds on db for the first include; its when skips the second"
    );
    assert_eq!(file("web", "count"), "x\nx\n");
    assert_eq!(file("db", "count"), "", "db ran neither: check mode, then apply's when");
    let env: Vec<Value> = run
        .log
        .results("web")
        .into_iter()
        .filter(|(n, _, _)| n == "env")
        .map(|(_, _, r)| r["stdout"].clone())
        .collect();
    assert_eq!(env, [json!("from-apply"), json!("none")], "apply's environment, for the first include only");

    let wrong = s.write(
        "wrong.yml",
        "- import_role:\n    name: apply\n    apply: {become: true}\n- include_role:\n    name: apply\n    apply: {loop: [1]}\n",
    );
    let errors: Vec<String> = check_task_file(&wrong).iter().map(|e| e.to_string()).collect();
    assert!(errors[0].contains("`import_role` has no argument `apply`"), "{errors:?}");
    assert!(errors[1].contains("`apply` cannot give the role's tasks `loop`"), "{errors:?}");
}
