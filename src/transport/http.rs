//! Streamable HTTP: every message is a POST; a reply comes back as a JSON
//! body or as an SSE stream, which is read event by event and left as soon
//! as our reply has arrived. Nothing here reaches a shell: the reference
//! pasted the URL and the server-chosen `Mcp-Session-Id` into a curl
//! command line, so a hostile server could run commands on the user's
//! machine by choosing its session id.
//!
//! After the handshake a second connection (GET, the server's own stream)
//! is held open by a thread, so a server can ping us or notify us between
//! requests; the thread answers server requests itself, as the stdio
//! reader does.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use ureq::http::Response;
use ureq::tls::{parse_pem, PemItem, RootCerts, TlsConfig};
use ureq::{Agent, Body};

use crate::codec::{self, Json};
use crate::error::{Error, Result};
use crate::protocol::{answer_server_request, classify, id_key, is_forwarded, IdKey, Kind};
use crate::transport::Transport;

#[derive(Clone, Debug)]
pub struct Options {
    pub url: String,
    pub headers: Vec<(String, String)>,
    pub timeout: Duration,
    pub max_message_bytes: usize,
    /// PEM certificates to trust instead of the bundled Mozilla roots
    /// (a private CA, a self-signed server).
    pub ca_pem: Option<Vec<u8>>,
    /// Server requests Lua answers (`opts.handlers`).
    pub forward: Vec<String>,
}

/// Reconnecting to a stream that closed before our reply: how often, and
/// how long to wait when the server gave no `retry:`.
const MAX_RESUMES: usize = 5;
const DEFAULT_RETRY: Duration = Duration::from_millis(500);
const MAX_RETRY: Duration = Duration::from_secs(10);
/// How much of an error body an error message quotes.
const ERROR_EXCERPT: usize = 200;

/// What the request thread and the listener thread share.
struct Shared {
    agent: Agent,
    options: Options,
    session_id: Mutex<Option<String>>,
    protocol_version: Mutex<Option<String>>,
    stopped: AtomicBool,
}

