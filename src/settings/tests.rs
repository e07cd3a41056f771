// The moved tests read the parent as the single file it was: what each file of it imports, and more.
#![allow(unused_imports)]

use super::*;
use super::{hooks::*, labels::*, limits::*, max_fail_percentage::*, readers::*, resolve::*, serial::*, target::*};
use crate::ansible_compat::unquote;
use crate::error::{Error, Result};
use crate::inventory::{Origin, Var, Vars, python_int};
use serde_json::Value;
use serde_json::json;
use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

fn items(s: &Serial) -> Vec<SerialItem> {
    s.items().to_vec()
}

#[test]
fn serial_reads_every_form_operators_write() {
    use SerialItem::*;
    for (text, want) in [
        ("2", vec![Count(2)]),
        ("'2'", vec![Count(2)]),
        ("25%", vec![Percent(25)]),
        ("150%", vec![Percent(150)]),
        ("[1, '20%', -1]", vec![Count(1), Percent(20), Count(-1)]),
        ("[1, \"20%\", -1]", vec![Count(1), Percent(20), Count(-1)]),
        ("1,20%,-1", vec![Count(1), Percent(20), Count(-1)]),
        ("[3]", vec![Count(3)]),
        ("0", vec![Count(0)]),
    ] {
        assert_eq!(items(&Serial::parse(text).unwrap()), want, "{text}");
    }
    for (value, want) in [
        (json!(2), vec![Count(2)]),
        (json!("20%"), vec![Percent(20)]),
        (json!([1, "20%", -1]), vec![Count(1), Percent(20), Count(-1)]),
        (json!(["2", 3]), vec![Count(2), Count(3)]),
    ] {
        assert_eq!(items(&Serial::from_value(&value).unwrap()), want, "{value}");
    }
}

#[test]
fn serial_refuses_nonsense_with_a_hint() {
    for text in ["abc", "-1%", "[]", "[", "1,,2", "2.5", "%", "x%", ""] {
        let err = Serial::parse(text).unwrap_err();
        assert!(err.message.contains("serial"), "{text}: {err}");
        assert!(err.hint.is_some(), "{text}");
    }
    for value in [json!([]), json!(true), json!(2.5), json!({"a": 1}), json!([[1]])] {
        assert!(Serial::from_value(&value).is_err(), "{value}");
    }
}

#[test]
fn forks_are_whole_numbers_from_one() {
    assert_eq!(Forks::parse("5").unwrap().get(), 5);
    assert_eq!(Forks::parse(" '12' ").unwrap().get(), 12);
    assert_eq!(Forks::from_value(&json!(3)).unwrap().get(), 3);
    assert_eq!(Forks::from_value(&json!("4")).unwrap().get(), 4);
    assert_eq!(Forks::default().get(), 50);
    for bad in ["0", "-1", "many", "", "2.5"] {
        assert!(Forks::parse(bad).is_err(), "{bad}");
    }
    for bad in [json!(0), json!(-3), json!(1.5), json!(true), json!(null)] {
        assert!(Forks::from_value(&bad).is_err(), "{bad}");
    }
    assert_eq!(Forks::parse(&Forks::new(9).unwrap().to_string()).unwrap().get(), 9);
}

#[test]
fn serial_prints_back_what_parses_again() {
    for text in ["2", "20%", "[1, \"20%\", -1]", "-1"] {
        let s = Serial::parse(text).unwrap();
        assert_eq!(s.to_string(), text);
        assert_eq!(Serial::parse(&s.to_string()).unwrap(), s);
    }
    assert_eq!(Serial::parse("1,20%,-1").unwrap().to_json(), json!([1, "20%", -1]));
}

#[test]
fn max_fail_percentage_is_liberal_where_ansible_is() {
    for (text, want) in [("30", 30.0), ("30%", 30.0), ("0", 0.0), ("100", 100.0), ("12.5", 12.5), ("'49'", 49.0)] {
        assert_eq!(MaxFailPercentage::parse(text).unwrap().percent(), want, "{text}");
    }
    for text in ["101", "-1", "abc", "", "nan", "inf"] {
        assert!(MaxFailPercentage::parse(text).is_err(), "{text}");
    }
    assert!(MaxFailPercentage::from_value(&json!(101)).is_err());
    assert!(MaxFailPercentage::from_value(&json!(true)).is_err());
    assert_eq!(MaxFailPercentage::from_value(&json!(49)).unwrap().to_string(), "49");
    assert_eq!(MaxFailPercentage::from_value(&json!("12.5%")).unwrap().to_string(), "12.5");
}

#[test]
fn drain_timeout_reads_seconds_and_durations() {
    for (text, want) in
        [("0", 0), ("90", 90), ("90s", 90), ("10m", 600), ("1h30m", 5400), ("1h 30m 5s", 5405), ("2d", 172_800)]
    {
        assert_eq!(DrainTimeout::parse(text).unwrap().seconds(), want, "{text}");
    }
    for text in ["", "abc", "-5", "10x", "m", "1.5h", "99999999999999999999h"] {
        assert!(DrainTimeout::parse(text).is_err(), "{text}");
    }
    assert_eq!(DrainTimeout::from_value(&json!(600)).unwrap().seconds(), 600);
    assert!(DrainTimeout::from_value(&json!(-1)).is_err());
    for secs in [0, 59, 90, 3600, 5405] {
        let d = DrainTimeout::from_secs(secs);
        assert_eq!(DrainTimeout::parse(&d.to_string()).unwrap(), d);
    }
    assert_eq!(DrainTimeout::from_secs(5400).to_string(), "1h30m");
}

