//! The command line. Every flag is declared here; only `commands` reads these structs, and turns them into the
//! plain requests the domain takes.

use std::path::PathBuf;

use clap::builder::PossibleValue;
use clap::{Args, Parser, Subcommand, ValueEnum};

pub(crate) use crate::settings::OutputFormat;

#[derive(Debug, Parser)]
#[command(
    name = "upgrade",
    version,
    about = "Upgrade a Kubernetes/OpenShift cluster described by an Ansible inventory, phase by phase, over SSH",
    long_about = "Reads an Ansible inventory (YAML or INI, with group_vars/ and host_vars/), then runs the phases \
preflight, etcd-backup, control-plane, nodes and verify, running the operator's hook task files around each host.\n\n\
Exit codes: 0 success; 1 hosts failed or the run stopped on the failure threshold; 2 bad input or usage \
(nothing on any host was touched); 130 interrupted.",
    args_conflicts_with_subcommands = true,
    subcommand_negates_reqs = true
)]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub command: Option<Command>,

    #[command(flatten)]
    pub upgrade: UpgradeArgs,
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Validate the inventory, the settings and every hook and playbook task file, without connecting to any host.
    Check(CheckArgs),
    /// Run one Ansible task file on inventory hosts (for hook authors), and print a recap.
    RunTasks(RunTasksArgs),
    /// Put a backup taken by an upgrade back on a host or group: its configuration files, and with --etcd the etcd
    /// snapshot. Prints the plan first; changes nothing without --yes.
    Restore(RestoreArgs),
    /// List the versions the update graph (upgrade_update_graph) offers from the running version, and the path of
    /// hops to each. Reads the cluster on the first master unless --from is given; changes nothing.
    Versions(VersionsArgs),
    /// List every package (per package manager) and container image the upgrade to the target will need, for
    /// filling the mirror of an air-gapped site. Reads the hosts and the cluster; changes nothing.
    Artifacts(ArtifactsArgs),
    /// Print the plan (`upgrade plan` = `upgrade --plan`); with --live, read the cluster and the hosts first.
    // Its help lists what applies to a plan: the run's own flags are hidden here (and refused: commands/plan.rs).
    #[command(
        mut_arg("plan", |a| a.hide(true)),
        mut_arg("yes", |a| a.hide(true)),
        mut_arg("fresh", |a| a.hide(true)),
        mut_arg("rollback_blue_green", |a| a.hide(true)),
        mut_arg("grace_period", |a| a.hide(true)),
        mut_arg("junit", |a| a.hide(true)),
        mut_arg("summary_md", |a| a.hide(true))
    )]
    Plan(UpgradeArgs),
    /// Before crossing a minor: what the target removes or requires (APIs, flags, feature gates, host
    /// prerequisites) against what the cluster serves, is asked and runs on, as preflight's gate reads it; changes
    /// nothing. Exit 1 when the run would be refused.
    CheckApis(CheckApisArgs),
    /// Release the cluster-wide lock a dead run left behind (after confirmation; --yes for scripts). A lock renewed
    /// within its lease is refused unless --force.
    Unlock(UnlockArgs),
    /// Pause this cluster's upgrades, from any machine: the run in progress finishes what is in flight and waits
    /// before its next master or batch, still holding the cluster lock, until `upgrade resume` or
    /// upgrade_pause_timeout (default 24h; then it stops there with nothing cordoned). With no run in progress, the
    /// next run waits before its first master or batch. Records who paused and when in the cluster lock.
    Pause(PauseArgs),
    /// Let a paused cluster's upgrades go on (`upgrade pause`), from any machine: the waiting run starts its next
    /// master or batch within a few seconds.
    Resume(PauseArgs),
    /// The upgrade in progress on this cluster, from any machine: who runs it, since when, its phase and batch, the
    /// hosts done, failed and left, and its last renewal, read from the cluster-wide lock; the last run's result when
    /// none is in progress. Changes nothing.
    Status(StatusArgs),
    /// A picture of a recorded run, from the state directory's journal: one row per host with its steps as bars on
    /// a time axis, the phases as bands, and the durations, slowest first (--html, --svg). Changes nothing.
    Report(ReportArgs),
}

#[derive(Debug, Args, Clone)]
pub(crate) struct ReportArgs {
    #[command(flatten)]
    pub inventory: InventoryArgs,

    /// The run to draw, by its id (the journal's `run`); default: the last one.
    #[arg(long, value_name = "ID")]
    pub run: Option<String>,

