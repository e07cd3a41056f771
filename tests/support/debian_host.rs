//! Test hosts that are real Debian systems: an overlay of a `debootstrap --variant=minbase` bookworm root per
//! host (the image below, read-only; the host's own changes above), with real apt, apt-mark and dpkg, reached over
//! SSH through a real sshd that runs chrooted into it on its own loopback port. The root and a package repository
//! laid out like pkgs.k8s.io are built once per machine by scripts/build-debian-root (run by
//! scripts/install-test-deps), outside the clone.
//!
//! Each host's sshd runs in its own mount namespace (`unshare --mount`), where the fake cluster's scripts, its state
//! directory and the machine's etcdctl are bind-mounted at their own paths, so the cluster commands run on the
//! first master as on a real one. The binds exist only in that namespace: they go with its last process, and
//! removing the host's root (its overlay unmounted first) never reaches through them. What is not real:
//! `systemctl` (a chroot runs no systemd: a stand-in that tells the fake cluster of a daemon-reload or a kubelet
//! restart) and the Kubernetes packages' binaries (stand-ins built from testing/debian/ with the control data of
//! pkgs.k8s.io's packages).
//!
//! The repository is served by `RepoServer`, a small HTTP server on loopback in the test. A host's
//! /etc/apt/sources.list.d/kubernetes.list names `http://pkgs.k8s.io/core:/stable:/v1.28/deb/ /` (http: the test
//! cannot serve pkgs.k8s.io's TLS) and apt's `Acquire::http::Proxy` is that server, so the line is the official one
//! and the repository switch meets it as on a real host; a mirror test writes the server's own address instead.
//! The repository is unsigned: the line says `[trusted=yes]` where a real host has `signed-by=`.

#![allow(dead_code)]

use std::collections::BTreeSet;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::fake_cluster::FakeCluster;
use super::sshd::{free_port, wait_until_listening};

/// The cached root and repository (scripts/build-debian-root).
pub struct DebianImage {
    dir: PathBuf,
}

impl DebianImage {
    /// The built image, or `None` after one `SKIPPED: ...` line naming what is missing; with `CI` set a missing
    /// image fails the test instead, so CI never skips silently.
    pub fn find() -> Option<DebianImage> {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/build-debian-root");
        let out = Command::new("bash").arg(&script).arg("--where").output();
        let dir = match out {
            Ok(o) if o.status.success() => PathBuf::from(String::from_utf8_lossy(&o.stdout).trim()),
            _ => PathBuf::new(),
        };
        let why = if dir.as_os_str().is_empty() {
            format!("cannot run {} --where", script.display())
        } else if !dir.join("complete").exists() {
            format!(
                "the Debian test root is not built ({} missing): run scripts/install-test-deps (root, debootstrap and \
                 Debian's package mirror)",
                dir.display()
            )
        } else if !is_root() {
            "the Debian test hosts need root (chroot, unshare --mount)".to_string()
        } else {
            return Some(DebianImage { dir });
        };
        if std::env::var_os("CI").is_some() {
            panic!("{why}");
        }
        eprintln!("SKIPPED: {why}");
        None
    }

    pub fn root(&self) -> PathBuf {
        self.dir.join("root")
    }

    /// The repository: `repo/core:/stable:/v1.28/deb/`, `.../v1.29/deb/`.
    pub fn repo(&self) -> PathBuf {
        self.dir.join("repo")
    }

