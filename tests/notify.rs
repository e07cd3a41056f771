//! Notifications end to end: a notification command on the controller and a webhook received by a real HTTP
//! listener on loopback (std's TcpListener, in this test) get the run's milestones in order; a receiver that fails
//! is said once and changes neither the run nor its exit code; the webhook's address is never printed.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::mpsc;
use std::time::Duration;

use serde_json::Value;

use crate::upgrade::{TestCluster, nodes, spec};

/// An HTTP server on loopback that answers 200 to every request and hands over each request's path and body.
fn webhook_listener() -> (String, mpsc::Receiver<(String, String)>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("a loopback port");
    let url = format!("http://{}/hooks/T000/secret-token", listener.local_addr().expect("its address"));
    let (send, receive) = mpsc::channel();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let mut reader = BufReader::new(stream.try_clone().expect("clone"));
            let mut request_line = String::new();
            if reader.read_line(&mut request_line).is_err() {
                continue;
            }
            let mut length = 0;
            loop {
                let mut header = String::new();
                if reader.read_line(&mut header).unwrap_or(0) == 0 || header == "\r\n" {
                    break;
                }
                if let Some(value) = header.to_ascii_lowercase().strip_prefix("content-length:") {
                    length = value.trim().parse().unwrap_or(0);
                }
            }
            let mut body = vec![0; length];
            let _ = reader.read_exact(&mut body);
            let mut stream = stream;
            let _ = stream.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
            let _ = send.send((request_line, String::from_utf8_lossy(&body).into_owned()));
        }
    });
    (url, receive)
}

fn received(from: &mpsc::Receiver<(String, String)>) -> Vec<(String, String)> {
    std::iter::from_fn(|| from.recv_timeout(Duration::from_millis(500)).ok()).collect()
}

fn names(events: &[Value]) -> Vec<String> {
    events.iter().map(|e| e["event"].as_str().unwrap_or("?").to_string()).collect()
}

#[test]
fn the_notification_command_and_a_webhook_get_the_milestones_in_order_and_a_failing_one_is_said_once() {
    let (url, webhook) = webhook_listener();
    let cluster = TestCluster::new(&spec(&nodes(1, "region=a")))
        .var(&format!("upgrade_notify_webhook_url: \"{url}\""))
        .var("upgrade_notify_command: \"cat >> notified.jsonl\"");
    // A format that is none is refused before anything is touched.
    cluster
        .upgrade(&["-e", "upgrade_notify_webhook_format=teams"])
        .expect_code(2)
        .stderr_has("upgrade_notify_webhook_format: teams is not a format");
    assert!(cluster.fake.calls().iter().all(|c| c.action != "cordon"), "nothing was touched");

    let run = cluster.upgrade(&[]).expect_code(0);
    assert!(!run.output().contains("secret-token"), "the webhook's address is never printed:\n{}", run.output());
    let text = std::fs::read_to_string(cluster.path("notified.jsonl")).expect("the command wrote what it got");
    let by_command: Vec<Value> =
        text.lines().map(|l| serde_json::from_str(l).expect("one JSON event a line")).collect();
    let by_webhook: Vec<Value> =
        received(&webhook).iter().map(|(_, body)| serde_json::from_str(body).expect("a JSON body")).collect();
    assert_eq!(names(&by_command), names(&by_webhook), "both receivers get the same events, in order");
    let order = names(&by_command);
    assert_eq!(order.first().map(String::as_str), Some("run-started"), "{order:?}");
    assert_eq!(order.last().map(String::as_str), Some("summary"), "{order:?}");
    for milestone in ["phase-started", "phase-finished", "batch-finished"] {
        assert!(order.iter().any(|e| e == milestone), "{milestone} in {order:?}");
    }
    assert!(!order.iter().any(|e| e == "step-started" || e == "task-finished"), "milestones only: {order:?}");
    let last = by_command.last().expect("summary");
    assert_eq!((last["status"].as_str(), last["exit_code"].as_i64()), (Some("success"), Some(0)), "{last}");
    let phases: Vec<&str> =
        by_command.iter().filter(|e| e["event"] == "phase-started").filter_map(|e| e["phase"].as_str()).collect();
    assert_eq!(phases.first(), Some(&"preflight"), "{phases:?}");
    assert_eq!(phases.last(), Some(&"verify"), "{phases:?}");

    // Slack: a line a person reads; a command that fails is said once and the run still succeeds.
    let run = cluster
        .upgrade(&["-e", "upgrade_notify_webhook_format=slack", "-e", "{\"upgrade_notify_command\": \"exit 3\"}"])
        .expect_code(0);
    let said = run.stdout_text().matches("upgrade_notify_command failed (exit status: 3)").count();
    assert_eq!(said, 1, "said once:\n{}", run.stdout_text());
    let texts: Vec<String> = received(&webhook)
        .iter()
        .map(|(_, body)| serde_json::from_str::<Value>(body).expect("JSON")["text"].as_str().unwrap_or("").to_string())
        .collect();
    assert_eq!(texts.first().map(String::as_str), Some("upgrade to v1.29.1 started"), "{texts:?}");
    assert!(texts.last().is_some_and(|t| t.starts_with("upgrade to v1.29.1 finished: success (exit 0)")), "{texts:?}");

    // A webhook nobody answers: said once, the address not shown, the exit code the run's.
    let dead = TcpListener::bind("127.0.0.1:0").expect("a port");
    let dead_url = format!("http://{}/hooks/T000/secret-token", dead.local_addr().expect("address"));
    drop(dead);
    let run = cluster.upgrade(&["-e", &format!("upgrade_notify_webhook_url={dead_url}")]).expect_code(0);
    let said = run.stdout_text().matches("upgrade_notify_webhook_url: the POST failed").count();
    assert_eq!(said, 1, "said once:\n{}", run.stdout_text());
    assert!(!run.output().contains("secret-token"), "{}", run.output());
}
