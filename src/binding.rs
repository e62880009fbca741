//! The Lua binding: the only file that touches mlua.
//!
//! The client is a plain Lua table with the reference's fields, so agents
//! that read `client.tools` or set `client.prefix` keep working. What the
//! table cannot hold (a live server process, an HTTP session, the native
//! options) lives in a userdata kept in a weak-keyed table beside it: when
//! the client is collected, so is its session, and the server is stopped.
//!
//! User code (a fixture transport, a registry, `on_notification`) is called
//! through Lua's own `pcall`, so an error it raises comes back as the very
//! value it raised and is re-raised unchanged, as the reference would let
//! it propagate.

use std::cell::OnceCell;
use std::ffi::c_void;
use std::rc::Rc;
use std::time::Duration;

use mlua::{AnyUserData, Function, IntoLuaMulti, Lua, MultiValue, Table, UserData, Value};

use crate::codec::{self, format_float, lua_float_text, Json};
use crate::error::Error;
use crate::mount;
use crate::protocol::{self, call_outcome, result_of, Replies, SUPPORTED_VERSIONS};
use crate::session::Session;
use crate::transport::http::{self, Http};
use crate::transport::stdio::{self, Launch, Stdio};
use crate::transport::Transport;

/// Why a native function did not return normally.
enum Raise {
    /// One of our errors: raised as its message.
    Mcp(Error),
    /// A value user code raised: raised again as it is.
    Lua(Value),
}

impl From<Error> for Raise {
    fn from(e: Error) -> Self {
        Raise::Mcp(e)
    }
}

impl From<mlua::Error> for Raise {
    fn from(e: mlua::Error) -> Self {
        Raise::Mcp(Error::from(e))
    }
}

type Outcome<T = MultiValue> = std::result::Result<T, Raise>;

/// What the prelude hands over once: the module's own tables and the Lua
/// functions the binding must call un-overridden.
struct Glue {
    module: Table,
    client_methods: Table,
    runner: Function,
    pcall: Function,
    tostring: Function,
    /// client table -> { ClientState userdata, on_notification }, weak keys.
    states: Table,
}

/// Opens the module on `lua`; `luaopen_mcp` calls this, and so do the
/// cargo tests on an in-process Lua.
pub fn open(lua: &Lua) -> mlua::Result<Table> {
    // Each loaded copy of the module has its own glue, so two copies in
    // one state (a test loading it afresh) never share client states.
    let cell: Rc<OnceCell<Glue>> = Rc::new(OnceCell::new());
    let native = lua.create_table()?;
    native.set("new", export(lua, &cell, new)?)?;
    native.set("discover", export(lua, &cell, discover)?)?;
    native.set("call", export(lua, &cell, call)?)?;
    native.set("close", export(lua, &cell, close)?)?;
    native.set("mount", export(lua, &cell, mount_tools)?)?;
    let started = std::time::Instant::now();
    native.set("clock", lua.create_function(move |_, ()| Ok(started.elapsed().as_secs_f64()))?)?;
    let setup_cell = cell.clone();
    native.set(
        "setup",
        lua.create_function(move |lua, (module, client_methods, runner, pcall, tostring): (Table, Table, Function, Function, Function)| {
            let states = lua.create_table()?;
            let weak = lua.create_table()?;
            weak.set("__mode", "k")?;
            states.set_metatable(Some(weak))?;
            let _ = setup_cell.set(Glue { module, client_methods, runner, pcall, tostring, states });
            Ok(())
        })?,
    )?;
    // Finalized when the state closes, after every client (it was made
    // first): background shutdowns must finish before our code unloads.
    lua.set_named_registry_value("lua-mcp.reapers", lua.create_userdata(Reapers)?)?;
    lua.load(include_str!("prelude.lua")).set_name("=mcp").call(native)
}

struct Reapers;
impl UserData for Reapers {}
impl Drop for Reapers {
    fn drop(&mut self) {
        stdio::join_reapers();
    }
}

/// Wraps a native function in the `true, ...` / `false, err` convention
/// the prelude turns into returns or raises.
fn export(lua: &Lua, cell: &Rc<OnceCell<Glue>>, f: fn(&Cx, MultiValue) -> Outcome) -> mlua::Result<Function> {
    let cell = cell.clone();
    lua.create_function(move |lua, args: MultiValue| {
        let mut out = MultiValue::new();
        let result = match cell.get() {
            Some(glue) => f(&Cx { lua, glue }, args),
            None => Err(Raise::Mcp(Error::Lua("the module was not set up".into()))),
        };
        match result {
            Ok(values) => {
                out.push_back(Value::Boolean(true));
                out.extend(values);
            }
            Err(Raise::Mcp(e)) => {
                out.push_back(Value::Boolean(false));
                out.push_back(Value::String(lua.create_string(e.to_string())?));
            }
            Err(Raise::Lua(v)) => {
                out.push_back(Value::Boolean(false));
                out.push_back(v);
            }
        }
        Ok(out)
    })
}

