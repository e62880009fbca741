//! The one path every request takes, blocking or async.
//!
//! A [`Request`] says what to send and what its outcome is made of; the
//! client turns it into an [`Operation`] that is started at once and then
//! polled (the async API) or waited for (a blocking call is start + wait)
//! until it settles. Whatever a request may need between the two happens
//! here, once each, before its outcome is handed over:
//!
//! - A server that forgot the session (HTTP 404) gets one new session and
//!   the request once more; a listing then starts again from its first
//!   page, since a cursor belongs to the session that gave it.
//! - A refusal for want of credentials (401, 403) goes to the holder's
//!   login, and the request is sent again with what it got.
//! - A list is followed page by page while the server hands out new
//!   cursors.
//! - A tool call's result is checked against the tool's output schema.
//! - A tool call on a list the server said changed waits for the list to
//!   be listed again (its schemas may have changed with it).
//!
//! Before this path existed, the async API had rebuilt part of it, and the
//! two drifted: a call with its own timeout failed on an expired session
//! that a plain call survived.

use std::rc::Rc;
use std::time::{Duration, Instant};

use super::cache::{self, CacheMode, Hints};
use super::queue::{Next, QUEUED};
use super::{Client, Host, Listing, Ticket, MAX_AUTHORIZATIONS, MAX_PAGES, NEXT_CURSOR};
use crate::codec::Json;
use crate::error::Error;
use crate::interrupt::far_future;
use crate::protocol::{self, id_key, result_of, IdKey, ResultKind, MODERN_VERSIONS};
use crate::server_text;
use crate::session::{Limit, Session};
use crate::tool_headers;

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

/// What a request's outcome is made of.
#[derive(Clone, Debug, PartialEq)]
pub enum Shape {
    /// The result, as it came.
    Whole,
    /// One field of the result (`resources/read` gives its `contents`).
    Field(&'static str),
    /// Every page of a list, in order, each as it came.
    Pages,
    /// Every page of `tools/list`: the client learns the tools' schemas,
    /// and the listing waits for the holder ([`Client::take_listing`]).
    /// `refresh` when the client lists them again by itself.
    Tools { refresh: bool },
    /// A tool call: its result must keep the tool's output schema. The
    /// tool is named by the end of the request's name ("tools/call
    /// NAME"), or by these bytes when its name is not UTF-8 (the name in
    /// errors then shows them replaced).
    ToolCall(Option<Vec<u8>>),
    /// A message the caller built with its own id: the whole reply, an
    /// error reply included.
    Reply,
}

/// How a tool call's name begins.
pub const TOOL_CALL: &str = "tools/call ";

/// One request, described once.
pub struct Request {
    /// Built once: a new try only changes the id, so the parameters (a
    /// tool's arguments, perhaps megabytes) are never copied.
    message: Json,
    what: Rc<str>,
    limits: Limits,
    shape: Shape,
    detached: bool,
    /// Made by the async API: it never waits for a session or a login
    /// (it is queued behind them, see `queue`).
    asynchronous: bool,
    /// An `input_required` result is the outcome, for a caller that asks
    /// its user itself (across turns) and continues with the answers.
    returns_input: bool,
    /// What it does with what a modern server allows to be kept.
    cache: CacheMode,
    /// `opts.idempotent`: the caller says whether sending it twice is
    /// safe; None leaves it to the method and the tool's annotations.
    idempotent: Option<bool>,
}

/// How often a modern request whose reply stream broke is sent again.
const MAX_REISSUES: usize = 2;

/// The methods that change nothing at the server: one whose reply was
/// lost is sent again without asking anyone.
const CHANGE_NOTHING: &[&[u8]] = &[
    b"server/discover",
    b"ping",
    b"tools/list",
    b"prompts/list",
    b"prompts/get",
    b"resources/list",
    b"resources/templates/list",
    b"resources/read",
    b"completion/complete",
];

/// Rounds of input a request is given before it fails: a server that
/// never finishes is not followed for ever.
pub const MAX_INPUT_ROUNDS: usize = 10;

/// The pause before a round that carries only the server's state (no
/// input was asked for: a server shedding load, or polling for work it
/// started), so that such a server is not asked again at once.
const STATE_ONLY_PAUSE: Duration = Duration::from_millis(250);

impl Request {
    /// `method` with `params`; `what` names it in errors
    /// ("tools/call echo").
    pub fn new(method: &str, params: Json, what: Rc<str>) -> Request {
        Request {
            message: protocol::request(Json::Null, method, params),
            what,
            limits: Limits::default(),
            shape: Shape::Whole,
            detached: false,
            asynchronous: false,
            returns_input: false,
            cache: CacheMode::Use,
            idempotent: None,
        }
    }

    /// A request the caller built, with its own id (the reference's
    /// `exchange`): its whole reply is the outcome.
    pub fn message(message: Json, what: Rc<str>) -> Request {
        Request {
            message,
            what,
            limits: Limits::default(),
            shape: Shape::Reply,
            detached: false,
            asynchronous: false,
            returns_input: false,
            cache: CacheMode::Use,
            idempotent: None,
        }
    }

    pub fn shape(mut self, shape: Shape) -> Request {
        self.shape = shape;
        self
    }

    pub fn limits(mut self, limits: Limits) -> Request {
        self.limits = limits;
        self
    }

    /// Nobody waits on the transport for it (the async API): over HTTP,
    /// its POST goes out from a thread of the transport's own.
    pub fn detached(mut self) -> Request {
        self.detached = true;
        self
    }

    /// Made by the async API: detached, and queued rather than waiting
    /// while its session starts or a login runs. (A blocking call with
    /// limits of its own is detached only.)
    pub fn asynchronous(mut self) -> Request {
        self.detached = true;
        self.asynchronous = true;
        self
    }

