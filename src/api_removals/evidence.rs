//! What the cluster and the hosts show of the table's rows, from the texts the reads printed: pure functions, texts
//! in, findings out. A text that cannot be understood is an error (the caller reports the source unreadable), never
//! an empty list.

use std::collections::BTreeMap;
use std::io::Read;

use serde_json::Value;

use super::table::{Minor, Row, What, minor_text, parse_minor};
use super::{Finding, Unreadable, Window};

/// The rows and the minors a run crosses.
pub(crate) struct Scope<'a> {
    pub rows: &'a [Row],
    pub minors: &'a [Minor],
    pub target: Minor,
    /// The run upgrades with `kubeadm upgrade apply|node` (the kubeadm flavour), which rewrites kubeadm-flags.env
    /// without the flags its minor drops (`kubeadm-drops-flag` rows) before that minor's kubelet starts.
    pub kubeadm_upgrade: bool,
}

const GUIDE: &str = "see the Deprecated API Migration Guide";

impl Scope<'_> {
    fn crossing(&self, minor: Minor) -> bool {
        self.minors.contains(&minor)
    }

    /// The rows of the crossed minors.
    fn crossed_rows(&self) -> impl Iterator<Item = &Row> {
        self.rows.iter().filter(|r| self.crossing(r.minor))
    }

    /// A finding for `row`: blocking when the run crosses its minor, said as later when it is past the target, none
    /// when it is already behind (the cluster no longer serves it).
    fn finding(&self, row: &Row, place: String, source: &str) -> Option<Finding> {
        let blocking = self.crossing(row.minor);
        (blocking || row.minor > self.target).then(|| Finding {
            minor: minor_text(row.minor),
            what: row.what.describe(),
            place,
            replacement: row.replacement.clone(),
            source: source.into(),
            reference: row.source.clone(),
            blocking,
        })
    }

    /// A call the API server saw in a version it says `removed` removes: blocking when the run crosses that minor,
    /// said when it is past the target; the replacement from the table where it has the row.
    fn requested(
        &self,
        removed: Minor,
        group_version: &str,
        resource: &str,
        what: String,
        place: String,
        source: &str,
    ) -> Option<Finding> {
        let blocking = self.crossing(removed);
        if !blocking && removed <= self.target {
            return None;
        }
        let row = self.api_row(group_version, |r, _| r == resource);
        Some(Finding {
            minor: minor_text(removed),
            what,
            place,
            replacement: row.map_or_else(|| GUIDE.to_string(), |r| r.replacement.clone()),
            source: source.into(),
            reference: row.map_or_else(|| "api-server".to_string(), |r| r.source.clone()),
            blocking,
        })
    }

    fn api_row(&self, group_version: &str, pick: impl Fn(&str, &str) -> bool) -> Option<&Row> {
        self.rows.iter().find(|r| match &r.what {
            What::Api { group_version: gv, resource, kind } => gv == group_version && pick(resource, kind),
            _ => false,
        })
    }

    /// `RESOURCE.GROUP` of every stored kind a crossed minor stops serving in some version, for the object reads
    /// (reviews are requests, never stored).
    pub(crate) fn resources_to_list(&self) -> Vec<String> {
        let mut out: Vec<String> = self
            .crossed_rows()
            .filter_map(|r| match &r.what {
                What::Api { group_version, resource, .. } if !resource.ends_with("reviews") => {
                    let group = group_version.split_once('/').map_or("", |(g, _)| g);
                    Some(if group.is_empty() { resource.clone() } else { format!("{resource}.{group}") })
                }
                _ => None,
            })
            .collect();
        out.sort();
        out.dedup();
        out
    }

    pub(crate) fn needs_runtime(&self) -> bool {
        self.crossed_rows().any(|r| matches!(&r.what, What::Host(h) if h == "cri-v1" || h.starts_with("containerd>=")))
    }
}

