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
//! pidfd where the kernel has one, a `waitid` poll otherwise) and reports
//! the exit at once. The exit status is read without reaping, so the
//! process group stays reserved until we have signalled what is left in it.
//!
//! Closing never waits on a pipe someone else holds. A grandchild that left
//! our process group (`setsid`, a daemon) can keep our pipes open forever;
//! a reader blocked in read(2) would then never return, and joining it hung
//! `close()` and `lua_close`. Every thread here blocks only in poll(2) on
//! its pipe and on a wake pipe of ours, which shutdown writes to. The
//! shutdown itself is the spec's sequence with bounded waits, so it ends
//! within about [`GRACE`] twice whatever the children do.
//!
//! A host that ends with `os.exit()` without closing its Lua state runs no
//! finaliser; servers that ignore EOF were left running under PID 1. An
//! `atexit` hook, registered with the first server, stops every group still
//! running when the process exits.

use std::collections::VecDeque;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::process::CommandExt;
use std::process::{Child, ChildStdin, Command, Stdio as Pipe};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, Once};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use crate::codec::{self, Json};
use crate::error::{Error, Result};
use crate::interrupt;
use crate::protocol::{answer_server_request, classify, id_key, is_forwarded, too_deep_request_answer, Kind};
use crate::transport::doorbell::Doorbell;
use crate::transport::inbox::{Event, Inbox};
use crate::transport::{Received, Transport};

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
    /// Server requests Lua answers (`opts.handlers`); the reader answers
    /// every other one itself.
    pub forward: Vec<String>,
    /// Rung when something is queued for Lua (`client:fd()`).
    pub doorbell: Option<Arc<Doorbell>>,
}

pub const DEFAULT_MAX_MESSAGE_BYTES: usize = 64 * 1024 * 1024;
const STDERR_TAIL_BYTES: usize = 64 * 1024;
/// How much of that a failure's message quotes: room for a traceback's
/// last frames and its exception.
const STDERR_EXCERPT_CHARS: usize = 600;
/// Lines of non-JSON stdout kept for error messages.
const NOISE_LINES: usize = 5;
/// The spec's shutdown: close stdin, wait, SIGTERM, wait, SIGKILL.
const GRACE: Duration = Duration::from_secs(2);
/// What is still read from stdout after the server exited: what it wrote
/// last, not a stream a leftover helper keeps pouring.
const DRAIN_AFTER_EXIT: usize = 4 << 20;

/// The server's stdin, shared by Lua (requests), the reader (answers to
/// server requests) and the writer thread (whatever did not fit).
struct StdinPipe {
    state: Mutex<PipeState>,
    wake: Condvar,
}

struct PipeState {
    /// Non-blocking; None once closed or broken.
    stdin: Option<ChildStdin>,
    /// Bytes accepted but not yet written, in order.
    pending: VecDeque<u8>,
    /// EOF for the server once `pending` is written.
    closing: bool,
    /// Shutting down: whatever is pending is dropped, and the writer ends
    /// even if the server never reads again.
    abandoned: bool,
}

impl StdinPipe {
    fn new(stdin: ChildStdin) -> Self {
        set_nonblocking(stdin.as_raw_fd());
        let state = PipeState { stdin: Some(stdin), pending: VecDeque::new(), closing: false, abandoned: false };
        StdinPipe { state: Mutex::new(state), wake: Condvar::new() }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, PipeState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Writes what the pipe takes now, in order after anything queued, and
    /// queues the rest for the writer thread. A broken pipe shows up as EOF
    /// on stdout soon after, which reports it with the exit status.
    fn send(&self, bytes: &[u8]) {
        let mut st = self.lock();
        if st.closing {
            return;
        }
        let Some(fd) = st.stdin.as_ref().map(|s| s.as_raw_fd()) else { return };
        let written = if st.pending.is_empty() {
            match write_now(fd, bytes) {
                Ok(n) => n,
                Err(_) => {
                    st.stdin = None;
                    return;
                }
            }
        } else {
            0
        };
        if written < bytes.len() {
            st.pending.extend(&bytes[written..]);
            self.wake.notify_one();
        }
    }

    /// EOF for the server once what is queued has been written.
    fn close(&self) {
        self.lock().closing = true;
        self.wake.notify_one();
    }

    fn abandon(&self) {
        let mut st = self.lock();
        st.abandoned = true;
        st.pending.clear();
        st.stdin = None;
        self.wake.notify_one();
    }
}

/// A pipe of our own that every thread here polls beside its real pipe:
/// one byte written to it tells them all to stop, whoever holds the rest.
struct WakePipe {
    read: OwnedFd,
    write: OwnedFd,
}

impl WakePipe {
    fn new() -> std::io::Result<WakePipe> {
        let mut fds = [0; 2];
        // SAFETY: pipe2 writes two descriptors into the array we pass; we
        // own them from here on.
        unsafe {
            if libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC | libc::O_NONBLOCK) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(WakePipe { read: OwnedFd::from_raw_fd(fds[0]), write: OwnedFd::from_raw_fd(fds[1]) })
        }
    }

