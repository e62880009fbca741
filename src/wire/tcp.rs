//! The TCP connections under HTTP: ureq's own transport, with each
//! segment acknowledged at once.
//!
//! A server that writes a reply's headers and its body with a write each
//! and leaves Nagle's algorithm on holds the body until the headers are
//! acknowledged; on a kept connection Linux delays that acknowledgement
//! by 40 ms. uvicorn, which serves the Python SDK's Streamable HTTP, is
//! such a server: every request on a kept connection took 44 ms instead
//! of 1 (curl reusing its connection sees the same). Asking the kernel to
//! acknowledge at once (`TCP_QUICKACK`, which it forgets after a while)
//! takes the stall away; it is asked before each read of a response that
//! has begun to arrive, which is when a body can be waiting on that
//! acknowledgement (it also sends the one held back). Asked before every
//! read, it had the kernel acknowledge each whole reply at once, a packet
//! more per request: a small call against the C server over loopback on
//! one CPU took 62 us instead of 56. Other systems have no such switch
//! and keep their own acknowledgement timing.
//!
//! ureq keeps its socket to itself, so the connection is made and read
//! here, as ureq does it (each resolved address in turn sharing the
//! connect budget, a time limit on each read and write), and the socket
//! is registered with the agent so that `Agent::shutdown` still wakes a
//! thread blocked on it. Each read also notes its socket for the thread
//! (see [`last_socket`]): a response's body keeps its connection out of
//! sight, and the server's stream is watched by polling that socket.
//! On Windows a read with a time limit first waits in WSAPoll: a recv
//! that SO_RCVTIMEO cuts off leaves a Windows socket in an undefined
//! state, and the poll thread's reads, which pause within a fraction of
//! a millisecond, would each end that way.

use std::cell::Cell;
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::{Arc, Weak};
use std::time::Duration;

use ureq::unversioned::transport::{
    Buffers, ConnectionDetails, Connector, Either, LazyBuffers, NextTimeout, ShutdownHandle, Transport,
};

/// A socket as the system names it.
#[cfg(unix)]
pub(crate) type Socket = std::os::fd::RawFd;
#[cfg(windows)]
pub(crate) type Socket = std::os::windows::io::RawSocket;

thread_local! {
    /// The socket this thread last read from.
    static LAST_SOCKET: Cell<Option<Socket>> = const { Cell::new(None) };
}

/// The socket this thread read from last since the last call, if any: after
/// a response's head came, the socket its body will come on. None when
/// it came through a connection made elsewhere (a SOCKS proxy's).
pub(crate) fn last_socket() -> Option<Socket> {
    LAST_SOCKET.take()
}

#[cfg(unix)]
fn socket_of(stream: &TcpStream) -> Socket {
    std::os::fd::AsRawFd::as_raw_fd(stream)
}

#[cfg(windows)]
fn socket_of(stream: &TcpStream) -> Socket {
    std::os::windows::io::AsRawSocket::as_raw_socket(stream)
}

/// Connects TCP like ureq's own connector (which it stands in for).
#[derive(Debug, Default)]
pub(crate) struct QuickAckTcp;

impl<In: Transport> Connector<In> for QuickAckTcp {
    type Out = Either<In, QuickAckTransport>;

    fn connect(&self, details: &ConnectionDetails, chained: Option<In>) -> Result<Option<Self::Out>, ureq::Error> {
        // A SOCKS proxy's connection, made before: it is the connection.
        if let Some(chained) = chained {
            return Ok(Some(Either::A(chained)));
        }
        let total = details.timeout.not_zero().map(|t| *t);
        let stream = connect_any(&details.addrs, total)?;
        let transport = QuickAckTransport::new(
            stream,
            details.config.no_delay(),
            details.config.input_buffer_size(),
            details.config.output_buffer_size(),
        )?;
        (details.register_shutdown)(transport.shutdown_handle())?;
        Ok(Some(Either::B(transport)))
    }
}

