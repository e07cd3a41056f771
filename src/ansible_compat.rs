//! Small pieces of Python and ansible-core that operators' inventories, `-e` arguments and task files rely on,
//! ported once: Ansible's boolean table, `shlex.split`, `parse_kv`/`split_args`, `shlex.quote`, quote stripping and
//! Python's type names. A leaf: it imports nothing from the crate, so every layer may use it.

use std::sync::LazyLock;

use regex::Regex;
use serde_json::Value;

/// Ansible's `boolean(value, strict=True)` (`module_utils/parsing/convert_bool.py`): `None` when the value is in
/// neither of its tables. Callers that want `strict=False` take `unwrap_or(false)`, as Ansible's lax mode does.
/// An unset (null) value reads as false, as an unset keyword does in Ansible (`boolean(None, strict=False)`).
pub(crate) fn boolean(value: &Value) -> Option<bool> {
    match value {
        Value::Bool(b) => Some(*b),
        Value::Null => Some(false),
        // Python compares 1 == 1.0 == True, so the numbers in the tables are exactly 1 and 0.
        Value::Number(n) => match n.as_f64() {
            Some(f) if f == 1.0 => Some(true),
            Some(f) if f == 0.0 => Some(false),
            _ => None,
        },
        Value::String(s) => match s.trim().to_lowercase().as_str() {
            "y" | "yes" | "on" | "1" | "true" | "t" => Some(true),
            "n" | "no" | "off" | "0" | "false" | "f" => Some(false),
            _ => None,
        },
        Value::Array(_) | Value::Object(_) => None,
    }
}

/// Python's name for the type a JSON value has once loaded (`type(x).__name__`), as Ansible's messages show it.
pub(crate) fn python_type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "NoneType",
        Value::Bool(_) => "bool",
        Value::Number(n) if n.is_f64() => "float",
        Value::Number(_) => "int",
        Value::String(_) => "str",
        Value::Array(_) => "list",
        Value::Object(_) => "dict",
    }
}

/// Python's `shlex.quote`: safe words stay as they are; anything else is single-quoted, a `'` written `'"'"'`.
pub fn shell_quote(s: &str) -> String {
    if s.is_empty() {
        return "''".into();
    }
    if s.bytes().all(|b| b.is_ascii_alphanumeric() || b"@%+=:,./-_".contains(&b)) {
        return s.to_owned();
    }
    format!("'{}'", s.replace('\'', "'\"'\"'"))
}

/// ansible-core's `is_quoted` (`parsing/quoting.py`): the same quote at both ends, the last one not escaped.
pub(crate) fn is_quoted(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() > 1 && b[0] == b[b.len() - 1] && (b[0] == b'"' || b[0] == b'\'') && b[b.len() - 2] != b'\\'
}

/// ansible-core's `unquote`: one pair of surrounding quotes removed when [`is_quoted`].
pub(crate) fn unquote(s: &str) -> &str {
    if is_quoted(s) { &s[1..s.len() - 1] } else { s }
}

/// Python's `shlex.split(text, comments, posix=True)`: quotes group and disappear, `\` escapes (inside double
/// quotes only before `"` or `\`), whitespace is ` \t\r\n`; with `comments`, `#` ends the line where a token could
/// end (what Ansible's INI inventory asks for). The error is Python's message.
pub(crate) fn shlex_split(text: &str, comments: bool) -> Result<Vec<String>, String> {
    #[derive(PartialEq, Clone, Copy)]
    enum State {
        Space,
        Word,
        Quote(char),
        Escape,
    }
    let mut tokens = Vec::new();
    let mut token = String::new();
    // A token that had quotes is a token even when empty (`''`).
    let mut quoted = false;
    let mut state = State::Space;
    // Where an escape goes back to: a word, or a double-quoted string.
    let mut escaped_from = State::Word;
    for c in text.chars() {
        match state {
            State::Space | State::Word => {
                if matches!(c, ' ' | '\t' | '\r' | '\n') {
                    if state == State::Word || quoted {
                        tokens.push(std::mem::take(&mut token));
                        quoted = false;
                    }
                    state = State::Space;
                } else if comments && c == '#' {
                    // shlex reads the rest of the line away, ending any current token.
                    if state == State::Word || quoted {
                        tokens.push(std::mem::take(&mut token));
                    }
                    return Ok(tokens);
                } else if c == '\\' {
                    escaped_from = State::Word;
                    state = State::Escape;
                } else if c == '\'' || c == '"' {
                    state = State::Quote(c);
                } else {
                    token.push(c);
                    state = State::Word;
                }
            }
            State::Quote(q) => {
                quoted = true;
                if c == q {
                    state = State::Word;
                } else if c == '\\' && q == '"' {
                    escaped_from = State::Quote(q);
                    state = State::Escape;
                } else {
                    token.push(c);
                }
            }
            State::Escape => {
                if let State::Quote(q) = escaped_from {
                    if c != q && c != '\\' {
                        token.push('\\');
                    }
                }
                token.push(c);
                state = escaped_from;
            }
        }
    }
    match state {
        State::Quote(_) => Err("No closing quotation".into()),
        State::Escape => Err("No escaped character".into()),
        State::Word => {
            tokens.push(token);
            Ok(tokens)
        }
        State::Space => {
            if quoted {
                tokens.push(token);
            }
            Ok(tokens)
        }
    }
}

