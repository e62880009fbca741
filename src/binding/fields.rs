//! The client table's fields, read and written as the reference does:
//! `next_id`, the `initialize` request and what its result leaves on the
//! table, and a tool call's name and params (its arguments shaped by the
//! tool's `inputSchema`).

use std::cell::RefCell;
use std::rc::Rc;

use mlua::{ffi, Table, Value};

use super::convert::concat_text;
use super::decode::to_lua_opt;
use super::encode::encode_lua;
use super::lua::{on_raw_stack, Cx, Outcome, RecentName};
use crate::client::{Request, Shape, TOOL_CALL};
use crate::codec::Json;
use crate::error::Error;
use crate::protocol::{self};
/// `client:id()`: the next request id, kept in the table's `next_id`.
///
/// Read raw where the field is the client's own: a lookup through a
/// metatable runs Lua, where a pending Ctrl-C raises, and the one request
/// that must still go out then (a task's `tasks/cancel`) found no id.
pub(super) fn next_id(lua: &Cx, client: &Table) -> Outcome<Json> {
    if let Some(id) = next_own_id(lua, client)? {
        return Ok(id);
    }
    let own = client.raw_get::<Value>("next_id")?;
    let inherited = own.is_nil();
    let current = if inherited { client.get::<Value>("next_id")? } else { own };
    let next = match current {
        Value::Integer(i) => Value::Integer(i.wrapping_add(1)),
        Value::Number(f) => Value::Number(f + 1.0),
        _ => return Err(Error::BadInput("MCP: client.next_id must be a number".into()).into()),
    };
    match inherited {
        true => client.set("next_id", next.clone())?,
        false => client.raw_set("next_id", next.clone())?,
    }
    Ok(match next {
        Value::Integer(i) => Json::Int(i),
        Value::Number(f) => Json::Float(f),
        _ => Json::Null,
    })
}

/// [`next_id`] when the field is the client's own number (every client
/// `mcp.new` made): read and written on the raw stack with the key kept
/// as a Lua string, where mlua made the key string anew under a
/// protected call for the read and again for the write (a small call's
/// id cost about 1,400 instructions). None when the field is not an own
/// number, or there was no room on the stack: [`next_id`] then reads and
/// words it as before.
fn next_own_id(lua: &Cx, client: &Table) -> mlua::Result<Option<Json>> {
    lua.exec_raw_lua(|raw| {
        let state = raw.state();
        // SAFETY: nothing here can raise a Lua error: raw gets and sets by
        // a string that already exists (no allocation), and the set only
        // replaces the value of a key the table has (no new slot), with
        // mlua's own pushes of references.
        unsafe {
            on_raw_stack(state, 4, || {
                raw.push(client)?;
                raw.push(&lua.prelude.next_id_key)?;
                ffi::lua_rawget(state, -2);
                let next = match raw.pop::<Value>()? {
                    Value::Integer(i) => Value::Integer(i.wrapping_add(1)),
                    Value::Number(f) => Value::Number(f + 1.0),
                    _ => return Ok(None),
                };
                raw.push(&lua.prelude.next_id_key)?;
                raw.push_value(&next)?;
                ffi::lua_rawset(state, -3);
                Ok(Some(match next {
                    Value::Integer(i) => Json::Int(i),
                    Value::Number(f) => Json::Float(f),
                    _ => Json::Null,
                }))
            })
        }
    })
}

/// `capabilities` is `{}` for the reference's exchange; a live session
/// declares what its handlers can answer.
pub(super) fn initialize_request(lua: &Cx, client: &Table, id: Json, capabilities: Json) -> Outcome<Json> {
    let version = encode_lua(lua, "protocol_version", &client.get::<Value>("protocol_version")?)?;
    let info = client_info(lua)?;
    Ok(protocol::request(id, "initialize", protocol::initialize_params(version, capabilities, info)))
}

/// `mcp.CLIENT_INFO`, which a caller may have replaced.
pub(super) fn client_info(lua: &Cx) -> Outcome<Json> {
    encode_lua(lua, "mcp.CLIENT_INFO", &lua.prelude.module.get::<Value>("CLIENT_INFO")?)
}

