//! `--plan` output: text for people, one JSON document for CI (a contract: `phases[].name`, `phases[].batches`,
//! `settings.{serial, max_fail_percentage, drain_timeout_seconds, label}`).

use std::fmt::Write;

use serde_json::{Map, Value, json};

use super::{Phase, Plan};
use crate::inventory::{Inventory, Origin};
use crate::settings::{Hook, Setting};

const LABEL_NOTE: &str = "the label selector was evaluated offline, against each node's node_labels variable and the \
labels of its openshift_node_group_name; the run evaluates it again against the labels the cluster reports";

pub fn plan_json(plan: &Plan, inventory: &Inventory) -> Value {
    let s = &plan.settings;
    let phases: Vec<Value> = plan
        .phases
        .iter()
        .map(|p| {
            let mut phase = Map::new();
            phase.insert("name".into(), json!(p.phase.name()));
            phase.insert("batches".into(), json!(p.batches));
            if p.phase == Phase::Preflight {
                phase.insert("hosts".into(), json!(plan.hosts));
            }
            Value::Object(phase)
        })
        .collect();
    let origin = |source: &Option<String>, origin: &Origin| json!({"source": source, "origin": origin.to_string()});
    let hooks: Map<String, Value> = plan
        .hooks
        .iter()
        .map(|(host, hooks)| {
            let by_point: Map<String, Value> = hooks
                .iter()
                .map(|(point, hook)| {
                    (
                        point.key().to_string(),
                        json!({"path": hook.path.display().to_string(), "variable": hook.variable,
                               "origin": hook.origin.to_string()}),
                    )
                })
                .collect();
            (host.clone(), Value::Object(by_point))
        })
        .collect();
    let mut document = json!({
        "inventory": inventory.path.display().to_string(),
        "phases": phases,
        "settings": {
            "serial": s.serial.value.to_json(),
            "max_fail_percentage": s.max_fail_percentage.value.to_json(),
            "drain_timeout_seconds": s.drain_timeout.value.seconds(),
            "label": s.label.value.as_ref().map(ToString::to_string),
            "target_version": s.target_version.value.as_ref().map(ToString::to_string),
        },
        "setting_origins": {
            "serial": origin(&s.serial.source, &s.serial.origin),
            "max_fail_percentage": origin(&s.max_fail_percentage.source, &s.max_fail_percentage.origin),
            "drain_timeout_seconds": origin(&s.drain_timeout.source, &s.drain_timeout.origin),
            "label": origin(&s.label.source, &s.label.origin),
            "target_version": origin(&s.target_version.source, &s.target_version.origin),
        },
        "flavor": {
            "name": plan.flavor.flavor.name(),
            "reason": plan.flavor.why,
            "packages": plan.openshift_packages,
            "target_aliases_passed_over": plan.target_passed_over,
        },
        "groups": plan.groups,
        "certificate_expiry": {
            "warning_days": plan.certificate_expiry.warning_days.value,
            "fail_on_warn": plan.certificate_expiry.fail_on_warn.value,
            "unreadable": plan.certificate_expiry.unreadable.value.to_string(),
            "origins": {
                "warning_days": origin(&plan.certificate_expiry.warning_days.source, &plan.certificate_expiry.warning_days.origin),
                "fail_on_warn": origin(&plan.certificate_expiry.fail_on_warn.source, &plan.certificate_expiry.fail_on_warn.origin),
            },
        },
        "label_evaluation": if s.label.value.is_some() { Value::from("offline") } else { Value::Null },
        "host_settings": plan.host_settings.iter().map(|r| json!({
            "variable": r.variable, "value": r.value, "origin": r.origin, "hosts": r.hosts,
        })).collect::<Vec<_>>(),
        "serial_groups": s.serial_groups.iter().map(|g| json!({
            "serial": g.serial.value.to_json(), "hosts": g.hosts, "origin": g.serial.describe_origin(),
        })).collect::<Vec<_>>(),
        "nodes_not_selected": plan.nodes_not_selected,
        "limit": plan.limit,
        "hooks": hooks,
        "cluster_hooks": plan.cluster_hooks.iter().map(|(point, hook)| (
            point.key().to_string(),
            json!({"path": hook.path.display().to_string(), "variable": hook.variable, "origin": hook.origin.to_string()}),
        )).collect::<Map<String, Value>>(),
    });
    // The strategies add keys of their own; every key above keeps its meaning.
    if let (Value::Object(doc), Value::Object(more)) =
        (&mut document, plan.strategy.plan_json(s.target_version.value.as_ref()))
    {
        doc.extend(more);
    }
    document
}

