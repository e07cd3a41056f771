//! The package modules of hook files (`apt`, `package`, `yum`, `dnf`) run by `upgrade run-tasks`.
//!
//! `apt` and `package` run on a real Debian host (support/debian_host.rs: a debootstrapped bookworm root with real
//! apt, apt-mark and dpkg behind its own chrooted sshd, the Kubernetes packages served like pkgs.k8s.io on
//! loopback). `yum` and `dnf` have no real host here (no RPM-based root is built on this machine): their test runs
//! over a real sshd with stand-in `dnf` and `rpm` scripts (testing/packages/) that keep a package list in a file and
//! record every command line, so what it checks is the commands sent and the decisions taken from `rpm -q`, not
//! dnf itself.

use std::path::Path;

use crate::support::Scenario;
use crate::support::debian_host::{DebianHost, DebianImage, RepoServer};
use crate::support::fake_cluster::FakeCluster;
use crate::support::sshd::TestSshd;

const V129_LINE: &str = "deb [trusted=yes] http://pkgs.k8s.io/core:/stable:/v1.29/deb/ /";

fn run_tasks(dir: &Path, tasks: &str, inventory: &str) -> crate::support::Outcome {
    std::fs::write(dir.join("tasks.yml"), tasks).expect("tasks");
    std::fs::write(dir.join("hosts.yml"), inventory).expect("inventory");
    Scenario::in_dir(dir).args(["run-tasks", "tasks.yml", "--inventory", "hosts.yml"]).run()
}

/// A node at 1.28.5 (kubeadm, kubelet, kubectl held, as the Kubernetes install docs leave them) whose repository
/// line names v1.29; `None` when the Debian root is not built.
fn debian_node() -> Option<(DebianHost, RepoServer, FakeCluster)> {
    let image = DebianImage::find()?;
    let fake = FakeCluster::init("n1 v1.28.5 -\n");
    let repo = RepoServer::start(&image.repo());
    let host = DebianHost::start(&image, "n1", &fake, &repo, V129_LINE);
    Some((host, repo, fake))
}

#[test]
fn apt_and_package_install_pinned_latest_and_removed_packages_on_a_debian_host_reporting_changed_as_ansible() {
    let Some((host, _repo, _fake)) = debian_node() else { return };
    let dir = tempfile::tempdir().expect("dir");
    let inventory = format!("all:\n  hosts:\n{}", host.yaml_host(4));
    let tasks = r#"
- name: the index is read (the host has none yet)
  apt:
    update_cache: true
  register: refreshed
- name: a held package is not changed without allow_change_held_packages
  apt:
    name: kubeadm=1.29.1-*
  register: held
  ignore_errors: true
- name: version pins, as upgrade hooks write them
  apt:
    name: ["kubeadm=1.29.1-*", "kubectl=1.29.0-1.1"]
    allow_change_held_packages: true
  register: pinned
- name: the same again
  apt:
    name: ["kubeadm=1.29.1-*", "kubectl=1.29.0-1.1"]
    allow_change_held_packages: true
  register: pinned_again
- name: installed, any version, is present
  package:
    name: kubectl
  register: present
- name: latest through package
  package:
    name: kubectl
    state: latest
    allow_change_held_packages: true
  register: latest
- name: an older version without allow_downgrade is apt's refusal
  apt:
    name: kubectl=1.29.0-1.1
    allow_change_held_packages: true
  register: downgrade_refused
  ignore_errors: true
- name: an older version with allow_downgrade
  apt:
    name: kubectl=1.29.0-1.1
    allow_change_held_packages: true
    allow_downgrade: true
  register: downgraded
- name: removed
  apt:
    name: kubectl
    state: absent
    allow_change_held_packages: true
  register: removed
- name: removed again
  apt:
    name: kubectl
    state: absent
  register: removed_again
- name: a package no repository has
  apt:
    name: no-such-package
  register: unknown
  ignore_errors: true
- name: what each reported
  assert:
    that:
      - refreshed is changed and refreshed.cache_updated
      - held is failed and 'allow-change-held-packages' in held.msg
      - pinned is changed and 'kubeadm' in pinned.stdout
      - pinned_again is not changed
      - present is not changed
      - latest is changed
      - downgrade_refused is failed and '--allow-downgrades' in downgrade_refused.stderr
      - downgraded is changed
      - removed is changed
      - removed_again is not changed
      - unknown is failed and unknown.msg == "No package matching 'no-such-package' is available"
"#;
    let out = run_tasks(dir.path(), tasks, &inventory);
    assert_eq!(out.code, 0, "{out}\n{}", host.sh("tail -n 40 /var/log/apt/term.log").1);
    assert_eq!(host.installed("kubeadm"), "1.29.1-1.1");
    assert_eq!(host.installed("kubectl"), "", "removed");
    assert_eq!(host.installed("kubelet"), "1.28.5-1.1", "untouched");
    assert!(host.holds().contains("kubelet"), "{:?}", host.holds());
}

