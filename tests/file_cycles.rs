//! The file graph check: no import cycle between files of src/. Layers (tests/layers.rs) order the modules; inside
//! a layer, data must flow one way too, so no file may reach, through the names it uses, a file that reaches it back.
//!
//! An edge goes from the file that names something to the file that defines it: `crate::`, `super::` and `self::`
//! paths, paths through a child module or through a name brought in by `use`, in use lines and inline. A name
//! passed on by a `pub use` (a module's facade) is followed to the file that defines it, and the facade's `pub use`
//! line is no edge of its own (a `pub use` of anything but a child module is); a private `use` is. `use super::*` is an edge to the parent file. Test code
//! (`tests.rs` files and `#[cfg(test)]` blocks) may reach anything: it is not part of the flow of data.

use std::collections::{BTreeMap, BTreeSet};

use super::layers::{code_lines, expand_use_tree, source_files};

/// One source file: its defined top-level items, its `use` aliases, its globs, and its code lines without tests.
struct SourceFile {
    shown: String,
    items: BTreeSet<String>,
    /// name in scope -> (full path as written, line, re-exported?)
    aliases: BTreeMap<String, (String, usize, bool)>,
    /// `use path::*` bases, with their line.
    globs: Vec<(String, usize)>,
    /// Code lines (1-based number, text) outside test blocks and comments.
    code: Vec<(usize, String)>,
    /// `use` statements: (line, paths after expansion, alias names, re-exported?).
    uses: Vec<(usize, Vec<(String, String)>, bool)>,
}

/// Splits `a::b::c as d` into the path and the name it brings into scope.
fn path_and_name(expanded: &str, original_tree: &str) -> (String, String) {
    let last = expanded.rsplit("::").next().unwrap_or(expanded).to_string();
    let renamed = regex::Regex::new(&format!(r"\b{}\s+as\s+(\w+)", regex::escape(&last))).expect("pattern");
    let name = renamed.captures(original_tree).map(|c| c[1].to_string()).unwrap_or(last);
    (expanded.to_string(), name)
}

fn parse(shown: String, text: &str) -> SourceFile {
    let item = regex::Regex::new(
        r"^(pub(\([a-z ]+\))?\s+)?(async\s+)?(unsafe\s+)?(const\s+)?(fn|struct|enum|trait|type|const|static|mod|union)\s+([A-Za-z_]\w*)",
    )
    .expect("pattern");
    let macro_def = regex::Regex::new(r"^macro_rules!\s*([A-Za-z_]\w*)").expect("pattern");
    let use_start = regex::Regex::new(r"^\s*(pub(\([a-z ]+\))?\s+)?use\s+").expect("pattern");
    let code = code_lines(text);
    let mut file = SourceFile {
        shown,
        items: BTreeSet::new(),
        aliases: BTreeMap::new(),
        globs: Vec::new(),
        code: Vec::new(),
        uses: Vec::new(),
    };
    let mut i = 0;
    while i < code.len() {
        let (number, line) = &code[i];
        if let Some(c) = item.captures(line) {
            file.items.insert(c[7].to_string());
        }
        if let Some(c) = macro_def.captures(line) {
            file.items.insert(c[1].to_string());
        }
        if let Some(start) = use_start.find(line) {
            let public = start.as_str().trim_start().starts_with("pub");
            let mut statement = line[start.end()..].to_string();
            while !statement.contains(';') && i + 1 < code.len() {
                i += 1;
                statement.push_str(&code[i].1);
            }
            let tree = statement.split(';').next().unwrap_or_default().trim().trim_start_matches("::").to_string();
            let mut paths = Vec::new();
            for expanded in expand_use_tree(&tree) {
                if let Some(base) = expanded.strip_suffix("::*") {
                    file.globs.push((base.to_string(), *number));
                    paths.push((expanded.clone(), "*".to_string()));
                    continue;
                }
                let (path, name) = path_and_name(&expanded, &tree);
                if name != "_" {
                    file.aliases.insert(name.clone(), (path.clone(), *number, public));
                }
                paths.push((path, name));
            }
            file.uses.push((*number, paths, public));
        } else {
            file.code.push((*number, line.clone()));
        }
        i += 1;
    }
    file
}

struct Graph {
    /// module path -> file
    modules: BTreeMap<String, SourceFile>,
}

fn parent(module: &str) -> String {
    module.rsplit_once("::").map(|(p, _)| p.to_string()).unwrap_or_default()
}

fn child(module: &str, name: &str) -> String {
    if module.is_empty() { name.to_string() } else { format!("{module}::{name}") }
}

