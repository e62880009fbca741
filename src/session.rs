//! One MCP session over a long-lived transport: requests matched to their
//! replies by id, with a time limit each, several in flight at once.
//!
//! A request is started (sent and registered) and then waited for; while
//! one request is waited for, a reply to another that is still in flight
//! is kept for its own waiter, and a reply to one nobody waits for any more
//! (cancelled on its timeout) is dropped. A timeout or a cancellation
//! touches only its own request. The handshake and the Lua-facing fields
//! are the client's business (`client.rs`); this layer only moves messages.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use crate::codec::{self, Json};
use crate::error::{Error, Result};
use crate::interrupt;
use crate::protocol::{self, classify, id_key, IdKey, Kind};
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
    /// The transport failed for good; the client starts a new session.
    pub broken: bool,
    /// Requests started and not yet settled, by id.
    in_flight: HashMap<IdKey, InFlight>,
}

struct InFlight {
    /// `initialize` is never cancelled: abandoning it ends the session.
    initialize: bool,
    /// What arrived for it while another request was waited for.
    arrived: Option<Arrival>,
}

enum Arrival {
    Reply(Json),
    /// Its reply was nested too deep to read.
    TooDeep,
}

fn is_initialize(message: &Json) -> bool {
    message.get("method") == Some(&Json::str("initialize"))
}

