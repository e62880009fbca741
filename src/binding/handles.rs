//! The async API: requests that return a handle at once, waits on one or
//! many handles, and the descriptor an event loop watches.
//!
//! A handle is a plain Lua table (its methods come from the prelude) with
//! its state in a userdata kept beside it, as a client's is. It refers to
//! its client only weakly: a handle kept in an agent's list must not keep
//! a client alive that the agent dropped. A client collected with handles
//! in flight cancels them; their handles then settle with an error saying
//! so.
//!
//! `on_done` callbacks run on the Lua thread, never from our threads: from
//! the handle's own `wait`, from `client:dispatch()`, or after any later
//! call on the same client, once the client is free again, so that a
//! callback may call the client (chaining requests is the common case).

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::time::{Duration, Instant};

use mlua::{AnyUserData, Function, MultiValue, Table, UserData, Value};

use super::decode::{to_lua, with_json_types};
use super::encode::encode_lua;
use super::entry::Entry;
use super::fields::{call_params, tool_label};
use super::fixture::{call_batch, call_return, discover_batch};
use super::live::{joined_field, tool_listing, with_client, with_client_state, LuaHost};
use super::options::{lua_type, ClientState};
use super::surface;
use super::{arg, call_lua, callback_failed, callback_pending, client_arg, truthy, Cx, Outcome, Raise};
use crate::client::{CacheMode, Client, Limits, Operation, Request, Ticket};
use crate::codec::Json;
use crate::error::Error;
use crate::interrupt;
use crate::transport::doorbell::Doorbell;

/// What a handle returns: like `call` (text, is_error, result), like
/// `request` (the result table, or the one field the core took out of
/// it), or the items of every page of a list (`list_resources` follows
/// `nextCursor`, one request per page, and returns them all).
#[derive(Clone, Copy, PartialEq)]
pub(super) enum Kind {
    Call,
    Request,
    Pages {
        field: &'static str,
    },
    /// `discover_async`: the client's `tools`, as `discover` returns them.
    Discover,
}

/// How a handle ended.
enum Settled {
    /// A live request's outcome, as the core shaped it.
    Core(Result<Json, Error>),
    /// A fixture's batch call, run at once: its returns.
    Returns(Vec<Value>),
}

pub(super) struct HandleState {
    /// The request on its way; none for a fixture's call, answered at
    /// once.
    op: RefCell<Option<Operation>>,
    kind: Kind,
    settled: RefCell<Option<Settled>>,
    /// Where its request stood in the order requests settled, read as its
    /// outcome was taken: `on_done` callbacks run in that order, whoever
    /// took the outcomes (a wait takes them in the order of its list).
    settled_as: Cell<u64>,
    /// Where an unsettled request goes when this handle is collected.
    forgotten: Option<Rc<RefCell<Vec<Ticket>>>>,
}

impl HandleState {
    fn new(op: Option<Operation>, kind: Kind, forgotten: Option<Rc<RefCell<Vec<Ticket>>>>) -> Self {
        HandleState { op: RefCell::new(op), kind, settled: RefCell::new(None), settled_as: Cell::new(0), forgotten }
    }

    fn what(&self) -> String {
        self.op.borrow().as_ref().map(|op| op.what().to_string()).unwrap_or_default()
    }

    fn settle(&self, outcome: Result<Json, Error>) {
        *self.settled.borrow_mut() = Some(Settled::Core(outcome));
    }
}

impl UserData for HandleState {}

impl Drop for HandleState {
    fn drop(&mut self) {
        let op = self.op.borrow();
        let ticket = op.as_ref().and_then(Operation::ticket);
        if let (Some(ticket), Some(forgotten), None) = (ticket, &self.forgotten, &*self.settled.borrow()) {
            forgotten.borrow_mut().push(ticket.clone());
        }
    }
}

/// The time a wait may take: nil for no bound, else seconds.
fn wait_bound(value: &Value, what: &str) -> Outcome<Option<Duration>> {
    let seconds = match value {
        Value::Nil => return Ok(None),
        Value::Integer(i) => *i as f64,
        Value::Number(n) => *n,
        _ => return Err(Error::BadInput(format!("{what}: the timeout must be a number of seconds")).into()),
    };
    if seconds.is_nan() || seconds < 0.0 {
        return Err(Error::BadInput(format!("{what}: the timeout must be a number of seconds, 0 or more")).into());
    }
    Ok(Some(Duration::from_secs_f64(seconds.min(1e9))))
}

fn deadline_after(bound: Option<Duration>) -> Instant {
    bound.and_then(|b| Instant::now().checked_add(b)).unwrap_or_else(crate::interrupt::far_future)
}

