//! No input makes `upgrade` panic: property tests over every reader of user data (YAML, task files, templates,
//! settings, serial arithmetic, the cluster's node list, the journal), on random text and on mutations of valid
//! inputs. The inventory parsers have their own in `inventory/tests.rs`. Each property runs a modest number of cases
//! so `cargo test` stays quick in debug builds.

use std::path::Path;

use proptest::prelude::*;
use serde_json::{Value, json};

use crate::cluster::parse_node_list;
use crate::journal::Journal;
use crate::plan::{serial_batches, threshold_exceeded};
use crate::settings::{DrainTimeout, LabelSelector, MaxFailPercentage, Serial, SerialItem, TargetVersion};
use crate::tasks::model::parse_tasks;
use crate::tasks::template::{Templar, Vars};

const CASES: u32 = 256;

const SAMPLE_TASKS: &str = r#"- name: wait for the API
  ansible.builtin.command: kubectl get --raw /healthz
  register: health
  until: health.rc == 0
  retries: 3
  delay: 1
  changed_when: false
- name: facts
  set_fact:
    nodes: "{{ groups['nodes'] | default([]) }}"
    flag: yes
  when: inventory_hostname in groups['masters']
- block:
    - debug: msg="{{ item }} of {{ nodes | length }}"
      loop: "{{ nodes }}"
      loop_control: {label: "{{ item }}"}
  rescue:
    - fail: msg=broken
  always:
    - pause: seconds=1
- local_action: command echo {{ inventory_hostname }}
- include_tasks: other.yml
- copy: {src: a, dest: /tmp/a, mode: 0644}
"#;

const SAMPLE_TEMPLATE: &str = "{% for h in groups['all'] %}{{ h | upper }}:{{ hostvars[h].port | default(22) | int }}\n{% endfor %}\
     {{ x.y | default('n') }} {{ 'a,b' | split(',') | join('-') }} {{ v is version('1.2', '>=') }}";

/// Any text, control characters and odd Unicode included (the YAML and template readers see whole files).
fn any_text() -> impl Strategy<Value = String> {
    prop_oneof![
        "(?s).{0,200}",
        // Odd Unicode: combining marks, zero-width and bidi controls, a BOM, wide characters, NUL.
        proptest::collection::vec(
            prop::sample::select(vec![
                "\u{301}",
                "\u{200b}",
                "\u{202e}",
                "\u{feff}",
                "\u{0}",
                "é",
                "日本",
                "🦀",
                "\u{10ffff}",
                "\r",
                "\n",
                "\t",
                " ",
                "a",
                "{",
                "}",
                "%",
                "#",
                ":",
                "-",
                "'",
                "\"",
                "\\",
                "[",
                "]",
            ]),
            0..60
        )
        .prop_map(|parts| parts.concat()),
    ]
}

/// YAML-shaped text: indentation, flow collections, anchors, tags, block scalars.
fn yaml_like() -> impl Strategy<Value = String> {
    proptest::collection::vec(
        prop::sample::select(vec![
            "\n",
            "  ",
            "- ",
            ": ",
            "[",
            "]",
            "{",
            "}",
            ",",
            "&a ",
            "*a",
            "!vault ",
            "!!int ",
            "!!float ",
            "!!bool ",
            "<<: ",
            "|\n",
            ">-\n",
            "'",
            "\"",
            "#",
            "---\n",
            "...\n",
            "name",
            "hosts",
            "x",
            "0644",
            "1:30",
            "0x1F",
            "-9223372036854775808",
            "99999999999999999999",
            "1e400",
            ".inf",
            "~",
            "yes",
            "é",
            "\t",
            "? ",
        ]),
        0..80,
    )
    .prop_map(|parts| parts.concat())
}

