//! The Lua binding: the only code that touches mlua.
//!
//! The client is a plain Lua table with the reference's fields, so agents
//! that read `client.tools` or set `client.prefix` keep working. What the
//! table cannot hold (a live server process, an HTTP session, the native
//! options) lives in a userdata kept in a weak-keyed table beside it: when
//! the client is collected, so is its session, and the server is stopped.
//!
//! User code (a fixture transport, a registry, `on_notification`) is called
//! through Lua's own `pcall`, so an error it raises comes back as the very
//! value it raised and is re-raised unchanged, as the reference would let
//! it propagate.

use std::cell::{OnceCell, RefCell};
use std::rc::Rc;

use mlua::{Function, IntoLuaMulti, Lua, MultiValue, Table, UserData, Value};

use crate::error::Error;
use crate::interrupt;
use crate::protocol;
use crate::transport::{http, stdio};

mod auth;
mod convert;
mod decode;
mod encode;
mod entry;
mod fields;
mod fixture;
mod handles;
mod json;
mod live;
mod login;
mod options;
mod registry;
mod surface;

use auth::keep_auth_callbacks;
use decode::{with_json_types, ARRAY_METATABLE};
use entry::Entry;
use fixture::{call_batch, discover_batch};
use handles::{
    call_async, cancel, discover_async, dispatch, done, fd, request, request_async, run_on_done, wait, wait_all,
    wait_any,
};
use json::{json_decode, json_encode};
use live::{call_session, close_session, discover_session};
use options::{callbacks_of, json_types_option, read_options};
use registry::mount_tools;
use surface::{exchange, handshake, id, initialize_msg, list, notify};

/// Why a native function did not return normally.
enum Raise {
    /// One of our errors: raised as its message.
    Mcp(Error),
    /// A value user code raised: raised again as it is.
    Lua(Value),
}

impl From<Error> for Raise {
    fn from(e: Error) -> Self {
        Raise::Mcp(e)
    }
}

impl From<mlua::Error> for Raise {
    fn from(e: mlua::Error) -> Self {
        Raise::Mcp(Error::from(e))
    }
}

type Outcome<T = MultiValue> = std::result::Result<T, Raise>;

/// What the prelude hands over once: the module's own tables and the Lua
/// functions the binding must call un-overridden.
struct Prelude {
    module: Table,
    client_methods: Table,
    runner: Function,
    pcall: Function,
    tostring: Function,
    /// Lua's own `pairs`, for tables with a `__pairs` metamethod.
    pairs: Function,
    /// client table -> its [`Entry`], weak keys.
    states: Table,
    /// The methods of a handle (its metatable).
    handle_methods: Table,
    /// handle -> HandleState userdata, weak keys.
    handle_states: Table,
    /// handle -> its client, weak both ways: a handle never keeps its
    /// client alive.
    handle_clients: Table,
}

