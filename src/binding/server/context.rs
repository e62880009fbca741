//! What a handler's `ctx` does on the native side (the prelude's
//! `Context` names them): notifications sent as the handler runs, whether
//! its request was cancelled, and requests to its client.

use std::time::Instant;

use mlua::{Function, MultiValue, Value};

use super::handlers::{answer_of, protocol_error, words};
use super::outgoing::{io_error, send, send_later_answers};
use super::results::shaped;
use super::results::{refused, unanswered_words};
use super::{state_of, Asked, LaterAnswer, ServerState};
use crate::binding::encode::encode_lua;
use crate::binding::lua::{arg, Cx, Outcome};
use crate::codec::Json;
use crate::error::Error;
use crate::protocol;
use crate::server::link::Route;
use crate::server::modern::MISSING_CAPABILITY;
use crate::server::{Answer, Facts, Refused};

/// `ctx:notify(method, params)` for `ctx:progress` and `ctx:log` (the
/// prelude builds them): sent now, as the handler runs. A log message
/// below the level the client set is not sent.
pub(in crate::binding) fn ctx_notify(lua: &Cx, args: MultiValue) -> Outcome {
    let (ud, route) = context_of(&arg(&args, 0), "notify")?;
    let state = ud.borrow::<ServerState>()?;
    let Value::String(method) = arg(&args, 1) else {
        return Err(Error::BadInput("ctx: the notification's method must be a string".into()).into());
    };
    let params = encode_lua(lua, "params", &arg(&args, 2))?;
    if &*method.as_bytes() == b"notifications/message" {
        let level = match params.get("level") {
            Some(Json::Str(level)) => String::from_utf8_lossy(level).into_owned(),
            _ => String::new(),
        };
        if !crate::server::LOG_LEVELS.contains(&level.as_str()) {
            let why = format!("ctx:log: the level must be one of {}", crate::server::LOG_LEVELS.join(", "));
            return Err(Error::BadInput(why).into());
        }
        if !facts(&state, route).logs(&level) {
            return Ok(MultiValue::new());
        }
    }
    send(&state, route, &protocol::notification(&method.to_str()?, Some(params)))?;
    Ok(MultiValue::new())
}

/// The server and the route of a handler's `ctx`.
fn context_of(ctx: &Value, what: &str) -> Outcome<(mlua::AnyUserData, Route)> {
    let Value::Table(ctx) = ctx else {
        return Err(Error::BadInput(format!("ctx:{what}: call it with a colon, as ctx:{what}(...)")).into());
    };
    let ud = state_of(&ctx.raw_get::<Value>("server")?, what)?;
    let peer = ctx.raw_get::<Option<u64>>("_peer")?.unwrap_or(0);
    let exchange = ctx.raw_get::<Option<u64>>("_exchange")?.unwrap_or(0);
    Ok((ud, Route { peer, exchange }))
}

/// What the core knows of the client on `route`: asked of it when it is
/// free, else what it knew when the request being answered came in (the
/// level and capabilities were set by earlier requests, so they hold).
fn facts(state: &ServerState, route: Route) -> Facts {
    match state.core.try_borrow() {
        Ok(core) => core.facts(route.peer),
        Err(_) => state.facts.borrow().clone(),
    }
}

/// `ctx:cancelled()`: whether the client cancelled this request.
pub(in crate::binding) fn ctx_cancelled(lua: &Cx, args: MultiValue) -> Outcome {
    let (ud, route) = context_of(&arg(&args, 0), "cancelled")?;
    let state = ud.borrow::<ServerState>()?;
    let id = encode_lua(lua, "the request id", &arg(&args, 1))?;
    let cancelled = match state.channel.borrow_mut().as_mut() {
        Some(channel) => channel.cancelled(route, &id).map_err(io_error)?,
        None => false,
    };
    // A task's client cancels with tasks/cancel.
    let task_cancelled = state.core.try_borrow().is_ok_and(|core| core.task_cancelled(route.peer));
    Ok(MultiValue::from_vec(vec![Value::Boolean(cancelled || task_cancelled)]))
}

/// `ctx:request(method, params)`: asks the client (elicitation, sampling,
/// roots) and returns its result; nil and why when it would not answer.
pub(in crate::binding) fn ctx_request(lua: &Cx, args: MultiValue) -> Outcome {
    let (ud, route) = context_of(&arg(&args, 0), "request")?;
    let state = ud.borrow::<ServerState>()?;
    let Value::String(method) = arg(&args, 1) else {
        return Err(Error::BadInput("ctx:request: the method must be a string".into()).into());
    };
    let method = method.to_str()?.to_string();
    let params = match arg(&args, 2) {
        Value::Nil => Json::Object(vec![]),
        v => encode_lua(lua, "params", &v)?,
    };
    let needs = protocol::capability_for(&method);
    if let Some(capability) = needs {
        if !facts(&state, route).can(capability) {
            return refused(lua, format!("ctx:request: the client did not declare the {capability} capability, so it cannot be asked {method}"));
        }
    }
    if let Value::Function(callback) = arg(&args, 3) {
        return ask_later(&state, route, method, params, callback);
    }
    let answered = match state.channel.borrow_mut().as_mut() {
        Some(channel) => channel.request(route, &method, params),
        None => return refused(lua, format!("ctx:request: {method} needs a client: the server is not serving")),
    };
    unanswered_words(lua, &method, answered)
}

