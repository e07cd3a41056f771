//! `upgrade restore`: the recovery path. Puts the configuration files of a backup (taken beside the etcd snapshot
//! by an upgrade, listed in the journal) back on a host or group and, with `--etcd`, restores etcd from the
//! snapshot the documented way: `etcdctl snapshot restore` into a new data directory, stop etcd, move the new
//! directory into place (the old one kept beside it), start etcd. The plan is printed first; without `--yes`
//! nothing is changed.
//!
//! The work runs in stages, each one task-file run (playbooks/restore.yml, `upgrade_restore_stage`) over every host
//! of the stage at once, because the members of a multi-member etcd must move together: every member's snapshot is
//! restored (and checked) while etcd still runs, then every member is stopped and swapped, then every member is
//! started, and only then does the restore wait for them to answer. A member started alone waits for a quorum that
//! never comes. After a stop, any failure puts the old data back and starts etcd again on every member, so that a
//! restore never leaves etcd stopped, nor the members split between the old data and the restored one.

use crate::console::outln;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{Map, Value};

use crate::connection::shell_quote;
use crate::error::{Error, Result};
use crate::events::SharedSink;
use crate::inventory::{Inventory, Origin, Var, Vars};
use crate::journal::{DEFAULT_STATE_DIR, HostBackup, read_backups};
use crate::session::Remote;
use crate::tasks::connect::ConnectOptions;
use crate::tasks::engine::EngineOptions;
use crate::tasks::model::{Action, Module, Task};
use crate::tasks::{Templar, host_vars::HostVarsTable, report::TextReporter, run_tasks};

/// What `upgrade restore` is asked to do.
#[derive(Debug, Clone, Default)]
pub(crate) struct RestoreRequest {
    /// `--limit`: the hosts to restore (required).
    pub limit: Option<String>,
    /// The backup's timestamp; `None`: the latest with a verified etcd snapshot.
    pub backup: Option<String>,
    /// Also restore etcd from the backup's snapshot.
    pub etcd: bool,
    /// Where the journals that list the backups live; `None`: `.upgrade-state` next to the inventory.
    pub state_dir: Option<PathBuf>,
}

/// What restore does on one host.
struct HostRestore {
    host: String,
    backup: HostBackup,
    /// Restore etcd here (`--etcd` and the host has the backup's snapshot).
    etcd: bool,
    /// The `etcdctl snapshot restore` flags: `upgrade_etcd_restore_flags`, or those built for a member of several.
    etcd_flags: String,
    /// What the task files will run here, rendered with the flavour's defaults for the plan.
    shown: Shown,
}

/// The host's settings as the task files will see them once their defaults apply.
#[derive(Default)]
struct Shown {
    data_dir: String,
    stop: String,
    start: String,
    restarts: Vec<String>,
    timeout: String,
}

impl HostRestore {
    /// The configuration paths to put back (the journal also lists `kubeadm-config.json`, which is not a path).
    fn files(&self) -> Vec<&str> {
        self.backup.files.iter().filter(|f| f.starts_with('/')).map(String::as_str).collect()
    }
}

/// One run of playbooks/restore.yml over some hosts (`upgrade_restore_stage`).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Stage {
    EtcdPrepare,
    EtcdDiscard,
    Config,
    EtcdStop,
    EtcdStart,
    EtcdRollback,
    EtcdWait,
    Restart,
}

impl Stage {
    fn name(self) -> &'static str {
        match self {
            Stage::EtcdPrepare => "etcd-prepare",
            Stage::EtcdDiscard => "etcd-discard",
            Stage::Config => "config",
            Stage::EtcdStop => "etcd-stop",
            Stage::EtcdStart => "etcd-start",
            Stage::EtcdRollback => "etcd-rollback",
            Stage::EtcdWait => "etcd-wait",
            Stage::Restart => "restart",
        }
    }
}

/// The hosts of a stage that went through it, and those that failed with the etcd state their tasks reported.
struct StageOutcome {
    ok: Vec<String>,
    failed: Vec<(String, String)>,
}

