//! The client: one server's session over its whole life. It starts the
//! session lazily (transport, era probe, `initialize`, version check,
//! `notifications/initialized`, as steps that never wait: `connect`), and
//! starts a new one when the old one died or, over HTTP, was forgotten by
//! the server. Async requests made while a session starts or a login runs
//! wait in `queue`; a login for an async request runs beside the holder
//! (`login`).
//!
//! Every request takes one path (`request`): described once (method,
//! params, name, limits, the shape of its outcome), started, then polled
//! or waited for until it settles. What a request may need on the way
//! happens there and only there, for blocking calls and async handles
//! alike: the new session after a 404, the resend after a login, the next
//! page, the output-schema check, the refresh of a stale tool list, a
//! tool call the server made a task (followed by its polls to its end,
//! cancelled with `tasks/cancel`, on both revisions that have tasks), and
//! the 2026-07-28 revision's rules, with a modern server's change
//! notifications (`listen`) and the results it lets us keep (`cache`).
//!
//! It knows nothing of Lua. What belongs to the caller comes through
//! [`Host`]: request ids (the Lua table's `next_id`, which agents may read
//! and set), the initialize request (built from `protocol_version` and
//! `CLIENT_INFO`, which a caller may have replaced), what a handshake
//! learned (the table's `server_info` and friends), a way to open the
//! transport (the table's `command` or `url`, read when the session
//! starts), and, as a [`Peer`], what the server starts.

use std::collections::HashMap;
use std::rc::Rc;
use std::time::{Duration, Instant};

use crate::codec::{Json, Select};
use crate::era::{EraChoice, Verdict};
use crate::error::Error;
use crate::protocol::{self, Envelope, IdKey, SUPPORTED_VERSIONS};
use crate::schema::{ToolSchemas, TOOL_SCHEMAS};
use crate::session::{Peer, Session};
use crate::transport::Transport;

mod cache;
mod connect;
mod listen;
mod login;
mod queue;
mod request;
mod skills;
#[cfg(test)]
mod tests;