    /// How it uses the cache (`opts.cache`: "refresh" or "bypass").
    pub fn cached(mut self, mode: CacheMode) -> Request {
        self.cache = mode;
        self
    }

    /// Whether it may be sent twice (`opts.idempotent`), when the caller
    /// knows.
    pub fn idempotent(mut self, said: Option<bool>) -> Request {
        self.idempotent = said;
        self
    }

    /// Its key in the cache, when its outcome may be kept.
    fn cache_key(&self) -> Option<Vec<u8>> {
        let shape = match &self.shape {
            Shape::Whole => "whole",
            Shape::Field(field) => field,
            Shape::Pages => "pages",
            // Its pages lose the tools a modern HTTP client must leave out.
            Shape::Tools { .. } => "tools",
            Shape::ToolCall(_) | Shape::Reply => return None,
        };
        let method = self.method();
        let params = self.message.get("params");
        // A round of input answers that exchange alone: never kept.
        let continued = params.is_some_and(|p| p.get("inputResponses").is_some() || p.get("requestState").is_some());
        (cache::cacheable(method) && self.cache != CacheMode::Bypass && !continued)
            .then(|| cache::key(method, shape, params))
    }

    /// An `input_required` result is handed over as the outcome rather
    /// than answered through the holder's handlers.
    pub fn returning_input(mut self) -> Request {
        self.returns_input = true;
        self
    }

    /// A request that goes on from an `input_required` result its caller
    /// took (see [`Request::returning_input`]): the answers the caller got
    /// and the server's state, as the next round carries them.
    pub fn continuing(mut self, answers: Option<Json>, state: Option<Json>) -> Request {
        if answers.is_some() || state.is_some() {
            set_input(&mut self.message, answers, state);
        }
        self
    }

    /// Whether a modern server may answer it with `input_required`.
    fn may_need_input(&self) -> bool {
        matches!(self.method(), b"tools/call" | b"prompts/get" | b"resources/read")
    }

    fn method(&self) -> &[u8] {
        match self.message.get("method") {
            Some(Json::Str(method)) => method,
            _ => b"",
        }
    }

    /// The tool a tool call calls.
    fn tool(&self) -> &[u8] {
        match &self.shape {
            Shape::ToolCall(Some(bytes)) => bytes,
            _ => self.what.strip_prefix(TOOL_CALL).unwrap_or(&self.what).as_bytes(),
        }
    }

    fn is_list(&self) -> bool {
        matches!(self.shape, Shape::Pages | Shape::Tools { .. })
    }
}

/// A request on its way: what a handle (or a blocking call) holds until
/// it settles.
pub struct Operation {
    request: Request,
    /// The try in flight.
    ticket: Option<Ticket>,
    /// The session the last try went to.
    session: u64,
    /// The id the first try goes out with, taken when the operation
    /// began (its progress token, when it asks for progress).
    first_id: Option<Json>,
    progress_token: Option<Json>,
    /// Waiting for a stale tool list to be listed again: the count of
    /// refreshes finished when it began.
    after_refresh: Option<u64>,
    /// Sent again once on a new session already.
    restarted: bool,
    /// The caller cancelled it after its reply had come: what came is
    /// its outcome, with no further try or page.
    stopped: bool,
    authorizations: usize,
    /// The client's credentials count when the last try went out.
    credentials: u64,
    /// A list's first params, its pages so far and the cursor that asked
    /// for the last one.
    first_params: Option<Json>,
    pages: Vec<Json>,
    cursor: Option<Json>,
    /// Where its outcome is kept, when it may be: and what its results
    /// allowed (all of them must, for a list).
    cache_key: Option<Vec<u8>>,
    hints: Option<Hints>,
    unhinted: bool,
    /// The credentials when it began: a result fetched under others is
    /// not kept.
    cached_under: u64,
    /// Rounds of input answered so far.
    input_rounds: usize,
    /// Sent again once after the tools were listed anew (-32020).
    relisted: bool,
    /// Sent again once on a new session after -32022.
    version_retried: bool,
    /// Sent again after its reply stream broke (see `Error::StreamEnded`).
    reissued: usize,
    /// A round that carries only the server's state goes out then.
    resend_at: Option<Instant>,
    /// A stand-in for the request queued under this number until its
    /// session is ready (see `queue`).
    queued: Option<u64>,
    /// Where it stands in the order requests settled, when it settled in
    /// the queue, with no session to count it.
    settled_in_queue: Option<u64>,
    outcome: Option<Result<Json, Error>>,
}

impl Operation {
    fn new(request: Request) -> Operation {
        Operation {
            request,
            ticket: None,
            session: 0,
            first_id: None,
            progress_token: None,
            after_refresh: None,
            restarted: false,
            stopped: false,
            authorizations: 0,
            credentials: 0,
            first_params: None,
            pages: Vec::new(),
            cursor: None,
            cache_key: None,
            hints: None,
            unhinted: false,
            cached_under: 0,
            input_rounds: 0,
            relisted: false,
            version_retried: false,
            reissued: 0,
            resend_at: None,
            queued: None,
            settled_in_queue: None,
            outcome: None,
        }
    }

    /// What a handle holds while `op` waits in the queue under `number`:
    /// its name, its progress token, and a ticket that says where it is.
    pub(super) fn queued_as(number: u64, op: &Operation) -> Operation {
        let what = op.request.what.clone();
        let mut stand_in = Operation::new(Request::message(Json::Null, what.clone()));
        stand_in.progress_token = op.progress_token.clone();
        stand_in.queued = Some(number);
        let key = IdKey::Int(number as i64);
        stand_in.ticket = Some(Ticket { session: QUEUED, key, id: Json::Null, what });
        stand_in
    }

    pub(super) fn take_ticket(&mut self) -> Option<Ticket> {
        self.ticket.take()
    }

    /// Names the request in errors.
    pub fn what(&self) -> &str {
        &self.request.what
    }