impl Shared {
    fn session_id(&self) -> Option<String> {
        self.session_id.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Headers every request carries: the user's, then the session's.
    fn decorate<B>(&self, mut req: ureq::RequestBuilder<B>) -> ureq::RequestBuilder<B> {
        for (name, value) in &self.options.headers {
            req = req.header(name.as_str(), value.as_str());
        }
        if let Some(id) = self.session_id() {
            req = req.header("Mcp-Session-Id", id);
        }
        if let Some(v) = self.protocol_version.lock().unwrap_or_else(|p| p.into_inner()).clone() {
            req = req.header("MCP-Protocol-Version", v);
        }
        req
    }

    fn post(&self, body: &[u8], timeout: Duration) -> Result<Response<Body>> {
        let req = self
            .agent
            .post(&self.options.url)
            .header("Content-Type", "application/json")
            .header("Accept", "application/json, text/event-stream");
        let req = self.decorate(req).config().timeout_global(Some(timeout)).build();
        req.send(body).map_err(|e| self.unreachable(e))
    }

    fn get_stream(&self, last_event_id: Option<&str>) -> Result<Response<Body>> {
        let mut req = self.agent.get(&self.options.url).header("Accept", "text/event-stream");
        if let Some(id) = last_event_id {
            req = req.header("Last-Event-ID", id);
        }
        let req = self.decorate(req).config().timeout_connect(Some(self.options.timeout)).build();
        req.call().map_err(|e| self.unreachable(e))
    }

    /// The reference's words for a server that cannot be reached, with
    /// curl's exit codes for the same cases.
    fn unreachable(&self, err: ureq::Error) -> Error {
        let url = &self.options.url;
        let (code, why) = match &err {
            ureq::Error::HostNotFound => ("6", None),
            ureq::Error::Timeout(_) => ("28", None),
            // A certificate problem is not a network problem: say which.
            ureq::Error::Rustls(e) => ("60", Some(format!("TLS: {e}"))),
            ureq::Error::Tls(e) => ("60", Some(format!("TLS: {e}"))),
            // rustls reports a refused certificate through the I/O layer.
            ureq::Error::Io(e) if e.kind() == std::io::ErrorKind::InvalidData => ("60", Some(format!("TLS: {e}"))),
            _ => ("7", None),
        };
        let detail = match why {
            Some(why) => format!("cannot reach the MCP server at {url} ({why})"),
            None => format!("cannot reach the MCP server at {url}"),
        };
        Error::Transport { code: code.into(), detail }
    }

    /// Answers a request the server sent us, on a connection of its own.
    fn answer(&self, request: &Json) {
        if let Some(answer) = answer_server_request(request) {
            let _ = self.post(&codec::encode(&answer), self.options.timeout);
        }
    }
}

pub struct Http {
    shared: Arc<Shared>,
    /// What has been read but not yet handed to the session, in order:
    /// JSON bodies read on the Lua thread, and what stream threads sent.
    queue: VecDeque<Incoming>,
    /// Everything read by stream threads: SSE replies to our POSTs and the
    /// server's own GET stream. One channel, so that waiting for a reply
    /// on one stream never hides a request arriving on another (a server
    /// may ask for elicitation on its GET stream while our tools/call
    /// stream waits for the answer).
    inbox: Receiver<Incoming>,
    events: Sender<Incoming>,
    /// The last POST ran out of time.
    timed_out: bool,
    /// The id of the request last sent: an oversized reply on another
    /// request's stream (one we stopped waiting for) is not its failure.
    current: Option<IdKey>,
    /// The handshake is done; the server's stream opens after our next
    /// message (`initialized`), so the server hears that first.
    listen_pending: bool,
}

enum Incoming {
    Message(Json),
    /// A reply too large to read, on the stream of the request with this id.
    TooLarge(IdKey),
}

impl Http {
    pub fn connect(options: Options) -> Result<Http> {
        let mut tls = TlsConfig::builder();
        if let Some(pem) = &options.ca_pem {
            let certs: Vec<_> = parse_pem(pem)
                .filter_map(|item| match item {
                    Ok(PemItem::Certificate(cert)) => Some(cert),
                    _ => None,
                })
                .collect();
            if certs.is_empty() {
                return Err(Error::BadInput("mcp: opts.ca_file holds no PEM certificate".into()));
            }
            tls = tls.root_certs(RootCerts::from(certs));
        }
        let config = Agent::config_builder()
            .http_status_as_error(false)
            .max_idle_connections_per_host(4)
            .tls_config(tls.build())
            .build();
        let agent = Agent::new_with_config(config);
        let shared = Arc::new(Shared {
            agent,
            options,
            session_id: Mutex::new(None),
            protocol_version: Mutex::new(None),
            stopped: AtomicBool::new(false),
        });
        let (events, inbox) = mpsc::channel();
        Ok(Http {
            shared,
            queue: VecDeque::new(),
            inbox,
            events,
            timed_out: false,
            current: None,
            listen_pending: false,
        })
    }

    fn limit(&self) -> usize {
        self.shared.options.max_message_bytes
    }

    /// Takes a non-stream reply body: one message or a batch of them.
    fn take_json_body(&mut self, mut response: Response<Body>) -> Result<()> {
        let body = read_capped(&mut response, self.limit())?;
        match codec::decode(trim(&body)) {
            Ok(Json::Array(items)) => self.queue.extend(items.into_iter().map(Incoming::Message)),
            Ok(msg @ Json::Object(_)) => self.queue.push_back(Incoming::Message(msg)),
            _ => {}
        }
        Ok(())
    }