pub fn plan_text(plan: &Plan, inventory: &Inventory) -> String {
    plan_text_with(plan, inventory, true)
}

/// The plan a run prints before it starts: each phase's hooks once per set of hosts that share them, rather than
/// once per host (`-v` and `--plan` show [`plan_text`], every host's).
pub fn plan_text_brief(plan: &Plan, inventory: &Inventory) -> String {
    plan_text_with(plan, inventory, false)
}

fn plan_text_with(plan: &Plan, inventory: &Inventory, every_host: bool) -> String {
    let mut out = String::new();
    let s = &plan.settings;
    let _ = writeln!(out, "Upgrade plan for {} (no host is contacted)", inventory.path.display());
    let _ = writeln!(out);
    let _ = writeln!(out, "Flavor: {} ({})", plan.flavor.flavor, plan.flavor.why);
    if !plan.groups.is_default() {
        let _ = writeln!(out, "Groups: {}", plan.groups.describe());
    }
    if let Some(packages) = &plan.openshift_packages {
        let _ = writeln!(
            out,
            "  packages: masters {}; nodes {} (at the target, between the excluders' unexclude and exclude)",
            packages.masters.join(", "),
            packages.nodes.join(", ")
        );
        let _ = writeln!(
            out,
            "  at the target: decided by what each host has installed (upgrade_host_version_command), not by the \
             kubelet version"
        );
    }
    let _ = writeln!(out);
    let _ = writeln!(out, "Settings:");
    let mut rows: Vec<(&str, String, String)> = Vec::new();
    rows.push(("serial", s.serial.value.to_string(), describe(&s.serial)));
    rows.push(("max-fail-percentage", s.max_fail_percentage.value.to_string(), describe(&s.max_fail_percentage)));
    let drain = match s.drain_timeout.value.seconds() {
        0 => "0 (wait for ever)".to_string(),
        secs => format!("{} ({secs}s)", s.drain_timeout.value),
    };
    rows.push(("drain-timeout", drain, describe(&s.drain_timeout)));
    rows.push(("forks", s.forks.value.to_string(), describe(&s.forks)));
    let label = s.label.value.as_ref().map_or("none (all nodes)".to_string(), ToString::to_string);
    rows.push(("label", label, describe(&s.label)));
    let target = s.target_version.value.as_ref().map_or("not set".to_string(), ToString::to_string);
    let mut target_from = describe(&s.target_version);
    if !plan.target_passed_over.is_empty() {
        target_from.push_str(&format!(" ({} names no patch release)", plan.target_passed_over.join(", ")));
    }
    rows.push(("target-version", target, target_from));
    let cert = &plan.certificate_expiry;
    let fail = if cert.fail_on_warn.value { "fail" } else { "warn only" };
    // Said only when it is not the default, so the usual line stays short.
    let unreadable = match cert.unreadable.value {
        crate::settings::UnreadableExpiry::Warn => ", unreadable dates: warn",
        crate::settings::UnreadableExpiry::Fail => "",
    };
    rows.push((
        "certificate-expiry",
        format!("{} days, {fail}{unreadable}", cert.warning_days.value),
        format!("{} (days); {} (fail)", describe(&cert.warning_days), describe(&cert.fail_on_warn)),
    ));
    if let Some(limit) = &plan.limit {
        rows.push(("limit", limit.clone(), "--limit (applies to the nodes phase)".into()));
    }
    let width = rows.iter().map(|(_, value, _)| value.len()).max().unwrap_or(0).max(20);
    for (name, value, from) in rows {
        let _ = writeln!(out, "  {name:<20} {value:<width$}  from {from}");
    }

    if !plan.host_settings.is_empty() {
        let _ = writeln!(out);
        let _ = writeln!(out, "Host settings ({} steps):", plan.flavor.flavor);
        let multi = |variable: &str| plan.host_settings.iter().filter(|r| r.variable == variable).count() > 1;
        let width = plan.host_settings.iter().map(|r| r.value.len()).filter(|n| *n <= 24).max().unwrap_or(0);
        for row in &plan.host_settings {
            let hosts = if multi(row.variable) { format!(" on {}", row.hosts.join(", ")) } else { String::new() };
            let value = format!("{}{hosts}", row.value);
            let _ = writeln!(out, "  {:<36} {value:<width$}  from {}", row.variable, row.origin);
        }
    }

    let _ = writeln!(out);
    let _ = writeln!(out, "Phases:");
    for phase in &plan.phases {
        match phase.phase {
            Phase::Preflight => {
                let _ = writeln!(out, "  preflight: check {} hosts: {}", plan.hosts.len(), plan.hosts.join(", "));
            }
            Phase::Verify => {
                let _ = writeln!(out, "  verify: every upgraded node ready and at the target version");
            }
            Phase::EtcdBackup => {
                let hosts: Vec<&String> = phase.batches.iter().flatten().collect();
                let _ = writeln!(out, "  etcd-backup: snapshot etcd on {} host(s), before anything else", hosts.len());
                for host in hosts {
                    let _ = writeln!(out, "    {host}");
                }
            }
            Phase::ControlPlane | Phase::Nodes => {
                let hosts: usize = phase.batches.iter().map(Vec::len).sum();
                let how = if phase.phase == Phase::ControlPlane {
                    "one master at a time".to_string()
                } else if !s.serial_groups.is_empty() {
                    let groups: Vec<String> = s
                        .serial_groups
                        .iter()
                        .map(|g| {
                            format!("{} for {} ({})", g.serial.value, g.hosts.join(", "), g.serial.describe_origin())
                        })
                        .collect();
                    format!("serial per node group, infra first: {}", groups.join("; "))
                } else {
                    format!("serial {}", s.serial.value)
                };
                let _ = writeln!(out, "  {}: {hosts} host(s) in {} batch(es), {how}", phase.phase, phase.batches.len());
                for (i, batch) in phase.batches.iter().enumerate() {
                    let _ = writeln!(out, "    batch {}: {}", i + 1, batch.join(", "));
                    if every_host {
                        for host in batch {
                            write_hooks(&mut out, plan, host);
                        }
                    }
                }
                if !every_host {
                    write_shared_hooks(&mut out, plan, phase.batches.iter().flatten());
                }
            }
            // The pseudo-phases are never part of a plan.
            _ => {}
        }
    }
    if !plan.cluster_hooks.is_empty() {
        let _ = writeln!(out);
        let first = plan.masters.first().map(String::as_str).unwrap_or("?");
        let _ = writeln!(out, "Cluster hooks (once, on {first}):");
        for (point, hook) in &plan.cluster_hooks {
            let _ = writeln!(
                out,
                "  {} hook: {} ({} {})",
                point.name(),
                hook.path.display(),
                hook.variable,
                from(&hook.origin)
            );
        }
    }
    let strategy = plan.strategy.plan_text(s.target_version.value.as_ref());
    if !strategy.is_empty() {
        let _ = writeln!(out);
        for line in strategy {
            let _ = writeln!(out, "{line}");
        }
    }
    if plan.has_phase(Phase::Nodes) && s.label.value.is_some() {
        let _ = writeln!(out);
        if plan.labels_from_cluster {
            let _ = writeln!(
                out,
                "Note: the label selector is evaluated in preflight against the labels the cluster reports; the \
                 node batches above are re-cut from the nodes it selects."
            );
        } else {
            let _ = writeln!(out, "Note: {LABEL_NOTE}.");
        }
        if !plan.nodes_not_selected.is_empty() {
            let _ = writeln!(out, "Not selected by the label: {}", plan.nodes_not_selected.join(", "));
        }
    }
    out
}