/// What every native function works with: the Lua state and its glue.
struct Cx<'a> {
    lua: &'a Lua,
    glue: &'a Glue,
}

impl std::ops::Deref for Cx<'_> {
    type Target = Lua;
    fn deref(&self) -> &Lua {
        self.lua
    }
}

fn arg(args: &MultiValue, i: usize) -> Value {
    args.get(i).cloned().unwrap_or(Value::Nil)
}

fn truthy(v: &Value) -> bool {
    !matches!(v, Value::Nil | Value::Boolean(false))
}

/// Calls Lua code through `pcall`: its raised value comes back untouched.
fn call_lua(lua: &Cx, f: Function, args: impl IntoLuaMulti) -> Outcome {
    let g = lua.glue;
    let mut all = args.into_lua_multi(lua)?;
    all.push_front(Value::Function(f));
    let mut results: MultiValue = g.pcall.call(all)?;
    match results.pop_front() {
        Some(Value::Boolean(true)) => Ok(results),
        _ => Err(Raise::Lua(results.pop_front().unwrap_or(Value::Nil))),
    }
}

/// `obj:name(...)`, looked up through the object's metatable as Lua would.
fn call_method(lua: &Cx, obj: &Table, name: &str, args: impl IntoLuaMulti) -> Outcome {
    let method: Value = obj.get(name)?;
    let Value::Function(method) = method else {
        return Err(Error::BadInput(format!("the object has no method '{name}'")).into());
    };
    let mut all = args.into_lua_multi(lua)?;
    all.push_front(Value::Table(obj.clone()));
    call_lua(lua, method, all)
}

fn lua_tostring(lua: &Cx, v: Value) -> Outcome<Vec<u8>> {
    let f = lua.glue.tostring.clone();
    let out = call_lua(lua, f, v)?;
    match out.front() {
        Some(Value::String(s)) => Ok(s.as_bytes().to_vec()),
        _ => Ok(b"nil".to_vec()),
    }
}

/// The bytes Lua's `..` would use for a string or number; None otherwise.
fn concat_piece(v: &Value) -> Option<Vec<u8>> {
    match v {
        Value::String(s) => Some(s.as_bytes().to_vec()),
        Value::Integer(i) => Some(i.to_string().into_bytes()),
        Value::Number(f) => Some(lua_float_text(*f).into_bytes()),
        _ => None,
    }
}

// ---------------------------------------------------------------------
// Lua values <-> Json
// ---------------------------------------------------------------------

/// Converts a Lua value for the wire, refusing what JSON cannot carry and
/// naming where it was found (`arguments.items[2].cb`).
///
/// The path is only built when something is refused, on the way back up:
/// formatting a path segment for every value would cost more than the
/// conversion itself.
struct Encoder {
    /// Tables on the way down from the root: meeting one again is a cycle.
    /// (A table shared by two branches is fine and encodes twice.)
    open: Vec<*const c_void>,
}

/// A refused value: what it was, and the path to it, innermost first.
struct Refusal {
    what: String,
    path: Vec<String>,
}

impl Refusal {
    fn new(what: impl Into<String>) -> Self {
        Refusal { what: what.into(), path: Vec::new() }
    }

    fn under(mut self, segment: String) -> Self {
        self.path.push(segment);
        self
    }
}

enum Fail {
    Refused(Refusal),
    Lua(mlua::Error),
}

impl From<mlua::Error> for Fail {
    fn from(e: mlua::Error) -> Self {
        Fail::Lua(e)
    }
}

impl Encoder {
    fn convert(root: &str, value: &Value) -> Outcome<Json> {
        let mut enc = Encoder { open: Vec::new() };
        match enc.value(value) {
            Ok(json) => Ok(json),
            Err(Fail::Lua(e)) => Err(e.into()),
            Err(Fail::Refused(refusal)) => {
                let mut path = root.to_string();
                for segment in refusal.path.iter().rev() {
                    if !segment.starts_with('[') {
                        path.push('.');
                    }
                    path.push_str(segment);
                }
                Err(Raise::Mcp(Error::Encode { what: refusal.what, path }))
            }
        }
    }

    fn value(&mut self, value: &Value) -> Result<Json, Fail> {
        Ok(match value {
            Value::Nil => Json::Null,
            Value::Boolean(b) => Json::Bool(*b),
            Value::Integer(i) => Json::Int(*i),
            Value::Number(f) if f.is_nan() => return Err(Fail::Refused(Refusal::new("NaN"))),
            Value::Number(f) if f.is_infinite() => return Err(Fail::Refused(Refusal::new("an infinite number"))),
            Value::Number(f) => Json::Float(*f),
            Value::String(s) => {
                let bytes = s.as_bytes();
                if std::str::from_utf8(&bytes).is_err() {
                    return Err(Fail::Refused(Refusal::new("a string that is not UTF-8")));
                }
                Json::Str(bytes.to_vec())
            }
            Value::Table(t) => self.table(t)?,
            other => return Err(Fail::Refused(Refusal::new(format!("a {}", other.type_name())))),
        })
    }

