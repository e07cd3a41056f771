//! What every command does the same way: load the inventory with `-e`, reach the hosts, build the plan and upgrade
//! requests from the flags, print.

use crate::console::errln;
use std::io::{IsTerminal, Write};
use std::sync::Arc;
use std::time::Duration;

use crate::cli::{InventoryArgs, RunArgs, UpgradeArgs};
use crate::error::{Error, Result};
use crate::inventory::{self, Inventory, Vars, VaultSecrets};
use crate::plan::PlanRequest;
use crate::session::{Remote, UpgradeRequest};
use crate::settings::SettingFlags;
use crate::tasks::connect::ConnectOptions;
use crate::tasks::engine::{EngineOptions, Prompter};

/// The inventory and the `-e` variables of one invocation.
pub(super) struct Loaded {
    pub(super) inventory: Inventory,
    pub(super) extra: Vars,
    /// The vault passwords, for the task files that read encrypted files (`include_vars`).
    pub(super) vault: VaultSecrets,
}

/// Gathers the vault passwords, reads the inventory, then `-e`.
pub(super) fn load(args: &InventoryArgs) -> Result<Loaded> {
    let vault = super::vault::vault_secrets(args)?;
    let inventory = load_inventory(args, &vault)?;
    let extra = extra_vars(args, &vault)?;
    Ok(Loaded { inventory, extra, vault })
}

/// Reads the inventory and says its warnings (what Ansible would warn about too) on stderr, before any plan or run.
pub(super) fn load_inventory(args: &InventoryArgs, vault: &VaultSecrets) -> Result<Inventory> {
    let path = args
        .inventory
        .as_deref()
        .ok_or_else(|| Error::input("--inventory is required").hint("pass --inventory PATH"))?;
    let mut inventory = Inventory::load_with_vault(path, vault)?;
    // kubespray's playbooks declare k8s_cluster (and so read group_vars/k8s_cluster) before anything runs.
    inventory.define_kubespray_cluster_group(vault)?;
    // No JSON event carries a warning: stderr keeps stdout's JSON lines clean.
    for warning in &inventory.warnings {
        errln!("warning: {warning}");
    }
    Ok(inventory)
}

/// The `-e` variables; `@FILE` paths are relative to the working directory.
pub(super) fn extra_vars(args: &InventoryArgs, vault: &VaultSecrets) -> Result<Vars> {
    inventory::parse_extra_vars_with_vault(&args.extra_vars, &std::env::current_dir().unwrap_or_default(), vault)
}

/// The runtime, connection options and task options of a command that reaches hosts.
pub(super) fn remote(args: &RunArgs) -> Result<Remote> {
    raise_open_files_limit();
    keep_the_heap_compact();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| Error::internal(format!("cannot start the async runtime: {e}")))?;
    Ok(Remote {
        runtime,
        connect: ConnectOptions {
            connect_timeout: Duration::from_secs(args.connect_timeout),
            accept_new_host_keys: args.accept_new_host_keys,
            command_timeout: None,
        },
        engine: EngineOptions {
            assume_yes: args.yes,
            verbosity: args.verbose,
            command_timeout: None,
            prompter: terminal_prompter(),
            whole_stdout: false,
            async_jobs: Default::default(),
            vault: Default::default(),
        },
    })
}

/// The soft limit on open files, often 1024, is below what a wide batch needs: each host in flight holds a command's
/// pipes (and over SSH a session) for its step, so 500 nodes upgraded at once (serial 10% of 5,000) run out of
/// descriptors. It is raised towards the hard limit, as Go programs do by default, but not above 65,536: the commands
/// started inherit it, and a few programs close every descriptor up to it. Nothing is said when this fails: the run
/// then reports "Too many open files" where it happens.
pub(super) fn raise_open_files_limit() {
    const ENOUGH: libc::rlim_t = 65_536;
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit and setrlimit only read and write the struct passed, which lives for both calls.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) != 0 {
            return;
        }
        let wanted = limit.rlim_max.min(ENOUGH);
        if limit.rlim_cur < wanted {
            limit.rlim_cur = wanted;
            let _ = libc::setrlimit(libc::RLIMIT_NOFILE, &limit);
        }
    }
}

/// Two glibc allocator settings, each measured with scripts/bench-scale.sh:
/// - glibc serves an allocation of more than M_MMAP_THRESHOLD from mmap (given back on free), but raises the
///   threshold to the size of each such block freed, up to 32 MiB: after the first cluster read of a large cluster (a
///   node list of several MB, read again at every poll) the later ones come from the heap, whose freed space is
///   fragmented by the small allocations around it and never given back. Peak memory at 2,000 nodes: 196 MB with the
///   sliding threshold, 161 MB with it fixed at 256 KiB.
/// - glibc gives each thread that allocates while another holds the arena an arena of its own, up to 8 per core. The
///   tokio workers, the blocking threads and the output thread then each keep freed memory the others cannot reuse:
///   peak memory at 5,000 nodes 228 MB with them, 177 MB with one arena, for the same CPU time (the small allocations
///   come from each thread's cache without the arena's lock).
pub(super) fn keep_the_heap_compact() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only changes allocator settings; no memory is touched.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 256 * 1024);
        libc::mallopt(libc::M_ARENA_MAX, 1);
    }
}

/// Asks `pause` prompts on the terminal; `None` when there is none (then `pause` with a prompt needs `--yes`).
pub(super) fn terminal_prompter() -> Option<Prompter> {
    if !std::io::stdin().is_terminal() {
        return None;
    }
    Some(Arc::new(|question: &str| {
        eprint!("{question}: ");
        let mut line = String::new();
        match std::io::stdin().read_line(&mut line) {
            Ok(0) | Err(_) => None,
            Ok(_) => Some(line.trim_end_matches(['\r', '\n']).to_string()),
        }
    }))
}

/// What the plan is asked for, from the upgrade's flags.
pub(super) fn plan_request(args: &UpgradeArgs) -> PlanRequest {
    PlanRequest {
        phases: args.phase.clone(),
        limit: args.inventory.limit.clone(),
        flags: SettingFlags {
            serial: args.serial.clone(),
            label: args.label.clone(),
            max_fail_percentage: args.max_fail_percentage.clone(),
            drain_timeout: args.drain_timeout.clone(),
            target_version: args.target_version.clone(),
            forks: args.forks.clone(),
        },
    }
}

pub(super) fn upgrade_request(args: &UpgradeArgs) -> UpgradeRequest {
    UpgradeRequest {
        plan: plan_request(args),
        output: args.output,
        allow_skip_minor: args.allow_skip_minor,
        window: crate::phase::run::WindowOverride {
            ignore: args.ignore_maintenance_window,
            wait: args.wait_for_window,
        },
        state_dir: args.state_dir.clone(),
        fresh: args.fresh,
        rollback_blue_green: args.rollback_blue_green,
        grace_period: Duration::from_secs(args.grace_period),
        junit: args.junit.clone(),
        summary_md: args.summary_md.clone(),
    }
}

/// Writes a command's answer on stdout; a closed pipe (`| head`) is not a failure of the command.
pub(super) fn print(text: &str) {
    let mut stdout = std::io::stdout().lock();
    let _ = stdout.write_all(text.as_bytes()).and_then(|()| stdout.flush());
}
