use super::*;
use serde_json::json;

/// What ansible-core printed for each case of testdata/cases.yml (testdata/generate.py writes it).
const TRUTH: &str = include_str!("testdata/ansible_truth.json");

/// Cases where we knowingly differ from Ansible, and why.
const KNOWN_GAPS: &[(&str, &str)] = &[];

fn truth_vars(truth: &Json) -> Vars {
    Vars::new(truth["vars"].clone())
}

/// The env lookup cases read TPL_TRUTH_ENV; cargo test has no such variable but always sets CARGO_PKG_NAME.
fn adapt_env(template: &str, expected: &Json) -> (String, Json) {
    let template = template.replace("TPL_TRUTH_ENV", "CARGO_PKG_NAME");
    let expected = serde_json::to_string(expected)
        .ok()
        .map(|s| s.replace("from-env", env!("CARGO_PKG_NAME")))
        .and_then(|s| serde_json::from_str(&s).ok())
        .unwrap_or(Json::Null);
    (template, expected)
}

/// The part of Ansible's message that names what was undefined, if it is such an error.
fn undefined_phrase(message: &str) -> Option<String> {
    let re = regex::Regex::new(r"('[^']+' is undefined|object of type '\w+' has no attribute '[^']+')").ok()?;
    re.find(message).map(|m| m.as_str().to_owned())
}