/// Each address in turn, the first half of the time left to the first,
/// half of the rest to the next, and so on (10 ms at least each), as ureq
/// does; an address that refuses or cannot be routed gives way to the
/// next, and the last failure is the one reported.
pub(super) fn connect_any(addrs: &[SocketAddr], total: Option<Duration>) -> Result<TcpStream, ureq::Error> {
    let started = std::time::Instant::now();
    let mut share = 0.5;
    let mut last = None;
    for (i, addr) in addrs.iter().enumerate() {
        let last_one = i + 1 == addrs.len();
        let budget = total.map(|t| {
            let part = if last_one { t.saturating_sub(started.elapsed()) } else { t.mul_f64(share) };
            part.max(Duration::from_millis(10))
        });
        share /= 2.0;
        match connect_one(addr, budget) {
            Ok(stream) => return Ok(stream),
            Err(e) if gives_way(&e) => last = Some(e),
            Err(e) => return Err(timed_out(e)),
        }
    }
    Err(timed_out(last.unwrap_or_else(|| std::io::ErrorKind::ConnectionRefused.into())))
}

fn connect_one(addr: &SocketAddr, budget: Option<Duration>) -> std::io::Result<TcpStream> {
    match budget {
        Some(budget) => TcpStream::connect_timeout(addr, budget),
        None => TcpStream::connect(addr),
    }
}

/// A failure that concerns this address only.
fn gives_way(e: &std::io::Error) -> bool {
    use std::io::ErrorKind::*;
    matches!(
        e.kind(),
        ConnectionRefused | HostUnreachable | NetworkUnreachable | NetworkDown | AddrNotAvailable | TimedOut
    )
}

fn timed_out(e: std::io::Error) -> ureq::Error {
    match e.kind() {
        std::io::ErrorKind::TimedOut | std::io::ErrorKind::WouldBlock => ureq::Error::Timeout(ureq::Timeout::Connect),
        _ => e.into(),
    }
}

/// A TCP connection as ureq's transport reads and writes it, asking for
/// acknowledgements at once before each read.
#[derive(Debug)]
pub(crate) struct QuickAckTransport {
    socket: Arc<TcpStream>,
    buffers: LazyBuffers,
    /// The time limits set on the socket now, so that each is set only
    /// when it changes.
    read_limit: Option<Duration>,
    write_limit: Option<Duration>,
    /// Bytes have arrived since the last write: a response has begun, and
    /// the next read may wait on our acknowledgement (see the module's
    /// header).
    reply_begun: bool,
}

impl QuickAckTransport {
    pub(super) fn new(stream: TcpStream, no_delay: bool, input: usize, output: usize) -> std::io::Result<Self> {
        if no_delay {
            stream.set_nodelay(true)?;
        }
        let buffers = LazyBuffers::new(input, output);
        let socket = Arc::new(stream);
        Ok(QuickAckTransport { socket, buffers, read_limit: None, write_limit: None, reply_begun: false })
    }

    /// What shuts the socket down from another thread (see
    /// `ConnectionDetails::register_shutdown`); only a weak reference, so
    /// the socket still closes when its connection is dropped.
    pub(super) fn shutdown_handle(&self) -> Weak<dyn ShutdownHandle> {
        Arc::downgrade(&self.socket) as Weak<dyn ShutdownHandle>
    }

    /// Writes `bytes` whole.
    pub(super) fn send(&mut self, bytes: &[u8], timeout: NextTimeout) -> Result<(), ureq::Error> {
        let timeout = self.ready_to_write(timeout)?;
        write_all(&self.socket, bytes, timeout)
    }

    /// Sets the socket's send limit when it moved (see [`coarse`]); a
    /// write also ends what was being read.
    fn ready_to_write(&mut self, timeout: NextTimeout) -> Result<NextTimeout, ureq::Error> {
        let timeout = at_least_some(timeout.for_write())?;
        let limit = timeout.not_zero().map(|t| coarse(*t));
        if limit != self.write_limit {
            self.socket.set_write_timeout(limit)?;
            self.write_limit = limit;
        }
        self.reply_begun = false;
        Ok(timeout)
    }
}

/// One buffer, never `write_vectored`: std sends a TCP write with
/// MSG_NOSIGNAL, but its vectored write is a plain writev(2), which on a
/// connection shut down meanwhile (the client closing while a thread
/// posts) raises SIGPIPE, and the host, a Lua interpreter that leaves
/// SIGPIPE's default, dies of it.
fn write_all(mut socket: &TcpStream, bytes: &[u8], timeout: NextTimeout) -> Result<(), ureq::Error> {
    socket.write_all(bytes).map_err(|e| io_error(e, timeout))
}

