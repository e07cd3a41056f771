//! Ansible Vault through the real binary: the fixtures ansible-vault encrypted (tests/fixtures/inventories/vault:
//! inline values of format 1.1 and 1.2, group_vars/ and host_vars/ files and `-e @extra.yml` encrypted whole, a
//! password file and a password script) decrypted with every way of giving a password, the values reaching the
//! tasks and masked in everything printed, and a wrong or missing password refused with exit 2 before anything
//! is touched.

use std::io::Write;
use std::path::Path;
use std::process::Stdio;

use crate::support::{Scenario, copy_dir};

const SECRETS: &[&str] = &[
    "s3cret-api-token-26",
    "ops-only-secret-26",
    "listed-secret-26",
    "db-pass-from-vault-26",
    "m1-secret-from-ops-vault-26",
    "extra-secret-from-vault-26",
];

/// A scenario holding a copy of the vault fixtures (the password script keeps its executable bit).
fn vault_scenario() -> Scenario {
    let scenario = Scenario::new().env("NO_COLOR", "1").env_remove("ANSIBLE_VAULT_PASSWORD_FILE");
    copy_dir(&Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/inventories/vault"), scenario.dir());
    scenario
}

/// Tasks that fail unless every decrypted value reached them, and that print each one.
const USE_THE_SECRETS: &str = r#"
- name: every vault value reached the tasks decrypted
  assert:
    that:
      - api_token == 's3cret-api-token-26'
      - db_password == 'db-pass-from-vault-26'
      - vault_pin == 7391
      - extra_secret == 'extra-secret-from-vault-26'
      - hostvars['n1']['keys'][1] == 'listed-secret-26'
- name: print them
  command: echo token={{ api_token }} db={{ db_password }} extra={{ extra_secret }} ops={{ ops_secret | default('') }} m1={{ m1_only_secret | default('') }}
  register: printed
- debug:
    var: printed.stdout
"#;

#[test]
fn vault_values_reach_the_tasks_and_every_output_masks_them() {
    let outcome = vault_scenario()
        .file("tasks.yml", USE_THE_SECRETS)
        .args(["run-tasks", "tasks.yml", "-v", "-i", "hosts.yml", "-e", "@extra.yml"])
        .args(["--vault-password-file", "password", "--vault-id", "ops@ops-password.sh"])
        .success()
        .stdout_has("token=******** db=******** extra=********");
    for secret in SECRETS {
        if outcome.output().contains(secret) {
            outcome.fail(&format!("the decrypted value {secret} was printed"));
        }
    }
}

#[test]
fn the_environment_and_the_prompt_give_passwords_as_ansible_core_takes_them() {
    // ANSIBLE_VAULT_PASSWORD_FILE gives the default id's password; the ops id's comes from its script.
    let scenario = vault_scenario().file("tasks.yml", USE_THE_SECRETS);
    let password_file = scenario.path("password");
    scenario
        .env("ANSIBLE_VAULT_PASSWORD_FILE", &password_file)
        .args(["run-tasks", "tasks.yml", "-i", "hosts.yml", "-e", "@extra.yml", "--vault-id", "ops@ops-password.sh"])
        .success();

    // --ask-vault-pass reads the default id's password (here from stdin: no terminal).
    let scenario =
        vault_scenario().args(["--plan", "-i", "hosts.yml", "--ask-vault-pass", "--vault-id", "ops@ops-password.sh"]);
    let mut command = scenario.command();
    let mut child =
        command.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("start upgrade");
    child.stdin.take().expect("stdin").write_all(b"inv-vault-default-pw\n").expect("type the password");
    let output = child.wait_with_output().expect("wait for upgrade");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("Vault password: "), "the prompt is asked on stderr: {stderr}");
    assert!(String::from_utf8_lossy(&output.stdout).contains("control-plane: 2 host(s)"));
}