    /// Write the page (the timeline, the failures, the durations table; one file, no script) to this file.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,

    /// Write the timeline alone as an SVG picture to this file.
    #[arg(long, value_name = "FILE")]
    pub svg: Option<PathBuf>,

    /// Where the journal lives (default: .upgrade-state next to the inventory).
    #[arg(long, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
}

#[derive(Debug, Args, Clone)]
pub(crate) struct CheckApisArgs {
    #[command(flatten)]
    pub inventory: InventoryArgs,

    /// The version the run would go to ("v1.25.16"). Overrides upgrade_target_version.
    #[arg(long, value_name = "V")]
    pub target: Option<String>,

    /// Output format: text for people, json for CI (one JSON document).
    #[arg(long, value_enum, default_value_t = OutputFormat::Text)]
    pub output: OutputFormat,

    /// How many hosts are read at once, as Ansible's forks. Overrides upgrade_forks. [default: 50]
    #[arg(short = 'f', long, value_name = "N")]
    pub forks: Option<String>,

    #[command(flatten)]
    pub run: RunArgs,

    /// Where the journal, lock and per-host logs live (default: .upgrade-state next to the inventory).
    #[arg(long, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
}

#[derive(Debug, Args, Clone)]
pub(crate) struct UnlockArgs {
    #[command(flatten)]
    pub inventory: InventoryArgs,

    /// Release a lock renewed within its lease too: its run may be alive. It stops at its next renewal (within a
    /// fifth of its lease), but until then a run started now and that one both drive the cluster.
    #[arg(long)]
    pub force: bool,

    #[command(flatten)]
    pub run: RunArgs,
}

#[derive(Debug, Args, Clone)]
pub(crate) struct PauseArgs {
    #[command(flatten)]
    pub inventory: InventoryArgs,

    #[command(flatten)]
    pub run: RunArgs,
}

#[derive(Debug, Args, Clone)]
pub(crate) struct StatusArgs {
    #[command(flatten)]
    pub inventory: InventoryArgs,

    /// Follow it: read the lock again every few seconds and print each change, until the run ends (or Ctrl-C).
    #[arg(long)]
    pub watch: bool,

    /// Output format: text for people, json for scripts (one JSON document; with --watch, one a line).
    #[arg(long, value_enum, default_value_t = OutputFormat::Text)]
    pub output: OutputFormat,

    #[command(flatten)]
    pub run: RunArgs,
}

#[derive(Debug, Args, Clone)]
pub(crate) struct RestoreArgs {
    #[command(flatten)]
    pub inventory: InventoryArgs,

    /// The backup to restore: its timestamp (the directory under upgrade_etcd_backup_dir, e.g. 20261123T110000Z).
    /// Default: the latest one with a verified etcd snapshot.
    #[arg(long, value_name = "TIMESTAMP")]
    pub backup: Option<String>,

    /// Also restore etcd from the backup's snapshot, on the selected etcd hosts (etcdctl snapshot restore into a new
    /// data directory, stop etcd, move it into place, start etcd).
    #[arg(long)]
    pub etcd: bool,

    #[command(flatten)]
    pub run: RunArgs,

    /// Where the journals that list the backups live (default: .upgrade-state next to the inventory).
    #[arg(long, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
}

/// What every command needs to read the inventory.
#[derive(Debug, Args, Clone)]
pub(crate) struct InventoryArgs {
    /// The Ansible inventory: a YAML or INI file, or a directory of them (with group_vars/ and host_vars/).
    #[arg(short = 'i', long, value_name = "PATH", required = true)]
    pub inventory: Option<PathBuf>,

    /// Extra variables, highest precedence: KEY=VALUE, a JSON/YAML mapping, or @FILE. Repeatable.
    #[arg(short = 'e', long = "extra-vars", value_name = "VARS")]
    pub extra_vars: Vec<String>,

    /// Only these hosts: an Ansible host pattern (names, groups, `a:b`, `a:&b`, `a:!b`, wildcards).
    #[arg(short = 'l', long, value_name = "PATTERN")]
    pub limit: Option<String>,

    /// A vault password with its vault id, as ansible-core takes it: LABEL@FILE (an executable file is run for the
    /// password), LABEL@prompt, or FILE alone (label `default`). Repeatable; tried in order.
    #[arg(long = "vault-id", value_name = "LABEL@SOURCE")]
    pub vault_id: Vec<String>,