    fn table(&mut self, t: &Table) -> Result<Json, Fail> {
        let ptr = t.to_pointer();
        if self.open.contains(&ptr) {
            return Err(Fail::Refused(Refusal::new("a table that contains itself")));
        }
        self.open.push(ptr);
        let json = self.table_body(t);
        self.open.pop();
        json
    }

    fn table_body(&mut self, t: &Table) -> Result<Json, Fail> {
        let mut entries: Vec<(Value, Value)> = Vec::new();
        for pair in t.pairs::<Value, Value>() {
            entries.push(pair?);
        }
        let is_array = !entries.is_empty()
            && entries.iter().all(|(k, _)| matches!(k, Value::Integer(i) if *i >= 1))
            && entries.iter().map(|(k, _)| k.as_integer().unwrap_or(0)).max() == Some(entries.len() as i64);
        if is_array {
            entries.sort_by_key(|(k, _)| k.as_integer().unwrap_or(0));
            let mut items = Vec::with_capacity(entries.len());
            for (i, (_, v)) in entries.iter().enumerate() {
                match self.value(v) {
                    Ok(json) => items.push(json),
                    Err(Fail::Refused(r)) => return Err(Fail::Refused(r.under(format!("[{}]", i + 1)))),
                    Err(e) => return Err(e),
                }
            }
            return Ok(Json::Array(items));
        }
        let mut keyed = Vec::with_capacity(entries.len());
        for (k, v) in entries {
            let text = match &k {
                Value::String(s) => s.as_bytes().to_vec(),
                Value::Integer(i) => i.to_string().into_bytes(),
                Value::Number(f) => format_float(*f).into_bytes(),
                other => return Err(Fail::Refused(Refusal::new(format!("a {} key", other.type_name())))),
            };
            keyed.push((text, v));
        }
        keyed.sort_by(|a, b| a.0.cmp(&b.0));
        // `trace.ordered` tables list some keys first, in the given order.
        if let Some(order) = t.metatable().and_then(|mt| mt.raw_get::<Option<Table>>("__jsonorder").ok().flatten()) {
            let mut front = Vec::new();
            for key in order.sequence_values::<Value>() {
                let Some(text) = concat_piece(&key?) else { continue };
                if let Some(at) = keyed.iter().position(|(k, _)| *k == text) {
                    front.push(keyed.remove(at));
                }
            }
            front.append(&mut keyed);
            keyed = front;
        }
        let mut pairs = Vec::with_capacity(keyed.len());
        for (key, v) in keyed {
            let segment = || String::from_utf8_lossy(&key).into_owned();
            let json = match self.value(&v) {
                Ok(json) => json,
                Err(Fail::Refused(r)) => return Err(Fail::Refused(r.under(segment()))),
                Err(e) => return Err(e),
            };
            if std::str::from_utf8(&key).is_err() {
                return Err(Fail::Refused(Refusal::new("a key that is not UTF-8").under(segment())));
            }
            pairs.push((key, json));
        }
        Ok(Json::Object(pairs))
    }
}

/// A decoded value as the reference codec would give it to Lua: `null`
/// dropped from objects and arrays alike.
///
/// Built with the raw C API inside one protected call: going through
/// mlua's safe `Table::raw_set` costs a protected call and a reference per
/// value, which made a 1 MB tool list several times slower to hand over
/// than to parse.
fn to_lua(lua: &Lua, json: &Json) -> mlua::Result<Value> {
    // SAFETY: `push_json` only pushes values and sets fields on tables it
    // created, keeps the stack balanced (one value left per call), and
    // holds nothing with a destructor across Lua calls, so an allocation
    // error raised inside cannot skip a drop.
    unsafe { lua.exec_raw::<Value>((), |state| push_json(state, json)) }
}

unsafe fn push_json(state: *mut mlua::ffi::lua_State, json: &Json) {
    use mlua::ffi;
    match json {
        Json::Null => ffi::lua_pushnil(state),
        Json::Bool(b) => ffi::lua_pushboolean(state, *b as std::os::raw::c_int),
        Json::Int(i) => ffi::lua_pushinteger(state, *i),
        Json::Float(f) => ffi::lua_pushnumber(state, *f),
        Json::Str(s) => {
            ffi::lua_pushlstring(state, s.as_ptr().cast(), s.len());
        }
        Json::Array(items) => {
            ffi::luaL_checkstack(state, 4, std::ptr::null());
            ffi::lua_createtable(state, items.len().min(1 << 24) as std::os::raw::c_int, 0);
            let mut n = 0;
            for item in items.iter().filter(|v| !matches!(v, Json::Null)) {
                push_json(state, item);
                n += 1;
                ffi::lua_rawseti(state, -2, n);
            }
        }
        Json::Object(pairs) => {
            ffi::luaL_checkstack(state, 4, std::ptr::null());
            ffi::lua_createtable(state, 0, pairs.len().min(1 << 24) as std::os::raw::c_int);
            for (k, v) in pairs {
                ffi::lua_pushlstring(state, k.as_ptr().cast(), k.len());
                // A null value assigns nil: a key set earlier in the same
                // object is removed, as table assignment would do.
                push_json(state, v);
                ffi::lua_rawset(state, -3);
            }
        }
    }
}

