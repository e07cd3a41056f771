//! Bad input, run through the real binary: every case exits 2 with one short error that names the file and line
//! where there is one and says what to do (`hint:`), touches nothing (no state directory, no host contacted), and
//! never shows a panic or a Rust debug representation.

use crate::support::Scenario;

/// Hosts on a port where nothing listens: any attempt to connect would show up as "Connection refused".
const HOSTS: &str = "[masters]\nm1 ansible_host=127.0.0.1 ansible_port=1\n\
                     [nodes]\nn1 ansible_host=127.0.0.1 ansible_port=1 node_labels=\"{'region': 'a'}\"\n\
                     n2 ansible_host=127.0.0.1 ansible_port=1\n\
                     [all:vars]\nupgrade_target_version=v1.29.1\n";

/// What a file of the scenario holds.
enum Contents {
    Text(&'static str),
    Bytes(&'static [u8]),
    Made(fn() -> String),
    Dir,
}
use Contents::*;

struct Case {
    name: &'static str,
    files: &'static [(&'static str, Contents)],
    args: &'static [&'static str],
    /// Each must appear in stderr.
    says: &'static [&'static str],
}

const CASES: &[Case] = &[
    Case {
        name: "malformed YAML inventory",
        files: &[("hosts.yml", Text("all:\n  children:\n    masters:\n      hosts:\n        m1: {a: [1, 2}\n"))],
        args: &["-i", "hosts.yml", "--plan"],
        says: &["hosts.yml:5:", "invalid YAML"],
    },
    Case {
        name: "malformed INI inventory",
        files: &[("hosts.ini", Text("[masters\nm1\n"))],
        args: &["-i", "hosts.ini", "--plan"],
        says: &["hosts.ini:1:", "section header"],
    },
    Case {
        name: "INI inventory with an unclosed quote",
        files: &[("hosts.ini", Text("[masters]\nm1 a='b\n"))],
        args: &["-i", "hosts.ini", "--plan"],
        says: &["hosts.ini:2:", "quote"],
    },
    Case {
        name: "unknown --limit pattern",
        files: &[("hosts.ini", Text(HOSTS))],
        args: &["-i", "hosts.ini", "--plan", "--limit", "bogus"],
        says: &["`bogus`", "masters, nodes"],
    },
    Case {
        name: "serial abc",
        files: &[("hosts.ini", Text(HOSTS))],
        args: &["-i", "hosts.ini", "--plan", "--serial", "abc"],
        says: &["--serial", "`abc`"],
    },
    Case {
        name: "serial -1%",
        files: &[("hosts.ini", Text(HOSTS))],
        args: &["-i", "hosts.ini", "--plan", "--serial=-1%"],
        says: &["--serial", "negative percentage"],
    },
    Case {
        name: "serial []",
        files: &[("hosts.ini", Text(HOSTS))],
        args: &["-i", "hosts.ini", "--plan", "--serial", "[]"],
        says: &["--serial", "empty list"],
    },
    Case {
        name: "serial abc in the inventory",
        files: &[("hosts.ini", Text("[masters]\nm1\n[nodes]\nn1\n[nodes:vars]\nupgrade_nodes_serial=abc\n"))],
        args: &["-i", "hosts.ini", "--plan"],
        says: &["hosts.ini:6:", "upgrade_nodes_serial", "`abc`"],
    },
    Case {
        name: "upgrade_node_ready_delay 0",
        files: &[("hosts.ini", Text("[masters]\nm1\n[nodes]\nn1\n[all:vars]\nupgrade_node_ready_delay=0\n"))],
        args: &["-i", "hosts.ini", "--plan"],
        says: &["hosts.ini:6:", "upgrade_node_ready_delay", "at least 1"],
    },
    Case {
        name: "negative upgrade_node_ready_timeout",
        files: &[(
            "hosts.yml",
            Text(
                "all:\n  vars:\n    upgrade_node_ready_timeout: -5\n  children:\n    masters:\n      hosts:\n        m1:\n",
            ),
        )],
        args: &["-i", "hosts.yml", "--plan"],
        says: &["hosts.yml:3:", "upgrade_node_ready_timeout", "`-5`"],
    },
    Case {
        name: "upgrade_reboot_timeout 0 with -e",
        files: &[("hosts.ini", Text(HOSTS))],
        args: &["-i", "hosts.ini", "--plan", "-e", "upgrade_reboot_timeout=0"],
        says: &["upgrade_reboot_timeout", "from -e"],
    },
    Case {
        name: "an SSH password",
        files: &[("hosts.ini", Text("[masters]\nm1 ansible_host=127.0.0.1 ansible_password=hunter2\n"))],
        args: &["-i", "hosts.ini", "--plan"],
        says: &["hosts.ini:2:", "ansible_password", "SSH password logins are not supported", "key"],
    },
    Case {
        name: "max-fail-percentage 101",
        files: &[("hosts.ini", Text(HOSTS))],
        args: &["-i", "hosts.ini", "--plan", "--max-fail-percentage", "101"],
        says: &["--max-fail-percentage", "outside 0..=100"],
    },
    Case {
        name: "max-fail-percentage -1",
        files: &[("hosts.ini", Text(HOSTS))],
        args: &["-i", "hosts.ini", "--plan", "--max-fail-percentage=-1"],
        says: &["--max-fail-percentage", "outside 0..=100"],
    },
    Case {
        name: "drain timeout soon",
        files: &[("hosts.ini", Text(HOSTS))],
        args: &["-i", "hosts.ini", "--plan", "--drain-timeout", "soon"],
        says: &["--drain-timeout", "`soon` is not a duration"],
    },
    Case {
        name: "drain timeout past any clock",
        files: &[("hosts.ini", Text(HOSTS))],
        args: &["-i", "hosts.ini", "--plan", "--drain-timeout", "99999999999999999999h"],
        says: &["--drain-timeout", "is not a duration"],
    },
    Case {
        name: "label selector that matches no node",
        files: &[("hosts.ini", Text(HOSTS))],
        args: &["-i", "hosts.ini", "--plan", "--label", "region=zzz"],
        says: &["region=zzz", "matches none of the 2 nodes", "region=a"],
    },
    Case {
        name: "label selector that is not one",
        files: &[("hosts.ini", Text(HOSTS))],
        args: &["-i", "hosts.ini", "--plan", "--label", "env in (a,b)"],
        says: &["--label", "set-based"],
    },
    Case {
        name: "hook file that does not exist",
        files: &[(
            "hosts.ini",
            Text("[masters]\nm1\n[nodes]\nn1\n[all:vars]\nupgrade_node_pre_hook=hooks/missing.yml\n"),
        )],
        args: &["-i", "hosts.ini", "--plan"],
        says: &["hosts.ini:6:", "upgrade_node_pre_hook", "hooks/missing.yml", "does not exist"],
    },
    Case {
        name: "no masters group",
        files: &[("hosts.ini", Text("[nodes]\nn1\n"))],
        args: &["-i", "hosts.ini", "--plan"],
        says: &["hosts.ini:", "no `masters` group"],
    },
    Case {
        name: "--phase bogus",
        files: &[("hosts.ini", Text(HOSTS))],
        args: &["-i", "hosts.ini", "--plan", "--phase", "bogus"],
        says: &["--phase", "`bogus`", "preflight, etcd-backup, control-plane, nodes, verify"],
    },
    Case {
        name: "inventory path that does not exist",
        files: &[],
        args: &["-i", "nothere.ini", "--plan"],
        says: &["nothere.ini: no such file"],
    },
    Case {
        name: "empty inventory file",
        files: &[("empty.ini", Text(""))],
        args: &["-i", "empty.ini", "--plan"],
        says: &["empty.ini: the inventory has no hosts"],
    },
    Case {
        name: "binary file as inventory",
        files: &[("inventory.bin", Bytes(b"\x7fELF\x02\x01\x01\0\0\0\xff\xfe\x80\x81\n\x00\x01"))],
        args: &["-i", "inventory.bin", "--plan"],
        says: &["inventory.bin:1:", "not UTF-8 text"],
    },
    Case {
        name: "inventory directory with no inventory files",
        files: &[("inventory", Dir), ("inventory/group_vars", Dir), ("inventory/notes.retry", Text("m1\n"))],
        args: &["-i", "inventory", "--plan"],
        says: &["inventory:", "no inventory with hosts"],
    },
    Case {
        name: "-e @ a file that does not exist",
        files: &[("hosts.ini", Text(HOSTS))],
        args: &["-i", "hosts.ini", "--plan", "-e", "@missing.yml"],
        says: &["missing.yml: no such file"],
    },
    Case {
        name: "-e @ a file with invalid YAML",
        files: &[("hosts.ini", Text(HOSTS)), ("vars.yml", Text("a: 1\nb: [1\n"))],
        args: &["-i", "hosts.ini", "--plan", "-e", "@vars.yml"],
        says: &["vars.yml:", "invalid YAML"],
    },
    Case {
        name: "-e with invalid YAML",
        files: &[("hosts.ini", Text(HOSTS))],
        args: &["-i", "hosts.ini", "--plan", "-e", "{x: [1"],
        says: &["-e {x: [1", "not valid YAML/JSON"],
    },
    Case {
        name: "target version latest",
        files: &[("hosts.ini", Text(HOSTS))],
        args: &["-i", "hosts.ini", "--plan", "--target-version", "latest"],
        says: &["--target-version", "`latest` is not major.minor.patch"],
    },
    Case {
        name: "target version latest in the inventory",
        files: &[("hosts.ini", Text("[masters]\nm1\n[all:vars]\nupgrade_target_version=latest\n"))],
        args: &["-i", "hosts.ini", "--plan"],
        says: &["hosts.ini:4:", "upgrade_target_version", "`latest`"],
    },
    Case {
        name: "check on a playbook instead of a task file",
        files: &[("hosts.ini", Text(HOSTS)), ("site.yml", Text("- hosts: all\n  tasks:\n    - debug: msg=hi\n"))],
        args: &["check", "site.yml", "-i", "hosts.ini"],
        says: &["site.yml:1:", "playbook", "not a task list"],
    },
    Case {
        name: "check on a task file with a YAML error",
        files: &[("hosts.ini", Text(HOSTS)), ("tasks.yml", Text("- name: x\n  debug: msg=hi\n   bad: [\n"))],
        args: &["check", "tasks.yml", "-i", "hosts.ini"],
        says: &["tasks.yml:3:", "invalid YAML"],
    },
    Case {
        name: "check on a task file with a template chained past any sense",
        files: &[("hosts.ini", Text(HOSTS)), ("tasks.yml", Made(deep_template_tasks))],
        args: &["check", "tasks.yml", "-i", "hosts.ini"],
        says: &["tasks.yml:1:", "chains more than 1000 operators"],
    },
    Case {
        name: "task file nested past any sense",
        files: &[("hosts.ini", Text(HOSTS)), ("tasks.yml", Made(deep_yaml_tasks))],
        args: &["check", "tasks.yml", "-i", "hosts.ini"],
        says: &["tasks.yml:", "nested more than"],
    },
    Case {
        name: "a package manager the kubeadm steps do not know",
        files: &[(
            "hosts.ini",
            Text(
                "[masters]\nm1 ansible_host=127.0.0.1 ansible_port=1 upgrade_package_manager=zypper\n[all:vars]\nupgrade_target_version=v1.29.1\n",
            ),
        )],
        args: &["-i", "hosts.ini"],
        says: &["hosts.ini:2:", "upgrade_package_manager `zypper`", "auto", "dnf"],
    },
    Case {
        name: "a negative control-plane health timeout",
        files: &[(
            "hosts.yml",
            Text(
                "all:\n  vars:\n    upgrade_target_version: v1.29.1\n    upgrade_control_plane_ready_timeout: -10\n  children:\n    masters:\n      hosts:\n        m1: {ansible_host: 127.0.0.1, ansible_port: 1}\n",
            ),
        )],
        args: &["-i", "hosts.yml"],
        says: &["hosts.yml:4:", "upgrade_control_plane_ready_timeout is -10"],
    },
    Case {
        name: "an upgrade_pause_timeout that is not a duration",
        files: &[(
            "hosts.yml",
            Text(
                "all:\n  vars:\n    upgrade_target_version: v1.29.1\n    upgrade_pause_timeout: a while\n  children:\n    masters:\n      hosts:\n        m1: {ansible_host: 127.0.0.1, ansible_port: 1}\n",
            ),
        )],
        args: &["-i", "hosts.yml"],
        says: &["hosts.yml:4:", "upgrade_pause_timeout `a while` is not a duration", "0 waits for ever"],
    },
];