/// A socket's time limit on a grid of 10 ms (1 ms under a second, none
/// under a millisecond), rounded down: a request's time left differs by
/// microseconds from one request to the next, and set exactly it was a
/// system call per request; on the grid it is set again only when it
/// moves. Rounded down, a write or read gives up at most that much early,
/// never late.
fn coarse(limit: Duration) -> Duration {
    let micros = limit.as_micros() as u64;
    let grid = match micros {
        0..1_000 => return limit,
        1_000..1_000_000 => 1_000,
        _ => 10_000,
    };
    Duration::from_micros(micros - micros % grid)
}

impl Transport for QuickAckTransport {
    fn buffers(&mut self) -> &mut dyn Buffers {
        &mut self.buffers
    }

    fn transmit_output(&mut self, amount: usize, timeout: NextTimeout) -> Result<(), ureq::Error> {
        let timeout = self.ready_to_write(timeout)?;
        write_all(&self.socket, &self.buffers.output()[..amount], timeout)
    }

    fn await_input(&mut self, timeout: NextTimeout) -> Result<bool, ureq::Error> {
        let timeout = at_least_some(timeout.for_read())?;
        let limit = timeout.not_zero().map(|t| coarse(*t));
        if limit != self.read_limit {
            self.socket.set_read_timeout(limit)?;
            self.read_limit = limit;
        }
        if self.reply_begun {
            acknowledge_at_once(&self.socket);
        }
        LAST_SOCKET.set(Some(socket_of(&self.socket)));
        #[cfg(windows)]
        if let Some(limit) = limit {
            if !readable_within(&self.socket, limit).map_err(|e| io_error(e, timeout))? {
                return Err(io_error(ErrorKind::TimedOut.into(), timeout));
            }
        }
        let input = self.buffers.input_append_buf();
        let amount = loop {
            match (&*self.socket).read(input) {
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                other => break other.map_err(|e| io_error(e, timeout))?,
            }
        };
        self.buffers.input_appended(amount);
        self.reply_begun |= amount > 0;
        Ok(amount > 0)
    }

    /// Open, and nothing unread on it: a kept connection the server closed
    /// (or wrote to out of turn) is not used again. ureq asks twice a
    /// request (as the connection goes back to its pool and as it is taken
    /// out); see [`quiet`].
    fn is_open(&mut self) -> bool {
        quiet(&self.socket)
    }
}

/// Whether a read would find nothing yet: not closed, no bytes waiting.
/// On Unix one peek that does not wait; switching the socket to
/// non-blocking and back around a read, as ureq's transport does, was
/// three system calls, and six of a kept connection's ten per request.
#[cfg(unix)]
fn quiet(socket: &TcpStream) -> bool {
    let mut byte = 0u8;
    let flags = libc::MSG_PEEK | libc::MSG_DONTWAIT;
    // SAFETY: a one-byte peek into a live local, on a descriptor open
    // while `socket` lives.
    let n = unsafe { libc::recv(socket_of(socket), (&mut byte as *mut u8).cast(), 1, flags) };
    n < 0 && matches!(std::io::Error::last_os_error().kind(), ErrorKind::WouldBlock)
}

/// Windows has no flag for a read that does not wait: the socket is made
/// non-blocking around it.
#[cfg(windows)]
fn quiet(socket: &TcpStream) -> bool {
    let mut byte = [0u8];
    if socket.set_nonblocking(true).is_err() {
        return false;
    }
    let quiet = matches!(socket.peek(&mut byte), Err(e) if e.kind() == ErrorKind::WouldBlock);
    quiet && socket.set_nonblocking(false).is_ok()
}

/// A time limit already spent is a timeout before any I/O.
fn at_least_some(timeout: NextTimeout) -> Result<NextTimeout, ureq::Error> {
    if timeout.after.is_zero() {
        return Err(ureq::Error::Timeout(timeout.reason));
    }
    Ok(timeout)
}