fn to_lua_opt(lua: &Lua, json: Option<&Json>) -> mlua::Result<Value> {
    json.map_or(Ok(Value::Nil), |j| to_lua(lua, j))
}

// ---------------------------------------------------------------------
// Native per-client state
// ---------------------------------------------------------------------

struct ClientState {
    timeout: Duration,
    headers: Vec<(String, String)>,
    ca_pem: Option<Vec<u8>>,
    env: Vec<(String, String)>,
    cwd: Option<String>,
    max_message_bytes: usize,
    session: Option<Session>,
}

impl UserData for ClientState {}

const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

fn read_options(opts: &Table) -> Outcome<ClientState> {
    let timeout = match opts.get::<Value>("timeout")? {
        Value::Nil => DEFAULT_TIMEOUT,
        Value::Integer(i) if i > 0 => Duration::from_secs(i as u64),
        Value::Number(f) if f > 0.0 && f.is_finite() && f < 1e9 => Duration::from_secs_f64(f),
        _ => return Err(Error::BadInput("mcp.new: opts.timeout must be a positive number of seconds".into()).into()),
    };
    let max_message_bytes = match opts.get::<Value>("max_message_bytes")? {
        Value::Nil => stdio::DEFAULT_MAX_MESSAGE_BYTES,
        Value::Integer(i) if i > 0 => i as usize,
        _ => return Err(Error::BadInput("mcp.new: opts.max_message_bytes must be a positive integer".into()).into()),
    };
    let cwd = match opts.get::<Value>("cwd")? {
        Value::Nil => None,
        Value::String(s) => Some(s.to_str()?.to_string()),
        _ => return Err(Error::BadInput("mcp.new: opts.cwd must be a string".into()).into()),
    };
    let env = string_map(opts, "env")?;
    // Read now, so a wrong path fails at mcp.new rather than at first use.
    let ca_pem = match opts.get::<Value>("ca_file")? {
        Value::Nil => None,
        Value::String(path) => {
            let path = path.to_str()?.to_string();
            Some(std::fs::read(&path).map_err(|e| Error::BadInput(format!("mcp.new: cannot read opts.ca_file {path}: {e}")))?)
        }
        _ => return Err(Error::BadInput("mcp.new: opts.ca_file must be a path".into()).into()),
    };
    let headers = string_map(opts, "headers")?;
    for (name, value) in &headers {
        if value.contains(['\r', '\n']) || name.contains(['\r', '\n']) {
            return Err(Error::BadInput(format!("mcp.new: opts.headers.{name} contains CR or LF, which would split the header")).into());
        }
        if name.is_empty() || !name.bytes().all(|b| b.is_ascii_graphic() && b != b':') {
            return Err(Error::BadInput(format!("mcp.new: opts.headers has an invalid header name {name:?}")).into());
        }
    }
    match opts.get::<Value>("on_notification")? {
        Value::Nil | Value::Function(_) => {}
        _ => return Err(Error::BadInput("mcp.new: opts.on_notification must be a function".into()).into()),
    }
    Ok(ClientState { timeout, headers, ca_pem, env, cwd, max_message_bytes, session: None })
}

/// A table of string keys to string values, such as `opts.env`.
fn string_map(opts: &Table, field: &str) -> Outcome<Vec<(String, String)>> {
    let bad = || Raise::Mcp(Error::BadInput(format!("mcp.new: opts.{field} must be a table of strings to strings")));
    let mut out = Vec::new();
    match opts.get::<Value>(field)? {
        Value::Nil => {}
        Value::Table(t) => {
            for pair in t.pairs::<Value, Value>() {
                let (k, v) = pair?;
                let (Some(k), Some(v)) = (concat_piece(&k), concat_piece(&v)) else { return Err(bad()) };
                let (Ok(k), Ok(v)) = (String::from_utf8(k), String::from_utf8(v)) else { return Err(bad()) };
                out.push((k, v));
            }
            out.sort();
        }
        _ => return Err(bad()),
    }
    Ok(out)
}

/// The userdata and callback kept beside a client table.
fn state_of(lua: &Cx, client: &Table) -> Outcome<Option<(AnyUserData, Option<Function>)>> {
    let entry: Value = lua.glue.states.raw_get(client.clone())?;
    let Value::Table(entry) = entry else { return Ok(None) };
    Ok(Some((entry.raw_get(1)?, entry.raw_get(2)?)))
}

// ---------------------------------------------------------------------
// The client table's fields
// ---------------------------------------------------------------------

