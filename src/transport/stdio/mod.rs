//! stdio: one server process per client, spoken to over its own pipes.
//!
//! Three threads per server, because each pipe must be served whatever Lua
//! is doing:
//!
//! * a writer, for what does not fit in the pipe at once. A message is
//!   written straight from the calling thread when the pipe has room (a
//!   hand-off to another thread costs a wake-up, which on a small VM is
//!   as much as the round trip itself); the rest waits in a queue that the
//!   writer drains, so Lua never blocks on a server that stopped reading.
//!   Writes happen with SIGPIPE blocked in the writing thread only: a
//!   cdylib inside lua5.4 does not inherit Rust's ignored SIGPIPE, and one
//!   write to a dead server would otherwise kill the Lua host, while the
//!   host's own handling stays as the host chose it.
//! * a reader, which splits stdout into lines of any size (up to a cap),
//!   skips what is not JSON (banners, logs printed to the wrong stream),
//!   answers `ping` and unknown server requests at once, and queues the
//!   rest for Lua.
//! * a stderr drain, keeping the last 64 KiB for error messages. A server
//!   that logs megabytes to stderr would stall on a full pipe otherwise.
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
//! pidfd where the kernel has one, a waiter thread otherwise: see
//! `exit_watch`) and reports the exit at once. The exit status is read without reaping, so the
//! process group stays reserved until we have signalled what is left in it.
//!
//! Closing never waits on a pipe someone else holds. A grandchild that left
//! our process group (`setsid`, a daemon) can keep our pipes open forever;
//! a reader blocked in read(2) would then never return, and joining it hung
//! `close()` and `lua_close`. Every thread here blocks only in poll(2) on
//! its pipe and on a wake pipe of ours, which shutdown writes to. The
//! shutdown itself is the spec's sequence with bounded waits, so it ends
//! within about [`GRACE`](child::GRACE) twice whatever the children do.
//!
//! A host that ends with `os.exit()` without closing its Lua state runs no
//! finaliser; servers that ignore EOF were left running under PID 1. An
//! `atexit` hook, registered with the first server, stops every group still
//! running when the process exits.

use std::process::Child;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use crate::codec::{self, Json};
use crate::error::{Error, Result};
use crate::transport::doorbell::Doorbell;
use crate::transport::inbox::{Event, Inbox};
use crate::transport::{Received, Transport};

mod child;
mod exit_watch;
mod pipes;
mod reader;
mod stderr;

use child::{current_pid, exit_code, reap_in_background, spawn_in_group, stop_group};
use exit_watch::ExitWatch;
use pipes::{next_spin, StdinPipe, Threads, WakePipe};
use reader::ReadSide;
use stderr::{stderr_excerpt, PipeLog};

pub use child::join_reapers;

/// How to start the server.
#[derive(Clone, Debug)]
pub enum Launch {
    /// A command line for `/bin/sh -c`, as the reference runs it.
    Shell(String),
    /// An argv run directly: no shell, so no quoting to get wrong.
    Argv(Vec<String>),
}

