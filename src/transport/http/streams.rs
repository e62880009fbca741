//! Reply streams: a POST's reply as an SSE stream, or the server's own
//! stream, read event by event; resumed with `Last-Event-ID` when one breaks
//! before its reply, and read past the reply (to give its connection back
//! to the pool) on a thread of its own.

use std::sync::Weak;
use std::time::{Duration, Instant};

use ureq::http::Response;
use ureq::Body;

use crate::codec;
use crate::error::Error;
use crate::protocol::{IdKey, Kind};
use crate::transport::inbox::{sort, Event, Sorted};
use crate::wire::{never_pausing, pausing_at, Socket};

use super::sse::{SseReader, StreamError};
use super::{is_event_stream, trim, PostHeaders, Shared, Slot};

/// Reconnecting to a stream that closed before our reply: how often, and
/// how long to wait when the server gave no `retry:`.
const MAX_RESUMES: usize = 5;
const DEFAULT_RETRY: Duration = Duration::from_millis(500);
const MAX_RETRY: Duration = Duration::from_secs(10);
/// How long a stream thread reads a reply stream past its reply, and how
/// many do at once; past either, the stream is dropped with its connection.
const DRAIN_LIMIT: Duration = Duration::from_secs(1);
const MAX_DRAINING: usize = 4;

/// What reading a stream gave.
pub(super) enum Step {
    /// For the session, with the size it had on the wire.
    Deliver(Event, usize),
    /// The reader's pause time came (see [`pausing_at`]); the stream is
    /// intact and can be read on, by this thread or another.
    Paused,
    /// Ctrl-C, on the Lua thread.
    Interrupted,
    /// Nothing more will come: the stream ended (and was not resumed), or
    /// failed.
    Ended,
}

/// One SSE stream: a POST's reply stream (`awaiting` its reply) or the
/// server's own (awaiting nothing). Server requests are answered here, or
/// handed to Lua when it has a handler; everything else is delivered.
pub(super) struct ReplyStream {
    reader: SseReader,
    awaiting: Option<IdKey>,
    /// A reply stream is resumed only while its request could still be
    /// waited for: one abandoned on a timeout must not live on.
    resume_until: Option<Instant>,
    resumes: usize,
    /// The reply came: what follows is read only to reach the stream's
    /// end, so that its connection goes back to the pool.
    pub(super) answered: bool,
    /// The reply stream of a modern request: never resumed (the 2026-07-28
    /// revision has no `Last-Event-ID`); its request fails at once when it
    /// ends without the reply, to be sent again as a new request.
    modern: bool,
    /// The socket it comes on, where known: the server's stream is then
    /// watched by the process's poll thread (see `listener`).
    pub(super) socket: Option<Socket>,
    /// Read by the poll thread, which must not wait: answers to the
    /// server go out from a thread of the client's (see
    /// `Shared::answer_aside`).
    answers_aside: Option<Weak<Shared>>,
    /// The one stream of an HTTP+SSE session (see `legacy`): never
    /// resumed; its replies and its end are told to the session's owed
    /// replies, since the session ends with it.
    legacy: bool,
    told_end: bool,
}

impl ReplyStream {
    /// Whether it carries the reply to the request `key`.
    pub(super) fn awaits(&self, key: &IdKey) -> bool {
        self.awaiting.as_ref() == Some(key)
    }

    pub(super) fn new(shared: &Shared, response: Response<Body>, awaiting: Option<IdKey>) -> ReplyStream {
        ReplyStream {
            reader: SseReader::new(response.into_body().into_reader(), shared.options.max_message_bytes),
            resume_until: awaiting.as_ref().map(|_| Instant::now() + shared.options.timeout),
            awaiting,
            resumes: 0,
            answered: false,
            modern: false,
            socket: None,
            answers_aside: None,
            legacy: false,
            told_end: false,
        }
    }

    /// The stream of an HTTP+SSE session (see [`ReplyStream::legacy`]).
    pub(super) fn legacy(mut self) -> ReplyStream {
        self.legacy = true;
        self
    }

    /// Reads up to the `endpoint` event an HTTP+SSE server sends first:
    /// its data, the URL to POST messages to. None when the stream ends
    /// first; an error when the wait is cut (its deadline, Ctrl-C).
    pub(super) fn endpoint(&mut self) -> std::result::Result<Option<String>, StreamError> {
        loop {
            let Some(data) = self.reader.next_event()? else { return Ok(None) };
            if self.reader.event_type.as_deref() == Some(b"endpoint") {
                return Ok(Some(String::from_utf8_lossy(trim(&data)).into_owned()));
            }
        }
    }

    /// The server's own stream, on `socket` (see [`ReplyStream::socket`]).
    pub(super) fn on_socket(mut self, socket: Option<Socket>) -> ReplyStream {
        self.socket = socket;
        self
    }

    /// Answers to the server are posted aside (see [`ReplyStream::answers_aside`]).
    pub(super) fn answering_aside(mut self, shared: &std::sync::Arc<Shared>) -> ReplyStream {
        self.answers_aside = Some(std::sync::Arc::downgrade(shared));
        self
    }

    /// The reply stream of a modern request (see [`ReplyStream::modern`]).
    pub(super) fn modern(mut self, modern: bool) -> ReplyStream {
        self.modern = modern;
        self
    }

