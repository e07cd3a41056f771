//! Where vault passwords come from, as ansible-core's `CLI.setup_vault_secrets` gathers them: `--vault-id
//! LABEL@SOURCE` (SOURCE a file, an executable that prints the password, or `prompt`), then `--vault-password-file`
//! and `ANSIBLE_VAULT_PASSWORD_FILE` (label `default`), then `--ask-vault-pass`. A password file that is executable
//! is run and its standard output is the password; one whose name ends in `-client` (before its extension) is a
//! client script, run with `--vault-id LABEL` (exit 2: it has no password for that label). A password file may
//! itself be vault-encrypted with a password given before it. A source that cannot be read is a warning while
//! another gave a password, as in ansible-core, and an error when none did.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use super::{DEFAULT_ID, VaultSecret, VaultSecrets};
use crate::error::{Error, Result};

// Here rather than beside the type in `vault/mod.rs`: this file imports that one, and that one stays free of
// where passwords come from (no two files import each other).
impl VaultSecrets {
    /// The passwords of `--vault-id` and `--vault-password-file` values (and of the environment, as the command
    /// line reads it), without a prompt: for the examples and benches that read inventories as `upgrade` does.
    pub fn from_sources(
        vault_ids: &[String],
        password_files: &[std::path::PathBuf],
    ) -> crate::error::Result<VaultSecrets> {
        let options = VaultOptions {
            vault_ids: vault_ids.to_vec(),
            password_files: password_files.to_vec(),
            ..VaultOptions::default()
        }
        .with_environment();
        Ok(gather(&options, &mut |_| None)?.0)
    }
}

/// What the command line and the environment say about vault passwords.
#[derive(Debug, Clone, Default)]
pub(crate) struct VaultOptions {
    /// `--vault-id`, in order: `LABEL@SOURCE` or `SOURCE`.
    pub vault_ids: Vec<String>,
    /// `--vault-password-file`, in order.
    pub password_files: Vec<PathBuf>,
    /// `--ask-vault-pass`.
    pub ask: bool,
    /// `ANSIBLE_VAULT_PASSWORD_FILE`, tried after the files of the command line.
    pub env_password_file: Option<PathBuf>,
    /// `ANSIBLE_VAULT_IDENTITY_LIST`: vault ids tried before those of the command line.
    pub env_identity_list: Vec<String>,
    /// `ANSIBLE_VAULT_ID_MATCH`.
    pub id_match: bool,
}

impl VaultOptions {
    /// The options of the command line with those of the environment (`ANSIBLE_VAULT_PASSWORD_FILE`,
    /// `ANSIBLE_VAULT_IDENTITY_LIST`, `ANSIBLE_VAULT_ID_MATCH`).
    pub(crate) fn with_environment(mut self) -> VaultOptions {
        if let Some(file) = std::env::var_os("ANSIBLE_VAULT_PASSWORD_FILE").filter(|f| !f.is_empty()) {
            self.env_password_file = Some(PathBuf::from(file));
        }
        if let Ok(list) = std::env::var("ANSIBLE_VAULT_IDENTITY_LIST") {
            self.env_identity_list =
                list.split(',').map(str::trim).filter(|s| !s.is_empty()).map(String::from).collect();
        }
        if let Ok(flag) = std::env::var("ANSIBLE_VAULT_ID_MATCH") {
            self.id_match = crate::ansible_compat::boolean(&serde_json::Value::String(flag)).unwrap_or(false);
        }
        self
    }
}

/// Asks the person at the terminal for a password (the question, without echo); `None` when nobody can answer.
pub(crate) type PasswordPrompt<'a> = &'a mut dyn FnMut(&str) -> Option<String>;