    /// A file holding the vault password (an executable file is run and prints it). Repeatable. Also
    /// ANSIBLE_VAULT_PASSWORD_FILE.
    #[arg(long = "vault-password-file", visible_alias = "vault-pass-file", value_name = "FILE")]
    pub vault_password_file: Vec<PathBuf>,

    /// Ask for the vault password (on the terminal, without echo; without one, read a line from stdin).
    #[arg(short = 'J', long = "ask-vault-pass", visible_alias = "ask-vault-password")]
    pub ask_vault_pass: bool,
}

#[derive(Debug, Args, Clone)]
pub(crate) struct UpgradeArgs {
    #[command(flatten)]
    pub inventory: InventoryArgs,

    /// Run only these phases (comma-separated or repeated): etcd-backup, control-plane, nodes, verify.
    /// Preflight always runs.
    #[arg(long, value_name = "NAME[,NAME]", value_delimiter = ',')]
    pub phase: Vec<String>,

    /// Nodes upgraded at once: a number, a percentage ("25%"), or a list ("1,20%,-1"). Overrides upgrade_nodes_serial.
    #[arg(long, value_name = "S", allow_hyphen_values = true)]
    pub serial: Option<String>,

    /// Upgrade only nodes matching this Kubernetes equality selector (e.g. "region=group1,env!=dev").
    #[arg(long, value_name = "SELECTOR")]
    pub label: Option<String>,

    /// Stop when a batch's failures exceed this percentage of the batch (0-100).
    #[arg(long, value_name = "P")]
    pub max_fail_percentage: Option<String>,

    /// Mark a node failed when its drain takes longer than this (seconds, or "10m", "1h30m"; 0 waits for ever).
    #[arg(long, value_name = "D")]
    pub drain_timeout: Option<String>,

    /// The version to upgrade to ("v1.29.1" or "1.29.1"). Overrides upgrade_target_version.
    #[arg(long, value_name = "V")]
    pub target_version: Option<String>,

    /// How many hosts are checked or read at once where the run goes over every host (preflight, the backups,
    /// verify, --plan --live), as Ansible's forks: 1 or more. Overrides upgrade_forks. [default: 50]
    #[arg(short = 'f', long, value_name = "N")]
    pub forks: Option<String>,

    /// Allow skipping a minor version (e.g. 1.28 -> 1.30).
    #[arg(long)]
    pub allow_skip_minor: bool,

    /// Run outside upgrade_maintenance_window (and past its end) as if there were none.
    #[arg(long)]
    pub ignore_maintenance_window: bool,

    /// Outside upgrade_maintenance_window, or with too little of it left, wait for the next window instead of
    /// stopping.
    #[arg(long)]
    pub wait_for_window: bool,

    /// Print the plan and exit without contacting any host.
    #[arg(long)]
    pub plan: bool,

    /// With --plan (or `upgrade plan`): connect and read the cluster (nodes, versions, cordons, PodDisruptionBudgets,
    /// pods) and the hosts, changing nothing, and say per node what the run would do and what would block its
    /// drain. Exit 1 when something would block or fail.
    #[arg(long)]
    pub live: bool,

    /// Output format: text for people, json for CI (with --plan one JSON document, otherwise JSON lines).
    #[arg(long, value_enum, default_value_t = OutputFormat::Text)]
    pub output: OutputFormat,

    #[command(flatten)]
    pub run: RunArgs,

    /// Where the journal, lock and per-host logs live (default: .upgrade-state next to the inventory).
    #[arg(long, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,

    /// Ignore the journal of an earlier run and start from the beginning.
    #[arg(long)]
    pub fresh: bool,

    /// Blue-green: make the blue (old) nodes schedulable and the green (new) ones unschedulable again.
    #[arg(long)]
    pub rollback_blue_green: bool,

    /// After a first SIGINT/SIGTERM, how long hosts in flight may take to finish their sequence; past it they stop at
    /// the next safe point (between steps, never inside the upgrade step) and nodes cordoned but not yet upgraded are
    /// uncordoned.
    #[arg(long, value_name = "SECONDS", default_value_t = 300)]
    pub grace_period: u64,

    /// Write a JUnit XML report (one test case per host and phase) to this file.
    #[arg(long, value_name = "FILE")]
    pub junit: Option<PathBuf>,

    /// Write a Markdown summary of the run (result, counts, failures with their reasons, nodes left cordoned with the
    /// fix, durations) to this file. When GITHUB_STEP_SUMMARY is set, the summary is also appended to that file.
    #[arg(long, value_name = "FILE")]
    pub summary_md: Option<PathBuf>,
}

