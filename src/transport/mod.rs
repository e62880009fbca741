//! Long-lived transports: one server process (stdio) or one HTTP session
//! per client, behind the same small interface so that the session layer
//! (`session.rs`) never knows which it drives.

use std::time::Instant;

use crate::codec::Json;
use crate::error::Result;

pub mod http;
pub mod stdio;

pub trait Transport {
    /// Delivers one JSON-RPC message. The transport encodes it: HTTP also
    /// needs to know what it is (a request, initialize) without decoding
    /// its own output again.
    fn send(&mut self, message: &Json) -> Result<()>;

    /// The next message from the server that is not a server request
    /// (those are answered by the transport itself, at once, so that a
    /// server's `ping` never waits on Lua). `Ok(None)` when `deadline`
    /// passes first; an error when the connection is gone for good.
    fn receive(&mut self, deadline: Instant) -> Result<Option<Json>>;

    /// The handshake is done: later messages carry the negotiated version
    /// (HTTP sends it as a header), and the server may now talk first.
    fn established(&mut self, _negotiated_version: &str) {}

    /// The session id a server gave (HTTP only).
    fn session_id(&self) -> Option<String> {
        None
    }

    /// Ends the session the way the spec asks for this transport. Safe to
    /// call more than once.
    fn close(&mut self);
}
