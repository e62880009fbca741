//! The client table's fields, read and written as the reference does.

use super::*;

/// `client:id()`: the next request id, kept in the table's `next_id`.
pub(super) fn next_id(client: &Table) -> Outcome<Json> {
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

/// `capabilities` is `{}` for the reference's exchange; a live session
/// declares what its handlers can answer.
pub(super) fn initialize_request(lua: &Cx, client: &Table, id: Json, capabilities: Json) -> Outcome<Json> {
    let version = Encoder::convert(lua, "protocol_version", &client.get::<Value>("protocol_version")?)?;
    let info = Encoder::convert(lua, "mcp.CLIENT_INFO", &lua.glue.module.get::<Value>("CLIENT_INFO")?)?;
    Ok(protocol::request(id, "initialize", protocol::initialize_params(version, capabilities, info)))
}

/// Records the initialize result on the client, as the reference does.
pub(super) fn apply_initialize(lua: &Cx, client: &Table, result: &Json) -> Outcome<()> {
    client.set("server_info", to_lua_opt(lua, result.get("serverInfo"))?)?;
    client.set("negotiated_version", to_lua_opt(lua, result.get("protocolVersion"))?)?;
    client.set("session_ready", true)?;
    Ok(())
}

pub(super) fn call_params(lua: &Cx, client_name: &Value, args: &Value) -> Outcome<Json> {
    let name = match client_name {
        Value::Nil => None,
        v => Some(Encoder::convert(lua, "name", v)?),
    };
    let arguments = if truthy(args) { Encoder::convert(lua, "arguments", args)? } else { Json::Object(vec![]) };
    Ok(protocol::call_params(name, arguments))
}

pub(super) fn tool_label(name: &Value) -> Outcome<String> {
    match concat_piece(name) {
        Some(bytes) => Ok(format!("tools/call {}", String::from_utf8_lossy(&bytes))),
        None => {
            Err(Error::BadInput(format!("client:call: the tool name must be a string, got {}", name.type_name()))
                .into())
        }
    }
}
