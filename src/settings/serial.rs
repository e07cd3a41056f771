//! `serial`: how many hosts of a phase at once, as a number, a percentage or a list of either.

use std::fmt;

use serde_json::Value;

use super::readers::*;
use crate::ansible_compat::unquote;
use crate::error::{Error, Result};
use crate::inventory::python_int;

/// One entry of `serial`: a count of hosts or a percentage of the phase's hosts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SerialItem {
    /// A number of hosts; 0 or less means "all the rest", as in Ansible.
    Count(i64),
    /// A percentage of all hosts selected for the phase, rounded down, at least 1. Above 100 is allowed (Ansible
    /// accepts it: the batch is simply everything left).
    Percent(u32),
}

/// How many nodes are upgraded at once: an integer, `"N%"`, or a list of those (entry i sizes batch i, the last
/// entry repeats). Never empty.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Serial(Vec<SerialItem>);

pub(super) const SERIAL_HINT: &str = "write a number of hosts (2), a percentage (\"25%\") or a list ([1, \"20%\", -1])";

impl Serial {
    pub fn one() -> Serial {
        Serial(vec![SerialItem::Count(1)])
    }

    pub fn new(items: Vec<SerialItem>) -> Option<Serial> {
        (!items.is_empty()).then_some(Serial(items))
    }

    pub fn items(&self) -> &[SerialItem] {
        &self.0
    }

    /// Parses `2`, `25%`, `[1, '20%', -1]` (YAML or Python list syntax, as INI `[g:vars]` carry it) or `1,20%,-1`.
    pub fn parse(text: &str) -> Result<Serial> {
        let trimmed = text.trim();
        if let Some(inner) = trimmed.strip_prefix('[') {
            let Some(inner) = inner.strip_suffix(']') else {
                return Err(serial_error(text, "has an opening `[` without a closing `]`"));
            };
            return Serial::parse_list(text, inner);
        }
        if trimmed.contains(',') {
            return Serial::parse_list(text, trimmed);
        }
        Ok(Serial(vec![serial_item(text, trimmed)?]))
    }

    fn parse_list(text: &str, inner: &str) -> Result<Serial> {
        if inner.trim().is_empty() {
            return Err(serial_error(text, "is an empty list").hint(SERIAL_HINT));
        }
        let items = inner.split(',').map(|part| serial_item(text, part)).collect::<Result<Vec<_>>>()?;
        Ok(Serial(items))
    }

    pub fn from_value(value: &Value) -> Result<Serial> {
        match value {
            Value::Array(items) if items.is_empty() => Err(serial_error("[]", "is an empty list")),
            Value::Array(items) => items
                .iter()
                .map(|item| match item {
                    Value::String(s) => serial_item(&value.to_string(), s),
                    Value::Number(_) => serial_number(item),
                    other => Err(serial_error(&other.to_string(), "is not a number or a percentage")),
                })
                .collect::<Result<Vec<_>>>()
                .map(Serial),
            Value::String(s) => Serial::parse(s),
            Value::Number(_) => Ok(Serial(vec![serial_number(value)?])),
            other => Err(serial_error(&other.to_string(), "is not a number, a percentage or a list")),
        }
    }

    /// The value as JSON: `2`, `"20%"` or `[1, "20%", -1]`.
    pub fn to_json(&self) -> Value {
        let item = |i: &SerialItem| match i {
            SerialItem::Count(n) => Value::from(*n),
            SerialItem::Percent(p) => Value::String(format!("{p}%")),
        };
        match self.0.as_slice() {
            [single] => item(single),
            items => Value::Array(items.iter().map(item).collect()),
        }
    }
}

pub(super) fn serial_error(text: &str, what: &str) -> Error {
    Error::input(format!("serial `{}` {what}", text.trim())).hint(SERIAL_HINT)
}

pub(super) fn serial_number(value: &Value) -> Result<SerialItem> {
    integral(value).map(SerialItem::Count).ok_or_else(|| serial_error(&value.to_string(), "is not a whole number"))
}

pub(super) fn serial_item(whole: &str, part: &str) -> Result<SerialItem> {
    let item = unquote(part.trim());
    if let Some(number) = item.strip_suffix('%') {
        return match python_int(number) {
            Some(p) if p < 0 => Err(serial_error(whole, "has a negative percentage")),
            Some(p) => u32::try_from(p).map(SerialItem::Percent).map_err(|_| serial_error(whole, "is too large")),
            None => Err(serial_error(whole, "has a percentage that is not a whole number")),
        };
    }
    if item.is_empty() {
        return Err(serial_error(whole, "has an empty entry"));
    }
    python_int(item)
        .map(SerialItem::Count)
        .ok_or_else(|| serial_error(whole, "is not a number, a percentage or a list"))
}

impl fmt::Display for SerialItem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SerialItem::Count(n) => write!(f, "{n}"),
            SerialItem::Percent(p) => write!(f, "{p}%"),
        }
    }
}

impl fmt::Display for Serial {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0.as_slice() {
            [single] => write!(f, "{single}"),
            items => {
                let parts: Vec<String> = items
                    .iter()
                    .map(|i| match i {
                        SerialItem::Count(n) => n.to_string(),
                        SerialItem::Percent(p) => format!("\"{p}%\""),
                    })
                    .collect();
                write!(f, "[{}]", parts.join(", "))
            }
        }
    }
}
