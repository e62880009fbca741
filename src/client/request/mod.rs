//! The one path every request takes, blocking or async.
//!
//! The client turns a [`Request`] into an [`Operation`] that is started at
//! once and then polled (the async API) or waited for (a blocking call is
//! start + wait) until it settles. Both types are defined here, so that
//! their fields are this path's alone; their methods are in `operation`.
//! Whatever a request may need between start and outcome happens here,
//! once each, before its outcome is handed over:
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
//! - The 2026-07-28 revision's rules (a lost reply, rounds of input,
//!   header mismatches, results kept) are in `modern`, called from here.
//! - A tool call the server made a task goes on as that task's (`task`):
//!   polled at the interval the server names, its input asked once, its
//!   result checked as any call's; a cancel or a Ctrl-C sends
//!   `tasks/cancel`, and a task request that cannot go out says the task
//!   runs at the server. What a status asks next is one pure function
//!   (`task::next_step`), pinned by `client/tests/tasks.rs`.
//!
//! Before this path existed, the async API had rebuilt part of it, and the
//! two drifted: a call with its own timeout failed on an expired session
//! that a plain call survived.

mod modern;
mod operation;
pub(super) mod task;
mod tools;

use std::rc::Rc;
use std::time::{Duration, Instant};

use super::cache::{CacheMode, Hints};
use super::{Client, Host, Ticket, MAX_AUTHORIZATIONS, MAX_PAGES, NEXT_CURSOR};
use crate::codec::Json;
use crate::error::Error;
use crate::interrupt::far_future;
use crate::protocol::{self, id_key, result_of, ResultKind};
use crate::server_text;
use crate::session::Limit;
use modern::MAX_REISSUES;
pub use task::TaskAsk;
use task::{TaskState, TaskStep};

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
    /// A skill's file read with `resources/read`: handed over only as the
    /// check says (see `skills`).
    SkillFile(Box<super::skills::Check>),
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
    /// `opts.task`: a tool call that may run as a task (see `task`).
    task: Option<TaskAsk>,
}

/// The tries an operation has had beyond its first, each bounded: what
/// `request::worth_again` asks before it sends one more. Each question
/// takes the try it allows.
#[derive(Default)]
pub(in crate::client) struct Retries {
    /// Sent again on a new session already (HTTP 404): once.
    restarted: bool,
    /// Logins run for it (401, 403).
    authorizations: usize,
    /// Sent again after the tools were listed anew (-32020): once.
    relisted: bool,
    /// Sent again on a new session after -32022: once.
    version_retried: bool,
    /// Sent again after its reply stream broke (see `Error::StreamEnded`).
    reissued: usize,
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
    /// The caller cancelled it after its reply had come: what came is
    /// its outcome, with no further try or page.
    stopped: bool,
    /// What its tries so far have used up.
    retries: Retries,
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
    /// A round that carries only the server's state goes out then.
    resend_at: Option<Instant>,
    /// A stand-in for the request queued under this number until its
    /// session is ready (see `queue`).
    queued: Option<u64>,
    /// Where it stands in the order requests settled, when it settled in
    /// the queue, with no session to count it.
    settled_in_queue: Option<u64>,
    /// A 2025-11-25 tool call that asked for a task (`params.task`).
    legacy_task: bool,
    /// The task the server made of it: its tries since are that task's.
    task: Option<Box<TaskState>>,
    outcome: Option<Result<Json, Error>>,
}

/// Messages routed before a request goes out, at most (see
/// [`Client::route_queued`]).
const ROUTE_BEFORE_REQUEST: usize = 256;

