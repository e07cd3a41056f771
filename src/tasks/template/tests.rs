use super::*;
use serde_json::json;

#[test]
fn smoke() {
    let t = Templar::new();
    let v = Vars::new(json!({"x": [1, "a"]}));
    assert_eq!(t.render("{{ x }}", &v).unwrap(), json!([1, "a"]));
}
