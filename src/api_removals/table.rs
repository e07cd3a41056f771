//! The table of what each Kubernetes minor removes or requires: `data/api_removals.tsv`, kept as data in the
//! repository (its header names the sources and how to update it) and compiled into the binary.

use std::sync::OnceLock;

/// A Kubernetes minor release, `(1, 25)`.
pub(crate) type Minor = (u64, u64);

pub(crate) fn minor_text(minor: Minor) -> String {
    format!("{}.{}", minor.0, minor.1)
}

/// `1.25`, `v1.25`, `1.25.3` (the patch is ignored).
pub(crate) fn parse_minor(text: &str) -> Option<Minor> {
    let text = text.trim().trim_start_matches('v');
    let mut parts = text.split('.');
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.split(|c: char| !c.is_ascii_digit()).next()?.parse().ok()?;
    Some((major, minor))
}

/// What a row is about.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum What {
    /// An API version no longer served: `policy/v1beta1`, `poddisruptionbudgets`, `PodDisruptionBudget`.
    Api {
        group_version: String,
        resource: String,
        kind: String,
    },
    KubeletFlag(String),
    /// A kubelet flag the target's `kubeadm upgrade` removes from kubeadm-flags.env itself (its post-upgrade phase),
    /// before the kubelet of that minor starts: not in the operator's way where kubeadm wrote it.
    KubeadmDropsFlag(String),
    KubeletField(String),
    KubeletGate(String),
    /// A kubelet feature gate locked to `locked_to`: the kubelet refuses to start with it set to the other value.
    KubeletGateLocked {
        gate: String,
        locked_to: bool,
    },
    /// A flag of a control-plane component (`kube-apiserver`, `kube-controller-manager`, `kube-scheduler`).
    ComponentFlag {
        component: String,
        flag: String,
    },
    ControlPlaneGate(String),
    /// A control-plane feature gate locked to `locked_to` (refused set to the other value).
    ControlPlaneGateLocked {
        gate: String,
        locked_to: bool,
    },
    /// One of kubeadm's own feature gates (the ClusterConfiguration's `featureGates`).
    KubeadmGate(String),
    AdmissionPlugin(String),
    /// `cgroup-v2`, `cri-v1`, `containerd>=2.0`.
    Host(String),
}

impl What {
    pub(crate) fn describe(&self) -> String {
        match self {
            What::Api { group_version, resource, .. } => format!("{group_version} {resource}"),
            What::KubeletFlag(flag) => format!("kubelet flag {flag}"),
            What::KubeadmDropsFlag(flag) => {
                format!("kubelet flag {flag}, dropped from kubeadm-flags.env by kubeadm upgrade")
            }
            What::KubeletField(field) => format!("KubeletConfiguration field {field}"),
            What::KubeletGate(gate) => format!("kubelet feature gate {gate}"),
            What::KubeletGateLocked { gate, locked_to } => {
                format!("kubelet feature gate {gate}={} (locked to {locked_to})", !locked_to)
            }
            What::ComponentFlag { component, flag } => format!("{component} flag {flag}"),
            What::ControlPlaneGate(gate) => format!("control-plane feature gate {gate}"),
            What::ControlPlaneGateLocked { gate, locked_to } => {
                format!("control-plane feature gate {gate}={} (locked to {locked_to})", !locked_to)
            }
            What::KubeadmGate(gate) => format!("kubeadm feature gate {gate}"),
            What::AdmissionPlugin(plugin) => format!("admission plugin {plugin}"),
            What::Host(requirement) => format!("host requirement {requirement}"),
        }
    }
}

#[derive(Debug, Clone)]
pub(crate) struct Row {
    pub minor: Minor,
    pub what: What,
    pub replacement: String,
    pub source: String,
}

const EMBEDDED: &str = include_str!("../../data/api_removals.tsv");

/// The embedded table, parsed once; an error names the line (a unit test keeps it from ever shipping broken).
pub(crate) fn table() -> Result<&'static [Row], String> {
    static TABLE: OnceLock<Result<Vec<Row>, String>> = OnceLock::new();
    TABLE.get_or_init(|| parse(EMBEDDED)).as_ref().map(Vec::as_slice).map_err(Clone::clone)
}

