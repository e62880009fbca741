//! The Lua boundary: every native function is exported through
//! [`export`], which packs what it returns as `true, ...` or `false, err`
//! for the prelude to return or raise (errors reach Lua as plain strings,
//! never as userdata), stops a panic before it unwinds into Lua, watches
//! for the host's Ctrl-C while the call runs, and carries out the first
//! error a Lua callback raised during it. The same packing ([`packed`])
//! gives `on_done` its arguments.

use std::cell::{OnceCell, RefCell};
use std::rc::Rc;

use mlua::{Function, Lua, MultiValue, Value};

use super::decode::with_json_types;
use super::entry::{Entry, EntryRef};
use super::lua::{CallReturn, Cx, Outcome, Prelude, Raise};
use crate::error::Error;
use crate::interrupt;
/// Wraps a native function in the `true, ...` / `false, err` convention
/// the prelude turns into returns or raises.
///
/// This is the Lua boundary, so it is also where a panic stops: one that
/// unwound into Lua would abort the host or leave the state broken. It
/// becomes [`Error::Internal`]; whatever the call had borrowed was released
/// on the way out, so the client can be called again.
pub(super) fn export(
    lua: &Lua,
    cell: &Rc<OnceCell<Prelude>>,
    f: impl Fn(&Cx, MultiValue) -> Outcome + 'static,
) -> mlua::Result<Function> {
    export_boxed(lua, cell, Box::new(f))
}

/// What an export runs: the function behind a name of the native table.
type NativeFunction = dyn Fn(&Cx, MultiValue) -> Outcome;

/// [`export`]'s body, compiled once: generic over the function, it was
/// compiled again for each of the fifty exports, and was 0.3 MB of the
/// module. The cost is one indirect call per export called.
fn export_boxed(lua: &Lua, cell: &Rc<OnceCell<Prelude>>, f: Box<NativeFunction>) -> mlua::Result<Function> {
    let cell = cell.clone();
    lua.create_function(move |lua, args: MultiValue| {
        packed(lua, exported(lua, &cell, args, |args| args.front(), |cx, args| f(cx, args)))
    })
}

/// What `native.call` takes: the client, the tool's name, its arguments,
/// the call's options and `client.transport`.
pub(super) type CallArgs = (Value, Value, Value, Value, Value);

/// [`export`] for `native.call`, the export an agent makes most: its five
/// arguments and four returns pass as fixed lists, where mlua's lists of
/// any length are a heap allocation each (two of a small call's ten) and
/// a thousand instructions.
pub(super) fn export_call(
    lua: &Lua,
    cell: &Rc<OnceCell<Prelude>>,
    f: fn(&Cx, &CallArgs) -> Outcome<CallReturn>,
) -> mlua::Result<Function> {
    let cell = cell.clone();
    lua.create_function(move |lua, args: CallArgs| {
        Ok(match exported(lua, &cell, args, |args| Some(&args.0), |cx, args| f(cx, &args)) {
            Ok(r) => (true, r.text, Value::Boolean(r.is_error), r.whole),
            Err(raise) => (false, raised_value(lua, raise)?, Value::Nil, Value::Nil),
        })
    })
}

/// What every export does around its function: the Ctrl-C watch, the
/// JSON types of the client it is called on (its `first` argument), a
/// panic stopped, and the first error a Lua callback raised during it
/// carried out.
fn exported<A, T>(
    lua: &Lua,
    cell: &OnceCell<Prelude>,
    args: A,
    first: impl FnOnce(&A) -> Option<&Value>,
    f: impl FnOnce(&Cx, A) -> Outcome<T>,
) -> Outcome<T> {
    let Some(prelude) = cell.get() else {
        return Err(Raise::Mcp(Error::Lua("the module was not set up".into())));
    };
    let check = hook_watch(lua, prelude);
    let outer = CALLBACK_ERROR.with(|slot| slot.take());
    let cx = Cx::new(lua, prelude);
    let typed = keeps_json_types(&cx, first(&args));
    let result = guarded(|| interrupt::watching(&check, || with_json_types(typed, || f(&cx, args))));
    let raised = CALLBACK_ERROR.with(|slot| slot.replace(outer));
    match raised {
        Some(v) => Err(Raise::Lua(v)),
        None => result,
    }
}

/// An outcome as Lua takes it, the way the reference's `pcall` gives it:
/// `true, ...` or `false, err` (our errors as plain strings, a value Lua
/// code raised as it was). The prelude raises the error of an export;
/// `on_done` gets the pair as its arguments.
pub(super) fn packed(lua: &Lua, outcome: Outcome) -> mlua::Result<MultiValue> {
    match outcome {
        // In front of the values, in their own deque: exports that make
        // room for it (see `results::CallReturn`) then cost no copy.
        Ok(mut values) => {
            values.push_front(Value::Boolean(true));
            Ok(values)
        }
        Err(raise) => Ok(MultiValue::from_vec(vec![Value::Boolean(false), raised_value(lua, raise)?])),
    }
}