impl StageOutcome {
    fn failed_hosts(&self) -> Vec<&str> {
        self.failed.iter().map(|(h, _)| h.as_str()).collect()
    }
}

/// Runs stages of the restore task file, all with the same reporter (one recap at the end).
struct Stages<'a> {
    runtime: &'a tokio::runtime::Runtime,
    inventory: &'a Inventory,
    vars: Vars,
    tasks: Vec<Task>,
    engine: EngineOptions,
    connect: ConnectOptions,
    reporter: Arc<TextReporter>,
    /// The values of `upgrade_secret_vars` (and the become password), masked in what `-v` prints as the upgrade does.
    redactor: Arc<crate::redact::Redactor>,
}

impl Stages<'_> {
    /// Runs `stage` on `hosts`, at most `forks` at once.
    fn run(&self, stage: Stage, hosts: &[String], forks: usize, more: &[(&str, Value)]) -> StageOutcome {
        if hosts.is_empty() {
            return StageOutcome { ok: Vec::new(), failed: Vec::new() };
        }
        let mut vars = self.vars.clone();
        let mut set = |name: &str, value: Value| {
            vars.insert(name.into(), Var { value, origin: Origin::ExtraVars("restore".into()) });
        };
        set("upgrade_restore_stage", Value::String(stage.name().into()));
        for (name, value) in more {
            set(name, value.clone());
        }
        let options = EngineOptions { assume_yes: true, ..self.engine.clone() };
        let sink: SharedSink =
            Arc::new(crate::redact::sink::Redacting { redactor: self.redactor.clone(), inner: self.reporter.clone() });
        let outcomes = self.runtime.block_on(run_tasks(
            self.inventory,
            &vars,
            hosts,
            &self.tasks,
            forks.max(1),
            options,
            self.connect.clone(),
            sink,
        ));
        let mut result = StageOutcome { ok: Vec::new(), failed: Vec::new() };
        for (host, outcome) in outcomes {
            if outcome.failed || outcome.unreachable {
                let state = if outcome.unreachable {
                    "unreachable: its etcd is as the last step that reached it left it".to_string()
                } else {
                    outcome
                        .facts
                        .get("upgrade_restore_etcd_state")
                        .and_then(|v| v.as_str().map(str::to_string))
                        .unwrap_or_else(|| "see the failed step above".into())
                };
                result.failed.push((host, state));
            } else {
                result.ok.push(host);
            }
        }
        result
    }
}

