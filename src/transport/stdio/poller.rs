//! One thread serves the pipes of every stdio server in the process.
//!
//! Each server once had three threads (a writer for stdin, a reader for
//! stdout, a drain for stderr) and a wake pipe of its own: 9 descriptors
//! and 3 threads per server, and the soft descriptor limit most desktops
//! run with (1024) ran out at the 112th. Here one thread polls them all:
//! for each server its stdout (while no Lua call reads it: see
//! `reader::ReadSide`), its exit notice, its stderr until EOF, and its
//! stdin while bytes wait to be written. A server then costs the
//! descriptors it cannot do without (three pipes and the exit notice) and
//! no thread of its own.
//!
//! The thread never blocks but in poll(2). A server whose replies filled
//! its inbox has its stdout left alone until Lua takes them (so the
//! backpressure is on that pipe only), rather than the thread waiting for
//! room while every other server goes unserved; and it reads one chunk
//! per server per round, so a server that floods its pipe cannot starve
//! the rest. It runs while any server is registered and ends with the
//! last one: a host that closed its clients holds no thread of ours, and
//! the module can be unloaded with the Lua state.
//!
//! poll(2) rather than epoll or kqueue: the set changes at most rounds (a
//! Lua call takes a stdout over and hands it back), poll takes the set as
//! it is with no calls to keep a kernel copy in step, and it is the same
//! on every Unix. A round over 500 servers costs tens of microseconds
//! (see bench/scale.lua), and rounds happen only when something does.

use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::process::ChildStderr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::{self, JoinHandle};
use std::time::Duration;

use crate::transport::fds::set_nonblocking;
use crate::transport::inbox::Inbox;

use super::child::current_pid;
use super::exit_watch::EXIT_POLL_MS;
use super::pipes::{read_now, Chunk, StdinPipe, WakePipe};
use super::reader::{ReadSide, Turn};
use super::stderr::PipeLog;

/// One server's pipes, as the thread serves them.
pub(super) struct Served {
    pub(super) read_side: Arc<ReadSide>,
    pub(super) stdin: Arc<StdinPipe>,
    pub(super) inbox: Arc<Inbox>,
    stderr: ChildStderr,
    /// Until stderr's EOF.
    stderr_open: AtomicBool,
    log: Arc<Mutex<PipeLog>>,
}

impl Served {
    pub(super) fn new(
        read_side: Arc<ReadSide>,
        stdin: Arc<StdinPipe>,
        inbox: Arc<Inbox>,
        stderr: ChildStderr,
        log: Arc<Mutex<PipeLog>>,
    ) -> Served {
        set_nonblocking(stderr.as_raw_fd());
        Served { read_side, stdin, inbox, stderr, stderr_open: AtomicBool::new(true), log }
    }

    /// Keeps what stderr holds now; false once it reached EOF.
    fn read_stderr(&self, buf: &mut [u8]) -> bool {
        match read_now(self.stderr.as_raw_fd(), buf) {
            Chunk::Bytes(n) => self.log().keep_stderr(&buf[..n]),
            Chunk::Nothing => {}
            Chunk::End => {
                self.log().stderr_done = true;
                self.stderr_open.store(false, Ordering::SeqCst);
                return false;
            }
        }
        true
    }

    fn log(&self) -> MutexGuard<'_, PipeLog> {
        self.log.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// What a polled descriptor is to the server it belongs to.
#[derive(Clone, Copy)]
enum Source {
    Stdout,
    Exit,
    Stderr,
    Stdin,
}

/// The servers being served, and the thread serving them.
struct Registry {
    served: Vec<Arc<Served>>,
    /// The process this state belongs to: a child made by fork(2) inherits
    /// it, but not the thread.
    owner: libc::pid_t,
    running: bool,
    thread: Option<JoinHandle<()>>,
    wake: Option<Arc<WakePipe>>,
    /// Rounds the thread began: one that began after a server was taken
    /// off no longer touches its descriptors.
    rounds: u64,
}

static REGISTRY: Mutex<Registry> =
    Mutex::new(Registry { served: Vec::new(), owner: 0, running: false, thread: None, wake: None, rounds: 0 });
static ROUND_BEGAN: Condvar = Condvar::new();

fn registry() -> MutexGuard<'static, Registry> {
    let mut r = REGISTRY.lock().unwrap_or_else(|p| p.into_inner());
    if r.owner != current_pid() {
        // Inherited through fork: the servers are the parent's, and the
        // thread is not here. Let go of both without touching them.
        std::mem::forget(std::mem::take(&mut r.served));
        std::mem::forget(r.thread.take());
        std::mem::forget(r.wake.take());
        r.running = false;
        r.owner = current_pid();
    }
    r
}

/// Makes sure the thread runs, before a server is started: a failure here
/// (a limit of threads or descriptors) leaves no server to stop.
pub(super) fn start() -> io::Result<()> {
    start_locked(&mut registry())
}

fn start_locked(r: &mut Registry) -> io::Result<()> {
    if r.running {
        return Ok(());
    }
    // A thread that ended with the last server marked itself not running
    // under this lock and takes it no more: the join is immediate.
    if let Some(ended) = r.thread.take() {
        let _ = ended.join();
    }
    let wake = Arc::new(WakePipe::new()?);
    let theirs = wake.clone();
    let thread = thread::Builder::new().name("mcp-stdio".into()).spawn(move || serve(&theirs))?;
    r.running = true;
    r.thread = Some(thread);
    r.wake = Some(wake);
    Ok(())
}

