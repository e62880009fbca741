//! What the server sends its clients outside a reply: a handler's
//! notifications, what a client is owed unasked, and the answers handlers
//! gave later, each on its route.

use crate::binding::lua::Outcome;
use crate::codec::Json;
use crate::error::Error;
use crate::server::link::Route;

use super::{LaterAnswer, ServerState};

pub(super) fn io_error(e: std::io::Error) -> Error {
    Error::Lua(format!("mcp.server: {e}"))
}

pub(super) fn send(state: &ServerState, route: Route, message: &Json) -> Outcome<()> {
    if let Some(channel) = state.channel.borrow_mut().as_mut() {
        // A client that is gone ends serving at its next read.
        let _ = channel.send(route, message);
    }
    Ok(())
}

pub(super) fn send_notices(state: &ServerState) -> Outcome<()> {
    if state.channel.borrow().is_none() {
        return Ok(());
    }
    let owed = state.core.borrow().owed();
    for peer in owed {
        let notices = state.core.borrow_mut().take_notices(peer);
        for notice in &notices {
            send(state, Route::unasked(peer), notice)?;
        }
    }
    Ok(())
}

/// Sends the answers given later, once the core is free to check them
/// (`ctx:finish` may run inside another request's handler).
pub(super) fn send_later_answers(state: &ServerState) {
    let Ok(mut core) = state.core.try_borrow_mut() else { return };
    let answers = std::mem::take(&mut *state.answered_later.borrow_mut());
    for LaterAnswer { route, id, method, name, answer, modern } in answers {
        // None: the request became a task, which the answer settled.
        let Some(reply) = core.answer_later(route.peer, (&id, &method, &name), answer, modern) else { continue };
        if let Some(channel) = state.channel.borrow_mut().as_mut() {
            let _ = channel.finish(route, &id, &reply);
        }
    }
    for (request, key, question) in std::mem::take(&mut *state.task_questions.borrow_mut()) {
        core.task_asks(request, key, question);
    }
}
