//! The async API: requests that return a handle at once (`call_async`,
//! `request_async`, `discover_async`), what a handle holds until and after
//! it settles, `done` and `cancel`, and its `on_done` callback (the waits
//! are `waits`).
//!
//! A handle is a plain Lua table (its methods come from the prelude) with
//! its state in a userdata kept beside it, as a client's is. It refers to
//! its client only weakly: a handle kept in an agent's list must not keep
//! a client alive that the agent dropped. A client collected with handles
//! in flight cancels them; their handles then settle with an error saying
//! so.
//!
//! `on_done` callbacks run on the Lua thread, never from our threads: from
//! the handle's own `wait`, from `client:dispatch()`, or after any later
//! call on the same client, once the client is free again, so that a
//! callback may call the client (chaining requests is the common case).

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use mlua::{AnyUserData, Function, MultiValue, Table, UserData, Value};

use super::boundary::{callback_failed, callback_pending, packed};
use super::decode::{to_lua, with_json_types};
use super::door::{
    call_params, drain, peek, request_args, request_options, with_client, Borrower, RequestOptions, Seam,
};
use super::entry::Entry;
use super::fields::tool_label;
use super::fixture::{call_batch, discover_batch};
use super::host::LuaHost;
use super::lua::{arg, call_lua, client_arg, lua_type, Cx, Outcome, Raise};
use super::methods::skill_request;
use super::results::{call_return, listed_items, result_shape, tool_listing, Kind};
use crate::client::{Client, Operation, Request, Ticket};
use crate::codec::Json;
use crate::error::{Error, Result};
/// How a handle ended.
pub(super) enum Settled {
    /// A live request's outcome, as the core shaped it.
    Core(Result<Json, Error>),
    /// A fixture's batch call, run at once: its returns.
    Returns(Vec<Value>),
}

pub(super) struct HandleState {
    /// The request on its way; none for a fixture's call, answered at
    /// once.
    pub(super) op: RefCell<Option<Operation>>,
    kind: Kind,
    pub(super) settled: RefCell<Option<Settled>>,
    /// Where its request stood in the order requests settled, read as its
    /// outcome was taken: `on_done` callbacks run in that order, whoever
    /// took the outcomes (a wait takes them in the order of its list).
    settled_as: Cell<u64>,
    /// Where an unsettled request goes when this handle is collected.
    forgotten: Option<Rc<RefCell<Vec<Ticket>>>>,
}

impl HandleState {
    fn new(op: Option<Operation>, kind: Kind, forgotten: Option<Rc<RefCell<Vec<Ticket>>>>) -> Self {
        HandleState { op: RefCell::new(op), kind, settled: RefCell::new(None), settled_as: Cell::new(0), forgotten }
    }

    fn what(&self) -> String {
        self.op.borrow().as_ref().map(|op| op.what().to_string()).unwrap_or_default()
    }

    fn settle(&self, outcome: Result<Json, Error>) {
        *self.settled.borrow_mut() = Some(Settled::Core(outcome));
    }
}

impl UserData for HandleState {}

impl Drop for HandleState {
    fn drop(&mut self) {
        let op = self.op.borrow();
        let ticket = op.as_ref().and_then(Operation::ticket);
        if let (Some(ticket), Some(forgotten), None) = (ticket, &self.forgotten, &*self.settled.borrow()) {
            forgotten.borrow_mut().push(ticket.clone());
        }
    }
}

/// A new handle for `client`, with its state.
pub(super) fn new_handle(lua: &Cx, client: &Table, state: HandleState, on_done: Option<Function>) -> Outcome<Table> {
    let prelude = lua.prelude;
    let handle = lua.create_table()?;
    handle.set_metatable(Some(prelude.handle_methods.clone()))?;
    prelude.handle_states.raw_set(handle.clone(), lua.create_userdata(state)?)?;
    prelude.handle_clients.raw_set(handle.clone(), client.clone())?;
    if let Some(on_done) = on_done {
        Entry::existing(lua, client)?.pending_on_done(lua)?.raw_set(handle.clone(), on_done)?;
    }
    Ok(handle)
}