/// Opens the module on `lua`; `luaopen_mcp` calls this, and so do the
/// cargo tests on an in-process Lua.
pub fn open(lua: &Lua) -> mlua::Result<Table> {
    // Each loaded copy of the module has its own prelude tables, so two
    // copies in one state (a test loading it afresh) never share client
    // states.
    let cell: Rc<OnceCell<Prelude>> = Rc::new(OnceCell::new());
    let native = lua.create_table()?;
    native.set("new", export(lua, &cell, new)?)?;
    native.set("discover", export(lua, &cell, discover)?)?;
    native.set("call", export(lua, &cell, call)?)?;
    native.set("close", export(lua, &cell, close)?)?;
    native.set("mount", export(lua, &cell, mount_tools)?)?;
    native.set("request", export(lua, &cell, request)?)?;
    native.set("call_async", export(lua, &cell, call_async)?)?;
    native.set("discover_async", export(lua, &cell, discover_async)?)?;
    native.set("request_async", export(lua, &cell, request_async)?)?;
    native.set("wait", export(lua, &cell, wait)?)?;
    native.set("done", export(lua, &cell, done)?)?;
    native.set("cancel", export(lua, &cell, cancel)?)?;
    native.set("wait_any", export(lua, &cell, wait_any)?)?;
    native.set("wait_all", export(lua, &cell, wait_all)?)?;
    native.set("fd", export(lua, &cell, fd)?)?;
    native.set("dispatch", export(lua, &cell, dispatch)?)?;
    native.set("notify", export(lua, &cell, notify)?)?;
    native.set("list", export(lua, &cell, list)?)?;
    native.set("id", export(lua, &cell, id)?)?;
    native.set("initialize_msg", export(lua, &cell, initialize_msg)?)?;
    native.set("handshake", export(lua, &cell, handshake)?)?;
    native.set("exchange", export(lua, &cell, exchange)?)?;
    native.set("json_decode", export(lua, &cell, json_decode)?)?;
    native.set("json_encode", export(lua, &cell, json_encode)?)?;
    set_json_types(lua, &native)?;
    native.set("version", concat!("lua-mcp ", env!("CARGO_PKG_VERSION")))?;
    native.set("supported_versions", protocol::SUPPORTED_VERSIONS.to_vec())?;
    let started = std::time::Instant::now();
    native.set("clock", lua.create_function(move |_, ()| Ok(started.elapsed().as_secs_f64()))?)?;
    let setup_cell = cell.clone();
    native.set(
        "setup",
        lua.create_function(
            move |lua,
                  (module, client_methods, handle_methods, runner, lua_functions): (
                Table,
                Table,
                Table,
                Function,
                Table,
            )| {
                let weak_table = |mode: &str| -> mlua::Result<Table> {
                    let table = lua.create_table()?;
                    let meta = lua.create_table()?;
                    meta.set("__mode", mode)?;
                    table.set_metatable(Some(meta))?;
                    Ok(table)
                };
                let (states, handle_states, handle_clients) = (weak_table("k")?, weak_table("k")?, weak_table("kv")?);
                let (pcall, tostring, pairs) =
                    (lua_functions.get("pcall")?, lua_functions.get("tostring")?, lua_functions.get("pairs")?);
                let _ = setup_cell.set(Prelude {
                    module,
                    client_methods,
                    runner,
                    pcall,
                    tostring,
                    pairs,
                    states,
                    handle_methods,
                    handle_states,
                    handle_clients,
                });
                Ok(())
            },
        )?,
    )?;
    // Finalized when the state closes, after every client (it was made
    // before any of them): background shutdowns must finish before our
    // code unloads. Set once: a second copy of the module loaded into the
    // same state must not replace it with one made after the first copy's
    // clients, which would then be finalized after it.
    if lua.named_registry_value::<Value>(REAPERS_KEY)?.is_nil() {
        lua.set_named_registry_value(REAPERS_KEY, lua.create_userdata(Reapers)?)?;
    }
    let module: Table = lua.load(include_str!("prelude.lua")).set_name("=mcp").call(native)?;
    lua.load(include_str!("config.lua")).set_name("=mcp.config").call::<()>(module.clone())?;
    Ok(module)
}

/// `mcp.null` and the metatables of `mcp.array` and `mcp.object`, for the
/// prelude; the array one also in the registry, where the decoder finds
/// it without a Lua call (see `decode`).
fn set_json_types(lua: &Lua, native: &Table) -> mlua::Result<()> {
    let typed = |name: &str| -> mlua::Result<Table> {
        let metatable = lua.create_table()?;
        metatable.set("__jsontype", name)?;
        Ok(metatable)
    };
    let array = typed("array")?;
    // SAFETY: exec_raw pushes the table; lua_setfield pops it into the
    // registry, leaving the stack as it found it.
    unsafe {
        lua.exec_raw::<()>(array.clone(), |state| {
            mlua::ffi::lua_setfield(state, mlua::ffi::LUA_REGISTRYINDEX, ARRAY_METATABLE.as_ptr())
        })?;
    }
    native.set("array_metatable", array)?;
    native.set("object_metatable", typed("object")?)?;
    native.set("null", Value::LightUserData(mlua::LightUserData(std::ptr::null_mut())))?;
    Ok(())
}

const REAPERS_KEY: &str = "lua-mcp.reapers";