    fn signal(&self) {
        // SAFETY: a one-byte write from a stack buffer to our own pipe. Its
        // read end is never drained, so one byte wakes every poller.
        unsafe { libc::write(self.write.as_raw_fd(), b"x".as_ptr().cast(), 1) };
    }
}

/// The spin for the next wait, from how long this one took to get a
/// message: replies within microseconds earn a spin of about twice that
/// (so the next one is caught awake), anything slower none.
fn next_spin(spin: Duration, took: Duration) -> Duration {
    if took > MAX_SPIN {
        return Duration::ZERO;
    }
    // Eased towards the new figure, so one quick reply after slow ones
    // does not start a spin at once, nor one slow reply end it.
    let target = (took * 2 + Duration::from_micros(5)).min(MAX_SPIN);
    (spin * 3 + target) / 4
}

/// The child process, watched for its exit without reaping it.
struct ExitWatch {
    pid: libc::pid_t,
    /// A pidfd (Linux 5.3+) becomes readable when the process exits; with
    /// none, the reader polls `waitid` every [`EXIT_POLL_MS`].
    pidfd: Option<OwnedFd>,
}

const EXIT_POLL_MS: libc::c_int = 100;

impl ExitWatch {
    fn new(pid: libc::pid_t) -> ExitWatch {
        // SAFETY: pidfd_open takes a pid and flags and returns a new
        // descriptor or -1; we own the descriptor it returns.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
        let pidfd = (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd as RawFd) });
        ExitWatch { pid, pidfd }
    }

    fn exited(&self) -> bool {
        exit_status_without_reaping(self.pid).is_some()
    }
}

/// What woke a reader.
enum Readiness {
    Data,
    Exited,
    Stopped,
    /// The time given passed with nothing to read.
    Idle,
    /// poll(2) itself failed: nothing more can be read.
    Failed,
}

/// Waits until `fd` has data (or EOF), the child exits, shutdown, or
/// `within` passes (None: no limit).
fn wait_readable(fd: RawFd, exit: Option<&ExitWatch>, wake: &WakePipe, within: Option<Duration>) -> Readiness {
    let deadline = within.map(|w| Instant::now() + w);
    loop {
        let mut fds = [
            libc::pollfd { fd, events: libc::POLLIN, revents: 0 },
            libc::pollfd { fd: wake.read.as_raw_fd(), events: libc::POLLIN, revents: 0 },
            libc::pollfd { fd: -1, events: libc::POLLIN, revents: 0 },
        ];
        let left = deadline.map(|d| d.saturating_duration_since(Instant::now()));
        // Whole milliseconds, rounded up: a 0 would spin.
        let mut timeout = left.map_or(-1, |l| l.as_micros().div_ceil(1000).min(i32::MAX as u128) as libc::c_int);
        let mut polls_exit = false;
        if let Some(exit) = exit {
            match &exit.pidfd {
                Some(pidfd) => fds[2].fd = pidfd.as_raw_fd(),
                None if !(0..=EXIT_POLL_MS).contains(&timeout) => {
                    timeout = EXIT_POLL_MS;
                    polls_exit = true;
                }
                None => polls_exit = true,
            }
        }
        // SAFETY: poll on three pollfds on the stack; a negative fd is
        // ignored by the kernel.
        let n = unsafe { libc::poll(fds.as_mut_ptr(), 3, timeout) };
        if n < 0 && std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
            return Readiness::Failed;
        }
        if fds[1].revents != 0 {
            return Readiness::Stopped;
        }
        if fds[0].revents != 0 {
            return Readiness::Data;
        }
        if fds[2].revents != 0 || (polls_exit && exit.is_some_and(ExitWatch::exited)) {
            return Readiness::Exited;
        }
        if deadline.is_some_and(|d| Instant::now() >= d) {
            return Readiness::Idle;
        }
    }
}

/// What a read without blocking found.
enum Chunk {
    Bytes(usize),
    /// Nothing there right now.
    Nothing,
    /// EOF, or the pipe failed: either way nothing more will come.
    End,
}

fn read_now(fd: RawFd, buf: &mut [u8]) -> Chunk {
    loop {
        // SAFETY: read(2) into a live, writable slice.
        let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
        if n > 0 {
            return Chunk::Bytes(n as usize);
        }
        if n == 0 {
            return Chunk::End;
        }
        match std::io::Error::last_os_error().kind() {
            std::io::ErrorKind::Interrupted => continue,
            std::io::ErrorKind::WouldBlock => return Chunk::Nothing,
            _ => return Chunk::End,
        }
    }
}

fn set_nonblocking(fd: RawFd) {
    // SAFETY: fcntl on a descriptor we own; only our end of the pipe
    // becomes non-blocking, the server's end is its own.
    unsafe {
        let flags = libc::fcntl(fd, libc::F_GETFL);
        libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK);
    }
}