/// A `{{ x.a.a... }}` of 2,000 links: Jinja stops at its recursion limit, minijinja would overflow its stack.
fn deep_template_tasks() -> String {
    format!("- debug: msg=\"{{{{ x{} }}}}\"\n", ".a".repeat(2_000))
}

/// 150 nested block sequences: within the YAML parser's own limit, past what the tree builder accepts.
fn deep_yaml_tasks() -> String {
    format!("{}x\n", "- ".repeat(150))
}

/// What no message may show: a panic, a backtrace, or Rust's debug formatting of a value.
const NEVER: &[&str] =
    &["panicked", "RUST_BACKTRACE", "Some(", "None)", "Error {", "Os {", "os error", "kind:", "\"\"", "Ok(", "Err("];

fn scenario(case: &Case) -> Scenario {
    let mut scenario = Scenario::new();
    for (path, contents) in case.files {
        scenario = match contents {
            Text(text) => scenario.file(path, text),
            Made(make) => scenario.file(path, &make()),
            Bytes(bytes) => {
                std::fs::write(scenario.path(path), bytes).expect("write a binary file");
                scenario
            }
            Dir => {
                std::fs::create_dir_all(scenario.path(path)).expect("create a directory");
                scenario
            }
        };
    }
    scenario.args(case.args)
}

