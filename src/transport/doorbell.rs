//! A file descriptor that an event loop can watch: readable whenever
//! something waits for Lua (a message in the inbox, or an async request's
//! time running out).
//!
//! An editor's loop (Neovim's `vim.loop`, luv) cannot block in our waits,
//! and it cannot run our threads' callbacks either: Lua may only be entered
//! from its own thread. So the loop watches one descriptor and, when it is
//! readable, calls `client:dispatch()` on its own thread. The descriptor is
//! an epoll set holding an eventfd (rung by the reader threads after they
//! queue a message) and a timerfd (set to the earliest async deadline): one
//! number to hand out, two sources behind it, and no thread of our own
//! just to keep time.
//!
//! Ringing costs a write(2), so the bell stays silent until someone asks
//! for the descriptor (`arm`), and rings once per batch: a second message
//! queued before Lua looked finds it already rung.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

#[derive(Debug)]
pub struct Doorbell {
    epoll: OwnedFd,
    event: OwnedFd,
    timer: OwnedFd,
    /// Someone asked for the descriptor: ring from now on.
    armed: AtomicBool,
    /// Rung and not yet cleared: no need to write again.
    rung: AtomicBool,
}

fn owned(fd: RawFd) -> std::io::Result<OwnedFd> {
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: a descriptor just returned by the kernel, owned by no one else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

impl Doorbell {
    pub fn new() -> std::io::Result<Doorbell> {
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
        Ok(Doorbell { epoll, event, timer, armed: AtomicBool::new(false), rung: AtomicBool::new(false) })
    }

    /// The descriptor to watch; from now on the bell rings.
    pub fn arm(&self) -> RawFd {
        self.armed.store(true, Ordering::SeqCst);
        self.epoll.as_raw_fd()
    }

    pub fn armed(&self) -> bool {
        self.armed.load(Ordering::Relaxed)
    }

    /// Something was queued for Lua. Called after the queueing, so that a
    /// loop woken by it finds what woke it.
    pub fn ring(&self) {
        if !self.armed.load(Ordering::Relaxed) || self.rung.swap(true, Ordering::SeqCst) {
            return;
        }
        let one: u64 = 1;
        // SAFETY: writing 8 bytes from a live u64 to our eventfd. A full
        // counter (never, at one write per batch) only fails the write.
        unsafe { libc::write(self.event.as_raw_fd(), (&one as *const u64).cast(), 8) };
    }

    /// Lua is about to look at everything queued: what arrives from here on
    /// rings again. Also clears an expired timer.
    pub fn clear(&self) {
        if !self.armed.load(Ordering::Relaxed) {
            return;
        }
        self.rung.store(false, Ordering::SeqCst);
        let mut sink: u64 = 0;
        for fd in [self.event.as_raw_fd(), self.timer.as_raw_fd()] {
            // SAFETY: reading 8 bytes into a live u64 from our own
            // non-blocking descriptors; EAGAIN when there is nothing.
            unsafe { libc::read(fd, (&mut sink as *mut u64).cast(), 8) };
        }
    }

    /// Makes the descriptor readable at `deadline` (the earliest time an
    /// async request runs out), or never for None.
    pub fn ring_at(&self, deadline: Option<Instant>) {
        if !self.armed.load(Ordering::Relaxed) {
            return;
        }
        // A zero it_value disarms a timerfd: a deadline already past gets
        // the smallest delay instead.
        let delay = deadline.map(|d| d.saturating_duration_since(Instant::now()).max(Duration::from_nanos(1)));
        let value = delay.map_or(libc::timespec { tv_sec: 0, tv_nsec: 0 }, |d| libc::timespec {
            tv_sec: d.as_secs().min(i64::MAX as u64 / 2) as libc::time_t,
            tv_nsec: d.subsec_nanos() as libc::c_long,
        });
        let spec = libc::itimerspec { it_interval: libc::timespec { tv_sec: 0, tv_nsec: 0 }, it_value: value };
        // SAFETY: our own timerfd and a live itimerspec.
        unsafe { libc::timerfd_settime(self.timer.as_raw_fd(), 0, &spec, std::ptr::null_mut()) };
    }

    /// Waits until one of `bells` is readable, for `within` at most.
    pub fn wait_any(bells: &[&Doorbell], within: Duration) {
        let mut fds: Vec<libc::pollfd> =
            bells.iter().map(|b| libc::pollfd { fd: b.epoll.as_raw_fd(), events: libc::POLLIN, revents: 0 }).collect();
        let ms = within.as_millis().min(i32::MAX as u128) as libc::c_int;
        // SAFETY: `fds` is a live array of the length passed.
        unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, ms) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn readable(bell: &Doorbell) -> bool {
        let mut fd = libc::pollfd { fd: bell.epoll.as_raw_fd(), events: libc::POLLIN, revents: 0 };
        // SAFETY: one live pollfd.
        unsafe { libc::poll(&mut fd, 1, 0) == 1 }
    }

    #[test]
    fn rings_only_once_armed_and_clears() {
        let bell = Doorbell::new().unwrap();
        bell.ring();
        assert!(!readable(&bell), "an unarmed bell stays silent");
        bell.arm();
        bell.ring();
        bell.ring();
        assert!(readable(&bell));
        bell.clear();
        assert!(!readable(&bell));
    }

    #[test]
    fn a_deadline_makes_it_readable_when_it_passes() {
        let bell = Doorbell::new().unwrap();
        bell.arm();
        bell.ring_at(Some(Instant::now() + Duration::from_millis(30)));
        assert!(!readable(&bell));
        Doorbell::wait_any(&[&bell], Duration::from_secs(2));
        assert!(readable(&bell));
        bell.clear();
        bell.ring_at(None);
        assert!(!readable(&bell));
    }
}