/// `name{a="b",c="d"} value`: the name, the labels and the value.
fn metric_line(line: &str) -> Option<(&str, BTreeMap<String, String>, f64)> {
    let (head, value) = line.rsplit_once(' ')?;
    let value: f64 = value.trim().parse().ok()?;
    let Some((name, labels)) = head.split_once('{') else { return Some((head.trim(), BTreeMap::new(), value)) };
    let labels = labels.trim_end().strip_suffix('}')?;
    let mut map = BTreeMap::new();
    let mut rest = labels;
    while !rest.is_empty() {
        let (key, after) = rest.split_once("=\"")?;
        let mut val = String::new();
        let mut chars = after.char_indices();
        let mut end = None;
        while let Some((i, c)) = chars.next() {
            match c {
                '\\' => val.extend(chars.next().map(|(_, c)| if c == 'n' { '\n' } else { c })),
                '"' => {
                    end = Some(i);
                    break;
                }
                c => val.push(c),
            }
        }
        let end = end?;
        map.insert(key.trim().trim_start_matches(',').to_string(), val);
        rest = after[end + 1..].trim_start_matches(',');
    }
    Some((name, map, value))
}

/// One master's API server's `/metrics` lines (as api_removals_cluster.yml keeps them): what it saw requested in a
/// deprecated version, and since when it counts. Err when the read failed or the page is no API server's.
pub(crate) fn metrics(master: &str, text: &str, scope: &Scope<'_>) -> Result<(Vec<Finding>, Window), String> {
    if let Some(line) = text.lines().find(|l| l.starts_with("upgrade-metrics-read-failed")) {
        return Err(format!("`get --raw /metrics` exited {}", line.trim_start_matches("upgrade-metrics-read-failed ")));
    }
    let mut started = None;
    let mut found = Vec::new();
    for line in text.lines() {
        let Some((name, labels, value)) = metric_line(line) else { continue };
        match name {
            "process_start_time_seconds" => started = Some(value),
            "apiserver_requested_deprecated_apis" if value > 0.0 => {
                let label = |k: &str| labels.get(k).cloned().unwrap_or_default();
                let Some(removed) = parse_minor(&label("removed_release")) else { continue };
                let (group, version, resource) = (label("group"), label("version"), label("resource"));
                let group_version = if group.is_empty() { version } else { format!("{group}/{version}") };
                let subresource = label("subresource");
                let what = if subresource.is_empty() {
                    format!("{group_version} {resource}")
                } else {
                    format!("{group_version} {resource}/{subresource}")
                };
                let place = format!("clients of {master}'s API server");
                found.extend(scope.requested(removed, &group_version, &resource, what, place, "metrics"));
            }
            _ => {}
        }
    }
    let Some(started) = started else {
        return Err("the page has no process_start_time_seconds: not a Kubernetes API server's /metrics".into());
    };
    let since = std::time::UNIX_EPOCH + std::time::Duration::from_secs_f64(started.max(0.0));
    Ok((found, Window { master: master.to_string(), since: crate::time_format::utc_timestamp(since) }))
}

/// The audit log's lines that carry `k8s.io/removed-release` (api_removals_host.yml): each deprecated call's client
/// (user agent and user), counted per API.
pub(crate) fn audit(master: &str, text: &str, scope: &Scope<'_>) -> Vec<Finding> {
    let mut calls: BTreeMap<(String, String, String, String), usize> = BTreeMap::new();
    for line in text.lines() {
        let Ok(event) = serde_json::from_str::<Value>(line) else { continue };
        let Some(removed) = event["annotations"]["k8s.io/removed-release"].as_str() else { continue };
        let object = &event["objectRef"];
        let text = |v: &Value| v.as_str().unwrap_or_default().to_string();
        let group = text(&object["apiGroup"]);
        let version = text(&object["apiVersion"]);
        let group_version = if group.is_empty() { version } else { format!("{group}/{version}") };
        let what = format!("{group_version} {}", text(&object["resource"]));
        let client = format!("{} as {}", text(&event["userAgent"]), text(&event["user"]["username"]));
        *calls.entry((removed.to_string(), what, client, group_version)).or_default() += 1;
    }
    calls
        .into_iter()
        .filter_map(|((removed, what, client, group_version), count)| {
            let resource = what.split_whitespace().nth(1).unwrap_or_default().to_string();
            let place = format!("client {client} ({count} calls in {master}'s audit log)");
            scope.requested(parse_minor(&removed)?, &group_version, &resource, what, place, "audit-log")
        })
        .collect()
}

