//! A Kubernetes label selector (`metav1.LabelSelector`: `matchLabels` and `matchExpressions`) evaluated as the API
//! server evaluates it (apimachinery's `LabelSelectorAsSelector`): every term must hold; `In` needs the key with one
//! of the values, `NotIn` holds when the key is absent or has none of them, `Exists` and `DoesNotExist` look at the
//! key only. An empty selector (`{}`) selects everything; a missing (`null`) one selects nothing, as policy/v1
//! PodDisruptionBudgets read them.

use serde_json::{Map, Value};

/// Whether `selector` selects an object with `labels`. `None` when the selector cannot be evaluated (an operator the
/// API does not define, values that are not text): the caller decides which way to fail.
pub(crate) fn selects(selector: Option<&Value>, labels: Option<&Map<String, Value>>) -> Option<bool> {
    let selector = match selector {
        None | Some(Value::Null) => return Some(false),
        Some(Value::Object(selector)) => selector,
        Some(_) => return None,
    };
    let label = |key: &str| labels.and_then(|l| l.get(key)).and_then(Value::as_str);
    if let Some(match_labels) = selector.get("matchLabels").filter(|v| !v.is_null()) {
        for (key, want) in match_labels.as_object()? {
            if label(key) != Some(want.as_str()?) {
                return Some(false);
            }
        }
    }
    if let Some(expressions) = selector.get("matchExpressions").filter(|v| !v.is_null()) {
        for expression in expressions.as_array()? {
            let key = expression.get("key")?.as_str()?;
            let values: Vec<&str> = match expression.get("values") {
                None | Some(Value::Null) => Vec::new(),
                Some(values) => values.as_array()?.iter().map(Value::as_str).collect::<Option<_>>()?,
            };
            let holds = match expression.get("operator")?.as_str()? {
                "In" => label(key).is_some_and(|v| values.contains(&v)),
                "NotIn" => !label(key).is_some_and(|v| values.contains(&v)),
                "Exists" => label(key).is_some(),
                "DoesNotExist" => label(key).is_none(),
                _ => return None,
            };
            if !holds {
                return Some(false);
            }
        }
    }
    Some(true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn check(selector: Value, labels: Value) -> Option<bool> {
        selects(Some(&selector), labels.as_object())
    }

    #[test]
    fn match_labels_needs_every_pair() {
        assert_eq!(check(json!({"matchLabels": {"app": "web"}}), json!({"app": "web", "tier": "x"})), Some(true));
        assert_eq!(check(json!({"matchLabels": {"app": "web", "tier": "y"}}), json!({"app": "web"})), Some(false));
    }

    #[test]
    fn the_four_operators_follow_the_api_servers_semantics() {
        let web = json!({"app": "web"});
        let none = json!({});
        let expr =
            |op: &str, values: Value| json!({"matchExpressions": [{"key": "app", "operator": op, "values": values}]});
        assert_eq!(check(expr("In", json!(["web", "api"])), web.clone()), Some(true));
        assert_eq!(check(expr("In", json!(["api"])), web.clone()), Some(false));
        assert_eq!(check(expr("In", json!(["web"])), none.clone()), Some(false));
        assert_eq!(check(expr("NotIn", json!(["api"])), web.clone()), Some(true));
        assert_eq!(check(expr("NotIn", json!(["web"])), web.clone()), Some(false));
        // NotIn holds for an object without the key, as in apimachinery's labels.Requirement.Matches.
        assert_eq!(check(expr("NotIn", json!(["web"])), none.clone()), Some(true));
        assert_eq!(check(expr("Exists", Value::Null), web.clone()), Some(true));
        assert_eq!(check(expr("Exists", Value::Null), none.clone()), Some(false));
        assert_eq!(check(expr("DoesNotExist", Value::Null), web.clone()), Some(false));
        assert_eq!(check(expr("DoesNotExist", Value::Null), none), Some(true));
    }

    #[test]
    fn labels_and_expressions_must_both_hold() {
        let selector = json!({"matchLabels": {"tier": "front"},
            "matchExpressions": [{"key": "app", "operator": "In", "values": ["web"]}]});
        assert_eq!(check(selector.clone(), json!({"tier": "front", "app": "web"})), Some(true));
        assert_eq!(check(selector, json!({"tier": "back", "app": "web"})), Some(false));
    }

    #[test]
    fn an_empty_selector_selects_all_and_a_missing_one_none() {
        assert_eq!(check(json!({}), json!({"a": "b"})), Some(true));
        assert_eq!(selects(None, None), Some(false));
        assert_eq!(selects(Some(&Value::Null), None), Some(false));
    }

    #[test]
    fn an_operator_the_api_does_not_define_cannot_be_evaluated() {
        let selector = json!({"matchExpressions": [{"key": "app", "operator": "Gt", "values": ["1"]}]});
        assert_eq!(check(selector, json!({"app": "2"})), None);
    }
}