impl Session {
    pub fn new(transport: Box<dyn Transport>) -> Self {
        Session { transport, broken: false, in_flight: HashMap::new() }
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

    /// Sends `message` (a request with id `id`) and waits for its reply:
    /// [`Session::start`], then [`Session::wait`].
    pub fn request(
        &mut self,
        id: &Json,
        message: &Json,
        timeout: Duration,
        what: &str,
        peer: &mut dyn Peer,
    ) -> Result<Json> {
        let outcome = self.start(id, message).and_then(|()| self.wait(id, timeout, what, peer));
        // Interrupted inside the transport (an HTTP POST waiting for its
        // body): the request still needs its cancellation and its name.
        let outcome = match outcome {
            Err(Error::Interrupted { what: inner }) if inner.is_empty() => {
                // (Not `give_up`: the send itself may have been cut short,
                // leaving no entry to say this was `initialize`.)
                self.forget(id);
                self.abandon(id, is_initialize(message), "interrupted by the user");
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

    /// Sends `message`, a request with id `id`, and registers it as in
    /// flight, so that its reply is kept whoever is waiting when it comes.
    pub(crate) fn start(&mut self, id: &Json, message: &Json) -> Result<()> {
        // A reply is matched by its id: one that cannot be a key could
        // never be matched (and a timeout could not tell it was initialize).
        let Some(key) = id_key(id) else {
            return Err(Error::BadInput(format!(
                "MCP: a request id must be a number or a string, got {}",
                protocol::lua_text(Some(id))
            )));
        };
        self.transport.send(message)?;
        self.in_flight.insert(key, InFlight { initialize: is_initialize(message), arrived: None });
        Ok(())
    }

    /// Waits for the reply to the request `id`, started earlier, for
    /// `timeout` at most. Notifications and forwarded server requests that
    /// arrive meanwhile go to `peer` as they come (a request's answer is
    /// sent at once). `what` names the request in errors.
    ///
    /// The wait runs in slices of [`interrupt::SLICE`], so that a host
    /// asking for its thread back (Ctrl-C) gets it within one slice: the
    /// request is then cancelled as on a timeout.
    pub(crate) fn wait(&mut self, id: &Json, timeout: Duration, what: &str, peer: &mut dyn Peer) -> Result<Json> {
        let outcome = self.wait_for_reply(id, timeout, what, peer);
        // However it failed (an oversized reply, a dead transport), the
        // request is settled: nothing may be kept for it any more.
        if outcome.is_err() {
            self.forget(id);
        }
        outcome
    }

    fn forget(&mut self, id: &Json) {
        if let Some(key) = id_key(id) {
            self.in_flight.remove(&key);
        }
    }

    fn wait_for_reply(&mut self, id: &Json, timeout: Duration, what: &str, peer: &mut dyn Peer) -> Result<Json> {
        let wanted = id_key(id);
        // Not started, or settled already: nothing will come for it.
        if !wanted.as_ref().is_some_and(|key| self.in_flight.contains_key(key)) {
            return Err(Error::NoResponse { what: what.to_string() });
        }
        let too_deep = || Error::ReplyTooDeep { what: what.to_string(), limit: codec::MAX_DEPTH };
        if let Some(key) = &wanted {
            match self.in_flight.get_mut(key).and_then(|entry| entry.arrived.take()) {
                Some(Arrival::Reply(reply)) => {
                    self.in_flight.remove(key);
                    return Ok(reply);
                }
                Some(Arrival::TooDeep) => {
                    self.in_flight.remove(key);
                    return Err(too_deep());
                }
                None => {}
            }
        }
        let deadline = Instant::now().checked_add(timeout).unwrap_or_else(far_future);
        // A too-deep message whose id could not be read: perhaps our reply.
        // Said in the timeout message, if it comes to that.
        let mut skipped_unreadable = false;
        loop {
            let slice_end = deadline.min(Instant::now() + interrupt::SLICE);
            let received = self.transport.receive(slice_end)?;
            // Checked before anything reaches Lua, and whatever arrives: a
            // server that chats every few milliseconds must not keep a
            // request past its time, nor hold off Ctrl-C (and a Lua
            // callback would run the host's one-shot hook and lose it).
            if interrupt::requested() {
                self.give_up(id, "interrupted by the user");
                return Err(Error::Interrupted { what: what.to_string() });
            }
            let mut reply = None;
            match received {
                Some(Received::Message(msg)) => match classify(&msg) {
                    Kind::Response(key) if Some(&key) == wanted.as_ref() => reply = Some(msg),
                    // Another request in flight: kept for its waiter. One
                    // nobody waits for any more: dropped.
                    Kind::Response(key) => {
                        if let Some(entry) = self.in_flight.get_mut(&key) {
                            entry.arrived = Some(Arrival::Reply(msg));
                        }
                    }
                    Kind::Notification => peer.notification(msg),
                    Kind::ServerRequest => {
                        let answer = peer.request(&msg);
                        self.transport.send(&answer)?;
                    }
                    Kind::Other => {}
                },
                Some(Received::TooDeep(Some(key))) if Some(&key) == wanted.as_ref() => {
                    self.in_flight.remove(&key);
                    return Err(too_deep());
                }
                Some(Received::TooDeep(Some(key))) => {
                    if let Some(entry) = self.in_flight.get_mut(&key) {
                        entry.arrived = Some(Arrival::TooDeep);
                    }
                }
                Some(Received::TooDeep(None)) => skipped_unreadable = true,
                None => {}
            }
            let dropped = self.transport.take_dropped();
            if dropped > 0 {
                peer.notification(protocol::dropped_notice(dropped));
            }
            if let Some(reply) = reply {
                if let Some(key) = &wanted {
                    self.in_flight.remove(key);
                }
                return Ok(reply);
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
                self.give_up(id, &format!("timed out after {} s", seconds_text(timeout)));
                return Err(Error::Timeout { what: what.to_string(), seconds: seconds_text(timeout), note });
            }
        }
    }

    /// Stops waiting for the request `id`: it leaves the table, so a late
    /// reply is dropped, and the server is told (see [`Session::abandon`]).
    fn give_up(&mut self, id: &Json, reason: &str) {
        let entry = id_key(id).and_then(|key| self.in_flight.remove(&key));
        let initialize = entry.is_some_and(|e| e.initialize);
        self.abandon(id, initialize, reason);
    }

    /// The spec forbids cancelling `initialize`, so a session whose
    /// handshake we abandon is over; for anything else, tell the server to
    /// stop working on it. A failure to send changes nothing: the caller
    /// gets its error either way.
    fn abandon(&mut self, id: &Json, initialize: bool, reason: &str) {
        if initialize {
            self.broken = true;
            return;
        }
        // Shielded: after Ctrl-C the host's hook is still set, and the
        // cancellation must not be interrupted in its turn.
        let _ = interrupt::shielded(|| self.transport.send(&protocol::cancelled(id, reason)));
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::{decode, encode};
    use std::collections::VecDeque;

    /// A transport whose server has already written `replies`.
    struct Canned {
        replies: VecDeque<Json>,
        sent: std::rc::Rc<std::cell::RefCell<Vec<String>>>,
    }

    impl Transport for Canned {
        fn send(&mut self, message: &Json) -> Result<()> {
            self.sent.borrow_mut().push(String::from_utf8(encode(message)).unwrap());
            Ok(())
        }
        fn receive(&mut self, _deadline: Instant) -> Result<Option<Received>> {
            Ok(self.replies.pop_front().map(Received::Message))
        }
        fn close(&mut self) {}
    }

    struct Quiet;
    impl Peer for Quiet {
        fn notification(&mut self, _msg: Json) {}
        fn request(&mut self, msg: &Json) -> Json {
            protocol::answer_server_request(msg).unwrap_or(Json::Null)
        }
    }

    fn session(replies: &[&str]) -> (Session, std::rc::Rc<std::cell::RefCell<Vec<String>>>) {
        let sent = std::rc::Rc::new(std::cell::RefCell::new(Vec::new()));
        let replies = replies.iter().map(|r| decode(r.as_bytes()).unwrap()).collect();
        (Session::new(Box::new(Canned { replies, sent: sent.clone() })), sent)
    }

    fn call(id: i64) -> Json {
        protocol::request(Json::Int(id), "tools/call", Json::Object(vec![]))
    }

    const SHORT: Duration = Duration::from_millis(20);

    #[test]
    fn two_in_flight_each_get_their_own_reply_whatever_the_order() {
        let (mut s, _) = session(&[r#"{"id":2,"result":{"n":2}}"#, r#"{"id":1,"result":{"n":1}}"#]);
        s.start(&Json::Int(1), &call(1)).unwrap();
        s.start(&Json::Int(2), &call(2)).unwrap();
        let first = s.wait(&Json::Int(1), SHORT, "one", &mut Quiet).unwrap();
        assert_eq!(first.get("result").and_then(|r| r.get("n")), Some(&Json::Int(1)));
        // kept while the first was waited for: no further receive needed
        let second = s.wait(&Json::Int(2), SHORT, "two", &mut Quiet).unwrap();
        assert_eq!(second.get("result").and_then(|r| r.get("n")), Some(&Json::Int(2)));
        assert!(s.in_flight.is_empty());
    }

    #[test]
    fn a_timeout_cancels_only_its_own_request_and_its_late_reply_is_dropped() {
        let (mut s, sent) = session(&[r#"{"id":2,"result":{"n":2}}"#]);
        s.start(&Json::Int(1), &call(1)).unwrap();
        s.start(&Json::Int(2), &call(2)).unwrap();
        let err = s.wait(&Json::Int(1), SHORT, "tools/call one", &mut Quiet).unwrap_err();
        assert_eq!(err.to_string(), "MCP tools/call one timed out after 0.02 s");
        assert!(sent.borrow().last().unwrap().contains(r#""requestId":1"#));
        // the other request's reply arrived during that wait, and is kept
        assert!(s.wait(&Json::Int(2), SHORT, "two", &mut Quiet).is_ok());
        assert!(!s.broken);
        assert!(s.in_flight.is_empty());
    }
}
