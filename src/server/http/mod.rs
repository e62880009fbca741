//! A server over Streamable HTTP (2025-03-26 to 2025-11-25): requests
//! POSTed to one path, each answered with JSON or, once its handler sends
//! more than the reply (progress, logs, a question to the client), with an
//! event stream; sessions named by `Mcp-Session-Id`; a GET stream per
//! session for what the server says unasked; DELETE to end one.
//!
//! The sockets are the poll thread's (`listener`, `connection`): it reads
//! requests within their bounds and turns away what the guard refuses
//! before Lua sees anything. What remains is this side, on the Lua
//! thread: sessions, and carrying each message where its route says.

mod connection;
pub mod discovery;
mod flights;
pub mod guard;
pub mod listener;
pub mod request;
pub mod response;
mod sessions;
mod stateless;

use std::collections::VecDeque;
use std::io;
use std::net::{IpAddr, SocketAddr, TcpListener};
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;

use connection::Connection;
use flights::{parse_event_id, Flight, Flights};
use guard::{Guard, LOOPBACK_NAMES};
use listener::{refuse, Exchange, Listening, Shared};
use request::Limits;
use sessions::Sessions;

use super::link::{Link, Received, Route};
use super::PeerKey;
use crate::codec::{decode_message, encode, Json};
use crate::interrupt;
use crate::protocol::{self, SUPPORTED_VERSIONS};
use crate::transport::poller::{self, Watched};

/// The keys of stateless requests' clients: apart from the sessions',
/// and under 2^53, so that a handler's `ctx` carries them to Lua and back
/// exactly, whatever its numbers (5.1 and LuaJIT have doubles only).
const STATELESS_PEERS: PeerKey = 1 << 52;

/// What `server:listen` was given.
pub struct Options {
    pub host: String,
    pub port: u16,
    pub path: String,
    pub token: Option<String>,
    /// Host names requests may name besides the loopback ones.
    pub allowed_hosts: Vec<String>,
    pub allowed_origins: Vec<String>,
    pub limits: Limits,
    pub discovery: Option<PathBuf>,
    /// End serving when this process's stdin ends (Unix).
    pub until_stdin_ends: bool,
}

/// Why `listen` would not.
#[derive(Debug)]
pub enum ListenError {
    NeedsToken(String),
    Io(io::Error),
}

pub struct HttpLink {
    listening: Arc<Listening>,
    pub url: String,
    sessions: Sessions,
    flights: Flights,
    next_exchange: u64,
    gone: VecDeque<PeerKey>,
    /// Stateless requests are each a client of their own to the core.
    next_stateless: u64,
    /// A stateless request's headers, until it is answered (a tool's
    /// `Mcp-Param-*` headers are checked against its arguments).
    request_headers: std::collections::HashMap<u64, Vec<(String, Vec<u8>)>>,
    discovery: Option<PathBuf>,
    last_expiry: Instant,
}

