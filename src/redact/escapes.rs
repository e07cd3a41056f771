//! Terminal escape sequences kept out of what we print from outside: names and output that come from the cluster or
//! a host are written to the operator's terminal, where `ESC[2J` clears the screen and an OSC sequence retitles the
//! window or writes a hyperlink that says something else than what it opens.

use std::borrow::Cow;

/// `text` without terminal escape sequences (CSI, OSC, DCS and the other ESC forms, 7- and 8-bit) and without the
/// other control characters, but for newline and tab. Text that has none is returned as it is.
pub(crate) fn strip_terminal_escapes(text: &str) -> Cow<'_, str> {
    if !text.chars().any(|c| c.is_control() && c != '\n' && c != '\t') {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\u{1b}' => match chars.next() {
                // CSI: parameters and intermediates, then one final byte in @..~.
                Some('[') => skip_csi(&mut chars),
                // OSC, DCS, SOS, PM, APC: a string ended by BEL or ST (ESC \).
                Some(']' | 'P' | 'X' | '^' | '_') => skip_string(&mut chars),
                // Two- and three-byte forms (ESC ( B, ESC 7, ...): intermediates then one final byte.
                Some(c) if (' '..='/').contains(&c) => {
                    while chars.next_if(|c| (' '..='/').contains(c)).is_some() {}
                    chars.next();
                }
                _ => {}
            },
            '\u{9b}' => skip_csi(&mut chars),
            '\u{9d}' | '\u{90}' | '\u{98}' | '\u{9e}' | '\u{9f}' => skip_string(&mut chars),
            '\n' | '\t' => out.push(c),
            c if c.is_control() => {}
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

fn skip_csi(chars: &mut std::iter::Peekable<std::str::Chars<'_>>) {
    for c in chars.by_ref() {
        if ('@'..='~').contains(&c) {
            break;
        }
    }
}

fn skip_string(chars: &mut std::iter::Peekable<std::str::Chars<'_>>) {
    while let Some(c) = chars.next() {
        match c {
            '\u{7}' | '\u{9c}' => break,
            '\u{1b}' if chars.peek() == Some(&'\\') => {
                chars.next();
                break;
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::strip_terminal_escapes;

    #[test]
    fn escape_sequences_and_control_characters_go_and_the_text_stays() {
        let cases = [
            ("plain-pod", "plain-pod"),
            ("evil\u{1b}[2Jpod", "evilpod"),
            ("\u{1b}[1;31mred\u{1b}[0m", "red"),
            ("a\u{1b}]0;title\u{7}b", "ab"),
            ("a\u{1b}]8;;http://x\u{1b}\\link\u{1b}]8;;\u{1b}\\b", "alinkb"),
            ("a\u{9b}2Jb", "ab"),
            ("a\u{1b}(Bb", "ab"),
            ("line 1\nline\t2\r\u{8}", "line 1\nline\t2"),
            ("unterminated \u{1b}]0;title", "unterminated "),
            ("trailing \u{1b}", "trailing "),
        ];
        for (text, want) in cases {
            assert_eq!(strip_terminal_escapes(text), want, "{text:?}");
        }
    }
}
