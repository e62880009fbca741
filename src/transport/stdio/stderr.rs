//! What the server said besides its messages: its stderr, drained so it
//! never blocks on a full pipe and its tail kept for errors, and the
//! non-JSON lines of its stdout; both quoted when it dies.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::thread;
use std::time::{Duration, Instant};

use crate::server_text;

use super::Launch;

/// What the pipes have seen, shared with the threads that see it: what the
/// server wrote on stderr, and on stdout besides its messages.
#[derive(Default)]
pub(super) struct PipeLog {
    pub(super) stderr: VecDeque<u8>,
    pub(super) noise: VecDeque<String>,
    pub(super) any_stdout: bool,
    /// The stderr pipe reached EOF: the tail is complete.
    pub(super) stderr_done: bool,
}

impl PipeLog {
    /// Keeps what the server wrote on stderr, its last [`STDERR_TAIL_BYTES`].
    pub(super) fn keep_stderr(&mut self, bytes: &[u8]) {
        self.stderr.extend(bytes);
        let excess = self.stderr.len().saturating_sub(STDERR_TAIL_BYTES);
        self.stderr.drain(..excess);
    }

    /// Not JSON-RPC: a banner or a stray log line. Keep a short memory
    /// of it for the error message if the server then dies.
    pub(super) fn keep_noise(&mut self, line: &[u8]) {
        if self.noise.len() == NOISE_LINES {
            self.noise.pop_front();
        }
        let line = String::from_utf8_lossy(line);
        self.noise.push_back(server_text::printable(head_chars(&line, 200)).into_owned());
    }
}

/// What an error says of a server that ended: whether it spoke at all,
/// its command, the end of its stderr, and its stdout's noise when it
/// never sent a message.
pub(super) fn ended_detail(log: &Mutex<PipeLog>, launch: &Launch) -> String {
    // stdout and stderr close together, but are read separately: give
    // stderr's reading a moment to catch up, so the message quotes what
    // the server said last. (A helper the server left behind may hold
    // stderr open: hence the bound.)
    let settle = Instant::now() + Duration::from_millis(200);
    while !log.lock().unwrap_or_else(|p| p.into_inner()).stderr_done && Instant::now() < settle {
        thread::sleep(Duration::from_millis(2));
    }
    let log = log.lock().unwrap_or_else(|p| p.into_inner());
    let what = if log.any_stdout { "MCP server exited" } else { "MCP server produced no output" };
    let mut detail = format!("{what} ({})", launch.describe());
    if let Some(said) = stderr_excerpt(&log) {
        detail.push_str(": ");
        detail.push_str(&said);
    }
    if !log.noise.is_empty() && !log.any_stdout {
        detail.push_str(" (stdout: ");
        detail.push_str(&log.noise.iter().cloned().collect::<Vec<_>>().join(" | "));
        detail.push(')');
    }
    detail
}

/// The end of what the server wrote to stderr, for an error; None when
/// it wrote nothing but white space.
pub(super) fn stderr_excerpt(log: &PipeLog) -> Option<String> {
    let stderr: Vec<u8> = log.stderr.iter().copied().collect();
    let stderr = String::from_utf8_lossy(&stderr);
    let stderr = stderr.trim_end();
    (!stderr.is_empty()).then(|| server_text::printable(&last_lines(stderr, STDERR_EXCERPT_CHARS)).into_owned())
}

/// What a dead server said last, for the error: at most `n` characters,
/// starting at a line where the cut allows, after "..." where it was cut.
/// Python, Node and Rust all end a crash's output with the exception
/// itself: `MCP server produced no output (...): Traceb...` was all a
/// Python server's startup crash once left us. (The reference keeps the
/// first 300 bytes.)
pub(super) fn last_lines(s: &str, n: usize) -> String {
    let tail = tail_chars(s, n);
    if tail.len() == s.len() {
        return tail.to_string();
    }
    // A whole line, when one starts in the tail (not its last).
    let start = tail.find('\n').filter(|&i| i + 1 < tail.len()).map_or(0, |i| i + 1);
    format!("...{}{}", if start > 0 { "\n" } else { "" }, &tail[start..])
}