pub use cache::{Bounds as CacheBounds, CacheMode};
pub use request::{Limits, Operation, Request, Shape, TaskAsk, TOOL_CALL};

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

    /// `clientInfo`, as the envelope of a modern request carries it (and
    /// as the `initialize` request would).
    fn client_info(&mut self) -> Result<Json, Self::Error>;

    /// What names the server from one process to the next (its command
    /// line, its URL), under which the era it speaks is remembered; None
    /// when nothing does (a replayed recording).
    fn server_key(&mut self) -> Option<String> {
        None
    }

    /// A session is ready: the `initialize` result (or a modern server's
    /// discover result in its shape, see `era::as_initialize_result`),
    /// the session id a server gave, and the era found.
    fn established(&mut self, result: &Json, session_id: Option<String>, era: &Verdict) -> Result<(), Self::Error>;

    /// Whether the holder wants to hear that prompt or resource lists
    /// changed (a modern server then sends it only when asked).
    fn listens_for_list_changes(&self) -> bool {
        false
    }

    /// Something the user should know that is not an error (a tool left
    /// out of a list, and why). Said on stderr unless the holder has a
    /// better place.
    fn warn(&mut self, message: &str) {
        warn_on_stderr(message);
    }

    /// The server refused a request for want of credentials
    /// ([`Error::Unauthorized`]). True when new credentials are in place
    /// and the request is worth sending again; `again` says this request
    /// was refused before with credentials got this way. A holder
    /// without a way to log in says no, and the refusal stands.
    fn authorize(&mut self, refusal: &Error, again: bool) -> Result<bool, Self::Error> {
        let _ = (refusal, again);
        Ok(false)
    }

    /// Begins the login `refusal` calls for without waiting for it (an
    /// async request was refused): it runs beside the holder, which
    /// still calls its own callbacks itself, from
    /// [`Host::login_ended`]. False when there is no login to run (the
    /// refusal stands).
    fn begin_login(&mut self, refusal: &Error, again: bool) -> Result<bool, Self::Error> {
        let _ = (refusal, again);
        Ok(false)
    }

    /// How the login begun last ended, once it has: true when new
    /// credentials are in place. None while it runs.
    fn login_ended(&mut self) -> Result<Option<bool>, Self::Error> {
        Ok(Some(false))
    }

    /// What async requests settle with when `raised` ended what they
    /// waited for (a handshake, their first try) and they cannot raise
    /// it themselves: our own error inside it, or one that says a
    /// callback failed (the holder reports the callback's own error).
    fn settle_error(&mut self, raised: &Self::Error) -> Error;
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
    /// The handshake under way, when an async request began it.
    connecting: Option<Box<connect::Connecting>>,
    /// Async requests waiting for a session.
    queue: queue::Queue,
    /// Counts sessions: a ticket names the session its request went to.
    session_number: u64,
    timeout: Duration,
    /// How long the handshake may take: a cold start (`npx -y` fetching
    /// a package, a Python environment) is no request timing out.
    connect_timeout: Duration,
    /// What `initialize` declares: one capability per server request the
    /// holder answers itself.
    capabilities: Json,
    /// Outcomes of requests whose session ended (died, closed, was
    /// forgotten) before their waiter took them.
    finished: HashMap<(u64, IdKey), Result<Json, Error>>,
    /// The current session's `initialize` result.
    initialized: Option<Json>,
    /// Counts the credentials the holder got: a request refused under
    /// older ones is sent again without a login of its own, so that ten
    /// requests refused at once cost one login, not ten.
    credentials: u64,
    /// The last session `close` ended: requests that went to it are not
    /// sent again.
    closed_session: u64,
    tools: ToolList,
    /// The skills of the last `skills/list`.
    skills: skills::Skills,
    /// `opts.era`.
    era: EraChoice,
    /// The current session's envelope, when its server is modern: every
    /// request is stamped with it.
    envelope: Option<Envelope>,
    /// Probes sent: each has an id of its own, apart from `next_id`.
    probes: u64,
    /// When requests paused between rounds of input go on (see
    /// `request::modern::answer_input`): an event loop's timer wakes for them.
    paused_until: Vec<Instant>,
    /// `client:set_log_level` on a modern server: every later request
    /// asks for log messages at this level, on this session and the next.
    log_level: Option<Json>,
    /// What a modern server is listened to for (see `listen`).
    subscriptions: listen::Subscriptions,
    /// Results a modern server said may be kept (see `cache`).
    cache: cache::Cache,
    /// The token a token function gave last.
    token: Option<String>,
    /// The refusal a login running beside the holder answers.
    login: Option<Error>,
    /// Why the last such login failed: what a handshake or a blocking
    /// request that waited for it fails with.
    login_failure: Option<Error>,
}

/// What the client knows of the server's tool list.
#[derive(Default)]
struct ToolList {
    schemas: ToolSchemas,
    /// A listing finished once: there is something to keep fresh.
    listed: bool,
    /// The server said the list changed since it was listed.
    stale: bool,
    /// The listing that refreshes a stale list, while it runs.
    refreshing: Option<Box<Operation>>,
    /// Refreshes finished, and how the last one ended: a call that waits
    /// for one goes on (or fails with it) once this count moves.
    refreshes: u64,
    last_refresh: Option<Result<(), Error>>,
    /// The last listing, until the holder takes it.
    fresh: Option<Listing>,
}

/// A finished `tools/list`: every page as it came.
pub struct Listing {
    pub pages: Vec<Json>,
    /// Listed again because the server said the list changed (not asked
    /// for by the caller).
    pub refreshed: bool,
}

/// A request in flight on a session: what its operation holds.
#[derive(Clone, Debug)]
pub struct Ticket {
    session: u64,
    key: IdKey,
    /// The request's id, as sent.
    pub id: Json,
    what: Rc<str>,
}

