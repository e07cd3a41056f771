//! A real OpenSSH server on loopback for end-to-end tests: its own host key, client key, `authorized_keys`, free
//! port and temp directory, running as the current user, killed (with every session it started) on drop.
//!
//! ```ignore
//! let sshd = TestSshd::start();
//! let inventory = format!("[nodes]\n{}\n{}\n", sshd.ini_host("n1"), sshd.ini_host("n2"));
//! // n1 and n2 reach the same sshd; each has its own `host_root` directory for its state.
//! ```

#![allow(dead_code)]

use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::{Map, Value};

pub struct TestSshd {
    child: Mutex<Option<Child>>,
    port: u16,
    pid: u32,
    dir: tempfile::TempDir,
}

impl TestSshd {
    /// Starts sshd on 127.0.0.1 at a free port and waits until it accepts connections. Panics with sshd's own
    /// output when it cannot start (a test harness, not user input).
    pub fn start() -> TestSshd {
        TestSshd::start_with(&[])
    }

    /// Like `start`, with extra `sshd_config` lines.
    pub fn start_with(extra_config: &[&str]) -> TestSshd {
        let dir = tempfile::Builder::new().prefix("test-sshd-").tempdir().expect("temp dir");
        let d = dir.path();
        std::fs::create_dir_all(d.join("home")).expect("home dir");
        std::fs::create_dir_all(d.join("hosts")).expect("hosts dir");
        // sshd refuses to start without its privilege separation directory.
        let _ = std::fs::create_dir_all("/run/sshd");
        keygen(&d.join("host_key"));
        keygen(&d.join("client_key"));
        std::fs::copy(d.join("client_key.pub"), d.join("authorized_keys")).expect("authorized_keys");
        let host_public = read_public_key(&d.join("host_key.pub"));
        let mut last_error = String::new();
        // The port is free when we look; another test may take it before sshd binds, so try a few.
        for _ in 0..5 {
            let port = free_port();
            let config = d.join("sshd_config");
            // sshd takes the first SetEnv line only: extra variables join the one that sets HOME.
            let more_env: Vec<&str> = extra_config.iter().filter_map(|l| l.strip_prefix("SetEnv ")).collect();
            let mut text = format!(
                "Port {port}\nListenAddress 127.0.0.1\nHostKey {d}/host_key\nAuthorizedKeysFile {d}/authorized_keys\n\
                 PidFile {d}/sshd.pid\nUsePAM no\nStrictModes no\nPermitRootLogin prohibit-password\n\
                 PasswordAuthentication no\nKbdInteractiveAuthentication no\nSetEnv HOME={d}/home{more}\n\
                 MaxSessions 64\nMaxStartups 200:30:400\nLogLevel ERROR\nSubsystem sftp internal-sftp\n",
                d = d.display(),
                more = more_env.iter().map(|e| format!(" {e}")).collect::<String>()
            );
            for line in extra_config.iter().filter(|l| !l.starts_with("SetEnv ")) {
                text.push_str(line);
                text.push('\n');
            }
            std::fs::write(&config, text).expect("sshd_config");
            let log = std::fs::File::create(d.join("sshd.log")).expect("sshd.log");
            let child = Command::new("/usr/sbin/sshd")
                .arg("-D")
                .arg("-e")
                .arg("-f")
                .arg(&config)
                .stdin(Stdio::null())
                .stdout(log.try_clone().expect("log"))
                .stderr(log)
                .spawn()
                .expect("cannot run /usr/sbin/sshd: install openssh-server (scripts/install-test-deps)");
            let mut child = child;
            std::fs::write(d.join("known_hosts"), format!("[127.0.0.1]:{port} {host_public}\n")).expect("known_hosts");
            if wait_until_listening(&mut child, port) {
                let pid = child.id();
                return TestSshd { child: Mutex::new(Some(child)), port, pid, dir };
            }
            let _ = child.kill();
            let _ = child.wait();
            last_error = std::fs::read_to_string(d.join("sshd.log")).unwrap_or_default();
            if !last_error.contains("Address already in use") {
                break;
            }
        }
        panic!("sshd did not start: {last_error}");
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// The scratch directory: keys, config, logs, `home/` (the sessions' HOME) and `hosts/<name>/`.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    pub fn client_key(&self) -> PathBuf {
        self.dir.path().join("client_key")
    }

    /// A known_hosts file holding this sshd's host key as `[127.0.0.1]:PORT`.
    pub fn known_hosts(&self) -> PathBuf {
        self.dir.path().join("known_hosts")
    }

    /// The host key line (`ssh-ed25519 AAAA...`), to build other known_hosts files.
    pub fn host_public_key(&self) -> String {
        read_public_key(&self.dir.path().join("host_key.pub"))
    }

