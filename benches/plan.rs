//! `cargo bench --bench plan`: parse + plan of a generated 5,000-host inventory (INI with ranges, several groups,
//! group_vars/ files). Reports the median of several in-process runs and the peak memory of the release binary
//! running `--plan --output json` (via /usr/bin/time when present). Targets: under 100 ms, under 50 MB.

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

fn median(mut times: Vec<Duration>) -> Duration {
    times.sort();
    times.get(times.len() / 2).copied().unwrap_or_default()
}

fn main() {
    // `cargo bench` passes `--bench`; nothing to filter here.
    let dir = tempfile::tempdir().expect("scratch directory");
    write_inventory(dir.path()).expect("write the inventory");
    let hosts = dir.path().join("hosts");
    let hosts_arg = hosts.to_string_lossy().into_owned();

    for (title, label) in [("all nodes", None), ("label region=east", Some("region=east"))] {
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
        let mut summary = String::new();
        for _ in 0..RUNS {
            let start = Instant::now();
            let inv = match Inventory::load(&hosts) {
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
            "plan/{title}: {summary}; median of {RUNS}: parse {:.1} ms + plan {:.1} ms = {:.1} ms (target < 100 ms)",
            median(load_times).as_secs_f64() * 1e3,
            median(plan_times).as_secs_f64() * 1e3,
            median(total_times).as_secs_f64() * 1e3,
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
        .args(["-f", "%M %e"])
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
    match (fields.next().and_then(|kb| kb.parse::<f64>().ok()), fields.next()) {
        (Some(kb), Some(secs)) if output.status.success() => println!(
            "plan/{title}: binary `upgrade --plan --output json`: peak RSS {:.1} MB, wall {secs} s (target < 50 MB)",
            kb / 1024.0
        ),
        _ => println!("plan/{title}: the binary failed: {}", stderr.trim()),
    }
}
