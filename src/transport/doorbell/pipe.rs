//! The bell for any Unix (the BSDs other than FreeBSD among them): a
//! pipe, rung by writing a byte, and a thread of its own that writes to it
//! when the deadline passes. It costs a thread per armed client with a
//! deadline; where the system has a pollable timer (Linux's timerfd,
//! kqueue on macOS and FreeBSD) the other bells use that instead. On Linux
//! the `portable` feature selects it, so the doorbell's logic is tested
//! with a bell built on nothing but POSIX.

use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

#[derive(Debug)]
pub(super) struct Bell {
    pipe: Arc<Pipe>,
    timer: Arc<Timer>,
    /// Started with the first deadline; ends with the bell.
    keeper: Mutex<Option<JoinHandle<()>>>,
    /// The process that started the keeper: a forked child has no such
    /// thread to end or wait for.
    owner: libc::pid_t,
}

#[derive(Debug)]
struct Pipe {
    read: OwnedFd,
    write: OwnedFd,
}

#[derive(Debug, Default)]
struct Timer {
    state: Mutex<TimerState>,
    changed: Condvar,
}

#[derive(Debug, Default)]
struct TimerState {
    deadline: Option<Instant>,
    closing: bool,
}

impl Pipe {
    fn ring(&self) {
        // SAFETY: a one-byte write from a static buffer to our own
        // non-blocking pipe, whose read end lives as long as this one (no
        // SIGPIPE). A full pipe is rung already.
        unsafe { libc::write(self.write.as_raw_fd(), b"!".as_ptr().cast(), 1) };
    }
}

impl Bell {
    pub(super) fn new() -> std::io::Result<Bell> {
        let (read, write) = crate::transport::fds::nonblocking_pipe()?;
        // SAFETY: getpid(2) has no preconditions.
        let owner = unsafe { libc::getpid() };
        Ok(Bell { pipe: Arc::new(Pipe { read, write }), timer: Arc::default(), keeper: Mutex::new(None), owner })
    }

    pub(super) fn fd(&self) -> RawFd {
        self.pipe.read.as_raw_fd()
    }

    pub(super) fn ring(&self) {
        self.pipe.ring();
    }

    pub(super) fn clear(&self) {
        let mut sink = [0u8; 64];
        // SAFETY: reads into a live buffer of the length passed, from our
        // own non-blocking pipe, until it is empty.
        while unsafe { libc::read(self.pipe.read.as_raw_fd(), sink.as_mut_ptr().cast(), sink.len()) } > 0 {}
    }

    pub(super) fn set_timer(&self, delay: Option<Duration>) {
        let mut state = self.timer.state.lock().unwrap_or_else(|p| p.into_inner());
        state.deadline = delay.map(|d| Instant::now() + d);
        drop(state);
        self.timer.changed.notify_one();
        if delay.is_some() {
            self.start_keeper();
        }
    }

    fn start_keeper(&self) {
        let mut keeper = self.keeper.lock().unwrap_or_else(|p| p.into_inner());
        if keeper.is_none() {
            let (pipe, timer) = (self.pipe.clone(), self.timer.clone());
            *keeper = thread::Builder::new().name("mcp-deadline".into()).spawn(move || keep_time(&pipe, &timer)).ok();
        }
    }
}

/// Sleeps until the deadline (which may move meanwhile), rings, and waits
/// for the next one.
fn keep_time(pipe: &Pipe, timer: &Timer) {
    let mut state = timer.state.lock().unwrap_or_else(|p| p.into_inner());
    while !state.closing {
        state = match state.deadline {
            None => timer.changed.wait(state).unwrap_or_else(|p| p.into_inner()),
            Some(at) if Instant::now() >= at => {
                state.deadline = None;
                pipe.ring();
                state
            }
            Some(at) => {
                let left = at.saturating_duration_since(Instant::now());
                timer.changed.wait_timeout(state, left).unwrap_or_else(|p| p.into_inner()).0
            }
        };
    }
}

impl Drop for Bell {
    fn drop(&mut self) {
        // SAFETY: getpid(2) has no preconditions.
        if unsafe { libc::getpid() } != self.owner {
            std::mem::forget(self.keeper.lock().unwrap_or_else(|p| p.into_inner()).take());
            return;
        }
        self.timer.state.lock().unwrap_or_else(|p| p.into_inner()).closing = true;
        self.timer.changed.notify_one();
        if let Some(keeper) = self.keeper.lock().unwrap_or_else(|p| p.into_inner()).take() {
            let _ = keeper.join();
        }
    }
}
