//! The listening socket and its connections, served by the process's poll
//! thread (`transport::poller`) like every client's descriptors: it
//! accepts, reads requests within their bounds, turns away what the
//! guard refuses, and queues the rest for the Lua thread, ringing the
//! server's doorbell (what `server:fd()` returns).

use std::collections::VecDeque;
use std::net::TcpListener;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::connection::{Connection, Progress};
use super::guard::Guard;
use super::request::{Limits, Request};
use super::response;
use crate::codec::{encode, Json};
use crate::protocol;
use crate::transport::doorbell::Doorbell;
use crate::transport::poller::{Descriptor, Round, Watched, READABLE};

/// A request for the Lua thread, and the connection its answer goes to.
pub struct Exchange {
    pub connection: Arc<Connection>,
    pub request: Request,
}

/// What the poll thread and the Lua thread share.
#[derive(Default)]
pub struct Shared {
    pub queue: Mutex<VecDeque<Exchange>>,
    pub arrived: Condvar,
    pub doorbell: Doorbell,
    pub closed: AtomicBool,
    /// This process's stdin ended (watched when `listen` was asked to
    /// serve until it does).
    pub stdin_ended: AtomicBool,
}

impl Shared {
    pub fn queue(&self) -> MutexGuard<'_, VecDeque<Exchange>> {
        self.queue.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The next request, waiting `within` at most.
    pub fn take(&self, within: Duration) -> Option<Exchange> {
        let mut queue = self.queue();
        if queue.is_empty() && !within.is_zero() {
            queue = self.arrived.wait_timeout(queue, within).unwrap_or_else(|p| p.into_inner()).0;
        }
        queue.pop_front()
    }
}

pub struct Listening {
    socket: TcpListener,
    /// Connections by their place, which is their poll tag less one.
    slots: Mutex<Vec<Option<Arc<Connection>>>>,
    pub shared: Arc<Shared>,
    guard: Guard,
    pub limits: Limits,
    path: String,
    /// Watch this process's stdin, and end serving at its end.
    pub watch_stdin: bool,
}

/// The poll tag of stdin: past every connection's.
const STDIN_TAG: u32 = u32::MAX;

impl Listening {
    pub fn new(socket: TcpListener, guard: Guard, limits: Limits, path: String) -> std::io::Result<Listening> {
        socket.set_nonblocking(true)?;
        let slots = Mutex::new(vec![None; limits.connections]);
        Ok(Listening { socket, slots, shared: Arc::new(Shared::default()), guard, limits, path, watch_stdin: false })
    }

    fn slots(&self) -> MutexGuard<'_, Vec<Option<Arc<Connection>>>> {
        self.slots.lock().unwrap_or_else(|p| p.into_inner())
    }

    #[cfg(unix)]
    fn descriptor(&self) -> Descriptor {
        std::os::fd::AsRawFd::as_raw_fd(&self.socket)
    }

    #[cfg(windows)]
    fn descriptor(&self) -> Descriptor {
        std::os::windows::io::AsRawSocket::as_raw_socket(&self.socket) as Descriptor
    }

    fn accept(&self) {
        while let Ok((stream, _)) = self.socket.accept() {
            let Ok(connection) = Connection::new(stream) else { continue };
            let connection = Arc::new(connection);
            let mut slots = self.slots();
            match slots.iter_mut().find(|s| s.is_none()) {
                Some(free) => *free = Some(connection),
                None => {
                    drop(slots);
                    let why = format!("this server takes {} connections at once", self.limits.connections);
                    refuse(&connection, 503, &why, None, &self.limits);
                }
            }
        }
    }

    /// A request read whole: queued for Lua, or refused here.
    fn admit(&self, connection: &Arc<Connection>, progress: Progress) {
        let request = match progress {
            Progress::Nothing => return,
            Progress::Refused(status, why) => return refuse(connection, status, &why, None, &self.limits),
            Progress::Request(request) => request,
        };
        if request.path != self.path {
            let why = format!("this server answers at {}", self.path);
            return refuse(connection, 404, &why, None, &self.limits);
        }
        if let Err(refusal) = self.guard.check(&request) {
            return refuse(connection, refusal.status, &refusal.why, refusal.challenge, &self.limits);
        }
        if !matches!(request.method.as_str(), "POST" | "GET" | "DELETE") {
            let why = format!("{} is not a method of MCP's HTTP transport: POST, GET or DELETE", request.method);
            return refuse(connection, 405, &why, None, &self.limits);
        }
        self.shared.queue().push_back(Exchange { connection: connection.clone(), request });
        self.shared.arrived.notify_one();
        self.shared.doorbell.ring();
    }
}

