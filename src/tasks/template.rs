//! Ansible-compatible templating on minijinja, with ansible-core 2.19's meaning.
//!
//! # API (what the task engine calls)
//! ```text
//! let templar = Arc::new(Templar::new());               // once per run; Send + Sync, share it across hosts
//! let host = Vars::new(host_vars_json);                 // once per host: no copy, converted lazily per variable
//! let task = host.with("item", &item).with_map(&task_vars_json); // cheap layers on top (task vars, loop item)
//!
//! templar.render("{{ x }}", &task)?           -> serde_json::Value  native: one `{{ expr }}` gives its value
//! templar.render_str("a {{ x }}", &task)?     -> String             always text (template module, commands)
//! templar.render_value(&json_args, &task)?    -> serde_json::Value  strings inside lists/maps, keys too
//! templar.eval_condition(&when_json, &task)?  -> bool               when/failed_when/changed_when/until/that
//! templar.check_syntax("{{ x | bool }}")?     -> ()                 `upgrade check`; no variables needed
//! templar.check_condition_syntax("x is defined")?
//! is_template(s) / is_omit(&json) / OMIT
//! ```
//! Errors are [`TemplateError`]s whose message names the undefined variable or the syntax problem (`'foo' is
//! undefined`, `object of type 'dict' has no attribute 'stdout'`); the engine adds file, line and task.
//!
//! # Semantics (checked against ansible-core 2.19, see the tables in the tests)
//! - A string that is exactly one `{{ expr }}` renders to the expression's native value (list, dict, int, bool,
//!   None); any other template renders to a string where values print as Python prints them (`True`, `None` prints
//!   as nothing at the top level, `[1, 'a']`, `{'a': 1}`). Strings without `{{`, `{%` or `{#` come back untouched.
//! - Undefined variables are errors, except under `default`, `is defined`/`is undefined`, `mandatory`.
//!   Lookups chain through undefined values as in Ansible (`a.missing.b | default(1)`, `a.missing.b is defined`):
//!   a template using `default`/`defined`/`mandatory`/`omit` that fails on an undefined value is tried once more
//!   in a chainable environment. Known gap: in that second try an undefined value that is tested with `if` or
//!   iterated counts as false / empty instead of failing.
//! - Jinja settings as Ansible's: trim_blocks on, lstrip_blocks off, trailing newlines kept.
//! - Conditionals: a bare expression (or one `{{ }}` template that gives an expression or a bool); the result must
//!   be a boolean, as ansible-core 2.19 requires, unless [`Templar::set_allow_broken_conditionals`] is on (Ansible's
//!   `ALLOW_BROKEN_CONDITIONALS`), when Python truthiness applies. A list of conditions must all hold.
//! - Filter and test names may carry the `ansible.builtin.` prefix; `lookup('env'|'file'|'pipe'|'vars', ...)`,
//!   `query`/`q` and `omit` are available. `lookup('file', relative)` searches the directories of the
//!   `ansible_search_path` variable (and their `files/`) before the current directory.
//! - Known gap: the `~` operator joins with minijinja's own formatting (`true`, not `True`) for non-strings.

use std::borrow::Cow;
use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, LazyLock, Mutex};

// `merge_maps` looks keys up from the last map to the first: the top layer goes last.
use minijinja::value::{Enumerator, Object, Serde, Value, ValueKind, merge_maps};
use minijinja::{Environment, ErrorKind, UndefinedBehavior};
use serde_json::Value as Json;

use super::facts::HostFacts;

mod filters;
mod pyfmt;
mod pyyaml;

use filters::py_type;
use pyfmt::py_str;

pub use filters::{OMIT, python_replacement};

/// What went wrong while templating.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TemplateErrorKind {
    /// The template does not parse.
    Syntax,
    /// A variable or attribute it uses does not exist.
    Undefined,
    /// A conditional did not give a boolean.
    BrokenConditional,
    /// A filter, test, lookup or operation failed.
    Other,
}

/// A templating failure; `message` says what, in Ansible's words where it has them. `line` is the line within a
/// multi-line template, when known.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TemplateError {
    pub kind: TemplateErrorKind,
    pub message: String,
    pub line: Option<usize>,
}

impl TemplateError {
    fn new(kind: TemplateErrorKind, message: impl Into<String>) -> Self {
        TemplateError { kind, message: message.into(), line: None }
    }
}

impl fmt::Display for TemplateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)?;
        if let Some(line) = self.line.filter(|l| *l > 1) {
            write!(f, " (line {line} of the template)")?;
        }
        Ok(())
    }
}

impl std::error::Error for TemplateError {}

impl From<TemplateError> for crate::error::Error {
    fn from(e: TemplateError) -> Self {
        crate::error::Error::input(e.to_string())
    }
}