/// What the pipes have seen, shared with the threads that see it.
#[derive(Default)]
struct Witness {
    stderr: VecDeque<u8>,
    noise: VecDeque<String>,
    any_stdout: bool,
    /// The stderr pipe reached EOF: the tail is complete.
    stderr_done: bool,
}

/// What the threads of one server share, and what stops them.
struct Threads {
    handles: Vec<JoinHandle<()>>,
    pipe: Arc<StdinPipe>,
    inbox: Arc<Inbox>,
    wake: Arc<WakePipe>,
    read_side: Arc<ReadSide>,
}

impl Threads {
    /// Stops every thread and waits for them: each one blocks only on
    /// something this wakes, so the wait is short whoever holds the pipes.
    fn stop(self) {
        self.pipe.abandon();
        self.inbox.close();
        self.read_side.stop();
        self.wake.signal();
        for t in self.handles {
            let _ = t.join();
        }
    }
}

pub struct Stdio {
    /// The process that started the server. A child made by fork(2)
    /// inherits this value but none of our threads: it must neither
    /// signal the parent's servers nor join threads it does not have.
    owner: libc::pid_t,
    child: Option<Child>,
    launch: Launch,
    pipe: Arc<StdinPipe>,
    inbox: Arc<Inbox>,
    witness: Arc<Mutex<Witness>>,
    threads: Option<Threads>,
    read_side: Arc<ReadSide>,
    /// Where requests are encoded, reused.
    out: Vec<u8>,
    /// How long a wait spins before it sleeps: about twice the time recent
    /// replies took, when that is under [`MAX_SPIN`]; zero otherwise.
    spin: Duration,
    max_message_bytes: usize,
    /// Set once the server is known dead; every later call fails with it.
    failure: Option<(String, String)>,
}

