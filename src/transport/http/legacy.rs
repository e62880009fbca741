//! HTTP with SSE, the transport of the 2024-11-05 revision, which older
//! hosted servers and SSE-only gateways still speak: one GET opens an
//! event stream whose first event, `endpoint`, names the URL messages are
//! POSTed to; every reply and server message comes on that stream, and a
//! POST is only acknowledged (202, often with a text body).
//!
//! Chosen by `opts.transport_kind = "sse"`, or found the way the
//! 2025-03-26 revision tells clients to find it: an `initialize` POST
//! refused with 400, 404 or 405 is followed by a GET of the same URL, and
//! an event stream whose first event is `endpoint` makes the session an
//! HTTP+SSE one (the POST is then sent there). Anything else keeps the
//! POST's own refusal, which says more.
//!
//! Everything else is the Streamable HTTP path's: the same headers and
//! credentials (OAuth, DPoP), redirects followed within the origin only,
//! the same bounds on messages and waits, the stream read by the poll
//! thread, answers to the server posted aside. The endpoint must be on
//! the stream's origin: one elsewhere would take the headers and tokens
//! given for this one, so it is refused.
//!
//! The stream is never resumed: a new GET is a new session. When it ends,
//! the session ends with it: a request the server acknowledged and never
//! answered fails (it may have run), and a request after the end (or one
//! its server answers 404, the session gone) is sent once more on a new
//! session (a new stream, a new `initialize`).

use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::exchange::{is_event_stream, seconds};
use super::sse::StreamError;
use super::streams::ReplyStream;
use super::{listener, lock, Shared};
use crate::error::{Error, Result};
use crate::protocol::IdKey;
use crate::transport::inbox::Event;
use crate::wire::pausing_at;

/// Which HTTP transport a URL client speaks (`opts.transport_kind`).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub enum Kind {
    /// Streamable HTTP, falling back to HTTP+SSE where the `initialize`
    /// POST is refused with 400, 404 or 405.
    #[default]
    Auto,
    /// Streamable HTTP only.
    Streamable,
    /// HTTP+SSE only.
    Sse,
}

/// Where an HTTP+SSE session posts, once its stream said; and what its
/// stream still owes: the requests the server acknowledged whose replies
/// have not come, or that it ended (see [`Shared::legacy_ended`]).
#[derive(Default)]
pub(super) struct Endpoint(Mutex<Option<String>>, Mutex<Owed>);

#[derive(Default)]
pub(super) struct Owed {
    ended: bool,
    replies: Vec<IdKey>,
    /// Replies the stream brought before their POST's acknowledgement was
    /// read (the two come on different connections); the last few.
    early: Vec<IdKey>,
}

/// Early replies remembered (see [`Owed::early`]).
const EARLY_KEPT: usize = 64;

/// Owed replies remembered: past this the oldest (a request long given
/// up on) is forgotten, not failed at the stream's end.
const OWED_KEPT: usize = 1024;

impl Shared {
    /// The URL messages are POSTed to in an HTTP+SSE session; None in a
    /// Streamable HTTP one.
    pub(super) fn endpoint(&self) -> Option<String> {
        lock(&self.endpoint.0).clone()
    }

    /// Whether this is an HTTP+SSE session.
    pub(super) fn is_legacy(&self) -> bool {
        lock(&self.endpoint.0).is_some()
    }

    /// The session's stream ended (its reader says so as it sees it): the
    /// requests the server acknowledged and never answered fail now (it
    /// may have run them; their replies are lost), each on its own.
    pub(super) fn legacy_ended(&self) {
        let owed = {
            let mut owed = lock(&self.endpoint.1);
            owed.ended = true;
            std::mem::take(&mut owed.replies)
        };
        for key in owed {
            self.inbox.push(Event::Failed(key, self.stream_ended()), 0);
        }
    }

    fn stream_ended(&self) -> Error {
        Error::Transport {
            code: "56".into(),
            detail: format!("the server at {} ended its HTTP+SSE stream, and the session with it", self.url()),
        }
    }

    /// A POST to a session whose stream ended would go nowhere: its
    /// request is refused as from a forgotten session, which the client
    /// answers with a new session and one more try.
    pub(super) fn check_legacy_alive(&self) -> Result<()> {
        match lock(&self.endpoint.1).ended {
            true => Err(Error::SessionExpired),
            false => Ok(()),
        }
    }

    /// The server acknowledged the request `key`: its reply is owed on
    /// the stream. An error when the stream has ended meanwhile.
    pub(super) fn legacy_owes(&self, key: Option<IdKey>) -> Result<()> {
        let mut owed = lock(&self.endpoint.1);
        if let Some(at) = key.as_ref().and_then(|key| owed.early.iter().position(|k| k == key)) {
            owed.early.remove(at);
            return Ok(());
        }
        if owed.ended {
            return Err(self.stream_ended());
        }
        if owed.replies.len() == OWED_KEPT {
            owed.replies.remove(0);
        }
        owed.replies.extend(key);
        Ok(())
    }