#[test]
fn every_bad_input_exits_2_with_a_located_error_and_a_hint() {
    for case in CASES {
        let outcome = scenario(case).run();
        let checks = [
            (outcome.code == 2, format!("{}: exit code {}, not 2", case.name, outcome.code)),
            (outcome.stderr.contains("hint:"), format!("{}: no hint", case.name)),
            (outcome.stderr.starts_with("error: "), format!("{}: does not start with `error: `", case.name)),
            (outcome.stderr.lines().count() <= 3, format!("{}: more than one short error", case.name)),
            (!outcome.stderr.contains("ok: "), format!("{}: reports success for something", case.name)),
            (!outcome.dir().join(".upgrade-state").exists(), format!("{}: wrote a state directory", case.name)),
        ];
        for (ok, why) in checks {
            if !ok {
                outcome.fail(&why);
            }
        }
        for needle in case.says {
            if !outcome.stderr.contains(needle) {
                outcome.fail(&format!("{}: stderr lacks {needle:?}", case.name));
            }
        }
        for bad in NEVER {
            // `-e {x: [1` quotes the user's own text, which is fine; the rest is ours.
            let ours = outcome.stderr.replace(case.args.last().copied().unwrap_or_default(), "");
            if ours.contains(bad) {
                outcome.fail(&format!("{}: stderr shows {bad:?}", case.name));
            }
        }
    }
}

