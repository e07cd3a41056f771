//! YAML read the way Ansible reads it (YAML 1.1 booleans, `0644` octal, `<<` merges), into a tree of nodes that
//! remember their line and column, so every later error can point at the user's file.

use std::path::Path;

use std::collections::HashMap;
use std::sync::LazyLock;

use granit_parser::{Event, Parser, ScalarStyle, ScanError, Span, Tag};
use regex::Regex;
use serde_json::Value;

use crate::error::{Error, Location, Result};

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Node {
    pub value: NodeValue,
    /// 1-based; 0 when the parser could not tell.
    pub line: usize,
    pub column: usize,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum NodeValue {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
    Seq(Vec<Node>),
    /// Keys keep their document order.
    Map(Vec<(Node, Node)>),
    /// A value under a local tag such as `!vault` or `!unsafe`: kept, so readers can refuse or honour it.
    Tagged(String, Box<Node>),
}

impl Node {
    pub(crate) fn location(&self, file: &Path) -> Location {
        Location::new(file, self.line, self.column)
    }

    pub(crate) fn as_str(&self) -> Option<&str> {
        match &self.value {
            NodeValue::Str(s) => Some(s),
            _ => None,
        }
    }

    pub(crate) fn as_map(&self) -> Option<&[(Node, Node)]> {
        match &self.value {
            NodeValue::Map(m) => Some(m),
            _ => None,
        }
    }

    pub(crate) fn as_seq(&self) -> Option<&[Node]> {
        match &self.value {
            NodeValue::Seq(s) => Some(s),
            _ => None,
        }
    }

    pub(crate) fn is_null(&self) -> bool {
        matches!(self.value, NodeValue::Null)
    }

    /// The value under a string key of a mapping.
    pub(crate) fn get(&self, key: &str) -> Option<&Node> {
        self.as_map()?.iter().find(|(k, _)| k.key_text() == key).map(|(_, v)| v)
    }

    /// A mapping key as text, the way Python would turn it into a dict key for Jinja.
    pub(crate) fn key_text(&self) -> String {
        match &self.value {
            NodeValue::Str(s) => s.clone(),
            NodeValue::Null => "None".into(),
            NodeValue::Bool(true) => "True".into(),
            NodeValue::Bool(false) => "False".into(),
            NodeValue::Int(i) => i.to_string(),
            NodeValue::Float(f) => f.to_string(),
            _ => self.to_json().to_string(),
        }
    }

    /// A short name for the node's type, for error messages ("expected a mapping, found a list").
    pub(crate) fn type_name(&self) -> &'static str {
        match &self.value {
            NodeValue::Null => "nothing (null)",
            NodeValue::Bool(_) => "a boolean",
            NodeValue::Int(_) => "an integer",
            NodeValue::Float(_) => "a number",
            NodeValue::Str(_) => "a string",
            NodeValue::Seq(_) => "a list",
            NodeValue::Map(_) => "a mapping",
            NodeValue::Tagged(..) => "a tagged value",
        }
    }

    /// The plain value, without positions: what variables and templates work with.
    pub(crate) fn to_json(&self) -> Value {
        match &self.value {
            NodeValue::Null => Value::Null,
            NodeValue::Bool(b) => Value::Bool(*b),
            NodeValue::Int(i) => Value::from(*i),
            NodeValue::Float(f) => serde_json::Number::from_f64(*f).map(Value::Number).unwrap_or(Value::Null),
            NodeValue::Str(s) => Value::String(s.clone()),
            NodeValue::Seq(items) => Value::Array(items.iter().map(Node::to_json).collect()),
            NodeValue::Map(entries) => {
                Value::Object(entries.iter().map(|(k, v)| (k.key_text(), v.to_json())).collect())
            }
            // `!unsafe` text is never templated, as in Ansible: its markup is wrapped so a render gives it back as is.
            NodeValue::Tagged(tag, inner) if tag == "unsafe" => untemplatable(inner.to_json()),
            NodeValue::Tagged(_, inner) => inner.to_json(),
        }
    }
}