/// A read or write that ran out of time is ureq's timeout for the reason
/// the limit had; anything else is the I/O error it is.
fn io_error(e: std::io::Error, timeout: NextTimeout) -> ureq::Error {
    match e.kind() {
        ErrorKind::TimedOut | ErrorKind::WouldBlock => ureq::Error::Timeout(timeout.reason),
        _ => e.into(),
    }
}

/// Whether the socket has something to read, or its end, within
/// `limit`. On Windows a recv that SO_RCVTIMEO cut off leaves the socket
/// in an undefined state, and the poll thread's reads (which pause after
/// a fraction of a millisecond) would each end that way; so a read with a
/// limit waits in WSAPoll, and reads only once there is something.
/// (SO_RCVTIMEO stays set too; after WSAPoll the recv does not wait.)
#[cfg(windows)]
fn readable_within(socket: &TcpStream, limit: Duration) -> std::io::Result<bool> {
    use windows_sys::Win32::Networking::WinSock::{WSAPoll, POLLRDNORM, WSAPOLLFD};
    let mut entry = WSAPOLLFD { fd: socket_of(socket) as _, events: POLLRDNORM, revents: 0 };
    // Whole milliseconds, rounded up: 0 would not wait at all.
    let ms = limit.as_micros().div_ceil(1000).clamp(1, i32::MAX as u128) as i32;
    // SAFETY: one live entry, its count given.
    let n = unsafe { WSAPoll(&mut entry, 1, ms) };
    if n < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(n > 0)
}

#[cfg(target_os = "linux")]
fn acknowledge_at_once(socket: &TcpStream) {
    use std::os::fd::AsRawFd;
    let on: libc::c_int = 1;
    // SAFETY: the descriptor is open while `socket` lives, and the option
    // value is a c_int of the size given. A failure changes nothing.
    unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_QUICKACK,
            (&on as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        );
    }
}

