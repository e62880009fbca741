//! The encoder's way for the table nearly every call passes: a few string
//! keys with strings, numbers or booleans, no metatable. Read on the Lua
//! stack with `lua_next`, it is written without a reference per key and
//! value: through mlua, borrowing a string's bytes clones its reference,
//! which allocates, and a small call's three arguments cost four
//! allocations that way, and the list of entries a fifth.
//!
//! Anything else (a nested table, a number key, a metatable, a value the
//! wire refuses, more than [`FLAT_KEYS`] keys) is left to the general walk
//! in `encode`, which then writes it or names what it refuses: this way
//! writes the same bytes or nothing (tests/binding.rs compares the two on
//! thousands of tables). Only the outermost table is tried: see `encode`.

use std::ffi::c_int;

use mlua::{ffi, Table};

use super::lua::Cx;
use crate::codec::{encode_string, write_int, write_json_float};

/// The most keys read this way: the entries sit in an array on the C
/// stack, and a larger table gains little from the shortcut.
pub(super) const FLAT_KEYS: usize = 16;

/// A value the wire carries as it is; strings are borrowed from the Lua
/// state, which keeps them while their table is on its stack.
#[derive(Clone, Copy)]
enum Scalar {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(*const u8, usize),
}

#[derive(Clone, Copy)]
struct Field {
    key: (*const u8, usize),
    value: Scalar,
}

/// What [`write_flat_table`] made of a table.
pub(super) enum Flat {
    /// A flat table with fields, written.
    Written,
    /// An empty table with no metatable, not written: whether it goes out
    /// as `[]` or `{}` is the caller's to say (a schema may know).
    Empty,
    /// Anything else, for the general walk; nothing written.
    Other,
}

/// Writes `t` to `out` when it is such a table with fields.
pub(super) fn write_flat_table(lua: &Cx, t: &Table, out: &mut Vec<u8>) -> Flat {
    let mut fields = [Field { key: (std::ptr::null(), 0), value: Scalar::Null }; FLAT_KEYS];
    let mut count = None;
    // SAFETY: the closure reads the table mlua pushed at index 1 and pops
    // what it pushes. Nothing in it can raise: `lua_next` over a table no
    // code changes meanwhile, and `lua_tolstring` on strings only (no
    // conversion, so no allocation). The borrowed bytes are written out
    // before the closure returns, while the table still holds them.
    let read = unsafe {
        lua.exec_raw::<()>(t, |state| {
            count = read_fields(state, &mut fields);
            if let Some(n @ 1..) = count {
                write_fields(&mut fields[..n], out);
            }
        })
    };
    match (read, count) {
        (Ok(()), Some(0)) => Flat::Empty,
        (Ok(()), Some(_)) => Flat::Written,
        _ => Flat::Other,
    }
}

/// The table's fields, or None when it is not a flat table of scalars.
///
/// # Safety
/// `state` is a live Lua state inside a protected call, the table at index
/// 1 and room for two more values on its stack; the fields borrow its
/// strings, valid while the table stays there unchanged.
unsafe fn read_fields(state: *mut ffi::lua_State, fields: &mut [Field; FLAT_KEYS]) -> Option<usize> {
    if ffi::lua_getmetatable(state, 1) != 0 {
        ffi::lua_pop(state, 1);
        return None;
    }
    let mut n = 0;
    ffi::lua_pushnil(state);
    while ffi::lua_next(state, 1) != 0 {
        let field = if n < FLAT_KEYS { field_at(state) } else { None };
        ffi::lua_pop(state, 1);
        let Some(field) = field else {
            ffi::lua_pop(state, 1);
            return None;
        };
        fields[n] = field;
        n += 1;
    }
    Some(n)
}

/// The key and value `lua_next` pushed, when the key is a UTF-8 string
/// and the value a scalar the wire carries.
///
/// # Safety
/// `state` is a live Lua state whose two top values are a key and its
/// value, as `lua_next` pushed them.
unsafe fn field_at(state: *mut ffi::lua_State) -> Option<Field> {
    if ffi::lua_type(state, -2) != ffi::LUA_TSTRING {
        return None;
    }
    let key = utf8_at(state, -2)?;
    Some(Field { key, value: scalar_at(state, -1)? })
}

