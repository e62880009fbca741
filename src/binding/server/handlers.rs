//! The holder's handlers, called by the protocol core on the Lua thread
//! with the `ctx` each gets.

use mlua::{Function, MultiValue, Table, Value};

use super::results::shaped;
use super::{ServerState, Slot};
use crate::binding::boundary::{callback_failed, is_interrupt};
use crate::binding::decode::to_lua;
use crate::binding::encode::encode_lua;
use crate::binding::lua::{call_lua, lua_tostring, Cx, Outcome, Raise};
use crate::codec::Json;
use crate::interrupt;
use crate::server::link::Route;
use crate::server::{Answer, Call, Handlers};

/// The holder's handlers, called on the Lua thread.
pub(super) struct LuaHandlers<'a, 'b> {
    pub lua: &'a Cx<'b>,
    pub server: &'a Table,
    pub state: &'a ServerState,
    /// Where the request came from, for what its handler sends.
    pub route: Route,
}

impl LuaHandlers<'_, '_> {
    /// Taken out of the list: the handler may add to it while it runs.
    fn slot(&self, handler: u64) -> Option<Slot> {
        self.state.slots.borrow().get(handler as usize).cloned()
    }

    /// The `ctx` a handler gets (see the prelude's `Context`).
    fn context(&self, call: &Call, handler: u64) -> Outcome<Table> {
        let ctx = self.lua.create_table()?;
        ctx.raw_set("server", self.server.clone())?;
        ctx.raw_set("request_id", to_lua(self.lua, call.id)?)?;
        // For ctx:finish, which shapes a later answer as a return would be.
        ctx.raw_set("_method", call.method)?;
        ctx.raw_set("_name", self.lua.create_string(call.name)?)?;
        ctx.raw_set("_handler", handler)?;
        if let Some(answers) = call.answers {
            // 2026-07-28: what the client answered in rounds so far.
            let given = self.lua.create_table()?;
            for (key, answer) in answers {
                given.raw_set(self.lua.create_string(key)?, to_lua(self.lua, answer)?)?;
            }
            ctx.raw_set("_answers", given)?;
            ctx.raw_set("_modern", true)?;
            let tasks = self
                .state
                .facts
                .borrow()
                .capabilities
                .get("extensions")
                .and_then(|e| e.get(crate::protocol::TASKS_EXTENSION))
                .is_some();
            let task_tool = self.slot(handler).is_some_and(|s| s.task);
            if tasks && task_tool && call.method == "tools/call" {
                // Its questions with a callback wait in its task.
                ctx.raw_set("_task", true)?;
            }
        }
        ctx.raw_set("_peer", self.route.peer)?;
        ctx.raw_set("_exchange", self.route.exchange)?;
        if let Some(meta) = call.meta {
            ctx.raw_set("meta", to_lua(self.lua, meta)?)?;
        }
        if let Some(token) = call.progress_token {
            ctx.raw_set("progress_token", to_lua(self.lua, token)?)?;
        }
        let context: Value = self.lua.prelude.module.raw_get("_Context")?;
        if let Value::Table(methods) = context {
            ctx.set_metatable(Some(methods))?;
        }
        Ok(ctx)
    }

    /// Runs a handler: its returns, or its failure in words for the client.
    fn run(&self, function: Function, args: MultiValue) -> Result<MultiValue, String> {
        match call_lua(self.lua, function, args) {
            Ok(returns) => match (returns.front(), returns.get(1)) {
                (Some(Value::Nil) | None, Some(why)) if !why.is_nil() => Err(self.words(why.clone())),
                _ => Ok(returns),
            },
            Err(Raise::Lua(error)) => {
                if is_interrupt(&error) {
                    interrupt::request();
                    callback_failed(error.clone());
                }
                if let Some(refused) = protocol_error(&error) {
                    *self.state.outcome.borrow_mut() = Some(Answer::Refused(refused));
                }
                Err(self.words(error))
            }
            Err(Raise::Mcp(e)) => Err(e.to_string()),
        }
    }

    fn words(&self, value: Value) -> String {
        words(self.lua, value)
    }