impl Launch {
    fn describe(&self) -> String {
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

pub struct Stdio {
    /// The process that started the server. A child made by fork(2)
    /// inherits this value but none of our threads: it must neither
    /// signal the parent's servers nor join threads it does not have.
    owner: libc::pid_t,
    child: Option<Child>,
    /// Tells the reader when the server exits; ended before it is reaped.
    exit: Arc<ExitWatch>,
    launch: Launch,
    pipe: Arc<StdinPipe>,
    inbox: Arc<Inbox>,
    log: Arc<Mutex<PipeLog>>,
    threads: Option<Threads>,
    read_side: Arc<ReadSide>,
    /// Where requests are encoded, reused.
    out: Vec<u8>,
    /// How long a wait spins before it sleeps: about twice the time recent
    /// replies took, when that is under [`MAX_SPIN`](reader::MAX_SPIN); zero
    /// otherwise.
    spin: Duration,
    max_message_bytes: usize,
    /// Set once the server is known dead; every later call fails with it.
    failure: Option<(String, String)>,
}

impl Stdio {
    pub fn spawn(options: &Options) -> Result<Stdio> {
        let no_start = |err: std::io::Error| Error::Transport {
            code: "127".into(),
            detail: format!("MCP server produced no output ({}): {}", options.launch.describe(), err),
        };
        let wake = Arc::new(WakePipe::new().map_err(no_start)?);
        let mut child = spawn_in_group(options).map_err(no_start)?;
        let pid = child.id() as libc::pid_t;

        let (Some(stdin), Some(stdout), Some(stderr)) = (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            unreachable!("all three pipes were asked for")
        };
        let exit = Arc::new(ExitWatch::new(pid));
        let started = pipes::start(stdin, stdout, stderr, exit.clone(), wake, options);

        Ok(Stdio {
            owner: current_pid(),
            child: Some(child),
            exit,
            launch: options.launch.clone(),
            pipe: started.stdin,
            inbox: started.inbox,
            log: started.log,
            threads: Some(started.threads),
            read_side: started.read_side,
            out: Vec::new(),
            spin: Duration::ZERO,
            max_message_bytes: options.max_message_bytes,
            failure: None,
        })
    }

    /// The server closed stdout or exited: find out how it ended and say so
    /// the way the reference does, with the stderr tail.
    fn ended(&mut self) -> Error {
        if self.failure.is_none() {
            let pid = self.child.as_ref().map(|c| c.id() as libc::pid_t);
            let code = exit_code(pid, Duration::from_secs(1));
            // stdout and stderr close together, but are read by different
            // threads: give the stderr drain a moment to catch up, so the
            // message quotes what the server said last. (A helper the
            // server left behind may hold stderr open: hence the bound.)
            let settle = Instant::now() + Duration::from_millis(200);
            while !self.log.lock().unwrap_or_else(|p| p.into_inner()).stderr_done && Instant::now() < settle {
                thread::sleep(Duration::from_millis(2));
            }
            let log = self.log.lock().unwrap_or_else(|p| p.into_inner());
            let what = if log.any_stdout { "MCP server exited" } else { "MCP server produced no output" };
            let mut detail = format!("{what} ({})", self.launch.describe());
            if let Some(said) = stderr_excerpt(&log) {
                detail.push_str(": ");
                detail.push_str(&said);
            }
            if !log.noise.is_empty() && !log.any_stdout {
                detail.push_str(" (stdout: ");
                detail.push_str(&log.noise.iter().cloned().collect::<Vec<_>>().join(" | "));
                detail.push(')');
            }
            self.failure = Some((code, detail));
        }
        let (code, detail) = self.failure.clone().unwrap_or_default();
        Error::Transport { code, detail }
    }

    /// In a child made by fork(2): let go of everything without touching
    /// the parent's server or waiting for threads this process lacks.
    fn forked_away(&mut self) -> bool {
        if self.owner == current_pid() {
            return false;
        }
        std::mem::forget(self.child.take());
        std::mem::forget(self.threads.take());
        true
    }

    /// The spec's shutdown sequence, bounded: see [`stop_group`].
    fn shut_down(&mut self) {
        if self.forked_away() {
            return;
        }
        self.pipe.close();
        if let Some(mut child) = self.child.take() {
            stop_group(&mut child, &self.exit);
        }
        if let Some(threads) = self.threads.take() {
            threads.stop();
        }
    }
}

impl Transport for Stdio {
    fn send(&mut self, message: &Json) -> Result<()> {
        if self.failure.is_some() {
            return Err(self.ended());
        }
        // One buffer for the client's life: a request costs no allocation
        // here once the buffer has grown to the usual size.
        let mut line = std::mem::take(&mut self.out);
        line.clear();
        codec::encode_into(message, &mut line);
        line.push(b'\n');
        self.pipe.send(&line);
        // A one-off huge request must not pin its buffer for the session.
        if line.capacity() <= 1 << 20 {
            self.out = line;
        }
        Ok(())
    }

    fn receive(&mut self, deadline: Instant) -> Result<Option<Received>> {
        if self.failure.is_some() {
            return Err(self.ended());
        }
        let started = Instant::now();
        let event = self.read_side.wait_as_reader(deadline, self.spin);
        if let Some(Event::Message(_)) = &event {
            self.spin = next_spin(self.spin, started.elapsed());
        }
        match event {
            Some(Event::Message(msg)) => Ok(Some(Received::Message(msg))),
            Some(Event::TooDeep(id)) => Ok(Some(Received::TooDeep(id))),
            Some(Event::TooLarge(_)) => Err(Error::MessageTooLarge { limit: self.max_message_bytes }),
            Some(Event::Failed(id, e)) => Ok(Some(Received::Failed(Some(id), e))),
            Some(Event::Delivered(id)) => Ok(Some(Received::Delivered(id))),
            Some(Event::Ended) => Err(self.ended()),
            None => Ok(None),
        }
    }

    fn take_dropped(&mut self) -> u64 {
        self.inbox.take_dropped()
    }

    fn queued(&self) -> bool {
        !self.inbox.is_empty()
    }

    fn last_words(&self) -> Option<String> {
        stderr_excerpt(&self.log.lock().unwrap_or_else(|p| p.into_inner()))
    }

    fn close(&mut self) {
        self.shut_down();
    }
}

impl Drop for Stdio {
    /// A client dropped by the garbage collector must not hold Lua for the
    /// seconds a shutdown can take, so the sequence moves to a thread of
    /// its own; [`join_reapers`] waits for those when the Lua state closes.
    fn drop(&mut self) {
        if self.forked_away() {
            return;
        }
        self.pipe.close();
        let child = self.child.take();
        let threads = self.threads.take();
        if child.is_none() && threads.is_none() {
            return;
        }
        let exit = self.exit.clone();
        reap_in_background(move || {
            if let Some(mut child) = child {
                stop_group(&mut child, &exit);
            }
            if let Some(threads) = threads {
                threads.stop();
            }
        });
    }
}
