//! Sessions written down, and played back without a server.
//!
//! [`Recording`] wraps any transport and appends every message that
//! crosses it to a file, one JSON line each:
//! `{"dir":"send"|"recv","msg":{...},"t":SECONDS}`. Only messages are
//! written, never HTTP headers, so an API key in `opts.headers` stays out of
//! the file. Pings the transport answers on its own (a server's `ping`,
//! answered at once by whoever reads it, the poll thread or a waiting
//! call) never reach the session and are not written: a replay has no
//! server to ping it.
//!
//! [`Replay`] is a transport whose server is such a file. A request is
//! answered with the reply recorded for the same method and params (ids
//! rewritten to the new request's); what the server sent between that
//! request and the next one (notifications, server requests for Lua's
//! handlers) comes with it, in its order, except progress, which goes with
//! the request whose token it carries. Requests recorded several times are
//! answered in their order, the last answer repeating; an attempt that got
//! no reply (a request resent in a new session, one given up on) is never
//! an answer. `initialize` is matched by its method alone, since the
//! client's name and capabilities may differ from the recording's. Params
//! are compared without `_meta` (progress tokens differ from run to run);
//! a recorded progress token is rewritten to the new request's in the
//! notifications that carry it.

use std::collections::VecDeque;
use std::fs::File;
use std::io::Write;
use std::time::{Duration, Instant};

use std::sync::{Arc, Mutex};

use crate::codec::{self, Json};
use crate::error::{Error, Result};
use crate::private_file;
use crate::protocol::{classify, IdKey, Kind};
use crate::transport::doorbell::Doorbell;
use crate::transport::{Received, Transport};

/// Appends the messages of a session to a file, then hands them on.
pub struct Recording {
    inner: Box<dyn Transport>,
    file: File,
    start: Instant,
}

/// Opens `path` for appending, created if missing. A recording holds
/// tool arguments and results, which may be secrets: it is created
/// readable by its owner only (0600), never through a symbolic link
/// (someone else's link would send it wherever they point), and only a
/// regular file of this user's is appended to. The open does not block
/// (a FIFO planted at the path would hold `mcp.new` for ever) and the
/// check is made on what was opened, not on the path.
pub fn open_for_recording(path: &str) -> Result<File> {
    let fail = |why: String| Error::BadInput(format!("mcp.new: cannot open opts.record {path}: {why}"));
    let file = private_file::open_for_append(std::path::Path::new(path)).map_err(|e| {
        if private_file::is_link_refused(&e) {
            fail("it is a symbolic link; give the file's own path".into())
        } else {
            fail(e.to_string())
        }
    })?;
    let metadata = file.metadata().map_err(|e| fail(e.to_string()))?;
    if !metadata.file_type().is_file() {
        return Err(fail("it is not a regular file".into()));
    }
    if let Some(owner) = private_file::other_owner(&file) {
        return Err(fail(format!("it belongs to another user ({owner})")));
    }
    // One made before (by hand, or by an older version) is ours to close.
    private_file::make_private(&file).map_err(|e| fail(e.to_string()))?;
    Ok(file)
}

impl Recording {
    /// `start` is when the client was made: times run on across the
    /// sessions of one client (a restarted server).
    pub fn open(inner: Box<dyn Transport>, path: &str, start: Instant) -> Result<Recording> {
        Ok(Recording { inner, file: open_for_recording(path)?, start })
    }

    /// One line per message, written whole: a recording cut short by a
    /// crash ends at a message boundary. A write that fails (a full disk)
    /// is not the session's failure, and is skipped.
    fn write(&mut self, direction: &str, msg: &Json) {
        // Written around the message's own encoding: no copy of it.
        let t = (self.start.elapsed().as_micros() as f64) / 1e6;
        let mut text = Vec::with_capacity(64);
        text.extend_from_slice(b"{\"dir\":");
        codec::encode_string(direction.as_bytes(), &mut text);
        text.extend_from_slice(b",\"msg\":");
        codec::encode_into(msg, &mut text);
        text.extend_from_slice(b",\"t\":");
        codec::write_float(t, &mut text);
        text.extend_from_slice(b"}\n");
        let _ = self.file.write_all(&text);
    }
}

impl Transport for Recording {
    fn send(&mut self, message: &Json) -> Result<()> {
        self.write("send", message);
        self.inner.send(message)
    }

    fn send_detached(&mut self, request: &Json, timeout: Duration) -> Result<()> {
        self.write("send", request);
        self.inner.send_detached(request, timeout)
    }