/// The value at `index`, when the wire carries it as it is: the general
/// walk refuses NaN, infinities and strings that are not UTF-8 with a
/// path, and follows tables.
///
/// # Safety
/// `state` is a live Lua state with a value at `index`.
unsafe fn scalar_at(state: *mut ffi::lua_State, index: c_int) -> Option<Scalar> {
    Some(match ffi::lua_type(state, index) {
        ffi::LUA_TBOOLEAN => Scalar::Bool(ffi::lua_toboolean(state, index) != 0),
        ffi::LUA_TLIGHTUSERDATA if ffi::lua_touserdata(state, index).is_null() => Scalar::Null,
        ffi::LUA_TNUMBER => number_at(state, index)?,
        ffi::LUA_TSTRING => {
            let (ptr, len) = utf8_at(state, index)?;
            Scalar::Str(ptr, len)
        }
        _ => return None,
    })
}

/// A number as mlua reads it (an integer, or a float that is not one).
///
/// # Safety
/// `state` is a live Lua state with a number at `index`.
#[cfg(any(feature = "lua53", feature = "lua54"))]
unsafe fn number_at(state: *mut ffi::lua_State, index: c_int) -> Option<Scalar> {
    if ffi::lua_isinteger(state, index) != 0 {
        return Some(Scalar::Int(ffi::lua_tointeger(state, index)));
    }
    finite(ffi::lua_tonumber(state, index))
}

/// A number as mlua reads it where Lua has floats only: an integer when
/// the float is one exactly (not -0), a float otherwise.
///
/// # Safety
/// `state` is a live Lua state with a number at `index`.
#[cfg(not(any(feature = "lua53", feature = "lua54")))]
unsafe fn number_at(state: *mut ffi::lua_State, index: c_int) -> Option<Scalar> {
    const TWO_POW_63: f64 = 9_223_372_036_854_775_808.0;
    let f = ffi::lua_tonumber(state, index);
    if (-TWO_POW_63..TWO_POW_63).contains(&f) && (f as i64 as f64).to_bits() == f.to_bits() {
        return Some(Scalar::Int(f as i64));
    }
    finite(f)
}

fn finite(f: f64) -> Option<Scalar> {
    f.is_finite().then_some(Scalar::Float(f))
}

/// The bytes of the string at `index`, when they are UTF-8.
///
/// # Safety
/// `state` is a live Lua state with a string at `index` (a number would be
/// converted in place, which can raise); the bytes are valid while that
/// string is held.
unsafe fn utf8_at(state: *mut ffi::lua_State, index: c_int) -> Option<(*const u8, usize)> {
    let mut len = 0;
    let ptr = ffi::lua_tolstring(state, index, &mut len).cast::<u8>();
    std::str::from_utf8(std::slice::from_raw_parts(ptr, len)).ok()?;
    Some((ptr, len))
}

/// Keys sorted by their bytes, as the general walk sorts them (a Lua
/// table holds each string key once, so the order is total).
///
/// # Safety
/// Every borrowed key and string in `fields` is still valid (its table is
/// still on the Lua stack, unchanged).
unsafe fn write_fields(fields: &mut [Field], out: &mut Vec<u8>) {
    let bytes = |(ptr, len): (*const u8, usize)| std::slice::from_raw_parts(ptr, len);
    fields.sort_unstable_by(|a, b| bytes(a.key).cmp(bytes(b.key)));
    out.push(b'{');
    for (i, field) in fields.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        encode_string(bytes(field.key), out);
        out.push(b':');
        match field.value {
            Scalar::Null => out.extend_from_slice(b"null"),
            Scalar::Bool(b) => out.extend_from_slice(if b { b"true" } else { b"false" }),
            Scalar::Int(i) => write_int(i, out),
            Scalar::Float(f) => write_json_float(f, out),
            Scalar::Str(ptr, len) => encode_string(bytes((ptr, len)), out),
        }
    }
    out.push(b'}');
}