/// A request's own options: `timeout` (seconds, as `mcp.new`'s) and
/// `on_done`.
#[derive(Default)]
pub(super) struct RequestOptions {
    timeout: Option<Duration>,
    max_total: Option<Duration>,
    on_progress: Option<Function>,
    on_done: Option<Function>,
    /// `opts.input_required = "return"`: a modern server's request for
    /// input is returned to the caller (who asks its user, perhaps across
    /// turns) instead of going to `opts.handlers`.
    returns_input: bool,
    /// `opts.input_responses` and `opts.request_state`: the caller goes on
    /// from such a result with the answers it got.
    input_responses: Option<Json>,
    request_state: Option<Json>,
    /// `opts.rpc_error = "return"` (client:request): a JSON-RPC error is
    /// returned as `nil, {code, message, data}` rather than raised.
    pub(super) returns_rpc_error: bool,
    /// `opts.cache`: "refresh" (fetched, and kept) or "bypass" (neither
    /// answered from nor kept in the cache).
    cache: CacheMode,
    /// `opts.idempotent`: whether the request may be sent twice when its
    /// reply is lost (see `client::request`).
    idempotent: Option<bool>,
}

impl RequestOptions {
    fn limits(&self) -> Limits {
        Limits { timeout: self.timeout, max_total: self.max_total, progress: self.on_progress.is_some() }
    }

    /// `request` as these options ask for it.
    fn apply(&self, request: Request) -> Request {
        let request = request
            .limits(self.limits())
            .continuing(self.input_responses.clone(), self.request_state.clone())
            .cached(self.cache)
            .idempotent(self.idempotent);
        if self.returns_input {
            request.returning_input()
        } else {
            request
        }
    }

    /// Whether the request has limits of its own beyond the client's timeout.
    fn limited(&self) -> bool {
        self.timeout.is_some() || self.max_total.is_some() || self.on_progress.is_some()
    }
}

/// Seconds from 0.001 to 1e7, as `mcp.new`'s timeout.
fn seconds_option(opts: &Table, field: &str, what: &str) -> Outcome<Option<Duration>> {
    match opts.get::<Value>(field)? {
        Value::Nil => Ok(None),
        Value::Integer(i) if (1..=10_000_000).contains(&i) => Ok(Some(Duration::from_secs(i as u64))),
        Value::Number(n) if (0.001..=1e7).contains(&n) => Ok(Some(Duration::from_secs_f64(n))),
        _ => Err(Error::BadInput(format!("{what}: opts.{field} must be a number of seconds from 0.001 to 1e7")).into()),
    }
}

fn function_option(opts: &Table, field: &str, what: &str) -> Outcome<Option<Function>> {
    match opts.get::<Value>(field)? {
        Value::Nil => Ok(None),
        Value::Function(f) => Ok(Some(f)),
        _ => Err(Error::BadInput(format!("{what}: opts.{field} must be a function")).into()),
    }
}

pub(super) fn request_options(lua: &Cx, value: &Value, what: &str) -> Outcome<RequestOptions> {
    let opts = match value {
        Value::Nil => return Ok(RequestOptions::default()),
        Value::Table(t) => t,
        _ => return Err(Error::BadInput(format!("{what}: opts must be a table")).into()),
    };
    let input_responses = match opts.get::<Value>("input_responses")? {
        Value::Nil => None,
        v @ Value::Table(_) => Some(encode_lua(lua, "opts.input_responses", &v)?),
        _ => return Err(Error::BadInput(format!("{what}: opts.input_responses must be a table")).into()),
    };
    let request_state = match opts.get::<Value>("request_state")? {
        Value::Nil => None,
        Value::String(s) => Some(Json::Str(s.as_bytes().to_vec())),
        _ => return Err(Error::BadInput(format!("{what}: opts.request_state must be a string")).into()),
    };
    Ok(RequestOptions {
        timeout: seconds_option(opts, "timeout", what)?,
        max_total: seconds_option(opts, "max_total_timeout", what)?,
        on_progress: function_option(opts, "on_progress", what)?,
        on_done: function_option(opts, "on_done", what)?,
        returns_input: word_option(opts, "input_required", "return", what)?,
        input_responses,
        request_state,
        returns_rpc_error: word_option(opts, "rpc_error", "return", what)?,
        cache: match opts.get::<Value>("cache")? {
            Value::Nil => CacheMode::Use,
            Value::String(s) if s.as_bytes().as_ref() == b"refresh" => CacheMode::Refresh,
            Value::String(s) if s.as_bytes().as_ref() == b"bypass" => CacheMode::Bypass,
            _ => return Err(Error::BadInput(format!("{what}: opts.cache must be \"refresh\" or \"bypass\"")).into()),
        },
        idempotent: match opts.get::<Value>("idempotent")? {
            Value::Nil => None,
            Value::Boolean(said) => Some(said),
            _ => return Err(Error::BadInput(format!("{what}: opts.idempotent must be a boolean")).into()),
        },
    })
}

/// An option that is absent or the one word it may be.
fn word_option(opts: &Table, field: &str, word: &str, what: &str) -> Outcome<bool> {
    match opts.get::<Value>(field)? {
        Value::Nil => Ok(false),
        Value::String(s) if s.as_bytes() == word.as_bytes() => Ok(true),
        _ => Err(Error::BadInput(format!("{what}: opts.{field} must be \"{word}\" or nil")).into()),
    }
}

