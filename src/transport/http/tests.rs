//! The status rules of one exchange, pinned against a canned HTTP/1.1
//! server on 127.0.0.1: each test says what the server answers (by path
//! or by request number) and reads back what it received, so that no
//! assertion trusts the client's own account of what it sent.

use std::io::{BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use super::{Http, Options};
use crate::codec::{self, Json};
use crate::error::Error;
use crate::protocol::IdKey;
use crate::transport::{Received, Transport};

/// One request as the server read it; header names in lower case.
#[derive(Clone, Debug)]
struct Seen {
    method: String,
    path: String,
    headers: Vec<(String, String)>,
    body: String,
}

impl Seen {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }

    /// The JSON-RPC method of the body, if it is a message with one.
    fn rpc_method(&self) -> Option<String> {
        let msg = codec::decode(self.body.as_bytes()).ok()?;
        match msg.get("method") {
            Some(Json::Str(m)) => Some(String::from_utf8_lossy(m).into_owned()),
            _ => None,
        }
    }

    /// The id of the body, as JSON text, for a reply that carries it.
    fn rpc_id(&self) -> String {
        let msg = codec::decode(self.body.as_bytes()).expect("a JSON-RPC body");
        String::from_utf8(codec::encode(msg.get("id").expect("an id"))).unwrap()
    }
}

/// A canned answer. Every body goes with its Content-Length, so that the
/// client's pooled connections stay usable from one exchange to the next.
struct Reply {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Reply {
    fn status(status: u16) -> Reply {
        Reply { status, headers: Vec::new(), body: Vec::new() }
    }

    fn header(mut self, name: &str, value: &str) -> Reply {
        self.headers.push((name.into(), value.into()));
        self
    }

    fn body(self, content_type: &str, body: &str) -> Reply {
        let mut reply = self.header("Content-Type", content_type);
        reply.body = body.as_bytes().to_vec();
        reply
    }

    fn json(status: u16, body: &str) -> Reply {
        Reply::status(status).body("application/json", body)
    }