    fn send_notice(&mut self, notice: &Json, key: &IdKey, timeout: Duration) -> Result<bool> {
        self.write("send", notice);
        self.inner.send_notice(notice, key, timeout)
    }

    fn send_request(&mut self, request: &Json, headers: &[(String, String)], detached: Option<Duration>) -> Result<()> {
        self.write("send", request);
        self.inner.send_request(request, headers, detached)
    }

    fn always_answers(&self) -> bool {
        self.inner.always_answers()
    }

    fn carries_headers(&self) -> bool {
        self.inner.carries_headers()
    }

    fn last_words(&self) -> Option<String> {
        self.inner.last_words()
    }

    fn receive(&mut self, deadline: Instant) -> Result<Option<Received>> {
        let received = self.inner.receive(deadline)?;
        if let Some(Received::Message(msg)) = &received {
            self.write("recv", msg);
        }
        Ok(received)
    }

    fn queued(&self) -> bool {
        self.inner.queued()
    }

    fn take_dropped(&mut self) -> u64 {
        self.inner.take_dropped()
    }

    fn connect_by(&mut self, deadline: Option<Instant>) {
        self.inner.connect_by(deadline)
    }

    fn established(&mut self, negotiated_version: &str) {
        self.inner.established(negotiated_version)
    }

    fn speak_modern(&mut self) {
        self.inner.speak_modern()
    }

    fn session_id(&self) -> Option<String> {
        self.inner.session_id()
    }

    fn close(&mut self) {
        self.inner.close()
    }
}

/// One recorded request and what came for it.
#[derive(Debug)]
struct Exchange {
    method: Vec<u8>,
    /// The params as text, without `_meta`: what a new request must match.
    params: Vec<u8>,
    id: Json,
    progress_token: Option<Json>,
    /// The reply, and what the server sent before the next request, in
    /// their recorded order.
    then: Vec<Json>,
    used: bool,
}

/// A recording, read once at `mcp.new` and shared by the sessions of one
/// client (a replayed client that restarts starts from the same file).
#[derive(Debug)]
pub struct Recorded {
    exchanges: Vec<Exchange>,
}

impl Recorded {
    /// Reads a recording; a line that is not a recorded message is refused
    /// with its number, since a replay that silently skips one would
    /// answer differently from the session it claims to repeat.
    pub fn read(path: &str) -> Result<Recorded> {
        let text = std::fs::read(path).map_err(|e| Error::BadInput(format!("mcp.replay: cannot read {path}: {e}")))?;
        let mut exchanges: Vec<Exchange> = Vec::new();
        let lines: Vec<&[u8]> = text.split(|&b| b == b'\n').collect();
        for (n, line) in lines.iter().enumerate() {
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            let bad = || Error::BadInput(format!("mcp.replay: {path}:{} is not a recorded message", n + 1));
            let entry = match codec::decode(line) {
                Ok(entry) => entry,
                // A last line with no end: a recording whose writer died
                // mid-line (a full disk). What came before stands.
                Err(_) if n + 1 == lines.len() => break,
                Err(_) => return Err(bad()),
            };
            let (Some(Json::Str(direction)), Some(msg)) = (entry.get("dir"), entry.get("msg")) else {
                return Err(bad());
            };
            match (direction.as_slice(), classify(msg)) {
                (b"send", Kind::ServerRequest) => {
                    // Our request (classify speaks from our side only for
                    // what we receive: a sent message with a method and
                    // an id is a request of ours).
                    let Some(Json::Str(method)) = msg.get("method") else { return Err(bad()) };
                    exchanges.push(Exchange {
                        method: method.clone(),
                        params: params_text(msg.get("params")),
                        id: msg.get("id").cloned().unwrap_or(Json::Null),
                        progress_token: msg
                            .get("params")
                            .and_then(|p| p.get("_meta"))
                            .and_then(|m| m.get("progressToken"))
                            .cloned(),
                        then: Vec::new(),
                        used: false,
                    });
                }
                (b"send", _) => {}
                (b"recv", Kind::Response(_)) => {
                    let id = msg.get("id");
                    // The latest request with this id (ids start over in a
                    // new session) that has no reply yet.
                    let owner = exchanges.iter_mut().rev().find(|e| {
                        Some(&e.id) == id && !e.then.iter().any(|m| m.get("id") == id && m.get("method").is_none())
                    });
                    if let Some(owner) = owner {
                        owner.then.push(msg.clone());
                    }
                }
                (b"recv", _) => {
                    // Progress goes with the request whose token it carries
                    // (several may be in flight); the rest with the last
                    // request sent.
                    let token = msg.get("params").and_then(|p| p.get("progressToken"));
                    let by_token =
                        token.and_then(|t| exchanges.iter().rposition(|e| e.progress_token.as_ref() == Some(t)));
                    let owner = by_token.or(exchanges.len().checked_sub(1));
                    if let Some(owner) = owner.map(|i| &mut exchanges[i]) {
                        owner.then.push(msg.clone());
                    }
                }
                _ => return Err(bad()),
            }
        }
        Ok(Recorded { exchanges })
    }
}

