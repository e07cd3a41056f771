//! What every filter family shares: `omit`, errors, values to and from JSON, and Python's type names.

use minijinja::value::{Serde, Value, ValueKind};
use minijinja::{Error, ErrorKind};

/// The string `omit` stands for: the engine drops a module argument whose value is exactly this.
pub const OMIT: &str = "__omit_place_holder__upgrade__";

pub(super) fn err(message: impl Into<String>) -> Error {
    Error::new(ErrorKind::InvalidOperation, message.into())
}

pub(crate) fn to_json(value: &Value) -> Result<serde_json::Value, Error> {
    if contains_undefined(value) {
        // Ansible fails on an undefined value inside a list or mapping; serialising it would make it null.
        return Err(Error::new(ErrorKind::UndefinedError, "a list or mapping holds an undefined value"));
    }
    serde_json::to_value(value).map_err(|e| err(format!("cannot convert value: {e}")))
}

/// Whether an undefined value sits anywhere inside a (literal) list or mapping.
pub(crate) fn contains_undefined(value: &Value) -> bool {
    match value.kind() {
        ValueKind::Undefined => true,
        ValueKind::Seq => value.try_iter().is_ok_and(|mut items| items.any(|v| contains_undefined(&v))),
        ValueKind::Map => value
            .try_iter()
            .is_ok_and(|mut keys| keys.any(|k| value.get_item(&k).is_ok_and(|v| contains_undefined(&v)))),
        _ => false,
    }
}

pub(crate) fn from_json(value: serde_json::Value) -> Value {
    Value::from(Serde(value))
}

/// `mapping[key]` if the key is there (and the value is a mapping).
pub(super) fn get_key(value: &Value, key: &str) -> Option<Value> {
    value.get_item(&Value::from(key)).ok().filter(|v| !v.is_undefined())
}

pub(super) fn is_string(value: &Value) -> bool {
    value.kind() == ValueKind::String
}

pub(super) fn is_seq(value: &Value) -> bool {
    matches!(value.kind(), ValueKind::Seq | ValueKind::Iterable)
}

pub(super) fn items_of(value: &Value, filter: &str) -> Result<Vec<Value>, Error> {
    match value.kind() {
        ValueKind::Seq | ValueKind::Iterable | ValueKind::Map | ValueKind::String => {
            Ok(value.try_iter().map_err(|e| err(format!("{filter}: {e}")))?.collect())
        }
        ValueKind::Undefined => Err(Error::from(ErrorKind::UndefinedError)),
        other => Err(err(format!("{filter} expects a list, got {other}"))),
    }
}
