//! `mcp.server`: Lua functions served as tools, resources and prompts.
//! The protocol is the core's (`crate::server`); here, what is Lua's: the
//! definitions read from Lua tables (`input_schema` as `inputSchema`), a
//! handler's return made into the protocol's result, the `ctx` a handler
//! gets, and the serving loop on the Lua thread, where every handler runs.
//!
//! What a handler returns, by what it answers:
//! - a tool: a string or number is its text; a table with `content` or
//!   `structuredContent` is the result as given; any other table is the
//!   structured content of a tool with an `output_schema` (and its JSON
//!   text), or the JSON text of one without; `nil, message` and
//!   `error(message)` are a result with `isError` and the message.
//! - a resource: a string is its text (bytes that are not UTF-8 go as a
//!   base64 blob); a table is one content item, or a list of them.
//! - a prompt: a string is one user message; a table is the result.

use std::cell::{Cell, RefCell};
use std::time::{Duration, Instant};

use base64::engine::general_purpose::STANDARD;
use base64::Engine;
use mlua::{Function, MultiValue, Table, UserData, Value};

use super::boundary::{callback_failed, is_interrupt};
use super::decode::to_lua;
use super::encode::encode_lua;
use super::lua::{arg, call_lua, lua_tostring, Cx, Outcome};
use super::readers::Reader;
use crate::codec::{encode, Json};
use crate::error::Error;
use crate::interrupt::{self, far_future};
use crate::protocol;
use crate::server::catalog::Kind;
use crate::server::channel::{Channel, Incoming, Unanswered};
use crate::server::link::Route;
use crate::server::stdio::Stdio;
use crate::server::{Answer, Call, Facts, Handlers, Server};

/// The longest line the server reads, unless `opts.max_message_bytes`
/// says otherwise.
const DEFAULT_MAX_MESSAGE_BYTES: usize = 16 << 20;

/// How long a handler waits for the client to answer the server's own
/// request (`ctx:elicit`, ...), unless `opts.request_timeout` says.
const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(300);

/// One handler and what shaping its return needs.
#[derive(Clone)]
struct Slot {
    function: Function,
    /// A tool with an output schema: a plain table is its structured content.
    structured: bool,
    /// A resource's (or template's) `uri` and `mimeType`, for its contents.
    mime_type: Option<Json>,
    /// A prompt's or template's `complete`: argument name -> list or function.
    complete: Option<Table>,
}

/// A server, kept in its Lua object as `_state`.
pub(super) struct ServerState {
    core: RefCell<Server>,
    slots: RefCell<Vec<Slot>>,
    /// Additions made while a request is being answered (a handler that
    /// adds a tool): applied once it is.
    deferred: RefCell<Vec<Change>>,
    channel: RefCell<Option<Channel>>,
    /// What the core knew of the client whose request is being answered
    /// (the core itself is busy meanwhile).
    facts: RefCell<Facts>,
    max_message_bytes: usize,
    request_timeout: Duration,
    closed: Cell<bool>,
}

enum Change {
    Add(Kind, Json, u64),
    Remove(Kind, Vec<u8>),
}

impl UserData for ServerState {}

