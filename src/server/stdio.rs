//! A server over this process's own stdin and stdout: one JSON message
//! per line each way, stdout for the protocol alone.
//!
//! A handler that prints would corrupt the stream (`print` writes to
//! stdout, and a client that reads a line it cannot parse drops it or
//! fails). So while serving, the protocol writes to a copy of the
//! descriptor stdout was, and descriptor 1 itself is pointed at stderr:
//! whatever else the process writes to stdout, from Lua or from C, lands
//! in the log. Serving ends by putting stdout back.
//!
//! Reading waits in slices, so that Ctrl-C (or the caller's deadline) is
//! noticed between them; a line longer than the bound is dropped whole,
//! as the client's reader drops one.

use std::collections::VecDeque;
use std::io;
use std::time::{Duration, Instant};

use super::link::{Link, Received, Route};
use crate::codec::{decode_message, encode, Json};
use crate::interrupt;
use crate::protocol;
use crate::transport::stdio::lines::{message_text, split_lines, Piece};

/// The one client of a stdio server.
const THE_CLIENT: Route = Route { peer: 0, exchange: 0 };

/// What a read found.
pub enum Read {
    /// A line, without its end.
    Line(Vec<u8>),
    /// A line past the bound, dropped.
    TooLarge,
    /// Nothing before the deadline.
    Nothing,
    /// Stdin ended: the client is gone.
    Ended,
}

pub struct Stdio {
    io: system::Streams,
    line: Vec<u8>,
    oversized: bool,
    limit: usize,
    found: VecDeque<Option<Vec<u8>>>,
    ended: bool,
}

impl Stdio {
    /// Takes over stdin and stdout (see the module's header).
    pub fn open(limit: usize) -> io::Result<Stdio> {
        Ok(Stdio {
            io: system::Streams::open()?,
            line: Vec::new(),
            oversized: false,
            limit,
            found: VecDeque::new(),
            ended: false,
        })
    }

    /// The next line, waiting until `until` at most, in slices of `slice`
    /// between which `stop` is asked (Ctrl-C): Ok(Nothing) then.
    pub fn read(&mut self, until: Instant, slice: Duration, stop: &dyn Fn() -> bool) -> io::Result<Read> {
        loop {
            if let Some(found) = self.found.pop_front() {
                return Ok(match found {
                    Some(line) => Read::Line(line),
                    None => Read::TooLarge,
                });
            }
            if self.ended {
                return Ok(Read::Ended);
            }
            // A deadline already past still looks once, without waiting.
            let wait = until.saturating_duration_since(Instant::now()).min(slice);
            let mut chunk = [0u8; 65536];
            match self.io.read(&mut chunk, wait)? {
                None if Instant::now() >= until || stop() => return Ok(Read::Nothing),
                None => continue,
                Some(0) => self.ended = true,
                Some(n) => {
                    let (found, limit) = (&mut self.found, self.limit);
                    split_lines(&chunk[..n], &mut self.line, &mut self.oversized, limit, |piece| match piece {
                        Piece::Line(line) => {
                            if let Some(text) = message_text(line) {
                                found.push_back(Some(text.to_vec()));
                            }
                        }
                        Piece::TooLarge => found.push_back(None),
                    });
                }
            }
        }
    }

    /// Writes one message and its line end.
    pub fn write(&mut self, text: &[u8]) -> io::Result<()> {
        let mut line = Vec::with_capacity(text.len() + 1);
        line.extend_from_slice(text);
        line.push(b'\n');
        self.io.write_all(&line)
    }
}

impl Link for Stdio {
    /// A line that is not JSON, or past the size bound, is answered here
    /// with the protocol's error and skipped.
    fn receive(&mut self, until: Instant) -> io::Result<Received> {
        loop {
            match self.read(until, interrupt::SLICE, &interrupt::requested)? {
                Read::Line(line) => match decode_message(&line) {
                    Ok(message) => return Ok(Received::Message(message, THE_CLIENT)),
                    Err(e) => {
                        let error = protocol::error_response(Json::Null, -32700, &format!("Parse error: {e}"));
                        self.write(&encode(&error))?
                    }
                },
                Read::TooLarge => {
                    let why = "Invalid Request: the message is too large";
                    self.write(&encode(&protocol::error_response(Json::Null, -32600, why)))?
                }
                Read::Nothing => return Ok(Received::Nothing),
                Read::Ended => return Ok(Received::Ended),
            }
        }
    }