pub(super) fn handle_arg(lua: &Cx, value: &Value, what: &str) -> Outcome<(Table, AnyUserData)> {
    let not_a_handle =
        || Raise::Mcp(Error::BadInput(format!("{what}: expected a handle from call_async or request_async")));
    let Value::Table(handle) = value else { return Err(not_a_handle()) };
    match lua.prelude.handle_states.raw_get::<Value>(handle.clone())? {
        Value::UserData(state) => Ok((handle.clone(), state)),
        _ => Err(not_a_handle()),
    }
}

pub(super) fn call_async(lua: &Cx, args: MultiValue) -> Outcome {
    let client = client_arg(&args, "call_async")?;
    let (name, call_args) = (arg(&args, 1), arg(&args, 2));
    let opts = request_options(lua, &arg(&args, 3), "client:call_async")?;
    let handle = match Seam::of(&client)? {
        // A fixture answers at once: the handle is settled already.
        Seam::Fixture(transport) => {
            let returns = call_batch(lua, &client, Seam::fixture(transport)?, &name, &call_args)?;
            let state = HandleState::new(None, Kind::Call, None);
            *state.settled.borrow_mut() = Some(Settled::Returns(returns.into_values().into_vec()));
            new_handle(lua, &client, state, opts.on_done)?
        }
        Seam::Live => {
            let tool = tool_label(lua, &name)?;
            let params = call_params(lua, &client, &name, &tool, &call_args)?;
            let request = tool.request(params);
            start(lua, &client, request, Kind::Call, opts)?
        }
    };
    run_on_done_after_start(lua, &client, &handle)?;
    Ok(MultiValue::from_vec(vec![Value::Table(handle)]))
}

/// `client:discover_async([opts])`: `discover` without waiting. Its
/// handle settles once the tool list is in, and by then `client.tools`,
/// `server_info` and the rest are what `discover` leaves.
pub(super) fn discover_async(lua: &Cx, args: MultiValue) -> Outcome {
    let client = client_arg(&args, "discover_async")?;
    let opts = request_options(lua, &arg(&args, 1), "client:discover_async")?;
    let handle = match Seam::of(&client)? {
        // A fixture answers at once: the handle is settled already.
        Seam::Fixture(transport) => {
            let returns = discover_batch(lua, &client, Seam::fixture(transport)?)?;
            let state = HandleState::new(None, Kind::Discover, None);
            *state.settled.borrow_mut() = Some(Settled::Returns(returns.into_vec()));
            new_handle(lua, &client, state, opts.on_done)?
        }
        Seam::Live => start(lua, &client, tool_listing(), Kind::Discover, opts)?,
    };
    run_on_done_after_start(lua, &client, &handle)?;
    Ok(MultiValue::from_vec(vec![Value::Table(handle)]))
}

pub(super) fn request_async(lua: &Cx, args: MultiValue) -> Outcome {
    let client = client_arg(&args, "request_async")?;
    let (method, params) = request_args(lua, &client, &args, "client:request_async")?;
    let opts = request_options(lua, &arg(&args, 3), "client:request_async")?;
    // The prelude's typed methods name a list to follow or a field to
    // return; a user's request_async returns the whole result.
    let (shape, kind) = result_shape(&method, &arg(&args, 4))?;
    let request = Request::new(&method, params, Rc::from(method.as_str())).shape(shape);
    let handle = start(lua, &client, request, kind, opts)?;
    run_on_done_after_start(lua, &client, &handle)?;
    Ok(MultiValue::from_vec(vec![Value::Table(handle)]))
}

/// `client:get_skill_async` / `client:read_skill_file_async`.
pub(super) fn skill_async(lua: &Cx, args: MultiValue) -> Outcome {
    let client = client_arg(&args, "get_skill_async")?;
    let (request, opts) = skill_request(lua, &client, &args, Borrower::Named("client:get_skill_async"))?;
    let handle = start(lua, &client, request, Kind::Request, opts)?;
    run_on_done_after_start(lua, &client, &handle)?;
    Ok(MultiValue::from_vec(vec![Value::Table(handle)]))
}

pub(super) fn start(lua: &Cx, client: &Table, request: Request, kind: Kind, opts: RequestOptions) -> Outcome<Table> {
    let (op, forgotten) = with_client(lua, client, Borrower::Named("client:call_async"), |core, host| {
        let op = core.start(host, opts.apply(request).asynchronous())?;
        if let (Some(on_progress), Some(token)) = (&opts.on_progress, op.progress_token()) {
            host.watch_progress(token, on_progress.clone())?;
        }
        Ok((op, host.forgotten.clone()))
    })?;
    let state = HandleState::new(Some(op), kind, Some(forgotten));
    new_handle(lua, client, state, opts.on_done)
}

