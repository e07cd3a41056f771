//! `service`, `systemd` and `systemd_service`: a systemd unit started, stopped, restarted or reloaded, enabled,
//! masked, and the manager reloaded, through `systemctl` on the host, as ansible-core 2.19's `systemd_service` does
//! (its order of steps, its `changed`, its messages, its result: `name`, `status` as `systemctl show` gives it,
//! `state`, `enabled`). `service` on a systemd host is that same module in Ansible (its action hands over to it);
//! hosts without systemd (SysV init, OpenRC, upstart) are not supported: the task fails saying `systemctl` is missing.

use serde_json::{Map, Value, json};

use super::common::*;
use super::context::ModuleContext;
use crate::ansible_compat::{boolean, shell_quote};
use crate::connection::ConnectionError;

/// `systemctl show` output as Ansible's `parse_systemctl_show` reads it: `Key=value` lines, an `Exec*={ ... }` value
/// running over several lines until its closing brace.
fn parse_show(text: &str) -> Map<String, Value> {
    let mut parsed = Map::new();
    let mut multival: Vec<&str> = Vec::new();
    let mut key: Option<&str> = None;
    for line in text.split('\n') {
        match key {
            None => {
                let Some((k, v)) = line.split_once('=') else { continue };
                if k.starts_with("Exec") && v.trim_start().starts_with('{') && !v.trim_end().ends_with('}') {
                    key = Some(k);
                    multival.push(v);
                    continue;
                }
                parsed.insert(k.to_string(), json!(v.trim()));
            }
            Some(k) => {
                multival.push(line);
                if line.trim_end().ends_with('}') {
                    parsed.insert(k.to_string(), json!(multival.join("\n").trim()));
                    multival.clear();
                    key = None;
                }
            }
        }
    }
    parsed
}

fn request_was_ignored(out: &str) -> bool {
    !out.contains('=') && (out.contains("ignoring request") || out.contains("ignoring command"))
}

struct Systemctl<'a> {
    ctx: &'a ModuleContext,
    /// `systemctl` with the task's scope, `--no-block` and `--force`.
    base: String,
}

impl Systemctl<'_> {
    async fn run(&self, rest: &str) -> Result<(i32, String, String), ConnectionError> {
        let out = self.ctx.exec(&format!("{} {rest}", self.base), None).await?;
        let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
        Ok((out.status, text(&out.stdout), text(&out.stderr)))
    }
}