pub(crate) fn parse(text: &str) -> Result<Vec<Row>, String> {
    let mut rows = Vec::new();
    for (index, line) in text.lines().enumerate() {
        let number = index + 1;
        if line.trim().is_empty() || line.starts_with('#') {
            continue;
        }
        let bad = |why: &str| format!("data/api_removals.tsv line {number}: {why}");
        let fields: Vec<&str> = line.split('\t').collect();
        let [minor, kind, what, replacement, source] = fields.as_slice() else {
            return Err(bad("want 5 tab-separated fields: MINOR TYPE WHAT REPLACEMENT SOURCE"));
        };
        let minor = parse_minor(minor).ok_or_else(|| bad("the minor is not MAJOR.MINOR"))?;
        let mut also = None;
        let what = match *kind {
            "api" => {
                let parts: Vec<&str> = what.split_whitespace().collect();
                let [group_version, resource, kind] = parts.as_slice() else {
                    return Err(bad("an api row's WHAT is `GROUP/VERSION RESOURCE KIND`"));
                };
                What::Api {
                    group_version: group_version.to_string(),
                    resource: resource.to_string(),
                    kind: kind.to_string(),
                }
            }
            "kubelet-flag" => What::KubeletFlag(flag(what).ok_or_else(|| bad("a flag starts with --"))?),
            "kubeadm-drops-flag" => What::KubeadmDropsFlag(flag(what).ok_or_else(|| bad("a flag starts with --"))?),
            "kubelet-field" => What::KubeletField(what.to_string()),
            "kubelet-gate" => What::KubeletGate(what.to_string()),
            "control-plane-gate" => What::ControlPlaneGate(what.to_string()),
            // The kubelet and the control-plane components register one list of gates: a gate removed from it is
            // refused by every one of them ("unrecognized feature gate").
            "feature-gate" => {
                also = Some(What::ControlPlaneGate(what.to_string()));
                What::KubeletGate(what.to_string())
            }
            // Locked to the value given: a component refuses to start with it set to the other one.
            "locked-gate" => {
                let (gate, locked_to) = what
                    .split_once('=')
                    .and_then(|(gate, value)| Some((gate.to_string(), parse_bool(value)?)))
                    .ok_or_else(|| bad("a locked-gate row's WHAT is `GateName=true` or `GateName=false`"))?;
                also = Some(What::ControlPlaneGateLocked { gate: gate.clone(), locked_to });
                What::KubeletGateLocked { gate, locked_to }
            }
            "kubeadm-gate" => What::KubeadmGate(what.to_string()),
            "admission-plugin" => What::AdmissionPlugin(what.to_string()),
            "host" => What::Host(what.to_string()),
            other => match other.strip_suffix("-flag") {
                Some(component @ ("kube-apiserver" | "kube-controller-manager" | "kube-scheduler")) => {
                    What::ComponentFlag {
                        component: component.to_string(),
                        flag: flag(what).ok_or_else(|| bad("a flag starts with --"))?,
                    }
                }
                _ => return Err(bad(&format!("unknown TYPE `{other}`"))),
            },
        };
        for what in std::iter::once(what).chain(also) {
            rows.push(Row { minor, what, replacement: replacement.to_string(), source: source.to_string() });
        }
    }
    Ok(rows)
}

/// `true` / `false` as feature gates take them (any case).
pub(crate) fn parse_bool(text: &str) -> Option<bool> {
    match text.trim().to_ascii_lowercase().as_str() {
        "true" => Some(true),
        "false" => Some(false),
        _ => None,
    }
}

fn flag(text: &str) -> Option<String> {
    text.starts_with("--").then(|| text.to_string())
}

/// The minors a run from `current` to `target` crosses: every minor after the current one, up to the target's.
pub(crate) fn crossed(current: Minor, target: Minor) -> Vec<Minor> {
    if target.0 != current.0 {
        return if target > current { vec![target] } else { Vec::new() };
    }
    (current.1 + 1..=target.1).map(|m| (current.0, m)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_embedded_table_parses_and_names_a_source_for_every_row() {
        let rows = table().expect("data/api_removals.tsv parses");
        assert!(rows.len() > 60, "{} rows", rows.len());
        assert!(rows.iter().all(|r| !r.source.is_empty() && !r.replacement.is_empty()));
        let psp = rows.iter().find(|r| r.what.describe() == "policy/v1beta1 podsecuritypolicies").expect("PSP row");
        assert_eq!(psp.minor, (1, 25));
        assert!(rows.iter().any(|r| r.minor == (1, 35) && r.what == What::Host("cgroup-v2".into())));
        assert!(
            rows.iter()
                .any(|r| r.minor == (1, 35) && r.what == What::KubeletFlag("--pod-infra-container-image".into()))
        );
    }

    #[test]
    fn a_bad_row_is_named_by_its_line() {
        let err = parse("# header\n1.25\tapi\tpolicy/v1beta1\tx\tguide\n").unwrap_err();
        assert!(err.contains("line 2"), "{err}");
        assert!(parse("1.x\thost\tcgroup-v2\tx\ty\n").unwrap_err().contains("MAJOR.MINOR"));
        assert!(parse("1.2\tnope\tx\tx\ty\n").unwrap_err().contains("unknown TYPE"));
        assert!(parse("1.25\tlocked-gate\tCSIMigration\tx\ty\n").unwrap_err().contains("GateName=true"));
    }

    #[test]
    fn a_removed_feature_gate_is_refused_by_the_kubelet_and_the_control_plane_alike() {
        let rows = parse("1.27\tfeature-gate\tCSIMigration\t-\tgates-removed\n").expect("parses");
        let whats: Vec<&What> = rows.iter().map(|r| &r.what).collect();
        assert_eq!(
            whats,
            vec![&What::KubeletGate("CSIMigration".into()), &What::ControlPlaneGate("CSIMigration".into())]
        );
        let table = table().expect("data/api_removals.tsv parses");
        for gate in [What::KubeletGate("CSIMigration".into()), What::ControlPlaneGate("CSIMigration".into())] {
            assert!(table.iter().any(|r| r.minor == (1, 27) && r.what == gate), "{gate:?}");
        }
        // A gate the page says "GA until 1.23" whose removing pull request was not read is weighed at 1.23 and 1.24.
        let node_lease: Vec<Minor> =
            table.iter().filter(|r| r.what == What::KubeletGate("NodeLease".into())).map(|r| r.minor).collect();
        assert_eq!(node_lease, vec![(1, 23), (1, 24)]);
    }

    #[test]
    fn a_run_crosses_every_minor_after_the_current_one() {
        assert_eq!(crossed((1, 24), (1, 25)), vec![(1, 25)]);
        assert_eq!(crossed((1, 24), (1, 27)), vec![(1, 25), (1, 26), (1, 27)]);
        assert!(crossed((1, 25), (1, 25)).is_empty());
        assert_eq!(parse_minor("v1.25.3"), Some((1, 25)));
        assert_eq!(parse_minor("1.37"), Some((1, 37)));
    }
}
