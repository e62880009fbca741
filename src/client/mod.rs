//! The client: one server's session over its whole life. It starts the
//! session lazily (transport, `initialize`, version check,
//! `notifications/initialized`), and starts a new one when the old one
//! died or, over HTTP, was forgotten by the server.
//!
//! Every request takes one path (`request.rs`): described once (method,
//! params, name, limits, the shape of its outcome), started, then polled
//! or waited for until it settles. What a request may need on the way
//! happens there and only there, for blocking calls and async handles
//! alike: the new session after a 404, the resend after a login, the next
//! page, the output-schema check, the refresh of a stale tool list.
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
use crate::era::{self, remembered, Answer, EraChoice, Verdict, PROBE_PATIENCE};
use crate::error::Error;
use crate::protocol::{self, is_modern_version, result_of, Envelope, IdKey, MODERN_VERSIONS, SUPPORTED_VERSIONS};
use crate::schema::{ToolSchemas, TOOL_SCHEMAS};
use crate::session::{Limit, Peer, Session};
use crate::transport::Transport;

mod cache;
mod listen;
mod request;
#[cfg(test)]
mod tests;

pub use cache::CacheMode;
pub use request::{Limits, Operation, Request, Shape, TOOL_CALL};

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
    /// `opts.era`.
    era: EraChoice,
    /// The current session's envelope, when its server is modern: every
    /// request is stamped with it.
    envelope: Option<Envelope>,
    /// Probes sent: each has an id of its own, apart from `next_id`.
    probes: u64,
    /// When requests paused between rounds of input go on (see
    /// `request::answer_input`): an event loop's timer wakes for them.
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
            token: None,
        }
    }

    /// How the era of the next sessions is chosen (`opts.era`).
    pub fn choose_era(&mut self, era: EraChoice) {
        self.era = era;
    }

    /// `opts.cache = false`: nothing a server allows to be kept is.
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
        let Some(session) = self.session.as_mut() else {
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
    }

    /// The earliest time a request runs out or a paused one goes on,
    /// for an event loop's timer.
    pub fn next_deadline(&mut self) -> Option<Instant> {
        let now = Instant::now();
        self.paused_until.retain(|at| *at > now);
        let paused = self.paused_until.iter().min().copied();
        let running = self.session.as_ref().and_then(Session::next_deadline);
        running.into_iter().chain(paused).min()
    }

    /// Ends the session the way its transport does; requests in flight
    /// settle with [`Error::Closed`], and the next request starts a new
    /// session.
    pub fn close(&mut self) {
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

    /// A live session, started if there is none or the last one broke.
    fn ready<H: Host>(&mut self, host: &mut H) -> Result<(), H::Error> {
        if self.session.as_ref().is_some_and(|s| s.broken) {
            self.retire_broken();
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
                        self.credentials += 1;
                        authorizations += 1;
                    }
                    Err(Failure::Refused(refusal)) => return Err(refusal.into()),
                    Err(Failure::Core(e)) => return Err(e.into()),
                    Err(Failure::Other(e)) => return Err(e),
                }
            };
            self.session_number += 1;
            self.session = Some(session);
        }
        Ok(())
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

    /// A new session. Its era is found first (see `era`): a server
    /// remembered as legacy, or any server with `opts.era = "legacy"`,
    /// goes straight to `initialize`; any other is probed. A legacy
    /// verdict that then fails (`initialize` refused the way a modern
    /// server refuses it, or a slow server that exited on a probe it read
    /// late) is put right once here.
    fn handshake<H: Host>(&mut self, host: &mut H) -> Result<Session, Failure<H::Error>> {
        let server = host.server_key();
        let remembered = match (self.era, &server) {
            (EraChoice::Auto, Some(server)) => remembered::recall(server),
            _ => None,
        };
        let choice = self.era;
        let remember = |verdict: Option<Verdict>| {
            if let (EraChoice::Auto, Some(server)) = (choice, &server) {
                remembered::remember(server, verdict);
            }
        };
        let mut session = Session::new(host.open().map_err(Failure::Other)?);
        let mut probe = Probe::Skipped;
        if self.era != EraChoice::Legacy && remembered != Some(Verdict::Legacy) {
            // A server known to answer (modern last time, or HTTP) gets
            // the whole connect time: a cold start is no sign of an era.
            let patient = remembered.is_some() || self.era == EraChoice::Modern || session.always_answers();
            let patience = if patient { self.connect_timeout } else { PROBE_PATIENCE.min(self.connect_timeout) };
            match self.probe(host, &mut session, patience)? {
                Found::Modern { envelope, discovered } => {
                    remember(Some(Verdict::Modern(envelope.version.clone())));
                    return self.speak_modern(host, session, envelope, &discovered);
                }
                Found::Legacy { why, .. } if self.era == EraChoice::Modern => {
                    return Err(Failure::Core(Error::NotModern { why }));
                }
                Found::Legacy { restart, unanswered, .. } => {
                    remember(Some(Verdict::Legacy));
                    if restart {
                        session.close();
                        session = Session::new(host.open().map_err(Failure::Other)?);
                    }
                    // A slow server may still answer it: a late discover
                    // result says the next process should probe again.
                    probe = match unanswered {
                        Some(id) => {
                            session.keep_late_reply(&id);
                            Probe::Unanswered
                        }
                        None => Probe::Answered,
                    };
                }
            }
        }
        let initialized = match self.initialize(host, &mut session) {
            Err(Failure::Core(e))
                if probe != Probe::Answered && self.era == EraChoice::Auto && refused_as_modern(&e) =>
            {
                // Up and answering by now: the probe needs no more patience
                // than it had the first time.
                let patience = if session.always_answers() { self.connect_timeout } else { PROBE_PATIENCE };
                return match self.probe(host, &mut session, patience.min(self.connect_timeout))? {
                    Found::Modern { envelope, discovered } => {
                        remember(Some(Verdict::Modern(envelope.version.clone())));
                        self.speak_modern(host, session, envelope, &discovered)
                    }
                    Found::Legacy { .. } => {
                        remember(Some(Verdict::Legacy));
                        Err(Failure::Core(e))
                    }
                };
            }
            Err(Failure::Core(Error::Transport { .. } | Error::NoResponse { .. })) if probe == Probe::Unanswered => {
                session.close();
                session = Session::new(host.open().map_err(Failure::Other)?);
                self.initialize(host, &mut session)
            }
            other => other,
        };
        initialized?;
        if let Some(late) = session.take_late_reply() {
            if let Answer::Modern { version, .. } = era::read_answer(Ok(late), false) {
                remember(Some(Verdict::Modern(version)));
            }
        }
        Ok(session)
    }

    /// Asks the server what it speaks (`server/discover`, with the
    /// envelope of the newest modern version) and reads the answer; a
    /// modern server that names another version both speak is asked once
    /// more at it. The probe's id is its own, so request ids are what
    /// they would be without it; nothing is sent to stop it if it goes
    /// unanswered (see `Limit::quiet`).
    fn probe<H: Host>(
        &mut self,
        host: &mut H,
        session: &mut Session,
        patience: Duration,
    ) -> Result<Found, Failure<H::Error>> {
        let client_info = host.client_info().map_err(Failure::Other)?;
        let mut version = MODERN_VERSIONS[0].to_string();
        let mut retried = false;
        loop {
            self.probes += 1;
            let id = Json::str(format!("lua-mcp-probe-{}", self.probes));
            let envelope = Envelope {
                version: version.clone(),
                capabilities: self.capabilities.clone(),
                client_info: client_info.clone(),
                log_level: None,
            };
            let mut message = protocol::request(id.clone(), "server/discover", Json::Object(vec![]));
            envelope.stamp(&mut message);
            let mut limit = Limit::new(patience, None, Rc::from("server/discover"));
            limit.quiet = true;
            // Its own headers: the transport speaks no era yet.
            limit.headers = vec![
                ("MCP-Protocol-Version".to_string(), version.clone()),
                ("Mcp-Method".to_string(), "server/discover".to_string()),
            ];
            let mut peer = Watching {
                host: &mut *host,
                tools_stale: &mut self.tools.stale,
                subscriptions: &mut self.subscriptions,
                cache: &mut self.cache,
            };
            let outcome = session.request(&id, &message, limit, &mut peer);
            let answered = !matches!(outcome, Err(Error::Timeout { .. }));
            match era::read_answer(outcome, session.always_answers()) {
                Answer::Modern { version, result } => {
                    let envelope = Envelope { version, ..envelope };
                    return Ok(Found::Modern { envelope, discovered: result });
                }
                Answer::TryVersion { version: named, .. } if !retried => {
                    version = named;
                    retried = true;
                }
                Answer::TryVersion { refusal, .. } => return Err(Failure::Core(refusal)),
                Answer::Legacy { restart, why } => {
                    let unanswered = (!answered).then_some(id);
                    return Ok(Found::Legacy { restart, unanswered, why });
                }
                Answer::Refused(refusal) => return Err(Failure::Refused(refusal)),
                Answer::Failed(Error::Timeout { what, seconds, note }) => {
                    let note = format!("{note} (opts.connect_timeout)");
                    return Err(Failure::Core(Error::Timeout { what, seconds, note }));
                }
                Answer::Failed(e) => return Err(Failure::Core(e)),
            }
        }
    }

    /// The session of a modern server: no handshake, the discover result
    /// in place of `initialize`'s, and every request stamped.
    fn speak_modern<H: Host>(
        &mut self,
        host: &mut H,
        mut session: Session,
        envelope: Envelope,
        discovered: &Json,
    ) -> Result<Session, Failure<H::Error>> {
        let envelope = Envelope { log_level: self.log_level.clone(), ..envelope };
        let result = era::as_initialize_result(discovered, &envelope.version);
        self.initialized = Some(result.clone());
        let verdict = Verdict::Modern(envelope.version.clone());
        session.speak_modern(envelope.clone());
        self.envelope = Some(envelope);
        host.established(&result, None, &verdict).map_err(Failure::Other)?;
        Ok(session)
    }

    /// The legacy handshake: initialize answered and its version checked,
    /// initialized sent.
    fn initialize<H: Host>(&mut self, host: &mut H, session: &mut Session) -> Result<(), Failure<H::Error>> {
        self.envelope = None;
        let id = host.next_id().map_err(Failure::Other)?;
        let init = host.initialize_request(id.clone(), self.capabilities.clone()).map_err(Failure::Other)?;
        // The handshake waits `connect_timeout`, not the request's
        // `timeout`: `npx -y` took 7 s to start a server cold, and with
        // `timeout = 3` every try killed the half-started server and
        // spawned a new one, which never got further.
        let mut peer = Watching {
            host: &mut *host,
            tools_stale: &mut self.tools.stale,
            subscriptions: &mut self.subscriptions,
            cache: &mut self.cache,
        };
        let limit = Limit::new(self.connect_timeout, None, Rc::from("initialize"));
        let reply = match session.request(&id, &init, limit, &mut peer) {
            Ok(reply) => reply,
            Err(e @ Error::Unauthorized { .. }) => return Err(Failure::Refused(e)),
            Err(Error::Timeout { what, seconds, note }) => {
                // A server that hangs while it starts often says why.
                let said = session.last_words().map(|w| format!("; its stderr ends: {w}")).unwrap_or_default();
                let note = format!("{note} (opts.connect_timeout){said}");
                return Err(Failure::Core(Error::Timeout { what, seconds, note }));
            }
            Err(e) => return Err(Failure::Core(e)),
        };
        let result = result_of(Some(reply), "initialize").map_err(Failure::Core)?;
        check_version(&result).map_err(Failure::Core)?;
        self.initialized = Some(result.clone());
        // The transport first: over HTTP the notification below carries
        // the version. The holder last: its fields must not say "ready"
        // for a session whose handshake did not finish.
        if let Some(Json::Str(version)) = result.get("protocolVersion") {
            session.established(&String::from_utf8_lossy(version));
        }
        session.notify(&protocol::initialized()).map_err(Failure::Core)?;
        host.established(&result, session.session_id(), &Verdict::Legacy).map_err(Failure::Other)?;
        Ok(())
    }

    /// Learns the output schemas and keeps the input schemas of a tool
    /// list (every page of `tools/list`, in order), forgetting any
    /// earlier one.
    pub fn learn_tools(&mut self, pages: &[Json]) {
        let selected: Vec<_> = pages.iter().map(|page| page.selected(TOOL_SCHEMAS)).collect();
        self.tools.schemas.learn(selected.iter().map(|page| page.as_ref()));
        self.tools.schemas.keep_pages(pages);
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
            chosen: protocol::lua_text(chosen),
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

/// What became of the probe, for the handshake after it.
#[derive(PartialEq)]
enum Probe {
    Skipped,
    Answered,
    /// It went unanswered for [`PROBE_PATIENCE`]: a slow server may still
    /// read it, and answer `initialize` as a modern one or exit.
    Unanswered,
}

/// What the probe found.
enum Found {
    Modern {
        envelope: Envelope,
        discovered: Json,
    },
    /// `unanswered`: the probe's id, when it went unanswered.
    Legacy {
        restart: bool,
        unanswered: Option<Json>,
        why: String,
    },
}

/// `initialize` refused the way a server of the modern revision refuses
/// it: with a JSON-RPC error (an older server always has `initialize`),
/// or by choosing a modern version, which `initialize` cannot speak.
fn refused_as_modern(error: &Error) -> bool {
    match error {
        Error::Rpc { .. } => true,
        Error::UnsupportedVersion { chosen, .. } => is_modern_version(chosen.as_bytes()),
        _ => false,
    }
}
