//! How a host is reached over SSH, read from its variables the way Ansible's ssh plugin reads them, and the
//! `ssh` arguments an inventory gives turned into the config lines the multiplexing master reads.

use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::Duration;

use openssh::KnownHosts;
use serde_json::{Map, Value};

use crate::ansible_compat::{boolean, shlex_split};
use crate::connection::ConnectionError;

/// How a host is reached, read from its variables the way Ansible's ssh plugin reads them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SshSettings {
    /// The inventory name, for messages.
    pub name: String,
    /// What `ssh` is asked to connect to (`ansible_host`, else the inventory name); `~/.ssh/config` matches on it.
    pub address: String,
    pub port: Option<u16>,
    pub user: Option<String>,
    pub private_key_file: Option<String>,
    /// `ansible_ssh_args`, `ansible_ssh_common_args` and `ansible_ssh_extra_args`, split like a shell would.
    pub args: Vec<String>,
    /// `ansible_host_key_checking` / `ansible_ssh_host_key_checking` when set.
    pub host_key_checking: Option<bool>,
    /// `ansible_ssh_timeout` when set: overrides the run's connect timeout for this host.
    pub connect_timeout: Option<Duration>,
}

impl SshSettings {
    /// Reads the connection variables of one host (after precedence and templating). Where Ansible accepts two
    /// names, the one its ssh plugin lists last wins (`ansible_ssh_host` over `ansible_host`, and so on).
    pub fn from_vars(name: &str, vars: &Map<String, Value>) -> Result<Self, ConnectionError> {
        let address = last_string(vars, &["ansible_host", "ansible_ssh_host"])?.unwrap_or_else(|| name.to_string());
        if address.is_empty() || address.starts_with('-') || address.contains(char::is_whitespace) {
            return Err(bad_var(name, "ansible_host", &format!("`{address}` is not a host name or address")));
        }
        let port = match last_value(vars, &["ansible_port", "ansible_ssh_port"]) {
            None | Some((_, Value::Null)) => None,
            Some((var, value)) => Some(
                parse_port(value)
                    .ok_or_else(|| bad_var(name, var, &format!("{} is not a port number (1-65535)", render(value))))?,
            ),
        };
        let user = last_string(vars, &["ansible_user", "ansible_ssh_user"])?.filter(|u| !u.is_empty());
        let private_key_file = last_string(vars, &["ansible_private_key_file", "ansible_ssh_private_key_file"])?
            .filter(|k| !k.is_empty())
            .map(|k| expand_home(&k));
        let mut args = Vec::new();
        for var in ["ansible_ssh_args", "ansible_ssh_common_args", "ansible_ssh_extra_args"] {
            if let Some(text) = last_string(vars, &[var])? {
                args.extend(shlex_split(&text, false).map_err(|e| {
                    let why =
                        if e.contains("quotation") { "has an unclosed quote" } else { "ends with a lone backslash" };
                    bad_var(name, var, why)
                })?);
            }
        }
        let host_key_checking = match last_value(vars, &["ansible_host_key_checking", "ansible_ssh_host_key_checking"])
        {
            None | Some((_, Value::Null)) => None,
            Some((var, value)) => {
                Some(boolean(value).ok_or_else(|| bad_var(name, var, &format!("{} is not a boolean", render(value))))?)
            }
        };
        let connect_timeout = match last_value(vars, &["ansible_ssh_timeout"]) {
            None | Some((_, Value::Null)) => None,
            Some((var, value)) => Some(Duration::from_secs(
                parse_u64(value).ok_or_else(|| bad_var(name, var, &format!("{} is not a number", render(value))))?,
            )),
        };
        Ok(SshSettings {
            name: name.to_string(),
            address,
            port,
            user,
            private_key_file,
            args,
            host_key_checking,
            connect_timeout,
        })
    }

    /// `address:port` as a user would name it in a message.
    pub fn endpoint(&self) -> String {
        let port = self.port.unwrap_or(22);
        if self.address.contains(':') {
            format!("[{}]:{port}", self.address)
        } else {
            format!("{}:{port}", self.address)
        }
    }

