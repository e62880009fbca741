//! One HTTP exchange: a POST (or the stream's GET, or the closing
//! DELETE) with the headers every request carries, redirects followed
//! within the origin, and what each status means: a JSON body or an event
//! stream, 202 for a notification, 401 and 403 for credentials, 404 for a
//! forgotten session, any other failure in the server's words. Failures
//! to get an answer at all are worded with curl's exit codes, which the
//! reference's callers may match on.

use std::io::Read;
use std::time::Duration;

use ureq::http::header::{self as standard, HeaderValue};
use ureq::http::Response;
use ureq::{Agent, Body};

use super::{lock, Incoming, Shared, FOREGROUND_DRAIN, STREAM_CONNECT_TIMEOUT};
use crate::auth::discovery::parse_challenge;
use crate::auth::dpop;
use crate::codec::{self, Json};
use crate::error::{Error, Result};
use crate::protocol;
use crate::protocol::id_key;
use crate::tool_headers::header_value;
use crate::wire::headers;
use crate::wire::is_user_interrupt;
use crate::wire::{last_socket, pausing_at, Socket};
use std::time::Instant;

/// How much of an error body an error message quotes.
pub(super) const ERROR_EXCERPT: usize = 200;

/// Same-origin redirects followed for one request.
pub(super) const MAX_REDIRECTS: usize = 5;

/// The three kinds of request this transport makes.
#[derive(Clone, Copy)]
pub(super) enum Verb<'a> {
    /// A message, with the headers its own content calls for (see
    /// [`PostHeaders`]).
    Post(&'a [u8], &'a PostHeaders),
    /// The server's stream, or a resumption of one.
    Get {
        last_event_id: Option<&'a str>,
    },
    Delete,
}

impl Shared {
    /// Headers every request carries: the user's, then the session's. A
    /// modern message has no session: its version and method go in
    /// headers of its own (`post_headers`).
    /// A token bound to a DPoP key goes with a proof for this one
    /// request (`method` to `url`).
    fn each_header(&self, modern: bool, method: &str, url: &str, add: &mut dyn FnMut(&str, &str)) -> Result<()> {
        for (name, value) in &self.options.headers {
            add(name, value);
        }
        if let Some(token) = lock(&self.options.bearer).as_deref() {
            match self.options.dpop.as_ref().filter(|proofs| proofs.is_bound()) {
                Some(proofs) => {
                    add(headers::AUTHORIZATION, &format!("DPoP {token}"));
                    add(dpop::DPOP, &proofs.proof(method, url, Some(token))?);
                }
                None => add(headers::AUTHORIZATION, &format!("Bearer {token}")),
            }
        }
        if modern {
            return Ok(());
        }
        if let Some(id) = self.session_id() {
            add(headers::MCP_SESSION_ID, &id);
        }
        if let Some(v) = lock(&self.protocol_version).as_deref() {
            add(headers::MCP_PROTOCOL_VERSION, v);
        }
        Ok(())
    }

    /// [`Shared::each_header`] on one of ureq's requests.
    pub(super) fn decorate<B>(
        &self,
        req: ureq::RequestBuilder<B>,
        modern: bool,
        method: &str,
        url: &str,
    ) -> Result<ureq::RequestBuilder<B>> {
        let mut req = Some(req);
        self.each_header(modern, method, url, &mut |name, value| req = req.take().map(|r| r.header(name, value)))?;
        Ok(req.expect("each header put the request back"))
    }

    /// A POST on a connection kept by this module (see `wire::kept`),
    /// with the same headers in the same order as through ureq; None when
    /// it is ureq's to make. The spare agent's requests (sent after the
    /// session's connections were shut) are always ureq's.
    fn post_kept(&self, agent: &Agent, verb: Verb, url: &str, timeout: Duration) -> Option<Result<Response<Body>>> {
        let Verb::Post(body, post) = verb else { return None };
        if !std::ptr::eq(agent, &self.agent) {
            return None;
        }
        let mut head = self.kept.head(url, body.len())?;
        head.field(headers::CONTENT_TYPE, "application/json");
        head.field(headers::ACCEPT, "application/json, text/event-stream");
        head.field(headers::ACCEPT_ENCODING, "identity");
        if let Err(e) = self.each_header(post.modern, "POST", url, &mut |name, value| head.field(name, value)) {
            return Some(Err(e));
        }
        for (name, value) in &post.own {
            head.field(name, value);
        }
        let sent = self.kept.post(head, body, timeout)?;
        Some(sent.map_err(|e| self.failed(url, e, timeout)))
    }

