//! The gate before a run crosses a minor: what the crossed minors remove or require (data/api_removals.tsv) against
//! what the cluster was asked for (every master's own API server's deprecated-API counters, the audit log), what it
//! stores or was applied in a removed version (last-applied annotations, Helm releases, CRDs' stored versions) and
//! what the hosts to upgrade run on (kubelet flags and configuration, static pod manifests, cgroup version, runtime).
//! Preflight runs it before anything changes (kubeadm and custom flavours); `plan --live` and `check-apis` show the
//! same report. A finding, or a source that cannot be read, refuses the run unless the operator acknowledged the
//! minor (`upgrade_acknowledge_api_removals: ["1.25"]`); an acknowledgement is journalled and in the summary.

use serde_json::Value;

use super::run::UpgradeRun;
use crate::api_removals::evidence::{self, Scope};
use crate::api_removals::table::{self, Minor};
use crate::api_removals::{Finding, Report, Unreadable};
use crate::error::{Error, Result};
use crate::flavor::Flavor;
use crate::journal::JournalEntry;
use crate::settings::TargetVersion;
use crate::vocabulary::{Phase, Step};

/// Whether the gate applies to this run: the kubeadm and custom flavours (OpenShift 3.11's target is an OpenShift
/// release), unless `upgrade_api_removals_check: false`.
pub(crate) fn applies(run: &UpgradeRun) -> bool {
    run.plan.flavor.flavor != Flavor::Openshift && run.host_flag(&run.first_master, "upgrade_api_removals_check", true)
}

/// The oldest version among the control plane and the hosts to upgrade, as the cluster reported them: the run
/// crosses every minor after it (a nodes-only run still crosses its kubelets' minors).
pub(crate) fn oldest_version(
    run: &UpgradeRun,
    hosts: &[String],
    control_plane: Option<&TargetVersion>,
) -> Option<Minor> {
    let cluster = run.cluster_before.lock().map(|c| c.clone()).unwrap_or_default();
    let kubelets = hosts
        .iter()
        .filter_map(|h| cluster.get(&run.node_name(h)))
        .filter_map(|n| TargetVersion::parse(&n.kubelet_version).ok());
    control_plane.cloned().into_iter().chain(kubelets).map(|v| (v.major, v.minor)).min()
}

/// `upgrade_acknowledge_api_removals`, checked: each entry a minor (`"1.25"`), else bad input.
pub(crate) fn acknowledgements(run: &UpgradeRun) -> Result<Vec<String>> {
    let acks = run.host_list(&run.first_master, "upgrade_acknowledge_api_removals");
    if let Some(bad) = acks.iter().find(|a| table::parse_minor(a).is_none()) {
        return Err(Error::input(format!("upgrade_acknowledge_api_removals: `{bad}` is not a minor"))
            .in_file(&run.inventory.path)
            .hint(
                "list the minors whose removals you have dealt with, e.g. upgrade_acknowledge_api_removals: [\"1.25\"]",
            ));
    }
    Ok(acks)
}

/// The hosts a decided run upgrades: the masters to upgrade and the selected nodes not already at the target.
pub(crate) fn hosts_to_upgrade(decided: &super::preflight::Preflight) -> Vec<String> {
    decided
        .masters
        .iter()
        .chain(decided.node_batches.iter().flatten().filter(|h| !decided.nodes_skipped.contains_key(*h)))
        .cloned()
        .collect()
}

/// The report for a run that upgrades `hosts` from the control plane's version to the run's target: what preflight
/// weighs, `plan --live` and `check-apis` show. `None` when the gate does not apply (openshift, or switched off).
pub(crate) async fn report(
    run: &UpgradeRun,
    phase: Phase,
    hosts: &[String],
    control_plane: Option<&TargetVersion>,
) -> Result<Option<Report>> {
    if !applies(run) {
        return Ok(None);
    }
    let acks = acknowledgements(run)?;
    let Some(from) = oldest_version(run, hosts, control_plane) else { return Ok(None) };
    // On an update path every minor still to cross is weighed before the hop changes anything.
    let through = run.api_removals_through.lock().ok().and_then(|t| t.clone()).unwrap_or_else(|| run.target.clone());
    gather(run, phase, from, (through.major, through.minor), hosts, &acks).await.map(Some)
}

