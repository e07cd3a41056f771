//! A real etcd (Debian's etcd-server) for the end-to-end tests: started on free loopback ports with a temp data dir,
//! plain http, killed on drop. Or, for the many tests that check what a run does around the backup rather than the
//! snapshot itself, the demo's stand-in etcdctl (`TestEtcd::stand_in`): no process, and a run's `etcdctl snapshot
//! save` writes a file that its `snapshot status` recognises. The tests of the snapshot, the restore and the golden
//! output start a real one.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

pub struct TestEtcd {
    /// None: the stand-in etcdctl answers, nothing runs.
    child: Option<Child>,
    dir: tempfile::TempDir,
    endpoint: String,
    /// etcd's arguments, for `start_command`.
    args: Vec<String>,
}

/// Where Debian puts the binaries; `ETCD_BIN`/`ETCDCTL_BIN` point elsewhere.
pub fn etcd_binary() -> PathBuf {
    std::env::var_os("ETCD_BIN").map(PathBuf::from).unwrap_or_else(|| PathBuf::from("/usr/bin/etcd"))
}

pub fn etcdctl_binary() -> PathBuf {
    std::env::var_os("ETCDCTL_BIN").map(PathBuf::from).unwrap_or_else(|| PathBuf::from("/usr/bin/etcdctl"))
}

/// The demo's stand-in etcdctl (inventories/demo/bin/etcdctl).
pub fn stand_in_etcdctl() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("inventories/demo/bin/etcdctl")
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()).expect("a free loopback port")
}

/// One member's ports and flags, before it is started.
struct MemberSpec {
    dir: tempfile::TempDir,
    name: String,
    endpoint: String,
    peer_url: String,
}

impl MemberSpec {
    fn new(name: &str) -> MemberSpec {
        let dir = tempfile::Builder::new().prefix("test-etcd-").tempdir().expect("temp dir");
        let (client, peer) = (free_port(), free_port());
        MemberSpec {
            dir,
            name: name.to_string(),
            endpoint: format!("http://127.0.0.1:{client}"),
            peer_url: format!("http://127.0.0.1:{peer}"),
        }
    }

    /// Starts this member (the etcd `binary`) of the cluster `initial_cluster` (`name=peer,...`).
    fn spawn(self, binary: &Path, initial_cluster: &str, own_group: bool) -> TestEtcd {
        let log = std::fs::File::create(self.dir.path().join("etcd.log")).expect("etcd log file");
        let args = vec![
            format!("--name={}", self.name),
            format!("--data-dir={}", self.dir.path().join("data").display()),
            format!("--listen-client-urls={}", self.endpoint),
            format!("--advertise-client-urls={}", self.endpoint),
            format!("--listen-peer-urls={}", self.peer_url),
            format!("--initial-advertise-peer-urls={}", self.peer_url),
            format!("--initial-cluster={initial_cluster}"),
            "--initial-cluster-state=new".to_string(),
            // A test's etcd holds nothing worth a power cut: without an fsync per write, a start and its sample
            // writes do not wait on the disk that every other test thread shares (etcd 3.4.23 has the flag too).
            "--unsafe-no-fsync".to_string(),
        ];
        let mut command = Command::new(binary);
        if own_group {
            std::os::unix::process::CommandExt::process_group(&mut command, 0);
        }
        let child = command
            .args(&args)
            .stdin(Stdio::null())
            .stdout(log.try_clone().expect("log file"))
            .stderr(log)
            .spawn()
            .unwrap_or_else(|e| panic!("start {}: {e}", binary.display()));
        std::fs::write(self.dir.path().join("etcd.pid"), child.id().to_string()).expect("pid file");
        TestEtcd { child: Some(child), dir: self.dir, endpoint: self.endpoint, args }
    }
}

impl TestEtcd {
    /// No etcd: the demo's stand-in etcdctl, which a run's backup and health checks talk to as to one member on
    /// `http://127.0.0.1:2379`. What needs a real member (its data directory, stop and start commands, restore
    /// flags) panics saying to start a real one.
    pub fn stand_in() -> TestEtcd {
        let dir = tempfile::Builder::new().prefix("test-etcd-").tempdir().expect("temp dir");
        TestEtcd { child: None, dir, endpoint: "http://127.0.0.1:2379".to_string(), args: Vec::new() }
    }