/// What a settled handle returns: `call`'s values or `request`'s, or the
/// error to raise.
pub(super) fn returns_of(lua: &Cx, state: &HandleState, client: Option<&Table>) -> Outcome<MultiValue> {
    let settled = state.settled.borrow();
    match &*settled {
        Some(Settled::Returns(values)) => Ok(MultiValue::from_vec(values.clone())),
        // Shown as `client.tools` once the listing was in, before any
        // callback could run.
        Some(Settled::Core(Ok(_))) if state.kind == Kind::Discover => {
            let tools = match client {
                Some(client) => client.get::<Value>("tools")?,
                None => Value::Nil,
            };
            Ok(MultiValue::from_vec(vec![tools]))
        }
        Some(Settled::Core(Ok(result))) => match (state.kind, result) {
            (Kind::Call, result) => Ok(call_return(lua, result.clone())?.into_values()),
            (Kind::Pages { field }, Json::Array(pages)) => {
                Ok(MultiValue::from_vec(vec![Value::Table(listed_items(lua, pages, field)?)]))
            }
            (_, result) => Ok(MultiValue::from_vec(vec![to_lua(lua, result)?])),
        },
        Some(Settled::Core(Err(e))) => Err(e.clone().into()),
        None => Ok(MultiValue::new()),
    }
}

/// Moves `state`'s request on, and takes its outcome from the core if it
/// has settled there.
pub(super) fn take_if_settled(core: &mut Client, host: &mut LuaHost, state: &HandleState) -> bool {
    if state.settled.borrow().is_some() {
        return true;
    }
    let mut slot = state.op.borrow_mut();
    let Some(op) = slot.as_mut() else { return true };
    // Read before the outcome is taken, which ends its entry.
    let settled_as = core.settled_as(op);
    let outcome = match core.poll(host, op) {
        Ok(false) => return false,
        Ok(true) => op.take_outcome().unwrap_or_else(|| Err(Error::NoResponse { what: op.what().to_string() })),
        Err(Raise::Mcp(e)) => Err(e),
        // A login's callback raised: the caller hears of it (see
        // `callback_failed`), and the handle settles without a reply.
        Err(Raise::Lua(error)) => {
            callback_failed(error);
            Err(Error::NoResponse { what: op.what().to_string() })
        }
    };
    if let Some(token) = op.progress_token() {
        host.forget_progress(token);
    }
    drop(slot);
    state.settled_as.set(settled_as.unwrap_or(0));
    state.settle(outcome);
    true
}

/// Settles `state` for good when its client is gone.
pub(super) fn settle_orphan(state: &HandleState) {
    if state.settled.borrow().is_some() {
        return;
    }
    state.settle(Err(Error::ClientCollected { what: state.what() }));
}

pub(super) fn client_of(lua: &Cx, handle: &Table) -> Outcome<Option<Table>> {
    Ok(lua.prelude.handle_clients.raw_get(handle.clone())?)
}

/// A settled handle's returns; its own `on_done` runs first (once), then
/// any other that became ready.
pub(super) fn finish(lua: &Cx, handle: &Table, state: &HandleState, client: Option<&Table>) -> Outcome {
    if let Some(client) = client {
        let pending = Entry::existing(lua, client)?.pending_on_done(lua)?;
        if let Value::Function(on_done) = pending.raw_get::<Value>(handle.clone())? {
            if !callback_pending() {
                pending.raw_set(handle.clone(), Value::Nil)?;
                call_on_done(lua, on_done, state, client)?;
            }
        }
        run_on_done(lua, client)?;
    }
    returns_of(lua, state, client)
}

pub(super) fn call_on_done(lua: &Cx, on_done: Function, state: &HandleState, client: &Table) -> Outcome<()> {
    let args = packed(lua, returns_of(lua, state, Some(client)))?;
    // Its error reaches whoever ran it (dispatch, wait, a call), once the
    // client is consistent: see `callback_failed`.
    if let Err(Raise::Lua(error)) = call_lua(lua, on_done, args) {
        callback_failed(error);
    }
    Ok(())
}