    /// The stream brought the reply to `key`.
    pub(super) fn legacy_paid(&self, key: &IdKey) {
        let mut owed = lock(&self.endpoint.1);
        match owed.replies.iter().position(|k| k == key) {
            Some(at) => drop(owed.replies.remove(at)),
            None => {
                if owed.early.len() == EARLY_KEPT {
                    owed.early.remove(0);
                }
                owed.early.push(key.clone());
            }
        }
    }

    /// Whether a POST must first open the stream (`transport_kind = "sse"`).
    pub(super) fn must_open_legacy(&self) -> bool {
        self.options.kind == Kind::Sse && !self.is_legacy()
    }

    /// Whether an `initialize` POST refused with `status` is worth trying
    /// as HTTP+SSE.
    pub(super) fn may_fall_back(&self, status: u16) -> bool {
        self.options.kind == Kind::Auto && matches!(status, 400 | 404 | 405) && !self.is_legacy()
    }

    /// Opens the session's stream and waits (within `timeout`) for its
    /// `endpoint` event; the stream then goes to the poll thread.
    pub(super) fn open_legacy(&self, timeout: Duration) -> Result<()> {
        let url = lock(&self.url).clone();
        let (response, socket) = self.get_stream(None)?;
        let status = response.status().as_u16();
        let no_stream = || Error::Transport {
            code: status.to_string(),
            detail: format!("the server at {url} opened no HTTP+SSE stream (HTTP {status}, not text/event-stream)"),
        };
        // A refusal reads as a POST's would: a 401 is a login's to answer.
        if !(200..=299).contains(&status) {
            return Err(self.failure_body(status, response, None).err().unwrap_or_else(no_stream));
        }
        if status != 200 || !is_event_stream(&response) {
            return Err(no_stream());
        }
        let mut stream = ReplyStream::new(self, response, None).on_socket(socket).legacy();
        let deadline = Instant::now() + timeout;
        let named = match pausing_at(deadline, || stream.endpoint()) {
            Ok(Some(named)) => named,
            Ok(None) | Err(StreamError::Broken | StreamError::TooLarge) => {
                return Err(Error::Transport {
                    code: "56".into(),
                    detail: format!("the HTTP+SSE stream of {url} ended before its endpoint event"),
                })
            }
            Err(StreamError::Interrupted) => return Err(Error::Interrupted { what: String::new() }),
            Err(StreamError::Paused) => {
                return Err(Error::Transport {
                    code: "28".into(),
                    detail: format!(
                        "the HTTP+SSE stream of {url} named no endpoint within {} s (opts.connect_timeout)",
                        seconds(self.options.connect_timeout)
                    ),
                })
            }
        };
        *lock(&self.endpoint.0) = Some(same_origin(&url, &named)?);
        if let Some(shared) = self.me.upgrade() {
            shared.spawn(move |shared| listener::watch(&shared, stream));
        }
        Ok(())
    }
}

/// The endpoint an `endpoint` event names (a path, or a whole URL),
/// resolved against the stream's URL; refused on another origin.
fn same_origin(stream_url: &str, named: &str) -> Result<String> {
    let refuse = |why: &str| Error::Transport {
        code: "8".into(),
        detail: format!("the HTTP+SSE server at {stream_url} named {named:?} as its message endpoint, {why}"),
    };
    let base = url::Url::parse(stream_url).map_err(|_| refuse("and its own URL does not parse"))?;
    let endpoint = base.join(named).map_err(|_| refuse("which is not a URL"))?;
    if endpoint.origin() != base.origin() {
        return Err(refuse(
            "on another origin: refused, since your headers and credentials stay with the origin they were given for",
        ));
    }
    Ok(endpoint.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_endpoint_is_resolved_against_the_stream_and_kept_to_its_origin() {
        let url = "https://mcp.example/sse";
        assert_eq!(same_origin(url, "/messages?sessionId=1").unwrap(), "https://mcp.example/messages?sessionId=1");
        assert_eq!(same_origin(url, "https://mcp.example:443/m").unwrap(), "https://mcp.example/m");
        let e = same_origin(url, "https://evil.example/m").unwrap_err().to_string();
        assert_eq!(
            e,
            "MCP transport failed (8): the HTTP+SSE server at https://mcp.example/sse named \"https://evil.example/m\" as its message endpoint, on another origin: refused, since your headers and credentials stay with the origin they were given for"
        );
        assert!(same_origin(url, "http://mcp.example/m").is_err(), "another scheme is another origin");
    }
}
