//! `package`, `apt`, `yum` and `dnf`: packages installed, upgraded or removed on the host through its own package
//! manager's command line, with ansible-core 2.19's arguments, decisions and result fields.
//!
//! `apt` follows ansible-core's `apt` module step by step (its `package_status` and `install`/`remove`): what is
//! installed comes from `dpkg-query`, what can be installed from `apt-cache policy` (apt's own candidate and version
//! table, so pins and priorities count as in python-apt), a `name=1.29.*` pin is a shell pattern matched against
//! those versions, and `apt-get` is run with the same options Ansible gives it. ansible-core drives python-apt on the
//! host (and installs it there when missing); here the host needs only apt itself.
//!
//! `yum` is `dnf` in ansible-core 2.19 (a redirect); both run `dnf` (or `yum` where there is no `dnf`) with `rpm -q`
//! telling what is installed. ansible-core's dnf module uses the dnf Python API: its `results` list every package of
//! the transaction, ours the named ones (as `rpm -q` sees them before and after).
//!
//! `package` picks one of them as Ansible's action does: `use`, else the `ansible_pkg_mgr` fact, else the first of
//! `apt-get`, `dnf`, `yum` found on the host.

use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{Map, Value, json};

use super::common::*;
use super::context::ModuleContext;
use crate::ansible_compat::{fnmatch, shell_quote};
use crate::connection::ConnectionError;
use crate::tasks::Vars;
use crate::tasks::model::Module;

/// apt's environment in ansible-core (`APT_ENV_VARS`): no prompts, untranslated messages.
const APT_ENV: &str =
    "DEBIAN_FRONTEND=noninteractive DEBIAN_PRIORITY=critical LANG=C LC_ALL=C LC_MESSAGES=C LC_CTYPE=C";
/// ansible-core's default `dpkg_options` (`force-confdef,force-confold`), expanded as `expand_dpkg_options` does.
const DPKG_OPTIONS: &str = r#"-o "Dpkg::Options::=--force-confdef" -o "Dpkg::Options::=--force-confold""#;

/// The package names: a list, or text split at commas as Ansible's `type='list'` does.
fn names(args: &Map<String, Value>, keys: &[&str]) -> Vec<String> {
    let Some(v) = keys.iter().find_map(|k| args.get(*k).filter(|v| !v.is_null())) else { return Vec::new() };
    match v {
        Value::Array(items) => items.iter().map(text).map(|s| s.trim().to_string()).collect(),
        other => text(other).split(',').map(|s| s.trim().to_string()).filter(|s| !s.is_empty()).collect(),
    }
}

fn bool_of(args: &Map<String, Value>, keys: &[&str]) -> Option<bool> {
    keys.iter().find_map(|k| args.get(*k).filter(|v| !v.is_null())).and_then(crate::ansible_compat::boolean)
}

struct Run {
    rc: i32,
    stdout: String,
    stderr: String,
}

async fn sh(ctx: &ModuleContext, command: &str) -> Result<Run, ConnectionError> {
    let out = ctx.exec(command, None).await?;
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    Ok(Run { rc: out.status, stdout: text(&out.stdout), stderr: text(&out.stderr) })
}

/// `package`: the host's package manager module, with the task's arguments but `use`.
pub(super) async fn package(ctx: &ModuleContext, args: &Map<String, Value>, vars: &Vars) -> ModuleResult {
    let fact = vars
        .get("ansible_pkg_mgr")
        .or_else(|| vars.get("ansible_facts").and_then(|f| f.get("pkg_mgr").cloned()))
        .and_then(|v| v.as_str().map(str::to_string));
    let manager = match arg_str(args, "use").filter(|u| u != "auto").or(fact) {
        Some(m) => m,
        None => {
            let found =
                sh(ctx, "for m in apt-get dnf yum; do command -v $m >/dev/null 2>&1 && { echo $m; break; }; done")
                    .await?;
            match found.stdout.trim() {
                "apt-get" => "apt".to_string(),
                "" => {
                    return Ok(fail_json(
                        "Could not detect which package manager to use. Try gathering facts or setting the \"use\" \
                         option.",
                    ));
                }
                other => other.to_string(),
            }
        }
    };
    let mut rest = args.clone();
    rest.remove("use");
    let module = match manager.as_str() {
        "apt" => Module::Apt,
        "dnf" | "yum" | "dnf5" => Module::Dnf,
        other => {
            return Ok(fail_json(format!(
                "package manager `{other}` is not one upgrade runs for `package` (apt, dnf, yum): name the module \
                 (`apt`, `dnf`) or set `use`"
            )));
        }
    };
    // The host's module checks the arguments `package` handed over, as in Ansible.
    let mut unsupported: Vec<&str> = rest.keys().map(String::as_str).filter(|k| !module.accepts(k)).collect();
    if !unsupported.is_empty() {
        unsupported.sort_unstable();
        return Ok(fail_json(format!(
            "Unsupported parameters for ({}) module: {}. `package` chose `{}` on this host.",
            module.name(),
            unsupported.join(", "),
            module.name()
        )));
    }
    match module {
        Module::Apt => apt(ctx, &rest).await,
        _ => dnf(ctx, &rest).await,
    }
}