/// Answers with `status` and a JSON-RPC error saying why, and closes.
pub fn refuse(connection: &Connection, status: u16, why: &str, challenge: Option<String>, limits: &Limits) {
    let body = encode(&protocol::error_response(Json::Null, -32600, why));
    let mut headers = Vec::new();
    if let Some(challenge) = challenge {
        headers.push(("WWW-Authenticate", challenge));
    }
    if status == 405 {
        headers.push(("Allow", "GET, POST, DELETE".to_string()));
    }
    connection.write(&response::whole(status, &headers, Some("application/json"), &body, true), limits.unsent_bytes);
    connection.done(true);
}

impl Listening {
    /// Reads (and drops) what comes on stdin; at its end, Lua hears that
    /// serving is over.
    #[cfg(unix)]
    fn read_stdin(&self, buf: &mut [u8]) {
        // SAFETY: a read into a live buffer of its length.
        let n = unsafe { libc::read(0, buf.as_mut_ptr().cast(), buf.len()) };
        let again = n < 0 && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted;
        if n == 0 || (n < 0 && !again) {
            self.shared.stdin_ended.store(true, Ordering::SeqCst);
            self.shared.arrived.notify_one();
            self.shared.doorbell.ring();
        }
    }

    #[cfg(windows)]
    fn read_stdin(&self, _buf: &mut [u8]) {}
}

impl Watched for Listening {
    fn gather(&self, round: &mut Round) {
        if self.shared.closed.load(Ordering::Relaxed) {
            return;
        }
        #[cfg(unix)]
        if self.watch_stdin && !self.shared.stdin_ended.load(Ordering::Relaxed) {
            round.watch(0, READABLE, STDIN_TAG);
        }
        // Watched even when every place is taken: a connection past the
        // bound is answered 503 and closed, rather than left to wait in
        // the kernel's backlog until it times out.
        round.watch(self.descriptor(), READABLE, 0);
        let slots = self.slots();
        for (place, connection) in slots.iter().enumerate() {
            if let Some(connection) = connection {
                let events = connection.events();
                if events != 0 {
                    round.watch(connection.descriptor(), events, place as u32 + 1);
                }
            }
        }
        if slots.iter().any(Option::is_some) {
            // The time bounds are looked at each second at least.
            round.wait_at_most(Duration::from_secs(1));
        }
    }

    fn ready(&self, tag: u32, buf: &mut [u8]) {
        if tag == 0 {
            return self.accept();
        }
        if tag == STDIN_TAG {
            return self.read_stdin(buf);
        }
        let connection = self.slots().get(tag as usize - 1).cloned().flatten();
        if let Some(connection) = connection {
            let progress = connection.ready(buf, &self.limits);
            self.admit(&connection, progress);
        }
    }

    fn after_round(&self) {
        let now = Instant::now();
        let connections: Vec<Arc<Connection>> = self.slots().iter().flatten().cloned().collect();
        for connection in &connections {
            let progress = connection.after_round(now, &self.limits);
            self.admit(connection, progress);
        }
        for slot in self.slots().iter_mut() {
            if slot.as_ref().is_some_and(|c| c.is_dead()) {
                *slot = None;
            }
        }
    }
}
