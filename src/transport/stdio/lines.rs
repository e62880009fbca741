//! The server's stdout as messages, on every system: lines split as they
//! come (a message may span reads, and a read may hold many), and each
//! line sorted: answered at once, queued for Lua, or kept as noise.

use std::sync::{Arc, Mutex};

use crate::codec::{self, Json};
use crate::transport::inbox::{sort, Event, Inbox, Sorted};

use super::stderr::PipeLog;
use super::{Options, StdinPipe};

/// The stdout reader: splits lines, answers what it can, queues the rest.
pub(super) struct Reader {
    pub(super) limit: usize,
    /// See [`Options::lua_handled`].
    lua_handled: Vec<String>,
    pub(super) inbox: Arc<Inbox>,
    answers: Arc<StdinPipe>,
    log: Arc<Mutex<PipeLog>>,
}

/// What [`split_lines`] found in a read.
pub(crate) enum Piece<'a> {
    /// A whole line, without its "\n".
    Line(&'a [u8]),
    /// A line grew past the limit: what it had is dropped, and the rest of
    /// it up to its "\n" is skipped.
    TooLarge,
}

/// Splits one read into lines. A line not finished in this read waits in
/// `line` for the next; a line over `limit` is reported once (`oversized`
/// remembers it across reads until its end).
pub(crate) fn split_lines(
    mut chunk: &[u8],
    line: &mut Vec<u8>,
    oversized: &mut bool,
    limit: usize,
    mut found: impl FnMut(Piece<'_>),
) {
    while !chunk.is_empty() {
        let (used, complete) = match chunk.iter().position(|&b| b == b'\n') {
            Some(i) => (i + 1, true),
            None => (chunk.len(), false),
        };
        let piece = &chunk[..used - usize::from(complete)];
        if !*oversized {
            if line.len() + piece.len() > limit {
                *oversized = true;
                *line = Vec::new();
                found(Piece::TooLarge);
            } else {
                line.extend_from_slice(piece);
            }
        }
        chunk = &chunk[used..];
        if complete {
            if !*oversized {
                found(Piece::Line(line.as_slice()));
            }
            line.clear();
            // A one-off huge line must not pin its buffer for the session.
            if line.capacity() > 1 << 20 {
                *line = Vec::new();
            }
            *oversized = false;
        }
    }
}

/// A line as a message's text: without a byte order mark or a "\r" before
/// its "\n"; None when it is blank.
pub(crate) fn message_text(line: &[u8]) -> Option<&[u8]> {
    let line = line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(line);
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    (!line.iter().all(u8::is_ascii_whitespace)).then_some(line)
}

impl Reader {
    pub(super) fn new(
        options: &Options,
        inbox: Arc<Inbox>,
        answers: Arc<StdinPipe>,
        log: Arc<Mutex<PipeLog>>,
    ) -> Reader {
        Reader { limit: options.max_message_bytes, lua_handled: options.lua_handled.clone(), inbox, answers, log }
    }

    pub(super) fn handle_line(&self, line: &[u8]) {
        let Some(line) = message_text(line) else { return };
        let sorted = sort(line, &self.lua_handled);
        // On stdout only a JSON object is a message.
        let noise = match &sorted {
            Sorted::NotJson => true,
            Sorted::Deliver(msg, _) => !matches!(msg, Json::Object(_) | Json::Response(_)),
            _ => false,
        };
        {
            let mut log = self.log.lock().unwrap_or_else(|p| p.into_inner());
            if noise {
                log.keep_noise(line);
                return;
            }
            log.any_stdout = true;
        }
        match sorted {
            Sorted::Deliver(msg, _) => self.inbox.push(Event::Message(msg), line.len()),
            Sorted::TooDeep(id) => self.inbox.push(Event::TooDeep(id), line.len()),
            Sorted::Answer(answer) | Sorted::Refuse(answer) => {
                let mut bytes = codec::encode(&answer);
                bytes.push(b'\n');
                self.answers.send(&bytes);
            }
            Sorted::Skip | Sorted::NotJson => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{message_text, split_lines, Piece};

    /// Feeds `reads` to the line splitter one read at a time: the lines it
    /// found (None for one over the limit), and what it still holds.
    fn split(reads: &[&str], limit: usize) -> (Vec<Option<String>>, String) {
        let (mut line, mut oversized, mut found) = (Vec::new(), false, Vec::new());
        for read in reads {
            split_lines(read.as_bytes(), &mut line, &mut oversized, limit, |piece| {
                found.push(match piece {
                    Piece::Line(l) => Some(String::from_utf8(l.to_vec()).unwrap()),
                    Piece::TooLarge => None,
                })
            });
        }
        (found, String::from_utf8(line).unwrap())
    }

    fn kept(text: &str) -> Option<String> {
        Some(text.to_string())
    }

    #[test]
    fn a_message_split_across_reads_is_joined() {
        let (lines, rest) = split(&[r#"{"id":1,"res"#, r#"ult":{}"#, "}\n"], 1024);
        assert_eq!(lines, vec![kept(r#"{"id":1,"result":{}}"#)]);
        assert_eq!(rest, "");
    }

    #[test]
    fn several_messages_in_one_read_come_apart_and_an_unfinished_one_waits() {
        let (lines, rest) = split(&["{\"a\":1}\n{\"b\":2}\n{\"c\""], 1024);
        assert_eq!(lines, vec![kept("{\"a\":1}"), kept("{\"b\":2}")]);
        assert_eq!(rest, "{\"c\"");
    }

    #[test]
    fn a_line_over_the_limit_is_reported_once_and_skipped_to_its_end() {
        let (lines, rest) = split(&["12345678", "9012", "345\nok\n"], 10);
        assert_eq!(lines, vec![None, kept("ok")]);
        assert_eq!(rest, "");
    }

    #[test]
    fn a_line_of_exactly_the_limit_is_kept() {
        let (lines, _) = split(&["abcd\nabcde\n"], 4);
        assert_eq!(lines, vec![kept("abcd"), None]);
    }

    #[test]
    fn a_blank_line_is_no_message() {
        let (lines, _) = split(&["\n\r\n  \n{}\n"], 1024);
        let texts: Vec<Option<Vec<u8>>> =
            lines.iter().map(|l| message_text(l.as_deref().unwrap().as_bytes()).map(<[u8]>::to_vec)).collect();
        assert_eq!(texts, vec![None, None, None, Some(b"{}".to_vec())]);
    }

    #[test]
    fn a_byte_order_mark_and_a_carriage_return_are_not_part_of_the_message() {
        assert_eq!(message_text(b"\xEF\xBB\xBF{\"id\":1}\r"), Some(&b"{\"id\":1}"[..]));
    }
}