/// Preflight's gate: reads, decides, says the table; refuses (exit 1, nothing touched) what is neither clean nor
/// acknowledged. `hosts` are the hosts the run upgrades.
pub(crate) async fn gate(run: &UpgradeRun, hosts: &[String], control_plane: Option<&TargetVersion>) -> Result<()> {
    let Some(report) = report(run, Phase::Preflight, hosts, control_plane).await? else {
        if run.plan.flavor.flavor != Flavor::Openshift {
            run.notice(None, "removed APIs and flags not checked (upgrade_api_removals_check: false)");
        }
        return Ok(());
    };
    if report.minors.is_empty() {
        return Ok(());
    }
    if report.anything() || !report.notes.is_empty() {
        run.notice(None, report.render());
    }
    for minor in report.acknowledged.iter() {
        let found: Vec<String> = report
            .findings
            .iter()
            .filter(|f| f.blocking && &f.minor == minor)
            .map(|f| format!("{} at {} ({})", f.what, f.place, f.source))
            .collect();
        let unreadable: Vec<String> =
            report.unreadable.iter().map(|u| format!("{} on {}: {}", u.source, u.place, u.why)).collect();
        if found.is_empty() && unreadable.is_empty() {
            continue;
        }
        run.record(JournalEntry::ApiRemovalsAcknowledged {
            run: run.run_id(),
            time: crate::time_format::utc_timestamp(std::time::SystemTime::now()),
            minor: minor.clone(),
            found: found.clone(),
            unreadable: unreadable.clone(),
        });
        let mut said = found;
        said.extend(unreadable.iter().map(|u| format!("unreadable: {u}")));
        let line = format!("{minor}: {}", said.join("; "));
        run.notice(None, format!("acknowledged (upgrade_acknowledge_api_removals), the run crosses {line}"));
        if let Ok(mut kept) = run.api_removals_acknowledged.lock() {
            kept.push(line);
        }
    }
    if report.blocked {
        let minors = report.blocked_minors.join(", ");
        let list = report.blocked_minors.iter().map(|m| format!("\"{m}\"")).collect::<Vec<_>>().join(", ");
        return Err(Error::hosts_failed(format!(
            "preflight: the minors this run crosses remove or require what the cluster still uses, or what could not \
             be read: {minors} (the table above)"
        ))
        .hint(format!(
            "move the clients, manifests, Helm releases and flags to the replacements and run again (`upgrade \
             check-apis` shows the table without a run); make an unreadable source readable; or, once dealt with, \
             set upgrade_acknowledge_api_removals: [{list}]; nothing was changed"
        )));
    }
    Ok(())
}

/// Reads every source for a run from `from` to `target` on `hosts` and decides with `acks`. Err only for a table
/// that does not parse (a broken build); every read that fails is an `unreadable` of the report.
pub(crate) async fn gather(
    run: &UpgradeRun,
    phase: Phase,
    from: Minor,
    target: Minor,
    hosts: &[String],
    acks: &[String],
) -> Result<Report> {
    let rows = table::table().map_err(Error::internal)?;
    let minors = table::crossed(from, target);
    let mut report = Report::new(from, target, &minors);
    if minors.is_empty() {
        return Ok(report);
    }
    let scope = Scope { rows, minors: &minors, target, kubeadm_upgrade: run.plan.flavor.flavor == Flavor::Kubeadm };
    read_cluster(run, phase, &scope, &mut report).await;
    let reads = hosts.iter().map(|host| read_host(run, phase, host, &scope));
    for (findings, unreadable, notes) in super::fan_out(run.forks(), reads).await {
        report.findings.extend(findings);
        report.unreadable.extend(unreadable);
        report.notes.extend(notes);
    }
    let mut seen = std::collections::HashSet::new();
    report.findings.retain(|f| seen.insert((f.what.clone(), f.place.clone())));
    report.findings.sort_by(|a, b| (!a.blocking, &a.minor).cmp(&(!b.blocking, &b.minor)));
    report.decide(acks);
    Ok(report)
}

fn text(result: &Value, key: &str) -> String {
    result.get(key).and_then(Value::as_str).unwrap_or_default().trim().to_string()
}

fn failed(result: &Value) -> Option<String> {
    let rc = result.get("rc").and_then(Value::as_i64).unwrap_or(0);
    (rc != 0).then(|| {
        let stderr = text(result, "stderr");
        format!("exited {rc}{}", if stderr.is_empty() { String::new() } else { format!(": {stderr}") })
    })
}

/// A resource type the API server does not serve holds no objects: not a failed read.
fn not_served(result: &Value) -> bool {
    text(result, "stderr").contains("the server doesn't have a resource type")
}