/// Prints the restore plan, then (with `--yes`, `remote.engine.assume_yes`) carries it out in stages.
pub(crate) fn restore(request: &RestoreRequest, inventory: Inventory, extra: Vars, remote: Remote) -> Result<i32> {
    let Remote { runtime, connect, engine } = remote;
    let pattern = request.limit.as_deref().ok_or_else(|| {
        Error::input("restore needs the hosts to restore").hint("pass --limit HOST or --limit GROUP (e.g. masters)")
    })?;
    let hosts = inventory.limit(pattern)?;
    if hosts.is_empty() {
        return Err(Error::input(format!("--limit `{pattern}` selects no host")).hint("name inventory hosts or groups"));
    }
    let state_dir = request.state_dir.clone().unwrap_or_else(|| inventory.dir.join(DEFAULT_STATE_DIR));
    let backups = read_backups(&state_dir)?;
    let timestamp = match &request.backup {
        Some(t) => t.clone(),
        None => backups.iter().rev().find(|b| b.snapshot.is_some()).map(|b| b.timestamp.clone()).ok_or_else(|| {
            Error::input(format!("the journals in {} record no verified etcd backup", state_dir.display()))
                .hint("pass --backup TIMESTAMP, or --state-dir where the upgrade kept its journal")
        })?,
    };
    let known: Vec<&str> = {
        let mut t: Vec<&str> = backups.iter().map(|b| b.timestamp.as_str()).collect();
        t.dedup();
        t
    };
    if !known.contains(&timestamp.as_str()) {
        return Err(Error::input(format!("no backup {timestamp} is recorded in {}", state_dir.display())).hint(
            format!("the recorded backups are: {}", if known.is_empty() { "none".into() } else { known.join(", ") }),
        ));
    }

    let mut plan: Vec<HostRestore> = Vec::new();
    for host in &hosts {
        let Some(backup) = backups.iter().find(|b| b.host == *host && b.timestamp == timestamp) else { continue };
        plan.push(HostRestore {
            host: host.clone(),
            etcd: request.etcd && backup.snapshot.is_some(),
            backup: backup.clone(),
            etcd_flags: String::new(),
            shown: Shown::default(),
        });
    }
    if plan.is_empty() {
        return Err(Error::input(format!("backup {timestamp} holds nothing for {}", hosts.join(", ")))
            .hint("choose the hosts the backup was taken on (--limit), or another --backup"));
    }
    if request.etcd && !plan.iter().any(|p| p.etcd) {
        return Err(Error::input(format!("--etcd: backup {timestamp} has no etcd snapshot on {}", hosts.join(", ")))
            .hint("select the etcd hosts (--limit etcd)"));
    }

    let table = HostVarsTable::new(&inventory, &extra);
    let templar = Templar::new();
    let render = |host: &str, template: &str| -> Result<String> {
        let vars = table.for_host(host, Map::new());
        templar
            .render_str(template, &vars)
            .map(|s| s.trim().to_string())
            .map_err(|e| Error::input(format!("{host}: {template}: {e}")))
    };
    let etcd_group = crate::cluster_groups::ClusterGroups::resolve(&inventory, &extra)?.etcd.name;
    let flags = member_flags(&plan, &inventory, &etcd_group, &render, &timestamp)?;
    for item in &mut plan {
        item.etcd_flags = flags.get(&item.host).cloned().unwrap_or_default();
    }
    let per_host = per_host_value(&plan);

    // The flavour's own defaults apply, as in an upgrade (openshift: the /etc/etcd certificates, etcd's static pod).
    let host_vars: Vec<(String, Vars)> =
        plan.iter().map(|p| (p.host.clone(), inventory.host_vars(&p.host, &extra))).collect();
    let refs: Vec<(&str, &Vars)> = host_vars.iter().map(|(h, v)| (h.as_str(), v)).collect();
    let flavor = crate::flavor::choose(&inventory, &refs)?.flavor;
    let file = crate::playbooks::for_flavor(flavor, "restore.yml");
    for item in &mut plan {
        let mut more = Map::new();
        more.insert("upgrade_restore_hosts".into(), per_host.clone());
        more.insert("upgrade_restore_timestamp".into(), Value::String(timestamp.clone()));
        more.insert("upgrade_target_version".into(), Value::String("v0.0.0".into()));
        let facts = settled_facts(&file, &item.host, &table, &templar, more)?;
        let text = |name: &str| facts.get(name).map(value_text).unwrap_or_default();
        item.shown = Shown {
            data_dir: text("upgrade_etcd_data_dir"),
            stop: text("upgrade_etcd_stop_command"),
            start: text("upgrade_etcd_start_command"),
            restarts: match facts.get("upgrade_restore_restart_commands") {
                Some(Value::Array(list)) => list.iter().map(value_text).collect(),
                _ => Vec::new(),
            },
            timeout: text("upgrade_etcd_restore_timeout"),
        };
    }

    print!("{}", plan_text(&timestamp, &plan));
    let without: Vec<&str> = hosts.iter().filter(|h| !plan.iter().any(|p| p.host == **h)).map(String::as_str).collect();
    if !without.is_empty() {
        outln!("  not touched (backup {timestamp} holds nothing for them): {}", without.join(", "));
    }
    if !engine.assume_yes {
        return Err(Error::input("restore not carried out: nothing was changed")
            .hint("read the plan above, then run the same command with --yes"));
    }

    // An upgrade running from the same state directory would be moving the hosts this puts back: the restore waits
    // for no one, it refuses (exit 2, naming the holder) before touching anything, as a second upgrade does.
    let _lock = crate::journal::RunLock::acquire(&state_dir)?;
    let playbooks = crate::playbooks::materialize(&state_dir.join("playbooks"))?;
    let tasks = crate::tasks::model::load_task_file(&playbooks.join(&file))?;
    let names: Vec<String> = plan.iter().map(|p| p.host.clone()).collect();
    let reporter = Arc::new(TextReporter::new(engine.verbosity, Box::new(std::io::stdout()), &names));
    let mut vars = extra.clone();
    for (name, value) in [
        ("upgrade_restore_hosts", per_host),
        ("upgrade_restore_timestamp", Value::String(timestamp.clone())),
        ("upgrade_target_version", Value::String("v0.0.0".into())),
    ] {
        vars.insert(name.into(), Var { value, origin: Origin::ExtraVars("restore".into()) });
    }
    let redactor = Arc::new(crate::redact::Redactor::from_hosts(&crate::inventory::host_vars_json(&inventory, &extra)));
    let stages = Stages { runtime: &runtime, inventory: &inventory, vars, tasks, engine, connect, reporter, redactor };
    let code = carry_out(&stages, &plan, &timestamp);
    stages.reporter.print_recap();
    Ok(code)
}