/// How tasks are run on hosts; shared by the upgrade and `run-tasks`.
#[derive(Debug, Args, Clone)]
pub(crate) struct RunArgs {
    /// Trust and record host keys not seen before (a changed key is still refused).
    #[arg(long)]
    pub accept_new_host_keys: bool,

    /// Seconds to wait for an SSH connection.
    #[arg(long, value_name = "SECONDS", default_value_t = 10)]
    pub connect_timeout: u64,

    /// Answer yes to `pause` prompts (needed to run prompting hooks without a terminal), and to `upgrade unlock`;
    /// `restore`: carry out the plan.
    #[arg(long)]
    pub yes: bool,

    /// Show task output (stdout/stderr) as well as task results.
    #[arg(short, long, action = clap::ArgAction::Count)]
    pub verbose: u8,
}

#[derive(Debug, Args, Clone)]
pub(crate) struct CheckArgs {
    #[command(flatten)]
    pub inventory: InventoryArgs,

    /// Extra task files to validate besides the hooks the inventory names.
    #[arg(value_name = "TASK_FILE")]
    pub files: Vec<PathBuf>,
}

#[derive(Debug, Args, Clone)]
pub(crate) struct RunTasksArgs {
    /// The Ansible task file to run (a list of tasks, not a playbook).
    #[arg(value_name = "TASK_FILE")]
    pub file: PathBuf,

    #[command(flatten)]
    pub inventory: InventoryArgs,

    /// How many hosts run at once.
    #[arg(short, long, default_value_t = 20)]
    pub forks: usize,

    #[command(flatten)]
    pub run: RunArgs,
}

#[derive(Debug, Args, Clone)]
pub(crate) struct ArtifactsArgs {
    #[command(flatten)]
    pub inventory: InventoryArgs,

    /// The version to upgrade to ("v1.29.1" or "1.29.1"). Overrides upgrade_target_version.
    #[arg(long, value_name = "V")]
    pub target: Option<String>,

    /// Output format: text for people, json for scripts that fill a mirror (one JSON document).
    #[arg(long, value_enum, default_value_t = OutputFormat::Text)]
    pub output: OutputFormat,

    #[command(flatten)]
    pub run: RunArgs,
}

#[derive(Debug, Args, Clone)]
pub(crate) struct VersionsArgs {
    #[command(flatten)]
    pub inventory: InventoryArgs,

    /// The running version to start from, instead of reading it from the cluster.
    #[arg(long, value_name = "VERSION")]
    pub from: Option<String>,

    /// Output format: text for people, json for CI (one JSON document).
    #[arg(long, value_enum, default_value_t = OutputFormat::Text)]
    pub output: OutputFormat,

    #[command(flatten)]
    pub run: RunArgs,
}

// The format is the domain's type (the executor picks its reporters by it); the command line only names its values.
impl ValueEnum for OutputFormat {
    fn value_variants<'a>() -> &'a [Self] {
        &[OutputFormat::Text, OutputFormat::Json]
    }

    fn to_possible_value(&self) -> Option<PossibleValue> {
        Some(PossibleValue::new(match self {
            OutputFormat::Text => "text",
            OutputFormat::Json => "json",
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn the_command_line_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn subcommands_and_the_upgrade_parse() {
        let cli = Cli::try_parse_from(["upgrade", "-i", "hosts", "--plan", "--phase", "nodes,verify"]).unwrap();
        assert!(cli.command.is_none());
        assert_eq!(cli.upgrade.phase, ["nodes", "verify"]);
        let cli = Cli::try_parse_from(["upgrade", "run-tasks", "t.yml", "-i", "hosts", "--limit", "n1"]).unwrap();
        assert!(matches!(cli.command, Some(Command::RunTasks(_))));
        assert!(Cli::try_parse_from(["upgrade", "--plan"]).is_err());
        let cli = Cli::try_parse_from(["upgrade", "-i", "hosts", "-f", "5"]).unwrap();
        assert_eq!(cli.upgrade.forks.as_deref(), Some("5"));
        let cli = Cli::try_parse_from(["upgrade", "plan", "--live", "-i", "hosts", "--forks", "7"]).unwrap();
        assert!(matches!(cli.command, Some(Command::Plan(UpgradeArgs { forks: Some(ref f), .. })) if f == "7"));
        let cli = Cli::try_parse_from(["upgrade", "run-tasks", "t.yml", "-i", "hosts", "-f", "3"]).unwrap();
        assert!(matches!(cli.command, Some(Command::RunTasks(RunTasksArgs { forks: 3, .. }))));
    }
}