struct Reapers;
impl UserData for Reapers {}
impl Drop for Reapers {
    fn drop(&mut self) {
        stdio::join_reapers();
        http::join_background();
    }
}

/// Wraps a native function in the `true, ...` / `false, err` convention
/// the prelude turns into returns or raises.
///
/// This is the Lua boundary, so it is also where a panic stops: one that
/// unwound into Lua would abort the host or leave the state broken. It
/// becomes [`Error::Internal`]; whatever the call had borrowed was released
/// on the way out, so the client can be called again.
fn export(lua: &Lua, cell: &Rc<OnceCell<Prelude>>, f: fn(&Cx, MultiValue) -> Outcome) -> mlua::Result<Function> {
    let cell = cell.clone();
    lua.create_function(move |lua, args: MultiValue| {
        let mut out = MultiValue::new();
        let result = match cell.get() {
            Some(prelude) => {
                let check = hook_watch(lua);
                let outer = CALLBACK_ERROR.with(|slot| slot.take());
                let typed = keeps_json_types(prelude, args.front());
                let result =
                    guarded(|| interrupt::watching(check, || with_json_types(typed, || f(&Cx { lua, prelude }, args))));
                let raised = CALLBACK_ERROR.with(|slot| slot.replace(outer));
                match raised {
                    Some(v) => Err(Raise::Lua(v)),
                    None => result,
                }
            }
            None => Err(Raise::Mcp(Error::Lua("the module was not set up".into()))),
        };
        match result {
            Ok(values) => {
                out.push_back(Value::Boolean(true));
                out.extend(values);
            }
            Err(Raise::Mcp(e)) => {
                out.push_back(Value::Boolean(false));
                out.push_back(Value::String(lua.create_string(e.to_string())?));
            }
            Err(Raise::Lua(v)) => {
                out.push_back(Value::Boolean(false));
                out.push_back(v);
            }
        }
        Ok(out)
    })
}

thread_local! {
    /// The first error a Lua callback raised during the current export.
    static CALLBACK_ERROR: RefCell<Option<Value>> = const { RefCell::new(None) };
}

/// A request's own callback (`on_done`, `on_progress`) raised `error`.
/// Dropping it would drop the host's Ctrl-C too, which lua.c raises from
/// inside whatever Lua code runs: so the wait in progress ends as Ctrl-C
/// ends it (its request cancelled, the client's state kept whole), and
/// the export raises the first such error instead of returning.
fn callback_failed(error: Value) {
    CALLBACK_ERROR.with(|slot| {
        let mut slot = slot.borrow_mut();
        if slot.is_none() {
            *slot = Some(error);
        }
    });
    interrupt::request();
}

/// A client-wide listener (`on_notification`, `on_log`,
/// `on_resource_updated`, `on_list_changed`, a handler) raised `error`.
/// Listeners run during whichever request happens to be waiting, which
/// their bug must not fail, so the error is dropped (a handler's answers
/// the server); but the host's interrupt is never dropped.
fn listener_failed(error: Value) {
    if is_interrupt(&error) {
        callback_failed(error);
    }
}

/// Whether a callback has raised during the current export: the callbacks
/// still to run then wait for the next `dispatch` or `wait`.
fn callback_pending() -> bool {
    CALLBACK_ERROR.with(|slot| slot.borrow().is_some())
}

/// Whether this callback's error is the host's interrupt (lua.c's and
/// LuaJIT's hook raise "interrupted!", after the position if any).
fn is_interrupt(error: &Value) -> bool {
    matches!(error, Value::String(s) if s.as_bytes().ends_with(b"interrupted!"))
}

/// Whether the call is on a client (or a handle of one) made with
/// `json_types = true`: what it returns keeps `null` and empty arrays.
fn keeps_json_types(prelude: &Prelude, first: Option<&Value>) -> bool {
    let Some(Value::Table(object)) = first else { return false };
    let entry = match Entry::in_prelude(prelude, object) {
        Ok(Some(entry)) => entry,
        _ => match prelude.handle_clients.raw_get::<Value>(object.clone()) {
            Ok(Value::Table(client)) => match Entry::in_prelude(prelude, &client) {
                Ok(Some(entry)) => entry,
                _ => return false,
            },
            _ => return false,
        },
    };
    entry.json_types()
}

