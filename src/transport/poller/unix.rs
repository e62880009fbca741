//! poll(2) and a pipe to wake it, for the poll thread on Unix.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};

use crate::transport::fds::{nonblocking_pipe, read_now, write_without_sigpipe, Chunk};

/// What the thread polls: any descriptor (pipes, sockets, a pidfd).
pub type Descriptor = RawFd;
pub type Entry = libc::pollfd;
pub const READABLE: i16 = libc::POLLIN;
pub const WRITABLE: i16 = libc::POLLOUT;

pub fn entry(fd: Descriptor, events: i16) -> Entry {
    libc::pollfd { fd, events, revents: 0 }
}

pub fn revents(entry: &Entry) -> i16 {
    entry.revents
}

/// Waits until one of `entries` is ready or `timeout_ms` passed (-1:
/// no limit). An interruption by a signal counts as a wake-up.
pub fn poll(entries: &mut [Entry], timeout_ms: i32) -> io::Result<()> {
    // SAFETY: `entries` is a live array of the length passed.
    let n = unsafe { libc::poll(entries.as_mut_ptr(), entries.len() as libc::nfds_t, timeout_ms) };
    if n < 0 {
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
    Ok(())
}

/// A pipe of our own that the thread polls beside the clients'
/// descriptors: a byte written to it starts a new round.
pub struct WakeUp {
    read: OwnedFd,
    write: OwnedFd,
}

impl WakeUp {
    pub fn new() -> io::Result<WakeUp> {
        let (read, write) = nonblocking_pipe()?;
        Ok(WakeUp { read, write })
    }

    pub fn signal(&self) {
        // A full pipe already wakes the thread: the failed write is fine.
        let _ = write_without_sigpipe(self.write.as_raw_fd(), b"x");
    }

    pub fn descriptor(&self) -> Descriptor {
        self.read.as_raw_fd()
    }

    /// Empties the pipe, so that the next poll sleeps.
    pub fn drain(&self) {
        let mut buf = [0u8; 64];
        while let Chunk::Bytes(_) = read_now(self.read.as_raw_fd(), &mut buf) {}
    }
}