/// Whether a string holds any Jinja markup at all.
pub fn is_template(s: &str) -> bool {
    s.contains("{{") || s.contains("{%") || s.contains("{#")
}

/// Whether a rendered module argument is `omit`: the engine drops such arguments.
pub fn is_omit(value: &Json) -> bool {
    value.as_str() == Some(OMIT)
}

/// The variables a template sees. Cheap to clone; build one per host with [`Vars::new`] and layer task variables
/// and loop items on top with [`Vars::with`] / [`Vars::with_map`].
#[derive(Debug, Clone)]
pub struct Vars(Value);

/// The host's variables as they came, converted to template values one top-level variable at a time, on first use.
#[derive(Debug)]
struct LazyVars {
    source: LazySource,
    converted: Mutex<HashMap<String, Value>>,
}

/// What a [`LazyVars`] reads from, shared with its owner rather than copied.
#[derive(Debug)]
enum LazySource {
    Json(Arc<Json>),
    /// A host's facts as the fact store holds them.
    Facts(Arc<HostFacts>),
}

impl LazySource {
    fn get(&self, key: &str) -> Option<&Json> {
        match self {
            LazySource::Json(json) => json.get(key),
            LazySource::Facts(facts) => facts.get(key).map(|v| &**v),
        }
    }

    fn keys(&self) -> Vec<Value> {
        match self {
            LazySource::Json(json) => {
                json.as_object().map(|m| m.keys().map(|k| Value::from(k.as_str())).collect()).unwrap_or_default()
            }
            LazySource::Facts(facts) => facts.keys().map(|k| Value::from(&**k)).collect(),
        }
    }
}

impl Object for LazyVars {
    fn get_value(self: &Arc<Self>, key: &Value) -> Option<Value> {
        let key = key.as_str()?;
        if let Ok(cache) = self.converted.lock() {
            if let Some(v) = cache.get(key) {
                return Some(v.clone());
            }
        }
        let value = Value::from(Serde(self.source.get(key)?));
        if let Ok(mut cache) = self.converted.lock() {
            cache.insert(key.to_owned(), value.clone());
        }
        Some(value)
    }

    fn enumerate(self: &Arc<Self>) -> Enumerator {
        Enumerator::Values(self.source.keys())
    }
}

/// The variables a template sees, with Ansible's lazy templating: a variable whose value is itself a template
/// (`upgrade_kubectl: "{{ tools }}/kubectl"`) is rendered, with the same variables, when it is used.
#[derive(Debug)]
struct Resolving {
    vars: Value,
    env: Arc<Environment<'static>>,
}

fn resolving(env: &Arc<Environment<'static>>, vars: &Vars) -> Value {
    Value::from_object(Resolving { vars: vars.0.clone(), env: env.clone() })
}

thread_local! {
    /// How deep variables are being rendered inside variables on this thread: a variable that refers to itself
    /// stops here instead of recursing for ever.
    static NESTING: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
    /// The variables being rendered on this thread (by the variables they belong to, and name): one met again
    /// inside itself (`x: ["{{ x }}", "{{ x }}"]`) reads as undefined at once, as Ansible's recursive loop error,
    /// instead of branching until the nesting limit.
    static RENDERING: std::cell::RefCell<Vec<(usize, String)>> = const { std::cell::RefCell::new(Vec::new()) };
}

const MAX_NESTING: usize = 32;

impl Object for Resolving {
    fn get_value(self: &Arc<Self>, key: &Value) -> Option<Value> {
        let value = self.vars.get_item(key).ok().filter(|v| !v.is_undefined())?;
        let name = key.as_str().unwrap_or_default();
        // `hostvars[h].x` renders x with h's own variables, as Ansible does.
        if name == "hostvars" {
            return Some(Value::from_object(ResolvingHosts { hosts: value, env: self.env.clone() }));
        }
        // The magic variables are data, never templates of the operator's.
        if matches!(name, "groups" | "group_names" | "inventory_hostname") {
            return Some(value);
        }
        // A loop item is what the loop already rendered: its strings are data (ansible-core 2.19 does not template
        // them again), whatever markup they carry.
        let needs = if name == "item" { value.as_str().is_some_and(is_template) } else { contains_template(&value) };
        if !needs {
            return Some(value);
        }
        let me = (Arc::as_ptr(self) as usize, name.to_owned());
        let again = RENDERING.with(|r| r.borrow().contains(&me));
        if again {
            return None;
        }
        RENDERING.with(|r| r.borrow_mut().push(me));
        let rendered = self.render_nested(value);
        RENDERING.with(|r| {
            r.borrow_mut().pop();
        });
        rendered
    }