    /// The token its progress notifications carry, when it asked for
    /// them: the same for every try.
    pub fn progress_token(&self) -> Option<&Json> {
        self.progress_token.as_ref()
    }

    /// The try in flight, if any: what to forget if nobody will take it.
    pub fn ticket(&self) -> Option<&Ticket> {
        self.ticket.as_ref()
    }

    /// The outcome, once settled; taken once.
    pub fn take_outcome(&mut self) -> Option<Result<Json, Error>> {
        self.outcome.take()
    }

    /// Settles it with `error` unless it has settled already.
    pub fn fail(&mut self, error: Error) {
        if self.outcome.is_none() {
            self.outcome = Some(Err(error));
        }
    }

    /// Settles it with `error` in the queue, taking its place in the
    /// order requests settle (see [`Client::settled_as`]).
    pub(super) fn fail_in_queue(&mut self, error: Error) {
        if self.outcome.is_none() {
            self.outcome = Some(Err(error));
            self.settled_in_queue = Some(crate::session::next_settled());
        }
    }

    /// The message for the page after `cursor`, or the first page again.
    fn ask_for_page(&mut self, cursor: Option<Json>) {
        let params = match &cursor {
            Some(cursor) => {
                let mut params = vec![(b"cursor".to_vec(), cursor.clone())];
                if let Some(meta) = self.first_params.as_ref().and_then(|p| p.get("_meta")) {
                    params.push((b"_meta".to_vec(), meta.clone()));
                }
                Json::Object(params)
            }
            None => self.first_params.clone().unwrap_or(Json::Object(vec![])),
        };
        let method = String::from_utf8_lossy(self.request.method()).into_owned();
        self.request.message = protocol::request(Json::Null, &method, params);
        self.cursor = cursor;
    }
}

/// Messages routed before a request goes out, at most (see
/// [`Client::route_queued`]).
const ROUTE_BEFORE_REQUEST: usize = 256;

impl Client {
    /// Starts `request`: the session is started first if there is none
    /// (a blocking request waits for that handshake; an async one is
    /// queued behind it, see `queue`), what the server already sent is
    /// routed, and the request goes out, unless it is a tool call that
    /// must wait for a stale tool list to be listed again. A try that
    /// fails at once settles the operation (see [`Client::poll`]).
    pub fn start<H: Host>(&mut self, host: &mut H, request: Request) -> Result<Operation, H::Error> {
        let mut op = Operation::new(request);
        if op.request.asynchronous && (!self.live() || self.logging_in()) {
            // Its progress token is watched from now on: its id is taken
            // now, the others' when they go out.
            if op.request.limits.progress && op.request.shape != Shape::Reply {
                self.take_first_id(host, &mut op)?;
            }
            self.enqueue(&mut op, Next::Start);
            self.connect_detached(host);
            return Ok(op);
        }
        self.ready(host)?;
        self.launch(host, &mut op)?;
        Ok(op)
    }

    /// Everything a request's first try needs once its session is ready.
    pub(super) fn launch<H: Host>(&mut self, host: &mut H, op: &mut Operation) -> Result<(), H::Error> {
        self.route_queued(host, &op.request.what)?;
        // Not for a tool listing, which changes what is listened for: the
        // listen waits for it.
        if op.request.method() != b"subscriptions/listen" && !matches!(op.request.shape, Shape::Tools { .. }) {
            self.keep_listening(host, !op.request.detached)?;
        }
        if self.envelope.is_some() && self.stand_in_for_removed(host, op)? {
            return Ok(());
        }
        if op.request.shape != Shape::Reply {
            self.check_capability(op.request.method())?;
            if self.answer_from_cache(op) {
                return Ok(());
            }
            if op.first_id.is_none() {
                self.take_first_id(host, op)?;
            }
        }
        // Taken once the progress token is in: a later page (or page one
        // sent again) asks for progress as the first did.
        if op.request.is_list() {
            op.first_params = op.request.message.get("params").cloned();
        }
        if matches!(op.request.shape, Shape::ToolCall(_)) && self.tools.stale && self.tools.listed {
            self.begin_refresh(host)?;
            op.after_refresh = Some(self.tools.refreshes);
            return Ok(());
        }
        self.send(host, op)
    }

    /// The id of `op`'s first try, and its progress token when it asks
    /// for progress.
    fn take_first_id<H: Host>(&mut self, host: &mut H, op: &mut Operation) -> Result<(), H::Error> {
        let id = host.next_id()?;
        if op.request.limits.progress {
            if let Json::Request(message) = &mut op.request.message {
                protocol::set_progress_token(&mut message.params, id.clone());
            }
            op.progress_token = Some(id.clone());
        }
        op.first_id = Some(id);
        Ok(())
    }

    /// Moves `op` on as far as what has arrived allows (a reply taken, a
    /// next page or a new try sent) without waiting for anything; true
    /// once it has settled.
    pub fn poll<H: Host>(&mut self, host: &mut H, op: &mut Operation) -> Result<bool, H::Error> {
        loop {
            if op.outcome.is_some() {
                return Ok(true);
            }
            if let Some(number) = op.queued {
                self.poll_login(host);
                self.resume_queue(host);
                self.advance_connection(host);
                match self.take_sent(number) {
                    Some(sent) => *op = sent,
                    None => return Ok(false),
                }
                continue;
            }
            if let Some(since) = op.after_refresh {
                self.poll_refresh(host)?;
                if self.tools.refreshes == since {
                    return Ok(false);
                }
                op.after_refresh = None;
                match &self.tools.last_refresh {
                    Some(Err(Error::Closed { .. })) => op.fail(Error::Closed { what: op.what().to_string() }),
                    Some(Err(e)) => op.fail(e.clone()),
                    _ => self.send(host, op)?,
                }
                continue;
            }
            if let Some(at) = op.resend_at {
                if Instant::now() < at {
                    return Ok(false);
                }
                op.resend_at = None;
                self.send(host, op)?;
                continue;
            }
            let Some(ticket) = op.ticket.as_ref() else {
                op.outcome = Some(Err(Error::NoResponse { what: op.what().to_string() }));
                return Ok(true);
            };
            if !self.ticket_settled(ticket) {
                return Ok(false);
            }
            let Some(ticket) = op.ticket.take() else { continue };
            let reply = self.take_reply(&ticket);
            self.settle(host, op, reply)?;
        }
    }