/// `mcp.server(opts)`: name (required), version, title, instructions,
/// page_size, max_message_bytes, request_timeout.
pub(super) fn server_new(lua: &Cx, args: MultiValue) -> Outcome {
    let (Value::Table(opts), Value::Table(methods)) = (arg(&args, 0), arg(&args, 1)) else {
        return Err(
            Error::BadInput("mcp.server: opts must be a table, as mcp.server({ name = 'notes' })".into()).into()
        );
    };
    let read = Reader::new(&opts, "mcp.server", "opts");
    let Some(name) = read.text("name")? else {
        return Err(read.refuse("name", "a string: the server's name, which clients show"));
    };
    let mut info = vec![(b"name".to_vec(), Json::str(&name))];
    if let Some(title) = read.text("title")? {
        info.push((b"title".to_vec(), Json::str(title)));
    }
    info.push((b"version".to_vec(), Json::str(read.text("version")?.unwrap_or_else(|| "0.0.0".into()))));
    let instructions = read.text("instructions")?.map(Json::str);
    let mut core = Server::new(Json::Object(info), instructions);
    core.page_size =
        read.whole("page_size", 0.0, 1e6, "a whole number of items from 0 (no pages) up")?.unwrap_or(0) as usize;
    let max_message_bytes = read
        .whole(
            "max_message_bytes",
            1.0,
            super::options::MAX_MESSAGE_BYTES_LIMIT,
            "a whole number of bytes from 1 to 2^40",
        )?
        .map_or(DEFAULT_MAX_MESSAGE_BYTES, |n| n as usize);
    let state = ServerState {
        core: RefCell::new(core),
        slots: RefCell::new(Vec::new()),
        deferred: RefCell::new(Vec::new()),
        channel: RefCell::new(None),
        facts: RefCell::new(Facts::default()),
        max_message_bytes,
        request_timeout: read.seconds("request_timeout")?.unwrap_or(DEFAULT_REQUEST_TIMEOUT),
        closed: Cell::new(false),
    };
    let server = lua.create_table()?;
    server.raw_set("_state", lua.create_userdata(state)?)?;
    server.set_metatable(Some(methods))?;
    Ok(MultiValue::from_vec(vec![Value::Table(server)]))
}

fn state_of(server: &Value, what: &str) -> Outcome<mlua::AnyUserData> {
    let Value::Table(server) = server else {
        return Err(Error::BadInput(format!("mcp.server: call {what} with a colon, as server:{what}(...)")).into());
    };
    match server.raw_get::<Value>("_state")? {
        Value::UserData(ud) if ud.is::<ServerState>() => Ok(ud),
        _ => Err(Error::BadInput(format!("mcp.server: server:{what} needs a server made by mcp.server")).into()),
    }
}

/// The protocol's names for the keys a Lua definition may spell the Lua
/// way.
const RENAMED: [(&[u8], &[u8]); 5] = [
    (b"input_schema", b"inputSchema"),
    (b"output_schema", b"outputSchema"),
    (b"mime_type", b"mimeType"),
    (b"uri_template", b"uriTemplate"),
    (b"meta", b"_meta"),
];

/// A definition as clients list it: the table's fields, renamed, without
/// what is the binding's own (`complete`). A tool without an input schema
/// takes an object of anything, as the protocol requires one.
fn definition(lua: &Cx, kind: Kind, def: &Table) -> Outcome<Json> {
    let mut json = encode_lua(lua, "the definition", &Value::Table(def.clone()))?;
    json.materialize();
    let Json::Object(pairs) = &mut json else {
        return Err(Error::BadInput("mcp.server: a definition must be a table of fields".into()).into());
    };
    pairs.retain(|(k, _)| k != b"complete");
    for (key, _) in pairs.iter_mut() {
        if let Some((_, to)) = RENAMED.iter().find(|(from, _)| from == key) {
            *key = to.to_vec();
        }
    }
    if kind == Kind::Tool && !pairs.iter().any(|(k, _)| k == b"inputSchema") {
        pairs.push((b"inputSchema".to_vec(), Json::object([("type", Json::str("object"))])));
    }
    pairs.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(json)
}

fn kind_named(name: &Value) -> Outcome<Kind> {
    let Value::String(name) = name else { return Err(Error::BadInput("mcp.server: unknown kind".into()).into()) };
    Ok(match &*name.as_bytes() {
        b"tool" => Kind::Tool,
        b"resource" => Kind::Resource,
        b"resource_template" => Kind::Template,
        b"prompt" => Kind::Prompt,
        _ => {
            let why = "mcp.server: the kind must be \"tool\", \"resource\", \"resource_template\" or \"prompt\"";
            return Err(Error::BadInput(why.into()).into());
        }
    })
}

