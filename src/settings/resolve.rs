//! Where run-wide settings come from: flags, `-e`, the inventory (with openshift-ansible's aliases), defaults; each with its origin.

use std::fmt;

use serde_json::Value;

use super::{labels::*, limits::*, max_fail_percentage::*, readers::*, serial::*, target::*};
use crate::ansible_compat::unquote;
use crate::error::{Error, Result};
use crate::inventory::{Origin, Var, Vars};

/// A setting's value, the variable or flag that gave it, and where that was.
#[derive(Debug, Clone, PartialEq)]
pub struct Setting<T> {
    pub value: T,
    /// The variable name (`upgrade_nodes_serial`, an alias) or flag (`--serial`); `None` for the default.
    pub source: Option<String>,
    pub origin: Origin,
}

impl<T> Setting<T> {
    fn default(value: T) -> Setting<T> {
        Setting { value, source: None, origin: Origin::Default }
    }

    /// "default", "--serial", "upgrade_nodes_serial at hosts:12:1", "upgrade_nodes_serial from -e ...".
    pub fn describe_origin(&self) -> String {
        match (&self.source, &self.origin) {
            (_, Origin::Default) => "default".into(),
            (_, Origin::Flag(flag)) => flag.clone(),
            (Some(var), Origin::ExtraVars(arg)) => format!("{var} from -e {arg}"),
            (Some(var), origin) => format!("{var} at {origin}"),
            (None, origin) => origin.to_string(),
        }
    }
}

/// Nodes whose `upgrade_nodes_serial` comes from one place (a group's variables): batched on their own, with that
/// serial, when node groups set different ones.
#[derive(Debug, Clone, PartialEq)]
pub struct SerialGroup {
    pub serial: Setting<Serial>,
    pub hosts: Vec<String>,
}

/// The run-wide settings, each with its origin.
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    pub serial: Setting<Serial>,
    /// Set when the node groups carry different serials (else empty: `serial` holds for every node).
    pub serial_groups: Vec<SerialGroup>,
    pub label: Setting<Option<LabelSelector>>,
    pub max_fail_percentage: Setting<MaxFailPercentage>,
    pub drain_timeout: Setting<DrainTimeout>,
    pub target_version: Setting<Option<TargetVersion>>,
    pub forks: Setting<Forks>,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            serial: Setting::default(Serial::one()),
            serial_groups: Vec::new(),
            label: Setting::default(None),
            max_fail_percentage: Setting::default(MaxFailPercentage::default()),
            drain_timeout: Setting::default(DrainTimeout::default()),
            target_version: Setting::default(None),
            forks: Setting::default(Forks::default()),
        }
    }
}

/// The run-wide settings given on the command line, as the operator wrote them: each wins over the inventory and
/// `-e`, and is said to come from its flag (`--serial`, ...).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SettingFlags {
    pub serial: Option<String>,
    pub label: Option<String>,
    pub max_fail_percentage: Option<String>,
    pub drain_timeout: Option<String>,
    pub target_version: Option<String>,
    pub forks: Option<String>,
}

/// How a command's output is written: text for people, JSON for CI.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OutputFormat {
    #[default]
    Text,
    Json,
}

/// The variables of one host after precedence (`Inventory::host_vars`), by host name.
pub type HostVarsRef<'a> = &'a [(&'a str, &'a Vars)];

