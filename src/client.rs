//! The client: one server's session over its whole life. It starts the
//! session lazily (transport, `initialize`, version check,
//! `notifications/initialized`), sends requests with fresh ids, follows
//! pages, and starts a new session when the old one died or, over HTTP,
//! was forgotten by the server.
//!
//! It knows nothing of Lua. What belongs to the caller comes through
//! [`Host`]: request ids (the Lua table's `next_id`, which agents may read
//! and set), the initialize request (built from `protocol_version` and
//! `CLIENT_INFO`, which a caller may have replaced), what a handshake
//! learned (the table's `server_info` and friends), a way to open the
//! transport (the table's `command` or `url`, read when the session
//! starts), and, as a [`Peer`], what the server starts.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use crate::codec::{Json, Select};
use crate::error::Error;
use crate::protocol::{self, id_key, result_of, IdKey, SUPPORTED_VERSIONS};
use crate::session::{Limit, Peer, Session};
use crate::transport::Transport;

/// What the client needs from whoever holds it. `Error` is the holder's
/// own error type, so that a value a callback raised can travel back
/// unchanged; every [`Error`] of ours converts into it.
pub trait Host: Peer {
    type Error: From<Error>;

    /// The id for the next request.
    fn next_id(&mut self) -> Result<Json, Self::Error>;

    /// The complete `initialize` request with this id, declaring
    /// `capabilities`.
    fn initialize_request(&mut self, id: Json, capabilities: Json) -> Result<Json, Self::Error>;

    /// A new transport to the server (a process started, an HTTP agent).
    fn open(&mut self) -> Result<Box<dyn Transport>, Self::Error>;

    /// A handshake succeeded: its result, and the session id a server gave.
    fn established(&mut self, result: &Json, session_id: Option<String>) -> Result<(), Self::Error>;

    /// The server refused a request for want of credentials
    /// ([`Error::Unauthorized`]). True when new credentials are in place
    /// and the request is worth sending again; `again` says this request
    /// was refused before with credentials got this way. A holder
    /// without a way to log in says no, and the refusal stands.
    fn authorize(&mut self, refusal: &Error, again: bool) -> Result<bool, Self::Error> {
        let _ = (refusal, again);
        Ok(false)
    }
}

/// How often one request (or handshake) is sent again after new
/// credentials: a server that keeps asking for more scope, or refuses
/// every token it is given, is not followed round for ever.
pub const MAX_AUTHORIZATIONS: usize = 3;

/// Pages of a list are followed while the server hands out a new cursor;
/// a server that repeats its cursor is not followed round again, and one
/// that never stops is cut off here.
pub const MAX_PAGES: usize = 100;

/// The one field of a page the client reads; the rest (a tool list, maybe
/// megabytes) goes to Lua undecoded.
pub const NEXT_CURSOR: Select = Select::Keys(&[("nextCursor", Select::Whole)]);

pub struct Client {
    session: Option<Session>,
    /// Counts sessions: a ticket names the session its request went to.
    session_number: u64,
    timeout: Duration,
    /// How long the handshake may take: a cold start (`npx -y` fetching
    /// a package, a Python environment) is no request timing out.
    connect_timeout: Duration,
    /// What `initialize` declares: one capability per server request the
    /// holder answers itself.
    capabilities: Json,
    /// Outcomes of async requests whose session ended (died, closed)
    /// before their waiter took them.
    finished: HashMap<(u64, IdKey), Result<Json, Error>>,
    /// The current session's `initialize` result.
    initialized: Option<Json>,
}

/// What a request may be given beyond its method and params.
#[derive(Clone, Copy, Debug, Default)]
pub struct Limits {
    /// Replaces the client's timeout for this request.
    pub timeout: Option<Duration>,
    /// The hard cap when progress restarts the timeout (the spec's
    /// maximum total timeout), counted from the start.
    pub max_total: Option<Duration>,
    /// Ask for progress notifications.
    pub progress: bool,
}

/// An async request in flight: what its waiter holds.
#[derive(Clone, Debug)]
pub struct Ticket {
    session: u64,
    key: IdKey,
    /// The request's id, as sent (also its progress token).
    pub id: Json,
    /// Names the request in errors: "tools/call echo".
    pub what: String,
}

impl Client {
    pub fn new(timeout: Duration, connect_timeout: Duration, capabilities: Json) -> Client {
        Client {
            session: None,
            session_number: 0,
            timeout,
            connect_timeout,
            capabilities,
            finished: HashMap::new(),
            initialized: None,
        }
    }

    /// Sends `method` with `params` and returns at once: the request is on
    /// its way (over HTTP, on its own connection) and its outcome is taken
    /// later with [`Client::outcome`] or [`Client::wait`]. A session is
    /// started first if needed, and that handshake does wait. `timeout`
    /// replaces the client's own for this request.
    pub fn start<H: Host>(
        &mut self,
        host: &mut H,
        method: &str,
        params: Json,
        what: &str,
        timeout: Option<Duration>,
    ) -> Result<Ticket, H::Error> {
        self.start_with(host, method, params, what, Limits { timeout, ..Limits::default() })
    }

