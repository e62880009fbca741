//! The server's three pipes, handed to the process's poll thread
//! (`transport::poller`) and taken back at the shutdown: stdin (`stdin`),
//! which Lua writes straight to and the thread finishes writing when it
//! was full; stdout, read by that thread or by the Lua call that takes
//! its place (`reader`); stderr, drained by the thread into the log
//! (`stderr`). What the thread does with each is `served`. See the
//! module's header.

use std::io;
use std::os::fd::AsRawFd;
use std::process::ChildStdin;
use std::sync::{Arc, Mutex};

use crate::transport::fds::set_nonblocking;
use crate::transport::inbox::Inbox;
use crate::transport::poller::{self, Watched};

use super::super::lines::Reader;
use super::super::stderr::PipeLog;
use super::super::Options;
use super::exit_watch::ExitWatch;
use super::reader::ReadSide;
use super::served::Served;
use super::stdin::StdinPipe;

/// What the transport keeps of the pipes while the poll thread serves
/// them.
pub(super) struct Pipes {
    pub(super) stdin: Arc<StdinPipe>,
    pub(super) inbox: Arc<Inbox>,
    pub(super) log: Arc<Mutex<PipeLog>>,
    pub(super) read_side: Arc<ReadSide>,
    served: Arc<dyn Watched>,
}

/// Hands the server's pipes to the poll thread (already running: see
/// [`poller::start`]).
pub(super) fn start(
    stdin: ChildStdin,
    stdout: std::process::ChildStdout,
    stderr: std::process::ChildStderr,
    exit: Arc<ExitWatch>,
    options: &Options,
) -> io::Result<Pipes> {
    let log = Arc::new(Mutex::new(PipeLog::default()));
    let pipe = Arc::new(StdinPipe::new(stdin));
    // The poll thread serves every server: it must never wait for room.
    let inbox = Arc::new(Inbox::new(options.doorbell.clone()).never_waiting_for_room());
    set_nonblocking(stdout.as_raw_fd());
    let reader = Reader::new(options, inbox.clone(), pipe.clone(), log.clone());
    let read_side = Arc::new(ReadSide::new(reader, stdout, exit));
    let served: Arc<dyn Watched> =
        Arc::new(Served::new(read_side.clone(), pipe.clone(), inbox.clone(), stderr, log.clone()));
    poller::register(served.clone())?;
    Ok(Pipes { stdin: pipe, inbox, log, read_side, served })
}

impl Pipes {
    /// Stops serving the pipes; once this returns the poll thread holds
    /// none of them, so they close with the transport.
    pub(super) fn stop(&self) {
        self.stdin.abandon();
        self.inbox.close();
        poller::forget(&self.served);
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::super::super::lines::{message_text, split_lines, Piece};
    use super::super::super::stderr::{
        last_lines, stderr_excerpt, PipeLog, NOISE_LINES, STDERR_EXCERPT_CHARS, STDERR_TAIL_BYTES,
    };
    use super::super::reader::{next_spin, MAX_SPIN};

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

    #[test]
    fn a_slow_reply_ends_the_spin() {
        assert_eq!(next_spin(MAX_SPIN, MAX_SPIN + Duration::from_micros(1)), Duration::ZERO);
    }

    #[test]
    fn one_quick_reply_after_slow_ones_starts_only_a_short_spin() {
        let spin = next_spin(Duration::ZERO, Duration::from_micros(10));
        assert!(spin > Duration::ZERO && spin < Duration::from_micros(10), "{spin:?}");
    }

    #[test]
    fn quick_replies_earn_a_spin_of_about_twice_their_time() {
        let mut spin = Duration::ZERO;
        for _ in 0..50 {
            spin = next_spin(spin, Duration::from_micros(10));
        }
        // Twice 10 us, and 5 us to spare, approached from below.
        let target = Duration::from_micros(25);
        assert!(spin <= target && spin > target - Duration::from_micros(1), "{spin:?}");
    }

    #[test]
    fn the_spin_never_passes_its_cap() {
        let mut spin = Duration::ZERO;
        for _ in 0..100 {
            spin = next_spin(spin, MAX_SPIN);
            assert!(spin <= MAX_SPIN, "{spin:?}");
        }
        assert!(spin > MAX_SPIN / 2, "{spin:?}");
    }

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