/// Resolves the run-wide settings: a flag wins; otherwise the hosts of the phase a setting governs (`node_hosts`
/// for serial, label, max-fail-percentage and drain-timeout; `all_hosts` for the target version) must agree on the
/// value their variables give (`-e` included, as it is on top of every host's variables).
pub fn resolve(
    flags: &SettingFlags,
    node_hosts: HostVarsRef<'_>,
    all_hosts: HostVarsRef<'_>,
    extra: &Vars,
) -> Result<Settings> {
    let serial_of = |hosts: HostVarsRef<'_>| -> Result<Setting<Serial>> {
        let serial = match run_wide(
            "--serial",
            flags.serial.as_deref(),
            ("upgrade_nodes_serial", "openshift_upgrade_nodes_serial"),
            hosts,
            extra,
            Serial::parse,
            Serial::from_value,
        )? {
            Some(serial) => Some(serial),
            // The Machine Config Operator's name for the same thing (nodes upgraded at once); serial wins over it.
            None => run_wide(
                "--serial",
                None,
                ("upgrade_nodes_max_unavailable", "upgrade_nodes_max_unavailable"),
                hosts,
                extra,
                Serial::parse,
                Serial::from_value,
            )?,
        };
        Ok(serial.unwrap_or_else(|| Setting::default(Serial::one())))
    };
    // Serial may differ between node groups (infra one at a time, compute 20%): each group is batched on its own.
    let mut serial_groups: Vec<SerialGroup> = Vec::new();
    if flags.serial.is_none() {
        for &(host, vars) in node_hosts {
            let serial = serial_of(&[(host, vars)])?;
            match serial_groups.iter_mut().find(|g| g.serial.value == serial.value && g.serial.origin == serial.origin)
            {
                Some(group) => group.hosts.push(host.to_string()),
                None => serial_groups.push(SerialGroup { serial, hosts: vec![host.to_string()] }),
            }
        }
    }
    let serial = match serial_groups.first() {
        Some(first) if serial_groups.len() > 1 => first.serial.clone(),
        _ => {
            serial_groups.clear();
            serial_of(node_hosts)?
        }
    };
    let label = run_wide(
        "--label",
        flags.label.as_deref(),
        ("upgrade_nodes_label", "openshift_upgrade_nodes_label"),
        node_hosts,
        extra,
        |s| optional(s, LabelSelector::parse),
        |v| optional_value(v, LabelSelector::parse, LabelSelector::from_value),
    )?
    .unwrap_or_else(|| Setting::default(None));
    let max_fail_percentage = run_wide(
        "--max-fail-percentage",
        flags.max_fail_percentage.as_deref(),
        ("upgrade_nodes_max_fail_percentage", "openshift_upgrade_nodes_max_fail_percentage"),
        node_hosts,
        extra,
        MaxFailPercentage::parse,
        MaxFailPercentage::from_value,
    )?
    .unwrap_or_else(|| Setting::default(MaxFailPercentage::default()));
    let drain_timeout = run_wide(
        "--drain-timeout",
        flags.drain_timeout.as_deref(),
        ("upgrade_nodes_drain_timeout", "openshift_upgrade_nodes_drain_timeout"),
        node_hosts,
        extra,
        DrainTimeout::parse,
        DrainTimeout::from_value,
    )?
    .unwrap_or_else(|| Setting::default(DrainTimeout::default()));
    let target_version = run_wide(
        "--target-version",
        flags.target_version.as_deref(),
        ("upgrade_target_version", "upgrade_target_version"),
        all_hosts,
        extra,
        |s| optional(s, TargetVersion::parse),
        |v| optional_value(v, TargetVersion::parse, TargetVersion::from_value),
    )?
    .unwrap_or_else(|| Setting::default(None));
    let forks = run_wide(
        "--forks",
        flags.forks.as_deref(),
        ("upgrade_forks", "upgrade_forks"),
        all_hosts,
        extra,
        Forks::parse,
        Forks::from_value,
    )?
    .unwrap_or_else(|| Setting::default(Forks::default()));
    Ok(Settings { serial, serial_groups, label, max_fail_percentage, drain_timeout, target_version, forks })
}

/// The openshift-ansible names a 3.11 target may be given by when `upgrade_target_version` is not set, in the order
/// they are tried: the package version (`-3.11.248`, what yum installs), the image tag (`v3.11.248`), the release
/// (`3.11.248`; a bare `3.11` names no 3.11.z and is passed over).
pub const OPENSHIFT_TARGET_ALIASES: [&str; 3] = ["openshift_pkg_version", "openshift_image_tag", "openshift_release"];

/// A target found under an openshift-ansible name, and the aliases passed over (`openshift_release=3.11`).
pub type OpenShiftTarget = (Option<Setting<Option<TargetVersion>>>, Vec<String>);

