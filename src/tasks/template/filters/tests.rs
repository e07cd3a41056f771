// The moved tests read the parent as the single file it was: what each file of it imports, and more.
#![allow(unused_imports)]

use super::{
    collections::*, formats::*, lookups::*, methods::*, predicates::*, regex_filters::*, scalars::*, values::*,
    versions::*,
};
use crate::ansible_compat::{boolean, shell_quote};
use crate::tasks::template::pyfmt::{JsonStyle, py_json, py_str};
use minijinja::value::{Kwargs, Rest, Serde, Value, ValueKind};
use minijinja::{Environment, Error, ErrorKind, State};
use std::cmp::Ordering;
use std::sync::Arc;

use super::*;

#[test]
fn loose_versions_compare_like_distutils() {
    assert_eq!(compare_loose("1.29.1", "1.28"), Ok(Ordering::Greater));
    assert_eq!(compare_loose("1.10", "1.9"), Ok(Ordering::Greater));
    assert_eq!(compare_loose("1.2", "1.2.0"), Ok(Ordering::Less));
    assert!(compare_loose("v1.29.1", "1.28").is_err());
    assert_eq!(compare_loose("4.11.0-0.nightly", "4.11.0"), Ok(Ordering::Greater));
}

#[test]
fn python_replacements() {
    assert_eq!(python_replacement(r"\1-\g<2>-\g<name>$"), "${1}-${2}-${name}$$");
}

#[test]
fn base64_round_trip() {
    for s in ["", "a", "ab", "abc", "abcd", "héllo wörld"] {
        let e = base64_encode(s.as_bytes());
        assert_eq!(base64_decode(&e).as_deref(), Some(s.as_bytes()));
    }
    assert_eq!(base64_encode(b"hello"), "aGVsbG8=");
}

#[test]
fn paths_like_python() {
    assert_eq!(basename("/a/b.txt"), "b.txt");
    assert_eq!(basename("/a/b/"), "");
    assert_eq!(dirname("/a/b.txt"), "/a");
    assert_eq!(dirname("/a"), "/");
    assert_eq!(dirname("a"), "");
    assert_eq!(dirname("a/b/"), "a/b");
    assert_eq!(shell_quote("it's"), "'it'\"'\"'s'");
    assert_eq!(shell_quote("/etc/x.conf"), "/etc/x.conf");
}
