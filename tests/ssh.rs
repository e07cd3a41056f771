//! Connections against a real sshd on loopback (and the local connection), as the executor uses them.

use std::net::TcpListener;
use std::time::{Duration, Instant};

use serde_json::{Map, Value};
use upgrade::connection::{ConnectOptions, ConnectionError, SharedConnection, open};

use crate::support::sshd::TestSshd;

fn options() -> ConnectOptions {
    ConnectOptions { connect_timeout: Duration::from_secs(5), ..ConnectOptions::default() }
}

async fn connect(sshd: &TestSshd, name: &str) -> SharedConnection {
    match open(name, &sshd.vars_json(name), &options()).await {
        Ok(conn) => conn,
        Err(err) => panic!("cannot connect to {name}: {err}\nsshd log:\n{}", sshd.log()),
    }
}

fn local_vars() -> Map<String, Value> {
    let mut vars = Map::new();
    vars.insert("ansible_connection".into(), "local".into());
    vars
}

fn text(bytes: &[u8]) -> &str {
    std::str::from_utf8(bytes).unwrap_or("<not utf-8>")
}

/// The checks every connection kind must pass the same way.
async fn check_exec_results(conn: &SharedConnection) {
    let out = conn.exec("echo out; echo err >&2", None, None).await.unwrap();
    assert_eq!((out.status, text(&out.stdout), text(&out.stderr)), (0, "out\n", "err\n"));
    for code in [1, 2, 127, 255] {
        let out = conn.exec(&format!("exit {code}"), None, None).await.unwrap();
        assert_eq!(out.status, code, "exit {code} is a result, not a connection error");
    }
    let missing = conn.exec("no-such-command-here", None, None).await.unwrap();
    assert_eq!(missing.status, 127);
    assert!(text(&missing.stderr).contains("not found"), "{}", text(&missing.stderr));
    let killed = conn.exec("kill -TERM $$", None, None).await.unwrap();
    assert_eq!(killed.status, 128 + 15, "a command killed by a signal reports 128+N");
    let piped = conn.exec("tr a-z A-Z", Some(b"hello\nworld"), None).await.unwrap();
    assert_eq!(text(&piped.stdout), "HELLO\nWORLD");
    let quoted = conn.exec("printf '%s' \"it's $((6*7))\"", None, None).await.unwrap();
    assert_eq!(text(&quoted.stdout), "it's 42");
    // More than a pipe buffer each way, at once, must not deadlock.
    let big = vec![b'x'; 1 << 20];
    let echoed = conn.exec("cat; head -c 300000 /dev/zero >&2", Some(&big), None).await.unwrap();
    assert_eq!((echoed.stdout.len(), echoed.stderr.len()), (1 << 20, 300000));
}

async fn check_put_and_fetch(conn: &SharedConnection, dir: &std::path::Path) {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join("etc").join("app.conf");
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    let path_text = path.to_str().unwrap();
    conn.put(b"key: value\n", path_text, 0o640).await.unwrap();
    let meta = std::fs::metadata(&path).unwrap();
    assert_eq!(meta.permissions().mode() & 0o7777, 0o640);
    assert_eq!(std::fs::read(&path).unwrap(), b"key: value\n");
    conn.put(b"replaced", path_text, 0o755).await.unwrap();
    assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o7777, 0o755);
    assert_eq!(conn.fetch(path_text).await.unwrap(), b"replaced");
    let leftovers: Vec<_> =
        std::fs::read_dir(path.parent().unwrap()).unwrap().flatten().map(|e| e.file_name()).collect();
    assert_eq!(leftovers.len(), 1, "no temp files left behind: {leftovers:?}");
    let binary: Vec<u8> = (0..=255).collect();
    conn.put(&binary, path_text, 0o600).await.unwrap();
    assert_eq!(conn.fetch(path_text).await.unwrap(), binary);
    let missing_dir = dir.join("no/such/dir/file");
    let err = conn.put(b"x", missing_dir.to_str().unwrap(), 0o644).await.unwrap_err();
    assert!(err.to_string().contains("no/such/dir/file"), "{err}");
    let err = conn.fetch(dir.join("absent").to_str().unwrap()).await.unwrap_err();
    assert!(err.to_string().contains("absent"), "{err}");
}

