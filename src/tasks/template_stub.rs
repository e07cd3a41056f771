//! A minimal stand-in for the real `Templar` (src/tasks/template.rs, written in parallel) with the same API: plain
//! minijinja in strict mode and a `bool` filter. Deleted once the real one lands on main.

use std::fmt;

use minijinja::value::Serde;
use minijinja::{Environment, UndefinedBehavior};
use serde_json::Value as Json;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TemplateError {
    pub message: String,
}

impl fmt::Display for TemplateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl From<TemplateError> for crate::error::Error {
    fn from(e: TemplateError) -> Self {
        crate::error::Error::input(e.to_string())
    }
}

/// The variables a template sees (the stub keeps a plain JSON object).
#[derive(Debug, Clone)]
pub struct Vars(Json);

impl Vars {
    pub fn empty() -> Vars {
        Vars(Json::Object(Default::default()))
    }
    pub fn new(json: Json) -> Vars {
        Vars(json)
    }
    pub fn with(&self, name: &str, value: &Json) -> Vars {
        let mut next = self.0.clone();
        if let Json::Object(m) = &mut next {
            m.insert(name.to_string(), value.clone());
        }
        Vars(next)
    }
    pub fn with_map(&self, map: &Json) -> Vars {
        let mut next = self.0.clone();
        if let (Json::Object(m), Some(top)) = (&mut next, map.as_object()) {
            m.extend(top.iter().map(|(k, v)| (k.clone(), v.clone())));
        }
        Vars(next)
    }
    pub fn get(&self, name: &str) -> Option<Json> {
        self.0.get(name).cloned()
    }
    fn ctx(&self) -> minijinja::Value {
        minijinja::Value::from(Serde(&self.0))
    }
}

impl From<&Json> for Vars {
    fn from(json: &Json) -> Vars {
        Vars(json.clone())
    }
}

pub struct Templar {
    env: Environment<'static>,
}

impl Default for Templar {
    fn default() -> Self {
        Templar::new()
    }
}

fn ansible_bool(value: minijinja::Value) -> bool {
    if let Some(s) = value.as_str() {
        return matches!(s.trim().to_ascii_lowercase().as_str(), "yes" | "on" | "1" | "true" | "y" | "t");
    }
    value.is_true()
}

fn error(err: minijinja::Error) -> TemplateError {
    let mut text = err.to_string();
    if let Some(detail) = err.detail() {
        if !text.contains(detail) {
            text = format!("{text}: {detail}");
        }
    }
    TemplateError { message: text }
}

fn is_template(s: &str) -> bool {
    s.contains("{{") || s.contains("{%") || s.contains("{#")
}

impl Templar {
    pub fn new() -> Self {
        let mut env = Environment::new();
        env.set_undefined_behavior(UndefinedBehavior::Strict);
        env.add_filter("bool", ansible_bool);
        let mut syntax = minijinja::syntax::SyntaxConfig::builder();
        syntax.trim_blocks(true).keep_trailing_newline(true);
        if let Ok(config) = syntax.build() {
            env.set_syntax(config);
        }
        Templar { env }
    }

    /// A lone `{{ expr }}` keeps the expression's type, as Ansible's native templating does.
    pub fn render(&self, template: &str, vars: &Vars) -> Result<Json, TemplateError> {
        if !is_template(template) {
            return Ok(Json::String(template.to_string()));
        }
        let trimmed = template.trim();
        if let Some(inner) = trimmed.strip_prefix("{{").and_then(|t| t.strip_suffix("}}")) {
            if !inner.contains("{{") && !inner.contains("}}") {
                return self.eval_expression(inner, vars);
            }
        }
        self.render_str(template, vars).map(Json::String)
    }

    pub fn render_str(&self, template: &str, vars: &Vars) -> Result<String, TemplateError> {
        if !is_template(template) {
            return Ok(template.to_string());
        }
        self.env.render_str(template, vars.ctx()).map_err(error)
    }

    pub fn render_value(&self, value: &Json, vars: &Vars) -> Result<Json, TemplateError> {
        Ok(match value {
            Json::String(s) => self.render(s, vars)?,
            Json::Array(items) => {
                Json::Array(items.iter().map(|v| self.render_value(v, vars)).collect::<Result<_, _>>()?)
            }
            Json::Object(map) => Json::Object(
                map.iter().map(|(k, v)| Ok((k.clone(), self.render_value(v, vars)?))).collect::<Result<_, _>>()?,
            ),
            other => other.clone(),
        })
    }

    pub fn eval_expression(&self, expr: &str, vars: &Vars) -> Result<Json, TemplateError> {
        let value = self.env.compile_expression(expr).map_err(error)?.eval(vars.ctx()).map_err(error)?;
        if value.is_undefined() {
            return Err(TemplateError { message: format!("'{}' is undefined", expr.trim()) });
        }
        serde_json::to_value(&value).map_err(|e| TemplateError { message: e.to_string() })
    }

    pub fn eval_condition(&self, condition: &Json, vars: &Vars) -> Result<bool, TemplateError> {
        match condition {
            Json::Bool(b) => Ok(*b),
            Json::String(s) => self.eval_condition_str(s, vars),
            Json::Array(items) => {
                for item in items {
                    if !self.eval_condition(item, vars)? {
                        return Ok(false);
                    }
                }
                Ok(true)
            }
            other => Ok(ansible_bool(minijinja::Value::from(Serde(other)))),
        }
    }

    pub fn eval_condition_str(&self, condition: &str, vars: &Vars) -> Result<bool, TemplateError> {
        let condition = condition.trim();
        if is_template(condition) {
            return match self.render(condition, vars)? {
                Json::Bool(b) => Ok(b),
                Json::String(s) => self.eval_condition_str(&s, vars),
                other => Ok(ansible_bool(minijinja::Value::from(Serde(&other)))),
            };
        }
        Ok(self.env.compile_expression(condition).map_err(error)?.eval(vars.ctx()).map_err(error)?.is_true())
    }

    pub fn check_syntax(&self, template: &str) -> Result<(), TemplateError> {
        if !is_template(template) {
            return Ok(());
        }
        let env = Environment::new();
        env.template_from_str(template).map(|_| ()).map_err(error)
    }

    pub fn check_condition_syntax(&self, condition: &str) -> Result<(), TemplateError> {
        let condition = condition.trim();
        if is_template(condition) {
            return self.check_syntax(condition);
        }
        self.env.compile_expression(condition).map(|_| ()).map_err(error)
    }
}