/// The options `command`/`shell` take out of their free-form text (ansible-core's list in `parse_kv`).
const RAW_OPTIONS: &[&str] =
    &["creates", "removes", "chdir", "executable", "warn", "stdin", "stdin_add_newline", "strip_empty_ends"];

/// ansible-core's `parse_kv(args, check_raw)` (`parsing/splitter.py`): `key=value` tokens become options, in the
/// order first written (a later one replaces the value); the rest is joined back, newlines kept, as `_raw_params`.
/// With `check_raw` (command-like modules) only [`RAW_OPTIONS`] are taken out of the text.
pub(crate) fn parse_kv(args: &str, check_raw: bool) -> Result<Vec<(String, String)>, String> {
    let mut options: Vec<(String, String)> = Vec::new();
    let mut raw_params = Vec::new();
    for orig in split_args(args)? {
        let x = decode_escapes(&orig);
        if !x.contains('=') {
            raw_params.push(orig);
            continue;
        }
        // The first `=` after the first character that is not preceded by a backslash.
        let chars: Vec<char> = x.chars().collect();
        let Some(pos) = (1..chars.len()).find(|&i| chars[i] == '=' && chars[i - 1] != '\\') else {
            raw_params.push(x.replace("\\=", "="));
            continue;
        };
        let k: String = chars[..pos].iter().collect();
        if check_raw && !RAW_OPTIONS.contains(&k.as_str()) {
            raw_params.push(orig);
            continue;
        }
        let v: String = chars[pos + 1..].iter().collect();
        upsert(&mut options, k.trim().to_string(), unquote(v.trim()).to_string());
    }
    if !raw_params.is_empty() {
        upsert(&mut options, "_raw_params".to_string(), join_args(&raw_params));
    }
    Ok(options)
}

/// A Python dict's `d[key] = value`: a key written again keeps its first place.
fn upsert(options: &mut Vec<(String, String)>, key: String, value: String) {
    match options.iter_mut().find(|(existing, _)| *existing == key) {
        Some(entry) => entry.1 = value,
        None => options.push((key, value)),
    }
}

/// ansible-core's `join_args`: the pieces of [`split_args`] put back with a space, but not after a newline.
pub(crate) fn join_args(pieces: &[String]) -> String {
    let mut out = String::new();
    for piece in pieces {
        if !out.is_empty() && !out.ends_with('\n') {
            out.push(' ');
        }
        out.push_str(piece);
    }
    out
}

static ESCAPES: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r#"\\U[0-9a-fA-F]{8}|\\u[0-9a-fA-F]{4}|\\x[0-9a-fA-F]{2}|\\[0-7]{1,3}|\\[\\'"abfnrtv]"#)
        .expect("valid regex")
});

/// ansible-core's `_decode_escapes`: Python escape sequences in a `key=value` token.
fn decode_escapes(s: &str) -> String {
    ESCAPES
        .replace_all(s, |caps: &regex::Captures| {
            let m = &caps[0];
            let body = &m[1..];
            let decoded = match body.chars().next() {
                Some('U' | 'u' | 'x') => u32::from_str_radix(&body[1..], 16).ok().and_then(char::from_u32),
                Some('0'..='7') => u32::from_str_radix(body, 8).ok().and_then(char::from_u32),
                Some('\\') => Some('\\'),
                Some('\'') => Some('\''),
                Some('"') => Some('"'),
                Some('a') => Some('\x07'),
                Some('b') => Some('\x08'),
                Some('f') => Some('\x0c'),
                Some('n') => Some('\n'),
                Some('r') => Some('\r'),
                Some('t') => Some('\t'),
                Some('v') => Some('\x0b'),
                _ => None,
            };
            decoded.map(String::from).unwrap_or_else(|| m.to_string())
        })
        .into_owned()
}

