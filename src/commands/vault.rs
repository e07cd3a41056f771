//! The vault passwords of one invocation, from `--vault-id`, `--vault-password-file`, `--ask-vault-pass` and the
//! environment, asked for on the terminal without echo where a prompt is wanted.

use std::io::{BufRead, IsTerminal, Write};

use crate::cli::InventoryArgs;
use crate::console::errln;
use crate::error::Result;
use crate::vault::VaultSecrets;
use crate::vault::passwords::{VaultOptions, gather};

/// The passwords the command line and the environment give; the sources that gave none are said as warnings.
pub(super) fn vault_secrets(args: &InventoryArgs) -> Result<VaultSecrets> {
    let options = VaultOptions {
        vault_ids: args.vault_id.clone(),
        password_files: args.vault_password_file.clone(),
        ask: args.ask_vault_pass,
        ..VaultOptions::default()
    }
    .with_environment();
    let (secrets, warnings) = gather(&options, &mut ask_password)?;
    for warning in warnings {
        errln!("warning: {warning}");
    }
    Ok(secrets)
}

/// Asks on the terminal with echo off, as ansible-core's prompt does; without a terminal, reads a line from stdin
/// (`echo "$PW" | upgrade --ask-vault-pass ...`), as Python's getpass falls back to.
fn ask_password(question: &str) -> Option<String> {
    let stdin = std::io::stdin();
    let mut stderr = std::io::stderr();
    let _ = write!(stderr, "{question}").and_then(|()| stderr.flush());
    let echo_off = stdin.is_terminal().then(EchoOff::new).flatten();
    let mut line = String::new();
    let read = stdin.lock().read_line(&mut line);
    if echo_off.is_some() {
        let _ = writeln!(stderr);
    }
    drop(echo_off);
    match read {
        Ok(0) | Err(_) => None,
        Ok(_) => Some(line.trim_end_matches(['\r', '\n']).to_string()),
    }
}

/// The terminal's echo turned off while it lives.
struct EchoOff {
    saved: libc::termios,
}

impl EchoOff {
    fn new() -> Option<EchoOff> {
        // SAFETY: tcgetattr and tcsetattr read and write the termios struct passed, which lives for both calls;
        // fd 0 is stdin, a terminal (checked by the caller).
        unsafe {
            let mut saved: libc::termios = std::mem::zeroed();
            if libc::tcgetattr(0, &mut saved) != 0 {
                return None;
            }
            let mut quiet = saved;
            quiet.c_lflag &= !libc::ECHO;
            quiet.c_lflag |= libc::ECHONL;
            if libc::tcsetattr(0, libc::TCSANOW, &quiet) != 0 {
                return None;
            }
            Some(EchoOff { saved })
        }
    }
}

impl Drop for EchoOff {
    fn drop(&mut self) {
        // SAFETY: puts back the settings read in `new`, on the same descriptor.
        unsafe {
            libc::tcsetattr(0, libc::TCSANOW, &self.saved);
        }
    }
}