    /// A 4xx or 5xx. A JSON-RPC error in the body is the reply to our
    /// request (it may carry a null id: it is ours all the same); anything
    /// else becomes an error naming the status and the start of the body.
    fn take_failure(&mut self, status: u16, mut response: Response<Body>, sent: &Json) -> Result<()> {
        let body = read_capped(&mut response, self.limit()).unwrap_or_default();
        if let (Ok(reply), Some(id)) = (codec::decode(trim(&body)), sent.get("id")) {
            if reply.get("error").is_some() {
                let Json::Object(mut pairs) = reply else { unreachable!("has a field, so is an object") };
                pairs.retain(|(k, _)| k != b"id");
                pairs.push((b"id".to_vec(), id.clone()));
                self.queue.push_back(Incoming::Message(Json::Object(pairs)));
                return Ok(());
            }
        }
        let text = String::from_utf8_lossy(&body);
        let excerpt: String = text.trim().chars().take(ERROR_EXCERPT).collect();
        let detail = if excerpt.is_empty() { format!("HTTP {status}") } else { format!("HTTP {status}: {excerpt}") };
        Err(Error::Transport { code: status.to_string(), detail })
    }

    /// Opens the server's own stream (GET) on a thread of its own; a 405
    /// means the server offers none, which is fine.
    fn listen(&mut self) {
        let Ok(response) = self.shared.get_stream(None) else { return };
        if response.status().as_u16() != 200 || !is_event_stream(&response) {
            return;
        }
        let (shared, events) = (self.shared.clone(), self.events.clone());
        thread::spawn(move || read_stream(shared, response, None, events));
    }
}

/// Reads one SSE stream to its end on a thread of its own: server requests
/// are answered here (or handed to Lua when it has a handler), everything
/// else goes to the channel. A stream that ends before the reply it was
/// opened for (`awaiting`) is resumed with `Last-Event-ID` after the
/// server's `retry:` or a bounded backoff; the server's own stream
/// (`awaiting` = None) is resumed the same way until the client closes.
fn read_stream(shared: Arc<Shared>, first: Response<Body>, awaiting: Option<IdKey>, events: Sender<Incoming>) {
    let limit = shared.options.max_message_bytes;
    let mut reader = SseReader::new(first.into_body().into_reader(), limit);
    let mut resumes = 0;
    loop {
        loop {
            match reader.next_event() {
                Ok(Some(event)) => {
                    if shared.stopped.load(Ordering::Relaxed) {
                        return;
                    }
                    let Ok(msg) = codec::decode(trim(&event)) else { continue };
                    let kind = classify(&msg);
                    if kind == Kind::ServerRequest && !is_forwarded(&msg, &shared.options.forward) {
                        shared.answer(&msg);
                        continue;
                    }
                    let done = matches!(&kind, Kind::Response(id) if Some(id) == awaiting.as_ref());
                    if events.send(Incoming::Message(msg)).is_err() || done {
                        return;
                    }
                }
                Err(StreamError::TooLarge) => match &awaiting {
                    Some(id) => {
                        let _ = events.send(Incoming::TooLarge(id.clone()));
                        return;
                    }
                    // On the server's own stream: skip the event (the
                    // reader reads past the rest of it) and go on.
                    None => continue,
                },
                Ok(None) | Err(StreamError::Broken) => break,
            }
        }
        // The stream ended without what it was for.
        let Some(last_id) = reader.last_event_id.clone() else { return };
        if shared.stopped.load(Ordering::Relaxed) || resumes >= MAX_RESUMES {
            return;
        }
        resumes += 1;
        let backoff = DEFAULT_RETRY * (1 << (resumes - 1)).min(8);
        thread::sleep(reader.retry.unwrap_or(backoff).min(MAX_RETRY));
        if let Ok(r) = shared.get_stream(Some(&last_id)) {
            if r.status().as_u16() == 200 && is_event_stream(&r) {
                let retry = reader.retry;
                reader = SseReader::new(r.into_body().into_reader(), limit);
                reader.last_event_id = Some(last_id);
                reader.retry = retry;
            }
        }
    }
}

impl Transport for Http {
    fn send(&mut self, sent: &Json) -> Result<()> {
        let message = codec::encode(sent);
        let is_request = sent.get("id").is_some() && sent.get("method").is_some();
        let is_initialize = sent.get("method") == Some(&Json::str("initialize"));
        if is_initialize {
            // A new session: no id and no version from the old one.
            *self.shared.session_id.lock().unwrap_or_else(|p| p.into_inner()) = None;
            *self.shared.protocol_version.lock().unwrap_or_else(|p| p.into_inner()) = None;
        }
        if is_request {
            self.current = sent.get("id").and_then(id_key);
        }
        let had_session = self.shared.session_id().is_some();
        let response = match self.shared.post(&message, self.shared.options.timeout) {
            Err(Error::Transport { code, .. }) if code == "28" && is_request => {
                self.timed_out = true;
                return Ok(());
            }
            other => other?,
        };
        let status = response.status().as_u16();
        if is_initialize {
            // Any letter case: header names are case-insensitive.
            if let Some(id) = response.headers().get("mcp-session-id").and_then(|v| v.to_str().ok()) {
                *self.shared.session_id.lock().unwrap_or_else(|p| p.into_inner()) = Some(id.to_string());
            }
        }
        if std::mem::take(&mut self.listen_pending) {
            self.listen();
        }
        match status {
            404 if had_session => Err(Error::SessionExpired),
            200..=299 if !is_request => Ok(()),
            200..=299 if is_event_stream(&response) => {
                let awaiting = sent.get("id").and_then(id_key);
                let (shared, events) = (self.shared.clone(), self.events.clone());
                thread::spawn(move || read_stream(shared, response, awaiting, events));
                Ok(())
            }
            200..=299 => self.take_json_body(response),
            _ => self.take_failure(status, response, sent),
        }
    }

