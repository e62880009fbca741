//! One client connection, shared by the poll thread (which reads requests
//! and writes what is queued once the socket takes it) and the Lua thread
//! (which answers them). A connection carries one request at a time: the
//! next is read once the answer to the last is written, or while it is
//! being answered up to a small read-ahead (so a client that hangs up is
//! noticed).

use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::sync::{Mutex, MutexGuard};
use std::time::Instant;

use super::request::{parse, Limits, Parsed, Request};
use crate::transport::poller::{self, Descriptor, READABLE, WRITABLE};

/// What is read while a request is being answered (the next request of
/// a client that pipelines, or nothing but its hang-up).
const READ_AHEAD: usize = 64 * 1024;

pub struct Connection {
    stream: TcpStream,
    state: Mutex<State>,
}

struct State {
    input: Vec<u8>,
    /// When the request being read began: it must end within the bound.
    began: Option<Instant>,
    /// The last byte read or written.
    last: Instant,
    /// A request is with the Lua thread (or a stream is open on it).
    busy: bool,
    output: Vec<u8>,
    /// Close once the output is written.
    closing: bool,
    dead: bool,
}

/// What a read made of the connection.
pub enum Progress {
    Nothing,
    Request(Request),
    /// Refused before it reached Lua: answered here, and the connection
    /// closes.
    Refused(u16, String),
}

impl Connection {
    pub fn new(stream: TcpStream) -> io::Result<Connection> {
        stream.set_nonblocking(true)?;
        let _ = stream.set_nodelay(true);
        let state = State {
            input: Vec::new(),
            began: None,
            last: Instant::now(),
            busy: false,
            output: Vec::new(),
            closing: false,
            dead: false,
        };
        Ok(Connection { stream, state: Mutex::new(state) })
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    #[cfg(unix)]
    pub fn descriptor(&self) -> Descriptor {
        std::os::fd::AsRawFd::as_raw_fd(&self.stream)
    }

    #[cfg(windows)]
    pub fn descriptor(&self) -> Descriptor {
        std::os::windows::io::AsRawSocket::as_raw_socket(&self.stream) as Descriptor
    }

    pub fn is_dead(&self) -> bool {
        self.state().dead
    }

    /// Queues `bytes` and writes what the socket takes now; the poll
    /// thread writes the rest. False once the connection is gone, or when
    /// the client has left more than `unsent` bytes unread (it is then
    /// closed: a client that does not read may not pin our memory).
    pub fn write(&self, bytes: &[u8], unsent: usize) -> bool {
        let mut state = self.state();
        if state.dead {
            return false;
        }
        state.output.extend_from_slice(bytes);
        self.flush(&mut state);
        if state.output.len() > unsent {
            self.close(&mut state);
        }
        if !state.output.is_empty() {
            poller::wake();
        }
        !state.dead
    }

    /// The answer is written (queued): the connection takes the next
    /// request, or closes once it is out.
    pub fn done(&self, close: bool) {
        let mut state = self.state();
        state.busy = false;
        state.closing |= close;
        if state.closing && state.output.is_empty() {
            self.close(&mut state);
        }
        poller::wake();
    }

    fn flush(&self, state: &mut State) {
        while !state.output.is_empty() && !state.dead {
            match (&self.stream).write(&state.output) {
                Ok(0) => self.close(state),
                Ok(n) => {
                    state.output.drain(..n);
                    state.last = Instant::now();
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => self.close(state),
            }
        }
        if state.closing && state.output.is_empty() && !state.busy {
            self.close(state);
        }
    }

    fn close(&self, state: &mut State) {
        if !state.dead {
            let _ = self.stream.shutdown(Shutdown::Both);
            state.dead = true;
            state.output = Vec::new();
        }
    }

    /// The events the poll thread watches for, none once it is gone.
    pub fn events(&self) -> i16 {
        let state = self.state();
        if state.dead {
            return 0;
        }
        let reads = !state.closing && (!state.busy || state.input.len() < READ_AHEAD);
        (if reads { READABLE } else { 0 }) | (if state.output.is_empty() { 0 } else { WRITABLE })
    }

    /// The poll thread: the socket is ready. Writes what waits, reads
    /// what came, and returns the request it completes.
    pub fn ready(&self, buf: &mut [u8], limits: &Limits) -> Progress {
        let mut state = self.state();
        self.flush(&mut state);
        loop {
            if state.dead || state.closing || (state.busy && state.input.len() >= READ_AHEAD) {
                break;
            }
            match (&self.stream).read(buf) {
                Ok(0) => self.close(&mut state),
                Ok(n) => {
                    if state.input.is_empty() {
                        state.began = Some(Instant::now());
                    }
                    state.input.extend_from_slice(&buf[..n]);
                    state.last = Instant::now();
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => self.close(&mut state),
            }
        }
        self.next_request(&mut state, limits)
    }

    /// A whole request from what was read, if none is being answered.
    fn next_request(&self, state: &mut State, limits: &Limits) -> Progress {
        if state.dead || state.busy || state.closing || state.input.is_empty() {
            return Progress::Nothing;
        }
        match parse(&state.input, limits) {
            Parsed::Incomplete => Progress::Nothing,
            Parsed::Request(request, used) => {
                state.input.drain(..used);
                state.began = (!state.input.is_empty()).then(Instant::now);
                state.busy = true;
                Progress::Request(request)
            }
            Parsed::Refused(status, why) => {
                state.input = Vec::new();
                state.busy = true;
                Progress::Refused(status, why)
            }
        }
    }

    /// After each round: a pipelined request whose turn came, and the
    /// time bounds (a request trickling in past `read_time`, a connection
    /// idle past `idle_time`: closed).
    pub fn after_round(&self, now: Instant, limits: &Limits) -> Progress {
        let mut state = self.state();
        let reading_too_long = state.began.is_some_and(|b| !state.busy && now.duration_since(b) > limits.read_time);
        let idle = !state.busy && state.input.is_empty() && now.duration_since(state.last) > limits.idle_time;
        let stalled = !state.output.is_empty() && now.duration_since(state.last) > limits.idle_time;
        if reading_too_long || idle || stalled {
            self.close(&mut state);
        }
        self.next_request(&mut state, limits)
    }
}