/// ansible-core's `split_args`: split on spaces and newlines, but keep quoted strings and Jinja blocks together
/// (quotes kept, newlines kept at the end of the piece they ended). The error is ansible-core's message.
pub(crate) fn split_args(args: &str) -> Result<Vec<String>, String> {
    let mut params: Vec<String> = Vec::new();
    if args.is_empty() {
        return Ok(params);
    }
    // ansible-core writes into `params[-1]` in several places; it always exists there but an empty one is safer.
    fn last(params: &mut Vec<String>) -> &mut String {
        if params.is_empty() {
            params.push(String::new());
        }
        let end = params.len() - 1;
        &mut params[end]
    }
    let items: Vec<&str> = args.split('\n').collect();
    let mut quote_char: Option<char> = None;
    let mut inside_quotes = false;
    let (mut print_depth, mut block_depth, mut comment_depth) = (0i64, 0i64, 0i64);
    for (item_idx, item) in items.iter().enumerate() {
        let mut line_continuation = false;
        for (idx, token) in item.split(' ').enumerate() {
            // Runs of spaces are kept, so that the text can be put back as written.
            if token.is_empty() && idx != 0 {
                last(&mut params).push(' ');
                continue;
            }
            if token == "\\" && !inside_quotes {
                line_continuation = true;
                continue;
            }
            let was_inside_quotes = inside_quotes;
            quote_char = quote_state(token, quote_char);
            inside_quotes = quote_char.is_some();
            let mut appended = false;
            let in_jinja = print_depth > 0 || block_depth > 0 || comment_depth > 0;
            if inside_quotes && !was_inside_quotes && !in_jinja {
                params.push(token.to_string());
                appended = true;
            } else if in_jinja || inside_quotes || was_inside_quotes {
                let piece = last(&mut params);
                if idx > 0 {
                    piece.push(' ');
                }
                piece.push_str(token);
                appended = true;
            }
            for (depth, open, close) in
                [(&mut print_depth, "{{", "}}"), (&mut block_depth, "{%", "%}"), (&mut comment_depth, "{#", "#}")]
            {
                let before = *depth;
                let (opens, closes) = (token.matches(open).count() as i64, token.matches(close).count() as i64);
                if opens != closes {
                    *depth = (*depth + opens - closes).max(0);
                }
                if *depth != before && !appended {
                    params.push(token.to_string());
                    appended = true;
                }
            }
            let in_jinja = print_depth > 0 || block_depth > 0 || comment_depth > 0;
            if !in_jinja && !inside_quotes && !appended && !token.is_empty() {
                params.push(token.to_string());
            }
        }
        if items.len() > 1 && item_idx != items.len() - 1 && !line_continuation {
            last(&mut params).push('\n');
        }
    }
    if print_depth > 0 || block_depth > 0 || comment_depth > 0 || inside_quotes {
        return Err(format!("failed at splitting arguments, either an unbalanced jinja2 block or quotes: {args}"));
    }
    Ok(params)
}

/// ansible-core's `_get_quote_state`: the quote still open after `token`, given the one open before it.
fn quote_state(token: &str, mut quote_char: Option<char>) -> Option<char> {
    let mut prev: Option<char> = None;
    for c in token.chars() {
        if (c == '"' || c == '\'') && prev != Some('\\') {
            match quote_char {
                Some(q) if q == c => quote_char = None,
                Some(_) => {}
                None => quote_char = Some(c),
            }
        }
        prev = Some(c);
    }
    quote_char
}