/// A real run (not `--plan`) refuses a broken hook before it connects to anything: the hosts sit on a closed port,
/// so any connection attempt would be reported as refused instead.
#[test]
fn a_real_run_with_a_broken_hook_refuses_before_connecting() {
    Scenario::new()
        .file("hosts.ini", HOSTS)
        .file("hooks/pre.yml", "- name: x\n  debug: msg=hi\n   bad: [\n")
        .args(["-i", "hosts.ini", "-e", "upgrade_node_pre_hook=hooks/pre.yml"])
        .failure(2)
        .stderr_has("hooks/pre.yml:3:")
        .stderr_has("invalid YAML")
        .stderr_has("upgrade_node_pre_hook")
        .stderr_has("hint:")
        .check("nothing was contacted", |o| !o.stderr.contains("refused") && !o.stderr.contains("unreachable"))
        .check("no state was written", |o| !o.dir().join(".upgrade-state").exists());
}

#[test]
fn a_real_run_without_a_target_version_refuses_and_touches_nothing() {
    let hosts = HOSTS.replace("upgrade_target_version=v1.29.1\n", "");
    Scenario::new()
        .file("hosts.ini", &hosts)
        .args(["-i", "hosts.ini"])
        .failure(2)
        .stderr_has("hosts.ini: no target version")
        .stderr_has("hint: set upgrade_target_version")
        .check("nothing was contacted", |o| !o.stderr.contains("refused") && !o.stderr.contains("unreachable"))
        .check("no state was written", |o| !o.dir().join(".upgrade-state").exists());
}