async fn read_cluster(run: &UpgradeRun, phase: Phase, scope: &Scope<'_>, report: &mut Report) {
    let urls: Vec<Value> = run
        .plan
        .masters
        .iter()
        .map(|m| {
            let url = run.render_for(
                m,
                "{{ upgrade_api_removals_metrics_url | default('https://' ~ (ansible_host | default(inventory_hostname)) ~ ':6443') }}",
            );
            serde_json::json!({"master": m, "url": url.trim()})
        })
        .collect();
    let read_helm = run.host_flag(&run.first_master, "upgrade_api_removals_read_helm", false);
    let vars = [
        ("upgrade_api_removals_metrics_urls", Value::Array(urls)),
        ("upgrade_api_removals_resources", serde_json::json!(scope.resources_to_list())),
        ("upgrade_api_removals_read_helm", Value::Bool(read_helm)),
    ];
    let host = &run.first_master;
    let file = run.playbook("api_removals_cluster.yml");
    let facts = match run.run_step(phase, host, Step::ReadCluster, &file, &vars, None).await {
        Ok(facts) => facts,
        Err(f) => {
            let why = format!("the reads on {host} failed: {}", f.reason);
            for source in ["metrics", "last-applied", "crd", "kubeadm-config"] {
                report.unreadable.push(Unreadable { source: source.into(), place: host.clone(), why: why.clone() });
            }
            return;
        }
    };
    let results = |name: &str| -> Vec<Value> {
        facts.get(name).and_then(|r| r.get("results")).and_then(Value::as_array).cloned().unwrap_or_default()
    };
    for result in results("upgrade_api_removals_metrics") {
        let master = result["item"]["master"].as_str().unwrap_or_default().to_string();
        let place = format!("{master}'s API server at {}", result["item"]["url"].as_str().unwrap_or_default());
        let outcome = match failed(&result) {
            Some(why) => Err(why),
            None => evidence::metrics(&master, &text(&result, "stdout"), scope).map_err(|why| {
                let stderr = text(&result, "stderr");
                if stderr.is_empty() { why } else { format!("{why}: {stderr}") }
            }),
        };
        match outcome {
            Ok((found, window)) => {
                report.findings.extend(found);
                report.windows.push(window);
            }
            Err(why) => report.unreadable.push(Unreadable { source: "metrics".into(), place, why }),
        }
    }
    for result in results("upgrade_api_removals_objects") {
        let resource = result["item"].as_str().unwrap_or_default().to_string();
        if not_served(&result) {
            continue;
        }
        let outcome = match failed(&result) {
            Some(why) => Err(why),
            None => evidence::last_applied(&text(&result, "stdout"), scope),
        };
        match outcome {
            Ok(found) => report.findings.extend(found),
            Err(why) => report.unreadable.push(Unreadable { source: "last-applied".into(), place: resource, why }),
        }
    }
    let crds = facts.get("upgrade_api_removals_crds").map(|v| (**v).clone()).unwrap_or(Value::Null);
    if !not_served(&crds) {
        match failed(&crds).map_or_else(|| evidence::crds(&text(&crds, "stdout"), scope), Err) {
            Ok(found) => report.findings.extend(found),
            Err(why) => report.unreadable.push(Unreadable {
                source: "crd".into(),
                place: "customresourcedefinitions".into(),
                why,
            }),
        }
    }
    let kubeadm = facts.get("upgrade_api_removals_kubeadm_config").map(|v| (**v).clone()).unwrap_or(Value::Null);
    kubeadm_config(run, &kubeadm, scope, report);
    if read_helm {
        let helm = facts.get("upgrade_api_removals_helm").map(|v| (**v).clone()).unwrap_or(Value::Null);
        match failed(&helm).map_or_else(|| evidence::helm(&text(&helm, "stdout"), scope), Err) {
            Ok((found, unreadable)) => {
                report.findings.extend(found);
                report.unreadable.extend(unreadable);
            }
            Err(why) => report.unreadable.push(Unreadable {
                source: "helm".into(),
                place: "secrets of type helm.sh/release.v1".into(),
                why,
            }),
        }
    } else {
        report.notes.push(
            "Helm release secrets not read: upgrade_api_removals_read_helm: true reads them (it needs `list secrets` \
             in every namespace)"
                .into(),
        );
    }
    for name in [
        "upgrade_api_removals_metrics",
        "upgrade_api_removals_objects",
        "upgrade_api_removals_crds",
        "upgrade_api_removals_kubeadm_config",
        "upgrade_api_removals_helm",
    ] {
        run.steps.forget(host, name);
    }
}