impl HttpLink {
    /// Binds, starts serving the socket on the poll thread, and writes the
    /// discovery file (only now that the bind succeeded).
    pub fn listen(options: Options) -> Result<HttpLink, ListenError> {
        let ip: IpAddr = match options.host.as_str() {
            "localhost" => IpAddr::from([127, 0, 0, 1]),
            host => host.trim_matches(|c| c == '[' || c == ']').parse().map_err(|_| {
                ListenError::Io(io::Error::other(format!("{host:?} is not an IP address to bind (or \"localhost\")")))
            })?,
        };
        let loopback = ip.is_loopback();
        if !loopback && options.token.is_none() {
            return Err(ListenError::NeedsToken(ip.to_string()));
        }
        let socket = TcpListener::bind(SocketAddr::new(ip, options.port)).map_err(ListenError::Io)?;
        let bound = socket.local_addr().map_err(ListenError::Io)?;
        let mut hosts: Vec<String> = options.allowed_hosts.clone();
        if loopback {
            hosts.extend(LOOPBACK_NAMES.iter().map(|h| h.to_string()));
        }
        let token = options.token.as_ref().map(|t| t.as_bytes().to_vec());
        let guard = Guard::new(hosts, options.allowed_origins.clone(), token);
        let limits = options.limits.clone();
        let mut listening =
            Listening::new(socket, guard, limits.clone(), options.path.clone()).map_err(ListenError::Io)?;
        listening.watch_stdin = options.until_stdin_ends;
        let listening = Arc::new(listening);
        let shown = match bound.ip() {
            IpAddr::V6(v6) => format!("[{v6}]"),
            v4 => v4.to_string(),
        };
        let url = format!("http://{shown}:{}{}", bound.port(), options.path);
        let link = HttpLink {
            listening: listening.clone(),
            url: url.clone(),
            sessions: Sessions::new(limits.sessions, limits.session_idle),
            flights: Flights::default(),
            next_exchange: 0,
            gone: VecDeque::new(),
            next_stateless: 0,
            request_headers: std::collections::HashMap::new(),
            discovery: None,
            last_expiry: Instant::now(),
        };
        poller::register(listening as Arc<dyn Watched>).map_err(ListenError::Io)?;
        let mut link = link;
        if let Some(path) = options.discovery {
            discovery::write(&path, &url, options.token.as_deref()).map_err(ListenError::Io)?;
            link.discovery = Some(path);
        }
        Ok(link)
    }

    /// What the poll thread and this side share (the doorbell behind
    /// `server:fd()`).
    pub fn shared(&self) -> Arc<Shared> {
        self.listening.shared.clone()
    }

    fn limits(&self) -> &Limits {
        &self.listening.limits
    }

    fn answer(&self, connection: &Connection, status: u16, headers: &[(&str, String)], body: Option<&Json>) {
        let bytes = match body {
            Some(body) => response::whole(status, headers, Some("application/json"), &encode(body), false),
            None => response::whole(status, headers, None, b"", false),
        };
        connection.write(&bytes, self.limits().unsent_bytes);
        connection.done(false);
    }

    fn refuse(&self, connection: &Connection, status: u16, why: &str) {
        refuse(connection, status, why, None, self.limits());
    }

    /// One request from the poll thread: a message for the channel, or
    /// None when it was the transport's alone (a GET, a refusal).
    fn take(&mut self, exchange: Exchange) -> Option<Received> {
        let Exchange { connection, request } = exchange;
        match request.method.as_str() {
            "POST" => self.post(connection, request),
            "GET" => {
                self.open_stream(connection, &request);
                None
            }
            _ => self.delete(connection, &request),
        }
    }

    fn post(&mut self, connection: Arc<Connection>, request: request::Request) -> Option<Received> {
        if !request.accepts("application/json") || !request.accepts("text/event-stream") {
            let why = "Not Acceptable: the client must accept both application/json and text/event-stream";
            self.refuse(&connection, 406, why);
            return None;
        }
        let json_body = request.header_text("content-type").is_some_and(|t| {
            t.split(';').next().is_some_and(|kind| kind.trim().eq_ignore_ascii_case("application/json"))
        });
        if !json_body {
            self.refuse(&connection, 415, "Unsupported Media Type: the body must be application/json");
            return None;
        }
        let message = match decode_message(&request.body) {
            Ok(message @ Json::Object(_)) | Ok(message @ Json::Raw(_)) if message.get("jsonrpc").is_some() => message,
            Ok(_) => {
                let error =
                    protocol::error_response(Json::Null, -32600, "Invalid Request: one JSON-RPC message per POST");
                self.answer(&connection, 400, &[], Some(&error));
                return None;
            }
            Err(e) => {
                let error = protocol::error_response(Json::Null, -32700, &format!("Parse error: {e}"));
                self.answer(&connection, 400, &[], Some(&error));
                return None;
            }
        };
        if stateless::is_stateless(&request, &message) {
            return self.post_stateless(connection, request, message);
        }
        let is_request = message.get("method").is_some() && message.get("id").is_some();
        let initializing = is_request && message.get("method") == Some(&Json::str("initialize"));
        let (peer, announces) = if initializing {
            match self.sessions.open() {
                Some((id, peer)) => (peer, Some(id)),
                None => {
                    let why =
                        format!("Service Unavailable: this server holds {} sessions already", self.limits().sessions);
                    self.refuse(&connection, 503, &why);
                    return None;
                }
            }
        } else {
            (self.session_of(&connection, &request)?, None)
        };
        if !is_request {
            self.answer(&connection, 202, &[], None);
            return Some(Received::Message(message, Route::unasked(peer)));
        }
        self.next_exchange += 1;
        self.flights.insert(self.next_exchange, Flight::new(peer, connection, announces));
        Some(Received::Message(message, Route { peer, exchange: self.next_exchange }))
    }