#[tokio::test]
async fn ssh_exec_reports_output_and_every_exit_code_as_a_result() {
    let sshd = TestSshd::start();
    let conn = connect(&sshd, "node1").await;
    check_exec_results(&conn).await;
    // Sessions get the clean HOME the harness configures, not root's (pyenv-laden) one.
    let home = conn.exec("echo $HOME", None, None).await.unwrap();
    assert_eq!(text(&home.stdout).trim(), sshd.dir().join("home").to_str().unwrap());
    conn.close().await;
}

#[tokio::test]
async fn local_exec_reports_output_and_every_exit_code_as_a_result() {
    let conn = open("localhost", &local_vars(), &options()).await.unwrap();
    check_exec_results(&conn).await;
}

#[tokio::test]
async fn ssh_put_is_atomic_with_mode_and_fetch_reads_it_back() {
    let sshd = TestSshd::start();
    let conn = connect(&sshd, "node1").await;
    check_put_and_fetch(&conn, &sshd.host_root("node1")).await;
}

#[tokio::test]
async fn local_put_is_atomic_with_mode_and_fetch_reads_it_back() {
    let dir = tempfile::tempdir().unwrap();
    let conn = open("localhost", &local_vars(), &options()).await.unwrap();
    check_put_and_fetch(&conn, dir.path()).await;
}

#[tokio::test]
async fn many_commands_and_hosts_share_one_master_per_host() {
    let sshd = TestSshd::start();
    let (a, b) = (connect(&sshd, "a").await, connect(&sshd, "b").await);
    // The client side of SSH_CONNECTION names the TCP connection: one per host, whatever the number of commands.
    let source = |out: upgrade::connection::ExecOutput| text(&out.stdout).split_whitespace().nth(1).map(str::to_string);
    let first = source(a.exec("echo $SSH_CONNECTION", None, None).await.unwrap());
    assert!(first.is_some());
    let runs = (0..40).map(|_| {
        let a = a.clone();
        async move { a.exec("echo $SSH_CONNECTION", None, None).await }
    });
    for out in futures_join_all(runs).await {
        assert_eq!(source(out.unwrap()), first);
    }
    let other = source(b.exec("echo $SSH_CONNECTION", None, None).await.unwrap());
    assert_ne!(other, first, "each inventory host has its own master");
    // The two names keep separate state directories on the shared sshd.
    assert_ne!(sshd.host_root("a"), sshd.host_root("b"));
}

/// Runs futures concurrently (the test binary has no `futures` crate).
async fn futures_join_all<F: std::future::Future + Send + 'static>(futures: impl Iterator<Item = F>) -> Vec<F::Output>
where
    F::Output: Send + 'static,
{
    let handles: Vec<_> = futures.map(tokio::spawn).collect();
    let mut outputs = Vec::new();
    for handle in handles {
        outputs.push(handle.await.unwrap());
    }
    outputs
}

#[tokio::test]
async fn a_closed_master_is_started_again_on_the_next_command() {
    let sshd = TestSshd::start();
    let conn = connect(&sshd, "node1").await;
    conn.close().await;
    conn.close().await;
    let out = conn.exec("echo again", None, None).await.unwrap();
    assert_eq!(text(&out.stdout), "again\n");
}

#[tokio::test]
async fn an_unknown_host_key_fails_strictly_and_is_accepted_on_request() {
    let sshd = TestSshd::start();
    let empty = sshd.dir().join("empty_known_hosts");
    std::fs::write(&empty, "").unwrap();
    let mut vars = sshd.vars_json("node1");
    vars.insert("ansible_ssh_common_args".into(), format!("-o UserKnownHostsFile={}", empty.display()).into());

    let err = open("node1", &vars, &options()).await.err().expect("an unknown key must fail");
    let ConnectionError::HostKey(message) = &err else { panic!("expected a host key error, got {err:?}") };
    let keyscan = format!("ssh-keyscan -p {} 127.0.0.1 >> {}", sshd.port(), empty.display());
    assert!(message.contains(&keyscan), "the message says how to trust the key: {message}");
    assert!(message.contains("--accept-new-host-keys"), "{message}");
    assert_eq!(std::fs::read_to_string(&empty).unwrap(), "", "strict checking records nothing");

    let accept_new = ConnectOptions { accept_new_host_keys: true, ..options() };
    let conn = open("node1", &vars, &accept_new).await.unwrap();
    assert_eq!(conn.exec("true", None, None).await.unwrap().status, 0);
    assert!(!std::fs::read_to_string(&empty).unwrap().is_empty(), "the accepted key is recorded");
}