/// `!unsafe` text that a Jinja render gives back unchanged: its markup is wrapped in `{% raw %}`. A text value needs
/// it, and so do the strings of a list (variables are rendered when used, lists of strings included; the strings
/// inside mappings are not). Leading line
/// breaks stay outside the wrap, where the block tag's newline trimming cannot eat them; text that itself holds
/// `endraw` is left as it is.
fn untemplatable(value: Value) -> Value {
    match value {
        Value::String(s) if ["{{", "{%", "{#"].iter().any(|m| s.contains(m)) && !s.contains("endraw") => {
            let body = s.trim_start_matches(['\r', '\n']);
            let lead = &s[..s.len() - body.len()];
            Value::String(format!("{lead}{{% raw %}}{body}{{% endraw %}}"))
        }
        Value::Array(items) => {
            Value::Array(items.into_iter().map(|v| if v.is_string() { untemplatable(v) } else { v }).collect())
        }
        other => other,
    }
}

/// Parses one YAML document. An empty document is `Ok(None)`. Errors name the file, line and column.
pub(crate) fn parse(text: &str, file: &Path) -> Result<Option<Node>> {
    let mut builder = Builder { file, anchors: HashMap::new(), depth: 0 };
    let mut parser = Parser::new_from_str(text);
    let mut events = std::iter::from_fn(move || parser.next_event());
    let mut doc = None;
    let mut documents = 0;
    while let Some(event) = events.next() {
        let (event, span) = event.map_err(|e| scan_error(&e, file))?;
        match event {
            Event::StreamStart | Event::DocumentEnd => {}
            Event::StreamEnd => break,
            Event::DocumentStart(..) => {
                documents += 1;
                if documents > 1 {
                    return Err(Error::input("more than one YAML document in this file")
                        .at(Location::new(file, span.start.line(), span.start.col() + 1))
                        .hint("keep one document per file: remove the second `---`"));
                }
                doc = builder.node(&mut events)?;
            }
            other => doc = builder.node_from(other, span, &mut events)?,
        }
    }
    Ok(doc)
}

type Events<'a, 'b> = dyn Iterator<Item = std::result::Result<(Event<'a>, Span), ScanError>> + 'b;

/// How deep collections may nest. The tree is built recursively, with a frame per level: the parser's own limit
/// (256) is past what a 2 MB thread (a tokio worker, a test) holds in a debug build, and a stack overflow aborts the
/// whole run. No inventory, variable or task file nests anywhere near this deep.
const MAX_DEPTH: usize = 128;

struct Builder<'f> {
    file: &'f Path,
    anchors: HashMap<usize, Node>,
    /// Collections open around the node being read.
    depth: usize,
}

