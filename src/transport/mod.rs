//! Long-lived transports: one server process (stdio) or one HTTP session
//! per client, behind one interface ([`Transport`]) so that the session
//! layer (`session.rs`) and the client core never know which they drive.
//!
//! The interface is wide, fifteen methods, because HTTP kept needing
//! things a pipe has no use for: a detached POST for the async API, a
//! tool's own headers, a notification whose delivery a handshake waits
//! for, a deadline for the whole handshake, the modern revision's
//! headers. Only `send`, `receive` and `close` must be written; every
//! other method has the answer of a transport that writes to a pipe (sent
//! at once, no headers, no session id), so stdio and the replay write
//! little more than those three, and HTTP overrides what its kind of
//! connection calls for. What that costs: a new need is one more method
//! here, with its default, and one more line in the recorder, which
//! forwards every method to the transport it wraps (`record`).
//!
//! Beside them: the one thread that serves them while no Lua call waits
//! (`poller`), the bounded queue from there to Lua (`inbox`), the
//! descriptor behind `client:fd()` (`doorbell`), the signal a wait on
//! several clients sleeps on (`arrivals`) and, on Unix, the descriptor
//! chores (`fds`).

use std::time::Instant;

use crate::codec::Json;
use crate::error::{Error, Result};
use crate::protocol::IdKey;

pub mod arrivals;
pub mod doorbell;
#[cfg(unix)]
pub mod fds;
pub mod http;
pub mod inbox;
pub mod poller;
pub mod record;
pub mod stdio;

/// What a transport hands to the session.
pub enum Received {
    Message(Json),
    /// A message nested deeper than the decoder follows was skipped; the
    /// id it carried, when one could be read (see `codec::peek_envelope`).
    TooDeep(Option<IdKey>),
    /// No reply will come for the request with this id (an async HTTP
    /// POST refused, a reply over the size limit on its stream); with no
    /// id, for whatever is being waited for (stdio's oversized line).
    Failed(Option<IdKey>, Error),
    /// The notification sent under this key has been delivered (see
    /// [`Transport::send_notice`]).
    Delivered(IdKey),
}

pub trait Transport {
    /// Delivers one JSON-RPC message. The transport encodes it: HTTP also
    /// needs to know what it is (a request, initialize) without decoding
    /// its own output again.
    fn send(&mut self, message: &Json) -> Result<()>;

    /// Sends a request without waiting for anything of its reply, for
    /// requests that must not hold Lua (the async API). Over stdio that is
    /// `send` itself; HTTP, whose POST waits for the reply's headers (or
    /// the whole JSON body), posts it from a thread of its own.
    fn send_detached(&mut self, request: &Json, _timeout: std::time::Duration) -> Result<()> {
        self.send(request)
    }

    /// Sends a request with headers of its own (a modern HTTP request's
    /// `Mcp-Param-*`), detached when `detached` bounds it (see
    /// [`Transport::send_detached`]). Transports without headers have
    /// nothing to put them in.
    fn send_request(
        &mut self,
        request: &Json,
        headers: &[(String, String)],
        detached: Option<std::time::Duration>,
    ) -> Result<()> {
        let _ = headers;
        match detached {
            Some(timeout) => self.send_detached(request, timeout),
            None => self.send(request),
        }
    }

    /// Sends a notification whose delivery a handshake waits for without
    /// holding Lua (`initialized`: the server must hear it before any
    /// request). True when it is delivered already (written to a pipe);
    /// false when a thread posts it and reports through the inbox, with
    /// [`Received::Delivered`] or [`Received::Failed`] for `key`.
    fn send_notice(&mut self, notice: &Json, key: &IdKey, timeout: std::time::Duration) -> Result<bool> {
        let _ = (key, timeout);
        self.send(notice).map(|()| true)
    }

    /// Whether every request gets an answer of some kind (HTTP: a
    /// status at least), so that silence is a timeout and a dead
    /// connection an error, never a sign of an older server.
    fn always_answers(&self) -> bool {
        false
    }

    /// Whether requests carry headers (HTTP), where a modern server reads
    /// a tool's marked parameters (see `tool_headers`).
    fn carries_headers(&self) -> bool {
        false
    }

    /// The next message from the server that is not a server request
    /// (those are answered by the transport itself, at once, so that a
    /// server's `ping` never waits on Lua). `Ok(None)` when `deadline`
    /// passes first; an error when the connection is gone for good.
    fn receive(&mut self, deadline: Instant) -> Result<Option<Received>>;

    /// Whether something received waits to be taken (for `client:fd()`).
    fn queued(&self) -> bool {
        false
    }

    /// Notifications dropped since the last call, because Lua did not
    /// take them before the buffer filled (see `inbox`).
    fn take_dropped(&mut self) -> u64 {
        0
    }

    /// The handshake must be over by `deadline` (None once it is): every
    /// message it sends is bounded by what is left of it as a whole, head
    /// and body (an HTTP POST), rather than by `opts.timeout`. A server
    /// that trickled its response head a byte each 100 ms held discover
    /// for the request timeout (8 s) where `connect_timeout` said 2.
    fn connect_by(&mut self, _deadline: Option<Instant>) {}

    /// The handshake is done: later messages carry the negotiated version
    /// (HTTP sends it as a header), and the server may now talk first.
    fn established(&mut self, _negotiated_version: &str) {}

    /// The server speaks the modern way (2026-07-28): no session, and over
    /// HTTP each message's version and method in headers of its own.
    fn speak_modern(&mut self) {}

    /// The session id a server gave (HTTP only).
    fn session_id(&self) -> Option<String> {
        None
    }

    /// What the server said last on its own (a stdio server's stderr),
    /// for an error about a server that did not answer.
    fn last_words(&self) -> Option<String> {
        None
    }

    /// Ends the session the way the spec asks for this transport. Safe to
    /// call more than once.
    fn close(&mut self);
}
