//! The conversation with the clients over one transport: messages in
//! order, the server's own requests to a client (elicitation, sampling,
//! roots) and their replies, and cancellations noticed while a handler
//! still runs.
//!
//! A handler that asks its client something waits for the reply here,
//! and whatever else comes meanwhile (a ping, another call, a
//! cancellation) is kept, in order, for after it: handlers run one at a
//! time on the Lua thread, so nothing is answered out of turn. A
//! cancellation is also noted at once, so that the handler it concerns
//! sees it when it asks (`ctx:cancelled()`).
//!
//! Both are bounded: a client that floods a server whose handler waits
//! would otherwise grow them without end. Past [`MAX_KEPT`] a request is
//! answered at once with [`BUSY`] and a notification dropped; the
//! cancellations remembered are the last [`MAX_CANCELLED`].

use std::collections::{HashSet, VecDeque};
use std::io;
use std::time::{Duration, Instant};

use super::link::{Link, Received, Route};
use super::PeerKey;
use crate::codec::Json;
use crate::interrupt;
use crate::protocol::{self, id_key, IdKey};

/// The most messages kept while a handler waits for its client.
pub const MAX_KEPT: usize = 1024;
/// The most cancellations remembered (of requests not answered yet).
pub const MAX_CANCELLED: usize = 1024;
/// The code of a request refused because too many wait: JSON-RPC leaves
/// -32000 to -32099 to the server.
pub const BUSY: i64 = -32000;

/// What came from a client.
pub enum Incoming {
    Message(Json, Route),
    /// A client's session ended.
    Gone(PeerKey),
    /// Nothing before the deadline (or Ctrl-C: the caller asks).
    Nothing,
    /// The transport ended: every client is gone.
    Ended,
}

/// Why a request of the server's got no result.
#[derive(Debug)]
pub enum Unanswered {
    /// The client answered with a JSON-RPC error: its code and message.
    Refused(i64, String),
    TimedOut(Duration),
    Interrupted,
    Ended,
    Io(io::Error),
}

pub struct Channel {
    link: Box<dyn Link>,
    kept: VecDeque<(Json, Route)>,
    cancelled: Remembered,
    next_id: u64,
    /// How long the server waits for the client to answer its request.
    pub request_timeout: Duration,
}

impl Channel {
    pub fn new(link: Box<dyn Link>, request_timeout: Duration) -> Channel {
        Channel { link, kept: VecDeque::new(), cancelled: Remembered::default(), next_id: 0, request_timeout }
    }

    /// The next message, waiting until `until` at most.
    pub fn next(&mut self, until: Instant) -> io::Result<Incoming> {
        if let Some((kept, route)) = self.kept.pop_front() {
            return Ok(Incoming::Message(kept, route));
        }
        self.next_unkept(until)
    }

    fn next_unkept(&mut self, until: Instant) -> io::Result<Incoming> {
        Ok(match self.link.receive(until)? {
            Received::Message(message, route) => {
                self.note_cancellation(&message, route);
                Incoming::Message(message, route)
            }
            Received::Gone(peer) => Incoming::Gone(peer),
            Received::Nothing => Incoming::Nothing,
            Received::Ended => Incoming::Ended,
        })
    }

    /// A message on `route`: a handler's progress or log, or what the
    /// server owes a client unasked.
    pub fn send(&mut self, route: Route, message: &Json) -> io::Result<()> {
        self.link.send(route, message)
    }

    /// Answers the request on `route`, unless its client cancelled it (a
    /// cancelled request gets no reply: the client stopped waiting).
    pub fn finish(&mut self, route: Route, id: &Json, reply: &Json) -> io::Result<()> {
        let cancelled = self.cancelled.take(route.peer, id);
        self.link.finish(route, (!cancelled).then_some(reply))
    }

    /// See [`Link::headers`].
    pub fn headers(&self, route: Route) -> Option<Vec<(String, Vec<u8>)>> {
        self.link.headers(route)
    }

    /// See [`Link::close_stream`].
    pub fn close_stream(&mut self, route: Route) -> io::Result<()> {
        self.link.close_stream(route)
    }

    fn note_cancellation(&mut self, message: &Json, route: Route) {
        if message.get("method") == Some(&Json::str("notifications/cancelled")) {
            if let Some(id) = message.get("params").and_then(|p| p.get("requestId")) {
                self.cancelled.note(route.peer, id);
            }
        }
    }