fn write_hooks(out: &mut String, plan: &Plan, host: &str) {
    let Some(hooks) = plan.hooks.get(host) else { return };
    for (point, Hook { path, variable, origin }) in hooks {
        let _ = writeln!(out, "      {host} {} hook: {} ({variable} {})", point.name(), path.display(), from(origin));
    }
}

/// The hooks of `hosts`, once per set of hosts that run the same files: `hooks of every host:` then a line a point.
fn write_shared_hooks<'a>(out: &mut String, plan: &Plan, hosts: impl Iterator<Item = &'a String>) {
    let mut shared: Vec<(Vec<&str>, &crate::settings::HostHooks)> = Vec::new();
    let mut count = 0;
    for host in hosts {
        count += 1;
        let Some(hooks) = plan.hooks.get(host).filter(|h| !h.is_empty()) else { continue };
        match shared.iter_mut().find(|(_, same)| *same == hooks) {
            Some((names, _)) => names.push(host),
            None => shared.push((vec![host], hooks)),
        }
    }
    for (names, hooks) in shared {
        let who = if names.len() == count { "every host".to_string() } else { names.join(", ") };
        let _ = writeln!(out, "    hooks of {who}:");
        for (point, Hook { path, variable, origin }) in hooks {
            let _ = writeln!(out, "      {} hook: {} ({variable} {})", point.name(), path.display(), from(origin));
        }
    }
}

fn from(origin: &Origin) -> String {
    match origin {
        Origin::ExtraVars(arg) => format!("from -e {arg}"),
        other => format!("at {other}"),
    }
}

fn describe<T>(setting: &Setting<T>) -> String {
    setting.describe_origin()
}
