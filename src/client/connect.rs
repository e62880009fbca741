//! Starting a session, as steps that never wait: the transport opened,
//! the era probe sent and read (see `era`), `initialize` sent and read,
//! `initialized` delivered.
//! Each step starts one request and returns; the next runs once its
//! reply (or its timeout) has arrived. A blocking request drives the
//! steps with waits in between; an async one lets them run from whatever
//! moves its handle on (`dispatch`, a wait), so that an event loop keeps
//! turning while a server starts: `npx -y` fetching a package, a Python
//! environment loading, a remote server behind a slow TLS handshake.
//!
//! The rules are the ones a single blocking handshake had, in the same
//! order: a server remembered as legacy, or any server with `opts.era =
//! "legacy"`, goes straight to `initialize`; any other is probed. A legacy
//! verdict that then fails (`initialize` refused the way a modern server
//! refuses it, or a slow server that exited on a probe it read late) is
//! put right once.

use std::rc::Rc;
use std::time::{Duration, Instant};

use super::{check_version, Client, Failure, Host, Watching};
use crate::codec::Json;
use crate::era::{self, remembered, Answer, EraChoice, Verdict, PROBE_PATIENCE};
use crate::error::Error;
use crate::protocol::{self, id_key, is_modern_version, result_of, Envelope, MODERN_VERSIONS};
use crate::session::{Limit, Session};
use crate::wire::headers;

/// A session whose handshake is under way.
pub(super) struct Connecting {
    pub(super) session: Session,
    /// What names the server from one process to the next.
    server: Option<String>,
    /// Its requests go out detached (over HTTP, from threads of the
    /// transport's own): an async request began it.
    detached: bool,
    step: Step,
    /// What became of the first probe.
    probe: Probe,
    /// The outcome of a step whose request could not be sent, or whose
    /// session failed under it.
    unsent: Option<Result<Json, Error>>,
    /// Logins so far for this connection.
    pub(super) authorizations: usize,
    /// The refusal a login running beside the holder answers: the
    /// handshake begins again once it got new credentials.
    pub(super) awaiting_login: Option<Error>,
    /// The client's credentials count when the server refused.
    pub(super) credentials: u64,
    /// When the whole handshake must be over, over HTTP:
    /// `opts.connect_timeout` after it began, whatever its steps (the
    /// probe, `initialize`, `initialized`) took between them.
    until: Instant,
}

enum Step {
    Probing(Box<Probed>),
    Initializing {
        id: Json,
    },
    /// `initialized` is being delivered (over HTTP, from a thread); the
    /// session is ready once the server has it.
    Notifying {
        key: Json,
        result: Box<Json>,
    },
    /// Between steps.
    Idle,
}

/// Why the server is being probed.
enum AfterProbe {
    /// The first probe: its verdict decides the handshake.
    First,
    /// `initialize` was refused the way a modern server refuses it: if
    /// the server is not modern after all, that refusal stands.
    InitializeRefused(Error),
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

impl Connecting {
    /// The outcome of the step's request, once it has one.
    fn outcome(&mut self) -> Option<Result<Json, Error>> {
        let key = id_key(self.step_id()?)?;
        if let Some(unsent) = self.unsent.take() {
            return Some(unsent);
        }
        self.session.take(&key)
    }

    /// The id of the step's request, between steps none.
    fn step_id(&self) -> Option<&Json> {
        match &self.step {
            Step::Probing(probed) => Some(&probed.id),
            Step::Initializing { id } => Some(id),
            Step::Notifying { key, .. } => Some(key),
            Step::Idle => None,
        }
    }

    /// The session failed under the step (a server request's answer could
    /// not be sent, a message with no id for several requests): the step
    /// ends with that error, unless its own outcome came first. Between
    /// steps (a login running) there is nothing to end: the handshake
    /// begins again after it on a new session.
    fn fail_step(&mut self, error: Error) {
        let Some(key) = self.step_id().and_then(id_key) else { return };
        if self.session.settled(&key) {
            return;
        }
        self.session.discard(&key);
        self.unsent = Some(Err(error));
    }