#[tokio::test]
async fn a_changed_host_key_fails_even_with_accept_new() {
    let (sshd, impostor) = (TestSshd::start(), TestSshd::start());
    let known_hosts = sshd.dir().join("stale_known_hosts");
    std::fs::write(&known_hosts, format!("[127.0.0.1]:{} {}\n", sshd.port(), impostor.host_public_key())).unwrap();
    let mut vars = sshd.vars_json("node1");
    vars.insert("ansible_ssh_common_args".into(), format!("-o UserKnownHostsFile={}", known_hosts.display()).into());
    for accept_new_host_keys in [false, true] {
        let err = open("node1", &vars, &ConnectOptions { accept_new_host_keys, ..options() }).await.err();
        let Some(ConnectionError::HostKey(message)) = &err else { panic!("expected a host key error, got {err:?}") };
        assert!(message.contains("CHANGED") && message.contains("ssh-keygen"), "{message}");
    }
}

#[tokio::test]
async fn a_closed_port_is_unreachable_and_names_the_address() {
    let sshd = TestSshd::start();
    let closed = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let mut vars = sshd.vars_json("gone");
    vars.insert("ansible_port".into(), closed.into());
    let err = open("gone", &vars, &options()).await.err();
    let Some(ConnectionError::Unreachable(message)) = &err else { panic!("expected unreachable, got {err:?}") };
    assert!(message.contains(&format!("127.0.0.1:{closed}")), "{message}");
    assert!(message.contains("Connection refused"), "{message}");
}

#[tokio::test]
async fn a_host_that_never_answers_times_out() {
    let sshd = TestSshd::start();
    // The kernel completes the TCP handshake for a listener nobody accepts on, but no SSH banner ever comes.
    let silent = TcpListener::bind("127.0.0.1:0").unwrap();
    let mut vars = sshd.vars_json("silent");
    vars.insert("ansible_port".into(), silent.local_addr().unwrap().port().into());
    // Without the timeout this would wait for ever (and nextest stop it): that it returns, saying so, is the check.
    let quick = ConnectOptions { connect_timeout: Duration::from_secs(1), ..options() };
    let err = open("silent", &vars, &quick).await.err();
    let Some(ConnectionError::Unreachable(message)) = &err else { panic!("expected unreachable, got {err:?}") };
    assert!(message.to_lowercase().contains("timed out"), "{message}");
}

/// Whether a process whose command line contains `pattern` runs on this machine (the test hosts are local).
fn running(pattern: &str) -> bool {
    // Without pgrep this check would pass for nothing: it must be there (procps, scripts/install-test-deps).
    let out = std::process::Command::new("pgrep").arg("-f").arg(pattern).output().expect("run pgrep (install procps)");
    out.status.success()
}

async fn gone_within(pattern: &str, limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if !running(pattern) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    !running(pattern)
}