/// Params as compared between a recording and a new request. A request's
/// params may be text written straight from Lua: read back as a tree, so
/// that `_meta` can be left out of both sides alike.
fn params_text(params: Option<&Json>) -> Vec<u8> {
    let tree = match params {
        None => return b"{}".to_vec(),
        Some(Json::Object(_)) => None,
        Some(other) => codec::decode(&codec::encode(other)).ok(),
    };
    match tree.as_ref().or(params) {
        Some(Json::Object(pairs)) => {
            let kept: Vec<_> = pairs.iter().filter(|(k, _)| k != b"_meta").cloned().collect();
            codec::encode(&Json::Object(kept))
        }
        Some(other) => codec::encode(other),
        None => b"{}".to_vec(),
    }
}

impl Exchange {
    /// Whether the server's reply to this request was recorded.
    fn answered(&self) -> bool {
        self.then.iter().any(|m| m.get("method").is_none() && m.get("id") == Some(&self.id))
    }
}

/// A transport whose server is a recording.
pub struct Replay {
    recorded: Arc<Mutex<Recorded>>,
    queue: VecDeque<Json>,
    /// Rung when answers are queued, for `client:fd()`.
    doorbell: Option<Arc<Doorbell>>,
}

impl Replay {
    pub fn new(recorded: Arc<Mutex<Recorded>>, doorbell: Option<Arc<Doorbell>>) -> Replay {
        Replay { recorded, queue: VecDeque::new(), doorbell }
    }
}

impl Transport for Replay {
    fn send(&mut self, message: &Json) -> Result<()> {
        // Notifications and our answers to server requests need nothing.
        let (Some(Json::Str(method)), Some(id)) = (message.get("method"), message.get("id")) else { return Ok(()) };
        let params = params_text(message.get("params"));
        let token = message.get("params").and_then(|p| p.get("_meta")).and_then(|m| m.get("progressToken"));
        let mut recorded = self.recorded.lock().unwrap_or_else(|p| p.into_inner());
        let matches =
            |e: &&mut Exchange| e.method == *method && (method == b"initialize" || e.params == params) && e.answered();
        let chosen = match recorded.exchanges.iter_mut().filter(matches).position(|e| !e.used) {
            Some(i) => recorded.exchanges.iter_mut().filter(matches).nth(i),
            None => recorded.exchanges.iter_mut().filter(matches).last(),
        };
        let Some(exchange) = chosen else {
            return Err(Error::NotRecorded {
                method: String::from_utf8_lossy(method).into_owned(),
                params: String::from_utf8_lossy(&params).into_owned(),
            });
        };
        exchange.used = true;
        for msg in &exchange.then {
            let mut msg = msg.clone();
            if msg.get("method").is_none() && msg.get("id") == Some(&exchange.id) {
                if let Some(slot) = msg.get_mut("id") {
                    *slot = id.clone();
                }
            }
            if let (Some(old), Some(new)) = (&exchange.progress_token, token) {
                if let Some(slot) = msg.get_mut("params").and_then(|p| p.get_mut("progressToken")) {
                    if slot == old {
                        *slot = new.clone();
                    }
                }
            }
            self.queue.push_back(msg);
        }
        if let Some(bell) = &self.doorbell {
            bell.ring();
        }
        Ok(())
    }

    fn receive(&mut self, deadline: Instant) -> Result<Option<Received>> {
        if let Some(msg) = self.queue.pop_front() {
            return Ok(Some(Received::Message(msg)));
        }
        // The recording holds nothing more for what is waited for (it
        // ended before the reply came): wait out the time, as a silent
        // server would make us.
        std::thread::sleep(deadline.saturating_duration_since(Instant::now()));
        Ok(None)
    }

    fn queued(&self) -> bool {
        !self.queue.is_empty()
    }