    /// Ends the session before another is opened: as the blocking
    /// handshake always did, or, for an async one, by letting it go (its
    /// shutdown runs on a thread of its own, not on an event loop's).
    fn close_session(&mut self) {
        if !self.detached {
            self.session.close();
        }
    }

    pub(super) fn is_detached(&self) -> bool {
        self.detached
    }

    /// When the step's request runs out.
    pub(super) fn deadline(&self) -> Option<Instant> {
        self.session.next_deadline()
    }

    /// What the step waits for, for an error that names it.
    pub(super) fn waiting_for(&self) -> &'static str {
        match self.step {
            _ if self.awaiting_login.is_some() => "login",
            Step::Probing(_) => "server/discover",
            Step::Notifying { .. } => "notifications/initialized",
            _ => "initialize",
        }
    }

    /// A new session for the handshake, bounded by what is left of its
    /// time.
    fn open_session<H: Host>(host: &mut H, until: Instant) -> Result<Session, Failure<H::Error>> {
        let mut session = Session::new(host.open().map_err(Failure::Other)?);
        session.connect_by(Some(until));
        Ok(session)
    }

    /// The handshake is over: its session's requests are the caller's.
    fn finish(&mut self) {
        self.session.connect_by(None);
    }

    /// Sends the step's request; a failure to send is its outcome.
    fn send(&mut self, id: &Json, message: &Json, mut limit: Limit) {
        limit.detached = self.detached;
        limit.deadline = limit.deadline.min(self.until);
        if let Err(e) = self.session.start(id, message, limit) {
            self.unsent = Some(Err(e));
        }
    }
}

impl Client {
    /// Opens a transport and sends the handshake's first request.
    pub(super) fn begin_handshake<H: Host>(
        &mut self,
        host: &mut H,
        detached: bool,
    ) -> Result<Connecting, Failure<H::Error>> {
        let server = host.server_key();
        let remembered = match (self.era, &server) {
            (EraChoice::Auto, Some(server)) => remembered::recall(server),
            _ => None,
        };
        let mut session = Session::new(host.open().map_err(Failure::Other)?);
        // Over HTTP the whole handshake is one budget. Over stdio a silent
        // server's probe costs up to [`PROBE_PATIENCE`] before
        // `initialize` gets the whole connect time of its own, as before:
        // a cold start is no sign of an era there.
        let until = match session.always_answers() {
            true => Instant::now().checked_add(self.connect_timeout).unwrap_or_else(crate::interrupt::far_future),
            false => crate::interrupt::far_future(),
        };
        session.connect_by(Some(until));
        let mut conn = Connecting {
            until,
            session,
            server,
            detached,
            step: Step::Idle,
            probe: Probe::Skipped,
            unsent: None,
            authorizations: 0,
            awaiting_login: None,
            credentials: 0,
        };
        if self.era == EraChoice::Legacy || remembered == Some(Verdict::Legacy) {
            self.send_initialize(host, &mut conn)?;
            return Ok(conn);
        }
        // A server known to answer (modern last time, or HTTP) gets the
        // whole connect time: a cold start is no sign of an era.
        let patient = remembered.is_some() || self.era == EraChoice::Modern || conn.session.always_answers();
        let patience = if patient { self.connect_timeout } else { PROBE_PATIENCE.min(self.connect_timeout) };
        self.send_probe(host, &mut conn, MODERN_VERSIONS[0].to_string(), patience, false, AfterProbe::First)?;
        Ok(conn)
    }

