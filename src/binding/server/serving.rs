//! Serving, on the Lua thread: over this process's stdio (the script is
//! the server), or over Streamable HTTP, where `listen` returns at once
//! and the requests the poll thread reads are answered by `run` (a script
//! that blocks), or by `dispatch` whenever `fd()` is readable (an event
//! loop's callback). Either way a handler runs only here, one at a time.

use std::path::PathBuf;
use std::time::Instant;

use mlua::{Function, MultiValue, Table, Value};

use super::handlers::LuaHandlers;
use super::outgoing::{io_error, send_later_answers, send_notices};
use super::results::unanswered_words;
use super::{apply, state_of, Asked, ServerState};
use crate::binding::boundary::callback_failed;
use crate::binding::decode::to_lua;
use crate::binding::lua::{arg, call_lua, Cx, Outcome, Raise};
use crate::binding::readers::{wait_bound, Reader};
use crate::codec::Json;
use crate::error::Error;
use crate::interrupt::{self, far_future};
use crate::server::channel::{answer_of, Channel, Incoming, Unanswered};
use crate::server::http::request::Limits;
use crate::server::http::{HttpLink, ListenError, Options};
use crate::server::stdio::Stdio;

/// The most requests one `dispatch` answers: what is left keeps the
/// descriptor readable for the loop's next turn.
const DISPATCH_LIMIT: usize = 256;

/// `server:serve_stdio()`: serves over this process's stdin and stdout
/// until stdin ends (true), Ctrl-C, or `server:close()`.
pub(in crate::binding) fn serve_stdio(lua: &Cx, args: MultiValue) -> Outcome {
    let server = arg(&args, 0);
    let ud = state_of(&server, "serve_stdio")?;
    let state = ud.borrow::<ServerState>()?;
    if state.channel.borrow().is_some() {
        return Err(Error::BadInput("server:serve_stdio: this server is serving already".into()).into());
    }
    let stdio = Stdio::open(state.max_message_bytes).map_err(|e| Error::Lua(format!("server:serve_stdio: {e}")))?;
    *state.channel.borrow_mut() = Some(Channel::new(Box::new(stdio), state.request_timeout));
    state.closed.set(false);
    let Value::Table(server) = server else { unreachable!("state_of checked it") };
    let served = serve_until(lua, &server, &state, "server:serve_stdio()", far_future());
    // Stdout is itself again once the channel is gone.
    stop(&state);
    served.map(|_| MultiValue::from_vec(vec![Value::Boolean(true)]))
}

/// Ends serving: the channel and its transport go (stdout restored, or
/// the listener closed and its discovery file removed).
pub(super) fn stop(state: &ServerState) {
    let channel = state.channel.borrow_mut().take();
    state.http.borrow_mut().take();
    drop(channel);
}

/// `server:listen(opts)`: binds and serves over Streamable HTTP from now
/// on (requests are answered by `run` or `dispatch`); the URL bound.
pub(in crate::binding) fn server_listen(_lua: &Cx, args: MultiValue) -> Outcome {
    let ud = state_of(&arg(&args, 0), "listen")?;
    let state = ud.borrow::<ServerState>()?;
    if state.channel.borrow().is_some() {
        return Err(Error::BadInput("server:listen: this server is serving already".into()).into());
    }
    let options = match arg(&args, 1) {
        Value::Nil => listen_options(&_lua.create_table()?, state.max_message_bytes)?,
        Value::Table(opts) => listen_options(&opts, state.max_message_bytes)?,
        _ => return Err(Error::BadInput("server:listen: opts must be a table, as { port = 0 }".into()).into()),
    };
    let link = HttpLink::listen(options).map_err(|e| match e {
        ListenError::NeedsToken(host) => Error::BadInput(format!(
            "server:listen: {host} is not a loopback address, so anyone who can reach it could call this server: pass opts.token (clients then send Authorization: Bearer TOKEN)"
        )),
        ListenError::Io(e) => Error::BadInput(format!("server:listen: {e}")),
    })?;
    let url = link.url.clone();
    *state.http.borrow_mut() = Some(link.shared());
    *state.channel.borrow_mut() = Some(Channel::new(Box::new(link), state.request_timeout));
    state.closed.set(false);
    Ok(MultiValue::from_vec(vec![Value::String(_lua.create_string(url)?)]))
}

