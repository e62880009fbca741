//! What a request is and where it stands: a [`Request`] says what to send
//! and what its outcome is made of, and an [`Operation`] is one on its
//! way, with what its tries so far have used up ([`Retries`]), its pages,
//! what the cache may keep of it, and its outcome once it has one. The
//! path that moves an operation on is `request`; the 2026-07-28 rules it
//! follows are `modern`.

use std::rc::Rc;
use std::time::{Duration, Instant};

use super::cache::{self, CacheMode, Hints};
use super::modern::set_input;
use super::queue::QUEUED;
use super::Ticket;
use crate::codec::Json;
use crate::error::Error;
use crate::protocol::{self, IdKey};

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
    pub(super) message: Json,
    pub(super) what: Rc<str>,
    pub(super) limits: Limits,
    pub(super) shape: Shape,
    pub(super) detached: bool,
    /// Made by the async API: it never waits for a session or a login
    /// (it is queued behind them, see `queue`).
    pub(super) asynchronous: bool,
    /// An `input_required` result is the outcome, for a caller that asks
    /// its user itself (across turns) and continues with the answers.
    pub(super) returns_input: bool,
    /// What it does with what a modern server allows to be kept.
    pub(super) cache: CacheMode,
    /// `opts.idempotent`: the caller says whether sending it twice is
    /// safe; None leaves it to the method and the tool's annotations.
    pub(super) idempotent: Option<bool>,
}

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
    pub(super) fn cache_key(&self) -> Option<Vec<u8>> {
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
    pub(super) fn may_need_input(&self) -> bool {
        matches!(self.method(), b"tools/call" | b"prompts/get" | b"resources/read")
    }

    pub(super) fn method(&self) -> &[u8] {
        match self.message.get("method") {
            Some(Json::Str(method)) => method,
            _ => b"",
        }
    }

    /// The tool a tool call calls.
    pub(super) fn tool(&self) -> &[u8] {
        match &self.shape {
            Shape::ToolCall(Some(bytes)) => bytes,
            _ => self.what.strip_prefix(TOOL_CALL).unwrap_or(&self.what).as_bytes(),
        }
    }

    pub(super) fn is_list(&self) -> bool {
        matches!(self.shape, Shape::Pages | Shape::Tools { .. })
    }
}

/// The tries an operation has had beyond its first, each bounded: what
/// `request::worth_again` reads before it sends one more.
#[derive(Default)]
pub(super) struct Retries {
    /// Sent again once on a new session already (HTTP 404).
    pub(super) restarted: bool,
    /// Logins run for it (401, 403).
    pub(super) authorizations: usize,
    /// Sent again once after the tools were listed anew (-32020).
    pub(super) relisted: bool,
    /// Sent again once on a new session after -32022.
    pub(super) version_retried: bool,
    /// Sent again after its reply stream broke (see `Error::StreamEnded`).
    pub(super) reissued: usize,
}

/// A request on its way: what a handle (or a blocking call) holds until
/// it settles.
pub struct Operation {
    pub(super) request: Request,
    /// The try in flight.
    pub(super) ticket: Option<Ticket>,
    /// The session the last try went to.
    pub(super) session: u64,
    /// The id the first try goes out with, taken when the operation
    /// began (its progress token, when it asks for progress).
    pub(super) first_id: Option<Json>,
    pub(super) progress_token: Option<Json>,
    /// Waiting for a stale tool list to be listed again: the count of
    /// refreshes finished when it began.
    pub(super) after_refresh: Option<u64>,
    /// The caller cancelled it after its reply had come: what came is
    /// its outcome, with no further try or page.
    pub(super) stopped: bool,
    /// What its tries so far have used up.
    pub(super) retries: Retries,
    /// The client's credentials count when the last try went out.
    pub(super) credentials: u64,
    /// A list's first params, its pages so far and the cursor that asked
    /// for the last one.
    pub(super) first_params: Option<Json>,
    pub(super) pages: Vec<Json>,
    pub(super) cursor: Option<Json>,
    /// Where its outcome is kept, when it may be: and what its results
    /// allowed (all of them must, for a list).
    pub(super) cache_key: Option<Vec<u8>>,
    pub(super) hints: Option<Hints>,
    pub(super) unhinted: bool,
    /// The credentials when it began: a result fetched under others is
    /// not kept.
    pub(super) cached_under: u64,
    /// Rounds of input answered so far.
    pub(super) input_rounds: usize,
    /// A round that carries only the server's state goes out then.
    pub(super) resend_at: Option<Instant>,
    /// A stand-in for the request queued under this number until its
    /// session is ready (see `queue`).
    pub(super) queued: Option<u64>,
    /// Where it stands in the order requests settled, when it settled in
    /// the queue, with no session to count it.
    pub(super) settled_in_queue: Option<u64>,
    pub(super) outcome: Option<Result<Json, Error>>,
}

impl Operation {
    pub(super) fn new(request: Request) -> Operation {
        Operation {
            request,
            ticket: None,
            session: 0,
            first_id: None,
            progress_token: None,
            after_refresh: None,
            stopped: false,
            retries: Retries::default(),
            credentials: 0,
            first_params: None,
            pages: Vec::new(),
            cursor: None,
            cache_key: None,
            hints: None,
            unhinted: false,
            cached_under: 0,
            input_rounds: 0,
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
    pub(super) fn ask_for_page(&mut self, cursor: Option<Json>) {
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