    /// A 200 whose body is the result `result` for the request `seen`.
    fn result(seen: &Seen, result: &str) -> Reply {
        Reply::json(200, &format!(r#"{{"jsonrpc":"2.0","id":{},"result":{result}}}"#, seen.rpc_id()))
    }

    /// A 200 event stream of these events (raw SSE text, blank lines
    /// included), which ends with its body.
    fn events(text: &str) -> Reply {
        Reply::status(200).body("text/event-stream", text)
    }

    fn bytes(&self) -> Vec<u8> {
        let mut out = format!("HTTP/1.1 {} Canned\r\n", self.status);
        for (name, value) in &self.headers {
            out.push_str(&format!("{name}: {value}\r\n"));
        }
        out.push_str(&format!("Content-Length: {}\r\n\r\n", self.body.len()));
        let mut out = out.into_bytes();
        out.extend_from_slice(&self.body);
        out
    }
}

/// Chooses the answer to a request, given the request and its number
/// (from 0, in the order requests reached the server).
type Script = dyn Fn(&Seen, usize) -> Reply + Send + Sync;

/// The server: a thread accepting connections on a port of its own, and
/// one thread per connection answering its requests in turn (the client
/// keeps connections alive, and its server stream's GET has one of its own).
struct Canned {
    port: u16,
    seen: Arc<Mutex<Vec<Seen>>>,
    stopped: Arc<AtomicBool>,
}

impl Canned {
    fn start(script: impl Fn(&Seen, usize) -> Reply + Send + Sync + 'static) -> Canned {
        let listener = TcpListener::bind("127.0.0.1:0").expect("a port on 127.0.0.1");
        let port = listener.local_addr().unwrap().port();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let stopped = Arc::new(AtomicBool::new(false));
        let script: Arc<Script> = Arc::new(script);
        let (log, stop) = (seen.clone(), stopped.clone());
        thread::spawn(move || {
            for conn in listener.incoming() {
                if stop.load(Ordering::Relaxed) {
                    return;
                }
                let Ok(conn) = conn else { continue };
                let (log, script) = (log.clone(), script.clone());
                thread::spawn(move || serve(conn, &log, &*script));
            }
        });
        Canned { port, seen, stopped }
    }

    fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }

    /// Method and path of every request so far, e.g. "POST /mcp".
    fn lines(&self) -> Vec<String> {
        self.seen().iter().map(|s| format!("{} {}", s.method, s.path)).collect()
    }
}

impl Drop for Canned {
    fn drop(&mut self) {
        self.stopped.store(true, Ordering::Relaxed);
        // The accept loop looks at the flag only when a connection comes.
        let _ = TcpStream::connect(("127.0.0.1", self.port));
    }
}

fn serve(conn: TcpStream, log: &Mutex<Vec<Seen>>, script: &Script) {
    // A client that neither speaks nor hangs up must not hold the thread.
    let _ = conn.set_read_timeout(Some(Duration::from_secs(30)));
    let Ok(read_half) = conn.try_clone() else { return };
    let mut reader = BufReader::new(read_half);
    let mut writer = conn;
    while let Some(request) = read_request(&mut reader) {
        let number = {
            let mut log = log.lock().unwrap();
            log.push(request.clone());
            log.len() - 1
        };
        if writer.write_all(&script(&request, number).bytes()).is_err() {
            return;
        }
    }
}

/// One request off the connection; None at its end (or on garbage).
fn read_request(reader: &mut impl BufRead) -> Option<Seen> {
    let mut line = String::new();
    if reader.read_line(&mut line).ok()? == 0 {
        return None;
    }
    let mut parts = line.split_whitespace();
    let (method, path) = (parts.next()?.to_string(), parts.next()?.to_string());
    let mut headers = Vec::new();
    loop {
        line.clear();
        reader.read_line(&mut line).ok()?;
        let text = line.trim_end_matches(['\r', '\n']);
        if text.is_empty() {
            break;
        }
        let (name, value) = text.split_once(':')?;
        headers.push((name.to_ascii_lowercase(), value.trim().to_string()));
    }
    let mut seen = Seen { method, path, headers, body: String::new() };
    let mut body = Vec::new();
    if seen.header("transfer-encoding").is_some_and(|te| te.eq_ignore_ascii_case("chunked")) {
        // ureq sends a sized body with a length; chunks only in case.
        loop {
            line.clear();
            reader.read_line(&mut line).ok()?;
            let size = usize::from_str_radix(line.trim().split(';').next()?, 16).ok()?;
            let mut chunk = vec![0; size + 2];
            reader.read_exact(&mut chunk).ok()?;
            if size == 0 {
                break;
            }
            body.extend_from_slice(&chunk[..size]);
        }
    } else if let Some(length) = seen.header("content-length") {
        body = vec![0; length.parse().ok()?];
        reader.read_exact(&mut body).ok()?;
    }
    seen.body = String::from_utf8_lossy(&body).into_owned();
    Some(seen)
}

/// Options as the binding builds them for `mcp.new{url = ...}`, with
/// short bounds: every canned answer is immediate.
fn options(url: String) -> Options {
    Options {
        url,
        headers: Vec::new(),
        timeout: Duration::from_secs(5),
        connect_timeout: Duration::from_secs(5),
        max_message_bytes: 1 << 20,
        max_header_bytes: 8192,
        ca_pem: None,
        dpop: None,
        bearer: Arc::default(),
        login: false,
        lua_handled: Vec::new(),
        doorbell: None,
        kind: Default::default(),
    }
}

fn connect(url: String) -> Http {
    Http::connect(options(url)).expect("connect")
}

fn json(text: &str) -> Json {
    codec::decode(text.as_bytes()).expect("test JSON")
}

fn request(id: i64, method: &str) -> Json {
    json(&format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"{method}","params":{{}}}}"#))
}

fn notification(method: &str) -> Json {
    json(&format!(r#"{{"jsonrpc":"2.0","method":"{method}"}}"#))
}

fn text(msg: &Json) -> String {
    String::from_utf8(codec::encode(msg)).unwrap()
}

/// What `receive` gave, in words, for a failed assertion.
fn describe(received: &Option<Received>) -> String {
    match received {
        None => "nothing".into(),
        Some(Received::Message(m)) => format!("message {}", text(m)),
        Some(Received::TooDeep(id)) => format!("too deep {id:?}"),
        Some(Received::Failed(id, e)) => format!("failed {id:?}: {e}"),
        Some(Received::Delivered(id)) => format!("delivered {id:?}"),
    }
}

fn receive_within(http: &mut Http, wait: Duration) -> Option<Received> {
    http.receive(Instant::now() + wait).expect("receive")
}

/// The next message, as JSON text; anything else fails the test.
fn next_message(http: &mut Http) -> String {
    match receive_within(http, Duration::from_secs(5)) {
        Some(Received::Message(m)) => text(&m),
        other => panic!("expected a message, got {}", describe(&other)),
    }
}

/// Asserts that nothing more comes: short, since every answer is canned.
fn assert_nothing_to_read(http: &mut Http) {
    let received = receive_within(http, Duration::from_millis(300));
    assert!(received.is_none(), "expected nothing, got {}", describe(&received));
}

/// The error `send` fails with; its success fails the test.
/// What `initialize` posted to `url` fails with; the client is closed.
fn initialize_refused(url: &str) -> Error {
    let mut http = connect(url.to_string());
    let err = send_error(&mut http, &request(1, "initialize"));
    http.close();
    err
}

fn send_error(http: &mut Http, msg: &Json) -> Error {
    match http.send(msg) {
        Err(e) => e,
        Ok(()) => panic!("{} was sent without an error", text(msg)),
    }
}

#[test]
fn a_202_to_a_notification_is_delivered_with_nothing_to_read() {
    let server = Canned::start(|_, _| Reply::status(202));
    let mut http = connect(server.url("/mcp"));
    let notice = notification("notifications/initialized");
    http.send(&notice).expect("a 202 is a delivery");
    assert_nothing_to_read(&mut http);
    // The same notice posted from a thread reports its delivery, and
    // only that.
    let key = IdKey::Str(b"notice-1".to_vec());
    assert!(!http.send_notice(&notice, &key, Duration::from_secs(5)).unwrap(), "posted from a thread");
    match receive_within(&mut http, Duration::from_secs(5)) {
        Some(Received::Delivered(k)) => assert_eq!(k, key),
        other => panic!("expected the delivery, got {}", describe(&other)),
    }
    assert_nothing_to_read(&mut http);
    http.close();
    let seen = server.seen();
    assert_eq!(server.lines(), ["POST /mcp", "POST /mcp"]);
    for s in &seen {
        assert_eq!(s.body, text(&notice));
        assert_eq!(s.header("content-type"), Some("application/json"));
        assert_eq!(s.header("accept"), Some("application/json, text/event-stream"));
    }
}

#[test]
fn a_json_body_answers_the_request_whose_id_it_carries() {
    let server = Canned::start(|seen, _| Reply::result(seen, r#"{"via":"json"}"#));
    let mut http = connect(server.url("/mcp"));
    http.send(&request(7, "tools/list")).unwrap();
    assert_eq!(next_message(&mut http), r#"{"jsonrpc":"2.0","id":7,"result":{"via":"json"}}"#);
    http.send(&request(8, "tools/list")).unwrap();
    assert_eq!(next_message(&mut http), r#"{"jsonrpc":"2.0","id":8,"result":{"via":"json"}}"#);
    assert_nothing_to_read(&mut http);
    http.close();
}

#[test]
fn an_event_stream_reply_is_read_to_its_reply() {
    const LOG: &str =
        r#"{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"working"}}"#;
    let server = Canned::start(|seen, _| {
        let reply = format!(r#"{{"jsonrpc":"2.0","id":{},"result":{{"via":"sse"}}}}"#, seen.rpc_id());
        // A priming event (id, empty data) and a comment, which carry
        // nothing; a notification before the reply, delivered in order.
        Reply::events(&format!("id: 1\ndata:\n\n: comment\n\ndata: {LOG}\n\ndata: {reply}\n\n"))
    });
    let mut http = connect(server.url("/mcp"));
    http.send(&request(1, "tools/call")).unwrap();
    assert_eq!(next_message(&mut http), LOG);
    assert_eq!(next_message(&mut http), r#"{"jsonrpc":"2.0","id":1,"result":{"via":"sse"}}"#);
    assert_nothing_to_read(&mut http);
    // The stream was left at its end: the next request goes out as usual.
    http.send(&request(2, "tools/call")).unwrap();
    assert_eq!(next_message(&mut http), LOG);
    assert_eq!(next_message(&mut http), r#"{"jsonrpc":"2.0","id":2,"result":{"via":"sse"}}"#);
    http.close();
    assert_eq!(server.lines(), ["POST /mcp", "POST /mcp"]);
}

#[test]
fn a_401_with_a_challenge_is_unauthorized_with_the_hint_to_set_opts_auth_token() {
    let server = Canned::start(|_, _| {
        Reply::json(401, r#"{"error":"invalid_token"}"#).header(
            "WWW-Authenticate",
            r#"Bearer resource_metadata="https://auth.example/.well-known/oauth-protected-resource""#,
        )
    });
    let url = server.url("/mcp");
    let err = initialize_refused(&url);
    assert!(matches!(err, Error::Unauthorized { status: 401, .. }), "{err:?}");
    assert_eq!(
        err.to_string(),
        format!(
            "MCP transport failed (401): the server at {url} refused the request (HTTP 401, WWW-Authenticate: Bearer \
             resource_metadata=\"https://auth.example/.well-known/oauth-protected-resource\"); it needs credentials: \
             set opts.auth.token (or opts.headers.Authorization)"
        )
    );
}

#[test]
fn a_403_without_a_challenge_is_the_servers_own_refusal_in_its_words() {
    let server = Canned::start(|seen, _| match seen.path.as_str() {
        "/origin" => Reply::status(403).body("text/plain", "Origin http://evil.example is not allowed\n"),
        "/bare" => Reply::status(403),
        // With a challenge, a 403 is about credentials after all.
        _ => Reply::status(403).header("WWW-Authenticate", r#"Bearer error="insufficient_scope""#),
    });
    let err = initialize_refused(&server.url("/origin"));
    assert!(matches!(&err, Error::Transport { code, .. } if code == "403"), "{err:?}");
    assert_eq!(err.to_string(), "MCP transport failed (403): HTTP 403: Origin http://evil.example is not allowed");

    let err = initialize_refused(&server.url("/bare"));
    assert!(matches!(&err, Error::Transport { code, .. } if code == "403"), "{err:?}");
    assert_eq!(err.to_string(), "MCP transport failed (403): HTTP 403");

    let url = server.url("/challenged");
    let err = initialize_refused(&url);
    assert!(matches!(err, Error::Unauthorized { status: 403, .. }), "{err:?}");
    assert_eq!(
        err.to_string(),
        format!(
            "MCP transport failed (403): the server at {url} refused the request (HTTP 403, WWW-Authenticate: Bearer \
             error=\"insufficient_scope\"); it needs credentials: set opts.auth.token (or opts.headers.Authorization)"
        )
    );
}

#[test]
fn a_404_on_a_request_that_carried_a_session_id_means_the_session_is_gone() {
    let server = Canned::start(|seen, number| match (seen.method.as_str(), number) {
        ("POST", 0) => Reply::result(seen, r#"{"protocolVersion":"2025-06-18"}"#).header("Mcp-Session-Id", "s-1"),
        ("POST", _) => {
            Reply::json(404, r#"{"jsonrpc":"2.0","id":2,"error":{"code":-32001,"message":"Session not found"}}"#)
        }
        _ => Reply::status(200),
    });
    let mut http = connect(server.url("/mcp"));
    http.send(&request(1, "initialize")).unwrap();
    next_message(&mut http);
    assert_eq!(http.session_id().as_deref(), Some("s-1"));
    let err = send_error(&mut http, &request(2, "tools/list"));
    assert!(matches!(err, Error::SessionExpired), "{err:?}");
    assert_eq!(err.to_string(), "MCP: the server ended the session (HTTP 404)");
    http.close();
    let seen = server.seen();
    assert_eq!(seen[1].header("mcp-session-id"), Some("s-1"));
}

#[test]
fn a_404_without_a_session_id_is_not_a_lost_session() {
    let server = Canned::start(|_, number| match number {
        0 => Reply::status(404).body("text/plain", "no such endpoint"),
        // A JSON-RPC error in a failure's body is the reply to the request.
        _ => Reply::json(404, r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32601,"message":"Method not found"}}"#),
    });
    let mut http = connect(server.url("/mcp"));
    let err = send_error(&mut http, &request(1, "tools/list"));
    assert!(matches!(&err, Error::Transport { code, .. } if code == "404"), "{err:?}");
    assert_eq!(err.to_string(), "MCP transport failed (404): HTTP 404: no such endpoint");
    http.send(&request(2, "tools/list")).expect("a JSON-RPC error is a reply, not a failure");
    assert_eq!(
        next_message(&mut http),
        r#"{"jsonrpc":"2.0","error":{"code":-32601,"message":"Method not found"},"id":2}"#
    );
    http.close();
    assert!(server.seen().iter().all(|s| s.header("mcp-session-id").is_none()));
}

#[test]
fn a_405_to_the_server_streams_get_means_no_server_stream_and_nothing_fails() {
    let server = Canned::start(|seen, _| match (seen.method.as_str(), seen.rpc_method().as_deref()) {
        ("GET", _) => Reply::status(405),
        ("POST", Some("initialize")) => {
            Reply::result(seen, r#"{"protocolVersion":"2025-06-18"}"#).header("Mcp-Session-Id", "s-1")
        }
        ("POST", Some("notifications/initialized")) => Reply::status(202),
        ("POST", _) => Reply::result(seen, r#"{"tools":[]}"#),
        _ => Reply::status(200),
    });
    let mut http = connect(server.url("/mcp"));
    http.send(&request(1, "initialize")).unwrap();
    next_message(&mut http);
    http.established("2025-06-18");
    // The server stream is asked for once `initialized` is posted.
    http.send(&notification("notifications/initialized")).expect("a 405 to the GET fails nothing");
    http.send(&request(2, "tools/list")).unwrap();
    assert_eq!(next_message(&mut http), r#"{"jsonrpc":"2.0","id":2,"result":{"tools":[]}}"#);
    assert_nothing_to_read(&mut http);
    http.close();
    assert_eq!(server.lines(), ["POST /mcp", "POST /mcp", "GET /mcp", "POST /mcp", "DELETE /mcp"]);
    let get = &server.seen()[2];
    assert_eq!(get.header("accept"), Some("text/event-stream"));
    assert_eq!(get.header("mcp-session-id"), Some("s-1"));
    assert_eq!(get.header("mcp-protocol-version"), Some("2025-06-18"));
}

#[test]
fn a_5xx_with_a_body_is_a_transport_failure_with_the_status_and_the_bodys_start() {
    // 26 characters before the filler, two of them controls: ESC and CR.
    const PAGE_START: &str = "<h1>Bad\u{1b}[2J gateway</h1>\r\n";
    let server = Canned::start(|seen, _| match seen.path.as_str() {
        "/page" => Reply::status(502).body("text/html", &format!("  {PAGE_START}{}", "x".repeat(300))),
        _ => Reply::status(500),
    });
    let mut http = connect(server.url("/page"));
    let err = send_error(&mut http, &request(1, "tools/list"));
    assert!(matches!(&err, Error::Transport { code, .. } if code == "502"), "{err:?}");
    // Trimmed, cut at 200 characters, controls shown as U+FFFD (a
    // newline stays).
    assert_eq!(
        err.to_string(),
        format!("MCP transport failed (502): HTTP 502: <h1>Bad\u{fffd}[2J gateway</h1>\u{fffd}\n{}", "x".repeat(174))
    );
    http.close();

    let mut http = connect(server.url("/empty"));
    let err = send_error(&mut http, &request(1, "tools/list"));
    assert_eq!(err.to_string(), "MCP transport failed (500): HTTP 500");
    http.close();
}

#[test]
fn a_redirect_within_the_origin_is_followed_with_method_and_body_kept() {
    let server = Canned::start(|seen, _| match seen.path.as_str() {
        // Relative, then absolute: both the same origin. A 302 turns a
        // POST into a GET in browsers; here it stays a POST.
        "/mcp" => Reply::status(302).header("Location", "/mid"),
        "/mid" => {
            let host = seen.header("host").unwrap_or_default();
            Reply::status(308).header("Location", &format!("http://{host}/real"))
        }
        _ => Reply::result(seen, r#"{"at":"real"}"#),
    });
    let mut opts = options(server.url("/mcp"));
    opts.headers.push(("X-Api-Key".into(), "secret".into()));
    let mut http = Http::connect(opts).unwrap();
    let first = request(1, "tools/list");
    http.send(&first).unwrap();
    assert_eq!(next_message(&mut http), r#"{"jsonrpc":"2.0","id":1,"result":{"at":"real"}}"#);
    // Where it led is remembered: the next request goes straight there.
    http.send(&request(2, "tools/list")).unwrap();
    assert_eq!(next_message(&mut http), r#"{"jsonrpc":"2.0","id":2,"result":{"at":"real"}}"#);
    http.close();
    assert_eq!(server.lines(), ["POST /mcp", "POST /mid", "POST /real", "POST /real"]);
    let seen = server.seen();
    for s in &seen[..3] {
        assert_eq!(s.body, text(&first));
        assert_eq!(s.header("x-api-key"), Some("secret"));
        assert_eq!(s.header("content-type"), Some("application/json"));
    }
}

#[test]
fn a_redirect_to_another_origin_is_refused_naming_its_location() {
    let server = Canned::start(|seen, _| match seen.path.as_str() {
        // The same server under another host name: another origin.
        "/away" => {
            let host = seen.header("host").unwrap_or_default().replace("127.0.0.1", "localhost");
            Reply::status(302).header("Location", &format!("http://{host}/landing"))
        }
        _ => Reply::result(seen, "{}"),
    });
    let url = server.url("/away");
    let mut opts = options(url.clone());
    opts.headers.push(("X-Api-Key".into(), "secret".into()));
    let mut http = Http::connect(opts).unwrap();
    let err = send_error(&mut http, &request(1, "initialize"));
    assert!(matches!(err, Error::Redirected { status: 302, .. }), "{err:?}");
    assert_eq!(
        err.to_string(),
        format!(
            "MCP transport failed (302): the server at {url} redirected to http://localhost:{}/landing, which is not \
             followed (another origin: your headers and the session id stay with the one they were given for); use \
             that address as opts.url if you trust it",
            server.port
        )
    );
    http.close();
    assert_eq!(server.lines(), ["POST /away"]);
}

#[test]
fn five_redirects_are_followed_and_a_sixth_is_refused() {
    // /five/N and /six/N lead to N+1 until N is 5 and 6, then answer.
    let server = Canned::start(|seen, _| {
        let (chain, n) = seen.path[1..].split_once('/').unwrap();
        let n: usize = n.parse().unwrap();
        let last = if chain == "five" { 5 } else { 6 };
        match n < last {
            true => Reply::status(307).header("Location", &format!("/{chain}/{}", n + 1)),
            false => Reply::result(seen, r#"{"hops":"done"}"#),
        }
    });
    let mut http = connect(server.url("/five/0"));
    http.send(&request(1, "tools/list")).expect("five hops are followed");
    assert_eq!(next_message(&mut http), r#"{"jsonrpc":"2.0","id":1,"result":{"hops":"done"}}"#);
    http.close();

    let mut http = connect(server.url("/six/0"));
    let err = send_error(&mut http, &request(1, "tools/list"));
    assert!(matches!(err, Error::Redirected { status: 307, .. }), "{err:?}");
    assert_eq!(
        err.to_string(),
        format!(
            "MCP transport failed (307): the server at {} redirected to /six/6, which is not followed (too many \
             redirects); use that address as opts.url if you trust it",
            server.url("/six/5")
        )
    );
    http.close();
    let six: Vec<_> = server.lines().into_iter().filter(|l| l.contains("/six/")).collect();
    assert_eq!(six, ["POST /six/0", "POST /six/1", "POST /six/2", "POST /six/3", "POST /six/4", "POST /six/5"]);
}

#[test]
fn a_header_over_max_header_bytes_is_refused_before_anything_is_sent() {
    let server = Canned::start(|seen, _| {
        let length = seen.header("mcp-param-region").map_or(0, str::len);
        Reply::result(seen, &format!(r#"{{"length":{length}}}"#))
    });
    let mut http = connect(server.url("/mcp"));
    let call = request(1, "tools/call");
    let region = |bytes: usize| [("Mcp-Param-Region".to_string(), "a".repeat(bytes))];
    // The session puts the request's name where this leaves it empty.
    let refusal = "MCP  not sent: its Mcp-Param-Region header would be 9000 bytes, over the 8192 this client sends in \
                   one header (opts.max_header_bytes; HTTP servers and proxies commonly refuse more than 8 KiB)";
    for detached in [None, Some(Duration::from_secs(5))] {
        let err = match http.send_request(&call, &region(9000), detached) {
            Err(e) => e,
            Ok(()) => panic!("a 9000-byte header went out (detached: {detached:?})"),
        };
        assert!(matches!(err, Error::HeaderTooLarge { bytes: 9000, limit: 8192, .. }), "{err:?}");
        assert_eq!(err.to_string(), refusal);
    }
    // The limit itself is allowed.
    http.send_request(&call, &region(8192), None).unwrap();
    assert_eq!(next_message(&mut http), r#"{"jsonrpc":"2.0","id":1,"result":{"length":8192}}"#);
    assert_nothing_to_read(&mut http);
    http.close();
    assert_eq!(server.lines(), ["POST /mcp"]);
}
