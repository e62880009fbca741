//! Requests in flight over HTTP, and where what answers them goes: the
//! request's own response, JSON or, once there is more than the reply, an
//! event stream; or, once the server closed that stream early (so that a
//! long call does not pin a connection, the 2025-11-25 revision's polling),
//! kept until the client comes back for it with a GET naming the last
//! event it saw (`Last-Event-ID`).

use std::collections::HashMap;
use std::sync::Arc;

use super::connection::Connection;
use super::response;
use crate::codec::{encode, Json};
use crate::server::PeerKey;

/// Events kept for a client to resume a closed stream with.
const KEPT_EVENTS: usize = 256;
/// Answered flights whose client has not come back for them: the oldest
/// are let go past this.
const KEPT_FLIGHTS: usize = 64;
/// How long a client waits before it resumes a stream closed early.
const RETRY_MS: u64 = 1000;

pub struct Flight {
    pub peer: PeerKey,
    /// Where it is answered: None while the stream is closed and the
    /// client has not come back.
    connection: Option<Arc<Connection>>,
    /// The session id its answer announces (the answer to `initialize`).
    announces: Option<String>,
    streaming: bool,
    /// Events are numbered (and kept) once the stream was closed early.
    resumable: bool,
    events: Vec<(u64, Vec<u8>)>,
    next_event: u64,
    answered: bool,
    /// A 2026-07-28 request: an error reply is sent with its status.
    stateless: bool,
}

impl Flight {
    pub fn new(peer: PeerKey, connection: Arc<Connection>, announces: Option<String>) -> Flight {
        Flight {
            peer,
            connection: Some(connection),
            announces,
            streaming: false,
            resumable: false,
            events: Vec::new(),
            next_event: 0,
            answered: false,
            stateless: false,
        }
    }

    pub fn stateless(mut self) -> Flight {
        self.stateless = true;
        self
    }

    fn headers(&self) -> Vec<(&'static str, String)> {
        self.announces.iter().map(|id| ("Mcp-Session-Id", id.clone())).collect()
    }

    fn write(&self, bytes: &[u8], unsent: usize) {
        if let Some(connection) = &self.connection {
            connection.write(bytes, unsent);
        }
    }

    fn start_stream(&mut self, unsent: usize) {
        if !self.streaming {
            self.streaming = true;
            self.write(&response::stream_head(&self.headers()), unsent);
        }
    }

    /// A message on the request's stream (started now if it was not).
    pub fn send(&mut self, exchange: u64, data: Vec<u8>, unsent: usize) {
        self.start_stream(unsent);
        if !self.resumable {
            return self.write(&response::event(None, &data, None), unsent);
        }
        self.next_event += 1;
        let id = event_id(exchange, self.next_event);
        self.write(&response::event(Some(&id), &data, None), unsent);
        if self.events.len() >= KEPT_EVENTS {
            self.events.remove(0);
        }
        self.events.push((self.next_event, data));
    }

    /// Ends the stream now, the client told when to come back: a priming
    /// event (an id and no data) it can resume after.
    pub fn close_early(&mut self, exchange: u64, unsent: usize) {
        if self.connection.is_none() {
            return;
        }
        self.start_stream(unsent);
        self.resumable = true;
        let id = event_id(exchange, self.next_event);
        self.write(&response::event(Some(&id), b"", Some(RETRY_MS)), unsent);
        self.write(response::LAST_CHUNK, unsent);
        if let Some(connection) = self.connection.take() {
            connection.done(false);
        }
    }

    /// The reply (None: the request was cancelled, and gets none). True
    /// when the flight is over; false when it waits for its client to
    /// resume and read the reply.
    pub fn finish(&mut self, exchange: u64, reply: Option<&Json>, unsent: usize) -> bool {
        self.answered = true;
        if self.streaming {
            if let Some(reply) = reply {
                self.send(exchange, encode(reply), unsent);
            }
            let Some(connection) = self.connection.take() else { return false };
            connection.write(response::LAST_CHUNK, unsent);
            connection.done(false);
            return true;
        }
        let Some(connection) = self.connection.take() else { return true };
        let bytes = match reply {
            Some(reply) => {
                let status = if self.stateless { super::stateless::status_of(reply) } else { 200 };
                response::whole(status, &self.headers(), Some("application/json"), &encode(reply), false)
            }
            None => response::whole(202, &self.headers(), None, b"", false),
        };
        connection.write(&bytes, unsent);
        connection.done(false);
        true
    }