/// A new handle for `client`, with its state.
fn new_handle(lua: &Cx, client: &Table, state: HandleState, on_done: Option<Function>) -> Outcome<Table> {
    let prelude = lua.prelude;
    let handle = lua.create_table()?;
    handle.set_metatable(Some(prelude.handle_methods.clone()))?;
    prelude.handle_states.raw_set(handle.clone(), lua.create_userdata(state)?)?;
    prelude.handle_clients.raw_set(handle.clone(), client.clone())?;
    if let Some(on_done) = on_done {
        Entry::existing(lua, client)?.pending_on_done(lua)?.raw_set(handle.clone(), on_done)?;
    }
    Ok(handle)
}

fn handle_arg(lua: &Cx, value: &Value, what: &str) -> Outcome<(Table, AnyUserData)> {
    let not_a_handle =
        || Raise::Mcp(Error::BadInput(format!("{what}: expected a handle from call_async or request_async")));
    let Value::Table(handle) = value else { return Err(not_a_handle()) };
    match lua.prelude.handle_states.raw_get::<Value>(handle.clone())? {
        Value::UserData(state) => Ok((handle.clone(), state)),
        _ => Err(not_a_handle()),
    }
}

pub(super) fn call_async(lua: &Cx, args: MultiValue) -> Outcome {
    let client = client_arg(&args, "call_async")?;
    let (name, call_args) = (arg(&args, 1), arg(&args, 2));
    let opts = request_options(lua, &arg(&args, 3), "client:call_async")?;
    let handle = match client.get::<Value>("transport")? {
        // A fixture answers at once: the handle is settled already.
        Value::Function(f) => {
            let returns = call_batch(lua, &client, f, &name, &call_args)?;
            let state = HandleState::new(None, Kind::Call, None);
            *state.settled.borrow_mut() = Some(Settled::Returns(returns.into_vec()));
            new_handle(lua, &client, state, opts.on_done)?
        }
        v if truthy(&v) => return Err(Error::BadInput("MCP: client.transport must be a function".into()).into()),
        _ => {
            let tool = tool_label(&name)?;
            let request = tool.request(call_params(lua, &client, &name, &call_args)?);
            start(lua, &client, request, Kind::Call, opts)?
        }
    };
    run_on_done_after_start(lua, &client, &handle)?;
    Ok(MultiValue::from_vec(vec![Value::Table(handle)]))
}

/// `client:discover_async([opts])`: `discover` without waiting. Its
/// handle settles once the tool list is in, and by then `client.tools`,
/// `server_info` and the rest are what `discover` leaves.
pub(super) fn discover_async(lua: &Cx, args: MultiValue) -> Outcome {
    let client = client_arg(&args, "discover_async")?;
    let opts = request_options(lua, &arg(&args, 1), "client:discover_async")?;
    let handle = match client.get::<Value>("transport")? {
        // A fixture answers at once: the handle is settled already.
        Value::Function(f) => {
            let returns = discover_batch(lua, &client, f)?;
            let state = HandleState::new(None, Kind::Discover, None);
            *state.settled.borrow_mut() = Some(Settled::Returns(returns.into_vec()));
            new_handle(lua, &client, state, opts.on_done)?
        }
        v if truthy(&v) => return Err(Error::BadInput("MCP: client.transport must be a function".into()).into()),
        _ => start(lua, &client, tool_listing(), Kind::Discover, opts)?,
    };
    run_on_done_after_start(lua, &client, &handle)?;
    Ok(MultiValue::from_vec(vec![Value::Table(handle)]))
}

pub(super) fn request_async(lua: &Cx, args: MultiValue) -> Outcome {
    let client = client_arg(&args, "request_async")?;
    let (method, params) = request_args(lua, &client, &args, "client:request_async")?;
    let opts = request_options(lua, &arg(&args, 3), "client:request_async")?;
    // The prelude's typed methods name a list to follow or a field to
    // return; a user's request_async returns the whole result.
    let (shape, kind) = surface::result_shape(&method, &arg(&args, 4))?;
    let request = Request::new(&method, params, Rc::from(method.as_str())).shape(shape);
    let handle = start(lua, &client, request, kind, opts)?;
    run_on_done_after_start(lua, &client, &handle)?;
    Ok(MultiValue::from_vec(vec![Value::Table(handle)]))
}

/// `client:request(method, params [, opts])`: the reply's result table.
pub(super) fn request(lua: &Cx, args: MultiValue) -> Outcome {
    let client = client_arg(&args, "request")?;
    let (method, params) = request_args(lua, &client, &args, "client:request")?;
    let opts = request_options(lua, &arg(&args, 3), "client:request")?;
    if opts.on_done.is_some() {
        return Err(Error::BadInput("client:request: opts.on_done is for request_async".into()).into());
    }
    let request = Request::new(&method, params, Rc::from(method.as_str()));
    let result = match with_client(lua, &client, |core, host| run_blocking(core, host, request, &opts)) {
        Err(Raise::Mcp(Error::Rpc { message, code, data, .. })) if opts.returns_rpc_error => {
            run_on_done(lua, &client)?;
            return Ok(MultiValue::from_vec(vec![
                Value::Nil,
                Value::Table(rpc_error_table(lua, &code, &message, data)?),
            ]));
        }
        other => other?,
    };
    run_on_done(lua, &client)?;
    Ok(MultiValue::from_vec(vec![to_lua(lua, &result)?]))
}

