//! `mcp.json_decode` and `mcp.json_encode`: the module's own codec, with
//! the contract replies and arguments have (byte strings, integers where
//! Lua has them, null deleting a key), for Lua code that reads config
//! files and prints results, as the command-line tool does.

use mlua::{MultiValue, Value};

use super::decode::{to_lua, with_json_types};
use super::encode::encode_lua;
use super::lua::{arg, lua_type, Cx, Outcome};
use super::options::json_types_option;
use crate::codec::{self};
use crate::error::Error;
pub(super) fn json_decode(lua: &Cx, args: MultiValue) -> Outcome {
    let text = match arg(&args, 0) {
        Value::String(s) => s,
        other => {
            let why = format!("mcp.json_decode: the text must be a string, got {}", lua_type(&other));
            return Err(Error::BadInput(why).into());
        }
    };
    let json_types = match arg(&args, 1) {
        Value::Nil => false,
        Value::Table(opts) => json_types_option(&opts, "mcp.json_decode")?,
        other => {
            let why = format!("mcp.json_decode: opts must be a table, got {}", lua_type(&other));
            return Err(Error::BadInput(why).into());
        }
    };
    let json = codec::decode(&text.as_bytes()).map_err(|e| Error::BadInput(format!("mcp.json_decode: {e}")))?;
    let value = with_json_types(json_types, || to_lua(lua, &json))?;
    Ok(MultiValue::from_vec(vec![value]))
}

pub(super) fn json_encode(lua: &Cx, args: MultiValue) -> Outcome {
    let json = encode_lua(lua, "value", &arg(&args, 0))?;
    Ok(MultiValue::from_vec(vec![Value::String(lua.create_string(codec::encode(&json))?)]))
}