#[cfg(not(target_os = "linux"))]
fn acknowledge_at_once(_socket: &TcpStream) {}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    /// A connection and the server's end of it.
    fn connected() -> (TcpStream, TcpStream) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        (client, listener.accept().unwrap().0)
    }

    /// Waits (briefly) for what the server did to reach the client.
    fn until_not_quiet(client: &TcpStream) -> bool {
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while quiet(client) {
            if std::time::Instant::now() > deadline {
                return false;
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        true
    }

    /// A server like uvicorn: Nagle's algorithm on, each response's head
    /// and body written apart, so the body waits for the head to be
    /// acknowledged. Answers `requests` POSTs on one kept connection.
    #[cfg(target_os = "linux")]
    fn serve_head_and_body_apart(listener: TcpListener, requests: usize) {
        let (mut conn, _) = listener.accept().unwrap();
        let mut pending = Vec::new();
        for _ in 0..requests {
            let mut chunk = [0u8; 4096];
            // The head, then as many bytes as its Content-Length says.
            let end = loop {
                if let Some(at) = pending.windows(4).position(|w| w == b"\r\n\r\n") {
                    break at + 4;
                }
                let n = conn.read(&mut chunk).unwrap();
                assert!(n > 0, "the client closed its connection");
                pending.extend_from_slice(&chunk[..n]);
            };
            let head = String::from_utf8_lossy(&pending[..end]).to_ascii_lowercase();
            let length: usize =
                head.lines().find_map(|l| l.strip_prefix("content-length:")).map_or(0, |v| v.trim().parse().unwrap());
            while pending.len() < end + length {
                let n = conn.read(&mut chunk).unwrap();
                pending.extend_from_slice(&chunk[..n]);
            }
            pending.drain(..end + length);
            let body = b"{\"ok\":true}";
            conn.write_all(format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n", body.len()).as_bytes()).unwrap();
            conn.write_all(body).unwrap();
        }
    }

    // (Linux only: elsewhere the system's own acknowledgement timing
    // decides, and `acknowledge_at_once` does nothing.)
    #[cfg(target_os = "linux")]
    #[test]
    fn a_server_that_writes_head_and_body_apart_is_not_held_up_by_our_acknowledgements() {
        const REQUESTS: usize = 30;
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/mcp", listener.local_addr().unwrap());
        let server = std::thread::spawn(move || serve_head_and_body_apart(listener, REQUESTS));
        let config = ureq::Agent::config_builder().timeout_global(Some(Duration::from_secs(10))).build();
        let agent = ureq::Agent::with_parts(
            config,
            crate::wire::sliced_connector(),
            ureq::unversioned::resolver::DefaultResolver::default(),
        );
        let started = std::time::Instant::now();
        for _ in 0..REQUESTS {
            let mut response = agent.post(&url).send(&b"{}"[..]).unwrap();
            assert_eq!(response.body_mut().read_to_string().unwrap(), "{\"ok\":true}");
        }
        let took = started.elapsed();
        server.join().unwrap();
        // Each body held back until Linux's delayed acknowledgement (40 ms)
        // would make this 1.2 s; unheld, 30 local requests take a few ms.
        assert!(took < Duration::from_millis(600), "{REQUESTS} requests took {took:?}");
    }

    /// A write on a connection shut down meanwhile (the client closing
    /// while a thread posts) fails with EPIPE; it must not also raise
    /// SIGPIPE, whose default ends a Lua host. (Rust's test harness
    /// ignores SIGPIPE, so it is blocked here and looked for as pending.)
    #[cfg(unix)]
    #[test]
    fn a_write_on_a_connection_shut_down_raises_no_sigpipe() {
        let (client, _server) = connected();
        let mut transport = QuickAckTransport::new(client, true, 1024, 1024).unwrap();
        transport.socket.shutdown(std::net::Shutdown::Both).unwrap();
        // SAFETY: signal sets are plain values, initialised by
        // sigemptyset before use; the mask is this thread's and is put
        // back before the test ends.
        let (sent, raised) = unsafe {
            let mut pipe: libc::sigset_t = std::mem::zeroed();
            let mut old: libc::sigset_t = std::mem::zeroed();
            libc::sigemptyset(&mut pipe);
            libc::sigaddset(&mut pipe, libc::SIGPIPE);
            libc::pthread_sigmask(libc::SIG_BLOCK, &pipe, &mut old);
            let sent = transport.send(b"{}", NextTimeout::default());
            let mut pending: libc::sigset_t = std::mem::zeroed();
            libc::sigpending(&mut pending);
            let raised = libc::sigismember(&pending, libc::SIGPIPE) == 1;
            if raised {
                let mut signal = 0;
                libc::sigwait(&pipe, &mut signal);
            }
            libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
            (sent, raised)
        };
        assert!(sent.is_err(), "a write on a shut connection fails");
        assert!(!raised, "the write raised SIGPIPE");
    }

    /// The limit set on a socket is never later than the time left, and
    /// the time left before each of a client's requests (a minute less a
    /// few microseconds, differing each time) sets the same one.
    #[test]
    fn time_limits_round_down_onto_a_grid_that_requests_share() {
        let ms = Duration::from_millis;
        let us = Duration::from_micros;
        assert_eq!(coarse(ms(60_000) - us(7)), coarse(ms(60_000) - us(23)));
        assert_eq!(coarse(ms(60_000) - us(7)), ms(59_990));
        assert_eq!(coarse(ms(12) + us(700)), ms(12));
        // Under a millisecond (a pause about to come) it stays exact.
        assert_eq!(coarse(us(300)), us(300));
        for micros in [1, 999, 1_000, 1_001, 999_999, 1_000_000, 1_234_567, 60_000_000] {
            let limit = us(micros);
            assert!(coarse(limit) <= limit && !coarse(limit).is_zero(), "{limit:?} -> {:?}", coarse(limit));
        }
    }

    #[test]
    fn a_kept_connection_is_quiet_until_its_server_writes_or_closes() {
        let (client, mut server) = connected();
        assert!(quiet(&client), "an idle connection reads as quiet");
        assert!(quiet(&client), "looking does not change it");
        server.write_all(b"x").unwrap();
        assert!(until_not_quiet(&client), "a byte the server wrote out of turn is seen");
        // The look only peeks: the byte is still there to read.
        client.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        let mut byte = [0u8];
        (&client).read_exact(&mut byte).unwrap();
        assert_eq!(&byte, b"x");
        assert!(quiet(&client));
        let (client, server) = connected();
        drop(server);
        assert!(until_not_quiet(&client), "a connection the server closed is not quiet");
    }
}