/// Runs `call`, turning a panic into [`Error::Internal`] with its message.
fn guarded(call: impl FnOnce() -> Outcome) -> Outcome {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(call)).unwrap_or_else(|panic| {
        let what = panic
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "a panic".into());
        Err(Raise::Mcp(Error::Internal(what)))
    })
}

/// How a wait notices that the host wants its thread back: lua5.4's Ctrl-C
/// handler (and any host that interrupts a state the same way) sets a debug
/// hook and waits for Lua code to run. A hook, mask or count that differs
/// from the one in place when the call began means exactly that; the wait
/// then returns, and the hook fires as soon as the prelude runs again.
fn hook_watch(lua: &Lua) -> Box<dyn Fn() -> bool> {
    let mut states: [*mut mlua::ffi::lua_State; 2] = [std::ptr::null_mut(); 2];
    // SAFETY: the closure records the running state and the main thread
    // (lua.c sets its hook on the main thread; a call made from a
    // coroutine runs on another), leaving the stack as it found it. The
    // pointers are read (never written through) by the check below, and
    // only while this call runs: `interrupt::watching` drops the check
    // before the call returns. The main thread lives as long as the state.
    let _ = unsafe {
        lua.exec_raw::<()>((), |s| {
            states[0] = s;
            // Lua 5.1 and LuaJIT keep no reference to the main thread:
            // there, only the running state is watched.
            #[cfg(any(feature = "lua52", feature = "lua53", feature = "lua54"))]
            {
                mlua::ffi::lua_rawgeti(s, mlua::ffi::LUA_REGISTRYINDEX, mlua::ffi::LUA_RIDX_MAINTHREAD);
                states[1] = mlua::ffi::lua_tothread(s, -1);
                mlua::ffi::lua_pop(s, 1);
            }
        })
    };
    if states[0].is_null() {
        return Box::new(|| false);
    }
    // SAFETY: reading the hook fields of live states, see above.
    let hooks_of = move || {
        states.map(|state| unsafe {
            if state.is_null() {
                return (0, 0, 0);
            }
            let hook = mlua::ffi::lua_gethook(state).map_or(0, |h| h as usize);
            (hook, mlua::ffi::lua_gethookmask(state), mlua::ffi::lua_gethookcount(state))
        })
    };
    let at_start = hooks_of();
    // Latched: lua.c's hook clears itself when it fires, so once seen the
    // request stays seen even if Lua code ran meanwhile.
    let seen = std::cell::Cell::new(false);
    Box::new(move || {
        if !seen.get() && hooks_of() != at_start {
            seen.set(true);
        }
        seen.get()
    })
}

/// What every native function works with: the Lua state and what its
/// prelude handed over.
struct Cx<'a> {
    lua: &'a Lua,
    prelude: &'a Prelude,
}

impl std::ops::Deref for Cx<'_> {
    type Target = Lua;
    fn deref(&self) -> &Lua {
        self.lua
    }
}

fn arg(args: &MultiValue, i: usize) -> Value {
    args.get(i).cloned().unwrap_or(Value::Nil)
}

fn truthy(v: &Value) -> bool {
    !matches!(v, Value::Nil | Value::Boolean(false))
}

