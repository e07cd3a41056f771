//! The import graph check: every `crate::` path in src/ (use lines, grouped ones included, and inline paths) goes to
//! the module's own layer or one below it. A backward edge fails the test with its file, line and edge.
//!
//! `KNOWN_BACKWARD` held the backward edges that existed when the check was written, accepted while they were
//! removed; a listed edge that no longer exists fails the test too, so the list could only shrink. It is empty now:
//! every backward edge fails.
//! Test code (`tests.rs` files and `#[cfg(test)] mod ... { }` blocks) may reach anything: it is not part of the
//! flow of data.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The intended layering, bottom (0) to top (5): a module may import only from its own layer or below. The longest
/// matching prefix decides (`plan::live` is above `plan`).
const LAYERS: &[(&str, u8)] = &[
    // L0, leaves: the words every layer speaks and helpers that know nothing of hosts or runs.
    ("vocabulary", 0),
    ("error", 0),
    ("yaml", 0),
    ("redact", 0),
    ("ansible_compat", 0),
    ("time_format", 0),
    ("console", 0),
    // Kubernetes label selectors as the API server evaluates them.
    ("label_selector", 0),
    // Ansible Vault: the format, the cryptography and the password sources; it knows nothing of inventories.
    ("vault", 0),
    // L1: what the operator wrote and how to reach a host, read and checked before anything runs.
    ("connection", 1),
    ("inventory", 1),
    ("cluster_groups", 1),
    ("settings", 1),
    ("flavor", 1),
    ("builtin_vars", 1),
    ("host_settings", 1),
    ("playbooks", 1),
    // L2: engines and records that run or describe one piece of work, not a whole upgrade.
    ("tasks", 2),
    ("events", 2),
    ("journal", 2),
    ("plan", 2),
    ("cluster", 2),
    ("drain_blockers", 2),
    // The drain simulation of the live plan: the scheduler's filters over the lists the plan read.
    ("drain_simulation", 2),
    // What makes the cluster valid between batches, read from the cluster's lists (the waiting is a phase's).
    ("cluster_validation", 2),
    // The table of what each minor removes and the pure reading of the evidence (the gate itself is a phase's).
    ("api_removals", 2),
    // Masking stays a leaf; finding the secrets renders the hosts' variables with the task engine's templar, and
    // masking the events sits on the event sink.
    ("redact::secrets", 2),
    ("redact::sink", 2),
    // The strategies as the inventory asks for them (the update graph, the node order rule, the nodes strategy's
    // settings) are part of the plan; carrying them out (below) is the upgrade's.
    ("strategy", 2),
    // L3: the upgrade itself and what it reports: phases in order, strategies, reporters, restore, unlock and status.
    ("phase", 3),
    ("executor", 3),
    ("strategy::blue_green", 3),
    ("strategy::final_soak", 3),
    ("strategy::rollback", 3),
    ("strategy::hops", 3),
    ("strategy::order", 3),
    ("strategy::versions", 3),
    ("report", 3),
    ("restore", 3),
    ("unlock", 3),
    ("pause", 3),
    ("status", 3),
    ("session", 3),
    ("plan::live", 3),
    ("plan::check_apis", 3),
    ("plan::artifacts", 3),
    // L4: the command line, the only place that knows the user's words for the domain's requests.
    ("commands", 4),
    ("cli", 4),
    // Top: lib.rs's run() wires the command line to the commands and picks the exit code.
    ("", 5),
];

/// Backward edges still accepted (source module -> imported module, both as named in `LAYERS`). The 20 edges of the
/// first version of this check are all gone; never add one: move the code to the layer it belongs to.
const KNOWN_BACKWARD: &[&str] = &[];

fn layer_entry(module: &str) -> Option<(&'static str, u8)> {
    LAYERS
        .iter()
        .filter(|(name, _)| {
            module == *name || (!name.is_empty() && module.strip_prefix(name).is_some_and(|r| r.starts_with("::")))
        })
        .max_by_key(|(name, _)| name.len())
        .copied()
}

/// The module path of a source file: `src/plan/live.rs` is `plan::live`, `src/plan/mod.rs` is `plan`, `src/lib.rs`
/// is the crate root (empty).
pub(crate) fn module_of(src: &Path, file: &Path) -> String {
    let relative = file.strip_prefix(src).unwrap_or(file).with_extension("");
    let mut parts: Vec<String> = relative.iter().map(|p| p.to_string_lossy().into_owned()).collect();
    if matches!(parts.last().map(String::as_str), Some("mod" | "lib" | "main")) {
        parts.pop();
    }
    parts.join("::")
}