/// Byte-level edits of a valid file: replace, insert or delete a byte (the result read lossily as UTF-8).
pub(crate) fn mutate_bytes(base: &str, edits: &[(usize, u8)]) -> String {
    let mut bytes = base.as_bytes().to_vec();
    for (pos, byte) in edits {
        if bytes.is_empty() {
            bytes.push(*byte);
            continue;
        }
        let i = pos % bytes.len();
        match byte % 3 {
            0 => bytes[i] = *byte,
            1 => bytes.insert(i, *byte),
            _ => {
                bytes.remove(i);
            }
        }
    }
    String::from_utf8_lossy(&bytes).into_owned()
}

/// Line-level edits of a valid file: drop, duplicate, indent, dedent or swap lines, the mistakes people make.
fn mutate_lines(base: &str, edits: &[(u8, usize, usize)]) -> String {
    let mut lines: Vec<String> = base.lines().map(str::to_owned).collect();
    for &(kind, a, b) in edits {
        if lines.is_empty() {
            break;
        }
        let (a, b) = (a % lines.len(), b % lines.len());
        match kind % 6 {
            0 => {
                lines.remove(a);
            }
            1 => lines.insert(b, lines[a].clone()),
            2 => lines[a].insert_str(0, "  "),
            3 => lines[a] = lines[a].trim_start().to_owned(),
            4 => lines.swap(a, b),
            _ => {
                let cut = lines[a].char_indices().nth(b % 40).map_or(lines[a].len(), |(i, _)| i);
                lines[a].truncate(cut);
            }
        }
    }
    lines.join("\n")
}

fn byte_edits() -> impl Strategy<Value = Vec<(usize, u8)>> {
    proptest::collection::vec((0usize..2000, any::<u8>()), 1..10)
}

fn line_edits() -> impl Strategy<Value = Vec<(u8, usize, usize)>> {
    proptest::collection::vec((any::<u8>(), 0usize..100, 0usize..100), 1..6)
}

/// Arbitrary JSON, numbers at the extremes included, a few levels deep.
fn any_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>().prop_map(|f| serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)),
        prop::sample::select(vec![i64::MAX, i64::MIN, 0, -1, 1]).prop_map(Value::from),
        any_text().prop_map(Value::from),
        prop::sample::select(vec!["{{ x }}", "{{ y.z }}", "{% if %}", "yes", "1.2.3", "{{ v }}"]).prop_map(Value::from),
    ];
    leaf.prop_recursive(4, 32, 6, |inner| {
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            proptest::collection::vec((prop::sample::select(vec!["x", "y", "z", "v", "item", "n"]), inner), 0..6)
                .prop_map(|entries| Value::Object(entries.into_iter().map(|(k, v)| (k.to_owned(), v)).collect())),
        ]
    })
}

/// Jinja-shaped text over the filters, tests and operators hooks use. `range` and loops over huge ranges are left
/// out: a template that loops for ever is the author's choice, as in Ansible.
fn jinja_like() -> impl Strategy<Value = String> {
    proptest::collection::vec(
        prop::sample::select(vec![
            "{{",
            "}}",
            "{%",
            "%}",
            "{#",
            "#}",
            " ",
            "x",
            "y",
            "z",
            "v",
            "item",
            ".",
            "[",
            "]",
            "(",
            ")",
            "'",
            "\"",
            "|",
            ",",
            "~",
            "+",
            "-",
            "*",
            "/",
            "//",
            "%",
            "**",
            "==",
            "!=",
            "<",
            ">",
            " and ",
            " or ",
            " not ",
            " is ",
            " in ",
            " if ",
            " else ",
            "0",
            "1",
            "-1",
            "99999999999999999999",
            "9223372036854775807",
            "1e308",
            "0.5",
            "True",
            "None",
            "default",
            "d",
            "bool",
            "int",
            "float",
            "string",
            "length",
            "join",
            "split",
            "replace",
            "regex_replace",
            "regex_search",
            "regex_findall",
            "ternary",
            "to_json",
            "to_nice_json",
            "to_yaml",
            "to_nice_yaml",
            "from_json",
            "from_yaml",
            "b64decode",
            "b64encode",
            "quote",
            "basename",
            "dirname",
            "path_join",
            "flatten",
            "combine",
            "dict2items",
            "items2dict",
            "union",
            "mandatory",
            "version",
            "match",
            "search",
            "defined",
            "undefined",
            "succeeded",
            "failed",
            "indent=",
            "for ",
            "endfor",
            "set ",
            "=",
            "endif",
            "ansible.builtin.",
            "lookup",
            "'env'",
            "'vars'",
            "\\",
            "\n",
            "é",
            "\u{200b}",
        ]),
        0..40,
    )
    .prop_map(|parts| parts.concat())
}

