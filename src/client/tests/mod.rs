//! The client core against a scripted server: every rule of the one
//! request path, on each way a request can be made. Here, the scripted
//! transport and host; the rules of the path in `paths`, what happens
//! beside an event loop (the queue, logins, the handshake's steps) in
//! `beside`, the 2026-07-28 rules and tasks on a modern server in `tasks`.

mod beside;
mod paths;
mod tasks;

use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::Rc;
use std::time::{Duration, Instant};

use super::{Client, Host, Limits, Operation, Request, Shape};
use crate::codec::{decode, encode, Json};
use crate::era::{EraChoice, Verdict};
use crate::error::Error;
use crate::protocol::{self, id_key, IdKey};
use crate::session::Peer;
use crate::transport::{Received, Transport};

/// What a scripted server does with each request it receives.
pub(super) type Script = Box<dyn FnMut(&Json) -> Vec<String>>;

/// A transport that answers from a script, and records what was sent.
pub(super) struct Scripted {
    script: Rc<RefCell<Script>>,
    sent: Rc<RefCell<Vec<String>>>,
    /// What the server wrote and the client has not read; a test may
    /// add to it, as a server answering late would.
    replies: Rc<RefCell<VecDeque<Received>>>,
    /// Fails every send after this many, as a dead server would.
    dies_after: Option<usize>,
    /// The server is gone: receiving fails.
    dead: Rc<std::cell::Cell<bool>>,
    /// Notices whose delivery is reported later, by the test (as an HTTP
    /// POST from a thread of its own would be), by their keys; None: each
    /// is delivered as it is sent.
    notices: Option<Rc<RefCell<Vec<IdKey>>>>,
}

impl Scripted {
    /// Sends `message`; a scripted "404" (the server forgot the session)
    /// comes back as the send's error when the sender waits on the
    /// transport, and later, as the request's own failure, when not (an
    /// HTTP POST from a thread of its own).
    fn deliver(&mut self, message: &Json, detached: bool) -> crate::error::Result<()> {
        if self.dies_after == Some(0) {
            return Err(Error::Transport { code: "1".into(), detail: "MCP server exited (scripted)".into() });
        }
        self.dies_after = self.dies_after.map(|n| n - 1);
        self.sent.borrow_mut().push(String::from_utf8(encode(message)).unwrap());
        for line in (self.script.borrow_mut())(message) {
            let refusal = match line.as_str() {
                "404" => Some(Error::SessionExpired),
                "401" => Some(refused()),
                _ => None,
            };
            if let Some(refusal) = refusal {
                if !detached {
                    return Err(refusal);
                }
                let key = message.get("id").and_then(id_key);
                self.replies.borrow_mut().push_back(Received::Failed(key, refusal));
                continue;
            }
            self.replies.borrow_mut().push_back(Received::Message(decode(line.as_bytes()).unwrap()));
        }
        Ok(())
    }
}

impl Transport for Scripted {
    fn send(&mut self, message: &Json) -> crate::error::Result<()> {
        self.deliver(message, false)
    }

    fn send_detached(&mut self, message: &Json, _timeout: Duration) -> crate::error::Result<()> {
        self.deliver(message, true)
    }

    fn send_notice(&mut self, notice: &Json, key: &IdKey, _timeout: Duration) -> crate::error::Result<bool> {
        self.deliver(notice, true)?;
        let Some(notices) = &self.notices else { return Ok(true) };
        notices.borrow_mut().push(key.clone());
        Ok(false)
    }

    fn queued(&self) -> bool {
        !self.replies.borrow().is_empty()
    }

    fn receive(&mut self, _deadline: Instant) -> crate::error::Result<Option<Received>> {
        if self.dead.get() {
            return Err(Error::Transport { code: "3".into(), detail: "MCP server exited (scripted)".into() });
        }
        Ok(self.replies.borrow_mut().pop_front())
    }

    fn close(&mut self) {}
}

/// A host that counts ids from 1 and keeps what it is told.
pub(super) struct TestHost {
    next: i64,
    opened: usize,
    script: Rc<RefCell<Script>>,
    sent: Rc<RefCell<Vec<String>>>,
    dies_after: Option<usize>,
    server_name: Option<Json>,
    notes: Vec<Json>,
    replies: Rc<RefCell<VecDeque<Received>>>,
    dead: Rc<std::cell::Cell<bool>>,
    era: Option<Verdict>,
    /// A login beside the host: polls left until it ends, and what it
    /// makes true when it does.
    login: Option<usize>,
    logins: usize,
    authorized: Rc<std::cell::Cell<bool>>,
    /// The login ends without credentials.
    fail_login: bool,
    /// See [`Scripted::notices`].
    notices: Option<Rc<RefCell<Vec<IdKey>>>>,
}

impl Peer for TestHost {
    fn notification(&mut self, msg: Json) {
        self.notes.push(msg);
    }
    fn request(&mut self, msg: &Json) -> Json {
        protocol::answer_server_request(msg).unwrap_or(Json::Null)
    }
}