fn listen_options(opts: &Table, max_message_bytes: usize) -> Outcome<Options> {
    let read = Reader::new(opts, "server:listen", "opts");
    let defaults = Limits::default();
    let count = |field: &str, default: usize, most: f64| -> Outcome<usize> {
        let must = format!("a whole number from 1 to {most}");
        Ok(read.whole(field, 1.0, most, &must)?.map_or(default, |n| n as usize))
    };
    let limits = Limits {
        body_bytes: max_message_bytes,
        connections: count("max_connections", defaults.connections, 65536.0)?,
        sessions: count("max_sessions", defaults.sessions, 1e6)?,
        session_idle: read.seconds("session_idle")?.unwrap_or(defaults.session_idle),
        read_time: read.seconds("read_timeout")?.unwrap_or(defaults.read_time),
        ..defaults
    };
    let port = read.whole("port", 0.0, 65535.0, "a port number from 0 (any free one) to 65535")?.unwrap_or(0);
    let path = read.text("path")?.unwrap_or_else(|| "/mcp".into());
    if !path.starts_with('/') {
        return Err(read.refuse("path", "a path that starts with /"));
    }
    Ok(Options {
        host: read.text("host")?.unwrap_or_else(|| "127.0.0.1".into()),
        port: port as u16,
        path,
        token: read.text("token")?.filter(|t| !t.is_empty()),
        allowed_hosts: text_list(&read, opts, "allowed_hosts")?,
        allowed_origins: text_list(&read, opts, "allowed_origins")?,
        limits,
        discovery: read.text("discovery")?.map(PathBuf::from),
        until_stdin_ends: until_stdin_ends(&read)?,
    })
}

fn until_stdin_ends(read: &Reader) -> Outcome<bool> {
    let wanted = read.boolean("until_stdin_ends")?.unwrap_or(false);
    if wanted && cfg!(windows) {
        return Err(read.refuse("until_stdin_ends", "left out on Windows, where stdin cannot be polled beside sockets"));
    }
    Ok(wanted)
}

fn text_list(read: &Reader, opts: &Table, field: &str) -> Outcome<Vec<String>> {
    let Some(list) = read.table(field)? else { return Ok(Vec::new()) };
    let mut out = Vec::new();
    for item in list.sequence_values::<Value>() {
        match item? {
            Value::String(s) => out.push(s.to_str()?.to_string()),
            _ => return Err(read.refuse(field, "a list of strings")),
        }
    }
    let _ = opts;
    Ok(out)
}

/// `server:fd()`: a descriptor readable whenever `dispatch` has requests
/// to answer.
pub(in crate::binding) fn server_fd(_lua: &Cx, args: MultiValue) -> Outcome {
    let ud = state_of(&arg(&args, 0), "fd")?;
    let state = ud.borrow::<ServerState>()?;
    let http = state.http.borrow();
    let Some(shared) = http.as_ref() else {
        return Err(Error::BadInput(
            "server:fd: call server:listen first (a stdio server is served by serve_stdio)".into(),
        )
        .into());
    };
    let fd = shared.doorbell.arm().map_err(|e| Error::BadInput(format!("server:fd: {e}")))?;
    if !shared.queue().is_empty() {
        shared.doorbell.ring();
    }
    Ok(MultiValue::from_vec(vec![Value::Integer(fd as _)]))
}

/// `server:dispatch()`: answers the requests that have arrived, without
/// waiting; how many.
pub(in crate::binding) fn server_dispatch(lua: &Cx, args: MultiValue) -> Outcome {
    let server = arg(&args, 0);
    let ud = state_of(&server, "dispatch")?;
    let state = ud.borrow::<ServerState>()?;
    let Value::Table(server) = server else { unreachable!("state_of checked it") };
    let shared = state.http.borrow().clone();
    if let Some(shared) = &shared {
        shared.doorbell.clear();
    }
    let mut served = 0;
    while served < DISPATCH_LIMIT {
        match serve_one(lua, &server, &state, "server:dispatch()", Instant::now())? {
            Turn::Served => served += 1,
            Turn::Idle | Turn::Over => break,
        }
    }
    if let Some(shared) = &shared {
        if !shared.queue().is_empty() {
            shared.doorbell.ring();
        }
    }
    Ok(MultiValue::from_vec(vec![Value::Integer(served as _)]))
}

/// `server:run([seconds])`: serves until closed (false: serving is over)
/// or for `seconds` (true: it goes on).
pub(in crate::binding) fn server_run(lua: &Cx, args: MultiValue) -> Outcome {
    let server = arg(&args, 0);
    let ud = state_of(&server, "run")?;
    let state = ud.borrow::<ServerState>()?;
    if state.channel.borrow().is_none() {
        return Err(Error::BadInput("server:run: call server:listen first".into()).into());
    }
    let until = match wait_bound(&arg(&args, 1), "server:run")? {
        Some(within) => Instant::now() + within,
        None => far_future(),
    };
    let Value::Table(server) = server else { unreachable!("state_of checked it") };
    let turn = serve_until(lua, &server, &state, "server:run()", until)?;
    if turn == Turn::Over {
        // Closed, or stdin ended: what was bound is let go now.
        state.closed.set(true);
        stop(&state);
    }
    Ok(MultiValue::from_vec(vec![Value::Boolean(turn != Turn::Over)]))
}

/// What one turn of serving found.
#[derive(PartialEq)]
pub(super) enum Turn {
    Served,
    Idle,
    /// The transport ended, or the server was closed.
    Over,
}

/// Serves until the transport ends or the server is closed (Over), or
/// `until` passes (Idle); Ctrl-C ends it as an interruption of `what`.
pub(super) fn serve_until(lua: &Cx, server: &Table, state: &ServerState, what: &str, until: Instant) -> Outcome<Turn> {
    loop {
        match serve_one(lua, server, state, what, until)? {
            Turn::Served => {}
            Turn::Idle if Instant::now() < until => {}
            done => return Ok(done),
        }
    }
}

