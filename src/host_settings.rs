//! The per-host settings of the kubeadm steps (package manager, repository file, kubeadm's plan check, the
//! control-plane health gate, readiness timeouts): checked before anything connects, so that a bad value is an input
//! error at its file and line, and gathered with their origins for `--plan`. The task files read the same variables.

use serde_json::Value;

use crate::error::{Error, Result};
use crate::flavor::Flavor;
use crate::inventory::{Origin, Vars};
use crate::settings::{TargetVersion, located};

/// The package managers `upgrade_package_manager` names (`auto` finds one per host in preflight).
pub(crate) const PACKAGE_MANAGERS: [&str; 4] = ["auto", "apt", "dnf", "yum"];

/// One value of a per-host setting and the hosts that have it, for `--plan`.
#[derive(Debug, Clone, PartialEq)]
pub struct HostSettingValue {
    pub variable: &'static str,
    /// The value as the operator reads it (`auto`, `300`, `by the package manager`).
    pub value: String,
    /// `default`, or where the variable was set (`hosts.yml:4:5`, `-e upgrade_package_manager=dnf`).
    pub origin: String,
    pub hosts: Vec<String>,
}

enum Kind {
    PackageManager,
    Text,
    Flag,
    /// Whole seconds, 0 or more (`min` is the least allowed).
    Seconds {
        min: i64,
    },
    /// One of these words.
    Choice(&'static [&'static str]),
}

/// The settings `--plan` shows and this module checks, with their defaults as the task files have them.
const SETTINGS: [(&str, Kind, &str); 12] = [
    ("upgrade_package_manager", Kind::PackageManager, "auto"),
    // How the hosts' Kubernetes binaries were installed (kubeadm/install_method.yml, kubernetes_binaries.yml).
    ("upgrade_kubernetes_install_method", Kind::Choice(&["packages", "binaries"]), "packages"),
    ("upgrade_kubernetes_binaries_url", Kind::Text, "https://dl.k8s.io/release"),
    ("upgrade_kubernetes_repo_manage", Kind::Flag, "true"),
    (
        "upgrade_kubernetes_repo_file",
        Kind::Text,
        "by the package manager: /etc/apt/sources.list.d/kubernetes.list (apt), /etc/yum.repos.d/kubernetes.repo (dnf, yum)",
    ),
    ("upgrade_kubeadm_plan_check", Kind::Flag, "true"),
    ("upgrade_control_plane_ready_timeout", Kind::Seconds { min: 0 }, "300"),
    ("upgrade_control_plane_ready_delay", Kind::Seconds { min: 1 }, "5"),
    // At least 1, as builtin_vars checks it for every host first: a zero timeout gives up before the node is read.
    ("upgrade_node_ready_timeout", Kind::Seconds { min: 1 }, "600"),
    // What becomes of a node whose drain fails (phase/undrainable.rs).
    ("upgrade_undrainable_node_behavior", Kind::Choice(&["fail", "quarantine", "schedule"]), "fail"),
    // A drain that timed out retried with `--disable-eviction` (phase/drain_fallback.rs), as kubespray's
    // drain_fallback_enabled; the retry's bound, kubespray's drain_fallback_timeout (360s).
    (DRAIN_FALLBACK, Kind::Choice(&["none", DISABLE_EVICTION]), "none"),
    ("upgrade_drain_fallback_timeout", Kind::Seconds { min: 1 }, "360"),
];

pub(crate) const DRAIN_FALLBACK: &str = "upgrade_drain_fallback";
pub(crate) const DISABLE_EVICTION: &str = "disable-eviction";

/// Why `upgrade_drain_fallback: disable-eviction` cannot work with `flavor` and `target`, if it cannot: the flag came
/// with kubectl 1.18, and OpenShift 3.11's `oc` (kubectl 1.11) has no such flag (testing/tool-flags/oc-3.11).
pub(crate) fn disable_eviction_missing(flavor: Flavor, target: Option<&TargetVersion>) -> Option<String> {
    match (flavor, target) {
        (Flavor::Openshift, _) => Some("OpenShift 3.11's `oc adm drain` has no --disable-eviction".into()),
        (_, Some(t)) if t.major == 1 && t.minor < 18 => {
            Some(format!("kubectl {}.{} has no `drain --disable-eviction` (it came with 1.18)", t.major, t.minor))
        }
        _ => None,
    }
}