    fn receive(&mut self, deadline: Instant) -> Result<Option<Json>> {
        // What the stream threads brought while Lua was elsewhere comes
        // first: it arrived before anything a JSON body left in the queue.
        let mut early: VecDeque<Incoming> = self.inbox.try_iter().collect();
        if !early.is_empty() {
            early.append(&mut self.queue);
            self.queue = early;
        }
        loop {
            let next = match self.queue.pop_front() {
                Some(incoming) => incoming,
                None if std::mem::take(&mut self.timed_out) => return Ok(None),
                None => match self.inbox.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
                    Ok(incoming) => incoming,
                    // Never disconnected: this struct holds a sender.
                    Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => return Ok(None),
                },
            };
            match next {
                Incoming::Message(msg) => return Ok(Some(msg)),
                Incoming::TooLarge(id) if Some(&id) == self.current.as_ref() => {
                    return Err(Error::MessageTooLarge { limit: self.limit() })
                }
                Incoming::TooLarge(_) => {}
            }
        }
    }

    fn established(&mut self, negotiated_version: &str) {
        *self.shared.protocol_version.lock().unwrap_or_else(|p| p.into_inner()) = Some(negotiated_version.to_string());
        self.listen_pending = true;
    }

    fn session_id(&self) -> Option<String> {
        self.shared.session_id()
    }

    fn close(&mut self) {
        // Stream threads notice at their next event; the DELETE below makes
        // a well-behaved server end its streams, which wakes them.
        self.shared.stopped.store(true, Ordering::Relaxed);
        if self.shared.session_id().is_some() {
            // 405 means the server does not let clients end sessions: fine.
            let req = self.shared.decorate(self.shared.agent.delete(&self.shared.options.url));
            let _ = req.config().timeout_global(Some(Duration::from_secs(2))).build().call();
            *self.shared.session_id.lock().unwrap_or_else(|p| p.into_inner()) = None;
        }
    }
}

impl Drop for Http {
    fn drop(&mut self) {
        self.close();
    }
}

fn is_event_stream(response: &Response<Body>) -> bool {
    response
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.to_ascii_lowercase().starts_with("text/event-stream"))
}