    /// Where `op`'s last try stands in the order requests settled, once
    /// its reply (or failure) has come and before it is taken: callbacks
    /// run in that order. None for one that settled without a reply
    /// waited for.
    pub fn settled_as(&self, op: &Operation) -> Option<u64> {
        // A stand-in: the request it stands for, once that went out.
        if let Some(number) = op.queued {
            return self.peek_sent(number).and_then(|sent| self.settled_as(sent));
        }
        if op.settled_in_queue.is_some() {
            return op.settled_in_queue;
        }
        let ticket = op.ticket.as_ref()?;
        match &self.session {
            Some(session) if ticket.session == self.session_number => session.settled_as(&ticket.key),
            _ => None,
        }
    }

    /// Waits for `op` until `until` at most; true once it has settled.
    /// Ctrl-C cancels it (the server is told), and it settles with
    /// [`Error::Interrupted`].
    pub fn wait<H: Host>(&mut self, host: &mut H, op: &mut Operation, until: Instant) -> Result<bool, H::Error> {
        loop {
            if self.poll(host, op)? {
                return Ok(true);
            }
            let now = Instant::now();
            if now >= until {
                return Ok(false);
            }
            // To the slice's end, or the request's own deadline if that
            // comes first: its timeout is then noticed on time.
            let mut slice_end = until.min(now + crate::interrupt::SLICE);
            if let Some(deadline) = op.ticket.as_ref().and_then(|t| self.deadline_of(t)).or(op.resend_at) {
                slice_end = slice_end.min(deadline);
            }
            match self.pump_session(host, slice_end) {
                Ok(_) => {}
                Err(Error::Interrupted { .. }) => {
                    self.give_up(op, "interrupted by the user");
                    op.outcome = Some(Err(Error::Interrupted { what: op.what().to_string() }));
                    return Ok(true);
                }
                Err(e) => {
                    self.give_up(op, "the client stopped waiting for it");
                    op.outcome = Some(Err(e));
                    return Ok(true);
                }
            }
        }
    }

    /// Stops waiting for `op`: the server is told if the request is still
    /// running, and whatever the client kept for it goes.
    fn give_up(&mut self, op: &mut Operation, reason: &str) {
        self.cancel(op, reason);
        if let Some(ticket) = op.ticket.take() {
            self.forget(&ticket);
        }
    }

    /// A blocking request: started, then waited for as long as its own
    /// limit allows.
    pub fn run<H: Host>(&mut self, host: &mut H, request: Request) -> Result<Json, H::Error> {
        let mut op = self.start(host, request)?;
        self.finish(host, &mut op)
    }

    /// Waits for `op` to settle, however long its own limit allows, and
    /// hands over its outcome.
    pub fn finish<H: Host>(&mut self, host: &mut H, op: &mut Operation) -> Result<Json, H::Error> {
        if let Err(e) = self.wait(host, op, far_future()) {
            // Nobody waits for it any more: its entry must not stay behind.
            if let Some(ticket) = op.ticket.take() {
                self.forget(&ticket);
            }
            return Err(e);
        }
        let outcome = op.take_outcome();
        Ok(outcome.unwrap_or_else(|| Err(Error::NoResponse { what: op.what().to_string() }))?)
    }

    /// Stops `op` at the caller's word: the server gets
    /// `notifications/cancelled` with `reason`, and `op` settles with
    /// [`Error::Cancelled`]. False if it had settled (or its reply had
    /// come) already.
    pub fn cancel(&mut self, op: &mut Operation, reason: &str) -> bool {
        if op.outcome.is_some() {
            return false;
        }
        if let Some(number) = op.queued {
            match self.take_sent(number) {
                Some(sent) => *op = sent,
                None if self.unqueue(number) => {
                    op.ticket = None;
                    op.outcome = Some(Err(Error::Cancelled { what: op.what().to_string() }));
                    return true;
                }
                None => return false,
            }
            return self.cancel(op, reason);
        }
        let cancelled = Error::Cancelled { what: op.what().to_string() };
        match op.ticket.take() {
            Some(ticket) => {
                if !self.cancel_ticket(&ticket, reason, cancelled.clone()) {
                    op.ticket = Some(ticket);
                    op.stopped = true;
                    return false;
                }
                let _ = self.take_reply(&ticket);
            }
            None if op.after_refresh.take().is_some() || op.resend_at.take().is_some() => {}
            None => return false,
        }
        op.outcome = Some(Err(cancelled));
        true
    }

    /// Lists a stale tool list again, without waiting: started if it is
    /// stale and none runs, moved on if one runs (an event loop's
    /// registry then follows the server without waiting for a call).
    pub fn refresh_tools<H: Host>(&mut self, host: &mut H) -> Result<(), H::Error> {
        if self.tools.stale && self.tools.listed && self.tools.refreshing.is_none() {
            self.begin_refresh(host)?;
        }
        self.poll_refresh(host)?;
        // A modern server's changes come on a listen: kept open here too,
        // without waiting for its acknowledgement (an event loop's turn).
        if self.session.is_some() {
            self.keep_listening(host, false)?;
        }
        Ok(())
    }