/// One package of `apt-cache policy`: the installed version, apt's candidate and every version apt knows, highest
/// first (apt keeps them sorted).
#[derive(Default)]
struct AptPolicy {
    known: bool,
    installed: Option<String>,
    candidate: Option<String>,
    versions: Vec<String>,
}

fn parse_policy(text: &str) -> AptPolicy {
    let mut policy = AptPolicy::default();
    let mut in_table = false;
    let version = |v: &str| Some(v.trim().to_string()).filter(|v| v != "(none)");
    for line in text.lines() {
        let trimmed = line.trim();
        if let Some(v) = trimmed.strip_prefix("Installed:") {
            policy.known = true;
            policy.installed = version(v);
        } else if let Some(v) = trimmed.strip_prefix("Candidate:") {
            policy.candidate = version(v);
        } else if trimmed == "Version table:" {
            in_table = true;
        } else if in_table {
            // `     1.29.1-1.1 500` (a version and its priority) or `        500 http://... Packages` (a source).
            let words: Vec<&str> = trimmed.trim_start_matches("*** ").split_whitespace().collect();
            if words.len() == 2 && words[1].parse::<i64>().is_ok() {
                policy.versions.push(words[0].to_string());
            }
        }
    }
    policy
}

/// ansible-core's `package_split`: `name`, `name=version` (a shell pattern) or `name>=version`.
fn split_spec(spec: &str) -> (&str, Option<(&str, &str)>) {
    if let Some(i) = spec.find(">=") {
        if !spec[..i].contains('=') {
            return (&spec[..i], Some((">=", &spec[i + 2..])));
        }
    }
    match spec.split_once('=') {
        Some((name, version)) => (name, Some(("=", version))),
        None => (spec, None),
    }
}

/// What `package_status` answers: installed (any version), the installed version meets the spec, and the version
/// to install (`None`: none).
struct AptStatus {
    installed: bool,
    version_installed: bool,
    installable: Option<String>,
    /// Removed but its configuration files are still there (a purge would act on it).
    config_files: bool,
}

async fn apt_status(ctx: &ModuleContext, name: &str, pin: Option<(&str, &str)>) -> Result<AptStatus, ConnectionError> {
    let q = shell_quote(name);
    let run = sh(
        ctx,
        &format!(
            "{APT_ENV} dpkg-query -W -f='${{db:Status-Abbrev}}' {q} 2>/dev/null; echo; {APT_ENV} apt-cache policy {q}"
        ),
    )
    .await?;
    let (abbrev, policy_text) = run.stdout.split_once('\n').unwrap_or((run.stdout.as_str(), ""));
    let state = abbrev.chars().nth(1);
    let installed = state == Some('i');
    let policy = parse_policy(policy_text);
    let best = match pin {
        // The highest version matching the pin (Ansible pins it at 1001, above every other priority).
        Some(("=", pattern)) => policy.versions.iter().find(|v| fnmatch(v, pattern)).cloned(),
        Some((_, minimum)) => policy.candidate.clone().filter(|c| debian_at_least(c, minimum, &policy.versions)),
        None => policy.candidate.clone(),
    };
    let current = policy.installed.clone().filter(|_| installed);
    let (version_installed, installable) = match (&current, pin) {
        (None, _) => (false, best),
        (Some(v), Some(("=", pattern))) => (fnmatch(v, pattern), best.filter(|b| b != v && fnmatch(b, pattern))),
        (Some(v), Some((_, minimum))) => (debian_at_least(v, minimum, &policy.versions), best.filter(|b| b != v)),
        (Some(v), None) => (true, best.filter(|b| b != v)),
    };
    // A package apt does not know has nothing to install (Ansible: "No package matching").
    let installable = installable.filter(|_| policy.known);
    Ok(AptStatus { installed, version_installed, installable, config_files: state == Some('c') })
}