impl Graph {
    /// The module a path's first segment names, seen from `from`, and the segments left; None for paths outside
    /// the crate (std, other crates, the file's own items).
    fn start<'a>(&self, from: &str, segments: &'a [&'a str], depth: usize) -> Option<(String, Vec<&'a str>)> {
        let (first, rest) = segments.split_first()?;
        match *first {
            "crate" => Some((String::new(), rest.to_vec())),
            "self" => Some((from.to_string(), rest.to_vec())),
            "super" => {
                let mut module = parent(from);
                let mut rest = rest;
                while rest.first() == Some(&"super") {
                    module = parent(&module);
                    rest = &rest[1..];
                }
                Some((module, rest.to_vec()))
            }
            name if self.modules.contains_key(&child(from, name)) => Some((child(from, name), rest.to_vec())),
            name => {
                // A name brought in by `use`: resolve what it stands for, then go on from there.
                let (path, _, _) = self.modules.get(from)?.aliases.get(name)?;
                if depth > 8 {
                    return None;
                }
                let target = self.resolve(from, path, depth + 1)?;
                match target {
                    Resolved::Module(module) => Some((module, rest.to_vec())),
                    Resolved::Item(_) => None,
                }
            }
        }
    }

    /// The file (its module) that defines what `path` names, seen from module `from`.
    fn resolve(&self, from: &str, path: &str, depth: usize) -> Option<Resolved> {
        let segments: Vec<&str> = path.split("::").filter(|s| !s.is_empty()).collect();
        let (mut module, rest) = self.start(from, &segments, depth)?;
        for (index, segment) in rest.iter().enumerate() {
            let next = child(&module, segment);
            if self.modules.contains_key(&next) {
                module = next;
                continue;
            }
            let file = self.modules.get(&module)?;
            if file.items.contains(*segment) {
                return Some(Resolved::Item(module));
            }
            if depth < 8 {
                // Passed on by a `use` in that module: follow it to where it is defined.
                if let Some((through, _, _)) = file.aliases.get(*segment) {
                    let remainder = rest[index + 1..].join("::");
                    let target = self.resolve(&module, through, depth + 1)?;
                    return match (target, remainder.is_empty()) {
                        (Resolved::Module(m), false) => self.resolve(&m, &format!("self::{remainder}"), depth + 1),
                        (target, _) => Some(target),
                    };
                }
                for (glob, _) in &file.globs {
                    if let Some(Resolved::Module(base)) = self.resolve(&module, glob, depth + 1) {
                        if let Some(found) = self.resolve(&base, &format!("self::{segment}"), depth + 1) {
                            return Some(found);
                        }
                    }
                }
            }
            // An enum variant, an associated item or a macro: the module's own file.
            return Some(Resolved::Item(module));
        }
        Some(Resolved::Module(module))
    }
}

#[derive(Debug, Clone)]
enum Resolved {
    Module(String),
    Item(String),
}

impl Resolved {
    fn module(&self) -> &str {
        match self {
            Resolved::Module(m) | Resolved::Item(m) => m,
        }
    }
}

/// file -> file -> the places and names that tie them.
type Edges = BTreeMap<String, BTreeMap<String, Vec<String>>>;

fn file_edges() -> Edges {
    let mut modules = BTreeMap::new();
    for (module, shown, file) in source_files() {
        let text = std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("read {shown}: {e}"));
        modules.insert(module, parse(shown, &text));
    }
    let graph = Graph { modules };
    let inline = regex::Regex::new(r"(^|[^$\w:])((crate|super|self|[a-z_][a-z0-9_]*)(::[A-Za-z_][A-Za-z0-9_]*)+)")
        .expect("pattern");
    let mut edges: Edges = BTreeMap::new();
    for (module, file) in &graph.modules {
        let mut add = |line: usize, path: &str, target: Option<Resolved>| {
            let Some(target) = target else { return };
            let to = target.module();
            if to == module {
                return;
            }
            let Some(to_file) = graph.modules.get(to) else { return };
            edges
                .entry(file.shown.clone())
                .or_default()
                .entry(to_file.shown.clone())
                .or_default()
                .push(format!("{}:{line}: {path}", file.shown));
        };
        for (line, paths, public) in &file.uses {
            for (path, _) in paths {
                let first = path.trim_start_matches("self::").split("::").next().unwrap_or_default();
                if *public && graph.modules.contains_key(&child(module, first)) {
                    // A facade passes its children's names on; whoever uses them is tied to the file that defines
                    // them, not to the facade.
                    continue;
                }
                let path = path.strip_suffix("::*").unwrap_or(path);
                add(*line, path, graph.resolve(module, path, 0));
            }
        }
        for (line, text) in &file.code {
            let text = strip_strings(text);
            for capture in inline.captures_iter(&text) {
                let path = &capture[2];
                add(*line, path, graph.resolve(module, path, 0));
            }
        }
    }
    edges
}

