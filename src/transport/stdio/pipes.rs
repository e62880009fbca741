//! The server's three pipes and the threads that serve them: the writer
//! for stdin, the reader for stdout (and the Lua call that takes its place
//! while it waits), the drain for stderr. See the module's header.

use std::collections::VecDeque;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::process::ChildStdin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use crate::codec::{self, Json};
use crate::interrupt;
use crate::server_text;
use crate::transport::fds::{nonblocking_pipe, refuse_sigpipe, set_nonblocking, write_without_sigpipe};
use crate::transport::inbox::{sort, Event, Inbox, Sorted};

use super::exit_watch::{ExitWatch, EXIT_POLL_MS};
use super::Options;

const STDERR_TAIL_BYTES: usize = 64 * 1024;
/// How much of that a failure's message quotes: room for a traceback's
/// last frames and its exception.
const STDERR_EXCERPT_CHARS: usize = 600;
/// Lines of non-JSON stdout kept for error messages.
const NOISE_LINES: usize = 5;
/// What is still read from stdout after the server exited: what it wrote
/// last, not a stream a leftover helper keeps pouring.
const DRAIN_AFTER_EXIT: usize = 4 << 20;

/// What the transport keeps of the pipes once their threads run.
pub(super) struct Pipes {
    pub(super) stdin: Arc<StdinPipe>,
    pub(super) inbox: Arc<Inbox>,
    pub(super) log: Arc<Mutex<PipeLog>>,
    pub(super) read_side: Arc<ReadSide>,
    pub(super) threads: Threads,
}