    fn enumerate(self: &Arc<Self>) -> Enumerator {
        match self.vars.try_iter() {
            Ok(keys) => Enumerator::Values(keys.collect()),
            Err(_) => Enumerator::Empty,
        }
    }
}

impl Resolving {
    /// A variable's value with the templates in it rendered: the value itself when it is a template, and, as in
    /// Ansible, the templated strings of a list of strings (`files: ["{{ root }}/ca.crt"]`). Mappings are left as
    /// they are: registered results are mappings, and their text (a file's content) is data.
    fn render_nested(self: &Arc<Self>, value: Value) -> Option<Value> {
        match value.kind() {
            ValueKind::String => match value.as_str().filter(|s| is_template(s)) {
                Some(text) => self.render_text(text),
                None => Some(value),
            },
            ValueKind::Seq if contains_template(&value) => {
                let items = value.try_iter().ok()?.map(|v| self.render_nested(v)).collect::<Option<Vec<_>>>()?;
                Some(Value::from(items))
            }
            _ => Some(value),
        }
    }

    fn render_text(self: &Arc<Self>, text: &str) -> Option<Value> {
        if check_chain_length(text, false).is_err() {
            return None;
        }
        let depth = NESTING.with(|n| n.get());
        if depth >= MAX_NESTING {
            return None;
        }
        NESTING.with(|n| n.set(depth + 1));
        let context = Value::from_dyn_object(self.clone());
        let stripped = strip_builtin_prefix(text);
        let source = escape_backslashes(&stripped);
        // One `{{ expr }}` keeps its native type; anything else (`{{ a }}/x {{ b }}` too) renders to text.
        let compiled = single_expression(&source).and_then(|expr| self.env.compile_expression(expr).ok());
        let rendered = match compiled {
            Some(expr) => expr.eval(context),
            None => self.env.render_str(&source, context).map(Value::from),
        };
        NESTING.with(|n| n.set(depth));
        // A variable that cannot be rendered reads as undefined, so the error names it rather than running its
        // raw text.
        rendered.ok()
    }
}

/// Whether a value is a template, or a list of strings with a template among them.
fn contains_template(value: &Value) -> bool {
    match value.kind() {
        ValueKind::String => value.as_str().is_some_and(is_template),
        ValueKind::Seq => value.try_iter().is_ok_and(|items| {
            let mut any = false;
            for item in items {
                match item.as_str() {
                    Some(text) => any |= is_template(text),
                    None => return false,
                }
            }
            any
        }),
        _ => false,
    }
}

/// `hostvars` for templates: each host's variables, resolving templated values with that host's variables.
#[derive(Debug)]
struct ResolvingHosts {
    hosts: Value,
    env: Arc<Environment<'static>>,
}

impl Object for ResolvingHosts {
    fn get_value(self: &Arc<Self>, key: &Value) -> Option<Value> {
        let vars = self.hosts.get_item(key).ok().filter(|v| !v.is_undefined())?;
        Some(Value::from_object(Resolving { vars, env: self.env.clone() }))
    }

    fn enumerate(self: &Arc<Self>) -> Enumerator {
        match self.hosts.try_iter() {
            Ok(keys) => Enumerator::Values(keys.collect()),
            Err(_) => Enumerator::Empty,
        }
    }
}

impl Vars {
    /// No variables at all.
    pub fn empty() -> Vars {
        Vars::new(Json::Object(Default::default()))
    }

    /// Variables from a JSON object (anything else counts as no variables). Nothing is copied or converted now.
    pub fn new(json: Json) -> Vars {
        Vars::shared(Arc::new(json))
    }

    /// Like [`Vars::new`], sharing an object the caller keeps too (e.g. `hostvars` for every host).
    pub fn shared(json: Arc<Json>) -> Vars {
        Vars(Value::from_object(LazyVars { source: LazySource::Json(json), converted: Mutex::new(HashMap::new()) }))
    }

    /// Variables from a template value that is a map (or an object behaving as one).
    pub(crate) fn from_value(value: Value) -> Vars {
        Vars(value)
    }

    /// These variables with one more on top (`item`, a registered result, ...).
    pub fn with(&self, name: &str, value: &Json) -> Vars {
        let top = Value::from_pairs([(name.to_owned(), Value::from(Serde(value)))]);
        Vars(merge_maps([self.0.clone(), top]))
    }

    /// These variables with every entry of a JSON object on top (task `vars:`, `set_fact`s).
    pub fn with_map(&self, map: &Json) -> Vars {
        match map.as_object() {
            Some(m) if !m.is_empty() => Vars(merge_maps([self.0.clone(), Value::from(Serde(map))])),
            _ => self.clone(),
        }
    }

