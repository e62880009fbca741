//! One MCP session over a long-lived transport: the handshake once, then
//! requests matched to their replies by id, with a time limit each.
//!
//! The Lua-facing fields (`server_info`, `negotiated_version`, ...) are the
//! binding's business; this layer only moves messages.

use std::time::{Duration, Instant};

use crate::codec::{self, Json};
use crate::error::{Error, Result};
use crate::protocol::{self, classify, id_key, Kind};
use crate::transport::Transport;

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
        sent
    }

    /// Sends `message` (a request with id `id`) and waits for its reply.
    /// Notifications and forwarded server requests that arrive meanwhile
    /// go to `peer` as they come (a request's answer is sent at once);
    /// replies to ids we no longer wait for (cancelled on timeout) are
    /// dropped. `what` names the request in errors.
    pub fn request(
        &mut self,
        id: &Json,
        message: &Json,
        timeout: Duration,
        what: &str,
        peer: &mut dyn Peer,
    ) -> Result<Json> {
        let wanted = id_key(id);
        let deadline = Instant::now() + timeout;
        let outcome = self.transport.send(message).and_then(|()| loop {
            match self.transport.receive(deadline)? {
                Some(msg) => match classify(&msg) {
                    Kind::Response(key) if Some(&key) == wanted.as_ref() => break Ok(msg),
                    Kind::Notification => peer.notification(msg),
                    Kind::ServerRequest => {
                        let answer = peer.request(&msg);
                        self.transport.send(&answer)?;
                    }
                    _ => {}
                },
                None => break Err(self.time_out(id, message, timeout, what)),
            }
        });
        // Only a dead transport ends the session; a timeout or an
        // oversized reply leaves the server answering the next request.
        if let Err(Error::Transport { .. }) = &outcome {
            self.broken = true;
        }
        outcome
    }

    fn time_out(&mut self, id: &Json, message: &Json, timeout: Duration, what: &str) -> Error {
        // The spec forbids cancelling `initialize`; for anything else, tell
        // the server to stop working on it. A failure to send changes
        // nothing: the caller gets the timeout either way.
        if message.get("method") != Some(&Json::str("initialize")) {
            let reason = format!("timed out after {} s", seconds_text(timeout));
            let _ = self.transport.send(&protocol::cancelled(id, &reason));
        } else {
            self.broken = true;
        }
        Error::Timeout { what: what.to_string(), seconds: seconds_text(timeout) }
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

/// Seconds as a user wrote them: "60", "0.5".
pub fn seconds_text(d: Duration) -> String {
    codec::format_float(d.as_secs_f64())
}
