//! One thread serves, for every client in the process, what must be
//! watched while no Lua call waits: each stdio server's pipes and exit
//! (`stdio::served`), and each HTTP session's own stream from the server
//! (`http::listener`).
//!
//! A stdio server once had three threads (a writer for stdin, a reader for
//! stdout, a drain for stderr) and a wake pipe of its own: 9 descriptors
//! and 3 threads per server, and the soft descriptor limit most desktops
//! run with (1024) ran out at the 112th. An HTTP session kept a thread
//! blocked on its server's stream for as long as the client lived. Here
//! one thread polls them all, and a client costs the descriptors it
//! cannot do without and no thread of its own.
//!
//! The thread never blocks but in poll(2): what it serves says, each
//! round, which descriptors to watch and how long to wait at most
//! ([`Watched::gather`]), and handles the ones that are ready without
//! waiting for anything ([`Watched::ready`]). A client whose inbox is full
//! has its descriptors left alone until Lua takes what is there (so the
//! backpressure is on that client only), rather than the thread waiting
//! for room while every other client goes unserved. It runs while
//! anything is registered and ends with the last: a host that closed its
//! clients holds no thread of ours, and the module can be unloaded with
//! the Lua state.
//!
//! poll(2) rather than epoll or kqueue: the set changes at most rounds (a
//! Lua call takes a stdout over and hands it back), poll takes the set as
//! it is with no calls to keep a kernel copy in step, and it is the same
//! on every Unix. A round over 500 servers costs tens of microseconds
//! (see bench/scale.lua), and rounds happen only when something does.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::{self, JoinHandle};
use std::time::Duration;

use crate::transport::fds::{nonblocking_pipe, read_now, write_without_sigpipe, Chunk};

/// What the thread serves for one client.
pub trait Watched: Send + Sync {
    /// Adds to `round` the descriptors to watch this round.
    fn gather(&self, round: &mut Round);
    /// The descriptor added with `tag` is ready (or failed). Must not
    /// wait: every other client waits meanwhile.
    fn ready(&self, tag: u8, buf: &mut [u8]);
    /// After each round: what no descriptor tells (an exit looked for).
    fn after_round(&self) {}
}

/// The clients being served, and the thread serving them.
struct Registry {
    served: Vec<Arc<dyn Watched>>,
    /// The process this state belongs to: a child made by fork(2) inherits
    /// it, but not the thread.
    owner: u32,
    running: bool,
    thread: Option<JoinHandle<()>>,
    wake: Option<Arc<WakePipe>>,
    /// Rounds the thread began: one that began after a client was taken
    /// off no longer touches its descriptors.
    rounds: u64,
}

static REGISTRY: Mutex<Registry> =
    Mutex::new(Registry { served: Vec::new(), owner: 0, running: false, thread: None, wake: None, rounds: 0 });
static ROUND_BEGAN: Condvar = Condvar::new();

fn registry() -> MutexGuard<'static, Registry> {
    let mut r = REGISTRY.lock().unwrap_or_else(|p| p.into_inner());
    if r.owner != std::process::id() {
        // Inherited through fork: the clients are the parent's, and the
        // thread is not here. Let go of both without touching them.
        std::mem::forget(std::mem::take(&mut r.served));
        std::mem::forget(r.thread.take());
        std::mem::forget(r.wake.take());
        r.running = false;
        r.owner = std::process::id();
    }
    r
}

/// Makes sure the thread runs, before a server is started: a failure here
/// (a limit of threads or descriptors) leaves no server to stop.
pub fn start() -> io::Result<()> {
    start_locked(&mut registry())
}

fn start_locked(r: &mut Registry) -> io::Result<()> {
    if r.running {
        return Ok(());
    }
    // A thread that ended with the last client marked itself not running
    // under this lock and takes it no more: the join is immediate.
    if let Some(ended) = r.thread.take() {
        let _ = ended.join();
    }
    let wake = Arc::new(WakePipe::new()?);
    let theirs = wake.clone();
    let thread = thread::Builder::new().name("mcp-io".into()).spawn(move || serve(&theirs))?;
    r.running = true;
    r.thread = Some(thread);
    r.wake = Some(wake);
    Ok(())
}