fn items(list_json: &str) -> Result<Vec<Value>, String> {
    let list: Value = serde_json::from_str(list_json).map_err(|e| format!("not JSON: {e}"))?;
    match &list["items"] {
        Value::Array(items) => Ok(items.clone()),
        Value::Null => Ok(Vec::new()),
        _ => Err("`items` is not a list".into()),
    }
}

fn name_of(object: &Value) -> String {
    let meta = &object["metadata"];
    let name = meta["name"].as_str().unwrap_or("?");
    match meta["namespace"].as_str() {
        Some(ns) if !ns.is_empty() => format!("{ns}/{name}"),
        _ => name.to_string(),
    }
}

/// The objects of a list whose `kubectl.kubernetes.io/last-applied-configuration` names a removed apiVersion.
pub(crate) fn last_applied(list_json: &str, scope: &Scope<'_>) -> Result<Vec<Finding>, String> {
    let mut found = Vec::new();
    for object in items(list_json)? {
        let Some(applied) =
            object["metadata"]["annotations"]["kubectl.kubernetes.io/last-applied-configuration"].as_str()
        else {
            continue;
        };
        let Ok(applied) = serde_json::from_str::<Value>(applied) else { continue };
        let (Some(api_version), Some(kind)) = (applied["apiVersion"].as_str(), applied["kind"].as_str()) else {
            continue;
        };
        if let Some(row) = scope.api_row(api_version, |_, k| k == kind) {
            let place = format!("{} ({kind}, applied as {api_version})", name_of(&object));
            found.extend(scope.finding(row, place, "last-applied"));
        }
    }
    Ok(found)
}

/// The objects of one rendered manifest (YAML documents): apiVersion, kind and name of each.
fn manifest_objects(manifest: &str) -> Vec<(String, String, String)> {
    let mut out = Vec::new();
    for doc in manifest.split("\n---") {
        let mut api_version = None;
        let mut kind = None;
        let mut name = None;
        let mut in_metadata = false;
        for line in doc.lines() {
            let unquote = |v: &str| v.trim().trim_matches('"').trim_matches('\'').to_string();
            if let Some(v) = line.strip_prefix("apiVersion:") {
                api_version = Some(unquote(v));
            } else if let Some(v) = line.strip_prefix("kind:") {
                kind = Some(unquote(v));
            } else if line.starts_with("metadata:") {
                in_metadata = true;
            } else if in_metadata && !line.starts_with(' ') && !line.trim().is_empty() {
                in_metadata = false;
            } else if in_metadata && name.is_none() {
                if let Some(v) = line.strip_prefix("  name:") {
                    name = Some(unquote(v));
                }
            }
        }
        if let (Some(a), Some(k)) = (api_version, kind) {
            out.push((a, k, name.unwrap_or_default()));
        }
    }
    out
}

/// Helm 3's release payload: base64 (the Secret's data) of base64 of gzip of the release JSON.
fn helm_release(data: &str) -> Result<Value, String> {
    let once = data_encoding::BASE64.decode(data.trim().as_bytes()).map_err(|e| format!("data.release: {e}"))?;
    let twice = data_encoding::BASE64.decode(&once).map_err(|e| format!("the release payload: {e}"))?;
    let json = if twice.starts_with(&[0x1f, 0x8b]) {
        let mut out = Vec::new();
        flate2::read::GzDecoder::new(twice.as_slice())
            .read_to_end(&mut out)
            .map_err(|e| format!("the release payload's gzip: {e}"))?;
        out
    } else {
        twice
    };
    serde_json::from_slice(&json).map_err(|e| format!("the release JSON: {e}"))
}

