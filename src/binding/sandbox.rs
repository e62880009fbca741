//! The Lua state a model's chunk runs in (`mcp.mount`'s `code`): a state
//! of its own, made from the host's Lua library for each run and closed
//! after it, never the host's state behind a changed environment. What
//! it has: the base functions that only compute, `string` (no `dump`),
//! `table`, `math`, `utf8` where the runtime has it, and coroutines made
//! so that the bounds reach them. What it lacks: `io`, `os`, `debug`,
//! `package`, `require`, `load`/`loadstring`/`dofile`/`loadfile`,
//! `collectgarbage`, `setfenv`/`getfenv`, and the string metatable (locked:
//! `getmetatable("")` is `false`). Chunks are loaded as text only.
//!
//! Bounds, each ending the run with an error that says which:
//! instructions (counted by a hook every [`HOOK_EVERY`]), wall-clock
//! time, memory, printed bytes, and Ctrl-C. Memory is exact where the
//! runtime lets an allocator be set (Lua 5.1 to 5.4); LuaJIT's cannot be,
//! so there it is checked by the hook, and `string.rep`, `table.concat`
//! and `string.gsub`, which can make a large string in one call the hook
//! never sees, refuse results past the bound before making them.

use std::cell::RefCell;
use std::rc::Rc;
use std::time::{Duration, Instant};

use mlua::chunk::ChunkMode;
use mlua::{HookTriggers, Lua, LuaOptions, MultiValue, StdLib, Table, Value, VmState};

/// How often the hook looks (in VM instructions).
const HOOK_EVERY: u32 = 1000;

/// What a run may use.
#[derive(Clone, Copy)]
pub(super) struct Bounds {
    pub instructions: u64,
    pub time: Duration,
    pub memory: usize,
    pub printed: usize,
}

pub(super) const DEFAULT_BOUNDS: Bounds =
    Bounds { instructions: 50_000_000, time: Duration::from_secs(30), memory: 64 << 20, printed: 64 << 10 };

/// A fresh sandbox; `printed` collects what `print` wrote.
pub(super) fn make(bounds: Bounds, printed: Rc<RefCell<Vec<u8>>>) -> mlua::Result<Lua> {
    // Coroutines are a library of their own from 5.2 (5.1's base has
    // them), utf8 from 5.3.
    #[cfg(any(feature = "lua54", feature = "lua53"))]
    let libs = StdLib::STRING | StdLib::TABLE | StdLib::MATH | StdLib::COROUTINE | StdLib::UTF8;
    #[cfg(feature = "lua52")]
    let libs = StdLib::STRING | StdLib::TABLE | StdLib::MATH | StdLib::COROUTINE;
    #[cfg(not(any(feature = "lua54", feature = "lua53", feature = "lua52")))]
    let libs = StdLib::STRING | StdLib::TABLE | StdLib::MATH;
    let lua = Lua::new_with(libs, LuaOptions::new())?;
    let exact_memory = lua.set_memory_limit(bounds.memory).is_ok();
    let globals = lua.globals();
    for name in [
        "dofile",
        "loadfile",
        "load",
        "loadstring",
        "require",
        "collectgarbage",
        "module",
        "setfenv",
        "getfenv",
        "newproxy",
        "gcinfo",
        "print",
    ] {
        globals.raw_set(name, Value::Nil)?;
    }
    globals.raw_set("package", Value::Nil)?;
    let string: Table = globals.raw_get("string")?;
    string.raw_set("dump", Value::Nil)?;
    let limit = bounds.printed;
    globals.raw_set(
        "print",
        lua.create_function(move |_, values: MultiValue| {
            let mut out = printed.borrow_mut();
            for (i, value) in values.iter().enumerate() {
                if i > 0 {
                    out.push(b'\t');
                }
                out.extend_from_slice(&shown(value));
            }
            out.push(b'\n');
            if out.len() > limit {
                return Err(mlua::Error::runtime(format!("print: the chunk printed past {limit} bytes")));
            }
            Ok(())
        })?,
    )?;
    globals.raw_set("__create_thread", lua.create_function(|lua, f: mlua::Function| lua.create_thread(f))?)?;
    lua.load(SETUP).set_name("=sandbox").set_mode(ChunkMode::Text).exec()?;
    if !exact_memory {
        lua.load(format!("__bound_strings({})", bounds.memory)).set_mode(ChunkMode::Text).exec()?;
    }
    globals.raw_set("__bound_strings", Value::Nil)?;
    let started = Instant::now();
    let ran = std::cell::Cell::new(0u64);
    lua.set_global_hook(HookTriggers::new().every_nth_instruction(HOOK_EVERY), move |lua, _| {
        ran.set(ran.get() + HOOK_EVERY as u64);
        if ran.get() > bounds.instructions {
            return Err(mlua::Error::runtime(format!(
                "the chunk ran past {} instructions (a loop that does not end?)",
                bounds.instructions
            )));
        }
        if started.elapsed() > bounds.time {
            return Err(mlua::Error::runtime(format!("the chunk ran past {} s", bounds.time.as_secs())));
        }
        if !exact_memory && lua.used_memory() > bounds.memory {
            return Err(mlua::Error::runtime(format!("the chunk used past {} bytes of memory", bounds.memory)));
        }
        if crate::interrupt::requested() {
            return Err(mlua::Error::runtime("interrupted"));
        }
        Ok(VmState::Continue)
    })?;
    Ok(lua)
}