    /// One request, following same-origin redirects (see the module doc).
    /// Where a redirect led is remembered for the rest of the session: a
    /// server that redirects `/mcp` to `/mcp/` would otherwise get every
    /// body twice.
    pub(super) fn exchange(&self, agent: &Agent, verb: Verb, timeout: Duration) -> Result<Response<Body>> {
        // An HTTP+SSE session posts to the endpoint its stream named.
        let endpoint = self.endpoint().filter(|_| matches!(verb, Verb::Post(..)));
        let mut url = endpoint.clone().unwrap_or_else(|| lock(&self.url).clone());
        let mut nonce_tried = false;
        let mut hop = 0;
        loop {
            let response = match self.post_kept(agent, verb, &url, timeout) {
                Some(sent) => sent?,
                None => self.send_through(agent, verb, &url, timeout)?,
            };
            let status = response.status().as_u16();
            if self.wants_new_nonce(&url, &response) && !nonce_tried {
                nonce_tried = true;
                continue;
            }
            let location = response.headers().get(headers::LOCATION).and_then(|v| v.to_str().ok());
            let (true, Some(location)) = (matches!(status, 301 | 302 | 303 | 307 | 308), location) else {
                if hop > 0 && endpoint.is_none() {
                    *lock(&self.url) = url;
                }
                return Ok(response);
            };
            let refuse = |why| Error::Redirected { status, url: url.clone(), location: location.to_string(), why };
            let next = url::Url::parse(&url).and_then(|base| base.join(location)).map_err(|_| refuse("not a URL"))?;
            let same_origin = url::Url::parse(&url).is_ok_and(|base| base.origin() == next.origin());
            if !same_origin {
                return Err(refuse(
                    "another origin: your headers and the session id stay with the one they were given for",
                ));
            }
            if hop == MAX_REDIRECTS {
                return Err(refuse("too many redirects"));
            }
            url = next.to_string();
            hop += 1;
        }
    }

    /// One request through ureq.
    fn send_through(&self, agent: &Agent, verb: Verb, url: &str, timeout: Duration) -> Result<Response<Body>> {
        let sent = match verb {
            Verb::Post(body, headers) => {
                // Uncompressed: a compressed event stream is held back
                // by the compressor, and ureq's decoder would wrap the
                // errors our reads rely on (see `Pause`).
                // Names and values made at compile time: from text,
                // each was parsed and its value copied, per request.
                let mut req = agent
                    .post(url)
                    .header(standard::CONTENT_TYPE, HeaderValue::from_static("application/json"))
                    .header(standard::ACCEPT, HeaderValue::from_static("application/json, text/event-stream"))
                    .header(standard::ACCEPT_ENCODING, HeaderValue::from_static("identity"));
                req = self.decorate(req, headers.modern, "POST", url)?;
                for (name, value) in &headers.own {
                    req = req.header(name.as_str(), value.as_str());
                }
                req.config().timeout_global(Some(timeout)).build().send(body)
            }
            Verb::Get { last_event_id } => {
                let mut req = agent
                    .get(url)
                    .header(headers::ACCEPT, "text/event-stream")
                    .header(headers::ACCEPT_ENCODING, "identity");
                if let Some(id) = last_event_id {
                    req = req.header(headers::LAST_EVENT_ID, id);
                }
                // Bounded until the headers arrive; the stream itself
                // may then stay open for the session's life.
                let connect = Some(timeout.min(STREAM_CONNECT_TIMEOUT));
                let config =
                    self.decorate(req, false, "GET", url)?.config().timeout_resolve(connect).timeout_connect(connect);
                config.timeout_recv_response(Some(timeout)).build().call()
            }
            Verb::Delete => self
                .decorate(agent.delete(url), false, "DELETE", url)?
                .config()
                .timeout_global(Some(timeout))
                .build()
                .call(),
        };
        sent.map_err(|e| self.failed(url, e, timeout))
    }

    /// Keeps the DPoP nonce a reply carries (a server may hand out a new
    /// one with any reply); true when the reply is a refusal for want of
    /// that nonce, which is worth one more try with it.
    fn wants_new_nonce(&self, url: &str, response: &Response<Body>) -> bool {
        let Some(proofs) = &self.options.dpop else { return false };
        let new = proofs.remember_nonce(url, header(response, dpop::DPOP_NONCE));
        let challenge = header(response, headers::WWW_AUTHENTICATE).map(parse_challenge).unwrap_or_default();
        new && response.status().as_u16() == 401 && dpop::asks_for_nonce(challenge.error.as_deref())
    }