/// `client:id()`: the next request id, kept in the table's `next_id`.
fn next_id(client: &Table) -> Outcome<Json> {
    let next = match client.get::<Value>("next_id")? {
        Value::Integer(i) => Value::Integer(i.wrapping_add(1)),
        Value::Number(f) => Value::Number(f + 1.0),
        _ => return Err(Error::BadInput("MCP: client.next_id must be a number".into()).into()),
    };
    client.set("next_id", next.clone())?;
    Ok(match next {
        Value::Integer(i) => Json::Int(i),
        Value::Number(f) => Json::Float(f),
        _ => Json::Null,
    })
}

fn initialize_request(lua: &Cx, client: &Table, id: Json) -> Outcome<Json> {
    let version = Encoder::convert("protocol_version", &client.get::<Value>("protocol_version")?)?;
    let info = Encoder::convert("mcp.CLIENT_INFO", &lua.glue.module.get::<Value>("CLIENT_INFO")?)?;
    Ok(protocol::request(id, "initialize", protocol::initialize_params(version, info)))
}

fn initialized_notice() -> Json {
    protocol::notification("notifications/initialized", None)
}

/// Records the initialize result on the client, as the reference does.
fn apply_initialize(lua: &Cx, client: &Table, result: &Json) -> Outcome<()> {
    client.set("server_info", to_lua_opt(lua, result.get("serverInfo"))?)?;
    client.set("negotiated_version", to_lua_opt(lua, result.get("protocolVersion"))?)?;
    client.set("session_ready", true)?;
    Ok(())
}

fn call_params(client_name: &Value, args: &Value) -> Outcome<Json> {
    let name = match client_name {
        Value::Nil => None,
        v => Some(Encoder::convert("name", v)?),
    };
    let arguments = if truthy(args) { Encoder::convert("arguments", args)? } else { Json::Object(vec![]) };
    Ok(protocol::call_params(name, arguments))
}

fn tool_label(name: &Value) -> Outcome<String> {
    match concat_piece(name) {
        Some(bytes) => Ok(format!("tools/call {}", String::from_utf8_lossy(&bytes))),
        None => Err(Error::BadInput(format!("client:call: the tool name must be a string, got {}", name.type_name())).into()),
    }
}

// ---------------------------------------------------------------------
// The fixture transport: the reference's exchange, byte for byte
// ---------------------------------------------------------------------

/// Sends `messages` as one newline-delimited batch through the user's
/// transport function and gathers the replies, as the reference does.
fn exchange_batch(lua: &Cx, client: &Table, transport: Function, messages: &[Json]) -> Outcome<Replies> {
    let mut text = Vec::new();
    for m in messages {
        codec::encode_into(m, &mut text);
        text.push(b'\n');
    }
    text.pop();
    text.push(b'\n');
    let mut out = call_lua(lua, transport, lua.create_string(&text)?)?;
    let ok = out.pop_front().unwrap_or(Value::Nil);
    let raw = out.pop_front().unwrap_or(Value::Nil);
    let code = out.pop_front().unwrap_or(Value::Nil);
    let raw = lua_tostring(lua, raw)?;
    if !truthy(&ok) {
        let code = String::from_utf8_lossy(&lua_tostring(lua, code)?).into_owned();
        let detail = String::from_utf8_lossy(&raw[..raw.len().min(400)]).into_owned();
        return Err(Error::Transport { code, detail }.into());
    }
    let mut replies = Replies::default();
    replies.absorb(&raw);
    let notes = std::mem::take(&mut replies.notifications);
    deliver_notifications(lua, client, notes)?;
    Ok(replies)
}

/// The reference's handshake: before every batch, except over a url once
/// the session is ready.
fn batch_handshake(lua: &Cx, client: &Table) -> Outcome<(Vec<Json>, Option<Json>)> {
    let url: Value = client.get("url")?;
    let ready: Value = client.get("session_ready")?;
    if truthy(&url) && truthy(&ready) {
        return Ok((vec![], None));
    }
    let id = next_id(client)?;
    Ok((vec![initialize_request(lua, client, id.clone())?, initialized_notice()], Some(id)))
}

fn discover_batch(lua: &Cx, client: &Table, transport: Function) -> Outcome {
    let (mut messages, init_id) = batch_handshake(lua, client)?;
    let list_id = next_id(client)?;
    messages.push(protocol::request(list_id.clone(), "tools/list", Json::Object(vec![])));
    let mut replies = exchange_batch(lua, client, transport, &messages)?;
    if let Some(init_id) = init_id {
        let result = result_of(replies.take(&init_id), "initialize")?;
        apply_initialize(lua, client, &result)?;
    }
    let listed = result_of(replies.take(&list_id), "tools/list")?;
    store_tools(lua, client, listed.get("tools").filter(|t| t.is_truthy()))
}

fn store_tools(lua: &Cx, client: &Table, tools: Option<&Json>) -> Outcome {
    let tools = match tools {
        Some(t) => to_lua(lua, t)?,
        None => Value::Table(lua.create_table()?),
    };
    client.set("tools", tools.clone())?;
    Ok(MultiValue::from_vec(vec![tools]))
}

