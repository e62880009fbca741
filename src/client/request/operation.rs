//! What a request is and where it stands (the types are `request`'s, so
//! that their fields stay its own): a [`Request`] says what to send
//! and what its outcome is made of, and an [`Operation`] is one on its
//! way, with what its tries so far have used up ([`Retries`]), its pages,
//! what the cache may keep of it, and its outcome once it has one. The
//! path that moves an operation on is `request`; the 2026-07-28 rules it
//! follows are `modern`.

use super::super::cache::{self, CacheMode};
use super::super::queue::QUEUED;
use super::super::Ticket;
use super::modern::set_input;
use super::{Limits, Operation, Request, Retries, Shape, TaskAsk, TOOL_CALL};
use crate::codec::{Json, Members};
use crate::error::Error;
use crate::protocol::{self, IdKey};
use std::rc::Rc;

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
            task: None,
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
            task: None,
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

    /// The caller's own `_meta` entries (`opts.meta`: a trace context, a
    /// host's ids), put in its params beside what the client adds there
    /// (a progress token, a modern envelope), on every try and page.
    pub fn meta(mut self, entries: Members) -> Request {
        if let (false, Json::Request(message)) = (entries.is_empty(), &mut self.message) {
            protocol::add_meta(&mut message.params, entries);
        }
        self
    }

    /// A tool call that may run as a task (`opts.task`): declared to a
    /// modern server, asked of a 2025-11-25 one whose tool allows it.
    pub fn task(mut self, ask: Option<TaskAsk>) -> Request {
        self.task = ask;
        self
    }

    /// Its key in the cache, when its outcome may be kept.
    pub(in crate::client) fn cache_key(&self) -> Option<Vec<u8>> {
        let shape = match &self.shape {
            Shape::Whole => "whole",
            Shape::Field(field) => field,
            Shape::Pages => "pages",
            // Its pages lose the tools a modern HTTP client must leave out.
            Shape::Tools { .. } => "tools",
            // Checked as it arrives: a kept one would skip the check.
            Shape::ToolCall(_) | Shape::Reply | Shape::SkillFile(_) => return None,
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
    pub(in crate::client) fn may_need_input(&self) -> bool {
        matches!(self.method(), b"tools/call" | b"prompts/get" | b"resources/read")
    }

    pub(in crate::client) fn method(&self) -> &[u8] {
        match self.message.get("method") {
            Some(Json::Str(method)) => method,
            _ => b"",
        }
    }

    /// The tool a tool call calls.
    pub(in crate::client) fn tool(&self) -> &[u8] {
        match &self.shape {
            Shape::ToolCall(Some(bytes)) => bytes,
            _ => self.what.strip_prefix(TOOL_CALL).unwrap_or(&self.what).as_bytes(),
        }
    }

    pub(in crate::client) fn is_list(&self) -> bool {
        matches!(self.shape, Shape::Pages | Shape::Tools { .. })
    }
}

impl Retries {
    /// Whether it may go once more on a new session.
    pub(in crate::client) fn restart(&mut self) -> bool {
        !std::mem::replace(&mut self.restarted, true)
    }

    /// Whether it may go once more after the tools were listed anew.
    pub(in crate::client) fn relist(&mut self) -> bool {
        !std::mem::replace(&mut self.relisted, true)
    }

    /// Whether it may go once more after the server named its versions.
    pub(in crate::client) fn retry_version(&mut self) -> bool {
        !std::mem::replace(&mut self.version_retried, true)
    }

    /// Whether a lost reply may be asked for again, `most` times in all.
    pub(in crate::client) fn reissue(&mut self, most: usize) -> bool {
        self.reissued += 1;
        self.reissued <= most
    }

    /// The login this refusal would be (0 for the first), if `most` allow
    /// one more.
    pub(in crate::client) fn authorize(&mut self, most: usize) -> Option<usize> {
        (self.authorizations < most).then(|| {
            self.authorizations += 1;
            self.authorizations - 1
        })
    }
}

impl Operation {
    pub(in crate::client) fn new(request: Request) -> Operation {
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
            legacy_task: false,
            task: None,
            outcome: None,
        }
    }

    /// What a handle holds while `op` waits in the queue under `number`:
    /// its name, its progress token, and a ticket that says where it is.
    pub(in crate::client) fn queued_as(number: u64, op: &Operation) -> Operation {
        let what = op.request.what.clone();
        let mut stand_in = Operation::new(Request::message(Json::Null, what.clone()));
        stand_in.progress_token = op.progress_token.clone();
        stand_in.queued = Some(number);
        let key = IdKey::Int(number as i64);
        stand_in.ticket = Some(Ticket { session: QUEUED, key, id: Json::Null, what });
        stand_in
    }

    pub(in crate::client) fn take_ticket(&mut self) -> Option<Ticket> {
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
    pub(in crate::client) fn fail_in_queue(&mut self, error: Error) {
        if self.outcome.is_none() {
            self.outcome = Some(Err(error));
            self.settled_in_queue = Some(crate::session::next_settled());
        }
    }

    /// The message for the page after `cursor`, or the first page again.
    pub(in crate::client) fn ask_for_page(&mut self, cursor: Option<Json>) {
        // A later page repeats the first one's params (its `_meta`, and
        // the `uri` of a directory read) with the cursor.
        let params = match &cursor {
            Some(cursor) => {
                let mut params = vec![(b"cursor".to_vec(), cursor.clone())];
                if let Some(Json::Object(first)) = self.first_params.clone().map(Json::into_tree) {
                    params.extend(first.into_iter().filter(|(k, _)| k != b"cursor"));
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