    /// Words for a request that got no HTTP answer, with curl's exit codes
    /// for the same cases (the reference ran curl, and agents may match
    /// on its codes).
    pub(super) fn failed(&self, url: &str, err: ureq::Error, timeout: Duration) -> Error {
        let unreachable = |code: &str, why: Option<String>| Error::Transport {
            code: code.into(),
            detail: match why {
                Some(why) => format!("cannot reach the MCP server at {url} ({why})"),
                None => format!("cannot reach the MCP server at {url}"),
            },
        };
        let weird = |what: String| Error::Transport { code: "8".into(), detail: format!("the server at {url} {what}") };
        if matches!(
            err,
            ureq::Error::HostNotFound | ureq::Error::ConnectionFailed | ureq::Error::Io(_) | ureq::Error::Timeout(_)
        ) {
            // The server may have moved: the next request looks it up again.
            self.resolver.forget();
        }
        match err {
            ureq::Error::Timeout(_) => Error::HttpTimeout { url: url.to_string(), seconds: seconds(timeout) },
            // Our own, from `SlicedWire`: the session names the request.
            ureq::Error::Io(e) if is_user_interrupt(&e) => Error::Interrupted { what: String::new() },
            ureq::Error::HostNotFound => unreachable("6", None),
            // A certificate problem is not a network problem: say which.
            ureq::Error::Rustls(e) => unreachable("60", Some(format!("TLS: {e}"))),
            ureq::Error::Tls(e) => unreachable("60", Some(format!("TLS: {e}"))),
            // rustls reports a refused certificate through the I/O layer.
            ureq::Error::Io(e) if e.kind() == std::io::ErrorKind::InvalidData => {
                unreachable("60", Some(format!("TLS: {e}")))
            }
            ureq::Error::LargeResponseHeader(_, limit) => {
                weird(format!("sent response headers over {limit} bytes, more than this client reads"))
            }
            ureq::Error::Protocol(ureq_proto::Error::HttpParseTooManyHeaders) => {
                weird("sent more response headers than this client reads (128)".into())
            }
            ureq::Error::Protocol(e) => weird(format!("sent a reply that is not valid HTTP ({e})")),
            // The URL itself, before any connection: curl's "malformed".
            // Most often a host name outside ASCII, which nothing here
            // turns into its xn-- form (see Cargo.toml's idna_adapter).
            ureq::Error::Http(_) | ureq::Error::BadUri(_) => unreachable(
                "3",
                Some(
                    "not a URL it can send: write it in ASCII, a host in its xn-- form and other bytes %-encoded"
                        .into(),
                ),
            ),
            _ => unreachable("7", None),
        }
    }

    /// A POST: to the URL, or to an HTTP+SSE session's endpoint, whose
    /// stream is opened first where `transport_kind` asks for it, or where
    /// the URL refuses `initialize` as a 2024-11-05 server does (see
    /// `legacy`).
    pub(super) fn post(&self, body: &[u8], headers: &PostHeaders, timeout: Duration) -> Result<Response<Body>> {
        if self.must_open_legacy() {
            self.open_legacy(timeout)?;
        }
        self.check_legacy_alive()?;
        let response = self.exchange(&self.agent, Verb::Post(body, headers), timeout)?;
        // The GET failing too leaves the POST's refusal, which says more.
        if headers.initialize && self.may_fall_back(response.status().as_u16()) && self.open_legacy(timeout).is_ok() {
            return self.exchange(&self.agent, Verb::Post(body, headers), timeout);
        }
        Ok(response)
    }

    /// The server's own stream (GET), with the socket it comes on where
    /// that is known (see `wire::last_socket`).
    pub(super) fn get_stream(&self, last_event_id: Option<&str>) -> Result<(Response<Body>, Option<Socket>)> {
        last_socket();
        let response = self.exchange(&self.agent, Verb::Get { last_event_id }, self.options.timeout)?;
        Ok((response, last_socket()))
    }

    pub(super) fn url(&self) -> String {
        self.options.url.clone()
    }

    /// A non-stream reply body: one message or a batch of them. A body
    /// that is not JSON fails the request at once (a login page, a proxy's
    /// notice): waiting would only end in a timeout.
    pub(super) fn json_body(&self, status: u16, mut response: Response<Body>) -> Result<Vec<Incoming>> {
        let content_type = header(&response, headers::CONTENT_TYPE).unwrap_or("no content type").to_string();
        let body = read_capped(&mut response, self.options.max_message_bytes)?;
        let text = trim(&body);
        if text.is_empty() {
            // Nothing here: the reply may come on the server's stream.
            return Ok(Vec::new());
        }
        match codec::decode_reply(text) {
            Ok(Json::Array(items)) => Ok(items.into_iter().map(Incoming::Message).collect()),
            Ok(msg @ (Json::Object(_) | Json::Response(_))) => Ok(vec![Incoming::Message(msg)]),
            Err(e) if e.is_too_deep() => {
                // A POST's own body answers that POST: a method here would
                // be a server talking out of turn, and is skipped.
                let envelope = codec::peek_envelope(text);
                if envelope.has_method {
                    return Ok(Vec::new());
                }
                Ok(vec![Incoming::TooDeep(envelope.id.as_ref().and_then(id_key))])
            }
            _ => Err(Error::NotJson { status, url: self.url(), content_type, excerpt: excerpt(&body) }),
        }
    }