/// `server:tool(def, fn)` and its kin (`native.server_add(server, kind,
/// def, fn)`).
pub(super) fn server_add(lua: &Cx, args: MultiValue) -> Outcome {
    let kind = kind_named(&arg(&args, 1))?;
    let what = match kind {
        Kind::Tool => "tool",
        Kind::Resource => "resource",
        Kind::Template => "resource_template",
        Kind::Prompt => "prompt",
    };
    let ud = state_of(&arg(&args, 0), what)?;
    let state = ud.borrow::<ServerState>()?;
    let (Value::Table(def), Value::Function(function)) = (arg(&args, 2), arg(&args, 3)) else {
        return Err(Error::BadInput(format!(
            "server:{what}: pass its definition (a table) and its handler (a function)"
        ))
        .into());
    };
    let wire = definition(lua, kind, &def)?;
    let complete = match def.get::<Value>("complete")? {
        Value::Nil => None,
        Value::Table(t) => Some(t),
        _ => return Err(Error::BadInput(format!("server:{what}: complete must be a table of argument names")).into()),
    };
    let structured = wire.get("outputSchema").is_some();
    let mime_type = wire.get("mimeType").cloned();
    let mut slots = state.slots.borrow_mut();
    let handler = slots.len() as u64;
    slots.push(Slot { function, structured, mime_type, complete });
    drop(slots);
    let change = Change::Add(kind, wire, handler);
    apply(&state, change).map_err(|why| Error::BadInput(format!("server:{what}: {why}")))?;
    Ok(MultiValue::new())
}

/// `server:remove(kind, name)`: true if there was one.
pub(super) fn server_remove(_lua: &Cx, args: MultiValue) -> Outcome {
    let ud = state_of(&arg(&args, 0), "remove")?;
    let state = ud.borrow::<ServerState>()?;
    let kind = kind_named(&arg(&args, 1))?;
    let Value::String(key) = arg(&args, 2) else {
        return Err(Error::BadInput("server:remove: pass the kind and the name (or uri) to remove".into()).into());
    };
    let change = Change::Remove(kind, key.as_bytes().to_vec());
    let removed = apply(&state, change).map_err(Error::BadInput)?;
    Ok(MultiValue::from_vec(vec![Value::Boolean(removed)]))
}

/// Applies a change now, or once the request being answered is: false
/// only for a removal of nothing.
fn apply(state: &ServerState, change: Change) -> Result<bool, String> {
    let Ok(mut core) = state.core.try_borrow_mut() else {
        state.deferred.borrow_mut().push(change);
        return Ok(true);
    };
    match change {
        Change::Add(kind, wire, handler) => core.add(kind, wire, handler).map(|()| true),
        Change::Remove(kind, key) => Ok(core.remove(kind, &key)),
    }
}

/// `server:resource_updated(uri)`: subscribers hear of it.
pub(super) fn server_resource_updated(_lua: &Cx, args: MultiValue) -> Outcome {
    let ud = state_of(&arg(&args, 0), "resource_updated")?;
    let state = ud.borrow::<ServerState>()?;
    let Value::String(uri) = arg(&args, 1) else {
        return Err(Error::BadInput("server:resource_updated: pass the resource's uri".into()).into());
    };
    state.core.borrow_mut().resource_updated(&uri.as_bytes());
    send_notices(&state)?;
    Ok(MultiValue::new())
}

/// `server:serve_stdio()`: serves over this process's stdin and stdout
/// until stdin ends (true), Ctrl-C, or `server:close()`.
pub(super) fn serve_stdio(lua: &Cx, args: MultiValue) -> Outcome {
    let server = arg(&args, 0);
    let ud = state_of(&server, "serve_stdio")?;
    let state = ud.borrow::<ServerState>()?;
    if state.channel.borrow().is_some() {
        return Err(Error::BadInput("server:serve_stdio: this server is serving already".into()).into());
    }
    let stdio = Stdio::open(state.max_message_bytes).map_err(|e| Error::Lua(format!("server:serve_stdio: {e}")))?;
    *state.channel.borrow_mut() = Some(Channel::new(Box::new(stdio), state.request_timeout));
    state.closed.set(false);
    let Value::Table(server) = server else { unreachable!("state_of checked it") };
    let served = serve_until(lua, &server, &state, "server:serve_stdio()", far_future());
    // Stdout is itself again once the channel is gone.
    state.channel.borrow_mut().take();
    served.map(|_| MultiValue::from_vec(vec![Value::Boolean(true)]))
}

