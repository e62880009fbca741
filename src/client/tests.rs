//! The client core against a scripted server: every rule of the one
//! request path, on each way a request can be made.

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
type Script = Box<dyn FnMut(&Json) -> Vec<String>>;

/// A transport that answers from a script, and records what was sent.
struct Scripted {
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
struct TestHost {
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

fn host(script: impl FnMut(&Json) -> Vec<String> + 'static) -> TestHost {
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
fn refused() -> Error {
    let hint = "set opts.auth";
    Error::Unauthorized { status: 401, url: "http://scripted".into(), www_authenticate: None, reason: None, hint }
}

/// A server that answers the handshake and keeps every other request
/// for the test to answer.
fn holding(msg: &Json) -> Vec<String> {
    if msg.get("method") == Some(&Json::str("initialize")) {
        plain(msg)
    } else {
        vec![]
    }
}

fn answer(h: &TestHost, id: i64, text: &str) {
    let reply = format!(r#"{{"id":{id},"result":{{"text":"{text}"}}}}"#);
    h.replies.borrow_mut().push_back(Received::Message(decode(reply.as_bytes()).unwrap()));
}

fn text_of(outcome: Option<Result<Json, Error>>) -> String {
    match outcome {
        Some(Ok(result)) => String::from_utf8_lossy(&encode(result.get("text").unwrap())).into_owned(),
        Some(Err(e)) => e.to_string(),
        None => "in flight".into(),
    }
}

/// A blocking request, as `client:request` makes it.
fn request(c: &mut Client, h: &mut TestHost, method: &str, what: &str) -> Result<Json, Error> {
    c.run(h, Request::new(method, Json::Object(vec![]), Rc::from(what)))
}

/// An async tools/call, as `client:call_async` makes it.
fn start(c: &mut Client, h: &mut TestHost, what: &str, timeout: Option<Duration>) -> Operation {
    let request = Request::new("tools/call", Json::Object(vec![]), Rc::from(what));
    c.start(h, request.limits(Limits { timeout, ..Limits::default() }).asynchronous()).unwrap()
}

/// Waits for `op` (five seconds at most) and takes its outcome.
fn settle(c: &mut Client, h: &mut TestHost, op: &mut Operation) -> Option<Result<Json, Error>> {
    c.wait(h, op, far()).unwrap();
    op.take_outcome()
}

fn settled(c: &mut Client, h: &mut TestHost, op: &mut Operation) -> bool {
    c.poll(h, op).unwrap()
}

fn far() -> Instant {
    Instant::now() + Duration::from_secs(5)
}

fn id_of(msg: &Json) -> String {
    String::from_utf8(encode(msg.get("id").unwrap_or(&Json::Null))).unwrap()
}

/// A well-behaved server: initialize, and an echo of the method name.
fn plain(msg: &Json) -> Vec<String> {
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

fn client() -> Client {
    let mut client = Client::new(Duration::from_millis(50), Duration::from_millis(50), Json::Object(vec![]));
    client.choose_era(EraChoice::Legacy);
    client
}

#[test]
fn the_handshake_runs_once_before_the_first_request() {
    let mut h = host(plain);
    let mut c = client();
    let result = request(&mut c, &mut h, "tools/call", "tools/call x").unwrap();
    assert_eq!(result.get("method"), Some(&Json::str("tools/call")));
    request(&mut c, &mut h, "ping", "ping").unwrap();
    let sent = h.sent.borrow();
    assert_eq!(sent.len(), 4);
    assert!(sent[0].contains(r#""id":1,"jsonrpc":"2.0","method":"initialize""#), "{}", sent[0]);
    assert_eq!(sent[1], r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
    assert!(sent[2].starts_with(r#"{"id":2,"jsonrpc":"2.0","method":"tools/call""#), "{}", sent[2]);
    assert!(sent[3].starts_with(r#"{"id":3,"#), "{}", sent[3]);
    assert_eq!(h.opened, 1);
    assert_eq!(h.server_name, Some(Json::str("scripted")));
}

#[test]
fn a_version_the_client_does_not_speak_is_refused() {
    let mut h = host(|msg| {
        let id = id_of(msg);
        vec![format!(r#"{{"id":{id},"result":{{"protocolVersion":"1999-01-01"}}}}"#)]
    });
    let err = request(&mut client(), &mut h, "tools/list", "tools/list").unwrap_err();
    assert_eq!(
        err.to_string(),
        "MCP initialize failed: the server chose protocol version 1999-01-01, which this client does not speak \
         (2025-11-25, 2025-06-18, 2025-03-26, 2024-11-05)"
    );
}

#[test]
fn replies_are_matched_by_id_whatever_comes_first() {
    let mut h = host(|msg| {
        let mut out = vec![];
        if msg.get("method") == Some(&Json::str("tools/call")) {
            out.push(r#"{"id":999,"result":{"method":"not yours"}}"#.to_string());
            out.push(r#"{"jsonrpc":"2.0","method":"notifications/message","params":{}}"#.to_string());
        }
        out.extend(plain(msg));
        out
    });
    let mut c = client();
    let result = request(&mut c, &mut h, "tools/call", "tools/call x").unwrap();
    assert_eq!(result.get("method"), Some(&Json::str("tools/call")));
    assert_eq!(h.notes.len(), 1);
}

/// A server whose tools/list goes a -> b -> b: the repeated cursor ends it.
fn looping_pages(msg: &Json) -> Vec<String> {
    if msg.get("method") != Some(&Json::str("tools/list")) {
        return plain(msg);
    }
    let id = id_of(msg);
    let next = match msg.get("params").and_then(|p| p.get("cursor")) {
        None => r#""a""#,
        Some(_) => r#""b""#,
    };
    vec![format!(r#"{{"id":{id},"result":{{"tools":[],"nextCursor":{next}}}}}"#)]
}

fn page_count(outcome: Json) -> usize {
    match outcome {
        Json::Array(pages) => pages.len(),
        other => panic!("not pages: {other:?}"),
    }
}

#[test]
fn pages_are_followed_and_a_repeated_cursor_ends_them() {
    let mut h = host(looping_pages);
    let listing = Request::new("tools/list", Json::Object(vec![]), Rc::from("tools/list")).shape(Shape::Pages);
    // no cursor -> "a" -> "b" -> "b" again: three pages, then stop
    assert_eq!(page_count(client().run(&mut h, listing).unwrap()), 3);
}

#[test]
fn a_dead_transport_fails_its_request_and_the_next_one_starts_a_new_session() {
    let mut h = host(plain);
    // initialize and initialized go through; the request's send fails.
    h.dies_after = Some(2);
    let mut c = client();
    let err = request(&mut c, &mut h, "tools/call", "tools/call x").unwrap_err();
    assert_eq!(err.to_string(), "MCP transport failed (1): MCP server exited (scripted)");
    assert!(request(&mut c, &mut h, "tools/call", "tools/call x").is_ok());
    assert_eq!(h.opened, 2);
}

/// A server that forgets the session at the first tools/call (404).
fn forgets_at_first_call() -> impl FnMut(&Json) -> Vec<String> {
    let mut calls = 0;
    move |msg| {
        if msg.get("method") == Some(&Json::str("tools/call")) {
            calls += 1;
            if calls == 1 {
                return vec!["404".to_string()];
            }
        }
        plain(msg)
    }
}

/// The tools/call messages sent: the same request twice, with a fresh id
/// on the new session.
fn assert_sent_twice_with_fresh_ids(h: &TestHost) {
    let sent = h.sent.borrow();
    let calls: Vec<&String> = sent.iter().filter(|s| s.contains("tools/call")).collect();
    assert_eq!(calls.len(), 2);
    assert!(calls[0].starts_with(r#"{"id":2,"#) && calls[1].starts_with(r#"{"id":4,"#), "{calls:?}");
    assert_eq!(calls[0][8..], calls[1][8..]);
    assert_eq!(h.opened, 2);
}

#[test]
fn a_forgotten_http_session_gets_one_new_session_and_the_request_once_more() {
    let mut h = host(forgets_at_first_call());
    let mut c = client();
    let call = Request::new("tools/call", Json::object([("big", Json::str("x"))]), Rc::from("tools/call x"));
    let result = c.run(&mut h, call).unwrap();
    assert_eq!(result.get("method"), Some(&Json::str("tools/call")));
    assert_sent_twice_with_fresh_ids(&h);
}

#[test]
fn an_async_request_whose_session_expired_is_sent_once_more_on_a_new_one() {
    let mut h = host(forgets_at_first_call());
    let mut c = client();
    let mut op = start(&mut c, &mut h, "tools/call x", None);
    let outcome = settle(&mut c, &mut h, &mut op).unwrap().unwrap();
    assert_eq!(outcome.get("method"), Some(&Json::str("tools/call")));
    assert_sent_twice_with_fresh_ids(&h);
}

#[test]
fn a_call_with_its_own_timeout_gets_the_same_restart() {
    let mut h = host(forgets_at_first_call());
    let mut c = client();
    let call = Request::new("tools/call", Json::Object(vec![]), Rc::from("tools/call x"))
        .limits(Limits { timeout: Some(Duration::from_secs(5)), ..Limits::default() });
    let result = c.run(&mut h, call).unwrap();
    assert_eq!(result.get("method"), Some(&Json::str("tools/call")));
    assert_sent_twice_with_fresh_ids(&h);
}

/// A server with two pages of tools that forgets the session when it is
/// asked for page 2 the first time.
fn forgets_while_paging() -> impl FnMut(&Json) -> Vec<String> {
    let mut lists = 0;
    move |msg| {
        if msg.get("method") != Some(&Json::str("tools/list")) {
            return plain(msg);
        }
        lists += 1;
        if lists == 2 {
            return vec!["404".to_string()];
        }
        let id = id_of(msg);
        match msg.get("params").and_then(|p| p.get("cursor")) {
            None => vec![format!(r#"{{"id":{id},"result":{{"tools":[{{"name":"a"}}],"nextCursor":"2"}}}}"#)],
            Some(_) => vec![format!(r#"{{"id":{id},"result":{{"tools":[{{"name":"b"}}]}}}}"#)],
        }
    }
}

/// Page 1, page 2 (forgotten), then page 1 and page 2 on the new session.
fn assert_listed_again_from_page_one(h: &TestHost) {
    assert_eq!(h.opened, 2);
    let sent = h.sent.borrow();
    let lists: Vec<&String> = sent.iter().filter(|s| s.contains("tools/list")).collect();
    assert_eq!(lists.len(), 4);
    assert!(lists[1].contains(r#""cursor":"2""#), "{lists:?}");
    assert!(lists[2].ends_with(r#""params":{}}"#), "{lists:?}");
    assert!(lists[3].contains(r#""cursor":"2""#), "{lists:?}");
}

fn tool_listing() -> Request {
    Request::new("tools/list", Json::Object(vec![]), Rc::from("tools/list")).shape(Shape::Pages)
}

#[test]
fn a_session_forgotten_while_paging_restarts_the_listing_from_the_first_page() {
    let mut h = host(forgets_while_paging());
    assert_eq!(page_count(client().run(&mut h, tool_listing()).unwrap()), 2);
    assert_listed_again_from_page_one(&h);
}

#[test]
fn an_async_listing_follows_pages_by_the_blocking_rule_and_restarts_from_page_one_after_a_404() {
    let mut h = host(forgets_while_paging());
    let mut c = client();
    let mut op = c.start(&mut h, tool_listing().detached()).unwrap();
    assert_eq!(page_count(settle(&mut c, &mut h, &mut op).unwrap().unwrap()), 2);
    assert_listed_again_from_page_one(&h);
    // and the repeated-cursor rule, as the blocking listing has it
    let (mut h, mut c) = (host(looping_pages), client());
    let mut op = c.start(&mut h, tool_listing().detached()).unwrap();
    assert_eq!(page_count(settle(&mut c, &mut h, &mut op).unwrap().unwrap()), 3);
}

/// A server whose one tool promises a number and returns a string.
fn breaks_its_output_schema(msg: &Json) -> Vec<String> {
    let id = id_of(msg);
    match msg.get("method") {
        Some(m) if *m == Json::str("tools/list") => vec![format!(
            r#"{{"id":{id},"result":{{"tools":[{{"name":"weather","inputSchema":{{"type":"object"}},"outputSchema":{{"type":"object","properties":{{"t":{{"type":"number"}}}}}}}}]}}}}"#
        )],
        Some(m) if *m == Json::str("tools/call") => {
            vec![format!(r#"{{"id":{id},"result":{{"content":[],"structuredContent":{{"t":"warm"}}}}}}"#)]
        }
        _ => plain(msg),
    }
}

#[test]
fn a_result_that_breaks_its_output_schema_fails_on_every_path() {
    let mut h = host(breaks_its_output_schema);
    let mut c = client();
    c.run(
        &mut h,
        Request::new("tools/list", Json::Object(vec![]), Rc::from("tools/list")).shape(Shape::Tools { refresh: false }),
    )
    .unwrap();
    let expected = "MCP tools/call weather: structuredContent does not match the tool's outputSchema: \
                    \"warm\" is not of type \"number\" at /t";
    let call = || {
        Request::new("tools/call", Json::object([("name", Json::str("weather"))]), Rc::from("tools/call weather"))
            .shape(Shape::ToolCall(None))
    };
    // blocking, blocking with its own timeout, async
    assert_eq!(c.run(&mut h, call()).unwrap_err().to_string(), expected);
    let limited = call().limits(Limits { timeout: Some(Duration::from_secs(5)), ..Limits::default() });
    assert_eq!(c.run(&mut h, limited).unwrap_err().to_string(), expected);
    let mut op = c.start(&mut h, call().detached()).unwrap();
    assert_eq!(settle(&mut c, &mut h, &mut op).unwrap().unwrap_err().to_string(), expected);
}

#[test]
fn a_call_on_a_tool_list_the_server_changed_waits_for_the_list_again() {
    let mut lists = 0;
    let mut h = host(move |msg| {
        let id = id_of(msg);
        match msg.get("method") {
            Some(m) if *m == Json::str("tools/list") => {
                lists += 1;
                vec![format!(r#"{{"id":{id},"result":{{"tools":[{{"name":"v{lists}"}}]}}}}"#)]
            }
            Some(m) if *m == Json::str("tools/call") => vec![
                format!(r#"{{"id":{id},"result":{{"content":[]}}}}"#),
                r#"{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}"#.to_string(),
            ],
            _ => plain(msg),
        }
    });
    let mut c = client();
    let tools = || Request::new("tools/list", Json::Object(vec![]), Rc::from("tools/list"));
    c.run(&mut h, tools().shape(Shape::Tools { refresh: false })).unwrap();
    assert!(!c.take_listing().unwrap().refreshed);
    let call = || Request::new("tools/call", Json::Object(vec![]), Rc::from("tools/call v1"));
    c.run(&mut h, call().shape(Shape::ToolCall(None))).unwrap();
    // The list_changed behind that reply: the next call lists first.
    let mut op = c.start(&mut h, call().shape(Shape::ToolCall(None)).detached()).unwrap();
    settle(&mut c, &mut h, &mut op).unwrap().unwrap();
    let listing = c.take_listing().unwrap();
    assert!(listing.refreshed);
    assert!(String::from_utf8(encode(&listing.pages[0])).unwrap().contains("v2"));
    let sent = h.sent.borrow();
    let methods: Vec<&str> = sent.iter().filter_map(|m| m.split(r#""method":""#).nth(1)?.split('"').next()).collect();
    assert_eq!(methods[2..], ["tools/list", "tools/call", "tools/list", "tools/call"]);
}

#[test]
fn a_request_past_its_time_is_cancelled_and_the_session_kept() {
    let mut h = host(|msg| if msg.get("method") == Some(&Json::str("tools/call")) { vec![] } else { plain(msg) });
    let mut c = client();
    let err = request(&mut c, &mut h, "tools/call", "tools/call slow").unwrap_err();
    assert_eq!(err.to_string(), "MCP tools/call slow timed out after 0.05 s");
    let sent = h.sent.borrow().clone();
    assert!(
        sent.last().unwrap().starts_with(r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"reason":"timed out after 0.05 s","requestId":2}"#),
        "{sent:?}"
    );
    request(&mut c, &mut h, "ping", "ping").unwrap();
    assert_eq!(h.opened, 1);
}

#[test]
fn async_requests_settle_in_any_order_each_with_its_own_reply() {
    let mut h = host(holding);
    let mut c = client();
    // In flight on a session: connected first.
    c.ensure_session(&mut h).unwrap();
    let mut ops: Vec<Operation> = (0..3).map(|i| start(&mut c, &mut h, &format!("call {i}"), None)).collect();
    // ids 2, 3, 4 (1 was initialize); the third is answered last
    for (id, text) in [(3, "b"), (2, "a"), (4, "c")] {
        answer(&h, id, text);
    }
    assert!(!settled(&mut c, &mut h, &mut ops[0]));
    assert_eq!(text_of(settle(&mut c, &mut h, &mut ops[2])), r#""c""#);
    // what arrived while the third was waited for is kept for the others
    assert!(settled(&mut c, &mut h, &mut ops[0]) && settled(&mut c, &mut h, &mut ops[1]));
    assert_eq!(text_of(ops[0].take_outcome()), r#""a""#);
    assert_eq!(text_of(ops[1].take_outcome()), r#""b""#);
    // taken once: nothing of it is kept
    assert!(ops[1].take_outcome().is_none());
}

#[test]
fn an_async_timeout_settles_only_its_own_request_and_cancels_it() {
    let mut h = host(holding);
    let mut c = client();
    let mut quick = start(&mut c, &mut h, "tools/call quick", Some(Duration::from_millis(10)));
    let mut patient = start(&mut c, &mut h, "tools/call patient", Some(Duration::from_secs(5)));
    assert_eq!(text_of(settle(&mut c, &mut h, &mut quick)), "MCP tools/call quick timed out after 0.01 s");
    assert!(h.sent.borrow().last().unwrap().contains(r#""requestId":2"#));
    assert!(!settled(&mut c, &mut h, &mut patient));
    answer(&h, 3, "late but fine");
    assert_eq!(text_of(settle(&mut c, &mut h, &mut patient)), r#""late but fine""#);
}

#[test]
fn a_cancel_tells_the_server_and_a_late_reply_is_dropped() {
    let mut h = host(holding);
    let mut c = client();
    // In flight on a session: connected first.
    c.ensure_session(&mut h).unwrap();
    let mut op = start(&mut c, &mut h, "tools/call x", None);
    assert!(c.cancel(&mut op, "no longer needed"));
    assert!(!c.cancel(&mut op, "twice"));
    assert!(h.sent.borrow().last().unwrap().contains(r#""reason":"no longer needed","requestId":2"#));
    answer(&h, 2, "too late");
    assert_eq!(text_of(op.take_outcome()), "MCP tools/call x cancelled");
    // the late reply finds nobody, and the session goes on
    assert!(c.pump(&mut h, Instant::now()).unwrap());
    assert!(h.replies.borrow().is_empty());
    let mut next = start(&mut c, &mut h, "tools/call y", None);
    answer(&h, 3, "next");
    assert_eq!(text_of(settle(&mut c, &mut h, &mut next)), r#""next""#);
    assert_eq!(h.opened, 1);
}

#[test]
fn a_dead_server_settles_every_request_in_flight_and_the_next_starts_a_new_session() {
    let mut h = host(holding);
    let mut c = client();
    let mut ops: Vec<Operation> = (0..2).map(|_| start(&mut c, &mut h, "tools/call x", None)).collect();
    h.dead.set(true);
    c.pump(&mut h, Instant::now()).unwrap();
    for op in &mut ops {
        assert!(settled(&mut c, &mut h, op));
        assert_eq!(text_of(op.take_outcome()), "MCP transport failed (3): MCP server exited (scripted)");
    }
    h.dead.set(false);
    start(&mut c, &mut h, "tools/call y", None);
    assert_eq!(h.opened, 2);
}

#[test]
fn close_settles_requests_in_flight_with_the_close_error_and_cancels_them_in_order() {
    let mut h = host(holding);
    let mut c = client();
    // In flight on a session: connected first.
    c.ensure_session(&mut h).unwrap();
    let mut ops: Vec<Operation> = (0..3).map(|_| start(&mut c, &mut h, "tools/call x", None)).collect();
    c.close();
    for op in &mut ops {
        assert!(settled(&mut c, &mut h, op));
        assert_eq!(text_of(op.take_outcome()), "MCP tools/call x failed: the client was closed before the reply came");
    }
    let sent = h.sent.borrow();
    let cancelled: Vec<&str> = sent.iter().filter_map(|m| m.split(r#""requestId":"#).nth(1)).collect();
    assert_eq!(cancelled, ["2}}", "3}}", "4}}"]);
}

#[test]
fn every_request_in_flight_when_the_session_was_forgotten_gets_its_one_more_try() {
    // The first two calls are held; then the server answers both with 404
    // (their POSTs came back while both were in flight).
    let mut calls = 0;
    let mut h = host(move |msg| {
        if msg.get("method") == Some(&Json::str("tools/call")) {
            calls += 1;
            if calls <= 2 {
                return vec![];
            }
        }
        plain(msg)
    });
    let mut c = client();
    // In flight on a session: connected first.
    c.ensure_session(&mut h).unwrap();
    let mut ops: Vec<Operation> = (0..2).map(|i| start(&mut c, &mut h, &format!("call {i}"), None)).collect();
    for id in [2, 3] {
        let key = id_key(&Json::Int(id));
        h.replies.borrow_mut().push_back(Received::Failed(key, Error::SessionExpired));
    }
    for op in &mut ops {
        let outcome = settle(&mut c, &mut h, op).unwrap().unwrap();
        assert_eq!(outcome.get("method"), Some(&Json::str("tools/call")));
    }
    assert_eq!(h.opened, 2);
}

#[test]
fn a_request_cancelled_after_its_refusal_came_is_not_sent_again() {
    let mut h = host(forgets_at_first_call());
    let mut c = client();
    // In flight on a session: connected first.
    c.ensure_session(&mut h).unwrap();
    let mut op = start(&mut c, &mut h, "tools/call x", None);
    c.pump(&mut h, Instant::now()).unwrap();
    // The 404 has come: too late to cancel, and nothing goes out again.
    assert!(!c.cancel(&mut op, "no longer needed"));
    assert_eq!(text_of(settle(&mut c, &mut h, &mut op)), "MCP: the server ended the session (HTTP 404)");
    assert_eq!(h.opened, 1);
    assert_eq!(h.sent.borrow().iter().filter(|s| s.contains("tools/call")).count(), 1);
}

#[test]
fn a_listing_that_asks_for_progress_asks_on_every_page() {
    let mut h = host(forgets_while_paging());
    let listing = tool_listing().limits(Limits { progress: true, ..Limits::default() });
    assert_eq!(page_count(client().run(&mut h, listing).unwrap()), 2);
    let sent = h.sent.borrow();
    let lists: Vec<&String> = sent.iter().filter(|s| s.contains("tools/list")).collect();
    assert_eq!(lists.len(), 4);
    for list in lists {
        assert!(list.contains(r#""_meta":{"progressToken":2}"#), "{list}");
    }
}

/// The method (or `id` for a reply) of every message sent so far.
fn sent_methods(h: &TestHost) -> Vec<String> {
    let sent = h.sent.borrow();
    let decoded = sent.iter().map(|s| decode(s.as_bytes()).unwrap());
    decoded.map(|m| protocol::lua_text(m.get("method"))).collect()
}

#[test]
fn async_requests_made_while_the_session_starts_wait_for_it_and_go_out_in_order() {
    let mut h = host(|msg| if msg.get("method") == Some(&Json::str("initialize")) { vec![] } else { plain(msg) });
    let mut c = client();
    let mut ops: Vec<Operation> = (0..3).map(|i| start(&mut c, &mut h, &format!("call {i}"), None)).collect();
    // Nothing waited for the handshake, and nothing overtook it.
    assert_eq!(sent_methods(&h), ["initialize"]);
    assert!(!settled(&mut c, &mut h, &mut ops[1]));
    let init = r#"{"id":1,"result":{"protocolVersion":"2025-06-18","serverInfo":{"name":"late"}}}"#;
    h.replies.borrow_mut().push_back(Received::Message(decode(init.as_bytes()).unwrap()));
    // The session is ready: every queued request goes out, in order,
    // whether or not its handle is being looked at.
    c.pump(&mut h, Instant::now()).unwrap();
    assert_eq!(sent_methods(&h), ["initialize", "notifications/initialized", "tools/call", "tools/call", "tools/call"]);
    let ids: Vec<String> = h.sent.borrow()[2..].iter().map(|s| id_of(&decode(s.as_bytes()).unwrap())).collect();
    assert_eq!(ids, ["2", "3", "4"]);
    for op in ops.iter_mut().rev() {
        assert_eq!(settle(&mut c, &mut h, op).unwrap().unwrap().get("method"), Some(&Json::str("tools/call")));
    }
    assert_eq!(h.server_name, Some(Json::str("late")));
}

#[test]
fn a_failed_handshake_settles_every_queued_request_with_the_blocking_error() {
    let refuses = |msg: &Json| match msg.get("method") {
        Some(m) if m == &Json::str("initialize") => {
            vec![format!(r#"{{"id":{},"error":{{"code":-32603,"message":"no"}}}}"#, id_of(msg))]
        }
        _ => plain(msg),
    };
    let blocking = request(&mut client(), &mut host(refuses), "tools/call", "x").unwrap_err().to_string();
    assert_eq!(blocking, "MCP initialize failed: no (code -32603)");
    let mut h = host(refuses);
    let mut c = client();
    let mut ops: Vec<Operation> = (0..2).map(|_| start(&mut c, &mut h, "tools/call x", None)).collect();
    assert!(!c.take_settled_quietly());
    for op in &mut ops {
        assert_eq!(text_of(settle(&mut c, &mut h, op)), blocking);
    }
    assert_eq!(sent_methods(&h), ["initialize"]);
    // No reply rang for them: the holder rings once itself.
    assert!(c.take_settled_quietly());
    assert!(!c.take_settled_quietly());
}

#[test]
fn a_queued_request_cancelled_before_the_session_is_ready_never_goes_out() {
    let mut h = host(plain);
    let mut c = client();
    let mut first = start(&mut c, &mut h, "tools/call first", None);
    let mut second = start(&mut c, &mut h, "tools/call second", None);
    assert!(c.cancel(&mut first, "no longer needed"));
    assert!(!c.cancel(&mut first, "twice"));
    assert_eq!(text_of(first.take_outcome()), "MCP tools/call first cancelled");
    settle(&mut c, &mut h, &mut second).unwrap().unwrap();
    assert_eq!(sent_methods(&h), ["initialize", "notifications/initialized", "tools/call"]);
}

#[test]
fn close_settles_queued_requests_as_closed_and_ends_the_handshake() {
    let mut h = host(|msg| if msg.get("method") == Some(&Json::str("initialize")) { vec![] } else { plain(msg) });
    let mut c = client();
    let mut op = start(&mut c, &mut h, "tools/call x", None);
    c.close();
    assert_eq!(
        text_of(settle(&mut c, &mut h, &mut op)),
        "MCP tools/call x failed: the client was closed before the reply came"
    );
    // The next request starts a new session.
    start(&mut c, &mut h, "tools/call y", None);
    assert_eq!(h.opened, 2);
}

/// A server that refuses tools/call with 401 until the host's login
/// beside it has ended with credentials.
fn refusing_calls_until_a_login() -> TestHost {
    let authorized: Rc<std::cell::Cell<bool>> = Rc::default();
    let allowed = authorized.clone();
    let mut h = host(move |msg| {
        if msg.get("method") == Some(&Json::str("tools/call")) && !allowed.get() {
            return vec!["401".into()];
        }
        plain(msg)
    });
    h.authorized = authorized;
    h
}

/// An async call on a ready session, refused for credentials: a login
/// begins beside the host, and the call waits for it.
fn refused_async_call(c: &mut Client, h: &mut TestHost, what: &str) -> Operation {
    c.ensure_session(h).unwrap();
    let mut op = start(c, h, what, None);
    c.pump(h, Instant::now()).unwrap();
    assert!(!settled(c, h, &mut op));
    op
}

#[test]
fn an_async_request_refused_for_credentials_waits_for_a_login_beside_the_host_and_goes_again() {
    let mut h = refusing_calls_until_a_login();
    let mut c = client();
    let mut first = refused_async_call(&mut c, &mut h, "tools/call first");
    assert_eq!(h.logins, 1);
    // Made while the login runs: it waits too, and no second login begins.
    let mut second = start(&mut c, &mut h, "tools/call second", None);
    let calls = |h: &TestHost| sent_methods(h).iter().filter(|m| *m == "tools/call").count();
    assert_eq!(calls(&h), 1);
    for op in [&mut first, &mut second] {
        assert_eq!(settle(&mut c, &mut h, op).unwrap().unwrap().get("method"), Some(&Json::str("tools/call")));
    }
    assert_eq!((h.logins, calls(&h), h.opened), (1, 3, 1));
}

#[test]
fn a_blocking_request_waits_for_a_login_under_way_rather_than_starting_another() {
    let mut h = refusing_calls_until_a_login();
    let mut c = client();
    let mut op = refused_async_call(&mut c, &mut h, "tools/call async");
    let blocking = c.run(&mut h, Request::new("tools/call", Json::Object(vec![]), Rc::from("tools/call blocking")));
    assert_eq!(blocking.unwrap().get("method"), Some(&Json::str("tools/call")));
    assert_eq!(h.logins, 1);
    settle(&mut c, &mut h, &mut op).unwrap().unwrap();
}

#[test]
fn a_blocking_request_gets_the_error_of_the_login_it_waited_for() {
    let mut h =
        host(|msg| if msg.get("method") == Some(&Json::str("tools/call")) { vec!["401".into()] } else { plain(msg) });
    let mut c = client();
    let mut op = refused_async_call(&mut c, &mut h, "tools/call async");
    // The login beside the host fails (it ends without new credentials).
    h.fail_login = true;
    let blocking = c.run(&mut h, Request::new("tools/call", Json::Object(vec![]), Rc::from("tools/call blocking")));
    assert_eq!(blocking.unwrap_err().to_string(), refused().to_string());
    assert_eq!(text_of(settle(&mut c, &mut h, &mut op)), refused().to_string());
    assert_eq!(h.logins, 1);
}

/// A server that answers `initialize` when the test says.
fn slow_to_initialize(msg: &Json) -> Vec<String> {
    if msg.get("method") == Some(&Json::str("initialize")) {
        vec![]
    } else {
        plain(msg)
    }
}

fn answer_initialize(h: &TestHost, id: i64) {
    let init = format!(r#"{{"id":{id},"result":{{"protocolVersion":"2025-06-18","serverInfo":{{"name":"late"}}}}}}"#);
    h.replies.borrow_mut().push_back(Received::Message(decode(init.as_bytes()).unwrap()));
}

/// An async call whose handshake got its `initialize` answer and posts
/// `initialized` (as HTTP does, from a thread): the call, and the key the
/// delivery is to be reported under.
fn delivering_initialized(c: &mut Client, h: &mut TestHost) -> (Operation, IdKey) {
    let notices: Rc<RefCell<Vec<IdKey>>> = Rc::default();
    h.notices = Some(notices.clone());
    let op = start(c, h, "tools/call x", None);
    answer_initialize(h, 1);
    c.pump(h, Instant::now()).unwrap();
    let key = notices.borrow()[0].clone();
    (op, key)
}

#[test]
fn an_async_handshake_holds_its_queue_until_initialized_is_delivered() {
    let (mut c, mut h) = (client(), host(slow_to_initialize));
    let (mut op, key) = delivering_initialized(&mut c, &mut h);
    // Posted from a thread over HTTP: nothing may overtake it.
    assert_eq!(sent_methods(&h), ["initialize", "notifications/initialized"]);
    assert!(!settled(&mut c, &mut h, &mut op));
    h.replies.borrow_mut().push_back(Received::Delivered(key));
    assert_eq!(settle(&mut c, &mut h, &mut op).unwrap().unwrap().get("method"), Some(&Json::str("tools/call")));
    assert_eq!(sent_methods(&h), ["initialize", "notifications/initialized", "tools/call"]);
}

#[test]
fn an_initialized_that_cannot_be_delivered_fails_the_queue_with_the_blocking_error() {
    let (mut c, mut h) = (client(), host(slow_to_initialize));
    let (mut op, key) = delivering_initialized(&mut c, &mut h);
    let refusal = Error::Transport { code: "400".into(), detail: "HTTP 400: no session".into() };
    h.replies.borrow_mut().push_back(Received::Failed(Some(key), refusal.clone()));
    assert_eq!(text_of(settle(&mut c, &mut h, &mut op)), refusal.to_string());
    assert_eq!(c.initialize_result().map(|_| ()), Some(()), "initialize itself was answered");
    assert_eq!(h.server_name, None, "the holder never heard of a session");
}

#[test]
fn a_blocking_call_interrupted_while_it_joins_an_async_handshake_leaves_that_handshake_running() {
    let mut h = host(slow_to_initialize);
    let mut c = client();
    let mut op = start(&mut c, &mut h, "tools/call async", None);
    let blocking = crate::interrupt::watching(Box::new(|| true), || request(&mut c, &mut h, "tools/call", "blocking"));
    assert_eq!(blocking.unwrap_err().to_string(), "MCP initialize interrupted");
    // The event loop's request still waits for its session, which comes.
    assert!(!settled(&mut c, &mut h, &mut op));
    answer_initialize(&h, 1);
    assert_eq!(settle(&mut c, &mut h, &mut op).unwrap().unwrap().get("method"), Some(&Json::str("tools/call")));
    assert_eq!(h.opened, 1);
}

#[test]
fn a_session_that_fails_under_a_handshake_step_ends_that_step_at_once() {
    // The server asks something while it starts, and the answer cannot
    // be sent: the handshake fails with that, not with its timeout.
    let mut h = host(|msg| {
        if msg.get("method") == Some(&Json::str("initialize")) {
            vec![r#"{"id":"s1","method":"ping"}"#.into()]
        } else {
            plain(msg)
        }
    });
    h.dies_after = Some(1);
    let mut c = Client::new(Duration::from_secs(30), Duration::from_secs(30), Json::Object(vec![]));
    c.choose_era(EraChoice::Legacy);
    let began = Instant::now();
    let failed = request(&mut c, &mut h, "tools/call", "x").unwrap_err().to_string();
    assert_eq!(failed, "MCP transport failed (1): MCP server exited (scripted)");
    assert!(began.elapsed() < Duration::from_secs(10), "waited {:?}", began.elapsed());
}

#[test]
fn queued_requests_stand_in_the_settle_order_of_what_they_became() {
    let mut h = host(slow_to_initialize);
    let mut c = client();
    let ops: Vec<Operation> = (0..3).map(|i| start(&mut c, &mut h, &format!("call {i}"), None)).collect();
    *h.script.borrow_mut() = Box::new(holding);
    answer_initialize(&h, 1);
    c.pump(&mut h, Instant::now()).unwrap();
    assert_eq!(ops.iter().map(|op| c.settled_as(op)).collect::<Vec<_>>(), [None, None, None]);
    // Replies in the order 3, 1, 2 (ids 2 to 4 were the calls').
    for id in [4, 2, 3] {
        answer(&h, id, "ok");
        c.pump(&mut h, Instant::now()).unwrap();
    }
    let order: Vec<u64> = ops.iter().map(|op| c.settled_as(op).unwrap()).collect();
    assert!(order[2] < order[0] && order[0] < order[1], "{order:?}");
}
