//! `mcp.json_decode` and `mcp.json_encode`: the module's own codec, with
//! the contract replies and arguments have (byte strings, integers where
//! Lua has them, null deleting a key), for Lua code that reads config
//! files and prints results, as the command-line tool does.

use super::*;

pub(super) fn json_decode(lua: &Cx, args: MultiValue) -> Outcome {
    let text = match arg(&args, 0) {
        Value::String(s) => s,
        other => {
            let why = format!("mcp.json_decode: the text must be a string, got {}", lua_type(&other));
            return Err(Error::BadInput(why).into());
        }
    };
    let json = codec::decode(&text.as_bytes()).map_err(|e| Error::BadInput(format!("mcp.json_decode: {e}")))?;
    Ok(MultiValue::from_vec(vec![to_lua(lua, &json)?]))
}

pub(super) fn json_encode(lua: &Cx, args: MultiValue) -> Outcome {
    let json = encode_lua(lua, "value", &arg(&args, 0))?;
    Ok(MultiValue::from_vec(vec![Value::String(lua.create_string(codec::encode(&json))?)]))
}