    /// A mirror that is behind: its v1.29 has 1.29.0 only.
    pub fn repo_behind(&self) -> PathBuf {
        self.dir.join("repo-behind")
    }
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// How the repository server answers one path.
#[derive(Clone)]
enum Rule {
    /// 404, as a mirror that lacks the file.
    Missing,
    /// 404 once the file exists (a mirror that loses the file at a moment of the run a hook marks).
    MissingOnce(PathBuf),
    /// Served after this pause (a slow mirror: scripts/bench-window.sh).
    Slow(Duration),
}

/// The package repository over HTTP on loopback: files of `dir`, as an origin server (`GET /core:/...`) and as
/// the hosts' apt proxy (`GET http://pkgs.k8s.io/core:/...`). Every request's path is recorded.
pub struct RepoServer {
    port: u16,
    stop: Arc<AtomicBool>,
    requests: Arc<Mutex<Vec<String>>>,
    rules: Arc<Mutex<Vec<(String, Rule)>>>,
}

impl RepoServer {
    pub fn start(dir: &Path) -> RepoServer {
        let listener = TcpListener::bind(("127.0.0.1", 0)).expect("bind the repository server");
        let port = listener.local_addr().expect("address").port();
        let stop = Arc::new(AtomicBool::new(false));
        let requests = Arc::new(Mutex::new(Vec::new()));
        let rules: Arc<Mutex<Vec<(String, Rule)>>> = Arc::new(Mutex::new(Vec::new()));
        let (dir, stop2, requests2, rules2) = (dir.to_path_buf(), stop.clone(), requests.clone(), rules.clone());
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                if stop2.load(Ordering::SeqCst) {
                    break;
                }
                let Ok(stream) = stream else { continue };
                let (dir, requests, rules) = (dir.clone(), requests2.clone(), rules2.clone());
                std::thread::spawn(move || serve(stream, &dir, &requests, &rules));
            }
        });
        RepoServer { port, stop, requests, rules }
    }

    /// `http://127.0.0.1:PORT`: the base of a mirror laid out like pkgs.k8s.io.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Answers 404 for every path that contains `needle` (a mirror that lacks it).
    pub fn missing(&self, needle: &str) {
        self.rules.lock().expect("rules").push((needle.to_string(), Rule::Missing));
    }

    /// Answers 404 for every path that contains `needle` from the moment `flag` exists.
    pub fn missing_once(&self, needle: &str, flag: &Path) {
        self.rules.lock().expect("rules").push((needle.to_string(), Rule::MissingOnce(flag.to_path_buf())));
    }

    /// Serves every path that contains `needle` only after `pause`, each request on its own (a slow link per
    /// download, as a throttled mirror gives each connection).
    pub fn slow(&self, needle: &str, pause: Duration) {
        self.rules.lock().expect("rules").push((needle.to_string(), Rule::Slow(pause)));
    }

    /// The paths asked for so far.
    pub fn requests(&self) -> Vec<String> {
        self.requests.lock().expect("requests").clone()
    }
}

impl Drop for RepoServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wake the accept loop so that it sees the flag.
        let _ = TcpStream::connect(("127.0.0.1", self.port));
    }
}

/// One connection: requests in turn (apt keeps the connection open), each answered with the file or 404.
fn serve(stream: TcpStream, dir: &Path, requests: &Mutex<Vec<String>>, rules: &Mutex<Vec<(String, Rule)>>) {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(30)));
    let Ok(mut writer) = stream.try_clone() else { return };
    let mut reader = BufReader::new(stream);
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let mut parts = line.split_whitespace();
        let method = parts.next().unwrap_or("").to_string();
        let target = parts.next().unwrap_or("").to_string();
        // The headers; a body is never sent by apt.
        loop {
            let mut header = String::new();
            if reader.read_line(&mut header).unwrap_or(0) == 0 {
                return;
            }
            if header.trim().is_empty() {
                break;
            }
        }
        // The proxy form names the origin: keep the path only.
        let path = match target.strip_prefix("http://") {
            Some(rest) => rest.find('/').map(|i| rest[i..].to_string()).unwrap_or_else(|| "/".into()),
            None => target.clone(),
        };
        requests.lock().expect("requests").push(path.clone());
        let missing = rules.lock().expect("rules").iter().any(|(needle, rule)| {
            path.contains(needle.as_str())
                && match rule {
                    Rule::Missing => true,
                    Rule::MissingOnce(flag) => flag.exists(),
                    Rule::Slow(_) => false,
                }
        });
        let pause = rules.lock().expect("rules").iter().find_map(|(needle, rule)| match rule {
            Rule::Slow(pause) if path.contains(needle.as_str()) => Some(*pause),
            _ => None,
        });
        if let Some(pause) = pause {
            std::thread::sleep(pause);
        }
        let file = dir.join(path.trim_start_matches('/'));
        let body =
            if missing || path.contains("..") { None } else { std::fs::read(&file).ok().filter(|_| file.is_file()) };
        let (status, body) = match body {
            Some(b) => ("200 OK", b),
            None => ("404 Not Found", b"not found\n".to_vec()),
        };
        let head = format!(
            "HTTP/1.1 {status}\r\nContent-Length: {}\r\nContent-Type: application/octet-stream\r\n\r\n",
            body.len()
        );
        let sent = writer
            .write_all(head.as_bytes())
            .and_then(|_| if method == "HEAD" { Ok(()) } else { writer.write_all(&body) });
        if sent.is_err() {
            return;
        }
    }
}

/// A Debian host: its own overlay of the root, its own sshd in it.
pub struct DebianHost {
    pub name: String,
    dir: tempfile::TempDir,
    root: PathBuf,
    port: u16,
    child: Mutex<Option<Child>>,
}

