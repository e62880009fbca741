//! One MCP session over a long-lived transport: requests matched to their
//! replies by id, with a time limit each, several in flight at once.
//!
//! A request is started (sent and registered) and then waited for; while
//! one request is waited for, a reply to another that is still in flight
//! is kept for its own waiter, and a reply to one nobody waits for any more
//! (cancelled on its timeout) is dropped. A timeout or a cancellation
//! touches only its own request. The handshake and the Lua-facing fields
//! are the client's business (`client`, the handshake's steps in
//! `client::connect`); this layer only moves messages.

use std::rc::Rc;
use std::time::{Duration, Instant};

use crate::codec::{self, Json};
use crate::error::{Error, Result};
use crate::interrupt::{self, far_future};
use crate::protocol::{self, classify, id_key, Envelope, IdKey, IdMap, Kind};
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
    /// It broke because the server forgot it (HTTP 404).
    pub forgotten: bool,
    /// Requests started and not yet taken, by id.
    in_flight: IdMap<InFlight>,
    /// Messages skipped as too deep, with no id that could be read: a
    /// request that times out says so if this grew meanwhile.
    unreadable: u64,
    /// Requests started so far: orders the entries.
    started: u64,
    /// Received while a wait was being interrupted: routed first next time,
    /// so that nothing is lost to a Ctrl-C.
    held: Option<Received>,
    /// The server speaks a modern revision: the notifications the session
    /// sends carry this envelope too (the client stamps its requests).
    modern: Option<Envelope>,
    /// A request given up on whose reply is still wanted should it come
    /// (the era probe), and that reply.
    late: Option<IdKey>,
    late_reply: Option<Json>,
}

struct InFlight {
    /// As sent: a cancellation names it the same way.
    id: Json,
    /// Its place in the order requests were started.
    order: u64,
    /// What giving up on it means for the server.
    abandon: Abandon,
    /// What settled it, kept until its waiter takes it.
    arrived: Option<Arrival>,
    limit: Limit,
    /// [`Session::unreadable`] when it started.
    unreadable_before: u64,
    /// When it settled, on a count all sessions share: callbacks run in
    /// the order their requests settled.
    settled_as: u64,
}

/// Requests settled so far, in every session of the process.
static SETTLED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

