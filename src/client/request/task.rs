//! A tool call the server made a task: the Tasks extension (SEP-2663) on
//! a 2026-07-28 server, the revision's own tasks on a 2025-11-25 one.
//! The call's operation goes on as its task's: polled at the interval
//! the server names (a pause like an input round's, which an event
//! loop's timer sees), the input the task asks for given through the
//! holder's handlers, its result taken as the call's (and checked
//! against the tool's output schema like any), a cancel sent as
//! `tasks/cancel`.
//!
//! The revisions differ in where a task's end is read. A modern
//! `tasks/get` carries the result, the error or the inputs asked for; a
//! 2025-11-25 server keeps them for `tasks/result`, which it answers once
//! the task ends and on whose way it sends its own requests for input
//! (routed to the handlers as any request of the server is).

use std::time::{Duration, Instant};

use super::super::{Client, Host};
use super::modern::{gather_input, MAX_INPUT_ROUNDS};
use super::{Operation, Shape};
use crate::codec::Json;
use crate::error::Error;
use crate::protocol::{self, TASKS_EXTENSION};
use crate::server_text;

/// What a caller asks of a tool call that may run as a task
/// (`opts.task`).
#[derive(Clone, Copy, Debug, Default)]
pub struct TaskAsk {
    /// How long the task is to be kept, asked of a 2025-11-25 server (a
    /// modern server decides alone).
    pub ttl: Option<Duration>,
}

/// Polled this often when the server names no interval.
const DEFAULT_POLL: Duration = Duration::from_secs(1);

/// The shortest and longest pause between polls: a server that says 0
/// is not asked in a busy loop, and one that says an hour is asked again
/// within a minute all the same.
const POLL_BOUNDS: (Duration, Duration) = (Duration::from_millis(10), Duration::from_secs(60));

/// A call's task, as far as the client knows it.
pub(in crate::client) struct TaskState {
    id: Vec<u8>,
    /// A 2026-07-28 task (the extension's), else a 2025-11-25 one.
    modern: bool,
    /// The task as the server last described it, without what that
    /// carried (a result, an error, the inputs asked for).
    described: Json,
    poll: Duration,
    /// When the client heard of it, and how long the server keeps it.
    made: Instant,
    ttl: Option<Duration>,
    /// What the request in flight for it asks.
    asked: Asked,
    /// The inputs answered already: a poll that still lists one (the
    /// server has not taken the answer yet) does not ask the user again.
    answered: Vec<Vec<u8>>,
}

#[derive(Clone, Copy, PartialEq)]
enum Asked {
    /// `tasks/get`: the task described.
    Get,
    /// `tasks/update`: answers taken (an empty acknowledgement).
    Update,
    /// `tasks/result` (2025-11-25): the call's own result.
    Result,
}

impl Asked {
    fn method(self) -> &'static str {
        match self {
            Asked::Get => "tasks/get",
            Asked::Update => "tasks/update",
            Asked::Result => "tasks/result",
        }
    }
}

/// Where a reply about a task leaves the call.
pub(in crate::client) enum TaskStep {
    /// The next request for the task is sent or scheduled.
    Going,
    /// The call's outcome: its result (still to be checked against the
    /// tool's output schema) or why it failed.
    Done(Result<Json, Error>),
}

impl TaskState {
    fn new(id: Vec<u8>, modern: bool) -> TaskState {
        TaskState {
            id,
            modern,
            described: Json::Null,
            poll: DEFAULT_POLL,
            made: Instant::now(),
            ttl: None,
            asked: Asked::Get,
            answered: Vec::new(),
        }
    }

    /// Takes in a description of the task: its interval and time to live
    /// (either may change over its life), and what is kept of it.
    fn note(&mut self, described: &Json) {
        let (poll, ttl) = match self.modern {
            true => ("pollIntervalMs", "ttlMs"),
            false => ("pollInterval", "ttl"),
        };
        if let Some(ms) = described.get(poll).and_then(millis) {
            self.poll = ms.clamp(POLL_BOUNDS.0, POLL_BOUNDS.1);
        }
        match described.get(ttl) {
            Some(Json::Null) => self.ttl = None,
            Some(value) => self.ttl = millis(value).or(self.ttl),
            None => {}
        }
        let mut kept = described.clone();
        kept.materialize();
        if let Json::Object(pairs) = &mut kept {
            pairs.retain(|(k, _)| {
                !matches!(k.as_slice(), b"result" | b"error" | b"inputRequests" | b"resultType" | b"taskId")
            });
            // The id is the one the call owns, whatever a poll's answer
            // said (an answer naming another task fails the call first).
            pairs.insert(0, (b"taskId".to_vec(), Json::Str(self.id.clone())));
        }
        self.described = kept;
    }

