//! What a server's transport does for the conversation (`channel`): hands
//! over each message with where it came from, and carries what goes back
//! to where it belongs.
//!
//! Over stdio every message goes down the one stream. Over Streamable
//! HTTP a request's progress, logs and questions to the client go on that
//! request's own response (a stream once there is more than the reply),
//! and what the server says unasked goes on the session's GET stream: so
//! a message carries its [`Route`], and the transport reads it.

use std::io;
use std::time::Instant;

use super::PeerKey;
use crate::codec::Json;

/// Where a message came from: which client, and which exchange of its
/// (an HTTP request; 0 for none, as over stdio or for what a server
/// sends unasked).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Route {
    pub peer: PeerKey,
    pub exchange: u64,
}

impl Route {
    /// What client `peer` is sent unasked.
    pub fn unasked(peer: PeerKey) -> Route {
        Route { peer, exchange: 0 }
    }
}

pub enum Received {
    Message(Json, Route),
    /// A client's session ended (it said so, or it expired).
    Gone(PeerKey),
    Nothing,
    /// The transport ended (stdin closed, the listener closed).
    Ended,
}

pub trait Link {
    /// The next message from any client, waiting until `until` at most.
    /// What is not a message at all (not JSON, past a bound) the link
    /// answers itself, with the protocol's error.
    fn receive(&mut self, until: Instant) -> io::Result<Received>;
    /// A message on `route` (see [`Route`]).
    fn send(&mut self, route: Route, message: &Json) -> io::Result<()>;
    /// The request on `route` is over: its reply, or None when the
    /// client cancelled it and hears nothing more of it.
    fn finish(&mut self, route: Route, reply: Option<&Json>) -> io::Result<()>;
    /// Ends the stream of the request on `route` before its reply, the
    /// client told to come back for the rest (over HTTP; elsewhere there
    /// is no such stream, and nothing to do).
    fn close_stream(&mut self, _route: Route) -> io::Result<()> {
        Ok(())
    }
    /// The HTTP headers of the request on `route` (names in lower case),
    /// over HTTP.
    fn headers(&self, _route: Route) -> Option<Vec<(String, Vec<u8>)>> {
        None
    }
}