/// Records the initialize result on the client, as the reference does.
pub(super) fn apply_initialize(lua: &Cx, client: &Table, result: &Json) -> Outcome<()> {
    client.set("server_info", to_lua_opt(lua, result.get("serverInfo"))?)?;
    client.set("negotiated_version", to_lua_opt(lua, result.get("protocolVersion"))?)?;
    client.set("session_ready", true)?;
    Ok(())
}

/// A called tool's name: its label, "tools/call NAME", which names the
/// call in errors, and the name's own bytes (the key of its output schema).
pub(super) struct ToolName {
    pub(super) label: Rc<str>,
    /// The name's bytes, kept apart only when they are not UTF-8 (the
    /// label then shows them replaced); otherwise they are the label's tail.
    not_utf8: Option<Vec<u8>>,
}

impl ToolName {
    pub(super) fn bytes(&self) -> &[u8] {
        self.not_utf8.as_deref().unwrap_or(&self.label.as_bytes()[TOOL_CALL.len()..])
    }

    /// The request that calls it with `params`.
    pub(super) fn request(self, params: Json) -> Request {
        Request::new("tools/call", params, self.label).shape(Shape::ToolCall(self.not_utf8))
    }
}

/// How many recent labels are kept for calls to come.
const RECENT_LABELS: usize = 8;

thread_local! {
    /// The labels of the tools called last, newest first: an agent calls
    /// a few tools over and over, and a label found here is shared, not
    /// made again (an allocation of every small call).
    static LABELS: RefCell<Vec<Rc<str>>> = const { RefCell::new(Vec::new()) };
    /// Where a new label is put together, so that it is made in one
    /// allocation.
    static LABEL: RefCell<String> = const { RefCell::new(String::new()) };
}

/// The label of a tool name `tool_label` saw as this very Lua string
/// lately. Found by the string's address, with no look at its bytes:
/// through mlua that look copies a reference, which allocates (one of
/// every call's allocations). Where the Lua version gives strings no
/// address (before 5.4), nothing is found.
fn recent_label(lua: &Cx, name: &mlua::LuaString) -> Option<Rc<str>> {
    let at = name.to_pointer();
    let recent = lua.prelude.recent_names.borrow();
    recent.iter().find(|known| !at.is_null() && known.at == at).map(|known| known.label.clone())
}

fn remember_label(lua: &Cx, name: &mlua::LuaString, label: &Rc<str>) {
    let at = name.to_pointer();
    if at.is_null() {
        return;
    }
    let mut recent = lua.prelude.recent_names.borrow_mut();
    recent.truncate(RECENT_LABELS - 1);
    recent.insert(0, RecentName { _kept: name.clone(), at, label: label.clone() });
}

pub(super) fn tool_label(lua: &Cx, name: &Value) -> Outcome<ToolName> {
    if let Value::String(s) = name {
        if let Some(label) = recent_label(lua, s) {
            return Ok(ToolName { label, not_utf8: None });
        }
    }
    let label = |text: &str| {
        LABELS.with_borrow_mut(|recent| {
            let found = recent.iter().position(|l| l.strip_prefix(TOOL_CALL) == Some(text));
            let label = match found {
                Some(at) => recent.remove(at),
                None => LABEL.with_borrow_mut(|buf| {
                    buf.clear();
                    buf.push_str(TOOL_CALL);
                    buf.push_str(text);
                    Rc::<str>::from(buf.as_str())
                }),
            };
            recent.truncate(RECENT_LABELS - 1);
            recent.insert(0, label.clone());
            label
        })
    };
    match name {
        Value::String(s) => {
            let bytes = s.as_bytes();
            Ok(match std::str::from_utf8(&bytes) {
                Ok(text) => {
                    let label = label(text);
                    remember_label(lua, s, &label);
                    ToolName { label, not_utf8: None }
                }
                Err(_) => ToolName { label: label(&String::from_utf8_lossy(&bytes)), not_utf8: Some(bytes.to_vec()) },
            })
        }
        other => match concat_text(other) {
            Some(bytes) => Ok(ToolName { label: label(&String::from_utf8_lossy(&bytes)), not_utf8: None }),
            None => {
                Err(Error::BadInput(format!("client:call: the tool name must be a string, got {}", name.type_name()))
                    .into())
            }
        },
    }
}