impl DebianHost {
    /// An overlay of the image's root as host `name` (node `name` of `cluster`), whose Kubernetes repository line is
    /// `repo_line` and whose apt reaches `repo` as its HTTP proxy; its sshd started and listening.
    pub fn start(
        image: &DebianImage,
        name: &str,
        cluster: &FakeCluster,
        repo: &RepoServer,
        repo_line: &str,
    ) -> DebianHost {
        let dir = tempfile::Builder::new().prefix(&format!("debian-{name}-")).tempdir().expect("temp dir");
        let root = dir.path().join("root");
        // The host's root is an overlay of the image's (read-only below, this host's changes in `upper`): what apt and
        // dpkg change stays this host's, as with a copy, without copying 148 MB for each host.
        let (upper, work) = (dir.path().join("upper"), dir.path().join("work"));
        for d in [&root, &upper, &work] {
            std::fs::create_dir_all(d).expect("overlay directory");
        }
        let options =
            format!("lowerdir={},upperdir={},workdir={}", image.root().display(), upper.display(), work.display());
        let mounted = Command::new("mount").args(["-t", "overlay", "overlay", "-o", &options]).arg(&root).output();
        let mounted = mounted.expect("run mount (util-linux)");
        assert!(
            mounted.status.success(),
            "mount an overlay of the Debian root as {name}'s (needs root and overlayfs): {}",
            String::from_utf8_lossy(&mounted.stderr)
        );
        let etc = root.join("etc");
        write(&etc.join("apt/sources.list.d/kubernetes.list"), &format!("{repo_line}\n"));
        write(&etc.join("apt/apt.conf.d/90upgrade-test-proxy"), &format!("Acquire::http::Proxy \"{}\";\n", repo.url()));
        write(
            &etc.join("upgrade-test/cluster.env"),
            &format!(
                "FAKE_CLUSTER='{}'\nFAKE_STATE='{}'\nFAKE_NODE='{name}'\n",
                FakeCluster::script_dir().display(),
                cluster.state_dir().display()
            ),
        );
        keygen(&dir.path().join("host_key"));
        keygen(&dir.path().join("client_key"));
        std::fs::copy(dir.path().join("host_key"), etc.join("ssh/test_host_key")).expect("host key");
        std::fs::copy(dir.path().join("client_key.pub"), etc.join("ssh/test_authorized_keys"))
            .expect("authorized keys");
        let host_public = std::fs::read_to_string(dir.path().join("host_key.pub")).expect("host key");
        let host_public: String = host_public.split_whitespace().take(2).collect::<Vec<_>>().join(" ");
        // What the fake cluster's scripts read and write, and the etcd client of the backup, at their own paths.
        let binds = [FakeCluster::script_dir(), cluster.state_dir().to_path_buf(), super::etcd::etcdctl_binary()];
        let mut last_error = String::new();
        for _ in 0..5 {
            let port = free_port();
            write(
                &etc.join("ssh/sshd_test_config"),
                &format!(
                    "Port {port}\nListenAddress 127.0.0.1\nHostKey /etc/ssh/test_host_key\n\
                     AuthorizedKeysFile /etc/ssh/test_authorized_keys\nPidFile /run/sshd-test.pid\nUsePAM no\n\
                     StrictModes no\nPermitRootLogin prohibit-password\nPasswordAuthentication no\n\
                     KbdInteractiveAuthentication no\nMaxSessions 64\nMaxStartups 200:30:400\nLogLevel ERROR\n\
                     SetEnv PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\n"
                ),
            );
            let mut script = String::from("set -e\n");
            for b in &binds {
                let inside = root.join(b.strip_prefix("/").unwrap_or(b));
                if b.is_dir() {
                    script.push_str(&format!("mkdir -p '{}'\n", inside.display()));
                } else {
                    script.push_str(&format!(
                        "mkdir -p '{}'; : > '{}'\n",
                        inside.parent().expect("dir").display(),
                        inside.display()
                    ));
                }
                script.push_str(&format!("mount --bind '{}' '{}'\n", b.display(), inside.display()));
            }
            script.push_str(&format!(
                "mount -t proc proc '{r}/proc'\nexec chroot '{r}' /usr/sbin/sshd -D -e -f /etc/ssh/sshd_test_config\n",
                r = root.display()
            ));
            let log = std::fs::File::create(dir.path().join("sshd.log")).expect("sshd.log");
            let mut child = Command::new("unshare")
                .args(["--mount", "--propagation", "private", "sh", "-c", &script])
                .stdin(Stdio::null())
                .stdout(log.try_clone().expect("log"))
                .stderr(log)
                .spawn()
                .expect("run unshare (util-linux)");
            std::fs::write(dir.path().join("known_hosts"), format!("[127.0.0.1]:{port} {host_public}\n"))
                .expect("known_hosts");
            if wait_until_listening(&mut child, port) {
                return DebianHost { name: name.to_string(), dir, root, port, child: Mutex::new(Some(child)) };
            }
            let _ = child.kill();
            let _ = child.wait();
            last_error = std::fs::read_to_string(dir.path().join("sshd.log")).unwrap_or_default();
            if !last_error.contains("Address already in use") {
                break;
            }
        }
        panic!("the chrooted sshd of {name} did not start: {last_error}");
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// The host's root directory, seen from the test.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// A file of the host (`/etc/apt/sources.list.d/kubernetes.list`), empty when it does not exist.
    pub fn file(&self, path: &str) -> String {
        std::fs::read_to_string(self.root.join(path.trim_start_matches('/'))).unwrap_or_default()
    }

    pub fn write_file(&self, path: &str, text: &str) {
        write(&self.root.join(path.trim_start_matches('/')), text);
    }

    /// Runs `command` inside the host's root (chroot, no SSH): exit code and stdout+stderr.
    pub fn sh(&self, command: &str) -> (i32, String) {
        let out = Command::new("chroot").arg(&self.root).args(["/bin/sh", "-c", command]).output().expect("chroot");
        let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        (out.status.code().unwrap_or(-1), text)
    }

    /// The installed version of a package (`1.29.1-1.1`), empty when it is not installed.
    pub fn installed(&self, package: &str) -> String {
        let (code, out) =
            self.sh(&format!("dpkg-query -W -f='${{db:Status-Status}} ${{Version}}' {package} 2>/dev/null"));
        match (code, out.strip_prefix("installed ")) {
            (0, Some(v)) => v.trim().to_string(),
            _ => String::new(),
        }
    }

    /// Takes the host's dpkg front-end lock as another apt would (a POSIX record lock on
    /// /var/lib/dpkg/lock-frontend, what apt and dpkg take), held until the returned file is dropped.
    pub fn hold_dpkg_lock(&self) -> std::fs::File {
        use std::os::fd::AsRawFd;
        let path = self.root.join("var/lib/dpkg/lock-frontend");
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .expect("lock file");
        // SAFETY: a zeroed flock is a valid value; fcntl gets our own open descriptor and a pointer to it.
        let mut lock: libc::flock = unsafe { std::mem::zeroed() };
        lock.l_type = libc::F_WRLCK as libc::c_short;
        lock.l_whence = libc::SEEK_SET as libc::c_short;
        let rc = unsafe { libc::fcntl(file.as_raw_fd(), libc::F_SETLK, &lock) };
        assert_eq!(rc, 0, "lock {}", path.display());
        file
    }

    /// The held packages (`apt-mark showhold`), sorted.
    pub fn holds(&self) -> BTreeSet<String> {
        self.sh("apt-mark showhold").1.lines().map(|l| l.trim().to_string()).filter(|l| !l.is_empty()).collect()
    }

    /// The inventory entry: `name:` and the variables that reach this host's sshd as root.
    pub fn yaml_host(&self, indent: usize) -> String {
        let pad = " ".repeat(indent);
        let d = self.dir.path().display();
        format!(
            "{pad}{name}:\n{pad}  ansible_host: \"127.0.0.1\"\n{pad}  ansible_port: {port}\n{pad}  ansible_user: root\n\
             {pad}  ansible_ssh_private_key_file: \"{d}/client_key\"\n\
             {pad}  ansible_ssh_common_args: \"-o UserKnownHostsFile={d}/known_hosts -o StrictHostKeyChecking=yes\"\n",
            name = self.name,
            port = self.port
        )
    }

    /// The sshd's log (errors only), for a failing assertion.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("sshd.log")).unwrap_or_default()
    }