    /// A 2026-07-28 request: checked, then served on its own, as a client
    /// of its own to the core (no session holds anything of it).
    fn post_stateless(
        &mut self,
        connection: Arc<Connection>,
        request: request::Request,
        message: Json,
    ) -> Option<Received> {
        if let Err((status, refused)) = stateless::check(&request, &message) {
            let id = message.get("id").cloned().unwrap_or(Json::Null);
            self.answer(&connection, status, &[], Some(&refused.to_response(id)));
            return None;
        }
        if message.get("id").is_none() {
            self.answer(&connection, 202, &[], None);
            return None;
        }
        self.next_stateless += 1;
        let peer = STATELESS_PEERS | self.next_stateless;
        self.next_exchange += 1;
        self.flights.insert(self.next_exchange, Flight::new(peer, connection, None).stateless());
        self.request_headers.insert(self.next_exchange, request.headers);
        Some(Received::Message(message, Route { peer, exchange: self.next_exchange }))
    }

    /// The client of the session a request names, or None when it names
    /// none (400), one that is not (404: the client starts again), or a
    /// protocol version this server does not speak (400).
    fn session_of(&mut self, connection: &Connection, request: &request::Request) -> Option<PeerKey> {
        if let Some(version) = request.header_text("mcp-protocol-version") {
            if !SUPPORTED_VERSIONS.contains(&version) {
                let why = format!("Bad Request: unsupported MCP-Protocol-Version {version:?}");
                self.refuse(connection, 400, &why);
                return None;
            }
        }
        let Some(id) = request.header_text("mcp-session-id") else {
            self.refuse(connection, 400, "Bad Request: Mcp-Session-Id header is required");
            return None;
        };
        match self.sessions.used(id) {
            Some(session) => Some(session.peer),
            None => {
                self.refuse(connection, 404, "Session not found: initialize again");
                None
            }
        }
    }

    /// A GET: the session's stream for what the server says unasked,
    /// resumed after `Last-Event-ID` when the client names one.
    fn open_stream(&mut self, connection: Arc<Connection>, request: &request::Request) {
        if !request.accepts("text/event-stream") {
            self.refuse(&connection, 406, "Not Acceptable: a GET stream needs Accept: text/event-stream");
            return;
        }
        let Some(peer) = self.session_of(&connection, request) else { return };
        let id = request.header_text("mcp-session-id").unwrap_or_default().to_string();
        let unsent = self.limits().unsent_bytes;
        if let Some((exchange, after)) = request.header_text("last-event-id").and_then(parse_event_id) {
            if !self.flights.resume(peer, exchange, after, connection.clone(), unsent) {
                self.refuse(&connection, 404, "Not Found: no stream of this session has that event");
            }
            return;
        }
        let last_seen = request.header_text("last-event-id").and_then(|v| v.parse::<u64>().ok());
        let Some(session) = self.sessions.used(&id) else { return };
        if session.has_stream() {
            self.refuse(&connection, 409, "Conflict: this session has a GET stream open already");
            return;
        }
        connection.write(&response::stream_head(&[("Mcp-Session-Id", id.clone())]), unsent);
        for (number, data) in session.owed_events(last_seen) {
            connection.write(&response::event(Some(&number.to_string()), &data, None), unsent);
            session.delivered(number);
        }
        session.stream = Some(connection);
    }

