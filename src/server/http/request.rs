//! A request read off a connection: its head parsed by `httparse` (the
//! parser hyper uses, already built for ureq), its body by Content-Length,
//! each within the bounds a server that faces unknown clients needs.

use std::time::Duration;

/// The bounds on what one client may send. Each refusal names its bound
/// (docs/server.md lists them).
#[derive(Clone, Debug)]
pub struct Limits {
    /// The head: request line and headers.
    pub head_bytes: usize,
    pub headers: usize,
    pub body_bytes: usize,
    /// From a request's first byte to its last: a client that trickles
    /// (slowloris) is cut off here.
    pub read_time: Duration,
    /// A connection with no request under way is closed after this.
    pub idle_time: Duration,
    /// What may wait unsent for a client that does not read (a stream it
    /// never drains): past it the connection is closed.
    pub unsent_bytes: usize,
    pub connections: usize,
    pub sessions: usize,
    /// A session no request has used for this long ends.
    pub session_idle: Duration,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            head_bytes: 16 * 1024,
            headers: 64,
            body_bytes: 16 << 20,
            read_time: Duration::from_secs(30),
            idle_time: Duration::from_secs(120),
            unsent_bytes: 8 << 20,
            connections: 512,
            sessions: 1024,
            session_idle: Duration::from_secs(3600),
        }
    }
}

#[derive(Debug)]
pub struct Request {
    pub method: String,
    /// The path, without a query.
    pub path: String,
    /// Names in lower case, in the order sent.
    pub headers: Vec<(String, Vec<u8>)>,
    pub body: Vec<u8>,
}

impl Request {
    pub fn header(&self, name: &str) -> Option<&[u8]> {
        self.headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_slice())
    }

    pub fn header_text(&self, name: &str) -> Option<&str> {
        self.header(name).and_then(|v| std::str::from_utf8(v).ok()).map(str::trim)
    }

    /// Whether the Accept header names `kind` (or a wildcard that covers it).
    pub fn accepts(&self, kind: &str) -> bool {
        let Some(accept) = self.header_text("accept") else { return false };
        let family = kind.split('/').next().unwrap_or("");
        accept.split(',').map(|part| part.split(';').next().unwrap_or("").trim()).any(|given| {
            given.eq_ignore_ascii_case(kind) || given == "*/*" || given.eq_ignore_ascii_case(&format!("{family}/*"))
        })
    }
}

/// What the bytes read so far make.
#[derive(Debug)]
pub enum Parsed {
    /// Not a whole request yet.
    Incomplete,
    /// A request, and how many bytes of the input it took.
    Request(Request, usize),
    /// A request this server will not take: the status and why, after
    /// which the connection is closed (what follows cannot be trusted to
    /// start a request).
    Refused(u16, String),
}

pub fn parse(input: &[u8], limits: &Limits) -> Parsed {
    let mut headers = vec![httparse::EMPTY_HEADER; limits.headers];
    let mut head = httparse::Request::new(&mut headers);
    let head_len = match head.parse(input) {
        Ok(httparse::Status::Complete(len)) => len,
        Ok(httparse::Status::Partial) if input.len() > limits.head_bytes => {
            return Parsed::Refused(431, format!("the request's head is over {} bytes", limits.head_bytes))
        }
        Ok(httparse::Status::Partial) => return Parsed::Incomplete,
        Err(httparse::Error::TooManyHeaders) => {
            return Parsed::Refused(431, format!("the request has over {} headers", limits.headers))
        }
        Err(e) => return Parsed::Refused(400, format!("the request is not HTTP/1.1: {e}")),
    };
    if head_len > limits.head_bytes {
        return Parsed::Refused(431, format!("the request's head is over {} bytes", limits.head_bytes));
    }
    let method = head.method.unwrap_or("").to_string();
    let path = head.path.unwrap_or("").split('?').next().unwrap_or("").to_string();
    let headers: Vec<(String, Vec<u8>)> =
        head.headers.iter().map(|h| (h.name.to_ascii_lowercase(), h.value.to_vec())).collect();
    let length = match body_length(&headers, limits) {
        Ok(length) => length,
        Err((status, why)) => return Parsed::Refused(status, why),
    };
    if input.len() < head_len + length {
        return Parsed::Incomplete;
    }
    let body = input[head_len..head_len + length].to_vec();
    Parsed::Request(Request { method, path, headers, body }, head_len + length)
}

/// The body's length from Content-Length; a chunked body is refused (no
/// MCP client sends one: a JSON-RPC message is in memory whole).
fn body_length(headers: &[(String, Vec<u8>)], limits: &Limits) -> Result<usize, (u16, String)> {
    if headers.iter().any(|(n, _)| n == "transfer-encoding") {
        return Err((411, "send the body with a Content-Length, not chunked".into()));
    }
    let mut lengths = headers.iter().filter(|(n, _)| n == "content-length");
    let Some((_, value)) = lengths.next() else { return Ok(0) };
    if lengths.next().is_some() {
        return Err((400, "the request has two Content-Length headers".into()));
    }
    let length = std::str::from_utf8(value)
        .ok()
        .filter(|v| !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()))
        .and_then(|v| v.parse::<usize>().ok())
        .ok_or((400, "its Content-Length is not a number".to_string()))?;
    if length > limits.body_bytes {
        return Err((413, format!("the body is over {} bytes", limits.body_bytes)));
    }
    Ok(length)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parsed(text: &str) -> Parsed {
        parse(text.as_bytes(), &Limits::default())
    }

    #[test]
    fn a_request_is_whole_only_with_all_of_its_body() {
        let head = "POST /mcp?x=1 HTTP/1.1\r\nHost: a\r\nContent-Length: 4\r\n\r\n";
        assert!(matches!(parsed(&format!("{head}ab")), Parsed::Incomplete));
        match parsed(&format!("{head}abcdGET")) {
            Parsed::Request(r, used) => {
                assert_eq!((r.path.as_str(), r.body.as_slice(), used), ("/mcp", &b"abcd"[..], head.len() + 4))
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn bodies_and_heads_past_their_bounds_and_chunked_bodies_are_refused() {
        let limits = Limits { body_bytes: 10, head_bytes: 64, ..Limits::default() };
        let big = parse(b"POST / HTTP/1.1\r\nContent-Length: 11\r\n\r\n", &limits);
        assert!(matches!(big, Parsed::Refused(413, _)), "{big:?}");
        let long = format!("GET / HTTP/1.1\r\nX: {}", "a".repeat(100));
        assert!(matches!(parse(long.as_bytes(), &limits), Parsed::Refused(431, _)));
        let chunked = parsed("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n");
        assert!(matches!(chunked, Parsed::Refused(411, _)));
        let two = parsed("POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n");
        assert!(matches!(two, Parsed::Refused(400, _)));
        assert!(matches!(parsed("\x01\x02 nonsense\r\n\r\n"), Parsed::Refused(400, _)));
    }

    #[test]
    fn accept_is_read_with_its_wildcards() {
        let Parsed::Request(r, _) = parsed("GET / HTTP/1.1\r\nAccept: application/json;q=1, text/*\r\n\r\n") else {
            panic!()
        };
        assert!(r.accepts("application/json") && r.accepts("text/event-stream") && !r.accepts("image/png"));
    }
}
