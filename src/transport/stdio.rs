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

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio as Pipe};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use crate::codec::{self, Json};
use crate::error::{Error, Result};
use crate::protocol::{answer_server_request, classify, is_forwarded, Kind};
use crate::transport::Transport;

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
}

pub const DEFAULT_MAX_MESSAGE_BYTES: usize = 64 * 1024 * 1024;
const STDERR_TAIL_BYTES: usize = 64 * 1024;
/// Lines of non-JSON stdout kept for error messages.
const NOISE_LINES: usize = 5;
/// The spec's shutdown: close stdin, wait, SIGTERM, wait, SIGKILL.
const GRACE: Duration = Duration::from_secs(2);

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
    closing: bool,
}

impl StdinPipe {
    fn new(stdin: ChildStdin) -> Self {
        // SAFETY: fcntl on a descriptor we own; only our end of the pipe
        // becomes non-blocking, the server's end is its own.
        unsafe {
            let fd = stdin.as_raw_fd();
            let flags = libc::fcntl(fd, libc::F_GETFL);
            libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK);
        }
        let state = PipeState { stdin: Some(stdin), pending: VecDeque::new(), closing: false };
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
}

enum Event {
    Message(Json),
    TooLarge,
    Eof,
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

pub struct Stdio {
    child: Option<Child>,
    launch: Launch,
    pipe: Arc<StdinPipe>,
    inbox: Receiver<Event>,
    witness: Arc<Mutex<Witness>>,
    threads: Vec<JoinHandle<()>>,
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
        let mut child = command.spawn().map_err(|err| Error::Transport {
            code: "127".into(),
            detail: format!("MCP server produced no output ({}): {}", options.launch.describe(), err),
        })?;

        let stdin = child.stdin.take().expect("stdin was piped");
        let stdout = child.stdout.take().expect("stdout was piped");
        let stderr = child.stderr.take().expect("stderr was piped");
        let witness = Arc::new(Mutex::new(Witness::default()));
        let pipe = Arc::new(StdinPipe::new(stdin));
        let (events, inbox) = mpsc::channel::<Event>();

        let mut threads = Vec::new();
        let writer_pipe = pipe.clone();
        threads.push(thread::spawn(move || write_loop(&writer_pipe)));
        let (answers, seen) = (pipe.clone(), witness.clone());
        let limit = options.max_message_bytes;
        let forward = options.forward.clone();
        threads.push(thread::spawn(move || read_loop(stdout, limit, &forward, events, answers, seen)));
        let seen = witness.clone();
        threads.push(thread::spawn(move || drain_stderr(stderr, seen)));

        Ok(Stdio {
            child: Some(child),
            launch: options.launch.clone(),
            pipe,
            inbox,
            witness,
            threads,
            max_message_bytes: limit,
            failure: None,
        })
    }