#[test]
fn agrees_with_ansible_core() {
    let truth: Json = serde_json::from_str(TRUTH).expect("truth table is JSON");
    let templar = Templar::new();
    let vars = truth_vars(&truth);
    let mut failures = Vec::new();
    let cases = truth["cases"].as_array().expect("cases");
    for case in cases {
        let template = case["template"].as_str().unwrap_or_default();
        if KNOWN_GAPS.iter().any(|(t, _)| *t == template) {
            continue;
        }
        let (template, expected) = adapt_env(template, case.get("ok").unwrap_or(&Json::Null));
        let ours: Result<Json, TemplateError> = match case["kind"].as_str() {
            Some("when") => templar.eval_condition_str(&template, &vars).map(Json::Bool),
            _ => templar.render(&template, &vars),
        };
        match (case.get("error"), ours) {
            (None, Ok(got)) if got == expected => {}
            (None, Ok(got)) => failures.push(format!("{template:?}: ansible {expected}, we {got}")),
            (None, Err(e)) => failures.push(format!("{template:?}: ansible {expected}, we failed: {e}")),
            (Some(ansible), Ok(got)) => {
                failures.push(format!("{template:?}: ansible failed ({ansible}), we gave {got}"))
            }
            (Some(ansible), Err(e)) => {
                if let Some(phrase) = ansible.as_str().and_then(undefined_phrase) {
                    if !e.message.contains(&phrase) {
                        failures.push(format!("{template:?}: ansible says {phrase:?}, we say {:?}", e.message));
                    }
                }
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases differ from ansible-core:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}

#[test]
fn strings_without_markup_come_back_unchanged() {
    let t = Templar::new();
    let v = Vars::empty();
    assert_eq!(t.render("echo {not a template}", &v).unwrap(), json!("echo {not a template}"));
    assert_eq!(t.render_str("50%", &v).unwrap(), "50%");
}

#[test]
fn render_value_renders_nested_strings_and_keys() {
    let t = Templar::new();
    let v = Vars::new(json!({"name": "kubelet", "n": 3, "opts": ["a", "b"]}));
    let args = json!({"{{ name }}_key": ["{{ n }}", {"x": "{{ opts }}"}, 7, true], "plain": "x"});
    assert_eq!(
        t.render_value(&args, &v).unwrap(),
        json!({"kubelet_key": [3, {"x": ["a", "b"]}, 7, true], "plain": "x"})
    );
}

#[test]
fn omit_is_a_sentinel_the_engine_can_spot() {
    let t = Templar::new();
    let v = Vars::empty();
    let rendered = t.render("{{ missing | default(omit) }}", &v).unwrap();
    assert!(is_omit(&rendered));
    assert!(!is_omit(&json!("x")));
}

#[test]
fn layers_override_and_keep_the_base() {
    let t = Templar::new();
    let host = Vars::new(json!({"a": 1, "b": 2}));
    let task = host.with("b", &json!(20)).with_map(&json!({"c": 3}));
    assert_eq!(t.render("{{ [a, b, c] }}", &task).unwrap(), json!([1, 20, 3]));
    assert_eq!(t.render("{{ b }}", &host).unwrap(), json!(2));
    assert_eq!(task.get("b"), Some(json!(20)));
    assert_eq!(task.get("zzz"), None);
}

#[test]
fn conditions_take_bools_lists_and_strings() {
    let t = Templar::new();
    let v = Vars::new(json!({"x": 5, "r": {"rc": 0, "failed": false}}));
    assert!(t.eval_condition(&json!(true), &v).unwrap());
    assert!(!t.eval_condition(&json!(["x > 1", "x > 10"]), &v).unwrap());
    assert!(t.eval_condition(&json!("r is succeeded"), &v).unwrap());
    assert!(t.eval_condition(&json!("{{ x == 5 }}"), &v).unwrap());
    let e = t.eval_condition(&json!("x"), &v).unwrap_err();
    assert_eq!(e.kind, TemplateErrorKind::BrokenConditional);
    assert!(t.eval_condition(&json!(""), &v).is_err());
    let mut lenient = Templar::new();
    lenient.set_allow_broken_conditionals(true);
    assert!(lenient.eval_condition(&json!("x"), &v).unwrap());
    assert!(!lenient.eval_condition(&json!("r.rc"), &v).unwrap());
}

#[test]
fn undefined_errors_name_the_variable() {
    let t = Templar::new();
    let v = Vars::new(json!({"result": {"stdout": "x"}}));
    let e = t.render("cmd {{ foo }} --flag", &v).unwrap_err();
    assert_eq!(e.kind, TemplateErrorKind::Undefined);
    assert_eq!(e.message, "'foo' is undefined");
    let e = t.eval_condition(&json!("result.stdout_lines | length > 0"), &v).unwrap_err();
    assert_eq!(e.message, "object of type 'dict' has no attribute 'stdout_lines'");
    let e = t.render_str("{% for x in items %}{{ x }}{% endfor %}", &v).unwrap_err();
    assert_eq!(e.message, "'items' is undefined");
}

#[test]
fn lookups_chain_through_undefined_values_where_guarded() {
    let t = Templar::new();
    let v = Vars::new(json!({"facts": {"os": "linux"}}));
    assert_eq!(t.render("{{ facts.kernel.version | default('unknown') }}", &v).unwrap(), json!("unknown"));
    assert_eq!(t.render("v={{ facts.kernel.version | default('unknown') }}", &v).unwrap(), json!("v=unknown"));
    assert!(!t.eval_condition(&json!("facts.kernel.version is defined"), &v).unwrap());
    assert!(t.eval_condition(&json!("nope.x is undefined"), &v).unwrap());
    // Without a guard, the first missing attribute is the error.
    let e = t.render("{{ facts.kernel.version }}", &v).unwrap_err();
    assert_eq!(e.message, "object of type 'dict' has no attribute 'kernel'");
    let e = t.render("{{ facts.kernel.version | default(facts.kernel.x.y) }}", &v).unwrap_err();
    assert_eq!(e.kind, TemplateErrorKind::Undefined);
}

#[test]
fn syntax_is_checked_without_variables() {
    let t = Templar::new();
    assert!(t.check_syntax("{{ a | default('x') }} and {% if b %}{{ c }}{% endif %}").is_ok());
    assert!(t.check_syntax("no template").is_ok());
    let e = t.check_syntax("{{ a | }}").unwrap_err();
    assert_eq!(e.kind, TemplateErrorKind::Syntax);
    let e = t.check_syntax("line one\n{% if x %}\nunterminated").unwrap_err();
    assert_eq!(e.kind, TemplateErrorKind::Syntax);
    assert!(t.check_condition_syntax("x is defined and y | bool").is_ok());
    assert!(t.check_condition_syntax("x is").is_err());
    assert!(t.check_condition_syntax("{{ x }}").is_ok());
}

#[test]
fn backslashes_in_literals_are_kept_as_written() {
    let t = Templar::new();
    let v = Vars::new(json!({"v": "v1.29.1", "text": "a\\b"}));
    // As a YAML plain scalar would hand it over: the task author wrote `\d` and `\1`.
    assert_eq!(t.render(r"{{ v | regex_replace('^v(\d+)\.(\d+).*$', '\1.\2') }}", &v).unwrap(), json!("1.29"));
    assert_eq!(t.render(r"{{ 'it\'s' }}", &v).unwrap(), json!(r"it\'s"));
    assert_eq!(t.render(r"{{ text | replace('\\', '/') }}", &v).unwrap(), json!("a\\b"));
}

#[test]
fn lookup_file_reads_relative_to_the_search_path() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("files")).unwrap();
    std::fs::write(dir.path().join("files/motd"), "hello\n\n").unwrap();
    let t = Templar::new();
    let v = Vars::new(json!({"ansible_search_path": [dir.path().to_string_lossy()]}));
    assert_eq!(t.render("{{ lookup('file', 'motd') }}", &v).unwrap(), json!("hello"));
    assert!(t.render("{{ lookup('file', 'nope') }}", &v).is_err());
}

#[test]
fn fileglob_lists_the_matching_files_and_first_found_the_first_that_exists() {
    let dir = tempfile::tempdir().unwrap();
    for f in ["b.tar", "a.tar", ".hidden.tar", "c.txt"] {
        std::fs::write(dir.path().join(f), "").unwrap();
    }
    std::fs::create_dir(dir.path().join("d.tar")).unwrap();
    let t = Templar::new();
    let d = dir.path().to_string_lossy().to_string();
    let v = Vars::new(json!({"d": d}));
    // Files only, not directories nor hidden ones; sorted; several results joined by `lookup`, a list from `query`.
    assert_eq!(t.render("{{ lookup('fileglob', d ~ '/*.tar') }}", &v).unwrap(), json!(format!("{d}/a.tar,{d}/b.tar")));
    assert_eq!(t.render("{{ query('fileglob', d ~ '/*.none') }}", &v).unwrap(), json!([]));
    assert_eq!(
        t.render("{{ query('first_found', [d ~ '/none', d ~ '/c.txt', d ~ '/a.tar']) }}", &v).unwrap(),
        json!([format!("{d}/c.txt")])
    );
    let found = "{{ query('first_found', {'files': ['none', 'a.tar'], 'paths': ['/nonexistent', d]}) }}";
    assert_eq!(t.render(found, &v).unwrap(), json!([format!("{d}/a.tar")]));
    assert_eq!(t.render("{{ query('first_found', {'files': ['none'], 'skip': true}) }}", &v).unwrap(), json!([]));
    let missing = t.render("{{ lookup('first_found', d ~ '/none') }}", &v).unwrap_err();
    assert!(missing.message.contains("No file was found when using first_found."), "{}", missing.message);
}

#[test]
fn templar_is_shareable_across_threads() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Templar>();
    assert_send_sync::<Vars>();
    let t = std::sync::Arc::new(Templar::new());
    let handles: Vec<_> = (0..4)
        .map(|i| {
            let t = t.clone();
            std::thread::spawn(move || t.render("{{ i * 2 }}", &Vars::new(json!({"i": i}))).unwrap())
        })
        .collect();
    let results: Vec<Json> = handles.into_iter().map(|h| h.join().unwrap()).collect();
    assert_eq!(results, vec![json!(0), json!(2), json!(4), json!(6)]);
}

