//! The server's own stream (the GET a 2025 session opens after its
//! handshake) while nothing comes on it, which is nearly always: watched
//! by the process's poll thread (`transport::poller`) rather than by a
//! thread blocked on it for as long as the client lives (200 clients of
//! one server held 200 such threads).
//!
//! The poll thread reads only what has come: each read may wait
//! [`READ_WINDOW`] for the rest of what poll saw arrive (a TLS record, an
//! event split across segments) and then pauses, which leaves the stream
//! intact for the next round. What cannot be done without waiting goes
//! to threads that end with their job: answers the server asked for
//! (posted in order, see `Shared::answer_aside`) and reconnecting a
//! stream that broke (`Last-Event-ID`, after the server's `retry:`).
//!
//! Where the socket under the stream is unknown (a SOCKS proxy's
//! connection) or no poll thread can be started, the stream is read by
//! a thread of its own as before.

use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use crate::transport::poller::{self, Round, Watched, FULL_INBOX_LOOK, READABLE};
use crate::wire::pausing_at;

use super::streams::{read_stream, ReplyStream, Step};
use super::{lock, Shared};

/// How long a read from the poll thread waits for the rest of what came.
const READ_WINDOW: Duration = Duration::from_micros(200);
/// One client's stream from the server, as the poll thread serves it.
pub(super) struct ServerStream {
    shared: Weak<Shared>,
    /// Out while a thread reconnects it.
    stream: Mutex<Option<ReplyStream>>,
}

/// Has the server's stream read from the poll thread, or from this
/// thread (which then reads it until it ends) when it cannot be. What
/// came with the response's head is read first: it waits in ureq's
/// buffers, where no poll sees it.
pub(super) fn watch(shared: &Arc<Shared>, mut stream: ReplyStream) {
    loop {
        if stream.socket.is_none() {
            return read_stream(shared, stream);
        }
        if matches!(read_what_came(shared, &mut stream), Step::Paused) {
            break;
        }
        // Ended already: reconnected here, or given up.
        if !reconnected(shared, &mut stream) {
            return;
        }
    }
    if let Some(watched) = lock(&shared.server_stream).clone() {
        *lock(&watched.stream) = Some(stream);
        poller::wake();
        return;
    }
    let watched = Arc::new(ServerStream {
        shared: Arc::downgrade(shared),
        stream: Mutex::new(Some(stream.answering_aside(shared))),
    });
    *lock(&shared.server_stream) = Some(watched.clone());
    if poller::register(watched.clone()).is_err() {
        if let Some(stream) = lock(&watched.stream).take() {
            read_stream(shared, stream);
        }
    }
}

/// Reads what has come on the stream, until a read would wait longer
/// than [`READ_WINDOW`] (`Paused`) or the stream ends.
fn read_what_came(shared: &Shared, stream: &mut ReplyStream) -> Step {
    pausing_at(Instant::now() + READ_WINDOW, || loop {
        match stream.next(shared, false) {
            Step::Deliver(event, size) => shared.inbox.push_now(event, size),
            other => break other,
        }
    })
}

/// Stops watching the client's stream, if it was; once this returns the
/// poll thread holds nothing of it.
pub(super) fn forget(shared: &Shared) {
    let Some(watched) = lock(&shared.server_stream).take() else { return };
    let watched: Arc<dyn Watched> = watched;
    poller::forget(&watched);
}

/// Reconnects a stream that broke, on a thread of the client's, and
/// hands it back to the poll thread.
fn reconnect_aside(shared: &Arc<Shared>, mut stream: ReplyStream) {
    shared.spawn(move |shared| {
        if reconnected(&shared, &mut stream) {
            watch(&shared, stream);
        }
    });
}

/// Reconnects an ended stream while the server allows it: whether it
/// reads from a new connection.
fn reconnected(shared: &Shared, stream: &mut ReplyStream) -> bool {
    while stream.resumable(shared) {
        if stream.reconnect(shared) {
            return true;
        }
    }
    false
}

impl Watched for ServerStream {
    fn gather(&self, round: &mut Round) {
        let Some(shared) = self.shared.upgrade() else { return };
        let stream = lock(&self.stream);
        let Some(socket) = stream.as_ref().and_then(|s| s.socket) else { return };
        if shared.is_stopped() {
            return;
        }
        // Full of what Lua has not taken: the server's stream waits.
        if shared.inbox.full() {
            round.wait_at_most(FULL_INBOX_LOOK);
            return;
        }
        round.watch(socket, READABLE, 0);
    }

    fn ready(&self, _tag: u32, _buf: &mut [u8]) {
        let Some(shared) = self.shared.upgrade() else { return };
        let mut slot = lock(&self.stream);
        let Some(stream) = slot.as_mut() else { return };
        if matches!(read_what_came(&shared, stream), Step::Paused) {
            return;
        }
        let Some(stream) = slot.take() else { return };
        if stream.resumable(&shared) {
            reconnect_aside(&shared, stream);
        }
    }
}
