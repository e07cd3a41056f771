//! `cargo bench --bench plan`: parse + plan of a generated 5,000-host inventory (INI with ranges, several groups,
//! group_vars/ files). Reports the median of several in-process runs and the peak memory of the release binary
//! running `--plan --output json` (via /usr/bin/time when present). Targets: parse + plan within 50 ms, under 50 MB.
//! The CPU time of the same runs is printed too: on a loaded machine (other builds beside the bench) the wall time
//! says more about the neighbours than about the plan.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use upgrade::inventory::{self, Inventory};
use upgrade::plan::{Plan, PlanRequest};
use upgrade::settings::SettingFlags;

const RUNS: usize = 15;

fn write_inventory(dir: &Path) -> std::io::Result<()> {
    let hosts = "\
# 3 masters + 200 infra + 2400 east + 2397 west = 5000 hosts
[masters]
master[01:03].example.com

[etcd]
master[01:03].example.com

[infra]
infra[001:200].example.com openshift_node_group_name=node-config-infra

[compute_east]
node-east-[0001:2400].example.com

[compute_west]
node-west-[0001:2397].example.com

[compute:children]
compute_east
compute_west

[nodes:children]
masters
infra
compute

[OSEv3:children]
masters
nodes
etcd

[OSEv3:vars]
ansible_user=root
openshift_deployment_type=origin
openshift_upgrade_nodes_serial=[1, '5%', '10%']
openshift_upgrade_nodes_max_fail_percentage=20
openshift_upgrade_nodes_drain_timeout=10m
";
    std::fs::write(dir.join("hosts"), hosts)?;
    let group_vars = dir.join("group_vars");
    std::fs::create_dir_all(&group_vars)?;
    std::fs::write(group_vars.join("all.yml"), "---\nansible_become: true\nupgrade_kubectl: kubectl\n")?;
    std::fs::write(
        group_vars.join("compute_east.yml"),
        "---\nopenshift_node_group_name: node-config-compute\nnode_labels:\n  region: east\n  zone: a\n",
    )?;
    std::fs::write(
        group_vars.join("compute_west.yml"),
        "---\nopenshift_node_group_name: node-config-compute\nnode_labels:\n  region: west\n  zone: b\n",
    )?;
    Ok(())
}

/// The same hosts and groups with every compute node on its own line with its own `ansible_host`, as inventories
/// generated from a CMDB are: no two hosts share their own variables, so each host's variables are merged alone.
fn write_one_line_per_host(dir: &Path) -> std::io::Result<std::path::PathBuf> {
    let ranged = std::fs::read_to_string(dir.join("hosts"))?;
    let mut lines = Vec::new();
    for line in ranged.lines() {
        match line.strip_prefix("node-").and_then(|rest| rest.split_once("-[")) {
            Some((side, range)) => {
                let (first, last) = range.trim_end_matches("].example.com").split_once(':').unwrap_or(("0", "0"));
                let (first, last): (u32, u32) = (first.parse().unwrap_or(0), last.parse().unwrap_or(0));
                let net = if side == "east" { 1 } else { 2 };
                for n in first..=last {
                    lines.push(format!("node-{side}-{n:04}.example.com ansible_host=10.{net}.{}.{}", n / 256, n % 256));
                }
            }
            None => lines.push(line.to_string()),
        }
    }
    let path = dir.join("hosts-one-line-per-host");
    std::fs::write(&path, lines.join("\n") + "\n")?;
    Ok(path)
}

/// The CPU time this thread has used so far.
fn thread_cpu() -> Duration {
    let mut now = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes one timespec through a valid pointer; the thread CPU clock always exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut now) };
    Duration::new(now.tv_sec as u64, now.tv_nsec as u32)
}

fn median(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times.get(times.len() / 2).copied().unwrap_or_default()
}