    /// The private ssh config file for this host: the inventory's settings first (first match wins in ssh), then the
    /// user's and the system's configuration, then our defaults.
    pub fn config_file(&self) -> Result<String, ConnectionError> {
        let mut lines = Vec::new();
        if let Some(port) = self.port {
            lines.push(format!("Port {port}"));
        }
        if let Some(key) = &self.private_key_file {
            lines.push(format!("IdentityFile {}", config_quote(key)));
        }
        if let Some(user) = &self.user {
            lines.push(format!("User {}", config_quote(user)));
        }
        let translated = translate_ssh_args(&self.args).map_err(|m| {
            ConnectionError::Unreachable(format!("{}: ansible_ssh_common_args/ansible_ssh_extra_args: {m}", self.name))
        })?;
        lines.extend(translated.options);
        match translated.config_file {
            // `ssh -F FILE` replaces both the user's and the system's configuration.
            Some(file) => lines.push(format!("Include {}", config_quote(&file))),
            None => {
                lines.push("Include ~/.ssh/config".to_string());
                lines.push("Include /etc/ssh/ssh_config".to_string());
            }
        }
        // Defaults the user's configuration may override: notice a dead host within a minute instead of never.
        lines.push("Host *".to_string());
        lines.push("  ServerAliveInterval 15".to_string());
        lines.push("  ServerAliveCountMax 4".to_string());
        let mut text = format!("# generated by upgrade for host {}\n", self.name.replace('\n', " "));
        for line in lines {
            if line.contains(['\n', '\r', '\0']) {
                return Err(ConnectionError::Unreachable(format!(
                    "{}: an ssh option contains a line break: {line:?}",
                    self.name
                )));
            }
            let _ = writeln!(text, "{line}");
        }
        Ok(text)
    }

    /// The host key policy: `--accept-new-host-keys` wins, then what the inventory says, else strict.
    pub(super) fn known_hosts_policy(&self, accept_new: bool) -> KnownHosts {
        if accept_new {
            return KnownHosts::Add;
        }
        if self.host_key_checking == Some(false) {
            return KnownHosts::Accept;
        }
        match option_value(&self.args, "stricthostkeychecking").map(|v| v.to_ascii_lowercase()).as_deref() {
            Some("no" | "off") => KnownHosts::Accept,
            Some("accept-new") => KnownHosts::Add,
            _ => KnownHosts::Strict,
        }
    }
}

/// The last of several alias variables that is set, as Ansible's config manager picks it.
fn last_value<'a>(vars: &'a Map<String, Value>, names: &[&'static str]) -> Option<(&'static str, &'a Value)> {
    names.iter().rev().find_map(|n| vars.get(*n).map(|v| (*n, v)))
}