/// The next place in the order requests settle: taken by every request
/// that settles, in a session or in the queue before one.
pub(crate) fn next_settled() -> u64 {
    SETTLED.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

/// How many requests have settled so far, in the whole process: a holder
/// that saw the same count before has nothing new to look for.
pub(crate) fn settled_count() -> u64 {
    SETTLED.load(std::sync::atomic::Ordering::Relaxed)
}

impl InFlight {
    fn arrive(&mut self, arrival: Arrival) {
        self.arrived = Some(arrival);
        self.settled_as = next_settled();
    }
}

/// When a request runs out, how its errors name it, and how it is sent.
pub struct Limit {
    pub timeout: Duration,
    pub deadline: Instant,
    /// No progress moves the deadline past this (`max_total`, from the
    /// start).
    pub hard_deadline: Option<Instant>,
    pub max_total: Option<Duration>,
    /// Progress notifications for it restart its timeout.
    pub progress: bool,
    /// Its progress token, where that is not its id: a request sent again
    /// (on a new session, after a login) keeps the token it was first
    /// given, so that its caller's progress callback still hears of it.
    pub progress_token: Option<IdKey>,
    pub what: Rc<str>,
    /// Nobody waits on the transport for it (the async API): over HTTP
    /// its POST goes out from a thread of the transport's own.
    pub detached: bool,
    /// Nothing is sent to stop it: the era probe goes to servers that may
    /// know neither it nor cancellations, and a strict one could take the
    /// notice for a reason to exit.
    pub quiet: bool,
    /// Headers of its own, for transports that have headers (a modern
    /// HTTP request's `Mcp-Param-*`).
    pub headers: Vec<(String, String)>,
}

/// What giving up on a request tells the server.
#[derive(Clone, Copy, PartialEq)]
enum Abandon {
    /// `notifications/cancelled`, as the spec asks.
    Cancel,
    /// Nothing, and the session is over: the spec forbids cancelling
    /// `initialize`.
    EndSession,
    /// Nothing (see [`Limit::quiet`]).
    Nothing,
}

impl Limit {
    /// `timeout` from now, never past `max_total` from now.
    pub fn new(timeout: Duration, max_total: Option<Duration>, what: Rc<str>) -> Limit {
        let now = Instant::now();
        let deadline = now.checked_add(timeout).unwrap_or_else(far_future);
        let hard_deadline = max_total.map(|m| now.checked_add(m).unwrap_or_else(far_future));
        Limit {
            timeout,
            deadline: hard_deadline.map_or(deadline, |h| deadline.min(h)),
            hard_deadline,
            max_total,
            progress: false,
            progress_token: None,
            what,
            detached: false,
            quiet: false,
            headers: Vec::new(),
        }
    }

    /// What a transport waits at most for this request: its timeout, or,
    /// when progress may extend it, its hard cap (the session enforces
    /// the real one).
    fn transport_wait(&self) -> Duration {
        match (self.progress, self.max_total) {
            (false, _) => self.timeout,
            (true, Some(max_total)) => max_total,
            (true, None) => LONGEST_TRANSPORT_WAIT,
        }
    }
}

enum Arrival {
    Reply(Json),
    /// Its reply was nested too deep to read.
    TooDeep,
    Failed(Error),
}

fn is_initialize(message: &Json) -> bool {
    // Asked of every message sent: compared in place, not against a
    // `Json` made for the purpose (an allocation per call).
    matches!(message.get("method"), Some(Json::Str(method)) if method == b"initialize")
}

impl Session {
    pub fn new(transport: Box<dyn Transport>) -> Self {
        Session {
            transport,
            broken: false,
            forgotten: false,
            in_flight: IdMap::default(),
            unreadable: 0,
            started: 0,
            held: None,
            modern: None,
            late: None,
            late_reply: None,
        }
    }

    /// From now on the session's notifications carry `envelope`, and the
    /// transport speaks the modern way.
    pub fn speak_modern(&mut self, envelope: Envelope) {
        self.modern = Some(envelope);
        self.transport.speak_modern();
    }

    /// A reply to `id`, a request already given up on, is kept should it
    /// come after all (see [`Session::take_late_reply`]).
    pub fn keep_late_reply(&mut self, id: &Json) {
        self.late = id_key(id);
    }

    pub fn take_late_reply(&mut self) -> Option<Json> {
        self.late_reply.take()
    }

    pub fn always_answers(&self) -> bool {
        self.transport.always_answers()
    }

    pub fn carries_headers(&self) -> bool {
        self.transport.carries_headers()
    }

    pub fn notify(&mut self, message: &Json) -> Result<()> {
        let message = self.stamped(message);
        let sent = self.transport.send(&message);
        self.broken |= sent.is_err();
        // Interrupted inside the transport: name what was being sent.
        sent.map_err(|e| match e {
            Error::Interrupted { what } if what.is_empty() => {
                Error::Interrupted { what: protocol::lua_text(message.get("method")) }
            }
            other => other,
        })
    }

    /// Sends a notification and registers its delivery under `key` as a
    /// request in flight, settled (with null) once the transport has
    /// delivered it: a handshake that must not hold Lua waits for it as
    /// for a reply (see [`Transport::send_notice`]).
    pub(crate) fn start_notice(&mut self, key: &str, notice: &Json, mut limit: Limit) {
        let timeout = limit.timeout;
        // The transport's own time limit says better what ran out: the
        // entry's comes after it, and after the server's stream had its
        // chance to open.
        limit.deadline += NOTICE_GRACE;
        let id = IdKey::Str(key.as_bytes().to_vec());
        self.register(&Json::str(key), id.clone(), Abandon::Nothing, limit);
        let notice = self.stamped(notice);
        match self.transport.send_notice(&notice, &id, timeout) {
            Ok(false) => {}
            Ok(true) => self.settle(&id, Arrival::Reply(Json::Null)),
            Err(e) => {
                self.broken |= matches!(e, Error::Transport { .. });
                self.settle(&id, Arrival::Failed(e));
            }
        }
    }

    /// Enters a request in the table of those in flight, in the order
    /// requests were started.
    fn register(&mut self, id: &Json, key: IdKey, abandon: Abandon, limit: Limit) {
        self.started += 1;
        let entry = InFlight {
            id: id.clone(),
            order: self.started,
            abandon,
            arrived: None,
            limit,
            unreadable_before: self.unreadable,
            settled_as: 0,
        };
        self.in_flight.insert(key, entry);
    }

    /// `message` with the modern envelope, when the server speaks so.
    fn stamped<'a>(&self, message: &'a Json) -> std::borrow::Cow<'a, Json> {
        match &self.modern {
            Some(envelope) => {
                let mut copy = message.clone();
                envelope.stamp(&mut copy);
                std::borrow::Cow::Owned(copy)
            }
            None => std::borrow::Cow::Borrowed(message),
        }
    }

    /// Settles request `key`, unless nobody waits for it any more
    /// (cancelled, timed out): then what came is dropped.
    fn settle(&mut self, key: &IdKey, arrival: Arrival) {
        if let Some(entry) = self.in_flight.get_mut(key).filter(|e| e.arrived.is_none()) {
            entry.arrive(arrival);
        }
    }

    /// Sends `message` (a request with id `id`) and waits for its reply,
    /// `timeout` at most: the handshake's wait, before any request of the
    /// caller's can be in flight. Ctrl-C ends it within one
    /// [`interrupt::SLICE`], as a timeout does.
    pub fn request(&mut self, id: &Json, message: &Json, limit: Limit, peer: &mut dyn Peer) -> Result<Json> {
        let what = limit.what.clone();
        let what = &*what;
        let deadline = limit.deadline;
        self.start(id, message, limit)?;
        let Some(key) = id_key(id) else { return Err(Error::NoResponse { what: what.to_string() }) };
        loop {
            if let Some(outcome) = self.take(&key) {
                return outcome;
            }
            let slice_end = deadline.min(Instant::now() + interrupt::SLICE);
            match self.pump_checked(slice_end, peer) {
                Ok(_) => {}
                Err(Stop::Interrupted) => {
                    self.give_up(id, "interrupted by the user");
                    return Err(Error::Interrupted { what: what.to_string() });
                }
                Err(Stop::Failed(e)) => return self.take(&key).unwrap_or(Err(e)),
            }
        }
    }

    /// Sends `message`, a request with id `id`, and registers it as in
    /// flight, so that its reply is kept whoever is waiting when it comes,
    /// and it is settled by its timeout whoever is waiting then.
    pub(crate) fn start(&mut self, id: &Json, message: &Json, mut limit: Limit) -> Result<()> {
        // A reply is matched by its id: one that cannot be a key could
        // never be matched (and a timeout could not tell it was initialize).
        let Some(key) = id_key(id) else {
            return Err(Error::BadInput(format!(
                "MCP: a request id must be a number or a string, got {}",
                protocol::lua_text(Some(id))
            )));
        };
        // Registered before it is sent: a detached HTTP POST may report
        // its failure before `send_detached` returns.
        let detached = limit.detached.then(|| limit.transport_wait());
        let abandon = match (is_initialize(message), limit.quiet) {
            (true, _) => Abandon::EndSession,
            (false, true) => Abandon::Nothing,
            (false, false) => Abandon::Cancel,
        };
        let headers = std::mem::take(&mut limit.headers);
        self.register(id, key.clone(), abandon, limit);
        let sent = self.transport.send_request(message, &headers, detached);
        let Err(e) = sent else { return Ok(()) };
        let entry = self.in_flight.remove(&key);
        Err(match e {
            // Interrupted inside the transport (an HTTP POST waiting for
            // its body): the request still needs its cancellation and its
            // name.
            Error::Interrupted { what } if what.is_empty() => {
                self.abandon(id, abandon, "interrupted by the user");
                Error::Interrupted { what: entry.map(|e| e.limit.what.to_string()).unwrap_or_default() }
            }
            // Refused by the transport before anything went out.
            Error::HeaderTooLarge { header, bytes, limit, .. } => {
                let what = entry.map(|e| e.limit.what.to_string()).unwrap_or_default();
                Error::HeaderTooLarge { what, header, bytes, limit }
            }
            // Only a dead transport ends the session; a timeout or an
            // oversized reply leaves the server answering the next request.
            e @ Error::Transport { .. } => {
                self.broken = true;
                e
            }
            e => e,
        })
    }

    /// One receive, until `until` at most, and its routing; async requests
    /// past their time are then settled. Ctrl-C is an error here: the
    /// caller decides what it stops (see [`Session::pump_checked`]).
    pub(crate) fn pump_until(&mut self, until: Instant, peer: &mut dyn Peer) -> Result<bool> {
        match self.pump_checked(until, peer) {
            Ok(any) => Ok(any),
            Err(Stop::Failed(e)) => Err(e),
            Err(Stop::Interrupted) => Err(Error::Interrupted { what: String::new() }),
        }
    }

    fn pump_checked(&mut self, until: Instant, peer: &mut dyn Peer) -> std::result::Result<bool, Stop> {
        let received = match self.held.take() {
            Some(held) => Some(held),
            None => match self.transport.receive(until) {
                Ok(received) => received,
                Err(e) => {
                    if matches!(e, Error::Transport { .. }) {
                        // Dead for good: everything in flight has its answer.
                        self.broken = true;
                        for entry in self.in_flight.values_mut().filter(|e| e.arrived.is_none()) {
                            entry.arrive(Arrival::Failed(e.clone()));
                        }
                    }
                    return Err(Stop::Failed(e));
                }
            },
        };
        // Checked before anything reaches Lua, and whatever arrives: a
        // server that chats every few milliseconds must not keep a request
        // past its time, nor hold off Ctrl-C (and a Lua callback would run
        // the host's one-shot hook and lose it). What came is kept.
        if interrupt::requested() {
            self.held = received;
            return Err(Stop::Interrupted);
        }
        let any = received.is_some();
        if let Some(received) = received {
            self.route(received, peer).map_err(Stop::Failed)?;
        }
        let dropped = self.transport.take_dropped();
        if dropped > 0 {
            peer.notification(protocol::dropped_notice(dropped));
        }
        self.expire();
        Ok(any)
    }

    fn route(&mut self, received: Received, peer: &mut dyn Peer) -> Result<()> {
        match received {
            Received::Message(msg) => match classify(&msg) {
                Kind::Response(key) if self.late.as_ref() == Some(&key) => {
                    self.late = None;
                    self.late_reply = Some(msg);
                }
                Kind::Response(key) => self.settle(&key, Arrival::Reply(msg)),
                Kind::Notification => {
                    self.progressed(&msg);
                    peer.notification(msg);
                }
                Kind::ServerRequest => {
                    let answer = peer.request(&msg);
                    self.transport.send(&answer)?;
                }
                Kind::Other => {}
            },
            Received::TooDeep(Some(key)) => self.settle(&key, Arrival::TooDeep),
            Received::TooDeep(None) => self.unreadable += 1,
            Received::Delivered(key) => self.settle(&key, Arrival::Reply(Json::Null)),
            Received::Failed(Some(key), e) => {
                // The server forgot the session: every later request would
                // meet the same 404, so the client starts a new one.
                self.forgotten |= matches!(e, Error::SessionExpired);
                self.broken |= self.forgotten;
                self.settle(&key, Arrival::Failed(e));
            }
            // With no id (a stdio line past the size limit), it is the one
            // request in flight's if there is one; with several, whoever
            // waits hears of it.
            Received::Failed(None, e) => {
                let mut unsettled = self.in_flight.iter_mut().filter(|(_, entry)| entry.arrived.is_none());
                match (unsettled.next(), unsettled.next()) {
                    (Some((_, entry)), None) => entry.arrive(Arrival::Failed(e)),
                    _ => return Err(e),
                }
            }
        }
        Ok(())
    }

    /// A progress notification for a request that asked for progress
    /// restarts its timeout (a long job that keeps reporting is alive),
    /// never past its hard deadline.
    fn progressed(&mut self, msg: &Json) {
        if msg.get("method") != Some(&Json::str("notifications/progress")) {
            return;
        }
        let Some(token) = msg.get("params").and_then(|p| p.get("progressToken")).and_then(id_key) else { return };
        let by_token = |e: &InFlight| e.limit.progress_token.as_ref() == Some(&token);
        let entry = match self.in_flight.get(&token) {
            Some(e) if e.limit.progress_token.is_none() => self.in_flight.get_mut(&token),
            _ => self.in_flight.values_mut().find(|e| by_token(e)),
        };
        let Some(entry) = entry.filter(|e| e.arrived.is_none()) else { return };
        let limit = &mut entry.limit;
        if !limit.progress {
            return;
        }
        let restarted = Instant::now().checked_add(limit.timeout).unwrap_or_else(far_future);
        limit.deadline = limit.hard_deadline.map_or(restarted, |h| restarted.min(h));
    }

    /// Async requests past their time: cancelled, and settled with the
    /// timeout error their waiter will take.
    fn expire(&mut self) {
        // The clock is read only if something still waits: once a blocking
        // call's reply is in, the look costs no read.
        let mut read_now = None;
        let expired: Vec<IdKey> = self
            .in_flight
            .iter()
            .filter(|(_, e)| e.arrived.is_none() && e.limit.deadline <= *read_now.get_or_insert_with(Instant::now))
            .map(|(key, _)| key.clone())
            .collect();
        let Some(now) = read_now else { return };
        for key in expired {
            let Some(entry) = self.in_flight.get_mut(&key) else { continue };
            let limit = &entry.limit;
            // The hard cap ended it, not a quiet spell: say which.
            let capped = limit.hard_deadline.is_some_and(|h| h <= now);
            let (seconds, mut note) = match limit.max_total {
                Some(max_total) if capped => (seconds_text(max_total), " (opts.max_total_timeout)".to_string()),
                _ => (seconds_text(limit.timeout), String::new()),
            };
            // A too-deep message whose id could not be read: perhaps its
            // reply. Said in the timeout message.
            if self.unreadable > entry.unreadable_before {
                note.push_str(&format!(
                    "; meanwhile a message nested deeper than {} levels was skipped, with no id that could be read",
                    codec::MAX_DEPTH
                ));
            }
            let error = Error::Timeout { what: limit.what.to_string(), seconds: seconds.clone(), note };
            entry.arrive(Arrival::Failed(error));
            let (id, abandon) = (entry.id.clone(), entry.abandon);
            self.abandon(&id, abandon, &format!("timed out after {seconds} s"));
        }
    }

    /// The outcome of request `key` if it has settled, which ends its
    /// entry. Taken once.
    pub(crate) fn take(&mut self, key: &IdKey) -> Option<Result<Json>> {
        // Still running: nothing to take.
        self.in_flight.get(key)?.arrived.as_ref()?;
        let entry = self.in_flight.remove(key)?;
        Some(match entry.arrived? {
            Arrival::Reply(reply) => Ok(reply),
            Arrival::TooDeep => {
                Err(Error::ReplyTooDeep { what: entry.limit.what.to_string(), limit: codec::MAX_DEPTH })
            }
            Arrival::Failed(e) => Err(e),
        })
    }

    /// Where the request `key` stands in the order requests settled, once
    /// it has.
    pub(crate) fn settled_as(&self, key: &IdKey) -> Option<u64> {
        self.in_flight.get(key).filter(|e| e.arrived.is_some()).map(|e| e.settled_as)
    }

    /// Whether the request `key` has settled (or was never in flight).
    pub(crate) fn settled(&self, key: &IdKey) -> bool {
        self.in_flight.get(key).is_none_or(|e| e.arrived.is_some())
    }

    /// Stops the async request `key` at the caller's word: the server is
    /// told, and the request settles with `error`. False if it had settled.
    pub(crate) fn cancel(&mut self, key: &IdKey, reason: &str, error: Error) -> bool {
        let Some(entry) = self.in_flight.get_mut(key).filter(|e| e.arrived.is_none()) else { return false };
        entry.arrive(Arrival::Failed(error));
        let (id, abandon) = (entry.id.clone(), entry.abandon);
        self.abandon(&id, abandon, reason);
        true
    }

    /// Nobody will take request `key`'s outcome: its entry goes, and a late
    /// reply is dropped.
    pub(crate) fn discard(&mut self, key: &IdKey) {
        self.in_flight.remove(key);
    }

    /// Whether something received waits to be routed.
    pub(crate) fn queued(&self) -> bool {
        self.held.is_some() || self.transport.queued()
    }

    /// When request `key` runs out, while it is in flight.
    pub(crate) fn deadline_of(&self, key: &IdKey) -> Option<Instant> {
        self.in_flight.get(key).filter(|e| e.arrived.is_none()).map(|e| e.limit.deadline)
    }

    /// The earliest time a request runs out.
    pub(crate) fn next_deadline(&self) -> Option<Instant> {
        self.in_flight.values().filter(|e| e.arrived.is_none()).map(|e| e.limit.deadline).min()
    }

    /// The outcomes of every async request, settled or not (those get
    /// `unsettled`), as the session ends: the client keeps them for their
    /// waiters. Requests still running are cancelled first, if the session
    /// can still say so.
    pub(crate) fn settle_all(&mut self, unsettled: impl Fn(&str) -> Error) -> Vec<(IdKey, Result<Json>)> {
        // In the order they were started: the server hears the
        // cancellations as it heard the requests.
        let mut keys: Vec<(u64, IdKey)> = self.in_flight.iter().map(|(k, e)| (e.order, k.clone())).collect();
        crate::sorting::sort_by_key(&mut keys, |(order, _)| *order);
        let mut outcomes = Vec::new();
        for (_, key) in keys {
            let what = self.in_flight.get(&key).map(|e| e.limit.what.clone()).unwrap_or_else(|| Rc::from(""));
            if !self.settled(&key) && !self.broken {
                self.cancel(&key, "the client was closed", unsettled(&what));
            }
            let outcome = self.take(&key).unwrap_or_else(|| Err(unsettled(&what)));
            outcomes.push((key, outcome));
        }
        outcomes
    }

    /// Stops waiting for the request `id`: it leaves the table, so a late
    /// reply is dropped, and the server is told (see [`Session::abandon`]).
    fn give_up(&mut self, id: &Json, reason: &str) {
        let entry = id_key(id).and_then(|key| self.in_flight.remove(&key));
        let abandon = entry.map_or(Abandon::Cancel, |e| e.abandon);
        self.abandon(id, abandon, reason);
    }

    /// The spec forbids cancelling `initialize`, so a session whose
    /// handshake we abandon is over; a quiet request is let go; for
    /// anything else, tell the server to stop working on it. A failure to
    /// send changes nothing: the caller gets its error either way.
    fn abandon(&mut self, id: &Json, abandon: Abandon, reason: &str) {
        match abandon {
            Abandon::EndSession => self.broken = true,
            Abandon::Nothing => {}
            Abandon::Cancel => self.send_cancellation(id, reason),
        }
    }

    fn send_cancellation(&mut self, id: &Json, reason: &str) {
        // Shielded: after Ctrl-C the host's hook is still set, and the
        // cancellation must not be interrupted in its turn.
        let mut notice = protocol::cancelled(id, reason);
        if let Some(envelope) = &self.modern {
            envelope.stamp(&mut notice);
        }
        let _ = interrupt::shielded(|| self.transport.send(&notice));
    }

    /// The session is being dropped with async requests running (their
    /// client was collected): each is cancelled without waiting on the
    /// transport, which then stops as a dropped transport does.
    pub(crate) fn cancel_all_detached(&mut self) {
        let mut running: Vec<(u64, Json)> = self
            .in_flight
            .values()
            .filter(|e| e.arrived.is_none() && e.abandon == Abandon::Cancel)
            .map(|e| (e.order, e.id.clone()))
            .collect();
        crate::sorting::sort_by_key(&mut running, |(order, _)| *order);
        for (_, id) in running {
            let notice = protocol::cancelled(&id, "the client was collected");
            let _ = interrupt::shielded(|| self.transport.send_detached(&notice, CANCEL_TIMEOUT));
        }
        self.in_flight.clear();
    }

    /// See [`Transport::connect_by`].
    pub fn connect_by(&mut self, deadline: Option<Instant>) {
        self.transport.connect_by(deadline);
    }

    pub fn established(&mut self, negotiated_version: &str) {
        self.transport.established(negotiated_version);
    }

    pub fn session_id(&self) -> Option<String> {
        self.transport.session_id()
    }

    pub fn last_words(&self) -> Option<String> {
        self.transport.last_words()
    }

    pub fn close(&mut self) {
        self.transport.close();
    }
}