/// Python's `fnmatch.translate`, for the Rust regex syntax.
pub(crate) fn glob_to_regex(pattern: &str) -> String {
    let chars: Vec<char> = pattern.chars().collect();
    let mut out = String::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        i += 1;
        match c {
            '*' => {
                out.push_str(".*");
                while chars.get(i) == Some(&'*') {
                    i += 1;
                }
            }
            '?' => out.push('.'),
            '[' => {
                let mut j = i;
                if chars.get(j) == Some(&'!') {
                    j += 1;
                }
                if chars.get(j) == Some(&']') {
                    j += 1;
                }
                while j < chars.len() && chars[j] != ']' {
                    j += 1;
                }
                if j >= chars.len() {
                    out.push_str(r"\[");
                } else {
                    let stuff = &chars[i..j];
                    i = j + 1;
                    let (negate, body) = match stuff.first() {
                        Some('!') => (true, &stuff[1..]),
                        _ => (false, stuff),
                    };
                    if body.is_empty() {
                        // `[]` or `[!]`: Python gives an impossible or any-character match.
                        out.push_str(if negate { "." } else { "[^\\s\\S]" });
                        continue;
                    }
                    out.push('[');
                    if negate {
                        out.push('^');
                    }
                    for (k, ch) in body.iter().enumerate() {
                        let is_range = *ch == '-' && k > 0 && k + 1 < body.len() && body[k - 1] != '-';
                        if is_range {
                            out.push('-');
                        } else if ch.is_alphanumeric() {
                            out.push(*ch);
                        } else {
                            out.push_str(&regex::escape(&ch.to_string()));
                        }
                    }
                    out.push(']');
                }
            }
            other => out.push_str(&regex::escape(&other.to_string())),
        }
    }
    out
}