    /// The etcdctl a run is given (`upgrade_etcdctl`): the real one, or the stand-in.
    pub fn etcdctl_path(&self) -> PathBuf {
        if self.child.is_some() { etcdctl_binary() } else { stand_in_etcdctl() }
    }

    /// Panics when this is the stand-in: `what` needs a real member.
    fn real(&self, what: &str) {
        assert!(
            self.child.is_some(),
            "{what} needs a real etcd: this test's is the stand-in etcdctl (TestCluster::with_real_etcd starts one)"
        );
    }

    /// Starts etcd and waits until `etcdctl endpoint health` says so, then writes a few keys so that a snapshot
    /// holds data. Panics with etcd's log when it does not come up.
    pub fn start() -> TestEtcd {
        TestEtcd::start_cluster(1).pop().expect("one member")
    }

    /// A control plane's etcd: `binary` (the version kubeadm runs beside that API server: Debian's 3.4.23 has no
    /// watch progress requests, so an API server on it serves no watch-list streams, and kwok, which asks for them
    /// whatever its client's feature gates, sees a change only when it lists again, seconds to a minute later). In
    /// a process group of its own when `own_group`: an etcd that outlives the test process that started it (a
    /// shared control plane's, tests/support/control_plane_pool.rs), which stops it by its pid.
    pub fn start_for_control_plane(binary: &Path, own_group: bool) -> TestEtcd {
        TestEtcd::start_members(binary, 1, own_group).pop().expect("one member")
    }

    /// The etcd process's pid (0 for the stand-in).
    pub fn pid(&self) -> u32 {
        self.child.as_ref().map_or(0, Child::id)
    }

    /// Starts a cluster of `members` etcd processes (`e1`, `e2`, ...) on loopback, each with its own ports, data
    /// directory, stop and start commands, waits until every one answers `endpoint health`, then writes the sample
    /// keys. Panics with the logs when they do not come up.
    pub fn start_cluster(members: usize) -> Vec<TestEtcd> {
        TestEtcd::start_members(&etcd_binary(), members, false)
    }

    fn start_members(binary: &Path, members: usize, own_group: bool) -> Vec<TestEtcd> {
        assert!(
            binary.exists(),
            "{} not found: install Debian's etcd-server and etcd-client (scripts/install-test-deps)",
            binary.display()
        );
        let mut last_logs = String::new();
        // A port picked free can be taken by another test before etcd binds it: try again with new ports.
        for _attempt in 0..3 {
            let specs: Vec<MemberSpec> = (1..=members)
                .map(|i| MemberSpec::new(if members == 1 { "test".to_string() } else { format!("e{i}") }.as_str()))
                .collect();
            let initial: Vec<String> = specs.iter().map(|m| format!("{}={}", m.name, m.peer_url)).collect();
            let initial = initial.join(",");
            let mut cluster: Vec<TestEtcd> = specs.into_iter().map(|m| m.spawn(binary, &initial, own_group)).collect();
            if cluster.iter_mut().all(|m| m.wait_healthy(Duration::from_secs(30))) {
                cluster[0].put_sample_keys();
                return cluster;
            }
            last_logs = cluster
                .iter()
                .map(|m| std::fs::read_to_string(m.dir.path().join("etcd.log")).unwrap_or_default())
                .collect::<Vec<_>>()
                .join("\n---\n");
            // Dropping the members kills them before the next attempt.
        }
        panic!("etcd did not become healthy; its logs:\n{last_logs}");
    }

    /// This member's name (`--name`).
    pub fn name(&self) -> String {
        self.arg("--name=")
    }

    /// This member's peer URL (`--initial-advertise-peer-urls`).
    pub fn peer_url(&self) -> String {
        self.arg("--initial-advertise-peer-urls=")
    }

    fn arg(&self, name: &str) -> String {
        self.args.iter().find_map(|a| a.strip_prefix(name)).unwrap_or_default().to_string()
    }

    /// The client URL, for `--endpoints=` and `upgrade_etcd_endpoints`.
    pub fn endpoints(&self) -> &str {
        &self.endpoint
    }

    /// etcd's data directory.
    pub fn data_dir(&self) -> PathBuf {
        self.real("its data directory");
        self.dir.path().join("data")
    }