/// How long a notice waited for (see [`Session::start_notice`]) may take
/// past its transport's limit: the wait for the server's stream to open.
const NOTICE_GRACE: Duration = Duration::from_secs(2);

/// What a transport waits at most for a request whose progress keeps
/// extending its time and that has no hard cap.
const LONGEST_TRANSPORT_WAIT: Duration = Duration::from_secs(24 * 3600);

/// How long a cancellation sent from a dropped client may take.
const CANCEL_TIMEOUT: Duration = Duration::from_secs(2);

/// Why a pump stopped short.
enum Stop {
    Failed(Error),
    /// The host asked for its thread back.
    Interrupted,
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

    fn start(s: &mut Session, id: i64, what: &str) {
        s.start(&Json::Int(id), &call(id), Limit::new(SHORT, None, Rc::from(what))).unwrap();
    }

    /// Pumps until request `id` settles, and takes its outcome.
    fn wait(s: &mut Session, id: i64) -> Result<Json> {
        let key = id_key(&Json::Int(id)).unwrap();
        loop {
            if let Some(outcome) = s.take(&key) {
                return outcome;
            }
            let _ = s.pump_until(Instant::now() + Duration::from_millis(5), &mut Quiet);
        }
    }

    #[test]
    fn two_in_flight_each_get_their_own_reply_whatever_the_order() {
        let (mut s, _) = session(&[r#"{"id":2,"result":{"n":2}}"#, r#"{"id":1,"result":{"n":1}}"#]);
        start(&mut s, 1, "one");
        start(&mut s, 2, "two");
        let first = wait(&mut s, 1).unwrap();
        assert_eq!(first.get("result").and_then(|r| r.get("n")), Some(&Json::Int(1)));
        // kept while the first was waited for: no further receive needed
        let second = wait(&mut s, 2).unwrap();
        assert_eq!(second.get("result").and_then(|r| r.get("n")), Some(&Json::Int(2)));
        assert!(s.in_flight.is_empty());
    }

    #[test]
    fn a_timeout_cancels_only_its_own_request_and_its_late_reply_is_dropped() {
        let (mut s, sent) = session(&[]);
        start(&mut s, 1, "tools/call one");
        std::thread::sleep(SHORT / 2);
        s.start(&Json::Int(2), &call(2), Limit::new(Duration::from_secs(5), None, Rc::from("two"))).unwrap();
        let err = wait(&mut s, 1).unwrap_err();
        assert_eq!(err.to_string(), "MCP tools/call one timed out after 0.02 s");
        assert!(sent.borrow().last().unwrap().contains(r#""requestId":1"#));
        // the other request is still in flight, and its reply is kept
        assert!(!s.settled(&id_key(&Json::Int(2)).unwrap()));
        let late = [r#"{"id":1,"result":{"n":1}}"#, r#"{"id":2,"result":{"n":2}}"#];
        let (mut fresh, _) = session(&late);
        std::mem::swap(&mut s.transport, &mut fresh.transport);
        assert!(wait(&mut s, 2).is_ok());
        assert!(!s.broken);
        assert!(s.in_flight.is_empty());
    }
}
