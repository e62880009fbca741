//! What our threads (the process's poll thread, Windows' pump threads,
//! HTTP's posting and stream threads) and a Lua call reading a pipe for
//! itself hand to the Lua thread, bounded; each hand-off rings the
//! client's doorbell (`doorbell`).
//!
//! A server may write faster than Lua reads: 200 MB of log notifications
//! while the agent thinks for a minute grew the host by over 100 MB when
//! this was an unbounded channel. So the buffer has two caps, and two
//! policies:
//!
//! * Notifications are dropped, oldest first, past [`MAX_NOTIFICATIONS`]
//!   or [`MAX_BUFFERED_BYTES`]; the number dropped is handed to Lua with
//!   the next message (see `protocol::dropped_notice`). A reader never waits
//!   for Lua on their account, so pings keep being answered.
//! * Everything else (replies, server requests for Lua's handlers) is never
//!   dropped: past the byte cap the reader stops reading, and the server's
//!   own writes block. That is backpressure on the pipe or socket rather
//!   than growth here. An HTTP reply stream's thread waits for room; the
//!   process's poll thread, which serves every client, never waits: it
//!   leaves a [`full`] inbox's pipe or stream alone until Lua takes from it.
//!
//! [`full`]: Inbox::full

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Instant;

use crate::codec::{self, Json};
use crate::error::Error;
use crate::protocol::{answer_server_request, classify, id_key, is_forwarded, too_deep_request_answer, IdKey, Kind};
use crate::transport::doorbell::Doorbell;

/// Notifications kept for Lua at most; older ones are dropped first.
pub const MAX_NOTIFICATIONS: usize = 1000;
/// Bytes of message text kept for Lua at most (as read from the wire).
pub const MAX_BUFFERED_BYTES: usize = 16 << 20;

/// The backoff in `pop`: doubling spins, then yields, then sleep.
const SPIN_STEPS: u32 = 6;
const BACKOFF_STEPS: u32 = 10;

pub enum Event {
    Message(Json),
    /// A message nested deeper than the decoder follows, skipped; the id
    /// it carried, when one could be read.
    TooDeep(Option<IdKey>),
    /// A message past `max_message_bytes`. Over HTTP, the id of the request
    /// whose stream carried it; over stdio None (it fails what waits).
    TooLarge(Option<IdKey>),
    /// An async HTTP request failed before any reply (a refused POST, a
    /// forgotten session): settles the request with this id.
    Failed(IdKey, Error),
    /// A notification sent from a thread was delivered (see
    /// `Transport::send_notice`): settles the wait with this key.
    Delivered(IdKey),
    /// stdio: the server closed stdout or exited.
    Ended,
}

/// What a reader does with one message from the server (see [`sort`]).
#[derive(Debug, PartialEq)]
pub enum Sorted {
    /// For the session, with its kind: a reply, a notification, a server
    /// request that one of Lua's handlers answers, or whatever else
    /// decoded (the session skips what it cannot use).
    Deliver(Json, Kind),
    /// A server request the reader answers itself, at once, with this, so
    /// that a server's `ping` never waits on Lua.
    Answer(Json),
    /// A reply or notification nested too deep to read: the id it carried,
    /// when one could be read, so that whoever waits for it fails at once.
    TooDeep(Option<IdKey>),
    /// A server request nested too deep to read, refused with this, so
    /// that the server does not wait either.
    Refuse(Json),
    /// A server request nested too deep to read that carries no id: there
    /// is nobody to tell.
    Skip,
    /// Not JSON.
    NotJson,
}