    /// Moves a handshake on as far as what has arrived allows; true once
    /// its session is ready (established with the holder).
    pub(super) fn advance_handshake<H: Host>(
        &mut self,
        host: &mut H,
        conn: &mut Connecting,
    ) -> Result<bool, Failure<H::Error>> {
        while let Some(outcome) = conn.outcome() {
            let done = match std::mem::replace(&mut conn.step, Step::Idle) {
                Step::Probing(probed) => self.read_probe(host, conn, outcome, *probed)?,
                Step::Initializing { .. } => self.read_initialize(host, conn, outcome)?,
                Step::Notifying { result, .. } => self.read_notified(host, conn, outcome, *result)?,
                Step::Idle => false,
            };
            if done {
                conn.finish();
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Asks the server what it speaks (`server/discover`, with the
    /// envelope of `version`). The probe's id is its own, so request ids
    /// are what they would be without it; nothing is sent to stop it if
    /// it goes unanswered (see `Limit::quiet`).
    fn send_probe<H: Host>(
        &mut self,
        host: &mut H,
        conn: &mut Connecting,
        version: String,
        patience: Duration,
        retried: bool,
        after: AfterProbe,
    ) -> Result<(), Failure<H::Error>> {
        let client_info = host.client_info().map_err(Failure::Other)?;
        self.probes += 1;
        let id = Json::str(format!("lua-mcp-probe-{}", self.probes));
        let envelope = Envelope {
            version: version.clone(),
            capabilities: self.capabilities.clone(),
            client_info,
            log_level: None,
        };
        let mut message = protocol::request(id.clone(), "server/discover", Json::Object(vec![]));
        envelope.stamp(&mut message);
        let mut limit = Limit::new(patience, None, Rc::from("server/discover"));
        limit.quiet = true;
        // Its own headers: the transport speaks no era yet.
        limit.headers = vec![
            (headers::MCP_PROTOCOL_VERSION.to_string(), version),
            (headers::MCP_METHOD.to_string(), "server/discover".to_string()),
        ];
        conn.step = Step::Probing(Box::new(Probed { id: id.clone(), envelope, retried, patience, after }));
        conn.send(&id, &message, limit);
        Ok(())
    }

    /// Reads the probe's answer; a modern server that names another
    /// version both speak is asked once more at it.
    fn read_probe<H: Host>(
        &mut self,
        host: &mut H,
        conn: &mut Connecting,
        outcome: Result<Json, Error>,
        probed: Probed,
    ) -> Result<bool, Failure<H::Error>> {
        let after = probed.after;
        let answered = !matches!(outcome, Err(Error::Timeout { .. }));
        let found = match era::read_answer(outcome, conn.session.always_answers()) {
            Answer::Modern { version, result } => {
                Found::Modern { envelope: Envelope { version, ..probed.envelope }, discovered: result }
            }
            Answer::TryVersion { version, .. } if !probed.retried => {
                self.send_probe(host, conn, version, probed.patience, true, after)?;
                return Ok(false);
            }
            Answer::TryVersion { refusal, .. } => return Err(Failure::Core(refusal)),
            Answer::Legacy { restart, why } => {
                Found::Legacy { restart, unanswered: (!answered).then_some(probed.id), why }
            }
            Answer::Refused(refusal) => return Err(Failure::Refused(refusal)),
            Answer::Failed(Error::Timeout { what, seconds, note }) => {
                let note = format!("{note} (opts.connect_timeout)");
                return Err(Failure::Core(Error::Timeout { what, seconds, note }));
            }
            Answer::Failed(e) => return Err(Failure::Core(e)),
        };
        match (found, after) {
            (Found::Modern { envelope, discovered }, _) => {
                self.remember(conn, Verdict::Modern(envelope.version.clone()));
                self.speak_modern(host, conn, envelope, &discovered)?;
                Ok(true)
            }
            (Found::Legacy { why, .. }, AfterProbe::First) if self.era == EraChoice::Modern => {
                Err(Failure::Core(Error::NotModern { why }))
            }
            (Found::Legacy { restart, unanswered, .. }, AfterProbe::First) => {
                self.remember(conn, Verdict::Legacy);
                if restart {
                    conn.close_session();
                    conn.session = Connecting::open_session(host, conn.until)?;
                }
                // A slow server may still answer it: a late discover
                // result says the next process should probe again.
                conn.probe = match unanswered {
                    Some(id) => {
                        conn.session.keep_late_reply(&id);
                        Probe::Unanswered
                    }
                    None => Probe::Answered,
                };
                self.send_initialize(host, conn)?;
                Ok(false)
            }
            (Found::Legacy { .. }, AfterProbe::InitializeRefused(refusal)) => {
                self.remember(conn, Verdict::Legacy);
                Err(Failure::Core(refusal))
            }
        }
    }

    /// The legacy handshake's request. It waits `connect_timeout`, not
    /// the request's `timeout`: `npx -y` took 7 s to start a server cold,
    /// and with `timeout = 3` every try killed the half-started server
    /// and spawned a new one, which never got further.
    fn send_initialize<H: Host>(&mut self, host: &mut H, conn: &mut Connecting) -> Result<(), Failure<H::Error>> {
        self.envelope = None;
        let id = host.next_id().map_err(Failure::Other)?;
        let init = host.initialize_request(id.clone(), self.capabilities.clone()).map_err(Failure::Other)?;
        conn.step = Step::Initializing { id: id.clone() };
        conn.send(&id, &init, Limit::new(self.connect_timeout, None, Rc::from("initialize")));
        Ok(())
    }

    /// Reads `initialize`'s answer: its version checked, `initialized`
    /// sent. A refusal that says the server is modern after all (see
    /// [`refused_as_modern`]) sends one more probe, and a server that
    /// exited on a probe it read late is started again.
    fn read_initialize<H: Host>(
        &mut self,
        host: &mut H,
        conn: &mut Connecting,
        outcome: Result<Json, Error>,
    ) -> Result<bool, Failure<H::Error>> {
        match self.initialized_by::<H>(conn, outcome) {
            Err(Failure::Core(e))
                if conn.probe != Probe::Answered && self.era == EraChoice::Auto && refused_as_modern(&e) =>
            {
                // Up and answering by now: the probe needs no more patience
                // than it had the first time.
                let patience = if conn.session.always_answers() { self.connect_timeout } else { PROBE_PATIENCE };
                let patience = patience.min(self.connect_timeout);
                let version = MODERN_VERSIONS[0].to_string();
                conn.probe = Probe::Answered;
                self.send_probe(host, conn, version, patience, false, AfterProbe::InitializeRefused(e))?;
                Ok(false)
            }
            Err(e) => self.start_over_after_late_probe(host, conn, e),
            Ok(result) => {
                if let Some(late) = conn.session.take_late_reply() {
                    if let Answer::Modern { version, .. } = era::read_answer(Ok(late), false) {
                        self.remember(conn, Verdict::Modern(version));
                    }
                }
                self.send_initialized(host, conn, result)
            }
        }
    }

    /// A server that exited on a probe it read late (the connection died
    /// under the legacy handshake) is started again, once; any other
    /// failure stands.
    fn start_over_after_late_probe<H: Host>(
        &mut self,
        host: &mut H,
        conn: &mut Connecting,
        failure: Failure<H::Error>,
    ) -> Result<bool, Failure<H::Error>> {
        let died = matches!(failure, Failure::Core(Error::Transport { .. } | Error::NoResponse { .. }));
        if !died || conn.probe != Probe::Unanswered {
            return Err(failure);
        }
        conn.close_session();
        conn.session = Connecting::open_session(host, conn.until)?;
        conn.probe = Probe::Answered;
        self.send_initialize(host, conn)?;
        Ok(false)
    }

    /// The legacy session from `initialize`'s answer: the version
    /// checked, the transport told.
    fn initialized_by<H: Host>(
        &mut self,
        conn: &mut Connecting,
        outcome: Result<Json, Error>,
    ) -> Result<Json, Failure<H::Error>> {
        let reply = match outcome {
            Ok(reply) => reply,
            Err(e @ Error::Unauthorized { .. }) => return Err(Failure::Refused(e)),
            Err(Error::Timeout { what, seconds, note }) => {
                // A server that hangs while it starts often says why.
                let said = conn.session.last_words().map(|w| format!("; its stderr ends: {w}")).unwrap_or_default();
                let note = format!("{note} (opts.connect_timeout){said}");
                return Err(Failure::Core(Error::Timeout { what, seconds, note }));
            }
            Err(e) => return Err(Failure::Core(e)),
        };
        let result = result_of(Some(reply), "initialize").map_err(|e| Failure::Core(crate::server_text::bounded(e)))?;
        check_version(&result).map_err(Failure::Core)?;
        self.initialized = Some(result.clone());
        // The transport first: over HTTP the notification after this
        // carries the version.
        if let Some(Json::Str(version)) = result.get("protocolVersion") {
            conn.session.established(&String::from_utf8_lossy(version));
        }
        Ok(result)
    }

    /// Sends `initialized`. A blocking handshake sends it and is done; one
    /// beside an event loop waits for its delivery as for a reply, since
    /// over HTTP that is a POST (and the server's stream opening after
    /// it), and a remote server may take its time over both.
    fn send_initialized<H: Host>(
        &mut self,
        host: &mut H,
        conn: &mut Connecting,
        result: Json,
    ) -> Result<bool, Failure<H::Error>> {
        if !conn.detached {
            let sent = conn.session.notify(&protocol::initialized()).map(|()| Json::Null);
            return self.read_notified(host, conn, sent, result);
        }
        // Its own key, never sent: one per session, which is new for each
        // handshake.
        let key = "lua-mcp-initialized";
        let limit = Limit::new(self.timeout, None, Rc::from("notifications/initialized"));
        conn.step = Step::Notifying { key: Json::str(key), result: Box::new(result) };
        conn.session.start_notice(key, &protocol::initialized(), limit);
        Ok(false)
    }

    /// `initialized` delivered (or not): the holder is told of the
    /// session last, since its fields must not say "ready" for a session
    /// whose handshake did not finish.
    fn read_notified<H: Host>(
        &mut self,
        host: &mut H,
        conn: &mut Connecting,
        outcome: Result<Json, Error>,
        result: Json,
    ) -> Result<bool, Failure<H::Error>> {
        if let Err(e) = outcome {
            return self.start_over_after_late_probe(host, conn, Failure::Core(e));
        }
        host.established(&result, conn.session.session_id(), &Verdict::Legacy).map_err(Failure::Other)?;
        Ok(true)
    }

    /// The session of a modern server: no handshake, the discover result
    /// in place of `initialize`'s, and every request stamped.
    fn speak_modern<H: Host>(
        &mut self,
        host: &mut H,
        conn: &mut Connecting,
        envelope: Envelope,
        discovered: &Json,
    ) -> Result<(), Failure<H::Error>> {
        let envelope = Envelope { log_level: self.log_level.clone(), ..envelope };
        let result = era::as_initialize_result(discovered, &envelope.version);
        self.initialized = Some(result.clone());
        let verdict = Verdict::Modern(envelope.version.clone());
        conn.session.speak_modern(envelope.clone());
        self.envelope = Some(envelope);
        host.established(&result, None, &verdict).map_err(Failure::Other)
    }

    /// Keeps what the server was found to speak for the next process,
    /// when the era is the client's to find.
    fn remember(&self, conn: &Connecting, verdict: Verdict) {
        if let (EraChoice::Auto, Some(server)) = (self.era, &conn.server) {
            remembered::remember(server, Some(verdict));
        }
    }

    /// Routes what the connecting server sent, until `until` at most:
    /// its replies settle the step's request, its notifications reach
    /// the holder.
    pub(super) fn pump_handshake<H: Host>(
        &mut self,
        host: &mut H,
        conn: &mut Connecting,
        until: Instant,
    ) -> Result<bool, Error> {
        let mut peer = Watching {
            host,
            tools_stale: &mut self.tools.stale,
            subscriptions: &mut self.subscriptions,
            cache: &mut self.cache,
        };
        match conn.session.pump_until(until, &mut peer) {
            Err(Error::Interrupted { .. }) => Err(Error::Interrupted { what: conn.waiting_for().to_string() }),
            // A dead transport's error went to the step's request already;
            // any other ends the step here.
            Err(e) => {
                conn.fail_step(e);
                Ok(true)
            }
            other => other,
        }
    }
}

/// The probe in flight.
struct Probed {
    id: Json,
    envelope: Envelope,
    retried: bool,
    patience: Duration,
    after: AfterProbe,
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