/// Python's `fnmatch.fnmatchcase`: `text` matches the shell-style `pattern` whole.
pub(crate) fn fnmatch(text: &str, pattern: &str) -> bool {
    Regex::new(&format!("^(?s:{})$", glob_to_regex(pattern))).is_ok_and(|re| re.is_match(text))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn strings(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn booleans_follow_ansibles_tables() {
        for yes in [json!(true), json!(1), json!(1.0), json!("yes"), json!(" On "), json!("Y"), json!("t"), json!("1")]
        {
            assert_eq!(boolean(&yes), Some(true), "{yes}");
        }
        for no in [json!(false), json!(0), json!(0.0), json!("no"), json!("OFF"), json!("n"), json!("f"), json!("0")] {
            assert_eq!(boolean(&no), Some(false), "{no}");
        }
        assert_eq!(boolean(&json!(null)), Some(false));
        // Not in either table, so strict Ansible refuses them; the two old copies took "1.0", "0.0", "" and any
        // non-zero number.
        for neither in [json!(2), json!(-1), json!("1.0"), json!(""), json!("maybe"), json!([1])] {
            assert_eq!(boolean(&neither), None, "{neither}");
        }
    }

    #[test]
    fn python_type_names() {
        let names: Vec<&str> = [json!(null), json!(true), json!(1), json!(1.5), json!("s"), json!([]), json!({})]
            .iter()
            .map(python_type_name)
            .collect();
        assert_eq!(names, ["NoneType", "bool", "int", "float", "str", "list", "dict"]);
    }

    #[test]
    fn quoting_is_pythons_shlex_quote() {
        assert_eq!(shell_quote("abc"), "abc");
        assert_eq!(shell_quote("/etc/x.conf"), "/etc/x.conf");
        assert_eq!(shell_quote(""), "''");
        assert_eq!(shell_quote("a b"), "'a b'");
        // The connection's old quoting wrote `'\''`; Python's `shlex.quote` writes `'"'"'` (same meaning in sh).
        assert_eq!(shell_quote("it's"), "'it'\"'\"'s'");
    }

    #[test]
    fn unquote_leaves_an_escaped_closing_quote() {
        assert_eq!(unquote("'a b'"), "a b");
        assert_eq!(unquote("\"a\""), "a");
        assert_eq!(unquote("'a\""), "'a\"");
        assert_eq!(unquote("'"), "'");
        // ansible-core's `is_quoted` rejects a closing quote after a backslash; the settings' and the task
        // loader's old copies stripped it.
        assert_eq!(unquote("'a\\'"), "'a\\'");
    }

    #[test]
    fn shlex_splits_like_python() {
        let table: &[(&str, &[&str])] = &[
            ("a b  c", &["a", "b", "c"]),
            ("h x=\"hello world\" y='a b'", &["h", "x=hello world", "y=a b"]),
            ("h mysecret=\"'03#pa33w0rd'\"", &["h", "mysecret='03#pa33w0rd'"]),
            ("h a=\"\"", &["h", "a="]),
            ("h ''", &["h", ""]),
            ("h a=b\\ c", &["h", "a=b c"]),
            ("h \"x\\\"y\\z\"", &["h", "x\"y\\z"]),
            ("h 'x\\y'", &["h", "x\\y"]),
            (r#"echo "a b" 'c d' e\ f"#, &["echo", "a b", "c d", "e f"]),
            (r#"-o 'A B' -o "C \"D\"" e\ f"#, &["-o", "A B", "-o", "C \"D\"", "e f"]),
            ("  ", &[]),
            ("a#b", &["a#b"]),
        ];
        for (line, want) in table {
            assert_eq!(shlex_split(line, false).unwrap(), strings(want), "{line}");
        }
        assert_eq!(shlex_split("h a=1 # comment", true).unwrap(), ["h", "a=1"]);
        assert_eq!(shlex_split("h a=1#not-a-comment-start", true).unwrap(), ["h", "a=1"]);
        assert_eq!(shlex_split("h a=1 # comment", false).unwrap(), ["h", "a=1", "#", "comment"]);
        assert_eq!(shlex_split("h a='open", false).unwrap_err(), "No closing quotation");
        assert_eq!(shlex_split("h a\\", false).unwrap_err(), "No escaped character");
    }

    #[test]
    fn shlex_differences_from_the_old_copies() {
        // The command module's and the SSH settings' copies followed sh, not Python: inside double quotes they
        // dropped the backslash before `$` and `` ` ``, and they ignored a trailing backslash.
        assert_eq!(shlex_split(r#"echo "\$HOME \`x\`""#, false).unwrap(), ["echo", r"\$HOME \`x\`"]);
        assert!(shlex_split("echo a\\", false).is_err());
        // The SSH copy dropped a backslash-newline; Python keeps the newline in the word.
        assert_eq!(shlex_split("a\\\nb", false).unwrap(), ["a\nb"]);
        // Only Python's whitespace separates words, not every Unicode space.
        assert_eq!(shlex_split("a\u{a0}b", false).unwrap(), ["a\u{a0}b"]);
    }

    #[test]
    fn split_args_keeps_quotes_jinja_and_newlines() {
        assert_eq!(
            split_args("echo {{ a | default('x y') }} 'q r'").unwrap(),
            ["echo", "{{ a | default('x y') }}", "'q r'"]
        );
        assert_eq!(split_args("a=b c=\"foo bar\"").unwrap(), ["a=b", "c=\"foo bar\""]);
        assert_eq!(split_args("echo one\necho two\n").unwrap(), ["echo", "one\n", "echo", "two\n"]);
        assert_eq!(split_args("a  b").unwrap(), ["a ", "b"]);
        assert!(split_args("a='open").is_err());
        assert!(split_args("{{ open").is_err());
    }

    #[test]
    fn parse_kv_like_ansible_core() {
        let kv = |text: &str, raw: bool| parse_kv(text, raw).unwrap();
        assert_eq!(
            kv("ls -l \"a b\" chdir=/tmp creates=/x foo=bar", true),
            [
                ("chdir".into(), "/tmp".into()),
                ("creates".into(), "/x".into()),
                ("_raw_params".into(), "ls -l \"a b\" foo=bar".into())
            ] as [(String, String); 3]
        );
        assert_eq!(
            kv("msg=\"hello {{ name }} there\" var=x", false)[0],
            ("msg".into(), "hello {{ name }} there".into())
        );
        assert_eq!(
            kv("a=1 a=2 b=3", false),
            [("a".into(), "2".into()), ("b".into(), "3".into())] as [(String, String); 2]
        );
        // Escapes are decoded in options, as ansible-core's `_decode_escapes` does.
        assert_eq!(kv("msg=a\\tb", false)[0].1, "a\tb");
        // The task loader's old copy split on every whitespace and joined with spaces, so a multi-line `shell: |`
        // became one line; ansible-core keeps the newlines (`join_args`).
        assert_eq!(
            kv("echo one\necho two\n", true),
            [("_raw_params".into(), "echo one\necho two\n".into())] as [(String, String); 1]
        );
        // The old copy also turned `\=` into `=` inside values; ansible-core leaves values alone.
        assert_eq!(kv("a=x\\=y", false)[0].1, "x\\=y");
        assert_eq!(kv("\\=x", false), [("_raw_params".into(), "=x".into())] as [(String, String); 1]);
        assert!(parse_kv("a='open", false).is_err());
    }
}
