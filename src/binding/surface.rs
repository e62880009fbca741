//! The rest of the MCP client surface on top of `request`: notifications,
//! ping, lists that follow every page, one-field results, and the
//! reference's own low-level methods (`id`, `initialize_msg`, `handshake`,
//! `exchange`), which agents written for the pure module use to reach
//! what `discover` and `call` do not.

use std::rc::Rc;

use mlua::{MultiValue, Table, Value};

use super::decode::to_lua;
use super::encode::{encode_lua, encode_lua_at};
use super::fields::{initialize_request, input_schema, next_id};
use super::fixture::{batch_handshake, exchange_batch};
use super::handles::{self, run_on_done};
use super::live::{joined_field, with_client};
use super::options::lua_type;
use super::{arg, client_arg, truthy, Cx, Outcome};
use crate::client::{Operation, Request, Shape};
use crate::codec::Json;
use crate::error::Error;
use crate::input_shape::Place;
use crate::protocol;

/// The list methods and the field each page keeps its items in.
fn list_field(method: &str) -> Option<&'static str> {
    Some(match method {
        "tools/list" => "tools",
        "resources/list" => "resources",
        "resources/templates/list" => "resourceTemplates",
        "prompts/list" => "prompts",
        _ => return None,
    })
}

/// The result fields the one-field methods return.
fn result_field(name: &str) -> Option<&'static str> {
    Some(match name {
        "contents" => "contents",
        "completion" => "completion",
        _ => return None,
    })
}

fn live_client(args: &MultiValue, method: &str) -> Outcome<Table> {
    let client = client_arg(args, method)?;
    if truthy(&client.get::<Value>("transport")?) {
        return Err(Error::BadInput(format!(
            "client:{method}: needs a command or url client (a fixture transport only runs discover, call and exchange)"
        ))
        .into());
    }
    Ok(client)
}

fn string_arg(args: &MultiValue, i: usize, what: &str) -> Outcome<String> {
    match arg(args, i) {
        Value::String(s) => Ok(s.to_str()?.to_string()),
        other => Err(Error::BadInput(format!("{what} must be a string, got {}", lua_type(&other))).into()),
    }
}

fn params_arg(lua: &Cx, args: &MultiValue, i: usize, what: &str) -> Outcome<Option<Json>> {
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
    with_client(lua, &client, |core, host| core.notify(host, &message))?;
    Ok(MultiValue::new())
}

/// `client:list(method [, opts])`: every page of a list method, its items
/// in one array (`list_resources` and friends in the prelude).
pub(super) fn list(lua: &Cx, args: MultiValue) -> Outcome {
    let client = live_client(&args, "list")?;
    let method = string_arg(&args, 1, "client:list: the method")?;
    let Some(field) = list_field(&method) else {
        return Err(Error::BadInput(format!("client:list: {method} is not a list method")).into());
    };
    let opts = handles::request_options(lua, &arg(&args, 2), "client:list")?;
    let request = Request::new(&method, Json::Object(vec![]), Rc::from(method.as_str())).shape(Shape::Pages);
    let pages = with_client(lua, &client, |core, host| handles::run_blocking(core, host, request, &opts))?;
    let Json::Array(pages) = pages else { return Err(Error::NoResponse { what: method }.into()) };
    let all = joined_field(lua, &pages, field)?;
    run_on_done(lua, &client)?;
    Ok(MultiValue::from_vec(vec![Value::Table(all)]))
}

/// The shape of the outcome `request_async` asks the core for, and the
/// kind of handle it makes, when the prelude names a list to follow or a
/// field to return (its fifth argument).
pub(super) fn result_shape(method: &str, shape: &Value) -> Outcome<(Shape, handles::Kind)> {
    match shape {
        Value::Nil => Ok((Shape::Whole, handles::Kind::Request)),
        Value::String(s) if s.as_bytes().as_ref() == b"pages" => match list_field(method) {
            Some(field) => Ok((Shape::Pages, handles::Kind::Pages { field })),
            None => Err(Error::BadInput(format!("{method} is not a list method")).into()),
        },
        Value::String(s) => match result_field(&s.to_str()?) {
            Some(field) => Ok((Shape::Field(field), handles::Kind::Request)),
            None => Err(Error::BadInput(format!("no result field {}", s.to_str()?)).into()),
        },
        _ => Err(Error::BadInput("the result shape must be a string".into()).into()),
    }
}

/// `client:id()`: the next request id, as the reference counts them.
pub(super) fn id(_lua: &Cx, args: MultiValue) -> Outcome {
    let client = client_arg(&args, "id")?;
    let id = next_id(&client)?;
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
    let id = next_id(&client)?;
    let capabilities = declared_capabilities(lua, &client)?;
    let message = initialize_request(lua, &client, id, capabilities)?;
    Ok(MultiValue::from_vec(vec![to_lua(lua, &message)?]))
}

fn declared_capabilities(lua: &Cx, client: &Table) -> Outcome<Json> {
    if truthy(&client.get::<Value>("transport")?) {
        return Ok(Json::Object(vec![]));
    }
    with_client(lua, client, |core, _| Ok(core.capabilities().clone()))
}

/// `client:handshake()`: the messages to put before an exchange. Through
/// a fixture, the reference's (initialize and initialized, except over a
/// url once the session is ready); a live client handshakes by itself, so
/// none.
pub(super) fn handshake(lua: &Cx, args: MultiValue) -> Outcome {
    let client = client_arg(&args, "handshake")?;
    let messages = match client.get::<Value>("transport")? {
        v if truthy(&v) => batch_handshake(lua, &client)?.0,
        _ => Vec::new(),
    };
    Ok(MultiValue::from_vec(vec![to_lua(lua, &Json::Array(messages))?]))
}

/// The inputSchema of the tool a `tools/call` message names.
fn called_tool_schema(lua: &Cx, client: &Table, message: &Table) -> Outcome<Option<Rc<Json>>> {
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
    let live = !truthy(&client.get::<Value>("transport")?);
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
    let (replies, notifications) = match client.get::<Value>("transport")? {
        Value::Function(f) => {
            let mut gathered = exchange_batch(lua, &client, f, &messages)?;
            let notes = std::mem::take(&mut gathered.notifications);
            (gathered.into_replies(), notes)
        }
        v if truthy(&v) => return Err(Error::BadInput("MCP: client.transport must be a function".into()).into()),
        _ => exchange_session(lua, &client, messages)?,
    };
    let by_id = lua.create_table()?;
    for reply in replies {
        if let Some(id) = reply.get("id") {
            by_id.raw_set(to_lua(lua, id)?, to_lua(lua, &reply)?)?;
        }
    }
    let notes = to_lua(lua, &Json::Array(notifications))?;
    run_on_done(lua, &client)?;
    Ok(MultiValue::from_vec(vec![Value::Table(by_id), notes]))
}

fn exchange_session(lua: &Cx, client: &Table, messages: Vec<Json>) -> Outcome<(Vec<Json>, Vec<Json>)> {
    with_client(lua, client, |core, host| {
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