fn call_batch(lua: &Cx, client: &Table, transport: Function, name: &Value, args: &Value) -> Outcome {
    let what = tool_label(name)?;
    let (mut messages, _) = batch_handshake(lua, client)?;
    let call_id = next_id(client)?;
    messages.push(protocol::request(call_id.clone(), "tools/call", call_params(name, args)?));
    let mut replies = exchange_batch(lua, client, transport, &messages)?;
    let result = result_of(replies.take(&call_id), &what)?;
    call_return(lua, result)
}

fn call_return(lua: &Cx, result: Json) -> Outcome {
    let (text, is_error) = call_outcome(result);
    Ok(MultiValue::from_vec(vec![Value::String(lua.create_string(text)?), Value::Boolean(is_error)]))
}

fn deliver_notifications(lua: &Cx, client: &Table, notes: Vec<Json>) -> Outcome<()> {
    if notes.is_empty() {
        return Ok(());
    }
    let Some((_, Some(callback))) = state_of(lua, client)? else { return Ok(()) };
    for note in notes {
        let msg = to_lua(lua, &note)?;
        // A failing callback must not break the client: its error is
        // dropped, and the next notification is delivered as usual.
        let _ = call_lua(lua, callback.clone(), msg);
    }
    Ok(())
}

// ---------------------------------------------------------------------
// Long-lived sessions: stdio and HTTP
// ---------------------------------------------------------------------

fn launch_of(command: &Value) -> Outcome<Launch> {
    let bad = || Raise::Mcp(Error::BadInput("mcp: command must be a string or an array of strings".into()));
    match command {
        Value::String(s) => Ok(Launch::Shell(s.to_str()?.to_string())),
        Value::Table(t) => {
            let mut argv = Vec::new();
            for v in t.sequence_values::<Value>() {
                match v? {
                    Value::String(s) => argv.push(s.to_str()?.to_string()),
                    _ => return Err(bad()),
                }
            }
            if argv.is_empty() {
                return Err(bad());
            }
            Ok(Launch::Argv(argv))
        }
        _ => Err(bad()),
    }
}

fn open_transport(client: &Table, state: &ClientState) -> Outcome<Box<dyn Transport>> {
    if let Value::String(url) = client.get::<Value>("url")? {
        let options = http::Options {
            url: url.to_str()?.to_string(),
            headers: state.headers.clone(),
            timeout: state.timeout,
            max_message_bytes: state.max_message_bytes,
            ca_pem: state.ca_pem.clone(),
        };
        return Ok(Box::new(Http::connect(options)?));
    }
    let command: Value = client.get("command")?;
    if !truthy(&command) {
        return Err(Error::BadInput("mcp: the client has no command, url or transport".into()).into());
    }
    let options = stdio::Options {
        launch: launch_of(&command)?,
        env: state.env.clone(),
        cwd: state.cwd.clone(),
        max_message_bytes: state.max_message_bytes,
    };
    Ok(Box::new(Stdio::spawn(&options)?))
}

/// Runs `request` on the client's live session, starting the session
/// (process and handshake) first if there is none or the last one broke.
fn with_session<T>(
    lua: &Cx,
    client: &Table,
    mut request: impl FnMut(&mut Session, &mut dyn FnMut(Json), Duration) -> Outcome<T>,
) -> Outcome<T> {
    let Some((ud, callback)) = state_of(lua, client)? else {
        return Err(Error::BadInput("MCP: this client was not made by mcp.new".into()).into());
    };
    let mut state = ud
        .borrow_mut::<ClientState>()
        .map_err(|_| Error::BadInput("MCP: the client is already busy (called again from on_notification?)".into()))?;
    let mut notify = |note: Json| {
        if let Some(cb) = &callback {
            if let Ok(msg) = to_lua(lua, &note) {
                let _ = call_lua(lua, cb.clone(), msg);
            }
        }
    };
    let timeout = state.timeout;
    // An HTTP server may forget a session (404): then one new session,
    // and the request sent once more. Any other failure is final.
    let mut retried = false;
    loop {
        if state.session.as_ref().is_some_and(|s| s.broken) {
            // Dropping hands a dead server to a background reaper.
            state.session = None;
        }
        if state.session.is_none() {
            state.session = Some(handshake(lua, client, &state, &mut notify)?);
        }
        let session = state.session.as_mut().expect("a session was just set");
        match request(session, &mut notify, timeout) {
            Err(Raise::Mcp(Error::SessionExpired)) if !retried => {
                retried = true;
                state.session = None;
            }
            other => return other,
        }
    }
}

/// A new session: transport opened, initialize answered, initialized sent.
fn handshake(lua: &Cx, client: &Table, state: &ClientState, notify: &mut dyn FnMut(Json)) -> Outcome<Session> {
    let mut session = Session::new(open_transport(client, state)?);
    let id = next_id(client)?;
    let init = initialize_request(lua, client, id.clone())?;
    let reply = session.request(&id, &init, state.timeout, "initialize", notify)?;
    let result = result_of(Some(reply), "initialize")?;
    check_version(&result)?;
    apply_initialize(lua, client, &result)?;
    if let Some(session_id) = session.session_id() {
        client.set("session_id", session_id)?;
    }
    if let Some(Json::Str(version)) = result.get("protocolVersion") {
        session.established(&String::from_utf8_lossy(version));
    }
    session.notify(&initialized_notice())?;
    session.ready = true;
    Ok(session)
}

