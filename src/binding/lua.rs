//! What every native function works with: the Lua state and what the
//! prelude handed over ([`Cx`]), how a call fails ([`Raise`]: one of our
//! errors, or a value Lua code raised, passed on untouched), and calling
//! Lua code through `pcall` so that its errors come back as values.

use mlua::{Function, IntoLuaMulti, Lua, MultiValue, Table, Value};

use crate::error::Error;
/// Why a native function did not return normally.
pub(super) enum Raise {
    /// One of our errors: raised as its message.
    Mcp(Error),
    /// A value user code raised: raised again as it is.
    Lua(Value),
}

impl From<mlua::Error> for Raise {
    fn from(e: mlua::Error) -> Self {
        Raise::Mcp(Error::from(e))
    }
}

pub(super) type Outcome<T = MultiValue> = std::result::Result<T, Raise>;

/// What the prelude hands over once: the module's own tables and the Lua
/// functions the binding must call un-overridden.
pub(super) struct Prelude {
    pub(super) module: Table,
    pub(super) client_methods: Table,
    pub(super) runner: Function,
    /// The runs of mount's search entries, made for a registry's record.
    pub(super) search_runs: Function,
    /// The run of mount's `mcp_read_output`, made for a registry's record.
    pub(super) output_reader: Function,
    /// The run of mount's `mcp_run_lua`, made for a registry's record.
    pub(super) code_runner: Function,
    pub(super) pcall: Function,
    pub(super) tostring: Function,
    /// Lua's own `pairs`, for tables with a `__pairs` metamethod.
    pub(super) pairs: Function,
    /// client table -> its [`Entry`], weak keys.
    pub(super) states: Table,
    /// The methods of a handle (its metatable).
    pub(super) handle_methods: Table,
    /// handle -> HandleState userdata, weak keys.
    pub(super) handle_states: Table,
    /// handle -> its client, weak both ways: a handle never keeps its
    /// client alive.
    pub(super) handle_clients: Table,
    /// The tool names called last, as the Lua strings they came as (see
    /// `fields::tool_label`).
    pub(super) recent_names: std::cell::RefCell<Vec<RecentName>>,
    /// The string `"next_id"`, kept so that the raw read of a client's
    /// `next_id` makes no string (see `fields::next_own_id`).
    pub(super) next_id_key: mlua::LuaString,
    /// The state's main thread (null where Lua keeps none), which
    /// `boundary::hook_watch` watches beside the running state.
    pub(super) main_thread: *mut mlua::ffi::lua_State,
}

/// A tool name a call came with, kept alive so that its address names it:
/// a string at that address is this string, whose label is known.
pub(super) struct RecentName {
    /// Held only so that the string, and so its address, stays its own.
    pub(super) _kept: mlua::LuaString,
    pub(super) at: *const std::ffi::c_void,
    pub(super) label: std::rc::Rc<str>,
}

/// What every native function works with: the Lua state and what its
/// prelude handed over.
pub(super) struct Cx<'a> {
    pub(super) lua: &'a Lua,
    pub(super) prelude: &'a Prelude,
    /// The entry this export looked up first (see `Entry::of`).
    pub(super) known_entry: std::cell::OnceCell<KnownEntry>,
}

/// A client's entry as an export first looked it up.
pub(super) struct KnownEntry {
    pub(super) client: Table,
    pub(super) entry: Entry,
}

/// A client's entry: its native state and its Lua callbacks (what it
/// does: `entry.rs`; kept here, beside the context that keeps one).
pub(super) struct Entry {
    pub(super) table: Table,
    /// What [`Entry::of`] read with the entry itself, when it did.
    pub(super) at_once: Option<ReadAtOnce>,
}

/// The fields every call reads, read with the entry in one go on the raw
/// stack: through mlua, each was a reference made and dropped (about 500
/// instructions), and a small call read five of them.
pub(super) struct ReadAtOnce {
    pub(super) state: mlua::AnyUserData,
    pub(super) json_types: bool,
    pub(super) token_function: Option<Function>,
}

impl<'a> Cx<'a> {
    pub(super) fn new(lua: &'a Lua, prelude: &'a Prelude) -> Self {
        Cx { lua, prelude, known_entry: Default::default() }
    }
}