    /// The client came back (a GET naming event `after` of this stream):
    /// what it missed, then what comes. True when the flight is over.
    pub fn resume(&mut self, exchange: u64, connection: Arc<Connection>, after: u64, unsent: usize) -> bool {
        connection.write(&response::stream_head(&[]), unsent);
        for (number, data) in self.events.iter().filter(|(n, _)| *n > after) {
            connection.write(&response::event(Some(&event_id(exchange, *number)), data, None), unsent);
        }
        if self.answered {
            connection.write(response::LAST_CHUNK, unsent);
            connection.done(false);
            return true;
        }
        if let Some(old) = self.connection.replace(connection) {
            old.done(true);
        }
        false
    }
}

/// The id of event `number` of the stream of exchange `exchange`.
fn event_id(exchange: u64, number: u64) -> String {
    format!("e{exchange}.{number}")
}

/// The stream and event a `Last-Event-ID` of a request's stream names.
pub fn parse_event_id(id: &str) -> Option<(u64, u64)> {
    let (exchange, number) = id.strip_prefix('e')?.split_once('.')?;
    Some((exchange.parse().ok()?, number.parse().ok()?))
}

/// The flights, by exchange, and those answered that wait for their
/// client to come back.
#[derive(Default)]
pub struct Flights {
    open: HashMap<u64, Flight>,
    waiting: Vec<u64>,
}

impl Flights {
    pub fn insert(&mut self, exchange: u64, flight: Flight) {
        self.open.insert(exchange, flight);
    }

    pub fn get_mut(&mut self, exchange: u64) -> Option<&mut Flight> {
        self.open.get_mut(&exchange)
    }

    /// Finishes the flight of `exchange`; one whose client must come
    /// back for the reply is kept (a bounded number of them).
    pub fn finish(&mut self, exchange: u64, reply: Option<&Json>, unsent: usize) {
        let Some(flight) = self.open.get_mut(&exchange) else { return };
        if flight.finish(exchange, reply, unsent) {
            self.open.remove(&exchange);
            return;
        }
        self.waiting.push(exchange);
        while self.waiting.len() > KEPT_FLIGHTS {
            let oldest = self.waiting.remove(0);
            self.open.remove(&oldest);
        }
    }

    /// Resumes the stream of `exchange` for client `peer`; false when
    /// there is none of its to resume.
    pub fn resume(
        &mut self,
        peer: PeerKey,
        exchange: u64,
        after: u64,
        connection: Arc<Connection>,
        unsent: usize,
    ) -> bool {
        let Some(flight) = self.open.get_mut(&exchange).filter(|f| f.peer == peer) else { return false };
        if flight.resume(exchange, connection, after, unsent) {
            self.open.remove(&exchange);
            self.waiting.retain(|e| *e != exchange);
        }
        true
    }

    /// The open flight of client `peer` (a stateless one has one at most:
    /// its request, or its `subscriptions/listen`).
    pub fn of_peer(&mut self, peer: PeerKey) -> Option<(u64, &mut Flight)> {
        self.open.iter_mut().find(|(_, f)| f.peer == peer && !f.answered).map(|(e, f)| (*e, f))
    }

    /// Forgets the flights whose client hung up before they were
    /// answered (a `subscriptions/listen` the client closed): their
    /// clients.
    pub fn hung_up(&mut self) -> Vec<PeerKey> {
        let gone: Vec<u64> = self
            .open
            .iter()
            .filter(|(_, f)| !f.answered && f.connection.as_ref().is_some_and(|c| c.is_dead()))
            .map(|(e, _)| *e)
            .collect();
        gone.into_iter().filter_map(|e| self.open.remove(&e)).map(|f| f.peer).collect()
    }

    pub fn drain(&mut self) -> Vec<Flight> {
        self.waiting.clear();
        self.open.drain().map(|(_, f)| f).collect()
    }
}

impl Drop for Flight {
    fn drop(&mut self) {
        if let Some(connection) = self.connection.take() {
            connection.done(true);
        }
    }
}
