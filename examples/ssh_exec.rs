//! Times the connection layer alone: opens one SSH connection per host (all hosts at once), then runs M `true`
//! commands one after another on each host, all hosts concurrently. Used by scripts/bench-ssh.sh.
//!
//! usage: ssh_exec HOSTS.json M
//! HOSTS.json: `[{"name": "n1", "vars": {"ansible_host": "127.0.0.1", "ansible_port": 2222, ...}}, ...]`
//! Prints one line of `key=value` figures (milliseconds).

use std::time::Instant;

use serde_json::Value;
use upgrade::connection::{ConnectOptions, open};

#[tokio::main]
async fn main() {
    let mut args = std::env::args().skip(1);
    let (Some(file), Some(count)) = (args.next(), args.next().and_then(|m| m.parse::<usize>().ok())) else {
        eprintln!("usage: ssh_exec HOSTS.json M");
        std::process::exit(2);
    };
    let hosts: Vec<(String, serde_json::Map<String, Value>)> = std::fs::read_to_string(&file)
        .ok()
        .and_then(|text| serde_json::from_str::<Vec<Value>>(&text).ok())
        .unwrap_or_default()
        .into_iter()
        .filter_map(|h| Some((h.get("name")?.as_str()?.to_string(), h.get("vars")?.as_object()?.clone())))
        .collect();
    if hosts.is_empty() {
        eprintln!("{file}: no hosts");
        std::process::exit(2);
    }
    let options = ConnectOptions::default();
    let started = Instant::now();
    let opening = hosts.iter().map(|(name, vars)| {
        let (name, vars, options) = (name.clone(), vars.clone(), options.clone());
        tokio::spawn(async move { open(&name, &vars, &options).await.map_err(|e| e.to_string()) })
    });
    let mut connections = Vec::new();
    for handle in opening.collect::<Vec<_>>() {
        match handle.await {
            Ok(Ok(conn)) => connections.push(conn),
            Ok(Err(err)) => {
                eprintln!("{err}");
                std::process::exit(1);
            }
            Err(err) => {
                eprintln!("{err}");
                std::process::exit(1);
            }
        }
    }
    let connect_ms = started.elapsed().as_secs_f64() * 1000.0;
    let started = Instant::now();
    let running = connections.iter().map(|conn| {
        let conn = conn.clone();
        tokio::spawn(async move {
            for _ in 0..count {
                match conn.exec("true", None, None).await {
                    Ok(out) if out.status == 0 => {}
                    Ok(out) => return Err(format!("`true` exited {}", out.status)),
                    Err(err) => return Err(err.to_string()),
                }
            }
            Ok(())
        })
    });
    for handle in running.collect::<Vec<_>>() {
        if let Ok(Err(err)) | Err(err) = handle.await.map_err(|e| e.to_string()) {
            eprintln!("{err}");
            std::process::exit(1);
        }
    }
    let exec_ms = started.elapsed().as_secs_f64() * 1000.0;
    for conn in &connections {
        conn.close().await;
    }
    println!(
        "hosts={} commands_per_host={count} connect_ms={connect_ms:.1} exec_ms={exec_ms:.1} per_command_ms={:.2}",
        hosts.len(),
        exec_ms / count as f64
    );
}