/// Sorts one message from the server, as it came on the wire, the same way
/// for every transport. `lua_handled` lists the server requests that Lua's
/// handlers answer (`opts.handlers`); the reader answers every other one.
pub fn sort(text: &[u8], lua_handled: &[String]) -> Sorted {
    let msg = match codec::decode_reply(text) {
        Ok(msg) => msg,
        Err(e) if e.is_too_deep() => {
            // Too deep to read. A reply: say so to whoever waits for its
            // id, rather than let them time out. A server request: refuse
            // it, so the server does not wait either.
            let envelope = codec::peek_envelope(text);
            return match (envelope.has_method, envelope.id) {
                (false, id) => Sorted::TooDeep(id.as_ref().and_then(id_key)),
                (true, Some(id)) => Sorted::Refuse(too_deep_request_answer(id)),
                (true, None) => Sorted::Skip,
            };
        }
        Err(_) => return Sorted::NotJson,
    };
    let kind = classify(&msg);
    if kind == Kind::ServerRequest && !is_forwarded(&msg, lua_handled) {
        return match answer_server_request(&msg) {
            Some(answer) => Sorted::Answer(answer),
            None => Sorted::Skip,
        };
    }
    Sorted::Deliver(msg, kind)
}

struct Queue {
    events: VecDeque<(Event, usize, bool)>,
    bytes: usize,
    notifications: usize,
    dropped: u64,
    closed: bool,
    /// Threads waiting on each condition: a notify with nobody waiting is
    /// still a system call, and pop and push run once per message.
    poppers: usize,
    pushers: usize,
}

impl Queue {
    fn take_front(&mut self) -> Option<Event> {
        let (event, size, notification) = self.events.pop_front()?;
        self.bytes -= size;
        self.notifications -= usize::from(notification);
        Some(event)
    }
}

pub struct Inbox {
    queue: Mutex<Queue>,
    arrived: Condvar,
    room: Condvar,
    /// Rung after each push, for an event loop watching `client:fd()`.
    doorbell: Option<Arc<Doorbell>>,
    /// Past the byte cap a push waits for room (see the module's header).
    waits_for_room: bool,
}

impl Default for Inbox {
    fn default() -> Self {
        Inbox::new(None)
    }
}

impl Inbox {
    pub fn new(doorbell: Option<Arc<Doorbell>>) -> Self {
        let queue = Queue {
            events: VecDeque::new(),
            bytes: 0,
            notifications: 0,
            dropped: 0,
            closed: false,
            poppers: 0,
            pushers: 0,
        };
        Inbox {
            queue: Mutex::new(queue),
            arrived: Condvar::new(),
            room: Condvar::new(),
            doorbell,
            waits_for_room: true,
        }
    }

    /// For a reader that must never wait: pushes past the byte cap are
    /// queued anyway, and the reader stops reading while [`Self::full`].
    pub fn never_waiting_for_room(mut self) -> Self {
        self.waits_for_room = false;
        self
    }

    /// Past the byte cap with something that is never dropped.
    pub fn full(&self) -> bool {
        let q = self.lock();
        q.bytes >= MAX_BUFFERED_BYTES && q.events.len() > q.notifications
    }

    fn lock(&self) -> MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Queues `event`, which took `bytes` on the wire, by the policies above.
    pub fn push(&self, event: Event, bytes: usize) {
        self.push_waiting(event, bytes, self.waits_for_room);
    }

    /// Queues `event` without ever waiting for room, for the poll thread
    /// (which serves every other client meanwhile): past the byte cap it
    /// is queued anyway, and the thread leaves this inbox's source alone
    /// while [`Self::full`].
    pub fn push_now(&self, event: Event, bytes: usize) {
        self.push_waiting(event, bytes, false);
    }

