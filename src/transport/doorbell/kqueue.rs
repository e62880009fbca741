//! The bell of macOS and FreeBSD: a kqueue holding a user event (rung) and
//! a one-shot timer (the deadline). A kqueue descriptor is readable while
//! an event is pending, so poll(2), luv and Neovim can watch it.
//!
//! This is the one part of the doorbell Linux cannot run; the logic around
//! it is tested there with the pipe bell (the `portable` feature).

use std::os::fd::{IntoRawFd, RawFd};
use std::time::Duration;

use crate::transport::fds::owned;

/// The two events' identifiers within our own queue.
const RUNG: usize = 1;
const DEADLINE: usize = 2;

#[derive(Debug)]
pub(super) struct Bell {
    queue: RawFd,
    /// The process that made the queue. Fork does not copy a kqueue, so in
    /// a child the number may name another file by now: only the owner
    /// closes it. (For the same reason there is no close-on-exec to set.)
    owner: libc::pid_t,
}

impl Bell {
    pub(super) fn new() -> std::io::Result<Bell> {
        // SAFETY: kqueue(2) returns a new descriptor or -1; getpid(2) has
        // no preconditions.
        let queue = owned(unsafe { libc::kqueue() })?.into_raw_fd();
        // SAFETY: getpid(2) has no preconditions.
        let bell = Bell { queue, owner: unsafe { libc::getpid() } };
        // EV_CLEAR: fetching the event (in `clear`) resets it.
        if bell.change(libc::EVFILT_USER, RUNG, libc::EV_ADD | libc::EV_CLEAR, 0, 0) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(bell)
    }

    fn change(&self, filter: i16, ident: usize, flags: u16, fflags: u32, data: i64) -> libc::c_int {
        // SAFETY: an all-zero kevent is valid (FreeBSD's has reserved
        // fields macOS's lacks, hence zeroed() rather than a literal).
        let mut event: libc::kevent = unsafe { std::mem::zeroed() };
        event.ident = ident as _;
        event.filter = filter as _;
        event.flags = flags as _;
        event.fflags = fflags as _;
        event.data = data as _;
        // SAFETY: one live change and no event list.
        unsafe { libc::kevent(self.queue, &event, 1, std::ptr::null_mut(), 0, std::ptr::null()) }
    }

    pub(super) fn fd(&self) -> RawFd {
        self.queue
    }

    pub(super) fn ring(&self) {
        self.change(libc::EVFILT_USER, RUNG, 0, libc::NOTE_TRIGGER, 0);
    }

    /// Fetches whatever is pending: the user event resets (EV_CLEAR), a
    /// fired one-shot timer is gone.
    pub(super) fn clear(&self) {
        // SAFETY: an all-zero kevent is valid; the list and its length
        // match, and a zero timeout makes the call return at once.
        let mut fetched: [libc::kevent; 2] = unsafe { std::mem::zeroed() };
        let zero = libc::timespec { tv_sec: 0, tv_nsec: 0 };
        // SAFETY: the list and its length match; the queue is ours.
        unsafe { libc::kevent(self.queue, std::ptr::null(), 0, fetched.as_mut_ptr(), 2, &zero) };
    }

    /// The old timer goes first, with any expiry of it still pending, so a
    /// deadline moved later cannot ring at the earlier time (and older
    /// FreeBSD did not re-arm a timer added again). Deleting a timer that
    /// is not there fails harmlessly.
    pub(super) fn set_timer(&self, delay: Option<Duration>) {
        self.change(libc::EVFILT_TIMER, DEADLINE, libc::EV_DELETE, 0, 0);
        if let Some(delay) = delay {
            let micros = delay.as_micros().clamp(1, i64::MAX as u128 / 2) as i64;
            self.change(libc::EVFILT_TIMER, DEADLINE, libc::EV_ADD | libc::EV_ONESHOT, libc::NOTE_USECONDS, micros);
        }
    }
}

impl Drop for Bell {
    fn drop(&mut self) {
        // SAFETY: getpid(2) has no preconditions; the queue is ours to
        // close in the process that made it.
        unsafe {
            if libc::getpid() == self.owner {
                libc::close(self.queue);
            }
        }
    }
}
