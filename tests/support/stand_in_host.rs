//! A test host whose PATH holds recording stand-ins for the host side of a kubeadm upgrade: `apt-get` and `apt-mark`
//! (an apt host) or `dnf` and `yum` (a dnf host), `systemctl` and `kubeadm`, each a small sh script that appends
//! what it was called with to the host's `calls.log`, together with the pkgs.k8s.io minor its Kubernetes repository
//! file names at that moment. A package install remembers the kubelet version; `systemctl restart kubelet` tells the
//! stand-in API server (kube_api.rs) that the kubelet came back at that version. Each host has its own sshd, whose
//! sessions get the host's PATH (sshd's `SetEnv`).

#![allow(dead_code)]

use std::path::{Path, PathBuf};

use super::sshd::TestSshd;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Packages {
    Apt,
    Dnf,
}

pub struct StandInHost {
    pub name: String,
    pub packages: Packages,
    pub sshd: TestSshd,
    root: PathBuf,
}

/// One recorded call: the tool and its arguments, and the repository's minor at that moment (`v1.29`, or `-`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostCall {
    pub argv: String,
    pub repo_minor: String,
}

impl StandInHost {
    /// A host named `name` with the stand-ins for `packages`, its repository file naming `/core:/stable:/MINOR/`, whose
    /// kubelet restarts report to the API server at `api_url`.
    pub fn start(name: &str, packages: Packages, minor: &str, api_url: &str) -> StandInHost {
        let staging = tempfile::Builder::new().prefix("stand-in-").tempdir().expect("temp dir");
        let bin = staging.keep();
        let root = bin.join("root");
        std::fs::create_dir_all(&root).expect("host root");
        let tools = bin.join("bin");
        std::fs::create_dir_all(&tools).expect("bin dir");
        let repo = match packages {
            Packages::Apt => root.join("kubernetes.list"),
            Packages::Dnf => root.join("kubernetes.repo"),
        };
        let repo_text = match packages {
            Packages::Apt => format!(
                "deb [signed-by=/etc/apt/keyrings/kubernetes-apt-keyring.gpg] https://pkgs.k8s.io/core:/stable:/{minor}/deb/ /\n"
            ),
            Packages::Dnf => format!(
                "[kubernetes]\nname=Kubernetes\nbaseurl=https://pkgs.k8s.io/core:/stable:/{minor}/rpm/\nenabled=1\n\
                 gpgcheck=1\ngpgkey=https://pkgs.k8s.io/core:/stable:/{minor}/rpm/repodata/repomd.xml.key\n\
                 exclude=kubelet kubeadm kubectl cri-tools kubernetes-cni\n"
            ),
        };
        std::fs::write(&repo, repo_text).expect("repository file");
        let log = root.join("calls.log");
        let record = format!(
            "minor=$(grep -o 'pkgs\\.k8s\\.io/core:/stable:/v[0-9.]*/' '{repo}' | head -n 1 | sed 's#.*/\\(v[^/]*\\)/$#\\1#')\n\
             printf '%s %s\\t%s\\n' \"$(basename \"$0\")\" \"$*\" \"${{minor:--}}\" >> '{log}'\n",
            repo = repo.display(),
            log = log.display()
        );
        // A package install remembers the kubelet version it installed (kubelet=1.29.1-* or 'kubelet-1.29.1-*'); a
        // download (--download-only, --downloadonly) installs nothing.
        let remember = format!(
            "case \" $* \" in *' --download-only '*|*' --downloadonly '*) exit 0 ;; esac\n\
             for a in \"$@\"; do case $a in kubelet=*|kubelet-[0-9]*) v=${{a#kubelet?}}; printf '%s\\n' \"${{v%%-*}}\" > '{root}/kubelet-version' ;; esac; done\n",
            root = root.display()
        );
        let script = |name: &str, body: &str| {
            let path = tools.join(name);
            std::fs::write(&path, format!("#!/bin/sh\n{record}{body}")).expect("stand-in script");
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        };
        match packages {
            Packages::Apt => {
                script("apt-get", &format!("{remember}exit 0\n"));
                script("apt-mark", "exit 0\n");
                // Preflight's availability check (`apt-cache -o Dir::Etc::SourceList=FILE madison PKG`): the versions
                // of the minor that FILE names, as pkgs.k8s.io's per-minor repositories hold them; a file that names
                // no minor (a mirror of the operator's) offers the tests' target minor.
                script(
                    "apt-cache",
                    "for a in \"$@\"; do case $a in Dir::Etc::SourceList=*) list=${a#*=} ;; esac; done\n\
                     m=$(grep -o 'core:/stable:/v[0-9.]*/' \"$list\" | head -n 1 | sed 's#.*/v\\([0-9.]*\\)/$#\\1#')\n\
                     [ -n \"$m\" ] || m=1.29\n\
                     for a in \"$@\"; do last=$a; done\n\
                     for p in 0 1 5; do echo \"$last | $m.$p-1.1 | https://pkgs.k8s.io/core:/stable:/v$m/deb  Packages\"; done\n",
                );
            }
            Packages::Dnf => {
                script("dnf", &format!("{remember}exit 0\n"));
                script("yum", &format!("{remember}exit 0\n"));
            }
        }
        script(
            "systemctl",
            &format!(
                "if [ \"$1\" = restart ] && [ \"$2\" = kubelet ]; then\n\
                 \x20 v=$(cat '{root}/kubelet-version' 2>/dev/null) || {{ echo 'kubelet is not installed' >&2; exit 1; }}\n\
                 \x20 curl -sf -X POST '{api_url}/_test/kubelet/{name}?version=v'\"$v\" >/dev/null || {{ echo 'the API server did not answer' >&2; exit 1; }}\n\
                 fi\nexit 0\n",
                root = root.display()
            ),
        );
        script(
            "kubeadm",
            "case \"$1 $2\" in\n\
             'upgrade plan') echo '[upgrade/config] Making sure the configuration is correct:'; echo \"You can now apply the upgrade by executing: kubeadm upgrade apply $3\" ;;\n\
             'upgrade apply') echo \"[upgrade/successful] SUCCESS! Your cluster was upgraded to \\\"$3\\\". Enjoy!\" ;;\n\
             'upgrade node') echo '[upgrade] The configuration for this node was successfully updated!' ;;\n\
             'config images') echo \"[config/images] Pulled the images of $*\" ;;\n\
             'certs check-expiration') printf '%-26s %-24s %-15s %-23s %s\\n' CERTIFICATE EXPIRES 'RESIDUAL TIME' 'CERTIFICATE AUTHORITY' 'EXTERNALLY MANAGED'; printf '%-26s %-24s %-15s %-23s %s\\n' apiserver \"$(date -u -d '+3650 days' '+%b %d, %Y %H:%M UTC')\" 3649d ca no ;;\n\
             *) echo \"stand-in kubeadm: unexpected $*\" >&2; exit 1 ;;\n\
             esac\n",
        );
        let path = match packages {
            // The real apt-get of this Debian machine stays behind the stand-ins.
            Packages::Apt => format!("{}:/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin", tools.display()),
            // No apt-get at all, as on a RHEL-family host: every other tool of the system, by symlink.
            Packages::Dnf => format!("{}:{}", tools.display(), system_tools_without_apt(&bin.join("system")).display()),
        };
        let sshd = TestSshd::start_with(&[&format!("SetEnv PATH={path}")]);
        StandInHost { name: name.to_string(), packages, sshd, root }
    }