/// A line with its string literals emptied, so that a path inside a message ties nothing.
fn strip_strings(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut in_string = false;
    let mut escaped = false;
    for c in line.chars() {
        if in_string {
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                in_string = false;
                out.push(c);
            }
            continue;
        }
        if c == '"' {
            in_string = true;
        }
        out.push(c);
    }
    out
}

/// The strongly connected components of more than one file (Tarjan's algorithm).
fn knots(edges: &Edges) -> Vec<Vec<String>> {
    struct State<'a> {
        edges: &'a Edges,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: BTreeSet<&'a str>,
        out: Vec<Vec<String>>,
    }
    fn visit<'a>(state: &mut State<'a>, node: &'a str) {
        let n = state.index.len();
        state.index.insert(node, n);
        state.low.insert(node, n);
        state.stack.push(node);
        state.on_stack.insert(node);
        let targets: Vec<&'a str> =
            state.edges.get(node).map(|m| m.keys().map(String::as_str).collect()).unwrap_or_default();
        for next in targets {
            if !state.index.contains_key(next) {
                visit(state, next);
                let low = state.low[node].min(state.low[next]);
                state.low.insert(node, low);
            } else if state.on_stack.contains(next) {
                let low = state.low[node].min(state.index[next]);
                state.low.insert(node, low);
            }
        }
        if state.low[node] == state.index[node] {
            let mut component = Vec::new();
            while let Some(top) = state.stack.pop() {
                state.on_stack.remove(top);
                component.push(top.to_string());
                if top == node {
                    break;
                }
            }
            if component.len() > 1 {
                component.sort();
                state.out.push(component);
            }
        }
    }
    let mut state = State {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        out: Vec::new(),
    };
    for node in edges.keys() {
        if !state.index.contains_key(node.as_str()) {
            visit(&mut state, node);
        }
    }
    state.out.sort();
    state.out
}

#[test]
fn no_two_files_of_src_reach_each_other_through_their_imports() {
    let edges = file_edges();
    let mut problems = Vec::new();
    for knot in knots(&edges) {
        let members: BTreeSet<&str> = knot.iter().map(String::as_str).collect();
        let mut ties = Vec::new();
        for from in &knot {
            for (to, places) in edges.get(from).into_iter().flatten() {
                if members.contains(to.as_str()) {
                    ties.push(format!("  {from} -> {to}:\n      {}", places.join("\n      ")));
                }
            }
        }
        problems.push(format!("import cycle between {}:\n{}", knot.join(", "), ties.join("\n")));
    }
    assert!(
        problems.is_empty(),
        "files of src/ import each other (move what both need into a file below both):\n{}",
        problems.join("\n")
    );
}

#[test]
fn a_name_is_tied_to_the_file_that_defines_it_through_facades() {
    let file = |text: &str| parse("x".into(), text);
    let mut modules = BTreeMap::new();
    modules.insert("phase".to_string(), file("mod nodes;\nmod sequence;\npub(crate) use nodes::drain;\n"));
    modules.insert("phase::nodes".to_string(), file("pub(crate) fn drain() {}\n"));
    modules.insert(
        "phase::sequence".to_string(),
        file("use super::drain;\nuse crate::phase::nodes as n;\nfn go() { n::drain(); self::go(); }\n"),
    );
    let graph = Graph { modules };
    let at = |from: &str, path: &str| graph.resolve(from, path, 0).map(|r| r.module().to_string());
    assert_eq!(at("phase::sequence", "super::drain").as_deref(), Some("phase::nodes"));
    assert_eq!(at("phase::sequence", "n::drain").as_deref(), Some("phase::nodes"));
    assert_eq!(at("phase::sequence", "crate::phase::nodes").as_deref(), Some("phase::nodes"));
    assert_eq!(at("phase::sequence", "std::mem::take"), None);
    assert_eq!(at("phase", "nodes::drain").as_deref(), Some("phase::nodes"));
}

/// No file a reader has to scroll for ten minutes: every file of `src/` (test modules aside, which hold tables of
/// cases) stays within 800 lines. A concern that grows past it splits into files of its own (README, Development).
#[test]
fn no_file_of_src_passes_800_lines() {
    let too_long: Vec<String> = source_files()
        .into_iter()
        .filter_map(|(_, shown, path)| {
            // A file that cannot be read is named too: its length is unknown, never taken as short.
            match std::fs::read_to_string(&path).map(|text| text.lines().count()) {
                Ok(lines) => (lines > 800).then(|| format!("{shown}: {lines} lines")),
                Err(e) => Some(format!("{shown}: cannot be read ({e})")),
            }
        })
        .collect();
    assert!(too_long.is_empty(), "split these by concern (README, Development):\n{}", too_long.join("\n"));
}