#[test]
fn an_undefined_value_inside_a_literal_is_an_error_as_in_ansible() {
    let t = Templar::new();
    let v = Vars::new(json!({"a": 1}));
    assert!(t.render("{{ {'a': a, 'b': nope} }}", &v).is_err());
    assert!(t.render("{{ [a, nope] | to_json }}", &v).is_err());
    assert_eq!(t.render("{{ {'a': a, 'b': nope | default(2)} }}", &v).unwrap(), json!({"a": 1, "b": 2}));
}

#[test]
fn templates_inside_list_variables_render_when_used_as_in_ansible() {
    let t = Templar::new();
    let vars = Vars::new(json!({
        "root": "/srv/h1",
        "files": ["{{ root }}/ca.crt", "/etc/plain.crt"],
        "result": {"stdout": "a file with {{ markup }}", "lines": ["{{ markup }}"]},
        "item": ["{{ rendered by the loop already }}"],
    }));
    assert_eq!(t.render_str("{{ files | join(' ') }}", &vars).unwrap(), "/srv/h1/ca.crt /etc/plain.crt");
    assert_eq!(t.render_str("{{ (files + ['x']) | length }}", &vars).unwrap(), "3");
    // Registered results (mappings) and loop items are data, not templates.
    assert_eq!(t.render_str("{{ result.stdout }}", &vars).unwrap(), "a file with {{ markup }}");
    assert_eq!(t.render_str("{{ item[0] }}", &vars).unwrap(), "{{ rendered by the loop already }}");
}