/// A JSON-RPC error as Lua reads it: `{code = N, message = S, data = ...}`.
fn rpc_error_table(lua: &Cx, code: &str, message: &str, data: Option<Box<Json>>) -> Outcome<Table> {
    let table = lua.create_table()?;
    match code.parse::<i64>() {
        Ok(n) => table.set("code", n)?,
        Err(_) => table.set("code", code)?,
    }
    table.set("message", message)?;
    if let Some(data) = data {
        table.set("data", to_lua(lua, &data)?)?;
    }
    Ok(table)
}

/// A blocking request: the async path, waited for at once, its progress
/// reported to `opts.on_progress` meanwhile.
pub(super) fn run_blocking(
    core: &mut Client,
    host: &mut LuaHost,
    request: Request,
    opts: &RequestOptions,
) -> Outcome<Json> {
    // With limits of its own, the transport must not cut it off at the
    // client's timeout: over HTTP its POST goes out as an async one does.
    let request = if opts.limited() { request.detached() } else { request };
    let mut op = core.start(host, opts.apply(request))?;
    let token = op.progress_token().cloned();
    if let (Some(on_progress), Some(token)) = (&opts.on_progress, &token) {
        host.watch_progress(token, on_progress.clone())?;
    }
    let outcome = core.finish(host, &mut op);
    if let Some(token) = &token {
        host.forget_progress(token);
    }
    outcome
}

/// The method (a string) and params (a table or nil) of `request`.
fn request_args(lua: &Cx, client: &Table, args: &MultiValue, what: &str) -> Outcome<(String, Json)> {
    if truthy(&client.get::<Value>("transport")?) {
        return Err(Error::BadInput(format!(
            "{what}: needs a command or url client (a fixture transport only runs discover and call)"
        ))
        .into());
    }
    let method = match arg(args, 1) {
        Value::String(s) => s.to_str()?.to_string(),
        other => {
            return Err(Error::BadInput(format!("{what}: the method must be a string, got {}", lua_type(&other))).into())
        }
    };
    let params = match arg(args, 2) {
        Value::Nil => Json::Object(vec![]),
        v @ Value::Table(_) => encode_lua(lua, "params", &v)?,
        other => {
            return Err(
                Error::BadInput(format!("{what}: params must be a table or nil, got {}", lua_type(&other))).into()
            )
        }
    };
    Ok((method, params))
}

fn start(lua: &Cx, client: &Table, request: Request, kind: Kind, opts: RequestOptions) -> Outcome<Table> {
    let (op, forgotten) = with_client_state(lua, client, "client:call_async", |core, host| {
        let op = core.start(host, opts.apply(request).asynchronous())?;
        if let (Some(on_progress), Some(token)) = (&opts.on_progress, op.progress_token()) {
            host.watch_progress(token, on_progress.clone())?;
        }
        Ok((op, host.forgotten.clone()))
    })?;
    let state = HandleState::new(Some(op), kind, Some(forgotten));
    new_handle(lua, client, state, opts.on_done)
}

/// What a settled handle returns: `call`'s values or `request`'s, or the
/// error to raise.
fn returns_of(lua: &Cx, state: &HandleState, client: Option<&Table>) -> Outcome<MultiValue> {
    let settled = state.settled.borrow();
    match &*settled {
        Some(Settled::Returns(values)) => Ok(MultiValue::from_vec(values.clone())),
        // Shown as `client.tools` once the listing was in, before any
        // callback could run.
        Some(Settled::Core(Ok(_))) if state.kind == Kind::Discover => {
            let tools = match client {
                Some(client) => client.get::<Value>("tools")?,
                None => Value::Nil,
            };
            Ok(MultiValue::from_vec(vec![tools]))
        }
        Some(Settled::Core(Ok(result))) => match (state.kind, result) {
            (Kind::Call, result) => call_return(lua, result.clone()),
            (Kind::Pages { field }, Json::Array(pages)) => {
                Ok(MultiValue::from_vec(vec![Value::Table(joined_field(lua, pages, field)?)]))
            }
            (_, result) => Ok(MultiValue::from_vec(vec![to_lua(lua, result)?])),
        },
        Some(Settled::Core(Err(e))) => Err(e.clone().into()),
        None => Ok(MultiValue::new()),
    }
}

