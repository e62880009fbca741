//! The loopback redirect (RFC 8252): when nobody hands the module the
//! URL the browser was sent back to, it listens on 127.0.0.1 for the
//! browser's request itself. The listener is bound before the login
//! starts, since its port is part of the redirect URI the client
//! registers; it answers only its own path, one request per connection,
//! and gives up at the login's deadline or at Ctrl-C.
//!
//! Whatever else connects is served beside the browser, not before it:
//! a port scanner, a browser's speculative connections, a page guessing
//! the port may each open connections and send nothing. Served one at a
//! time, six such connections held a real redirect for twelve seconds;
//! so every connection is read as its bytes come (one `poll` over all of
//! them, no thread each), each gets [`REQUEST_WAIT`] in all, and past
//! [`MAX_CONNECTIONS`] the oldest that has sent nothing is dropped for
//! the newest.

use std::io::{ErrorKind, Read, Write};
use std::net::{TcpListener, TcpStream};
#[cfg(unix)]
use std::os::unix::io::AsRawFd;
#[cfg(windows)]
use std::os::windows::io::AsRawSocket;
use std::time::{Duration, Instant};

use url::Url;

use crate::auth::plain_http::is_loopback;
use crate::error::{Error, Result};
use crate::interrupt;
#[cfg(unix)]
use crate::transport::fds::refuse_sigpipe;
use crate::wire::headers::{CONNECTION, CONTENT_LENGTH, CONTENT_TYPE};

/// A browser's request is small; anything longer is not one.
const MAX_REQUEST: usize = 16 << 10;
/// How long one connection may take to send its request: a browser's
/// speculative connection that sends nothing must not hold the login.
const REQUEST_WAIT: Duration = Duration::from_secs(2);
/// Connections read at once; a newer one pushes the oldest out, so a
/// flood of idle ones never keeps the browser's waiting.
const MAX_CONNECTIONS: usize = 64;
/// How often the wait looks at Ctrl-C and the deadline.
const POLL: Duration = Duration::from_millis(20);

const DONE_PAGE: &str =
    "<!doctype html><title>Logged in</title><p>The login is complete. You can close this window.</p>";

pub struct Listener {
    socket: TcpListener,
    /// The redirect URI, with the port the socket got.
    pub redirect_uri: String,
    path: String,
}

/// A connection whose request is still coming.
struct Incoming {
    stream: TcpStream,
    request: Vec<u8>,
    until: Instant,
}

/// What one connection's bytes came to.
enum Progress {
    /// Not all there yet.
    Waiting,
    /// Over, without this login's answer (served or dropped).
    Done,
    /// The browser's request with this login's state: its target.
    Answer(String),
}

impl Listener {
    /// Listens where `redirect_uri` points, which must be a loopback
    /// `http` address (port 0 or none: any free port). None for any
    /// other redirect URI: the caller's `authorize` must then return
    /// where the browser went.
    pub fn bind(redirect_uri: &str) -> Result<Option<Listener>> {
        let Ok(mut url) = Url::parse(redirect_uri) else {
            return Err(Error::BadInput(format!("mcp.new: opts.auth.redirect_uri is not a URL: {redirect_uri}")));
        };
        if url.scheme() != "http" || !is_loopback(&url) {
            return Ok(None);
        }
        let host = match url.host() {
            Some(url::Host::Ipv6(_)) => "[::1]".to_string(),
            Some(url::Host::Ipv4(address)) => address.to_string(),
            _ => "127.0.0.1".to_string(),
        };
        let port = url.port().unwrap_or(0);
        let socket = TcpListener::bind(format!("{host}:{port}")).map_err(|e| {
            Error::BadInput(format!("mcp: cannot listen on {host}:{port} for the login's redirect: {e}"))
        })?;
        socket
            .set_nonblocking(true)
            .map_err(|e| Error::BadInput(format!("mcp: cannot listen for the login's redirect: {e}")))?;
        let bound = socket.local_addr().map(|a| a.port()).unwrap_or(port);
        let _ = url.set_port(Some(bound));
        let path = url.path().to_string();
        Ok(Some(Listener { socket, redirect_uri: url.to_string(), path }))
    }

    /// Waits for the browser's request to the redirect path carrying
    /// this login's `state`, and returns the whole URL it asked for (its
    /// query holds the code, or the error). Other requests (a favicon, a
    /// page on this machine guessing the port) get a 404 or a 400 and the
    /// wait goes on.
    pub fn wait(&self, deadline: Instant, state: &str) -> Result<String> {
        let mut incoming: Vec<Incoming> = Vec::new();
        loop {
            self.accept_all(&mut incoming, deadline)?;
            let mut i = 0;
            while i < incoming.len() {
                match self.read_some(&mut incoming[i], state) {
                    Progress::Waiting if Instant::now() < incoming[i].until => i += 1,
                    Progress::Waiting | Progress::Done => {
                        incoming.swap_remove(i);
                    }
                    Progress::Answer(target) => {
                        let base = Url::parse(&self.redirect_uri).expect("made by bind");
                        return Ok(base.join(&target).map(String::from).unwrap_or(target));
                    }
                }
            }
            if interrupt::requested() {
                return Err(Error::Interrupted { what: "login".into() });
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(Error::LoginTimedOut { redirect_uri: self.redirect_uri.clone() });
            }
            self.poll(&incoming, POLL.min(deadline - now));
        }
    }

