//! A template's source before minijinja reads it: Ansible's spellings rewritten (the `ansible.builtin.` prefix,
//! Python's string escapes and literals), single expressions told apart, chains of lookups bounded.

use std::borrow::Cow;
use std::sync::LazyLock;

use super::error::{TemplateError, TemplateErrorKind};

/// Whether a string holds any Jinja markup at all.
pub fn is_template(s: &str) -> bool {
    s.contains("{{") || s.contains("{%") || s.contains("{#")
}

/// `x | ansible.builtin.bool`, `x is ansible.builtin.version(...)`: minijinja names cannot hold dots.
pub(super) static BUILTIN_PREFIX: LazyLock<regex::Regex> = LazyLock::new(|| {
    regex::Regex::new(r"(\|\s*|\bis\s+(?:not\s+)?)ansible\.builtin\.")
        .unwrap_or_else(|_| regex::Regex::new("$^").expect("trivial regex"))
});

pub(super) fn strip_builtin_prefix(source: &str) -> Cow<'_, str> {
    if source.contains("ansible.builtin.") { BUILTIN_PREFIX.replace_all(source, "$1") } else { Cow::Borrowed(source) }
}

/// Python's reading of escapes in the string literals of a template's `{{ }}` and `{% %}`: minijinja knows
/// fewer escapes than Python and refuses the others, which Python keeps as written (`'\d'` is a backslash and a
/// `d`), so those backslashes are doubled for minijinja.
pub(super) fn python_escapes(source: &str) -> Cow<'_, str> {
    rewrite_literals(source, true, |quote, chars, out| {
        while let Some((_, d)) = chars.next() {
            out.push(d);
            if d == quote {
                break;
            }
            if d == '\\' {
                match chars.next() {
                    Some((_, e)) if "\\'\"bfnrtu".contains(e) => out.push(e),
                    Some((_, e)) => {
                        out.push('\\');
                        out.push(e);
                    }
                    None => {}
                }
            }
        }
    })
}

/// Ansible's `escape_backslashes`: string literals inside `{{ }}` of a task argument keep their backslashes as
/// written (YAML already handled escapes), so `regex_replace('(\\d+)', '\\1')` means what it says. Each such
/// literal is rewritten so that minijinja's unescaping gives back exactly the characters between the quotes.
pub(super) fn escape_backslashes(source: &str) -> Cow<'_, str> {
    rewrite_literals(source, false, |quote, chars, out| {
        while let Some((_, d)) = chars.next() {
            if d == '\\' {
                out.push_str("\\\\");
                if let Some((_, escaped)) = chars.next() {
                    if escaped == '\\' {
                        out.push_str("\\\\");
                    } else if escaped == quote {
                        out.push('\\');
                        out.push(escaped);
                    } else {
                        out.push(escaped);
                    }
                }
            } else {
                out.push(d);
                if d == quote {
                    break;
                }
            }
        }
    })
}

/// Rewrites the string literals inside a template's `{{ }}` (and `{% %}` with `statements`; otherwise statements,
/// like comments, are copied as they are) and copies the rest unchanged. `literal` is given each literal's opening
/// quote (already written) and the characters after it, and writes the literal up to its closing quote.
pub(super) fn rewrite_literals<'a>(
    source: &'a str,
    statements: bool,
    mut literal: impl FnMut(char, &mut std::str::CharIndices<'_>, &mut String),
) -> Cow<'a, str> {
    if !source.contains('\\') {
        return Cow::Borrowed(source);
    }
    let mut out = String::with_capacity(source.len() + 8);
    let mut rest = source;
    while let Some(start) = rest.find('{') {
        let (before, from) = rest.split_at(start);
        out.push_str(before);
        let close = match from.get(..2) {
            Some("{{") => "}}",
            Some("{%") if statements => "%}",
            Some(open @ ("{%" | "{#")) => {
                let close = if open == "{%" { "%}" } else { "#}" };
                let end = from[2..].find(close).map(|i| i + 4).unwrap_or(from.len());
                out.push_str(&from[..end]);
                rest = &from[end..];
                continue;
            }
            _ => {
                out.push('{');
                rest = &from[1..];
                continue;
            }
        };
        out.push_str(&from[..2]);
        let mut chars = from[2..].char_indices();
        let mut consumed = from.len();
        while let Some((i, c)) = chars.next() {
            match c {
                '\'' | '"' => {
                    out.push(c);
                    literal(c, &mut chars, &mut out);
                }
                _ if from[2 + i..].starts_with(close) => {
                    out.push_str(close);
                    consumed = 2 + i + 2;
                    break;
                }
                c => out.push(c),
            }
        }
        rest = &from[consumed.min(from.len())..];
    }
    out.push_str(rest);
    Cow::Owned(out)
}