/// After an async request was made: the callbacks of what settled since
/// the last look, and the new handle's own if it settled at once. Every
/// pending handle was looked at after each request once, and 8,000
/// requests made while a slow server started took 13.5 s to make (0.36 s
/// on a ready session); with no request settled anywhere since the last
/// look, there is nothing new to find. (`dispatch` and the waits still
/// look at every handle: a state-only round that waits out its pause
/// settles with nothing arriving.)
pub(super) fn run_on_done_after_start(lua: &Cx, client: &Table, handle: &Table) -> Outcome<()> {
    let Some(entry) = Entry::of(lua, client)? else { return Ok(()) };
    let unchanged = entry.settled_count_seen()? == Some(crate::session::settled_count());
    if unchanged {
        let Value::UserData(state) = lua.prelude.handle_states.raw_get::<Value>(handle.clone())? else { return Ok(()) };
        if !poll_handle(lua, handle, &state)? {
            return Ok(());
        }
    }
    run_on_done(lua, client).map(drop)
}

/// Runs the `on_done` of every handle of `client` that has settled, once
/// each. Called once the client is free, so callbacks may use it.
pub(super) fn run_on_done(lua: &Cx, client: &Table) -> Outcome<usize> {
    let Some(entry) = Entry::of(lua, client)? else { return Ok(0) };
    let Some(pending) = entry.pending_on_done_if_any()? else { return Ok(0) };
    // Read before looking: whatever settles from here on is looked for
    // next time.
    let settled_count = crate::session::settled_count();
    // The handles are kept in Lua lists rather than as Rust references:
    // Lua 5.1 and LuaJIT hold 8,000 of those at most (see `HandleList`).
    // Listed before any is looked at, since looking may run callbacks that
    // make new requests, which `pending` must not get during a traversal.
    let waiting = lua.create_table()?;
    let mut count = 0;
    for pair in pending.pairs::<Table, Value>() {
        let (handle, _) = pair?;
        count += 1;
        waiting.raw_set(count, handle)?;
    }
    if count == 0 {
        return Ok(0);
    }
    // The settled ones, with where each stood in the order requests
    // settled. (Busy: called from inside one of its own callbacks. Later,
    // then.)
    let ready = lua.create_table()?;
    let mut order: Vec<(u64, usize)> = Vec::new();
    let looked = with_client(lua, client, Borrower::Named("on_done"), |core, host| {
        for i in 1..=count {
            let handle: Table = waiting.raw_get(i)?;
            let Value::UserData(ud) = lua.prelude.handle_states.raw_get::<Value>(handle.clone())? else { continue };
            let state = ud.borrow::<HandleState>()?;
            if take_if_settled(core, host, &state) {
                order.push((state.settled_as.get(), order.len() + 1));
                ready.raw_set(order.len(), handle)?;
            }
        }
        Ok(())
    });
    if looked.is_err() {
        return Ok(0);
    }
    crate::sorting::sort_by_key(&mut order, |(settled_as, _)| *settled_as);
    // Each taken out of `pending` just before it runs, and only if still
    // there: a callback that calls the client runs the others itself.
    // After a callback raised, the rest stay pending for the next
    // dispatch or wait, and the bell rings so that an event loop calls
    // again: each runs once, and none is lost.
    let json_types = entry.json_types();
    let mut ran = 0;
    entry.set_settled_count_seen(Some(settled_count))?;
    for (_, at) in order {
        if callback_pending() {
            // The rest are looked for again by the next call, whatever it is.
            entry.set_settled_count_seen(None)?;
            ring_for_lua(lua, client)?;
            break;
        }
        let handle: Table = ready.raw_get(at)?;
        let Value::Function(on_done) = pending.raw_get::<Value>(handle.clone())? else { continue };
        let Value::UserData(ud) = lua.prelude.handle_states.raw_get::<Value>(handle.clone())? else { continue };
        pending.raw_set(handle, Value::Nil)?;
        let state = ud.borrow::<HandleState>()?;
        with_json_types(json_types, || call_on_done(lua, on_done, &state, client))?;
        ran += 1;
    }
    Ok(ran)
}

/// Rings the client's descriptor (`client:fd()`), if it was asked for:
/// something waits for Lua that no message will announce.
pub(super) fn ring_for_lua(lua: &Cx, client: &Table) -> Outcome<()> {
    if let Some(Some(bell)) = peek(lua, client, |_, options| options.doorbell.get().cloned())? {
        bell.ring();
    }
    Ok(())
}

