//! Lua values as the text Lua's own `..` would make of them.

use mlua::Value;

use crate::codec::lua_float_text;
/// The bytes Lua's `..` would use for a string or number; None otherwise.
pub(super) fn concat_text(v: &Value) -> Option<Vec<u8>> {
    match v {
        Value::String(s) => Some(s.as_bytes().to_vec()),
        Value::Integer(i) => Some(i.to_string().into_bytes()),
        Value::Number(f) => Some(lua_float_text(*f).into_bytes()),
        _ => None,
    }
}