    /// [`Client::start`] with every limit a request can have. With
    /// `limits.progress`, the request asks for progress (its id is the
    /// `progressToken` in `params._meta`), and each progress notification
    /// restarts its timeout, up to `limits.max_total` from the start.
    pub fn start_with<H: Host>(
        &mut self,
        host: &mut H,
        method: &str,
        mut params: Json,
        what: &str,
        limits: Limits,
    ) -> Result<Ticket, H::Error> {
        self.ready(host)?;
        self.check_capability(method)?;
        let id = host.next_id()?;
        if limits.progress {
            protocol::set_progress_token(&mut params, id.clone());
        }
        self.start_message(host, protocol::request(id, method, params), what, limits)
    }

    /// [`Client::start`] for a request built by the caller, with its own id
    /// (the reference's `exchange`).
    pub fn start_message<H: Host>(
        &mut self,
        host: &mut H,
        message: Json,
        what: &str,
        limits: Limits,
    ) -> Result<Ticket, H::Error> {
        self.ready(host)?;
        self.answer_refusal(host)?;
        let id = message.get("id").cloned().unwrap_or(Json::Null);
        let Some(key) = id_key(&id) else {
            return Err(Error::BadInput(format!(
                "MCP: a request id must be a number or a string, got {}",
                protocol::lua_text(Some(&id))
            ))
            .into());
        };
        let timeout = limits.timeout.unwrap_or(self.timeout);
        let now = Instant::now();
        let deadline = now.checked_add(timeout).unwrap_or_else(crate::session::far_future);
        let hard_deadline = limits.max_total.map(|m| now.checked_add(m).unwrap_or_else(crate::session::far_future));
        let limit = Limit {
            timeout,
            deadline: hard_deadline.map_or(deadline, |h| deadline.min(h)),
            hard_deadline,
            max_total: limits.max_total,
            progress: limits.progress,
            what: what.to_string(),
        };
        let Some(session) = self.session.as_mut() else { unreachable!("a session was just made ready") };
        session.start(&id, &message, Some(limit))?;
        Ok(Ticket { session: self.session_number, key, id, what: what.to_string() })
    }

    /// The outcome of `ticket` if it has settled (the reply's `result`, or
    /// the error the reference raises for it); None while it is in flight.
    /// Taken once: the client keeps nothing of it afterwards.
    pub fn outcome(&mut self, ticket: &Ticket) -> Option<Result<Json, Error>> {
        let raw = self.reply(ticket)?;
        Some(raw.and_then(|reply| result_of(Some(reply), &ticket.what)))
    }

    /// The whole reply to `ticket` (error replies included), if it has
    /// settled; taken once, as [`Client::outcome`].
    pub fn reply(&mut self, ticket: &Ticket) -> Option<Result<Json, Error>> {
        let raw = if ticket.session == self.session_number && self.session.is_some() {
            self.session.as_mut()?.take_async(&ticket.key)?
        } else {
            self.finished.remove(&(ticket.session, ticket.key.clone())).unwrap_or_else(|| {
                // Its session ended without a word for it: cannot happen
                // unless the ticket was taken already.
                Err(Error::NoResponse { what: ticket.what.clone() })
            })
        };
        Some(raw)
    }

    /// Sends a notification, starting the session first if needed.
    pub fn notify<H: Host>(&mut self, host: &mut H, message: &Json) -> Result<(), H::Error> {
        self.ready(host)?;
        let Some(session) = self.session.as_mut() else { unreachable!("a session was just made ready") };
        Ok(session.notify(message)?)
    }

    /// The current session's `initialize` result.
    pub fn initialize_result(&self) -> Option<&Json> {
        self.initialized.as_ref()
    }

    /// What `initialize` declares for this client.
    pub fn capabilities(&self) -> &Json {
        &self.capabilities
    }

    /// Starts a session if there is none: for callers that need one
    /// before they send anything of their own.
    pub fn notify_ready<H: Host>(&mut self, host: &mut H) -> Result<(), H::Error> {
        self.ready(host)
    }

    /// Waits for the whole reply to `ticket` (an error reply is a reply
    /// here), for the request's own time limit; Ctrl-C cancels it.
    pub fn wait_reply<H: Host>(&mut self, host: &mut H, ticket: &Ticket) -> Result<Json, H::Error> {
        loop {
            if self.settled(ticket) {
                let reply = self.reply(ticket).unwrap_or_else(|| Err(Error::NoResponse { what: ticket.what.clone() }));
                return Ok(reply?);
            }
            let slice_end = Instant::now() + crate::interrupt::SLICE;
            match self.pump(host, slice_end) {
                Ok(_) => {}
                Err(e) => {
                    self.cancel(ticket, "interrupted by the user");
                    self.forget(ticket);
                    return Err(e);
                }
            }
        }
    }

