//! The bell for any Unix (the BSDs other than FreeBSD among them): a
//! pipe, rung by writing a byte, and a thread of its own that writes to it
//! when the deadline passes (`deadline_thread`). It costs a thread per
//! armed client with a deadline; where the system has a pollable timer
//! (Linux's timerfd, kqueue on macOS and FreeBSD) the other bells use that
//! instead. On Linux the `portable` feature selects it, so the doorbell's
//! logic is tested with a bell built on nothing but POSIX.

use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::Arc;
use std::time::Duration;

use super::deadline_thread::DeadlineThread;

#[derive(Debug)]
pub(super) struct Bell {
    pipe: Arc<Pipe>,
    deadline: DeadlineThread,
    /// The process that made the bell: a forked child has no deadline
    /// thread to end or wait for.
    owner: libc::pid_t,
}

#[derive(Debug)]
struct Pipe {
    read: OwnedFd,
    write: OwnedFd,
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
        Ok(Bell { pipe: Arc::new(Pipe { read, write }), deadline: DeadlineThread::default(), owner })
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
        let pipe = self.pipe.clone();
        self.deadline.set(delay, move || pipe.ring());
    }
}

impl Drop for Bell {
    fn drop(&mut self) {
        // SAFETY: getpid(2) has no preconditions.
        if unsafe { libc::getpid() } != self.owner {
            self.deadline.forget();
        }
    }
}
