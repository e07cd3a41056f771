//! The variables of the built-in steps and of the connection that must hold a workable value, checked when the
//! inventory is read (`upgrade check`, the start of a run, `run-tasks`): a value that cannot work stops everything
//! before any host is touched, naming the file and line, instead of failing half-way with a node cordoned
//! (`upgrade_node_ready_delay: 0` used to fail wait-ready at once with a false "the cluster did not answer").

use serde_json::Value;

use crate::error::{Error, Result};
use crate::inventory::{Var, Vars};

/// Seconds that must be at least 1: a zero delay divides the wait by zero, a zero timeout gives up before asking.
const POSITIVE_SECONDS: &[(&str, &str)] = &[
    ("upgrade_node_ready_delay", "the pause between two polls of wait-ready"),
    ("upgrade_node_ready_timeout", "how long wait-ready waits for the node"),
    ("upgrade_reboot_timeout", "how long a reboot may take"),
];

/// Seconds where 0 means "no limit" and only a negative value is wrong.
const NON_NEGATIVE_SECONDS: &[(&str, &str)] =
    &[("upgrade_drain_timeout_seconds", "the drain's --timeout (0 leaves it out)")];

/// Password logins over SSH: not supported (no sshpass), refused rather than silently ignored.
pub(crate) const SSH_PASSWORD_VARIABLES: &[&str] = &["ansible_password", "ansible_ssh_pass", "ansible_ssh_password"];

/// Checks one host's variables (after precedence, `-e` included).
pub(crate) fn check_host(host: &str, vars: &Vars) -> Result<()> {
    for (name, what) in POSITIVE_SECONDS {
        seconds(host, vars, name, what, 1)?;
    }
    for (name, what) in NON_NEGATIVE_SECONDS {
        seconds(host, vars, name, what, 0)?;
    }
    if let Some(var) = literal(vars, "upgrade_no_log") {
        if crate::ansible_compat::boolean(&var.value).is_none() {
            return Err(located(
                Error::input(format!("{host}: upgrade_no_log must be true or false, not `{}`", shown(&var.value)))
                    .hint("write upgrade_no_log: true to hide the output of the built-in steps"),
                var,
            ));
        }
    }
    if let Some(var) = vars.get("upgrade_secret_vars") {
        if secret_var_names(&var.value).is_none() {
            return Err(located(
                Error::input(format!(
                    "{host}: upgrade_secret_vars must be a list of variable names, not `{}`",
                    shown(&var.value)
                ))
                .hint("write e.g. upgrade_secret_vars: [upgrade_kubectl_token, vault_password]"),
                var,
            ));
        }
    }
    check_no_ssh_password(host, vars)
}

/// `ansible_password` and its aliases, on a host reached over SSH.
pub(crate) fn check_no_ssh_password(host: &str, vars: &Vars) -> Result<()> {
    let local = vars.get("ansible_connection").and_then(|v| v.value.as_str()).is_some_and(|c| c.trim() == "local");
    if local {
        return Ok(());
    }
    for name in SSH_PASSWORD_VARIABLES {
        if let Some(var) = vars.get(*name) {
            if matches!(&var.value, Value::Null) || var.value.as_str().is_some_and(|s| s.is_empty()) {
                continue;
            }
            return Err(located(
                Error::input(format!(
                    "{host}: {name} is set, but SSH password logins are not supported (the password is never used)"
                ))
                .hint(
                    "use key authentication: ssh-copy-id to the host, then ansible_ssh_private_key_file or an \
                     ssh-agent; remove the password variable (ansible_become_password for sudo is supported)",
                ),
                var,
            ));
        }
    }
    Ok(())
}

/// The names `upgrade_secret_vars` lists: a list of strings (a single name is accepted as a list of one).
pub(crate) fn secret_var_names(value: &Value) -> Option<Vec<String>> {
    match value {
        Value::Null => Some(Vec::new()),
        Value::String(s) if !s.contains("{{") => {
            Some(s.split(',').map(str::trim).filter(|s| !s.is_empty()).map(str::to_string).collect())
        }
        Value::Array(items) => items.iter().map(|i| i.as_str().map(|s| s.trim().to_string())).collect(),
        _ => None,
    }
}