impl Client {
    pub fn new(timeout: Duration, connect_timeout: Duration, capabilities: Json) -> Client {
        Client {
            session: None,
            connecting: None,
            queue: queue::Queue::default(),
            session_number: 0,
            timeout,
            connect_timeout,
            capabilities,
            finished: HashMap::new(),
            initialized: None,
            credentials: 0,
            closed_session: 0,
            tools: ToolList::default(),
            era: EraChoice::Auto,
            envelope: None,
            probes: 0,
            paused_until: Vec::new(),
            log_level: None,
            subscriptions: listen::Subscriptions::default(),
            cache: cache::Cache::default(),
            skills: skills::Skills::default(),
            token: None,
            login: None,
            login_failure: None,
        }
    }

    /// How the era of the next sessions is chosen (`opts.era`).
    pub fn choose_era(&mut self, era: EraChoice) {
        self.era = era;
    }

    /// `opts.cache = false`: nothing a server allows to be kept is.
    /// `opts.cache = { max_entries = N, max_bytes = N }`.
    pub fn bound_cache(&mut self, bounds: CacheBounds) {
        self.cache.bounds = bounds;
    }

    pub fn use_cache(&mut self, on: bool) {
        self.cache.on = on;
        self.cache.clear();
    }

    /// The token the holder's requests carry now (a token function's
    /// answer): another one than before counts as new credentials, and
    /// what was kept privately for the old ones is not theirs.
    pub fn present_token(&mut self, token: &str) {
        if self.token.as_deref().is_some_and(|t| t != token) {
            self.credentials += 1;
        }
        self.token = Some(token.to_string());
    }

    /// `opts.on_log` was given. A modern server sends a request's log
    /// messages only when the request asks for them (`logLevel` in its
    /// envelope; a 2025 session gets them unasked), and a caller who set
    /// `on_log` expects them: so every modern request asks at `info` until
    /// `client:set_log_level` chooses another level.
    pub fn ask_for_logs(&mut self) {
        if self.log_level.is_none() {
            self.log_level = Some(Json::str("info"));
        }
    }

    /// The level of log messages later modern requests ask for.
    fn set_log_level(&mut self, level: Option<Json>) {
        if let Some(envelope) = self.envelope.as_mut() {
            envelope.log_level = level.clone();
        }
        if let Some(session) = self.session.as_mut() {
            if let Some(envelope) = &self.envelope {
                session.speak_modern(envelope.clone());
            }
        }
        self.log_level = level;
    }

