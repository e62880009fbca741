//! The 2026-07-28 rules on a scripted modern server: tasks followed to
//! their end (polled at the interval the server names, input given once,
//! a lost or expired task said so), a version the server no longer takes,
//! a round that carries only the server's state, and the result types a
//! request may not get. Each test is named after the rule it pins.

use std::cell::Cell;
use std::rc::Rc;
use std::time::{Duration, Instant};

use super::super::request::task::{next_step, NextStep};
use super::super::{Client, Request, Shape, TaskAsk};
use super::{host, id_of, TestHost};
use crate::codec::{decode, encode, Json};
use crate::era::EraChoice;

const DISCOVERED: &str = r#"{"resultType":"complete","supportedVersions":["2026-07-28"],"capabilities":{"tools":{},"prompts":{},"extensions":{"io.modelcontextprotocol/tasks":{}}},"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"scripted","version":"1"}}}"#;

fn method_of(msg: &Json) -> String {
    match msg.get("method") {
        Some(Json::Str(m)) => String::from_utf8_lossy(m).into_owned(),
        _ => String::new(),
    }
}

/// A modern server: it answers the probe, and each other request with
/// what `then` says (a `result` object's text, or a whole reply line when
/// it starts with `{"error"`).
fn modern(mut then: impl FnMut(&str, &Json) -> String + 'static) -> TestHost {
    host(move |msg| {
        if msg.get("id").is_none() {
            return vec![];
        }
        let id = id_of(msg);
        let method = method_of(msg);
        if method == "server/discover" {
            return vec![format!(r#"{{"id":{id},"result":{DISCOVERED}}}"#)];
        }
        let answer = then(&method, msg);
        match answer.strip_prefix("{\"error\"") {
            Some(_) => vec![format!(r#"{{"id":{id},{}"#, &answer[1..])],
            None => vec![format!(r#"{{"id":{id},"result":{answer}}}"#)],
        }
    })
}

fn modern_client() -> Client {
    let mut client = Client::new(Duration::from_secs(5), Duration::from_secs(5), Json::Object(vec![]));
    client.choose_era(EraChoice::Modern);
    client
}

fn task(id: &str, status: &str, poll_ms: u64, more: &str) -> String {
    format!(
        r#"{{"resultType":"complete","taskId":"{id}","status":"{status}","pollIntervalMs":{poll_ms},"ttlMs":60000{more}}}"#
    )
}

/// A tool call that asks to run as a task, waited for.
fn call_task(c: &mut Client, h: &mut TestHost, tool: &str) -> Result<Json, crate::error::Error> {
    let params = Json::object([("name", Json::str(tool)), ("arguments", Json::Object(vec![]))]);
    let what: Rc<str> = Rc::from(format!("tools/call {tool}"));
    let request = Request::new("tools/call", params, what).shape(Shape::ToolCall(None)).task(Some(TaskAsk::default()));
    c.run(h, request)
}

fn text(result: &Json) -> String {
    String::from_utf8(encode(result)).unwrap()
}

#[test]
fn the_status_step_reads_each_status_by_revision() {
    let described = |json: &str| decode(json.as_bytes()).unwrap();
    assert_eq!(next_step(&described(r#"{"status":"working"}"#), true), NextStep::Poll);
    assert_eq!(next_step(&described(r#"{"status":"input_required"}"#), true), NextStep::GiveInput);
    assert_eq!(next_step(&described(r#"{"status":"input_required"}"#), false), NextStep::AskResult);
    assert_eq!(next_step(&described(r#"{"status":"completed"}"#), false), NextStep::AskResult);
    assert_eq!(next_step(&described(r#"{"status":"completed","result":{}}"#), true), NextStep::Completed);
    assert_eq!(next_step(&described(r#"{"status":"completed"}"#), true), NextStep::CompletedWithoutResult);
    assert_eq!(next_step(&described(r#"{"status":"failed","error":{"code":1}}"#), true), NextStep::Failed);
    assert_eq!(
        next_step(&described(r#"{"status":"failed"}"#), true),
        NextStep::Unusable("it failed without saying why (no error)".into())
    );
    assert_eq!(next_step(&described(r#"{"status":"cancelled"}"#), true), NextStep::Cancelled);
    assert_eq!(
        next_step(&described(r#"{"status":"paused"}"#), true),
        NextStep::Unusable("its status is paused, which this client does not know".into())
    );
    assert_eq!(
        next_step(&described(r#"{"status":7}"#), true),
        NextStep::Unusable("its status is 7, which is not a string".into())
    );
}

#[test]
fn a_task_is_polled_at_the_interval_it_names_clamped_to_at_least_10_ms() {
    let polls = Rc::new(Cell::new(Vec::<Instant>::new()));
    let seen = polls.clone();
    let mut h = modern(move |method, _| match method {
        "tools/call" => r#"{"resultType":"task","taskId":"t1","status":"working","pollIntervalMs":0}"#.into(),
        "tasks/get" => {
            let mut at = seen.take();
            at.push(Instant::now());
            let done = at.len() >= 4;
            seen.set(at);
            match done {
                true => task("t1", "completed", 0, r#","result":{"content":[]}"#),
                false => task("t1", "working", 0, ""),
            }
        }
        _ => "{}".into(),
    });
    let mut c = modern_client();
    let result = call_task(&mut c, &mut h, "slow").unwrap();
    assert_eq!(text(&result), r#"{"content":[]}"#);
    let at = polls.take();
    assert_eq!(at.len(), 4);
    for pair in at.windows(2) {
        assert!(pair[1] - pair[0] >= Duration::from_millis(9), "polled {:?} apart", pair[1] - pair[0]);
    }
}

#[test]
fn an_input_a_task_still_lists_after_it_was_answered_is_not_asked_again() {
    let polls = Rc::new(Cell::new(0));
    let counted = polls.clone();
    let asks = r#","inputRequests":{"q":{"method":"ping","params":{}}}"#;
    let mut h = modern(move |method, _| match method {
        "tools/call" => r#"{"resultType":"task","taskId":"t1","status":"working","pollIntervalMs":10}"#.into(),
        "tasks/update" => r#"{"resultType":"complete"}"#.into(),
        "tasks/get" => {
            counted.set(counted.get() + 1);
            match counted.get() {
                1 | 2 => task("t1", "input_required", 10, asks),
                _ => task("t1", "completed", 10, r#","result":{"content":[]}"#),
            }
        }
        _ => "{}".into(),
    });
    let mut c = modern_client();
    call_task(&mut c, &mut h, "asks").unwrap();
    let updates = h.sent.borrow().iter().filter(|m| m.contains(r#""method":"tasks/update""#)).count();
    assert_eq!(updates, 1, "{:?}", h.sent.borrow());
}

#[test]
fn a_task_the_server_no_longer_knows_is_said_lost() {
    let mut h = modern(|method, _| match method {
        "tools/call" => r#"{"resultType":"task","taskId":"t1","status":"working","pollIntervalMs":10}"#.into(),
        _ => r#"{"error":{"code":-32602,"message":"Unknown task"}}"#.into(),
    });
    let failed = call_task(&mut modern_client(), &mut h, "gone").unwrap_err().to_string();
    assert_eq!(
        failed,
        "MCP tools/call gone failed: the server no longer knows its task t1 (the task expired, or the server restarted and lost it); call the tool again"
    );
}

#[test]
fn a_task_still_working_past_its_ttl_ends_the_call() {
    let mut h = modern(|method, _| match method {
        "tools/call" => {
            r#"{"resultType":"task","taskId":"t1","status":"working","pollIntervalMs":10,"ttlMs":30}"#.into()
        }
        _ => r#"{"resultType":"complete","taskId":"t1","status":"working","pollIntervalMs":10,"ttlMs":30}"#.into(),
    });
    let failed = call_task(&mut modern_client(), &mut h, "lingers").unwrap_err().to_string();
    assert_eq!(
        failed,
        "MCP tools/call lingers failed: its task t1 was still working 30 ms after it was made, past the time the server gave it to live; the server may have discarded it"
    );
}

#[test]
fn a_request_refused_for_its_version_goes_once_more_on_a_version_the_server_names() {
    let tries = Rc::new(Cell::new(0));
    let counted = tries.clone();
    let mut h = modern(move |method, _| match method {
        "tools/list" => {
            counted.set(counted.get() + 1);
            match counted.get() {
                1 => r#"{"error":{"code":-32022,"message":"Unsupported protocol version","data":{"supported":["2026-07-28"]}}}"#.into(),
                _ => r#"{"resultType":"complete","tools":[]}"#.into(),
            }
        }
        _ => "{}".into(),
    });
    let mut c = modern_client();
    let listed = c.run(&mut h, Request::new("tools/list", Json::Object(vec![]), Rc::from("tools/list")));
    assert_eq!(text(&listed.unwrap()), r#"{"resultType":"complete","tools":[]}"#);
    assert_eq!(tries.get(), 2);
}

#[test]
fn a_round_that_carries_only_the_servers_state_goes_again_after_a_pause_with_that_state() {
    let rounds = Rc::new(Cell::new(0));
    let counted = rounds.clone();
    let mut h = modern(move |method, msg| match method {
        "tools/call" => {
            counted.set(counted.get() + 1);
            let state = msg.get("params").and_then(|p| p.get("requestState"));
            match state {
                None => r#"{"resultType":"input_required","requestState":"s-1"}"#.into(),
                Some(_) => r#"{"resultType":"complete","content":[]}"#.into(),
            }
        }
        _ => "{}".into(),
    });
    let mut c = modern_client();
    let params = Json::object([("name", Json::str("busy")), ("arguments", Json::Object(vec![]))]);
    let began = Instant::now();
    let request = Request::new("tools/call", params, Rc::from("tools/call busy")).shape(Shape::ToolCall(None));
    c.run(&mut h, request).unwrap();
    assert_eq!(rounds.get(), 2);
    assert!(began.elapsed() >= Duration::from_millis(240), "went again after {:?}", began.elapsed());
    let again = h.sent.borrow().iter().filter(|m| m.contains(r#""requestState":"s-1""#)).count();
    assert_eq!(again, 1);
}

#[test]
fn input_or_a_task_where_the_revision_allows_neither_is_refused_by_its_result_type() {
    let mut h = modern(|method, _| match method {
        "tools/list" => r#"{"resultType":"input_required","inputRequests":{}}"#.into(),
        "prompts/get" => r#"{"resultType":"task","taskId":"t1","status":"working"}"#.into(),
        _ => "{}".into(),
    });
    let mut c = modern_client();
    let listed = c.run(&mut h, Request::new("tools/list", Json::Object(vec![]), Rc::from("tools/list")));
    let got = c.run(&mut h, Request::new("prompts/get", Json::Object(vec![]), Rc::from("prompts/get x")));
    assert_eq!(
        listed.unwrap_err().to_string(),
        crate::error::Error::UnknownResultType { what: "tools/list".into(), result_type: "input_required".into() }
            .to_string()
    );
    assert_eq!(
        got.unwrap_err().to_string(),
        crate::error::Error::UnknownResultType { what: "prompts/get x".into(), result_type: "task".into() }.to_string()
    );
}
