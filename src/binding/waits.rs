//! Waiting for handles and for an event loop: `handle:wait`,
//! `mcp.wait_any`, `mcp.wait_all`, the descriptor behind `client:fd()` and
//! `client:dispatch()`. A wait on one client waits on its session
//! directly; on several, on the process-wide arrival signal. Ctrl-C ends
//! any wait.

use std::time::{Duration, Instant};

use mlua::{AnyUserData, MultiValue, Table, Value};

use super::door::{drain, with_client, Borrower, Seam};
use super::entry::Entry;
use super::handles::{
    client_of, finish, handle_arg, poll_handle, run_on_done, settle_orphan, take_if_settled, HandleState,
};
use super::lua::{arg, client_arg, Cx, Outcome, Raise};
pub(super) use super::readers::wait_bound;
use crate::error::Error;
use crate::interrupt;
use crate::transport::arrivals;
pub(super) fn deadline_after(bound: Option<Duration>) -> Instant {
    bound.and_then(|b| Instant::now().checked_add(b)).unwrap_or_else(crate::interrupt::far_future)
}

/// `handle:wait([timeout])`: what `call` (or `request`) would return, or
/// nothing if `timeout` passes first (the request goes on).
pub(super) fn wait(lua: &Cx, args: MultiValue) -> Outcome {
    let (handle, state_ud) = handle_arg(lua, &arg(&args, 0), "handle:wait")?;
    let bound = wait_bound(&arg(&args, 1), "handle:wait")?;
    let state = state_ud.borrow::<HandleState>()?;
    if state.settled.borrow().is_none() {
        let Some(client) = client_of(lua, &handle)? else {
            settle_orphan(&state);
            return finish(lua, &handle, &state, None);
        };
        let until = deadline_after(bound);
        let settled = with_client(lua, &client, Borrower::Named("handle:wait"), |core, host| {
            let mut slot = state.op.borrow_mut();
            let Some(op) = slot.as_mut() else { return Ok(true) };
            if !core.wait(host, op, until)? {
                return Ok(false);
            }
            drop(slot);
            Ok(take_if_settled(core, host, &state))
        })?;
        if !settled {
            run_on_done(lua, &client)?;
            return Ok(MultiValue::new());
        }
        return finish(lua, &handle, &state, Some(&client));
    }
    let client = client_of(lua, &handle)?;
    finish(lua, &handle, &state, client.as_ref())
}

/// The handles of `mcp.wait_any` / `mcp.wait_all`, in order, read from
/// their Lua list one at a time: Lua 5.1 and LuaJIT hold at most 8,000
/// values on the stack where Rust keeps its references, and a wait for
/// 8,000 handles that held them all ran out of it.
pub(super) struct HandleList {
    list: Table,
    len: usize,
}

impl HandleList {
    /// Checks every item is a handle, naming the first that is not.
    fn read(lua: &Cx, value: &Value, what: &str) -> Outcome<HandleList> {
        let Value::Table(list) = value else {
            return Err(Error::BadInput(format!("{what}: expected a list of handles")).into());
        };
        let handles = HandleList { list: list.clone(), len: list.raw_len() };
        for i in 0..handles.len {
            handles.at(lua, i, what)?;
        }
        Ok(handles)
    }

    /// The `i`th handle (from 0) and its state.
    fn at(&self, lua: &Cx, i: usize, what: &str) -> Outcome<(Table, AnyUserData)> {
        let item = self.list.raw_get::<Value>(i + 1)?;
        handle_arg(lua, &item, what).map_err(|_| {
            Error::BadInput(format!("{what}: handles[{}] is not a handle from call_async or request_async", i + 1))
                .into()
        })
    }

    /// The clients of the handles, each once.
    fn clients(&self, lua: &Cx, what: &str) -> Outcome<Vec<Table>> {
        let mut clients: Vec<Table> = Vec::new();
        for i in 0..self.len {
            let (handle, _) = self.at(lua, i, what)?;
            if let Some(client) = client_of(lua, &handle)? {
                if !clients.iter().any(|c| c == &client) {
                    clients.push(client);
                }
            }
        }
        Ok(clients)
    }
}