/// What a queued request does once the session is ready.
pub(in crate::client) enum Next {
    /// Its first try: everything `Client::start` does after the
    /// handshake.
    Start,
    /// Another try (its session died or was forgotten, or a login was
    /// needed): sent as it stands.
    Send,
}

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
            self.ask_for_legacy_task(op);
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
    pub(super) fn take_first_id<H: Host>(&mut self, host: &mut H, op: &mut Operation) -> Result<(), H::Error> {
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
            // A task's call is mostly paused between polls, and a Ctrl-C
            // then must reach the server as tasks/cancel; one that cut off
            // a poll's own send must too.
            if op.task.is_some() && op.outcome.is_none() && crate::interrupt::requested() {
                self.stop_interrupted(host, op);
                return Ok(true);
            }
            if self.poll(host, op)? {
                if op.task.is_some() && matches!(op.outcome, Some(Err(Error::Interrupted { .. }))) {
                    op.outcome = None;
                    self.stop_interrupted(host, op);
                }
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
                    self.stop_interrupted(host, op);
                    return Ok(true);
                }
                Err(e) => {
                    self.give_up(host, op, "the client stopped waiting for it");
                    op.outcome = Some(Err(e));
                    return Ok(true);
                }
            }
        }
    }

    /// Ctrl-C: `op` stops as `handle:cancel()` would stop it, and settles
    /// as interrupted, unless the server could not be told of a task that
    /// may still be running there, which the caller must hear.
    fn stop_interrupted<H: Host>(&mut self, host: &mut H, op: &mut Operation) {
        self.give_up(host, op, "interrupted by the user");
        let interrupted = Error::Interrupted { what: op.what().to_string() };
        op.outcome = Some(Err(match op.outcome.take() {
            Some(Err(untold @ Error::TaskNotCancelled { .. })) => untold,
            _ => interrupted,
        }));
    }

    /// Stops waiting for `op`: the server is told if the request is still
    /// running, and whatever the client kept for it goes.
    pub(super) fn give_up<H: Host>(&mut self, host: &mut H, op: &mut Operation, reason: &str) {
        self.cancel(host, op, reason);
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
    pub fn cancel<H: Host>(&mut self, host: &mut H, op: &mut Operation, reason: &str) -> bool {
        if op.outcome.is_some() {
            return false;
        }
        if let Some(told) = self.cancel_task(host, op) {
            let cancelled = Error::Cancelled { what: op.what().to_string() };
            op.outcome = Some(Err(Self::cancelled_task(op, told, cancelled)));
            return true;
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
            return self.cancel(host, op, reason);
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

    /// What the server sent after the last reply (a `list_changed` right
    /// behind it, typically) is routed before the next request goes out,
    /// so that the request sees it. Bounded: a server flooding
    /// notifications must not keep the request from going out.
    /// A Ctrl-C meanwhile names the request that was about to go out.
    pub(super) fn route_queued<H: Host>(&mut self, host: &mut H, what: &str) -> Result<(), H::Error> {
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
                op.outcome = Some(Err(Self::task_failure(op, failure)));
                return Ok(());
            }
        }
    }

    /// One try: on the current session, or a new one if there is none or
    /// it broke. Err when the send itself failed.
    pub(super) fn send_once<H: Host>(
        &mut self,
        host: &mut H,
        op: &mut Operation,
    ) -> Result<Result<(), Error>, H::Error> {
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
        match &self.envelope {
            Some(envelope) if op.declares_tasks() => {
                envelope.declaring(protocol::TASKS_EXTENSION).stamp(&mut op.request.message)
            }
            Some(envelope) => envelope.stamp(&mut op.request.message),
            None => {}
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
    pub(super) fn settle<H: Host>(
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
        // A call the server made a task: this reply is about the task.
        let result = match result {
            Ok(result) if op.task.is_some() => match self.task_reply(host, op, result)? {
                TaskStep::Going => return Ok(()),
                TaskStep::Done(Ok(result)) => Ok((ResultKind::Complete, result)),
                TaskStep::Done(Err(e)) => {
                    op.fail(e);
                    return Ok(());
                }
            },
            Err(e) if op.task.is_some() => Err(Self::task_failure(op, e)),
            result => result.and_then(|result| self.result_kind(op, result)),
        };
        let result = match result {
            Ok((ResultKind::InputRequired, result)) if op.request.returns_input => {
                op.outcome = Some(Ok(result));
                return Ok(());
            }
            Ok((ResultKind::InputRequired, result)) => return self.answer_input(host, op, &result),
            Ok((ResultKind::Task, result)) => match self.follow_task(host, op, result)? {
                TaskStep::Going => return Ok(()),
                TaskStep::Done(Ok(result)) => Ok(result),
                TaskStep::Done(Err(e)) => {
                    op.fail(e);
                    return Ok(());
                }
            },
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
            Shape::SkillFile(check) => {
                let loaded = super::skills::verified(check, &result);
                if loaded.is_ok() {
                    self.skills.passed(check);
                }
                loaded
            }
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
                if op.request.method() == b"skills/list" {
                    self.skills.learn(&pages);
                }
                Ok(Json::Array(pages))
            }
        });
        self.keep_outcome(op);
        Ok(())
    }

    /// Whether a try that failed with `failure` is worth another, which
    /// is then prepared: a forgotten session is replaced once (a listing
    /// starting over), and a refusal is answered with new credentials, up
    /// to [`MAX_AUTHORIZATIONS`] times.
    pub(super) fn worth_again<H: Host>(
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
            Error::SessionExpired if op.retries.restart() => {
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
            Error::StreamEnded if op.request.shape != Shape::Reply && !self.may_repeat(op) => {
                *failure = Error::OutcomeUnknown { what: op.what().to_string() };
                Ok(false)
            }
            Error::StreamEnded if op.request.shape != Shape::Reply => Ok(op.retries.reissue(MAX_REISSUES)),
            // The server no longer takes the version the session speaks
            // (-32022: it was upgraded, or restarted as another release):
            // a new session finds the version again, once.
            Error::Rpc { code, data, .. } if code == "-32022" && op.retries.retry_version() => {
                Ok(self.take_version_from(op, data.as_deref()))
            }
            // A tool that runs only as a task, called without declaring
            // the extension (-32021 naming it): called again, declaring it.
            Error::Rpc { code, data, .. } if code == "-32021" => Ok(op.declare_tasks_when_required(data.as_deref())),
            Error::Unauthorized { .. } => {
                let Some(earlier) = op.retries.authorize(MAX_AUTHORIZATIONS) else { return Ok(false) };
                let again = earlier > 0;
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