    fn push_waiting(&self, event: Event, bytes: usize, waits_for_room: bool) {
        let notification = matches!(&event, Event::Message(m) if classify(m) == Kind::Notification);
        let mut q = self.lock();
        // Notifications make room first, oldest first, for anything.
        let too_many = |q: &Queue| notification && q.notifications >= MAX_NOTIFICATIONS;
        while (too_many(&q) || q.bytes + bytes > MAX_BUFFERED_BYTES) && q.notifications > 0 {
            let Some(at) = q.events.iter().position(|e| e.2) else { break };
            if let Some((_, size, _)) = q.events.remove(at) {
                q.bytes -= size;
                q.notifications -= 1;
                q.dropped += 1;
            }
        }
        if notification {
            if q.bytes + bytes > MAX_BUFFERED_BYTES && !q.events.is_empty() {
                q.dropped += 1;
                return;
            }
        } else {
            // A Lua call reading for itself (see `stdio::unix::reader::ReadSide`)
            // never waits: it is the only one who would make room. It reads
            // one chunk at a time and takes what it queued, so the excess is
            // bounded by a chunk.
            let may_wait = waits_for_room && !crate::interrupt::watched();
            while may_wait && q.bytes + bytes > MAX_BUFFERED_BYTES && !q.events.is_empty() && !q.closed {
                q.pushers += 1;
                q = self.room.wait(q).unwrap_or_else(|p| p.into_inner());
                q.pushers -= 1;
            }
        }
        if q.closed {
            return;
        }
        q.events.push_back((event, bytes, notification));
        q.bytes += bytes;
        q.notifications += usize::from(notification);
        let waiting = q.poppers > 0;
        // Woken after the lock is released, so that the woken thread does
        // not find it still held and sleep again at once.
        drop(q);
        if waiting {
            self.arrived.notify_one();
        }
        if let Some(bell) = &self.doorbell {
            bell.ring();
        }
    }

    /// The next event if one is queued; never waits.
    pub fn try_pop(&self) -> Option<Event> {
        let mut q = self.lock();
        let event = q.take_front()?;
        let full = q.pushers > 0;
        drop(q);
        if full {
            self.room.notify_all();
        }
        Some(event)
    }

    /// The next event, waiting until `deadline` at most.
    ///
    /// A reply often arrives within microseconds of the request, and going
    /// to sleep on the condition variable costs a wake-up as long as the
    /// whole round trip on a small VM. So the wait starts with a short
    /// backoff (a few spins, then yielding the CPU, which also lets a
    /// reader on the same CPU run) before it sleeps; it is bounded, so a
    /// slow server costs no CPU.
    pub fn pop(&self, deadline: Instant) -> Option<Event> {
        let mut q = self.lock();
        let mut backoff = 0u32;
        loop {
            if let Some(event) = q.take_front() {
                let full = q.pushers > 0;
                drop(q);
                if full {
                    self.room.notify_all();
                }
                return Some(event);
            }
            let wait = deadline.saturating_duration_since(Instant::now());
            if wait.is_zero() || q.closed {
                return None;
            }
            if backoff < BACKOFF_STEPS {
                drop(q);
                if backoff < SPIN_STEPS {
                    for _ in 0..(1 << backoff) {
                        std::hint::spin_loop();
                    }
                } else {
                    std::thread::yield_now();
                }
                backoff += 1;
                q = self.lock();
                continue;
            }
            q.poppers += 1;
            q = self.arrived.wait_timeout(q, wait).unwrap_or_else(|p| p.into_inner()).0;
            q.poppers -= 1;
        }
    }

    pub fn is_empty(&self) -> bool {
        self.lock().events.is_empty()
    }

    /// How many notifications were dropped since the last call.
    pub fn take_dropped(&self) -> u64 {
        std::mem::take(&mut self.lock().dropped)
    }

