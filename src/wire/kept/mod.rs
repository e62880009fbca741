//! POSTs over plain-HTTP connections this module keeps itself.
//!
//! ureq's handling of one request (a request builder with its own copy of
//! the agent's settings, the head written through a header map, the
//! reply's head parsed into another, its pool's bookkeeping) was about
//! 35,000 of the 80,000 instructions a small call over HTTP cost, and 47
//! of its 55 allocations, and its pool asked twice a request whether the
//! connection was still open: two system calls beside the write and the
//! read that are all the benchmark's C client needs. A session's POST to
//! an `http://` URL with no proxy, which is how a local server is
//! reached, goes out here instead: the head written into one buffer and
//! sent with the body in one write, the reply's head read by httparse,
//! its body framed by `body` (a length, chunks, or the connection's end),
//! and the connection kept for the next POST when the reply allows it.
//! TLS, proxies, the server's stream (GET), the DELETE, and a request
//! whose headers this path leaves to ureq (a Host or User-Agent of the
//! user's, or one ureq would refuse, which then says why) stay with ureq.
//!
//! The reply goes up as ureq's own `Response<Body>`, so that what reads
//! it (statuses, redirects, event streams, pauses) is one path for both,
//! and the connection is the chain ureq's are made of (`tcp` under
//! `SlicedWire`): the same slices for Ctrl-C and pauses, the same
//! acknowledgements and time limits, and every socket shut down with the
//! client.

use std::io::Write as _;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use ureq::http::uri::Scheme;
use ureq::http::{HeaderName, HeaderValue, Response, StatusCode, Uri, Version};
use ureq::unversioned::resolver::Resolver;
use ureq::unversioned::transport::time::Duration as WireDuration;
use ureq::unversioned::transport::{NextTimeout, ShutdownHandle, Transport as _};
use ureq::{Agent, Body, Timeout};

use super::tcp::{connect_any, QuickAckTransport};
use super::{lock, SharedResolver, SlicedWire};

mod body;

use body::{Framing, KeptBody};

/// What a POST here goes out on.
type Connection = SlicedWire<QuickAckTransport>;

/// Connections kept idle at most, as many as ureq's pool kept per host.
const MAX_IDLE: usize = 4;

/// Headers in a reply's head read at most (ureq's own limit).
const MAX_HEADERS: usize = 128;

/// What this client says it is, on this path and ureq's alike.
pub(crate) const USER_AGENT: &str = concat!("lua-mcp/", env!("CARGO_PKG_VERSION"));

/// One client's kept connections, and the sockets of those in use, so
/// that closing the client ends every wait on them.
pub(crate) struct KeptConnections {
    idle: Mutex<Vec<Idle>>,
    sockets: Mutex<Vec<Weak<dyn ShutdownHandle>>>,
    shut: AtomicBool,
    /// The agent whose settings (buffer sizes, Nagle, proxy) this path
    /// follows, and the resolver it shares with it.
    agent: Agent,
    resolver: SharedResolver,
    /// The last URL posted to, taken apart once.
    target: Mutex<Option<Arc<Target>>>,
}

/// A connection kept for the next POST.
struct Idle {
    /// The URL it was made for (connections are told apart by its
    /// authority, `host:port`).
    target: Arc<Target>,
    connection: Connection,
    since: Instant,
}

/// A URL as this path writes it: the Host header and the request line's
/// path.
pub(super) struct Target {
    url: String,
    uri: Uri,
    authority: String,
    path: String,
}

impl Target {
    /// None for a URL this path leaves to ureq: another scheme, or
    /// credentials in it.
    fn of(url: &str) -> Option<Target> {
        let uri: Uri = url.parse().ok()?;
        let authority = uri.authority()?.as_str().to_string();
        if uri.scheme() != Some(&Scheme::HTTP) || authority.contains('@') {
            return None;
        }
        let path = uri.path_and_query().map_or("/", |p| p.as_str()).to_string();
        Some(Target { url: url.to_string(), uri, authority, path })
    }
}

/// A request as it is written (its head, then its body), and whether
/// every header in it is one this path may send.
pub(crate) struct RequestHead {
    bytes: Vec<u8>,
    valid: bool,
    target: Arc<Target>,
}

impl RequestHead {
    /// Adds a header, its name in lower case (as ureq writes them).
    pub(crate) fn field(&mut self, name: &str, value: &str) {
        let ours = ["host", "user-agent", "content-length", "transfer-encoding"];
        if !is_token(name) || !is_field_value(value) || ours.iter().any(|o| name.eq_ignore_ascii_case(o)) {
            self.valid = false;
            return;
        }
        self.bytes.extend(name.bytes().map(|b| b.to_ascii_lowercase()));
        self.bytes.extend_from_slice(b": ");
        self.bytes.extend_from_slice(value.as_bytes());
        self.bytes.extend_from_slice(b"\r\n");
    }
}