fn templar_survives(templar: &Templar, template: &str, vars: &Vars) {
    let _ = templar.render(template, vars);
    let _ = templar.render_str(template, vars);
    let _ = templar.eval_condition_str(template, vars);
    let _ = templar.check_syntax(template);
    let _ = templar.check_condition_syntax(template);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: CASES, ..ProptestConfig::default() })]

    #[test]
    fn yaml_parse_never_panics(text in prop_oneof![any_text(), yaml_like()]) {
        let _ = crate::yaml::parse(&text, Path::new("f.yml")).map(|n| n.map(|n| n.to_json()));
    }

    #[test]
    fn yaml_parse_never_panics_on_mutated_files(edits in byte_edits(), lines in line_edits()) {
        let _ = crate::yaml::parse(&mutate_bytes(SAMPLE_TASKS, &edits), Path::new("f.yml"));
        let _ = crate::yaml::parse(&mutate_lines(SAMPLE_TASKS, &lines), Path::new("f.yml"));
    }

    #[test]
    fn task_files_never_panic(text in prop_oneof![any_text(), yaml_like()]) {
        let (tasks, _) = parse_tasks(&text, Path::new("t.yml"));
        tasks.iter().for_each(|t| { let _ = t.templated_strings(); });
    }

    #[test]
    fn mutated_task_files_never_panic(edits in byte_edits(), lines in line_edits()) {
        for text in [mutate_bytes(SAMPLE_TASKS, &edits), mutate_lines(SAMPLE_TASKS, &lines)] {
            let (tasks, _) = parse_tasks(&text, Path::new("t.yml"));
            tasks.iter().for_each(|t| { let _ = t.templated_strings(); });
        }
    }

    #[test]
    fn templates_never_panic(template in prop_oneof![jinja_like(), any_text()], vars in any_json()) {
        let templar = Templar::new();
        let vars = Vars::new(json!({"x": vars.clone(), "v": vars, "groups": {"all": ["a"]}}));
        templar_survives(&templar, &template, &vars);
    }

    #[test]
    fn mutated_templates_never_panic(edits in byte_edits(), vars in any_json()) {
        let templar = Templar::new();
        let vars = Vars::new(json!({"x": vars, "groups": {"all": ["a", "b"]}, "hostvars": {"a": {"port": "x"}}}));
        templar_survives(&templar, &mutate_bytes(SAMPLE_TEMPLATE, &edits), &vars);
    }

    #[test]
    fn templates_render_any_variables(vars in any_json()) {
        let templar = Templar::new();
        let vars = Vars::new(json!({"x": vars}));
        for template in ["{{ x }}", "a {{ x }}", "{{ x | to_nice_json }}", "{{ x | to_nice_yaml }}",
                         "{{ x | int }}", "{{ x | bool }}", "{{ x | length }}", "{{ x | flatten }}",
                         "{{ x | string | b64decode }}", "{{ x * 2 }}", "{{ x + x }}", "{{ x ** 2 }}",
                         "{{ x | dict2items }}", "{{ x | from_json }}", "{{ x | from_yaml }}", "x"] {
            templar_survives(&templar, template, &vars);
        }
    }

    #[test]
    fn serial_parsers_never_panic(text in prop_oneof![any_text(), "[\\[\\]0-9,%'\" -]{0,30}"], value in any_json()) {
        if let Ok(serial) = Serial::parse(&text) {
            // What parses prints back to something that parses to the same value.
            prop_assert_eq!(Serial::parse(&serial.to_string()).ok(), Some(serial.clone()));
            let _ = serial.to_json();
        }
        let _ = Serial::from_value(&value);
    }

    #[test]
    fn settings_parsers_never_panic(text in prop_oneof![any_text(), "[0-9smhd .%'\"-]{0,30}"], value in any_json()) {
        let _ = MaxFailPercentage::parse(&text).map(|m| m.to_string());
        let _ = MaxFailPercentage::from_value(&value);
        if let Ok(d) = DrainTimeout::parse(&text) {
            prop_assert_eq!(DrainTimeout::parse(&d.to_string()).ok(), Some(d));
            let _ = d.limit();
        }
        let _ = DrainTimeout::from_value(&value);
        if let Ok(s) = LabelSelector::parse(&text) {
            prop_assert_eq!(LabelSelector::parse(&s.to_string()).ok(), Some(s));
        }
        let _ = LabelSelector::from_value(&value);
        let _ = TargetVersion::parse(&text).map(|v| v.to_string());
        let _ = TargetVersion::from_value(&value);
        let _ = crate::settings::labels_from_value(&value);
    }

    #[test]
    fn drain_timeouts_never_overflow(n in any::<u64>(), unit in prop::sample::select(vec!["", "s", "m", "h", "d"]),
                                     m in any::<u64>()) {
        let _ = DrainTimeout::parse(&format!("{n}{unit}"));
        let _ = DrainTimeout::parse(&format!("{n}{unit} {m}{unit}"));
        let _ = DrainTimeout::from_value(&json!(n));
        let _ = DrainTimeout::from_secs(n).to_string();
    }

    #[test]
    fn serial_arithmetic_never_panics(
        total in prop_oneof![Just(0usize), 0usize..50, 1000usize..5000],
        items in proptest::collection::vec(prop_oneof![
            any::<i64>().prop_map(SerialItem::Count),
            prop::sample::select(vec![i64::MAX, i64::MIN, 0, -1, 1]).prop_map(SerialItem::Count),
            any::<u32>().prop_map(SerialItem::Percent),
            (0u32..200).prop_map(SerialItem::Percent),
        ], 1..5),
    ) {
        let Some(serial) = Serial::new(items) else { return Ok(()) };
        let sizes = serial_batches(total, &serial);
        prop_assert_eq!(sizes.iter().sum::<usize>(), total);
        prop_assert!(sizes.iter().all(|s| *s > 0));
        let hosts: Vec<String> = (0..total).map(|i| format!("h{i}")).collect();
        let batches = crate::plan::batch_hosts(&hosts, &serial);
        prop_assert_eq!(batches.concat(), hosts);
    }

    #[test]
    fn threshold_never_panics(failed in any::<usize>(), size in any::<usize>(),
                              percent in prop_oneof![0.0f64..=100.0, any::<f64>()]) {
        if let Some(max_fail) = MaxFailPercentage::new(percent) {
            let stops = threshold_exceeded(failed, size, max_fail);
            if failed >= size && size > 0 { prop_assert!(stops); }
            if failed == 0 { prop_assert!(!stops); }
        }
    }

    #[test]
    fn node_lists_never_panic(text in prop_oneof![any_text(), any_json().prop_map(|v| v.to_string())],
                              items in proptest::collection::vec(any_json(), 0..4)) {
        let _ = parse_node_list(&text);
        let _ = parse_node_list(&json!({"items": items}).to_string());
    }

    #[test]
    fn a_corrupt_journal_never_panics_the_next_run(bytes in proptest::collection::vec(any::<u8>(), 0..400),
                                                   edits in byte_edits()) {
        let good = concat!(
            r#"{"event":"run-started","run":"r","time":"t","target":"v1.29.1"}"#, "\n",
            r#"{"event":"host-started","run":"r","time":"t","phase":"nodes","host":"n1"}"#, "\n",
            r#"{"event":"step-done","run":"r","time":"t","phase":"nodes","host":"n1","step":"drain"}"#, "\n",
        );
        for contents in [bytes, mutate_bytes(good, &edits).into_bytes()] {
            let dir = tempfile::tempdir().map_err(|e| TestCaseError::fail(e.to_string()))?;
            std::fs::write(dir.path().join("journal.jsonl"), &contents).map_err(|e| TestCaseError::fail(e.to_string()))?;
            let opened = Journal::open(dir.path(), false);
            prop_assert!(opened.is_ok(), "a damaged journal is read past, not refused: {:?}", opened.err());
        }
    }
}