/// The stages in order; returns the exit code. Every way out after a stop has etcd started again, or says where not.
fn carry_out(stages: &Stages, plan: &[HostRestore], timestamp: &str) -> i32 {
    let etcd_hosts: Vec<String> = plan.iter().filter(|p| p.etcd).map(|p| p.host.clone()).collect();
    let config_hosts: Vec<String> = plan.iter().filter(|p| !p.files().is_empty()).map(|p| p.host.clone()).collect();
    // The etcd stages run on every member at once: a systemd unit's start returns only once the member has joined a
    // quorum, so starting the members one after the other would wait on the first for ever.
    let all = etcd_hosts.len();

    let prepared = stages.run(Stage::EtcdPrepare, &etcd_hosts, all, &[]);
    if !prepared.failed.is_empty() {
        stages.run(Stage::EtcdDiscard, &prepared.ok, all, &[]);
        outln!(
            "restore stopped: etcd's snapshot could not be restored on {} (see above); nothing was stopped or put back, \
             etcd runs as before",
            prepared.failed_hosts().join(", ")
        );
        return 1;
    }

    let config = stages.run(Stage::Config, &config_hosts, 1, &[]);
    if !config.failed.is_empty() {
        stages.run(Stage::EtcdDiscard, &etcd_hosts, all, &[]);
        outln!(
            "restore stopped: the configuration could not be put back on {} (see above); put back on: {}; etcd was \
             not stopped",
            config.failed_hosts().join(", "),
            if config.ok.is_empty() { "none".into() } else { config.ok.join(", ") }
        );
        return 1;
    }

    if !etcd_hosts.is_empty() {
        let stopped = stages.run(Stage::EtcdStop, &etcd_hosts, all, &[]);
        if !stopped.failed.is_empty() {
            // The failed hosts' rescue put their old data back and started them; the others are stopped with the
            // restored data in place and go back to theirs, so that every member runs on the same data.
            let back =
                stages.run(Stage::EtcdRollback, &stopped.ok, all, &[("upgrade_restore_rollback_stop", false.into())]);
            report_rollback("etcd could not be stopped and swapped", &stopped, &back);
            return 1;
        }
        let started = stages.run(Stage::EtcdStart, &etcd_hosts, all, &[]);
        if !started.failed.is_empty() {
            let back =
                stages.run(Stage::EtcdRollback, &started.ok, all, &[("upgrade_restore_rollback_stop", true.into())]);
            report_rollback("etcd did not start with the restored data", &started, &back);
            return 1;
        }
        let answered = stages.run(Stage::EtcdWait, &etcd_hosts, all, &[]);
        if !answered.failed.is_empty() {
            // Not rolled back: every member runs the restored data, which is what the operator asked for; a member
            // that needs longer than the timeout may still join. The old data stays beside it.
            outln!(
                "restore stopped: etcd runs with the restored data on {} but {} did not answer `endpoint health` in \
                 time; the old data is kept as <data dir>.before-restore-{timestamp}; the services were not restarted",
                etcd_hosts.join(", "),
                answered.failed_hosts().join(", ")
            );
            return 1;
        }
    }

    let restarted = stages.run(Stage::Restart, &config_hosts, 1, &[]);
    if !restarted.failed.is_empty() {
        outln!(
            "restore: everything was put back, but restarting the services failed on {} (see above)",
            restarted.failed_hosts().join(", ")
        );
        return 1;
    }
    0
}

