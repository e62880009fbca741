//! The blocking methods of a client and the module's constructor:
//! `mcp.new`, `discover`, `call`, `close`, `request`, the lists, `notify`,
//! and the reference's low-level `id`, `initialize_msg`, `handshake` and
//! `exchange`. Each asks the door which seam the client is on and goes
//! that way; a live one's pending `on_done` callbacks run after it.

use std::rc::Rc;

use mlua::{MultiValue, Table, Value};

use super::auth::keep_auth_callbacks;
use super::boundary::CallArgs;
use super::decode::to_lua;
use super::door::{
    call_params, input_schema, peek_mut, request_args, request_options, run_blocking, with_client, Borrower,
    RequestOptions, Seam,
};
use super::encode::{encode_lua, encode_lua_at};
use super::entry::Entry;
use super::fields::{initialize_request, next_id, tool_label};
use super::fixture::{batch_handshake, call_batch, discover_batch, exchange_batch};
use super::lua::{arg, client_arg, lua_type, truthy, CallReturn, Cx, Outcome, Raise};
use super::options::{callbacks_of, json_types_option, read_options};
use super::results::{call_return, list_field, listed_items, tool_listing};
use crate::client::{Operation, Request, Shape};
use crate::codec::Json;
use crate::error::Error;
use crate::input_shape::Place;
use crate::protocol::{self};
pub(super) fn new(lua: &Cx, args: MultiValue) -> Outcome {
    let opts = match arg(&args, 0) {
        Value::Table(t) => t,
        _ => lua.create_table()?,
    };
    let command: Value = opts.get("command")?;
    let url: Value = opts.get("url")?;
    let transport: Value = opts.get("transport")?;
    if !truthy(&command) && !truthy(&transport) && !truthy(&url) && !truthy(&opts.get::<Value>("replay")?) {
        return Err(Error::NoEndpoint.into());
    }
    let state = read_options(lua, &opts)?;
    let prelude = lua.prelude;
    let mut version: Value = opts.get("protocol_version")?;
    if !truthy(&version) {
        version = prelude.module.get("PROTOCOL_VERSION")?;
    }
    let client = lua.create_table()?;
    client.set("command", command)?;
    client.set("url", url)?;
    client.set("transport", transport)?;
    client.set("protocol_version", version)?;
    client.set("prefix", opts.get::<Value>("prefix")?)?;
    client.set("next_id", 0)?;
    client.set_metatable(Some(prelude.client_methods.clone()))?;
    let entry = Entry::new(
        lua,
        lua.create_userdata(state)?,
        opts.get::<Value>("on_notification")?,
        opts.get::<Value>("handlers")?,
        callbacks_of(lua, &opts)?,
        json_types_option(&opts, "mcp.new")?,
    )?;
    keep_auth_callbacks(&opts, &entry)?;
    entry.attach(lua, &client)?;
    Ok(MultiValue::from_vec(vec![Value::Table(client)]))
}

pub(super) fn discover(lua: &Cx, args: MultiValue) -> Outcome {
    let client = client_arg(&args, "discover")?;
    match Seam::of(&client)? {
        Seam::Fixture(transport) => discover_batch(lua, &client, Seam::fixture(transport)?),
        Seam::Live => discover_session(lua, &client),
    }
}

/// `native.call(client, name, args, opts, transport)`; the transport is
/// `client.transport`, which the prelude reads in Lua: through mlua, a
/// read that honours metamethods is a protected call, about 1,400
/// instructions of every call.
pub(super) fn call(lua: &Cx, args: &CallArgs) -> Outcome<CallReturn> {
    let (client, name, call_args, opts, transport) = args;
    let Value::Table(client) = client else {
        return Err(Error::BadInput("MCP: call call with a colon, as client:call(...)".into()).into());
    };
    match Seam::read(transport.clone()) {
        Seam::Fixture(transport) => call_batch(lua, client, Seam::fixture(transport)?, name, call_args),
        Seam::Live => call_session(lua, client, name, call_args, opts),
    }
}

pub(super) fn close(lua: &Cx, args: MultiValue) -> Outcome {
    let client = client_arg(&args, "close")?;
    // Requests it had in flight settle with the close error: their
    // callbacks run as it returns (see `export_method`), not at some
    // later call that may never come.
    close_session(lua, &client)?;
    // The outputs its mounted tools left (mount's max_output) go with it.
    super::outputs::forget_client(lua, &client)?;
    Ok(MultiValue::new())
}