#[tokio::test]
async fn a_command_past_its_timeout_fails_and_stops_on_the_host() {
    let sshd = TestSshd::start();
    let conn = connect(&sshd, "node1").await;
    let seconds = 100_000 + u32::from(sshd.port());
    let marker = format!("sleep {seconds}");
    // The command would run for more than a day: the timeout is what ends it.
    let err = conn.exec(&format!("{marker}; echo never"), None, Some(Duration::from_secs(1))).await.unwrap_err();
    assert_eq!(err, ConnectionError::Timeout(Duration::from_secs(1)));
    assert!(gone_within(&marker, Duration::from_secs(3)).await, "`{marker}` still runs on the host");
    // The connection stays usable, and the run-wide default applies to commands without their own limit.
    assert_eq!(conn.exec("true", None, Some(Duration::from_secs(5))).await.unwrap().status, 0);
    let defaulted = ConnectOptions { command_timeout: Some(Duration::from_secs(1)), ..options() };
    let conn = open("node1", &sshd.vars_json("node1"), &defaulted).await.unwrap();
    let err = conn.exec(&format!("{marker}; echo never"), None, None).await.unwrap_err();
    assert_eq!(err, ConnectionError::Timeout(Duration::from_secs(1)));
    assert!(gone_within(&marker, Duration::from_secs(3)).await, "`{marker}` still runs on the host");
}

#[tokio::test]
async fn a_local_command_past_its_timeout_fails_and_stops() {
    let conn = open("localhost", &local_vars(), &options()).await.unwrap();
    let marker = format!("sleep {}", 200_000 + std::process::id() % 100_000);
    let err = conn.exec(&format!("{marker}; echo never"), None, Some(Duration::from_millis(500))).await.unwrap_err();
    assert_eq!(err, ConnectionError::Timeout(Duration::from_millis(500)));
    assert!(gone_within(&marker, Duration::from_secs(3)).await, "`{marker}` still runs");
}

#[tokio::test]
async fn sshd_killed_during_a_command_is_an_error_not_a_hang() {
    let sshd = TestSshd::start();
    let conn = connect(&sshd, "node1").await;
    let running_conn = conn.clone();
    let command = tokio::spawn(async move { running_conn.exec("sleep 30", None, None).await });
    tokio::time::sleep(Duration::from_millis(500)).await;
    sshd.kill();
    let outcome = tokio::time::timeout(Duration::from_secs(20), command).await;
    let result = outcome.expect("the command must not hang when the host goes away").unwrap();
    let err = result.expect_err("a command whose host died is an error");
    assert!(matches!(err, ConnectionError::Transport(_)), "{err:?}");
    // The host stays down: the next command fails to connect again, quickly.
    let next = tokio::time::timeout(Duration::from_secs(20), conn.exec("true", None, None)).await.unwrap();
    assert!(matches!(next, Err(ConnectionError::Unreachable(_))), "{next:?}");
}

#[tokio::test]
async fn ssh_config_files_apply_as_with_the_ssh_client() {
    let sshd = TestSshd::start();
    // A host alias only an ssh config file knows: the inventory names the alias, the config file says where it is.
    let config = sshd.dir().join("client_config");
    std::fs::write(&config, format!("Host fleet-alias\n  HostName 127.0.0.1\n  Port {}\n", sshd.port())).unwrap();
    let mut vars = sshd.vars_json("node1");
    vars.insert("ansible_host".into(), "fleet-alias".into());
    vars.remove("ansible_port");
    let args = format!("-F {} {}", config.display(), sshd.ssh_common_args());
    vars.insert("ansible_ssh_common_args".into(), args.into());
    let conn = open("node1", &vars, &options()).await.unwrap_or_else(|e| panic!("{e}\n{}", sshd.log()));
    assert_eq!(text(&conn.exec("echo via-alias", None, None).await.unwrap().stdout), "via-alias\n");
}

/// A throw-away account whose sudo rule asks for its password: created for one test (a unique name, so tests run in
/// parallel), removed on drop with its sudoers drop-in.
struct PasswordSudoUser {
    name: String,
    password: String,
    sudoers: std::path::PathBuf,
}