/// The latest revision of each Helm release (`sh.helm.release.v1.NAME.vN` secrets): the objects its rendered
/// manifest holds in a removed version. A release that cannot be decoded is unreadable, by name.
pub(crate) fn helm(list_json: &str, scope: &Scope<'_>) -> Result<(Vec<Finding>, Vec<Unreadable>), String> {
    let mut latest: BTreeMap<(String, String), (u64, Value)> = BTreeMap::new();
    for secret in items(list_json)? {
        let labels = &secret["metadata"]["labels"];
        let namespace = secret["metadata"]["namespace"].as_str().unwrap_or_default().to_string();
        let name = labels["name"].as_str().unwrap_or_default().to_string();
        let version = labels["version"].as_str().and_then(|v| v.parse().ok()).unwrap_or(0);
        let key = (namespace, name);
        if latest.get(&key).is_none_or(|(v, _)| *v < version) {
            latest.insert(key, (version, secret));
        }
    }
    let mut found = Vec::new();
    let mut unreadable = Vec::new();
    for ((namespace, name), (revision, secret)) in latest {
        let place = format!("helm release {name} (namespace {namespace}, revision {revision})");
        let release = match helm_release(secret["data"]["release"].as_str().unwrap_or_default()) {
            Ok(release) => release,
            Err(why) => {
                unreadable.push(Unreadable { source: "helm".into(), place, why });
                continue;
            }
        };
        for (api_version, kind, object) in manifest_objects(release["manifest"].as_str().unwrap_or_default()) {
            if let Some(row) = scope.api_row(&api_version, |_, k| k == kind) {
                found.extend(scope.finding(row, format!("{place}: {kind} {object}"), "helm"));
            }
        }
    }
    Ok((found, unreadable))
}

/// CustomResourceDefinitions whose `status.storedVersions` hold a version they no longer serve: objects stored in it
/// stay unreadable until migrated. Counted against the first minor crossed (the run is where it would surface).
pub(crate) fn crds(list_json: &str, scope: &Scope<'_>) -> Result<Vec<Finding>, String> {
    let Some(first) = scope.minors.first() else { return Ok(Vec::new()) };
    let mut found = Vec::new();
    for crd in items(list_json)? {
        let served: Vec<&str> = crd["spec"]["versions"]
            .as_array()
            .map(|v| v.iter().filter(|v| v["served"] == true).filter_map(|v| v["name"].as_str()).collect())
            .unwrap_or_default();
        let stored = crd["status"]["storedVersions"].as_array().cloned().unwrap_or_default();
        for version in stored.iter().filter_map(Value::as_str).filter(|v| !served.contains(v)) {
            let name = name_of(&crd);
            found.push(Finding {
                minor: minor_text(*first),
                what: format!("CustomResourceDefinition {name} stores {version}, which it no longer serves"),
                place: format!("crd {name} status.storedVersions"),
                replacement: format!(
                    "migrate the stored objects to a served version (read and write each back, or \
                     kube-storage-version-migrator), then remove {version} from status.storedVersions"
                ),
                source: "crd".into(),
                reference: "crd-status".into(),
                blocking: true,
            });
        }
    }
    Ok(found)
}

/// The flags (`--name`) of a command line or an environment file, with their values where given as `--name=value`.
fn flags(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for line in text.lines().filter(|l| !l.trim_start().starts_with('#')) {
        for token in line.split(|c: char| c.is_whitespace() || c == '"' || c == '\'') {
            let token = token.trim_start_matches("- ");
            if let Some(flag) = token.strip_prefix("--").filter(|f| f.starts_with(|c: char| c.is_ascii_lowercase())) {
                let (name, value) = flag.split_once('=').unwrap_or((flag, ""));
                out.push((format!("--{name}"), value.to_string()));
            }
        }
    }
    out
}

/// Feature gates as set: each gate's name and its value (`None` when it is not true or false).
type GateSettings = Vec<(String, Option<bool>)>;

/// `A=true,B=false`: the gates named, with the value each is set to.
fn gates(value: &str) -> GateSettings {
    value
        .split(',')
        .filter_map(|g| g.split_once('=').map(|(n, v)| (n.trim().to_string(), super::table::parse_bool(v))))
        .collect()
}

/// What a gate set to a value can run into: the gate removed, or locked to the other value.
fn gate_rows(gate: String, value: Option<bool>, kubelet: bool) -> Vec<What> {
    let locked = value.map(|v| (gate.clone(), !v));
    if kubelet {
        let locked = locked.map(|(gate, locked_to)| What::KubeletGateLocked { gate, locked_to });
        std::iter::once(What::KubeletGate(gate)).chain(locked).collect()
    } else {
        let locked = locked.map(|(gate, locked_to)| What::ControlPlaneGateLocked { gate, locked_to });
        std::iter::once(What::ControlPlaneGate(gate)).chain(locked).collect()
    }
}