fn check_version(result: &Json) -> Outcome<()> {
    match result.get("protocolVersion") {
        Some(Json::Str(v)) if SUPPORTED_VERSIONS.iter().any(|s| s.as_bytes() == v.as_slice()) => Ok(()),
        chosen => Err(Error::UnsupportedVersion {
            chosen: protocol::lua_text(chosen),
            supported: SUPPORTED_VERSIONS.join(", "),
        }
        .into()),
    }
}

/// Pages of `tools/list` are followed while the server hands out a new
/// cursor; a server that repeats its cursor is not followed round again.
const MAX_TOOL_PAGES: usize = 100;

fn discover_session(lua: &Cx, client: &Table) -> Outcome {
    let pages = with_session(lua, client, |session, notify, timeout| {
        let mut pages: Vec<Json> = Vec::new();
        let mut cursor: Option<Json> = None;
        loop {
            let id = next_id(client)?;
            let params = match &cursor {
                Some(c) => Json::object([("cursor", c.clone())]),
                None => Json::Object(vec![]),
            };
            let request = protocol::request(id.clone(), "tools/list", params);
            let reply = session.request(&id, &request, timeout, "tools/list", notify)?;
            let listed = result_of(Some(reply), "tools/list")?;
            let next = listed.get("nextCursor").filter(|c| matches!(c, Json::Str(_))).cloned();
            pages.push(listed);
            if next.is_none() || next == cursor || pages.len() >= MAX_TOOL_PAGES {
                return Ok(pages);
            }
            cursor = next;
        }
    })?;
    if pages.len() == 1 {
        return store_tools(lua, client, pages[0].get("tools").filter(|t| t.is_truthy()));
    }
    let all: Vec<Json> = pages.iter().flat_map(|p| p.get("tools").map(|t| t.elements().cloned().collect::<Vec<_>>()).unwrap_or_default()).collect();
    store_tools(lua, client, Some(&Json::Array(all)))
}

fn call_session(lua: &Cx, client: &Table, name: &Value, args: &Value) -> Outcome {
    let what = tool_label(name)?;
    let params = call_params(name, args)?;
    let result = with_session(lua, client, |session, notify, timeout| {
        let id = next_id(client)?;
        let request = protocol::request(id.clone(), "tools/call", params.clone());
        let reply = session.request(&id, &request, timeout, &what, notify)?;
        Ok(result_of(Some(reply), &what)?)
    })?;
    call_return(lua, result)
}

// ---------------------------------------------------------------------
// The exported functions
// ---------------------------------------------------------------------

fn client_arg(args: &MultiValue, method: &str) -> Outcome<Table> {
    match arg(args, 0) {
        Value::Table(t) => Ok(t),
        _ => Err(Error::BadInput(format!("MCP: call {method} with a colon, as client:{method}(...)")).into()),
    }
}

fn new(lua: &Cx, args: MultiValue) -> Outcome {
    let opts = match arg(&args, 0) {
        Value::Table(t) => t,
        _ => lua.create_table()?,
    };
    let command: Value = opts.get("command")?;
    let url: Value = opts.get("url")?;
    let transport: Value = opts.get("transport")?;
    if !truthy(&command) && !truthy(&transport) && !truthy(&url) {
        return Err(Error::NoEndpoint.into());
    }
    let state = read_options(&opts)?;
    let g = lua.glue;
    let mut version: Value = opts.get("protocol_version")?;
    if !truthy(&version) {
        version = g.module.get("PROTOCOL_VERSION")?;
    }
    let client = lua.create_table()?;
    client.set("command", command)?;
    client.set("url", url)?;
    client.set("transport", transport)?;
    client.set("protocol_version", version)?;
    client.set("prefix", opts.get::<Value>("prefix")?)?;
    client.set("next_id", 0)?;
    client.set_metatable(Some(g.client_methods.clone()))?;
    let entry = lua.create_table()?;
    entry.raw_set(1, lua.create_userdata(state)?)?;
    entry.raw_set(2, opts.get::<Value>("on_notification")?)?;
    g.states.raw_set(client.clone(), entry)?;
    Ok(MultiValue::from_vec(vec![Value::Table(client)]))
}

fn discover(lua: &Cx, args: MultiValue) -> Outcome {
    let client = client_arg(&args, "discover")?;
    match client.get::<Value>("transport")? {
        Value::Function(f) => discover_batch(lua, &client, f),
        v if truthy(&v) => Err(Error::BadInput("MCP: client.transport must be a function".into()).into()),
        _ => discover_session(lua, &client),
    }
}