/// The value a failed export gives Lua: our error as its message, a value
/// Lua code raised as it was.
fn raised_value(lua: &Lua, raise: Raise) -> mlua::Result<Value> {
    Ok(match raise {
        Raise::Mcp(e) => Value::String(lua.create_string(e.to_string())?),
        Raise::Lua(v) => v,
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
pub(super) fn callback_failed(error: Value) {
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
pub(super) fn listener_failed(error: Value) {
    if is_interrupt(&error) {
        callback_failed(error);
    }
}

/// Whether a callback has raised during the current export: the callbacks
/// still to run then wait for the next `dispatch` or `wait`.
pub(super) fn callback_pending() -> bool {
    CALLBACK_ERROR.with(|slot| slot.borrow().is_some())
}

/// Whether this callback's error is the host's interrupt (lua.c's and
/// LuaJIT's hook raise "interrupted!", after the position if any).
pub(super) fn is_interrupt(error: &Value) -> bool {
    matches!(error, Value::String(s) if s.as_bytes().ends_with(b"interrupted!"))
}

/// Whether the call is on a client (or a handle of one) made with
/// `json_types = true`: what it returns keeps `null` and empty arrays.
pub(super) fn keeps_json_types(lua: &Cx, first: Option<&Value>) -> bool {
    let Some(Value::Table(object)) = first else { return false };
    let entry = match Entry::of(lua, object) {
        Ok(Some(entry)) => entry,
        _ => match lua.prelude.handle_clients.raw_get::<Value>(object.clone()) {
            Ok(Value::Table(client)) => match Entry::in_prelude(lua.prelude, &client) {
                Ok(Some(entry)) => EntryRef::Own(entry),
                _ => return false,
            },
            _ => return false,
        },
    };
    entry.json_types()
}

/// The state's main thread, for [`hook_watch`]; null where Lua keeps no
/// reference to it (5.1 and LuaJIT: there only the running state is
/// watched).
pub(super) fn main_thread(lua: &Lua) -> *mut mlua::ffi::lua_State {
    #[cfg(any(feature = "lua52", feature = "lua53", feature = "lua54"))]
    {
        let mut main = std::ptr::null_mut();
        // SAFETY: reads the registry's main-thread slot and pops what it
        // pushed.
        let _ = unsafe {
            lua.exec_raw::<()>((), |s| {
                mlua::ffi::lua_rawgeti(s, mlua::ffi::LUA_REGISTRYINDEX, mlua::ffi::LUA_RIDX_MAINTHREAD);
                main = mlua::ffi::lua_tothread(s, -1);
                mlua::ffi::lua_pop(s, 1);
            })
        };
        main
    }
    #[cfg(not(any(feature = "lua52", feature = "lua53", feature = "lua54")))]
    {
        let _ = lua;
        std::ptr::null_mut()
    }
}

/// Runs `call`, turning a panic into [`Error::Internal`] with its message.
pub(super) fn guarded<T>(call: impl FnOnce() -> Outcome<T>) -> Outcome<T> {
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
pub(super) fn hook_watch(lua: &Lua, prelude: &Prelude) -> impl Fn() -> bool {
    // The running state (a call made from a coroutine runs on another than
    // the main one) and the main thread, where lua.c sets its hook. The
    // pointers are read (never written through) by the check below, and
    // only while this call runs: `interrupt::watching` lets go of the check
    // before the call returns. The main thread lives as long as the state.
    // (Asked in a protected call, the running state cost 800 instructions
    // of every call.)
    let states = [lua.current_thread().state(), prelude.main_thread];
    // (With no state recorded, nothing is watched: the hooks of no state
    // read the same at every look.)
    let hooks_of = move || {
        // SAFETY: reading the hook fields of live states, see above.
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
    move || {
        if !seen.get() && hooks_of() != at_start {
            seen.set(true);
        }
        seen.get()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_becomes_an_error_and_the_next_call_works() {
        let failed: Outcome = guarded(|| panic!("index out of bounds"));
        let Err(Raise::Mcp(err)) = failed else { panic!("the panic was not turned into an error") };
        assert_eq!(
            err.to_string(),
            "MCP: internal error (index out of bounds); the call failed, the client can be used again. Please report this."
        );
        assert!(matches!(guarded(|| Ok(MultiValue::new())), Ok(v) if v.is_empty()));
    }
}
