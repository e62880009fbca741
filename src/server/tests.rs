//! The server's protocol against scripted handlers, each test named after
//! the rule it pins.

use super::catalog::Kind;
use super::{Answer, Call, Handlers, Server};
use crate::codec::{decode, encode, Json};

/// Handlers that answer from the handler's number: 1 echoes the
/// arguments as text, 2 fails, 3 returns structured content that breaks
/// a schema of `{n: number}`, 4 returns one that keeps it.
struct Scripted {
    calls: usize,
}

impl Handlers for Scripted {
    fn call_tool(&mut self, handler: u64, arguments: Json, _call: &Call) -> Answer {
        self.calls += 1;
        let text = |t: &str| decode(format!(r#"{{"content":[{{"type":"text","text":{t:?}}}]}}"#).as_bytes()).unwrap();
        match handler {
            1 => Answer::Result(text(&String::from_utf8(encode(&arguments)).unwrap())),
            2 => Answer::Failed("the disk is full".into()),
            3 => Answer::Result(decode(br#"{"content":[],"structuredContent":{"n":"three"}}"#).unwrap()),
            _ => Answer::Result(decode(br#"{"content":[],"structuredContent":{"n":3}}"#).unwrap()),
        }
    }
    fn read_resource(&mut self, _handler: u64, uri: &[u8], variables: Option<Json>, _call: &Call) -> Answer {
        let vars = variables.map(|v| String::from_utf8(encode(&v)).unwrap()).unwrap_or_default();
        let text = format!("{} {vars}", String::from_utf8_lossy(uri));
        Answer::Result(Json::Array(vec![Json::object([("text", Json::str(text))])]))
    }
    fn get_prompt(&mut self, _handler: u64, arguments: Json, _call: &Call) -> Answer {
        Answer::Result(Json::object([("messages", Json::Array(vec![arguments]))]))
    }
    fn complete(&mut self, _handler: u64, _argument: &[u8], value: &[u8], _context: Option<&Json>) -> Answer {
        let all = (0..150).map(|i| Json::str(format!("{}{i}", String::from_utf8_lossy(value)))).collect();
        Answer::Result(Json::Array(all))
    }
}

fn json(text: &str) -> Json {
    decode(text.as_bytes()).unwrap()
}

fn text(value: &Json) -> String {
    String::from_utf8(encode(value)).unwrap()
}

fn server() -> Server {
    let mut s = Server::new(json(r#"{"name":"notes","version":"1.0.0"}"#), None);
    let schema = r#"{"type":"object","properties":{"n":{"type":"number"}},"required":["n"]}"#;
    s.add(Kind::Tool, json(&format!(r#"{{"name":"echo","inputSchema":{schema}}}"#)), 1).unwrap();
    s.add(Kind::Tool, json(r#"{"name":"fails","inputSchema":{"type":"object"}}"#), 2).unwrap();
    s.add(
        Kind::Tool,
        json(&format!(r#"{{"name":"broken","inputSchema":{{"type":"object"}},"outputSchema":{schema}}}"#)),
        3,
    )
    .unwrap();
    s.add(
        Kind::Tool,
        json(&format!(r#"{{"name":"kept","inputSchema":{{"type":"object"}},"outputSchema":{schema}}}"#)),
        4,
    )
    .unwrap();
    s.add(Kind::Resource, json(r#"{"uri":"notes://today","name":"today"}"#), 5).unwrap();
    s.add(Kind::Template, json(r#"{"uriTemplate":"notes://{day}","name":"day"}"#), 6).unwrap();
    s.add(Kind::Prompt, json(r#"{"name":"review","arguments":[{"name":"file","required":true}]}"#), 7).unwrap();
    s
}

fn ask(s: &mut Server, request: &str) -> String {
    text(&s.handle(0, &json(request), &mut Scripted { calls: 0 }).unwrap())
}

#[test]
fn initialize_takes_the_clients_version_when_spoken_else_offers_the_newest() {
    let mut s = server();
    let reply = ask(
        &mut s,
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-03-26","capabilities":{"elicitation":{}}}}"#,
    );
    assert!(reply.contains(r#""protocolVersion":"2025-03-26""#), "{reply}");
    assert!(reply.contains(r#""serverInfo":{"name":"notes","version":"1.0.0"}"#), "{reply}");
    assert!(s.facts(0).can("elicitation") && !s.facts(0).can("sampling"));
    let reply =
        ask(&mut s, r#"{"jsonrpc":"2.0","id":2,"method":"initialize","params":{"protocolVersion":"1999-01-01"}}"#);
    assert!(reply.contains(r#""protocolVersion":"2025-11-25""#), "{reply}");
}

#[test]
fn arguments_that_break_the_input_schema_come_back_as_a_tool_error_the_model_can_read_and_the_handler_never_runs() {
    let mut s = server();
    let mut handlers = Scripted { calls: 0 };
    let reply = s.handle(
        0,
        &json(r#"{"id":1,"method":"tools/call","params":{"name":"echo","arguments":{"n":"x"}}}"#),
        &mut handlers,
    );
    let reply = text(&reply.unwrap());
    assert_eq!(handlers.calls, 0);
    assert!(reply.contains(r#""isError":true"#), "{reply}");
    assert!(reply.contains(r#"Invalid arguments for tool echo: \"x\" is not of type \"number\" (at /n). Call it again with arguments that match its inputSchema."#), "{reply}");
    let reply = ask(&mut s, r#"{"id":2,"method":"tools/call","params":{"name":"echo","arguments":{"n":1}}}"#);
    assert_eq!(reply, r#"{"id":2,"jsonrpc":"2.0","result":{"content":[{"type":"text","text":"{\"n\":1}"}]}}"#);
}

#[test]
fn a_failing_handler_is_a_tool_error_and_an_unknown_tool_a_protocol_error() {
    let mut s = server();
    let reply = ask(&mut s, r#"{"id":1,"method":"tools/call","params":{"name":"fails"}}"#);
    assert!(reply.contains(r#""content":[{"text":"the disk is full","type":"text"}],"isError":true"#), "{reply}");
    let reply = ask(&mut s, r#"{"id":2,"method":"tools/call","params":{"name":"nope"}}"#);
    assert!(reply.contains(r#""error":{"code":-32602,"message":"Unknown tool: nope"}"#), "{reply}");
}

#[test]
fn structured_content_must_keep_the_output_schema() {
    let mut s = server();
    let reply = ask(&mut s, r#"{"id":1,"method":"tools/call","params":{"name":"broken"}}"#);
    assert!(
        reply.contains(
            r#""code":-32603,"message":"Tool broken broke its outputSchema: \"three\" is not of type \"number\"""#
        ),
        "{reply}"
    );
    let reply = ask(&mut s, r#"{"id":2,"method":"tools/call","params":{"name":"kept"}}"#);
    assert!(reply.contains(r#""structuredContent":{"n":3}"#), "{reply}");
}

#[test]
fn listings_are_paged_by_a_cursor_the_server_gave() {
    let mut s = server();
    s.page_size = 3;
    let first = ask(&mut s, r#"{"id":1,"method":"tools/list"}"#);
    assert!(first.contains(r#""nextCursor":"3""#), "{first}");
    let second = ask(&mut s, r#"{"id":2,"method":"tools/list","params":{"cursor":"3"}}"#);
    assert!(second.contains(r#""name":"kept""#) && !second.contains("nextCursor"), "{second}");
    let bad = ask(&mut s, r#"{"id":3,"method":"tools/list","params":{"cursor":"zzz"}}"#);
    assert!(bad.contains(r#""code":-32602"#), "{bad}");
}

#[test]
fn a_resource_is_read_by_its_uri_then_by_the_first_template_that_matches() {
    let mut s = server();
    let today = ask(&mut s, r#"{"id":1,"method":"resources/read","params":{"uri":"notes://today"}}"#);
    assert!(today.contains(r#""contents":[{"text":"notes://today "}]"#), "{today}");
    let monday = ask(&mut s, r#"{"id":2,"method":"resources/read","params":{"uri":"notes://monday"}}"#);
    assert!(monday.contains(r#"notes://monday {\"day\":\"monday\"}"#), "{monday}");
    let none = ask(&mut s, r#"{"id":3,"method":"resources/read","params":{"uri":"other://x"}}"#);
    assert!(none.contains(r#""code":-32002,"message":"Resource not found: other://x""#), "{none}");
}

#[test]
fn a_prompt_without_a_required_argument_is_refused() {
    let mut s = server();
    let refused = ask(&mut s, r#"{"id":1,"method":"prompts/get","params":{"name":"review"}}"#);
    assert!(refused.contains(r#""message":"Prompt review needs its argument file""#), "{refused}");
    let got = ask(&mut s, r#"{"id":2,"method":"prompts/get","params":{"name":"review","arguments":{"file":"a.lua"}}}"#);
    assert!(got.contains(r#""messages":[{"file":"a.lua"}]"#), "{got}");
}

#[test]
fn completions_give_at_most_100_values_and_say_how_many_there_were() {
    let mut s = server();
    let reply = ask(
        &mut s,
        r#"{"id":1,"method":"completion/complete","params":{"ref":{"type":"ref/prompt","name":"review"},"argument":{"name":"file","value":"a"}}}"#,
    );
    assert!(reply.contains(r#""hasMore":true,"total":150"#), "{reply}");
    assert_eq!(reply.matches("\"a").count(), 100);
}

#[test]
fn a_list_changed_while_serving_owes_one_notice_and_subscribers_hear_of_updates() {
    let mut s = server();
    assert!(s.take_notices(0).is_empty(), "nothing is owed before the client is initialized");
    s.handle(0, &json(r#"{"method":"notifications/initialized"}"#), &mut Scripted { calls: 0 });
    s.add(Kind::Tool, json(r#"{"name":"new"}"#), 9).unwrap();
    assert!(s.remove(Kind::Tool, b"new"));
    ask(&mut s, r#"{"id":1,"method":"resources/subscribe","params":{"uri":"notes://today"}}"#);
    s.resource_updated(b"notes://today");
    s.resource_updated(b"notes://other");
    let notices: Vec<String> = s.take_notices(0).iter().map(text).collect();
    assert_eq!(
        notices,
        vec![
            r#"{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":"notes://today"}}"#,
            r#"{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}"#,
        ]
    );
}

#[test]
fn log_levels_filter_from_the_one_the_client_set() {
    let mut s = server();
    assert!(s.facts(0).logs("debug"));
    ask(&mut s, r#"{"id":1,"method":"logging/setLevel","params":{"level":"warning"}}"#);
    assert!(!s.facts(0).logs("info") && s.facts(0).logs("error"));
    let bad = ask(&mut s, r#"{"id":2,"method":"logging/setLevel","params":{"level":"loud"}}"#);
    assert!(bad.contains("-32602"), "{bad}");
}

#[test]
fn unknown_methods_and_ids_that_cannot_be_ids_get_the_protocols_errors() {
    let mut s = server();
    assert!(ask(&mut s, r#"{"id":1,"method":"nope/nope"}"#).contains(r#""code":-32601"#));
    assert!(ask(&mut s, r#"{"id":{"a":1},"method":"ping"}"#).contains(r#""code":-32600"#));
    assert!(s
        .handle(
            0,
            &json(r#"{"method":"notifications/cancelled","params":{"requestId":7}}"#),
            &mut Scripted { calls: 0 }
        )
        .is_none());
}

#[test]
fn each_client_has_its_own_level_and_hears_of_its_own_subscriptions_only() {
    let mut s = server();
    ask(&mut s, r#"{"id":1,"method":"logging/setLevel","params":{"level":"error"}}"#);
    s.handle(
        2,
        &json(r#"{"id":1,"method":"resources/subscribe","params":{"uri":"notes://today"}}"#),
        &mut Scripted { calls: 0 },
    );
    assert!(!s.facts(0).logs("info") && s.facts(2).logs("info"));
    s.resource_updated(b"notes://today");
    assert!(s.take_notices(0).is_empty());
    assert_eq!(s.take_notices(2).len(), 1);
    s.forget(2);
    s.resource_updated(b"notes://today");
    assert!(s.take_notices(2).is_empty(), "a forgotten client is owed nothing");
}

#[test]
fn a_2026_request_is_answered_on_its_own_with_its_result_type_and_cache_hints() {
    let mut s = server();
    let meta = r#""_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}"#;
    let listed = ask(&mut s, &format!(r#"{{"id":1,"method":"tools/list","params":{{{meta}}}}}"#));
    assert!(listed.contains(r#""cacheScope":"public""#) && listed.contains(r#""resultType":"complete""#), "{listed}");
    assert!(listed.contains(r#""io.modelcontextprotocol/serverInfo":{"name":"notes""#), "{listed}");
    let removed = ask(&mut s, &format!(r#"{{"id":2,"method":"ping","params":{{{meta}}}}}"#));
    assert!(removed.contains(r#""code":-32601"#), "{removed}");
    let old = meta.replace("2026-07-28", "v999");
    let refused = ask(&mut s, &format!(r#"{{"id":3,"method":"tools/list","params":{{{old}}}}}"#));
    assert!(refused.contains(r#""code":-32022"#) && refused.contains(r#""requested":"v999""#), "{refused}");
    let tampered = ask(
        &mut s,
        &format!(r#"{{"id":4,"method":"tools/call","params":{{"name":"echo","requestState":"x.y",{meta}}}}}"#),
    );
    assert!(tampered.contains("requestState integrity check failed"), "{tampered}");
}

#[test]
fn header_values_are_base64_only_between_both_sentinels_and_strictly() {
    use super::modern::header_value;
    assert_eq!(header_value(b" =?base64?SGVsbG8=?= "), Some(b"Hello".to_vec()));
    assert_eq!(header_value(b"=?base64?SGVsbG8?="), None, "unpadded");
    assert_eq!(header_value(b"=?base64?SGVsbG8="), Some(b"=?base64?SGVsbG8=".to_vec()), "no suffix: literal");
}