pub(crate) fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("read {}: {e}", dir.display()))
        .map(|e| e.expect("a directory entry").path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Expands a use tree after `crate::` (`a::{b, c::{d, e}}`) into its paths (`a::b`, `a::c::d`, `a::c::e`).
pub(crate) fn expand_use_tree(tree: &str) -> Vec<String> {
    let renames = regex::Regex::new(r"\s+as\s+\w+").expect("pattern");
    let tree: String = renames.replace_all(tree, "").chars().filter(|c| !c.is_whitespace()).collect();
    let mut out = Vec::new();
    expand_into("", &tree, &mut out);
    out
}

fn expand_into(prefix: &str, tree: &str, out: &mut Vec<String>) {
    match tree.find('{') {
        None => {
            let path = tree.trim_end_matches("::");
            let joined = if prefix.is_empty() { path.to_string() } else { format!("{prefix}::{path}") };
            out.push(joined.trim_end_matches("::self").to_string());
        }
        Some(open) => {
            let head = tree[..open].trim_end_matches("::");
            let prefix = match (prefix.is_empty(), head.is_empty()) {
                (true, _) => head.to_string(),
                (false, true) => prefix.to_string(),
                (false, false) => format!("{prefix}::{head}"),
            };
            let inner = &tree[open + 1..tree.rfind('}').unwrap_or(tree.len())];
            let mut depth = 0;
            let mut start = 0;
            for (i, c) in inner.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        expand_part(&prefix, &inner[start..i], out);
                        start = i + 1;
                    }
                    _ => {}
                }
            }
            expand_part(&prefix, &inner[start..], out);
        }
    }
}

fn expand_part(prefix: &str, part: &str, out: &mut Vec<String>) {
    if part.is_empty() {
        return;
    }
    if part == "self" {
        out.push(prefix.to_string());
    } else {
        expand_into(prefix, part, out);
    }
}

/// One `crate::` path found in a file.
struct Import {
    line: usize,
    path: String,
}

/// The `crate::` paths of a source file outside its test code.
fn imports(text: &str) -> Vec<Import> {
    let inline = regex::Regex::new(r"(^|[^$\w])crate::([a-z_][a-z0-9_]*(::[a-z_][a-z0-9_]*)*)").expect("pattern");
    let use_start = regex::Regex::new(r"^\s*(pub(\([a-z]+\))?\s+)?use\s+crate::").expect("pattern");
    let lines = code_lines(text);
    let mut found = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let (number, line) = &lines[i];
        if use_start.is_match(line) {
            let mut statement = line.clone();
            while !statement.contains(';') && i + 1 < lines.len() {
                i += 1;
                statement.push_str(&lines[i].1);
            }
            let tree = statement.split("crate::").skip(1).collect::<Vec<_>>().join("crate::");
            let tree = tree.split(';').next().unwrap_or_default();
            for path in expand_use_tree(tree) {
                found.push(Import { line: *number, path });
            }
        } else {
            for capture in inline.captures_iter(line) {
                found.push(Import { line: *number, path: capture[2].to_string() });
            }
        }
        i += 1;
    }
    found
}

/// Lines outside `#[cfg(test)]` blocks, with `//` comments cut off.
pub(crate) fn code_lines(text: &str) -> Vec<(usize, String)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        if line.trim_start() == "#[cfg(test)]" && lines.get(i + 1).is_some_and(|next| next.trim_end().ends_with('{')) {
            // A test module: skip to its closing brace, which rustfmt puts alone at the module's indentation.
            let indent = &lines[i + 1][..lines[i + 1].len() - lines[i + 1].trim_start().len()];
            let close = format!("{indent}}}");
            i += 2;
            while i < lines.len() && lines[i].trim_end() != close {
                i += 1;
            }
            i += 1;
            continue;
        }
        let code = match line.find("//") {
            Some(at) if !line[..at].contains('"') => &line[..at],
            _ => line,
        };
        if !code.trim().is_empty() {
            out.push((i + 1, code.to_string()));
        }
        i += 1;
    }
    out
}