/// The passwords, in the order they are tried, and the warnings about sources that gave none.
pub(crate) fn gather(options: &VaultOptions, prompt: PasswordPrompt<'_>) -> Result<(VaultSecrets, Vec<String>)> {
    let mut slugs: Vec<(Option<String>, String)> = Vec::new();
    for slug in options.env_identity_list.iter().chain(&options.vault_ids) {
        // ansible-core's `split_vault_id`: the label is what stands before the first `@`.
        match slug.split_once('@') {
            Some((label, source)) => slugs.push((Some(label.to_string()), source.to_string())),
            None => slugs.push((None, slug.clone())),
        }
    }
    for file in options.password_files.iter().chain(&options.env_password_file) {
        slugs.push((Some(DEFAULT_ID.to_string()), file.to_string_lossy().into_owned()));
    }
    if options.ask {
        slugs.push((Some(DEFAULT_ID.to_string()), ASK_VAULT_PASS.to_string()));
    }
    let mut secrets: Vec<VaultSecret> = Vec::new();
    let mut warnings = Vec::new();
    let mut last_error = None;
    for (label, source) in slugs {
        let id = label.clone().filter(|l| !l.is_empty()).unwrap_or_else(|| DEFAULT_ID.to_string());
        if source == "prompt" || source == ASK_VAULT_PASS {
            let question = if source == ASK_VAULT_PASS {
                "Vault password: ".to_string()
            } else {
                format!("Vault password ({id}): ")
            };
            let password = prompt(&question).ok_or_else(|| {
                Error::input(format!("no vault password could be asked for `{id}`: there is no terminal to ask on"))
                    .hint("give the password in a file: --vault-password-file FILE or --vault-id LABEL@FILE")
            })?;
            let password = password.trim().as_bytes().to_vec();
            if password.is_empty() {
                return Err(Error::input("an empty vault password was given at the prompt")
                    .hint("type the vault password, or give it with --vault-password-file FILE"));
            }
            secrets.push(VaultSecret::new(&id, password, "the prompt"));
            continue;
        }
        let so_far = VaultSecrets::from_secrets(std::mem::take(&mut secrets), options.id_match);
        let read = read_password_file(&absolute_path(&source), label.as_deref(), &so_far);
        secrets = so_far.secrets;
        match read {
            Ok(password) => secrets.push(VaultSecret::new(&id, password, &source)),
            Err(e) => {
                warnings.push(format!("vault password `{id}`: {e}"));
                last_error = Some(e);
            }
        }
    }
    if let Some(e) = last_error.filter(|_| secrets.is_empty()) {
        return Err(e);
    }
    Ok((VaultSecrets::from_secrets(secrets, options.id_match), warnings))
}

/// The source ansible-core makes of `--ask-vault-pass`.
const ASK_VAULT_PASS: &str = "prompt_ask_vault_pass";

/// The absolute path of a password file, `~/` expanded, as ansible-core's `unfrackpath` makes it: a script named
/// `pw.sh` is run from the current directory, not looked up on PATH.
fn absolute_path(path: &str) -> PathBuf {
    let expanded = match (path.strip_prefix("~/"), std::env::var("HOME")) {
        (Some(rest), Ok(home)) => PathBuf::from(home).join(rest),
        _ => PathBuf::from(path),
    };
    std::path::absolute(&expanded).unwrap_or(expanded)
}

/// A password file's password: its content, or what it prints when it is executable.
fn read_password_file(path: &Path, label: Option<&str>, earlier: &VaultSecrets) -> Result<Vec<u8>> {
    let meta = std::fs::metadata(path).map_err(|e| {
        Error::read_file(path, e)
            .hint("name the vault password file with --vault-password-file or --vault-id LABEL@FILE")
    })?;
    if meta.is_dir() {
        return Err(Error::input("a vault password file cannot be a directory").in_file(path).hint("name the file"));
    }
    use std::os::unix::fs::PermissionsExt;
    let password = if meta.permissions().mode() & 0o111 != 0 {
        run_password_script(path, label)?
    } else {
        let bytes = std::fs::read(path).map_err(|e| Error::read_file(path, e))?;
        let bytes = bytes.trim_ascii().to_vec();
        // A password file may itself be a vault, encrypted with a password given before it.
        let bytes = match std::str::from_utf8(&bytes).ok().filter(|t| super::is_encrypted(t)) {
            Some(text) => earlier.decrypt(text).map_err(|_| {
                Error::input("this vault password file is vault-encrypted, and no password given before it decrypts it")
                    .in_file(path)
                    .hint(
                        "give the password it is encrypted with first (an earlier --vault-id or --vault-password-file)",
                    )
            })?,
            None => bytes,
        };
        trim_line_ends(&bytes).to_vec()
    };
    if password.is_empty() {
        return Err(Error::input("the vault password file gave an empty password")
            .in_file(path)
            .hint("write the password in the file (or have the script print it)"));
    }
    Ok(password)
}