    /// The next thing to deliver. A stream that ends before its reply is
    /// resumed with `Last-Event-ID` after the server's `retry:` or a bounded
    /// backoff when `may_resume` (a thread of its own may sleep; the Lua
    /// thread hands such a stream to one instead); the server's own stream
    /// is resumed the same way until the client closes.
    pub(super) fn next(&mut self, shared: &Shared, may_resume: bool) -> Step {
        loop {
            if shared.is_stopped() {
                return Step::Ended;
            }
            let event = match self.reader.next_event() {
                Ok(Some(event)) => event,
                Err(StreamError::TooLarge) => match &self.awaiting {
                    Some(id) if !self.answered => {
                        self.answered = true;
                        return Step::Deliver(Event::TooLarge(Some(id.clone())), 0);
                    }
                    // On the server's own stream, or past the reply: skip
                    // the event (the reader reads past the rest of it).
                    _ => continue,
                },
                Err(StreamError::Paused) => return Step::Paused,
                Err(StreamError::Interrupted) => return Step::Interrupted,
                Ok(None) | Err(StreamError::Broken) => {
                    if may_resume && self.resume(shared) {
                        continue;
                    }
                    if self.legacy && !std::mem::replace(&mut self.told_end, true) {
                        shared.legacy_ended();
                    }
                    if let Some(id) = self.awaiting.clone().filter(|_| self.modern && !self.answered) {
                        self.answered = true;
                        return Step::Deliver(Event::Failed(id, Error::StreamEnded), 0);
                    }
                    return Step::Ended;
                }
            };
            let text = trim(&event);
            match sort(text, &shared.options.lua_handled) {
                Sorted::Deliver(msg, kind) => {
                    if let (true, Kind::Response(id)) = (self.legacy, &kind) {
                        shared.legacy_paid(id);
                    }
                    self.answered |= matches!(&kind, Kind::Response(id) if Some(id) == self.awaiting.as_ref());
                    return Step::Deliver(Event::Message(msg), text.len());
                }
                Sorted::TooDeep(id) => {
                    self.answered |= id.is_some() && id == self.awaiting;
                    return Step::Deliver(Event::TooDeep(id), text.len());
                }
                Sorted::Answer(answer) | Sorted::Refuse(answer) => self.answer(shared, codec::encode(&answer)),
                Sorted::Skip | Sorted::NotJson => {}
            }
        }
    }

    /// Posts an answer to the server: from this thread, or aside.
    fn answer(&self, shared: &Shared, body: Vec<u8>) {
        match self.answers_aside.as_ref().and_then(Weak::upgrade) {
            Some(shared) => shared.answer_aside(body),
            None => never_pausing(|| shared.post_answer(&body, &PostHeaders::default())),
        }
    }

    /// Whether a stream that ended without its reply can still bring it.
    pub(super) fn resumable(&self, shared: &Shared) -> bool {
        !self.modern
            && !self.legacy
            && self.reader.last_event_id.is_some()
            && !self.answered
            && !shared.is_stopped()
            && self.resumes < MAX_RESUMES
            && self.resume_until.is_none_or(|t| Instant::now() < t)
    }

    /// Reconnects with `Last-Event-ID` after a pause; false when the
    /// stream cannot or should not be resumed.
    fn resume(&mut self, shared: &Shared) -> bool {
        if !self.resumable(shared) {
            return false;
        }
        // Read on: a failed reconnection ends the stream there, and the
        // next end comes back here while resumptions are left.
        self.reconnect(shared);
        true
    }

    /// One resumption, once [`Self::resumable`]: after the server's
    /// `retry:` (or a backoff), a GET with `Last-Event-ID`. Whether the
    /// stream now reads from the new connection.
    pub(super) fn reconnect(&mut self, shared: &Shared) -> bool {
        let Some(last_id) = self.reader.last_event_id.clone() else { return false };
        self.resumes += 1;
        let backoff = DEFAULT_RETRY * (1 << (self.resumes - 1)).min(8);
        shared.pause(self.reader.retry.unwrap_or(backoff).min(MAX_RETRY));
        let Ok((r, socket)) = shared.get_stream(Some(&last_id)) else { return false };
        if r.status().as_u16() != 200 || !is_event_stream(&r) {
            return false;
        }
        let retry = self.reader.retry;
        self.reader = SseReader::new(r.into_body().into_reader(), shared.options.max_message_bytes);
        self.reader.last_event_id = Some(last_id);
        self.reader.retry = retry;
        self.socket = socket;
        true
    }
}

/// How often a thread reading a modern reply stream looks whether its
/// request was cancelled.
const CANCEL_CHECK: Duration = Duration::from_millis(100);

/// Reads a stream on a thread of its own: everything goes to the inbox.
/// After the reply the rest is read for [`DRAIN_LIMIT`] at most, and by
/// [`MAX_DRAINING`] threads at most, so that a server that keeps its reply
/// streams open costs a closed connection, not a thread per request.
pub(super) fn read_stream(shared: &Shared, mut stream: ReplyStream) {
    while !stream.answered {
        // A modern request's stream is how its cancellation is heard: the
        // wait for it is cut into slices, to let go of it once cancelled.
        let step = match stream.awaiting.clone().filter(|_| stream.modern) {
            Some(key) => {
                let step = pausing_at(Instant::now() + CANCEL_CHECK, || stream.next(shared, true));
                if shared.take_abandoned(&key) {
                    return;
                }
                if matches!(step, Step::Paused) {
                    continue;
                }
                step
            }
            None => stream.next(shared, true),
        };
        match step {
            Step::Deliver(event, size) => shared.inbox.push(event, size),
            Step::Paused | Step::Interrupted | Step::Ended => return,
        }
    }
    let Some(_slot) = Slot::take(&shared.draining, MAX_DRAINING) else { return };
    pausing_at(Instant::now() + DRAIN_LIMIT, || {
        while let Step::Deliver(event, size) = stream.next(shared, false) {
            shared.inbox.push(event, size);
        }
    });
}