    /// A 4xx or 5xx. A JSON-RPC error in the body is the reply to our
    /// request `id` (it may carry a null id: it is ours all the same);
    /// anything else becomes an error naming the status and the start of
    /// the body.
    pub(super) fn failure_body(
        &self,
        status: u16,
        mut response: Response<Body>,
        id: Option<&Json>,
    ) -> Result<Vec<Incoming>> {
        let www_authenticate = header(&response, headers::WWW_AUTHENTICATE)
            .map(|v| crate::server_text::quoted_str(v, crate::server_text::TEXT_CHARS));
        // A refusal is about credentials when the server says so: a 401,
        // or a 403 with a challenge. Any other 403 has its own reason (a
        // Host header refused against DNS rebinding, an origin not
        // allowed) and goes the way of every other failure, in the
        // server's words.
        if status == 401 || (status == 403 && www_authenticate.is_some()) {
            let hint = match (self.options.login, lock(&self.options.bearer).is_some()) {
                (true, _) => "the token the login gave was not accepted",
                (false, true) => "the token in opts.auth.token was not accepted",
                (false, false) => "it needs credentials: set opts.auth.token (or opts.headers.Authorization)",
            };
            let reason = match &www_authenticate {
                Some(_) => None,
                None => Some(read_capped(&mut response, ERROR_BODY_READ).map(|b| excerpt(&b)).unwrap_or_default())
                    .filter(|r| !r.is_empty())
                    .map(|r| self.without_credentials(r)),
            };
            return Err(Error::Unauthorized { status, url: self.url(), www_authenticate, reason, hint });
        }
        let body = read_capped(&mut response, self.options.max_message_bytes).unwrap_or_default();
        if let (Ok(reply), Some(id)) = (codec::decode(trim(&body)), id) {
            if matches!(reply.get("error"), Some(Json::Object(_))) {
                let Json::Object(mut pairs) = reply else { unreachable!("has a field, so is an object") };
                pairs.retain(|(k, _)| k != b"id");
                pairs.push((b"id".to_vec(), id.clone()));
                return Ok(vec![Incoming::Message(Json::Object(pairs))]);
            }
        }
        let excerpt = excerpt(&body);
        let detail = if excerpt.is_empty() { format!("HTTP {status}") } else { format!("HTTP {status}: {excerpt}") };
        Err(Error::Transport { code: status.to_string(), detail })
    }

    /// `text` with the credentials this client sends blotted out: a
    /// server may quote the token it refused ("invalid token: sk-...").
    pub(super) fn without_credentials(&self, mut text: String) -> String {
        let bearer = lock(&self.options.bearer).clone();
        let authorization =
            self.options.headers.iter().filter(|(name, _)| name.eq_ignore_ascii_case(headers::AUTHORIZATION));
        let given = authorization
            .map(|(_, value)| value.trim_start_matches("Bearer ").trim_start_matches("Basic ").to_string());
        for secret in bearer.into_iter().chain(given).filter(|s| s.len() >= 4) {
            text = text.replace(&secret, "[credentials]");
        }
        text
    }
}

/// The headers a POST's message calls for beyond the session's.
#[derive(Default)]
pub(super) struct PostHeaders {
    /// The message is a modern one (its `_meta` names its version): no
    /// session id, and its own version header.
    pub(super) modern: bool,
    pub(super) own: Vec<(String, String)>,
    /// The message is `initialize`: its answer names the session.
    pub(super) initialize: bool,
}