/// Moves `state`'s request on, and takes its outcome from the core if it
/// has settled there.
fn take_if_settled(core: &mut Client, host: &mut LuaHost, state: &HandleState) -> bool {
    if state.settled.borrow().is_some() {
        return true;
    }
    let mut slot = state.op.borrow_mut();
    let Some(op) = slot.as_mut() else { return true };
    // Read before the outcome is taken, which ends its entry.
    let settled_as = core.settled_as(op);
    let outcome = match core.poll(host, op) {
        Ok(false) => return false,
        Ok(true) => op.take_outcome().unwrap_or_else(|| Err(Error::NoResponse { what: op.what().to_string() })),
        Err(Raise::Mcp(e)) => Err(e),
        // A login's callback raised: the caller hears of it (see
        // `callback_failed`), and the handle settles without a reply.
        Err(Raise::Lua(error)) => {
            callback_failed(error);
            Err(Error::NoResponse { what: op.what().to_string() })
        }
    };
    if let Some(token) = op.progress_token() {
        host.forget_progress(token);
    }
    drop(slot);
    state.settled_as.set(settled_as.unwrap_or(0));
    state.settle(outcome);
    true
}

/// Settles `state` for good when its client is gone.
fn settle_orphan(state: &HandleState) {
    if state.settled.borrow().is_some() {
        return;
    }
    state.settle(Err(Error::ClientCollected { what: state.what() }));
}

fn client_of(lua: &Cx, handle: &Table) -> Outcome<Option<Table>> {
    Ok(lua.prelude.handle_clients.raw_get(handle.clone())?)
}

/// `handle:wait([timeout])`: what `call` (or `request`) would return, or
/// nothing if `timeout` passes first (the request goes on).
pub(super) fn wait(lua: &Cx, args: MultiValue) -> Outcome {
    let (handle, state_ud) = handle_arg(lua, &arg(&args, 0), "handle:wait")?;
    let bound = wait_bound(&arg(&args, 1), "handle:wait")?;
    let state = state_ud.borrow::<HandleState>()?;
    if state.settled.borrow().is_none() {
        let Some(client) = client_of(lua, &handle)? else {
            settle_orphan(&state);
            return finish(lua, &handle, &state, None);
        };
        let until = deadline_after(bound);
        let settled = with_client_state(lua, &client, "handle:wait", |core, host| {
            let mut slot = state.op.borrow_mut();
            let Some(op) = slot.as_mut() else { return Ok(true) };
            if !core.wait(host, op, until)? {
                return Ok(false);
            }
            drop(slot);
            Ok(take_if_settled(core, host, &state))
        })?;
        if !settled {
            run_on_done(lua, &client)?;
            return Ok(MultiValue::new());
        }
        return finish(lua, &handle, &state, Some(&client));
    }
    let client = client_of(lua, &handle)?;
    finish(lua, &handle, &state, client.as_ref())
}

/// A settled handle's returns; its own `on_done` runs first (once), then
/// any other that became ready.
fn finish(lua: &Cx, handle: &Table, state: &HandleState, client: Option<&Table>) -> Outcome {
    if let Some(client) = client {
        let pending = Entry::existing(lua, client)?.pending_on_done(lua)?;
        if let Value::Function(on_done) = pending.raw_get::<Value>(handle.clone())? {
            if !callback_pending() {
                pending.raw_set(handle.clone(), Value::Nil)?;
                call_on_done(lua, on_done, state, client)?;
            }
        }
        run_on_done(lua, client)?;
    }
    returns_of(lua, state, client)
}

fn call_on_done(lua: &Cx, on_done: Function, state: &HandleState, client: &Table) -> Outcome<()> {
    let mut args = MultiValue::new();
    match returns_of(lua, state, Some(client)) {
        Ok(values) => {
            args.push_back(Value::Boolean(true));
            args.extend(values);
        }
        Err(Raise::Mcp(e)) => {
            args.push_back(Value::Boolean(false));
            args.push_back(Value::String(lua.create_string(e.to_string())?));
        }
        Err(Raise::Lua(v)) => {
            args.push_back(Value::Boolean(false));
            args.push_back(v);
        }
    }
    // Its error reaches whoever ran it (dispatch, wait, a call), once the
    // client is consistent: see `callback_failed`.
    if let Err(Raise::Lua(error)) = call_lua(lua, on_done, args) {
        callback_failed(error);
    }
    Ok(())
}

/// After an async request was made: the callbacks of what settled since
/// the last look, and the new handle's own if it settled at once. Every
/// pending handle was looked at after each request once, and 8,000
/// requests made while a slow server started took 13.5 s to make (0.36 s
/// on a ready session); with no request settled anywhere since the last
/// look, there is nothing new to find. (`dispatch` and the waits still
/// look at every handle: a state-only round that waits out its pause
/// settles with nothing arriving.)
fn run_on_done_after_start(lua: &Cx, client: &Table, handle: &Table) -> Outcome<()> {
    let Some(entry) = Entry::of(lua, client)? else { return Ok(()) };
    let unchanged = entry.settled_count_seen()? == Some(crate::session::settled_count());
    if unchanged {
        let Value::UserData(state) = lua.prelude.handle_states.raw_get::<Value>(handle.clone())? else { return Ok(()) };
        if !poll_handle(lua, handle, &state)? {
            return Ok(());
        }
    }
    run_on_done(lua, client).map(drop)
}