    fn status(&self) -> String {
        server_text::quoted_value(self.described.get("status"), server_text::ITEM_CHARS)
    }

    fn id_text(&self) -> String {
        server_text::quoted_str(&String::from_utf8_lossy(&self.id), server_text::ITEM_CHARS)
    }

    /// A request about the task, with no id yet.
    fn request(&self, method: &str, more: Vec<(Vec<u8>, Json)>) -> Json {
        let mut params = vec![(b"taskId".to_vec(), Json::Str(self.id.clone()))];
        params.extend(more);
        protocol::request(Json::Null, method, Json::Object(params))
    }
}

fn millis(value: &Json) -> Option<Duration> {
    match value {
        Json::Int(ms) if *ms >= 0 => Some(Duration::from_millis(*ms as u64)),
        Json::Float(ms) if ms.is_finite() && *ms >= 0.0 => Some(Duration::from_millis(*ms as u64)),
        _ => None,
    }
}

/// What one description of a task asks of the client next, read from
/// its status and what came with it; nothing is sent here.
#[derive(Debug, PartialEq)]
pub(in crate::client) enum NextStep {
    /// Still working: poll again after the interval.
    Poll,
    /// A modern task needs input (its `inputRequests`).
    GiveInput,
    /// A 2025-11-25 task keeps its outcome (or its questions) for
    /// `tasks/result`.
    AskResult,
    /// Completed, its result with it.
    Completed,
    /// Completed, but no result came with it.
    CompletedWithoutResult,
    /// Failed with a JSON-RPC error.
    Failed,
    /// Cancelled by the server.
    Cancelled,
    /// Nothing the client can go on with; why.
    Unusable(String),
}

/// The rule of a task's status, by revision: a modern `tasks/get` carries
/// the result, the error or the inputs asked for; a 2025-11-25 server
/// keeps them for `tasks/result`, asked once the task needs input or has
/// ended. A status that is no string, or one this client does not know,
/// is said (quoted bounded) rather than polled for ever.
pub(in crate::client) fn next_step(described: &Json, modern: bool) -> NextStep {
    let status = match described.get("status") {
        Some(Json::Str(s)) => s.as_slice(),
        other => {
            let status = server_text::quoted_value(other, server_text::ITEM_CHARS);
            return NextStep::Unusable(format!("its status is {status}, which is not a string"));
        }
    };
    match status {
        b"working" => NextStep::Poll,
        b"input_required" | b"completed" | b"failed" if !modern => NextStep::AskResult,
        b"input_required" => NextStep::GiveInput,
        b"completed" => match described.get("result") {
            Some(Json::Object(_)) => NextStep::Completed,
            _ => NextStep::CompletedWithoutResult,
        },
        b"failed" => match described.get("error") {
            Some(Json::Object(_)) => NextStep::Failed,
            _ => NextStep::Unusable("it failed without saying why (no error)".into()),
        },
        b"cancelled" => NextStep::Cancelled,
        other => {
            let status = server_text::quoted(other, server_text::ITEM_CHARS);
            NextStep::Unusable(format!("its status is {status}, which this client does not know"))
        }
    }
}

impl Operation {
    /// The task its server made of it, as last described; None when
    /// there is none (yet).
    pub fn task(&self) -> Option<&Json> {
        self.task.as_ref().map(|t| &t.described)
    }

    /// Whether its requests declare the Tasks extension: a tool call its
    /// caller asked to run as a task, and that task's polls.
    pub(in crate::client) fn declares_tasks(&self) -> bool {
        self.task.is_some() || (self.request.task.is_some() && matches!(self.request.shape, Shape::ToolCall(_)))
    }