fn call(lua: &Cx, args: MultiValue) -> Outcome {
    let client = client_arg(&args, "call")?;
    let (name, call_args) = (arg(&args, 1), arg(&args, 2));
    match client.get::<Value>("transport")? {
        Value::Function(f) => call_batch(lua, &client, f, &name, &call_args),
        v if truthy(&v) => Err(Error::BadInput("MCP: client.transport must be a function".into()).into()),
        _ => call_session(lua, &client, &name, &call_args),
    }
}

fn close(lua: &Cx, args: MultiValue) -> Outcome {
    let client = client_arg(&args, "close")?;
    if let Some((ud, _)) = state_of(lua, &client)? {
        let session = ud.borrow_mut::<ClientState>().ok().and_then(|mut s| s.session.take());
        if let Some(mut session) = session {
            session.close();
        }
    }
    Ok(MultiValue::new())
}

fn mount_tools(lua: &Cx, args: MultiValue) -> Outcome {
    let Value::Table(registry) = arg(&args, 0) else {
        return Err(Error::BadInput("mcp.mount: the registry must be a table".into()).into());
    };
    let Value::Table(client) = arg(&args, 1) else {
        return Err(Error::BadInput("mcp.mount: the client must be a table".into()).into());
    };
    let opts = match arg(&args, 2) {
        Value::Table(t) => t,
        _ => lua.create_table()?,
    };
    let mut prefix: Value = opts.get("prefix")?;
    if !truthy(&prefix) {
        prefix = client.get("prefix")?;
    }
    let prefix = if truthy(&prefix) {
        concat_piece(&prefix).ok_or_else(|| Error::BadInput("mcp.mount: the prefix must be a string".into()))?
    } else {
        Vec::new()
    };
    let mut tools: Value = client.get("tools")?;
    if !truthy(&tools) {
        tools = call_method(lua, &client, "discover", ())?.pop_front().unwrap_or(Value::Nil);
    }
    let Value::Table(tools) = tools else {
        return Err(Error::BadInput("mcp.mount: the client's tools are not a list".into()).into());
    };
    let trusted = opts.get::<Value>("trust")? == Value::Boolean(true);
    let runner = lua.glue.runner.clone();
    let mounted = lua.create_table()?;
    for tool in tools.sequence_values::<Value>() {
        let Value::Table(tool) = tool? else {
            return Err(Error::BadInput("mcp.mount: a tool descriptor is not a table".into()).into());
        };
        let tool_name: Value = tool.get("name")?;
        let suffix = concat_piece(&tool_name).ok_or_else(|| Error::BadInput("mcp.mount: a tool has no name".into()))?;
        let name = lua.create_string([prefix.as_slice(), suffix.as_slice()].concat())?;
        let existing = call_method(lua, &registry, "get", name.clone())?;
        if existing.front().is_some_and(truthy) {
            return Err(Error::Collision { quoted: mount::lua_quote(&name.as_bytes()) }.into());
        }
        let description = match tool.get::<Value>("description")? {
            v if truthy(&v) => concat_piece(&v).unwrap_or_else(|| b"MCP tool".to_vec()),
            _ => b"MCP tool".to_vec(),
        };
        let entry = lua.create_table()?;
        entry.set("name", name.clone())?;
        entry.set("description", lua.create_string(mount::fold_description(&description))?)?;
        entry.set("args", schema_args(lua, tool.get("inputSchema")?)?)?;
        entry.set("requires_approval", !trusted)?;
        entry.set("run", runner.call::<Function>((client.clone(), tool_name))?)?;
        call_method(lua, &registry, "add", entry)?;
        mounted.raw_set(mounted.raw_len() + 1, name)?;
    }
    Ok(MultiValue::from_vec(vec![Value::Table(mounted)]))
}

/// Reads what the mount rules need from a JSON Schema held in Lua.
fn schema_args(lua: &Cx, schema: Value) -> Outcome<Table> {
    let out = lua.create_table()?;
    let Value::Table(schema) = schema else { return Ok(out) };
    let Value::Table(properties) = schema.get::<Value>("properties")? else { return Ok(out) };
    let mut required = Vec::new();
    if let Value::Table(list) = schema.get::<Value>("required")? {
        for r in list.sequence_values::<Value>() {
            if let Some(name) = concat_piece(&r?) {
                required.push(name);
            }
        }
    }
    let mut props = Vec::new();
    for pair in properties.pairs::<Value, Value>() {
        let (k, prop) = pair?;
        let Some(name) = concat_piece(&k) else { continue };
        let ty = match prop {
            Value::Table(p) => match p.get::<Value>("type")? {
                Value::String(s) => Some(s.as_bytes().to_vec()),
                _ => None,
            },
            _ => None,
        };
        props.push((name, ty));
    }
    for (i, a) in mount::args_from_schema(props, &required).into_iter().enumerate() {
        let entry = lua.create_table()?;
        entry.set("name", lua.create_string(&a.name)?)?;
        entry.set("type", a.kind)?;
        entry.set("required", a.required)?;
        out.raw_set(i + 1, entry)?;
    }
    Ok(out)
}
