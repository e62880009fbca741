//! The Lua binding: the only code that touches mlua.
//!
//! This file is only the export table: [`open`] hands `prelude.lua` the
//! native functions (each wrapped by `boundary::export`), `mcp.null` and
//! the JSON-type metatables, loads `config.lua`, and leaves a finaliser
//! that joins the background shutdowns when the Lua state closes.
//!
//! The client is a plain Lua table with the reference's fields, so agents
//! that read `client.tools` or set `client.prefix` keep working. What the
//! table cannot hold (a live server process, an HTTP session, the native
//! options) lives in a userdata kept in its entry, in a weak-keyed table
//! beside it: when the client is collected, so is its session, and the
//! server is stopped.
//!
//! User code (a fixture transport, a registry, `on_notification`) is called
//! through Lua's own `pcall`, so an error it raises comes back as the very
//! value it raised and is re-raised unchanged, as the reference would let
//! it propagate.
//!
//! The rest, a file per job: `boundary` (what every export goes through)
//! and `lua` (the state, how a call fails, calling Lua); `methods`
//! (`mcp.new` and the blocking methods), `handles` (the async API) and
//! `waits` (the waits, `fd`, `dispatch`); `door` (the one way into the
//! core), `host` (what the core asks of Lua) and `results` (what Lua
//! receives); `options`, `readers`, `entry` and `fields` (a client's
//! options and state); `encode`, `decode`, `convert` and `json` (values
//! both ways); `fixture` (the reference's batched exchange), `registry`
//! (`mcp.mount`), `auth` and `login` (`opts.auth`, a login beside Lua).

use std::cell::OnceCell;
use std::rc::Rc;

use mlua::{Function, Lua, MultiValue, Table, UserData, Value};

use crate::protocol::{self};
use crate::transport::http::{self};
use crate::transport::stdio::{self};
use boundary::{export, CallArgs};
use decode::ARRAY_METATABLE;
use handles::{call_async, cancel, discover_async, done, request_async, run_on_done, skill_async, status};
use json::{json_decode, json_encode};
use lua::{CallReturn, Cx, Outcome, Prelude};
use methods::{call, close, discover, exchange, handshake, id, initialize_msg, list, new, notify, request, skill};
use registry::mount_tools;
use waits::{dispatch, fd, wait, wait_all, wait_any};
mod auth;
mod boundary;
mod code_mode;
mod convert;
mod decode;
mod door;
mod encode;
mod entry;
mod fields;
mod fixture;
mod flat_table;
mod handles;
mod host;
mod json;
mod login;
mod lua;
mod methods;
mod mount_entries;
mod options;
mod outputs;
mod readers;
mod registry;
mod results;
mod sandbox;
mod search;
mod server;
mod system_text;
mod trace;
mod waits;

