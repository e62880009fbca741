//! How a message goes out: on the Lua thread and read there (a blocking
//! request), from a thread of its own (an async request, Lua's answer to
//! a question a stream thread read; `initialized` too, through the
//! module's `send_notice`), or not at all (a modern cancellation closes
//! the request's stream instead), each with its headers checked against
//! `opts.max_header_bytes` and its time bounded by what is left of the
//! handshake.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::exchange::{post_headers, PostHeaders, Verb};

use super::exchange::{drain_briefly, header, is_cancellation, is_event_stream};
use super::streams::ReplyStream;
use super::{lock, Http, Shared, Slot, MAX_ANSWERS_BESIDE, NOTICE_TIMEOUT, READ_BESIDE_KEPT};
use crate::codec::{self, Json};
use crate::error::{Error, Result};
use crate::protocol::{self, classify, id_key, Kind};
use crate::transport::inbox::Event;
use crate::wire::headers;

impl Http {
    /// `timeout`, or what is left of the handshake's time if that is
    /// less (a millisecond at least: ureq takes no time as none at all).
    pub(super) fn within_handshake(&self, timeout: Duration) -> Duration {
        match self.connect_by {
            Some(deadline) => {
                timeout.min(deadline.saturating_duration_since(Instant::now())).max(Duration::from_millis(1))
            }
            None => timeout,
        }
    }

    /// The headers `message` goes with; None when nothing is to be posted
    /// (a modern server hears a cancellation as the request's stream
    /// closing, and defines no notifications to POST).
    /// Refused when one of them is longer than `opts.max_header_bytes`:
    /// a 256 KiB `Mcp-Param` value overflowed the client's own request
    /// buffer, and the error blamed the server.
    pub(super) fn headers_for(&mut self, message: &Json, own: &[(String, String)]) -> Result<Option<PostHeaders>> {
        let headers = post_headers(message, own, self.modern);
        if headers.modern && is_cancellation(message) {
            self.stop_reading(message);
            return Ok(None);
        }
        let limit = self.shared.options.max_header_bytes;
        if let Some((name, value)) = headers.own.iter().find(|(_, value)| value.len() > limit) {
            return Err(Error::HeaderTooLarge { what: String::new(), header: name.clone(), bytes: value.len(), limit });
        }
        Ok(Some(headers))
    }

    pub(super) fn send_with(&mut self, sent: &Json, own: &[(String, String)]) -> Result<()> {
        if self.answers_one_read_beside(sent) {
            if let Some(slot) = Slot::take(&self.shared.answering, MAX_ANSWERS_BESIDE) {
                return self.answer_beside(sent, slot);
            }
        }
        let Some(headers) = self.headers_for(sent, own)? else { return Ok(()) };
        // Every POST needs a connection: the last reply stream's goes back
        // to the pool first. One still unanswered (a request given up on,
        // or a nested call from a handler) goes on elsewhere, unless this
        // is our answer to a server request that came on it: the reply may
        // follow on the same stream.
        let is_answer = sent.get("method").is_none();
        self.finish_foreground(!is_answer);
        let message = codec::encode(sent);
        let is_request = sent.get("id").is_some() && sent.get("method").is_some();
        let is_initialize = sent.get("method") == Some(&Json::str("initialize"));
        if is_initialize {
            // A new session: no id and no version from the old one.
            *lock(&self.shared.session_id) = None;
            *lock(&self.shared.protocol_version) = None;
        }
        let had_session = self.shared.has_session(&headers);
        // A cancellation goes out right after a timeout or a Ctrl-C, often
        // to a server that stopped answering: it must not hold Lua as long
        // again.
        let timeout = match sent.get("method") {
            Some(Json::Str(m)) if m == b"notifications/cancelled" => {
                let notice_timeout = self.shared.options.timeout.min(NOTICE_TIMEOUT);
                self.await_posted(sent, notice_timeout);
                notice_timeout
            }
            _ if is_initialize => self.shared.options.connect_timeout,
            _ => self.shared.options.timeout,
        };
        let timeout = self.within_handshake(timeout);
        let response = match self.shared.post(&message, &headers, timeout) {
            Err(Error::HttpTimeout { .. }) if is_request => {
                self.timed_out = true;
                return Ok(());
            }
            other => other?,
        };
        let status = response.status().as_u16();
        if is_initialize {
            if let Some(id) = header(&response, headers::MCP_SESSION_ID) {
                *lock(&self.shared.session_id) = Some(id.to_string());
            }
        }
        if std::mem::take(&mut self.listen_pending) {
            self.listen();
        }
        match status {
            404 if had_session => Err(Error::SessionExpired),
            200..=299 if !is_request => {
                drain_briefly(response, self.limit());
                Ok(())
            }
            // HTTP+SSE: acknowledged; the reply is owed on the session's stream.
            200..=299 if self.shared.is_legacy() => {
                drain_briefly(response, self.limit());
                self.shared.legacy_owes(sent.get("id").and_then(id_key))
            }
            200..=299 if is_event_stream(&response) => {
                let awaiting = sent.get("id").and_then(id_key);
                let stream = ReplyStream::new(&self.shared, response, awaiting).modern(headers.modern);
                if let Some(earlier) = self.foreground.replace(stream) {
                    self.hand_off(earlier);
                }
                Ok(())
            }
            200..=299 => self.take_json_body(status, response),
            _ => self.take_failure(status, response, sent),
        }
    }

