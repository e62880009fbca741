//! Server-Sent Events, read as they arrive.

use std::io::{BufRead, BufReader, Read};
use std::time::Duration;

use crate::wire::{is_pause, is_user_interrupt};

#[derive(Debug)]
pub(super) enum StreamError {
    TooLarge,
    /// The connection failed or was cut.
    Broken,
    /// The wait for input reached this thread's pause time (see
    /// [`pausing_at`](crate::wire::pausing_at)); reading can go on later.
    Paused,
    /// Ctrl-C while the Lua thread read.
    Interrupted,
}

/// Reads Server-Sent Events as they arrive: `data:` lines joined with
/// "\n", `id:` and `retry:` remembered, comments and events with empty
/// data (priming events) skipped. A read that pauses keeps what it had of
/// the line and the event, so the next call (on any thread) goes on.
pub(super) struct SseReader {
    reader: BufReader<Box<dyn Read + Send>>,
    limit: usize,
    pub(super) last_event_id: Option<String>,
    pub(super) retry: Option<Duration>,
    /// The `event:` type of the event `next_event` returned last (None:
    /// the default, `message`).
    pub(super) event_type: Option<Vec<u8>>,
    /// The type of the event being read.
    reading_type: Option<Vec<u8>>,
    /// The line being read, and the event's data so far.
    line: Vec<u8>,
    data: Option<Vec<u8>>,
}

impl SseReader {
    pub(super) fn new(reader: impl Read + Send + 'static, limit: usize) -> Self {
        SseReader {
            reader: BufReader::new(Box::new(reader)),
            limit,
            last_event_id: None,
            retry: None,
            event_type: None,
            reading_type: None,
            line: Vec::new(),
            data: None,
        }
    }

    /// The next event's data; `None` when the stream ends.
    pub(super) fn next_event(&mut self) -> std::result::Result<Option<Vec<u8>>, StreamError> {
        loop {
            let n = read_line(&mut self.reader, &mut self.line, self.limit).map_err(|e| match e {
                LineError::TooLarge => {
                    self.line.clear();
                    self.data = None;
                    StreamError::TooLarge
                }
                LineError::Io(e) if is_pause(&e) => StreamError::Paused,
                LineError::Io(e) if is_user_interrupt(&e) => StreamError::Interrupted,
                LineError::Io(_) => StreamError::Broken,
            })?;
            if n == 0 {
                return Ok(None);
            }
            let line = std::mem::take(&mut self.line);
            let text = line.strip_suffix(b"\n").unwrap_or(&line);
            let text = text.strip_suffix(b"\r").unwrap_or(text);
            let event = self.take_line(text);
            self.line = line;
            self.line.clear();
            match event {
                Err(e) => return Err(e),
                Ok(Some(event)) => return Ok(Some(event)),
                Ok(None) => {}
            }
        }
    }

    /// One whole line: the event it ends, if it ends one.
    fn take_line(&mut self, line: &[u8]) -> std::result::Result<Option<Vec<u8>>, StreamError> {
        if line.is_empty() {
            self.event_type = self.reading_type.take();
            return Ok(self.data.take().filter(|d| !d.is_empty()));
        }
        if line.starts_with(b":") {
            return Ok(None);
        }
        let (field, value) = match line.iter().position(|&b| b == b':') {
            Some(i) => (&line[..i], &line[i + 1..]),
            None => (line, &[][..]),
        };
        let value = value.strip_prefix(b" ").unwrap_or(value);
        match field {
            b"data" => {
                let d = self.data.get_or_insert_with(Vec::new);
                if !d.is_empty() {
                    d.push(b'\n');
                }
                if d.len() + value.len() > self.limit {
                    self.data = None;
                    return Err(StreamError::TooLarge);
                }
                d.extend_from_slice(value);
            }
            b"id" => self.last_event_id = Some(String::from_utf8_lossy(value).into_owned()),
            b"event" => self.reading_type = Some(value.to_vec()),
            b"retry" => {
                if let Some(ms) = std::str::from_utf8(value).ok().and_then(|s| s.trim().parse::<u64>().ok()) {
                    self.retry = Some(Duration::from_millis(ms));
                }
            }
            _ => {}
        }
        Ok(None)
    }
}