/// The target from the first of [`OPENSHIFT_TARGET_ALIASES`] the hosts set (they must agree on it), and the
/// aliases passed over because they name only a minor release.
pub fn resolve_openshift_target(all_hosts: HostVarsRef<'_>, extra: &Vars) -> Result<OpenShiftTarget> {
    let mut passed_over = Vec::new();
    for alias in OPENSHIFT_TARGET_ALIASES {
        // openshift_pkg_version is written with yum's separator in front: `-3.11.248`.
        let parse_one = |text: &str| {
            let text = unquote(text.trim());
            TargetVersion::parse(text.strip_prefix('-').unwrap_or(text))
        };
        let parse = |text: &str| optional(text, parse_one);
        let minor_only = |text: &str| {
            let bare = unquote(text.trim()).trim_start_matches(['-', 'v']);
            bare.split('.').count() == 2
                && bare.split('.').all(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_digit()))
        };
        let found = all_hosts.iter().find_map(|(_, vars)| vars.get(alias)).or_else(|| extra.get(alias));
        if let Some(Value::String(text)) = found.map(|v| &v.value) {
            if minor_only(text) {
                passed_over.push(format!("{alias}={text}"));
                continue;
            }
        }
        let setting = run_wide("--target-version", None, (alias, alias), all_hosts, extra, parse, |v| {
            optional_value(v, parse_one, TargetVersion::from_value)
        })?;
        if let Some(setting) = setting.filter(|s| s.value.is_some()) {
            return Ok((Some(setting), passed_over));
        }
    }
    Ok((None, passed_over))
}

/// Refuses a target that names another release than a set `openshift_image_tag`: the image tag is what moves the
/// control plane's images in openshift-ansible, the target what the packages go to, so a disagreement would leave the
/// two parts of a host on different 3.11.z releases. A minor-only tag (`v3.11`) names no release and is passed over;
/// one that is not a version (`latest`) is not ours to judge unless it is the target itself.
pub fn check_openshift_image_tag(
    target: &Setting<Option<TargetVersion>>,
    all_hosts: HostVarsRef<'_>,
    extra: &Vars,
) -> Result<()> {
    const TAG: &str = "openshift_image_tag";
    let Some(wanted) = &target.value else { return Ok(()) };
    if target.source.as_deref() == Some(TAG) {
        return Ok(());
    }
    let release = |text: &str| -> Result<Option<TargetVersion>> {
        let bare = unquote(text.trim());
        Ok(TargetVersion::parse(bare).ok().filter(|_| bare.trim_start_matches('v').split('.').count() >= 3))
    };
    let tag = run_wide(TAG, None, (TAG, TAG), all_hosts, extra, release, |v| match v {
        Value::String(s) => release(s),
        _ => Ok(None),
    })?;
    let Some(tag) = tag else { return Ok(()) };
    let Some(named) = &tag.value else { return Ok(()) };
    let same = |a: &TargetVersion, b: &TargetVersion| (a.major, a.minor, a.patch) == (b.major, b.minor, b.patch);
    if same(wanted, named) {
        return Ok(());
    }
    let err = Error::input(format!(
        "the target {wanted} ({}) and {TAG} {named} ({}) name different releases",
        target.describe_origin(),
        tag.describe_origin()
    ))
    .hint(format!(
        "set them to the same release ({TAG} moves the control plane's images, the target the packages), or pass \
         --target-version / set upgrade_target_version to the release you mean and {TAG} to the same (v{}.{}.{})",
        wanted.major, wanted.minor, wanted.patch
    ));
    // `-e` is already named in the message; a file origin adds its place.
    match &tag.origin {
        Origin::ExtraVars(_) => Err(err),
        origin => Err(origin.locate(err)),
    }
}

/// The certificate expiry check of preflight: how many days ahead a certificate must still be valid, and whether
/// one expiring sooner stops the run (`false`: it is reported and the run goes on).
#[derive(Debug, Clone, PartialEq)]
pub struct CertificateExpiry {
    pub warning_days: Setting<u64>,
    pub fail_on_warn: Setting<bool>,
    /// `upgrade_certificate_expiry_unreadable`: what a certificate whose end date cannot be read does.
    pub unreadable: Setting<UnreadableExpiry>,
}

/// What preflight does with a certificate whose end date it cannot read: fail (the default: a date that cannot be
/// read is not a date far away) or warn and go on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UnreadableExpiry {
    Fail,
    Warn,
}

impl fmt::Display for UnreadableExpiry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            UnreadableExpiry::Fail => "fail",
            UnreadableExpiry::Warn => "warn",
        })
    }
}