    /// Stops the sshd and every session it started (the whole process tree, frozen first), which ends the mount
    /// namespace and its mounts. Idempotent.
    pub fn kill(&self) {
        let Ok(mut guard) = self.child.lock() else { return };
        let Some(mut child) = guard.take() else { return };
        super::sshd::kill_tree(child.id());
        let _ = child.wait();
    }
}

impl Drop for DebianHost {
    fn drop(&mut self) {
        self.kill();
        // The binds lived in the sshd's own mount namespace; wait until it is gone before unmounting the overlay, so
        // that nothing below a mount point can be reached (they are not visible from here in any case).
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline && mounted_under(&self.root) {
            std::thread::sleep(Duration::from_millis(20));
        }
        // Then the overlay itself, before the directory under it goes.
        let _ = Command::new("umount").arg(&self.root).status();
    }
}

/// Whether this process's mount table names a mount strictly below `root` (it never should: the binds are private
/// to the host's namespace; `root` itself is the host's overlay).
fn mounted_under(root: &Path) -> bool {
    let mut text = String::new();
    let _ = std::fs::File::open("/proc/self/mounts").and_then(|mut f| f.read_to_string(&mut text));
    let prefix = format!("{}/", root.to_string_lossy());
    text.lines().any(|l| l.split_whitespace().nth(1).is_some_and(|m| m.starts_with(&prefix)))
}

fn write(path: &Path, text: &str) {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).expect("directory");
    }
    std::fs::write(path, text).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
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