    /// Requests for a capability the server did not declare fail here,
    /// before anything is sent, naming it: a server answers them with
    /// -32601 at best, and some hang up. Tools are left alone: servers
    /// that serve tools without declaring them are common, and the
    /// reference never asked.
    fn check_capability(&self, method: &str) -> Result<(), Error> {
        let Some(path) = protocol::capability_needed(method) else { return Ok(()) };
        // 2024-11-05 had no `completions` capability: completion was
        // offered without one.
        let version = self.initialized.as_ref().and_then(|r| r.get("protocolVersion"));
        if path == "completions" && version == Some(&Json::str("2024-11-05")) {
            return Ok(());
        }
        let mut at = self.initialized.as_ref().and_then(|r| r.get("capabilities"));
        for part in path.split('.') {
            at = at.and_then(|c| c.get(part)).filter(|v| v.is_truthy());
        }
        match at {
            Some(_) => Ok(()),
            None => Err(Error::NotDeclared { what: method.to_string(), capability: path.to_string() }),
        }
    }

    /// Whether `ticket` has settled; never waits.
    pub fn settled(&self, ticket: &Ticket) -> bool {
        match &self.session {
            Some(session) if ticket.session == self.session_number => session.settled(&ticket.key),
            _ => true,
        }
    }

    /// Receives and routes what the server sent, until `until` at most or
    /// one message, whichever is first: the step every wait repeats.
    /// Returns whether anything came. A session that died hands its
    /// requests' outcomes over to the client on the way.
    pub fn pump<H: Host>(&mut self, host: &mut H, until: Instant) -> Result<bool, H::Error> {
        let Some(session) = self.session.as_mut() else {
            return Ok(false);
        };
        let pumped = session.pump_until(until, host);
        if session.broken {
            self.retire(|what| Error::NoResponse { what: what.to_string() });
        }
        match pumped {
            // The dead transport's error went to every request in flight.
            Err(Error::Transport { .. }) => Ok(true),
            other => other.map_err(Into::into),
        }
    }

    /// Waits for `ticket` until `until` at most; None if it is still in
    /// flight then.
    pub fn wait<H: Host>(
        &mut self,
        host: &mut H,
        ticket: &Ticket,
        until: Instant,
    ) -> Result<Option<Result<Json, Error>>, H::Error> {
        loop {
            if self.settled(ticket) {
                return Ok(self.outcome(ticket));
            }
            if Instant::now() >= until {
                return Ok(None);
            }
            let slice_end = until.min(Instant::now() + crate::interrupt::SLICE);
            self.pump(host, slice_end)?;
        }
    }

    /// Stops `ticket`'s request: the server gets `notifications/cancelled`
    /// with `reason`, and the ticket settles with [`Error::Cancelled`].
    /// False if it had settled already.
    pub fn cancel(&mut self, ticket: &Ticket, reason: &str) -> bool {
        match self.session.as_mut() {
            Some(session) if ticket.session == self.session_number => {
                session.cancel(&ticket.key, reason, Error::Cancelled { what: ticket.what.clone() })
            }
            _ => false,
        }
    }

    /// Nobody will take `ticket`'s outcome (its handle was collected).
    pub fn forget(&mut self, ticket: &Ticket) {
        match self.session.as_mut() {
            Some(session) if ticket.session == self.session_number => session.discard(&ticket.key),
            _ => {
                self.finished.remove(&(ticket.session, ticket.key.clone()));
            }
        }
    }

    /// Whether the server sent something not yet routed.
    pub fn queued(&self) -> bool {
        self.session.as_ref().is_some_and(Session::queued)
    }