impl Host for TestHost {
    type Error = Error;
    fn next_id(&mut self) -> Result<Json, Error> {
        self.next += 1;
        Ok(Json::Int(self.next))
    }
    fn initialize_request(&mut self, id: Json, capabilities: Json) -> Result<Json, Error> {
        let info = Json::object([("name", Json::str("test"))]);
        Ok(protocol::request(
            id,
            "initialize",
            protocol::initialize_params(Json::str("2025-06-18"), capabilities, info),
        ))
    }
    fn open(&mut self) -> Result<Box<dyn Transport>, Error> {
        self.opened += 1;
        // A new server has written nothing yet: what the old one wrote
        // went with its transport.
        self.replies.borrow_mut().clear();
        Ok(Box::new(Scripted {
            script: self.script.clone(),
            sent: self.sent.clone(),
            replies: self.replies.clone(),
            dies_after: self.dies_after.take(),
            dead: self.dead.clone(),
            notices: self.notices.clone(),
        }))
    }
    fn client_info(&mut self) -> Result<Json, Error> {
        Ok(Json::object([("name", Json::str("test")), ("version", Json::str("1"))]))
    }
    fn settle_error(&mut self, raised: &Error) -> Error {
        raised.clone()
    }
    fn begin_login(&mut self, _refusal: &Error, _again: bool) -> Result<bool, Error> {
        self.logins += 1;
        self.login = Some(2);
        Ok(true)
    }
    fn login_ended(&mut self) -> Result<Option<bool>, Error> {
        match self.login {
            Some(0) => {
                self.login = None;
                self.authorized.set(!self.fail_login);
                Ok(Some(!self.fail_login))
            }
            Some(n) => {
                self.login = Some(n - 1);
                Ok(None)
            }
            None => Ok(Some(false)),
        }
    }
    fn established(&mut self, result: &Json, _session_id: Option<String>, era: &Verdict) -> Result<(), Error> {
        self.server_name = result.get("serverInfo").and_then(|i| i.get("name")).cloned();
        self.era = Some(era.clone());
        Ok(())
    }
}

pub(super) fn host(script: impl FnMut(&Json) -> Vec<String> + 'static) -> TestHost {
    TestHost {
        next: 0,
        opened: 0,
        script: Rc::new(RefCell::new(Box::new(script))),
        sent: Rc::new(RefCell::new(Vec::new())),
        dies_after: None,
        server_name: None,
        notes: Vec::new(),
        replies: Rc::default(),
        dead: Rc::default(),
        era: None,
        login: None,
        logins: 0,
        authorized: Rc::default(),
        fail_login: false,
        notices: None,
    }
}

/// What a server says when it wants credentials.
pub(super) fn refused() -> Error {
    let hint = "set opts.auth";
    Error::Unauthorized { status: 401, url: "http://scripted".into(), www_authenticate: None, reason: None, hint }
}

/// A server that answers the handshake and keeps every other request
/// for the test to answer.
pub(super) fn holding(msg: &Json) -> Vec<String> {
    if msg.get("method") == Some(&Json::str("initialize")) {
        plain(msg)
    } else {
        vec![]
    }
}

pub(super) fn answer(h: &TestHost, id: i64, text: &str) {
    let reply = format!(r#"{{"id":{id},"result":{{"text":"{text}"}}}}"#);
    h.replies.borrow_mut().push_back(Received::Message(decode(reply.as_bytes()).unwrap()));
}

pub(super) fn text_of(outcome: Option<Result<Json, Error>>) -> String {
    match outcome {
        Some(Ok(result)) => String::from_utf8_lossy(&encode(result.get("text").unwrap())).into_owned(),
        Some(Err(e)) => e.to_string(),
        None => "in flight".into(),
    }
}

/// A blocking request, as `client:request` makes it.
pub(super) fn request(c: &mut Client, h: &mut TestHost, method: &str, what: &str) -> Result<Json, Error> {
    c.run(h, Request::new(method, Json::Object(vec![]), Rc::from(what)))
}

/// An async tools/call, as `client:call_async` makes it.
pub(super) fn start(c: &mut Client, h: &mut TestHost, what: &str, timeout: Option<Duration>) -> Operation {
    let request = Request::new("tools/call", Json::Object(vec![]), Rc::from(what));
    c.start(h, request.limits(Limits { timeout, ..Limits::default() }).asynchronous()).unwrap()
}

/// Waits for `op` (five seconds at most) and takes its outcome.
pub(super) fn settle(c: &mut Client, h: &mut TestHost, op: &mut Operation) -> Option<Result<Json, Error>> {
    c.wait(h, op, far()).unwrap();
    op.take_outcome()
}

pub(super) fn settled(c: &mut Client, h: &mut TestHost, op: &mut Operation) -> bool {
    c.poll(h, op).unwrap()
}

pub(super) fn far() -> Instant {
    Instant::now() + Duration::from_secs(5)
}

pub(super) fn id_of(msg: &Json) -> String {
    String::from_utf8(encode(msg.get("id").unwrap_or(&Json::Null))).unwrap()
}

/// A well-behaved server: initialize, and an echo of the method name.
pub(super) fn plain(msg: &Json) -> Vec<String> {
    let Some(Json::Str(method)) = msg.get("method") else { return vec![] };
    if msg.get("id").is_none() {
        return vec![];
    }
    let id = id_of(msg);
    if method == b"initialize" {
        return vec![format!(
            r#"{{"id":{id},"result":{{"protocolVersion":"2025-06-18","serverInfo":{{"name":"scripted"}}}}}}"#
        )];
    }
    vec![format!(r#"{{"id":{id},"result":{{"method":"{}"}}}}"#, String::from_utf8_lossy(method))]
}

pub(super) fn client() -> Client {
    let mut client = Client::new(Duration::from_millis(50), Duration::from_millis(50), Json::Object(vec![]));
    client.choose_era(EraChoice::Legacy);
    client
}
