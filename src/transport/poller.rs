//! One thread serves, for every client in the process, what must be
//! watched while no Lua call waits: each stdio server's pipes and exit
//! (`stdio::unix::served`), and each HTTP session's own stream from the
//! server (`http::listener`).
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
//! Windows has WSAPoll, the same call for sockets only (`poller/windows.rs`):
//! there the thread serves HTTP streams, and a stdio server keeps its pump
//! thread (`stdio::windows`).

use std::io;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::{self, JoinHandle};
use std::time::Duration;

#[cfg(unix)]
#[path = "poller/unix.rs"]
mod sys;
#[cfg(windows)]
#[path = "poller/windows.rs"]
mod sys;

pub use sys::{Descriptor, READABLE, WRITABLE};
use sys::{Entry, WakeUp};

/// How often a client left alone for a full inbox is looked at again:
/// Lua taking from the inbox does not wake the thread.
pub const FULL_INBOX_LOOK: Duration = Duration::from_millis(20);

/// What the thread serves for one client.
pub trait Watched: Send + Sync {
    /// Adds to `round` the descriptors to watch this round.
    fn gather(&self, round: &mut Round);
    /// The descriptor added with `tag` is ready (or failed). Must not
    /// wait: every other client waits meanwhile.
    fn ready(&self, tag: u32, buf: &mut [u8]);
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
    wake: Option<Arc<WakeUp>>,
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
    let wake = Arc::new(WakeUp::new()?);
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
/// stdin has bytes waiting, a stream handed back after reconnecting).
pub fn wake() {
    signal(&registry());
}

fn signal(r: &Registry) {
    if let Some(wake) = &r.wake {
        wake.signal();
    }
}

/// The thread: a round per wake-up, until no client is left.
fn serve(wake: &WakeUp) {
    let mut served: Vec<Arc<dyn Watched>> = Vec::new();
    let mut round = Round::default();
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        {
            let mut r = registry();
            r.rounds += 1;
            ROUND_BEGAN.notify_all();
            if r.served.is_empty() {
                // Its wake-up goes with it: no descriptor is left.
                r.running = false;
                r.wake = None;
                return;
            }
            served.extend(r.served.iter().cloned());
        }
        round.gather(&served, wake.descriptor());
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
    entries: Vec<Entry>,
    owners: Vec<(usize, u32)>,
    /// The client gathering now.
    current: usize,
    timeout_ms: i32,
}

impl Round {
    /// Watches `descriptor` for `events` ([`READABLE`], [`WRITABLE`]);
    /// [`Watched::ready`] gets `tag` back.
    pub fn watch(&mut self, descriptor: Descriptor, events: i16, tag: u32) {
        self.entries.push(sys::entry(descriptor, events));
        self.owners.push((self.current, tag));
    }

    /// Ends the round after `within` even when nothing happens (a state
    /// that no descriptor signals is looked at again then).
    pub fn wait_at_most(&mut self, within: Duration) {
        // Whole milliseconds, rounded up: a 0 would spin.
        let ms = within.as_micros().div_ceil(1000).clamp(1, i32::MAX as u128) as i32;
        if self.timeout_ms < 0 || ms < self.timeout_ms {
            self.timeout_ms = ms;
        }
    }

    fn gather(&mut self, served: &[Arc<dyn Watched>], wake: Descriptor) {
        self.entries.clear();
        self.owners.clear();
        self.timeout_ms = -1;
        self.current = usize::MAX;
        self.watch(wake, READABLE, 0);
        for (i, s) in served.iter().enumerate() {
            self.current = i;
            s.gather(self);
        }
    }

    fn wait(&mut self) {
        if sys::poll(&mut self.entries, self.timeout_ms).is_err() {
            // Nothing else can fail here but the kernel's memory: a pause,
            // rather than a spin, before the next round tries again.
            thread::sleep(Duration::from_millis(10));
        }
    }

    fn handle(&self, served: &[Arc<dyn Watched>], buf: &mut [u8]) {
        // The first is the wake-up, drained already.
        for (entry, &(owner, tag)) in self.entries.iter().zip(&self.owners).skip(1) {
            if sys::revents(entry) != 0 {
                served[owner].ready(tag, buf);
            }
        }
    }
}
