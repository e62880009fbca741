//! What Lua receives: a tool call's returns as the reference makes them
//! (text, is_error, result), lists joined page by page, the tool list as
//! `client.tools` has it (its unsafe icons dropped), which field of a
//! result each typed method returns, and the notifications handed to
//! `on_notification` outside a live session.

use std::os::raw::c_int;
use std::rc::Rc;

use mlua::{ffi, Table, Value};

use super::boundary::listener_failed;
use super::decode::{push_json, to_lua};
use super::entry::Entry;
use super::lua::{call_lua, truthy, CallReturn, Cx, Outcome, Raise};
use crate::client::{Request, Shape};
use crate::codec::Json;
use crate::error::Error;
use crate::protocol::call_outcome;
/// What `discover` sends: the whole tool list, kept as `client.tools`.
pub(super) fn tool_listing() -> Request {
    Request::new("tools/list", Json::Object(vec![]), Rc::from("tools/list")).shape(Shape::Tools { refresh: false })
}

/// The array `field` of every page, joined into one table, in order; a
/// page whose field is no array adds nothing. Each page goes to Lua
/// whole, straight from its text, and its items are moved over from there.
pub(super) fn joined_field(lua: &Cx, pages: &[Json], field: &str) -> Outcome<Table> {
    let all = lua.create_table()?;
    let mut n = 0;
    for page in pages {
        let Value::Table(page) = to_lua(lua, page)? else { continue };
        // An object decodes to string keys only: its length is 0.
        let Value::Table(items) = page.raw_get::<Value>(field)? else { continue };
        for i in 1..=items.raw_len() {
            n += 1;
            all.raw_set(n, items.raw_get::<Value>(i)?)?;
        }
    }
    Ok(all)
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

/// What `call` returns (see [`CallReturn`]).
pub(super) fn call_return(lua: &Cx, result: Json) -> Outcome<CallReturn> {
    let (whole, text, is_error) = text_blocks_outcome(lua, &result)?;
    let (text, is_error) = match (text, is_error) {
        (text @ Value::String(_), Value::Boolean(is_error)) => (text, is_error),
        _ => match outcome_of_table(lua, &whole)? {
            Some(outcome) => outcome,
            None => {
                let (text, is_error) = call_outcome(result);
                (Value::String(lua.create_string(text)?), is_error)
            }
        },
    };
    Ok(CallReturn { text, is_error, whole })
}

/// The result as Lua gets it and, when its content is what nearly every
/// reply carries (text blocks only, a few of them), the text and is_error
/// [`outcome_of_table`] would give, read on the stack it was built on:
/// through mlua, the same reads cost a reference per value and were a
/// tenth of a small call. Anything else gives nil for both, and the
/// general rules run.
fn text_blocks_outcome(lua: &Cx, result: &Json) -> Outcome<(Value, Value, Value)> {
    // SAFETY: `push_json` as in `to_lua`; the reads below push and pop
    // their own values, leaving the result, then the text and is_error
    // (or two nils). Nothing with a destructor is held: an allocation
    // error Lua raises in here skips no drop.
    Ok(unsafe {
        lua.exec_raw::<(Value, Value, Value)>((), |state| {
            push_json(state, result);
            if !push_text_blocks_outcome(state) {
                ffi::lua_pushnil(state);
                ffi::lua_pushnil(state);
            }
        })?
    })
}

/// The most blocks [`push_text_blocks_outcome`] joins on the stack.
const TEXT_BLOCKS_JOINED: c_int = 16;

/// Pushes the text and is_error of the result on top of the stack when
/// its `content` is absent or an array of at most [`TEXT_BLOCKS_JOINED`]
/// `{ type = "text", text = <string> }` blocks; pushes nothing and returns
/// false otherwise.
///
/// # Safety
/// `state` is a live Lua state inside a protected call, its top value the
/// result.
unsafe fn push_text_blocks_outcome(state: *mut ffi::lua_State) -> bool {
    if ffi::lua_type(state, -1) != ffi::LUA_TTABLE {
        return false;
    }
    let result = ffi::lua_gettop(state);
    ffi::luaL_checkstack(state, 2 * TEXT_BLOCKS_JOINED + 4, std::ptr::null());
    ffi::lua_pushlstring(state, c"content".as_ptr(), 7);
    ffi::lua_rawget(state, result);
    let blocks = match ffi::lua_type(state, -1) {
        ffi::LUA_TTABLE => ffi::lua_rawlen(state, -1) as c_int,
        _ => 0,
    };
    if blocks > TEXT_BLOCKS_JOINED {
        ffi::lua_settop(state, result);
        return false;
    }
    let content = ffi::lua_gettop(state);
    for i in 1..=blocks {
        if i > 1 {
            ffi::lua_pushlstring(state, c"\n".as_ptr(), 1);
        }
        if !push_text_of_block(state, content, i) {
            ffi::lua_settop(state, result);
            return false;
        }
    }
    if blocks > 1 {
        ffi::lua_concat(state, 2 * blocks - 1);
    }
    if blocks == 0 || ffi::lua_rawlen(state, -1) == 0 {
        ffi::lua_settop(state, content);
        ffi::lua_pushlstring(state, c"(no content)".as_ptr(), 12);
    }
    ffi::lua_replace(state, content);
    ffi::lua_pushlstring(state, c"isError".as_ptr(), 7);
    ffi::lua_rawget(state, result);
    let is_error = ffi::lua_type(state, -1) == ffi::LUA_TBOOLEAN && ffi::lua_toboolean(state, -1) != 0;
    ffi::lua_pop(state, 1);
    ffi::lua_pushboolean(state, c_int::from(is_error));
    true
}

/// Pushes the text of block `i` of the content array at `content` when it
/// is a text block with a string text; pushes nothing and returns false
/// otherwise.
///
/// # Safety
/// As [`push_text_blocks_outcome`], with room for three more values.
unsafe fn push_text_of_block(state: *mut ffi::lua_State, content: c_int, i: c_int) -> bool {
    ffi::lua_rawgeti(state, content, i as ffi::lua_Integer);
    if ffi::lua_type(state, -1) != ffi::LUA_TTABLE {
        ffi::lua_pop(state, 1);
        return false;
    }
    ffi::lua_pushlstring(state, c"type".as_ptr(), 4);
    ffi::lua_rawget(state, -2);
    let mut len = 0;
    let kind = match ffi::lua_type(state, -1) {
        ffi::LUA_TSTRING => ffi::lua_tolstring(state, -1, &mut len),
        _ => std::ptr::null(),
    };
    let is_text = !kind.is_null() && std::slice::from_raw_parts(kind.cast::<u8>(), len) == b"text";
    ffi::lua_pop(state, 1);
    if !is_text {
        ffi::lua_pop(state, 1);
        return false;
    }
    ffi::lua_pushlstring(state, c"text".as_ptr(), 4);
    ffi::lua_rawget(state, -2);
    if ffi::lua_type(state, -1) != ffi::LUA_TSTRING {
        ffi::lua_pop(state, 2);
        return false;
    }
    ffi::lua_remove(state, -2);
    true
}

/// A text part of a call's outcome: a block's own Lua string (one text
/// block, the usual reply, is returned as it is, with no copy), or bytes.
pub(super) enum Part {
    Lua(mlua::LuaString),
    Bytes(Vec<u8>),
}

/// [`call_outcome`]'s rules, read off the result's Lua table: no tree is
/// decoded for a result that went to Lua straight from its text. None
/// when a block's `type` or `text` is neither a string nor absent: those
/// are printed as the tree has them (a table as its JSON text, which its
/// Lua table no longer knows; a number as Lua 5.4 prints it).
pub(super) fn outcome_of_table(lua: &Cx, whole: &Value) -> Outcome<Option<(Value, bool)>> {
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

pub(super) fn append_part(all: &mut Vec<u8>, part: &Part) {
    match part {
        Part::Lua(text) => all.extend_from_slice(&text.as_bytes()),
        Part::Bytes(text) => all.extend_from_slice(text),
    }
}

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

/// The list methods and the field each page keeps its items in.
pub(super) fn list_field(method: &str) -> Option<&'static str> {
    Some(match method {
        "tools/list" => "tools",
        "resources/list" => "resources",
        "resources/templates/list" => "resourceTemplates",
        "prompts/list" => "prompts",
        "skills/list" => "skills",
        "resources/directory/read" => "resources",
        _ => return None,
    })
}

/// The result fields the one-field methods return.
pub(super) fn result_field(name: &str) -> Option<&'static str> {
    Some(match name {
        "contents" => "contents",
        "completion" => "completion",
        _ => return None,
    })
}