pub(super) async fn systemd(ctx: &ModuleContext, args: &Map<String, Value>) -> ModuleResult {
    let unit = arg_str(args, "name").or_else(|| arg_str(args, "service")).or_else(|| arg_str(args, "unit"));
    let state = arg_str(args, "state");
    let enabled = args.get("enabled").filter(|v| !v.is_null()).and_then(boolean);
    let masked = args.get("masked").filter(|v| !v.is_null()).and_then(boolean);
    let daemon_reload = arg_bool(args, "daemon_reload", false) || arg_bool(args, "daemon-reload", false);
    let daemon_reexec = arg_bool(args, "daemon_reexec", false) || arg_bool(args, "daemon-reexec", false);
    if state.is_none() && enabled.is_none() && masked.is_none() && !daemon_reload && !daemon_reexec {
        return Ok(fail_json("one of the following is required: state, enabled, masked, daemon_reload, daemon_reexec"));
    }
    if unit.is_none() {
        for (given, name) in [(state.is_some(), "state"), (enabled.is_some(), "enabled"), (masked.is_some(), "masked")]
        {
            if given {
                return Ok(fail_json(format!("missing parameter(s) required by '{name}': name")));
            }
        }
    }
    if let Some(state) = &state {
        if !["reloaded", "restarted", "started", "stopped"].contains(&state.as_str()) {
            return Ok(fail_json(format!(
                "value of state must be one of: reloaded, restarted, started, stopped, got: {state}"
            )));
        }
    }
    if let Some(unit) = &unit {
        for glob in ["*", "?", "["] {
            if unit.contains(glob) {
                return Ok(fail_json(format!(
                    "This module does not currently support using glob patterns, found '{glob}' in service name: {unit}"
                )));
            }
        }
    }
    let found_systemctl = ctx.exec("command -v systemctl", None).await?;
    if found_systemctl.status != 0 {
        return Ok(fail_json("Failed to find required executable \"systemctl\" in paths"));
    }
    let mut base = String::from("systemctl");
    let scope = arg_str(args, "scope").unwrap_or_else(|| "system".into());
    if scope != "system" {
        base.push_str(&format!(" --{scope}"));
    }
    if arg_bool(args, "no_block", false) {
        base.push_str(" --no-block");
    }
    if arg_bool(args, "force", false) {
        base.push_str(" --force");
    }
    let systemctl = Systemctl { ctx, base };
    let mut result = Map::new();
    result.insert("name".into(), unit.clone().map_or(Value::Null, Value::String));
    result.insert("changed".into(), json!(false));
    let mut status = Map::new();

    for (wanted, what) in [(daemon_reload, "daemon-reload"), (daemon_reexec, "daemon-reexec")] {
        if wanted {
            let (rc, _, err) = systemctl.run(what).await?;
            if rc != 0 {
                return Ok(fail_json(format!("failure {rc} during {what}: {err}")));
            }
        }
    }

    if let Some(unit) = &unit {
        let q = shell_quote(unit);
        let is_initd = ctx.exec(&format!("[ -f /etc/init.d/{q} ]"), None).await?.status == 0;
        let mut is_systemd = false;
        let (rc, out, err) = systemctl.run(&format!("show {q}")).await?;
        if rc == 0 && !(request_was_ignored(&out) || request_was_ignored(&err)) {
            if !out.is_empty() {
                status = parse_show(&out);
                let load = status.get("LoadState").and_then(Value::as_str);
                is_systemd = load.is_some_and(|l| l != "not-found");
                let is_masked = load == Some("masked");
                if is_systemd && !is_masked {
                    if let Some(error) = status.get("LoadError").and_then(Value::as_str) {
                        return Ok(fail_json(format!("Error loading unit file '{unit}': {error}")));
                    }
                }
            }
        } else {
            const VALID: &[&str] = &[
                "enabled",
                "enabled-runtime",
                "linked",
                "linked-runtime",
                "masked",
                "masked-runtime",
                "static",
                "indirect",
                "disabled",
                "generated",
                "transient",
            ];
            let (_, out, _) = systemctl.run(&format!("is-enabled {q}")).await?;
            is_systemd = VALID.contains(&out.trim()) || systemctl.run(&format!("list-unit-files {q}")).await?.0 == 0;
        }
        let found = is_systemd || is_initd;
        let missing = || fail_json(format!("Could not find the requested service {unit}: host"));

        if let Some(want_masked) = masked {
            let (_, out, _) = systemctl.run(&format!("is-enabled {q}")).await?;
            if (out.trim() == "masked") != want_masked {
                result.insert("changed".into(), json!(true));
                let action = if want_masked { "mask" } else { "unmask" };
                let (rc, _, err) = systemctl.run(&format!("{action} {q}")).await?;
                if rc != 0 {
                    if !found {
                        return Ok(missing());
                    }
                    return Ok(fail_json(format!("Failed to {action} the service ({unit}): {}", err.trim())));
                }
            }
        }

        if let Some(want_enabled) = enabled {
            if !found {
                return Ok(missing());
            }
            let (rc, out, _) = systemctl.run(&format!("is-enabled {q} -l")).await?;
            let is_enabled = match rc {
                0 => !matches!(out.trim_end(), "enabled-runtime" | "indirect" | "alias"),
                _ => false,
            };
            result.insert("enabled".into(), json!(is_enabled));
            if is_enabled != want_enabled {
                result.insert("changed".into(), json!(true));
                let action = if want_enabled { "enable" } else { "disable" };
                let (rc, out, err) = systemctl.run(&format!("{action} {q}")).await?;
                if rc != 0 {
                    return Ok(fail_json(format!("Unable to {action} service {unit}: {out}{err}")));
                }
                result.insert("enabled".into(), json!(!is_enabled));
            }
        }

        if let Some(state) = &state {
            if !found {
                return Ok(missing());
            }
            result.insert("state".into(), json!(state));
            let Some(active) = status.get("ActiveState").and_then(Value::as_str).map(str::to_string) else {
                let mut r = fail_json("Service is in unknown state");
                r.insert("status".into(), Value::Object(status));
                return Ok(r);
            };
            let running = active == "active" || active == "activating";
            let action = match state.as_str() {
                "started" if !running => Some("start"),
                "stopped" if running || active == "deactivating" => Some("stop"),
                "started" | "stopped" => None,
                other => {
                    result.insert("state".into(), json!("started"));
                    if running { Some(other.trim_end_matches("ed")) } else { Some("start") }
                }
            };
            if let Some(action) = action {
                result.insert("changed".into(), json!(true));
                let (rc, _, err) = systemctl.run(&format!("{action} {q}")).await?;
                if rc != 0 {
                    return Ok(fail_json(format!("Unable to {action} service {unit}: {err}")));
                }
            }
        }
    }
    result.insert("status".into(), Value::Object(status));
    Ok(result)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn show_output_is_read_as_ansible_reads_it() {
        let parsed = parse_show(
            "Id=kubelet.service\nActiveState=active\nExecStart={ path=/usr/bin/kubelet ; argv[]=/usr/bin/kubelet\n  --config=x }\nNoValue\nEmpty=\n",
        );
        assert_eq!(parsed["Id"], "kubelet.service");
        assert_eq!(parsed["ActiveState"], "active");
        assert_eq!(parsed["ExecStart"], "{ path=/usr/bin/kubelet ; argv[]=/usr/bin/kubelet\n  --config=x }");
        assert_eq!(parsed["Empty"], "");
        assert!(!parsed.contains_key("NoValue"));
    }
}