    fn send(&mut self, _route: Route, message: &Json) -> io::Result<()> {
        self.write(&encode(message))
    }

    fn finish(&mut self, _route: Route, reply: Option<&Json>) -> io::Result<()> {
        match reply {
            Some(reply) => self.write(&encode(reply)),
            None => Ok(()),
        }
    }
}

#[cfg(unix)]
mod system {
    use std::io;
    use std::time::Duration;

    /// Stdin, and the protocol's copy of stdout; descriptor 1 points at
    /// stderr until dropped.
    pub struct Streams {
        protocol: libc::c_int,
    }

    impl Streams {
        pub fn open() -> io::Result<Streams> {
            // SAFETY: plain descriptor calls on this process's own 1 and 2;
            // the copy is closed, and 1 restored, when dropped.
            unsafe {
                let protocol = libc::fcntl(1, libc::F_DUPFD_CLOEXEC, 3);
                if protocol < 0 {
                    return Err(io::Error::last_os_error());
                }
                if libc::dup2(2, 1) < 0 {
                    let e = io::Error::last_os_error();
                    libc::close(protocol);
                    return Err(e);
                }
                Ok(Streams { protocol })
            }
        }

        /// Some(0) at the end of stdin, None when nothing came in `within`.
        pub fn read(&mut self, buf: &mut [u8], within: Duration) -> io::Result<Option<usize>> {
            let mut fd = libc::pollfd { fd: 0, events: libc::POLLIN, revents: 0 };
            let ms = within.as_millis().clamp(0, i32::MAX as u128) as libc::c_int;
            // SAFETY: one live pollfd; then a read into `buf` of its length.
            unsafe {
                match libc::poll(&mut fd, 1, ms) {
                    0 => return Ok(None),
                    n if n < 0 => {
                        let e = io::Error::last_os_error();
                        return if e.kind() == io::ErrorKind::Interrupted { Ok(None) } else { Err(e) };
                    }
                    _ => {}
                }
                let n = libc::read(0, buf.as_mut_ptr().cast(), buf.len());
                if n < 0 {
                    let e = io::Error::last_os_error();
                    return match e.kind() {
                        io::ErrorKind::Interrupted | io::ErrorKind::WouldBlock => Ok(None),
                        _ => Err(e),
                    };
                }
                Ok(Some(n as usize))
            }
        }

        /// Written whole. A client that closed its end gives EPIPE, not a
        /// SIGPIPE that would kill the host: the signal is held blocked on
        /// this thread around the write (a host that ignores it is not
        /// changed).
        pub fn write_all(&mut self, mut bytes: &[u8]) -> io::Result<()> {
            // SAFETY: signal masks of this thread, restored below; writes
            // from a live slice of the given length.
            unsafe {
                let mut block: libc::sigset_t = std::mem::zeroed();
                let mut old: libc::sigset_t = std::mem::zeroed();
                libc::sigemptyset(&mut block);
                libc::sigaddset(&mut block, libc::SIGPIPE);
                libc::pthread_sigmask(libc::SIG_BLOCK, &block, &mut old);
                let mut outcome = Ok(());
                while !bytes.is_empty() {
                    let n = libc::write(self.protocol, bytes.as_ptr().cast(), bytes.len());
                    if n < 0 {
                        let e = io::Error::last_os_error();
                        if e.kind() == io::ErrorKind::Interrupted {
                            continue;
                        }
                        outcome = Err(e);
                        break;
                    }
                    bytes = &bytes[n as usize..];
                }
                if outcome.is_err() {
                    // A SIGPIPE the failed write raised stays pending while
                    // blocked: taken here, so that unblocking does not
                    // deliver it.
                    let mut pending: libc::sigset_t = std::mem::zeroed();
                    libc::sigpending(&mut pending);
                    if libc::sigismember(&pending, libc::SIGPIPE) == 1 {
                        let mut taken = 0;
                        libc::sigwait(&block, &mut taken);
                    }
                }
                libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
                outcome
            }
        }
    }

