//! `upgrade artifacts --inventory hosts.yml [--target vX]`: every package and container image the upgrade to the
//! target will need, for whoever fills the mirror of an air-gapped site. Reads, changes nothing (the kubeadm
//! flavour's image list is asked of the target's kubeadm unpacked into a temporary directory, never installed).
//!
//! - kubeadm: per package manager (found on each host as the upgrade finds it), the repository of the target's minor
//!   and `kubeadm`, `kubelet`, `kubectl` at the target; the images of `kubeadm config images list
//!   --kubernetes-version vX` on the first master with the cluster's own `imageRepository` (kubeadm-config), which
//!   include the pause, CoreDNS, kube-proxy and etcd images; and the images of the cluster's DaemonSets (the CNI
//!   among them), which each node runs again after its restart.
//! - openshift (3.11): the yum packages of masters and nodes and the excluders at the target, and the release's
//!   images as the flavour's defaults derive them (oreg_url, osm_image, osn_image, osm_etcd_image).

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::Serialize;
use serde_json::Value;

use crate::error::{Error, Result};
use crate::events::{Event, EventSink};
use crate::flavor::Flavor;
use crate::inventory::{Inventory, Vars};
use crate::phase::run::UpgradeRun;
use crate::phase::{fan_out, prefetch, preflight};
use crate::plan::Phase;
use crate::session::{Remote, Session, UpgradeRequest};
use crate::vocabulary::Step;

/// Packages one package manager installs, from one repository, on some hosts.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct PackageSet {
    /// `apt`, `dnf`, `yum`, or `the inventory's own commands`.
    pub manager: String,
    /// Where they come from (the repository of the target's minor), when the upgrade knows it.
    pub repository: Option<String>,
    /// As the package manager names them at the target (`kubeadm=1.29.1-*`, `atomic-openshift-node-3.11.248`).
    pub packages: Vec<String>,
    pub hosts: Vec<String>,
}

/// Images, and where the list came from.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ImageSet {
    pub source: String,
    pub images: Vec<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Artifacts {
    pub target: String,
    pub flavor: String,
    pub packages: Vec<PackageSet>,
    pub images: Vec<ImageSet>,
}

/// The reads print nothing: the command prints its answer only (failures say what failed).
struct Quiet;

impl EventSink for Quiet {
    fn event(&self, _: &Event) {}
}

pub fn artifacts(request: &UpgradeRequest, inventory: Inventory, extra: Vars, remote: Remote) -> Result<Artifacts> {
    let session = Session::open(request, inventory, extra, remote, Arc::new(Quiet))?;
    let Some(target) = session.target.clone() else {
        return Err(Error::input("no target version")
            .in_file(&session.inventory.path)
            .hint("set upgrade_target_version in the inventory, or pass --target (e.g. v1.29.1)"));
    };
    let run = session.run.clone();
    let outcome = session.runtime.block_on(async {
        match run.plan.flavor.flavor {
            Flavor::Kubeadm => kubeadm(&run).await,
            Flavor::Openshift => openshift(&run).await,
            Flavor::Custom => Err(Error::input(
                "the custom flavour installs with the inventory's own commands: there are no built-in packages or \
                 images to list",
            )
            .in_file(&run.inventory.path)
            .hint("list what upgrade_master_upgrade_command and upgrade_node_upgrade_command fetch yourself")),
        }
    });
    session.close();
    let (packages, images) = outcome?;
    Ok(Artifacts { target: target.to_string(), flavor: run.plan.flavor.flavor.name().to_string(), packages, images })
}

type Found = (Vec<PackageSet>, Vec<ImageSet>);

fn cannot(what: &str, host: &str, why: impl std::fmt::Display) -> Error {
    Error::hosts_failed(format!("cannot read {what} on {host}: {why}"))
        .hint("check the connection to that host and upgrade_kubectl / upgrade_kubeadm; nothing was changed")
}

fn stdout<'a>(facts: &'a crate::phase::run::StepFacts, register: &str) -> &'a str {
    facts.get(register).and_then(|r| r.get("stdout")).and_then(Value::as_str).unwrap_or_default()
}