/// Says what state each etcd host is in after a failure past the stop and the rollback that followed.
fn report_rollback(what: &str, stage: &StageOutcome, back: &StageOutcome) {
    outln!("restore stopped: {what} on {}; every member goes back to its old data:", stage.failed_hosts().join(", "));
    for (host, state) in stage.failed.iter().chain(back.failed.iter()) {
        outln!("  {host}: {state}");
    }
    for host in &back.ok {
        outln!("  {host}: running with its old data (put back and started again)");
    }
}

/// The value of `upgrade_restore_hosts`: what each host restores, by inventory name.
fn per_host_value(plan: &[HostRestore]) -> Value {
    let mut map = Map::new();
    for item in plan {
        map.insert(
            item.host.clone(),
            serde_json::json!({
                "dir": item.backup.dir,
                "files": item.files(),
                "etcd": item.etcd,
                "snapshot": item.backup.snapshot.clone().unwrap_or_default(),
                "etcd_flags": item.etcd_flags,
            }),
        );
    }
    Value::Object(map)
}

/// The `snapshot restore` flags of each etcd host of the plan. A member of a multi-member etcd must be restored with
/// its own name and peer URL and the whole member list, and every member at once: `snapshot restore` without them
/// makes a cluster of one on each host, and restoring only some members leaves them apart from the others. Either
/// the operator says every member's flags (`upgrade_etcd_restore_flags`), or they are built from the inventory as
/// openshift-ansible's restore does; anything else is refused before any host is touched.
fn member_flags(
    plan: &[HostRestore],
    inventory: &Inventory,
    etcd_group: &str,
    render: &dyn Fn(&str, &str) -> Result<String>,
    timestamp: &str,
) -> Result<BTreeMap<String, String>> {
    let restored: Vec<&str> = plan.iter().filter(|p| p.etcd).map(|p| p.host.as_str()).collect();
    let mut explicit = BTreeMap::new();
    for host in &restored {
        let flags = render(host, "{{ upgrade_etcd_restore_flags | default('') }}")?;
        if !flags.is_empty() {
            explicit.insert(host.to_string(), flags);
        }
    }
    let mut members: Vec<String> = inventory.group_hosts(etcd_group).unwrap_or_default();
    for host in &restored {
        if !members.iter().any(|m| m == host) {
            members.push(host.to_string());
        }
    }
    if restored.is_empty() || members.len() < 2 || explicit.len() == restored.len() {
        return Ok(explicit);
    }
    if !explicit.is_empty() {
        let without: Vec<&str> = restored.iter().copied().filter(|h| !explicit.contains_key(*h)).collect();
        return Err(Error::input(format!(
            "upgrade_etcd_restore_flags is set on {} but not on {}",
            explicit.keys().cloned().collect::<Vec<_>>().join(", "),
            without.join(", ")
        ))
        .hint("set it on every etcd member to restore, or on none to have the member flags built from the inventory"));
    }
    let missing: Vec<&str> = members.iter().map(String::as_str).filter(|m| !restored.contains(m)).collect();
    if !missing.is_empty() {
        return Err(Error::input(format!(
            "etcd has {} members ({}): restoring only {} would leave the restored members apart from the others \
             (not selected, or without a snapshot in backup {timestamp}: {})",
            members.len(),
            members.join(", "),
            restored.join(", "),
            missing.join(", ")
        ))
        .hint(
            "restore every member together (--limit etcd), or set upgrade_etcd_restore_flags on the hosts to restore",
        ));
    }

    struct Member {
        host: String,
        name: String,
        peer_url: String,
        token: String,
    }
    let mut built: Vec<Member> = Vec::new();
    for host in &members {
        let member = Member {
            host: host.clone(),
            name: render(
                host,
                "{{ upgrade_etcd_member_name | default(etcd_hostname | default(openshift_hostname | default(inventory_hostname))) }}",
            )?,
            peer_url: render(
                host,
                "{{ upgrade_etcd_peer_url | default('https://' ~ (etcd_ip | default(openshift_ip | default(ansible_host | default(inventory_hostname)))) ~ ':2380') }}",
            )?,
            token: render(
                host,
                "{{ upgrade_etcd_initial_cluster_token | default(etcd_initial_cluster_token | default('etcd-cluster-1')) }}",
            )?,
        };
        if member.name.is_empty()
            || !(member.peer_url.starts_with("http://") || member.peer_url.starts_with("https://"))
        {
            return Err(Error::input(format!(
                "{host}: the etcd member flags cannot be built: name `{}`, peer URL `{}`",
                member.name, member.peer_url
            ))
            .hint("set upgrade_etcd_member_name and upgrade_etcd_peer_url (http[s]://ADDRESS:2380) for the host"));
        }
        for other in &built {
            for (what, mine, theirs, var) in [
                ("name", &member.name, &other.name, "upgrade_etcd_member_name"),
                ("peer URL", &member.peer_url, &other.peer_url, "upgrade_etcd_peer_url"),
            ] {
                if mine == theirs {
                    return Err(Error::input(format!(
                        "the etcd members {} and {host} would both have the {what} {mine}",
                        other.host
                    ))
                    .hint(format!("set {var} on each etcd host (or upgrade_etcd_restore_flags on every one)")));
                }
            }
            if member.token != other.token {
                return Err(Error::input(format!(
                    "the etcd members {} and {host} have different cluster tokens ({} and {})",
                    other.host, other.token, member.token
                ))
                .hint("set upgrade_etcd_initial_cluster_token once for the etcd group"));
            }
        }
        built.push(member);
    }
    let cluster: Vec<String> = built.iter().map(|m| format!("{}={}", m.name, m.peer_url)).collect();
    let cluster = cluster.join(",");
    Ok(built
        .iter()
        .map(|m| {
            let flags = format!(
                "--name {} --initial-cluster {} --initial-cluster-token {} --initial-advertise-peer-urls {}",
                shell_quote(&m.name),
                shell_quote(&cluster),
                shell_quote(&m.token),
                shell_quote(&m.peer_url)
            );
            (m.host.clone(), flags)
        })
        .collect())
}

