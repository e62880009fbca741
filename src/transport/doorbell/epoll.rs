//! Linux's bell: an epoll set holding an eventfd (rung) and a timerfd (the
//! deadline). No thread of our own just to keep time.

use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::time::Duration;

use crate::transport::fds::owned;

#[derive(Debug)]
pub(super) struct Bell {
    epoll: OwnedFd,
    event: OwnedFd,
    timer: OwnedFd,
}

impl Bell {
    pub(super) fn new() -> std::io::Result<Bell> {
        // SAFETY: plain system calls creating new descriptors.
        let (epoll, event, timer) = unsafe {
            (
                owned(libc::epoll_create1(libc::EPOLL_CLOEXEC))?,
                owned(libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC))?,
                owned(libc::timerfd_create(libc::CLOCK_MONOTONIC, libc::TFD_NONBLOCK | libc::TFD_CLOEXEC))?,
            )
        };
        for fd in [event.as_raw_fd(), timer.as_raw_fd()] {
            let mut interest = libc::epoll_event { events: libc::EPOLLIN as u32, u64: fd as u64 };
            // SAFETY: both descriptors are open; `interest` outlives the call.
            if unsafe { libc::epoll_ctl(epoll.as_raw_fd(), libc::EPOLL_CTL_ADD, fd, &mut interest) } != 0 {
                return Err(std::io::Error::last_os_error());
            }
        }
        Ok(Bell { epoll, event, timer })
    }

    pub(super) fn fd(&self) -> RawFd {
        self.epoll.as_raw_fd()
    }

    pub(super) fn ring(&self) {
        let one: u64 = 1;
        // SAFETY: writing 8 bytes from a live u64 to our eventfd. A full
        // counter (never, at one write per batch) only fails the write.
        unsafe { libc::write(self.event.as_raw_fd(), (&one as *const u64).cast(), 8) };
    }

    pub(super) fn clear(&self) {
        let mut sink: u64 = 0;
        for fd in [self.event.as_raw_fd(), self.timer.as_raw_fd()] {
            // SAFETY: reading 8 bytes into a live u64 from our own
            // non-blocking descriptors; EAGAIN when there is nothing.
            unsafe { libc::read(fd, (&mut sink as *mut u64).cast(), 8) };
        }
    }

    /// A zero it_value disarms a timerfd, which is what None asks for;
    /// the caller never passes a zero delay.
    pub(super) fn set_timer(&self, delay: Option<Duration>) {
        let value = delay.map_or(libc::timespec { tv_sec: 0, tv_nsec: 0 }, |d| libc::timespec {
            tv_sec: d.as_secs().min(i64::MAX as u64 / 2) as libc::time_t,
            tv_nsec: d.subsec_nanos() as libc::c_long,
        });
        let spec = libc::itimerspec { it_interval: libc::timespec { tv_sec: 0, tv_nsec: 0 }, it_value: value };
        // SAFETY: our own timerfd and a live itimerspec.
        unsafe { libc::timerfd_settime(self.timer.as_raw_fd(), 0, &spec, std::ptr::null_mut()) };
    }
}