    /// The earliest time an async request runs out, for an event loop's
    /// timer.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.session.as_ref().and_then(Session::next_deadline)
    }

    /// Ends the current session, keeping the outcomes of its async
    /// requests; those still running get `unsettled`'s error.
    fn retire(&mut self, unsettled: impl Fn(&str) -> Error) {
        if let Some(mut session) = self.session.take() {
            for (key, outcome) in session.settle_all(unsettled) {
                self.finished.insert((self.session_number, key), outcome);
            }
            session.close();
        }
    }

    /// A live session, started if there is none or the last one broke.
    fn ready<H: Host>(&mut self, host: &mut H) -> Result<(), H::Error> {
        if self.session.as_ref().is_some_and(|s| s.broken) {
            self.retire(|what| Error::NoResponse { what: what.to_string() });
        }
        if self.session.is_none() {
            let mut authorizations = 0;
            let session = loop {
                match self.handshake(host) {
                    Ok(session) => break session,
                    Err(Failure::Refused(refusal)) if authorizations < MAX_AUTHORIZATIONS => {
                        if !host.authorize(&refusal, authorizations > 0)? {
                            return Err(refusal.into());
                        }
                        authorizations += 1;
                    }
                    Err(failure) => return Err(failure.into_error()),
                }
            };
            self.session_number += 1;
            self.session = Some(session);
        }
        Ok(())
    }

    /// An async request was refused for want of credentials: the holder
    /// gets new ones now, before the next request meets the same refusal.
    /// (The refused request itself has failed with the refusal; it is not
    /// sent again, as its caller may have acted on the failure.)
    fn answer_refusal<H: Host>(&mut self, host: &mut H) -> Result<(), H::Error> {
        if let Some(refusal) = self.session.as_mut().and_then(|s| s.refused.take()) {
            host.authorize(&refusal, false)?;
        }
        Ok(())
    }

    /// Sends `method` with `params` and returns the reply's `result`, or
    /// the error the reference raises for it; `what` names the request in
    /// errors. A session is started first if there is none or the last one
    /// broke. An HTTP server that forgot the session (404) gets one new
    /// session and the request once more; any other failure is final.
    pub fn request<H: Host>(&mut self, host: &mut H, method: &str, params: Json, what: &str) -> Result<Json, H::Error> {
        // Built once: a retry only changes the id, so the parameters (a
        // tool's arguments, perhaps megabytes) are never copied.
        let mut message = protocol::request(Json::Null, method, params);
        match self.attempt(host, &mut message, what) {
            Err(Failure::Expired) => {
                self.retire(|_| Error::SessionExpired);
                self.attempt(host, &mut message, what).map_err(Failure::into_error)
            }
            other => other.map_err(Failure::into_error),
        }
    }

    /// Every page of a list method (`tools/list`, ...), in order. If the
    /// server forgets the session midway, the listing starts again from
    /// the first page on a new one, once: a cursor belongs to the session
    /// that gave it, and pages of two sessions may not fit together.
    pub fn list_pages<H: Host>(&mut self, host: &mut H, method: &str) -> Result<Vec<Json>, H::Error> {
        let mut restarted = false;
        'listing: loop {
            let mut pages: Vec<Json> = Vec::new();
            let mut cursor: Option<Json> = None;
            loop {
                let params = match &cursor {
                    Some(c) => Json::object([("cursor", c.clone())]),
                    None => Json::Object(vec![]),
                };
                let mut message = protocol::request(Json::Null, method, params);
                let page = match self.attempt(host, &mut message, method) {
                    Ok(page) => page,
                    Err(Failure::Expired) if !restarted => {
                        restarted = true;
                        self.retire(|_| Error::SessionExpired);
                        continue 'listing;
                    }
                    Err(failure) => return Err(failure.into_error()),
                };
                let next = page.selected(NEXT_CURSOR).get("nextCursor").filter(|c| matches!(c, Json::Str(_))).cloned();
                pages.push(page);
                if next.is_none() || next == cursor || pages.len() >= MAX_PAGES {
                    return Ok(pages);
                }
                cursor = next;
            }
        }
    }

    /// One try of `message` (its id set here), on the current session or a
    /// new one if there is none or it broke; sent again when the server
    /// refused it and the holder got new credentials.
    fn attempt<H: Host>(&mut self, host: &mut H, message: &mut Json, what: &str) -> Result<Json, Failure<H::Error>> {
        let mut authorizations = 0;
        loop {
            match self.attempt_once(host, message, what) {
                Err(Failure::Refused(refusal)) if authorizations < MAX_AUTHORIZATIONS => {
                    if !host.authorize(&refusal, authorizations > 0).map_err(Failure::Other)? {
                        return Err(Failure::Refused(refusal));
                    }
                    authorizations += 1;
                }
                other => return other,
            }
        }
    }

    fn attempt_once<H: Host>(
        &mut self,
        host: &mut H,
        message: &mut Json,
        what: &str,
    ) -> Result<Json, Failure<H::Error>> {
        self.ready(host).map_err(Failure::Other)?;
        self.answer_refusal(host).map_err(Failure::Other)?;
        if let Some(Json::Str(method)) = message.get("method") {
            self.check_capability(&String::from_utf8_lossy(method)).map_err(|e| Failure::Other(e.into()))?;
        }
        let id = host.next_id().map_err(Failure::Other)?;
        set_id(message, id.clone());
        let Some(session) = self.session.as_mut() else { unreachable!("a session was just set") };
        match session.request(&id, message, self.timeout, what, host) {
            Ok(reply) => result_of(Some(reply), what).map_err(|e| Failure::Other(e.into())),
            Err(Error::SessionExpired) => Err(Failure::Expired),
            Err(e @ Error::Unauthorized { .. }) => Err(Failure::Refused(e)),
            Err(e) => Err(Failure::Other(e.into())),
        }
    }

    /// Ends the session the way its transport does; the next request
    /// starts a new one.
    pub fn close(&mut self) {
        self.retire(|what| Error::Closed { what: what.to_string() });
    }

    /// A new session: transport opened, initialize answered and its
    /// version checked, initialized sent.
    fn handshake<H: Host>(&mut self, host: &mut H) -> Result<Session, Failure<H::Error>> {
        let mut session = Session::new(host.open().map_err(Failure::Other)?);
        let id = host.next_id().map_err(Failure::Other)?;
        let init = host.initialize_request(id.clone(), self.capabilities.clone()).map_err(Failure::Other)?;
        // The handshake waits `connect_timeout`, not the request's
        // `timeout`: `npx -y` took 7 s to start a server cold, and with
        // `timeout = 3` every try killed the half-started server and
        // spawned a new one, which never got further.
        let reply = match session.request(&id, &init, self.connect_timeout, "initialize", host) {
            Ok(reply) => reply,
            Err(e @ Error::Unauthorized { .. }) => return Err(Failure::Refused(e)),
            Err(Error::Timeout { what, seconds, note }) => {
                // A server that hangs while it starts often says why.
                let said = session.last_words().map(|w| format!("; its stderr ends: {w}")).unwrap_or_default();
                let note = format!("{note} (opts.connect_timeout){said}");
                return Err(Failure::Other(Error::Timeout { what, seconds, note }.into()));
            }
            Err(e) => return Err(Failure::Other(e.into())),
        };
        let other = |e: Error| Failure::Other(e.into());
        let result = result_of(Some(reply), "initialize").map_err(other)?;
        check_version(&result).map_err(other)?;
        self.initialized = Some(result.clone());
        // The transport first: over HTTP the notification below carries
        // the version. The holder last: its fields must not say "ready"
        // for a session whose handshake did not finish.
        if let Some(Json::Str(version)) = result.get("protocolVersion") {
            session.established(&String::from_utf8_lossy(version));
        }
        session.notify(&protocol::initialized()).map_err(other)?;
        host.established(&result, session.session_id()).map_err(Failure::Other)?;
        Ok(session)
    }
}

