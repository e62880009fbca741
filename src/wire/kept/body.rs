//! A reply's body on a kept connection, framed as its head says
//! (RFC 9112, section 6.3): so many bytes, chunks, or everything until
//! the server closes. Read to its end, the connection goes back to be
//! kept; dropped before that, it closes with it, as ureq's does.

use std::io::{self, Read};
use std::sync::Arc;
use std::time::Instant;

use ureq::http::header::{CONTENT_LENGTH, TRANSFER_ENCODING};
use ureq::http::HeaderMap;
use ureq::unversioned::transport::Transport as _;
use ureq::Timeout;

use super::{has_token, left, Connection, KeptConnections, Target};

/// How a body ends.
#[derive(Debug)]
pub(super) enum Framing {
    /// After this many bytes more.
    Length(u64),
    Chunked(Chunk),
    /// When the server closes the connection.
    UntilClose,
}

/// Where a chunked body's reading is.
#[derive(Debug, Clone, Copy)]
pub(super) enum Chunk {
    /// At a chunk's size line.
    Size,
    /// Within a chunk, this many bytes of it left.
    Data(u64),
    /// At the line end after a chunk's data.
    DataEnd,
    /// Past the last chunk, at the trailer's lines (most often none).
    Trailer,
}

impl Framing {
    pub(super) fn of(status: u16, headers: &HeaderMap) -> Result<Framing, &'static str> {
        if status == 204 || status == 304 {
            return Ok(Framing::Length(0));
        }
        if let Some(coding) = headers.get_all(TRANSFER_ENCODING).iter().next_back() {
            // Chunked only when it is the last coding; any other ends
            // with the connection.
            let last = coding.as_bytes().rsplit(|&b| b == b',').next().unwrap_or_default();
            return Ok(match has_token(last, b"chunked") {
                true => Framing::Chunked(Chunk::Size),
                false => Framing::UntilClose,
            });
        }
        let mut lengths = headers.get_all(CONTENT_LENGTH).iter();
        let Some(first) = lengths.next() else { return Ok(Framing::UntilClose) };
        let length = |v: &ureq::http::HeaderValue| v.to_str().ok().and_then(|s| s.trim().parse::<u64>().ok());
        let n = length(first).ok_or("invalid Content-Length")?;
        // Two lengths that differ leave no way to tell where the body ends.
        if lengths.any(|v| length(v) != Some(n)) {
            return Err("conflicting Content-Length headers");
        }
        Ok(Framing::Length(n))
    }
}

pub(super) struct KeptBody {
    connections: Arc<KeptConnections>,
    target: Arc<Target>,
    /// None once the body has ended (and the connection gone back or
    /// closed).
    connection: Option<Connection>,
    framing: Framing,
    /// Whether the connection may carry another request once the body
    /// has ended.
    keep: bool,
    deadline: Instant,
}

impl KeptBody {
    pub(super) fn new(
        connections: Arc<KeptConnections>,
        target: Arc<Target>,
        connection: Connection,
        framing: Framing,
        keep: bool,
        deadline: Instant,
    ) -> KeptBody {
        let mut body = KeptBody { connections, target, connection: Some(connection), framing, keep, deadline };
        // A body of no bytes has ended already: 202s to notifications
        // leave their connection free at once.
        if matches!(body.framing, Framing::Length(0)) {
            body.end();
        }
        body
    }

    /// The body has ended: the connection goes back to be kept, unless
    /// the reply said otherwise or bytes follow that nothing asked for.
    fn end(&mut self) {
        let Some(mut connection) = self.connection.take() else { return };
        if self.keep && connection.wire.buffers().input().is_empty() {
            self.connections.keep(self.target.clone(), connection);
        }
    }

    /// Bytes read and not yet taken, waiting for more when there are
    /// none; an empty slice at the connection's end.
    fn waiting(&mut self) -> io::Result<&[u8]> {
        let deadline = self.deadline;
        let Some(connection) = self.connection.as_mut() else { return Ok(&[]) };
        if connection.wire.buffers().input().is_empty() {
            connection.await_input(left(deadline, Timeout::RecvBody)).map_err(ureq::Error::into_io)?;
        }
        Ok(connection.wire.buffers().input())
    }