/// Calls Lua code through `pcall`: its raised value comes back untouched.
fn call_lua(lua: &Cx, f: Function, args: impl IntoLuaMulti) -> Outcome {
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
fn call_method(lua: &Cx, obj: &Table, owner: &str, name: &str, args: impl IntoLuaMulti) -> Outcome {
    let method: Value = obj.get(name)?;
    let Value::Function(method) = method else {
        return Err(Error::BadInput(format!("mcp.mount: {owner} has no method '{name}'")).into());
    };
    let mut all = args.into_lua_multi(lua)?;
    all.push_front(Value::Table(obj.clone()));
    call_lua(lua, method, all)
}

fn lua_tostring(lua: &Cx, v: Value) -> Outcome<Vec<u8>> {
    let f = lua.prelude.tostring.clone();
    let out = call_lua(lua, f, v)?;
    match out.front() {
        Some(Value::String(s)) => Ok(s.as_bytes().to_vec()),
        _ => Ok(b"nil".to_vec()),
    }
}

fn client_arg(args: &MultiValue, method: &str) -> Outcome<Table> {
    match arg(args, 0) {
        Value::Table(t) => Ok(t),
        _ => Err(Error::BadInput(format!("MCP: call {method} with a colon, as client:{method}(...)")).into()),
    }
}

fn new(lua: &Cx, args: MultiValue) -> Outcome {
    let opts = match arg(&args, 0) {
        Value::Table(t) => t,
        _ => lua.create_table()?,
    };
    let command: Value = opts.get("command")?;
    let url: Value = opts.get("url")?;
    let transport: Value = opts.get("transport")?;
    if !truthy(&command) && !truthy(&transport) && !truthy(&url) && !truthy(&opts.get::<Value>("replay")?) {
        return Err(Error::NoEndpoint.into());
    }
    let state = read_options(&opts)?;
    let prelude = lua.prelude;
    let mut version: Value = opts.get("protocol_version")?;
    if !truthy(&version) {
        version = prelude.module.get("PROTOCOL_VERSION")?;
    }
    let client = lua.create_table()?;
    client.set("command", command)?;
    client.set("url", url)?;
    client.set("transport", transport)?;
    client.set("protocol_version", version)?;
    client.set("prefix", opts.get::<Value>("prefix")?)?;
    client.set("next_id", 0)?;
    client.set_metatable(Some(prelude.client_methods.clone()))?;
    let entry = Entry::new(
        lua,
        lua.create_userdata(state)?,
        opts.get::<Value>("on_notification")?,
        opts.get::<Value>("handlers")?,
        callbacks_of(lua, &opts)?,
        json_types_option(&opts, "mcp.new")?,
    )?;
    keep_auth_callbacks(&opts, &entry)?;
    entry.attach(lua, &client)?;
    Ok(MultiValue::from_vec(vec![Value::Table(client)]))
}

fn discover(lua: &Cx, args: MultiValue) -> Outcome {
    let client = client_arg(&args, "discover")?;
    match client.get::<Value>("transport")? {
        Value::Function(f) => discover_batch(lua, &client, f),
        v if truthy(&v) => Err(Error::BadInput("MCP: client.transport must be a function".into()).into()),
        _ => discover_session(lua, &client),
    }
}

fn call(lua: &Cx, mut args: MultiValue) -> Outcome {
    // Moved out, not cloned: each clone of a Lua reference allocates, and
    // these were 3 of a small call's allocations.
    let mut next = || args.pop_front().unwrap_or(Value::Nil);
    let client = match next() {
        Value::Table(t) => t,
        _ => return Err(Error::BadInput("MCP: call call with a colon, as client:call(...)".into()).into()),
    };
    let (name, call_args, opts) = (next(), next(), next());
    match client.get::<Value>("transport")? {
        Value::Function(f) => call_batch(lua, &client, f, &name, &call_args),
        v if truthy(&v) => Err(Error::BadInput("MCP: client.transport must be a function".into()).into()),
        _ => {
            let returns = call_session(lua, &client, &name, &call_args, &opts)?;
            run_on_done(lua, &client)?;
            Ok(returns)
        }
    }
}

fn close(lua: &Cx, args: MultiValue) -> Outcome {
    let client = client_arg(&args, "close")?;
    close_session(lua, &client)?;
    // Requests it had in flight settled with the close error: their
    // callbacks run now, not at some later call that may never come.
    run_on_done(lua, &client)?;
    Ok(MultiValue::new())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_becomes_an_error_and_the_next_call_works() {
        let failed = guarded(|| panic!("index out of bounds"));
        let Err(Raise::Mcp(err)) = failed else { panic!("the panic was not turned into an error") };
        assert_eq!(
            err.to_string(),
            "MCP: internal error (index out of bounds); the call failed, the client can be used again. Please report this."
        );
        assert!(matches!(guarded(|| Ok(MultiValue::new())), Ok(v) if v.is_empty()));
    }
}