    impl Drop for Streams {
        fn drop(&mut self) {
            // SAFETY: the copy made in `open` goes back to being stdout.
            unsafe {
                libc::dup2(self.protocol, 1);
                libc::close(self.protocol);
            }
        }
    }
}

#[cfg(windows)]
mod system {
    use std::io::{self, Read};
    use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
    use std::time::Duration;

    /// Windows gives no way to wait on a console or pipe handle with a
    /// time limit that works for both: a thread reads stdin, and the Lua
    /// thread waits on what it hands over. The thread ends with stdin.
    /// Stdout is moved aside as on Unix, through the C runtime's
    /// descriptors, which Lua's `print` and `io.write` go through.
    pub struct Streams {
        chunks: Receiver<io::Result<Vec<u8>>>,
        pending: Vec<u8>,
        protocol: libc::c_int,
    }

    impl Streams {
        pub fn open() -> io::Result<Streams> {
            // SAFETY: the C runtime's descriptors 1 and 2 of this process;
            // the copy is closed, and 1 restored, when dropped.
            let protocol = unsafe {
                let protocol = libc::dup(1);
                if protocol < 0 || libc::dup2(2, 1) < 0 {
                    return Err(io::Error::last_os_error());
                }
                // Binary: in text mode the runtime writes each "\n" as
                // "\r\n", which no line of the protocol has.
                _setmode(protocol, libc::O_BINARY);
                protocol
            };
            let (send, chunks) = mpsc::channel();
            std::thread::Builder::new().name("lua-mcp stdin".into()).spawn(move || {
                let mut stdin = io::stdin();
                let mut buf = vec![0u8; 65536];
                loop {
                    let read = stdin.read(&mut buf).map(|n| buf[..n].to_vec());
                    let end = !matches!(&read, Ok(chunk) if !chunk.is_empty());
                    if send.send(read).is_err() || end {
                        return;
                    }
                }
            })?;
            Ok(Streams { chunks, pending: Vec::new(), protocol })
        }

        pub fn read(&mut self, buf: &mut [u8], within: Duration) -> io::Result<Option<usize>> {
            if self.pending.is_empty() {
                match self.chunks.recv_timeout(within) {
                    Ok(chunk) => self.pending = chunk?,
                    Err(RecvTimeoutError::Timeout) => return Ok(None),
                    Err(RecvTimeoutError::Disconnected) => return Ok(Some(0)),
                }
                if self.pending.is_empty() {
                    return Ok(Some(0));
                }
            }
            let n = self.pending.len().min(buf.len());
            buf[..n].copy_from_slice(&self.pending[..n]);
            self.pending.drain(..n);
            Ok(Some(n))
        }

        pub fn write_all(&mut self, mut bytes: &[u8]) -> io::Result<()> {
            while !bytes.is_empty() {
                let chunk = bytes.len().min(1 << 30) as libc::c_uint;
                // SAFETY: writes from a live slice of at least that length.
                let n = unsafe { libc::write(self.protocol, bytes.as_ptr().cast(), chunk) };
                if n < 0 {
                    return Err(io::Error::last_os_error());
                }
                bytes = &bytes[n as usize..];
            }
            Ok(())
        }
    }

    impl Drop for Streams {
        fn drop(&mut self) {
            // SAFETY: the copy made in `open` goes back to being stdout.
            unsafe {
                libc::dup2(self.protocol, 1);
                libc::close(self.protocol);
            }
        }
    }

    extern "C" {
        /// The C runtime's own (msvcrt's and the UCRT's): the libc crate
        /// has no binding for it.
        fn _setmode(fd: libc::c_int, mode: libc::c_int) -> libc::c_int;
    }
}