    fn consume(&mut self, amount: usize) {
        if let Some(connection) = self.connection.as_mut() {
            connection.wire.buffers().input_consume(amount);
        }
    }

    /// Copies what is waiting into `out`, `most` bytes at most.
    fn copy(&mut self, out: &mut [u8], most: u64) -> io::Result<usize> {
        let waiting = self.waiting()?;
        let n = waiting.len().min(out.len()).min(most.try_into().unwrap_or(usize::MAX));
        out[..n].copy_from_slice(&waiting[..n]);
        self.consume(n);
        Ok(n)
    }

    /// Reads a chunk's framing (a size line, the line end after its data,
    /// a trailer line) off what is waiting, or waits for more.
    fn read_chunk_framing(&mut self) -> io::Result<()> {
        let Framing::Chunked(at) = self.framing else { unreachable!("only a chunked body reads chunk framing") };
        let waiting = self.waiting()?;
        if waiting.is_empty() {
            return Err(cut_short());
        }
        let (used, next) = match at {
            Chunk::Size => match httparse::parse_chunk_size(waiting) {
                Ok(httparse::Status::Complete((used, 0))) => (used, Chunk::Trailer),
                Ok(httparse::Status::Complete((used, size))) => (used, Chunk::Data(size)),
                Ok(httparse::Status::Partial) => return self.need_more(),
                Err(_) => return Err(io::Error::new(io::ErrorKind::InvalidData, "invalid chunk size")),
            },
            Chunk::DataEnd => match waiting {
                [b'\r', b'\n', ..] => (2, Chunk::Size),
                [b'\r'] => return self.need_more(),
                _ => return Err(io::Error::new(io::ErrorKind::InvalidData, "chunk not followed by a line end")),
            },
            Chunk::Trailer => match waiting.windows(2).position(|w| w == b"\r\n") {
                // The empty line: the body's end.
                Some(0) => {
                    self.consume(2);
                    self.end();
                    return Ok(());
                }
                Some(at) => (at + 2, Chunk::Trailer),
                None => return self.need_more(),
            },
            Chunk::Data(_) => unreachable!("a chunk's data is read, not its framing"),
        };
        self.consume(used);
        self.framing = Framing::Chunked(next);
        Ok(())
    }

    /// Waits for more bytes after those waiting.
    fn need_more(&mut self) -> io::Result<()> {
        let deadline = self.deadline;
        let Some(connection) = self.connection.as_mut() else { return Err(cut_short()) };
        if connection.wire.buffers().input_append_buf().is_empty() {
            return Err(io::Error::new(io::ErrorKind::InvalidData, "chunk framing too long"));
        }
        match connection.await_input(left(deadline, Timeout::RecvBody)).map_err(ureq::Error::into_io)? {
            true => Ok(()),
            false => Err(cut_short()),
        }
    }
}

/// The server closed the connection before the body's end.
fn cut_short() -> io::Error {
    io::Error::new(io::ErrorKind::UnexpectedEof, "Peer disconnected")
}

impl Read for KeptBody {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        if out.is_empty() {
            return Ok(0);
        }
        loop {
            if self.connection.is_none() {
                return Ok(0);
            }
            match self.framing {
                Framing::Length(left) => {
                    let n = self.copy(out, left)?;
                    if n == 0 {
                        return Err(cut_short());
                    }
                    self.framing = Framing::Length(left - n as u64);
                    if left == n as u64 {
                        self.end();
                    }
                    return Ok(n);
                }
                Framing::UntilClose => {
                    let n = self.copy(out, u64::MAX)?;
                    if n == 0 {
                        self.end();
                    }
                    return Ok(n);
                }
                Framing::Chunked(Chunk::Data(left)) => {
                    let n = self.copy(out, left)?;
                    if n == 0 {
                        return Err(cut_short());
                    }
                    let rest = left - n as u64;
                    self.framing = Framing::Chunked(if rest == 0 { Chunk::DataEnd } else { Chunk::Data(rest) });
                    return Ok(n);
                }
                Framing::Chunked(_) => {
                    self.read_chunk_framing()?;
                }
            }
        }
    }
}