    /// These variables with a host's facts on top, as [`Vars::with_map`], without copying them: each fact is
    /// converted when a template first reads it. For a host's facts, which hold every registered result of the run
    /// so far (on the first master, the cluster's whole node list), and are layered under every task.
    pub fn with_facts(&self, facts: Arc<HostFacts>) -> Vars {
        if facts.is_empty() {
            return self.clone();
        }
        let top =
            Value::from_object(LazyVars { source: LazySource::Facts(facts), converted: Mutex::new(HashMap::new()) });
        Vars(merge_maps([self.0.clone(), top]))
    }

    /// These variables with `top` over them.
    pub fn layered_under(&self, top: &Vars) -> Vars {
        Vars(merge_maps([self.0.clone(), top.0.clone()]))
    }

    /// One variable as JSON, if it is defined.
    pub fn get(&self, name: &str) -> Option<Json> {
        let v = self.0.get_attr(name).ok().filter(|v| !v.is_undefined())?;
        serde_json::to_value(&v).ok()
    }

    fn lookup(&self, name: &str) -> Option<Value> {
        self.0.get_attr(name).ok().filter(|v| !v.is_undefined())
    }
}

impl From<&Json> for Vars {
    fn from(json: &Json) -> Vars {
        Vars::new(json.clone())
    }
}

impl From<Json> for Vars {
    fn from(json: Json) -> Vars {
        Vars::new(json)
    }
}

/// The templating engine: one minijinja environment set up like Ansible's, shared by every host.
pub struct Templar {
    env: Arc<Environment<'static>>,
    /// The same environment with chainable undefined values, for a second try when a template that guards with
    /// `default`/`defined`/`mandatory` failed on an undefined value: `a.missing.b | default(1)` works in Ansible.
    chain_env: Arc<Environment<'static>>,
    allow_broken_conditionals: bool,
}

/// Whether a template uses something that accepts an undefined value, so a chained lookup may be fine.
fn guards_undefined(source: &str) -> bool {
    ["default", "d(", "defined", "mandatory", "omit"].iter().any(|w| source.contains(w))
}

impl Default for Templar {
    fn default() -> Self {
        Templar::new()
    }
}

impl fmt::Debug for Templar {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Templar").field("allow_broken_conditionals", &self.allow_broken_conditionals).finish()
    }
}

/// `x | ansible.builtin.bool`, `x is ansible.builtin.version(...)`: minijinja names cannot hold dots.
static BUILTIN_PREFIX: LazyLock<regex::Regex> = LazyLock::new(|| {
    regex::Regex::new(r"(\|\s*|\bis\s+(?:not\s+)?)ansible\.builtin\.")
        .unwrap_or_else(|_| regex::Regex::new("$^").expect("trivial regex"))
});

fn strip_builtin_prefix(source: &str) -> Cow<'_, str> {
    if source.contains("ansible.builtin.") { BUILTIN_PREFIX.replace_all(source, "$1") } else { Cow::Borrowed(source) }
}

/// Python's reading of escapes in the string literals of a template's `{{ }}` and `{% %}`: minijinja knows
/// fewer escapes than Python and refuses the others, which Python keeps as written (`'\d'` is a backslash and a
/// `d`), so those backslashes are doubled for minijinja.
fn python_escapes(source: &str) -> Cow<'_, str> {
    rewrite_literals(source, true, |quote, chars, out| {
        while let Some((_, d)) = chars.next() {
            out.push(d);
            if d == quote {
                break;
            }
            if d == '\\' {
                match chars.next() {
                    Some((_, e)) if "\\'\"bfnrtu".contains(e) => out.push(e),
                    Some((_, e)) => {
                        out.push('\\');
                        out.push(e);
                    }
                    None => {}
                }
            }
        }
    })
}

/// Ansible's `escape_backslashes`: string literals inside `{{ }}` of a task argument keep their backslashes as
/// written (YAML already handled escapes), so `regex_replace('(\\d+)', '\\1')` means what it says. Each such
/// literal is rewritten so that minijinja's unescaping gives back exactly the characters between the quotes.
fn escape_backslashes(source: &str) -> Cow<'_, str> {
    rewrite_literals(source, false, |quote, chars, out| {
        while let Some((_, d)) = chars.next() {
            if d == '\\' {
                out.push_str("\\\\");
                if let Some((_, escaped)) = chars.next() {
                    if escaped == '\\' {
                        out.push_str("\\\\");
                    } else if escaped == quote {
                        out.push('\\');
                        out.push(escaped);
                    } else {
                        out.push(escaped);
                    }
                }
            } else {
                out.push(d);
                if d == quote {
                    break;
                }
            }
        }
    })
}