/// What one turn of serving found.
#[derive(PartialEq)]
pub(super) enum Turn {
    Served,
    Idle,
    /// The transport ended, or the server was closed.
    Over,
}

/// Serves until the transport ends or the server is closed (Over), or
/// `until` passes (Idle); Ctrl-C ends it as an interruption of `what`.
pub(super) fn serve_until(lua: &Cx, server: &Table, state: &ServerState, what: &str, until: Instant) -> Outcome<Turn> {
    loop {
        match serve_one(lua, server, state, what, until)? {
            Turn::Served => {}
            Turn::Idle if Instant::now() < until => {}
            done => return Ok(done),
        }
    }
}

/// Takes one message (waiting until `until` at most) and answers it.
pub(super) fn serve_one(lua: &Cx, server: &Table, state: &ServerState, what: &str, until: Instant) -> Outcome<Turn> {
    if state.closed.get() {
        return Ok(Turn::Over);
    }
    if interrupt::requested() {
        return Err(Error::Interrupted { what: what.into() }.into());
    }
    let incoming = {
        let mut channel = state.channel.borrow_mut();
        let Some(channel) = channel.as_mut() else { return Ok(Turn::Over) };
        channel.next(until).map_err(io_error)?
    };
    let (message, route) = match incoming {
        Incoming::Message(message, route) => (message, route),
        Incoming::Gone(peer) => {
            state.core.borrow_mut().forget(peer);
            return Ok(Turn::Served);
        }
        Incoming::Nothing => return Ok(Turn::Idle),
        Incoming::Ended => return Ok(Turn::Over),
    };
    // A reply to a request of ours that nobody waits for any more.
    let is_reply = message.get("result").is_some() || message.get("error").is_some();
    if message.get("method").is_none() && is_reply {
        return Ok(Turn::Served);
    }
    *state.facts.borrow_mut() = state.core.borrow().facts(route.peer);
    let reply = {
        let mut handlers = LuaHandlers { lua, server, state, route };
        let mut core = state.core.borrow_mut();
        core.handle(route.peer, &message, &mut handlers)
    };
    for change in state.deferred.take() {
        apply(state, change).map_err(Error::BadInput)?;
    }
    if let (Some(reply), Some(id)) = (reply, message.get("id")) {
        if let Some(channel) = state.channel.borrow_mut().as_mut() {
            // A client that is gone ends serving at its next read.
            let _ = channel.finish(route, id, &reply);
        }
    }
    send_notices(state)?;
    if interrupt::requested() {
        return Err(Error::Interrupted { what: what.into() }.into());
    }
    Ok(Turn::Served)
}

fn io_error(e: std::io::Error) -> Error {
    Error::Lua(format!("mcp.server: {e}"))
}

fn send(state: &ServerState, route: Route, message: &Json) -> Outcome<()> {
    if let Some(channel) = state.channel.borrow_mut().as_mut() {
        // A client that is gone ends serving at its next read.
        let _ = channel.send(route, message);
    }
    Ok(())
}

fn send_notices(state: &ServerState) -> Outcome<()> {
    if state.channel.borrow().is_none() {
        return Ok(());
    }
    let owed = state.core.borrow().owed();
    for peer in owed {
        let notices = state.core.borrow_mut().take_notices(peer);
        for notice in &notices {
            send(state, Route::unasked(peer), notice)?;
        }
    }
    Ok(())
}

/// `server:close()`: serving ends at its next turn.
pub(super) fn server_close(_lua: &Cx, args: MultiValue) -> Outcome {
    let ud = state_of(&arg(&args, 0), "close")?;
    ud.borrow::<ServerState>()?.closed.set(true);
    Ok(MultiValue::new())
}