/// `upgrade_certificate_expiry_warning_days` (alias `openshift_certificate_expiry_warning_days`) and
/// `upgrade_certificate_expiry_fail_on_warn` (alias `openshift_certificate_expiry_fail_on_warn`), over every host.
pub fn resolve_certificate_expiry(
    all_hosts: HostVarsRef<'_>,
    extra: &Vars,
    default_days: u64,
) -> Result<CertificateExpiry> {
    let days = |text: &str| {
        unquote(text.trim()).parse::<u64>().map_err(|_| {
            Error::input(format!("`{}` is not a whole number of days", text.trim()))
                .hint("write the number of days, e.g. 180")
        })
    };
    let warning_days = run_wide(
        "upgrade_certificate_expiry_warning_days",
        None,
        ("upgrade_certificate_expiry_warning_days", "openshift_certificate_expiry_warning_days"),
        all_hosts,
        extra,
        days,
        |v| match integral(v) {
            Some(n) if n >= 0 => Ok(n as u64),
            _ => days(&scalar_text(v)),
        },
    )?
    .unwrap_or_else(|| Setting::default(default_days));
    let truth = |text: &str| {
        crate::ansible_compat::boolean(&Value::String(unquote(text.trim()).to_string()))
            .ok_or_else(|| Error::input(format!("`{}` is not true or false", text.trim())).hint("write true or false"))
    };
    let fail_on_warn = run_wide(
        "upgrade_certificate_expiry_fail_on_warn",
        None,
        ("upgrade_certificate_expiry_fail_on_warn", "openshift_certificate_expiry_fail_on_warn"),
        all_hosts,
        extra,
        truth,
        |v| match v {
            Value::Bool(b) => Ok(*b),
            other => truth(&scalar_text(other)),
        },
    )?
    .unwrap_or_else(|| Setting::default(true));
    let fail_or_warn = |text: &str| match unquote(text.trim()) {
        "fail" => Ok(UnreadableExpiry::Fail),
        "warn" => Ok(UnreadableExpiry::Warn),
        other => Err(Error::input(format!("`{other}` is neither fail nor warn")).hint("write fail or warn")),
    };
    let unreadable = run_wide(
        "upgrade_certificate_expiry_unreadable",
        None,
        ("upgrade_certificate_expiry_unreadable", "upgrade_certificate_expiry_unreadable"),
        all_hosts,
        extra,
        fail_or_warn,
        |v| fail_or_warn(&scalar_text(v)),
    )?
    .unwrap_or_else(|| Setting::default(UnreadableExpiry::Fail));
    Ok(CertificateExpiry { warning_days, fail_on_warn, unreadable })
}

/// How a setting's value reads in a message.
pub(crate) trait Shown {
    fn shown(&self) -> String;
}

macro_rules! shown_by_display {
    ($($t:ty),*) => {$(
        impl Shown for $t {
            fn shown(&self) -> String {
                format!("`{self}`")
            }
        }
    )*};
}
shown_by_display!(
    Serial,
    MaxFailPercentage,
    DrainTimeout,
    Forks,
    LabelSelector,
    TargetVersion,
    UnreadableExpiry,
    u64,
    bool
);

impl<T: fmt::Display> Shown for Option<T> {
    fn shown(&self) -> String {
        match self {
            Some(v) => format!("`{v}`"),
            None => "nothing".into(),
        }
    }
}

/// An empty string means "not set" (an inventory may carry `upgrade_nodes_label=`).
pub(super) fn optional<T>(text: &str, parse: impl Fn(&str) -> Result<T>) -> Result<Option<T>> {
    if unquote(text.trim()).is_empty() { Ok(None) } else { parse(text).map(Some) }
}

/// An optional setting from a variable's value: null or blank text means unset.
pub(super) fn optional_value<T>(
    value: &Value,
    parse: impl Fn(&str) -> Result<T>,
    from_value: impl Fn(&Value) -> Result<T>,
) -> Result<Option<T>> {
    match value {
        Value::Null => Ok(None),
        Value::String(s) => optional(s, parse),
        other => from_value(other).map(Some),
    }
}

