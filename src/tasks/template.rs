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

use std::fmt;
use std::sync::Arc;

use minijinja::value::{Value, ValueKind};
use minijinja::{Environment, ErrorKind, UndefinedBehavior};
use serde_json::Value as Json;

mod error;
mod filters;
mod pyfmt;
mod pyyaml;
mod source;
mod vars;

use filters::py_type;
use pyfmt::py_str;

pub use error::{TemplateError, TemplateErrorKind};
pub use filters::{OMIT, python_replacement};
pub use source::is_template;
use source::{
    check_chain_length, escape_backslashes, python_escapes, single_expression, starts_and_ends_as_template,
    strip_builtin_prefix,
};
pub use vars::Vars;
use vars::resolving;

/// Whether a rendered module argument is `omit`: the engine drops such arguments.
pub fn is_omit(value: &Json) -> bool {
    value.as_str() == Some(OMIT)
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