/// The holder's handlers, called on the Lua thread.
struct LuaHandlers<'a, 'b> {
    lua: &'a Cx<'b>,
    server: &'a Table,
    state: &'a ServerState,
    /// Where the request came from, for what its handler sends.
    route: Route,
}

impl LuaHandlers<'_, '_> {
    /// Taken out of the list: the handler may add to it while it runs.
    fn slot(&self, handler: u64) -> Option<Slot> {
        self.state.slots.borrow().get(handler as usize).cloned()
    }

    /// The `ctx` a handler gets (see the prelude's `Context`).
    fn context(&self, call: &Call) -> Outcome<Table> {
        let ctx = self.lua.create_table()?;
        ctx.raw_set("server", self.server.clone())?;
        ctx.raw_set("request_id", to_lua(self.lua, call.id)?)?;
        ctx.raw_set("_peer", self.route.peer)?;
        ctx.raw_set("_exchange", self.route.exchange)?;
        if let Some(meta) = call.meta {
            ctx.raw_set("meta", to_lua(self.lua, meta)?)?;
        }
        if let Some(token) = call.progress_token {
            ctx.raw_set("progress_token", to_lua(self.lua, token)?)?;
        }
        let context: Value = self.lua.prelude.module.raw_get("_Context")?;
        if let Value::Table(methods) = context {
            ctx.set_metatable(Some(methods))?;
        }
        Ok(ctx)
    }

    /// Runs a handler: its returns, or its failure in words for the client.
    fn run(&self, function: Function, args: MultiValue) -> Result<MultiValue, String> {
        match call_lua(self.lua, function, args) {
            Ok(returns) => match (returns.front(), returns.get(1)) {
                (Some(Value::Nil) | None, Some(why)) if !why.is_nil() => Err(self.words(why.clone())),
                _ => Ok(returns),
            },
            Err(super::lua::Raise::Lua(error)) => {
                if is_interrupt(&error) {
                    interrupt::request();
                    callback_failed(error.clone());
                }
                Err(self.words(error))
            }
            Err(super::lua::Raise::Mcp(e)) => Err(e.to_string()),
        }
    }

    fn words(&self, value: Value) -> String {
        String::from_utf8_lossy(&lua_tostring(self.lua, value).unwrap_or_default()).into_owned()
    }

    fn answer(&self, shaped: Outcome<Json>) -> Answer {
        match shaped {
            Ok(result) => Answer::Result(result),
            Err(super::lua::Raise::Mcp(e)) => Answer::Failed(e.to_string()),
            Err(super::lua::Raise::Lua(v)) => Answer::Failed(self.words(v)),
        }
    }
}

impl Handlers for LuaHandlers<'_, '_> {
    fn call_tool(&mut self, handler: u64, arguments: Json, call: &Call) -> Answer {
        let Some(Slot { function, structured, .. }) = self.slot(handler) else { return Answer::Failed("gone".into()) };
        let run = || -> Outcome<Result<MultiValue, String>> {
            let args = to_lua(self.lua, &arguments)?;
            let ctx = self.context(call)?;
            Ok(self.run(function, MultiValue::from_vec(vec![args, Value::Table(ctx)])))
        };
        match run() {
            Ok(Ok(returns)) => {
                self.answer(tool_result(self.lua, returns.front().cloned().unwrap_or(Value::Nil), structured))
            }
            Ok(Err(why)) => Answer::Failed(why),
            Err(e) => self.answer(Err(e)),
        }
    }