/// A KubeletConfiguration (YAML): its top-level fields, its feature gates with their values, and whether it says
/// failCgroupV1: false.
fn kubelet_config(text: &str) -> (Vec<String>, GateSettings, bool) {
    let mut fields = Vec::new();
    let mut feature_gates = Vec::new();
    let mut in_gates = false;
    let mut cgroup_v1_allowed = false;
    for line in text.lines().filter(|l| !l.trim_start().starts_with('#') && !l.trim().is_empty()) {
        let indented = line.starts_with(' ') || line.starts_with('\t');
        if !indented {
            let Some((key, value)) = line.split_once(':') else { continue };
            in_gates = key == "featureGates";
            if key == "failCgroupV1" && value.trim() == "false" {
                cgroup_v1_allowed = true;
            }
            fields.push(key.trim().to_string());
        } else if in_gates {
            if let Some((gate, value)) = line.trim().split_once(':') {
                let value = super::table::parse_bool(value.split(" #").next().unwrap_or_default());
                feature_gates.push((gate.trim().trim_matches('"').to_string(), value));
            }
        }
    }
    (fields, feature_gates, cgroup_v1_allowed)
}

/// What one host's files show (api_removals_host.yml's `=== upgrade-file KIND PATH` sections): flags, fields and
/// feature gates the crossed minors remove; whether its kubelet allows cgroup v1 (failCgroupV1: false); and notes
/// for what is there but not in the way (a flag kubeadm's upgrade drops from the file it wrote).
pub(crate) fn host_files(
    host: &str,
    text: &str,
    scope: &Scope<'_>,
) -> (Vec<Finding>, Vec<Unreadable>, bool, Vec<String>) {
    let mut sections: Vec<(String, String, String)> = Vec::new();
    let mut unreadable = Vec::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("=== upgrade-file ") {
            let (kind, path) = rest.split_once(' ').unwrap_or((rest, ""));
            sections.push((kind.to_string(), path.to_string(), String::new()));
        } else if let Some(rest) = line.strip_prefix("=== upgrade-unreadable ") {
            let (kind, path) = rest.split_once(' ').unwrap_or((rest, ""));
            unreadable.push(Unreadable {
                source: format!("host {kind} file"),
                place: format!("{host}:{path}"),
                why: "exists but cannot be read as this user (become: root?)".into(),
            });
        } else if let Some((_, _, body)) = sections.last_mut() {
            body.push_str(line);
            body.push('\n');
        }
    }
    let mut found = Vec::new();
    let mut notes = Vec::new();
    let mut cgroup_v1_allowed = false;
    let add = |found: &mut Vec<Finding>, wanted: &What, place: &str| {
        for row in scope.crossed_rows().filter(|r| &r.what == wanted) {
            found.extend(scope.finding(row, place.to_string(), "host"));
        }
    };
    for (kind, path, body) in &sections {
        let place = format!("{host}:{path}");
        match kind.as_str() {
            "flags" => {
                // The file kubeadm writes and its own upgrade rewrites (RemoveKubeletArgsFromFile);
                // /etc/default/kubelet and the like are the operator's, and kubeadm leaves them as they are.
                let kubeadm_file = scope.kubeadm_upgrade && path.ends_with("/kubeadm-flags.env");
                for (flag, value) in flags(body) {
                    if flag == "--feature-gates" {
                        for (gate, set) in gates(&value) {
                            gate_rows(gate, set, true).iter().for_each(|w| add(&mut found, w, &place));
                        }
                    }
                    let dropped = What::KubeadmDropsFlag(flag.clone());
                    if let Some(row) = scope.crossed_rows().find(|r| kubeadm_file && r.what == dropped) {
                        let minor = minor_text(row.minor);
                        notes.push(format!(
                            "{place}: kubelet flag {flag}, which {minor} removes, is dropped from that file by \
                             `kubeadm upgrade` of {minor} itself, before its kubelet starts ({})",
                            row.source
                        ));
                        continue;
                    }
                    add(&mut found, &What::KubeletFlag(flag), &place);
                }
            }
            "config" => {
                let (fields, feature_gates, allowed) = kubelet_config(body);
                cgroup_v1_allowed |= allowed;
                fields.into_iter().for_each(|f| add(&mut found, &What::KubeletField(f), &place));
                for (gate, set) in feature_gates {
                    gate_rows(gate, set, true).iter().for_each(|w| add(&mut found, w, &place));
                }
            }
            _ => {
                let file = path.rsplit('/').next().unwrap_or_default();
                let component = file.split('.').next().unwrap_or_default();
                found.extend(component_flags(component, &flags(body), &place, "host", scope));
            }
        }
    }
    found.dedup();
    (found, unreadable, cgroup_v1_allowed, notes)
}

