//! What a server wrote, made fit to quote in an error.
//!
//! Hosts print error strings, log them and hand them to models, so the
//! server's words in them are bounded and inert. A red team's server
//! named 100,000 protocol versions in a -32022 and the error grew to
//! 1.6 MB; a dead server's stderr carried terminal escapes (ESC at byte
//! 627) into the message. Every piece of server text an error quotes goes
//! through here: control characters (C0 but tab and newline, DEL, C1)
//! become U+FFFD, as bytes that are not UTF-8 already do, and a text or a
//! list past its bound is cut, saying how much was left out.

use std::borrow::Cow;

use crate::error::Error;

/// Characters of one server text quoted in an error (a message, a
/// challenge, a body's start), unless the caller bounds it otherwise.
pub const TEXT_CHARS: usize = 1000;

/// Characters of one item of a quoted list (a version, a code).
pub const ITEM_CHARS: usize = 64;

/// Items of a quoted list (the versions a server supports).
pub const LIST_ITEMS: usize = 16;

/// Whether `c` would act on a terminal rather than show: C0 controls
/// other than tab and newline, DEL, and the C1 controls.
fn is_control(c: char) -> bool {
    matches!(c, '\u{0}'..='\u{8}' | '\u{b}'..='\u{1f}' | '\u{7f}'..='\u{9f}')
}

/// `text` with its control characters replaced.
pub fn printable(text: &str) -> Cow<'_, str> {
    if !text.chars().any(is_control) {
        return Cow::Borrowed(text);
    }
    Cow::Owned(text.chars().map(|c| if is_control(c) { '\u{fffd}' } else { c }).collect())
}

/// `bytes` as text fit for an error: UTF-8 where it is, printable, and at
/// most `max_chars` characters, followed by how many more there were.
pub fn quoted(bytes: &[u8], max_chars: usize) -> String {
    quoted_str(&String::from_utf8_lossy(bytes), max_chars)
}

/// [`quoted`] for text already decoded.
pub fn quoted_str(text: &str, max_chars: usize) -> String {
    let shown = match text.char_indices().nth(max_chars) {
        None => return printable(text).into_owned(),
        Some((end, _)) => &text[..end],
    };
    let left_out = text[shown.len()..].chars().count();
    format!("{}... ({left_out} more characters)", printable(shown))
}

/// A JSON value a server sent, as Lua would show it (a string as is,
/// anything else as JSON), fit for an error: see [`quoted_str`].
pub fn quoted_value(value: Option<&crate::codec::Json>, max_chars: usize) -> String {
    quoted_str(&crate::codec::lua_text(value), max_chars)
}

/// `error` with the server's own words in it (a JSON-RPC error's message
/// and code) bounded and inert: what a live client raises. The fixture
/// seam raises them as they came, as the reference does, since its
/// callers compare its errors with the reference's byte for byte.
pub fn bounded(error: Error) -> Error {
    match error {
        Error::Rpc { what, message, code, said, data } => Error::Rpc {
            what,
            message: quoted_str(&message, TEXT_CHARS),
            code: quoted_str(&code, ITEM_CHARS),
            said,
            data,
        },
        other => other,
    }
}

/// Items joined with ", ", each quoted, at most [`LIST_ITEMS`] of them,
/// followed by how many more there were.
pub fn listed<I: AsRef<str>>(items: impl IntoIterator<Item = I>) -> String {
    let mut shown = Vec::new();
    let mut left_out = 0usize;
    for item in items {
        if shown.len() < LIST_ITEMS {
            shown.push(quoted_str(item.as_ref(), ITEM_CHARS));
        } else {
            left_out += 1;
        }
    }
    let mut text = shown.join(", ");
    if left_out > 0 {
        text.push_str(&format!(" and {left_out} more"));
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn terminal_escapes_become_replacement_characters_and_tabs_and_newlines_stay() {
        assert_eq!(
            quoted(b"red \x1b[31mtext\x07\r\n\tnext\x7f", 100),
            "red \u{fffd}[31mtext\u{fffd}\u{fffd}\n\tnext\u{fffd}"
        );
        // C1 controls arrive as two UTF-8 bytes; U+00A0 and later stay.
        assert_eq!(quoted("a\u{9b}b\u{a0}c".as_bytes(), 100), "a\u{fffd}b\u{a0}c");
        assert_eq!(quoted(b"bad \xff byte", 100), "bad \u{fffd} byte");
    }

    #[test]
    fn a_long_text_is_cut_saying_how_many_characters_were_left_out() {
        assert_eq!(quoted_str("abcdef", 6), "abcdef");
        assert_eq!(quoted_str("abcdefgh", 6), "abcdef... (2 more characters)");
        assert_eq!(quoted_str("\u{e9}\u{e9}\u{e9}", 1), "\u{e9}... (2 more characters)");
    }

    #[test]
    fn a_long_list_names_sixteen_items_and_counts_the_rest() {
        let versions: Vec<String> = (0..100_000).map(|i| format!("v{i}")).collect();
        let text = listed(&versions);
        assert!(text.starts_with("v0, v1, v2"), "{text}");
        assert!(text.ends_with("v15 and 99984 more"), "{text}");
        assert_eq!(listed(["a", "b"]), "a, b");
        assert_eq!(listed(["x".repeat(70)]), format!("{}... (6 more characters)", "x".repeat(64)));
    }
}