fn main() {
    // `cargo bench` passes `--bench`; nothing to filter here.
    let dir = tempfile::tempdir().expect("scratch directory");
    write_inventory(dir.path()).expect("write the inventory");
    let ranged = dir.path().join("hosts");
    let one_line_per_host = write_one_line_per_host(dir.path()).expect("write the inventory of one line per host");

    for (title, hosts, label) in [
        ("all nodes", &ranged, None),
        ("label region=east", &ranged, Some("region=east")),
        ("one line per host, all nodes", &one_line_per_host, None),
    ] {
        let hosts_arg = hosts.to_string_lossy().into_owned();
        let mut argv = vec!["upgrade", "-i", hosts_arg.as_str(), "--plan", "--output", "json"];
        argv.extend(label.iter().flat_map(|l| ["--label", l]));
        // The same command line as `commands` hands it to the plan.
        let args = PlanRequest {
            flags: SettingFlags { label: label.map(str::to_string), ..SettingFlags::default() },
            ..PlanRequest::default()
        };
        let mut load_times = Vec::new();
        let mut plan_times = Vec::new();
        let mut total_times = Vec::new();
        let mut cpu_times = Vec::new();
        let mut summary = String::new();
        for _ in 0..RUNS {
            let start = Instant::now();
            let cpu_start = thread_cpu();
            let inv = match Inventory::load(hosts) {
                Ok(inv) => inv,
                Err(err) => {
                    eprintln!("bench plan: cannot load the generated inventory: {err}");
                    std::process::exit(1);
                }
            };
            let extra = inventory::parse_extra_vars(&[], dir.path()).expect("no extra vars");
            let loaded = Instant::now();
            let plan = match Plan::build(&inv, &extra, &args) {
                Ok(plan) => plan,
                Err(err) => {
                    eprintln!("bench plan: cannot build the plan: {err}");
                    std::process::exit(1);
                }
            };
            let done = Instant::now();
            cpu_times.push(thread_cpu() - cpu_start);
            load_times.push(loaded - start);
            plan_times.push(done - loaded);
            total_times.push(done - start);
            let nodes = plan.phases.iter().find(|p| p.phase == upgrade::plan::Phase::Nodes);
            summary = format!(
                "{} hosts in the plan, {} node batches",
                plan.hosts.len(),
                nodes.map_or(0, |p| p.batches.len())
            );
        }
        println!(
            "plan/{title}: {summary}; median of {RUNS}: parse {:.1} ms + plan {:.1} ms = {:.1} ms, CPU {:.1} ms \
             (target <= 50 ms)",
            median(load_times).as_secs_f64() * 1e3,
            median(plan_times).as_secs_f64() * 1e3,
            median(total_times).as_secs_f64() * 1e3,
            median(cpu_times).as_secs_f64() * 1e3,
        );
        peak_memory(title, &argv[1..]);
    }
}

/// Peak resident memory of the release binary doing the same work, end to end (JSON printed to /dev/null).
fn peak_memory(title: &str, args: &[&str]) {
    let time = Path::new("/usr/bin/time");
    if !time.exists() {
        println!("plan/{title}: peak memory not measured (/usr/bin/time is missing)");
        return;
    }
    let output = Command::new(time)
        .args(["-f", "%M %e %U %S"])
        .arg(env!("CARGO_BIN_EXE_upgrade"))
        .args(args)
        .stdout(std::process::Stdio::null())
        .output();
    let Ok(output) = output else {
        println!("plan/{title}: peak memory not measured (cannot run /usr/bin/time)");
        return;
    };
    let stderr = String::from_utf8_lossy(&output.stderr);
    let last = stderr.lines().last().unwrap_or("");
    let mut fields = last.split_whitespace();
    let mut number = || fields.next().and_then(|n| n.parse::<f64>().ok());
    match (number(), number(), number(), number()) {
        (Some(kb), Some(wall), Some(user), Some(system)) if output.status.success() => println!(
            "plan/{title}: binary `upgrade --plan --output json`: peak RSS {:.1} MB, wall {wall:.2} s, CPU {:.2} s \
             (target < 50 MB)",
            kb / 1024.0,
            user + system
        ),
        _ => println!("plan/{title}: the binary failed: {}", stderr.trim()),
    }
}
