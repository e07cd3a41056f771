//! A minimal stand-in for the real `Templar` (src/tasks/template.rs, written in parallel): the same API, plain
//! minijinja in strict mode, a few filters. Deleted once the real one lands on main.

use minijinja::{Environment, UndefinedBehavior};
use serde_json::Value;

use crate::error::{Error, Result};

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

impl Templar {
    pub fn new() -> Self {
        let mut env = Environment::new();
        env.set_undefined_behavior(UndefinedBehavior::Strict);
        env.add_filter("bool", ansible_bool);
        Templar { env }
    }

    fn error(err: minijinja::Error) -> Error {
        let mut text = err.to_string();
        if let Some(detail) = err.detail() {
            if !text.contains(detail) {
                text = format!("{text}: {detail}");
            }
        }
        Error::input(format!("template error: {text}"))
    }

    /// Renders a string; a lone `{{ expr }}` keeps the expression's type, as Ansible's native templating does.
    pub fn render(&self, template: &str, vars: &Value) -> Result<Value> {
        if !template.contains("{{") && !template.contains("{%") {
            return Ok(Value::String(template.to_string()));
        }
        let ctx = minijinja::Value::from(minijinja::value::Serde(vars));
        let trimmed = template.trim();
        if let Some(inner) = trimmed.strip_prefix("{{").and_then(|t| t.strip_suffix("}}")) {
            if !inner.contains("{{") && !inner.contains("}}") {
                let value = self.env.compile_expression(inner).map_err(Self::error)?.eval(ctx).map_err(Self::error)?;
                return serde_json::to_value(&value).map_err(|e| Error::input(format!("template error: {e}")));
            }
        }
        self.env.render_str(template, ctx).map(Value::String).map_err(Self::error)
    }

    pub fn render_value(&self, value: &Value, vars: &Value) -> Result<Value> {
        Ok(match value {
            Value::String(s) => self.render(s, vars)?,
            Value::Array(items) => {
                Value::Array(items.iter().map(|v| self.render_value(v, vars)).collect::<Result<_>>()?)
            }
            Value::Object(map) => Value::Object(
                map.iter().map(|(k, v)| Ok((k.clone(), self.render_value(v, vars)?))).collect::<Result<_>>()?,
            ),
            other => other.clone(),
        })
    }

    pub fn eval_condition(&self, expr: &str, vars: &Value) -> Result<bool> {
        let expr = expr.trim();
        if expr.contains("{{") || expr.contains("{%") {
            return match self.render(expr, vars)? {
                Value::Bool(b) => Ok(b),
                Value::String(s) => self.eval_condition(&s, vars),
                other => Ok(ansible_bool(minijinja::Value::from(minijinja::value::Serde(&other)))),
            };
        }
        let ctx = minijinja::Value::from(minijinja::value::Serde(vars));
        let value = self.env.compile_expression(expr).map_err(Self::error)?.eval(ctx).map_err(Self::error)?;
        Ok(value.is_true())
    }

    pub fn check_syntax(&self, template: &str) -> Result<()> {
        if !template.contains("{{") && !template.contains("{%") && !template.contains("{#") {
            return Ok(());
        }
        let env = Environment::new();
        env.template_from_str(template).map(|_| ()).map_err(Self::error)
    }
}