/// Runs `code` (text only) in `lua`: what it returned.
pub(super) fn run(lua: &Lua, code: &[u8]) -> mlua::Result<MultiValue> {
    lua.load(code).set_name("=chunk").set_mode(ChunkMode::Text).call(())
}

/// A value as `print` shows it, without calling any of the chunk's
/// metamethods (a `__tostring` would run outside the bounds' reach).
fn shown(value: &Value) -> Vec<u8> {
    match value {
        Value::String(s) => s.as_bytes().to_vec(),
        Value::Nil => b"nil".to_vec(),
        Value::Boolean(b) => b.to_string().into_bytes(),
        Value::Integer(n) => n.to_string().into_bytes(),
        Value::Number(n) => crate::codec::format_float(*n).into_bytes(),
        other => other.type_name().as_bytes().to_vec(),
    }
}

/// The error a run ended with, as text: a string as it is, anything else
/// named by its type.
pub(super) fn error_text(error: &mlua::Error) -> String {
    match error {
        mlua::Error::RuntimeError(message) => {
            // The traceback means nothing to a model; a raised table or
            // the like arrives as its address.
            let message = message.split("\nstack traceback:").next().unwrap_or_default();
            let raised = ["table: 0x", "userdata: 0x", "function: 0x", "thread: 0x"];
            match raised.iter().find(|p| message.starts_with(*p)) {
                Some(p) => format!("the chunk raised a {}, not a message", &p[..p.len() - 4]),
                // The runtime's stack limit, in the same words everywhere.
                None if message.ends_with("stack overflow") => "the chunk recursed too deep (stack overflow)".into(),
                // 5.3's buffers report the allocator's refusal in their own words.
                None if message.contains("not enough memory") => "the chunk used past its memory bound".into(),
                None => message.to_string(),
            }
        }
        mlua::Error::CallbackError { cause, .. } => error_text(cause),
        mlua::Error::MemoryError(_) => "the chunk used past its memory bound".into(),
        mlua::Error::SyntaxError { message, .. } => message.clone(),
        mlua::Error::ExternalError(e) => e.to_string(),
        other => other.to_string(),
    }
}

/// Run in each sandbox before the chunk, with the sandbox's own functions.
const SETUP: &str = r#"
-- The string metatable is the state's own, but locked all the same.
local mt = getmetatable("")
if mt then mt.__metatable = false end
-- What is left out says so, in the same words on every runtime.
local missing = { io = true, os = true, debug = true, package = true, require = true, load = true,
  loadstring = true, dofile = true, loadfile = true, collectgarbage = true, setfenv = true, getfenv = true,
  module = true, newproxy = true, ffi = true, jit = true, bit = false }
setmetatable(_G, { __index = function(_, name)
  if missing[name] then
    error(tostring(name) .. " is not in the sandbox (no io, os, debug, package, require, load or collectgarbage)", 2)
  end
end })
setmetatable(string, { __index = function(_, name)
  if name == "dump" then error("string.dump is not in the sandbox (chunks are text only)", 2) end
end })
-- Coroutines made here reach the instruction hook (ones the VM makes by
-- itself would not).
local create, resume, unpack = __create_thread, coroutine.resume, table.unpack or unpack
__create_thread = nil
coroutine.create = create
coroutine.wrap = function(f)
  local co = create(f)
  return function(...)
    local r = { resume(co, ...) }
    if not r[1] then error(r[2], 0) end
    return unpack(r, 2, #r)
  end
end
-- Where memory is checked by the hook only: no one call makes a string
-- past the bound.
function __bound_strings(bound)
  local rep, concat, gsub = string.rep, table.concat, string.gsub
  string.rep = function(s, n, sep)
    if type(n) == "number" and (#tostring(s) + #tostring(sep or "")) * n > bound then
      error("string.rep: the result would pass the memory bound", 2)
    end
    return rep(s, n, sep)
  end
  table.concat = function(t, sep, i, j)
    local size, sep_size = 0, #tostring(sep or "")
    for k = i or 1, j or #t do
      local v = t[k]
      size = size + (type(v) == "string" and #v or 24) + sep_size
      if size > bound then error("table.concat: the result would pass the memory bound", 2) end
    end
    return concat(t, sep, i, j)
  end
  string.gsub = function(s, pattern, repl, n)
    if type(repl) == "string" and #tostring(s) * math.max(#repl, 1) > bound then
      error("string.gsub: the result could pass the memory bound", 2)
    end
    return gsub(s, pattern, repl, n)
  end
end
"#;