/// What a control-plane component's flags (`--name`, value) hold that the crossed minors remove: the flags
/// themselves, the gates of `--feature-gates`, the plugins of `--enable-admission-plugins`.
fn component_flags(
    component: &str,
    flags: &[(String, String)],
    place: &str,
    source: &str,
    scope: &Scope<'_>,
) -> Vec<Finding> {
    let mut wanted = Vec::new();
    for (flag, value) in flags {
        match flag.as_str() {
            "--feature-gates" => {
                wanted.extend(gates(value).into_iter().flat_map(|(gate, set)| gate_rows(gate, set, false)))
            }
            "--enable-admission-plugins" => {
                wanted.extend(value.split(',').map(|p| What::AdmissionPlugin(p.trim().to_string())))
            }
            _ => {}
        }
        wanted.push(What::ComponentFlag { component: component.to_string(), flag: flag.clone() });
    }
    wanted
        .iter()
        .flat_map(|what| scope.crossed_rows().filter(move |r| &r.what == what))
        .filter_map(|row| scope.finding(row, place.to_string(), source))
        .collect()
}

/// kubeadm's ClusterConfiguration (`-n kube-system get configmap kubeadm-config -o json`): the `extraArgs` of
/// `apiServer`, `controllerManager` and `scheduler` (v1beta3's map of name to value, v1beta4's list of
/// `{name, value}`), which `kubeadm upgrade apply` writes into the new static pod manifests, and kubeadm's own
/// `featureGates`. An answer that is not that ConfigMap, or a configuration that is not YAML, is an error.
pub(crate) fn kubeadm_config(json: &str, scope: &Scope<'_>) -> Result<Vec<Finding>, String> {
    let value: Value = serde_json::from_str(json).map_err(|e| format!("not JSON ({e})"))?;
    let text = value
        .pointer("/data/ClusterConfiguration")
        .and_then(Value::as_str)
        .ok_or("the ConfigMap has no data.ClusterConfiguration")?;
    let config = crate::yaml::parse(text, std::path::Path::new("kubeadm-config ClusterConfiguration"))
        .map_err(|e| format!("its ClusterConfiguration is not YAML ({e})"))?
        .map_or(Value::Null, |node| node.to_json());
    let scalar = |v: &Value| match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    };
    let mut found = Vec::new();
    for (key, component) in [
        ("apiServer", "kube-apiserver"),
        ("controllerManager", "kube-controller-manager"),
        ("scheduler", "kube-scheduler"),
    ] {
        let args: Vec<(String, String)> = match config.get(key).and_then(|c| c.get("extraArgs")) {
            None | Some(Value::Null) => continue,
            Some(Value::Object(map)) => map.iter().map(|(name, value)| (name.clone(), scalar(value))).collect(),
            Some(Value::Array(list)) => list
                .iter()
                .map(|arg| match arg.get("name").and_then(Value::as_str) {
                    Some(name) => Ok((name.to_string(), arg.get("value").map(scalar).unwrap_or_default())),
                    None => Err(format!("{key}.extraArgs has an entry without a name: {arg}")),
                })
                .collect::<Result<_, _>>()?,
            Some(other) => return Err(format!("{key}.extraArgs is neither a map nor a list: {other}")),
        };
        let flags: Vec<(String, String)> =
            args.into_iter().map(|(name, value)| (format!("--{}", name.trim_start_matches('-')), value)).collect();
        let place = format!("kubeadm-config ClusterConfiguration {key}.extraArgs");
        found.extend(component_flags(component, &flags, &place, "kubeadm-config", scope));
    }
    match config.get("featureGates") {
        None | Some(Value::Null) => {}
        Some(Value::Object(gates)) => {
            let place = "kubeadm-config ClusterConfiguration featureGates";
            for gate in gates.keys() {
                let wanted = What::KubeadmGate(gate.clone());
                for row in scope.crossed_rows().filter(|r| r.what == wanted) {
                    found.extend(scope.finding(row, place.to_string(), "kubeadm-config"));
                }
            }
        }
        Some(other) => return Err(format!("featureGates is not a map: {other}")),
    }
    Ok(found)
}