    /// What sshd logged (errors only), for failure messages.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("sshd.log")).unwrap_or_default()
    }

    /// `ansible_ssh_common_args` that check this sshd's host key strictly against its own known_hosts file.
    pub fn ssh_common_args(&self) -> String {
        format!("-o UserKnownHostsFile={} -o StrictHostKeyChecking=yes", self.known_hosts().display())
    }

    /// The state directory of inventory host `name` (created): `host_root` in its variables.
    pub fn host_root(&self, name: &str) -> PathBuf {
        let root = self.dir.path().join("hosts").join(name);
        std::fs::create_dir_all(&root).expect("host root");
        root
    }

    /// The variables that make inventory host `name` reach this sshd, plus its own `host_root`.
    pub fn host_vars(&self, name: &str) -> Vec<(String, String)> {
        vec![
            ("ansible_host".into(), "127.0.0.1".into()),
            ("ansible_port".into(), self.port.to_string()),
            ("ansible_user".into(), current_user()),
            ("ansible_ssh_private_key_file".into(), self.client_key().display().to_string()),
            ("ansible_ssh_common_args".into(), self.ssh_common_args()),
            ("host_root".into(), self.host_root(name).display().to_string()),
        ]
    }

    /// The same variables as JSON, as the connection factory takes them (the port as a number, as the INI
    /// inventory would parse it).
    pub fn vars_json(&self, name: &str) -> Map<String, Value> {
        self.host_vars(name)
            .into_iter()
            .map(|(k, v)| {
                let value = match v.parse::<u64>() {
                    Ok(n) if k == "ansible_port" => Value::from(n),
                    _ => Value::String(v),
                };
                (k, value)
            })
            .collect()
    }

    /// An INI inventory host line: `name ansible_host=127.0.0.1 ansible_port=P ... host_root=...`.
    pub fn ini_host(&self, name: &str) -> String {
        let mut line = name.to_string();
        for (k, v) in self.host_vars(name) {
            if v.contains(' ') {
                line.push_str(&format!(" {k}='{v}'"));
            } else {
                line.push_str(&format!(" {k}={v}"));
            }
        }
        line
    }

    /// A YAML inventory host entry (`name:` and its variables), indented by `indent` spaces.
    pub fn yaml_host(&self, name: &str, indent: usize) -> String {
        let pad = " ".repeat(indent);
        let mut text = format!("{pad}{name}:\n");
        for (k, v) in self.host_vars(name) {
            let value = if k == "ansible_port" { v } else { format!("\"{v}\"") };
            text.push_str(&format!("{pad}  {k}: {value}\n"));
        }
        text
    }

    /// A shell command that reboots this sshd's "host" as the controller sees a real reboot. Run on the host (by a
    /// reboot module, say), it returns at once; detached from its session, it then kills the listener and every
    /// session (SIGKILL), runs `while_down` (write a new boot id, mark the node ready, ...), and `down` later starts
    /// the same sshd again: same config, host key and port. The command starts with an absolute path, as Ansible's
    /// reboot action wants of a `reboot_command` outside its search paths.
    pub fn restart_command(&self, down: Duration, while_down: &str) -> String {
        self.reboot_script_command(&format!("{:.1}", down.as_secs_f64()), while_down)
    }

    /// Like `restart_command`, but the host never comes back.
    pub fn crash_command(&self, while_down: &str) -> String {
        self.reboot_script_command("never", while_down)
    }

    fn reboot_script_command(&self, down: &str, while_down: &str) -> String {
        let d = self.dir.path();
        let script = d.join("reboot.sh");
        let text = format!(
            r#"#!/bin/sh
# reboot.sh DOWN WHILE_DOWN: written by TestSshd::restart_command.
if [ "$TEST_SSHD_DETACHED" != 1 ]; then
    TEST_SSHD_DETACHED=1 setsid /bin/sh "$0" "$@" </dev/null >>{d}/reboot.log 2>&1 &
    exit 0
fi
echo $$ > {d}/reboot.pid
# Let the command that started this return first, as a reboot would.
sleep 0.3
tree() {{ for c in $(pgrep -P "$1"); do echo "$c"; tree "$c"; done; }}
root=$(cat {d}/sshd.pid)
frozen=""
while :; do
    new=""
    for p in $root $(tree "$root"); do
        [ "$p" = "$$" ] && continue
        case " $frozen " in *" $p "*) ;; *) new="$new $p" ;; esac
    done
    [ -z "$new" ] && break
    kill -s STOP $new 2>/dev/null
    frozen="$frozen $new"