    /// The POST goes out from a thread of its own, so that Lua never
    /// waits for a reply's headers or body; whatever comes of it reaches
    /// the session through the inbox, as stream events do.
    pub(super) fn send_detached_with(
        &mut self,
        request: &Json,
        own: &[(String, String)],
        timeout: Duration,
    ) -> Result<()> {
        let timeout = self.within_handshake(timeout);
        let Some(headers) = self.headers_for(request, own)? else { return Ok(()) };
        self.finish_foreground(true);
        if self.shared.is_stopped() {
            return Err(Error::Closed { what: protocol::lua_text(request.get("method")) });
        }
        let body = codec::encode(request);
        if headers.initialize {
            // A new session: no id and no version from the old one.
            *lock(&self.shared.session_id) = None;
            *lock(&self.shared.protocol_version) = None;
        }
        let (Some(id), Some(key)) = (request.get("id").cloned(), request.get("id").and_then(id_key)) else {
            // A notification (a cancellation from a dropped client): its
            // answer is of no interest. On the spare agent: the dropped
            // client shuts the shared one down at once, which would cut
            // this POST off.
            let agent = self.spare_agent.clone();
            self.shared.spawn(move |shared| drop(shared.exchange(&agent, Verb::Post(&body, &headers), timeout)));
            return Ok(());
        };
        if std::mem::take(&mut self.listen_pending) {
            self.listen();
        }
        lock(&self.shared.posting).push(key.clone());
        self.shared.spawn(move |shared| shared.post_detached(&body, &headers, &id, key, timeout));
        Ok(())
    }

    /// Whether `sent` answers a server request a stream thread read (see
    /// [`Http::read_beside`]); it is then no longer looked for.
    pub(super) fn answers_one_read_beside(&mut self, sent: &Json) -> bool {
        if sent.get("method").is_some() {
            return false;
        }
        let Some(key) = sent.get("id").and_then(id_key) else { return false };
        let Some(at) = self.read_beside.iter().position(|k| k == &key) else { return false };
        self.read_beside.remove(at);
        true
    }

    /// Posts Lua's answer from a thread of its own: an event loop that
    /// ran the handler goes on at once, however long the server takes to
    /// take the answer. The foreground stream is left alone: it belongs to
    /// whatever the Lua thread waits for, not to this answer.
    pub(super) fn answer_beside(&mut self, answer: &Json, slot: Slot) -> Result<()> {
        let Some(headers) = self.headers_for(answer, &[])? else { return Ok(()) };
        let body = codec::encode(answer);
        self.shared.spawn(move |shared| {
            shared.post_answer(&body, &headers);
            drop(slot);
        });
        Ok(())
    }

    /// Notes a server request read by a stream thread, so that its answer
    /// goes out the same way. Bounded: a server that sends requests faster
    /// than Lua answers them only pushes the oldest back to the Lua thread.
    pub(super) fn note_read_beside(&mut self, event: &Event) {
        let Event::Message(msg) = event else { return };
        if classify(msg) != Kind::ServerRequest {
            return;
        }
        if self.read_beside.len() >= READ_BESIDE_KEPT {
            self.read_beside.remove(0);
        }
        self.read_beside.extend(msg.get("id").and_then(id_key));
    }

    /// Stops reading the reply stream of the request a cancellation
    /// names, when the Lua thread reads it: dropping it closes its
    /// connection, which is how a modern server hears of it.
    pub(super) fn stop_reading(&mut self, cancellation: &Json) {
        let Some(key) = cancellation.get("params").and_then(|p| p.get("requestId")).and_then(id_key) else { return };
        if self.foreground.as_ref().is_some_and(|s| s.awaits(&key)) {
            self.foreground = None;
            return;
        }
        // Read by a thread (an async request): it lets go when it looks.
        if lock(&self.shared.reading).contains(&key) {
            lock(&self.shared.abandoned).push(key);
        }
    }
}

/// Answers queued for one client's thread at most: a server that asks
/// faster than it takes answers has the rest dropped, as if lost.
const MAX_ANSWERS_ASIDE: usize = 64;

impl Shared {
    /// Posts an answer to the server read on the poll thread, which must
    /// not wait for it: one thread per client posts them in order, and
    /// ends when none is left.
    pub(super) fn answer_aside(self: &Arc<Self>, body: Vec<u8>) {
        let mut aside = lock(&self.answers_aside);
        if aside.0.len() >= MAX_ANSWERS_ASIDE {
            return;
        }
        aside.0.push_back(body);
        if std::mem::replace(&mut aside.1, true) {
            return;
        }
        drop(aside);
        self.spawn(|shared| loop {
            let Some(body) = ({
                let mut aside = lock(&shared.answers_aside);
                let next = aside.0.pop_front();
                aside.1 = next.is_some();
                next
            }) else {
                return;
            };
            shared.post_answer(&body, &PostHeaders::default());
        });
    }
}