    /// Takes the connections waiting to be accepted, [`MAX_CONNECTIONS`]
    /// at most a round: a flood of them must not keep the wait from
    /// reading, or from noticing Ctrl-C and its deadline.
    fn accept_all(&self, incoming: &mut Vec<Incoming>, deadline: Instant) -> Result<()> {
        for _ in 0..MAX_CONNECTIONS {
            match self.socket.accept() {
                Ok((stream, _)) => {
                    if stream.set_nonblocking(true).is_err() {
                        continue;
                    }
                    // std's writes to a socket it connected never raise
                    // SIGPIPE; on macOS one it accepted may (a browser
                    // that hung up before our reply).
                    #[cfg(unix)]
                    refuse_sigpipe(stream.as_raw_fd());
                    if incoming.len() >= MAX_CONNECTIONS {
                        // The oldest that has sent nothing goes first: a
                        // browser's request is on its way in already.
                        let idle = incoming.iter().position(|c| c.request.is_empty()).unwrap_or(0);
                        incoming.remove(idle);
                    }
                    let until = deadline.min(Instant::now() + REQUEST_WAIT);
                    incoming.push(Incoming { stream, request: Vec::new(), until });
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(()),
                Err(e) if e.kind() == ErrorKind::Interrupted || e.kind() == ErrorKind::ConnectionAborted => {}
                Err(e) => return Err(Error::BadInput(format!("mcp: listening for the login's redirect failed: {e}"))),
            }
        }
        Ok(())
    }

    /// Sleeps until the listener or a connection has something to read,
    /// or `timeout`.
    #[cfg(unix)]
    fn poll(&self, incoming: &[Incoming], timeout: Duration) {
        let mut fds: Vec<libc::pollfd> = std::iter::once(self.socket.as_raw_fd())
            .chain(incoming.iter().map(|c| c.stream.as_raw_fd()))
            .map(|fd| libc::pollfd { fd, events: libc::POLLIN, revents: 0 })
            .collect();
        // SAFETY: `fds` is a valid array of its length, and every
        // descriptor in it stays open for the call.
        unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, timeout.as_millis() as libc::c_int) };
    }

    /// Sleeps until the listener or a connection has something to read,
    /// or `timeout`.
    #[cfg(windows)]
    fn poll(&self, incoming: &[Incoming], timeout: Duration) {
        use windows_sys::Win32::Networking::WinSock::{WSAPoll, POLLRDNORM, WSAPOLLFD};
        let mut fds: Vec<WSAPOLLFD> = std::iter::once(self.socket.as_raw_socket())
            .chain(incoming.iter().map(|c| c.stream.as_raw_socket()))
            .map(|s| WSAPOLLFD { fd: s as usize, events: POLLRDNORM, revents: 0 })
            .collect();
        // SAFETY: as above, with Winsock's poll.
        unsafe { WSAPoll(fds.as_mut_ptr(), fds.len() as u32, timeout.as_millis() as i32) };
    }

    /// Reads what a connection has sent so far; once its request head is
    /// whole, answers it.
    fn read_some(&self, connection: &mut Incoming, state: &str) -> Progress {
        let mut chunk = [0u8; 2048];
        loop {
            match connection.stream.read(&mut chunk) {
                Ok(0) => return Progress::Done,
                Ok(n) => connection.request.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => return Progress::Done,
            }
            if connection.request.len() >= MAX_REQUEST {
                break;
            }
        }
        let whole = connection.request.windows(4).any(|w| w == b"\r\n\r\n");
        if !whole && connection.request.len() < MAX_REQUEST {
            return Progress::Waiting;
        }
        match self.serve(&mut connection.stream, &connection.request, state) {
            Some(target) => Progress::Answer(target),
            None => Progress::Done,
        }
    }

    /// Answers one request head: the request target when it is our path
    /// with our state.
    fn serve(&self, stream: &mut TcpStream, request: &[u8], state: &str) -> Option<String> {
        let line = request.split(|&b| b == b'\n').next().unwrap_or_default();
        let line = String::from_utf8_lossy(line);
        let mut words = line.split_whitespace();
        let target = match (words.next(), words.next()) {
            (Some("GET"), Some(target)) => target.to_string(),
            _ => return None,
        };
        let path = target.split('?').next().unwrap_or_default();
        let ours = Url::parse("http://loopback")
            .and_then(|base| base.join(&target))
            .is_ok_and(|url| url.query_pairs().any(|(k, v)| k == "state" && v == state));
        let (status, body) = match (path == self.path, ours) {
            (true, true) => ("200 OK", DONE_PAGE),
            (true, false) => ("400 Bad Request", "Not this login's answer"),
            (false, _) => ("404 Not Found", "Not found"),
        };
        let reply = format!(
            "HTTP/1.1 {status}\r\n{CONTENT_TYPE}: text/html; charset=utf-8\r\n{CONTENT_LENGTH}: {}\r\n{CONNECTION}: close\r\n\r\n{body}",
            body.len()
        );
        // The reply is a few hundred bytes, which an empty socket buffer
        // takes at once; a peer that has filled its buffer gets less.
        let _ = stream.write_all(reply.as_bytes());
        (path == self.path && ours).then_some(target)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::thread;

    fn get(port: u16, target: &str) -> String {
        let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
        write!(s, "GET {target} HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
        let mut reply = String::new();
        s.read_to_string(&mut reply).unwrap();
        reply
    }

    #[test]
    fn the_browser_request_to_the_redirect_path_ends_the_wait_and_others_do_not() {
        let listener = Listener::bind("http://127.0.0.1/callback").unwrap().unwrap();
        let port = Url::parse(&listener.redirect_uri).unwrap().port().unwrap();
        assert_eq!(listener.redirect_uri, format!("http://127.0.0.1:{port}/callback"));
        let browser = thread::spawn(move || {
            let favicon = get(port, "/favicon.ico");
            let forged = get(port, "/callback?error=access_denied&state=guess");
            let done = get(port, "/callback?code=abc&state=xyz");
            (favicon, forged, done)
        });
        let url = listener.wait(Instant::now() + Duration::from_secs(10), "xyz").unwrap();
        assert_eq!(url, format!("http://127.0.0.1:{port}/callback?code=abc&state=xyz"));
        let (favicon, forged, done) = browser.join().unwrap();
        assert!(favicon.starts_with("HTTP/1.1 404"), "{favicon}");
        assert!(forged.starts_with("HTTP/1.1 400"), "{forged}");
        assert!(done.starts_with("HTTP/1.1 200") && done.contains("close this window"), "{done}");
    }

    #[test]
    fn nobody_coming_back_ends_at_the_deadline_naming_the_redirect() {
        let listener = Listener::bind("http://localhost:0/cb").unwrap().unwrap();
        let e = listener.wait(Instant::now() + Duration::from_millis(100), "s").unwrap_err();
        assert!(e.to_string().contains(&listener.redirect_uri), "{e}");
    }

    #[test]
    fn a_connection_that_trickles_bytes_does_not_hold_the_login_past_its_deadline() {
        let listener = Listener::bind("http://127.0.0.1/cb").unwrap().unwrap();
        let port = Url::parse(&listener.redirect_uri).unwrap().port().unwrap();
        let trickle = thread::spawn(move || {
            let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
            for _ in 0..40 {
                if s.write_all(b"G").is_err() {
                    break;
                }
                thread::sleep(Duration::from_millis(100));
            }
        });
        let start = Instant::now();
        assert!(listener.wait(Instant::now() + Duration::from_millis(700), "s").is_err());
        assert!(start.elapsed() < Duration::from_secs(2), "{:?}", start.elapsed());
        trickle.join().unwrap();
    }

    #[test]
    fn idle_connections_do_not_keep_the_browser_waiting() {
        let listener = Listener::bind("http://127.0.0.1/cb").unwrap().unwrap();
        let port = Url::parse(&listener.redirect_uri).unwrap().port().unwrap();
        let idle: Vec<TcpStream> = (0..6).map(|_| TcpStream::connect(("127.0.0.1", port)).unwrap()).collect();
        let browser = thread::spawn(move || {
            thread::sleep(Duration::from_millis(50));
            let start = Instant::now();
            let reply = get(port, "/cb?code=c&state=s");
            (reply, start.elapsed())
        });
        let url = listener.wait(Instant::now() + Duration::from_secs(20), "s").unwrap();
        assert!(url.ends_with("/cb?code=c&state=s"), "{url}");
        let (reply, took) = browser.join().unwrap();
        assert!(reply.starts_with("HTTP/1.1 200"), "{reply}");
        // Served one at a time, the six would have held it 12 s.
        assert!(took < Duration::from_secs(1), "{took:?}");
        drop(idle);
    }

    #[test]
    fn a_redirect_uri_that_is_not_loopback_http_is_not_listened_on() {
        assert!(Listener::bind("https://app.example/callback").unwrap().is_none());
        assert!(Listener::bind("http://192.0.2.1/callback").unwrap().is_none());
    }
}
