//! Measures what templating costs per task argument: `cargo run --release --example template_bench`.
//! (A benchmark, not a test: it prints numbers and asserts nothing.)

use std::time::Instant;

use serde_json::json;
use upgrade::tasks::template::{Templar, Vars};

fn main() {
    let templar = Templar::new();
    // A host with a realistic amount of variables, and a hostvars of 200 hosts like it.
    let mut host = serde_json::Map::new();
    for i in 0..200 {
        host.insert(format!("var_{i}"), json!(format!("value {i}")));
    }
    host.insert("node_name".into(), json!("node01"));
    host.insert("upgrade_kubectl".into(), json!("kubectl"));
    host.insert("upgrade_target_version".into(), json!("v1.29.1"));
    host.insert("result".into(), json!({"rc": 0, "stdout": "ok", "failed": false, "changed": true}));
    let hostvars: serde_json::Map<String, serde_json::Value> =
        (0..200).map(|i| (format!("node{i:03}"), serde_json::Value::Object(host.clone()))).collect();
    host.insert("hostvars".into(), serde_json::Value::Object(hostvars));
    let vars = Vars::new(serde_json::Value::Object(host));

    let cases: &[(&str, &str)] = &[
        ("plain string", "systemctl restart kubelet"),
        ("one variable", "{{ node_name }}"),
        ("command line", "{{ upgrade_kubectl }} drain {{ node_name }} --ignore-daemonsets --timeout={{ 600 }}s"),
        ("filters", "{{ upgrade_target_version | regex_replace('^v', '') }}"),
        ("hostvars", "{{ hostvars['node007'].node_name }}"),
    ];
    let n = 20_000;
    for (name, template) in cases {
        let start = Instant::now();
        for _ in 0..n {
            std::hint::black_box(templar.render(template, &vars).expect("renders"));
        }
        println!("render   {name:<14} {:>8.2} µs", start.elapsed().as_secs_f64() * 1e6 / n as f64);
    }
    for (name, cond) in [
        ("condition", "result is succeeded and result.rc == 0"),
        ("version test", "upgrade_target_version[1:] is version('1.28', '>=')"),
    ] {
        let start = Instant::now();
        for _ in 0..n {
            std::hint::black_box(templar.eval_condition_str(cond, &vars).expect("evaluates"));
        }
        println!("when     {name:<14} {:>8.2} µs", start.elapsed().as_secs_f64() * 1e6 / n as f64);
    }
    let start = Instant::now();
    for _ in 0..n {
        let task = vars.with("item", &json!({"name": "x"}));
        std::hint::black_box(templar.render("{{ item.name }}", &task).expect("renders"));
    }
    println!("layer+render item         {:>8.2} µs", start.elapsed().as_secs_f64() * 1e6 / n as f64);
}
