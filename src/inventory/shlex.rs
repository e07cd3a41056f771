//! Python's `shlex.split(line, comments=True, posix=True)`, which Ansible's INI plugin uses on host lines.

/// Splits like POSIX shlex: quotes group and disappear, `\` escapes, `#` at a token start ends the line.
pub fn split(line: &str) -> Result<Vec<String>, String> {
    #[derive(PartialEq, Clone, Copy)]
    enum State {
        Space,
        Word,
        Quote(char),
        Escape(char),
    }
    let mut tokens = Vec::new();
    let mut token = String::new();
    let mut quoted = false;
    let mut state = State::Space;
    // The state to go back to after an escape: a word, or a double-quoted string.
    let mut escaped_from = State::Word;
    for c in line.chars() {
        match state {
            State::Space | State::Word => {
                if matches!(c, ' ' | '\t' | '\r' | '\n') {
                    if state == State::Word || quoted {
                        tokens.push(std::mem::take(&mut token));
                        quoted = false;
                    }
                    state = State::Space;
                } else if c == '#' {
                    // The rest of the line is a comment (shlex reads it away), ending any current token.
                    if state == State::Word || quoted {
                        tokens.push(std::mem::take(&mut token));
                    }
                    return Ok(tokens);
                } else if c == '\\' {
                    escaped_from = State::Word;
                    state = State::Escape('\\');
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
                    state = State::Escape('\\');
                } else {
                    token.push(c);
                }
            }
            State::Escape(_) => {
                // Inside double quotes, a backslash before anything but `"` or `\` stays.
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
        State::Escape(_) => Err("No escaped character".into()),
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

#[cfg(test)]
mod tests {
    use super::split;

    #[test]
    fn splits_like_python_shlex() {
        let table: &[(&str, &[&str])] = &[
            ("a b  c", &["a", "b", "c"]),
            ("h x=\"hello world\" y='a b'", &["h", "x=hello world", "y=a b"]),
            ("h mysecret=\"'03#pa33w0rd'\"", &["h", "mysecret='03#pa33w0rd'"]),
            ("h a=1 # comment", &["h", "a=1"]),
            ("h a=1#not-a-comment-start", &["h", "a=1"]),
            ("h a=\"\"", &["h", "a="]),
            ("h ''", &["h", ""]),
            ("h a=b\\ c", &["h", "a=b c"]),
            ("h \"x\\\"y\\z\"", &["h", "x\"y\\z"]),
            ("h 'x\\y'", &["h", "x\\y"]),
        ];
        for (line, want) in table {
            assert_eq!(split(line).unwrap(), want.iter().map(|s| s.to_string()).collect::<Vec<_>>(), "{line}");
        }
        assert!(split("h a='open").is_err());
        assert!(split("h a\\").is_err());
    }
}