#[test]
fn a_wrong_password_is_refused_with_exit_2_naming_the_file_and_line() {
    let outcome = vault_scenario()
        .file("wrong", "not-the-password\n")
        .args(["--plan", "-i", "hosts.yml", "--vault-password-file", "wrong", "--vault-id", "ops@ops-password.sh"])
        .failure(2)
        .stderr_has("hosts.yml:7:5: wrong vault password: none of those given decrypts this value")
        .stderr_has("hint: check the password");
    assert!(!outcome.path(".upgrade-state").exists(), "nothing was written");

    // Without the ops password the value of that id is named with its id; the file encrypted whole at its line 1.
    vault_scenario()
        .args(["check", "-i", "hosts.yml", "--vault-password-file", "password"])
        .failure(2)
        .stderr_has("(vault id `ops`)");
    vault_scenario()
        .args(["--plan", "-i", "encrypted-ini/hosts"])
        .failure(2)
        .stderr_has(
            "encrypted-ini/hosts:1:1: this file is encrypted with Ansible Vault, and no vault password was given",
        )
        .stderr_has("--vault-password-file FILE, --ask-vault-pass, --vault-id LABEL@SOURCE");
}

#[test]
fn a_password_script_that_fails_is_an_input_error() {
    use std::os::unix::fs::PermissionsExt;
    let scenario = vault_scenario().file("broken.sh", "#!/bin/sh\necho 'vault is sealed' >&2\nexit 3\n");
    std::fs::set_permissions(scenario.path("broken.sh"), std::fs::Permissions::from_mode(0o755)).unwrap();
    scenario
        .args(["--plan", "-i", "hosts.yml", "--vault-id", "ops@broken.sh"])
        .failure(2)
        .stderr_has("broken.sh: the vault password script failed (exit 3)")
        // Its stderr is the terminal's, as in ansible-core (a script may ask there).
        .stderr_has("vault is sealed");
}

/// `ansible-vault encrypt_string --vault-password-file password 'not-a-serial-26' --name upgrade_nodes_serial`.
const BAD_SERIAL_IN_A_VAULT: &str = "all:
  vars:
    upgrade_nodes_serial: !vault |
          $ANSIBLE_VAULT;1.1;AES256
          35326531383238366433613731333638646436633239643637323438356161623862666364373862
          3238373261646532626536636164363033346463383130360a373761656331306333313633393666
          30326233616336633132353966663438343736666264616537616365343866613538323330336232
          3135316462363563360a326337393337613630333833616439653330633837646165303337633632
          6637
  children:
    masters:
      hosts:
        m1:
    nodes:
      hosts:
        n1:
";

#[test]
fn an_error_about_a_decrypted_value_masks_it() {
    vault_scenario()
        .file("bad/hosts.yml", BAD_SERIAL_IN_A_VAULT)
        .args(["--plan", "-i", "bad/hosts.yml", "--vault-password-file", "password"])
        .failure(2)
        .stderr_has("upgrade_nodes_serial")
        .stderr_has("********")
        .check("the value is not shown", |o| !o.output().contains("not-a-serial-26"));
}

/// A hook's `include_vars` of a file encrypted whole and of a file holding a `!vault` value: decrypted with the
/// command's passwords, the values usable, and masked in everything printed (they were decrypted while the run went
/// on, after the output's redactor was made).
#[test]
fn include_vars_decrypts_a_vaulted_file_and_masks_its_values() {
    let tasks = r#"
- name: a vars file encrypted whole
  include_vars: hook-vars/encrypted.yml
- name: a vars file with a vault value
  include_vars:
    file: hook-vars/inline.yml
    name: inline
- name: the values arrived decrypted
  assert:
    that:
      - hook_secret == 'hook-secret-from-vault-26' and hook_port == 6443
      - inline.hook_inline == 'hook-inline-secret-26' and inline.hook_plain == 'plain-26'
- name: print them
  command: echo secret={{ hook_secret }} inline={{ inline.hook_inline }} plain={{ inline.hook_plain }}
- name: a file none of the passwords decrypts
  include_vars: hook-vars/other-password.yml
  register: other
  ignore_errors: true
- name: fails the task, naming the file
  assert:
    that:
      - other is failed
      - "'other-password.yml:1:1: wrong vault password' in other.msg"
"#;
    let outcome = vault_scenario()
        .file("tasks.yml", tasks)
        .args(["run-tasks", "tasks.yml", "-v", "-i", "hosts.yml", "--limit", "m1"])
        .args(["--vault-password-file", "password", "--vault-id", "ops@ops-password.sh"])
        .success()
        .stdout_has("secret=******** inline=******** plain=plain-26");
    for secret in ["hook-secret-from-vault-26", "hook-inline-secret-26"] {
        if outcome.output().contains(secret) {
            outcome.fail(&format!("the decrypted value {secret} was printed"));
        }
    }
}