/// The settings only the kubeadm flavour reads: the openshift flavour installs with yum between its excluders and
/// the custom flavour runs the operator's commands, so neither has a package manager, repository file or kubeadm plan.
const KUBEADM_ONLY: [&str; 6] = [
    "upgrade_package_manager",
    "upgrade_kubernetes_install_method",
    "upgrade_kubernetes_binaries_url",
    "upgrade_kubernetes_repo_manage",
    "upgrade_kubernetes_repo_file",
    "upgrade_kubeadm_plan_check",
];

/// Checks every host's values of the settings `flavor` reads and groups them by value and origin, in host order.
pub(crate) fn resolve(
    flavor: Flavor,
    target: Option<&TargetVersion>,
    hosts: &[(&str, &Vars)],
) -> Result<Vec<HostSettingValue>> {
    let mut rows: Vec<HostSettingValue> = Vec::new();
    for (name, kind, default) in &SETTINGS {
        if flavor != Flavor::Kubeadm && KUBEADM_ONLY.contains(name) {
            continue;
        }
        let mut mine: Vec<HostSettingValue> = Vec::new();
        for (host, vars) in hosts {
            let (value, origin) = match vars.get(*name) {
                Some(var) => {
                    let value = check(name, kind, &var.value, &var.origin)?;
                    if *name == DRAIN_FALLBACK && value == DISABLE_EVICTION {
                        if let Some(why) = disable_eviction_missing(flavor, target) {
                            let error = Error::input(format!("{name}: {DISABLE_EVICTION} cannot work here: {why}"))
                                .hint(format!("use {name}: none (the default); nothing was changed"));
                            return Err(located(error, name, &var.origin));
                        }
                    }
                    (value, describe(&var.origin))
                }
                None => (default.to_string(), "default".to_string()),
            };
            match mine.iter_mut().find(|r| r.value == value && r.origin == origin) {
                Some(row) => row.hosts.push(host.to_string()),
                None => mine.push(HostSettingValue { variable: name, value, origin, hosts: vec![host.to_string()] }),
            }
        }
        rows.extend(mine);
    }
    Ok(rows)
}

fn describe(origin: &Origin) -> String {
    match origin {
        Origin::Default => "default".into(),
        Origin::ExtraVars(arg) => format!("-e {arg}"),
        other => other.to_string(),
    }
}

fn templated(value: &Value) -> bool {
    value.as_str().is_some_and(|s| s.contains("{{") || s.contains("{%"))
}