    fn read_resource(&mut self, handler: u64, uri: &[u8], variables: Option<Json>, call: &Call) -> Answer {
        let Some(Slot { function, mime_type, .. }) = self.slot(handler) else { return Answer::Failed("gone".into()) };
        let run = || -> Outcome<Result<MultiValue, String>> {
            let mut args = vec![Value::String(self.lua.create_string(uri)?)];
            if let Some(vars) = &variables {
                args.push(to_lua(self.lua, vars)?);
            }
            args.push(Value::Table(self.context(call)?));
            Ok(self.run(function, MultiValue::from_vec(args)))
        };
        match run() {
            Ok(Ok(returns)) => {
                let value = returns.front().cloned().unwrap_or(Value::Nil);
                self.answer(resource_contents(self.lua, value, uri, mime_type.as_ref()))
            }
            Ok(Err(why)) => Answer::Failed(why),
            Err(e) => self.answer(Err(e)),
        }
    }

    fn get_prompt(&mut self, handler: u64, arguments: Json, call: &Call) -> Answer {
        let Some(Slot { function, .. }) = self.slot(handler) else { return Answer::Failed("gone".into()) };
        let run = || -> Outcome<Result<MultiValue, String>> {
            let args = to_lua(self.lua, &arguments)?;
            let ctx = self.context(call)?;
            Ok(self.run(function, MultiValue::from_vec(vec![args, Value::Table(ctx)])))
        };
        match run() {
            Ok(Ok(returns)) => self.answer(prompt_result(self.lua, returns.front().cloned().unwrap_or(Value::Nil))),
            Ok(Err(why)) => Answer::Failed(why),
            Err(e) => self.answer(Err(e)),
        }
    }

    fn complete(&mut self, handler: u64, argument: &[u8], value: &[u8], context: Option<&Json>) -> Answer {
        let Some(Slot { complete, .. }) = self.slot(handler) else { return Answer::Result(Json::Array(vec![])) };
        let run = || -> Outcome<Json> {
            let Some(complete) = complete else { return Ok(Json::Array(vec![])) };
            let candidates = match complete.get::<Value>(self.lua.create_string(argument)?)? {
                Value::Function(f) => {
                    let context = match context {
                        Some(c) => to_lua(self.lua, c)?,
                        None => Value::Nil,
                    };
                    let returned = call_lua(self.lua, f, (self.lua.create_string(value)?, context))?;
                    returned.front().cloned().unwrap_or(Value::Nil)
                }
                Value::Table(list) => {
                    // A plain list: the candidates that start with what was typed.
                    let out = self.lua.create_table()?;
                    for item in list.sequence_values::<Value>() {
                        if let Value::String(s) = item? {
                            if s.as_bytes().starts_with(value) {
                                out.raw_set(out.raw_len() + 1, s)?;
                            }
                        }
                    }
                    Value::Table(out)
                }
                _ => Value::Nil,
            };
            match candidates {
                Value::Nil => Ok(Json::Array(vec![])),
                v => encode_lua(self.lua, "the completion", &v),
            }
        };
        self.answer(run())
    }
}

fn text_item(text: Vec<u8>) -> Json {
    Json::Object(vec![(b"type".to_vec(), Json::str("text")), (b"text".to_vec(), Json::Str(text))])
}

fn plain_text(lua: &Cx, value: &Value) -> Outcome<Option<Vec<u8>>> {
    Ok(match value {
        Value::String(s) => Some(s.as_bytes().to_vec()),
        Value::Integer(_) | Value::Number(_) | Value::Boolean(_) => Some(lua_tostring(lua, value.clone())?),
        _ => None,
    })
}

/// A tool handler's return as the protocol's result (see the header).
fn tool_result(lua: &Cx, value: Value, structured: bool) -> Outcome<Json> {
    if let Some(text) = plain_text(lua, &value)? {
        return Ok(Json::object([("content", Json::Array(vec![text_item(text)]))]));
    }
    let Value::Table(table) = &value else {
        return Ok(Json::object([("content", Json::Array(vec![]))]));
    };
    let plain = table.raw_get::<Value>("content")?.is_nil() && table.raw_get::<Value>("structuredContent")?.is_nil();
    let json = encode_lua(lua, "the tool's result", &value)?;
    if !plain {
        let mut result = json;
        result.materialize();
        if result.get("content").is_none() {
            if let Json::Object(pairs) = &mut result {
                let text = result_text(pairs.iter().find(|(k, _)| k == b"structuredContent").map(|(_, v)| v));
                pairs.push((b"content".to_vec(), Json::Array(vec![text_item(text)])));
            }
        }
        return Ok(result);
    }
    let text = encode(&json);
    let mut result = vec![(b"content".to_vec(), Json::Array(vec![text_item(text)]))];
    if structured {
        result.push((b"structuredContent".to_vec(), json));
    }
    Ok(Json::Object(result))
}