enum LineError {
    TooLarge,
    Io(std::io::Error),
}

/// One line (with its "\n") appended to `line`, refusing lines over
/// `limit`. On an error `line` keeps what was read, for the next call.
fn read_line(reader: &mut impl BufRead, line: &mut Vec<u8>, limit: usize) -> std::result::Result<usize, LineError> {
    loop {
        let chunk = reader.fill_buf().map_err(LineError::Io)?;
        if chunk.is_empty() {
            return Ok(line.len());
        }
        let (used, done) = match chunk.iter().position(|&b| b == b'\n') {
            Some(i) => (i + 1, true),
            None => (chunk.len(), false),
        };
        if line.len() + used > limit + 2 {
            return Err(LineError::TooLarge);
        }
        line.extend_from_slice(&chunk[..used]);
        reader.consume(used);
        if done {
            return Ok(line.len());
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::VecDeque;
    use std::io::Read;
    use std::time::Duration;

    use super::{SseReader, StreamError};
    use crate::wire::Pause;

    fn events(text: &str) -> (Vec<String>, Option<String>, Option<Duration>) {
        let mut r = SseReader::new(std::io::Cursor::new(text.as_bytes().to_vec()), 1 << 20);
        let mut out = Vec::new();
        while let Ok(Some(e)) = r.next_event() {
            out.push(String::from_utf8(e).unwrap());
        }
        (out, r.last_event_id, r.retry)
    }

    #[test]
    fn sse_events_join_data_lines_and_skip_priming_and_comments() {
        let (evs, id, retry) = events("id: 0\nretry: 1500\ndata:\n\n: keep-alive\n\nevent: message\nid: 7\ndata: {\"a\":\ndata: 1}\n\r\ndata: x\n\n");
        assert_eq!(evs, vec!["{\"a\":\n1}".to_string(), "x".to_string()]);
        assert_eq!(id.as_deref(), Some("7"));
        assert_eq!(retry, Some(Duration::from_millis(1500)));
    }

    #[test]
    fn an_unfinished_event_at_the_end_is_dropped() {
        let (evs, _, _) = events("data: whole\n\ndata: half");
        assert_eq!(evs, vec!["whole".to_string()]);
    }

    /// Hands out its chunks one read at a time, with a pause between each.
    struct Chunks(VecDeque<Option<&'static [u8]>>);

    impl Read for Chunks {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            match self.0.pop_front() {
                Some(Some(chunk)) => {
                    buf[..chunk.len()].copy_from_slice(chunk);
                    Ok(chunk.len())
                }
                Some(None) => Err(std::io::Error::other(Pause)),
                None => Ok(0),
            }
        }
    }

    #[test]
    fn a_read_that_pauses_mid_event_goes_on_where_it_stopped() {
        let chunks = [Some(&b"id: 4\nda"[..]), None, Some(b"ta: {\"a\""), None, Some(b":1}\n"), None, Some(b"\n")];
        let mut r = SseReader::new(Chunks(chunks.into_iter().collect()), 1 << 20);
        let mut pauses = 0;
        let event = loop {
            match r.next_event() {
                Err(StreamError::Paused) => pauses += 1,
                other => break other,
            }
        };
        assert_eq!(pauses, 3);
        assert_eq!(event.unwrap().as_deref(), Some(&b"{\"a\":1}"[..]));
        assert_eq!(r.last_event_id.as_deref(), Some("4"));
        assert!(matches!(r.next_event(), Ok(None)));
    }

    #[test]
    fn an_oversized_event_is_refused() {
        let mut r = SseReader::new(std::io::Cursor::new(format!("data: {}\n\n", "x".repeat(100)).into_bytes()), 50);
        assert!(matches!(r.next_event(), Err(StreamError::TooLarge)));
    }
}
