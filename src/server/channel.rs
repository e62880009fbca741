//! The conversation with one client over a line transport: messages in
//! order, the server's own requests to the client (elicitation, sampling,
//! roots) and their replies, and cancellations noticed while a handler
//! still runs.
//!
//! A handler that asks the client something waits for the reply here,
//! and whatever else the client sends meanwhile (a ping, another call, a
//! cancellation) is kept, in order, for after it: handlers run one at a
//! time on the Lua thread, so nothing is answered out of turn. A
//! cancellation is also noted at once, so that the handler it concerns
//! sees it when it asks (`ctx:cancelled()`).

use std::collections::{HashSet, VecDeque};
use std::io;
use std::time::{Duration, Instant};

use super::stdio::{Read, Stdio};
use crate::codec::{decode_message, encode, Json};
use crate::interrupt;
use crate::protocol::{self, id_key, IdKey};

/// What came from the client.
pub enum Incoming {
    Message(Json),
    /// Nothing before the deadline (or Ctrl-C: the caller asks).
    Nothing,
    /// The client is gone.
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
    stdio: Stdio,
    kept: VecDeque<Json>,
    cancelled: HashSet<IdKey>,
    next_id: u64,
    /// How long the server waits for the client to answer its request.
    pub request_timeout: Duration,
}

impl Channel {
    pub fn new(stdio: Stdio, request_timeout: Duration) -> Channel {
        Channel { stdio, kept: VecDeque::new(), cancelled: HashSet::new(), next_id: 0, request_timeout }
    }

    /// The next message, waiting until `until` at most. A line that is not
    /// JSON, or past the size bound, is answered here with the protocol's
    /// error and skipped.
    pub fn next(&mut self, until: Instant) -> io::Result<Incoming> {
        if let Some(kept) = self.kept.pop_front() {
            return Ok(Incoming::Message(kept));
        }
        loop {
            match self.stdio.read(until, interrupt::SLICE, &interrupt::requested)? {
                Read::Line(line) => match decode_message(&line) {
                    Ok(message) => {
                        self.note_cancellation(&message);
                        return Ok(Incoming::Message(message));
                    }
                    Err(e) => self.send(&protocol::error_response(Json::Null, -32700, &format!("Parse error: {e}")))?,
                },
                Read::TooLarge => self.send(&protocol::error_response(
                    Json::Null,
                    -32600,
                    "Invalid Request: the message is too large",
                ))?,
                Read::Nothing => return Ok(Incoming::Nothing),
                Read::Ended => return Ok(Incoming::Ended),
            }
        }
    }

    pub fn send(&mut self, message: &Json) -> io::Result<()> {
        self.stdio.write(&encode(message))
    }

    fn note_cancellation(&mut self, message: &Json) {
        if message.get("method") == Some(&Json::str("notifications/cancelled")) {
            if let Some(key) = message.get("params").and_then(|p| p.get("requestId")).and_then(id_key) {
                self.cancelled.insert(key);
            }
        }
    }

    /// Whether the client cancelled request `id`: what it sent meanwhile
    /// is read (without waiting) and kept for later.
    pub fn cancelled(&mut self, id: &Json) -> io::Result<bool> {
        while let Incoming::Message(message) = self.next_unkept(Instant::now())? {
            self.kept.push_back(message);
        }
        Ok(id_key(id).is_some_and(|key| self.cancelled.contains(&key)))
    }

    /// Whether the client cancelled request `id`, forgetting it: a
    /// cancelled request gets no reply (the client has stopped waiting).
    pub fn take_cancelled(&mut self, id: &Json) -> bool {
        id_key(id).is_some_and(|key| self.cancelled.remove(&key))
    }

    fn next_unkept(&mut self, until: Instant) -> io::Result<Incoming> {
        let kept = std::mem::take(&mut self.kept);
        let next = self.next(until);
        self.kept = kept;
        next
    }

    /// Asks the client `method` and waits for its answer, keeping what
    /// else comes meanwhile.
    pub fn request(&mut self, method: &str, params: Json) -> Result<Json, Unanswered> {
        self.next_id += 1;
        let id = Json::str(format!("server-{}", self.next_id));
        self.send(&protocol::request(id.clone(), method, params)).map_err(Unanswered::Io)?;
        let until = Instant::now() + self.request_timeout;
        loop {
            if interrupt::requested() {
                return Err(Unanswered::Interrupted);
            }
            match self.next_unkept(until).map_err(Unanswered::Io)? {
                Incoming::Ended => return Err(Unanswered::Ended),
                Incoming::Nothing if Instant::now() >= until => return Err(Unanswered::TimedOut(self.request_timeout)),
                Incoming::Nothing => {}
                Incoming::Message(message) if message.get("method").is_none() && message.get("id") == Some(&id) => {
                    return answer_of(message);
                }
                Incoming::Message(message) => self.kept.push_back(message),
            }
        }
    }
}

fn answer_of(mut reply: Json) -> Result<Json, Unanswered> {
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