    /// Sends a notification, starting the session first if needed.
    pub fn notify<H: Host>(&mut self, host: &mut H, message: &Json) -> Result<(), H::Error> {
        self.ready(host)?;
        // Requests queued behind the handshake went out first, and the
        // session may have ended under them (a server that exits at once).
        let what = protocol::lua_text(message.get("method"));
        // What the server sent before is routed first, as before a
        // request: a reply that came meanwhile settles its handle, whose
        // on_done then runs as notify returns.
        self.route_queued(host, &what)?;
        let Some(session) = self.session.as_mut() else { return Err(Error::NoResponse { what }.into()) };
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
    pub fn ensure_session<H: Host>(&mut self, host: &mut H) -> Result<(), H::Error> {
        self.ready(host)
    }

    /// Receives and routes what the server sent, until `until` at most or
    /// one message, whichever is first: the step every wait repeats.
    /// Returns whether anything came. A session that died hands its
    /// requests' outcomes over to the client on the way.
    pub fn pump<H: Host>(&mut self, host: &mut H, until: Instant) -> Result<bool, H::Error> {
        Ok(self.pump_session(host, until)?)
    }

    fn pump_session<H: Host>(&mut self, host: &mut H, until: Instant) -> Result<bool, Error> {
        self.poll_login(host);
        self.resume_queue(host);
        if let Some(mut conn) = self.connecting.take() {
            let pumped = self.pump_handshake(host, &mut conn, until);
            self.connecting = Some(conn);
            self.advance_connection(host);
            return pumped;
        }
        let Some(session) = self.session.as_mut() else {
            // Nothing to read (requests queued behind a login): a wait
            // still takes its time, and still hears Ctrl-C.
            let pause = until.saturating_duration_since(Instant::now()).min(crate::interrupt::SLICE);
            if !pause.is_zero() {
                std::thread::sleep(pause);
            }
            if crate::interrupt::requested() {
                return Err(Error::Interrupted { what: String::new() });
            }
            return Ok(false);
        };
        let mut peer = Watching {
            host,
            tools_stale: &mut self.tools.stale,
            subscriptions: &mut self.subscriptions,
            cache: &mut self.cache,
        };
        let pumped = session.pump_until(until, &mut peer);
        if session.broken {
            self.retire_broken();
        }
        match pumped {
            // The dead transport's error went to every request in flight.
            Err(Error::Transport { .. }) => Ok(true),
            other => other,
        }
    }

    /// Whether the server sent something not yet routed.
    pub fn queued(&self) -> bool {
        self.session.as_ref().is_some_and(Session::queued)
            || self.connecting.as_ref().is_some_and(|c| c.session.queued())
    }

    /// The earliest time a request runs out or a paused one goes on,
    /// for an event loop's timer.
    pub fn next_deadline(&mut self) -> Option<Instant> {
        let now = Instant::now();
        self.paused_until.retain(|at| *at > now);
        let paused = self.paused_until.iter().min().copied();
        let running = self.session.as_ref().and_then(Session::next_deadline);
        let connecting = self.connecting.as_ref().and_then(|c| c.deadline());
        running.into_iter().chain(paused).chain(connecting).min()
    }

    /// Ends the session the way its transport does; requests in flight
    /// settle with [`Error::Closed`], and the next request starts a new
    /// session.
    pub fn close(&mut self) {
        // A server still starting is let go as a dropped client's is: its
        // shutdown (up to two grace periods for one that reads nothing yet)
        // runs on a thread of its own, not on an event loop's.
        drop(self.connecting.take());
        self.login = None;
        self.close_queued();
        self.retire(|what| Error::Closed { what: what.to_string() });
        self.closed_session = self.session_number;
        // A refresh cut short ends as closed, for the calls waiting on it;
        // what the client kept for its request goes with it.
        if let Some(refresh) = self.tools.refreshing.take() {
            if let Some(ticket) = refresh.ticket() {
                self.forget(ticket);
            }
            self.tools.last_refresh = Some(Err(Error::Closed { what: "tools/list".into() }));
            self.tools.refreshes += 1;
        }
    }

    /// Whether `ticket` has settled; never waits.
    fn ticket_settled(&self, ticket: &Ticket) -> bool {
        match &self.session {
            Some(session) if ticket.session == self.session_number => session.settled(&ticket.key),
            _ => true,
        }
    }

    /// The whole reply to `ticket` (error replies included), once it has
    /// settled. Taken once: the client keeps nothing of it afterwards.
    fn take_reply(&mut self, ticket: &Ticket) -> Result<Json, Error> {
        let taken = match self.session.as_mut() {
            Some(session) if ticket.session == self.session_number => session.take(&ticket.key),
            _ => self.finished.remove(&(ticket.session, ticket.key.clone())),
        };
        // Its session ended without a word for it: cannot happen unless
        // the ticket was taken already.
        taken.unwrap_or_else(|| Err(Error::NoResponse { what: ticket.what.to_string() }))
    }

    /// Stops `ticket`'s request: the server gets `notifications/cancelled`
    /// with `reason`, and the ticket settles with `error`. False if it had
    /// settled already.
    fn cancel_ticket(&mut self, ticket: &Ticket, reason: &str, error: Error) -> bool {
        match self.session.as_mut() {
            Some(session) if ticket.session == self.session_number => session.cancel(&ticket.key, reason, error),
            _ => false,
        }
    }

    /// Nobody will take `ticket`'s outcome (its handle was collected).
    pub fn forget(&mut self, ticket: &Ticket) {
        if ticket.session == queue::QUEUED {
            return self.forget_queued(ticket);
        }
        match self.session.as_mut() {
            Some(session) if ticket.session == self.session_number => session.discard(&ticket.key),
            _ => {
                self.finished.remove(&(ticket.session, ticket.key.clone()));
            }
        }
    }

    /// When `ticket`'s request runs out, if it is still in flight.
    fn deadline_of(&self, ticket: &Ticket) -> Option<Instant> {
        match &self.session {
            Some(session) if ticket.session == self.session_number => session.deadline_of(&ticket.key),
            _ => None,
        }
    }

    /// Ends the current session, keeping the outcomes of its requests;
    /// those still running get `unsettled`'s error.
    fn retire(&mut self, unsettled: impl Fn(&str) -> Error) {
        if let Some(mut session) = self.session.take() {
            for (key, outcome) in session.settle_all(unsettled) {
                self.finished.insert((self.session_number, key), outcome);
            }
            session.close();
        }
    }

    /// Ends a session that broke. Its requests still running get no reply:
    /// if the server forgot the session (404), each may be sent once more
    /// on a new one, as a blocking request whose own POST met the 404.
    fn retire_broken(&mut self) {
        let forgotten = self.session.as_ref().is_some_and(|s| s.forgotten);
        if forgotten {
            self.retire(|_| Error::SessionExpired);
        } else {
            self.retire(|what| Error::NoResponse { what: what.to_string() });
        }
    }

    /// A live session, started if there is none or the last one broke:
    /// the handshake is waited for, an async one under way included.
    /// Async requests queued behind it go out first.
    fn ready<H: Host>(&mut self, host: &mut H) -> Result<(), H::Error> {
        if self.session.as_ref().is_some_and(|s| s.broken) {
            self.retire_broken();
        }
        if self.session.is_some() {
            return Ok(());
        }
        let mut conn = match self.connecting.take() {
            Some(conn) => conn,
            None => match self.begin_handshake(host, false) {
                Ok(conn) => Box::new(conn),
                Err(failure) => return Err(self.fail_connect(host, failure)),
            },
        };
        loop {
            match self.connection_step(host, &mut conn) {
                Ok(true) => {
                    self.connected(host, conn.session);
                    return Ok(());
                }
                Ok(false) => {}
                Err(failure) => return Err(self.fail_connect(host, failure)),
            }
            let mut slice_end = Instant::now() + crate::interrupt::SLICE;
            if let Some(deadline) = conn.deadline() {
                slice_end = slice_end.min(deadline);
            }
            match self.pump_handshake(host, &mut conn, slice_end) {
                // Ctrl-C stops this call, not an event loop's handshake that
                // it joined: that one goes on, and its queue with it.
                Err(e @ Error::Interrupted { .. }) if conn.is_detached() => {
                    self.connecting = Some(conn);
                    return Err(e.into());
                }
                Err(e) => return Err(self.fail_connect(host, Failure::Core(e))),
                Ok(_) => {}
            }
        }
    }

    /// Whether a session is up and has not broken.
    fn live(&self) -> bool {
        self.session.as_ref().is_some_and(|s| !s.broken)
    }

    /// Starts a session without waiting, unless one is up or starting:
    /// its steps run as the async requests queued behind it are moved
    /// on. A failure settles them.
    fn connect_detached<H: Host>(&mut self, host: &mut H) {
        if self.session.as_ref().is_some_and(|s| s.broken) {
            self.retire_broken();
        }
        if self.session.is_some() || self.connecting.is_some() {
            return;
        }
        match self.begin_handshake(host, true) {
            Ok(conn) => {
                self.connecting = Some(Box::new(conn));
                self.advance_connection(host);
            }
            Err(failure) => {
                let _ = self.fail_connect(host, failure);
            }
        }
    }

    /// Moves an async handshake on as far as what has arrived allows.
    fn advance_connection<H: Host>(&mut self, host: &mut H) {
        let Some(mut conn) = self.connecting.take() else { return };
        match self.connection_step(host, &mut conn) {
            Ok(true) => self.connected(host, conn.session),
            Ok(false) => self.connecting = Some(conn),
            Err(failure) => {
                let _ = self.fail_connect(host, failure);
            }
        }
    }

    /// One step of a handshake, and a login when the server asks for
    /// one: the handshake then begins again with the new credentials. An
    /// async handshake's login runs beside the holder, and the handshake
    /// waits for it here.
    fn connection_step<H: Host>(
        &mut self,
        host: &mut H,
        conn: &mut connect::Connecting,
    ) -> Result<bool, Failure<H::Error>> {
        loop {
            if let Some(refusal) = conn.awaiting_login.take() {
                self.poll_login(host);
                if self.login.is_some() {
                    conn.awaiting_login = Some(refusal);
                    return Ok(false);
                }
                if self.credentials == conn.credentials {
                    return Err(Failure::Core(self.login_failure.clone().unwrap_or(refusal)));
                }
                self.handshake_again(host, conn)?;
                continue;
            }
            let refusal = match self.advance_handshake(host, conn) {
                Err(Failure::Refused(refusal)) if conn.authorizations < MAX_AUTHORIZATIONS => refusal,
                Err(Failure::Refused(refusal)) => return Err(Failure::Core(refusal)),
                other => return other,
            };
            let again = conn.authorizations > 0;
            conn.credentials = self.credentials;
            if conn.is_detached() {
                if !self.begin_login(host, &refusal, again).map_err(Failure::Other)? {
                    return Err(Failure::Core(refusal));
                }
                conn.awaiting_login = Some(refusal);
                continue;
            }
            self.await_login(host).map_err(Failure::Other)?;
            if self.credentials == conn.credentials {
                if !host.authorize(&refusal, again).map_err(Failure::Other)? {
                    return Err(Failure::Core(refusal));
                }
                self.credentials += 1;
            }
            self.handshake_again(host, conn)?;
        }
    }

    /// The handshake once more, from the start, under new credentials.
    fn handshake_again<H: Host>(
        &mut self,
        host: &mut H,
        conn: &mut connect::Connecting,
    ) -> Result<(), Failure<H::Error>> {
        let authorizations = conn.authorizations + 1;
        *conn = self.begin_handshake(host, conn.is_detached())?;
        conn.authorizations = authorizations;
        Ok(())
    }

    /// The handshake is done: the session is the client's, and the async
    /// requests queued behind it go out, in the order they were made.
    fn connected<H: Host>(&mut self, host: &mut H, session: Session) {
        self.session_number += 1;
        self.session = Some(session);
        self.send_queued(host);
    }

    /// A handshake failed: the async requests queued behind it settle
    /// with its error, and the caller gets it to raise.
    fn fail_connect<H: Host>(&mut self, host: &mut H, failure: Failure<H::Error>) -> H::Error {
        let (error, raised) = match failure {
            Failure::Core(e) | Failure::Refused(e) => (e.clone(), e.into()),
            Failure::Other(e) => (host.settle_error(&e), e),
        };
        self.fail_queued(&error);
        raised
    }

    /// Requests for a capability the server did not declare fail here,
    /// before anything is sent, naming it: a server answers them with
    /// -32601 at best, and some hang up. Tools are left alone: servers
    /// that serve tools without declaring them are common, and the
    /// reference never asked.
    fn check_capability(&self, method: &[u8]) -> Result<(), Error> {
        let method = String::from_utf8_lossy(method);
        let Some(path) = protocol::capability_needed(&method) else { return Ok(()) };
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
            None => Err(Error::NotDeclared { what: method.into_owned(), capability: path.to_string() }),
        }
    }