    /// A modern tool call refused with -32021 because the tool runs only
    /// as a task (the error's `requiredCapabilities` names the
    /// extension), and that did not declare it: it will, on its next try.
    /// True when that try is worth making (once: it declares it now).
    pub(in crate::client) fn declare_tasks_when_required(&mut self, data: Option<&Json>) -> bool {
        let required =
            data.and_then(|d| d.get("requiredCapabilities")?.get("extensions")?.get(TASKS_EXTENSION)).is_some();
        if !required || self.declares_tasks() || !matches!(self.request.shape, Shape::ToolCall(_)) {
            return false;
        }
        self.request.task = Some(TaskAsk::default());
        true
    }
}

impl Client {
    /// A 2025-11-25 tool call asks for a task (`params.task`) when its
    /// caller asked and the listing allows the tool one, or when the tool
    /// runs only as one (a plain call to it would be refused), and the
    /// server said it runs tool calls as tasks.
    pub(in crate::client) fn ask_for_legacy_task(&self, op: &mut Operation) {
        if self.envelope.is_some() || !matches!(op.request.shape, Shape::ToolCall(_)) {
            return;
        }
        // The capability first: the listing is parsed to read a tool's
        // support, which every call to a server without tasks would pay.
        let server_runs_them = self
            .initialized
            .as_ref()
            .and_then(|r| r.get("capabilities")?.get("tasks")?.get("requests")?.get("tools")?.get("call"))
            .is_some();
        if !server_runs_them {
            return;
        }
        let support = self.tools.schemas.task_support(op.request.tool());
        let asked = match support.as_deref() {
            Some(b"required") => true,
            Some(b"optional") => op.request.task.is_some(),
            _ => false,
        };
        if !asked {
            return;
        }
        let mut task = Vec::new();
        if let Some(ttl) = op.request.task.and_then(|ask| ask.ttl) {
            task.push((b"ttl".to_vec(), Json::Int(ttl.as_millis().min(i64::MAX as u128) as i64)));
        }
        let params = match &mut op.request.message {
            Json::Request(request) => Some(&mut request.params),
            other => other.get_mut("params"),
        };
        if let Some(params) = params {
            params.materialize();
            if let Json::Object(pairs) = params {
                pairs.retain(|(k, _)| k != b"task");
                pairs.push((b"task".to_vec(), Json::Object(task)));
            }
        }
        op.legacy_task = true;
    }

    /// Whether a 2025-11-25 result is the task its call asked for.
    pub(in crate::client) fn is_legacy_task(op: &Operation, result: &Json) -> bool {
        op.legacy_task && op.task.is_none() && matches!(result.get("task"), Some(Json::Object(_)))
    }

    /// The server made `op`, a tool call, a task: from here the call is
    /// that task's, and goes on as its status says.
    pub(in crate::client) fn follow_task<H: Host>(
        &mut self,
        host: &mut H,
        op: &mut Operation,
        mut result: Json,
    ) -> Result<TaskStep, H::Error> {
        let modern = self.envelope.is_some();
        let described = if modern { result } else { result.take("task").unwrap_or(Json::Null) };
        let Some(Json::Str(id)) = described.get("taskId") else {
            let why = "it made the call a task with no taskId".to_string();
            return Ok(TaskStep::Done(Err(Error::TaskUnusable { what: op.what().to_string(), why })));
        };
        op.task = Some(Box::new(TaskState::new(id.clone(), modern)));
        self.task_moved(host, op, described)
    }

    /// A reply about `op`'s task: the task described, answers taken, or
    /// (2025-11-25) the call's result.
    pub(in crate::client) fn task_reply<H: Host>(
        &mut self,
        host: &mut H,
        op: &mut Operation,
        result: Json,
    ) -> Result<TaskStep, H::Error> {
        let Some(task) = op.task.as_ref() else { return Ok(TaskStep::Done(Ok(result))) };
        match task.asked {
            Asked::Result => Ok(TaskStep::Done(Ok(result))),
            Asked::Update => Ok(self.poll_task_later(op)),
            Asked::Get => self.task_moved(host, op, result),
        }
    }