/// Rewrites the string literals inside a template's `{{ }}` (and `{% %}` with `statements`; otherwise statements,
/// like comments, are copied as they are) and copies the rest unchanged. `literal` is given each literal's opening
/// quote (already written) and the characters after it, and writes the literal up to its closing quote.
fn rewrite_literals<'a>(
    source: &'a str,
    statements: bool,
    mut literal: impl FnMut(char, &mut std::str::CharIndices<'_>, &mut String),
) -> Cow<'a, str> {
    if !source.contains('\\') {
        return Cow::Borrowed(source);
    }
    let mut out = String::with_capacity(source.len() + 8);
    let mut rest = source;
    while let Some(start) = rest.find('{') {
        let (before, from) = rest.split_at(start);
        out.push_str(before);
        let close = match from.get(..2) {
            Some("{{") => "}}",
            Some("{%") if statements => "%}",
            Some(open @ ("{%" | "{#")) => {
                let close = if open == "{%" { "%}" } else { "#}" };
                let end = from[2..].find(close).map(|i| i + 4).unwrap_or(from.len());
                out.push_str(&from[..end]);
                rest = &from[end..];
                continue;
            }
            _ => {
                out.push('{');
                rest = &from[1..];
                continue;
            }
        };
        out.push_str(&from[..2]);
        let mut chars = from[2..].char_indices();
        let mut consumed = from.len();
        while let Some((i, c)) = chars.next() {
            match c {
                '\'' | '"' => {
                    out.push(c);
                    literal(c, &mut chars, &mut out);
                }
                _ if from[2 + i..].starts_with(close) => {
                    out.push_str(close);
                    consumed = 2 + i + 2;
                    break;
                }
                c => out.push(c),
            }
        }
        rest = &from[consumed.min(from.len())..];
    }
    out.push_str(rest);
    Cow::Owned(out)
}

/// The expression inside a template that is exactly one `{{ ... }}`, whitespace-control markers removed. Like
/// Jinja, one trailing newline does not count.
fn single_expression(source: &str) -> Option<&str> {
    let source = source.strip_suffix('\n').map(|s| s.strip_suffix('\r').unwrap_or(s)).unwrap_or(source);
    let inner = source.strip_prefix("{{")?.strip_suffix("}}")?;
    let inner = inner.strip_prefix(['-', '+']).unwrap_or(inner);
    let inner = inner.strip_suffix('-').unwrap_or(inner);
    // Cheap rejections before trying to compile: another block starts inside.
    if inner.contains("{%") || inner.contains("{#") {
        return None;
    }
    Some(inner)
}

/// How many operators (`.`, `[`, `|`, `+`, `and`, ...) one `{{ }}` or `{% %}` may chain. minijinja's parser guards
/// nesting, but a flat chain (`x.a.a.a...`, `1+1+1...`) becomes a tree as deep as it is long, which its compiler
/// walks recursively: a few thousand links overflow a thread's stack and abort the process. Python's Jinja stops at
/// its recursion limit (1000) too, so no template Ansible runs is refused.
const MAX_CHAIN: usize = 1000;

/// Refuses a template (or a bare expression, `bare`) with a tag that chains more than [`MAX_CHAIN`] operators.
fn check_chain_length(source: &str, bare: bool) -> Result<(), TemplateError> {
    let mut in_tag = bare;
    let mut quote: Option<char> = None;
    let mut count = 0usize;
    let mut word = String::new();
    let mut chars = source.chars().peekable();
    while let Some(c) = chars.next() {
        if !in_tag {
            if c == '{' && matches!(chars.peek(), Some('{' | '%')) {
                chars.next();
                in_tag = true;
                count = 0;
            }
            continue;
        }
        if let Some(q) = quote {
            if c == '\\' {
                chars.next();
            } else if c == q {
                quote = None;
            }
            continue;
        }
        if c.is_alphanumeric() || c == '_' {
            word.push(c);
            continue;
        }
        if matches!(word.as_str(), "and" | "or" | "not" | "if" | "is" | "in") {
            count += 1;
        }
        word.clear();
        match c {
            '\'' | '"' => quote = Some(c),
            '}' | '%' if !bare && chars.peek() == Some(&'}') => {
                chars.next();
                in_tag = false;
            }
            '.' | '[' | '(' | '|' | '+' | '-' | '*' | '/' | '%' | '~' | '<' | '>' | '=' | '!' => count += 1,
            _ => {}
        }
        if count > MAX_CHAIN {
            return Err(TemplateError::new(
                TemplateErrorKind::Syntax,
                format!("template syntax error: an expression chains more than {MAX_CHAIN} operators"),
            ));
        }
    }
    Ok(())
}

fn starts_and_ends_as_template(s: &str) -> bool {
    (s.starts_with("{{") || s.starts_with("{%")) && (s.ends_with("}}") || s.ends_with("%}"))
}

