//! Many hosts at once: `--forks` bounds the steps that go over every host (preflight's checks), and a command that
//! reaches hosts raises its soft limit on open files for the batches that serial lets run at once.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;

use crate::upgrade::{TestCluster, nodes, spec};

/// An `openssl` for the certificate check that counts the commands running it at once: each makes a file of its own
/// in `running/`, writes how many files it sees there to `seen/`, and holds on for a while before removing its own.
/// The date it prints expires in 10 days, so preflight stops (exit 1) once every host was read.
fn counting_openssl(dir: &Path) -> String {
    let script = dir.join("openssl");
    let running = dir.join("running");
    let seen = dir.join("seen");
    std::fs::create_dir_all(&running).expect("running dir");
    std::fs::create_dir_all(&seen).expect("seen dir");
    let text = format!(
        "#!/bin/sh\n\
         : > '{running}/'$$\n\
         ls '{running}' | wc -l > '{seen}/'$$\n\
         sleep 0.4\n\
         rm -f '{running}/'$$\n\
         echo \"notAfter=$(LC_ALL=C date -u -d '+10 days' '+%b %e %H:%M:%S %Y GMT')\"\n",
        running = running.display(),
        seen = seen.display()
    );
    std::fs::write(&script, text).expect("script");
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    script.display().to_string()
}

/// How many commands each run of the counting openssl saw at once.
fn seen(dir: &Path) -> Vec<usize> {
    std::fs::read_dir(dir.join("seen"))
        .expect("seen dir")
        .flatten()
        .map(|e| std::fs::read_to_string(e.path()).expect("count").trim().parse().expect("a number"))
        .collect()
}

fn cluster(dir: &Path) -> TestCluster {
    let list = nodes(5, "region=a");
    let certificate = dir.join("ca.crt");
    std::fs::write(&certificate, "not read: openssl is the counting script\n").expect("certificate");
    TestCluster::new(&spec(&list))
        .var(&format!("upgrade_openssl: \"{}\"", counting_openssl(dir)))
        .var(&format!("upgrade_certificate_expiry_files: [\"{}\"]", certificate.display()))
}

#[test]
fn preflight_runs_at_most_forks_hosts_commands_at_once() {
    let scratch = tempfile::tempdir().expect("scratch");
    let cluster = cluster(scratch.path());
    let _ = cluster
        .upgrade(&["--forks", "2"])
        .expect_code(1)
        .stderr_has("certificate(s) expire within 30 days")
        .stderr_has("n5:");
    let counts = seen(scratch.path());
    assert_eq!(counts.len(), 8, "every host's certificates were read: {counts:?}");
    assert_eq!(counts.iter().max(), Some(&2), "two at once, never more: {counts:?}");

    // The same check without --forks (50 by default) reads the eight hosts at once: the count above is the bound's.
    std::fs::remove_dir_all(scratch.path().join("seen")).expect("clear");
    std::fs::create_dir_all(scratch.path().join("seen")).expect("seen dir");
    let _ = cluster.upgrade(&[]).expect_code(1);
    let counts = seen(scratch.path());
    assert_eq!(counts.len(), 8, "{counts:?}");
    assert!(counts.iter().max() > Some(&2), "without the bound more run at once: {counts:?}");
}

#[test]
fn a_command_that_reaches_hosts_raises_a_low_soft_limit_on_open_files() {
    let dir = tempfile::tempdir().expect("scratch");
    let mut hard = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit only writes the struct passed.
    assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut hard) }, 0);
    let want = hard.rlim_max.min(65_536);
    assert!(want > 256, "the hard limit ({}) leaves nothing to raise", hard.rlim_max);
    std::fs::write(dir.path().join("hosts.yml"), "all:\n  hosts:\n    h1:\n      ansible_connection: local\n")
        .expect("inventory");
    let seen = dir.path().join("limit");
    std::fs::write(dir.path().join("limit.yml"), format!("- shell: ulimit -Sn > {}\n", seen.display())).expect("tasks");
    // The task's shell inherits the limit of the upgrade process, which starts with a soft limit of 256.
    let out = Command::new("sh")
        .arg("-c")
        .arg("ulimit -Sn 256 && exec \"$0\" \"$@\"")
        .arg(env!("CARGO_BIN_EXE_upgrade"))
        .args(["run-tasks", "limit.yml", "-i", "hosts.yml"])
        .current_dir(dir.path())
        .output()
        .expect("run upgrade");
    assert!(out.status.success(), "{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    let limit = std::fs::read_to_string(&seen).expect("the task ran");
    assert_eq!(limit.trim(), want.to_string());
}
