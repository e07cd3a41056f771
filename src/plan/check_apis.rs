//! `upgrade check-apis`: preflight's gate on removed APIs and flags without a run. It connects, reads the cluster and
//! the hosts as preflight would (changing nothing: the cluster lock is neither read nor taken), and returns the
//! report: the same table the run would refuse with. `commands` prints it and exits 1 when it blocks.

use crate::console::errln;
use std::sync::Arc;

use crate::api_removals::Report;
use crate::error::{Error, Result};
use crate::events::{Event, EventSink};
use crate::inventory::{Inventory, Vars};
use crate::phase::{api_removals, cluster_reads, preflight};
use crate::plan::Phase;
use crate::session::{Remote, Session, UpgradeRequest};

/// The reads' notices are not the answer: the report is. They go to stderr, so `--output json` stays one document.
struct Stderr;

impl EventSink for Stderr {
    fn event(&self, event: &Event) {
        if let Event::Notice { host, message } = event {
            let text = crate::redact::escapes::strip_terminal_escapes(message);
            match host {
                Some(h) => errln!("[{h}] {text}"),
                None => errln!("{text}"),
            }
        }
    }
}

pub(crate) fn check_apis(
    request: &UpgradeRequest,
    inventory: Inventory,
    extra: Vars,
    remote: Remote,
) -> Result<Report> {
    let session = Session::open(request, inventory, extra, remote, Arc::new(Stderr))?;
    if session.target.is_none() {
        return Err(Error::input("no target version")
            .in_file(&session.inventory.path)
            .hint("pass --target (e.g. v1.29.1), or set upgrade_target_version in the inventory"));
    }
    let run = session.run.clone();
    let outcome = session.runtime.block_on(async {
        preflight::check_reachable(&run).await?;
        let cluster = cluster_reads::read_cluster(&run, Phase::Preflight).await?;
        let by_name: std::collections::HashMap<String, crate::cluster::ClusterNode> =
            cluster.into_iter().map(|n| (n.name.clone(), n)).collect();
        let by_name = Arc::new(by_name);
        if let Ok(mut before) = run.cluster_before.lock() {
            *before = by_name.clone();
        }
        cluster_reads::read_host_versions(&run).await?;
        let decided = preflight::decide(&run, &by_name)?;
        let hosts = api_removals::hosts_to_upgrade(&decided);
        let report =
            api_removals::report(&run, Phase::Preflight, &hosts, decided.control_plane_version.as_ref()).await?;
        report.ok_or_else(|| {
            Error::input("the gate on removed APIs does not apply to this inventory").hint(
                "it checks the kubeadm and custom flavours (OpenShift 3.11's target is an OpenShift release), and \
                 upgrade_api_removals_check: false switches it off",
            )
        })
    });
    session.close();
    outcome
}
