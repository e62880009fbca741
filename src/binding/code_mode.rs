//! `mcp.mount(registry, client, {code = true})`: the registry gets one
//! `mcp_run_lua` entry, shared by every client mounted into it so. The
//! model writes a Lua chunk that calls the mounted tools as functions,
//! `tools[NAME](args)`, and gets back, as JSON text, what the chunk
//! returned and printed: one turn for work that would take one turn per
//! call. The chunk runs in a sandbox (`sandbox`); each call goes through
//! the host's side of the tool (its `approve`, its output cap), and what
//! crosses between the two states is copied as plain data.

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use mlua::{Function, Lua, MultiValue, Table, Value};

use super::convert::concat_text;
use super::encode::encode_lua;
use super::lua::{arg, call_method, truthy, Cx, Outcome};
use super::mount_entries::{entry, records, REGISTRY};
use super::sandbox::{self, DEFAULT_BOUNDS};
use crate::codec::{self, Json};
use crate::error::Error;
use crate::mount;

pub(super) const RUN_LUA: &str = "mcp_run_lua";

const RECORDS: &str = "lua-mcp code records";

/// Tool calls one run may make.
const MAX_CALLS: usize = 50;

/// How much of what a failed chunk printed its error repeats.
const PRINTED_IN_ERROR: usize = 2000;

/// How deep a value copied between the states may nest.
const MAX_DEPTH: usize = 64;

/// The registry's code record (`tools`: mounted name -> the host's call),
/// made with its entry the first time; a mount that needs approval makes
/// the entry need it, and one with `max_output` caps what runs answer
/// (`capped`: its outputs record and cap, or nils).
pub(super) fn record_for(
    lua: &Cx,
    registry: &Table,
    requires_approval: bool,
    capped: &(Value, Value),
) -> Outcome<Table> {
    let all = records(lua, RECORDS)?;
    let record = match all.raw_get::<Value>(registry.clone())? {
        Value::Table(record) => record,
        _ => new_record(lua, registry, &all)?,
    };
    if requires_approval {
        record.raw_get::<Table>("entry")?.set("requires_approval", true)?;
    }
    if !capped.0.is_nil() {
        record.raw_set("outputs", capped.0.clone())?;
        record.raw_set("max_output", capped.1.clone())?;
    }
    Ok(record)
}

fn new_record(lua: &Cx, registry: &Table, all: &Table) -> Outcome<Table> {
    let existing = call_method(lua, registry, REGISTRY, "get", RUN_LUA)?;
    if existing.front().is_some_and(truthy) {
        return Err(Error::Collision { quoted: mount::lua_quote(RUN_LUA.as_bytes()) }.into());
    }
    let record = lua.create_table()?;
    record.raw_set("tools", lua.create_table()?)?;
    let run: Function = lua.prelude.code_runner.call(record.clone())?;
    let entry = entry(
        lua,
        RUN_LUA,
        "Run a Lua chunk that calls tools as functions: tools[NAME](args) returns the tool's structured result (or its text) and raises its error; print and return what you need. Sandboxed: no io, os or require.",
        &[("code", "string", true)],
        run,
    )?;
    entry.set("requires_approval", false)?;
    call_method(lua, registry, REGISTRY, "add", entry.clone())?;
    record.raw_set("entry", entry)?;
    all.raw_set(registry.clone(), record.clone())?;
    Ok(record)
}

/// Makes a mounted tool callable from chunks as `tools[name]`.
pub(super) fn add(lua: &Cx, record: &Table, name: &[u8], call: Function) -> Outcome<()> {
    let tools: Table = record.raw_get("tools")?;
    tools.raw_set(lua.create_string(name)?, call)?;
    Ok(())
}

pub(super) fn remove(lua: &Cx, record: &Table, name: &[u8]) -> Outcome<()> {
    let tools: Table = record.raw_get("tools")?;
    tools.raw_set(lua.create_string(name)?, Value::Nil)?;
    Ok(())
}