/// The facts the `set_fact` tasks of built-in step file `file` (and of the files it includes) leave for `host`,
/// evaluated here without connecting: the plan shows the commands the task files will run with the flavour's own
/// defaults, which are written once, in the task files.
fn settled_facts(
    file: &str,
    host: &str,
    table: &HostVarsTable,
    templar: &Templar,
    mut facts: Map<String, Value>,
) -> Result<Map<String, Value>> {
    fn walk(
        file: &str,
        host: &str,
        table: &HostVarsTable,
        templar: &Templar,
        facts: &mut Map<String, Value>,
        depth: usize,
    ) -> Result<()> {
        let Some(text) = crate::playbooks::text(file) else { return Ok(()) };
        // The built-in files include each other a few levels deep at most; the bound only guards against a loop.
        if depth > 8 {
            return Ok(());
        }
        let (tasks, errors) = crate::tasks::model::parse_tasks(text, Path::new(file));
        if let Some(error) = errors.into_iter().next() {
            return Err(error);
        }
        for task in tasks {
            match &task.action {
                Action::Include { file: included, .. } if !included.contains("{{") => {
                    let dir = Path::new(file).parent().unwrap_or(Path::new(""));
                    walk(&built_in_name(&dir.join(included)), host, table, templar, facts, depth + 1)?;
                }
                Action::Module(call) if call.module == Module::SetFact => {
                    // Every key of one set_fact is rendered before any is set, as in Ansible.
                    let vars = table.for_host(host, facts.clone());
                    let mut set = Map::new();
                    for (name, value) in &call.args {
                        let value = templar
                            .render_value(value, &vars)
                            .map_err(|e| Error::input(format!("{host}: {name}: {e}")).at(task.location.clone()))?;
                        set.insert(name.clone(), value);
                    }
                    facts.extend(set);
                }
                _ => {}
            }
        }
        Ok(())
    }
    walk(file, host, table, templar, &mut facts, 0)?;
    Ok(facts)
}