/// A header name as HTTP allows it (a token).
fn is_token(name: &str) -> bool {
    !name.is_empty() && name.bytes().all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

/// A header value with no line break or other control byte in it (a tab
/// aside): one in a value would end the header there, and what followed
/// would be read as headers of the sender's choosing.
fn is_field_value(value: &str) -> bool {
    value.bytes().all(|b| b == b'\t' || (b >= 0x20 && b != 0x7f))
}

impl KeptConnections {
    pub(crate) fn new(agent: Agent, resolver: SharedResolver) -> KeptConnections {
        KeptConnections {
            idle: Mutex::new(Vec::new()),
            sockets: Mutex::new(Vec::new()),
            shut: AtomicBool::new(false),
            agent,
            resolver,
            target: Mutex::new(None),
        }
    }

    /// The head of a POST of `length` bytes to `url`, up to the headers
    /// the caller adds; None when the POST is ureq's to make (see the
    /// module's header).
    pub(crate) fn head(&self, url: &str, length: usize) -> Option<RequestHead> {
        if self.shut.load(Ordering::Relaxed) || self.agent.config().proxy().is_some() {
            return None;
        }
        let target = self.target_of(url)?;
        // Room for the body too: head and body go in one write.
        let mut bytes = Vec::with_capacity(512 + length);
        for part in [b"POST ", target.path.as_bytes(), b" HTTP/1.1\r\ncontent-length: "] {
            bytes.extend_from_slice(part);
        }
        // (Written in place: `to_string` was an allocation per request.)
        let _ = write!(bytes, "{length}");
        for part in [b"\r\nuser-agent: ", USER_AGENT.as_bytes(), b"\r\nhost: ", target.authority.as_bytes(), b"\r\n"] {
            bytes.extend_from_slice(part);
        }
        Some(RequestHead { bytes, valid: true, target })
    }

    fn target_of(&self, url: &str) -> Option<Arc<Target>> {
        let mut last = lock(&self.target);
        if let Some(target) = last.as_ref().filter(|t| t.url == url) {
            return Some(target.clone());
        }
        let target = Arc::new(Target::of(url)?);
        *last = Some(target.clone());
        Some(target)
    }

    /// Sends the request and reads the reply's head, within `timeout`
    /// (the reply's body too: ureq's global limit, which this follows).
    /// None when a header was one this path leaves to ureq.
    pub(crate) fn post(
        self: &Arc<Self>,
        mut head: RequestHead,
        body: &[u8],
        timeout: Duration,
    ) -> Option<Result<Response<Body>, ureq::Error>> {
        if !head.valid {
            return None;
        }
        head.bytes.extend_from_slice(b"\r\n");
        head.bytes.extend_from_slice(body);
        let deadline = Instant::now() + timeout;
        Some(self.exchange(&head, deadline))
    }

    fn exchange(self: &Arc<Self>, request: &RequestHead, deadline: Instant) -> Result<Response<Body>, ureq::Error> {
        let target = &request.target;
        let mut connection = match self.take_idle(&target.authority) {
            Some(connection) => connection,
            None => self.connect(target, deadline)?,
        };
        connection.wire.send(&request.bytes, left(deadline, Timeout::SendRequest))?;
        loop {
            let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
            let mut reply = httparse::Response::new(&mut headers);
            let parsed = reply.parse(connection.wire.buffers().input()).map_err(|e| match e {
                httparse::Error::TooManyHeaders => ureq::Error::Protocol(ureq_proto::Error::HttpParseTooManyHeaders),
                e => ureq::Error::Protocol(ureq_proto::Error::HttpParseFail(e.to_string())),
            })?;
            let limit = self.agent.config().max_response_header_size();
            let length = match parsed {
                httparse::Status::Complete(length) if length <= limit => length,
                httparse::Status::Complete(length) => return Err(ureq::Error::LargeResponseHeader(length, limit)),
                httparse::Status::Partial => {
                    Self::await_head(&mut connection, limit, deadline)?;
                    continue;
                }
            };
            let code = reply.code.unwrap_or(0);
            // An interim reply (103 Early Hints): the real one follows.
            if (100..200).contains(&code) && code != 101 {
                connection.wire.buffers().input_consume(length);
                continue;
            }
            let (response, framing, keep) = response_of(&reply)?;
            connection.wire.buffers().input_consume(length);
            let body = KeptBody::new(self.clone(), target.clone(), connection, framing, keep, deadline);
            return Ok(response.map(|()| Body::builder().reader(body)));
        }
    }

    /// Waits for more of a reply's head; one that fills the buffer and
    /// is still not whole is refused, as ureq refuses it.
    fn await_head(connection: &mut Connection, limit: usize, deadline: Instant) -> Result<(), ureq::Error> {
        let waiting = connection.wire.buffers().input().len();
        if waiting >= limit || connection.wire.buffers().input_append_buf().is_empty() {
            return Err(ureq::Error::LargeResponseHeader(waiting, limit));
        }
        match connection.await_input(left(deadline, Timeout::RecvResponse))? {
            true => Ok(()),
            false => Err(std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "Peer disconnected").into()),
        }
    }

    /// An idle connection to `authority` that the server has not closed
    /// (or written to out of turn) meanwhile; others found are dropped,
    /// as are those idle longer than the agent's `max_idle_age` (15 s, as
    /// ureq keeps them): a NAT or firewall may have forgotten such a
    /// connection without a word, and a request on it would wait out its
    /// whole time limit.
    fn take_idle(&self, authority: &str) -> Option<Connection> {
        let max_age = self.agent.config().max_idle_age();
        let mut idle = lock(&self.idle);
        idle.retain(|kept| kept.since.elapsed() <= max_age);
        while let Some(at) = idle.iter().rposition(|kept| kept.target.authority == authority) {
            let mut kept = idle.swap_remove(at);
            if kept.connection.is_open() {
                return Some(kept.connection);
            }
        }
        None
    }

    fn connect(&self, target: &Target, deadline: Instant) -> Result<Connection, ureq::Error> {
        let config = self.agent.config();
        let addrs = self.resolver.resolve(&target.uri, config, left(deadline, Timeout::Resolve))?;
        let stream = connect_any(&addrs, Some(deadline.saturating_duration_since(Instant::now())))?;
        let (input, output) = (config.input_buffer_size(), config.output_buffer_size());
        let transport = QuickAckTransport::new(stream, config.no_delay(), input, output)?;
        let mut sockets = lock(&self.sockets);
        // Checked under the lock `shutdown` takes: a socket registered
        // after it ran would never be shut.
        if self.shut.load(Ordering::Relaxed) {
            return Err(std::io::Error::other("the client is closed").into());
        }
        sockets.retain(|s| s.strong_count() > 0);
        sockets.push(transport.shutdown_handle());
        Ok(SlicedWire { wire: transport, unsent: Vec::new() })
    }

    /// Takes a connection back whose reply was read to its end.
    fn keep(&self, target: Arc<Target>, connection: Connection) {
        let mut idle = lock(&self.idle);
        if idle.len() < MAX_IDLE && !self.shut.load(Ordering::Relaxed) {
            idle.push(Idle { target, connection, since: Instant::now() });
        }
    }

    /// Ends every wait on these connections at once (each read sees the
    /// connection's end), and keeps none from now on.
    pub(crate) fn shutdown(&self) {
        let sockets = lock(&self.sockets);
        self.shut.store(true, Ordering::Relaxed);
        for socket in sockets.iter().filter_map(Weak::upgrade) {
            socket.shutdown();
        }
        drop(sockets);
        lock(&self.idle).clear();
    }
}