    fn close(&mut self) {
        self.queue.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn recording(lines: &[&str]) -> Arc<Mutex<Recorded>> {
        let path = std::env::temp_dir().join(format!("lua-mcp-replay-{}-{}.jsonl", std::process::id(), lines.len()));
        std::fs::write(&path, lines.join("\n")).unwrap();
        let recorded = Recorded::read(path.to_str().unwrap()).unwrap();
        std::fs::remove_file(&path).unwrap();
        Arc::new(Mutex::new(recorded))
    }

    fn next(replay: &mut Replay) -> String {
        match replay.receive(Instant::now()).unwrap() {
            Some(Received::Message(m)) => String::from_utf8(codec::encode(&m)).unwrap(),
            _ => "nothing".into(),
        }
    }

    #[test]
    fn a_request_gets_its_recorded_reply_under_the_new_id_with_what_came_before_the_next_request() {
        let mut replay = Replay::new(
            recording(&[
                r#"{"dir":"send","msg":{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"a"}},"t":0}"#,
                r#"{"dir":"send","msg":{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"a","_meta":{"progressToken":7}}},"t":0}"#,
                r#"{"dir":"recv","msg":{"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":1,"progressToken":7}},"t":0.1}"#,
                r#"{"dir":"recv","msg":{"jsonrpc":"2.0","id":7,"result":{"n":1}},"t":0.2}"#,
                r#"{"dir":"recv","msg":{"jsonrpc":"2.0","method":"notifications/message","params":{"data":"x"}},"t":0.3}"#,
                r#"{"dir":"send","msg":{"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"a"}},"t":1}"#,
                r#"{"dir":"recv","msg":{"jsonrpc":"2.0","id":8,"result":{"n":2}},"t":1.1}"#,
                r#"{"dir":"send","msg":{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"a"}},"t":2}"#,
            ]),
            None,
        );
        let call = |id: i64| {
            Json::object([
                ("jsonrpc", Json::str("2.0")),
                ("id", Json::Int(id)),
                ("method", Json::str("tools/call")),
                (
                    "params",
                    Json::object([
                        ("name", Json::str("a")),
                        ("_meta", Json::object([("progressToken", Json::Int(id))])),
                    ]),
                ),
            ])
        };
        replay.send(&call(1)).unwrap();
        assert_eq!(
            next(&mut replay),
            r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":1,"progressToken":1}}"#
        );
        assert_eq!(next(&mut replay), r#"{"jsonrpc":"2.0","id":1,"result":{"n":1}}"#);
        assert_eq!(next(&mut replay), r#"{"jsonrpc":"2.0","method":"notifications/message","params":{"data":"x"}}"#);
        replay.send(&call(2)).unwrap();
        assert_eq!(next(&mut replay), r#"{"jsonrpc":"2.0","id":2,"result":{"n":2}}"#);
        // Both recorded answers used: the last one repeats.
        replay.send(&call(3)).unwrap();
        assert_eq!(next(&mut replay), r#"{"jsonrpc":"2.0","id":3,"result":{"n":2}}"#);
    }

    #[test]
    fn an_answer_queued_from_the_recording_makes_the_descriptor_readable() {
        let bell = Arc::new(Doorbell::new());
        let fd = bell.arm().unwrap();
        let mut replay = Replay::new(
            recording(&[
                r#"{"dir":"send","msg":{"jsonrpc":"2.0","id":1,"method":"ping"},"t":0}"#,
                r#"{"dir":"recv","msg":{"jsonrpc":"2.0","id":1,"result":{}},"t":0.1}"#,
            ]),
            Some(bell.clone()),
        );
        let readable = || {
            let mut poll = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
            // SAFETY: one live pollfd, no wait.
            unsafe { libc::poll(&mut poll, 1, 0) == 1 }
        };
        assert!(!readable());
        let ping = Json::object([("jsonrpc", Json::str("2.0")), ("id", Json::Int(5)), ("method", Json::str("ping"))]);
        replay.send(&ping).unwrap();
        assert!(readable());
        assert_eq!(next(&mut replay), r#"{"jsonrpc":"2.0","id":5,"result":{}}"#);
    }

    #[test]
    fn a_request_the_recording_lacks_is_refused_with_its_method_and_params() {
        let mut replay = Replay::new(recording(&[]), None);
        let request = Json::object([
            ("jsonrpc", Json::str("2.0")),
            ("id", Json::Int(1)),
            ("method", Json::str("resources/read")),
            ("params", Json::object([("uri", Json::str("file:///x"))])),
        ]);
        let err = replay.send(&request).unwrap_err();
        assert_eq!(err.to_string(), r#"MCP replay: no recorded reply for resources/read {"uri":"file:///x"}"#);
    }
}