impl Templar {
    pub fn new() -> Templar {
        Templar {
            env: Arc::new(Self::environment(UndefinedBehavior::Strict)),
            chain_env: Arc::new(Self::environment(UndefinedBehavior::Chainable)),
            allow_broken_conditionals: false,
        }
    }

    fn environment(undefined: UndefinedBehavior) -> Environment<'static> {
        let mut env = Environment::new();
        env.set_undefined_behavior(undefined);
        let mut syntax = minijinja::syntax::SyntaxConfig::builder();
        syntax.trim_blocks(true).lstrip_blocks(false).keep_trailing_newline(true);
        if let Ok(config) = syntax.build() {
            env.set_syntax(config);
        }
        env.set_formatter(|out, _state, value| match value.kind() {
            ValueKind::Undefined => Err(minijinja::Error::from(ErrorKind::UndefinedError)),
            ValueKind::None => Ok(()),
            ValueKind::String => out
                .write_str(value.as_str().unwrap_or_default())
                .map_err(|_| minijinja::Error::from(ErrorKind::WriteFailure)),
            _ => out.write_str(&py_str(value)).map_err(|_| minijinja::Error::from(ErrorKind::WriteFailure)),
        });
        filters::register(&mut env);
        env
    }

    /// Ansible's `ALLOW_BROKEN_CONDITIONALS`: accept non-boolean conditional results by their truthiness.
    pub fn set_allow_broken_conditionals(&mut self, allow: bool) {
        self.allow_broken_conditionals = allow;
    }

    /// Renders a task argument string with Ansible's native types: one `{{ expr }}` gives the expression's value,
    /// any other template gives a string, and a string without markup is returned unchanged.
    pub fn render(&self, template: &str, vars: &Vars) -> Result<Json, TemplateError> {
        if !is_template(template) {
            return Ok(Json::String(template.to_owned()));
        }
        check_chain_length(template, false)?;
        let stripped = strip_builtin_prefix(template);
        let source = escape_backslashes(&stripped);
        if let Some(expr) = single_expression(&source) {
            if let Ok(compiled) = self.env.compile_expression(expr) {
                let value = match compiled.eval(resolving(&self.env, vars)) {
                    Ok(value) => value,
                    Err(e) => self.retry_chained(e, expr, true, vars)?,
                };
                return self.native(value, expr, vars);
            }
        }
        self.render_text(&source, vars).map(Json::String)
    }

    /// Renders a template to text (the `template` module, command lines, messages).
    pub fn render_str(&self, template: &str, vars: &Vars) -> Result<String, TemplateError> {
        if !is_template(template) {
            return Ok(template.to_owned());
        }
        check_chain_length(template, false)?;
        let stripped = strip_builtin_prefix(template);
        self.render_text(&escape_backslashes(&stripped), vars)
    }

    /// Renders a template file (the `template` module): its string literals are Jinja2's, unescaped as Python
    /// reads them (`'\\d'` is `\d`), not kept as written as in task arguments: Ansible's template action renders
    /// files without `escape_backslashes`.
    pub fn render_file(&self, template: &str, vars: &Vars) -> Result<String, TemplateError> {
        if !is_template(template) {
            return Ok(template.to_owned());
        }
        check_chain_length(template, false)?;
        let stripped = strip_builtin_prefix(template);
        self.render_text(&python_escapes(&stripped), vars)
    }

    fn render_text(&self, source: &str, vars: &Vars) -> Result<String, TemplateError> {
        check_chain_length(source, false)?;
        match self.env.render_str(source, resolving(&self.env, vars)) {
            Ok(text) => Ok(text),
            Err(e) => {
                let value = self.retry_chained(e, source, false, vars)?;
                Ok(value.as_str().unwrap_or_default().to_owned())
            }
        }
    }

    /// After an undefined-value failure in a template that guards against undefined values, evaluates it again
    /// letting lookups chain through undefined values (printing one is still an error). Any other failure, or one
    /// in a template without such guards, is reported as it is.
    fn retry_chained(
        &self,
        e: minijinja::Error,
        source: &str,
        is_expression: bool,
        vars: &Vars,
    ) -> Result<Value, TemplateError> {
        if e.kind() != ErrorKind::UndefinedError || !guards_undefined(source) {
            return Err(self.error(e, source, is_expression, vars));
        }
        let retried = if is_expression {
            self.chain_env.compile_expression(source).and_then(|c| c.eval(resolving(&self.chain_env, vars)))
        } else {
            self.chain_env.render_str(source, resolving(&self.chain_env, vars)).map(Value::from)
        };
        retried.map_err(|_| self.error(e, source, is_expression, vars))
    }

    /// Renders every string inside a value, map keys included; other scalars are returned as they are.
    pub fn render_value(&self, value: &Json, vars: &Vars) -> Result<Json, TemplateError> {
        Ok(match value {
            Json::String(s) => self.render(s, vars)?,
            Json::Array(items) => {
                Json::Array(items.iter().map(|v| self.render_value(v, vars)).collect::<Result<_, _>>()?)
            }
            Json::Object(map) => {
                let mut out = serde_json::Map::with_capacity(map.len());
                for (k, v) in map {
                    let key = if is_template(k) { self.render_str(k, vars)? } else { k.clone() };
                    out.insert(key, self.render_value(v, vars)?);
                }
                Json::Object(out)
            }
            other => other.clone(),
        })
    }

    /// Evaluates a bare Jinja expression (`loop:` items, `that:` entries) to its native value.
    pub fn eval_expression(&self, expr: &str, vars: &Vars) -> Result<Json, TemplateError> {
        check_chain_length(expr, true)?;
        let source = strip_builtin_prefix(expr);
        let compiled = self.env.compile_expression(&source).map_err(|e| self.error(e, &source, true, vars))?;
        let value = match compiled.eval(resolving(&self.env, vars)) {
            Ok(value) => value,
            Err(e) => self.retry_chained(e, &source, true, vars)?,
        };
        self.native(value, &source, vars)
    }

    /// Evaluates a conditional (`when`, `failed_when`, `changed_when`, `until`, `assert: that`) as ansible-core
    /// 2.19 does: a boolean as it is, a string as a bare expression (or a `{{ }}` template giving one), a list as
    /// all of its entries.
    pub fn eval_condition(&self, condition: &Json, vars: &Vars) -> Result<bool, TemplateError> {
        match condition {
            Json::Bool(b) => Ok(*b),
            Json::Array(items) => {
                for item in items {
                    if !self.eval_condition(item, vars)? {
                        return Ok(false);
                    }
                }
                Ok(true)
            }
            Json::String(s) => self.eval_condition_str(s, vars),
            Json::Null => self.empty_conditional(),
            other => {
                if self.allow_broken_conditionals {
                    Ok(json_truthy(other))
                } else {
                    Err(TemplateError::new(
                        TemplateErrorKind::BrokenConditional,
                        "Conditional expressions must be strings.",
                    ))
                }
            }
        }
    }

    /// [`Templar::eval_condition`] for a string.
    pub fn eval_condition_str(&self, condition: &str, vars: &Vars) -> Result<bool, TemplateError> {
        let condition = condition.trim();
        if condition.is_empty() {
            return self.empty_conditional();
        }
        let expression: String = if starts_and_ends_as_template(condition) {
            match self.render(condition, vars)? {
                Json::String(s) if s.trim().is_empty() => return self.empty_conditional(),
                Json::String(s) => s.trim().to_owned(),
                other => return self.require_bool(&other),
            }
        } else if is_template(condition) {
            // ansible-core renders templates embedded in a conditional's string constants (with a warning):
            // `x == "{{ y }}"` compares with y's value.
            self.render_text(&strip_builtin_prefix(condition), vars)?
        } else {
            condition.to_owned()
        };
        let value = self.eval_expression(&expression, vars)?;
        self.require_bool(&value)
    }

    fn empty_conditional(&self) -> Result<bool, TemplateError> {
        if self.allow_broken_conditionals {
            Ok(true)
        } else {
            Err(TemplateError::new(
                TemplateErrorKind::BrokenConditional,
                "Empty conditional expressions are not allowed.",
            ))
        }
    }

    fn require_bool(&self, value: &Json) -> Result<bool, TemplateError> {
        match value {
            Json::Bool(b) => Ok(*b),
            other if self.allow_broken_conditionals => Ok(json_truthy(other)),
            other => Err(TemplateError::new(
                TemplateErrorKind::BrokenConditional,
                format!(
                    "Conditional result ({}) was derived from value of type '{}'. Conditionals must have a boolean \
                     result.",
                    if json_truthy(other) { "True" } else { "False" },
                    crate::ansible_compat::python_type_name(other)
                ),
            )),
        }
    }

    /// Checks that a template parses (for `upgrade check`).
    pub fn check_syntax(&self, template: &str) -> Result<(), TemplateError> {
        if !is_template(template) {
            return Ok(());
        }
        check_chain_length(template, false)?;
        let source = strip_builtin_prefix(template);
        self.env.template_from_str(&source).map(|_| ()).map_err(|e| self.error(e, &source, false, &Vars::empty()))?;
        Ok(())
    }

    /// Checks that a conditional parses (for `upgrade check`).
    pub fn check_condition_syntax(&self, condition: &str) -> Result<(), TemplateError> {
        let condition = condition.trim();
        if starts_and_ends_as_template(condition) {
            return self.check_syntax(condition);
        }
        check_chain_length(condition, true)?;
        let source = strip_builtin_prefix(condition);
        self.env.compile_expression(&source).map(|_| ()).map_err(|e| self.error(e, &source, true, &Vars::empty()))
    }

    /// A template value as JSON; an undefined result is the error Ansible gives for it.
    fn native(&self, value: Value, source: &str, vars: &Vars) -> Result<Json, TemplateError> {
        if filters::contains_undefined(&value) {
            return Err(self.undefined_error(source, true, vars, None));
        }
        serde_json::to_value(&value).map_err(|e| {
            TemplateError::new(TemplateErrorKind::Other, format!("cannot use the value of `{}`: {e}", source.trim()))
        })
    }

    fn error(&self, e: minijinja::Error, source: &str, is_expression: bool, vars: &Vars) -> TemplateError {
        /// Enough of the template to recognise it: a message is not the place for a 40 KB template.
        fn excerpt(source: &str) -> String {
            const MAX: usize = 200;
            let text = source.trim();
            match text.char_indices().nth(MAX) {
                Some((cut, _)) => format!("{}...", &text[..cut]),
                None => text.to_string(),
            }
        }
        let line = e.line();
        let mut error = match e.kind() {
            ErrorKind::UndefinedError => self.undefined_error(source, is_expression, vars, Some(&e)),
            ErrorKind::SyntaxError => TemplateError::new(
                TemplateErrorKind::Syntax,
                format!("template syntax error: {} in `{}`", e.detail().unwrap_or("invalid syntax"), excerpt(source)),
            ),
            ErrorKind::UnknownFilter | ErrorKind::UnknownTest | ErrorKind::UnknownFunction => TemplateError::new(
                TemplateErrorKind::Other,
                format!(
                    "{} in `{}`",
                    e.detail().map(str::to_owned).unwrap_or_else(|| e.kind().to_string()),
                    excerpt(source)
                ),
            ),
            kind => TemplateError::new(
                TemplateErrorKind::Other,
                match e.detail() {
                    Some(detail) => detail.to_owned(),
                    None => kind.to_string(),
                },
            ),
        };
        if error.line.is_none() && source.contains('\n') {
            error.line = line;
        }
        error
    }

    /// Names what was undefined, in Ansible's words: `'x' is undefined` or `object of type 'dict' has no attribute
    /// 'y'`. It looks through the names the template uses for the first one that does not resolve.
    fn undefined_error(
        &self,
        source: &str,
        is_expression: bool,
        vars: &Vars,
        e: Option<&minijinja::Error>,
    ) -> TemplateError {
        let names = if is_expression {
            self.env.compile_expression(source).map(|c| c.undeclared_variables(true)).unwrap_or_default()
        } else {
            self.env.template_from_str(source).map(|t| t.undeclared_variables(true)).unwrap_or_default()
        };
        let mut names: Vec<String> = names.into_iter().collect();
        // Report in the order they appear in the source.
        names.sort_by_key(|n| (source.find(n.as_str()).unwrap_or(usize::MAX), n.clone()));
        let globals: Vec<String> = self.env.globals().map(|(k, _)| k.to_owned()).collect();
        for path in &names {
            let mut parts = path.split('.');
            let Some(root) = parts.next() else { continue };
            let mut current = match vars.lookup(root) {
                Some(v) => v,
                None if globals.iter().any(|g| g == root) => continue,
                None => return TemplateError::new(TemplateErrorKind::Undefined, format!("'{root}' is undefined")),
            };
            for attr in parts {
                match current.get_attr(attr) {
                    Ok(next) if !next.is_undefined() => current = next,
                    _ => {
                        let message = if current.kind() == ValueKind::Map || current.kind() == ValueKind::Seq {
                            format!("object of type '{}' has no attribute '{attr}'", py_type(&current))
                        } else {
                            format!("'{}' has no attribute '{attr}'", py_type(&current))
                        };
                        return TemplateError::new(TemplateErrorKind::Undefined, message);
                    }
                }
            }
        }
        let detail = e.and_then(|e| e.detail()).unwrap_or("undefined value");
        TemplateError::new(TemplateErrorKind::Undefined, format!("{detail} in `{}`", source.trim()))
    }
}

fn json_truthy(value: &Json) -> bool {
    match value {
        Json::Null => false,
        Json::Bool(b) => *b,
        Json::Number(n) => n.as_f64().is_some_and(|f| f != 0.0),
        Json::String(s) => !s.is_empty(),
        Json::Array(a) => !a.is_empty(),
        Json::Object(m) => !m.is_empty(),
    }
}

#[cfg(test)]
mod tests;