/// kubeadm-config's ClusterConfiguration: the control-plane flags and gates `kubeadm upgrade apply` will write into
/// the new manifests. A kubeadm cluster always has it: not found there is unreadable; on a custom cluster it says the
/// cluster was not set up by kubeadm (a note: the static pod manifests are still read on the masters).
fn kubeadm_config(run: &UpgradeRun, result: &Value, scope: &Scope<'_>, report: &mut Report) {
    let place = "kube-system/kubeadm-config".to_string();
    let not_found = text(result, "stderr").contains("NotFound");
    if not_found && run.plan.flavor.flavor != Flavor::Kubeadm {
        report.notes.push(
            "no kube-system/kubeadm-config: not a kubeadm cluster, so no ClusterConfiguration extraArgs read".into(),
        );
        return;
    }
    let outcome = match failed(result) {
        Some(why) => Err(why),
        None if result.is_null() => Err("not read".to_string()),
        None => evidence::kubeadm_config(&text(result, "stdout"), scope),
    };
    match outcome {
        Ok(found) => report.findings.extend(found),
        Err(why) => report.unreadable.push(Unreadable { source: "kubeadm-config".into(), place, why }),
    }
}

async fn read_host(
    run: &UpgradeRun,
    phase: Phase,
    host: &str,
    scope: &Scope<'_>,
) -> (Vec<Finding>, Vec<Unreadable>, Vec<String>) {
    let is_master = run.plan.masters.iter().any(|m| m == host);
    let audit_path = run.render_for(host, "{{ upgrade_audit_log_path | default('') }}").trim().to_string();
    let read_audit = is_master && !audit_path.is_empty();
    let vars = [
        ("upgrade_api_removals_read_runtime", Value::Bool(scope.needs_runtime())),
        ("upgrade_api_removals_read_audit", Value::Bool(read_audit)),
    ];
    let file = run.playbook("api_removals_host.yml");
    let facts = match run.run_step(phase, host, Step::HostCheck, &file, &vars, None).await {
        Ok(facts) => facts,
        Err(f) => {
            let why = format!("the reads failed: {}", f.reason);
            return (Vec::new(), vec![Unreadable { source: "host files".into(), place: host.into(), why }], Vec::new());
        }
    };
    let result = |name: &str| facts.get(name).map(|v| (**v).clone()).unwrap_or(Value::Null);
    let files = result("upgrade_api_removals_files");
    let (mut found, mut unreadable, cgroup_v1_allowed, file_notes) = match failed(&files) {
        None => evidence::host_files(host, &text(&files, "stdout"), scope),
        Some(why) => {
            (Vec::new(), vec![Unreadable { source: "host files".into(), place: host.into(), why }], false, Vec::new())
        }
    };
    let system = result("upgrade_api_removals_system");
    let system_text = text(&system, "stdout");
    let system_read = match failed(&system) {
        Some(why) if system_text.is_empty() => Err(why),
        _ => Ok(system_text.as_str()),
    };
    let runtime = result("upgrade_api_removals_runtime");
    let runtime_text = text(&runtime, "stdout");
    let runtime_read = scope.needs_runtime().then(|| failed(&runtime).map_or(Ok(runtime_text.as_str()), Err));
    let (more, unread, mut notes) = evidence::host_system(host, system_read, runtime_read, cgroup_v1_allowed, scope);
    notes.splice(0..0, file_notes);
    found.extend(more);
    unreadable.extend(unread);
    if read_audit {
        let audit = result("upgrade_api_removals_audit");
        match failed(&audit) {
            None => found.extend(evidence::audit(host, &text(&audit, "stdout"), scope)),
            Some(why) => {
                unreadable.push(Unreadable { source: "audit-log".into(), place: format!("{host}:{audit_path}"), why })
            }
        }
    } else if is_master && run.plan.masters.first().map(String::as_str) == Some(host) {
        notes.push("no audit log read: upgrade_audit_log_path names the API server's audit log on the masters".into());
    }
    for name in [
        "upgrade_api_removals_files",
        "upgrade_api_removals_system",
        "upgrade_api_removals_runtime",
        "upgrade_api_removals_audit",
    ] {
        run.steps.forget(host, name);
    }
    (found, unreadable, notes)
}