/// Runs the `on_done` of every handle of `client` that has settled, once
/// each. Called once the client is free, so callbacks may use it.
pub(super) fn run_on_done(lua: &Cx, client: &Table) -> Outcome<usize> {
    let Some(entry) = Entry::of(lua, client)? else { return Ok(0) };
    let Some(pending) = entry.pending_on_done_if_any()? else { return Ok(0) };
    // Read before looking: whatever settles from here on is looked for
    // next time.
    let settled_count = crate::session::settled_count();
    // The handles are kept in Lua lists rather than as Rust references:
    // Lua 5.1 and LuaJIT hold 8,000 of those at most (see `HandleList`).
    // Listed before any is looked at, since looking may run callbacks that
    // make new requests, which `pending` must not get during a traversal.
    let waiting = lua.create_table()?;
    let mut count = 0;
    for pair in pending.pairs::<Table, Value>() {
        let (handle, _) = pair?;
        count += 1;
        waiting.raw_set(count, handle)?;
    }
    if count == 0 {
        return Ok(0);
    }
    // The settled ones, with where each stood in the order requests
    // settled. (Busy: called from inside one of its own callbacks. Later,
    // then.)
    let ready = lua.create_table()?;
    let mut order: Vec<(u64, usize)> = Vec::new();
    let looked = with_client_state(lua, client, "on_done", |core, host| {
        for i in 1..=count {
            let handle: Table = waiting.raw_get(i)?;
            let Value::UserData(ud) = lua.prelude.handle_states.raw_get::<Value>(handle.clone())? else { continue };
            let state = ud.borrow::<HandleState>()?;
            if take_if_settled(core, host, &state) {
                order.push((state.settled_as.get(), order.len() + 1));
                ready.raw_set(order.len(), handle)?;
            }
        }
        Ok(())
    });
    if looked.is_err() {
        return Ok(0);
    }
    order.sort_by_key(|(settled_as, _)| *settled_as);
    // Each taken out of `pending` just before it runs, and only if still
    // there: a callback that calls the client runs the others itself.
    // After a callback raised, the rest stay pending for the next
    // dispatch or wait, and the bell rings so that an event loop calls
    // again: each runs once, and none is lost.
    let json_types = entry.json_types();
    let mut ran = 0;
    entry.set_settled_count_seen(Some(settled_count))?;
    for (_, at) in order {
        if callback_pending() {
            // The rest are looked for again by the next call, whatever it is.
            entry.set_settled_count_seen(None)?;
            ring_for_lua(lua, client)?;
            break;
        }
        let handle: Table = ready.raw_get(at)?;
        let Value::Function(on_done) = pending.raw_get::<Value>(handle.clone())? else { continue };
        let Value::UserData(ud) = lua.prelude.handle_states.raw_get::<Value>(handle.clone())? else { continue };
        pending.raw_set(handle, Value::Nil)?;
        let state = ud.borrow::<HandleState>()?;
        with_json_types(json_types, || call_on_done(lua, on_done, &state, client))?;
        ran += 1;
    }
    Ok(ran)
}

/// Rings the client's descriptor (`client:fd()`), if it was asked for:
/// something waits for Lua that no message will announce.
fn ring_for_lua(lua: &Cx, client: &Table) -> Outcome<()> {
    if let Some(entry) = Entry::of(lua, client)? {
        if let Ok(state) = entry.state()?.borrow::<ClientState>() {
            if let Some(bell) = state.options.doorbell.get() {
                bell.ring();
            }
        }
    }
    Ok(())
}

/// `handle:done()`: whether it has settled; reads what already arrived,
/// never waits.
pub(super) fn done(lua: &Cx, args: MultiValue) -> Outcome {
    let (handle, state_ud) = handle_arg(lua, &arg(&args, 0), "handle:done")?;
    let state = state_ud.borrow::<HandleState>()?;
    if state.settled.borrow().is_none() {
        match client_of(lua, &handle)? {
            None => settle_orphan(&state),
            Some(client) => {
                with_client_state(lua, &client, "handle:done", |core, host| {
                    drain(core, host)?;
                    take_if_settled(core, host, &state);
                    Ok(())
                })?;
                drop(state);
                run_on_done(lua, &client)?;
            }
        }
    }
    let state = state_ud.borrow::<HandleState>()?;
    let done = state.settled.borrow().is_some();
    Ok(MultiValue::from_vec(vec![Value::Boolean(done)]))
}

/// Routes what has already been received, without waiting: at most
/// [`DRAIN_LIMIT`] messages, so that a server which writes faster than its
/// callbacks run cannot keep an event loop's callback here. What is left
/// keeps the descriptor readable for the next turn.
fn drain(core: &mut Client, host: &mut LuaHost) -> Outcome<()> {
    for _ in 0..DRAIN_LIMIT {
        if !core.pump(host, Instant::now())? {
            break;
        }
    }
    Ok(())
}