/// The shape of the outcome `request_async` asks the core for, and the
/// kind of handle it makes, when the prelude names a list to follow or a
/// field to return (its fifth argument).
pub(super) fn result_shape(method: &str, shape: &Value) -> Outcome<(Shape, Kind)> {
    match shape {
        Value::Nil => Ok((Shape::Whole, Kind::Request)),
        Value::String(s) if s.as_bytes().as_ref() == b"pages" => match list_field(method) {
            Some(field) => Ok((Shape::Pages, Kind::Pages { field })),
            None => Err(Error::BadInput(format!("{method} is not a list method")).into()),
        },
        Value::String(s) => match result_field(&s.to_str()?) {
            Some(field) => Ok((Shape::Field(field), Kind::Request)),
            None => Err(Error::BadInput(format!("no result field {}", s.to_str()?)).into()),
        },
        _ => Err(Error::BadInput("the result shape must be a string".into()).into()),
    }
}

/// The items of every page of a list, in one array, their unsafe icons
/// dropped (`client:list`, `list_resources` and friends, async or not).
pub(super) fn listed_items(lua: &Cx, pages: &[Json], field: &str) -> Outcome<Table> {
    let items = joined_field(lua, pages, field)?;
    keep_safe_icons(&items)?;
    Ok(items)
}

