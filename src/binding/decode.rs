//! JSON into Lua values, exactly as the reference codec builds them:
//! `null` dropped from arrays, and in objects assigned, so that it deletes
//! a key set earlier in the same object.
//!
//! Two sources. A [`Json`] tree (notifications, server requests, what Rust
//! took apart) is walked; a value still in its text ([`RawJson`], a
//! reply's `result`) is read by the codec's own grammar with a builder
//! that pushes each value onto the Lua stack as it is read. No tree is
//! made for it: for a 1 MB nested value that saved the tree's 4.1 ms
//! decode and 2.4 ms drop, and the tables cost less to build too, since
//! each is created at its final size (the counts [`decode_message`] took
//! when it checked the text).
//!
//! Both run with the raw C API inside one protected call: going through
//! mlua's safe `Table::raw_set` costs a protected call and a reference per
//! value, which made a 1 MB tool list several times slower to hand over
//! than to parse. The Lua stack holds one table (and, in an object, one
//! key) per open level, so its use is bounded by [`codec::MAX_DEPTH`],
//! not by how many members a container has; `luaL_checkstack` grows it a
//! level at a time.
//!
//! With JSON types kept ([`with_json_types`]: `mcp.json_decode(text, {
//! json_types = true })`, a client made with `json_types = true`), what
//! the reference loses is kept instead: `null` becomes `mcp.null` (a
//! light userdata) and an empty array carries the `__jsontype = "array"`
//! metatable of `mcp.array`, so that encoding the value again gives back
//! what the server sent.
//!
//! [`decode_message`]: crate::codec::decode_message

use std::cell::Cell;
use std::os::raw::c_int;

use mlua::{ffi, Lua, Value};

use crate::codec::{self, Build, Json, RawJson};
thread_local! {
    static JSON_TYPES: Cell<bool> = const { Cell::new(false) };
}

/// The registry key of the metatable empty arrays carry (`mcp.array`'s).
pub(super) const ARRAY_METATABLE: &std::ffi::CStr = c"lua-mcp array";

/// Runs `body` with JSON types kept (`on`) or dropped as the reference
/// drops them; nested calls restore the outer choice.
pub(super) fn with_json_types<T>(on: bool, body: impl FnOnce() -> T) -> T {
    struct Restore(bool);
    impl Drop for Restore {
        fn drop(&mut self) {
            JSON_TYPES.with(|t| t.set(self.0));
        }
    }
    let _restore = Restore(JSON_TYPES.with(|t| t.replace(on)));
    body()
}

pub(super) fn json_types() -> bool {
    JSON_TYPES.with(Cell::get)
}

/// Pushes `null`: nil, or `mcp.null` with JSON types kept. True when it
/// is a value an array keeps.
///
/// # Safety
/// `state` is a live Lua state with room for one more value on its stack.
unsafe fn push_null(state: *mut ffi::lua_State) -> bool {
    if json_types() {
        ffi::lua_pushlightuserdata(state, std::ptr::null_mut());
        return true;
    }
    ffi::lua_pushnil(state);
    false
}

/// Marks the array on top of the stack, if it is empty and JSON types are
/// kept: Lua cannot otherwise tell it from an empty object.
///
/// # Safety
/// `state` is a live Lua state whose top value is a table, with room for
/// one more value on its stack.
unsafe fn mark_empty_array(state: *mut ffi::lua_State, count: ffi::lua_Integer) {
    if count == 0 && json_types() {
        ffi::lua_getfield(state, ffi::LUA_REGISTRYINDEX, ARRAY_METATABLE.as_ptr());
        // (Anything but a table there was put there by someone else.)
        if ffi::lua_type(state, -1) == ffi::LUA_TTABLE {
            ffi::lua_setmetatable(state, -2);
        } else {
            ffi::lua_pop(state, 1);
        }
    }
}