    /// Learns the output schemas and keeps the input schemas of a tool
    /// list (every page of `tools/list`, in order), forgetting any
    /// earlier one.
    pub fn learn_tools(&mut self, pages: &[Json]) {
        let selected: Vec<_> = pages.iter().map(|page| page.selected(TOOL_SCHEMAS)).collect();
        self.tools.schemas.learn(selected.iter().map(|page| page.as_ref()));
        self.tools.schemas.keep_pages(pages);
    }

    /// The `resources/read` that loads the skill `name` (its name or its
    /// `SKILL.md` URI) from the last `skills/list`, or its file at `path`,
    /// checked as the listing says before it is handed over.
    pub fn skill_read(&self, name: &[u8], path: Option<&[u8]>, what: Rc<str>) -> Result<Request, Error> {
        let (uri, check) = self.skills.check(name, path)?;
        let params = Json::object([("uri", Json::Str(uri))]);
        Ok(Request::new("resources/read", params, what).shape(Shape::SkillFile(Box::new(check))))
    }

    /// Whether `result`, the result of calling `tool`, keeps the tool's
    /// output schema (see `schema.rs`).
    pub fn check_output(&self, tool: &[u8], result: &Json, what: &str) -> Result<(), Error> {
        self.tools.schemas.check(tool, result, what)
    }