/// Opens the module on `lua`; `luaopen_mcp` calls this, and so do the
/// cargo tests on an in-process Lua.
pub fn open(lua: &Lua) -> mlua::Result<Table> {
    // Each loaded copy of the module has its own prelude tables, so two
    // copies in one state (a test loading it afresh) never share client
    // states.
    let cell: Rc<OnceCell<Prelude>> = Rc::new(OnceCell::new());
    let native = lua.create_table()?;
    native.set("new", export(lua, &cell, new)?)?;
    native.set("discover", export_method(lua, &cell, discover)?)?;
    native.set("call", boundary::export_call(lua, &cell, call_method)?)?;
    native.set("close", export_method(lua, &cell, close)?)?;
    native.set("mount", export(lua, &cell, mount_tools)?)?;
    native.set("current_tool", export(lua, &cell, door::current_tool)?)?;
    native.set("server", export(lua, &cell, server::server_new)?)?;
    native.set("server_add", export(lua, &cell, server::server_add)?)?;
    native.set("server_remove", export(lua, &cell, server::server_remove)?)?;
    native.set("server_skill", export(lua, &cell, server::server_skill)?)?;
    native.set("server_resource_updated", export(lua, &cell, server::server_resource_updated)?)?;
    native.set("serve_stdio", export(lua, &cell, server::serve_stdio)?)?;
    native.set("server_close", export(lua, &cell, server::server_close)?)?;
    native.set("server_listen", export(lua, &cell, server::server_listen)?)?;
    native.set("server_fd", export(lua, &cell, server::server_fd)?)?;
    native.set("server_dispatch", export(lua, &cell, server::server_dispatch)?)?;
    native.set("server_run", export(lua, &cell, server::server_run)?)?;
    native.set("ctx_notify", export(lua, &cell, server::ctx_notify)?)?;
    native.set("ctx_cancelled", export(lua, &cell, server::ctx_cancelled)?)?;
    native.set("ctx_request", export(lua, &cell, server::ctx_request)?)?;
    native.set("ctx_finish", export(lua, &cell, server::ctx_finish)?)?;
    native.set("ctx_ask", export(lua, &cell, server::ctx_ask)?)?;
    native.set("ctx_task_ask", export(lua, &cell, server::ctx_task_ask)?)?;
    native.set("ctx_client_can", export(lua, &cell, server::ctx_client_can)?)?;
    native.set("ctx_close_stream", export(lua, &cell, server::ctx_close_stream)?)?;
    native.set("request", export_method(lua, &cell, request)?)?;
    native.set("call_async", export(lua, &cell, call_async)?)?;
    native.set("discover_async", export(lua, &cell, discover_async)?)?;
    native.set("request_async", export(lua, &cell, request_async)?)?;
    native.set("wait", export(lua, &cell, wait)?)?;
    native.set("done", export(lua, &cell, done)?)?;
    native.set("cancel", export(lua, &cell, cancel)?)?;
    native.set("status", export(lua, &cell, status)?)?;
    native.set("wait_any", export(lua, &cell, wait_any)?)?;
    native.set("wait_all", export(lua, &cell, wait_all)?)?;
    native.set("fd", export(lua, &cell, fd)?)?;
    native.set("dispatch", export(lua, &cell, dispatch)?)?;
    native.set("notify", export_method(lua, &cell, notify)?)?;
    native.set("list", export_method(lua, &cell, list)?)?;
    native.set("search_tools", export(lua, &cell, search::search_tools)?)?;
    native.set("search_miss", export(lua, &cell, search::search_miss)?)?;
    native.set("cap_output", export(lua, &cell, outputs::cap_output)?)?;
    native.set("read_output", export(lua, &cell, outputs::read_output)?)?;
    native.set("run_lua", export(lua, &cell, code_mode::run_lua)?)?;
    native.set("skill", export_method(lua, &cell, skill)?)?;
    native.set("skill_async", export(lua, &cell, skill_async)?)?;
    native.set("id", export(lua, &cell, id)?)?;
    native.set("initialize_msg", export(lua, &cell, initialize_msg)?)?;
    native.set("handshake", export_method(lua, &cell, handshake)?)?;
    native.set("exchange", export_method(lua, &cell, exchange)?)?;
    native.set("json_decode", export(lua, &cell, json_decode)?)?;
    native.set("json_encode", export(lua, &cell, json_encode)?)?;
    native.set("traceparent", export(lua, &cell, trace::traceparent)?)?;
    set_json_types(lua, &native)?;
    native.set("version", concat!("lua-mcp ", env!("CARGO_PKG_VERSION")))?;
    native.set("supported_versions", protocol::SUPPORTED_VERSIONS.to_vec())?;
    clock_started();
    // SAFETY: `clock` pushes one number (a C function has room for
    // LUA_MINSTACK) and reads nothing from the stack.
    native.set("clock", unsafe { lua.create_c_function(clock) }?)?;
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
                let search_runs = lua_functions.get("search_runs")?;
                let output_reader = lua_functions.get("output_reader")?;
                let code_runner = lua_functions.get("code_runner")?;
                let _ = setup_cell.set(Prelude {
                    module,
                    client_methods,
                    runner,
                    search_runs,
                    output_reader,
                    code_runner,
                    pcall,
                    tostring,
                    pairs,
                    states,
                    handle_methods,
                    handle_states,
                    handle_clients,
                    recent_names: Default::default(),
                    next_id_key: lua.create_string("next_id")?,
                    main_thread: boundary::main_thread(lua),
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
pub(super) fn set_json_types(lua: &Lua, native: &Table) -> mlua::Result<()> {
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

pub(super) const REAPERS_KEY: &str = "lua-mcp.reapers";

pub(super) struct Reapers;
impl UserData for Reapers {}
impl Drop for Reapers {
    fn drop(&mut self) {
        stdio::join_reapers();
        http::join_background();
    }
}

/// [`export`] for a blocking client method (`client:call`, `discover`,
/// `notify`, ...): once it has returned, the `on_done` of the client's
/// handles that settled meanwhile run, the client being free again so
/// that they may call it. Applied where the methods are registered, so
/// that no method forgets it (`discover` and `notify` once did). A method
/// that raised runs none: its error reaches the caller first.
fn export_method(lua: &Lua, cell: &Rc<OnceCell<Prelude>>, f: fn(&Cx, MultiValue) -> Outcome) -> mlua::Result<Function> {
    export(lua, cell, move |lua, args| {
        let client = match args.front() {
            Some(Value::Table(client)) => Some(client.clone()),
            _ => None,
        };
        let returned = f(lua, args)?;
        if let Some(client) = client {
            run_on_done(lua, &client)?;
        }
        Ok(returned)
    })
}

/// `native.call`, with what [`export_method`] adds to the other methods:
/// the `on_done` of the client's handles that settled meanwhile.
fn call_method(lua: &Cx, args: &CallArgs) -> Outcome<CallReturn> {
    let returns = call(lua, args)?;
    if let Value::Table(client) = &args.0 {
        run_on_done(lua, client)?;
    }
    Ok(returns)
}

/// `mcp.clock()`: seconds since the module was first opened in this
/// process, on a monotonic clock. A plain C function, not an mlua
/// callback: a benchmark reads the clock twice around every call it
/// times, and mlua's wrapper cost about 215 instructions a read more.
unsafe extern "C-unwind" fn clock(state: *mut mlua::ffi::lua_State) -> std::os::raw::c_int {
    mlua::ffi::lua_pushnumber(state, clock_started().elapsed().as_secs_f64());
    1
}

fn clock_started() -> std::time::Instant {
    static STARTED: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    *STARTED.get_or_init(std::time::Instant::now)
}