/// Whether `version` is at least `minimum`, by apt's own order of the versions it knows (highest first); a minimum
/// apt does not know is compared by `dpkg --compare-versions`' rules only where both are known, else not met.
fn debian_at_least(version: &str, minimum: &str, known: &[String]) -> bool {
    let pos = |v: &str| known.iter().position(|k| k == v);
    match (pos(version), pos(minimum)) {
        (Some(a), Some(b)) => a <= b,
        _ => version == minimum,
    }
}

/// The time of apt's last successful update, as ansible-core's `get_updated_cache_time` reads it (the
/// update-success stamp, else the lists directory): seconds since the epoch.
async fn apt_cache_time(ctx: &ModuleContext) -> Result<i64, ConnectionError> {
    let run = sh(
        ctx,
        "f=/var/lib/apt/periodic/update-success-stamp; [ -e $f ] || f=/var/lib/apt/lists; stat -c %Y $f 2>/dev/null",
    )
    .await?;
    Ok(run.stdout.trim().parse().unwrap_or(0))
}

pub(super) async fn apt(ctx: &ModuleContext, args: &Map<String, Value>) -> ModuleResult {
    let packages: Vec<String> = names(args, &["name", "pkg", "package"]).into_iter().filter(|p| p != "*").collect();
    let state = arg_str(args, "state").unwrap_or_else(|| "present".into());
    if !["present", "latest", "absent"].contains(&state.as_str()) {
        return Ok(fail_json(format!(
            "value of state must be one of: absent, latest, present, got: {state} (upgrade's apt does not run \
             build-dep or fixed)"
        )));
    }
    for p in &packages {
        if p.matches('=').count() > 1 {
            return Ok(fail_json(format!("invalid package spec: {p}")));
        }
        if split_spec(p).0.contains(['*', '?', '[']) {
            return Ok(fail_json(format!(
                "package name patterns are not supported by upgrade's apt ({p}): name the packages"
            )));
        }
    }
    let found = sh(ctx, "command -v apt-get").await?;
    if found.rc != 0 {
        return Ok(fail_json("Failed to find required executable \"apt-get\" in paths"));
    }
    let update_cache = bool_of(args, &["update_cache", "update-cache"]).unwrap_or(false);
    let valid_time = arg_int(args, "cache_valid_time").ok().flatten().unwrap_or(0);
    let lock_timeout = arg_int(args, "lock_timeout").ok().flatten().unwrap_or(60);
    let flag = |keys: &[&str]| bool_of(args, keys).unwrap_or(false);
    let allow_downgrade = flag(&["allow_downgrade", "allow-downgrade", "allow_downgrades", "allow-downgrades"]);
    let allow_held = flag(&["allow_change_held_packages"]);
    let purge = flag(&["purge"]);
    let autoremove = flag(&["autoremove"]);
    let only_upgrade = flag(&["only_upgrade"]);
    let force = flag(&["force"]);
    let install_recommends = bool_of(args, &["install_recommends", "install-recommends"]);
    let default_release = arg_str(args, "default_release").or_else(|| arg_str(args, "default-release"));
    let apt_get = format!("{APT_ENV} apt-get -o DPkg::Lock::Timeout={lock_timeout}");

    let mut cache_time = apt_cache_time(ctx).await?;
    let mut cache_updated = false;
    if update_cache || valid_time > 0 {
        let now = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs() as i64);
        if cache_time + valid_time < now {
            let retries = arg_int(args, "update_cache_retries").ok().flatten().unwrap_or(5).max(1);
            let max_delay = arg_int(args, "update_cache_retry_max_delay").ok().flatten().unwrap_or(12);
            let mut last = String::new();
            let mut ok = false;
            for attempt in 0..retries {
                let run = sh(ctx, &format!("{apt_get} update -q")).await?;
                // apt-get update exits 0 with `W:` lines for indexes it could not fetch; python-apt's update fails.
                let failed_fetch =
                    run.stderr.lines().any(|l| l.starts_with("E:") || l.starts_with("W: Failed to fetch"));
                if run.rc == 0 && !failed_fetch {
                    ok = true;
                    break;
                }
                last = run.stderr.trim().to_string();
                if attempt + 1 < retries {
                    tokio::time::sleep(std::time::Duration::from_secs((1u64 << attempt.min(6)).min(max_delay as u64)))
                        .await;
                }
            }
            if !ok {
                return Ok(fail_json(format!("Failed to update apt cache after {retries} retries: {last}")));
            }
            let after = apt_cache_time(ctx).await?;
            cache_updated = after != cache_time;
            cache_time = after;
        }
        if packages.is_empty() {
            let mut r = Map::new();
            r.insert("changed".into(), json!(cache_updated));
            r.insert("cache_updated".into(), json!(cache_updated));
            r.insert("cache_update_time".into(), json!(cache_time));
            return Ok(r);
        }
    }
    let with_cache = |mut r: Map<String, Value>| {
        r.insert("cache_updated".into(), json!(cache_updated));
        r.insert("cache_update_time".into(), json!(cache_time));
        r
    };
    if packages.is_empty() {
        return Ok(with_cache(obj(json!({"changed": false}))));
    }

    let mut chosen = Vec::new();
    let mut names_only = Vec::new();
    for spec in &packages {
        let (name, pin) = split_spec(spec);
        let status = apt_status(ctx, name, pin).await?;
        if state == "absent" {
            if status.version_installed || (status.config_files && purge) {
                chosen.push(shell_quote(spec));
            }
            continue;
        }
        names_only.push(name.to_string());
        if !status.installed && only_upgrade {
            continue;
        }
        if !status.version_installed && status.installable.is_none() {
            if !status.installed && status.installable.is_none() && !known_package(ctx, name).await? {
                return Ok(fail_json(format!("No package matching '{name}' is available")));
            }
            return Ok(fail_json(format!("no available installation candidate for {spec}")));
        }
        let upgrade = state == "latest";
        match &status.installable {
            Some(v) if !status.installed || upgrade || !status.version_installed => {
                chosen.push(shell_quote(&format!("{name}={v}")));
            }
            // ansible-core's legacy case: installed and matching, and a newer version matches the pattern too.
            Some(_) if status.version_installed && matches!(pin, Some(("=", _))) => {
                chosen.push(shell_quote(spec));
            }
            _ => {}
        }
    }

    if chosen.is_empty() {
        if state != "absent" {
            if let Err(failure) = mark_manual(ctx, &names_only).await? {
                return Ok(failure);
            }
        }
        return Ok(with_cache(obj(json!({"changed": false}))));
    }
    let mut cmd = apt_get.clone();
    if state == "absent" {
        cmd.push_str(&format!(" -q -y {DPKG_OPTIONS}"));
        for (on, opt) in [(purge, "--purge"), (force, "--force-yes"), (autoremove, "--auto-remove")] {
            if on {
                cmd.push_str(&format!(" {opt}"));
            }
        }
        if allow_held {
            cmd.push_str(" --allow-change-held-packages");
        }
        cmd.push_str(&format!(" remove {}", chosen.join(" ")));
    } else {
        cmd.push_str(&format!(" -y {DPKG_OPTIONS}"));
        for (on, opt) in [(only_upgrade, "--only-upgrade"), (force, "--force-yes"), (autoremove, "--auto-remove")] {
            if on {
                cmd.push_str(&format!(" {opt}"));
            }
        }
        cmd.push_str(&format!(" install {}", chosen.join(" ")));
        if let Some(release) = &default_release {
            cmd.push_str(&format!(" -t {}", shell_quote(release)));
        }
        match install_recommends {
            Some(false) => cmd.push_str(" -o APT::Install-Recommends=no"),
            Some(true) => cmd.push_str(" -o APT::Install-Recommends=yes"),
            None => {}
        }
        if allow_downgrade {
            cmd.push_str(" --allow-downgrades");
        }
        if allow_held {
            cmd.push_str(" --allow-change-held-packages");
        }
    }
    let run = sh(ctx, &cmd).await?;
    let shown = cmd.strip_prefix(&format!("{APT_ENV} ")).unwrap_or(&cmd);
    if run.rc != 0 {
        let mut r = fail_json(format!("'{shown}' failed: {}", run.stderr));
        r.insert("stdout".into(), json!(run.stdout));
        r.insert("stderr".into(), json!(run.stderr));
        r.insert("rc".into(), json!(run.rc));
        return Ok(r);
    }
    if state != "absent" {
        if let Err(failure) = mark_manual(ctx, &names_only).await? {
            return Ok(failure);
        }
    }
    Ok(with_cache(obj(json!({
        "changed": true,
        "stdout": run.stdout,
        "stderr": run.stderr,
        "stdout_lines": lines(&run.stdout),
        "stderr_lines": lines(&run.stderr),
        "diff": {},
    }))))
}