/// An ssh timeout past any clock is "wait long", not a crash: the host on a closed port is simply unreachable.
#[test]
fn an_absurd_ssh_timeout_does_not_crash_a_run() {
    Scenario::new()
        .file("hosts.ini", HOSTS)
        .file("tasks.yml", "- command: \"true\"\n")
        .args(["run-tasks", "tasks.yml", "-i", "hosts.ini", "--limit", "m1"])
        .args(["-e", "ansible_ssh_timeout=18446744073709551615"])
        .failure(1)
        .stdout_has("Connection refused")
        .check("no panic", |o| !o.stderr.contains("panicked") && !o.stdout.contains("panicked"));
}

/// clap's own usage errors exit 2 too, and suggest the flag that was meant.
#[test]
fn a_mistyped_flag_exits_2_and_suggests_the_right_one() {
    Scenario::new()
        .file("hosts.ini", HOSTS)
        .args(["-i", "hosts.ini", "--plan", "--seriall", "2"])
        .failure(2)
        .stderr_has("'--seriall'")
        .stderr_has("'--serial'");
}

/// A delay of 0 cannot work (wait-ready would give up at once with the node cordoned): `upgrade check` says so at its
/// line, and a run refuses before it connects to anything.
#[test]
fn a_zero_ready_delay_is_refused_by_check_and_by_a_run_before_anything_is_touched() {
    let hosts = format!("{HOSTS}upgrade_node_ready_delay=0\n");
    Scenario::new()
        .file("hosts.ini", &hosts)
        .args(["check", "-i", "hosts.ini"])
        .failure(2)
        .stderr_has("hosts.ini:8:")
        .stderr_has("upgrade_node_ready_delay is `0`");
    Scenario::new()
        .file("hosts.ini", &hosts)
        .args(["-i", "hosts.ini"])
        .failure(2)
        .stderr_has("hosts.ini:8:")
        .stderr_has("hint:")
        .check("nothing was contacted", |o| !o.stderr.contains("refused") && !o.stderr.contains("unreachable"))
        .check("no state was written", |o| !o.dir().join(".upgrade-state").exists());
}