#[test]
fn a_list_variable_that_refers_to_itself_stops_at_once_instead_of_branching() {
    let t = Templar::new();
    let item = "{{ x }}";
    let vars = Vars::new(json!({"x": [item, item, item, item, item, item], "y": "{{ x }}"}));
    // Inside itself, x reads as undefined: the items do not render x again (6^32 renders before this guard, which a
    // test run would not see the end of).
    let _ = t.render_str("{{ x }}", &vars);
    let _ = t.render_str("{{ y | length }}", &vars);
}

#[test]
fn raw_items_in_lists_render_to_their_text() {
    let t = Templar::new();
    let vars = Vars::new(json!({"lst": ["{% raw %}{{ a }}{% endraw %}", "plain"]}));
    assert_eq!(t.render_str("{{ lst | to_json }}", &vars).unwrap(), r#"["{{ a }}", "plain"]"#);
}

#[test]
fn template_files_unescape_string_literals_as_jinja2_and_task_arguments_keep_them() {
    // ansible-core 2.19 (scripts/compare/escapes.yml): a template file gives `2 3 tab<TAB>here q"q 3`, the
    // same text in a task argument keeps the backslashes (Ansible's escape_backslashes), so `'\\d'` is 3 long.
    let t = Templar::new();
    let v = Vars::empty();
    let file =
        "{{ '\\\\d' | length }} {{ 'a\\nb' | length }} {{ 'tab\\there' }} {{ \"q\\\"q\" }} {{ '\\d+' | length }}";
    assert_eq!(t.render_file(file, &v).unwrap(), "2 3 tab\there q\"q 3");
    assert_eq!(t.render_str("{{ '\\\\d' | length }}", &v).unwrap(), "3");
    assert_eq!(t.render_file("{# '\\d' #}{% if '\\\\' == '\\\\' %}same{% endif %}", &v).unwrap(), "same");
}

#[test]
fn truthy_convert_bool_uses_ansibles_boolean_table() {
    // ansible-core 2.19 gives ["0.0", "1.0", 2]: "0.0" and "1.0" are not in its table (so Python's truth decides),
    // and " no " is read stripped. The filter's old table took "0.0" as false and " no " as true.
    let t = Templar::new();
    let v = Vars::empty();
    let got =
        t.render("{{ ['0.0', '1.0', '', ' no ', 'off', 2, 0.0] | select('truthy', convert_bool=true) | list }}", &v);
    assert_eq!(got.unwrap(), json!(["0.0", "1.0", 2]));
}