/// Starts the writer, the reader and the stderr drain of the server
/// `exit` watches.
pub(super) fn start(
    stdin: ChildStdin,
    stdout: std::process::ChildStdout,
    stderr: std::process::ChildStderr,
    exit: Arc<ExitWatch>,
    wake: Arc<WakePipe>,
    options: &Options,
) -> Pipes {
    let log = Arc::new(Mutex::new(PipeLog::default()));
    let pipe = Arc::new(StdinPipe::new(stdin));
    let inbox = Arc::new(Inbox::new(options.doorbell.clone()));

    let mut handles = Vec::new();
    let writer_pipe = pipe.clone();
    handles.push(thread::spawn(move || write_loop(&writer_pipe)));
    let reader = Reader {
        limit: options.max_message_bytes,
        lua_handled: options.lua_handled.clone(),
        inbox: inbox.clone(),
        answers: pipe.clone(),
        log: log.clone(),
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
        exit,
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
    let (stderr_log, drain_wake) = (log.clone(), wake.clone());
    handles.push(thread::spawn(move || drain_stderr(stderr, stderr_log, &drain_wake)));

    let threads = Threads { handles, pipe: pipe.clone(), inbox: inbox.clone(), wake, read_side: read_side.clone() };
    Pipes { stdin: pipe, inbox, log, read_side, threads }
}

/// The server's stdin, shared by Lua (requests), the reader (answers to
/// server requests) and the writer thread (whatever did not fit).
pub(super) struct StdinPipe {
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
        refuse_sigpipe(stdin.as_raw_fd());
        let state = PipeState { stdin: Some(stdin), pending: VecDeque::new(), closing: false, abandoned: false };
        StdinPipe { state: Mutex::new(state), wake: Condvar::new() }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, PipeState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Writes what the pipe takes now, in order after anything queued, and
    /// queues the rest for the writer thread. A broken pipe shows up as EOF
    /// on stdout soon after, which reports it with the exit status.
    pub(super) fn send(&self, bytes: &[u8]) {
        let mut st = self.lock();
        if st.closing {
            return;
        }
        let Some(fd) = st.stdin.as_ref().map(|s| s.as_raw_fd()) else { return };
        let written = if st.pending.is_empty() {
            match write_without_sigpipe(fd, bytes) {
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
    pub(super) fn close(&self) {
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
pub(super) struct WakePipe {
    read: OwnedFd,
    write: OwnedFd,
}

impl WakePipe {
    pub(super) fn new() -> std::io::Result<WakePipe> {
        let (read, write) = nonblocking_pipe()?;
        Ok(WakePipe { read, write })
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
pub(super) fn next_spin(spin: Duration, took: Duration) -> Duration {
    if took > MAX_SPIN {
        return Duration::ZERO;
    }
    // Eased towards the new figure, so one quick reply after slow ones
    // does not start a spin at once, nor one slow reply end it.
    let target = (took * 2 + Duration::from_micros(5)).min(MAX_SPIN);
    (spin * 3 + target) / 4
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
            match exit.fd() {
                Some(notice) => fds[2].fd = notice,
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

/// What the pipes have seen, shared with the threads that see it: what the
/// server wrote on stderr, and on stdout besides its messages.
#[derive(Default)]
pub(super) struct PipeLog {
    stderr: VecDeque<u8>,
    pub(super) noise: VecDeque<String>,
    pub(super) any_stdout: bool,
    /// The stderr pipe reached EOF: the tail is complete.
    pub(super) stderr_done: bool,
}

impl PipeLog {
    /// Keeps what the server wrote on stderr, its last [`STDERR_TAIL_BYTES`].
    fn keep_stderr(&mut self, bytes: &[u8]) {
        self.stderr.extend(bytes);
        let excess = self.stderr.len().saturating_sub(STDERR_TAIL_BYTES);
        self.stderr.drain(..excess);
    }

    /// Not JSON-RPC: a banner or a stray log line. Keep a short memory
    /// of it for the error message if the server then dies.
    fn keep_noise(&mut self, line: &[u8]) {
        if self.noise.len() == NOISE_LINES {
            self.noise.pop_front();
        }
        let line = String::from_utf8_lossy(line);
        self.noise.push_back(server_text::printable(head_chars(&line, 200)).into_owned());
    }
}

/// What the threads of one server share, and what stops them.
pub(super) struct Threads {
    handles: Vec<JoinHandle<()>>,
    pipe: Arc<StdinPipe>,
    inbox: Arc<Inbox>,
    wake: Arc<WakePipe>,
    read_side: Arc<ReadSide>,
}

impl Threads {
    /// Stops every thread and waits for them: each one blocks only on
    /// something this wakes, so the wait is short whoever holds the pipes.
    pub(super) fn stop(self) {
        self.pipe.abandon();
        self.inbox.close();
        self.read_side.stop();
        self.wake.signal();
        for t in self.handles {
            let _ = t.join();
        }
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
            write_without_sigpipe(fd, front)
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

/// The stdout reader: splits lines, answers what it can, queues the rest.
struct Reader {
    limit: usize,
    /// See [`Options::lua_handled`].
    lua_handled: Vec<String>,
    inbox: Arc<Inbox>,
    answers: Arc<StdinPipe>,
    log: Arc<Mutex<PipeLog>>,
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

/// What [`split_lines`] found in a read.
enum Piece<'a> {
    /// A whole line, without its "\n".
    Line(&'a [u8]),
    /// A line grew past the limit: what it had is dropped, and the rest of
    /// it up to its "\n" is skipped.
    TooLarge,
}

/// Splits one read into lines. A line not finished in this read waits in
/// `line` for the next; a line over `limit` is reported once (`oversized`
/// remembers it across reads until its end).
fn split_lines(
    mut chunk: &[u8],
    line: &mut Vec<u8>,
    oversized: &mut bool,
    limit: usize,
    mut found: impl FnMut(Piece<'_>),
) {
    while !chunk.is_empty() {
        let (used, complete) = match chunk.iter().position(|&b| b == b'\n') {
            Some(i) => (i + 1, true),
            None => (chunk.len(), false),
        };
        let piece = &chunk[..used - usize::from(complete)];
        if !*oversized {
            if line.len() + piece.len() > limit {
                *oversized = true;
                *line = Vec::new();
                found(Piece::TooLarge);
            } else {
                line.extend_from_slice(piece);
            }
        }
        chunk = &chunk[used..];
        if complete {
            if !*oversized {
                found(Piece::Line(line.as_slice()));
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

/// A line as a message's text: without a byte order mark or a "\r" before
/// its "\n"; None when it is blank.
fn message_text(line: &[u8]) -> Option<&[u8]> {
    let line = line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(line);
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    (!line.iter().all(u8::is_ascii_whitespace)).then_some(line)
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
pub(super) struct ReadSide {
    reader: Reader,
    stdout: std::process::ChildStdout,
    exit: Arc<ExitWatch>,
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
        split_lines(&buf[..n], line, oversized, self.reader.limit, |piece| match piece {
            Piece::Line(text) => self.reader.handle_line(text),
            Piece::TooLarge => self.reader.inbox.push(Event::TooLarge(None), 0),
        });
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
    pub(super) fn wait_as_reader(&self, deadline: Instant, spin: Duration) -> Option<Event> {
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
        let Some(line) = message_text(line) else { return };
        let sorted = sort(line, &self.lua_handled);
        // On stdout only a JSON object is a message.
        let noise = match &sorted {
            Sorted::NotJson => true,
            Sorted::Deliver(msg, _) => !matches!(msg, Json::Object(_)),
            _ => false,
        };
        {
            let mut log = self.log.lock().unwrap_or_else(|p| p.into_inner());
            if noise {
                log.keep_noise(line);
                return;
            }
            log.any_stdout = true;
        }
        match sorted {
            Sorted::Deliver(msg, _) => self.inbox.push(Event::Message(msg), line.len()),
            Sorted::TooDeep(id) => self.inbox.push(Event::TooDeep(id), line.len()),
            Sorted::Answer(answer) | Sorted::Refuse(answer) => {
                let mut bytes = codec::encode(&answer);
                bytes.push(b'\n');
                self.answers.send(&bytes);
            }
            Sorted::Skip | Sorted::NotJson => {}
        }
    }
}

fn drain_stderr(stderr: std::process::ChildStderr, log: Arc<Mutex<PipeLog>>, wake: &WakePipe) {
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
                log.lock().unwrap_or_else(|p| p.into_inner()).stderr_done = true;
                return;
            }
            Chunk::Bytes(n) => log.lock().unwrap_or_else(|p| p.into_inner()).keep_stderr(&buf[..n]),
            Chunk::Nothing => continue,
        }
    }
}

/// The end of what the server wrote to stderr, for an error; None when
/// it wrote nothing but white space.
pub(super) fn stderr_excerpt(log: &PipeLog) -> Option<String> {
    let stderr: Vec<u8> = log.stderr.iter().copied().collect();
    let stderr = String::from_utf8_lossy(&stderr);
    let stderr = stderr.trim_end();
    (!stderr.is_empty()).then(|| server_text::printable(&last_lines(stderr, STDERR_EXCERPT_CHARS)).into_owned())
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
    use std::time::Duration;

    use super::{
        last_lines, message_text, next_spin, split_lines, stderr_excerpt, Piece, PipeLog, MAX_SPIN, NOISE_LINES,
        STDERR_EXCERPT_CHARS, STDERR_TAIL_BYTES,
    };

    /// Feeds `reads` to the line splitter one read at a time: the lines it
    /// found (None for one over the limit), and what it still holds.
    fn split(reads: &[&str], limit: usize) -> (Vec<Option<String>>, String) {
        let (mut line, mut oversized, mut found) = (Vec::new(), false, Vec::new());
        for read in reads {
            split_lines(read.as_bytes(), &mut line, &mut oversized, limit, |piece| {
                found.push(match piece {
                    Piece::Line(l) => Some(String::from_utf8(l.to_vec()).unwrap()),
                    Piece::TooLarge => None,
                })
            });
        }
        (found, String::from_utf8(line).unwrap())
    }

    fn kept(text: &str) -> Option<String> {
        Some(text.to_string())
    }

    #[test]
    fn a_message_split_across_reads_is_joined() {
        let (lines, rest) = split(&[r#"{"id":1,"res"#, r#"ult":{}"#, "}\n"], 1024);
        assert_eq!(lines, vec![kept(r#"{"id":1,"result":{}}"#)]);
        assert_eq!(rest, "");
    }

    #[test]
    fn several_messages_in_one_read_come_apart_and_an_unfinished_one_waits() {
        let (lines, rest) = split(&["{\"a\":1}\n{\"b\":2}\n{\"c\""], 1024);
        assert_eq!(lines, vec![kept("{\"a\":1}"), kept("{\"b\":2}")]);
        assert_eq!(rest, "{\"c\"");
    }

    #[test]
    fn a_line_over_the_limit_is_reported_once_and_skipped_to_its_end() {
        let (lines, rest) = split(&["12345678", "9012", "345\nok\n"], 10);
        assert_eq!(lines, vec![None, kept("ok")]);
        assert_eq!(rest, "");
    }

    #[test]
    fn a_line_of_exactly_the_limit_is_kept() {
        let (lines, _) = split(&["abcd\nabcde\n"], 4);
        assert_eq!(lines, vec![kept("abcd"), None]);
    }

    #[test]
    fn a_blank_line_is_no_message() {
        let (lines, _) = split(&["\n\r\n  \n{}\n"], 1024);
        let texts: Vec<Option<Vec<u8>>> =
            lines.iter().map(|l| message_text(l.as_deref().unwrap().as_bytes()).map(<[u8]>::to_vec)).collect();
        assert_eq!(texts, vec![None, None, None, Some(b"{}".to_vec())]);
    }

    #[test]
    fn a_byte_order_mark_and_a_carriage_return_are_not_part_of_the_message() {
        assert_eq!(message_text(b"\xEF\xBB\xBF{\"id\":1}\r"), Some(&b"{\"id\":1}"[..]));
    }

    #[test]
    fn a_slow_reply_ends_the_spin() {
        assert_eq!(next_spin(MAX_SPIN, MAX_SPIN + Duration::from_micros(1)), Duration::ZERO);
    }

    #[test]
    fn one_quick_reply_after_slow_ones_starts_only_a_short_spin() {
        let spin = next_spin(Duration::ZERO, Duration::from_micros(10));
        assert!(spin > Duration::ZERO && spin < Duration::from_micros(10), "{spin:?}");
    }

    #[test]
    fn quick_replies_earn_a_spin_of_about_twice_their_time() {
        let mut spin = Duration::ZERO;
        for _ in 0..50 {
            spin = next_spin(spin, Duration::from_micros(10));
        }
        // Twice 10 us, and 5 us to spare, approached from below.
        let target = Duration::from_micros(25);
        assert!(spin <= target && spin > target - Duration::from_micros(1), "{spin:?}");
    }

    #[test]
    fn the_spin_never_passes_its_cap() {
        let mut spin = Duration::ZERO;
        for _ in 0..100 {
            spin = next_spin(spin, MAX_SPIN);
            assert!(spin <= MAX_SPIN, "{spin:?}");
        }
        assert!(spin > MAX_SPIN / 2, "{spin:?}");
    }

    fn log_of(stderr: &str) -> PipeLog {
        let mut log = PipeLog::default();
        log.keep_stderr(stderr.as_bytes());
        log
    }

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

    #[test]
    fn a_stderr_of_white_space_only_is_no_excerpt() {
        assert_eq!(stderr_excerpt(&PipeLog::default()), None);
        assert_eq!(stderr_excerpt(&log_of(" \n\t\n")), None);
    }

    #[test]
    fn a_short_stderr_is_quoted_whole_without_its_last_newline() {
        let said = stderr_excerpt(&log_of("listening\nfatal: no config\n"));
        assert_eq!(said.as_deref(), Some("listening\nfatal: no config"));
    }

    #[test]
    fn a_long_stderr_is_cut_to_its_last_600_characters_from_a_line_start() {
        let stderr: String = (0..100).map(|i| format!("line {i:03} of the server's log\n")).collect();
        let said = stderr_excerpt(&log_of(&stderr)).unwrap();
        assert!(said.starts_with("...\nline "), "{said}");
        assert!(said.ends_with("\nline 099 of the server's log"), "{said}");
        assert!(said.chars().count() <= STDERR_EXCERPT_CHARS + "...\n".len(), "{said}");
    }

    #[test]
    fn the_excerpt_counts_characters_not_bytes() {
        let said = stderr_excerpt(&log_of(&"é".repeat(1000))).unwrap();
        assert_eq!(said, format!("...{}", "é".repeat(STDERR_EXCERPT_CHARS)));
    }

    #[test]
    fn stderr_keeps_only_its_last_64_kib() {
        let mut log = PipeLog::default();
        log.keep_stderr(&[b'a'; STDERR_TAIL_BYTES]);
        log.keep_stderr(b"the end");
        let kept: Vec<u8> = log.stderr.iter().copied().collect();
        assert_eq!(kept.len(), STDERR_TAIL_BYTES);
        assert!(kept.ends_with(b"aathe end"));
    }

    #[test]
    fn only_the_last_few_noise_lines_are_kept_each_cut_short() {
        let mut log = PipeLog::default();
        for i in 0..NOISE_LINES + 2 {
            log.keep_noise(format!("banner {i}").as_bytes());
        }
        log.keep_noise("x".repeat(300).as_bytes());
        assert_eq!(log.noise.len(), NOISE_LINES);
        assert_eq!(log.noise.front().map(String::as_str), Some("banner 3"));
        assert_eq!(log.noise.back().map(|l| l.chars().count()), Some(200));
    }
}