    /// Keeps a message for after the handler that waits, or refuses it
    /// when too many wait already.
    fn keep(&mut self, message: Json, route: Route) -> io::Result<()> {
        if self.kept.len() < MAX_KEPT {
            self.kept.push_back((message, route));
            return Ok(());
        }
        let Some(id) = message.get("id").filter(|_| message.get("method").is_some()) else { return Ok(()) };
        let why = format!("Server busy: {MAX_KEPT} messages already wait for a handler that is asking its client something; send this again once it is answered");
        self.link.finish(route, Some(&protocol::error_response(id.clone(), BUSY, &why)))
    }

    /// Whether the client on `route` cancelled request `id`: what came
    /// meanwhile is read (without waiting) and kept for later.
    pub fn cancelled(&mut self, route: Route, id: &Json) -> io::Result<bool> {
        while let Incoming::Message(message, from) = self.next_unkept(Instant::now())? {
            self.keep(message, from)?;
        }
        Ok(self.cancelled.contains(route.peer, id))
    }

    /// Sends the client on `route` a request of the server's, without
    /// waiting: its id, for the answer.
    pub fn ask(&mut self, route: Route, method: &str, params: Json) -> io::Result<Json> {
        self.next_id += 1;
        let id = Json::str(format!("server-{}", self.next_id));
        self.send(route, &protocol::request(id.clone(), method, params))?;
        Ok(id)
    }

    /// Asks the client on `route` `method` and waits for its answer,
    /// keeping what else comes meanwhile.
    pub fn request(&mut self, route: Route, method: &str, params: Json) -> Result<Json, Unanswered> {
        let id = self.ask(route, method, params).map_err(Unanswered::Io)?;
        let until = Instant::now() + self.request_timeout;
        loop {
            if interrupt::requested() {
                return Err(Unanswered::Interrupted);
            }
            match self.next_unkept(until).map_err(Unanswered::Io)? {
                Incoming::Ended => return Err(Unanswered::Ended),
                Incoming::Gone(peer) if peer == route.peer => return Err(Unanswered::Ended),
                Incoming::Gone(_) | Incoming::Nothing if Instant::now() >= until => {
                    return Err(Unanswered::TimedOut(self.request_timeout))
                }
                Incoming::Gone(_) | Incoming::Nothing => {}
                Incoming::Message(message, from)
                    if from.peer == route.peer && message.get("method").is_none() && message.get("id") == Some(&id) =>
                {
                    return answer_of(message);
                }
                Incoming::Message(message, from) => self.keep(message, from).map_err(Unanswered::Io)?,
            }
        }
    }
}

/// The cancellations noted and not yet consumed, oldest forgotten first
/// past [`MAX_CANCELLED`].
#[derive(Default)]
struct Remembered {
    set: HashSet<(PeerKey, IdKey)>,
    order: VecDeque<(PeerKey, IdKey)>,
}

impl Remembered {
    fn note(&mut self, peer: PeerKey, id: &Json) {
        let Some(key) = id_key(id) else { return };
        if self.set.insert((peer, key.clone())) {
            self.order.push_back((peer, key));
        }
        while self.order.len() > MAX_CANCELLED {
            if let Some(oldest) = self.order.pop_front() {
                self.set.remove(&oldest);
            }
        }
    }

    fn contains(&self, peer: PeerKey, id: &Json) -> bool {
        id_key(id).is_some_and(|key| self.set.contains(&(peer, key)))
    }

    fn take(&mut self, peer: PeerKey, id: &Json) -> bool {
        let Some(key) = id_key(id) else { return false };
        let entry = (peer, key);
        let found = self.set.remove(&entry);
        if found {
            self.order.retain(|e| e != &entry);
        }
        found
    }
}

/// A client's reply to a request of the server's: its result, or why
/// there is none.
pub fn answer_of(mut reply: Json) -> Result<Json, Unanswered> {
    if let Some(error) = reply.get("error") {
        let code = match error.get("code") {
            Some(Json::Int(code)) => *code,
            _ => 0,
        };
        let message = crate::server_text::quoted_value(error.get("message"), crate::server_text::TEXT_CHARS);
        return Err(Unanswered::Refused(code, message));
    }
    Ok(reply.take("result").unwrap_or(Json::Object(vec![])))
}