pub(super) fn discover_session(lua: &Cx, client: &Table) -> Outcome {
    with_client(lua, client, Borrower::Method, |core, host| core.run(host, tool_listing()))?;
    // (`with_client` has shown the listing as `client.tools`.)
    Ok(MultiValue::from_vec(vec![client.get::<Value>("tools")?]))
}

pub(super) fn call_session(lua: &Cx, client: &Table, name: &Value, args: &Value, opts: &Value) -> Outcome<CallReturn> {
    let tool = tool_label(lua, name)?;
    let opts = request_options(lua, opts, "client:call")?;
    let params = call_params(lua, client, name, &tool, args)?;
    let request = tool.request(params);
    let result = with_client(lua, client, Borrower::Method, |core, host| run_blocking(core, host, request, &opts))?;
    call_return(lua, result)
}

/// Ends the client's session, if it has one, and lets go of everything
/// it held: its server, its connections, and the descriptor behind
/// `client:fd()` (a closed client kept in a table must not hold three
/// descriptors until the collector comes). Only the Lua object stays; a
/// later call starts afresh.
pub(super) fn close_session(lua: &Cx, client: &Table) -> Outcome<()> {
    peek_mut(lua, client, |core, options| {
        core.close();
        if let Some(login) = &options.login {
            login.borrow_mut().stop();
        }
        options.doorbell.take();
    })?;
    Ok(())
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
    let result =
        match with_client(lua, &client, Borrower::Method, |core, host| run_blocking(core, host, request, &opts)) {
            Err(Raise::Mcp(Error::Rpc { message, code, data, .. })) if opts.returns_rpc_error => {
                return Ok(MultiValue::from_vec(vec![
                    Value::Nil,
                    Value::Table(rpc_error_table(lua, &code, &message, data)?),
                ]));
            }
            other => other?,
        };
    Ok(MultiValue::from_vec(vec![to_lua(lua, &result)?]))
}