    /// A scratch directory beside the data dir that lives as long as etcd (for backups).
    pub fn scratch_dir(&self) -> &Path {
        self.dir.path()
    }

    fn pid_file(&self) -> PathBuf {
        self.dir.path().join("etcd.pid")
    }

    /// A shell command that stops this etcd (whichever process runs it now) and returns once it has exited: the
    /// stand-in for `systemctl stop etcd` in a restore.
    pub fn stop_command(&self) -> String {
        self.real("a stop command");
        let pid = self.pid_file().display().to_string();
        // The first process is this test's child: once dead it stays a zombie until reaped, so "gone" means absent
        // or in state Z.
        format!(
            "p=$(cat {pid}); kill $p; i=0; while [ $i -lt 300 ]; do s=$(awk '{{print $3}}' /proc/$p/stat 2>/dev/null);              if [ -z \"$s\" ] || [ \"$s\" = Z ]; then exit 0; fi; sleep 0.1; i=$((i+1)); done; exit 1"
        )
    }

    /// A shell command that starts etcd again with the same flags and data directory, in the background (the
    /// stand-in for `systemctl start etcd`); the process is killed when this value is dropped.
    pub fn start_command(&self) -> String {
        self.real("a start command");
        let args: Vec<String> = self.args.iter().map(|a| format!("'{a}'")).collect();
        format!(
            "setsid {} {} >> {} 2>&1 < /dev/null & echo $! > {}",
            etcd_binary().display(),
            args.join(" "),
            self.dir.path().join("etcd-restarted.log").display(),
            self.pid_file().display()
        )
    }

    /// The `etcdctl snapshot restore` flags that make the restored member this one (name, peer URL, cluster).
    pub fn restore_flags(&self) -> String {
        self.real("the restore flags");
        format!(
            "--name {} --initial-cluster {} --initial-advertise-peer-urls {}",
            self.name(),
            self.arg("--initial-cluster="),
            self.peer_url()
        )
    }

    /// Runs `etcdctl --endpoints=THIS ARGS` (API v3).
    pub fn etcdctl(&self, args: &[&str]) -> Output {
        let etcdctl = self.etcdctl_path();
        Command::new(&etcdctl)
            .env("ETCDCTL_API", "3")
            .arg(format!("--endpoints={}", self.endpoint))
            .arg("--dial-timeout=2s")
            .args(args)
            .output()
            .unwrap_or_else(|e| panic!("run {}: {e}", etcdctl.display()))
    }

    fn wait_healthy(&mut self, within: Duration) -> bool {
        let start = Instant::now();
        while start.elapsed() < within {
            if let Some(Ok(Some(_))) = self.child.as_mut().map(|c| c.try_wait()) {
                return false;
            }
            if self.etcdctl(&["endpoint", "health"]).status.success() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        false
    }

    /// A few keys, so that a snapshot holds data: one transaction (one etcdctl, one write to the log), not a put each.
    fn put_sample_keys(&self) {
        let value = "value ".repeat(50);
        let mut requests = String::from("\n");
        for i in 0..20 {
            requests.push_str(&format!("put /registry/test/key-{i:02} \"{}\"\n", value.trim_end()));
        }
        requests.push_str("\n\n");
        let mut txn = Command::new(self.etcdctl_path())
            .env("ETCDCTL_API", "3")
            .arg(format!("--endpoints={}", self.endpoint))
            .args(["txn", "--interactive=false"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run etcdctl txn");
        std::io::Write::write_all(txn.stdin.as_mut().expect("stdin"), requests.as_bytes()).expect("etcdctl txn stdin");
        drop(txn.stdin.take());
        let out = txn.wait_with_output().expect("etcdctl txn");
        let said = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && said.starts_with("SUCCESS"),
            "etcdctl txn: {said}{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

impl Drop for TestEtcd {
    fn drop(&mut self) {
        let Some(child) = self.child.as_mut() else { return };
        let _ = child.kill();
        let _ = child.wait();
        let first = child.id();
        // An etcd started again by `start_command`.
        if let Some(pid) = std::fs::read_to_string(self.pid_file()).ok().and_then(|p| p.trim().parse::<i32>().ok()) {
            if pid as u32 != first {
                let _ = Command::new("kill").arg(pid.to_string()).status();
            }
        }
    }
}
