//! Python's `ast.literal_eval`, as Ansible's INI plugin applies it to every `key=value` value: numbers, strings,
//! `True`/`False`/`None`, lists, tuples, sets and dicts become values; anything else stays the raw string.

use serde_json::{Map, Number, Value};

/// Python's own parser gives up ("too many nested parentheses") around this depth.
const MAX_NESTING: usize = 200;

/// A value `literal_eval` accepted, before Ansible's coercion (tuples and sets to lists, bytes to text).
#[derive(Debug, Clone, PartialEq)]
enum Lit {
    None,
    Bool(bool),
    Int(i128),
    Float(f64),
    Complex(f64, f64),
    Str(String),
    Bytes(Vec<u8>),
    List(Vec<Lit>),
    Tuple(Vec<Lit>),
    Set(Vec<Lit>),
    Dict(Vec<(Lit, Lit)>),
    Ellipsis,
}

/// Why a value could not be evaluated.
#[derive(Debug, PartialEq)]
pub(super) enum Failure {
    /// Python raises ValueError or SyntaxError: Ansible keeps the raw text.
    NotALiteral,
    /// Python raises TypeError (a list as a dict key or set member): Ansible fails to parse the inventory.
    Unhashable(&'static str),
}

/// Ansible's `_parse_value`: the evaluated literal, or the text itself when it is not one.
/// Errors only where Ansible's parse fails as a whole (an unhashable dict key).
pub fn parse_value(text: &str) -> Result<Value, String> {
    match literal_eval(text) {
        Ok(v) => Ok(v),
        Err(Failure::NotALiteral) => Ok(Value::String(text.to_string())),
        Err(Failure::Unhashable(t)) => Err(format!("unhashable type: '{t}' in `{text}`")),
    }
}

/// `ast.literal_eval(text)` followed by Ansible's coercion of the result to plain data.
pub(super) fn literal_eval(text: &str) -> Result<Value, Failure> {
    let mut p = Parser { chars: text.chars().collect(), pos: 0, depth: 0 };
    // literal_eval strips leading spaces and tabs itself.
    while matches!(p.peek(), Some(' ' | '\t')) {
        p.pos += 1;
    }
    let lit = p.expression_list(false)?;
    p.skip_ws(false);
    if p.pos < p.chars.len() {
        return Err(Failure::NotALiteral);
    }
    Ok(to_value(lit))
}

struct Parser {
    chars: Vec<char>,
    pos: usize,
    depth: usize,
}

impl Parser {
    fn peek(&self) -> Option<char> {
        self.chars.get(self.pos).copied()
    }

    fn peek_at(&self, offset: usize) -> Option<char> {
        self.chars.get(self.pos + offset).copied()
    }

    /// Skips blanks and comments; newlines only inside brackets, where Python ignores them.
    fn skip_ws(&mut self, in_brackets: bool) {
        while let Some(c) = self.peek() {
            match c {
                ' ' | '\t' | '\x0c' => self.pos += 1,
                '\n' | '\r' if in_brackets => self.pos += 1,
                '\\' if matches!(self.peek_at(1), Some('\n')) => self.pos += 2,
                '#' => {
                    while let Some(c) = self.peek() {
                        if c == '\n' {
                            break;
                        }
                        self.pos += 1;
                    }
                }
                _ => break,
            }
        }
    }