/// `1.7.13`, `v2.0.1`, `1.7.13-1`: (major, minor).
fn release(text: &str) -> Option<(u64, u64)> {
    parse_minor(text.trim())
}

/// One host's system (the cgroup filesystem, /proc/swaps) and, when read, its runtime (`crictl version`), against
/// the crossed minors' host requirements. Swap is said (a note), not weighed: no minor changed what it requires.
pub(crate) fn host_system(
    host: &str,
    system: Result<&str, String>,
    runtime: Option<Result<&str, String>>,
    cgroup_v1_allowed: bool,
    scope: &Scope<'_>,
) -> (Vec<Finding>, Vec<Unreadable>, Vec<String>) {
    let mut found = Vec::new();
    let mut unreadable = Vec::new();
    let mut notes = Vec::new();
    let requirement = |name: &str| scope.crossed_rows().find(|r| matches!(&r.what, What::Host(h) if h == name));
    match system {
        Ok(text) => {
            let fs = text.lines().next().unwrap_or_default().trim();
            let swaps = text.split("=== swaps").nth(1).map(|s| s.lines().filter(|l| !l.trim().is_empty()).count());
            if let Some(devices) = swaps.filter(|n| *n > 1) {
                notes.push(format!("{host}: swap is on ({} device(s))", devices - 1));
            }
            if let Some(row) = requirement("cgroup-v2") {
                match fs {
                    "cgroup2fs" => {}
                    "tmpfs" if cgroup_v1_allowed => notes
                        .push(format!("{host}: cgroup v1, allowed by the kubelet configuration's failCgroupV1: false")),
                    "tmpfs" => found.extend(scope.finding(row, format!("{host}: cgroup v1"), "host")),
                    other => unreadable.push(Unreadable {
                        source: "cgroup version".into(),
                        place: host.into(),
                        why: format!("`stat -fc %T /sys/fs/cgroup/` printed `{other}`"),
                    }),
                }
            }
        }
        Err(why) => unreadable.push(Unreadable { source: "cgroup version and swap".into(), place: host.into(), why }),
    }
    match runtime {
        None => {}
        Some(Err(why)) => unreadable.push(Unreadable { source: "container runtime".into(), place: host.into(), why }),
        Some(Ok(text)) => {
            let field = |name: &str| {
                text.lines()
                    .find_map(|l| l.trim().strip_prefix(name).and_then(|r| r.trim().strip_prefix(':')))
                    .map(|v| v.trim().to_string())
            };
            let (name, version, api) = (field("RuntimeName"), field("RuntimeVersion"), field("RuntimeApiVersion"));
            let (Some(name), Some(version)) = (name, version) else {
                unreadable.push(Unreadable {
                    source: "container runtime".into(),
                    place: host.into(),
                    why: "its version command printed no RuntimeName and RuntimeVersion (crictl version's form)".into(),
                });
                return (found, unreadable, notes);
            };
            let place = format!("{host}: {name} {version} (CRI {})", api.clone().unwrap_or_else(|| "?".into()));
            if let Some(row) = requirement("cri-v1") {
                if api.as_deref() != Some("v1") {
                    found.extend(scope.finding(row, place.clone(), "host"));
                }
                if name == "containerd" && release(&version).is_some_and(|v| v < (1, 6)) {
                    found.extend(scope.finding(row, place.clone(), "host"));
                }
            }
            for row in scope.crossed_rows() {
                let What::Host(h) = &row.what else { continue };
                let Some(minimum) = h.strip_prefix("containerd>=").and_then(release) else { continue };
                if name == "containerd" && release(&version).is_some_and(|v| v < minimum) {
                    found.extend(scope.finding(row, place.clone(), "host"));
                }
            }
            found.dedup();
        }
    }
    (found, unreadable, notes)
}

#[cfg(test)]
mod tests;