impl PasswordSudoUser {
    fn create() -> PasswordSudoUser {
        use std::sync::atomic::{AtomicU32, Ordering};
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let name = format!("upgsudo{}x{}", std::process::id(), NEXT.fetch_add(1, Ordering::SeqCst));
        let password = format!("pw-{name}-S3cret");
        let run = |program: &str, args: &[&str], stdin: Option<&str>| {
            use std::io::Write;
            let mut child = std::process::Command::new(program)
                .args(args)
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap_or_else(|e| panic!("{program}: {e}"));
            if let (Some(text), Some(mut input)) = (stdin, child.stdin.take()) {
                input.write_all(text.as_bytes()).expect("stdin");
            }
            let out = child.wait_with_output().expect("wait");
            assert!(out.status.success(), "{program} {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        };
        run("useradd", &["-M", "-d", "/", "-s", "/bin/sh", &name], None);
        let user = PasswordSudoUser {
            sudoers: std::path::PathBuf::from(format!("/etc/sudoers.d/upgrade-test-{name}")),
            name,
            password,
        };
        run("chpasswd", &[], Some(&format!("{}:{}\n", user.name, user.password)));
        // No NOPASSWD: sudo asks this user for their password, and remembers nothing between commands.
        std::fs::write(&user.sudoers, format!("Defaults:{0} timestamp_timeout=0\n{0} ALL=(ALL) ALL\n", user.name))
            .expect("sudoers drop-in");
        std::fs::set_permissions(&user.sudoers, std::os::unix::fs::PermissionsExt::from_mode(0o440)).expect("chmod");
        user
    }
}

impl Drop for PasswordSudoUser {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.sudoers);
        let _ = std::process::Command::new("userdel").arg(&self.name).output();
    }
}

/// `ansible_become_password` reaches a sudo that really asks for it (a real account, a real sudoers rule, over a
/// real sshd): the command runs as root, and the password shows nowhere in the output; a wrong one fails.
#[test]
fn the_become_password_is_fed_to_a_sudo_that_asks_for_it_and_never_shown() {
    let sshd = TestSshd::start();
    let user = PasswordSudoUser::create();
    let host = sshd.ini_host("h1").replace(
        &format!("ansible_user={}", crate::support::sshd::current_user()),
        &format!("ansible_user={}", user.name),
    );
    assert!(host.contains(&user.name), "{host}");
    let tasks = "- name: who\n  command: id -un\n  become: true\n  register: who\n\
                 - name: stdin stays the command's\n  shell: cat\n  become: true\n  register: input\n\
                 - debug: var=who.stdout\n";
    let inventory = |password: &str| format!("[masters]\n{host} ansible_become_password='{password}'\n");

    let out = crate::support::Scenario::new()
        .file("hosts.ini", &inventory(&user.password))
        .file("tasks.yml", tasks)
        .args(["run-tasks", "tasks.yml", "-i", "hosts.ini", "-v"])
        .success()
        .stdout_has("who.stdout: \"root\"")
        .check("no stderr of its own", |o| !o.stdout.contains("stderr:"))
        .check("the password is not shown", |o| {
            !o.stdout.contains(&user.password) && !o.stderr.contains(&user.password)
        })
        .check("sudo's prompt is not in the output", |o| !o.stdout.contains("sudo password"));
    drop(out);

    crate::support::Scenario::new()
        .file("hosts.ini", &inventory("not-the-password"))
        .file("tasks.yml", tasks)
        .args(["run-tasks", "tasks.yml", "-i", "hosts.ini", "-v"])
        .failure(1)
        .stdout_has("incorrect password")
        .check("no password is shown", |o| {
            !o.stdout.contains("not-the-password") && !o.stdout.contains(&user.password)
        });
}

/// A command whose future is dropped (a step cut at the end of an interrupt's grace period) is killed on the host,
/// with the children it started, as the local connection kills its process group.
#[test]
fn a_dropped_ssh_command_is_killed_on_the_host() {
    let sshd = TestSshd::start();
    let pid_file = sshd.host_root("h1").join("pid");
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("runtime");
    runtime.block_on(async {
        let conn = connect(&sshd, "h1").await;
        let command = format!("sh -c 'echo $$ > {}; exec sleep 600'; true", pid_file.display());
        let cut = tokio::time::timeout(Duration::from_millis(1500), conn.exec(&command, None, None)).await;
        assert!(cut.is_err(), "the command was still running when dropped");
        upgrade::connection::ssh::finish_pending_kills(Duration::from_secs(10)).await;

        conn.close().await;
    });
    let gone = crate::support::process_ends_within(&pid_file, Duration::from_secs(10));
    assert!(gone, "sleep 600 still runs on the host");
}
