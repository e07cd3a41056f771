//! The flavour of a cluster: which built-in steps upgrade it. `kubeadm` (apt packages, `kubeadm upgrade`), `openshift`
//! (OpenShift 3.11 as openshift-ansible upgrades it: yum, excluders, `master-restart`, `oc adm`) or `custom` (only the
//! operator's command variables). Decided from `upgrade_flavor`, else from the inventory's shape, and always said why.

use std::fmt;

use serde_json::Value;

use crate::error::{Error, Result};
use crate::inventory::{Inventory, Origin, Vars};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flavor {
    Kubeadm,
    Openshift,
    Custom,
}

impl Flavor {
    pub const ALL: [Flavor; 3] = [Flavor::Kubeadm, Flavor::Openshift, Flavor::Custom];

    pub fn name(self) -> &'static str {
        match self {
            Flavor::Kubeadm => "kubeadm",
            Flavor::Openshift => "openshift",
            Flavor::Custom => "custom",
        }
    }

    pub fn parse(text: &str) -> Option<Flavor> {
        Flavor::ALL.into_iter().find(|f| f.name() == text.trim())
    }

    /// The folder of this flavour's own step files under playbooks/ (those it does not have are the shared ones).
    pub fn dir(self) -> &'static str {
        self.name()
    }

    /// Whether "at the target" is read from what is installed on the host (`upgrade_host_version_command`) rather
    /// than from the kubelet version the cluster reports. OpenShift 3.11: every 3.11.z reports kubelet v1.11.0.
    pub fn probes_installed_version_by_default(self) -> bool {
        self == Flavor::Openshift
    }

    /// `upgrade_certificate_expiry_warning_days` when unset: openshift-ansible's 365, kubeadm's 30-day renewal window.
    pub fn default_certificate_warning_days(self) -> u64 {
        match self {
            Flavor::Openshift => 365,
            Flavor::Kubeadm | Flavor::Custom => 30,
        }
    }
}

impl fmt::Display for Flavor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The flavour and why it was chosen.
#[derive(Debug, Clone, PartialEq)]
pub struct FlavorChoice {
    pub flavor: Flavor,
    /// "upgrade_flavor at hosts:3", "the inventory has an OSEv3 group", ...
    pub why: String,
}

/// `upgrade_flavor` from the hosts (they must agree), else `openshift` when the inventory has an `OSEv3` group or
/// any host sets `openshift_deployment_type`, else `kubeadm`.
pub(crate) fn choose(inventory: &Inventory, hosts: &[(&str, &Vars)]) -> Result<FlavorChoice> {
    let mut set: Option<(Flavor, &Origin, &str)> = None;
    for (host, vars) in hosts {
        let Some(var) = vars.get("upgrade_flavor") else { continue };
        let text = match &var.value {
            Value::String(s) => s.trim().to_string(),
            other => other.to_string(),
        };
        let flavor = Flavor::parse(&text).ok_or_else(|| {
            var.origin.locate(
                Error::input(format!("upgrade_flavor `{text}` (for {host}) is not a flavour"))
                    .hint("set upgrade_flavor to kubeadm, openshift or custom, or leave it out to have it guessed"),
            )
        })?;
        match set {
            None => set = Some((flavor, &var.origin, host)),
            Some((first, _, first_host)) if first != flavor => {
                return Err(var.origin.locate(
                    Error::input(format!(
                        "hosts disagree on upgrade_flavor: {first_host} has `{first}`, {host} has `{flavor}`"
                    ))
                    .hint("set upgrade_flavor once, in [all:vars] or group_vars/all.yml"),
                ));
            }
            Some(_) => {}
        }
    }
    if let Some((flavor, origin, _)) = set {
        let why = match origin {
            Origin::ExtraVars(arg) => format!("upgrade_flavor from -e {arg}"),
            other => format!("upgrade_flavor at {other}"),
        };
        return Ok(FlavorChoice { flavor, why });
    }
    if inventory.groups.contains_key("OSEv3") {
        return Ok(FlavorChoice {
            flavor: Flavor::Openshift,
            why: "guessed: the inventory has an OSEv3 group (openshift-ansible); set upgrade_flavor to override".into(),
        });
    }
    if let Some(var) = hosts.iter().find_map(|(_, vars)| vars.get("openshift_deployment_type")) {
        return Ok(FlavorChoice {
            flavor: Flavor::Openshift,
            why: format!("guessed: openshift_deployment_type is set ({}); set upgrade_flavor to override", var.origin),
        });
    }
    Ok(FlavorChoice {
        flavor: Flavor::Kubeadm,
        why: "guessed: no OSEv3 group and no openshift_deployment_type; set upgrade_flavor to override".into(),
    })
}

/// OpenShift's package and service prefix (openshift-ansible's `openshift_service_type`): `origin` for
/// `openshift_deployment_type=origin`, `atomic-openshift` for `openshift-enterprise` (its default).
pub(crate) fn openshift_service_type(vars: &Vars) -> Result<&'static str> {
    let Some(var) = vars.get("openshift_deployment_type") else { return Ok("atomic-openshift") };
    match var.value.as_str().map(str::trim) {
        Some("origin") => Ok("origin"),
        Some("openshift-enterprise") => Ok("atomic-openshift"),
        _ => Err(var.origin.locate(
            Error::input(format!(
                "openshift_deployment_type `{}` is not origin or openshift-enterprise",
                var.value.as_str().map_or_else(|| var.value.to_string(), str::to_string)
            ))
            .hint("openshift-ansible 3.11 knows openshift_deployment_type=origin and =openshift-enterprise"),
        )),
    }
}

/// The OpenShift packages the upgrade step installs at the target on masters and on nodes, as
/// `openshift/defaults.yml` names them (openshift-ansible's lists, with the base package pinned too).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct OpenShiftPackages {
    pub masters: Vec<String>,
    pub nodes: Vec<String>,
}

pub(crate) fn openshift_packages(service_type: &str) -> OpenShiftPackages {
    let named = |suffixes: &[&str]| suffixes.iter().map(|suffix| format!("{service_type}{suffix}")).collect();
    OpenShiftPackages { masters: named(&["", "-clients", "-node"]), nodes: named(&["", "-node"]) }
}