#[allow(clippy::too_many_arguments)]
pub(crate) fn run_wide<T: PartialEq + Shown>(
    flag: &str,
    flag_value: Option<&str>,
    (canonical, alias): (&str, &str),
    hosts: HostVarsRef<'_>,
    extra: &Vars,
    parse: impl Fn(&str) -> Result<T>,
    from_value: impl Fn(&Value) -> Result<T>,
) -> Result<Option<Setting<T>>> {
    if let Some(text) = flag_value {
        let value = parse(text).map_err(|e| Error { message: format!("{flag}: {}", e.message), ..e })?;
        return Ok(Some(Setting { value, source: Some(flag.to_string()), origin: Origin::Flag(flag.to_string()) }));
    }
    let read = |name: &str, var: &Var| -> Result<T> {
        if let Value::String(s) = &var.value {
            reject_template(name, s, &var.origin)?;
        }
        from_value(&var.value).map_err(|e| located(e, name, &var.origin))
    };
    // With no host to read from, `-e` still applies.
    if hosts.is_empty() {
        return match pick(extra, canonical, alias) {
            Some((name, var)) => Ok(Some(Setting {
                value: read(name, var)?,
                source: Some(name.to_string()),
                origin: var.origin.clone(),
            })),
            None => Ok(None),
        };
    }
    let mut first: Option<(&str, Option<Setting<T>>)> = None;
    let mut last_origin: Option<&Origin> = None;
    for (host, vars) in hosts {
        let found = pick(vars, canonical, alias);
        // Most hosts share one origin (`[all:vars]`, a group file): parse each origin once.
        if let (Some((_, var)), Some(prev)) = (found, last_origin) {
            if &var.origin == prev {
                continue;
            }
        }
        let setting = match found {
            Some((name, var)) => {
                last_origin = Some(&var.origin);
                Some(Setting { value: read(name, var)?, source: Some(name.to_string()), origin: var.origin.clone() })
            }
            None => None,
        };
        match &first {
            None => first = Some((host, setting)),
            Some((first_host, first_setting)) => {
                let same = match (first_setting, &setting) {
                    (Some(a), Some(b)) => a.value == b.value,
                    (None, None) => true,
                    _ => false,
                };
                if !same {
                    let show = |s: &Option<Setting<T>>| match s {
                        Some(s) => format!("{} ({})", s.value.shown(), s.describe_origin()),
                        None => "not set (the default)".to_string(),
                    };
                    let mut err = Error::input(format!(
                        "hosts disagree on {canonical}: {first_host} has {}, {host} has {}",
                        show(first_setting),
                        show(&setting)
                    ))
                    .hint(format!(
                        "set {canonical} once for the whole phase ([all:vars], group_vars/all.yml or the phase's \
                         group), or pass {flag}"
                    ));
                    if let Some(Setting {
                        origin: Origin::Inventory(l) | Origin::GroupVars(l) | Origin::HostVars(l),
                        ..
                    }) = &setting
                    {
                        err = err.at(l.clone());
                    }
                    return Err(err);
                }
            }
        }
    }
    Ok(first.and_then(|(_, s)| s))
}

/// The canonical variable, else the alias; an alias given with `-e` still beats a canonical name from the inventory.
pub(super) fn pick<'a>(vars: &'a Vars, canonical: &'a str, alias: &'a str) -> Option<(&'a str, &'a Var)> {
    let c = vars.get(canonical).map(|v| (canonical, v));
    let a = vars.get(alias).map(|v| (alias, v));
    match (c, a) {
        (Some(c), Some(a)) => {
            let c_extra = matches!(c.1.origin, Origin::ExtraVars(_));
            let a_extra = matches!(a.1.origin, Origin::ExtraVars(_));
            Some(if a_extra && !c_extra { a } else { c })
        }
        (c, a) => c.or(a),
    }
}

pub(super) fn reject_template(name: &str, text: &str, origin: &Origin) -> Result<()> {
    if text.contains("{{") || text.contains("{%") {
        return Err(located(
            Error::input(format!("{name} is templated (`{text}`); templated settings are not supported yet"))
                .hint(format!("write the value of {name} literally")),
            name,
            origin,
        ));
    }
    Ok(())
}

/// Puts the error at the variable's place when it was set in a file, and says which variable it was.
pub(crate) fn located(mut err: Error, name: &str, origin: &Origin) -> Error {
    if !err.message.contains(name) {
        err.message = format!("{name}: {}", err.message);
    }
    origin.locate(err)
}
