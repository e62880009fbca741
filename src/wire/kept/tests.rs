use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::AtomicUsize;
use std::sync::mpsc;
use std::thread;

use super::*;
use crate::wire::RememberingResolver;

const TIMEOUT: Duration = Duration::from_secs(10);

fn connections() -> Arc<KeptConnections> {
    kept_for(Duration::from_secs(15))
}

fn kept_for(max_idle_age: Duration) -> Arc<KeptConnections> {
    let agent = Agent::new_with_config(Agent::config_builder().proxy(None).max_idle_age(max_idle_age).build());
    Arc::new(KeptConnections::new(agent, SharedResolver(Arc::new(RememberingResolver::default()))))
}

/// One request's head and body as the server read them.
fn read_request(conn: &mut TcpStream, pending: &mut Vec<u8>) -> Option<String> {
    let mut chunk = [0u8; 4096];
    let end = loop {
        if let Some(at) = pending.windows(4).position(|w| w == b"\r\n\r\n") {
            break at + 4;
        }
        match conn.read(&mut chunk) {
            Ok(0) | Err(_) => return None,
            Ok(n) => pending.extend_from_slice(&chunk[..n]),
        }
    };
    let head = String::from_utf8_lossy(&pending[..end]).into_owned();
    let length: usize = head.lines().find_map(|l| l.strip_prefix("content-length: ")).map_or(0, |v| v.parse().unwrap());
    while pending.len() < end + length {
        let n = conn.read(&mut chunk).unwrap();
        pending.extend_from_slice(&chunk[..n]);
    }
    let request = String::from_utf8_lossy(&pending[..end + length]).into_owned();
    pending.drain(..end + length);
    Some(request)
}

/// A server that answers each request on each connection with the next
/// of `replies` (each written in the pieces given, a moment apart, so
/// that the client reads them apart), and counts its connections. The
/// requests it read arrive on the channel.
fn serve(replies: Vec<Vec<&'static [u8]>>) -> (String, Arc<AtomicUsize>, mpsc::Receiver<String>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/mcp?x=1", listener.local_addr().unwrap());
    let accepted = Arc::new(AtomicUsize::new(0));
    let (tx, rx) = mpsc::channel();
    let count = accepted.clone();
    thread::spawn(move || {
        let mut replies = replies.into_iter();
        for conn in listener.incoming() {
            let mut conn = conn.unwrap();
            conn.set_nodelay(true).unwrap();
            count.fetch_add(1, Ordering::SeqCst);
            let mut pending = Vec::new();
            while let Some(request) = read_request(&mut conn, &mut pending) {
                let _ = tx.send(request);
                let Some(reply) = replies.next() else { return };
                let closes = reply.last() == Some(&&b""[..]);
                for piece in reply {
                    conn.write_all(piece).unwrap();
                    thread::sleep(Duration::from_millis(2));
                }
                if closes {
                    break;
                }
            }
        }
    });
    (url, accepted, rx)
}

fn post(kept: &Arc<KeptConnections>, url: &str) -> Result<Response<Body>, ureq::Error> {
    let mut head = kept.head(url, 2).expect("a plain http URL is ours");
    head.field("Content-Type", "application/json");
    kept.post(head, b"{}", TIMEOUT).expect("valid headers")
}

fn text(response: Response<Body>) -> std::io::Result<String> {
    let mut text = String::new();
    response.into_body().into_reader().read_to_string(&mut text)?;
    Ok(text)
}