    fn delete(&mut self, connection: Arc<Connection>, request: &request::Request) -> Option<Received> {
        let peer = self.session_of(&connection, request)?;
        let id = request.header_text("mcp-session-id").unwrap_or_default().to_string();
        if let Some(session) = self.sessions.end(&id) {
            end_stream(&session);
        }
        self.answer(&connection, 200, &[], None);
        Some(Received::Gone(peer))
    }

    fn expire_sessions(&mut self) {
        let now = Instant::now();
        if now.duration_since(self.last_expiry).as_secs() < 1 {
            return;
        }
        self.last_expiry = now;
        self.gone.extend(self.flights.hung_up());
        for session in self.sessions.expire(now) {
            end_stream(&session);
            self.gone.push_back(session.peer);
        }
    }

    /// What the server says unasked: on the session's stream, or kept
    /// until one opens.
    fn send_unasked(&mut self, peer: PeerKey, message: &Json) {
        let unsent = self.limits().unsent_bytes;
        let Some((_, session)) = self.sessions.of_peer(peer) else { return };
        let data = encode(message);
        let number = session.keep_event(data.clone());
        if let Some(stream) = session.stream.as_ref().filter(|s| !s.is_dead()) {
            if stream.write(&response::event(Some(&number.to_string()), &data, None), unsent) {
                session.delivered(number);
            }
        }
    }
}

fn end_stream(session: &sessions::Session) {
    if let Some(stream) = &session.stream {
        stream.write(response::LAST_CHUNK, usize::MAX);
        stream.done(true);
    }
}

impl Link for HttpLink {
    fn receive(&mut self, until: Instant) -> io::Result<Received> {
        loop {
            self.expire_sessions();
            if self.listening.shared.stdin_ended.load(Ordering::SeqCst) {
                return Ok(Received::Ended);
            }
            if let Some(peer) = self.gone.pop_front() {
                return Ok(Received::Gone(peer));
            }
            let now = Instant::now();
            let wait = until.saturating_duration_since(now).min(interrupt::SLICE);
            match self.listening.shared.take(wait) {
                Some(exchange) => {
                    if let Some(received) = self.take(exchange) {
                        return Ok(received);
                    }
                }
                None if Instant::now() >= until || interrupt::requested() => return Ok(Received::Nothing),
                None => {}
            }
        }
    }

    fn send(&mut self, route: Route, message: &Json) -> io::Result<()> {
        let unsent = self.limits().unsent_bytes;
        if let Some(flight) = self.flights.get_mut(route.exchange) {
            flight.send(route.exchange, encode(message), unsent);
        } else if route.peer & STATELESS_PEERS != 0 {
            // A stateless client hears what it is told unasked on its
            // subscriptions/listen, if it has one.
            if let Some((exchange, flight)) = self.flights.of_peer(route.peer) {
                flight.send(exchange, encode(message), unsent);
            }
        } else {
            self.send_unasked(route.peer, message);
        }
        Ok(())
    }

    fn finish(&mut self, route: Route, reply: Option<&Json>) -> io::Result<()> {
        self.request_headers.remove(&route.exchange);
        let unsent = self.limits().unsent_bytes;
        self.flights.finish(route.exchange, reply, unsent);
        Ok(())
    }

    fn headers(&self, route: Route) -> Option<Vec<(String, Vec<u8>)>> {
        self.request_headers.get(&route.exchange).cloned()
    }

    fn close_stream(&mut self, route: Route) -> io::Result<()> {
        let unsent = self.limits().unsent_bytes;
        if let Some(flight) = self.flights.get_mut(route.exchange) {
            flight.close_early(route.exchange, unsent);
        }
        Ok(())
    }
}

impl Drop for HttpLink {
    fn drop(&mut self) {
        let shared = self.listening.shared.clone();
        shared.closed.store(true, Ordering::SeqCst);
        let watched: Arc<dyn Watched> = self.listening.clone();
        poller::forget(&watched);
        for session in self.sessions.drain() {
            end_stream(&session);
        }
        // Their connections close with them.
        drop(self.flights.drain());
        if let Some(path) = &self.discovery {
            discovery::remove(path);
        }
    }
}