fn result_text(value: Option<&Json>) -> Vec<u8> {
    value.map(encode).unwrap_or_default()
}

/// A resource handler's return as `contents`.
fn resource_contents(lua: &Cx, value: Value, uri: &[u8], mime_type: Option<&Json>) -> Outcome<Json> {
    let item = |mut pairs: Vec<(Vec<u8>, Json)>| {
        if !pairs.iter().any(|(k, _)| k == b"uri") {
            pairs.push((b"uri".to_vec(), Json::Str(uri.to_vec())));
        }
        if let (Some(mime), false) = (mime_type, pairs.iter().any(|(k, _)| k == b"mimeType")) {
            pairs.push((b"mimeType".to_vec(), mime.clone()));
        }
        pairs.sort_by(|a, b| a.0.cmp(&b.0));
        Json::Object(pairs)
    };
    if let Value::String(s) = &value {
        let bytes = s.as_bytes().to_vec();
        let field = match std::str::from_utf8(&bytes) {
            Ok(_) => (b"text".to_vec(), Json::Str(bytes)),
            Err(_) => (b"blob".to_vec(), Json::str(STANDARD.encode(&bytes))),
        };
        return Ok(Json::Array(vec![item(vec![field])]));
    }
    let Value::Table(table) = &value else {
        return Err(Error::BadInput("the resource handler returned neither a string nor a table".into()).into());
    };
    let mut json = encode_lua(lua, "the resource", &value)?;
    json.materialize();
    let items: Vec<Json> = match json {
        Json::Array(items) => items,
        Json::Object(_) if table.raw_len() == 0 => vec![json],
        other => vec![other],
    };
    Ok(Json::Array(
        items
            .into_iter()
            .map(|mut one| {
                one.materialize();
                match one {
                    Json::Object(pairs) => item(pairs),
                    other => other,
                }
            })
            .collect(),
    ))
}

/// A prompt handler's return as the result of `prompts/get`.
fn prompt_result(lua: &Cx, value: Value) -> Outcome<Json> {
    if let Some(text) = plain_text(lua, &value)? {
        let message = Json::Object(vec![(b"content".to_vec(), text_item(text)), (b"role".to_vec(), Json::str("user"))]);
        return Ok(Json::object([("messages", Json::Array(vec![message]))]));
    }
    encode_lua(lua, "the prompt", &value)
}

/// `ctx:notify(method, params)` for `ctx:progress` and `ctx:log` (the
/// prelude builds them): sent now, as the handler runs. A log message
/// below the level the client set is not sent.
pub(super) fn ctx_notify(lua: &Cx, args: MultiValue) -> Outcome {
    let (ud, route) = context_of(&arg(&args, 0), "notify")?;
    let state = ud.borrow::<ServerState>()?;
    let Value::String(method) = arg(&args, 1) else {
        return Err(Error::BadInput("ctx: the notification's method must be a string".into()).into());
    };
    let params = encode_lua(lua, "params", &arg(&args, 2))?;
    if &*method.as_bytes() == b"notifications/message" {
        let level = match params.get("level") {
            Some(Json::Str(level)) => String::from_utf8_lossy(level).into_owned(),
            _ => String::new(),
        };
        if !crate::server::LOG_LEVELS.contains(&level.as_str()) {
            let why = format!("ctx:log: the level must be one of {}", crate::server::LOG_LEVELS.join(", "));
            return Err(Error::BadInput(why).into());
        }
        if !facts(&state, route).logs(&level) {
            return Ok(MultiValue::new());
        }
    }
    send(&state, route, &protocol::notification(&method.to_str()?, Some(params)))?;
    Ok(MultiValue::new())
}