/// Whether apt knows a package of that name at all (`apt-cache show`), for Ansible's "No package matching".
async fn known_package(ctx: &ModuleContext, name: &str) -> Result<bool, ConnectionError> {
    Ok(sh(ctx, &format!("{APT_ENV} apt-cache show {} >/dev/null 2>&1", shell_quote(name))).await?.rc == 0)
}

/// `apt-mark manual` of the named packages, as ansible-core's `mark_installed_manually` does after an install.
async fn mark_manual(ctx: &ModuleContext, names: &[String]) -> Result<Result<(), Map<String, Value>>, ConnectionError> {
    if names.is_empty() {
        return Ok(Ok(()));
    }
    let quoted: Vec<String> = names.iter().map(|n| shell_quote(n)).collect();
    let cmd = format!("apt-mark manual {}", quoted.join(" "));
    let run = sh(ctx, &format!("{APT_ENV} {cmd}")).await?;
    if run.rc != 0 {
        let mut r = fail_json(format!("'{cmd}' failed: {}", run.stderr));
        r.insert("rc".into(), json!(run.rc));
        return Ok(Err(r));
    }
    Ok(Ok(()))
}

/// `name`, `name-version` or `name-version-release` (shell patterns allowed), split where the version starts: at
/// the first `-` followed by a digit.
fn rpm_split(spec: &str) -> (&str, Option<&str>) {
    let bytes = spec.as_bytes();
    for i in 0..bytes.len().saturating_sub(1) {
        if bytes[i] == b'-' && (bytes[i + 1].is_ascii_digit() || bytes[i + 1] == b'*') && i > 0 {
            return (&spec[..i], Some(&spec[i + 1..]));
        }
    }
    (spec, None)
}