/// `ansible_password` is refused at load time (no sshpass), for run-tasks too, and the password is never shown.
#[test]
fn an_ssh_password_is_refused_at_load_time_without_showing_it() {
    Scenario::new()
        .file(
            "hosts.ini",
            "[masters]\nm1 ansible_host=127.0.0.1 ansible_port=1\n[all:vars]\nansible_ssh_pass=hunter2\n",
        )
        .file("tasks.yml", "- command: \"true\"\n")
        .args(["run-tasks", "tasks.yml", "-i", "hosts.ini"])
        .failure(2)
        .stderr_has("hosts.ini:4:")
        .stderr_has("ansible_ssh_pass is set")
        .check("the password is not shown", |o| !o.stderr.contains("hunter2") && !o.stdout.contains("hunter2"))
        .check("nothing was contacted", |o| !o.stdout.contains("refused"));
}

/// `upgrade check | head -1` and `upgrade --plan | head -1`: the reader goes after one line. The command ends as Unix
/// tools do, with its own exit code and no panic (it used to exit 101 with "failed printing to stdout").
#[test]
fn a_reader_that_closes_the_pipe_ends_the_output_without_a_panic() {
    use std::io::{BufRead, BufReader};
    use std::process::{Command, Stdio};
    let dir = tempfile::tempdir().expect("scratch directory");
    std::fs::write(dir.path().join("hosts.ini"), HOSTS).expect("inventory");
    for args in [&["check", "-i", "hosts.ini"][..], &["-i", "hosts.ini", "--plan"][..]] {
        let mut child = Command::new(env!("CARGO_BIN_EXE_upgrade"))
            .args(args)
            .current_dir(dir.path())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("upgrade starts");
        let mut first = String::new();
        BufReader::new(child.stdout.take().expect("stdout")).read_line(&mut first).expect("one line");
        // The reader is dropped here: every later write meets a closed pipe.
        let output = child.wait_with_output().expect("upgrade ends");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!first.is_empty(), "{args:?} printed nothing");
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
        assert_eq!(output.status.code(), Some(0), "{args:?}: {stderr}");
    }
}

/// The first mistakes of a new user get a pointer to the fix: a bare inventory path, and other tools' dry-run flags.
#[test]
fn a_bare_inventory_path_and_a_dry_run_flag_are_answered_with_what_to_type() {
    Scenario::new()
        .file("hosts.ini", HOSTS)
        .args(["hosts.ini"])
        .failure(2)
        .stderr_has("hint: to upgrade from this inventory, name it with --inventory: `upgrade --inventory hosts.ini`");
    for flag in ["--check", "--dry-run"] {
        Scenario::new()
            .file("hosts.ini", HOSTS)
            .args(["-i", "hosts.ini", flag])
            .failure(2)
            .stderr_has(&format!("`{flag}` is not an option of upgrade"))
            .stderr_has("--plan")
            .stderr_has("plan --live")
            .check("nothing was contacted", |o| !o.stderr.contains("refused") && !o.stdout.contains("refused"));
    }
}

/// `plan --help` lists what a plan takes; a run's own flags are not listed there, and given to a plan are refused.
#[test]
fn plan_help_lists_only_what_applies_to_a_plan_and_a_run_only_flag_is_refused() {
    let help = Scenario::new().args(["plan", "--help"]).success();
    let help = help.stdout_has("--live").stdout_has("--serial").stdout_has("--target-version");
    for run_only in
        ["--junit", "--summary-md", "--fresh", "--rollback-blue-green", "--grace-period", "--yes", "\n      --plan "]
    {
        assert!(!help.stdout.contains(run_only), "plan --help lists {run_only:?}:\n{}", help.stdout);
    }
    let refused = [
        ("--junit", Some("r.xml")),
        ("--summary-md", Some("s.md")),
        ("--fresh", None),
        ("--rollback-blue-green", None),
    ];
    for (flag, more) in refused {
        let mut args = vec!["plan", "-i", "hosts.ini", flag];
        args.extend(more);
        Scenario::new()
            .file("hosts.ini", HOSTS)
            .args(args)
            .failure(2)
            .stderr_has(&format!("{flag} applies to a run, not to a plan"));
    }
}