fn seconds(host: &str, vars: &Vars, name: &str, what: &str, at_least: i64) -> Result<()> {
    let Some(var) = literal(vars, name) else { return Ok(()) };
    let number = match &var.value {
        Value::Number(n) => n.as_i64().or_else(|| n.as_f64().filter(|f| f.fract() == 0.0).map(|f| f as i64)),
        Value::String(s) => s.trim().parse::<i64>().ok(),
        _ => None,
    };
    let floor =
        if at_least > 0 { "a whole number of seconds, at least 1" } else { "a whole number of seconds, 0 or more" };
    match number {
        Some(n) if n >= at_least => Ok(()),
        _ => Err(located(
            Error::input(format!("{host}: {name} is `{}`: {what} must be {floor}", shown(&var.value)))
                .hint(format!("set {name} to {floor}, or remove it for the default")),
            var,
        )),
    }
}

/// The variable when it is set to a value that can be checked now: a templated one is only known when used.
fn literal<'a>(vars: &'a Vars, name: &str) -> Option<&'a Var> {
    vars.get(name).filter(|v| !v.value.as_str().is_some_and(|s| s.contains("{{") || s.contains("{%")))
}

fn shown(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn located(err: Error, var: &Var) -> Error {
    var.origin.locate(err)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Location;
    use crate::inventory::Origin;
    use serde_json::json;

    fn vars(pairs: &[(&str, Value)]) -> Vars {
        let mut vars = Vars::new();
        for (i, (k, v)) in pairs.iter().enumerate() {
            let origin = Origin::Inventory(Location::new("hosts.yml", i + 3, 5));
            vars.insert(k.to_string(), Var { value: v.clone(), origin });
        }
        vars
    }

    #[test]
    fn delays_and_timeouts_that_cannot_work_are_refused_at_their_line() {
        for (name, bad) in [
            ("upgrade_node_ready_delay", json!(0)),
            ("upgrade_node_ready_delay", json!("0")),
            ("upgrade_node_ready_timeout", json!(-5)),
            ("upgrade_reboot_timeout", json!("soon")),
            ("upgrade_drain_timeout_seconds", json!(-1)),
            ("upgrade_node_ready_delay", json!(1.5)),
        ] {
            let err = check_host("m1", &vars(&[("ansible_host", json!("x")), (name, bad.clone())])).unwrap_err();
            assert_eq!(err.kind.exit_code(), 2, "{name}={bad}");
            assert!(err.message.contains(name), "{}", err.message);
            assert_eq!(err.location.as_ref().map(|l| l.line), Some(4), "{name}={bad}: {err}");
        }
        for (name, good) in [
            ("upgrade_node_ready_delay", json!(1)),
            ("upgrade_node_ready_timeout", json!("600")),
            ("upgrade_drain_timeout_seconds", json!(0)),
            ("upgrade_reboot_timeout", json!("{{ slow | default(900) }}")),
        ] {
            assert!(check_host("m1", &vars(&[(name, good.clone())])).is_ok(), "{name}={good}");
        }
    }

    #[test]
    fn ssh_passwords_are_refused_with_a_hint_to_use_keys_but_not_on_local_hosts() {
        for name in SSH_PASSWORD_VARIABLES {
            let err = check_host("n1", &vars(&[(name, json!("hunter2"))])).unwrap_err();
            assert!(err.message.contains(name) && !err.message.contains("hunter2"), "{}", err.message);
            assert!(err.hint.as_deref().is_some_and(|h| h.contains("key")), "{err}");
            assert_eq!(err.location.as_ref().map(|l| l.line), Some(3));
        }
        let local = vars(&[("ansible_connection", json!("local")), ("ansible_password", json!("x"))]);
        assert!(check_host("localhost", &local).is_ok());
        assert!(check_host("n1", &vars(&[("ansible_become_password", json!("x"))])).is_ok());
    }

    #[test]
    fn secret_settings_have_the_right_shape() {
        assert!(check_host("n1", &vars(&[("upgrade_no_log", json!("maybe"))])).is_err());
        assert!(check_host("n1", &vars(&[("upgrade_no_log", json!("yes"))])).is_ok());
        assert!(check_host("n1", &vars(&[("upgrade_secret_vars", json!({"a": 1}))])).is_err());
        assert!(check_host("n1", &vars(&[("upgrade_secret_vars", json!([1]))])).is_err());
        assert_eq!(secret_var_names(&json!(["a", " b"])), Some(vec!["a".to_string(), "b".to_string()]));
        assert_eq!(secret_var_names(&json!("a, b")), Some(vec!["a".to_string(), "b".to_string()]));
    }
}