#[test]
fn yum_dnf_and_package_send_dnf_the_pins_and_options_and_report_changed_from_rpm() {
    let dir = tempfile::tempdir().expect("dir");
    let sshd = TestSshd::start();
    let inventory = format!("all:\n  hosts:\n{}", sshd.yaml_host("h1", 4));
    let (db, repo, log) = (dir.path().join("installed"), dir.path().join("repo"), dir.path().join("commands"));
    std::fs::write(&db, "kubectl 1.29.2-150500.1.1 x86_64\n").expect("db");
    std::fs::write(
        &repo,
        "kubeadm 1.29.2-150500.1.1 x86_64\nkubeadm 1.29.3-150500.1.1 x86_64\nkubectl 1.29.2-150500.1.1 x86_64\n\
         kubectl 1.29.3-150500.1.1 x86_64\n",
    )
    .expect("repo");
    let bin = Path::new(env!("CARGO_MANIFEST_DIR")).join("testing/packages/bin");
    let tasks = format!(
        r#"
- environment:
    PATH: "{bin}:/usr/bin:/bin"
    PKG_DB: "{db}"
    PKG_REPO: "{repo}"
    PKG_LOG: "{log}"
  vars:
    ansible_pkg_mgr: dnf
  block:
    - name: a pinned version, the excludes of the kubernetes repository lifted
      yum:
        name: kubeadm-1.29.3
        disable_excludes: kubernetes
      register: pinned
    - name: the same again
      yum:
        name: kubeadm-1.29.3
        disable_excludes: kubernetes
      register: pinned_again
    - name: an older version is left alone without allow_downgrade
      dnf:
        name: kubeadm-1.29.2
      register: older
    - name: an older version with allow_downgrade
      dnf:
        name: kubeadm-1.29.2
        allow_downgrade: true
      register: downgraded
    - name: latest through package
      package:
        name: kubectl
        state: latest
      register: latest
    - name: removed
      dnf:
        name: kubectl
        state: absent
      register: removed
    - name: removed again
      dnf:
        name: kubectl
        state: absent
      register: removed_again
    - name: a package no repository has
      dnf:
        name: no-such-package
      register: unknown
      ignore_errors: true
    - name: what each reported
      assert:
        that:
          - "pinned is changed and pinned.results == ['Installed: kubeadm-1.29.3-150500.1.1.x86_64']"
          - pinned_again is not changed and pinned_again.msg == 'Nothing to do'
          - older is not changed
          - downgraded is changed
          - "latest is changed and 'Installed: kubectl-1.29.3-150500.1.1.x86_64' in latest.results"
          - removed is changed and removed_again is not changed
          - "unknown is failed and unknown.failures == ['No package no-such-package available.']"
"#,
        bin = bin.display(),
        db = db.display(),
        repo = repo.display(),
        log = log.display()
    );
    let out = run_tasks(dir.path(), &tasks, &inventory);
    let commands = std::fs::read_to_string(&log).unwrap_or_default();
    assert_eq!(out.code, 0, "{out}\n{commands}");
    let sent: Vec<&str> = commands.lines().filter(|l| l.starts_with("dnf")).collect();
    assert_eq!(
        sent,
        [
            "dnf -y --disableexcludes=kubernetes install kubeadm-1.29.3",
            "dnf -y install kubeadm-1.29.2",
            "dnf -y upgrade kubectl",
            "dnf -y remove kubectl",
            "dnf -y install no-such-package",
        ]
    );
    assert_eq!(std::fs::read_to_string(&db).expect("db"), "kubeadm 1.29.2-150500.1.1 x86_64\n");
}