#[test]
fn label_selectors_match_like_kubernetes() {
    let labels: BTreeMap<String, String> =
        [("region", "group1"), ("node-role.kubernetes.io/compute", "true")].map(|(k, v)| (k.into(), v.into())).into();
    for (selector, want) in [
        ("region=group1", true),
        ("region==group1", true),
        ("region!=group1", false),
        ("region=group2", false),
        ("zone!=a", true),
        ("node-role.kubernetes.io/compute=true,region=group1", true),
        ("node-role.kubernetes.io/compute=true,region=group2", false),
        ("region", true),
        ("!region", false),
        ("!zone", true),
        ("region=", false),
    ] {
        assert_eq!(LabelSelector::parse(selector).unwrap().matches(&labels), want, "{selector}");
    }
    for bad in ["", "a=b,", "=b", "a b=c", "-a=b", "a=b c", "env in (a,b)", "Example.com/a=b", &"x".repeat(64)] {
        assert!(LabelSelector::parse(bad).is_err(), "{bad}");
    }
    let s = LabelSelector::parse(" a==b , c!=d ,e, !f").unwrap();
    assert_eq!(s.to_string(), "a=b,c!=d,e,!f");
    assert_eq!(LabelSelector::parse(&s.to_string()).unwrap(), s);
}

#[test]
fn target_versions_compare_by_release() {
    let v = TargetVersion::parse("v1.29.1").unwrap();
    assert_eq!(v, TargetVersion::parse("1.29.1").unwrap());
    assert_eq!(v.to_string(), "v1.29.1");
    assert_eq!(v, TargetVersion::parse("v1.29.1+k3s1").unwrap());
    assert!(v < TargetVersion::parse("1.30.0").unwrap());
    assert!(v > TargetVersion::parse("1.28.15").unwrap());
    assert!(v < TargetVersion::parse("1.29.10").unwrap());
    for bad in ["", "1.29", "v1.x.1", "1.29.1.2", "latest", "v-1.2.3"] {
        assert!(TargetVersion::parse(bad).is_err(), "{bad}");
    }
}

#[test]
fn distribution_suffixes_do_not_make_a_node_differ_from_its_target() {
    let target = TargetVersion::parse("1.29.1").unwrap();
    for reported in ["v1.29.1", "1.29.1", "v1.29.1-eks-123", "v1.29.1-gke.1589018", "v1.29.1+k3s1"] {
        assert!(target.is_reported_by(reported), "{reported}");
        assert_eq!(TargetVersion::parse(reported).unwrap().release(), "v1.29.1", "{reported}");
    }
    assert!(TargetVersion::parse("v1.11.0").unwrap().is_reported_by("v1.11.0+d4cacc0"));
    for other in ["v1.29.10", "v1.29.0-eks-1", "v1.30.1+k3s1", "1.29", "garbage", ""] {
        assert!(!target.is_reported_by(other), "{other}");
    }
}

#[test]
fn python_literals_from_ini_vars() {
    let v = parse_python_literal(
        "[{'name': 'node-config-compute', 'labels': ['node-role.kubernetes.io/compute=true', \"a=b\"]}, \
         {'name': 'x', 'labels': [], 'edits': None, 'ok': True, 'n': -2}]",
    )
    .unwrap();
    assert_eq!(v[0]["labels"][1], json!("a=b"));
    assert_eq!(v[1]["edits"], Value::Null);
    assert_eq!(v[1]["n"], json!(-2));
    assert!(parse_python_literal("[1, 2").is_none());
    assert!(parse_python_literal("{'a' 1}").is_none());
    assert!(parse_python_literal(&"[".repeat(1000)).is_none());
}

#[test]
fn labels_come_from_mappings_strings_and_lists() {
    let want: BTreeMap<String, String> = [("a", "b"), ("c", "d")].map(|(k, v)| (k.into(), v.into())).into();
    assert_eq!(labels_from_value(&json!({"a": "b", "c": "d"})).unwrap(), want);
    assert_eq!(labels_from_value(&json!("a=b, c=d")).unwrap(), want);
    assert_eq!(labels_from_value(&json!(["a=b", "c=d"])).unwrap(), want);
    assert_eq!(labels_from_value(&json!("{'a': 'b', 'c': 'd'}")).unwrap(), want);
    assert!(labels_from_value(&json!("nolabel")).is_none());
}

#[test]
fn the_pause_timeout_is_a_duration_a_day_by_default_and_zero_waits_for_ever() {
    use std::time::Duration;
    assert_eq!(pause_timeout("").unwrap(), Some(Duration::from_secs(24 * 3600)));
    assert_eq!(pause_timeout("90").unwrap(), Some(Duration::from_secs(90)));
    assert_eq!(pause_timeout("\"2h\"").unwrap(), Some(Duration::from_secs(7200)));
    assert_eq!(pause_timeout("0").unwrap(), None, "0 waits for ever, as kubectl drain --timeout=0s");
    for bad in ["a while", "-10", "1y", "1.5h"] {
        let err = pause_timeout(bad).unwrap_err();
        assert!(err.message.contains("upgrade_pause_timeout"), "{bad}: {err}");
        assert!(err.hint.as_deref().is_some_and(|h| h.contains("0 waits for ever")), "{bad}: {err}");
    }
}