fn last_string(vars: &Map<String, Value>, names: &[&'static str]) -> Result<Option<String>, ConnectionError> {
    match last_value(vars, names) {
        None | Some((_, Value::Null)) => Ok(None),
        Some((_, Value::String(s))) => Ok(Some(s.clone())),
        Some((_, v @ (Value::Number(_) | Value::Bool(_)))) => Ok(Some(v.to_string())),
        Some((var, v)) => Err(ConnectionError::Unreachable(format!("{var} must be a string, not {}", render(v)))),
    }
}

fn bad_var(host: &str, var: &str, problem: &str) -> ConnectionError {
    ConnectionError::Unreachable(format!("{host}: {var}: {problem}"))
}

fn render(value: &Value) -> String {
    match value {
        Value::String(s) => format!("`{s}`"),
        other => format!("`{other}`"),
    }
}

fn parse_u64(value: &Value) -> Option<u64> {
    match value {
        Value::Number(n) => n.as_u64(),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

fn parse_port(value: &Value) -> Option<u16> {
    parse_u64(value).and_then(|n| u16::try_from(n).ok()).filter(|p| *p > 0)
}

/// `~/key` as Ansible expands it (ssh would too, but only inside its config, not in our messages).
fn expand_home(path: &str) -> String {
    match (path.strip_prefix("~/"), std::env::var_os("HOME")) {
        (Some(rest), Some(home)) => PathBuf::from(home).join(rest).to_string_lossy().into_owned(),
        _ => path.to_string(),
    }
}

/// A value as ssh's config reader takes it: double-quoted when it holds spaces or quotes.
fn config_quote(value: &str) -> String {
    if !value.is_empty() && !value.contains(|c: char| c.is_whitespace() || c == '"' || c == '\\' || c == '#') {
        return value.to_string();
    }
    format!("\"{}\"", value.replace('\\', "\\\\").replace('"', "\\\""))
}

/// `ssh` command-line arguments turned into config-file lines.
#[derive(Debug, Default, PartialEq, Eq)]
struct TranslatedArgs {
    options: Vec<String>,
    /// `-F FILE`: replaces the user's and the system's configuration.
    config_file: Option<String>,
}

/// Flags without a value that only change what `ssh` prints or how it runs interactively; harmless to drop here.
const IGNORED_FLAGS: &str = "qvtTnNsfGVkKgMxXYy";

fn translate_ssh_args(args: &[String]) -> Result<TranslatedArgs, String> {
    let mut out = TranslatedArgs::default();
    let mut i = 0;
    while i < args.len() {
        let arg = &args[i];
        i += 1;
        let Some(flags) = arg.strip_prefix('-').filter(|f| !f.is_empty()) else {
            return Err(format!("`{arg}` is not an ssh option"));
        };
        for (at, flag) in flags.char_indices() {
            let simple = match flag {
                'A' => Some("ForwardAgent yes"),
                'a' => Some("ForwardAgent no"),
                'C' => Some("Compression yes"),
                '4' => Some("AddressFamily inet"),
                '6' => Some("AddressFamily inet6"),
                f if IGNORED_FLAGS.contains(f) => Some(""),
                _ => None,
            };
            if let Some(line) = simple {
                if !line.is_empty() {
                    out.options.push(line.to_string());
                }
                continue;
            }
            // A flag with a value: the rest of this word, or the next word.
            let rest = &flags[at + flag.len_utf8()..];
            let value = if !rest.is_empty() {
                rest.to_string()
            } else if i < args.len() {
                i += 1;
                args[i - 1].clone()
            } else {
                return Err(format!("-{flag} needs a value"));
            };
            let keyword = match flag {
                'o' => {
                    out.options.push(value);
                    break;
                }
                'F' => {
                    out.config_file = Some(value);
                    break;
                }
                'i' => "IdentityFile",
                'J' => "ProxyJump",
                'p' => "Port",
                'l' => "User",
                'b' => "BindAddress",
                'B' => "BindInterface",
                'c' => "Ciphers",
                'm' => "MACs",
                'D' => "DynamicForward",
                'L' => "LocalForward",
                'R' => "RemoteForward",
                'I' => "PKCS11Provider",
                'P' => "Tag",
                // The control socket and the log are ours; an escape character means nothing without a terminal.
                'S' | 'E' | 'e' | 'O' | 'W' | 'w' | 'Q' => break,
                other => return Err(format!("-{other} is not an ssh option upgrade understands")),
            };
            out.options.push(format!("{keyword} {}", config_quote(&value)));
            break;
        }
    }
    Ok(out)
}

/// The value of an option (`-o Key=Value`, `-oKey Value`, `-o "Key Value"`) the user gave, keyword matched
/// case-insensitively; the first one wins, as in ssh.
pub(super) fn option_value(args: &[String], keyword: &str) -> Option<String> {
    let translated = translate_ssh_args(args).ok()?;
    translated.options.iter().find_map(|line| {
        let line = line.trim_start();
        let end = line.find(|c: char| c == '=' || c.is_whitespace())?;
        let (key, rest) = line.split_at(end);
        key.eq_ignore_ascii_case(keyword).then(|| {
            rest.trim_start_matches(|c: char| c == '=' || c.is_whitespace()).trim().trim_matches('"').to_string()
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn vars(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap_or_default()
    }

    #[test]
    fn reads_ansible_variables_with_their_aliases() {
        let s = SshSettings::from_vars(
            "node1",
            &vars(json!({"ansible_host": "10.0.0.1", "ansible_ssh_host": "10.0.0.2", "ansible_port": "2222",
                          "ansible_user": "core", "ansible_ssh_private_key_file": "/k/id",
                          "ansible_ssh_common_args": "-o ProxyJump=bastion -o 'ServerAliveInterval 5'"})),
        )
        .unwrap();
        assert_eq!(s.address, "10.0.0.2");
        assert_eq!(s.port, Some(2222));
        assert_eq!(s.user.as_deref(), Some("core"));
        assert_eq!(s.private_key_file.as_deref(), Some("/k/id"));
        assert_eq!(s.args, ["-o", "ProxyJump=bastion", "-o", "ServerAliveInterval 5"]);
        assert_eq!(s.endpoint(), "10.0.0.2:2222");
        let bare = SshSettings::from_vars("web", &Map::new()).unwrap();
        assert_eq!((bare.address.as_str(), bare.port, bare.endpoint()), ("web", None, "web:22".to_string()));
    }

    #[test]
    fn rejects_bad_ports_and_option_like_hosts() {
        for bad in [json!({"ansible_port": "http"}), json!({"ansible_port": 70000}), json!({"ansible_port": 0})] {
            let err = SshSettings::from_vars("h", &vars(bad)).unwrap_err();
            assert!(err.to_string().contains("ansible_port"), "{err}");
        }
        let err = SshSettings::from_vars("h", &vars(json!({"ansible_host": "-oProxyCommand=x"}))).unwrap_err();
        assert!(err.to_string().contains("ansible_host"), "{err}");
    }

    #[test]
    fn config_file_puts_inventory_settings_before_the_users_config() {
        let s = SshSettings::from_vars(
            "h",
            &vars(json!({"ansible_port": 2200, "ansible_user": "ops", "ansible_ssh_private_key_file": "/keys/my key",
                          "ansible_ssh_common_args": "-o UserKnownHostsFile=/kh -J jump -C -q",
                          "ansible_ssh_extra_args": "-oStrictHostKeyChecking=yes"})),
        )
        .unwrap();
        let text = s.config_file().unwrap();
        let lines: Vec<&str> = text.lines().skip(1).collect();
        assert_eq!(
            lines,
            [
                "Port 2200",
                "IdentityFile \"/keys/my key\"",
                "User ops",
                "UserKnownHostsFile=/kh",
                "ProxyJump jump",
                "Compression yes",
                "StrictHostKeyChecking=yes",
                "Include ~/.ssh/config",
                "Include /etc/ssh/ssh_config",
                "Host *",
                "  ServerAliveInterval 15",
                "  ServerAliveCountMax 4",
            ]
        );
        let with_f = SshSettings::from_vars("h", &vars(json!({"ansible_ssh_common_args": "-F /etc/my.conf"}))).unwrap();
        assert!(with_f.config_file().unwrap().contains("Include /etc/my.conf\nHost *"));
        let bad = SshSettings::from_vars("h", &vars(json!({"ansible_ssh_common_args": "-Z"}))).unwrap();
        assert!(bad.config_file().is_err());
    }

    #[test]
    fn host_key_policy_is_strict_unless_told_otherwise() {
        let policy = |v: Value, accept_new| {
            format!("{:?}", SshSettings::from_vars("h", &vars(v)).unwrap().known_hosts_policy(accept_new))
        };
        assert_eq!(policy(json!({}), false), "Strict");
        assert_eq!(policy(json!({}), true), "Add");
        assert_eq!(policy(json!({"ansible_ssh_common_args": "-o StrictHostKeyChecking=no"}), false), "Accept");
        assert_eq!(policy(json!({"ansible_ssh_common_args": "-o StrictHostKeyChecking=accept-new"}), false), "Add");
        assert_eq!(policy(json!({"ansible_host_key_checking": "false"}), false), "Accept");
        assert_eq!(policy(json!({"ansible_ssh_common_args": "-o StrictHostKeyChecking=no"}), true), "Add");
    }
}
