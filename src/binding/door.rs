//! The one door into the core. Every method that reaches a live client
//! borrows it here (with the Lua side it talks to, see `host`), reads its
//! per-request options here, and runs a blocking request here; and here
//! alone is it asked whether a client is a fixture or a live one
//! ([`Seam`]). A tool list the core listed meanwhile is shown as
//! `client.tools` once the client is free again.

use std::rc::Rc;
use std::time::{Duration, Instant};

use mlua::{Function, MultiValue, Table, Value};

use super::decode::to_lua;
use super::encode::{encode_call_params, encode_lua, named_entries};
use super::entry::Entry;
use super::fields::ToolName;
use super::host::{refresh_before_call, LuaHost};
use super::lua::{arg, lua_type, Cx, Outcome};
use super::options::{bearer_text, ClientState, TransportOptions};
use super::readers::Reader;
use super::registry::resync_watches;
use super::results::{joined_field, keep_safe_icons, tools_of_page};
use crate::client::{CacheMode, Client, Limits, Listing, Request, TaskAsk};
use crate::codec::{Json, Members};
use crate::error::Error;
/// Who borrows a client, for the refusal when it is borrowed already
/// (a call made from inside one of its own callbacks).
#[derive(Clone, Copy)]
pub(super) enum Borrower<'a> {
    /// A blocking method: the client is busy with the call that runs the
    /// callback.
    Method,
    /// The async API, a wait or dispatch, named in the refusal.
    Named(&'a str),
}

/// Runs `work` with the client core and the Lua side it talks to.
pub(super) fn with_client<T>(
    lua: &Cx,
    client: &Table,
    borrower: Borrower,
    work: impl FnOnce(&mut Client, &mut LuaHost) -> Outcome<T>,
) -> Outcome<T> {
    let busy = || match borrower {
        Borrower::Method => {
            Error::BadInput("MCP: the client is already busy (called again from on_notification or a handler?)".into())
        }
        Borrower::Named(what) => Error::Reentered { what: what.to_string() },
    };
    borrow_client(lua, client, busy, work)
}

/// A look at the client core that does without while the client is
/// busy (from inside one of its own callbacks) or was not made by
/// `mcp.new`: None then.
pub(super) fn peek<T>(
    lua: &Cx,
    client: &Table,
    look: impl FnOnce(&Client, &TransportOptions) -> T,
) -> Outcome<Option<T>> {
    let Some(entry) = Entry::of(lua, client)? else { return Ok(None) };
    let state = entry.state()?;
    let Ok(state) = state.borrow::<ClientState>() else { return Ok(None) };
    Ok(Some(look(&state.client, &state.options)))
}

/// [`peek`] for a change: the core and the options its transports are
/// opened with.
pub(super) fn peek_mut<T>(
    lua: &Cx,
    client: &Table,
    change: impl FnOnce(&mut Client, &mut TransportOptions) -> T,
) -> Outcome<Option<T>> {
    let Some(entry) = Entry::of(lua, client)? else { return Ok(None) };
    let state = entry.state()?;
    let Ok(mut state) = state.borrow_mut::<ClientState>() else { return Ok(None) };
    let ClientState { options, client: core, .. } = &mut *state;
    Ok(Some(change(core, options)))
}

fn borrow_client<T>(
    lua: &Cx,
    client: &Table,
    busy: impl FnOnce() -> Error,
    work: impl FnOnce(&mut Client, &mut LuaHost) -> Outcome<T>,
) -> Outcome<T> {
    let Some(entry) = Entry::of(lua, client)? else {
        return Err(Error::BadInput("MCP: this client was not made by mcp.new".into()).into());
    };
    let state_ud = entry.state()?;
    // A token managed elsewhere is asked for before each call, before the
    // client is borrowed (the function may look at the client).
    let fresh_token = match entry.token_function()? {
        Some(f) => match f.call::<Value>(())? {
            Value::String(token) => Some(bearer_text(&token.to_str()?, "the opts.auth.token function's answer")?),
            other => {
                let why = format!("mcp: the opts.auth.token function must return a string, got {}", lua_type(&other));
                return Err(Error::BadInput(why).into());
            }
        },
        None => None,
    };
    let mut state = state_ud.borrow_mut::<ClientState>().map_err(|_| busy())?;
    if let Some(token) = fresh_token {
        state.client.present_token(&token);
        *state.options.bearer.lock().unwrap_or_else(|p| p.into_inner()) = Some(token);
    }
    let ClientState { options, client: core, forgotten } = &mut *state;
    if let Some(login) = options.login.as_ref().and_then(|l| l.try_borrow_mut().ok()) {
        let mut login = login;
        if let Some(idle) = login.idle() {
            refresh_before_call(lua, &entry, idle)?;
        }
    }
    // Handles collected since the last call: nobody takes their outcome.
    let gone = std::mem::take(&mut *forgotten.borrow_mut());
    for ticket in &gone {
        core.forget(ticket);
    }
    let mut host = LuaHost {
        lua,
        table: client,
        options,
        forgotten,
        listeners: Default::default(),
        entry,
        collected: None,
        ran: 0,
    };
    let outcome = work(core, &mut host);
    // The bell rang for whatever this call took itself (a handshake's
    // reply, a blocking call's): an event loop woken for it would find
    // nothing. It stays rung only for what is still there.
    if let Some(bell) = options.doorbell.get().filter(|bell| bell.armed()) {
        bell.clear();
        let login_waits = options.login.as_ref().is_some_and(|l| l.try_borrow().is_ok_and(|l| l.wants_lua()));
        let settled_quietly = core.take_settled_quietly();
        if core.queued() || login_waits || settled_quietly {
            bell.ring();
        }
        bell.ring_at(core.next_deadline());
    }
    let listing = core.take_listing();
    drop(state);
    // The tool list, listed by this call or by the client itself: shown
    // once the client is free (a watched registry's callbacks may call it).
    if let Some(listing) = listing {
        show_tools(lua, client, listing)?;
    }
    outcome
}

