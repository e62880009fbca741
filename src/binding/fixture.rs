//! The fixture transport (`opts.transport`, a Lua function): the
//! reference's batched exchange, byte for byte. Users test their agents
//! through this seam, so it must not drift.

use mlua::{Function, MultiValue, Table, Value};

use super::decode::to_lua;
use super::entry::Entry;
use super::fields::{apply_initialize, call_params, initialize_request, next_id, tool_label};
use super::options::ClientState;
use super::{call_lua, listener_failed, lua_tostring, truthy, Cx, Outcome, Raise};
use crate::codec::{self, Json};
use crate::error::Error;
use crate::protocol::{self, call_outcome, Replies};

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
    let id = next_id(client)?;
    Ok((vec![initialize_request(lua, client, id.clone(), Json::Object(vec![]))?, protocol::initialized()], Some(id)))
}

pub(super) fn discover_batch(lua: &Cx, client: &Table, transport: Function) -> Outcome {
    let (mut messages, init_id) = batch_handshake(lua, client)?;
    let list_id = next_id(client)?;
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

/// A page's `tools` as the reference hands it on: the field as decoded
/// when it is truthy, else an empty table.
pub(super) fn tools_of_page(lua: &Cx, page: &Value) -> Outcome<Value> {
    if let Value::Table(page) = page {
        let tools: Value = page.raw_get("tools")?;
        if truthy(&tools) {
            return Ok(tools);
        }
    }
    Ok(Value::Table(lua.create_table()?))
}

/// Sets `client.tools` and learns the output schemas from `pages`, the
/// listing's results (only the tools' names and schemas are decoded: the
/// Lua tables came straight from the text).
pub(super) fn store_tools(lua: &Cx, client: &Table, tools: Value, pages: &[Json]) -> Outcome {
    if let Some(entry) = Entry::of(lua, client)? {
        if let Ok(mut state) = entry.state()?.borrow_mut::<ClientState>() {
            state.client.learn_tools(pages);
        }
    }
    client.set("tools", tools.clone())?;
    Ok(MultiValue::from_vec(vec![tools]))
}

pub(super) fn call_batch(lua: &Cx, client: &Table, transport: Function, name: &Value, args: &Value) -> Outcome {
    let tool = tool_label(name)?;
    let what = &*tool.label;
    let (mut messages, _) = batch_handshake(lua, client)?;
    let call_id = next_id(client)?;
    messages.push(protocol::request(call_id.clone(), "tools/call", call_params(lua, client, name, args)?));
    let mut replies = exchange_batch(lua, client, transport, &messages)?;
    let result = replies.result(&call_id, what)?;
    if let Some(entry) = Entry::of(lua, client)? {
        if let Ok(state) = entry.state()?.borrow::<ClientState>() {
            state.client.check_output(tool.bytes(), &result, what)?;
        }
    }
    call_return(lua, result)
}

/// What `call` returns: the reference's text and is_error, and then the
/// whole result (`content`, `structuredContent`, `isError`, `_meta`), which
/// two-value callers never see.
pub(super) fn call_return(lua: &Cx, result: Json) -> Outcome {
    let whole = to_lua(lua, &result)?;
    let (text, is_error) = match outcome_of_table(lua, &whole)? {
        Some(outcome) => outcome,
        None => {
            let (text, is_error) = call_outcome(result);
            (Value::String(lua.create_string(text)?), is_error)
        }
    };
    Ok(MultiValue::from_vec(vec![text, Value::Boolean(is_error), whole]))
}

/// A text part of a call's outcome: a block's own Lua string (one text
/// block, the usual reply, is returned as it is, with no copy), or bytes.
enum Part {
    Lua(mlua::LuaString),
    Bytes(Vec<u8>),
}

/// [`call_outcome`]'s rules, read off the result's Lua table: no tree is
/// decoded for a result that went to Lua straight from its text. None
/// when a block's `type` or `text` is neither a string nor absent: those
/// are printed as the tree has them (a table as its JSON text, which its
/// Lua table no longer knows; a number as Lua 5.4 prints it).
fn outcome_of_table(lua: &Cx, whole: &Value) -> Outcome<Option<(Value, bool)>> {
    let Value::Table(result) = whole else { return Ok(None) };
    let is_error = matches!(result.raw_get::<Value>("isError")?, Value::Boolean(true));
    let mut first: Option<Part> = None;
    let mut joined: Option<Vec<u8>> = None;
    // A JSON object decodes to string keys only, so its length is 0: no
    // blocks, as the tree's rule has it for anything but an array.
    if let Value::Table(content) = result.raw_get::<Value>("content")? {
        for i in 1..=content.raw_len() {
            let Value::Table(block) = content.raw_get::<Value>(i)? else { continue };
            let (kind, text) = (block.raw_get::<Value>("type")?, block.raw_get::<Value>("text")?);
            let is_text = matches!(&kind, Value::String(k) if k.as_bytes() == b"text");
            let part = match (kind, text) {
                (_, Value::String(text)) if is_text => Part::Lua(text),
                (_, text) if is_text && truthy(&text) => return Ok(None),
                (Value::String(kind), _) => {
                    Part::Bytes(format!("[{} content]", String::from_utf8_lossy(&kind.as_bytes())).into_bytes())
                }
                (kind, _) if truthy(&kind) => return Ok(None),
                _ => continue,
            };
            match (&mut joined, first.take()) {
                (Some(all), _) => {
                    all.push(b'\n');
                    append_part(all, &part);
                }
                (None, None) => first = Some(part),
                (None, Some(earlier)) => {
                    let mut all = Vec::new();
                    append_part(&mut all, &earlier);
                    all.push(b'\n');
                    append_part(&mut all, &part);
                    joined = Some(all);
                }
            }
        }
    }
    let text = match (joined, first) {
        (Some(all), _) if !all.is_empty() => Value::String(lua.create_string(all)?),
        (None, Some(Part::Lua(text))) if !text.as_bytes().is_empty() => Value::String(text),
        (None, Some(Part::Bytes(text))) => Value::String(lua.create_string(text)?),
        _ => Value::String(lua.create_string("(no content)")?),
    };
    Ok(Some((text, is_error)))
}

fn append_part(all: &mut Vec<u8>, part: &Part) {
    match part {
        Part::Lua(text) => all.extend_from_slice(&text.as_bytes()),
        Part::Bytes(text) => all.extend_from_slice(text),
    }
}

pub(super) fn deliver_notifications(lua: &Cx, client: &Table, notes: Vec<Json>) -> Outcome<()> {
    if notes.is_empty() {
        return Ok(());
    }
    let Some(entry) = Entry::of(lua, client)? else { return Ok(()) };
    let Some(callback) = entry.on_notification()? else { return Ok(()) };
    for note in notes {
        let msg = to_lua(lua, &note)?;
        // As on a live client (see `listener_failed`).
        if let Err(Raise::Lua(error)) = call_lua(lua, callback.clone(), msg) {
            listener_failed(error);
        }
    }
    Ok(())
}