    /// What the server sent after the last reply (a `list_changed` right
    /// behind it, typically) is routed before the next request goes out,
    /// so that the request sees it. Bounded: a server flooding
    /// notifications must not keep the request from going out.
    /// A Ctrl-C meanwhile names the request that was about to go out.
    fn route_queued<H: Host>(&mut self, host: &mut H, what: &str) -> Result<(), H::Error> {
        for _ in 0..ROUTE_BEFORE_REQUEST {
            if !self.queued() {
                break;
            }
            match self.pump_session(host, Instant::now()) {
                Ok(true) => {}
                Ok(false) => break,
                Err(Error::Interrupted { .. }) => return Err(Error::Interrupted { what: what.to_string() }.into()),
                Err(e) => return Err(e.into()),
            }
        }
        Ok(())
    }

    /// Sends `op`'s next try, and more while a try fails in a way that is
    /// worth another (see [`Client::worth_again`]); settles it otherwise.
    pub(super) fn send<H: Host>(&mut self, host: &mut H, op: &mut Operation) -> Result<(), H::Error> {
        loop {
            let Err(mut failure) = self.send_once(host, op)? else { return Ok(()) };
            if !self.worth_again(host, op, &mut failure)? {
                op.outcome = Some(Err(failure));
                return Ok(());
            }
        }
    }

    /// One try: on the current session, or a new one if there is none or
    /// it broke. Err when the send itself failed.
    fn send_once<H: Host>(&mut self, host: &mut H, op: &mut Operation) -> Result<Result<(), Error>, H::Error> {
        if op.request.asynchronous && (!self.live() || self.logging_in()) {
            // An async request waits in the queue for the new session, or
            // for the credentials of the login under way.
            self.enqueue(op, Next::Send);
            self.connect_detached(host);
            return Ok(Ok(()));
        }
        self.ready(host)?;
        let id = match (op.first_id.take(), &op.request.shape) {
            (_, Shape::Reply) => op.request.message.get("id").cloned().unwrap_or(Json::Null),
            (Some(id), _) => id,
            (None, _) => host.next_id()?,
        };
        let Some(key) = id_key(&id) else {
            return Ok(Err(Error::BadInput(format!(
                "MCP: a request id must be a number or a string, got {}",
                protocol::lua_text(Some(&id))
            ))));
        };
        if op.request.shape != Shape::Reply {
            set_id(&mut op.request.message, id.clone());
        }
        if let Some(envelope) = &self.envelope {
            envelope.stamp(&mut op.request.message);
        }
        let headers = self.param_headers(&op.request.message);
        let limits = op.request.limits;
        let mut limit = Limit::new(limits.timeout.unwrap_or(self.timeout), limits.max_total, op.request.what.clone());
        limit.progress = limits.progress;
        limit.detached = op.request.detached;
        limit.progress_token = op.progress_token.as_ref().filter(|token| **token != id).and_then(id_key);
        limit.headers = headers;
        op.credentials = self.credentials;
        op.session = self.session_number;
        // Requests queued behind the handshake went out first, and the
        // session may have ended under them (a server that exits at once).
        let Some(session) = self.session.as_mut() else {
            return Ok(Err(Error::NoResponse { what: op.request.what.to_string() }));
        };
        if let Err(e) = session.start(&id, &op.request.message, limit) {
            return Ok(Err(e));
        }
        let what = op.request.what.clone();
        op.ticket = Some(Ticket { session: self.session_number, key, id, what });
        Ok(Ok(()))
    }

    /// A try's reply (or why none came), made into `op`'s outcome: or the
    /// next page, or another try.
    fn settle<H: Host>(
        &mut self,
        host: &mut H,
        op: &mut Operation,
        reply: Result<Json, Error>,
    ) -> Result<(), H::Error> {
        let result = match reply {
            Ok(reply) if op.request.shape == Shape::Reply => Ok(reply),
            Ok(reply) => result_of(Some(reply), op.what()).map_err(server_text::bounded),
            Err(e) => Err(e),
        };
        let result = match result.and_then(|result| self.result_kind(op, result)) {
            Ok((ResultKind::InputRequired, result)) if op.request.returns_input => {
                op.outcome = Some(Ok(result));
                return Ok(());
            }
            Ok((ResultKind::InputRequired, result)) => return self.answer_input(host, op, &result),
            Ok((ResultKind::Complete, result)) => {
                self.note_hints(op, &result);
                Ok(result)
            }
            Err(e) => Err(e),
        };
        let result = match result {
            Ok(result) => result,
            Err(mut failure) => {
                if self.relist_for_headers(host, op, &failure)? {
                    return Ok(());
                }
                if self.worth_again(host, op, &mut failure)? {
                    return self.send(host, op);
                }
                op.outcome = Some(Err(failure));
                return Ok(());
            }
        };
        op.outcome = Some(match &op.request.shape {
            Shape::Whole | Shape::Reply => Ok(result),
            Shape::Field(field) => {
                let mut result = result;
                Ok(result.take(field).unwrap_or(Json::Null))
            }
            Shape::ToolCall(_) => self.tools.schemas.check(op.request.tool(), &result, op.what()).map(|()| result),
            Shape::Pages | Shape::Tools { .. } => {
                let next =
                    result.selected(NEXT_CURSOR).get("nextCursor").filter(|c| matches!(c, Json::Str(_))).cloned();
                op.pages.push(result);
                // A repeated cursor or too many pages end the listing.
                if next.is_some() && next != op.cursor && op.pages.len() < MAX_PAGES && !op.stopped {
                    op.ask_for_page(next);
                    return self.send(host, op);
                }
                let mut pages = std::mem::take(&mut op.pages);
                if op.request.method() == b"tools/list" {
                    self.leave_out_invalid_headers(host, &mut pages);
                }
                if let Shape::Tools { refresh } = op.request.shape {
                    self.listed(&pages, refresh);
                }
                Ok(Json::Array(pages))
            }
        });
        self.keep_outcome(op);
        Ok(())
    }

