//! Long-lived transports: one server process (stdio) or one HTTP session
//! per client, behind the same small interface so that the session layer
//! (`session.rs`) never knows which it drives.

use std::time::Instant;

use crate::codec::Json;
use crate::error::Result;
use crate::protocol::IdKey;

pub mod http;
pub mod inbox;
pub mod stdio;

/// What a transport hands to the session.
pub enum Received {
    Message(Json),
    /// A message nested deeper than the decoder follows was skipped; the
    /// id it carried, when one could be read (see `codec::peek_id`).
    TooDeep(Option<IdKey>),
}

pub trait Transport {
    /// Delivers one JSON-RPC message. The transport encodes it: HTTP also
    /// needs to know what it is (a request, initialize) without decoding
    /// its own output again.
    fn send(&mut self, message: &Json) -> Result<()>;

    /// The next message from the server that is not a server request
    /// (those are answered by the transport itself, at once, so that a
    /// server's `ping` never waits on Lua). `Ok(None)` when `deadline`
    /// passes first; an error when the connection is gone for good.
    fn receive(&mut self, deadline: Instant) -> Result<Option<Received>>;

    /// Notifications dropped since the last call, because Lua did not
    /// take them before the buffer filled (see `inbox`).
    fn take_dropped(&mut self) -> u64 {
        0
    }

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