/// A decoded value as the reference codec would give it to Lua: `null`
/// dropped from objects and arrays alike (see the module doc for why the
/// raw C API).
pub(super) fn to_lua(lua: &Lua, json: &Json) -> mlua::Result<Value> {
    // SAFETY: `push_json` only pushes values and sets fields on tables it
    // created, keeps the stack balanced (one value left per call), and
    // holds nothing with a destructor across Lua calls, so an allocation
    // error raised inside cannot skip a drop.
    unsafe { lua.exec_raw::<Value>((), |state| push_json(state, json)) }
}

/// Pushes `json` as one Lua value (see [`to_lua`]).
///
/// # Safety
/// `state` is a live Lua state with room for one more value on its stack
/// (containers check for the rest), inside a protected call: Lua may raise
/// an allocation error, and nothing with a destructor is held meanwhile.
pub(super) unsafe fn push_json(state: *mut ffi::lua_State, json: &Json) {
    match json {
        Json::Null => {
            push_null(state);
        }
        Json::Bool(b) => ffi::lua_pushboolean(state, *b as c_int),
        Json::Int(i) => ffi::lua_pushinteger(state, *i),
        Json::Float(f) => ffi::lua_pushnumber(state, *f),
        Json::Str(s) => {
            ffi::lua_pushlstring(state, s.as_ptr().cast(), s.len());
        }
        Json::Array(items) => {
            ffi::luaL_checkstack(state, 4, std::ptr::null());
            ffi::lua_createtable(state, items.len().min(1 << 24) as c_int, 0);
            let mut n = 0;
            let keep_null = json_types();
            for item in items.iter().filter(|v| keep_null || !matches!(v, Json::Null)) {
                push_json(state, item);
                n += 1;
                ffi::lua_rawseti(state, -2, n);
            }
            mark_empty_array(state, n as ffi::lua_Integer);
        }
        Json::Object(pairs) => {
            ffi::luaL_checkstack(state, 4, std::ptr::null());
            ffi::lua_createtable(state, 0, pairs.len().min(1 << 24) as c_int);
            for (k, v) in pairs {
                ffi::lua_pushlstring(state, k.as_ptr().cast(), k.len());
                // A null value assigns nil: a key set earlier in the same
                // object is removed, as table assignment would do.
                push_json(state, v);
                ffi::lua_rawset(state, -3);
            }
        }
        Json::Raw(raw) => push_raw(state, raw),
        request @ (Json::Request(_) | Json::Response(_)) => {
            let mut tree = request.clone();
            tree.materialize();
            push_json(state, &tree)
        }
    }
}

pub(super) fn to_lua_opt(lua: &Lua, json: Option<&Json>) -> mlua::Result<Value> {
    json.map_or(Ok(Value::Nil), |j| to_lua(lua, j))
}

/// Pushes the value a [`RawJson`] holds: from its tree if something
/// decoded (and maybe changed) it, else straight from its text.
///
/// The text was checked when it was kept, so reading it cannot fail; if
/// it did, the value is nil. An allocation error Lua raises in here leaks
/// the member counts and the scratch buffer (a longjmp skips their drop)
/// and nothing else.
///
/// # Safety
/// As [`push_json`].
unsafe fn push_raw(state: *mut ffi::lua_State, raw: &RawJson) {
    if let Some(tree) = raw.decoded() {
        return push_json(state, tree);
    }
    let base = ffi::lua_gettop(state);
    let sizes = raw.sizes();
    let mut scratch = Vec::new();
    let builder = LuaBuilder { state, sizes: &sizes, next: 0 };
    if codec::read_with(raw.text(), &mut scratch, builder).is_err() {
        ffi::lua_settop(state, base);
        ffi::lua_pushnil(state);
    }
}

/// Builds Lua values on the stack of `state`: each value read is pushed,
/// and set into its container as soon as it is complete.
pub(super) struct LuaBuilder<'a> {
    state: *mut ffi::lua_State,
    /// Member counts of the containers, in the order they open.
    sizes: &'a [u32],
    next: usize,
}