    /// A request a fresh cache entry answers settles at once, with no id
    /// taken and nothing sent; a tool list so answered is learnt as a
    /// listed one is. True when it did.
    fn answer_from_cache(&mut self, op: &mut Operation) -> bool {
        if self.envelope.is_none() || !self.cache.on {
            return false;
        }
        op.cache_key = op.request.cache_key();
        let refresh = op.request.cache == CacheMode::Refresh || op.request.shape == (Shape::Tools { refresh: true });
        let Some(key) = op.cache_key.as_ref().filter(|_| !refresh) else { return false };
        op.cached_under = self.credentials;
        let Some(outcome) = self.cache.get(key, self.credentials) else { return false };
        if let (Shape::Tools { .. }, Json::Array(pages)) = (&op.request.shape, &outcome) {
            self.listed(pages, false);
        }
        op.outcome = Some(Ok(outcome));
        true
    }

    /// What a result allows, joined with what the request's other results
    /// (a list's pages) allowed.
    fn note_hints(&self, op: &mut Operation, result: &Json) {
        if op.cache_key.is_none() {
            return;
        }
        match (cache::hints_of(result), op.hints) {
            (None, _) => op.unhinted = true,
            (Some(hints), None) => op.hints = Some(hints),
            (Some(hints), Some(before)) => op.hints = Some(before.join(hints)),
        }
    }

    /// Keeps `op`'s outcome when every result allowed it. Never one that
    /// took rounds of input: its result answered that exchange alone.
    fn keep_outcome(&mut self, op: &Operation) {
        let (Some(key), Some(hints), Some(Ok(outcome))) = (&op.cache_key, op.hints, &op.outcome) else { return };
        // Kept for the credentials it was fetched with, and not at all if
        // they changed on the way (a login between two pages).
        if op.unhinted || op.input_rounds > 0 || !self.cache.on || op.credentials != op.cached_under {
            return;
        }
        let uri = match op.request.message.get("params").and_then(|p| p.get("uri")) {
            Some(Json::Str(uri)) if op.request.method() == b"resources/read" => Some(uri.clone()),
            _ => None,
        };
        let method = op.request.method().to_vec();
        self.cache.put(key.clone(), &method, uri, outcome.clone(), hints, op.credentials);
    }