impl Stdio {
    pub fn spawn(options: &Options) -> Result<Stdio> {
        let mut command = match &options.launch {
            Launch::Shell(line) => {
                // argv[0] "sh", as system(3) gives it: the shell's own
                // messages then read as they do under the reference.
                let mut c = Command::new("/bin/sh");
                c.arg0("sh").arg("-c").arg(line);
                c
            }
            Launch::Argv(argv) => {
                let mut c = Command::new(&argv[0]);
                c.args(&argv[1..]);
                c
            }
        };
        command.stdin(Pipe::piped()).stdout(Pipe::piped()).stderr(Pipe::piped()).process_group(0);
        for (key, value) in &options.env {
            command.env(key, value);
        }
        if let Some(dir) = &options.cwd {
            command.current_dir(dir);
        }
        let no_start = |err: std::io::Error| Error::Transport {
            code: "127".into(),
            detail: format!("MCP server produced no output ({}): {}", options.launch.describe(), err),
        };
        let wake = Arc::new(WakePipe::new().map_err(no_start)?);
        let mut child = command.spawn().map_err(no_start)?;
        let pid = child.id() as libc::pid_t;
        remember_group(pid);

        let (Some(stdin), Some(stdout), Some(stderr)) = (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            unreachable!("all three pipes were asked for")
        };
        let witness = Arc::new(Mutex::new(Witness::default()));
        let pipe = Arc::new(StdinPipe::new(stdin));
        let inbox = Arc::new(Inbox::new(options.doorbell.clone()));

        let mut handles = Vec::new();
        let writer_pipe = pipe.clone();
        handles.push(thread::spawn(move || write_loop(&writer_pipe)));
        let reader = Reader {
            limit: options.max_message_bytes,
            forward: options.forward.clone(),
            inbox: inbox.clone(),
            answers: pipe.clone(),
            witness: witness.clone(),
        };
        set_nonblocking(stdout.as_raw_fd());
        let lines = Lines {
            buf: vec![0u8; 64 * 1024],
            line: Vec::new(),
            oversized: false,
            drained_after_exit: None,
            finished: false,
        };
        let read_side = Arc::new(ReadSide {
            reader,
            stdout,
            exit: ExitWatch::new(pid),
            wake: wake.clone(),
            lines: Mutex::new(lines),
            lua_reading: AtomicBool::new(false),
            released_ns: AtomicU64::new(0),
            epoch: Instant::now(),
            stopped: AtomicBool::new(false),
            park: (Mutex::new(()), Condvar::new()),
        });
        let background = read_side.clone();
        handles.push(thread::spawn(move || background.run()));
        let (seen, drain_wake) = (witness.clone(), wake.clone());
        handles.push(thread::spawn(move || drain_stderr(stderr, seen, &drain_wake)));

        Ok(Stdio {
            owner: current_pid(),
            child: Some(child),
            launch: options.launch.clone(),
            pipe: pipe.clone(),
            inbox: inbox.clone(),
            witness,
            threads: Some(Threads { handles, pipe, inbox, wake, read_side: read_side.clone() }),
            read_side,
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
            let status = pid.and_then(|pid| wait_for_exit(pid, Duration::from_secs(1)));
            let code = match status {
                Some(ChildEnd::Exited(code)) => code.to_string(),
                Some(ChildEnd::Killed(sig)) => format!("signal {sig}"),
                None => "-1".into(),
            };
            // stdout and stderr close together, but are read by different
            // threads: give the stderr drain a moment to catch up, so the
            // message quotes what the server said last. (A helper the
            // server left behind may hold stderr open: hence the bound.)
            let settle = Instant::now() + Duration::from_millis(200);
            while !self.witness.lock().unwrap_or_else(|p| p.into_inner()).stderr_done && Instant::now() < settle {
                thread::sleep(Duration::from_millis(2));
            }
            let witness = self.witness.lock().unwrap_or_else(|p| p.into_inner());
            let what = if witness.any_stdout { "MCP server exited" } else { "MCP server produced no output" };
            let mut detail = format!("{what} ({})", self.launch.describe());
            if let Some(said) = stderr_excerpt(&witness) {
                detail.push_str(": ");
                detail.push_str(&said);
            }
            if !witness.noise.is_empty() && !witness.any_stdout {
                detail.push_str(" (stdout: ");
                detail.push_str(&witness.noise.iter().cloned().collect::<Vec<_>>().join(" | "));
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
            stop_group(&mut child);
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
        stderr_excerpt(&self.witness.lock().unwrap_or_else(|p| p.into_inner()))
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
        let reaper = thread::spawn(move || {
            if let Some(mut child) = child {
                stop_group(&mut child);
            }
            if let Some(threads) = threads {
                threads.stop();
            }
        });
        REAPERS.lock().unwrap_or_else(|p| p.into_inner()).push(reaper);
    }
}

static REAPERS: Mutex<Vec<JoinHandle<()>>> = Mutex::new(Vec::new());

/// Waits for every shutdown handed to the background. Called when the Lua
/// state closes, before the module's code is unloaded; each one ends within
/// the bounded shutdown sequence.
pub fn join_reapers() {
    let reapers = std::mem::take(&mut *REAPERS.lock().unwrap_or_else(|p| p.into_inner()));
    for r in reapers {
        let _ = r.join();
    }
}

/// Process groups of servers still running, for the exit hook, with the
/// process that started each (see `Stdio::owner`).
static LIVE_GROUPS: Mutex<Vec<(libc::pid_t, libc::pid_t)>> = Mutex::new(Vec::new());
static EXIT_HOOK: Once = Once::new();

fn current_pid() -> libc::pid_t {
    // SAFETY: getpid(2) has no preconditions.
    unsafe { libc::getpid() }
}

fn remember_group(pgid: libc::pid_t) {
    EXIT_HOOK.call_once(|| {
        // SAFETY: registers a plain extern "C" function. Linked through
        // libc_nonshared's atexit, it is tied to this module: if the module
        // is unloaded first, it runs then instead (with nothing left to do).
        unsafe { libc::atexit(stop_groups_at_exit) };
    });
    LIVE_GROUPS.lock().unwrap_or_else(|p| p.into_inner()).push((pgid, current_pid()));
}

/// Called before the leader is reaped, so the exit hook never signals a
/// group id that may have been reused.
fn forget_group(pgid: libc::pid_t) {
    LIVE_GROUPS.lock().unwrap_or_else(|p| p.into_inner()).retain(|&(g, _)| g != pgid);
}

/// The host is exiting without having closed its clients (`os.exit()`
/// without closing the state). Nothing will reap these children; ask them
/// to stop, give them a second, then make sure.
extern "C" fn stop_groups_at_exit() {
    // Held to the end: a reaper thread still running cannot reap a leader
    // (and free its group id) meanwhile, since it forgets the group first.
    let live = LIVE_GROUPS.lock().unwrap_or_else(|p| p.into_inner());
    let me = current_pid();
    let groups: Vec<libc::pid_t> = live.iter().filter(|&&(_, owner)| owner == me).map(|&(g, _)| g).collect();
    if groups.is_empty() {
        return;
    }
    for &g in &groups {
        signal_group(g, libc::SIGTERM);
    }
    let deadline = Instant::now() + Duration::from_secs(1);
    while Instant::now() < deadline && groups.iter().any(|&g| exit_status_without_reaping(g).is_none()) {
        thread::sleep(Duration::from_millis(10));
    }
    for &g in &groups {
        signal_group(g, libc::SIGKILL);
    }
}

/// The spec's shutdown: stdin is closed already; wait, SIGTERM, wait,
/// SIGKILL, each wait bounded by [`GRACE`]. Then the rest of the group is
/// killed and the leader reaped.
fn stop_group(child: &mut Child) {
    let pgid = child.id() as libc::pid_t;
    if wait_for_exit(pgid, GRACE).is_none() {
        signal_group(pgid, libc::SIGTERM);
        if wait_for_exit(pgid, GRACE).is_none() {
            signal_group(pgid, libc::SIGKILL);
        }
    }
    // The leader is a zombie now (we have not reaped it), so its group id
    // cannot have been reused: whatever is left in the group (a grandchild
    // that outlived its wrapper) is ours to end.
    signal_group(pgid, libc::SIGKILL);
    forget_group(pgid);
    // After SIGKILL the leader is gone at once, so this wait is short.
    let _ = child.wait();
}

fn signal_group(pgid: libc::pid_t, signal: libc::c_int) {
    // SAFETY: kill(2) with a negative pid signals a process group; it has
    // no memory effects on this process.
    unsafe {
        libc::kill(-pgid, signal);
    }
}

/// How the child ended.
#[derive(Clone, Copy)]
enum ChildEnd {
    Exited(i32),
    Killed(i32),
}

/// The child's end if it has ended, read without reaping it (WNOWAIT), so
/// its pid and group stay reserved until we have signalled the rest of the
/// group. A child already reaped reads as ended.
fn exit_status_without_reaping(pid: libc::pid_t) -> Option<ChildEnd> {
    // SAFETY: waitid writes only into the siginfo we pass.
    unsafe {
        let mut info: libc::siginfo_t = std::mem::zeroed();
        let rc = libc::waitid(libc::P_PID, pid as libc::id_t, &mut info, libc::WEXITED | libc::WNOHANG | libc::WNOWAIT);
        if rc != 0 {
            return Some(ChildEnd::Exited(-1));
        }
        if info.si_pid() == 0 {
            return None;
        }
        Some(match info.si_code {
            libc::CLD_EXITED => ChildEnd::Exited(info.si_status()),
            _ => ChildEnd::Killed(info.si_status()),
        })
    }
}

fn wait_for_exit(pid: libc::pid_t, within: Duration) -> Option<ChildEnd> {
    let deadline = Instant::now() + within;
    loop {
        if let Some(end) = exit_status_without_reaping(pid) {
            return Some(end);
        }
        if Instant::now() >= deadline {
            return None;
        }
        thread::sleep(Duration::from_millis(5));
    }
}

/// Drains what `StdinPipe::send` could not write at once, waiting for
/// room with poll(2) outside the lock; closes stdin when asked and done,
/// and gives up when abandoned.
fn write_loop(pipe: &StdinPipe) {
    loop {
        let mut st = pipe.lock();
        while st.pending.is_empty() && !st.closing && !st.abandoned && st.stdin.is_some() {
            st = pipe.wake.wait(st).unwrap_or_else(|p| p.into_inner());
        }
        if st.abandoned {
            st.stdin = None;
            return;
        }
        let Some(fd) = st.stdin.as_ref().map(|s| s.as_raw_fd()) else { return };
        if st.pending.is_empty() {
            st.stdin = None; // closing, and nothing left: EOF for the server
            return;
        }
        let written = {
            let (front, _) = st.pending.as_slices();
            write_now(fd, front)
        };
        match written {
            Ok(0) => {
                drop(st);
                let mut poll = libc::pollfd { fd, events: libc::POLLOUT, revents: 0 };
                // SAFETY: one pollfd on the stack. The descriptor stays open
                // meanwhile: only this thread, a broken write or an
                // abandonment closes it, and the last two leave nothing
                // pending, which the next round sees before using `fd`.
                unsafe { libc::poll(&mut poll, 1, 100) };
            }
            Ok(n) => {
                st.pending.drain(..n);
            }
            Err(_) => {
                st.stdin = None;
                st.pending.clear();
                return;
            }
        }
    }
}

/// Writes as much of `bytes` as the non-blocking pipe takes now (0 when it
/// is full), with SIGPIPE blocked in the calling thread for the duration
/// and a SIGPIPE the write raised taken back before it is unblocked.
fn write_now(fd: RawFd, bytes: &[u8]) -> std::io::Result<usize> {
    // SAFETY: signal-mask calls on local sets, for this thread only, and
    // write(2) from a live slice.
    unsafe {
        let mut sigpipe: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut sigpipe);
        libc::sigaddset(&mut sigpipe, libc::SIGPIPE);
        let mut old: libc::sigset_t = std::mem::zeroed();
        libc::pthread_sigmask(libc::SIG_BLOCK, &sigpipe, &mut old);
        let mut written = 0;
        let outcome = loop {
            if written == bytes.len() {
                break Ok(written);
            }
            let rest = &bytes[written..];
            let n = libc::write(fd, rest.as_ptr().cast(), rest.len());
            if n >= 0 {
                written += n as usize;
                continue;
            }
            let err = std::io::Error::last_os_error();
            match err.kind() {
                std::io::ErrorKind::Interrupted => continue,
                std::io::ErrorKind::WouldBlock => break Ok(written),
                _ => break Err(err),
            }
        };
        if matches!(&outcome, Err(e) if e.raw_os_error() == Some(libc::EPIPE))
            && libc::sigismember(&old, libc::SIGPIPE) == 0
        {
            let zero = libc::timespec { tv_sec: 0, tv_nsec: 0 };
            libc::sigtimedwait(&sigpipe, std::ptr::null_mut(), &zero);
        }
        libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
        outcome
    }
}

/// The stdout reader: splits lines, answers what it can, queues the rest.
struct Reader {
    limit: usize,
    forward: Vec<String>,
    inbox: Arc<Inbox>,
    answers: Arc<StdinPipe>,
    witness: Arc<Mutex<Witness>>,
}

/// Where the line splitter is between two reads.
struct Lines {
    buf: Vec<u8>,
    line: Vec<u8>,
    oversized: bool,
    /// The child exited: what is still in the pipe is read (up to
    /// [`DRAIN_AFTER_EXIT`]), then the stream is over.
    drained_after_exit: Option<usize>,
    /// `Event::Ended` was queued: nothing more will be read.
    finished: bool,
}

/// What one pass over the pipe found.
enum Step {
    Read,
    Nothing,
    Finished,
}

/// The server's stdout, read by whoever is waiting for it.
///
/// WHY THE WAITING THREAD READS
///
/// A reply read by a reader thread reaches Lua through a hand-off, which
/// costs a thread wake-up: ~3 us on the same CPU, 20-150 us on the other
/// one on this kind of VM, as much as the pipe round trip itself. So while
/// a Lua call waits for a reply, the Lua thread reads the pipe itself and
/// the reader thread stands aside (a leader/follower scheme: one line
/// splitter, one queue, and whoever holds the reading role reads). The
/// thread takes over again once no call has waited for [`LINGER`], so a
/// server's ping is still answered within that while Lua is busy
/// elsewhere, and notifications still queue up for the next call.
struct ReadSide {
    reader: Reader,
    stdout: std::process::ChildStdout,
    exit: ExitWatch,
    wake: Arc<WakePipe>,
    lines: Mutex<Lines>,
    /// A Lua call is reading; the thread must not.
    lua_reading: AtomicBool,
    /// When the last Lua call stopped reading, in ns since `epoch`.
    released_ns: AtomicU64,
    epoch: Instant,
    stopped: AtomicBool,
    park: (Mutex<()>, Condvar),
}

/// How long the reader thread leaves the pipe to Lua after a call: calls
/// in a burst then never wake it.
const LINGER: Duration = Duration::from_millis(2);
/// How often the standing-aside thread looks whether calls have stopped.
const STANDBY: Duration = Duration::from_millis(20);
/// The longest a waiting call spins (reading, yielding the CPU) before it
/// sleeps, when replies have been coming that fast; slower servers get no
/// spin at all.
const MAX_SPIN: Duration = Duration::from_micros(100);

impl ReadSide {
    fn fd(&self) -> RawFd {
        self.stdout.as_raw_fd()
    }

    fn lock_lines(&self) -> std::sync::MutexGuard<'_, Lines> {
        self.lines.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Reads what the pipe holds now, splitting and handling lines; queues
    /// `Event::Ended` when the stream is over. With `one_chunk`, stops after
    /// one read: a Lua call takes what it read before it reads more, so a
    /// server that keeps the pipe full cannot keep it here.
    fn read_available(&self, lines: &mut Lines, one_chunk: bool) -> Step {
        if lines.finished {
            return Step::Finished;
        }
        let mut any = false;
        loop {
            let n = match read_now(self.fd(), &mut lines.buf) {
                Chunk::Bytes(n) => n,
                Chunk::End => break,
                // Nothing there now: after an exit, that is the end of what
                // the server wrote.
                Chunk::Nothing if lines.drained_after_exit.is_some() => break,
                Chunk::Nothing => return if any { Step::Read } else { Step::Nothing },
            };
            any = true;
            if let Some(drained) = lines.drained_after_exit.as_mut() {
                *drained += n;
                if *drained > DRAIN_AFTER_EXIT {
                    break;
                }
            }
            self.split(lines, n);
            if one_chunk && lines.drained_after_exit.is_none() {
                return Step::Read;
            }
        }
        if !lines.line.is_empty() && !lines.oversized {
            let line = std::mem::take(&mut lines.line);
            self.reader.handle_line(&line);
        }
        lines.finished = true;
        self.reader.inbox.push(Event::Ended, 0);
        Step::Finished
    }

    fn split(&self, lines: &mut Lines, n: usize) {
        let Lines { buf, line, oversized, .. } = lines;
        let mut chunk = &buf[..n];
        while !chunk.is_empty() {
            let (used, complete) = match chunk.iter().position(|&b| b == b'\n') {
                Some(i) => (i + 1, true),
                None => (chunk.len(), false),
            };
            let piece = &chunk[..used - usize::from(complete)];
            if !*oversized {
                if line.len() + piece.len() > self.reader.limit {
                    *oversized = true;
                    *line = Vec::new();
                    self.reader.inbox.push(Event::TooLarge(None), 0);
                } else {
                    line.extend_from_slice(piece);
                }
            }
            chunk = &chunk[used..];
            if complete {
                if !*oversized {
                    self.reader.handle_line(line);
                }
                line.clear();
                // A one-off huge line must not pin its buffer for the session.
                if line.capacity() > 1 << 20 {
                    *line = Vec::new();
                }
                *oversized = false;
            }
        }
    }

    /// The child is gone: drain what it left, then end the stream.
    fn exited(&self) {
        let mut lines = self.lock_lines();
        lines.drained_after_exit.get_or_insert(0);
        self.read_available(&mut lines, false);
    }

    fn since_release(&self) -> Duration {
        let released = Duration::from_nanos(self.released_ns.load(Ordering::SeqCst));
        self.epoch.elapsed().saturating_sub(released)
    }

    /// The reader thread: reads whenever no Lua call does.
    fn run(&self) {
        loop {
            // Stand aside while a call reads, and for a moment after.
            loop {
                if self.stopped.load(Ordering::SeqCst) {
                    return;
                }
                let reading = self.lua_reading.load(Ordering::SeqCst);
                let since = self.since_release();
                if !reading && since >= LINGER {
                    break;
                }
                // While a call reads, a nap long enough to cost nothing; the
                // thread is back within it once calls stop.
                let nap = if reading { STANDBY } else { LINGER - since };
                let guard = self.park.0.lock().unwrap_or_else(|p| p.into_inner());
                let _ = self.park.1.wait_timeout(guard, nap);
            }
            match wait_readable(self.fd(), Some(&self.exit), &self.wake, None) {
                Readiness::Data => {}
                Readiness::Idle => continue,
                Readiness::Exited => {
                    self.exited();
                    return;
                }
                Readiness::Stopped => return,
                // Reported as the end: the call fails with the status
                // rather than waiting out its time.
                Readiness::Failed => {
                    self.exited();
                    return;
                }
            }
            let mut lines = self.lock_lines();
            // Checked again under the lock: a call that began meanwhile
            // reads for itself (see `Stdio::receive`).
            if self.lua_reading.load(Ordering::SeqCst) {
                continue;
            }
            if let Step::Finished = self.read_available(&mut lines, false) {
                return;
            }
        }
    }

    /// A Lua call waits for what the server sends, until `deadline`: it
    /// reads the pipe itself (see the type's comment), spinning up to
    /// `spin` before it sleeps.
    fn wait_as_reader(&self, deadline: Instant, spin: Duration) -> Option<Event> {
        self.lua_reading.store(true, Ordering::SeqCst);
        let started = Instant::now();
        let event = loop {
            if let Some(event) = self.reader.inbox.try_pop() {
                break Some(event);
            }
            // Under the lock: a read the thread began before we took the
            // role is finished (and queued) before we look.
            match self.read_available(&mut self.lock_lines(), true) {
                Step::Read => continue,
                // Its `Ended` is queued, or was taken by an earlier call.
                Step::Finished => break self.reader.inbox.try_pop(),
                Step::Nothing => {}
            }
            // The thread may have queued something just before we took the
            // lines (it read under the lock before it saw our flag).
            if let Some(event) = self.reader.inbox.try_pop() {
                break Some(event);
            }
            let now = Instant::now();
            if now >= deadline {
                break None;
            }
            if now - started < spin {
                // Lets a server on this CPU run; costs nothing otherwise.
                thread::yield_now();
                continue;
            }
            let within = deadline.min(now + interrupt::SLICE) - now;
            match wait_readable(self.fd(), Some(&self.exit), &self.wake, Some(within)) {
                Readiness::Data => {}
                Readiness::Idle => {
                    if interrupt::requested() || Instant::now() >= deadline {
                        break self.reader.inbox.try_pop();
                    }
                }
                Readiness::Exited | Readiness::Failed => self.exited(),
                Readiness::Stopped => break self.reader.inbox.try_pop(),
            }
        };
        self.released_ns.store(self.epoch.elapsed().as_nanos() as u64, Ordering::SeqCst);
        self.lua_reading.store(false, Ordering::SeqCst);
        event
    }

    fn stop(&self) {
        self.stopped.store(true, Ordering::SeqCst);
        self.park.1.notify_all();
    }
}

impl Reader {
    fn handle_line(&self, line: &[u8]) {
        let line = line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(line);
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.iter().all(u8::is_ascii_whitespace) {
            return;
        }
        let parsed = match codec::decode_message(line) {
            Ok(msg @ Json::Object(_)) => Some(msg),
            Err(e) if e.what == codec::TOO_DEEP => {
                // Too deep to read. A reply: say so to whoever waits for
                // its id, rather than let them time out. A server request:
                // refuse it, so the server does not wait either.
                self.witness.lock().unwrap_or_else(|p| p.into_inner()).any_stdout = true;
                let envelope = codec::peek_envelope(line);
                match (envelope.has_method, envelope.id) {
                    (false, id) => self.inbox.push(Event::TooDeep(id.as_ref().and_then(id_key)), line.len()),
                    (true, Some(id)) => {
                        let mut bytes = codec::encode(&too_deep_request_answer(id));
                        bytes.push(b'\n');
                        self.answers.send(&bytes);
                    }
                    (true, None) => {}
                }
                return;
            }
            _ => None,
        };
        let mut seen = self.witness.lock().unwrap_or_else(|p| p.into_inner());
        let Some(msg) = parsed else {
            // Not JSON-RPC: a banner or a stray log line. Keep a short memory
            // of it for the error message if the server then dies.
            if seen.noise.len() == NOISE_LINES {
                seen.noise.pop_front();
            }
            seen.noise.push_back(head_chars(&String::from_utf8_lossy(line), 200).to_string());
            return;
        };
        seen.any_stdout = true;
        drop(seen);
        if classify(&msg) == Kind::ServerRequest && !is_forwarded(&msg, &self.forward) {
            if let Some(answer) = answer_server_request(&msg) {
                let mut bytes = codec::encode(&answer);
                bytes.push(b'\n');
                self.answers.send(&bytes);
            }
            return;
        }
        self.inbox.push(Event::Message(msg), line.len());
    }
}

fn drain_stderr(stderr: std::process::ChildStderr, witness: Arc<Mutex<Witness>>, wake: &WakePipe) {
    let fd = stderr.as_raw_fd();
    set_nonblocking(fd);
    let mut buf = [0u8; 16 * 1024];
    loop {
        match wait_readable(fd, None, wake, None) {
            Readiness::Data => {}
            Readiness::Exited | Readiness::Stopped | Readiness::Failed | Readiness::Idle => return,
        }
        match read_now(fd, &mut buf) {
            Chunk::End => {
                witness.lock().unwrap_or_else(|p| p.into_inner()).stderr_done = true;
                return;
            }
            Chunk::Bytes(n) => {
                let mut seen = witness.lock().unwrap_or_else(|p| p.into_inner());
                seen.stderr.extend(&buf[..n]);
                let excess = seen.stderr.len().saturating_sub(STDERR_TAIL_BYTES);
                seen.stderr.drain(..excess);
            }
            Chunk::Nothing => continue,
        }
    }
}

/// The end of what the server wrote to stderr, for an error; None when
/// it wrote nothing but white space.
fn stderr_excerpt(witness: &Witness) -> Option<String> {
    let stderr: Vec<u8> = witness.stderr.iter().copied().collect();
    let stderr = String::from_utf8_lossy(&stderr);
    let stderr = stderr.trim_end();
    (!stderr.is_empty()).then(|| last_lines(stderr, STDERR_EXCERPT_CHARS))
}

/// What a dead server said last, for the error: at most `n` characters,
/// starting at a line where the cut allows, after "..." where it was cut.
/// Python, Node and Rust all end a crash's output with the exception
/// itself: `MCP server produced no output (...): Traceb...` was all a
/// Python server's startup crash once left us. (The reference keeps the
/// first 300 bytes.)
fn last_lines(s: &str, n: usize) -> String {
    let tail = tail_chars(s, n);
    if tail.len() == s.len() {
        return tail.to_string();
    }
    // A whole line, when one starts in the tail (not its last).
    let start = tail.find('\n').filter(|&i| i + 1 < tail.len()).map_or(0, |i| i + 1);
    format!("...{}{}", if start > 0 { "\n" } else { "" }, &tail[start..])
}

fn head_chars(s: &str, n: usize) -> &str {
    match s.char_indices().nth(n) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}

fn tail_chars(s: &str, n: usize) -> &str {
    let count = s.chars().count();
    if count <= n {
        return s;
    }
    match s.char_indices().nth(count - n) {
        Some((i, _)) => &s[i..],
        None => s,
    }
}

#[cfg(test)]
mod tests {
    use super::last_lines;

    #[test]
    fn a_long_stderr_is_quoted_from_its_last_lines_with_the_cut_marked() {
        let traceback = format!(
            "Traceback (most recent call last):\n{}AttributeError: 'Server' object has no attribute 'list_resources'",
            "  File \"x.py\", line 1, in <module>\n".repeat(40)
        );
        assert_eq!(
            last_lines(&traceback, 120),
            "...\n  File \"x.py\", line 1, in <module>\nAttributeError: 'Server' object has no attribute 'list_resources'"
        );
        assert_eq!(last_lines("short", 120), "short");
        assert_eq!(last_lines(&"x".repeat(10), 4), "...xxxx");
    }
}