/// The time left before `deadline`, for a wait ureq's way.
fn left(deadline: Instant, reason: Timeout) -> NextTimeout {
    let after = WireDuration::Exact(deadline.saturating_duration_since(Instant::now()));
    NextTimeout { after, reason, ..NextTimeout::default() }
}

/// The reply's status, version and headers, how its body is framed, and
/// whether its connection may carry another request after it.
fn response_of(reply: &httparse::Response) -> Result<(Response<()>, Framing, bool), ureq::Error> {
    let bad = |what: &str| ureq::Error::Protocol(ureq_proto::Error::HttpParseFail(what.to_string()));
    let status = StatusCode::from_u16(reply.code.unwrap_or(0)).map_err(|_| bad("invalid status"))?;
    let version = if reply.version == Some(1) { Version::HTTP_11 } else { Version::HTTP_10 };
    let mut response = Response::new(());
    *response.status_mut() = status;
    *response.version_mut() = version;
    let map = response.headers_mut();
    map.reserve(reply.headers.len());
    for field in reply.headers.iter() {
        let name = HeaderName::from_bytes(field.name.as_bytes()).map_err(|_| bad("invalid header name"))?;
        let value = HeaderValue::from_bytes(field.value).map_err(|_| bad("invalid header value"))?;
        map.append(name, value);
    }
    let framing = Framing::of(status.as_u16(), map).map_err(bad)?;
    let close = map.get_all(ureq::http::header::CONNECTION).iter().any(|v| has_token(v.as_bytes(), b"close"));
    let keep = version == Version::HTTP_11 && !close && !matches!(framing, Framing::UntilClose);
    Ok((response, framing, keep))
}

/// Whether a comma-separated header value lists `token` (in any case).
fn has_token(value: &[u8], token: &[u8]) -> bool {
    value.split(|&b| b == b',').any(|t| t.trim_ascii().eq_ignore_ascii_case(token))
}

#[cfg(test)]
mod tests;