    /// Whether a try that failed with `failure` is worth another, which
    /// is then prepared: a forgotten session is replaced once (a listing
    /// starting over), and a refusal is answered with new credentials, up
    /// to [`MAX_AUTHORIZATIONS`] times.
    fn worth_again<H: Host>(
        &mut self,
        host: &mut H,
        op: &mut Operation,
        failure: &mut Error,
    ) -> Result<bool, H::Error> {
        // Cancelled by the caller, or its session closed: nothing is
        // started again for it (a closed client must not log in or start
        // a server for a request it gave up).
        if op.stopped || op.session <= self.closed_session {
            return Ok(false);
        }
        match failure {
            Error::SessionExpired if !op.restarted => {
                op.restarted = true;
                if op.session == self.session_number {
                    // Every request on it would meet the same 404: each
                    // gets the same one more try on the new session.
                    self.retire(|_| Error::SessionExpired);
                }
                if op.request.is_list() {
                    op.pages.clear();
                    op.ask_for_page(None);
                }
                Ok(true)
            }
            // A modern reply stream that broke lost the reply, not
            // necessarily the request: the server may have run it (it
            // stops work on a closed stream only "as soon as practical").
            // The revision has it re-issued as a new request (a new id);
            // that is done, twice at most, only where a second run
            // changes nothing. A tool with effects ran three times for
            // one call before this rule.
            Error::StreamEnded if op.request.shape != Shape::Reply && op.reissued < MAX_REISSUES => {
                if !self.may_repeat(op) {
                    *failure = Error::OutcomeUnknown { what: op.what().to_string() };
                    return Ok(false);
                }
                op.reissued += 1;
                Ok(true)
            }
            // The server no longer takes the version the session speaks
            // (-32022: it was upgraded, or restarted as another release):
            // a new session finds the version again, once.
            Error::Rpc { code, data, .. } if code == "-32022" && !op.version_retried => {
                op.version_retried = true;
                Ok(self.take_version_from(op, data.as_deref()))
            }
            Error::Unauthorized { .. } if op.authorizations < MAX_AUTHORIZATIONS => {
                let again = op.authorizations > 0;
                op.authorizations += 1;
                // An async request waits in the queue for a login that
                // runs beside the holder (see `login`).
                if op.request.asynchronous {
                    return match op.credentials == self.credentials {
                        true => self.begin_login(host, failure, again),
                        false => Ok(true),
                    };
                }
                self.await_login(host)?;
                // Refused under credentials that were replaced since: the
                // new ones are tried without a login of its own.
                if op.credentials == self.credentials {
                    if !host.authorize(failure, again)? {
                        return Ok(false);
                    }
                    self.credentials += 1;
                }
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    /// Whether `op` may be sent a second time after its reply was lost:
    /// as its caller said (`opts.idempotent`), else when its method
    /// changes nothing, or, for a tool call, when the tool is annotated
    /// read-only or idempotent.
    fn may_repeat(&self, op: &Operation) -> bool {
        if let Some(said) = op.request.idempotent {
            return said;
        }
        match op.request.method() {
            b"tools/call" => self.tools.schemas.says_repeatable(op.request.tool()),
            method => CHANGE_NOTHING.contains(&method),
        }
    }

    /// A request refused with -32022 (unsupported version) after the
    /// session started: the server was upgraded or restarted as another
    /// release. A modern session takes a version both speak from the
    /// error's `supported` list and the request goes once more, alone; an
    /// older session, whose version `initialize` fixed, is ended so that a
    /// new one finds the version again, when the list names another one
    /// this client speaks. True when the request is worth sending again.
    fn take_version_from(&mut self, op: &Operation, data: Option<&Json>) -> bool {
        let supported: Vec<&[u8]> = data
            .and_then(|d| d.get("supported"))
            .map(|s| {
                s.elements()
                    .filter_map(|v| match v {
                        Json::Str(v) => Some(v.as_slice()),
                        _ => None,
                    })
                    .collect()
            })
            .unwrap_or_default();
        if let Some(envelope) = self.envelope.as_mut() {
            let Some(version) = MODERN_VERSIONS.iter().find(|v| supported.contains(&v.as_bytes())) else {
                return false;
            };
            envelope.version = version.to_string();
            if let Some(session) = self.session.as_mut() {
                session.speak_modern(envelope.clone());
            }
            return true;
        }
        let negotiated = self.initialized.as_ref().and_then(|r| r.get("protocolVersion"));
        let other = supported.iter().any(|v| protocol::is_legacy_version(v) && negotiated != Some(&Json::str(v)));
        if other && op.session == self.session_number {
            self.retire(|_| Error::SessionExpired);
        }
        other
    }

    /// The 2026-07-28 revision removed `ping`, `logging/setLevel` and
    /// `resources/subscribe`. On a modern server `ping` asks
    /// `server/discover` instead, which every modern server answers (a
    /// liveness check all the same); a log level goes in the envelope of
    /// every later request, which is where a modern server reads it; and
    /// a subscription joins the client's listen (see `listen`). True when
    /// `op` settled here.
    fn stand_in_for_removed<H: Host>(&mut self, host: &mut H, op: &mut Operation) -> Result<bool, H::Error> {
        let method = op.request.method().to_vec();
        if let b"resources/subscribe" | b"resources/unsubscribe" = method.as_slice() {
            self.check_capability(&method)?;
            let uri = match op.request.message.get("params").and_then(|p| p.get("uri")) {
                Some(Json::Str(uri)) => uri.clone(),
                _ => Vec::new(),
            };
            if method == b"resources/subscribe" {
                self.subscribe_uri(uri);
            } else {
                self.unsubscribe_uri(&uri);
            }
            self.keep_listening(host, !op.request.detached)?;
            op.outcome = Some(Ok(Json::Object(vec![])));
            return Ok(true);
        }
        Ok(match op.request.method() {
            b"ping" => {
                let id = op.request.message.get("id").cloned().unwrap_or(Json::Null);
                op.request.message = protocol::request(id, "server/discover", Json::Object(vec![]));
                // A liveness check goes to the server, whatever it allows kept.
                op.request.cache = CacheMode::Bypass;
                false
            }
            b"logging/setLevel" => {
                let level = op.request.message.get("params").and_then(|p| p.get("level")).cloned();
                self.set_log_level(level);
                op.outcome = Some(Ok(Json::Object(vec![])));
                true
            }
            _ => false,
        })
    }

    /// What kind of result a modern server sent (an older one's are all
    /// complete). Input may be asked for only on the requests the
    /// revision names.
    fn result_kind(&self, op: &Operation, result: Json) -> Result<(ResultKind, Json), Error> {
        if self.envelope.is_none() || op.request.shape == Shape::Reply {
            return Ok((ResultKind::Complete, result));
        }
        match protocol::result_kind(&result, op.what())? {
            ResultKind::InputRequired if !op.request.may_need_input() => {
                Err(Error::UnknownResultType { what: op.what().to_string(), result_type: "input_required".into() })
            }
            kind => Ok((kind, result)),
        }
    }

    /// A modern server needs input before it can finish (an
    /// `input_required` result). Each input it asks for is answered by the
    /// holder's handlers, as an older server's own requests are, and the
    /// request goes again on a new id with those answers and the server's
    /// state as they came. A round with no input asked for goes after
    /// [`STATE_ONLY_PAUSE`].
    fn answer_input<H: Host>(&mut self, host: &mut H, op: &mut Operation, result: &Json) -> Result<(), H::Error> {
        op.input_rounds += 1;
        if op.input_rounds > MAX_INPUT_ROUNDS {
            op.outcome = Some(Err(Error::InputRounds { what: op.what().to_string(), rounds: MAX_INPUT_ROUNDS }));
            return Ok(());
        }
        let asked = result.get("inputRequests");
        let answers = match asked {
            Some(asked) => match gather_input(host, asked, op.what()) {
                Ok(answers) => Some(answers),
                Err(e) => {
                    op.outcome = Some(Err(e));
                    return Ok(());
                }
            },
            None => None,
        };
        set_input(&mut op.request.message, answers, result.get("requestState").cloned());
        if asked.is_none() {
            let at = Instant::now() + STATE_ONLY_PAUSE;
            op.resend_at = Some(at);
            self.paused_until.push(at);
            return Ok(());
        }
        self.send(host, op)
    }

    /// The `Mcp-Param-*` headers of a modern tool call, from the marks in
    /// the tool's listed `inputSchema` (a tool not listed yet has none: a
    /// server that needs them answers -32020, and the tools are listed).
    fn param_headers(&self, message: &Json) -> Vec<(String, String)> {
        if self.envelope.is_none() || message.get("method") != Some(&Json::str("tools/call")) {
            return Vec::new();
        }
        let Some(params) = message.get("params") else { return Vec::new() };
        let Some(Json::Str(tool)) = params.get("name") else { return Vec::new() };
        let Some(schema) = self.tools.schemas.input(tool) else { return Vec::new() };
        let Ok(declared) = tool_headers::declared(&schema) else { return Vec::new() };
        let arguments = params.get("arguments").cloned().unwrap_or(Json::Null);
        tool_headers::param_headers(&declared, &arguments)
    }

    /// A modern server refused a tool call's headers (-32020, header
    /// mismatch): the tool's schema may have changed, so the tools are
    /// listed again and the call sent once more with the headers the new
    /// list asks for. True when that is under way.
    fn relist_for_headers<H: Host>(
        &mut self,
        host: &mut H,
        op: &mut Operation,
        failure: &Error,
    ) -> Result<bool, H::Error> {
        let header_mismatch = matches!(failure, Error::Rpc { code, .. } if code == "-32020");
        if !header_mismatch || self.envelope.is_none() || !matches!(op.request.shape, Shape::ToolCall(_)) || op.relisted
        {
            return Ok(false);
        }
        op.relisted = true;
        self.tools.stale = true;
        self.begin_refresh(host)?;
        op.after_refresh = Some(self.tools.refreshes);
        Ok(true)
    }

    /// Over HTTP a modern client must leave out of a tool list every tool
    /// whose `x-mcp-header` marks break the revision's rules (a gateway
    /// would read its headers wrong), and say which and why.
    fn leave_out_invalid_headers<H: Host>(&self, host: &mut H, pages: &mut [Json]) {
        if self.envelope.is_none() || !self.session.as_ref().is_some_and(Session::carries_headers) {
            return;
        }
        for page in pages.iter_mut() {
            let Some(Json::Array(tools)) = page.get("tools") else { continue };
            let invalid: Vec<(usize, String)> = tools
                .iter()
                .enumerate()
                .filter_map(|(i, tool)| {
                    let schema = tool.get("inputSchema")?;
                    let why = tool_headers::declared(schema).err()?;
                    let name = protocol::lua_text(tool.get("name"));
                    Some((i, format!("excluding tool '{name}' from tools/list: invalid x-mcp-header ({why})")))
                })
                .collect();
            if invalid.is_empty() {
                continue;
            }
            page.materialize();
            if let Some(Json::Array(tools)) = page.get_mut("tools") {
                let mut at = 0;
                tools.retain(|_| {
                    at += 1;
                    !invalid.iter().any(|(i, _)| *i == at - 1)
                });
            }
            for (_, warning) in &invalid {
                host.warn(warning);
            }
        }
    }

    /// A listing of the tools finished.
    fn listed(&mut self, pages: &[Json], refreshed: bool) {
        self.learn_tools(pages);
        self.tools.listed = true;
        self.tools.stale = false;
        self.tools.fresh = Some(Listing { pages: pages.to_vec(), refreshed });
    }

    fn begin_refresh<H: Host>(&mut self, host: &mut H) -> Result<(), H::Error> {
        if self.tools.refreshing.is_some() {
            return Ok(());
        }
        let request = Request::new("tools/list", Json::Object(vec![]), Rc::from("tools/list"))
            .shape(Shape::Tools { refresh: true })
            .asynchronous();
        let op = self.start(host, request)?;
        self.tools.refreshing = Some(Box::new(op));
        Ok(())
    }

    /// Moves the running refresh on; when it settles, the calls waiting
    /// for it go on (or fail with its error). A refresh that failed
    /// leaves the list stale, to be tried again.
    fn poll_refresh<H: Host>(&mut self, host: &mut H) -> Result<(), H::Error> {
        let Some(mut op) = self.tools.refreshing.take() else { return Ok(()) };
        let polled = self.poll(host, &mut op);
        if let Ok(false) = polled {
            self.tools.refreshing = Some(op);
            return Ok(());
        }
        let outcome = op.take_outcome().unwrap_or_else(|| Err(Error::NoResponse { what: "tools/list".into() }));
        self.tools.last_refresh = Some(outcome.map(|_| ()));
        self.tools.refreshes += 1;
        polled.map(|_| ())
    }
}

/// Answers each of a server's input requests (`{KEY: {method, params}}`)
/// through the holder's handlers: `{KEY: result}`, or why one could not
/// be given (one failure fails the call, as it would in the older way).
fn gather_input<H: Host>(host: &mut H, asked: &Json, what: &str) -> Result<Json, Error> {
    let mut asked = asked.clone();
    asked.materialize();
    let Json::Object(requests) = asked else {
        let why = "its inputRequests is not an object".to_string();
        return Err(Error::InputNotGiven { what: what.to_string(), method: "input".into(), why });
    };
    let mut answers = Vec::new();
    for (key, request) in requests {
        let method = match request.get("method") {
            Some(Json::Str(m)) => String::from_utf8_lossy(m).into_owned(),
            _ => {
                let why = format!("input request {} names no method", String::from_utf8_lossy(&key));
                return Err(Error::InputNotGiven { what: what.to_string(), method: "input".into(), why });
            }
        };
        let params = request.get("params").cloned().unwrap_or(Json::Object(vec![]));
        let message = protocol::request(Json::Str(key.clone()), &method, params);
        let mut answer = host.request(&message);
        if let Some(result) = answer.take("result") {
            answers.push((key, result));
            continue;
        }
        let error = answer.get("error");
        let why = match error.and_then(|e| e.get("code")) {
            Some(Json::Int(-32601)) => format!("there is no handler for it (set opts.handlers[\"{method}\"])"),
            _ => protocol::lua_text(error.and_then(|e| e.get("message"))),
        };
        return Err(Error::InputNotGiven { what: what.to_string(), method, why });
    }
    Ok(Json::Object(answers))
}

/// The next round's params: the first round's, with this round's answers
/// (none when none were asked for) and the server's state echoed as it
/// came (none when it sent none).
fn set_input(message: &mut Json, answers: Option<Json>, state: Option<Json>) {
    message.materialize();
    let Some(params) = message.get_mut("params") else { return };
    params.materialize();
    let Json::Object(pairs) = params else { return };
    pairs.retain(|(k, _)| k != b"inputResponses" && k != b"requestState");
    if let Some(answers) = answers {
        pairs.push((b"inputResponses".to_vec(), answers));
    }
    if let Some(state) = state {
        pairs.push((b"requestState".to_vec(), state));
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
