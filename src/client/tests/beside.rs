//! What happens beside an event loop: requests queued while their
//! session starts and sent in order, logins running beside the host, and
//! the handshake's steps (`initialized` posted from a thread) that
//! nothing may overtake.

use super::*;

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
    assert!(c.cancel(&mut h, &mut first, "no longer needed"));
    assert!(!c.cancel(&mut h, &mut first, "twice"));
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
    let blocking = crate::interrupt::watching(&|| true, || request(&mut c, &mut h, "tools/call", "blocking"));
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