/// A client dropped (collected) with async requests running tells the
/// server to stop them; the transport then shuts down as it does when
/// dropped, without holding the thread that dropped it.
impl Drop for Client {
    fn drop(&mut self) {
        if let Some(session) = self.session.as_mut() {
            session.cancel_all_detached();
        }
    }
}

/// The server must choose a protocol version this client speaks.
pub fn check_version(result: &Json) -> Result<(), Error> {
    match result.get("protocolVersion") {
        Some(Json::Str(v)) if SUPPORTED_VERSIONS.iter().any(|s| s.as_bytes() == v.as_slice()) => Ok(()),
        chosen => Err(Error::UnsupportedVersion {
            chosen: protocol::lua_text(chosen),
            supported: SUPPORTED_VERSIONS.join(", "),
        }),
    }
}

/// Why one try of a request failed: the server forgot the session (worth
/// one more try on a new one), it wants credentials (worth one after the
/// holder got them), or anything else.
enum Failure<E> {
    Expired,
    Refused(Error),
    Other(E),
}

impl<E: From<Error>> Failure<E> {
    fn into_error(self) -> E {
        match self {
            Failure::Expired => Error::SessionExpired.into(),
            Failure::Refused(e) => e.into(),
            Failure::Other(e) => e,
        }
    }
}