done
kill -s KILL $frozen 2>/dev/null
rm -f {d}/sshd.pid
/bin/sh -c "$2"
if [ "$1" = never ]; then rm -f {d}/reboot.pid; exit 0; fi
sleep "$1"
[ -e {d}/stopped ] && exit 0
exec /usr/sbin/sshd -D -e -f {d}/sshd_config >>{d}/sshd.log 2>&1
"#,
            d = d.display()
        );
        std::fs::write(&script, text).expect("reboot.sh");
        format!("/bin/sh {} {down} {}", script.display(), upgrade::connection::shell_quote(while_down))
    }

    /// Stops sshd the way a crashing host does: the listener and every session it started (the per-connection
    /// sshd processes and the commands they run) get SIGKILL, and so does an sshd started again by
    /// `restart_command` (or the script about to start it). Idempotent.
    pub fn kill(&self) {
        let _ = std::fs::write(self.dir.path().join("stopped"), "");
        let mut roots = vec![self.pid];
        // The restarted sshd (or the script that will exec it), if that pid is still one of ours.
        let restarted = std::fs::read_to_string(self.dir.path().join("reboot.pid")).ok();
        if let Some(pid) = restarted.and_then(|p| p.trim().parse::<u32>().ok()) {
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let ours = String::from_utf8_lossy(&cmdline).contains(&*self.dir.path().to_string_lossy());
            if ours {
                roots.push(pid);
            }
        }
        // Freeze the tree first so nothing forks or reparents while we collect it.
        let mut frozen: Vec<u32> = Vec::new();
        loop {
            let mut tree = Vec::new();
            for root in &roots {
                tree.extend(descendants(*root));
                tree.push(*root);
            }
            let new: Vec<u32> = tree.into_iter().filter(|p| !frozen.contains(p)).collect();
            if new.is_empty() {
                break;
            }
            signal(&new, "STOP");
            frozen.extend(new);
        }
        signal(&frozen, "KILL");
        if let Ok(mut guard) = self.child.lock() {
            if let Some(child) = guard.as_mut() {
                let _ = child.wait();
            }
        }
    }
}

impl Drop for TestSshd {
    fn drop(&mut self) {
        self.kill();
    }
}

pub(crate) fn wait_until_listening(child: &mut Child, port: u16) -> bool {
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if let Ok(Some(_)) = child.try_wait() {
            return false;
        }
        if TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    false
}

fn keygen(path: &Path) {
    let status = Command::new("ssh-keygen")
        .args(["-t", "ed25519", "-N", "", "-q", "-C", "upgrade-test", "-f"])
        .arg(path)
        .stdin(Stdio::null())
        .status()
        .expect("cannot run ssh-keygen: install openssh-client (scripts/install-test-deps)");
    assert!(status.success(), "ssh-keygen failed for {}", path.display());
}

fn read_public_key(path: &Path) -> String {
    let text = std::fs::read_to_string(path).expect("public key");
    text.split_whitespace().take(2).collect::<Vec<_>>().join(" ")
}

pub(crate) fn free_port() -> u16 {
    TcpListener::bind(("127.0.0.1", 0)).and_then(|l| l.local_addr()).map(|a| a.port()).expect("free port")
}

pub fn current_user() -> String {
    std::env::var("USER")
        .ok()
        .filter(|u| !u.is_empty())
        .or_else(|| {
            Command::new("id").arg("-un").output().ok().map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        })
        .unwrap_or_else(|| "root".into())
}

/// Kills `pid` and every process below it with SIGKILL, freezing the tree first (SIGSTOP) so that nothing forks or
/// reparents while it is collected.
pub fn kill_tree(pid: u32) {
    let mut frozen: Vec<u32> = Vec::new();
    loop {
        let mut tree = descendants(pid);
        tree.push(pid);
        let new: Vec<u32> = tree.into_iter().filter(|p| !frozen.contains(p)).collect();
        if new.is_empty() {
            break;
        }
        signal(&new, "STOP");
        frozen.extend(new);
    }
    signal(&frozen, "KILL");
}

/// Every process below `pid`, read from /proc.
pub fn descendants(pid: u32) -> Vec<u32> {
    let mut parents: Vec<(u32, u32)> = Vec::new();
    if let Ok(entries) = std::fs::read_dir("/proc") {
        for entry in entries.flatten() {
            let Some(child) = entry.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else { continue };
            let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else { continue };
            // The command name is in parentheses and may hold spaces: the parent pid follows the last `)`.
            let Some(after) = stat.rfind(')').map(|i| &stat[i + 1..]) else { continue };
            if let Some(ppid) = after.split_whitespace().nth(1).and_then(|p| p.parse::<u32>().ok()) {
                parents.push((child, ppid));
            }
        }
    }
    let mut found = vec![pid];
    let mut i = 0;
    while i < found.len() {
        let parent = found[i];
        found.extend(parents.iter().filter(|(_, pp)| *pp == parent).map(|(c, _)| *c));
        i += 1;
    }
    found.remove(0);
    found
}

/// Sends a signal to exact process ids (`kill -s SIG -- PID...`: never a group, never a name).
fn signal(pids: &[u32], sig: &str) {
    if pids.is_empty() {
        return;
    }
    let _ = Command::new("kill")
        .args(["-s", sig, "--"])
        .args(pids.iter().map(|p| p.to_string()))
        .stderr(Stdio::null())
        .status();
}