/// rpm's `rpmvercmp`: versions compared segment by segment, digits as numbers, letters as text, `~` before all.
fn rpm_vercmp(a: &str, b: &str) -> std::cmp::Ordering {
    use std::cmp::Ordering::*;
    let (mut a, mut b) = (a.as_bytes(), b.as_bytes());
    loop {
        let skip = |s: &[u8]| s.iter().position(|c| c.is_ascii_alphanumeric() || *c == b'~').unwrap_or(s.len());
        a = &a[skip(a)..];
        b = &b[skip(b)..];
        match (a.first() == Some(&b'~'), b.first() == Some(&b'~')) {
            (true, true) => {
                a = &a[1..];
                b = &b[1..];
                continue;
            }
            (true, false) => return Less,
            (false, true) => return Greater,
            _ => {}
        }
        if a.is_empty() || b.is_empty() {
            return a.len().cmp(&b.len());
        }
        let numeric = a[0].is_ascii_digit();
        let run = |s: &[u8]| {
            s.iter()
                .position(|c| if numeric { !c.is_ascii_digit() } else { !c.is_ascii_alphabetic() })
                .unwrap_or(s.len())
        };
        let (la, lb) = (run(a), run(b));
        if lb == 0 {
            return if numeric { Greater } else { Less };
        }
        let (sa, sb) = (&a[..la], &b[..lb]);
        let order = if numeric {
            let trim = |s: &[u8]| s.iter().position(|c| *c != b'0').map_or(&s[s.len()..], |i| &s[i..]).to_vec();
            let (ta, tb) = (trim(sa), trim(sb));
            ta.len().cmp(&tb.len()).then(ta.cmp(&tb))
        } else {
            sa.cmp(sb)
        };
        if order != Equal {
            return order;
        }
        a = &a[la..];
        b = &b[lb..];
    }
}