/// `native.current_tool(client, name)`: the tool as the client last heard
/// of it, at the moment a mounted tool runs (its list listed again first
/// if the server said it changed), or nil when it no longer lists it.
/// What `approve` judges by.
pub(super) fn current_tool(lua: &Cx, args: MultiValue) -> Outcome {
    let (Value::Table(client), Value::String(name)) = (arg(&args, 0), arg(&args, 1)) else {
        return Ok(MultiValue::new());
    };
    if Seam::of(&client)?.is_live() && Entry::of(lua, &client)?.is_some() {
        with_client(lua, &client, Borrower::Method, |core, host| core.current_tools(host))?;
    }
    let Value::Table(tools) = client.get::<Value>("tools")? else { return Ok(MultiValue::new()) };
    for tool in tools.sequence_values::<Value>() {
        let Value::Table(tool) = tool? else { continue };
        if matches!(tool.get::<Value>("name")?, Value::String(s) if s.as_bytes() == name.as_bytes()) {
            return Ok(MultiValue::from_vec(vec![Value::Table(tool)]));
        }
    }
    Ok(MultiValue::new())
}

/// `tools/call` params for the tool `name` of `client`, its arguments
/// shaped by the tool's `inputSchema` where `discover` found one.
/// `tools/call` params for `name` (whose label `tool` is: for a string,
/// its bytes are read there, once).
pub(super) fn call_params(lua: &Cx, client: &Table, name: &Value, tool: &ToolName, args: &Value) -> Outcome<Json> {
    let schema = || match name {
        Value::String(_) => input_schema(lua, client, tool.bytes()),
        _ => Ok(None),
    };
    encode_call_params(lua, name, tool.bytes(), args, schema)
}

/// The `inputSchema` `discover` found for `tool` (none while the client
/// is busy: a call made from inside one of its own callbacks is refused
/// anyway).
pub(super) fn input_schema(lua: &Cx, client: &Table, tool: &[u8]) -> Outcome<Option<Rc<Json>>> {
    Ok(peek(lua, client, |core, _| core.input_schema(tool))?.flatten())
}

/// A tool list the core listed, as `client.tools`, in the shape the
/// reference gives it; a list the client listed again by itself also goes
/// to every watched registry.
pub(super) fn show_tools(lua: &Cx, client: &Table, listing: Listing) -> Outcome<()> {
    let pages = &listing.pages;
    let tools = if pages.len() == 1 {
        tools_of_page(lua, &to_lua(lua, &pages[0])?)?
    } else {
        Value::Table(joined_field(lua, pages, "tools")?)
    };
    if let Value::Table(tools) = &tools {
        keep_safe_icons(tools)?;
    }
    client.set("tools", tools)?;
    if listing.refreshed {
        resync_watches(lua, client)?;
    }
    Ok(())
}

/// A request's own options: `timeout` (seconds, as `mcp.new`'s) and
/// `on_done`.
#[derive(Default)]
pub(super) struct RequestOptions {
    timeout: Option<Duration>,
    max_total: Option<Duration>,
    pub(super) on_progress: Option<Function>,
    pub(super) on_done: Option<Function>,
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
    /// `opts.meta`: entries for the request's `params._meta` (a
    /// `traceparent`, a host's own ids).
    meta: Members,
    /// `opts.task`: a tool call that may run as a task.
    task: Option<TaskAsk>,
}

impl RequestOptions {
    pub(super) fn limits(&self) -> Limits {
        Limits { timeout: self.timeout, max_total: self.max_total, progress: self.on_progress.is_some() }
    }