const DRAIN_LIMIT: usize = 256;

/// `handle:cancel([reason])`: true if it was in flight and is now
/// cancelled; false if it had settled already.
pub(super) fn cancel(lua: &Cx, args: MultiValue) -> Outcome {
    let (handle, state_ud) = handle_arg(lua, &arg(&args, 0), "handle:cancel")?;
    let reason = match arg(&args, 1) {
        Value::Nil => "cancelled by the client".to_string(),
        Value::String(s) => s.to_str()?.to_string(),
        other => {
            return Err(Error::BadInput(format!(
                "handle:cancel: the reason must be a string, got {}",
                lua_type(&other)
            ))
            .into())
        }
    };
    let state = state_ud.borrow::<HandleState>()?;
    if state.settled.borrow().is_some() {
        return Ok(MultiValue::from_vec(vec![Value::Boolean(false)]));
    }
    let Some(client) = client_of(lua, &handle)? else {
        settle_orphan(&state);
        return Ok(MultiValue::from_vec(vec![Value::Boolean(false)]));
    };
    let cancelled = with_client_state(lua, &client, "handle:cancel", |core, host| {
        let mut slot = state.op.borrow_mut();
        let Some(op) = slot.as_mut() else { return Ok(false) };
        let cancelled = core.cancel(op, &reason);
        drop(slot);
        take_if_settled(core, host, &state);
        Ok(cancelled)
    })?;
    drop(state);
    run_on_done(lua, &client)?;
    Ok(MultiValue::from_vec(vec![Value::Boolean(cancelled)]))
}

/// The handles of `mcp.wait_any` / `mcp.wait_all`, in order, read from
/// their Lua list one at a time: Lua 5.1 and LuaJIT hold at most 8,000
/// values on the stack where Rust keeps its references, and a wait for
/// 8,000 handles that held them all ran out of it.
struct HandleList {
    list: Table,
    len: usize,
}

impl HandleList {
    /// Checks every item is a handle, naming the first that is not.
    fn read(lua: &Cx, value: &Value, what: &str) -> Outcome<HandleList> {
        let Value::Table(list) = value else {
            return Err(Error::BadInput(format!("{what}: expected a list of handles")).into());
        };
        let handles = HandleList { list: list.clone(), len: list.raw_len() };
        for i in 0..handles.len {
            handles.at(lua, i, what)?;
        }
        Ok(handles)
    }

    /// The `i`th handle (from 0) and its state.
    fn at(&self, lua: &Cx, i: usize, what: &str) -> Outcome<(Table, AnyUserData)> {
        let item = self.list.raw_get::<Value>(i + 1)?;
        handle_arg(lua, &item, what).map_err(|_| {
            Error::BadInput(format!("{what}: handles[{}] is not a handle from call_async or request_async", i + 1))
                .into()
        })
    }

    /// The clients of the handles, each once.
    fn clients(&self, lua: &Cx, what: &str) -> Outcome<Vec<Table>> {
        let mut clients: Vec<Table> = Vec::new();
        for i in 0..self.len {
            let (handle, _) = self.at(lua, i, what)?;
            if let Some(client) = client_of(lua, &handle)? {
                if !clients.iter().any(|c| c == &client) {
                    clients.push(client);
                }
            }
        }
        Ok(clients)
    }
}

/// Whether the handle has settled, taking its outcome if the core has it.
fn poll_handle(lua: &Cx, handle: &Table, state_ud: &AnyUserData) -> Outcome<bool> {
    let state = state_ud.borrow::<HandleState>()?;
    if state.settled.borrow().is_some() {
        return Ok(true);
    }
    let Some(client) = client_of(lua, handle)? else {
        settle_orphan(&state);
        return Ok(true);
    };
    with_client_state(lua, &client, "mcp.wait_any", |core, host| Ok(take_if_settled(core, host, &state)))
}