    fn eat(&mut self, c: char, in_brackets: bool) -> bool {
        self.skip_ws(in_brackets);
        if self.peek() == Some(c) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    fn at_closer(&mut self, in_brackets: bool) -> bool {
        self.skip_ws(in_brackets);
        matches!(self.peek(), None | Some(')' | ']' | '}'))
    }

    /// `a` or `a, b, ...` (a tuple); `allow_empty` for `()`.
    fn expression_list(&mut self, in_brackets: bool) -> Result<Lit, Failure> {
        let first = self.expression(in_brackets)?;
        if !self.eat(',', in_brackets) {
            return Ok(first);
        }
        let mut items = vec![first];
        while !self.at_closer(in_brackets) {
            items.push(self.expression(in_brackets)?);
            if !self.eat(',', in_brackets) {
                break;
            }
        }
        Ok(Lit::Tuple(items))
    }

    /// One literal, with literal_eval's arithmetic: a sign on a number, and `real ± imaginary`.
    fn expression(&mut self, in_brackets: bool) -> Result<Lit, Failure> {
        self.skip_ws(in_brackets);
        let left = self.signed(in_brackets)?;
        self.skip_ws(in_brackets);
        let op = match self.peek() {
            Some(c @ ('+' | '-')) => c,
            _ => return Ok(left),
        };
        self.pos += 1;
        self.skip_ws(in_brackets);
        let right = self.signed_operand(in_brackets)?;
        let sign = if op == '+' { 1.0 } else { -1.0 };
        match (left, right) {
            (Lit::Int(a), Lit::Complex(0.0, b)) => Ok(Lit::Complex(a as f64, sign * b)),
            (Lit::Float(a), Lit::Complex(0.0, b)) => Ok(Lit::Complex(a, sign * b)),
            _ => Err(Failure::NotALiteral),
        }
    }

    fn signed(&mut self, in_brackets: bool) -> Result<Lit, Failure> {
        match self.peek() {
            Some(c @ ('+' | '-')) => {
                self.pos += 1;
                self.skip_ws(in_brackets);
                let value = self.signed_operand(in_brackets)?;
                let negate = c == '-';
                match value {
                    Lit::Int(i) => Ok(Lit::Int(if negate { -i } else { i })),
                    Lit::Float(f) => Ok(Lit::Float(if negate { -f } else { f })),
                    Lit::Complex(r, i) => Ok(if negate { Lit::Complex(-r, -i) } else { Lit::Complex(r, i) }),
                    _ => Err(Failure::NotALiteral),
                }
            }
            _ => self.atom(in_brackets),
        }
    }

    /// The operand of a sign or of `±` must be a bare number.
    fn signed_operand(&mut self, in_brackets: bool) -> Result<Lit, Failure> {
        match self.peek() {
            Some(c) if c.is_ascii_digit() || (c == '.' && self.peek_at(1).is_some_and(|d| d.is_ascii_digit())) => {
                self.number()
            }
            _ => {
                let _ = in_brackets;
                Err(Failure::NotALiteral)
            }
        }
    }

    fn atom(&mut self, in_brackets: bool) -> Result<Lit, Failure> {
        let Some(c) = self.peek() else { return Err(Failure::NotALiteral) };
        match c {
            '0'..='9' => self.number(),
            '.' if self.peek_at(1).is_some_and(|d| d.is_ascii_digit()) => self.number(),
            '.' if self.peek_at(1) == Some('.') && self.peek_at(2) == Some('.') => {
                self.pos += 3;
                Ok(Lit::Ellipsis)
            }
            '(' | '[' | '{' => {
                self.depth += 1;
                if self.depth > MAX_NESTING {
                    return Err(Failure::NotALiteral);
                }
                self.pos += 1;
                let result = match c {
                    '(' => self.tuple(),
                    '[' => self.list(),
                    _ => self.dict_or_set(),
                };
                self.depth -= 1;
                result
            }
            '\'' | '"' => self.strings(in_brackets),
            c if c.is_alphabetic() || c == '_' => {
                let start = self.pos;
                while self.peek().is_some_and(|c| c.is_alphanumeric() || c == '_') {
                    self.pos += 1;
                }
                let word: String = self.chars[start..self.pos].iter().collect();
                if matches!(self.peek(), Some('\'' | '"')) && is_string_prefix(&word) {
                    self.pos = start;
                    return self.strings(in_brackets);
                }
                match word.as_str() {
                    "True" => Ok(Lit::Bool(true)),
                    "False" => Ok(Lit::Bool(false)),
                    "None" => Ok(Lit::None),
                    "set" => {
                        // literal_eval accepts the empty set written as `set()`.
                        if self.eat('(', in_brackets) && self.eat(')', true) {
                            Ok(Lit::Set(Vec::new()))
                        } else {
                            Err(Failure::NotALiteral)
                        }
                    }
                    _ => Err(Failure::NotALiteral),
                }
            }
            _ => Err(Failure::NotALiteral),
        }
    }

    fn tuple(&mut self) -> Result<Lit, Failure> {
        if self.eat(')', true) {
            return Ok(Lit::Tuple(Vec::new()));
        }
        let inner = self.expression_list(true)?;
        if !self.eat(')', true) {
            return Err(Failure::NotALiteral);
        }
        Ok(inner)
    }

    fn list(&mut self) -> Result<Lit, Failure> {
        let mut items = Vec::new();
        loop {
            if self.eat(']', true) {
                return Ok(Lit::List(items));
            }
            items.push(self.expression(true)?);
            if !self.eat(',', true) {
                return if self.eat(']', true) { Ok(Lit::List(items)) } else { Err(Failure::NotALiteral) };
            }
        }
    }

    fn dict_or_set(&mut self) -> Result<Lit, Failure> {
        if self.eat('}', true) {
            return Ok(Lit::Dict(Vec::new()));
        }
        let first = self.expression(true)?;
        if self.eat(':', true) {
            let mut entries: Vec<(Lit, Lit)> = Vec::new();
            let mut key = first;
            loop {
                let value = self.expression(true)?;
                check_hashable(&key)?;
                match entries.iter_mut().find(|(k, _)| *k == key) {
                    Some(entry) => entry.1 = value,
                    None => entries.push((key, value)),
                }
                if self.eat('}', true) {
                    return Ok(Lit::Dict(entries));
                }
                if !self.eat(',', true) {
                    return Err(Failure::NotALiteral);
                }
                if self.eat('}', true) {
                    return Ok(Lit::Dict(entries));
                }
                key = self.expression(true)?;
                if !self.eat(':', true) {
                    return Err(Failure::NotALiteral);
                }
            }
        }
        let mut items = vec![first];
        while self.eat(',', true) {
            if self.at_closer(true) {
                break;
            }
            items.push(self.expression(true)?);
        }
        if !self.eat('}', true) {
            return Err(Failure::NotALiteral);
        }
        let mut set: Vec<Lit> = Vec::new();
        for item in items {
            check_hashable(&item)?;
            if !set.contains(&item) {
                set.push(item);
            }
        }
        Ok(Lit::Set(set))
    }

    /// One or more adjacent string literals, concatenated as Python does.
    fn strings(&mut self, in_brackets: bool) -> Result<Lit, Failure> {
        let mut text = String::new();
        let mut bytes: Option<Vec<u8>> = None;
        let mut count = 0;
        loop {
            self.skip_ws(in_brackets);
            let start = self.pos;
            let mut prefix = String::new();
            while let Some(c) = self.peek().filter(|c| c.is_ascii_alphabetic()) {
                prefix.push(c.to_ascii_lowercase());
                self.pos += 1;
            }
            if !matches!(self.peek(), Some('\'' | '"')) || !is_string_prefix(&prefix) {
                self.pos = start;
                break;
            }
            if prefix.contains('f') {
                return Err(Failure::NotALiteral);
            }
            let is_bytes = prefix.contains('b');
            if count > 0 && is_bytes != bytes.is_some() {
                return Err(Failure::NotALiteral);
            }
            let raw = self.string_body()?;
            let decoded = if prefix.contains('r') { raw } else { unescape(&raw, is_bytes)? };
            if is_bytes {
                if !decoded.chars().all(|c| (c as u32) < 256) {
                    return Err(Failure::NotALiteral);
                }
                bytes.get_or_insert_with(Vec::new).extend(decoded.chars().map(|c| c as u32 as u8));
            } else {
                text.push_str(&decoded);
            }
            count += 1;
        }
        if count == 0 {
            return Err(Failure::NotALiteral);
        }
        Ok(match bytes {
            Some(b) => Lit::Bytes(b),
            None => Lit::Str(text),
        })
    }

    /// The text between the quotes, escapes untouched.
    fn string_body(&mut self) -> Result<String, Failure> {
        let quote = self.peek().ok_or(Failure::NotALiteral)?;
        let triple = self.peek_at(1) == Some(quote) && self.peek_at(2) == Some(quote);
        self.pos += if triple { 3 } else { 1 };
        let mut out = String::new();
        loop {
            let c = self.peek().ok_or(Failure::NotALiteral)?;
            if c == '\\' {
                let next = self.peek_at(1).ok_or(Failure::NotALiteral)?;
                out.push(c);
                out.push(next);
                self.pos += 2;
                continue;
            }
            if c == quote {
                if !triple {
                    self.pos += 1;
                    return Ok(out);
                }
                if self.peek_at(1) == Some(quote) && self.peek_at(2) == Some(quote) {
                    self.pos += 3;
                    return Ok(out);
                }
            }
            if c == '\n' && !triple {
                return Err(Failure::NotALiteral);
            }
            out.push(c);
            self.pos += 1;
        }
    }

    fn number(&mut self) -> Result<Lit, Failure> {
        let start = self.pos;
        let rest: String = self.chars[start..].iter().collect();
        let (lit, len) = scan_number(&rest).ok_or(Failure::NotALiteral)?;
        self.pos += len;
        // `1abc` is a syntax error in Python, not a number followed by a name.
        if self.peek().is_some_and(|c| c.is_alphanumeric() || c == '_') {
            return Err(Failure::NotALiteral);
        }
        Ok(lit)
    }
}

fn is_string_prefix(p: &str) -> bool {
    matches!(p.to_ascii_lowercase().as_str(), "" | "r" | "u" | "b" | "br" | "rb" | "f" | "fr" | "rf")
}

fn check_hashable(lit: &Lit) -> Result<(), Failure> {
    match lit {
        Lit::Dict(_) => Err(Failure::Unhashable("dict")),
        Lit::Set(_) => Err(Failure::Unhashable("set")),
        Lit::List(_) => Err(Failure::Unhashable("list")),
        Lit::Tuple(items) => items.iter().try_for_each(check_hashable),
        _ => Ok(()),
    }
}

/// Scans a Python number token at the start of `s`: (value, length in chars).
fn scan_number(s: &str) -> Option<(Lit, usize)> {
    let chars: Vec<char> = s.chars().collect();
    let digits = |from: usize, ok: fn(char) -> bool| -> usize {
        // digit (["_"] digit)*
        let mut i = from;
        if !chars.get(i).is_some_and(|c| ok(*c)) {
            return from;
        }
        i += 1;
        loop {
            match chars.get(i) {
                Some(c) if ok(*c) => i += 1,
                Some('_') if chars.get(i + 1).is_some_and(|c| ok(*c)) => i += 2,
                _ => return i,
            }
        }
    };
    let text = |from: usize, to: usize| -> String { chars[from..to].iter().filter(|c| **c != '_').collect() };

    if chars.first() == Some(&'0') {
        let radix = match chars.get(1) {
            Some('x' | 'X') => Some((16, (|c: char| c.is_ascii_hexdigit()) as fn(char) -> bool)),
            Some('o' | 'O') => Some((8, (|c: char| ('0'..='7').contains(&c)) as fn(char) -> bool)),
            Some('b' | 'B') => Some((2, (|c: char| c == '0' || c == '1') as fn(char) -> bool)),
            _ => None,
        };
        if let Some((radix, ok)) = radix {
            // 0x_1f is allowed: an underscore may follow the prefix.
            let from = if chars.get(2) == Some(&'_') { 3 } else { 2 };
            let end = digits(from, ok);
            if end == from {
                return None;
            }
            let value = i128::from_str_radix(&text(from, end), radix).ok()?;
            return Some((Lit::Int(value), end));
        }
    }

    let is_digit = |c: char| c.is_ascii_digit();
    let int_end = digits(0, is_digit);
    let mut end = int_end;
    let mut is_float = false;
    if chars.get(end) == Some(&'.') {
        is_float = true;
        end = digits(end + 1, is_digit);
        if end == int_end + 1 && int_end == 0 {
            return None; // a lone "."
        }
    }
    if matches!(chars.get(end), Some('e' | 'E')) {
        let mut i = end + 1;
        if matches!(chars.get(i), Some('+' | '-')) {
            i += 1;
        }
        let exp_end = digits(i, is_digit);
        if exp_end > i {
            is_float = true;
            end = exp_end;
        }
    }
    if matches!(chars.get(end), Some('j' | 'J')) {
        let value: f64 = text(0, end).parse().ok()?;
        return Some((Lit::Complex(0.0, value), end + 1));
    }
    if is_float {
        let value: f64 = text(0, end).parse().ok()?;
        return Some((Lit::Float(value), end));
    }
    let digits_text = text(0, int_end);
    // Decimal integers may not have leading zeros, except zero itself.
    if digits_text.len() > 1 && digits_text.starts_with('0') && digits_text.chars().any(|c| c != '0') {
        return None;
    }
    let value: i128 = digits_text.parse().ok()?;
    Some((Lit::Int(value), int_end))
}

/// Python's escape sequences in a (non-raw) string or bytes literal.
fn unescape(raw: &str, is_bytes: bool) -> Result<String, Failure> {
    let chars: Vec<char> = raw.chars().collect();
    let mut out = String::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c != '\\' {
            out.push(c);
            i += 1;
            continue;
        }
        let Some(&e) = chars.get(i + 1) else {
            out.push('\\');
            break;
        };
        i += 2;
        let hex = |from: usize, n: usize| -> Result<u32, Failure> {
            let s: String = chars.get(from..from + n).ok_or(Failure::NotALiteral)?.iter().collect();
            if s.chars().all(|c| c.is_ascii_hexdigit()) {
                u32::from_str_radix(&s, 16).map_err(|_| Failure::NotALiteral)
            } else {
                Err(Failure::NotALiteral)
            }
        };
        match e {
            '\n' => {}
            '\\' => out.push('\\'),
            '\'' => out.push('\''),
            '"' => out.push('"'),
            'a' => out.push('\x07'),
            'b' => out.push('\x08'),
            'f' => out.push('\x0c'),
            'n' => out.push('\n'),
            'r' => out.push('\r'),
            't' => out.push('\t'),
            'v' => out.push('\x0b'),
            '0'..='7' => {
                let mut value = e.to_digit(8).unwrap_or(0);
                let mut n = 1;
                while n < 3 {
                    match chars.get(i).and_then(|c| c.to_digit(8)) {
                        Some(d) => {
                            value = value * 8 + d;
                            i += 1;
                            n += 1;
                        }
                        None => break,
                    }
                }
                out.push(char::from_u32(if is_bytes { value & 0xff } else { value }).ok_or(Failure::NotALiteral)?);
            }
            'x' => {
                let value = hex(i, 2)?;
                i += 2;
                out.push(char::from_u32(value).ok_or(Failure::NotALiteral)?);
            }
            'u' | 'U' if !is_bytes => {
                let n = if e == 'u' { 4 } else { 8 };
                let value = hex(i, n)?;
                i += n;
                out.push(char::from_u32(value).ok_or(Failure::NotALiteral)?);
            }
            // `\N{NAME}` needs Unicode's name table; treated as not a literal (the raw text is kept).
            'N' if !is_bytes => return Err(Failure::NotALiteral),
            other => {
                out.push('\\');
                out.push(other);
            }
        }
    }
    Ok(out)
}

/// Ansible's `_parse_recursive_coerce_types_and_tag`: tuples and sets become lists, bytes text, complex and
/// Ellipsis their Python spelling.
fn to_value(lit: Lit) -> Value {
    match lit {
        Lit::None => Value::Null,
        Lit::Bool(b) => Value::Bool(b),
        Lit::Int(i) => int_value(i),
        Lit::Float(f) => float_value(f),
        Lit::Complex(r, i) => Value::String(complex_repr(r, i)),
        Lit::Str(s) => Value::String(s),
        Lit::Bytes(b) => Value::String(String::from_utf8_lossy(&b).into_owned()),
        Lit::List(items) | Lit::Tuple(items) | Lit::Set(items) => {
            Value::Array(items.into_iter().map(to_value).collect())
        }
        Lit::Dict(entries) => {
            let mut map = Map::new();
            for (k, v) in entries {
                map.insert(key_text(&k), to_value(v));
            }
            Value::Object(map)
        }
        Lit::Ellipsis => Value::String("...".into()),
    }
}

fn int_value(i: i128) -> Value {
    if let Ok(v) = i64::try_from(i) {
        Value::from(v)
    } else if let Ok(v) = u64::try_from(i) {
        Value::from(v)
    } else {
        // Beyond what JSON numbers carry here: keep Python's spelling.
        Value::String(i.to_string())
    }
}

fn float_value(f: f64) -> Value {
    match Number::from_f64(f) {
        Some(n) => Value::Number(n),
        None => Value::String(python_float_repr(f)),
    }
}

fn python_float_repr(f: f64) -> String {
    if f.is_nan() {
        "nan".into()
    } else if f.is_infinite() {
        if f > 0.0 { "inf".into() } else { "-inf".into() }
    } else if f.fract() == 0.0 && f.abs() < 1e16 {
        format!("{f:.1}")
    } else {
        format!("{f}")
    }
}

fn complex_repr(r: f64, i: f64) -> String {
    let part = |f: f64| {
        if f.fract() == 0.0 && f.abs() < 1e16 { format!("{}", f as i64) } else { python_float_repr(f) }
    };
    if r == 0.0 && r.is_sign_positive() {
        format!("{}j", part(i))
    } else {
        let sign = if i < 0.0 || (i == 0.0 && i.is_sign_negative()) { "-" } else { "+" };
        format!("({}{sign}{}j)", part(r), part(i.abs()))
    }
}

/// A dict key as JSON (Python's `json.dumps`) would write it.
fn key_text(k: &Lit) -> String {
    match k {
        Lit::Str(s) => s.clone(),
        Lit::None => "null".into(),
        Lit::Bool(true) => "true".into(),
        Lit::Bool(false) => "false".into(),
        Lit::Int(i) => i.to_string(),
        Lit::Float(f) => python_float_repr(*f),
        other => to_value(other.clone()).to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn literals_evaluate_like_python() {
        let table: Vec<(&str, Value)> = vec![
            ("5", json!(5)),
            ("-3", json!(-3)),
            ("+7", json!(7)),
            ("1_000", json!(1000)),
            ("0x1F", json!(31)),
            ("0o17", json!(15)),
            ("0b101", json!(5)),
            ("1.5", json!(1.5)),
            ("1e3", json!(1000.0)),
            (".5", json!(0.5)),
            ("5.", json!(5.0)),
            ("007.5", json!(7.5)),
            ("True", json!(true)),
            ("False", json!(false)),
            ("None", json!(null)),
            ("'quoted'", json!("quoted")),
            ("\"double\"", json!("double")),
            ("'a' 'b'", json!("ab")),
            ("'tab\\there'", json!("tab\there")),
            ("r'raw\\n'", json!("raw\\n")),
            ("b'bytes'", json!("bytes")),
            ("u'text'", json!("text")),
            ("[1, 2, 'x']", json!([1, 2, "x"])),
            ("[]", json!([])),
            ("(1, 2)", json!([1, 2])),
            ("(1,)", json!([1])),
            ("()", json!([])),
            ("(5)", json!(5)),
            ("1, 2", json!([1, 2])),
            ("{'a': 1, 'b': [True, None]}", json!({"a": 1, "b": [true, null]})),
            ("{}", json!({})),
            ("{1: 'x'}", json!({"1": "x"})),
            ("{1, 2, 2}", json!([1, 2])),
            ("set()", json!([])),
            ("...", json!("...")),
            ("1j", json!("1j")),
            ("1+2j", json!("(1+2j)")),
            ("8080 # a comment", json!(8080)),
            ("'03#pa33w0rd'", json!("03#pa33w0rd")),
            ("[1, 2,]", json!([1, 2])),
        ];
        for (text, want) in table {
            assert_eq!(literal_eval(text), Ok(want), "{text}");
        }
    }

    #[test]
    fn non_literals_stay_text() {
        for text in [
            "",
            "foo",
            "FALSE",
            "true",
            "none",
            "007",
            "1 2",
            "1+2",
            "--5",
            "-'a'",
            "foo,bar",
            "hello world",
            "1abc",
            "f'x'",
            "[1, 2",
            "{k: 1}",
            "'open",
            "0x",
            "1__0",
            "1_",
            "a=b",
            "{'a' 1}",
            "/usr/bin/python3",
            "1.2.3",
            "10.0.0.1",
            "2001:db8::1",
            "'a' b'b'",
            "-True",
        ] {
            assert_eq!(literal_eval(text), Err(Failure::NotALiteral), "{text:?}");
            assert_eq!(parse_value(text), Ok(Value::String(text.to_string())));
        }
    }

    #[test]
    fn unhashable_keys_are_errors() {
        assert_eq!(literal_eval("{[1]: 2}"), Err(Failure::Unhashable("list")));
        assert_eq!(
            literal_eval("{(1, 2): 'tuple keys are fine'}"),
            Ok(serde_json::json!({"[1,2]": "tuple keys are fine"}))
        );
        assert!(parse_value("{{'a': 1}: 2}").is_err());
        assert!(parse_value("{{1}}").is_err());
    }

    #[test]
    fn deep_nesting_is_not_a_literal() {
        let deep = "[".repeat(5000) + &"]".repeat(5000);
        assert_eq!(literal_eval(&deep), Err(Failure::NotALiteral));
    }
}