/// ansible-core's `ScriptVaultSecret`: stdout is the password; stderr goes to the terminal (a script may ask there),
/// except for a client script, whose stderr is its message.
fn run_password_script(path: &Path, label: Option<&str>) -> Result<Vec<u8>> {
    let client = path.file_stem().is_some_and(|s| s.to_string_lossy().ends_with("-client"));
    let mut command = Command::new(path);
    command.stdout(Stdio::piped()).stderr(if client { Stdio::piped() } else { Stdio::inherit() });
    if let (true, Some(label)) = (client, label) {
        command.args(["--vault-id", label]);
    }
    let output = command.output().map_err(|e| {
        Error::input(format!("the vault password script cannot be run: {}", crate::error::io_reason(&e)))
            .in_file(path)
            .hint("if this is not a script, remove the executable bit from the file (chmod -x)")
    })?;
    let stderr = String::from_utf8_lossy(&output.stderr).trim().to_string();
    match output.status.code() {
        Some(0) => Ok(trim_line_ends(&output.stdout).to_vec()),
        Some(2) if client => Err(Error::input(format!(
            "the vault password client script has no password for vault id `{}`: {stderr}",
            label.unwrap_or(DEFAULT_ID)
        ))
        .in_file(path)
        .hint("give a vault id the script knows: --vault-id LABEL@SCRIPT")),
        status => Err(Error::input(format!(
            "the vault password script failed (exit {}){}",
            status.map_or("by a signal".to_string(), |c| c.to_string()),
            if stderr.is_empty() { String::new() } else { format!(": {stderr}") }
        ))
        .in_file(path)
        .hint("run the script by hand: it must print the password and exit 0")),
    }
}

/// Python's `bytes.strip(b'\r\n')`.
fn trim_line_ends(bytes: &[u8]) -> &[u8] {
    let start = bytes.iter().position(|b| !matches!(b, b'\r' | b'\n')).unwrap_or(bytes.len());
    let end = bytes.iter().rposition(|b| !matches!(b, b'\r' | b'\n')).map_or(start, |i| i + 1);
    &bytes[start..end]
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn write(dir: &Path, name: &str, text: &str, mode: u32) -> PathBuf {
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
        path
    }

    fn ids(secrets: &VaultSecrets) -> Vec<String> {
        secrets.secrets.iter().map(|s| format!("{}={}", s.id, String::from_utf8_lossy(&s.password))).collect()
    }

    #[test]
    fn sources_come_in_ansible_core_order_with_their_labels() {
        let dir = tempfile::tempdir().unwrap();
        let plain = write(dir.path(), "pw", "  from-file \n", 0o600);
        let script = write(dir.path(), "pw.sh", "#!/bin/sh\necho from-script\n", 0o700);
        let client =
            write(dir.path(), "ops-client.sh", "#!/bin/sh\n[ \"$2\" = ops ] && echo \"for-$2\" || exit 2\n", 0o700);
        let options = VaultOptions {
            vault_ids: vec![format!("ops@{}", client.display()), format!("s@{}", script.display())],
            password_files: vec![plain.clone()],
            ask: true,
            env_password_file: Some(plain),
            ..VaultOptions::default()
        };
        let mut asked = Vec::new();
        let (secrets, warnings) = gather(&options, &mut |q| {
            asked.push(q.to_string());
            Some("typed\n".into())
        })
        .unwrap();
        assert_eq!(
            ids(&secrets),
            ["ops=for-ops", "s=from-script", "default=from-file", "default=from-file", "default=typed"]
        );
        assert_eq!(asked, ["Vault password: "]);
        assert!(warnings.is_empty());
    }

    #[test]
    fn a_missing_file_is_a_warning_beside_another_password_and_an_error_alone() {
        let dir = tempfile::tempdir().unwrap();
        let plain = write(dir.path(), "pw", "x-pass", 0o600);
        let missing = dir.path().join("nope");
        let options = VaultOptions { password_files: vec![missing.clone(), plain], ..VaultOptions::default() };
        let (secrets, warnings) = gather(&options, &mut |_| None).unwrap();
        assert_eq!(ids(&secrets), ["default=x-pass"]);
        assert!(warnings[0].contains("no such file"), "{warnings:?}");
        let alone = VaultOptions { password_files: vec![missing], ..VaultOptions::default() };
        let err = gather(&alone, &mut |_| None).unwrap_err();
        assert!(err.to_string().contains("nope: no such file"), "{err}");
    }

    #[test]
    fn a_failing_script_an_empty_file_and_no_terminal_are_errors_that_say_what_to_do() {
        let dir = tempfile::tempdir().unwrap();
        let failing = write(dir.path(), "bad.sh", "#!/bin/sh\necho oops >&2\nexit 3\n", 0o700);
        let err =
            gather(&VaultOptions { password_files: vec![failing], ..Default::default() }, &mut |_| None).unwrap_err();
        assert!(err.message.contains("failed (exit 3)"), "{err}");
        let empty = write(dir.path(), "empty", "\n\n", 0o600);
        let err =
            gather(&VaultOptions { password_files: vec![empty], ..Default::default() }, &mut |_| None).unwrap_err();
        assert!(err.message.contains("empty password"), "{err}");
        let err = gather(&VaultOptions { ask: true, ..Default::default() }, &mut |_| None).unwrap_err();
        assert!(err.hint.unwrap().contains("--vault-password-file"));
        assert_eq!(err.kind, crate::error::ErrorKind::Input);
    }
}