impl std::ops::Deref for Cx<'_> {
    type Target = Lua;
    fn deref(&self) -> &Lua {
        self.lua
    }
}

pub(super) fn arg(args: &MultiValue, i: usize) -> Value {
    args.get(i).cloned().unwrap_or(Value::Nil)
}

pub(super) fn truthy(v: &Value) -> bool {
    !matches!(v, Value::Nil | Value::Boolean(false))
}

/// Calls Lua code through `pcall`: its raised value comes back untouched.
pub(super) fn call_lua(lua: &Cx, f: Function, args: impl IntoLuaMulti) -> Outcome {
    let mut all = args.into_lua_multi(lua)?;
    all.push_front(Value::Function(f));
    let mut results: MultiValue = lua.prelude.pcall.call(all)?;
    match results.pop_front() {
        Some(Value::Boolean(true)) => Ok(results),
        _ => Err(Raise::Lua(results.pop_front().unwrap_or(Value::Nil))),
    }
}

/// `obj:name(...)`, looked up through the object's metatable as Lua would.
/// `owner` names the object in the error when the method is missing.
pub(super) fn call_method(lua: &Cx, obj: &Table, owner: &str, name: &str, args: impl IntoLuaMulti) -> Outcome {
    let method: Value = obj.get(name)?;
    let Value::Function(method) = method else {
        return Err(Error::BadInput(format!("mcp.mount: {owner} has no method '{name}'")).into());
    };
    let mut all = args.into_lua_multi(lua)?;
    all.push_front(Value::Table(obj.clone()));
    call_lua(lua, method, all)
}

pub(super) fn lua_tostring(lua: &Cx, v: Value) -> Outcome<Vec<u8>> {
    let f = lua.prelude.tostring.clone();
    let out = call_lua(lua, f, v)?;
    match out.front() {
        Some(Value::String(s)) => Ok(s.as_bytes().to_vec()),
        _ => Ok(b"nil".to_vec()),
    }
}

pub(super) fn client_arg(args: &MultiValue, method: &str) -> Outcome<Table> {
    match arg(args, 0) {
        Value::Table(t) => Ok(t),
        _ => Err(Error::BadInput(format!("MCP: call {method} with a colon, as client:{method}(...)")).into()),
    }
}

/// What Lua's `type` says of a value (mlua tells integers from floats).
pub(super) fn lua_type(v: &Value) -> &'static str {
    match v {
        Value::Integer(_) | Value::Number(_) => "number",
        other => other.type_name(),
    }
}

impl From<Error> for Raise {
    fn from(e: Error) -> Self {
        Raise::Mcp(e)
    }
}

/// What `call` returns: the reference's text and is_error, and then the
/// whole result (`content`, `structuredContent`, `isError`, `_meta`), which
/// two-value callers never see.
pub(super) struct CallReturn {
    pub(super) text: Value,
    pub(super) is_error: bool,
    pub(super) whole: Value,
}

impl CallReturn {
    /// The three values, for the exports that return lists.
    pub(super) fn into_values(self) -> MultiValue {
        // Room for the `true` the boundary puts in front (`boundary::packed`).
        let mut values = MultiValue::with_capacity(4);
        values.extend([self.text, Value::Boolean(self.is_error), self.whole]);
        values
    }
}

/// Runs `read`, which reads or writes on the raw Lua stack without a
/// protected call, with room for `room` more values, and leaves the
/// stack as it was found. None when there is no room: the caller then
/// goes through mlua.
///
/// # Safety
/// `state` is the running Lua state, and `read` makes only calls that
/// cannot raise a Lua error (no metamethod, no allocation): with no
/// protected call around it, an error would unwind through Rust frames.
pub(super) unsafe fn on_raw_stack<T>(
    state: *mut mlua::ffi::lua_State,
    room: std::os::raw::c_int,
    read: impl FnOnce() -> mlua::Result<Option<T>>,
) -> mlua::Result<Option<T>> {
    if mlua::ffi::lua_checkstack(state, room) == 0 {
        return Ok(None);
    }
    let top = mlua::ffi::lua_gettop(state);
    let read = read();
    mlua::ffi::lua_settop(state, top);
    read
}