/// A modern session's message headers: `MCP-Protocol-Version` repeating
/// its envelope's version (a server refuses a mismatch), `Mcp-Method`, and
/// `Mcp-Name` for the requests that name something, plus the request's
/// own (`Mcp-Param-*`). An older session's get only their own (the era
/// probe's, sent before the era is known).
pub(super) fn post_headers(message: &Json, own: &[(String, String)], modern: bool) -> PostHeaders {
    // Only a modern session's requests carry the envelope (`stamp` has
    // made their params a tree by now); an older session's params may
    // still be the arguments' text, which reading `_meta` would decode
    // whole, on every request.
    let version = if modern { protocol::envelope_version(message) } else { None };
    let initialize = is_method(message, "initialize");
    let Some(version) = version else { return PostHeaders { modern: false, own: own.to_vec(), initialize } };
    let mut sent = vec![(headers::MCP_PROTOCOL_VERSION.to_string(), String::from_utf8_lossy(version).into_owned())];
    if let Some(Json::Str(method)) = message.get("method") {
        sent.push((headers::MCP_METHOD.into(), String::from_utf8_lossy(method).into_owned()));
        let named = match method.as_slice() {
            b"tools/call" | b"prompts/get" => message.get("params").and_then(|p| p.get("name")),
            b"resources/read" => message.get("params").and_then(|p| p.get("uri")),
            // A task's requests name it, so that a load balancer sends
            // them where the task lives (the Tasks extension asks it).
            b"tasks/get" | b"tasks/update" | b"tasks/cancel" => message.get("params").and_then(|p| p.get("taskId")),
            _ => None,
        };
        if let Some(Json::Str(name)) = named {
            sent.push((headers::MCP_NAME.into(), header_value(&String::from_utf8_lossy(name))));
        }
    }
    sent.extend(own.iter().cloned());
    PostHeaders { modern: true, own: sent, initialize }
}

pub(super) fn is_cancellation(message: &Json) -> bool {
    is_method(message, "notifications/cancelled")
}

/// Compared in place: a `Json::str` to compare with is an allocation.
fn is_method(message: &Json, method: &str) -> bool {
    matches!(message.get("method"), Some(Json::Str(m)) if m == method.as_bytes())
}

pub(super) fn header<'a>(response: &'a Response<Body>, name: &str) -> Option<&'a str> {
    // Any letter case: header names are case-insensitive.
    response.headers().get(name).and_then(|v| v.to_str().ok())
}

/// How much of a refusal's body is read for its reason.
pub(super) const ERROR_BODY_READ: usize = 64 << 10;

/// The start of a body, for an error message.
pub(super) fn excerpt(body: &[u8]) -> String {
    let start: String = String::from_utf8_lossy(body).trim().chars().take(ERROR_EXCERPT).collect();
    crate::server_text::printable(&start).into_owned()
}

pub(super) fn is_event_stream(response: &Response<Body>) -> bool {
    response
        .headers()
        .get(headers::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.to_ascii_lowercase().starts_with("text/event-stream"))
}

/// Reads the body of a reply nothing waits for (a 202 to a notification,
/// the answer to our answer) to its end, so that the connection goes back
/// to the pool; but for [`FOREGROUND_DRAIN`] at most: a body that is not
/// there by then (a 202 without a length, a stream) is dropped with its
/// connection rather than holding the thread.
pub(super) fn drain_briefly(mut response: Response<Body>, limit: usize) {
    let _ = pausing_at(Instant::now() + FOREGROUND_DRAIN, || read_capped(&mut response, limit));
}

/// The most of a body's declared length read into room made beforehand:
/// a server's Content-Length sizes the buffer of a small reply (read in
/// two reads, not three, and never regrown) but cannot make us set aside
/// more than this on its word alone.
const BODY_ROOM_MADE: usize = 64 * 1024;

pub(super) fn read_capped(response: &mut Response<Body>, limit: usize) -> Result<Vec<u8>> {
    let declared = response
        .headers()
        .get(ureq::http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.trim().parse::<usize>().ok())
        .unwrap_or(0);
    let mut body = Vec::with_capacity(declared.min(BODY_ROOM_MADE).min(limit) + 1);
    let reader = response.body_mut().as_reader();
    reader.take(limit as u64 + 1).read_to_end(&mut body).map_err(|e| match is_user_interrupt(&e) {
        true => Error::Interrupted { what: String::new() },
        false => Error::Transport { code: "-1".into(), detail: format!("reading the reply: {e}") },
    })?;
    if body.len() > limit {
        return Err(Error::MessageTooLarge { limit });
    }
    Ok(body)
}

pub(super) fn trim(s: &[u8]) -> &[u8] {
    let start = s.iter().position(|b| !b.is_ascii_whitespace()).unwrap_or(s.len());
    let end = s.iter().rposition(|b| !b.is_ascii_whitespace()).map_or(start, |i| i + 1);
    &s[start..end.max(start)]
}

/// Seconds as a user wrote them: "60", "0.5".
pub(super) fn seconds(d: Duration) -> String {
    codec::format_float(d.as_secs_f64())
}