/// `openshift/../restore.yml` as the built-in files name it: `restore.yml`.
fn built_in_name(path: &Path) -> String {
    let mut parts: Vec<String> = Vec::new();
    for part in path.components() {
        match part {
            std::path::Component::ParentDir => {
                parts.pop();
            }
            std::path::Component::Normal(p) => parts.push(p.to_string_lossy().into_owned()),
            _ => {}
        }
    }
    parts.join("/")
}

fn value_text(value: &Value) -> String {
    match value {
        Value::String(s) => s.trim().to_string(),
        other => other.to_string(),
    }
}

/// The plan, exactly as it will be carried out, stage by stage.
fn plan_text(timestamp: &str, plan: &[HostRestore]) -> String {
    let mut out = format!("Restore plan: backup {timestamp}\n");
    let etcd: Vec<&HostRestore> = plan.iter().filter(|p| p.etcd).collect();
    let step = |out: &mut String, n: &mut usize, title: &str| {
        *n += 1;
        out.push_str(&format!("  {n}. {title}\n"));
    };
    let mut n = 0;
    if !etcd.is_empty() {
        step(
            &mut out,
            &mut n,
            "etcd, still running: check the data directory and the snapshot, restore it beside the data directory",
        );
        for item in &etcd {
            let (data, snapshot) = (&item.shown.data_dir, item.backup.snapshot.as_deref().unwrap_or_default());
            let flags = if item.etcd_flags.is_empty() { String::new() } else { format!(" {}", item.etcd_flags) };
            out.push_str(&format!(
                "     {}: etcdctl snapshot restore {snapshot} --data-dir {data}.restore-{timestamp}{flags}\n",
                item.host
            ));
        }
    }
    if plan.iter().any(|p| !p.files().is_empty() || p.backup.files.iter().any(|f| f == "kubeadm-config.json")) {
        step(&mut out, &mut n, "the configuration, one host after the other");
        for item in plan {
            let dir = &item.backup.dir;
            for file in item.files() {
                out.push_str(&format!(
                    "     {}: copy back {dir}/config{file} -> {file} (the current one kept as {file}.before-restore-{timestamp}, unless an earlier restore kept one there)\n",
                    item.host
                ));
            }
            if item.backup.files.iter().any(|f| f == "kubeadm-config.json") {
                out.push_str(&format!(
                    "     {}: kubeadm-config ConfigMap: not applied; it is in {dir}/config/kubeadm-config.json (kubectl replace -f)\n",
                    item.host
                ));
            }
        }
    }
    if !etcd.is_empty() {
        step(&mut out, &mut n, "etcd: stop every member, then swap its data directory");
        for item in &etcd {
            let data = &item.shown.data_dir;
            out.push_str(&format!("     {}: stop etcd: {}\n", item.host, item.shown.stop));
            out.push_str(&format!(
                "     {}: mv {data} {data}.before-restore-{timestamp}; mv {data}.restore-{timestamp} {data}\n",
                item.host
            ));
        }
        step(&mut out, &mut n, "etcd: start every member");
        for item in &etcd {
            out.push_str(&format!("     {}: start etcd: {}\n", item.host, item.shown.start));
        }
        step(&mut out, &mut n, "etcd: wait until every member answers `etcdctl endpoint health`");
        for item in &etcd {
            out.push_str(&format!("     {}: up to {} s\n", item.host, item.shown.timeout));
        }
        out.push_str(
            "     (a failure once etcd is stopped puts the old data directory back and starts etcd again on every member)\n",
        );
    }
    let restarted: Vec<&HostRestore> = plan.iter().filter(|p| !p.files().is_empty()).collect();
    if !restarted.is_empty() {
        step(&mut out, &mut n, "restart what reads the configuration put back, one host after the other");
        for item in restarted {
            for command in &item.shown.restarts {
                out.push_str(&format!("     {}: {command}\n", item.host));
            }
        }
    }
    out
}