impl Builder<'_> {
    fn next<'a>(&self, events: &mut Events<'a, '_>) -> Result<Option<(Event<'a>, Span)>> {
        match events.next() {
            None => Ok(None),
            Some(Ok(pair)) => Ok(Some(pair)),
            Some(Err(e)) => Err(scan_error(&e, self.file)),
        }
    }

    /// Reads the next node; `None` at the end of a document.
    fn node<'a>(&mut self, events: &mut Events<'a, '_>) -> Result<Option<Node>> {
        while let Some((event, span)) = self.next(events)? {
            match event {
                Event::DocumentEnd | Event::StreamEnd | Event::SequenceEnd | Event::MappingEnd => return Ok(None),
                other => {
                    if let Some(node) = self.node_from(other, span, events)? {
                        return Ok(Some(node));
                    }
                }
            }
        }
        Ok(None)
    }

    fn node_from<'a>(&mut self, event: Event<'a>, span: Span, events: &mut Events<'a, '_>) -> Result<Option<Node>> {
        let (line, column) = (span.start.line(), span.start.col() + 1);
        if !matches!(event, Event::SequenceStart(..) | Event::MappingStart(..)) {
            return self.build(event, line, column, events);
        }
        if self.depth >= MAX_DEPTH {
            return Err(Error::input(format!("YAML nested more than {MAX_DEPTH} levels deep"))
                .at(Location::new(self.file, line, column))
                .hint("flatten the structure; no inventory, variable or task file needs this depth"));
        }
        self.depth += 1;
        let node = self.build(event, line, column, events);
        self.depth -= 1;
        node
    }

    fn build<'a>(
        &mut self,
        event: Event<'a>,
        line: usize,
        column: usize,
        events: &mut Events<'a, '_>,
    ) -> Result<Option<Node>> {
        let at = |value| Node { value, line, column };
        let (node, anchor) = match event {
            Event::Scalar(text, style, anchor, tag) => {
                (at(resolve_scalar(&text, style, tag.as_deref(), self.file, line, column)?), anchor)
            }
            Event::Alias(id) => {
                let mut node = self.anchors.get(&id).cloned().ok_or_else(|| {
                    Error::input("alias to an unknown anchor").at(Location::new(self.file, line, column))
                })?;
                node.line = line;
                node.column = column;
                return Ok(Some(node));
            }
            Event::SequenceStart(_, anchor, tag) => {
                let mut items = Vec::new();
                while let Some((event, span)) = self.next(events)? {
                    if matches!(event, Event::SequenceEnd) {
                        break;
                    }
                    if let Some(item) = self.node_from(event, span, events)? {
                        items.push(item);
                    }
                }
                (wrap_tag(at(NodeValue::Seq(items)), tag.as_deref()), anchor)
            }
            Event::MappingStart(_, anchor, tag) => {
                let mut entries: Vec<(Node, Node)> = Vec::new();
                let mut merged: Vec<(Node, Node)> = Vec::new();
                while let Some((event, span)) = self.next(events)? {
                    if matches!(event, Event::MappingEnd) {
                        break;
                    }
                    let Some(key) = self.node_from(event, span, events)? else { continue };
                    let value = self.node(events)?.unwrap_or_else(|| at(NodeValue::Null));
                    if key.value == NodeValue::Str("<<".into()) {
                        self.merge_into(&mut merged, value)?;
                        continue;
                    }
                    insert_last_wins(&mut entries, key, value);
                }
                // Keys written in the mapping win over merged ones, whatever their order.
                for (k, v) in merged {
                    if !entries.iter().any(|(ek, _)| ek.value == k.value) {
                        entries.push((k, v));
                    }
                }
                (wrap_tag(at(NodeValue::Map(entries)), tag.as_deref()), anchor)
            }
            _ => return Ok(None),
        };
        if anchor != 0 {
            self.anchors.insert(anchor, node.clone());
        }
        Ok(Some(node))
    }

    fn merge_into(&self, merged: &mut Vec<(Node, Node)>, value: Node) -> Result<()> {
        let not_a_mapping = |node: &Node| {
            Error::input(format!("`<<` merges a mapping or a list of mappings, found {}", node.type_name()))
                .at(Location::new(self.file, node.line, node.column))
        };
        let sources: Vec<Node> = match &value.value {
            NodeValue::Map(_) => vec![value],
            NodeValue::Seq(items) => items.clone(),
            _ => return Err(not_a_mapping(&value)),
        };
        // In a list of merged mappings the first one wins.
        for source in &sources {
            let map = source.as_map().ok_or_else(|| not_a_mapping(source))?;
            for (k, v) in map {
                if !merged.iter().any(|(mk, _)| mk.value == k.value) {
                    merged.push((k.clone(), v.clone()));
                }
            }
        }
        Ok(())
    }
}

/// PyYAML keeps the last of duplicate keys; the key keeps its first place in the order.
fn insert_last_wins(entries: &mut Vec<(Node, Node)>, key: Node, value: Node) {
    if let Some(slot) = entries.iter_mut().find(|(k, _)| k.value == key.value) {
        slot.1 = value;
    } else {
        entries.push((key, value));
    }
}

fn wrap_tag(node: Node, tag: Option<&Tag>) -> Node {
    match tag {
        Some(tag) if tag.handle() == "!" => {
            let (line, column) = (node.line, node.column);
            Node { value: NodeValue::Tagged(tag.suffix().to_string(), Box::new(node)), line, column }
        }
        _ => node,
    }
}

fn scan_error(err: &ScanError, file: &Path) -> Error {
    let marker = err.marker();
    let text = err.to_string();
    // The parser appends its own position (" at char 12 line 1 column 13", or " at byte ..."); we print ours.
    let message = [" at char ", " at byte "]
        .iter()
        .filter_map(|marker| text.find(marker))
        .min()
        .map_or(text.as_str(), |end| &text[..end])
        .trim()
        .to_string();
    Error::input(format!("invalid YAML: {message}"))
        .at(Location::new(file, marker.line(), marker.col() + 1))
        .hint("fix the YAML syntax at that line (indentation, quoting, a missing ':')")
}