/// Serves `served` from now until [`forget`].
pub(super) fn register(served: Arc<Served>) -> io::Result<()> {
    let mut r = registry();
    start_locked(&mut r)?;
    r.served.push(served);
    signal(&r);
    Ok(())
}

/// Stops serving `served`, and returns once the thread holds none of its
/// descriptors. The thread blocks only in a poll this wakes, so the wait
/// is one round. The last server's thread is joined here.
pub(super) fn forget(served: &Arc<Served>) {
    let mut r = registry();
    let before = r.served.len();
    r.served.retain(|s| !Arc::ptr_eq(s, served));
    if r.served.len() == before || !r.running {
        return;
    }
    let seen = r.rounds;
    signal(&r);
    while r.running && r.rounds == seen {
        r = ROUND_BEGAN.wait(r).unwrap_or_else(|p| p.into_inner());
    }
    if r.served.is_empty() && !r.running {
        if let Some(thread) = r.thread.take() {
            drop(r);
            let _ = thread.join();
        }
    }
}

/// Wakes the thread: the set to poll changed (a server came or went, a
/// stdin has bytes waiting).
pub(super) fn wake() {
    signal(&registry());
}

fn signal(r: &Registry) {
    if let Some(wake) = &r.wake {
        wake.signal();
    }
}

/// The thread: a round per wake-up, until no server is left.
fn serve(wake: &WakePipe) {
    let mut served: Vec<Arc<Served>> = Vec::new();
    let mut polled = Polled::default();
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        {
            let mut r = registry();
            r.rounds += 1;
            ROUND_BEGAN.notify_all();
            if r.served.is_empty() {
                // Its wake pipe goes with it: no descriptor is left.
                r.running = false;
                r.wake = None;
                return;
            }
            served.extend(r.served.iter().cloned());
        }
        polled.gather(&served, wake.fd());
        polled.wait();
        wake.drain();
        polled.handle(&served, &mut buf);
        // Held no longer than the round: `forget` counts on it.
        served.clear();
    }
}

/// One round's poll set: the descriptors, whose they are, and how long
/// to wait when nothing happens.
#[derive(Default)]
struct Polled {
    fds: Vec<libc::pollfd>,
    owners: Vec<(usize, Source)>,
    /// Servers whose exit is noticed by looking (no descriptor for it).
    look_for_exit: Vec<usize>,
    timeout_ms: libc::c_int,
}

impl Polled {
    fn gather(&mut self, served: &[Arc<Served>], wake: RawFd) {
        self.fds.clear();
        self.owners.clear();
        self.look_for_exit.clear();
        self.timeout_ms = -1;
        self.add(wake, libc::POLLIN, usize::MAX, Source::Stdout);
        for (i, s) in served.iter().enumerate() {
            // Full of what Lua has not taken: its stdout waits (and the
            // server's writes with it), looked at again a little later.
            let turn = if s.inbox.full() { Turn::LuaReads(super::reader::STANDBY) } else { s.read_side.turn() };
            match turn {
                Turn::Ours => {
                    self.add(s.read_side.fd(), libc::POLLIN, i, Source::Stdout);
                    match s.read_side.exit_fd() {
                        Some(fd) => self.add(fd, libc::POLLIN, i, Source::Exit),
                        None => {
                            self.look_for_exit.push(i);
                            self.wait_at_most(Duration::from_millis(EXIT_POLL_MS as u64));
                        }
                    }
                }
                Turn::LuaReads(again) => self.wait_at_most(again),
                Turn::Over => {}
            }
            if s.stderr_open.load(Ordering::SeqCst) {
                self.add(s.stderr.as_raw_fd(), libc::POLLIN, i, Source::Stderr);
            }
            if let Some(fd) = s.stdin.waiting_to_write() {
                self.add(fd, libc::POLLOUT, i, Source::Stdin);
            }
        }
    }

    fn add(&mut self, fd: RawFd, events: libc::c_short, owner: usize, source: Source) {
        self.fds.push(libc::pollfd { fd, events, revents: 0 });
        self.owners.push((owner, source));
    }

    fn wait_at_most(&mut self, within: Duration) {
        // Whole milliseconds, rounded up: a 0 would spin.
        let ms = within.as_micros().div_ceil(1000).clamp(1, i32::MAX as u128) as libc::c_int;
        if self.timeout_ms < 0 || ms < self.timeout_ms {
            self.timeout_ms = ms;
        }
    }

    fn wait(&mut self) {
        // SAFETY: `fds` is a live array of the length passed.
        let n = unsafe { libc::poll(self.fds.as_mut_ptr(), self.fds.len() as libc::nfds_t, self.timeout_ms) };
        if n < 0 && io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
            // Nothing else can fail here but the kernel's memory: a pause,
            // rather than a spin, before the next round tries again.
            thread::sleep(Duration::from_millis(10));
        }
    }

    fn handle(&self, served: &[Arc<Served>], buf: &mut [u8]) {
        // The first is the wake pipe, drained already.
        for (fd, &(owner, source)) in self.fds.iter().zip(&self.owners).skip(1) {
            if fd.revents == 0 {
                continue;
            }
            let s = &served[owner];
            match source {
                Source::Stdout => s.read_side.read_for_lua(),
                Source::Exit => s.read_side.exited(),
                Source::Stderr => {
                    s.read_stderr(buf);
                }
                Source::Stdin => s.stdin.flush(),
            }
        }
        for &i in &self.look_for_exit {
            if served[i].read_side.has_exited() {
                served[i].read_side.exited();
            }
        }
    }
}