/// Serves `watched` from now until [`forget`].
pub fn register(watched: Arc<dyn Watched>) -> io::Result<()> {
    let mut r = registry();
    start_locked(&mut r)?;
    r.served.push(watched);
    signal(&r);
    Ok(())
}

/// Stops serving `watched`, and returns once the thread holds none of its
/// descriptors. The thread blocks only in a poll this wakes, so the wait
/// is one round. The last client's thread is joined here.
pub fn forget(watched: &Arc<dyn Watched>) {
    let mut r = registry();
    let before = r.served.len();
    r.served.retain(|s| !same(s, watched));
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

/// The same client: compared by address only (the vtable of a `dyn` may
/// differ between codegen units).
fn same(a: &Arc<dyn Watched>, b: &Arc<dyn Watched>) -> bool {
    std::ptr::addr_eq(Arc::as_ptr(a), Arc::as_ptr(b))
}

/// Wakes the thread: the set to watch changed (a client came or went, a
/// stdin has bytes waiting, an inbox has room again).
pub fn wake() {
    signal(&registry());
}

fn signal(r: &Registry) {
    if let Some(wake) = &r.wake {
        wake.signal();
    }
}

/// The thread: a round per wake-up, until no client is left.
fn serve(wake: &WakePipe) {
    let mut served: Vec<Arc<dyn Watched>> = Vec::new();
    let mut round = Round::default();
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
        round.gather(&served, wake.fd());
        round.wait();
        wake.drain();
        round.handle(&served, &mut buf);
        for s in &served {
            s.after_round();
        }
        // Held no longer than the round: `forget` counts on it.
        served.clear();
    }
}

/// One round's poll set: the descriptors, whose they are, and how long
/// to wait when nothing happens.
#[derive(Default)]
pub struct Round {
    fds: Vec<libc::pollfd>,
    owners: Vec<(usize, u8)>,
    /// The client gathering now.
    current: usize,
    timeout_ms: libc::c_int,
}

impl Round {
    /// Watches `fd` for `events` (POLLIN, POLLOUT); [`Watched::ready`]
    /// gets `tag` back.
    pub fn watch(&mut self, fd: RawFd, events: libc::c_short, tag: u8) {
        self.fds.push(libc::pollfd { fd, events, revents: 0 });
        self.owners.push((self.current, tag));
    }

    /// Ends the round after `within` even when nothing happens (a state
    /// that no descriptor signals is looked at again then).
    pub fn wait_at_most(&mut self, within: Duration) {
        // Whole milliseconds, rounded up: a 0 would spin.
        let ms = within.as_micros().div_ceil(1000).clamp(1, i32::MAX as u128) as libc::c_int;
        if self.timeout_ms < 0 || ms < self.timeout_ms {
            self.timeout_ms = ms;
        }
    }

    fn gather(&mut self, served: &[Arc<dyn Watched>], wake: RawFd) {
        self.fds.clear();
        self.owners.clear();
        self.timeout_ms = -1;
        self.current = usize::MAX;
        self.watch(wake, libc::POLLIN, 0);
        for (i, s) in served.iter().enumerate() {
            self.current = i;
            s.gather(self);
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

    fn handle(&self, served: &[Arc<dyn Watched>], buf: &mut [u8]) {
        // The first is the wake pipe, drained already.
        for (fd, &(owner, tag)) in self.fds.iter().zip(&self.owners).skip(1) {
            if fd.revents != 0 {
                served[owner].ready(tag, buf);
            }
        }
    }
}

/// A pipe of our own that the thread polls beside the clients'
/// descriptors: a byte written to it starts a new round.
struct WakePipe {
    read: OwnedFd,
    write: OwnedFd,
}

impl WakePipe {
    fn new() -> io::Result<WakePipe> {
        let (read, write) = nonblocking_pipe()?;
        Ok(WakePipe { read, write })
    }

    fn signal(&self) {
        // A full pipe already wakes the thread: the failed write is fine.
        let _ = write_without_sigpipe(self.write.as_raw_fd(), b"x");
    }

    fn fd(&self) -> RawFd {
        self.read.as_raw_fd()
    }

    /// Empties the pipe, so that the next poll sleeps.
    fn drain(&self) {
        let mut buf = [0u8; 64];
        while let Chunk::Bytes(_) = read_now(self.read.as_raw_fd(), &mut buf) {}
    }
}