/// The installed `NAME-VERSION-RELEASE.ARCH` of a package, if any.
async fn rpm_installed(ctx: &ModuleContext, name: &str) -> Result<Option<String>, ConnectionError> {
    let run = sh(ctx, &format!("rpm -q --qf '%{{NAME}}-%{{VERSION}}-%{{RELEASE}}.%{{ARCH}}\\n' {}", shell_quote(name)))
        .await?;
    Ok(run.stdout.lines().next().map(str::to_string).filter(|_| run.rc == 0))
}

/// `dnf` (and `yum`, its redirect in ansible-core 2.19).
pub(super) async fn dnf(ctx: &ModuleContext, args: &Map<String, Value>) -> ModuleResult {
    let specs = names(args, &["name", "pkg"]);
    let state = match arg_str(args, "state").as_deref() {
        None | Some("present") | Some("installed") => "present",
        Some("latest") => "latest",
        Some("absent") | Some("removed") => "absent",
        Some(other) => {
            return Ok(fail_json(format!(
                "value of state must be one of: absent, installed, latest, present, removed, got: {other}"
            )));
        }
    };
    let found = sh(ctx, "command -v dnf || command -v yum").await?;
    let Some(bin) = found.stdout.lines().next().map(str::to_string).filter(|_| found.rc == 0) else {
        return Ok(fail_json("Failed to find required executable \"dnf\" in paths"));
    };
    let mut base = format!("LANG=C LC_ALL=C {bin} -y");
    if bool_of(args, &["update_cache", "expire-cache"]).unwrap_or(false) {
        base.push_str(" --refresh");
    }
    if let Some(x) = arg_str(args, "disable_excludes") {
        base.push_str(&format!(" --disableexcludes={}", shell_quote(&x)));
    }
    for (key, opt) in [("enablerepo", "--enablerepo"), ("disablerepo", "--disablerepo")] {
        for repo in names(args, &[key]) {
            base.push_str(&format!(" {opt}={}", shell_quote(&repo)));
        }
    }
    let allow_downgrade = bool_of(args, &["allow_downgrade"]).unwrap_or(false);
    let done = |changed: bool, msg: &str, results: Vec<String>| {
        obj(json!({"changed": changed, "msg": msg, "results": results, "rc": 0}))
    };
    if specs.is_empty() {
        if base.contains("--refresh") {
            let run = sh(ctx, &format!("{base} makecache")).await?;
            if run.rc != 0 {
                return Ok(fail_json(format!("Failed to update the cache: {}", run.stderr.trim())));
            }
            return Ok(done(false, "Cache updated", Vec::new()));
        }
        return Ok(fail_json("missing required arguments: name"));
    }

    let mut install = Vec::new();
    let mut upgrade = Vec::new();
    let mut remove = Vec::new();
    let mut before = Vec::new();
    for spec in &specs {
        let (name, version) = rpm_split(spec);
        let current = rpm_installed(ctx, name).await?;
        before.push((name.to_string(), current.clone()));
        let matches = |nvra: &str| match version {
            None => true,
            Some(_) => {
                fnmatch(nvra, spec) || fnmatch(nvra, &format!("{spec}-*")) || fnmatch(nvra, &format!("{spec}.*"))
            }
        };
        match (state, &current) {
            ("absent", Some(nvra)) if matches(nvra) => remove.push(spec.clone()),
            ("absent", _) => {}
            ("present", Some(nvra)) if matches(nvra) => {}
            ("latest", Some(nvra)) if version.is_none() || matches(nvra) => upgrade.push(spec.clone()),
            (_, Some(nvra)) => {
                // Another version is installed: a newer one stays unless allow_downgrade (ansible-core's
                // `_is_newer_version_installed`).
                let installed_vr = nvra.strip_prefix(&format!("{name}-")).unwrap_or(nvra);
                let wanted = version.unwrap_or_default().trim_end_matches(['*', '-', '.']);
                if rpm_vercmp(installed_vr, wanted) == std::cmp::Ordering::Greater && !allow_downgrade {
                    continue;
                }
                install.push(spec.clone());
            }
            (_, None) => install.push(spec.clone()),
        }
    }
    let quoted = |list: &[String]| list.iter().map(|s| shell_quote(s)).collect::<Vec<_>>().join(" ");
    let mut steps = Vec::new();
    if !remove.is_empty() {
        steps.push(format!("{base} remove {}", quoted(&remove)));
    }
    if !install.is_empty() {
        steps.push(format!("{base} install {}", quoted(&install)));
    }
    if !upgrade.is_empty() {
        steps.push(format!("{base} upgrade {}", quoted(&upgrade)));
    }
    let mut changed = false;
    for step in &steps {
        let run = sh(ctx, step).await?;
        if run.rc != 0 {
            // ansible-core names a spec nothing matches `No package X available.`; other errors as dnf gives them.
            let mut failures: Vec<String> = Vec::new();
            for line in run.stdout.lines().chain(run.stderr.lines()) {
                let failure = if let Some(spec) = line.strip_prefix("No match for argument: ") {
                    format!("No package {spec} available.")
                } else if line.starts_with("Error: Unable to find a match") || !line.starts_with("Error") {
                    continue;
                } else {
                    line.to_string()
                };
                if !failures.contains(&failure) {
                    failures.push(failure);
                }
            }
            let what = if state == "absent" { "remove" } else { "install" };
            let mut r = fail_json(format!("Failed to {what} some of the specified packages"));
            r.insert("failures".into(), json!(failures));
            r.insert("results".into(), json!([]));
            r.insert("rc".into(), json!(1));
            r.insert("stdout".into(), json!(run.stdout));
            r.insert("stderr".into(), json!(run.stderr));
            return Ok(r);
        }
        changed |= !run.stdout.contains("Nothing to do");
    }
    if !changed {
        return Ok(done(false, "Nothing to do", Vec::new()));
    }
    let mut results = Vec::new();
    for (name, old) in before {
        let new = rpm_installed(ctx, &name).await?;
        match (&old, &new) {
            (Some(o), None) => results.push(format!("Removed: {o}")),
            (None, Some(n)) => results.push(format!("Installed: {n}")),
            (Some(o), Some(n)) if o != n => {
                results.push(format!("Installed: {n}"));
                results.push(format!("Removed: {o}"));
            }
            _ => {}
        }
    }
    Ok(done(true, "", results))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cmp::Ordering::*;

    #[test]
    fn apt_cache_policy_is_read_with_its_version_table() {
        let p = parse_policy(
            "kubeadm:\n  Installed: 1.28.5-1.1\n  Candidate: 1.29.1-1.1\n  Version table:\n     1.29.1-1.1 500\n        \
             500 http://pkgs.k8s.io/core:/stable:/v1.29/deb  Packages\n     1.29.0-1.1 500\n        500 http://x  \
             Packages\n *** 1.28.5-1.1 100\n        100 /var/lib/dpkg/status\n",
        );
        assert!(p.known);
        assert_eq!(p.installed.as_deref(), Some("1.28.5-1.1"));
        assert_eq!(p.candidate.as_deref(), Some("1.29.1-1.1"));
        assert_eq!(p.versions, ["1.29.1-1.1", "1.29.0-1.1", "1.28.5-1.1"]);
        let none = parse_policy("kubeadm:\n  Installed: (none)\n  Candidate: (none)\n  Version table:\n");
        assert_eq!((none.installed, none.candidate), (None, None));
        assert!(!parse_policy("").known);
    }

    #[test]
    fn specs_split_as_ansible_splits_them() {
        assert_eq!(split_spec("kubeadm=1.29.3-*"), ("kubeadm", Some(("=", "1.29.3-*"))));
        assert_eq!(split_spec("kubeadm>=1.29"), ("kubeadm", Some((">=", "1.29"))));
        assert_eq!(split_spec("kubeadm"), ("kubeadm", None));
        assert_eq!(rpm_split("kubeadm-1.29.3"), ("kubeadm", Some("1.29.3")));
        assert_eq!(rpm_split("kubernetes-cni-1.3.0-150500.1.1"), ("kubernetes-cni", Some("1.3.0-150500.1.1")));
        assert_eq!(rpm_split("python3-dnf"), ("python3-dnf", None));
    }

    #[test]
    fn rpm_versions_compare_as_rpmvercmp() {
        assert_eq!(rpm_vercmp("1.29.10-150500.1.1", "1.29.9"), Greater);
        assert_eq!(rpm_vercmp("1.29.3", "1.29.3"), Equal);
        assert_eq!(rpm_vercmp("1.29.3", "1.29.3-1"), Less);
        assert_eq!(rpm_vercmp("1.0~rc1", "1.0"), Less);
        assert_eq!(rpm_vercmp("1.0a", "1.0"), Greater);
        assert_eq!(rpm_vercmp("2.0", "10.0"), Less);
    }
}