/// PyYAML's YAML 1.1 implicit resolvers, which is what Ansible applies to every plain scalar.
fn resolve_scalar(
    text: &str,
    style: ScalarStyle,
    tag: Option<&Tag>,
    file: &Path,
    line: usize,
    column: usize,
) -> Result<NodeValue> {
    let bad = |what: &str| {
        Error::input(format!("`{text}` is not a valid {what}"))
            .at(Location::new(file, line, column))
            .hint(format!("write a {what}, or drop the explicit tag"))
    };
    if let Some(tag) = tag {
        let core = tag.handle() == "tag:yaml.org,2002:";
        return match (core, tag.suffix()) {
            (true, "int") => parse_int(text).map(NodeValue::Int).ok_or_else(|| bad("integer")),
            (true, "float") => parse_float(text).map(NodeValue::Float).ok_or_else(|| bad("number")),
            (true, "bool") => parse_bool(text).map(NodeValue::Bool).ok_or_else(|| bad("boolean")),
            (true, "null") => Ok(NodeValue::Null),
            (false, suffix) if tag.handle() == "!" => {
                let inner = Node { value: NodeValue::Str(text.to_string()), line, column };
                Ok(NodeValue::Tagged(suffix.to_string(), Box::new(inner)))
            }
            _ => Ok(NodeValue::Str(text.to_string())),
        };
    }
    if style != ScalarStyle::Plain {
        return Ok(NodeValue::Str(text.to_string()));
    }
    if matches!(text, "" | "~" | "null" | "Null" | "NULL") {
        return Ok(NodeValue::Null);
    }
    if let Some(b) = parse_bool(text) {
        return Ok(NodeValue::Bool(b));
    }
    if let Some(i) = parse_int(text) {
        return Ok(NodeValue::Int(i));
    }
    if FLOAT_1_1.is_match(text) {
        if let Some(f) = parse_float(text) {
            return Ok(NodeValue::Float(f));
        }
    }
    Ok(NodeValue::Str(text.to_string()))
}

fn parse_bool(text: &str) -> Option<bool> {
    match text {
        "yes" | "Yes" | "YES" | "true" | "True" | "TRUE" | "on" | "On" | "ON" => Some(true),
        "no" | "No" | "NO" | "false" | "False" | "FALSE" | "off" | "Off" | "OFF" => Some(false),
        _ => None,
    }
}

static INT_1_1: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(concat!(
        r"^(?:[-+]?0b[0-1_]+|[-+]?0[0-7_]+|[-+]?(?:0|[1-9][0-9_]*)",
        r"|[-+]?0x[0-9a-fA-F_]+|[-+]?[1-9][0-9_]*(?::[0-5]?[0-9])+)$"
    ))
    .expect("valid regex")
});

static FLOAT_1_1: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(concat!(
        r"^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+][0-9]+)?|\.[0-9_]+(?:[eE][-+][0-9]+)?",
        r"|[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+\.[0-9_]*|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"
    ))
    .expect("valid regex")
});

fn parse_int(text: &str) -> Option<i64> {
    if !INT_1_1.is_match(text) {
        return None;
    }
    let cleaned = text.replace('_', "");
    let (negative, digits) = match cleaned.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, cleaned.trim_start_matches('+')),
    };
    let magnitude: i64 = if let Some(bin) = digits.strip_prefix("0b") {
        i64::from_str_radix(bin, 2).ok()?
    } else if let Some(hex) = digits.strip_prefix("0x") {
        i64::from_str_radix(hex, 16).ok()?
    } else if digits.contains(':') {
        // Sexagesimal, as YAML 1.1 has it: 1:30 is 90.
        digits.split(':').try_fold(0i64, |acc, part| acc.checked_mul(60)?.checked_add(part.parse::<i64>().ok()?))?
    } else if digits.len() > 1 && digits.starts_with('0') {
        i64::from_str_radix(&digits[1..], 8).ok()?
    } else {
        digits.parse().ok()?
    };
    Some(if negative { -magnitude } else { magnitude })
}