    /// A poll of `op`'s task failed: a task the server no longer knows
    /// is said so (it expired, or the server restarted without it).
    pub(in crate::client) fn task_failure(op: &Operation, failure: Error) -> Error {
        let Some(task) = op.task.as_ref() else { return failure };
        let what = op.what().to_string();
        match failure {
            Error::Rpc { code, .. } if code == "-32602" && task.asked == Asked::Get => {
                Error::TaskLost { what, task: task.id_text() }
            }
            // The request about the task did not go out, but the call did:
            // an error saying "not sent" would invite running it twice.
            Error::HeaderTooLarge { header, bytes, limit, .. } => {
                let why = format!("its {header} header would be {bytes} bytes, over the {limit} this client sends in one header (opts.max_header_bytes)");
                Error::TaskUnreachable { what, task: task.id_text(), method: task.asked.method().into(), why }
            }
            Error::NotDeclared { capability, .. } => {
                let why = format!("the server did not declare the {capability} capability");
                Error::TaskUnreachable { what, task: task.id_text(), method: task.asked.method().into(), why }
            }
            failure => failure,
        }
    }

    /// What the task's status asks for next: read by [`next_step`], then
    /// done here (the sends stay with the polls).
    fn task_moved<H: Host>(
        &mut self,
        host: &mut H,
        op: &mut Operation,
        mut described: Json,
    ) -> Result<TaskStep, H::Error> {
        let what = op.what().to_string();
        let Some(task) = op.task.as_mut() else { return Ok(TaskStep::Done(Ok(described))) };
        if let Some(said) = described.get("taskId").filter(|said| **said != Json::Str(task.id.clone())) {
            let said = server_text::quoted_value(Some(said), server_text::ITEM_CHARS);
            let why = format!("asked about task {}, it answered about task {said}", task.id_text());
            return Ok(TaskStep::Done(Err(Error::TaskUnusable { what, why })));
        }
        task.note(&described);
        Ok(match next_step(&described, task.modern) {
            NextStep::Poll => self.poll_task_later(op),
            NextStep::GiveInput => {
                let asked = described.take("inputRequests").unwrap_or(Json::Object(vec![]));
                self.give_task_input(host, op, asked)?
            }
            NextStep::AskResult => self.ask_task(host, op, Asked::Result)?,
            NextStep::Completed => match described.take("result") {
                Some(result) => TaskStep::Done(Ok(result)),
                None => TaskStep::Done(Err(Error::NoResult { what })),
            },
            NextStep::CompletedWithoutResult => TaskStep::Done(Err(Error::NoResult { what })),
            NextStep::Failed => {
                let error = described.get("error").unwrap_or(&Json::Null);
                TaskStep::Done(Err(server_text::bounded(protocol::rpc_error(error, &what))))
            }
            NextStep::Cancelled => {
                let said = match task.described.get("statusMessage") {
                    Some(Json::Str(m)) => {
                        format!(": {}", server_text::quoted_str(&String::from_utf8_lossy(m), server_text::TEXT_CHARS))
                    }
                    _ => String::new(),
                };
                TaskStep::Done(Err(Error::TaskCancelled { what, task: task.id_text(), said }))
            }
            NextStep::Unusable(why) => TaskStep::Done(Err(Error::TaskUnusable { what, why })),
        })
    }

    /// The next `tasks/get`, after the interval the server named; or the
    /// end of the call, once the task has outlived the time the server
    /// gave it by more than a poll (a server that forgot it).
    fn poll_task_later(&mut self, op: &mut Operation) -> TaskStep {
        let what = op.what().to_string();
        let Some(task) = op.task.as_mut() else { return TaskStep::Going };
        let now = Instant::now();
        if let Some(ttl) = task.ttl {
            if now > task.made + ttl + task.poll {
                let status = task.status();
                let ttl_ms = ttl.as_millis().min(u64::MAX as u128) as u64;
                return TaskStep::Done(Err(Error::TaskExpired { what, task: task.id_text(), status, ttl_ms }));
            }
        }
        op.request.message = task.request("tasks/get", Vec::new());
        task.asked = Asked::Get;
        let at = now + task.poll;
        op.resend_at = Some(at);
        self.paused_until.push(at);
        TaskStep::Going
    }

    /// Sends `tasks/result` (2025-11-25) now.
    fn ask_task<H: Host>(&mut self, host: &mut H, op: &mut Operation, asked: Asked) -> Result<TaskStep, H::Error> {
        if let Some(task) = op.task.as_mut() {
            op.request.message = task.request("tasks/result", Vec::new());
            task.asked = asked;
        }
        self.send(host, op)?;
        Ok(TaskStep::Going)
    }