/// Waits for handles of one or more clients: one client's session is
/// waited on directly (the fast path: its reply wakes us with no detour);
/// several are watched through their doorbells at once.
fn wait_handles(lua: &Cx, args: &MultiValue, what: &str, all: bool) -> Outcome {
    let handles = HandleList::read(lua, &arg(args, 0), what)?;
    let until = deadline_after(wait_bound(&arg(args, 1), what)?);
    // For wait_all, the handles before this one have settled, and one
    // that has not is enough to go on waiting: looking at every handle on
    // every turn made a wait for thousands quadratic. Its clients are
    // then all those of the list.
    let mut first_unsettled = 0;
    let every_client = if all { handles.clients(lua, what)? } else { Vec::new() };
    loop {
        let mut unsettled_clients: Vec<Table> = Vec::new();
        let mut all_settled = true;
        let start = first_unsettled;
        for i in start..handles.len {
            if all && !all_settled {
                unsettled_clients = every_client.clone();
                break;
            }
            let (handle, state_ud) = handles.at(lua, i, what)?;
            if poll_handle(lua, &handle, &state_ud)? {
                if all {
                    first_unsettled = i + 1;
                }
                if !all {
                    for client in handles.clients(lua, what)? {
                        run_on_done(lua, &client)?;
                    }
                    return Ok(MultiValue::from_vec(vec![Value::Integer((i + 1) as _)]));
                }
                continue;
            }
            all_settled = false;
            if let Some(client) = client_of(lua, &handle)? {
                if !unsettled_clients.iter().any(|c| c == &client) {
                    unsettled_clients.push(client);
                }
            }
        }
        if all && all_settled {
            for client in handles.clients(lua, what)? {
                run_on_done(lua, &client)?;
            }
            return Ok(MultiValue::from_vec(vec![Value::Boolean(true)]));
        }
        if handles.len == 0 || Instant::now() >= until {
            return Ok(MultiValue::from_vec(vec![Value::Nil]));
        }
        if interrupt::requested() {
            return Err(Error::Interrupted { what: what.to_string() }.into());
        }
        let slice_end = until.min(Instant::now() + interrupt::SLICE);
        match unsettled_clients.as_slice() {
            [client] => {
                let pumped = with_client_state(lua, client, what, |core, host| core.pump(host, slice_end));
                match pumped {
                    Err(Raise::Mcp(Error::Interrupted { .. })) => {
                        return Err(Error::Interrupted { what: what.to_string() }.into())
                    }
                    other => {
                        other?;
                    }
                }
            }
            clients => {
                let mut bells = Vec::new();
                for client in clients {
                    let bell = with_client_state(lua, client, what, |core, host| {
                        let bell = host.options.doorbell()?;
                        bell.arm();
                        // What came before the bell was armed rang nothing.
                        drain(core, host)?;
                        bell.ring_at(core.next_deadline());
                        Ok(bell)
                    })?;
                    bells.push(bell);
                }
                let refs: Vec<&Doorbell> = bells.iter().map(|b| &**b).collect();
                Doorbell::wait_any(&refs, slice_end.saturating_duration_since(Instant::now()));
                for (client, bell) in clients.iter().zip(&bells) {
                    bell.clear();
                    with_client_state(lua, client, what, drain)?;
                }
            }
        }
    }
}

/// `mcp.wait_any(handles [, timeout])`: the index of a settled handle, or
/// nil at the timeout.
pub(super) fn wait_any(lua: &Cx, args: MultiValue) -> Outcome {
    wait_handles(lua, &args, "mcp.wait_any", false)
}

/// `mcp.wait_all(handles [, timeout])`: true once all have settled, or nil
/// at the timeout.
pub(super) fn wait_all(lua: &Cx, args: MultiValue) -> Outcome {
    wait_handles(lua, &args, "mcp.wait_all", true)
}

/// `client:fd()`: a descriptor that is readable whenever `dispatch` has
/// something to do.
pub(super) fn fd(lua: &Cx, args: MultiValue) -> Outcome {
    let client = client_arg(&args, "fd")?;
    if truthy(&client.get::<Value>("transport")?) {
        return Err(Error::BadInput(
            "client:fd: needs a command or url client (a fixture transport answers at once)".into(),
        )
        .into());
    }
    let fd = with_client_state(lua, &client, "client:fd", |core, host| {
        let bell = host.options.doorbell()?;
        let fd = bell.arm();
        bell.ring_at(core.next_deadline());
        Ok(fd)
    })?;
    Ok(MultiValue::from_vec(vec![Value::Integer(fd as _)]))
}

/// `client:dispatch()`: runs what is ready (on_notification, handlers,
/// on_done, timeouts) without waiting, and returns how many callbacks ran.
pub(super) fn dispatch(lua: &Cx, args: MultiValue) -> Outcome {
    let client = client_arg(&args, "dispatch")?;
    if truthy(&client.get::<Value>("transport")?) {
        return Ok(MultiValue::from_vec(vec![Value::Integer(0)]));
    }
    let Some(entry) = Entry::of(lua, &client)? else {
        return Err(Error::BadInput("MCP: this client was not made by mcp.new".into()).into());
    };
    if entry.dispatching()? {
        return Err(Error::Reentered { what: "client:dispatch()".into() }.into());
    }
    let mut ran = with_client_state(lua, &client, "client:dispatch()", |core, host| {
        let bell = host.options.doorbell.get().cloned();
        if let Some(bell) = &bell {
            bell.clear();
        }
        drain(core, host)?;
        // A tool list the server changed is listed again, without
        // waiting: an event loop's registry then follows without waiting
        // for the next call (it is updated once the listing is in).
        core.refresh_tools(host)?;
        if let Some(bell) = &bell {
            bell.ring_at(core.next_deadline());
        }
        Ok(host.ran)
    })?;
    entry.set_dispatching(true)?;
    let callbacks = run_on_done(lua, &client);
    entry.set_dispatching(false)?;
    ran += callbacks?;
    Ok(MultiValue::from_vec(vec![Value::Integer(ran as _)]))
}
