//! The bytes of what the server answers: a whole response with its
//! length, or the head of an event stream sent in chunks (so that the
//! connection outlives the stream), and the stream's events.

/// A response's extra headers: names and values.
pub type Headers<'a> = &'a [(&'a str, String)];

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        202 => "Accepted",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        406 => "Not Acceptable",
        409 => "Conflict",
        411 => "Length Required",
        413 => "Content Too Large",
        415 => "Unsupported Media Type",
        431 => "Request Header Fields Too Large",
        503 => "Service Unavailable",
        _ => "Error",
    }
}

fn head(status: u16, headers: Headers, out: &mut Vec<u8>) {
    out.extend_from_slice(format!("HTTP/1.1 {status} {}\r\n", reason(status)).as_bytes());
    for (name, value) in headers {
        out.extend_from_slice(format!("{name}: {value}\r\n").as_bytes());
    }
}

/// A whole response. `close` says the connection ends after it.
pub fn whole(status: u16, headers: Headers, content_type: Option<&str>, body: &[u8], close: bool) -> Vec<u8> {
    let mut out = Vec::with_capacity(128 + body.len());
    head(status, headers, &mut out);
    if let Some(kind) = content_type {
        out.extend_from_slice(format!("Content-Type: {kind}\r\n").as_bytes());
    }
    if close {
        out.extend_from_slice(b"Connection: close\r\n");
    }
    out.extend_from_slice(format!("Content-Length: {}\r\n\r\n", body.len()).as_bytes());
    out.extend_from_slice(body);
    out
}

/// The head of an event stream; its events follow as chunks.
pub fn stream_head(headers: Headers) -> Vec<u8> {
    let mut out = Vec::with_capacity(160);
    head(200, headers, &mut out);
    out.extend_from_slice(
        b"Content-Type: text/event-stream\r\nCache-Control: no-cache\r\nTransfer-Encoding: chunked\r\n\r\n",
    );
    out
}

/// One event of a stream, as a chunk: `id` lets a client resume after it;
/// `retry` tells it how long to wait before reconnecting.
pub fn event(id: Option<&str>, data: &[u8], retry_ms: Option<u64>) -> Vec<u8> {
    let mut text = Vec::with_capacity(data.len() + 48);
    if let Some(id) = id {
        text.extend_from_slice(format!("id: {id}\n").as_bytes());
    }
    if let Some(retry) = retry_ms {
        text.extend_from_slice(format!("retry: {retry}\n").as_bytes());
    }
    // A message is one line of JSON; data lines may not hold a line end.
    for line in data.split(|&b| b == b'\n') {
        text.extend_from_slice(b"data: ");
        text.extend_from_slice(line);
        text.push(b'\n');
    }
    text.push(b'\n');
    chunk(&text)
}

pub fn chunk(bytes: &[u8]) -> Vec<u8> {
    let mut out = format!("{:x}\r\n", bytes.len()).into_bytes();
    out.extend_from_slice(bytes);
    out.extend_from_slice(b"\r\n");
    out
}

/// The end of a chunked body.
pub const LAST_CHUNK: &[u8] = b"0\r\n\r\n";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_event_is_a_chunk_of_its_fields() {
        assert_eq!(event(Some("s-1"), b"{}", None), b"12\r\nid: s-1\ndata: {}\n\n\r\n".to_vec());
        assert_eq!(event(None, b"", Some(500)), b"13\r\nretry: 500\ndata: \n\n\r\n".to_vec());
    }

    #[test]
    fn a_whole_response_says_its_length() {
        let bytes = whole(404, &[("Mcp-Session-Id", "x".into())], Some("text/plain"), b"no", true);
        assert_eq!(
            String::from_utf8(bytes).unwrap(),
            "HTTP/1.1 404 Not Found\r\nMcp-Session-Id: x\r\nContent-Type: text/plain\r\nConnection: close\r\nContent-Length: 2\r\n\r\nno"
        );
    }
}