fn parse_float(text: &str) -> Option<f64> {
    let cleaned = text.replace('_', "").to_ascii_lowercase();
    match cleaned.as_str() {
        ".inf" | "+.inf" => return Some(f64::INFINITY),
        "-.inf" => return Some(f64::NEG_INFINITY),
        ".nan" => return Some(f64::NAN),
        _ => {}
    }
    let (negative, body) = match cleaned.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, cleaned.trim_start_matches('+')),
    };
    let value = if body.contains(':') {
        body.split(':').try_fold(0.0, |acc, part| Some(acc * 60.0 + part.parse::<f64>().ok()?))?
    } else {
        body.parse().ok()?
    };
    Some(if negative { -value } else { value })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(text: &str) -> Node {
        parse(text, Path::new("t.yml")).unwrap().unwrap()
    }

    #[test]
    fn scalars_read_as_ansible_reads_them() {
        let n = p("a: yes\nb: 'yes'\nc: 0644\nd: 1.5\ne: ~\nf: on\ng: \"0644\"\nh: No\n");
        assert_eq!(n.get("a").unwrap().value, NodeValue::Bool(true));
        assert_eq!(n.get("b").unwrap().value, NodeValue::Str("yes".into()));
        assert_eq!(n.get("c").unwrap().value, NodeValue::Int(420));
        assert_eq!(n.get("d").unwrap().value, NodeValue::Float(1.5));
        assert_eq!(n.get("e").unwrap().value, NodeValue::Null);
        assert_eq!(n.get("f").unwrap().value, NodeValue::Bool(true));
        assert_eq!(n.get("g").unwrap().value, NodeValue::Str("0644".into()));
        assert_eq!(n.get("h").unwrap().value, NodeValue::Bool(false));
    }

    #[test]
    fn nodes_know_their_line() {
        let n = p("all:\n  hosts:\n    a:\n    b:\n  vars:\n    x: [1, 2]\n");
        let hosts = n.get("all").unwrap().get("hosts").unwrap().as_map().unwrap();
        assert_eq!(hosts[1].0.line, 4);
        assert_eq!(n.get("all").unwrap().get("vars").unwrap().get("x").unwrap().line, 6);
    }

    #[test]
    fn merges_expand() {
        let n = p("base: &b {x: 1, y: 2}\nother:\n  <<: *b\n  y: 3\n");
        let other = n.get("other").unwrap();
        assert_eq!(other.to_json(), serde_json::json!({"x": 1, "y": 3}));
    }

    #[test]
    fn syntax_errors_name_the_line() {
        let err = parse("a: 1\nb: [1, 2\nc: 3\n", Path::new("bad.yml")).unwrap_err();
        let loc = err.location.unwrap();
        assert_eq!(&*loc.file, Path::new("bad.yml"));
        assert!(loc.line >= 2, "{loc}");
    }

    #[test]
    fn only_pyyaml_booleans_are_booleans() {
        let n = p("y: n\nk: Y\n");
        assert_eq!(n.get("y").unwrap().value, NodeValue::Str("n".into()));
        assert_eq!(n.get("k").unwrap().value, NodeValue::Str("Y".into()));
    }

    #[test]
    fn numbers_follow_yaml_1_1() {
        let n = p("a: 1e3\nb: 1.0e+3\nc: 0x1F\nd: 1_000\ne: 08\nf: -0o7\ng: 1:30\n");
        assert_eq!(n.get("a").unwrap().value, NodeValue::Str("1e3".into()));
        assert_eq!(n.get("b").unwrap().value, NodeValue::Float(1000.0));
        assert_eq!(n.get("c").unwrap().value, NodeValue::Int(31));
        assert_eq!(n.get("d").unwrap().value, NodeValue::Int(1000));
        assert_eq!(n.get("e").unwrap().value, NodeValue::Str("08".into()));
        assert_eq!(n.get("f").unwrap().value, NodeValue::Str("-0o7".into()));
        assert_eq!(n.get("g").unwrap().value, NodeValue::Int(90));
    }

    #[test]
    fn local_tags_are_kept() {
        let n = p("secret: !vault |\n  $ANSIBLE_VAULT;1.1;AES256\n  6162\n");
        assert!(matches!(&n.get("secret").unwrap().value, NodeValue::Tagged(t, _) if t == "vault"));
    }

    #[test]
    fn empty_document_is_none() {
        assert!(parse("", Path::new("e.yml")).unwrap().is_none());
        assert!(parse("# only a comment\n", Path::new("e.yml")).unwrap().is_none());
    }
}
