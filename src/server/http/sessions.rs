//! The sessions of a Streamable HTTP server (2025-03-26 to 2025-11-25): an
//! id handed out with the answer to `initialize`, named by every request
//! after it, ended by DELETE or by going unused. Each is one client to the
//! protocol core (a `PeerKey`), and may hold one GET stream on which the
//! server says what nobody asked (list changes, resource updates).

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::connection::Connection;
use crate::server::PeerKey;

/// Events kept for a client to resume its GET stream with
/// `Last-Event-ID`, or to read once it opens one.
const KEPT_EVENTS: usize = 256;

pub struct Session {
    pub peer: PeerKey,
    last_used: Instant,
    /// The GET stream, while its client reads it.
    pub stream: Option<Arc<Connection>>,
    /// The last events said unasked, by number; those after
    /// `delivered` have not been written to a stream yet.
    events: VecDeque<(u64, Vec<u8>)>,
    next_event: u64,
    delivered: u64,
}

impl Session {
    /// Keeps a message said unasked and returns its event number.
    pub fn keep_event(&mut self, data: Vec<u8>) -> u64 {
        self.next_event += 1;
        if self.events.len() >= KEPT_EVENTS {
            self.events.pop_front();
        }
        self.events.push_back((self.next_event, data));
        self.next_event
    }

    pub fn delivered(&mut self, number: u64) {
        self.delivered = self.delivered.max(number);
    }

    /// The events a stream opened now owes: those after `last_seen` (a
    /// resumption), or else those never delivered.
    pub fn owed_events(&self, last_seen: Option<u64>) -> Vec<(u64, Vec<u8>)> {
        let after = last_seen.unwrap_or(self.delivered);
        self.events.iter().filter(|(n, _)| *n > after).cloned().collect()
    }

    pub fn has_stream(&self) -> bool {
        self.stream.as_ref().is_some_and(|s| !s.is_dead())
    }
}

pub struct Sessions {
    by_id: HashMap<String, Session>,
    next_peer: PeerKey,
    limit: usize,
    idle: Duration,
}

impl Sessions {
    pub fn new(limit: usize, idle: Duration) -> Sessions {
        Sessions { by_id: HashMap::new(), next_peer: 0, limit, idle }
    }

    /// A new session: its id (128 random bits) and its client's key; None
    /// at the bound.
    pub fn open(&mut self) -> Option<(String, PeerKey)> {
        if self.by_id.len() >= self.limit {
            return None;
        }
        let id = crate::auth::pkce::random_text(16).ok()?;
        self.next_peer += 1;
        let session = Session {
            peer: self.next_peer,
            last_used: Instant::now(),
            stream: None,
            events: VecDeque::new(),
            next_event: 0,
            delivered: 0,
        };
        self.by_id.insert(id.clone(), session);
        Some((id, self.next_peer))
    }

    /// The session `id` names, marked used.
    pub fn used(&mut self, id: &str) -> Option<&mut Session> {
        let session = self.by_id.get_mut(id)?;
        session.last_used = Instant::now();
        Some(session)
    }

    pub fn of_peer(&mut self, peer: PeerKey) -> Option<(&String, &mut Session)> {
        self.by_id.iter_mut().find(|(_, s)| s.peer == peer)
    }

    pub fn end(&mut self, id: &str) -> Option<Session> {
        self.by_id.remove(id)
    }

    /// Ends the sessions unused for longer than the bound (their stream
    /// open counts as use); their clients' keys.
    pub fn expire(&mut self, now: Instant) -> Vec<Session> {
        let idle = self.idle;
        let stale: Vec<String> = self
            .by_id
            .iter()
            .filter(|(_, s)| !s.has_stream() && now.duration_since(s.last_used) > idle)
            .map(|(id, _)| id.clone())
            .collect();
        stale.iter().filter_map(|id| self.by_id.remove(id)).collect()
    }

    pub fn drain(&mut self) -> Vec<Session> {
        self.by_id.drain().map(|(_, s)| s).collect()
    }
}
