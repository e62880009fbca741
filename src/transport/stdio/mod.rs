//! stdio: one server process per client, spoken to over its own pipes.
//! What follows is the Unix transport (`unix/`); Windows keeps the same
//! guarantees with a Job Object and a pump thread per server (`windows/`).
//! Here, beside them, what both share: the options, stdout's lines sorted
//! into the inbox (`lines`), what the server said besides (`stderr`), and
//! the shutdowns moved off the Lua thread (`reapers`).
//!
//! Each pipe must be served whatever Lua is doing, and one thread of the
//! process serves the pipes of every server (`transport::poller`; what
//! it does for a server is in `unix/served`): a server costs four
//! descriptors (its three pipes and the watch on its exit) and no thread
//! of its own. Where the exit has no descriptor to watch (the `portable`
//! build, a Unix with neither pidfd nor kqueue) it costs three and a
//! small waiter thread instead (`unix/exit_watch`).
//!
//! * stdin: a message is written straight from the calling thread when the
//!   pipe has room (a hand-off to another thread costs a wake-up, which on
//!   a small VM is as much as the round trip itself); the rest waits in a
//!   queue that the poll thread drains, so Lua never blocks on a server
//!   that stopped reading (`unix/stdin`). Writes happen with SIGPIPE
//!   blocked in the writing thread only (and, on macOS, which sends it
//!   to the whole process, refused on the descriptor itself): a cdylib
//!   inside lua5.4 does not inherit Rust's ignored SIGPIPE, and one write
//!   to a dead server would otherwise kill the Lua host, while the host's
//!   own handling stays as the host chose it (`transport::fds`).
//! * stdout: split into lines of any size (up to a cap), skipping what is
//!   not JSON (banners, logs printed to the wrong stream), answering `ping`
//!   and unknown server requests at once, and queueing the rest for Lua;
//!   read by the Lua call that waits for a reply, or by the poll thread
//!   when none does (`unix/reader`).
//! * stderr: drained by the poll thread, its last 64 KiB kept for error
//!   messages. A server that logs megabytes to stderr would stall on a
//!   full pipe otherwise.
//!
//! The child gets its own process group: wrappers (`sh -c`, npx, uvx) put
//! the real server one or two processes down, and only a group signal
//! reaches it.
//!
//! WHAT A DEAD OR STUBBORN SERVER TAUGHT
//!
//! EOF on stdout is not proof of death, nor is its absence proof of life.
//! A server that started a helper and then died leaves the helper holding
//! its stdout: no EOF ever comes, and every call waited out its timeout
//! against a dead server. So the reader also watches the child itself (a
//! pidfd on Linux, a kqueue on macOS and FreeBSD, a waiter thread
//! otherwise: see `unix/exit_watch`) and reports the exit at once. The
//! exit status is read without reaping, so the process group stays
//! reserved until we have signalled what is left in it.
//!
//! Closing never waits on a pipe someone else holds. A grandchild that left
//! our process group (`setsid`, a daemon) can keep our pipes open forever;
//! a reader blocked in read(2) would then never return, and joining it hung
//! `close()` and `lua_close`. The poll thread blocks only in poll(2), on
//! the servers' pipes and on a wake pipe of ours that a shutdown writes
//! to; a shutdown waits for one round of it. The shutdown itself is the
//! spec's sequence with bounded waits (`unix/child`), so it ends within
//! about twice its grace of two seconds whatever the children do.
//!
//! A host that ends with `os.exit()` without closing its Lua state runs no
//! finaliser; servers that ignore EOF were left running under PID 1. An
//! `atexit` hook, registered with the first server, stops every group still
//! running when the process exits.

use std::sync::Arc;

use crate::codec::{self, Json};
use crate::error::{Error, Result};
use crate::transport::doorbell::Doorbell;
use crate::transport::inbox::Event;
use crate::transport::Received;

pub(crate) mod lines;
mod reapers;
mod stderr;
#[cfg(unix)]
mod unix;
#[cfg(windows)]
mod windows;

pub use reapers::join_reapers;
#[cfg(unix)]
use unix::StdinPipe;
#[cfg(unix)]
pub use unix::Stdio;
#[cfg(windows)]
use windows::StdinPipe;
#[cfg(windows)]
pub use windows::Stdio;

/// How to start the server.
#[derive(Clone, Debug)]
pub enum Launch {
    /// A command line for `/bin/sh -c`, as the reference runs it.
    Shell(String),
    /// An argv run directly: no shell, so no quoting to get wrong.
    Argv(Vec<String>),
}

impl Launch {
    pub(super) fn describe(&self) -> String {
        match self {
            Launch::Shell(line) => line.clone(),
            Launch::Argv(argv) => argv.join(" "),
        }
    }
}

#[derive(Clone, Debug)]
pub struct Options {
    pub launch: Launch,
    pub env: Vec<(String, String)>,
    pub cwd: Option<String>,
    pub max_message_bytes: usize,
    /// The server requests that Lua's handlers answer (the methods in
    /// `opts.handlers`): the reader hands those to Lua through the inbox
    /// and answers every other one itself, at once.
    pub lua_handled: Vec<String>,
    /// Rung when something is queued for Lua (`client:fd()`).
    pub doorbell: Option<Arc<Doorbell>>,
}

pub const DEFAULT_MAX_MESSAGE_BYTES: usize = 64 * 1024 * 1024;

/// What the session receives for an event from the inbox, on every
/// system; `ended` words the server's end, which only the transport knows.
fn received(event: Option<Event>, max_message_bytes: usize, ended: impl FnOnce() -> Error) -> Result<Option<Received>> {
    match event {
        Some(Event::Message(msg)) => Ok(Some(Received::Message(msg))),
        Some(Event::TooDeep(id)) => Ok(Some(Received::TooDeep(id))),
        Some(Event::TooLarge(_)) => Err(Error::MessageTooLarge { limit: max_message_bytes }),
        Some(Event::Failed(id, e)) => Ok(Some(Received::Failed(Some(id), e))),
        Some(Event::Delivered(id)) => Ok(Some(Received::Delivered(id))),
        Some(Event::Ended) => Err(ended()),
        None => Ok(None),
    }
}

/// Hands `message` to `write` as one line, encoded into `out`: one buffer
/// for the client's life, so a request costs no allocation once it has
/// grown to the usual size; a one-off huge request does not pin it.
fn send_line(out: &mut Vec<u8>, message: &Json, write: impl FnOnce(&[u8])) {
    let mut line = std::mem::take(out);
    line.clear();
    codec::encode_into(message, &mut line);
    line.push(b'\n');
    write(&line);
    if line.capacity() <= 1 << 20 {
        *out = line;
    }
}