    /// Runs handler `handler` with `args` and its `ctx`, and shapes what
    /// it returned for `call.method`; its `ctx:later()` puts the answer off.
    fn call_handler(&self, handler: u64, call: &Call, args: impl FnOnce() -> Outcome<Vec<Value>>) -> Answer {
        let Some(slot) = self.slot(handler) else { return Answer::Failed("gone".into()) };
        let run = || -> Outcome<Result<MultiValue, String>> {
            let mut args = args()?;
            args.push(Value::Table(self.context(call, handler)?));
            Ok(self.run(slot.function.clone(), MultiValue::from_vec(args)))
        };
        self.state.outcome.borrow_mut().take();
        let ran = run();
        // The handler stopped for its client's input, or was refused: so
        // it ends, whatever it did with the error on its way out.
        if let Some(outcome) = self.state.outcome.borrow_mut().take() {
            return outcome;
        }
        match ran {
            Ok(Ok(returns)) => {
                let value = returns.front().cloned().unwrap_or(Value::Nil);
                if is_later(self.lua, &value) {
                    return Answer::Later;
                }
                answer_of(self.lua, shaped(self.lua, call.method, &slot, value, call.name))
            }
            Ok(Err(why)) => Answer::Failed(why),
            Err(e) => answer_of(self.lua, Err(e)),
        }
    }

    fn answer(&self, shaped: Outcome<Json>) -> Answer {
        answer_of(self.lua, shaped)
    }
}

/// A shaped result as the handler's answer: what could not be shaped is
/// its failure.
pub(super) fn answer_of(lua: &Cx, shaped: Outcome<Json>) -> Answer {
    match shaped {
        Ok(result) => Answer::Result(result),
        Err(Raise::Mcp(e)) => Answer::Failed(e.to_string()),
        Err(Raise::Lua(v)) => Answer::Failed(words(lua, v)),
    }
}

/// A Lua value as words for the client.
pub(super) fn words(lua: &Cx, value: Value) -> String {
    String::from_utf8_lossy(&lua_tostring(lua, value).unwrap_or_default()).into_owned()
}

/// A handler's `error({ code = N, message = '...' })`: the protocol's
/// error, rather than a tool result that says it failed.
pub(super) fn protocol_error(error: &Value) -> Option<crate::server::Refused> {
    let Value::Table(error) = error else { return None };
    let code = match error.raw_get::<Value>("code").ok()? {
        Value::Integer(code) => code,
        Value::Number(code) if code.fract() == 0.0 => code as i64,
        _ => return None,
    };
    let message = match error.raw_get::<Value>("message").ok()? {
        Value::String(m) => m.to_string_lossy(),
        _ => return None,
    };
    Some(crate::server::Refused { code, message, data: None })
}

/// Whether a handler returned `ctx:later()`.
fn is_later(lua: &Cx, value: &Value) -> bool {
    let Value::Table(value) = value else { return false };
    matches!(lua.prelude.module.raw_get::<Value>("_later"), Ok(Value::Table(later)) if later == *value)
}

impl Handlers for LuaHandlers<'_, '_> {
    fn call_tool(&mut self, handler: u64, arguments: Json, call: &Call) -> Answer {
        self.call_handler(handler, call, || Ok(vec![to_lua(self.lua, &arguments)?]))
    }

    fn read_resource(&mut self, handler: u64, uri: &[u8], variables: Option<Json>, call: &Call) -> Answer {
        self.call_handler(handler, call, || {
            let mut args = vec![Value::String(self.lua.create_string(uri)?)];
            if let Some(vars) = &variables {
                args.push(to_lua(self.lua, vars)?);
            }
            Ok(args)
        })
    }

    fn get_prompt(&mut self, handler: u64, arguments: Json, call: &Call) -> Answer {
        self.call_handler(handler, call, || Ok(vec![to_lua(self.lua, &arguments)?]))
    }

    fn complete(&mut self, handler: u64, argument: &[u8], value: &[u8], context: Option<&Json>) -> Answer {
        let Some(Slot { complete, .. }) = self.slot(handler) else { return Answer::Result(Json::Array(vec![])) };
        let run = || -> Outcome<Json> {
            let Some(complete) = complete else { return Ok(Json::Array(vec![])) };
            let candidates = match complete.get::<Value>(self.lua.create_string(argument)?)? {
                Value::Function(f) => {
                    let context = match context {
                        Some(c) => to_lua(self.lua, c)?,
                        None => Value::Nil,
                    };
                    let returned = call_lua(self.lua, f, (self.lua.create_string(value)?, context))?;
                    returned.front().cloned().unwrap_or(Value::Nil)
                }
                Value::Table(list) => {
                    // A plain list: the candidates that start with what was typed.
                    let out = self.lua.create_table()?;
                    for item in list.sequence_values::<Value>() {
                        if let Value::String(s) = item? {
                            if s.as_bytes().starts_with(value) {
                                out.raw_set(out.raw_len() + 1, s)?;
                            }
                        }
                    }
                    Value::Table(out)
                }
                _ => Value::Nil,
            };
            match candidates {
                Value::Nil => Ok(Json::Array(vec![])),
                v => encode_lua(self.lua, "the completion", &v),
            }
        };
        self.answer(run())
    }
}