/// Settles the handle if what arrived settles it (its client gone, it
/// does), running the `on_done` callbacks that became ready; never waits.
fn take_what_arrived(lua: &Cx, handle: &Table, state_ud: &AnyUserData, what: &str) -> Outcome<()> {
    let state = state_ud.borrow::<HandleState>()?;
    if state.settled.borrow().is_some() {
        return Ok(());
    }
    let Some(client) = client_of(lua, handle)? else {
        settle_orphan(&state);
        return Ok(());
    };
    with_client(lua, &client, Borrower::Named(what), |core, host| {
        drain(core, host)?;
        take_if_settled(core, host, &state);
        Ok(())
    })?;
    drop(state);
    run_on_done(lua, &client).map(drop)
}

/// `handle:done()`: whether it has settled; reads what already arrived,
/// never waits.
pub(super) fn done(lua: &Cx, args: MultiValue) -> Outcome {
    let (handle, state_ud) = handle_arg(lua, &arg(&args, 0), "handle:done")?;
    take_what_arrived(lua, &handle, &state_ud, "handle:done")?;
    let state = state_ud.borrow::<HandleState>()?;
    let done = state.settled.borrow().is_some();
    Ok(MultiValue::from_vec(vec![Value::Boolean(done)]))
}

/// `handle:status()`: the task the server made of a call, as it last
/// described it (`taskId`, `status`, `statusMessage`, ...), or nil when
/// there is none: a call not made a task, or not answered yet. Reads
/// what has arrived, never waits.
pub(super) fn status(lua: &Cx, args: MultiValue) -> Outcome {
    let (handle, state_ud) = handle_arg(lua, &arg(&args, 0), "handle:status")?;
    take_what_arrived(lua, &handle, &state_ud, "handle:status")?;
    let state = state_ud.borrow::<HandleState>()?;
    let op = state.op.borrow();
    let task = match op.as_ref().and_then(|op| op.task()) {
        Some(task) => to_lua(lua, task)?,
        None => Value::Nil,
    };
    Ok(MultiValue::from_vec(vec![task]))
}

/// `handle:cancel([reason])`: true if it was in flight and is now
/// cancelled; false if it had settled already.
pub(super) fn cancel(lua: &Cx, args: MultiValue) -> Outcome {
    let (handle, state_ud) = handle_arg(lua, &arg(&args, 0), "handle:cancel")?;
    let reason = match arg(&args, 1) {
        Value::Nil => "cancelled by the client".to_string(),
        Value::String(s) => s.to_str()?.to_string(),
        other => {
            return Err(Error::BadInput(format!(
                "handle:cancel: the reason must be a string, got {}",
                lua_type(&other)
            ))
            .into())
        }
    };
    let state = state_ud.borrow::<HandleState>()?;
    if state.settled.borrow().is_some() {
        return Ok(MultiValue::from_vec(vec![Value::Boolean(false)]));
    }
    let Some(client) = client_of(lua, &handle)? else {
        settle_orphan(&state);
        return Ok(MultiValue::from_vec(vec![Value::Boolean(false)]));
    };
    let cancelled = with_client(lua, &client, Borrower::Named("handle:cancel"), |core, host| {
        let mut slot = state.op.borrow_mut();
        let Some(op) = slot.as_mut() else { return Ok(false) };
        let cancelled = core.cancel(host, op, &reason);
        drop(slot);
        take_if_settled(core, host, &state);
        Ok(cancelled)
    })?;
    drop(state);
    run_on_done(lua, &client)?;
    Ok(MultiValue::from_vec(vec![Value::Boolean(cancelled)]))
}

/// Whether the handle has settled, taking its outcome if the core has it.
pub(super) fn poll_handle(lua: &Cx, handle: &Table, state_ud: &AnyUserData) -> Outcome<bool> {
    let state = state_ud.borrow::<HandleState>()?;
    if state.settled.borrow().is_some() {
        return Ok(true);
    }
    let Some(client) = client_of(lua, handle)? else {
        settle_orphan(&state);
        return Ok(true);
    };
    with_client(lua, &client, Borrower::Named("mcp.wait_any"), |core, host| Ok(take_if_settled(core, host, &state)))
}