/// `ctx:request(method, params, callback)`: sent now; the callback gets
/// the result (or nil and why) from `dispatch` or `run` once the client
/// answers, so that an event loop never waits for the client.
fn ask_later(state: &ServerState, route: Route, method: String, params: Json, callback: Function) -> Outcome {
    let id = match state.channel.borrow_mut().as_mut() {
        Some(channel) => channel.ask(route, &method, params).map_err(io_error)?,
        None => {
            return Err(
                Error::BadInput(format!("ctx:request: {method} needs a client: the server is not serving")).into()
            )
        }
    };
    let until = Instant::now() + state.request_timeout;
    state.asked.borrow_mut().push(Asked { id, method, callback, until });
    if let Some(shared) = state.http.borrow().as_ref() {
        shared.doorbell.ring_at(state.asked.borrow().iter().map(|a| a.until).min());
    }
    Ok(MultiValue::new())
}

/// `ctx:ask(requests)`: requests to the client by key (`{ key = { method
/// =, params = } }`), all answered before it returns: the answers by key,
/// or nil and why. Of a 2026-07-28 client, which cannot be asked while a
/// request is open: the answers its rounds gave, or `true` when some are
/// missing (the prelude then ends the handler, and the request is
/// answered `input_required` with them; it comes back with the answers and
/// the handler runs again).
pub(in crate::binding) fn ctx_ask(lua: &Cx, args: MultiValue) -> Outcome {
    let ctx = arg(&args, 0);
    let (ud, route) = context_of(&ctx, "ask")?;
    let state = ud.borrow::<ServerState>()?;
    let Value::Table(ctx) = ctx else { unreachable!("context_of checked it") };
    let requests = match arg(&args, 1) {
        Value::Table(t) => encode_lua(lua, "requests", &Value::Table(t))?.into_tree(),
        _ => Json::Null,
    };
    let Json::Object(requests) = requests else {
        let why = "ctx:ask: pass the requests by key, as { name = { method = 'elicitation/create', params = {...} } }";
        return Err(Error::BadInput(why.into()).into());
    };
    let mut asked = Vec::with_capacity(requests.len());
    for (key, request) in requests {
        let Some(Json::Str(method)) = request.get("method") else {
            let key = String::from_utf8_lossy(&key);
            return Err(Error::BadInput(format!("ctx:ask: requests.{key}.method must be a string")).into());
        };
        let method = String::from_utf8_lossy(method).into_owned();
        let params = request.get("params").cloned().unwrap_or(Json::Object(vec![]));
        asked.push((key, method, params));
    }
    match ctx.raw_get::<Value>("_answers")? {
        Value::Table(given) => ask_modern(lua, &state, route, &given, asked),
        _ => ask_now(lua, &state, route, asked),
    }
}

/// Of a 2026-07-28 client: the answers it gave, or the input it must give
/// first (or the refusal of a capability it did not declare).
fn ask_modern(
    lua: &Cx,
    state: &ServerState,
    route: Route,
    given: &mlua::Table,
    asked: Vec<(Vec<u8>, String, Json)>,
) -> Outcome {
    let facts = facts(state, route);
    for (_, method, _) in &asked {
        if let Some(capability) = protocol::capability_for(method) {
            if !facts.can(capability) {
                let data = Json::object([("requiredCapabilities", Json::object([(capability, Json::Object(vec![]))]))]);
                let message = format!("Missing required client capability: {method} needs {capability}");
                let refused = Refused { code: MISSING_CAPABILITY, message, data: Some(data) };
                *state.outcome.borrow_mut() = Some(Answer::Refused(refused));
                return Ok(MultiValue::from_vec(vec![Value::Boolean(true)]));
            }
        }
    }
    let answers = lua.create_table()?;
    let mut missing = Vec::new();
    for (key, method, params) in asked {
        match given.raw_get::<Value>(lua.create_string(&key)?)? {
            Value::Nil => missing.push((key, Json::object([("method", Json::str(method)), ("params", params)]))),
            answer => answers.raw_set(lua.create_string(&key)?, answer)?,
        }
    }
    if missing.is_empty() {
        return Ok(MultiValue::from_vec(vec![Value::Table(answers)]));
    }
    *state.outcome.borrow_mut() = Some(Answer::InputRequired(Json::Object(missing)));
    Ok(MultiValue::from_vec(vec![Value::Boolean(true)]))
}