/// The expression inside a template that is exactly one `{{ ... }}`, whitespace-control markers removed. Like
/// Jinja, one trailing newline does not count.
pub(super) fn single_expression(source: &str) -> Option<&str> {
    let source = source.strip_suffix('\n').map(|s| s.strip_suffix('\r').unwrap_or(s)).unwrap_or(source);
    let inner = source.strip_prefix("{{")?.strip_suffix("}}")?;
    let inner = inner.strip_prefix(['-', '+']).unwrap_or(inner);
    let inner = inner.strip_suffix('-').unwrap_or(inner);
    // Cheap rejections before trying to compile: another block starts inside.
    if inner.contains("{%") || inner.contains("{#") {
        return None;
    }
    Some(inner)
}

/// How many operators (`.`, `[`, `|`, `+`, `and`, ...) one `{{ }}` or `{% %}` may chain. minijinja's parser guards
/// nesting, but a flat chain (`x.a.a.a...`, `1+1+1...`) becomes a tree as deep as it is long, which its compiler
/// walks recursively: a few thousand links overflow a thread's stack and abort the process. Python's Jinja stops at
/// its recursion limit (1000) too, so no template Ansible runs is refused.
pub(super) const MAX_CHAIN: usize = 1000;

/// Refuses a template (or a bare expression, `bare`) with a tag that chains more than [`MAX_CHAIN`] operators.
pub(super) fn check_chain_length(source: &str, bare: bool) -> Result<(), TemplateError> {
    let mut in_tag = bare;
    let mut quote: Option<char> = None;
    let mut count = 0usize;
    let mut word = String::new();
    let mut chars = source.chars().peekable();
    while let Some(c) = chars.next() {
        if !in_tag {
            if c == '{' && matches!(chars.peek(), Some('{' | '%')) {
                chars.next();
                in_tag = true;
                count = 0;
            }
            continue;
        }
        if let Some(q) = quote {
            if c == '\\' {
                chars.next();
            } else if c == q {
                quote = None;
            }
            continue;
        }
        if c.is_alphanumeric() || c == '_' {
            word.push(c);
            continue;
        }
        if matches!(word.as_str(), "and" | "or" | "not" | "if" | "is" | "in") {
            count += 1;
        }
        word.clear();
        match c {
            '\'' | '"' => quote = Some(c),
            '}' | '%' if !bare && chars.peek() == Some(&'}') => {
                chars.next();
                in_tag = false;
            }
            '.' | '[' | '(' | '|' | '+' | '-' | '*' | '/' | '%' | '~' | '<' | '>' | '=' | '!' => count += 1,
            _ => {}
        }
        if count > MAX_CHAIN {
            return Err(TemplateError::new(
                TemplateErrorKind::Syntax,
                format!("template syntax error: an expression chains more than {MAX_CHAIN} operators"),
            ));
        }
    }
    Ok(())
}

pub(super) fn starts_and_ends_as_template(s: &str) -> bool {
    (s.starts_with("{{") || s.starts_with("{%")) && (s.ends_with("}}") || s.ends_with("%}"))
}