    /// Frees what is buffered and releases any reader waiting for room;
    /// later pushes are ignored.
    pub fn close(&self) {
        let mut q = self.lock();
        q.closed = true;
        q.events.clear();
        q.bytes = 0;
        q.notifications = 0;
        self.room.notify_all();
        self.arrived.notify_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::decode;
    use std::time::Duration;

    fn soon() -> Instant {
        Instant::now() + Duration::from_millis(10)
    }

    #[test]
    fn notifications_past_the_cap_drop_oldest_first_and_replies_stay() {
        let inbox = Inbox::default();
        inbox.push(Event::Message(decode(br#"{"id":1,"result":{}}"#).unwrap()), 10);
        for i in 0..MAX_NOTIFICATIONS + 5 {
            let note = format!(r#"{{"method":"notifications/message","params":{{"n":{i}}}}}"#);
            inbox.push(Event::Message(decode(note.as_bytes()).unwrap()), 10);
        }
        assert_eq!(inbox.take_dropped(), 5);
        assert!(matches!(inbox.pop(soon()), Some(Event::Message(m)) if m.get("id").is_some()));
        let Some(Event::Message(first)) = inbox.pop(soon()) else { panic!("no notification kept") };
        assert_eq!(first.get("params").and_then(|p| p.get("n")), Some(&Json::Int(5)));
    }

    #[test]
    fn a_reply_evicts_notifications_rather_than_wait_behind_them() {
        let inbox = Inbox::default();
        let note = decode(br#"{"method":"notifications/message"}"#).unwrap();
        inbox.push(Event::Message(note), MAX_BUFFERED_BYTES);
        inbox.push(Event::Message(decode(br#"{"id":1,"result":{}}"#).unwrap()), 10);
        assert_eq!(inbox.take_dropped(), 1);
        assert!(matches!(inbox.pop(soon()), Some(Event::Message(m)) if m.get("id").is_some()));
    }

    #[test]
    fn a_closed_inbox_releases_a_reader_waiting_for_room() {
        let inbox = std::sync::Arc::new(Inbox::default());
        inbox.push(Event::Message(decode(br#"{"id":1,"result":{}}"#).unwrap()), MAX_BUFFERED_BYTES);
        let reader = inbox.clone();
        let blocked =
            std::thread::spawn(move || reader.push(Event::Message(decode(br#"{"id":2,"result":{}}"#).unwrap()), 10));
        std::thread::sleep(Duration::from_millis(50));
        assert!(!blocked.is_finished(), "a reply past the byte cap must wait for room");
        inbox.close();
        blocked.join().unwrap();
        assert!(inbox.pop(soon()).is_none());
    }

    /// `envelope` followed by a value nested past the decoder's limit.
    fn nested(envelope: &str) -> Vec<u8> {
        let depth = codec::MAX_DEPTH + 1;
        format!("{envelope}{}{}}}", "[".repeat(depth), "]".repeat(depth)).into_bytes()
    }

    #[test]
    fn a_ping_is_answered_at_once_unless_lua_handles_it() {
        let ping = br#"{"jsonrpc":"2.0","id":7,"method":"ping"}"#;
        let Sorted::Answer(answer) = sort(ping, &[]) else { panic!("a ping must be answered by the reader") };
        assert_eq!(answer.get("id"), Some(&Json::Int(7)));
        assert!(answer.get("result").is_some());
        assert!(matches!(sort(ping, &["ping".to_string()]), Sorted::Deliver(_, Kind::ServerRequest)));
    }

    #[test]
    fn a_server_request_without_a_handler_is_refused_as_unknown() {
        let Sorted::Answer(answer) = sort(br#"{"id":"a","method":"sampling/createMessage"}"#, &[]) else {
            panic!("an unhandled server request must be answered by the reader")
        };
        assert_eq!(answer.get("error").and_then(|e| e.get("code")), Some(&Json::Int(-32601)));
    }

    #[test]
    fn replies_and_notifications_are_delivered_with_their_kind() {
        assert!(matches!(sort(br#"{"id":1,"result":{}}"#, &[]), Sorted::Deliver(_, Kind::Response(IdKey::Int(1)))));
        assert!(matches!(sort(br#"{"method":"notifications/message"}"#, &[]), Sorted::Deliver(_, Kind::Notification)));
    }

    #[test]
    fn a_reply_too_deep_to_read_keeps_its_id_and_such_a_request_is_refused() {
        assert_eq!(sort(&nested(r#"{"id":4,"result":"#), &[]), Sorted::TooDeep(Some(IdKey::Int(4))));
        let Sorted::Refuse(refusal) = sort(&nested(r#"{"id":5,"method":"sampling/createMessage","params":"#), &[])
        else {
            panic!("a too deep server request must be refused")
        };
        assert_eq!(refusal.get("id"), Some(&Json::Int(5)));
        assert_eq!(refusal.get("error").and_then(|e| e.get("code")), Some(&Json::Int(-32600)));
        assert_eq!(sort(&nested(r#"{"method":"notifications/message","params":"#), &[]), Sorted::Skip);
    }

    #[test]
    fn text_that_is_not_json_is_told_apart() {
        assert_eq!(sort(b"Server listening on stdio", &[]), Sorted::NotJson);
    }
}
