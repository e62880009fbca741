//! The fixture transport (`opts.transport`, a Lua function): the
//! reference's batched exchange, byte for byte. Users test their agents
//! through this seam, so it must not drift.

use mlua::{Function, MultiValue, Table, Value};

use super::decode::to_lua;
use super::door::{call_params, peek, peek_mut};
use super::fields::{apply_initialize, initialize_request, next_id, tool_label};
use super::lua::{call_lua, lua_tostring, truthy, CallReturn, Cx, Outcome};
use super::results::{call_return, deliver_notifications, tools_of_page};
use crate::codec::{self, Json};
use crate::error::Error;
use crate::protocol::{self, Replies};
/// Sends `messages` as one newline-delimited batch through the user's
/// transport function and gathers the replies, as the reference does.
pub(super) fn exchange_batch(lua: &Cx, client: &Table, transport: Function, messages: &[Json]) -> Outcome<Replies> {
    // Each message on its own line, the last one ended too.
    let mut text = Vec::new();
    for m in messages {
        codec::encode_into(m, &mut text);
        text.push(b'\n');
    }
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
    let notes = replies.notifications.clone();
    deliver_notifications(lua, client, notes)?;
    Ok(replies)
}

/// The reference's handshake: before every batch, except over a url once
/// the session is ready.
pub(super) fn batch_handshake(lua: &Cx, client: &Table) -> Outcome<(Vec<Json>, Option<Json>)> {
    let url: Value = client.get("url")?;
    let ready: Value = client.get("session_ready")?;
    if truthy(&url) && truthy(&ready) {
        return Ok((vec![], None));
    }
    let id = next_id(lua, client)?;
    Ok((vec![initialize_request(lua, client, id.clone(), Json::Object(vec![]))?, protocol::initialized()], Some(id)))
}

pub(super) fn discover_batch(lua: &Cx, client: &Table, transport: Function) -> Outcome {
    let (mut messages, init_id) = batch_handshake(lua, client)?;
    let list_id = next_id(lua, client)?;
    messages.push(protocol::request(list_id.clone(), "tools/list", Json::Object(vec![])));
    let mut replies = exchange_batch(lua, client, transport, &messages)?;
    if let Some(init_id) = init_id {
        let result = replies.result(&init_id, "initialize")?;
        apply_initialize(lua, client, &result)?;
    }
    let listed = replies.result(&list_id, "tools/list")?;
    let page = to_lua(lua, &listed)?;
    let tools = tools_of_page(lua, &page)?;
    store_tools(lua, client, tools, std::slice::from_ref(&listed))
}

/// Sets `client.tools` and learns the output schemas from `pages`, the
/// listing's results (only the tools' names and schemas are decoded: the
/// Lua tables came straight from the text).
pub(super) fn store_tools(lua: &Cx, client: &Table, tools: Value, pages: &[Json]) -> Outcome {
    peek_mut(lua, client, |core, _| core.learn_tools(pages))?;
    client.set("tools", tools.clone())?;
    Ok(MultiValue::from_vec(vec![tools]))
}

pub(super) fn call_batch(
    lua: &Cx,
    client: &Table,
    transport: Function,
    name: &Value,
    args: &Value,
) -> Outcome<CallReturn> {
    let tool = tool_label(lua, name)?;
    let what = &*tool.label;
    let (mut messages, _) = batch_handshake(lua, client)?;
    let call_id = next_id(lua, client)?;
    messages.push(protocol::request(call_id.clone(), "tools/call", call_params(lua, client, name, &tool, args)?));
    let mut replies = exchange_batch(lua, client, transport, &messages)?;
    let result = replies.result(&call_id, what)?;
    if let Some(checked) = peek(lua, client, |core, _| core.check_output(tool.bytes(), &result, what))? {
        checked?;
    }
    call_return(lua, result)
}