pub(super) fn head_chars(s: &str, n: usize) -> &str {
    match s.char_indices().nth(n) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}

pub(super) fn tail_chars(s: &str, n: usize) -> &str {
    let count = s.chars().count();
    if count <= n {
        return s;
    }
    match s.char_indices().nth(count - n) {
        Some((i, _)) => &s[i..],
        None => s,
    }
}

pub(super) const STDERR_TAIL_BYTES: usize = 64 * 1024;

/// How much of that a failure's message quotes: room for a traceback's
/// last frames and its exception.
pub(super) const STDERR_EXCERPT_CHARS: usize = 600;

/// Lines of non-JSON stdout kept for error messages.
pub(super) const NOISE_LINES: usize = 5;

#[cfg(test)]
mod tests {
    use super::{last_lines, stderr_excerpt, PipeLog, NOISE_LINES, STDERR_EXCERPT_CHARS, STDERR_TAIL_BYTES};

    fn log_of(stderr: &str) -> PipeLog {
        let mut log = PipeLog::default();
        log.keep_stderr(stderr.as_bytes());
        log
    }

    #[test]
    fn a_long_stderr_is_quoted_from_its_last_lines_with_the_cut_marked() {
        let traceback = format!(
            "Traceback (most recent call last):\n{}AttributeError: 'Server' object has no attribute 'list_resources'",
            "  File \"x.py\", line 1, in <module>\n".repeat(40)
        );
        assert_eq!(
            last_lines(&traceback, 120),
            "...\n  File \"x.py\", line 1, in <module>\nAttributeError: 'Server' object has no attribute 'list_resources'"
        );
        assert_eq!(last_lines("short", 120), "short");
        assert_eq!(last_lines(&"x".repeat(10), 4), "...xxxx");
    }

    #[test]
    fn a_stderr_of_white_space_only_is_no_excerpt() {
        assert_eq!(stderr_excerpt(&PipeLog::default()), None);
        assert_eq!(stderr_excerpt(&log_of(" \n\t\n")), None);
    }

    #[test]
    fn a_short_stderr_is_quoted_whole_without_its_last_newline() {
        let said = stderr_excerpt(&log_of("listening\nfatal: no config\n"));
        assert_eq!(said.as_deref(), Some("listening\nfatal: no config"));
    }

    #[test]
    fn a_long_stderr_is_cut_to_its_last_600_characters_from_a_line_start() {
        let stderr: String = (0..100).map(|i| format!("line {i:03} of the server's log\n")).collect();
        let said = stderr_excerpt(&log_of(&stderr)).unwrap();
        assert!(said.starts_with("...\nline "), "{said}");
        assert!(said.ends_with("\nline 099 of the server's log"), "{said}");
        assert!(said.chars().count() <= STDERR_EXCERPT_CHARS + "...\n".len(), "{said}");
    }

    #[test]
    fn the_excerpt_counts_characters_not_bytes() {
        let said = stderr_excerpt(&log_of(&"é".repeat(1000))).unwrap();
        assert_eq!(said, format!("...{}", "é".repeat(STDERR_EXCERPT_CHARS)));
    }

    #[test]
    fn stderr_keeps_only_its_last_64_kib() {
        let mut log = PipeLog::default();
        log.keep_stderr(&[b'a'; STDERR_TAIL_BYTES]);
        log.keep_stderr(b"the end");
        let kept: Vec<u8> = log.stderr.iter().copied().collect();
        assert_eq!(kept.len(), STDERR_TAIL_BYTES);
        assert!(kept.ends_with(b"aathe end"));
    }

    #[test]
    fn only_the_last_few_noise_lines_are_kept_each_cut_short() {
        let mut log = PipeLog::default();
        for i in 0..NOISE_LINES + 2 {
            log.keep_noise(format!("banner {i}").as_bytes());
        }
        log.keep_noise("x".repeat(300).as_bytes());
        assert_eq!(log.noise.len(), NOISE_LINES);
        assert_eq!(log.noise.front().map(String::as_str), Some("banner 3"));
        assert_eq!(log.noise.back().map(|l| l.chars().count()), Some(200));
    }
}