fn read_capped(response: &mut Response<Body>, limit: usize) -> Result<Vec<u8>> {
    let mut body = Vec::new();
    let reader = response.body_mut().as_reader();
    reader
        .take(limit as u64 + 1)
        .read_to_end(&mut body)
        .map_err(|e| Error::Transport { code: "-1".into(), detail: format!("reading the reply: {e}") })?;
    if body.len() > limit {
        return Err(Error::MessageTooLarge { limit });
    }
    Ok(body)
}

fn trim(s: &[u8]) -> &[u8] {
    let start = s.iter().position(|b| !b.is_ascii_whitespace()).unwrap_or(s.len());
    let end = s.iter().rposition(|b| !b.is_ascii_whitespace()).map_or(start, |i| i + 1);
    &s[start..end.max(start)]
}

#[derive(Debug)]
enum StreamError {
    TooLarge,
    /// The connection failed or was cut.
    Broken,
}

/// Reads Server-Sent Events as they arrive: `data:` lines joined with
/// "\n", `id:` and `retry:` remembered, comments and events with empty
/// data (priming events) skipped.
struct SseReader {
    reader: BufReader<Box<dyn Read + Send>>,
    limit: usize,
    last_event_id: Option<String>,
    retry: Option<Duration>,
}

impl SseReader {
    fn new(reader: impl Read + Send + 'static, limit: usize) -> Self {
        SseReader { reader: BufReader::new(Box::new(reader)), limit, last_event_id: None, retry: None }
    }

    /// The next event's data; `None` when the stream ends.
    fn next_event(&mut self) -> std::result::Result<Option<Vec<u8>>, StreamError> {
        let mut data: Option<Vec<u8>> = None;
        let mut line = Vec::new();
        loop {
            line.clear();
            let n = read_line(&mut self.reader, &mut line, self.limit).map_err(|e| match e {
                LineError::TooLarge => StreamError::TooLarge,
                LineError::Io => StreamError::Broken,
            })?;
            if n == 0 {
                return Ok(None);
            }
            let line = line.strip_suffix(b"\n").unwrap_or(&line);
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            if line.is_empty() {
                match data.take() {
                    Some(d) if !d.is_empty() => return Ok(Some(d)),
                    _ => continue,
                }
            }
            if line.starts_with(b":") {
                continue;
            }
            let (field, value) = match line.iter().position(|&b| b == b':') {
                Some(i) => (&line[..i], &line[i + 1..]),
                None => (line, &[][..]),
            };
            let value = value.strip_prefix(b" ").unwrap_or(value);
            match field {
                b"data" => {
                    let d = data.get_or_insert_with(Vec::new);
                    if !d.is_empty() {
                        d.push(b'\n');
                    }
                    if d.len() + value.len() > self.limit {
                        return Err(StreamError::TooLarge);
                    }
                    d.extend_from_slice(value);
                }
                b"id" => self.last_event_id = Some(String::from_utf8_lossy(value).into_owned()),
                b"retry" => {
                    if let Some(ms) = std::str::from_utf8(value).ok().and_then(|s| s.trim().parse::<u64>().ok()) {
                        self.retry = Some(Duration::from_millis(ms));
                    }
                }
                _ => {}
            }
        }
    }
}

enum LineError {
    TooLarge,
    Io,
}

/// One line (with its "\n") into `line`, refusing lines over `limit`.
fn read_line(reader: &mut impl BufRead, line: &mut Vec<u8>, limit: usize) -> std::result::Result<usize, LineError> {
    loop {
        let chunk = reader.fill_buf().map_err(|_| LineError::Io)?;
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
    use super::*;

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

    #[test]
    fn an_oversized_event_is_refused() {
        let mut r = SseReader::new(std::io::Cursor::new(format!("data: {}\n\n", "x".repeat(100)).into_bytes()), 50);
        assert!(matches!(r.next_event(), Err(StreamError::TooLarge)));
    }
}