    /// The `inputSchema` of `tool`, from the last listing.
    pub fn input_schema(&self, tool: &[u8]) -> Option<Rc<Json>> {
        self.tools.schemas.input(tool)
    }

    /// The tool list listed since this was last asked (by `discover`, or
    /// again because the server said it changed), for the holder to show.
    pub fn take_listing(&mut self) -> Option<Listing> {
        self.tools.fresh.take()
    }
}

/// A client dropped (collected) with requests running tells the server
/// to stop them; the transport then shuts down as it does when dropped,
/// without holding the thread that dropped it.
impl Drop for Client {
    fn drop(&mut self) {
        if let Some(session) = self.session.as_mut() {
            session.cancel_all_detached();
        }
    }
}

/// The holder, as the session's peer: a `tools/list_changed` notification
/// also marks the client's tool list stale on its way, a modern server's
/// listen notifications are matched to the client's listen, and a change
/// notification evicts what it makes stale from the cache.
struct Watching<'a, H> {
    host: &'a mut H,
    tools_stale: &'a mut bool,
    subscriptions: &'a mut listen::Subscriptions,
    cache: &'a mut cache::Cache,
}

impl<H: Host> Peer for Watching<'_, H> {
    fn notification(&mut self, msg: Json) {
        let host = &mut *self.host;
        if !self.subscriptions.admit(&msg, &mut |warning| host.warn(warning)) {
            return;
        }
        self.cache.evict_for(&msg);
        if msg.get("method") == Some(&Json::str("notifications/tools/list_changed")) {
            *self.tools_stale = true;
        }
        self.host.notification(msg);
    }

    fn request(&mut self, msg: &Json) -> Json {
        self.host.request(msg)
    }
}

/// Where a warning goes when its holder has no better place for it.
pub fn warn_on_stderr(message: &str) {
    eprintln!("lua-mcp: {message}");
}

/// The server must choose a protocol version this client speaks.
pub fn check_version(result: &Json) -> Result<(), Error> {
    match result.get("protocolVersion") {
        Some(Json::Str(v)) if SUPPORTED_VERSIONS.iter().any(|s| s.as_bytes() == v.as_slice()) => Ok(()),
        chosen => Err(Error::UnsupportedVersion {
            chosen: crate::server_text::quoted_str(&protocol::lua_text(chosen), crate::server_text::ITEM_CHARS),
            supported: SUPPORTED_VERSIONS.join(", "),
        }),
    }
}

/// Why a handshake failed: the server wants credentials (worth another
/// try once the holder got them), an error of the client's own (read
/// before it goes to the holder), or the holder's.
enum Failure<E> {
    Refused(Error),
    Core(Error),
    Other(E),
}