/// Drops the icons of each item (a tool, resource, template or prompt)
/// whose `src` is not an `https:` or `data:` URI: an agent or editor that
/// shows icons would otherwise fetch `http:`, `file:` or `javascript:`
/// addresses a server chose (the 2025-11-25 revision asks clients for
/// this). Done on the tables once they are in Lua, so the list needs no
/// tree. A tool list that was a JSON object, or icons that were
/// one, decode to tables with string keys only (length 0) and are left
/// alone, as the tree's rule leaves anything but an array alone.
pub(super) fn keep_safe_icons(tools: &Table) -> Outcome<()> {
    for i in 1..=tools.raw_len() {
        let Value::Table(tool) = tools.raw_get::<Value>(i)? else { continue };
        let Value::Table(icons) = tool.raw_get::<Value>("icons")? else { continue };
        let count = icons.raw_len();
        let mut kept = 0;
        for at in 1..=count {
            let icon: Value = icons.raw_get(at)?;
            let safe = match &icon {
                Value::Table(icon) => match icon.raw_get::<Value>("src")? {
                    Value::String(src) => {
                        let src = src.as_bytes();
                        let lower: Vec<u8> = src.iter().take(6).map(u8::to_ascii_lowercase).collect();
                        lower.starts_with(b"https:") || lower.starts_with(b"data:")
                    }
                    _ => false,
                },
                _ => false,
            };
            if safe {
                kept += 1;
                icons.raw_set(kept, icon)?;
            }
        }
        for at in kept + 1..=count {
            icons.raw_set(at, Value::Nil)?;
        }
    }
    Ok(())
}

/// Notifications a fixture exchange or a watched mount produced, handed to
/// `on_notification` as a live client hands its own.
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