fn set_id(request: &mut Json, id: Json) {
    match request {
        Json::Request(request) => request.id = id,
        Json::Object(pairs) => {
            if let Some(slot) = pairs.iter_mut().find(|(k, _)| k == b"id") {
                slot.1 = id;
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::{decode, encode};
    use crate::transport::Received;
    use std::cell::RefCell;
    use std::collections::VecDeque;
    use std::rc::Rc;
    use std::time::Instant;

    /// What a scripted server does with each request it receives.
    type Script = Box<dyn FnMut(&Json) -> Vec<String>>;

    /// A transport that answers from a script, and records what was sent.
    struct Scripted {
        script: Rc<RefCell<Script>>,
        sent: Rc<RefCell<Vec<String>>>,
        /// What the server wrote and the client has not read; a test may
        /// add to it, as a server answering late would.
        replies: Rc<RefCell<VecDeque<Json>>>,
        /// Fails every send after this many, as a dead server would.
        dies_after: Option<usize>,
        /// The server is gone: receiving fails.
        dead: Rc<std::cell::Cell<bool>>,
    }

    impl Transport for Scripted {
        fn send(&mut self, message: &Json) -> crate::error::Result<()> {
            if self.dies_after == Some(0) {
                return Err(Error::Transport { code: "1".into(), detail: "MCP server exited (scripted)".into() });
            }
            self.dies_after = self.dies_after.map(|n| n - 1);
            self.sent.borrow_mut().push(String::from_utf8(encode(message)).unwrap());
            for line in (self.script.borrow_mut())(message) {
                if line == "404" {
                    return Err(Error::SessionExpired);
                }
                self.replies.borrow_mut().push_back(decode(line.as_bytes()).unwrap());
            }
            Ok(())
        }

        fn receive(&mut self, _deadline: Instant) -> crate::error::Result<Option<Received>> {
            if self.dead.get() {
                return Err(Error::Transport { code: "3".into(), detail: "MCP server exited (scripted)".into() });
            }
            Ok(self.replies.borrow_mut().pop_front().map(Received::Message))
        }

        fn close(&mut self) {}
    }

    /// A host that counts ids from 1 and keeps what it is told.
    struct TestHost {
        next: i64,
        opened: usize,
        script: Rc<RefCell<Script>>,
        sent: Rc<RefCell<Vec<String>>>,
        dies_after: Option<usize>,
        server_name: Option<Json>,
        notes: Vec<Json>,
        replies: Rc<RefCell<VecDeque<Json>>>,
        dead: Rc<std::cell::Cell<bool>>,
    }

    impl Peer for TestHost {
        fn notification(&mut self, msg: Json) {
            self.notes.push(msg);
        }
        fn request(&mut self, msg: &Json) -> Json {
            protocol::answer_server_request(msg).unwrap_or(Json::Null)
        }
    }

    impl Host for TestHost {
        type Error = Error;
        fn next_id(&mut self) -> Result<Json, Error> {
            self.next += 1;
            Ok(Json::Int(self.next))
        }
        fn initialize_request(&mut self, id: Json, capabilities: Json) -> Result<Json, Error> {
            let info = Json::object([("name", Json::str("test"))]);
            Ok(protocol::request(
                id,
                "initialize",
                protocol::initialize_params(Json::str("2025-06-18"), capabilities, info),
            ))
        }
        fn open(&mut self) -> Result<Box<dyn Transport>, Error> {
            self.opened += 1;
            Ok(Box::new(Scripted {
                script: self.script.clone(),
                sent: self.sent.clone(),
                replies: self.replies.clone(),
                dies_after: self.dies_after.take(),
                dead: self.dead.clone(),
            }))
        }
        fn established(&mut self, result: &Json, _session_id: Option<String>) -> Result<(), Error> {
            self.server_name = result.get("serverInfo").and_then(|i| i.get("name")).cloned();
            Ok(())
        }
    }

    fn host(script: impl FnMut(&Json) -> Vec<String> + 'static) -> TestHost {
        TestHost {
            next: 0,
            opened: 0,
            script: Rc::new(RefCell::new(Box::new(script))),
            sent: Rc::new(RefCell::new(Vec::new())),
            dies_after: None,
            server_name: None,
            notes: Vec::new(),
            replies: Rc::default(),
            dead: Rc::default(),
        }
    }

    /// A server that answers the handshake and keeps every other request
    /// for the test to answer.
    fn holding(msg: &Json) -> Vec<String> {
        if msg.get("method") == Some(&Json::str("initialize")) {
            plain(msg)
        } else {
            vec![]
        }
    }

    fn answer(h: &TestHost, id: i64, text: &str) {
        let reply = format!(r#"{{"id":{id},"result":{{"text":"{text}"}}}}"#);
        h.replies.borrow_mut().push_back(decode(reply.as_bytes()).unwrap());
    }

    fn text_of(outcome: Option<Result<Json, Error>>) -> String {
        match outcome {
            Some(Ok(result)) => String::from_utf8_lossy(&encode(result.get("text").unwrap())).into_owned(),
            Some(Err(e)) => e.to_string(),
            None => "in flight".into(),
        }
    }

    fn far() -> Instant {
        Instant::now() + Duration::from_secs(5)
    }

    fn id_of(msg: &Json) -> String {
        String::from_utf8(encode(msg.get("id").unwrap_or(&Json::Null))).unwrap()
    }

    /// A well-behaved server: initialize, and an echo of the method name.
    fn plain(msg: &Json) -> Vec<String> {
        let Some(Json::Str(method)) = msg.get("method") else { return vec![] };
        if msg.get("id").is_none() {
            return vec![];
        }
        let id = id_of(msg);
        if method == b"initialize" {
            return vec![format!(
                r#"{{"id":{id},"result":{{"protocolVersion":"2025-06-18","serverInfo":{{"name":"scripted"}}}}}}"#
            )];
        }
        vec![format!(r#"{{"id":{id},"result":{{"method":"{}"}}}}"#, String::from_utf8_lossy(method))]
    }

    fn client() -> Client {
        Client::new(Duration::from_millis(50), Duration::from_millis(50), Json::Object(vec![]))
    }

    #[test]
    fn the_handshake_runs_once_before_the_first_request() {
        let mut h = host(plain);
        let mut c = client();
        let result = c.request(&mut h, "tools/call", Json::Object(vec![]), "tools/call x").unwrap();
        assert_eq!(result.get("method"), Some(&Json::str("tools/call")));
        c.request(&mut h, "ping", Json::Object(vec![]), "ping").unwrap();
        let sent = h.sent.borrow();
        assert_eq!(sent.len(), 4);
        assert!(sent[0].contains(r#""id":1,"jsonrpc":"2.0","method":"initialize""#), "{}", sent[0]);
        assert_eq!(sent[1], r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
        assert!(sent[2].starts_with(r#"{"id":2,"jsonrpc":"2.0","method":"tools/call""#), "{}", sent[2]);
        assert!(sent[3].starts_with(r#"{"id":3,"#), "{}", sent[3]);
        assert_eq!(h.opened, 1);
        assert_eq!(h.server_name, Some(Json::str("scripted")));
    }

    #[test]
    fn a_version_the_client_does_not_speak_is_refused() {
        let mut h = host(|msg| {
            let id = id_of(msg);
            vec![format!(r#"{{"id":{id},"result":{{"protocolVersion":"1999-01-01"}}}}"#)]
        });
        let err = client().request(&mut h, "tools/list", Json::Object(vec![]), "tools/list").unwrap_err();
        assert_eq!(
            err.to_string(),
            "MCP initialize failed: the server chose protocol version 1999-01-01, which this client does not speak \
             (2025-11-25, 2025-06-18, 2025-03-26, 2024-11-05)"
        );
    }

    #[test]
    fn replies_are_matched_by_id_whatever_comes_first() {
        let mut h = host(|msg| {
            let mut out = vec![];
            if msg.get("method") == Some(&Json::str("tools/call")) {
                out.push(r#"{"id":999,"result":{"method":"not yours"}}"#.to_string());
                out.push(r#"{"jsonrpc":"2.0","method":"notifications/message","params":{}}"#.to_string());
            }
            out.extend(plain(msg));
            out
        });
        let mut c = client();
        let result = c.request(&mut h, "tools/call", Json::Object(vec![]), "tools/call x").unwrap();
        assert_eq!(result.get("method"), Some(&Json::str("tools/call")));
        assert_eq!(h.notes.len(), 1);
    }

    #[test]
    fn pages_are_followed_and_a_repeated_cursor_ends_them() {
        let mut h = host(|msg| {
            if msg.get("method") != Some(&Json::str("tools/list")) {
                return plain(msg);
            }
            let id = id_of(msg);
            let cursor = msg.get("params").and_then(|p| p.get("cursor")).cloned();
            let next = match cursor {
                None => r#""a""#,
                Some(c) if c == Json::str("a") => r#""b""#,
                _ => r#""b""#,
            };
            vec![format!(r#"{{"id":{id},"result":{{"tools":[],"nextCursor":{next}}}}}"#)]
        });
        let pages = client().list_pages(&mut h, "tools/list").unwrap();
        // no cursor -> "a" -> "b" -> "b" again: three pages, then stop
        assert_eq!(pages.len(), 3);
    }

    #[test]
    fn a_dead_transport_fails_its_request_and_the_next_one_starts_a_new_session() {
        let mut h = host(plain);
        // initialize and initialized go through; the request's send fails.
        h.dies_after = Some(2);
        let mut c = client();
        let err = c.request(&mut h, "tools/call", Json::Object(vec![]), "tools/call x").unwrap_err();
        assert_eq!(err.to_string(), "MCP transport failed (1): MCP server exited (scripted)");
        assert!(c.request(&mut h, "tools/call", Json::Object(vec![]), "tools/call x").is_ok());
        assert_eq!(h.opened, 2);
    }

    #[test]
    fn a_forgotten_http_session_gets_one_new_session_and_the_request_once_more() {
        let mut calls = 0;
        let mut h = host(move |msg| {
            if msg.get("method") == Some(&Json::str("tools/call")) {
                calls += 1;
                if calls == 1 {
                    return vec!["404".to_string()];
                }
            }
            plain(msg)
        });
        let mut c = client();
        let result = c.request(&mut h, "tools/call", Json::object([("big", Json::str("x"))]), "tools/call x").unwrap();
        assert_eq!(result.get("method"), Some(&Json::str("tools/call")));
        assert_eq!(h.opened, 2);
        let sent = h.sent.borrow();
        let calls: Vec<&String> = sent.iter().filter(|s| s.contains("tools/call")).collect();
        // the same request, with a fresh id on the new session
        assert_eq!(calls.len(), 2);
        assert!(calls[0].starts_with(r#"{"id":2,"#) && calls[1].starts_with(r#"{"id":4,"#), "{calls:?}");
        assert_eq!(calls[0][8..], calls[1][8..]);
    }

    #[test]
    fn a_session_forgotten_while_paging_restarts_the_listing_from_the_first_page() {
        let mut lists = 0;
        let mut h = host(move |msg| {
            if msg.get("method") != Some(&Json::str("tools/list")) {
                return plain(msg);
            }
            lists += 1;
            if lists == 2 {
                return vec!["404".to_string()];
            }
            let id = id_of(msg);
            match msg.get("params").and_then(|p| p.get("cursor")) {
                None => vec![format!(r#"{{"id":{id},"result":{{"tools":[{{"name":"a"}}],"nextCursor":"2"}}}}"#)],
                Some(_) => vec![format!(r#"{{"id":{id},"result":{{"tools":[{{"name":"b"}}]}}}}"#)],
            }
        });
        let pages = client().list_pages(&mut h, "tools/list").unwrap();
        assert_eq!(pages.len(), 2);
        assert_eq!(h.opened, 2);
        let sent = h.sent.borrow();
        let lists: Vec<&String> = sent.iter().filter(|s| s.contains("tools/list")).collect();
        // page 1, page 2 (forgotten), then page 1 and page 2 on the new session
        assert_eq!(lists.len(), 4);
        assert!(lists[2].ends_with(r#""params":{}}"#), "{lists:?}");
    }

    #[test]
    fn a_request_past_its_time_is_cancelled_and_the_session_kept() {
        let mut h = host(|msg| if msg.get("method") == Some(&Json::str("tools/call")) { vec![] } else { plain(msg) });
        let mut c = client();
        let err = c.request(&mut h, "tools/call", Json::Object(vec![]), "tools/call slow").unwrap_err();
        assert_eq!(err.to_string(), "MCP tools/call slow timed out after 0.05 s");
        let sent = h.sent.borrow().clone();
        assert!(
            sent.last().unwrap().starts_with(r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"reason":"timed out after 0.05 s","requestId":2}"#),
            "{sent:?}"
        );
        c.request(&mut h, "ping", Json::Object(vec![]), "ping").unwrap();
        assert_eq!(h.opened, 1);
    }

    #[test]
    fn async_requests_settle_in_any_order_each_with_its_own_reply() {
        let mut h = host(holding);
        let mut c = client();
        let t: Vec<Ticket> = (0..3)
            .map(|i| c.start(&mut h, "tools/call", Json::Object(vec![]), &format!("call {i}"), None).unwrap())
            .collect();
        // ids 2, 3, 4 (1 was initialize); the third is answered last
        for (id, text) in [(3, "b"), (2, "a"), (4, "c")] {
            answer(&h, id, text);
        }
        assert!(!c.settled(&t[0]));
        assert_eq!(text_of(c.wait(&mut h, &t[2], far()).unwrap()), r#""c""#);
        // what arrived while the third was waited for is kept for the others
        assert!(c.settled(&t[0]) && c.settled(&t[1]));
        assert_eq!(text_of(c.outcome(&t[0])), r#""a""#);
        assert_eq!(text_of(c.outcome(&t[1])), r#""b""#);
        // taken once: the client keeps nothing of it
        assert!(c.outcome(&t[1]).is_none());
    }

    #[test]
    fn an_async_timeout_settles_only_its_own_request_and_cancels_it() {
        let mut h = host(holding);
        let mut c = client();
        let quick = c
            .start(&mut h, "tools/call", Json::Object(vec![]), "tools/call quick", Some(Duration::from_millis(10)))
            .unwrap();
        let patient = c
            .start(&mut h, "tools/call", Json::Object(vec![]), "tools/call patient", Some(Duration::from_secs(5)))
            .unwrap();
        assert_eq!(text_of(c.wait(&mut h, &quick, far()).unwrap()), "MCP tools/call quick timed out after 0.01 s");
        assert!(h.sent.borrow().last().unwrap().contains(r#""requestId":2"#));
        assert!(!c.settled(&patient));
        answer(&h, 3, "late but fine");
        assert_eq!(text_of(c.wait(&mut h, &patient, far()).unwrap()), r#""late but fine""#);
    }

    #[test]
    fn a_cancel_tells_the_server_and_a_late_reply_is_dropped() {
        let mut h = host(holding);
        let mut c = client();
        let t = c.start(&mut h, "tools/call", Json::Object(vec![]), "tools/call x", None).unwrap();
        assert!(c.cancel(&t, "no longer needed"));
        assert!(!c.cancel(&t, "twice"));
        assert!(h.sent.borrow().last().unwrap().contains(r#""reason":"no longer needed","requestId":2"#));
        answer(&h, 2, "too late");
        assert_eq!(text_of(c.outcome(&t)), "MCP tools/call x cancelled");
        // the late reply finds nobody, and the session goes on
        assert!(c.pump(&mut h, Instant::now()).unwrap());
        assert!(h.replies.borrow().is_empty());
        let next = c.start(&mut h, "tools/call", Json::Object(vec![]), "tools/call y", None).unwrap();
        answer(&h, 3, "next");
        assert_eq!(text_of(c.wait(&mut h, &next, far()).unwrap()), r#""next""#);
        assert_eq!(h.opened, 1);
    }

    #[test]
    fn a_dead_server_settles_every_request_in_flight_and_the_next_starts_a_new_session() {
        let mut h = host(holding);
        let mut c = client();
        let t: Vec<Ticket> = (0..2)
            .map(|_| c.start(&mut h, "tools/call", Json::Object(vec![]), "tools/call x", None).unwrap())
            .collect();
        h.dead.set(true);
        c.pump(&mut h, Instant::now()).unwrap();
        for ticket in &t {
            assert!(c.settled(ticket));
            assert_eq!(text_of(c.outcome(ticket)), "MCP transport failed (3): MCP server exited (scripted)");
        }
        h.dead.set(false);
        c.start(&mut h, "tools/call", Json::Object(vec![]), "tools/call y", None).unwrap();
        assert_eq!(h.opened, 2);
    }

    #[test]
    fn close_settles_requests_in_flight_with_the_close_error_and_cancels_them_in_order() {
        let mut h = host(holding);
        let mut c = client();
        let t: Vec<Ticket> = (0..3)
            .map(|_| c.start(&mut h, "tools/call", Json::Object(vec![]), "tools/call x", None).unwrap())
            .collect();
        c.close();
        for ticket in &t {
            assert_eq!(
                text_of(c.outcome(ticket)),
                "MCP tools/call x failed: the client was closed before the reply came"
            );
        }
        let sent = h.sent.borrow();
        let cancelled: Vec<&str> = sent.iter().filter_map(|m| m.split(r#""requestId":"#).nth(1)).collect();
        assert_eq!(cancelled, ["2}}", "3}}", "4}}"]);
    }
}