async fn kubeadm(run: &UpgradeRun) -> Result<Found> {
    preflight::check_reachable(run).await?;
    let version = run.target.to_string().trim_start_matches('v').to_string();
    let minor = format!("v{}.{}", run.target.major, run.target.minor);
    // Each host's package manager, as the upgrade finds it.
    let reads = run.plan.hosts.iter().map(|host| async move {
        let file = run.playbook("package_manager.yml");
        (host, run.run_step(Phase::Preflight, host, Step::HostCheck, &file, &[], None).await)
    });
    let mut groups: BTreeMap<(String, Option<String>), Vec<String>> = BTreeMap::new();
    for (host, result) in fan_out(run.forks(), reads).await {
        let facts = result.map_err(|f| cannot("the package manager", host, f.reason))?;
        let text = |name: &str| facts.get(name).map(|v| v.as_str().map(str::to_string).unwrap_or(v.to_string()));
        let manager = text("upgrade_package_manager_resolved").unwrap_or_default().trim().to_string();
        let builtin = text("upgrade_package_commands_builtin").unwrap_or_default().trim().eq_ignore_ascii_case("true");
        let url = run.render_for(host, "{{ upgrade_kubernetes_repo_url | default('https://pkgs.k8s.io') }}");
        let url = url.trim().trim_end_matches('/');
        let key = match manager.as_str() {
            "apt" if builtin => ("apt".to_string(), Some(format!("{url}/core:/stable:/{minor}/deb/"))),
            "dnf" | "yum" if builtin => (manager.clone(), Some(format!("{url}/core:/stable:/{minor}/rpm/"))),
            _ => ("the inventory's own package commands".to_string(), None),
        };
        groups.entry(key).or_default().push(host.clone());
    }
    let packages = groups
        .into_iter()
        .map(|((manager, repository), hosts)| {
            let packages =
                ["kubeadm", "kubelet", "kubectl"]
                    .iter()
                    .map(|p| match manager.as_str() {
                        "apt" => format!("{p}={version}-*"),
                        "dnf" | "yum" => format!("{p}-{version}-*"),
                        _ => format!("{p} {version}"),
                    })
                    .chain(repository.is_some().then(|| {
                        "and their dependencies from the same repository (cri-tools, kubernetes-cni)".to_string()
                    }))
                    .collect();
            PackageSet { manager, repository, packages, hosts }
        })
        .collect();

    let first = &run.first_master;
    let repository = prefetch::image_repository(run).await?;
    let vars = [("upgrade_kubeadm_image_repository", Value::String(repository.clone()))];
    let file = run.playbook("artifacts.yml");
    let facts = run
        .run_step(Phase::Preflight, first, Step::HostCheck, &file, &vars, None)
        .await
        .map_err(|f| cannot("the images", first, f.reason))?;
    let listed = stdout(&facts, "upgrade_artifacts_images");
    let which = listed.lines().find_map(|l| l.strip_prefix("# kubeadm: ")).unwrap_or("the host's").to_string();
    let kubeadm_images: Vec<String> =
        listed.lines().map(str::trim).filter(|l| !l.is_empty() && !l.starts_with('#')).map(str::to_string).collect();
    if kubeadm_images.is_empty() {
        return Err(cannot("the images", first, "`kubeadm config images list` printed no image"));
    }
    let flag = if repository.is_empty() { String::new() } else { format!(" --image-repository {repository}") };
    let from = if repository.is_empty() {
        "kubeadm-config names no imageRepository: kubeadm's default".to_string()
    } else {
        format!("imageRepository {repository} from kubeadm-config")
    };
    let daemonsets = crate::cluster::workload_images(stdout(&facts, "upgrade_artifacts_daemonsets"))
        .map_err(|why| cannot("the DaemonSets", first, why))?;
    let daemonsets: Vec<String> = daemonsets.into_iter().filter(|i| !kubeadm_images.contains(i)).collect();
    let images = vec![
        ImageSet {
            source: format!(
                "kubeadm config images list --kubernetes-version {}{flag} on {first} (kubeadm: {which}; {from})",
                run.target
            ),
            images: kubeadm_images,
        },
        ImageSet {
            source: "the DaemonSets of the cluster (the CNI among them), which each node runs again after its restart"
                .to_string(),
            images: daemonsets,
        },
    ];
    Ok((packages, images))
}

async fn openshift(run: &UpgradeRun) -> Result<Found> {
    let reads = run.plan.hosts.iter().map(|host| async move {
        let file = run.playbook("artifacts.yml");
        (host, run.run_step(Phase::Preflight, host, Step::HostCheck, &file, &[], None).await)
    });
    let mut groups: BTreeMap<Vec<String>, Vec<String>> = BTreeMap::new();
    let mut images: Vec<String> = Vec::new();
    for (host, result) in fan_out(run.forks(), reads).await {
        let facts = result.map_err(|f| cannot("the release's artifacts", host, f.reason))?;
        let found: Value = facts.get("upgrade_artifacts").map(|v| (**v).clone()).unwrap_or(Value::Null);
        let list = |key: &str| -> Vec<String> {
            found
                .get(key)
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        };
        let text = |key: &str| found.get(key).and_then(Value::as_str).unwrap_or_default().to_string();
        let version = text("version");
        let own = if run.plan.masters.contains(host) { list("master_packages") } else { list("node_packages") };
        let packages: Vec<String> = own.iter().chain(&list("excluders")).map(|p| format!("{p}-{version}")).collect();
        groups.entry(packages).or_default().push(host.clone());
        if host == &run.first_master {
            let pattern = text("registry_url").replace("${version}", &text("image_tag"));
            images.extend([text("control_plane_image"), text("node_image"), text("etcd_image")]);
            for component in ["pod", "deployer", "docker-registry", "haproxy-router", "web-console", "console"] {
                images.push(pattern.replace("${component}", component));
            }
        }
    }
    images.retain(|i| !i.is_empty());
    images.dedup();
    let packages = groups
        .into_iter()
        .map(|(packages, hosts)| PackageSet { manager: "yum".into(), repository: None, packages, hosts })
        .collect();
    let source = format!(
        "the OpenShift {} release (oreg_url, or the deployment type's registry; osm_image, osn_image, osm_etcd_image): \
         control-plane, node and etcd, which the upgrade moves; pod, deployer, docker-registry, haproxy-router, \
         web-console and console, which the cluster runs at the release",
        run.target
    );
    Ok((packages, vec![ImageSet { source, images }]))
}

/// For people: the packages per package manager, then the images per source.
pub fn render(found: &Artifacts) -> String {
    let mut out = format!("Artifacts of the upgrade to {} ({} flavour)\n\nPackages:\n", found.target, found.flavor);
    for set in &found.packages {
        let from = set.repository.as_deref().map(|r| format!(" from {r}")).unwrap_or_default();
        out.push_str(&format!("  {}{from} (hosts: {})\n", set.manager, set.hosts.join(", ")));
        for p in &set.packages {
            out.push_str(&format!("    {p}\n"));
        }
    }
    out.push_str("\nImages:\n");
    for set in &found.images {
        out.push_str(&format!("  {}:\n", set.source));
        if set.images.is_empty() {
            out.push_str("    (none)\n");
        }
        for image in &set.images {
            out.push_str(&format!("    {image}\n"));
        }
    }
    out
}