    /// The host's own directory: repository file, calls.log, the installed kubelet version.
    pub fn root(&self) -> &Path {
        &self.root
    }

    pub fn repo_file(&self) -> PathBuf {
        match self.packages {
            Packages::Apt => self.root.join("kubernetes.list"),
            Packages::Dnf => self.root.join("kubernetes.repo"),
        }
    }

    /// The inventory entry: the sshd's connection variables, plus the repository file.
    pub fn yaml_host(&self, indent: usize) -> String {
        let pad = " ".repeat(indent + 2);
        format!(
            "{}{pad}upgrade_kubernetes_repo_file: \"{}\"\n",
            self.sshd.yaml_host(&self.name, indent),
            self.repo_file().display()
        )
    }

    /// Every recorded call, in order.
    pub fn calls(&self) -> Vec<HostCall> {
        std::fs::read_to_string(self.root.join("calls.log"))
            .unwrap_or_default()
            .lines()
            .filter_map(|line| {
                let (argv, minor) = line.split_once('\t')?;
                Some(HostCall { argv: argv.to_string(), repo_minor: minor.to_string() })
            })
            .collect()
    }

    /// The index of the first call whose command line starts with `prefix`.
    pub fn position(&self, prefix: &str) -> Option<usize> {
        self.calls().iter().position(|c| c.argv.starts_with(prefix))
    }
}

impl Drop for StandInHost {
    fn drop(&mut self) {
        if let Some(dir) = self.root.parent() {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

/// A directory of symlinks to every program in /usr/bin and /usr/sbin except apt's and dpkg's.
fn system_tools_without_apt(dir: &Path) -> PathBuf {
    std::fs::create_dir_all(dir).expect("system tools dir");
    for source in ["/usr/sbin", "/usr/bin"] {
        let Ok(entries) = std::fs::read_dir(source) else { continue };
        for entry in entries.flatten() {
            let name = entry.file_name();
            let text = name.to_string_lossy();
            if text.starts_with("apt") || text.starts_with("dpkg") {
                continue;
            }
            let _ = std::os::unix::fs::symlink(entry.path(), dir.join(&name));
        }
    }
    dir.to_path_buf()
}