    /// The server closed stdout: find out how it ended and say so the way
    /// the reference does, with the stderr tail.
    fn ended(&mut self) -> Error {
        if self.failure.is_none() {
            let status = self.child.as_mut().and_then(|c| wait_for(c, Duration::from_secs(1)));
            let code = match status {
                Some(s) => match (s.code(), s.signal()) {
                    (Some(code), _) => code.to_string(),
                    (_, Some(sig)) => format!("signal {sig}"),
                    _ => "-1".into(),
                },
                None => "-1".into(),
            };
            // stdout and stderr close together, but are read by different
            // threads: give the stderr drain a moment to catch up, so the
            // message quotes what the server said last.
            let settle = Instant::now() + Duration::from_millis(500);
            while !self.witness.lock().unwrap_or_else(|p| p.into_inner()).stderr_done && Instant::now() < settle {
                thread::sleep(Duration::from_millis(2));
            }
            let witness = self.witness.lock().unwrap_or_else(|p| p.into_inner());
            let stderr: Vec<u8> = witness.stderr.iter().copied().collect();
            let stderr = String::from_utf8_lossy(&stderr).into_owned();
            let stderr = stderr.trim_end();
            let what = if witness.any_stdout { "MCP server exited" } else { "MCP server produced no output" };
            let mut detail = format!("{what} ({})", self.launch.describe());
            if !stderr.is_empty() {
                // The head of a long log is usually the useful part when the
                // server never started; the tail when it died later.
                let excerpt = if witness.any_stdout { tail_chars(stderr, 300) } else { head_chars(stderr, 300) };
                detail.push_str(": ");
                detail.push_str(excerpt);
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

    /// The writer drops stdin on this, which is EOF for the server.
    fn close_stdin(&mut self) {
        self.pipe.close();
    }

    /// The spec's shutdown sequence, blocking until every process in the
    /// group is gone and the leader reaped.
    fn shut_down(&mut self) {
        self.close_stdin();
        if let Some(mut child) = self.child.take() {
            stop_group(&mut child);
        }
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

impl Transport for Stdio {
    fn send(&mut self, message: &Json) -> Result<()> {
        if self.failure.is_some() {
            return Err(self.ended());
        }
        let mut line = codec::encode(message);
        line.push(b'\n');
        self.pipe.send(&line);
        Ok(())
    }

    fn receive(&mut self, deadline: Instant) -> Result<Option<Json>> {
        if self.failure.is_some() {
            return Err(self.ended());
        }
        let wait = deadline.saturating_duration_since(Instant::now());
        match self.inbox.recv_timeout(wait) {
            Ok(Event::Message(msg)) => Ok(Some(msg)),
            Ok(Event::TooLarge) => Err(Error::MessageTooLarge { limit: self.max_message_bytes }),
            Ok(Event::Eof) | Err(RecvTimeoutError::Disconnected) => Err(self.ended()),
            Err(RecvTimeoutError::Timeout) => Ok(None),
        }
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
        self.close_stdin();
        let Some(mut child) = self.child.take() else { return };
        let threads = std::mem::take(&mut self.threads);
        let reaper = thread::spawn(move || {
            stop_group(&mut child);
            for t in threads {
                let _ = t.join();
            }
        });
        REAPERS.lock().unwrap_or_else(|p| p.into_inner()).push(reaper);
    }
}

static REAPERS: Mutex<Vec<JoinHandle<()>>> = Mutex::new(Vec::new());

/// Waits for every shutdown handed to the background. Called when the Lua
/// state closes, before the module's code is unloaded.
pub fn join_reapers() {
    let reapers = std::mem::take(&mut *REAPERS.lock().unwrap_or_else(|p| p.into_inner()));
    for r in reapers {
        let _ = r.join();
    }
}

fn stop_group(child: &mut Child) {
    let pgid = child.id() as libc::pid_t;
    let exited = |child: &mut Child, within: Duration| exited_without_reaping(child, within);
    if !exited(child, GRACE) {
        signal_group(pgid, libc::SIGTERM);
        if !exited(child, GRACE) {
            signal_group(pgid, libc::SIGKILL);
        }
    }
    // The leader is a zombie now, so its group id cannot have been reused:
    // whatever is left in the group (a grandchild that outlived its
    // wrapper) is ours to end.
    signal_group(pgid, libc::SIGKILL);
    let _ = child.wait();
}

fn signal_group(pgid: libc::pid_t, signal: libc::c_int) {
    // SAFETY: kill(2) with a negative pid signals a process group; it has
    // no memory effects on this process.
    unsafe {
        libc::kill(-pgid, signal);
    }
}

/// Polls for the child's exit without reaping it (WNOWAIT), so its pid and
/// group stay reserved until we have signalled the rest of the group.
fn exited_without_reaping(child: &Child, within: Duration) -> bool {
    let deadline = Instant::now() + within;
    loop {
        // SAFETY: waitid writes only into the siginfo we pass.
        let done = unsafe {
            let mut info: libc::siginfo_t = std::mem::zeroed();
            let rc = libc::waitid(
                libc::P_PID,
                child.id() as libc::id_t,
                &mut info,
                libc::WEXITED | libc::WNOHANG | libc::WNOWAIT,
            );
            rc != 0 || info.si_pid() != 0
        };
        if done {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        thread::sleep(Duration::from_millis(5));
    }
}

fn wait_for(child: &mut Child, within: Duration) -> Option<ExitStatus> {
    let deadline = Instant::now() + within;
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            return Some(status);
        }
        if Instant::now() >= deadline {
            return None;
        }
        thread::sleep(Duration::from_millis(5));
    }
}

/// Drains what `StdinPipe::send` could not write at once, waiting for
/// room with poll(2) outside the lock; closes stdin when asked and done.
fn write_loop(pipe: &StdinPipe) {
    loop {
        let mut st = pipe.lock();
        while st.pending.is_empty() && !st.closing && st.stdin.is_some() {
            st = pipe.wake.wait(st).unwrap_or_else(|p| p.into_inner());
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
                // meanwhile: only this thread or a broken write closes it,
                // and a broken write leaves nothing pending for us.
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

fn read_loop(
    stdout: impl Read,
    limit: usize,
    forward: &[String],
    events: Sender<Event>,
    answers: Arc<StdinPipe>,
    witness: Arc<Mutex<Witness>>,
) {
    let mut reader = BufReader::with_capacity(64 * 1024, stdout);
    let mut line = Vec::new();
    let mut oversized = false;
    loop {
        let chunk = match reader.fill_buf() {
            Ok([]) | Err(_) => break,
            Ok(chunk) => chunk,
        };
        let (used, complete) = match chunk.iter().position(|&b| b == b'\n') {
            Some(i) => (i + 1, true),
            None => (chunk.len(), false),
        };
        let piece = &chunk[..used - usize::from(complete)];
        if !oversized {
            if line.len() + piece.len() > limit {
                oversized = true;
                line = Vec::new();
                let _ = events.send(Event::TooLarge);
            } else {
                line.extend_from_slice(piece);
            }
        }
        reader.consume(used);
        if complete {
            if !oversized {
                handle_line(&line, forward, &events, &answers, &witness);
            }
            line.clear();
            // A one-off huge line must not pin its buffer for the session.
            if line.capacity() > 1 << 20 {
                line = Vec::new();
            }
            oversized = false;
        }
    }
    if !line.is_empty() && !oversized {
        handle_line(&line, forward, &events, &answers, &witness);
    }
    let _ = events.send(Event::Eof);
}

fn handle_line(line: &[u8], forward: &[String], events: &Sender<Event>, answers: &StdinPipe, witness: &Mutex<Witness>) {
    let line = line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(line);
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    if line.iter().all(u8::is_ascii_whitespace) {
        return;
    }
    let parsed = codec::decode(line).ok().filter(|m| matches!(m, Json::Object(_)));
    let mut seen = witness.lock().unwrap_or_else(|p| p.into_inner());
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
    if classify(&msg) == Kind::ServerRequest && !is_forwarded(&msg, forward) {
        if let Some(answer) = answer_server_request(&msg) {
            let mut bytes = codec::encode(&answer);
            bytes.push(b'\n');
            answers.send(&bytes);
        }
        return;
    }
    let _ = events.send(Event::Message(msg));
}

fn drain_stderr(mut stderr: impl Read, witness: Arc<Mutex<Witness>>) {
    let mut buf = [0u8; 16 * 1024];
    loop {
        match stderr.read(&mut buf) {
            Ok(0) | Err(_) => {
                witness.lock().unwrap_or_else(|p| p.into_inner()).stderr_done = true;
                return;
            }
            Ok(n) => {
                let mut seen = witness.lock().unwrap_or_else(|p| p.into_inner());
                seen.stderr.extend(&buf[..n]);
                let excess = seen.stderr.len().saturating_sub(STDERR_TAIL_BYTES);
                seen.stderr.drain(..excess);
            }
        }
    }
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