/// Waits for handles of one or more clients. Each turn looks at every
/// handle not yet settled: a task's handle moves on only when it is
/// looked at (its next poll is sent then), so a wait that looked only at
/// the first unsettled one advanced 200 tasks one at a time. A turn
/// follows each batch of arrivals, not each message, which keeps a wait
/// for thousands of handles far from quadratic. One client's session is
/// waited on directly (its reply wakes us with no detour); several, on the
/// process-wide arrival signal, which holds no descriptor of theirs.
pub(super) fn wait_handles(lua: &Cx, args: &MultiValue, what: &str, all: bool) -> Outcome {
    let handles = HandleList::read(lua, &arg(args, 0), what)?;
    let until = deadline_after(wait_bound(&arg(args, 1), what)?);
    // For wait_all, the handles before this one have settled.
    let mut first_unsettled = 0;
    loop {
        let mark = arrivals::mark();
        let mut unsettled_clients: Vec<Table> = Vec::new();
        let mut all_settled = true;
        let start = first_unsettled;
        for i in start..handles.len {
            let (handle, state_ud) = handles.at(lua, i, what)?;
            if poll_handle(lua, &handle, &state_ud)? {
                if !all {
                    for client in handles.clients(lua, what)? {
                        run_on_done(lua, &client)?;
                    }
                    return Ok(MultiValue::from_vec(vec![Value::Integer((i + 1) as _)]));
                }
                if all_settled {
                    first_unsettled = i + 1;
                }
                continue;
            }
            all_settled = false;
            if let Some(client) = client_of(lua, &handle)? {
                if !unsettled_clients.iter().any(|c| c == &client) {
                    unsettled_clients.push(client);
                }
            }
        }
        if all && all_settled {
            for client in handles.clients(lua, what)? {
                run_on_done(lua, &client)?;
            }
            return Ok(MultiValue::from_vec(vec![Value::Boolean(true)]));
        }
        if handles.len == 0 || Instant::now() >= until {
            return Ok(MultiValue::from_vec(vec![Value::Nil]));
        }
        if interrupt::requested() {
            return Err(Error::Interrupted { what: what.to_string() }.into());
        }
        let slice_end = until.min(Instant::now() + interrupt::SLICE);
        match unsettled_clients.as_slice() {
            [client] => {
                let pumped = with_client(lua, client, Borrower::Named(what), |core, host| {
                    let wake = core.next_deadline().map_or(slice_end, |due| due.min(slice_end));
                    if core.pump(host, wake)? {
                        drain(core, host)?;
                    }
                    Ok(())
                });
                match pumped {
                    Err(Raise::Mcp(Error::Interrupted { .. })) => {
                        return Err(Error::Interrupted { what: what.to_string() }.into())
                    }
                    other => other?,
                }
            }
            clients => {
                let mut wake = slice_end;
                let mut routed = false;
                for client in clients {
                    with_client(lua, client, Borrower::Named(what), |core, host| {
                        routed |= drain(core, host)?;
                        if let Some(due) = core.next_deadline() {
                            wake = wake.min(due);
                        }
                        Ok(())
                    })?;
                }
                if !routed {
                    arrivals::wait_past(mark, wake);
                }
            }
        }
    }
}

/// `mcp.wait_any(handles [, timeout])`: the index of a settled handle, or
/// nil at the timeout.
pub(super) fn wait_any(lua: &Cx, args: MultiValue) -> Outcome {
    wait_handles(lua, &args, "mcp.wait_any", false)
}

/// `mcp.wait_all(handles [, timeout])`: true once all have settled, or nil
/// at the timeout.
pub(super) fn wait_all(lua: &Cx, args: MultiValue) -> Outcome {
    wait_handles(lua, &args, "mcp.wait_all", true)
}

/// `client:fd()`: a descriptor that is readable whenever `dispatch` has
/// something to do.
pub(super) fn fd(lua: &Cx, args: MultiValue) -> Outcome {
    let client = client_arg(&args, "fd")?;
    if !Seam::of(&client)?.is_live() {
        return Err(Error::BadInput(
            "client:fd: needs a command or url client (a fixture transport answers at once)".into(),
        )
        .into());
    }
    let fd = with_client(lua, &client, Borrower::Named("client:fd"), |core, host| {
        let (bell, fd) = host.options.armed_doorbell()?;
        bell.ring_at(core.next_deadline());
        Ok(fd)
    })?;
    Ok(MultiValue::from_vec(vec![Value::Integer(fd as _)]))
}

/// `client:dispatch()`: runs what is ready (on_notification, handlers,
/// on_done, timeouts) without waiting, and returns how many callbacks ran.
pub(super) fn dispatch(lua: &Cx, args: MultiValue) -> Outcome {
    let client = client_arg(&args, "dispatch")?;
    if !Seam::of(&client)?.is_live() {
        return Ok(MultiValue::from_vec(vec![Value::Integer(0)]));
    }
    let Some(entry) = Entry::of(lua, &client)? else {
        return Err(Error::BadInput("MCP: this client was not made by mcp.new".into()).into());
    };
    if entry.dispatching()? {
        return Err(Error::Reentered { what: "client:dispatch()".into() }.into());
    }
    let mut ran = with_client(lua, &client, Borrower::Named("client:dispatch()"), |core, host| {
        let bell = host.options.doorbell.get().cloned();
        if let Some(bell) = &bell {
            bell.clear();
        }
        drain(core, host)?;
        // A tool list the server changed is listed again, without
        // waiting: an event loop's registry then follows without waiting
        // for the next call (it is updated once the listing is in).
        core.refresh_tools(host)?;
        if let Some(bell) = &bell {
            bell.ring_at(core.next_deadline());
        }
        Ok(host.ran)
    })?;
    entry.set_dispatching(true)?;
    let callbacks = run_on_done(lua, &client);
    entry.set_dispatching(false)?;
    ran += callbacks?;
    Ok(MultiValue::from_vec(vec![Value::Integer(ran as _)]))
}