impl LuaBuilder<'_> {
    /// The next container's member count, as `lua_createtable` takes it.
    fn next_size(&mut self) -> c_int {
        let size = self.sizes.get(self.next).copied().unwrap_or(0);
        self.next += 1;
        size.min(1 << 24) as c_int
    }
}

// The builder only pushes values, and sets members into the table it
// pushed for their container, which the reader's nesting keeps just below
// them; stack room is checked at every container (each block says which
// part of this it relies on).
//
// The steps run once per value, so the small ones are marked #[inline]:
// the released module is built with less inlining than opt-level 3 gives
// (scripts/dist.sh), and without the mark they became calls.
impl Build for LuaBuilder<'_> {
    /// Whether the value pushed is not nil: an array skips a nil.
    type Value = bool;
    /// The elements set so far.
    type Array = ffi::lua_Integer;
    type Object = ();

    fn null(&mut self) -> bool {
        // SAFETY: one value pushed; the reader left room for it.
        unsafe { push_null(self.state) }
    }
    fn boolean(&mut self, b: bool) -> bool {
        // SAFETY: one value pushed; the reader left room for it.
        unsafe { ffi::lua_pushboolean(self.state, c_int::from(b)) };
        true
    }
    fn integer(&mut self, i: i64) -> bool {
        // SAFETY: one value pushed; the reader left room for it.
        unsafe { ffi::lua_pushinteger(self.state, i as ffi::lua_Integer) };
        true
    }
    fn float(&mut self, f: f64) -> bool {
        // SAFETY: one value pushed; the reader left room for it.
        unsafe { ffi::lua_pushnumber(self.state, f) };
        true
    }
    #[inline]
    fn string(&mut self, s: &[u8]) -> bool {
        // SAFETY: one value pushed (Lua copies the bytes); the reader left
        // room for it.
        unsafe { ffi::lua_pushlstring(self.state, s.as_ptr().cast(), s.len()) };
        true
    }
    fn raw(&mut self, raw: RawJson) -> bool {
        // SAFETY: one value pushed, as push_raw promises.
        unsafe { push_raw(self.state, &raw) };
        true
    }
    #[inline]
    fn begin_array(&mut self) -> ffi::lua_Integer {
        let size = self.next_size();
        // SAFETY: room for the table and its next member is made first.
        unsafe {
            ffi::luaL_checkstack(self.state, 3, std::ptr::null());
            ffi::lua_createtable(self.state, size, 0);
        }
        0
    }
    #[inline]
    fn element(&mut self, set: &mut ffi::lua_Integer, pushed: bool) {
        // SAFETY: the element is on top, its array just below it.
        unsafe {
            if pushed {
                *set += 1;
                ffi::lua_rawseti(self.state, -2, *set as _);
            } else {
                ffi::lua_pop(self.state, 1);
            }
        }
    }
    #[inline]
    fn end_array(&mut self, set: ffi::lua_Integer) -> bool {
        // SAFETY: the array is on top of the stack.
        unsafe { mark_empty_array(self.state, set) };
        true
    }
    #[inline]
    fn begin_object(&mut self) {
        let size = self.next_size();
        // SAFETY: room for the table, a key and a value is made first.
        unsafe {
            ffi::luaL_checkstack(self.state, 3, std::ptr::null());
            ffi::lua_createtable(self.state, 0, size);
        }
    }
    #[inline]
    fn key(&mut self, _: &mut (), key: &[u8]) {
        // SAFETY: the key is pushed above its object, which begin_object
        // made room for.
        unsafe { ffi::lua_pushlstring(self.state, key.as_ptr().cast(), key.len()) };
    }
    #[inline]
    fn member(&mut self, _: &mut (), _: bool) {
        // A null value assigns nil, as table assignment would.
        // SAFETY: the value, its key and their object are the top three.
        unsafe { ffi::lua_rawset(self.state, -3) };
    }
    fn end_object(&mut self, _: ()) -> bool {
        true
    }
}