    /// A modern task needs input: each input not answered before goes to
    /// the holder's handlers, and the answers to the server in
    /// `tasks/update`; the polls go on after its acknowledgement.
    fn give_task_input<H: Host>(
        &mut self,
        host: &mut H,
        op: &mut Operation,
        mut asked: Json,
    ) -> Result<TaskStep, H::Error> {
        let Some(task) = op.task.as_ref() else { return Ok(TaskStep::Going) };
        asked.materialize();
        if let Json::Object(requests) = &mut asked {
            requests.retain(|(key, _)| !task.answered.contains(key));
            if requests.is_empty() {
                return Ok(self.poll_task_later(op));
            }
        }
        op.input_rounds += 1;
        if op.input_rounds > MAX_INPUT_ROUNDS {
            let what = op.what().to_string();
            return Ok(TaskStep::Done(Err(Error::InputRounds { what, rounds: MAX_INPUT_ROUNDS })));
        }
        let answers = match gather_input(host, &asked, op.what()) {
            Ok(answers) => answers,
            Err(e) => return Ok(TaskStep::Done(Err(e))),
        };
        let Some(task) = op.task.as_mut() else { return Ok(TaskStep::Going) };
        if let Json::Object(pairs) = &answers {
            task.answered.extend(pairs.iter().map(|(key, _)| key.clone()));
        }
        op.request.message = task.request("tasks/update", vec![(b"inputResponses".to_vec(), answers)]);
        task.asked = Asked::Update;
        self.send(host, op)?;
        Ok(TaskStep::Going)
    }

    /// The caller cancelled `op` while it was a task (`handle:cancel()`,
    /// or Ctrl-C in a blocking call): the poll in flight is dropped and
    /// the server asked to cancel the task, without waiting for its
    /// acknowledgement (cancelling is cooperative: the task may end
    /// otherwise all the same). The request goes out shielded from the
    /// interrupt that may have caused it: a Ctrl-C still pending must not
    /// stop the one message that tells the server. None when `op` was no
    /// task; else whether the server was told, and if not, why.
    pub(in crate::client) fn cancel_task<H: Host>(
        &mut self,
        host: &mut H,
        op: &mut Operation,
    ) -> Option<Result<(), Error>> {
        let task = op.task.as_ref()?;
        if let Some(ticket) = op.ticket.take() {
            self.forget(&ticket);
        }
        op.resend_at = None;
        let mut message = task.request("tasks/cancel", Vec::new());
        let id = match host.next_id() {
            Ok(id) => id,
            Err(_) => return Some(Err(Error::BadInput("the client gave no id for it (client.next_id)".into()))),
        };
        let Some(key) = protocol::id_key(&id) else {
            return Some(Err(Error::BadInput("client.next_id gave an id that is not a number".into())));
        };
        if let Json::Request(request) = &mut message {
            request.id = id.clone();
        }
        if let Some(envelope) = &self.envelope {
            envelope.declaring(TASKS_EXTENSION).stamp(&mut message);
        }
        let headers = self.param_headers(&message);
        let mut limit = crate::session::Limit::new(self.timeout, None, op.request.what.clone());
        limit.detached = true;
        limit.headers = headers;
        let Some(session) = self.session.as_mut() else {
            return Some(Err(Error::Closed { what: "tasks/cancel".into() }));
        };
        let sent = crate::interrupt::shielded(|| session.start(&id, &message, limit));
        if sent.is_ok() {
            session.discard(&key);
        }
        Some(sent)
    }

    /// How a cancelled task's call settles: cancelled, or, when the
    /// server could not be told, saying the task may still run there.
    pub(in crate::client) fn cancelled_task(op: &Operation, told: Result<(), Error>, cancelled: Error) -> Error {
        let (Err(failure), Some(task)) = (told, op.task.as_ref()) else { return cancelled };
        let why = match failure {
            Error::HeaderTooLarge { header, bytes, limit, .. } => {
                format!("its {header} header would be {bytes} bytes, over the {limit} this client sends in one header")
            }
            other => server_text::quoted_str(&other.to_string(), server_text::TEXT_CHARS),
        };
        Error::TaskNotCancelled { what: op.what().to_string(), task: task.id_text(), why }
    }
}