/// The server and the route of a handler's `ctx`.
fn context_of(ctx: &Value, what: &str) -> Outcome<(mlua::AnyUserData, Route)> {
    let Value::Table(ctx) = ctx else {
        return Err(Error::BadInput(format!("ctx:{what}: call it with a colon, as ctx:{what}(...)")).into());
    };
    let ud = state_of(&ctx.raw_get::<Value>("server")?, what)?;
    let peer = ctx.raw_get::<Option<u64>>("_peer")?.unwrap_or(0);
    let exchange = ctx.raw_get::<Option<u64>>("_exchange")?.unwrap_or(0);
    Ok((ud, Route { peer, exchange }))
}

/// What the core knows of the client on `route`: asked of it when it is
/// free, else what it knew when the request being answered came in (the
/// level and capabilities were set by earlier requests, so they hold).
fn facts(state: &ServerState, route: Route) -> Facts {
    match state.core.try_borrow() {
        Ok(core) => core.facts(route.peer),
        Err(_) => state.facts.borrow().clone(),
    }
}

/// `ctx:cancelled()`: whether the client cancelled this request.
pub(super) fn ctx_cancelled(lua: &Cx, args: MultiValue) -> Outcome {
    let (ud, route) = context_of(&arg(&args, 0), "cancelled")?;
    let state = ud.borrow::<ServerState>()?;
    let id = encode_lua(lua, "the request id", &arg(&args, 1))?;
    let cancelled = match state.channel.borrow_mut().as_mut() {
        Some(channel) => channel.cancelled(route, &id).map_err(io_error)?,
        None => false,
    };
    Ok(MultiValue::from_vec(vec![Value::Boolean(cancelled)]))
}

/// `ctx:request(method, params)`: asks the client (elicitation, sampling,
/// roots) and returns its result; nil and why when it would not answer.
pub(super) fn ctx_request(lua: &Cx, args: MultiValue) -> Outcome {
    let (ud, route) = context_of(&arg(&args, 0), "request")?;
    let state = ud.borrow::<ServerState>()?;
    let Value::String(method) = arg(&args, 1) else {
        return Err(Error::BadInput("ctx:request: the method must be a string".into()).into());
    };
    let method = method.to_str()?.to_string();
    let params = match arg(&args, 2) {
        Value::Nil => Json::Object(vec![]),
        v => encode_lua(lua, "params", &v)?,
    };
    let needs = protocol::capability_for(&method);
    if let Some(capability) = needs {
        if !facts(&state, route).can(capability) {
            return refused(lua, format!("ctx:request: the client did not declare the {capability} capability, so it cannot be asked {method}"));
        }
    }
    let answered = match state.channel.borrow_mut().as_mut() {
        Some(channel) => channel.request(route, &method, params),
        None => return refused(lua, format!("ctx:request: {method} needs a client: the server is not serving")),
    };
    match answered {
        Ok(result) => Ok(MultiValue::from_vec(vec![to_lua(lua, &result)?])),
        Err(Unanswered::Interrupted) => Err(Error::Interrupted { what: format!("ctx:request {method}") }.into()),
        Err(Unanswered::Refused(code, message)) => {
            refused(lua, format!("the client refused {method}: {message} (code {code})"))
        }
        Err(Unanswered::TimedOut(after)) => refused(
            lua,
            format!("the client did not answer {method} within {} s (opts.request_timeout)", after.as_secs_f64()),
        ),
        Err(Unanswered::Ended) => refused(lua, format!("the client went away before it answered {method}")),
        Err(Unanswered::Io(e)) => refused(lua, format!("{method} could not be sent: {e}")),
    }
}

fn refused(lua: &Cx, why: String) -> Outcome {
    Ok(MultiValue::from_vec(vec![Value::Nil, Value::String(lua.create_string(why)?)]))
}
