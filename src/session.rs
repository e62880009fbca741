//! One MCP session over a long-lived transport: the handshake once, then
//! requests matched to their replies by id, with a time limit each.
//!
//! The Lua-facing fields (`server_info`, `negotiated_version`, ...) are the
//! binding's business; this layer only moves messages.

use std::time::{Duration, Instant};

use crate::codec::{self, Json};
use crate::error::{Error, Result};
use crate::interrupt;
use crate::protocol::{self, classify, id_key, Kind};
use crate::transport::{Received, Transport};

/// The client's side of what the server starts: notifications to hand
/// on, and the requests it forwards (those the user has handlers for).
pub trait Peer {
    fn notification(&mut self, msg: Json);
    /// The complete JSON-RPC response to send back.
    fn request(&mut self, msg: &Json) -> Json;
}

pub struct Session {
    transport: Box<dyn Transport>,
    /// The transport failed for good; the binding starts a new session.
    pub broken: bool,
}

impl Session {
    pub fn new(transport: Box<dyn Transport>) -> Self {
        Session { transport, broken: false }
    }

    pub fn notify(&mut self, message: &Json) -> Result<()> {
        let sent = self.transport.send(message);
        self.broken |= sent.is_err();
        // Interrupted inside the transport: name what was being sent.
        sent.map_err(|e| match e {
            Error::Interrupted { what } if what.is_empty() => {
                Error::Interrupted { what: protocol::lua_text(message.get("method")) }
            }
            other => other,
        })
    }

    /// Sends `message` (a request with id `id`) and waits for its reply.
    /// Notifications and forwarded server requests that arrive meanwhile
    /// go to `peer` as they come (a request's answer is sent at once);
    /// replies to ids we no longer wait for (cancelled on timeout) are
    /// dropped. `what` names the request in errors.
    ///
    /// The wait runs in slices of [`interrupt::SLICE`], so that a host
    /// asking for its thread back (Ctrl-C) gets it within one slice: the
    /// request is then cancelled as on a timeout.
    pub fn request(
        &mut self,
        id: &Json,
        message: &Json,
        timeout: Duration,
        what: &str,
        peer: &mut dyn Peer,
    ) -> Result<Json> {
        let wanted = id_key(id);
        let deadline = Instant::now().checked_add(timeout).unwrap_or_else(far_future);
        // A too-deep message whose id could not be read: perhaps our reply.
        // Said in the timeout message, if it comes to that.
        let mut skipped_unreadable = false;
        let outcome = self.transport.send(message).and_then(|()| loop {
            let slice_end = deadline.min(Instant::now() + interrupt::SLICE);
            let received = self.transport.receive(slice_end)?;
            // Checked before anything reaches Lua, and whatever arrives: a
            // server that chats every few milliseconds must not keep a
            // request past its time, nor hold off Ctrl-C (and a Lua
            // callback would run the host's one-shot hook and lose it).
            if interrupt::requested() {
                self.abandon(id, message, "interrupted by the user");
                break Err(Error::Interrupted { what: what.to_string() });
            }
            let mut reply = None;
            match received {
                Some(Received::Message(msg)) => match classify(&msg) {
                    Kind::Response(key) if Some(&key) == wanted.as_ref() => reply = Some(msg),
                    Kind::Notification => peer.notification(msg),
                    Kind::ServerRequest => {
                        let answer = peer.request(&msg);
                        self.transport.send(&answer)?;
                    }
                    _ => {}
                },
                Some(Received::TooDeep(key)) if key.is_some() && key == wanted => {
                    break Err(Error::ReplyTooDeep { what: what.to_string(), limit: codec::MAX_DEPTH });
                }
                Some(Received::TooDeep(key)) => skipped_unreadable |= key.is_none(),
                None => {}
            }
            let dropped = self.transport.take_dropped();
            if dropped > 0 {
                peer.notification(protocol::dropped_notice(dropped));
            }
            if let Some(reply) = reply {
                break Ok(reply);
            }
            if Instant::now() >= deadline {
                let note = if skipped_unreadable {
                    format!(
                        "; meanwhile a message nested deeper than {} levels was skipped, with no id that could be read",
                        codec::MAX_DEPTH
                    )
                } else {
                    String::new()
                };
                let reason = format!("timed out after {} s", seconds_text(timeout));
                self.abandon(id, message, &reason);
                break Err(Error::Timeout { what: what.to_string(), seconds: seconds_text(timeout), note });
            }
        });
        // Interrupted inside the transport (an HTTP POST waiting for its
        // body): the request still needs its cancellation and its name.
        let outcome = match outcome {
            Err(Error::Interrupted { what: inner }) if inner.is_empty() => {
                self.abandon(id, message, "interrupted by the user");
                Err(Error::Interrupted { what: what.to_string() })
            }
            other => other,
        };
        // Only a dead transport ends the session; a timeout or an
        // oversized reply leaves the server answering the next request.
        if let Err(Error::Transport { .. }) = &outcome {
            self.broken = true;
        }
        outcome
    }

    /// We stop waiting for `message`. The spec forbids cancelling
    /// `initialize`, so a session whose handshake we abandon is over; for
    /// anything else, tell the server to stop working on it. A failure to
    /// send changes nothing: the caller gets its error either way.
    fn abandon(&mut self, id: &Json, message: &Json, reason: &str) {
        if message.get("method") != Some(&Json::str("initialize")) {
            // Shielded: after Ctrl-C the host's hook is still set, and the
            // cancellation must not be interrupted in its turn.
            let _ = interrupt::shielded(|| self.transport.send(&protocol::cancelled(id, reason)));
        } else {
            self.broken = true;
        }
    }

    pub fn established(&mut self, negotiated_version: &str) {
        self.transport.established(negotiated_version);
    }

    pub fn session_id(&self) -> Option<String> {
        self.transport.session_id()
    }

    pub fn close(&mut self) {
        self.transport.close();
    }
}

/// A deadline for a timeout too long to add to now: never, in practice.
fn far_future() -> Instant {
    Instant::now() + Duration::from_secs(100 * 365 * 24 * 3600)
}

/// Seconds as a user wrote them: "60", "0.5".
pub fn seconds_text(d: Duration) -> String {
    codec::format_float(d.as_secs_f64())
}