/// Takes one message (waiting until `until` at most) and answers it.
pub(super) fn serve_one(lua: &Cx, server: &Table, state: &ServerState, what: &str, until: Instant) -> Outcome<Turn> {
    if state.closed.get() {
        stop(state);
        return Ok(Turn::Over);
    }
    if interrupt::requested() {
        return Err(Error::Interrupted { what: what.into() }.into());
    }
    expire_asked(lua, state)?;
    // Woken for the first answer owed to a callback, if it is sooner.
    let until = state.asked.borrow().iter().map(|a| a.until).fold(until, Instant::min);
    let incoming = {
        let mut channel = state.channel.borrow_mut();
        let Some(channel) = channel.as_mut() else { return Ok(Turn::Over) };
        channel.next(until).map_err(io_error)?
    };
    let (message, route) = match incoming {
        Incoming::Message(message, route) => (message, route),
        Incoming::Gone(peer) => {
            state.core.borrow_mut().forget(peer);
            return Ok(Turn::Served);
        }
        Incoming::Nothing => return Ok(Turn::Idle),
        Incoming::Ended => return Ok(Turn::Over),
    };
    let is_reply = message.get("result").is_some() || message.get("error").is_some();
    if message.get("method").is_none() && is_reply {
        // The answer to a request whose callback waits for it, or to
        // one nobody waits for any more.
        answer_asked(lua, state, message)?;
        return Ok(Turn::Served);
    }
    *state.facts.borrow_mut() = state.core.borrow().facts_of(route.peer, &message);
    let headers = state.channel.borrow().as_ref().and_then(|c| c.headers(route));
    let reply = {
        let mut handlers = LuaHandlers { lua, server, state, route };
        let mut core = state.core.borrow_mut();
        core.handle_from(route.peer, &message, &mut handlers, headers.as_deref())
    };
    for change in state.deferred.take() {
        apply(state, change).map_err(Error::BadInput)?;
    }
    if let (Some(reply), Some(id)) = (reply, message.get("id")) {
        if let Some(channel) = state.channel.borrow_mut().as_mut() {
            // A client that is gone ends serving at its next read.
            let _ = channel.finish(route, id, &reply);
        }
    }
    send_later_answers(state);
    deliver_task_answers(lua, state)?;
    send_notices(state)?;
    if interrupt::requested() {
        return Err(Error::Interrupted { what: what.into() }.into());
    }
    Ok(Turn::Served)
}

/// Hands the answers a client gave its tasks' questions (`tasks/update`)
/// to the callbacks that asked them.
fn deliver_task_answers(lua: &Cx, state: &ServerState) -> Outcome<()> {
    let answers = state.core.borrow_mut().take_task_answers();
    for (request, key, answer) in answers {
        let callback = {
            let mut callbacks = state.task_callbacks.borrow_mut();
            let at = callbacks.iter().position(|(r, k, _)| *r == request && *k == key);
            at.map(|at| callbacks.remove(at).2)
        };
        if let Some(callback) = callback {
            call_back(lua, callback, MultiValue::from_vec(vec![to_lua(lua, &answer)?]))?;
        }
    }
    // A callback may have finished its task.
    send_later_answers(state);
    // The questions of a task that is over (cancelled, settled) will
    // never be answered: their callbacks go.
    if let Ok(core) = state.core.try_borrow() {
        state.task_callbacks.borrow_mut().retain(|(request, _, _)| core.task_open(*request));
    }
    Ok(())
}

/// Hands a client's answer to the callback that asked for it.
fn answer_asked(lua: &Cx, state: &ServerState, reply: Json) -> Outcome<()> {
    let asked = {
        let mut asked = state.asked.borrow_mut();
        let Some(at) = asked.iter().position(|a| Some(&a.id) == reply.get("id")) else { return Ok(()) };
        asked.remove(at)
    };
    let answered = answer_of(reply);
    let returns = unanswered_words(lua, &asked.method, answered)?;
    call_back(lua, asked.callback, returns)
}

/// The callbacks whose client did not answer in time hear so.
fn expire_asked(lua: &Cx, state: &ServerState) -> Outcome<()> {
    let now = Instant::now();
    let expired: Vec<Asked> = {
        let mut asked = state.asked.borrow_mut();
        let (gone, kept) = std::mem::take(&mut *asked).into_iter().partition(|a| a.until <= now);
        *asked = kept;
        gone
    };
    for asked in expired {
        let answered = Err(Unanswered::TimedOut(state.request_timeout));
        let returns = unanswered_words(lua, &asked.method, answered)?;
        call_back(lua, asked.callback, returns)?;
    }
    Ok(())
}

/// A callback's error ends the `dispatch` or `run` it ran in, as a
/// client's callbacks do (see `boundary`); serving goes on at the next.
fn call_back(lua: &Cx, callback: Function, returns: MultiValue) -> Outcome<()> {
    if let Err(Raise::Lua(error)) = call_lua(lua, callback, returns) {
        callback_failed(error);
    }
    Ok(())
}