/// A generated include graph: per file, its tasks as (shape, target file). Shapes: a plain include, an import, an
/// include inside `rescue:`, a templated (dynamic) include, a missing file, a task with a bad template.
fn include_graphs() -> impl Strategy<Value = Vec<Vec<(u8, usize)>>> {
    proptest::collection::vec(proptest::collection::vec((0u8..6, 0usize..6), 0..5), 1..6)
}

fn write_include_graph(dir: &Path, graph: &[Vec<(u8, usize)>]) {
    for (index, tasks) in graph.iter().enumerate() {
        let mut text = String::from("- debug: msg=start\n");
        for &(shape, target) in tasks {
            let target = format!("f{}.yml", target % graph.len());
            text.push_str(&match shape {
                0 => format!("- include_tasks: {target}\n"),
                1 => format!("- import_tasks: ./{target}\n"),
                2 => format!("- block:\n    - fail: msg=x\n  rescue:\n    - include_tasks: {target}\n"),
                3 => "- include_tasks: \"{{ next }}.yml\"\n".to_string(),
                4 => "- include_tasks: missing.yml\n".to_string(),
                _ => "- debug:\n    msg: \"{{ x | }}\"\n".to_string(),
            });
        }
        let _ = std::fs::write(dir.join(format!("f{index}.yml")), text);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// Any include graph, cycles and self-includes among them, is checked to the end: every mistake is reported
    /// once per file that has it, however many paths lead there.
    #[test]
    fn include_graphs_are_checked_once_per_file(graph in include_graphs()) {
        let dir = tempfile::tempdir().map_err(|e| TestCaseError::fail(e.to_string()))?;
        write_include_graph(dir.path(), &graph);
        let errors = crate::tasks::check_task_file(&dir.path().join("f0.yml"));
        let mistakes_per_file = |tasks: &Vec<(u8, usize)>| tasks.iter().filter(|(shape, _)| *shape >= 4).count();
        let most = graph.iter().map(mistakes_per_file).sum::<usize>();
        prop_assert!(errors.len() <= most, "{} errors for {most} mistakes: {errors:?}", errors.len());
    }
}

/// Deep nesting and long chains in templates are errors, never a stack overflow (which aborts the whole run).
#[test]
fn deep_templates_are_errors_not_crashes() {
    let templar = Templar::new();
    let vars = Vars::new(json!({"x": [1], "deep": format!("{{{{ x{} }}}}", ".a".repeat(20_000))}));
    let n = 20_000;
    for template in [
        format!("{{{{ x{} }}}}", ".a".repeat(n)),
        format!("{{{{ x{} }}}}", "[0]".repeat(n)),
        format!("{{{{ x{} }}}}", "|int".repeat(n)),
        format!("{{{{ x{} }}}}", "()".repeat(n)),
        format!("{{{{ 1{} }}}}", "+1".repeat(n)),
        format!("{{{{ 1{} }}}}", " and x".repeat(n)),
        format!("{{{{ 1{} }}}}", " if x else 1".repeat(n)),
        format!("{{{{ {}1 }}}}", "not ".repeat(n)),
        format!("{{{{ {}1 }}}}", "-".repeat(n)),
        format!("{{{{ {}1{} }}}}", "[".repeat(n), "]".repeat(n)),
        format!("{{{{ {}1{} }}}}", "(".repeat(n), ")".repeat(n)),
        format!("{{{{ {}1{} }}}}", "{'a':".repeat(n), "}".repeat(n)),
        format!("{}x{}", "{% if x %}".repeat(n), "{% endif %}".repeat(n)),
        format!("{}x{}", "{% for a in x %}".repeat(n), "{% endfor %}".repeat(n)),
        "{{ deep }}".to_string(),
    ] {
        // A thread with the stack of a tokio worker, where hooks are templated.
        let (templar, vars, t) = (&templar, &vars, template.as_str());
        std::thread::scope(|scope| {
            let run = std::thread::Builder::new().stack_size(2 << 20).spawn_scoped(scope, || {
                assert!(templar.render(t, vars).is_err(), "{}", &t[..40]);
                assert!(templar.render_str(t, vars).is_err());
                assert!(templar.eval_condition_str(t, vars).is_err());
                let bare = t.trim_start_matches("{{").trim_end_matches("}}");
                let _ = templar.check_condition_syntax(bare);
                let _ = templar.eval_expression(bare, vars);
                if t != "{{ deep }}" {
                    assert!(templar.check_syntax(t).is_err());
                }
            });
            run.expect("spawn").join().expect("no stack overflow, no panic");
        });
    }
    // A long chain that Ansible accepts still works.
    let long = format!("{{{{ 0{} }}}}", " + 1".repeat(500));
    assert_eq!(templar.render(&long, &vars).unwrap(), json!(500));
    // Operators inside strings do not count.
    let text = format!("{{{{ '{}' | length }}}}", "a.b|c+".repeat(2000));
    assert_eq!(templar.render(&text, &vars).unwrap(), json!(12_000));
}

#[test]
fn absurd_filter_arguments_are_errors_not_aborts() {
    let templar = Templar::new();
    let vars = Vars::new(json!({"x": [1, {"a": [2]}]}));
    for template in [
        "{{ x | to_nice_json(indent=99999999999999) }}",
        "{{ x | to_nice_json(indent=100000) }}",
        "{{ 'a' * 1000000000000 }}",
        "{{ [1] * 1000000000000 }}",
        "{{ 2 ** 100000 }}",
        "{{ 9223372036854775807 * 9223372036854775807 }}",
    ] {
        assert!(templar.render(template, &vars).is_err(), "{template}");
    }
    assert!(templar.render("{{ x | to_nice_json(indent=2) }}", &vars).is_ok());
}

/// Deeply nested YAML is an error naming the place, never a stack overflow (this runs on a test thread's 2 MB).
#[test]
fn deep_yaml_is_an_error_not_a_crash() {
    for text in [
        format!("x: {}", "[".repeat(10_000)),
        format!("x: {}1{}", "[".repeat(10_000), "]".repeat(10_000)),
        format!("x: {}1{}", "{a: ".repeat(10_000), "}".repeat(10_000)),
        (0..10_000).map(|i| format!("{}- \n", "  ".repeat(i))).collect::<String>(),
        // Within the parser's own limit, past ours: the tree is not built that deep on a 2 MB stack.
        (0..250).map(|i| format!("{}- \n", "  ".repeat(i))).collect::<String>(),
        (0..250).map(|i| format!("{}a{i}:\n", "  ".repeat(i))).collect::<String>(),
    ] {
        let err = crate::yaml::parse(&text, Path::new("deep.yml")).unwrap_err();
        assert!(err.location.as_ref().is_some_and(|l| l.line > 0), "{err}");
        let (_, errors) = parse_tasks(&text, Path::new("deep.yml"));
        assert_eq!(errors.len(), 1);
    }
}