/// A JSON-RPC error as Lua reads it: `{code = N, message = S, data = ...}`.
pub(super) fn rpc_error_table(lua: &Cx, code: &str, message: &str, data: Option<Box<Json>>) -> Outcome<Table> {
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

pub(super) fn live_client(args: &MultiValue, method: &str) -> Outcome<Table> {
    let client = client_arg(args, method)?;
    if !Seam::of(&client)?.is_live() {
        return Err(Error::BadInput(format!(
            "client:{method}: needs a command or url client (a fixture transport only runs discover, call and exchange)"
        ))
        .into());
    }
    Ok(client)
}

pub(super) fn string_arg(args: &MultiValue, i: usize, what: &str) -> Outcome<String> {
    match arg(args, i) {
        Value::String(s) => Ok(s.to_str()?.to_string()),
        other => Err(Error::BadInput(format!("{what} must be a string, got {}", lua_type(&other))).into()),
    }
}

pub(super) fn params_arg(lua: &Cx, args: &MultiValue, i: usize, what: &str) -> Outcome<Option<Json>> {
    match arg(args, i) {
        Value::Nil => Ok(None),
        v @ Value::Table(_) => Ok(Some(encode_lua(lua, "params", &v)?)),
        other => {
            Err(Error::BadInput(format!("{what}: params must be a table or nil, got {}", lua_type(&other))).into())
        }
    }
}

/// `client:notify(method, params)`: sends a notification.
pub(super) fn notify(lua: &Cx, args: MultiValue) -> Outcome {
    let client = live_client(&args, "notify")?;
    let method = string_arg(&args, 1, "client:notify: the method")?;
    let params = params_arg(lua, &args, 2, "client:notify")?;
    let message = protocol::notification(&method, params);
    with_client(lua, &client, Borrower::Method, |core, host| core.notify(host, &message))?;
    Ok(MultiValue::new())
}

/// `client:list(method [, opts [, params]])`: every page of a list method,
/// its items in one array (`list_resources` and friends in the prelude;
/// `params` for the one list that takes some, a skill's directory).
pub(super) fn list(lua: &Cx, args: MultiValue) -> Outcome {
    let client = live_client(&args, "list")?;
    let method = string_arg(&args, 1, "client:list: the method")?;
    let Some(field) = list_field(&method) else {
        return Err(Error::BadInput(format!("client:list: {method} is not a list method")).into());
    };
    let opts = request_options(lua, &arg(&args, 2), "client:list")?;
    let params = params_arg(lua, &args, 3, "client:list")?.unwrap_or(Json::Object(vec![]));
    let request = Request::new(&method, params, Rc::from(method.as_str())).shape(Shape::Pages);
    let pages = with_client(lua, &client, Borrower::Method, |core, host| run_blocking(core, host, request, &opts))?;
    let Json::Array(pages) = pages else { return Err(Error::NoResponse { what: method }.into()) };
    Ok(MultiValue::from_vec(vec![Value::Table(listed_items(lua, &pages, field)?)]))
}

/// The skill and file `client:get_skill(name [, opts])` and
/// `client:read_skill_file(name, path [, opts])` ask for (and their
/// `_async` forms): the request that reads it, checked as the server's
/// last skills/list says.
pub(super) fn skill_request(
    lua: &Cx,
    client: &Table,
    args: &MultiValue,
    borrower: Borrower,
) -> Outcome<(Request, RequestOptions)> {
    let method = if truthy(&arg(args, 2)) { "read_skill_file" } else { "get_skill" };
    let name = string_arg(args, 1, &format!("client:{method}: the skill's name"))?;
    let path = match arg(args, 2) {
        Value::Nil => None,
        Value::String(path) => Some(path.as_bytes().to_vec()),
        other => {
            let why = format!("client:read_skill_file: the path must be a string, got {}", lua_type(&other));
            return Err(Error::BadInput(why).into());
        }
    };
    let opts = request_options(lua, &arg(args, 3), &format!("client:{method}"))?;
    let what: Rc<str> = Rc::from(format!("{method} {name}").as_str());
    let request =
        with_client(lua, client, borrower, |core, _| Ok(core.skill_read(name.as_bytes(), path.as_deref(), what)?))?;
    Ok((request, opts))
}

/// `client:get_skill` / `client:read_skill_file` (the prelude names them).
pub(super) fn skill(lua: &Cx, args: MultiValue) -> Outcome {
    let client = live_client(&args, "get_skill")?;
    let (request, opts) = skill_request(lua, &client, &args, Borrower::Method)?;
    let result = with_client(lua, &client, Borrower::Method, |core, host| run_blocking(core, host, request, &opts))?;
    Ok(MultiValue::from_vec(vec![to_lua(lua, &result)?]))
}

/// `client:id()`: the next request id, as the reference counts them.
pub(super) fn id(lua: &Cx, args: MultiValue) -> Outcome {
    let client = client_arg(&args, "id")?;
    let id = next_id(lua, &client)?;
    Ok(MultiValue::from_vec(vec![match id {
        Json::Int(i) => Value::Integer(i as _),
        Json::Float(f) => Value::Number(f),
        _ => Value::Nil,
    }]))
}

/// `client:initialize_msg()`: the initialize request with a fresh id, as
/// a table. A fixture client declares nothing, as the reference; a live
/// one what its handlers answer.
pub(super) fn initialize_msg(lua: &Cx, args: MultiValue) -> Outcome {
    let client = client_arg(&args, "initialize_msg")?;
    let id = next_id(lua, &client)?;
    let capabilities = declared_capabilities(lua, &client)?;
    let message = initialize_request(lua, &client, id, capabilities)?;
    Ok(MultiValue::from_vec(vec![to_lua(lua, &message)?]))
}

pub(super) fn declared_capabilities(lua: &Cx, client: &Table) -> Outcome<Json> {
    if !Seam::of(client)?.is_live() {
        return Ok(Json::Object(vec![]));
    }
    with_client(lua, client, Borrower::Method, |core, _| Ok(core.capabilities().clone()))
}

/// `client:handshake()`: the messages to put before an exchange. Through
/// a fixture, the reference's (initialize and initialized, except over a
/// url once the session is ready); a live client handshakes by itself, so
/// none.
pub(super) fn handshake(lua: &Cx, args: MultiValue) -> Outcome {
    let client = client_arg(&args, "handshake")?;
    let messages = match Seam::of(&client)? {
        Seam::Fixture(_) => batch_handshake(lua, &client)?.0,
        Seam::Live => Vec::new(),
    };
    Ok(MultiValue::from_vec(vec![to_lua(lua, &Json::Array(messages))?]))
}

/// The inputSchema of the tool a `tools/call` message names.
pub(super) fn called_tool_schema(lua: &Cx, client: &Table, message: &Table) -> Outcome<Option<Rc<Json>>> {
    let method: Value = message.raw_get("method")?;
    let Value::String(method) = method else { return Ok(None) };
    if method.as_bytes().as_ref() != b"tools/call" {
        return Ok(None);
    }
    let Value::Table(params) = message.raw_get::<Value>("params")? else { return Ok(None) };
    let Value::String(name) = params.raw_get::<Value>("name")? else { return Ok(None) };
    input_schema(lua, client, &name.as_bytes())
}

/// `client:exchange(messages)`: sends them and returns the replies by id
/// and the notifications that came, as the reference does. Through a
/// fixture, one batch as the reference sends it; over a live session each
/// request goes out at once and every reply is waited for. An `initialize`
/// among them is answered from the session's own handshake (a live
/// session has one already), and `notifications/initialized` is not sent
/// twice.
pub(super) fn exchange(lua: &Cx, args: MultiValue) -> Outcome {
    let client = client_arg(&args, "exchange")?;
    let Value::Table(list) = arg(&args, 1) else {
        return Err(Error::BadInput("client:exchange: messages must be a list of tables".into()).into());
    };
    let live = Seam::of(&client)?.is_live();
    let mut messages = Vec::new();
    for (i, v) in list.sequence_values::<Value>().enumerate() {
        let v = v?;
        // A tools/call built by hand on a live client is shaped by its
        // tool's inputSchema, as `call` is; the fixture seam stays the
        // reference's, byte for byte.
        let schema = match (&v, live) {
            (Value::Table(message), true) => called_tool_schema(lua, &client, message)?,
            _ => None,
        };
        let place = Place::Above { path: &["params", "arguments"], root: schema.as_deref().unwrap_or(&Json::Null) };
        let place = if schema.is_some() { place } else { Place::Nowhere };
        messages.push(encode_lua_at(lua, &format!("messages[{}]", i + 1), &v, place)?);
    }
    let (replies, notifications) = match Seam::of(&client)? {
        Seam::Fixture(transport) => {
            let mut gathered = exchange_batch(lua, &client, Seam::fixture(transport)?, &messages)?;
            let notes = std::mem::take(&mut gathered.notifications);
            (gathered.into_replies(), notes)
        }
        Seam::Live => exchange_session(lua, &client, messages)?,
    };
    let by_id = lua.create_table()?;
    for reply in replies {
        if let Some(id) = reply.get("id") {
            by_id.raw_set(to_lua(lua, id)?, to_lua(lua, &reply)?)?;
        }
    }
    let notes = to_lua(lua, &Json::Array(notifications))?;
    Ok(MultiValue::from_vec(vec![Value::Table(by_id), notes]))
}

pub(super) fn exchange_session(lua: &Cx, client: &Table, messages: Vec<Json>) -> Outcome<(Vec<Json>, Vec<Json>)> {
    with_client(lua, client, Borrower::Method, |core, host| {
        host.collected = Some(Vec::new());
        let mut replies = Vec::new();
        let mut ops = Vec::new();
        for message in messages {
            let method = match message.get("method") {
                Some(Json::Str(m)) => String::from_utf8_lossy(m).into_owned(),
                _ => String::new(),
            };
            match (message.get("id").cloned(), method.as_str()) {
                (Some(id), "initialize") => {
                    core.ensure_session(host)?;
                    let result = core.initialize_result().cloned().unwrap_or(Json::Null);
                    replies.push(protocol::response(id, result));
                }
                (None, "notifications/initialized") => core.ensure_session(host)?,
                (Some(_), _) => ops.push(core.start(host, Request::message(message, Rc::from(method.as_str())))?),
                (None, _) => core.notify(host, &message)?,
            }
        }
        for at in 0..ops.len() {
            match core.finish(host, &mut ops[at]) {
                Ok(reply) => replies.push(reply),
                Err(e) => {
                    // The others are still in flight: nobody will take them.
                    for ticket in ops[at + 1..].iter().filter_map(Operation::ticket) {
                        core.forget(ticket);
                    }
                    return Err(e);
                }
            }
        }
        Ok((replies, host.collected.take().unwrap_or_default()))
    })
}