/// `native.run_lua(record, code)`: runs the chunk; its returns and prints
/// as JSON text, or an error naming what ended it (with what it printed).
pub(super) fn run_lua(lua: &Cx, args: MultiValue) -> Outcome {
    let Value::Table(record) = arg(&args, 0) else {
        return Err(Error::BadInput("mcp_run_lua: no record".into()).into());
    };
    let code = concat_text(&arg(&args, 1)).unwrap_or_default();
    let printed = Rc::new(RefCell::new(Vec::new()));
    let sandbox = sandbox::make(DEFAULT_BOUNDS, printed.clone())
        .map_err(|e| Error::BadInput(format!("mcp_run_lua: no sandbox could be made ({})", sandbox::error_text(&e))))?;
    bridge_tools(lua.lua, &sandbox, &record)?;
    let outcome = sandbox::run(&sandbox, &code);
    let printed = String::from_utf8_lossy(&printed.borrow()).into_owned();
    let returned = match outcome {
        Ok(values) => values,
        Err(e) => {
            let mut text = format!("mcp_run_lua: {}", sandbox::error_text(&e));
            if !printed.is_empty() {
                let shown = &printed[..crate::mount::char_boundary(&printed, PRINTED_IN_ERROR)];
                let more = if shown.len() < printed.len() { " ..." } else { "" };
                text.push_str(&format!("\n(printed before it: {shown}{more})"));
            }
            return Err(Error::BadInput(text).into());
        }
    };
    let mut values = Vec::new();
    for value in returned.iter() {
        let host = copy(value, lua.lua, 0).map_err(|e| {
            Error::BadInput(format!("mcp_run_lua: the chunk returned what is not data ({})", sandbox::error_text(&e)))
        })?;
        values.push(encode_lua(lua, "the chunk's return", &host).unwrap_or(Json::str("(not JSON)")));
    }
    let reply = Json::object([("printed", Json::str(printed)), ("returned", Json::Array(values))]);
    Ok(MultiValue::from_vec(vec![Value::String(lua.create_string(codec::encode(&reply))?)]))
}

/// `tools` in the sandbox: each mounted tool as a function that copies
/// its arguments out, calls the host's side, and copies the answer in.
fn bridge_tools(host: &Lua, sandbox: &Lua, record: &Table) -> Outcome<()> {
    let calls = Rc::new(Cell::new(0usize));
    let tools_in = sandbox.create_table()?;
    let tools: Table = record.raw_get("tools")?;
    for pair in tools.pairs::<mlua::LuaString, Function>() {
        let (name, call) = pair?;
        let (host, calls, label) =
            (host.clone(), calls.clone(), String::from_utf8_lossy(&name.as_bytes()).into_owned());
        let function = sandbox.create_function(move |sandbox, args: Value| {
            calls.set(calls.get() + 1);
            if calls.get() > MAX_CALLS {
                return Err(mlua::Error::runtime(format!("tools.{label}: past {MAX_CALLS} tool calls in one run")));
            }
            let args = copy(&args, &host, 0)?;
            let answer: Value = call.call(args).map_err(|e| mlua::Error::runtime(sandbox::error_text(&e)))?;
            copy(&answer, sandbox, 0)
        })?;
        tools_in.raw_set(sandbox.create_string(name.as_bytes())?, function)?;
    }
    sandbox.globals().raw_set("tools", tools_in)?;
    Ok(())
}

/// A value of one state made in another: strings, numbers, booleans and
/// tables of them; anything else (a function, a coroutine) is refused.
fn copy(value: &Value, to: &Lua, depth: usize) -> mlua::Result<Value> {
    if depth > MAX_DEPTH {
        return Err(mlua::Error::runtime(format!("a value nested past {MAX_DEPTH} levels cannot be passed")));
    }
    Ok(match value {
        Value::Nil => Value::Nil,
        Value::Boolean(b) => Value::Boolean(*b),
        Value::Integer(n) => Value::Integer(*n),
        Value::Number(n) => Value::Number(*n),
        Value::String(s) => Value::String(to.create_string(s.as_bytes())?),
        Value::Table(t) => {
            let out = to.create_table()?;
            for pair in t.pairs::<Value, Value>() {
                let (k, v) = pair?;
                out.raw_set(copy(&k, to, depth + 1)?, copy(&v, to, depth + 1)?)?;
            }
            if let Some(meta) = t.metatable() {
                // An array marked as such (mcp.array) stays one.
                if meta.raw_get::<Value>("__jsontype")? != Value::Nil {
                    let m = to.create_table()?;
                    m.raw_set("__jsontype", copy(&meta.raw_get::<Value>("__jsontype")?, to, depth + 1)?)?;
                    out.set_metatable(Some(m))?;
                }
            }
            Value::Table(out)
        }
        Value::LightUserData(p) if p.0.is_null() => Value::Nil,
        other => {
            return Err(mlua::Error::runtime(format!(
                "a {} cannot be passed between the chunk and a tool",
                other.type_name()
            )))
        }
    })
}