/// The files of src/ that are part of the flow of data, with their module path and the path to show: not the
/// unit-test files (`tests.rs`, `*_tests.rs`) nor `main.rs`.
pub(crate) fn source_files() -> Vec<(String, String, PathBuf)> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut out = Vec::new();
    for file in files {
        let module = module_of(&src, &file);
        let last = module.rsplit("::").next().unwrap_or_default();
        if last == "tests" || last.ends_with("_tests") || module == "main" {
            continue;
        }
        let shown = file.strip_prefix(Path::new(env!("CARGO_MANIFEST_DIR"))).unwrap_or(&file).display().to_string();
        out.push((module, shown, file));
    }
    out
}

/// Every backward edge in src/: "from -> to" with the places that make it.
fn backward_edges() -> (BTreeMap<String, Vec<String>>, Vec<String>) {
    let mut edges: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut unplaced = Vec::new();
    for (module, shown, file) in source_files() {
        let Some((from, from_layer)) = layer_entry(&module) else {
            unplaced.push(format!("{shown}: module {module} is in no layer"));
            continue;
        };
        let text = std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("read {shown}: {e}"));
        for import in imports(&text) {
            let Some((to, to_layer)) = layer_entry(&import.path) else {
                unplaced.push(format!("{shown}:{}: crate::{} is in no layer", import.line, import.path));
                continue;
            };
            if to_layer > from_layer {
                let from = if from.is_empty() { "lib" } else { from };
                edges.entry(format!("{from} -> {to}")).or_default().push(format!(
                    "{shown}:{}: {module} (L{from_layer}) imports crate::{} (L{to_layer})",
                    import.line, import.path
                ));
            }
        }
    }
    (edges, unplaced)
}

#[test]
fn no_module_imports_from_a_higher_layer_except_the_known_edges_which_still_exist() {
    let (edges, unplaced) = backward_edges();
    let mut problems = Vec::new();
    for place in &unplaced {
        problems.push(format!("{place}: add its module to LAYERS in tests/layers.rs"));
    }
    let known: BTreeSet<&str> = KNOWN_BACKWARD.iter().copied().collect();
    for (edge, places) in &edges {
        if !known.contains(edge.as_str()) {
            problems.push(format!("backward edge {edge}:\n    {}", places.join("\n    ")));
        }
    }
    for edge in &known {
        if !edges.contains_key(*edge) {
            problems.push(format!("{edge} is gone: remove it from KNOWN_BACKWARD in tests/layers.rs"));
        }
    }
    assert!(problems.is_empty(), "the layering is broken:\n{}", problems.join("\n"));
}

#[test]
fn use_trees_expand_to_every_path() {
    assert_eq!(
        expand_use_tree("phase::{Step, run::{self, Runner}, HostReport as R}"),
        ["phase::Step", "phase::run", "phase::run::Runner", "phase::HostReport"]
    );
    assert_eq!(expand_use_tree("{cli::Cli, events}"), ["cli::Cli", "events"]);
    assert_eq!(expand_use_tree("plan::live"), ["plan::live"]);
}

#[test]
fn imports_are_found_in_use_lines_and_inline_paths_but_not_in_tests_or_comments() {
    let text = "use crate::events::{\n    Event,\n    EventSink,\n};\npub(crate) use crate::plan::live::Live;\n\
                // crate::cli::Cli in a comment\nfn f() -> crate::report::Kind { $crate::x::y() }\n\
                #[cfg(test)]\nmod tests {\n    use crate::commands::x;\n}\nfn g() { crate::phase::run::go() }\n";
    let found: Vec<(usize, String)> = imports(text).into_iter().map(|i| (i.line, i.path)).collect();
    let expected = [
        (1, "events::Event"),
        (1, "events::EventSink"),
        (5, "plan::live::Live"),
        (7, "report"),
        (12, "phase::run::go"),
    ];
    assert_eq!(found, expected.map(|(l, p)| (l, p.to_string())));
}

#[test]
fn the_longest_prefix_decides_the_layer() {
    assert_eq!(layer_entry("plan::live::Live"), Some(("plan::live", 3)));
    assert_eq!(layer_entry("plan::Plan"), Some(("plan", 2)));
    assert_eq!(layer_entry("planner"), None);
    assert_eq!(layer_entry(""), Some(("", 5)));
    assert_eq!(layer_entry("tasks::engine"), Some(("tasks", 2)));
}
