//! The unit tests of `parse.rs`, moved out whole so that it stays under 800 lines.

use super::*;

fn parse(text: &str) -> (Vec<Task>, Vec<Error>) {
    parse_tasks(text, Path::new("hook.yml"))
}

#[test]
fn free_form_commands_split_like_parse_kv() {
    let args = parse_kv("ls -l \"a b\" chdir=/tmp creates=/x foo=bar", true).unwrap();
    assert_eq!(args["_raw_params"], "ls -l \"a b\" foo=bar");
    assert_eq!(args["chdir"], "/tmp");
    assert_eq!(args["creates"], "/x");
    let args = parse_kv("msg=\"hello {{ name }} there\" var=x", false).unwrap();
    assert_eq!(args["msg"], "hello {{ name }} there");
    assert_eq!(args["var"], "x");
}

#[test]
fn a_multi_line_free_form_script_keeps_its_lines() {
    // ansible-core runs `shell: |` as written (`cmd` is "echo one\necho two\n"); the old splitter joined the
    // lines into `echo one echo two`.
    let (tasks, errors) = parse("- shell: |\n    echo one\n    echo two chdir=/\n");
    assert!(errors.is_empty(), "{errors:?}");
    let Action::Module(call) = &tasks[0].action else { panic!("not a module: {:?}", tasks[0].action) };
    // The newline after `chdir=/` went with it, as in ansible-core.
    assert_eq!(call.args["_raw_params"], "echo one\necho two");
    assert_eq!(call.args["chdir"], "/");
    let (tasks, _) = parse("- shell: |\n    echo one\n    echo two\n");
    let Action::Module(call) = &tasks[0].action else { panic!("not a module: {:?}", tasks[0].action) };
    assert_eq!(call.args["_raw_params"], "echo one\necho two\n");
}

#[test]
fn tasks_keep_their_keys_and_lines() {
    let (tasks, errors) = parse(
        "- name: one\n  command: ls -l chdir=/tmp\n  register: out\n  when: x is defined\n  become: yes\n\n- debug: var=out\n",
    );
    assert!(errors.is_empty(), "{errors:?}");
    assert_eq!(tasks.len(), 2);
    assert_eq!(tasks[0].location.line, 1);
    assert_eq!(tasks[1].location.line, 7);
    assert_eq!(tasks[0].register.as_deref(), Some("out"));
    assert_eq!(tasks[0].become_, Some(Value::Bool(true)));
    assert_eq!(tasks[0].when, vec![Value::String("x is defined".into())]);
    let Action::Module(call) = &tasks[1].action else { panic!() };
    assert_eq!(call.module, Module::Debug);
    assert_eq!(tasks[1].display_name(), "debug");
}

#[test]
fn builtin_names_blocks_and_local_action() {
    let (tasks, errors) = parse(
        "- block:\n    - ansible.builtin.shell: echo hi\n  rescue:\n    - fail: msg=oops\n  always:\n    - debug: msg=done\n- local_action: command hostname\n",
    );
    assert!(errors.is_empty(), "{errors:?}");
    let Action::Block { block, rescue, always } = &tasks[0].action else { panic!() };
    assert_eq!((block.len(), rescue.len(), always.len()), (1, 1, 1));
    assert_eq!(tasks[1].delegate_to.as_deref(), Some("localhost"));
}

#[test]
fn errors_name_line_task_and_hint() {
    let (tasks, errors) = parse(
        "- name: first\n  comand: ls\n- name: second\n  debug: msg=x\n  shell: ls\n- name: third\n  pause:\n    seconds: many\n\
         - name: fourth\n  ignore_unreachable: true\n  debug: msg=x\n",
    );
    assert_eq!(errors.len(), 3, "{errors:?}");
    let texts: Vec<String> = errors.iter().map(|e| e.to_string()).collect();
    // A module we do not implement is ansible-core's to run: the check (not the reader) asks whether it exists.
    let Action::Module(call) = &tasks[0].action else { panic!("{:?}", tasks[0]) };
    assert_eq!((call.module, call.module_name()), (Module::AnsibleCore, "comand"));
    assert!(texts[0].contains(":5:3: task \"second\": two modules in one task"), "{}", texts[0]);
    assert!(texts[1].contains("task \"third\": `pause` argument `seconds` must be a number"), "{}", texts[1]);
    assert!(texts[2].contains("task \"fourth\": the keyword `ignore_unreachable` is not supported"), "{}", texts[2]);
    assert!(errors.iter().all(|e| e.hint.is_some()));
}

#[test]
fn a_playbook_is_refused() {
    let (_, errors) = parse("- hosts: all\n  tasks:\n    - debug: msg=x\n");
    assert!(errors[0].message.contains("playbook"));
    assert!(errors[0].hint.as_deref().unwrap_or_default().contains("task list"));
}

#[test]
fn package_modules_take_ansibles_common_arguments_and_name_the_ones_upgrade_does_not_run() {
    let (tasks, errors) = parse(
        "- apt: {name: [kubeadm=1.29.3-*], update_cache: yes, allow_change_held_packages: true}\n\
         - yum: name=kubeadm-1.29.3 disable_excludes=kubernetes state=present\n\
         - ansible.builtin.package: {name: kubelet, state: latest, use: auto}\n",
    );
    assert!(errors.is_empty(), "{errors:?}");
    assert_eq!(tasks.len(), 3);
    // An argument only ansible-core's module has: ansible-core runs the task; one neither has is an error.
    let (tasks, errors) = parse("- apt:\n    deb: /tmp/kubeadm.deb\n- dnf:\n    name: x\n    colour: red\n");
    let Action::Module(call) = &tasks[0].action else { panic!("{:?}", tasks[0]) };
    assert_eq!((call.module, call.module_name()), (Module::AnsibleCore, "apt"));
    let text: Vec<String> = errors.iter().map(|e| e.to_string()).collect();
    assert_eq!(text.len(), 1, "{text:?}");
    assert!(text[0].contains("`dnf` has no argument `colour`"), "{text:?}");
}