    /// `request` as these options ask for it.
    pub(super) fn apply(&self, request: Request) -> Request {
        let request = request
            .limits(self.limits())
            .continuing(self.input_responses.clone(), self.request_state.clone())
            .cached(self.cache)
            .idempotent(self.idempotent)
            .meta(self.meta.clone())
            .task(self.task);
        if self.returns_input {
            request.returning_input()
        } else {
            request
        }
    }

    /// Whether the request has limits of its own beyond the client's timeout.
    pub(super) fn limited(&self) -> bool {
        self.timeout.is_some() || self.max_total.is_some() || self.on_progress.is_some()
    }
}

pub(super) fn request_options(lua: &Cx, value: &Value, what: &str) -> Outcome<RequestOptions> {
    let opts = match value {
        Value::Nil => return Ok(RequestOptions::default()),
        Value::Table(t) => t,
        _ => return Err(Error::BadInput(format!("{what}: opts must be a table")).into()),
    };
    let read = Reader::new(opts, what, "opts");
    let input_responses = match read.table("input_responses")? {
        Some(t) => Some(encode_lua(lua, "opts.input_responses", &Value::Table(t))?),
        None => None,
    };
    let request_state = read.string("request_state", "a string")?.map(|s| Json::Str(s.as_bytes().to_vec()));
    let meta = match read.table("meta")? {
        Some(t) => named_entries(lua, "opts.meta", &t)?
            .ok_or_else(|| Error::BadInput(format!("{what}: opts.meta must map _meta names to values")))?,
        None => Vec::new(),
    };
    Ok(RequestOptions {
        meta,
        task: task_ask(opts, what)?,
        timeout: read.seconds("timeout")?,
        max_total: read.seconds("max_total_timeout")?,
        on_progress: read.function("on_progress")?,
        on_done: read.function("on_done")?,
        returns_input: read.word("input_required", "return")?,
        input_responses,
        request_state,
        returns_rpc_error: read.word("rpc_error", "return")?,
        cache: match read.one_of("cache", &["refresh", "bypass"])? {
            None => CacheMode::Use,
            Some(0) => CacheMode::Refresh,
            Some(_) => CacheMode::Bypass,
        },
        idempotent: read.boolean("idempotent")?,
    })
}

/// `opts.task`: true, or `{ ttl = seconds }` (how long a 2025-11-25
/// server is asked to keep the task).
fn task_ask(opts: &Table, what: &str) -> Outcome<Option<TaskAsk>> {
    match opts.get::<Value>("task")? {
        Value::Nil | Value::Boolean(false) => Ok(None),
        Value::Boolean(true) => Ok(Some(TaskAsk::default())),
        Value::Table(t) => Ok(Some(TaskAsk { ttl: Reader::new(&t, what, "opts.task").seconds("ttl")? })),
        _ => Err(Error::BadInput(format!("{what}: opts.task must be true or a table ({{ ttl = seconds }})")).into()),
    }
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
pub(super) fn request_args(lua: &Cx, client: &Table, args: &MultiValue, what: &str) -> Outcome<(String, Json)> {
    if !Seam::of(client)?.is_live() {
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

/// Routes what has already been received, without waiting: at most
/// [`DRAIN_LIMIT`] messages, so that a server which writes faster than its
/// callbacks run cannot keep an event loop's callback here. What is left
/// keeps the descriptor readable for the next turn. True if anything
/// was routed.
pub(super) fn drain(core: &mut Client, host: &mut LuaHost) -> Outcome<bool> {
    let mut routed = false;
    for _ in 0..DRAIN_LIMIT {
        if !core.pump(host, Instant::now())? {
            break;
        }
        routed = true;
    }
    Ok(routed)
}

pub(super) const DRAIN_LIMIT: usize = 256;

/// Where a client's requests go, asked in this one place: the fixture
/// seam (`opts.transport`: the reference's batched exchange, byte for
/// byte, with a Lua function for a server) or a live session.
pub(super) enum Seam {
    /// The value of `client.transport`: a function, or something that
    /// is not one, which each method refuses in its own words.
    Fixture(Value),
    Live,
}

impl Seam {
    pub(super) fn of(client: &Table) -> Outcome<Seam> {
        Ok(Seam::read(client.get::<Value>("transport")?))
    }

    /// The seam `client.transport` (read as `client.transport` reads it,
    /// metamethods and all) makes.
    pub(super) fn read(transport: Value) -> Seam {
        match transport {
            Value::Nil | Value::Boolean(false) => Seam::Live,
            transport => Seam::Fixture(transport),
        }
    }

    pub(super) fn is_live(&self) -> bool {
        matches!(self, Seam::Live)
    }

    /// The fixture's function, for the methods the seam runs.
    pub(super) fn fixture(transport: Value) -> Outcome<Function> {
        match transport {
            Value::Function(f) => Ok(f),
            _ => Err(Error::BadInput("MCP: client.transport must be a function".into()).into()),
        }
    }
}
