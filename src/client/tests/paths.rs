//! The one request path's rules against the scripted server: pages and
//! their cursors, the 404 restart, output schemas, a stale tool list,
//! timeouts and cancellation, each made blocking, with limits of its own
//! and async.

use super::*;

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
    assert!(c.cancel(&mut h, &mut op, "no longer needed"));
    assert!(!c.cancel(&mut h, &mut op, "twice"));
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
    assert!(!c.cancel(&mut h, &mut op, "no longer needed"));
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