/// The value as text, or an input error at its place saying what would do.
fn check(name: &str, kind: &Kind, value: &Value, origin: &Origin) -> Result<String> {
    let text = match value {
        Value::String(s) => s.trim().to_string(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::Null => String::new(),
        _ => {
            return Err(located(
                Error::input(format!("{name} must be a single value, not a list or a mapping")),
                name,
                origin,
            ));
        }
    };
    // A templated value is the task files' to render; it is shown as written.
    if templated(value) {
        return Ok(text);
    }
    let bad = |what: String, hint: &str| Err(located(Error::input(what).hint(hint.to_string()), name, origin));
    match kind {
        Kind::PackageManager => {
            if PACKAGE_MANAGERS.contains(&text.as_str()) {
                Ok(text)
            } else {
                bad(
                    format!("{name} `{text}` is not a package manager the kubeadm steps know"),
                    "use auto (apt-get, else dnf, else yum, found per host), apt, dnf or yum; for another one set \
                     upgrade_kubeadm_package_command and upgrade_kubelet_package_command",
                )
            }
        }
        Kind::Text => Ok(text),
        Kind::Choice(words) => {
            if words.contains(&text.as_str()) {
                Ok(text)
            } else {
                bad(format!("{name} `{text}` is not one of {}", words.join(", ")), &format!("use {}", words.join(", ")))
            }
        }
        Kind::Flag => match crate::ansible_compat::boolean(value) {
            Some(b) => Ok(b.to_string()),
            None => bad(format!("{name} `{text}` is not a boolean"), "use true or false"),
        },
        Kind::Seconds { min } => match text.parse::<i64>() {
            Ok(n) if n >= *min => Ok(n.to_string()),
            Ok(n) => bad(
                format!("{name} is {n}: it must be at least {min} (whole seconds)"),
                "give a number of seconds, for example 300",
            ),
            Err(_) => bad(
                format!("{name} `{text}` is not a whole number of seconds"),
                "give a number of seconds, for example 300",
            ),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Location;
    use crate::inventory::Var;

    fn vars(pairs: &[(&str, Value)]) -> Vars {
        pairs
            .iter()
            .map(|(k, v)| {
                (k.to_string(), Var { value: v.clone(), origin: Origin::Inventory(Location::new("hosts", 3, 5)) })
            })
            .collect()
    }

    #[test]
    fn defaults_and_set_values_are_grouped_with_their_origin() {
        let a = vars(&[("upgrade_package_manager", Value::from("dnf"))]);
        let b = Vars::new();
        let rows = resolve(Flavor::Kubeadm, None, &[("a", &a), ("b", &b)]).unwrap();
        let pm: Vec<_> = rows.iter().filter(|r| r.variable == "upgrade_package_manager").collect();
        assert_eq!(pm.len(), 2);
        assert_eq!((pm[0].value.as_str(), pm[0].origin.as_str()), ("dnf", "hosts:3:5"));
        assert_eq!(
            (pm[1].value.as_str(), pm[1].origin.as_str(), &pm[1].hosts[..]),
            ("auto", "default", &["b".to_string()][..])
        );
    }

    #[test]
    fn an_unknown_package_manager_and_a_negative_timeout_are_input_errors_at_their_place() {
        for (name, value) in [
            ("upgrade_package_manager", Value::from("zypper")),
            ("upgrade_control_plane_ready_timeout", Value::from(-5)),
            ("upgrade_node_ready_timeout", Value::from("-1")),
            ("upgrade_kubeadm_plan_check", Value::from("maybe")),
            ("upgrade_undrainable_node_behavior", Value::from("cordon")),
        ] {
            let v = vars(&[(name, value)]);
            let err = resolve(Flavor::Kubeadm, None, &[("a", &v)]).unwrap_err();
            assert_eq!(err.exit_code(), 2, "{name}");
            assert!(err.to_string().contains(name), "{err}");
            assert!(err.to_string().contains("hosts:3:5") || err.to_string().contains("hosts:3"), "{err}");
        }
    }

    #[test]
    fn the_disable_eviction_fallback_is_refused_where_drain_has_no_such_flag() {
        let v = vars(&[(DRAIN_FALLBACK, Value::from(DISABLE_EVICTION))]);
        let old = TargetVersion { major: 1, minor: 17, patch: 4, suffix: String::new() };
        let new = TargetVersion { major: 1, minor: 29, patch: 1, suffix: String::new() };
        for (flavor, target, why) in [
            (Flavor::Openshift, None, "OpenShift 3.11's `oc adm drain` has no --disable-eviction"),
            (Flavor::Kubeadm, Some(&old), "kubectl 1.17 has no `drain --disable-eviction` (it came with 1.18)"),
            (Flavor::Custom, Some(&old), "kubectl 1.17 has no"),
        ] {
            let err = resolve(flavor, target, &[("a", &v)]).unwrap_err();
            assert_eq!(err.exit_code(), 2, "{flavor}");
            let said = err.to_string();
            assert!(said.contains(why) && said.contains("hosts:3"), "{flavor}: {said}");
            assert!(err.hint.as_deref().unwrap_or_default().contains("upgrade_drain_fallback: none"), "{err:?}");
        }
        let rows = resolve(Flavor::Kubeadm, Some(&new), &[("a", &v)]).unwrap();
        assert!(rows.iter().any(|r| r.variable == DRAIN_FALLBACK && r.value == DISABLE_EVICTION), "{rows:?}");
        let none = vars(&[(DRAIN_FALLBACK, Value::from("none"))]);
        assert!(resolve(Flavor::Openshift, None, &[("a", &none)]).is_ok(), "none is fine everywhere");
        let bad = vars(&[(DRAIN_FALLBACK, Value::from("force"))]);
        assert!(resolve(Flavor::Kubeadm, Some(&new), &[("a", &bad)]).is_err());
    }

    #[test]
    fn the_openshift_and_custom_flavours_have_no_package_manager_repository_or_kubeadm_plan_settings() {
        let v = vars(&[("upgrade_package_manager", Value::from("zypper"))]);
        for flavor in [Flavor::Openshift, Flavor::Custom] {
            let rows = resolve(flavor, None, &[("a", &v)]).unwrap();
            let names: Vec<&str> = rows.iter().map(|r| r.variable).collect();
            assert!(KUBEADM_ONLY.iter().all(|k| !names.contains(k)), "{flavor}: {names:?}");
            assert!(names.contains(&"upgrade_control_plane_ready_timeout"), "{flavor}: {names:?}");
        }
    }
}