const OK: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 11\r\n\r\n{\"ok\":true}";

#[test]
fn a_reply_read_to_its_end_leaves_its_connection_for_the_next_post() {
    let (url, accepted, requests) = serve(vec![vec![OK]; 3]);
    let kept = connections();
    for _ in 0..3 {
        assert_eq!(text(post(&kept, &url).unwrap()).unwrap(), "{\"ok\":true}");
    }
    assert_eq!(accepted.load(Ordering::SeqCst), 1);
    // What ureq wrote, in its order: the length, the agent, the host, ours.
    let host = url.trim_start_matches("http://").trim_end_matches("/mcp?x=1");
    let expected = format!(
        "POST /mcp?x=1 HTTP/1.1\r\ncontent-length: 2\r\nuser-agent: {USER_AGENT}\r\nhost: {host}\r\n\
         content-type: application/json\r\n\r\n{{}}"
    );
    assert_eq!(requests.recv().unwrap(), expected);
}

#[test]
fn a_chunked_reply_with_extensions_and_a_trailer_arrives_whole_however_it_is_cut() {
    let reply: Vec<&[u8]> = vec![
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;name=value\r",
        b"\nhel",
        b"lo\r",
        b"\n",
        b"7\r\n, world\r\n0\r\nX-Trailer: 1\r",
        b"\n\r\n",
    ];
    let (url, accepted, _) = serve(vec![reply, vec![OK]]);
    let kept = connections();
    assert_eq!(text(post(&kept, &url).unwrap()).unwrap(), "hello, world");
    assert_eq!(text(post(&kept, &url).unwrap()).unwrap(), "{\"ok\":true}");
    assert_eq!(accepted.load(Ordering::SeqCst), 1, "the chunked reply's connection was kept");
}

#[test]
fn a_reply_that_says_connection_close_does_not_keep_its_connection() {
    let closing: &[u8] = b"HTTP/1.1 200 OK\r\nConnection: keep-alive, Close\r\nContent-Length: 2\r\n\r\n{}";
    let (url, accepted, _) = serve(vec![vec![closing, b""], vec![OK]]);
    let kept = connections();
    assert_eq!(text(post(&kept, &url).unwrap()).unwrap(), "{}");
    assert_eq!(text(post(&kept, &url).unwrap()).unwrap(), "{\"ok\":true}");
    assert_eq!(accepted.load(Ordering::SeqCst), 2);
}

#[test]
fn a_connection_the_server_closed_unannounced_is_not_posted_on_again() {
    let (url, accepted, _) = serve(vec![vec![OK, b""], vec![OK]]);
    let kept = connections();
    assert_eq!(text(post(&kept, &url).unwrap()).unwrap(), "{\"ok\":true}");
    thread::sleep(Duration::from_millis(100));
    assert_eq!(text(post(&kept, &url).unwrap()).unwrap(), "{\"ok\":true}");
    assert_eq!(accepted.load(Ordering::SeqCst), 2);
}

#[test]
fn a_connection_idle_longer_than_the_agent_keeps_them_is_not_posted_on_again() {
    let (url, accepted, _) = serve(vec![vec![OK]; 3]);
    let kept = kept_for(Duration::from_millis(300));
    assert_eq!(text(post(&kept, &url).unwrap()).unwrap(), "{\"ok\":true}");
    assert_eq!(text(post(&kept, &url).unwrap()).unwrap(), "{\"ok\":true}");
    assert_eq!(accepted.load(Ordering::SeqCst), 1, "kept while young");
    thread::sleep(Duration::from_millis(500));
    assert_eq!(text(post(&kept, &url).unwrap()).unwrap(), "{\"ok\":true}");
    assert_eq!(accepted.load(Ordering::SeqCst), 2, "a new connection once the kept one was too old");
}

#[test]
fn a_body_with_no_length_lasts_until_the_server_closes() {
    let (url, _, _) = serve(vec![vec![b"HTTP/1.1 200 OK\r\n\r\nall ", b"of it", b""]]);
    assert_eq!(text(post(&connections(), &url).unwrap()).unwrap(), "all of it");
}

#[test]
fn a_body_cut_short_of_its_length_is_an_error_not_an_end() {
    let (url, _, _) = serve(vec![vec![b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc", b""]]);
    let err = text(post(&connections(), &url).unwrap()).unwrap_err();
    assert_eq!(err.kind(), std::io::ErrorKind::UnexpectedEof);
}

#[test]
fn two_lengths_that_differ_are_refused() {
    let reply: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}";
    let (url, _, _) = serve(vec![vec![reply]]);
    let err = post(&connections(), &url).unwrap_err();
    assert_eq!(err.to_string(), "protocol: http parse fail: conflicting Content-Length headers");
}

#[test]
fn an_interim_reply_is_passed_over_for_the_one_that_follows() {
    let reply: &[u8] = b"HTTP/1.1 103 Early Hints\r\nLink: </x>\r\n\r\n";
    let (url, _, _) = serve(vec![vec![reply, OK]]);
    let response = post(&connections(), &url).unwrap();
    assert_eq!(response.status().as_u16(), 200);
    assert_eq!(text(response).unwrap(), "{\"ok\":true}");
}

#[test]
fn a_header_ureq_would_refuse_or_write_itself_is_left_to_ureq() {
    let kept = connections();
    for (name, value) in [("X-Key", "a\r\nInjected: 1"), ("X-Key", "a\0b"), ("Bad Name", "v"), ("Host", "elsewhere")] {
        let mut head = kept.head("http://127.0.0.1:1/mcp", 0).unwrap();
        head.field(name, value);
        assert!(kept.post(head, b"", TIMEOUT).is_none(), "{name}: {value:?}");
    }
    assert!(kept.head("https://127.0.0.1/mcp", 0).is_none(), "TLS is ureq's");
    assert!(kept.head("http://user:secret@127.0.0.1/mcp", 0).is_none(), "credentials in the URL are ureq's");
}

#[test]
fn closing_ends_a_wait_for_a_reply_that_never_comes() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    let silent = thread::spawn(move || {
        let (_conn, _) = listener.accept().unwrap();
        thread::sleep(Duration::from_secs(3));
    });
    let kept = connections();
    let waiting = {
        let kept = kept.clone();
        thread::spawn(move || post(&kept, &url).map(|_| ()))
    };
    thread::sleep(Duration::from_millis(200));
    let started = Instant::now();
    kept.shutdown();
    let result = waiting.join().unwrap();
    assert!(started.elapsed() < Duration::from_secs(2), "shutdown took {:?}", started.elapsed());
    assert!(result.is_err());
    assert!(kept.head("http://127.0.0.1:1/mcp", 0).is_none(), "nothing is posted here once shut");
    silent.join().unwrap();
}