/// Of a client of the earlier revisions: each request sent and waited
/// for, in turn.
fn ask_now(lua: &Cx, state: &ServerState, route: Route, asked: Vec<(Vec<u8>, String, Json)>) -> Outcome {
    let answers = lua.create_table()?;
    for (key, method, params) in asked {
        if let Some(capability) = protocol::capability_for(&method) {
            if !facts(state, route).can(capability) {
                return refused(lua, format!("ctx:ask: the client did not declare the {capability} capability, so it cannot be asked {method}"));
            }
        }
        let answered = match state.channel.borrow_mut().as_mut() {
            Some(channel) => channel.request(route, &method, params),
            None => return refused(lua, format!("ctx:ask: {method} needs a client: the server is not serving")),
        };
        let returned = unanswered_words(lua, &method, answered)?;
        match returned.front() {
            Some(Value::Nil) | None => return Ok(returned),
            Some(answer) => answers.raw_set(lua.create_string(&key)?, answer.clone())?,
        }
    }
    Ok(MultiValue::from_vec(vec![Value::Table(answers)]))
}

/// `ctx:request(method, params, callback)` of a handler whose request is
/// a task (the prelude calls this then): the task waits on the question
/// (`input_required`, with `key`) until its client answers it with
/// `tasks/update`, and the callback gets the answer then.
pub(in crate::binding) fn ctx_task_ask(lua: &Cx, args: MultiValue) -> Outcome {
    let (ud, route) = context_of(&arg(&args, 0), "request")?;
    let state = ud.borrow::<ServerState>()?;
    let (Value::String(key), Value::String(method), Value::Function(callback)) =
        (arg(&args, 1), arg(&args, 2), arg(&args, 4))
    else {
        return Err(Error::BadInput("ctx:request: a task's question needs its method and a callback".into()).into());
    };
    let params = match arg(&args, 3) {
        Value::Nil => Json::Object(vec![]),
        v => encode_lua(lua, "params", &v)?,
    };
    let question = Json::object([("method", Json::Str(method.as_bytes().to_vec())), ("params", params)]);
    let key = key.as_bytes().to_vec();
    state.task_callbacks.borrow_mut().push((route.peer, key.clone(), callback));
    state.task_questions.borrow_mut().push((route.peer, key, question));
    send_later_answers(&state);
    Ok(MultiValue::new())
}

/// `ctx:client_can(capability)`: whether the client declared it.
pub(in crate::binding) fn ctx_client_can(_lua: &Cx, args: MultiValue) -> Outcome {
    let (ud, route) = context_of(&arg(&args, 0), "client_can")?;
    let state = ud.borrow::<ServerState>()?;
    let Value::String(name) = arg(&args, 1) else {
        return Err(
            Error::BadInput("ctx:client_can: name the capability, as ctx:client_can('elicitation')".into()).into()
        );
    };
    let can = facts(&state, route).can(&name.to_str()?);
    Ok(MultiValue::from_vec(vec![Value::Boolean(can)]))
}

/// `ctx:close_stream()`: over HTTP, ends this request's event stream now
/// (the client comes back for the rest with the last event it saw), so
/// that a long call holds no connection; elsewhere it does nothing.
pub(in crate::binding) fn ctx_close_stream(_lua: &Cx, args: MultiValue) -> Outcome {
    let (ud, route) = context_of(&arg(&args, 0), "close_stream")?;
    let state = ud.borrow::<ServerState>()?;
    if let Some(channel) = state.channel.borrow_mut().as_mut() {
        channel.close_stream(route).map_err(io_error)?;
    }
    Ok(MultiValue::new())
}

/// `ctx:finish(value [, message])`: the answer of a handler that returned
/// `ctx:later()`, shaped as its return would have been (`nil, message`
/// is its failure). Sent once the request being answered, if any, is.
pub(in crate::binding) fn ctx_finish(lua: &Cx, args: MultiValue) -> Outcome {
    let ctx = arg(&args, 0);
    let (ud, route) = context_of(&ctx, "finish")?;
    let state = ud.borrow::<ServerState>()?;
    let Value::Table(ctx) = ctx else { unreachable!("context_of checked it") };
    let method: String = ctx.raw_get("_method")?;
    let name: mlua::LuaString = ctx.raw_get("_name")?;
    let handler: u64 = ctx.raw_get("_handler")?;
    let id = encode_lua(lua, "the request id", &ctx.raw_get::<Value>("request_id")?)?;
    let Some(slot) = state.slots.borrow().get(handler as usize).cloned() else {
        return Err(Error::BadInput("ctx:finish: this request's handler is gone".into()).into());
    };
    let (value, why) = (arg(&args, 1), arg(&args, 2));
    let answer = if value.is_nil() && !why.is_nil() {
        // nil and { code =, message = }: the protocol's error.
        match protocol_error(&why) {
            Some(refused) => Answer::Refused(refused),
            None => Answer::Failed(words(lua, why)),
        }
    } else {
        answer_of(lua, shaped(lua, &method, &slot, value, &name.as_bytes()))
    };
    let name = name.as_bytes().to_vec();
    let modern = ctx.raw_get::<Option<bool>>("_modern")?.unwrap_or(false);
    state.answered_later.borrow_mut().push(LaterAnswer { route, id, method, name, answer, modern });
    send_later_answers(&state);
    Ok(MultiValue::new())
}
