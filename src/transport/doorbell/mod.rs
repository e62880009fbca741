//! A file descriptor that an event loop can watch: readable whenever
//! something waits for Lua (a message in the inbox, a question from a
//! login's thread, an async request's time running out).
//!
//! An editor's loop (Neovim's `vim.loop`, luv) cannot block in our waits,
//! and it cannot run our threads' callbacks either: Lua may only be entered
//! from its own thread. So the loop watches one descriptor and, when it is
//! readable, calls `client:dispatch()` on its own thread. Behind that one
//! number are two sources: a bell, rung after something is queued for Lua
//! (by the inbox as our threads hand it messages, by a login's thread, by
//! the binding for what settled with no message), and a timer set to the
//! earliest async deadline. Each system builds them from what it has (see
//! [`Bell`]):
//!
//! - Linux: an epoll set holding an eventfd and a timerfd;
//! - macOS and FreeBSD: a kqueue with a user event and a timer event;
//! - anywhere else (the other BSDs among them), and on Linux with the
//!   `portable` feature (so that this logic is tested with a second kind
//!   of bell): a pipe, and a thread of its own that writes to it when the
//!   deadline passes;
//! - Windows: a pair of loopback sockets (what libuv can watch there),
//!   with the same thread for the deadline.
//!
//! The bell is made when someone first asks for the descriptor (`arm`):
//! a client nobody watches this way holds none of its descriptors (up to
//! three), which a host with hundreds of servers needs. Ringing costs a
//! system call, so it rings only once armed, and once per batch: a second
//! message queued before Lua looked finds it already rung. Every ring,
//! armed or not, is also announced to the process (`arrivals`), for a Lua
//! call that waits on several clients at once.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

#[cfg(all(target_os = "linux", not(feature = "portable")))]
#[path = "epoll.rs"]
mod bell;
#[cfg(any(target_os = "macos", target_os = "ios", target_os = "freebsd"))]
#[path = "kqueue.rs"]
mod bell;
#[cfg(all(
    unix,
    not(any(
        all(target_os = "linux", not(feature = "portable")),
        target_os = "macos",
        target_os = "ios",
        target_os = "freebsd"
    ))
))]
#[path = "pipe.rs"]
mod bell;
#[cfg(windows)]
#[path = "socket.rs"]
mod bell;
#[cfg(any(
    windows,
    not(any(
        all(target_os = "linux", not(feature = "portable")),
        target_os = "macos",
        target_os = "ios",
        target_os = "freebsd"
    ))
))]
mod deadline_thread;

/// What `client:fd()` returns: a descriptor on Unix, a socket on Windows.
#[cfg(unix)]
pub type Descriptor = std::os::fd::RawFd;
#[cfg(windows)]
pub type Descriptor = usize;

/// One readable descriptor with the two sources behind it. Each
/// implementation provides `new`, `fd`, `ring` (make it readable),
/// `clear` (unread it: both sources) and `set_timer` (readable after this
/// long, or never).
use bell::Bell;

#[derive(Debug, Default)]
pub struct Doorbell {
    /// Made by the first `arm`.
    bell: OnceLock<Bell>,
    /// Someone asked for the descriptor: ring from now on.
    armed: AtomicBool,
    /// Rung and not yet cleared: no need to write again.
    rung: AtomicBool,
}

impl Doorbell {
    pub fn new() -> Doorbell {
        Doorbell::default()
    }

    /// The descriptor to watch, made now if it was not; from now on the
    /// bell rings. Fails when the descriptors cannot be made (a limit).
    pub fn arm(&self) -> std::io::Result<Descriptor> {
        let fd = match self.bell.get() {
            Some(bell) => bell.fd(),
            None => {
                let bell = Bell::new()?;
                // Two threads arming at once: the first one's bell stays.
                let _ = self.bell.set(bell);
                self.made().fd()
            }
        };
        self.armed.store(true, Ordering::SeqCst);
        Ok(fd)
    }

    /// The bell, once armed.
    fn made(&self) -> &Bell {
        self.bell.get().expect("armed bells are made")
    }

    pub fn armed(&self) -> bool {
        self.armed.load(Ordering::Relaxed)
    }

    /// Something was queued for Lua. Called after the queueing, so that a
    /// loop woken by it finds what woke it.
    pub fn ring(&self) {
        // Heard by a wait on several clients, armed or not.
        super::arrivals::announce();
        let Some(bell) = self.bell.get().filter(|_| self.armed.load(Ordering::Relaxed)) else { return };
        if !self.rung.swap(true, Ordering::SeqCst) {
            bell.ring();
        }
    }

    /// Lua is about to look at everything queued: what arrives from here on
    /// rings again. Also clears an expired timer.
    pub fn clear(&self) {
        let Some(bell) = self.bell.get().filter(|_| self.armed.load(Ordering::Relaxed)) else { return };
        // Drained first: a reader that rings in between finds `rung` still
        // set and skips the ring, which is right, since Lua is about to
        // take its message. The other order could drain that ring after
        // `rung` was reset by it, and no ring would come again.
        bell.clear();
        self.rung.store(false, Ordering::SeqCst);
    }

    /// Makes the descriptor readable at `deadline` (the earliest time an
    /// async request runs out), or never for None.
    pub fn ring_at(&self, deadline: Option<Instant>) {
        let Some(bell) = self.bell.get().filter(|_| self.armed.load(Ordering::Relaxed)) else { return };
        // A deadline already past gets the smallest delay: a zero would
        // mean "never" to some timers.
        bell.set_timer(deadline.map(|d| d.saturating_duration_since(Instant::now()).max(Duration::from_nanos(1))));
    }

    /// Waits until one of `bells` (armed) is readable, for `within` at
    /// most.
    #[cfg(unix)]
    pub fn wait_any(bells: &[&Doorbell], within: Duration) {
        let mut fds: Vec<libc::pollfd> =
            bells.iter().map(|b| libc::pollfd { fd: b.made().fd(), events: libc::POLLIN, revents: 0 }).collect();
        let ms = within.as_millis().min(i32::MAX as u128) as libc::c_int;
        // SAFETY: `fds` is a live array of the length passed.
        unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, ms) };
    }

    /// Waits until one of `bells` (armed) is readable, for `within` at
    /// most.
    #[cfg(windows)]
    pub fn wait_any(bells: &[&Doorbell], within: Duration) {
        use windows_sys::Win32::Networking::WinSock::{WSAPoll, POLLRDNORM, WSAPOLLFD};
        let mut fds: Vec<WSAPOLLFD> =
            bells.iter().map(|b| WSAPOLLFD { fd: b.made().fd(), events: POLLRDNORM, revents: 0 }).collect();
        let ms = within.as_millis().min(i32::MAX as u128) as i32;
        // SAFETY: `fds` is a live array of the length passed.
        unsafe { WSAPoll(fds.as_mut_ptr(), fds.len() as u32, ms) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn readable(bell: &Doorbell) -> bool {
        let mut fd = libc::pollfd { fd: bell.made().fd(), events: libc::POLLIN, revents: 0 };
        // SAFETY: one live pollfd.
        unsafe { libc::poll(&mut fd, 1, 0) == 1 }
    }

    #[test]
    fn rings_only_once_armed_and_clears() {
        let bell = Doorbell::new();
        bell.ring();
        assert!(bell.bell.get().is_none(), "an unarmed bell holds no descriptor");
        bell.arm().unwrap();
        bell.clear();
        assert!(!readable(&bell), "what rang before the bell was armed rings nothing");
        bell.ring();
        bell.ring();
        assert!(readable(&bell));
        bell.clear();
        assert!(!readable(&bell));
    }

    #[test]
    fn a_deadline_makes_it_readable_when_it_passes() {
        let bell = Doorbell::new();
        bell.arm().unwrap();
        bell.ring_at(Some(Instant::now() + Duration::from_millis(30)));
        assert!(!readable(&bell));
        Doorbell::wait_any(&[&bell], Duration::from_secs(2));
        assert!(readable(&bell));
        bell.clear();
        bell.ring_at(None);
        assert!(!readable(&bell));
    }

    #[test]
    fn a_deadline_moved_later_or_dropped_does_not_ring_early() {
        let bell = Doorbell::new();
        bell.arm().unwrap();
        bell.ring_at(Some(Instant::now() + Duration::from_millis(20)));
        bell.ring_at(Some(Instant::now() + Duration::from_secs(30)));
        Doorbell::wait_any(&[&bell], Duration::from_millis(80));
        assert!(!readable(&bell), "the earlier deadline was replaced");
        bell.ring_at(Some(Instant::now() + Duration::from_millis(20)));
        bell.ring_at(None);
        Doorbell::wait_any(&[&bell], Duration::from_millis(80));
        assert!(!readable(&bell), "the deadline was dropped");
    }

    /// The `portable` feature must really swap the bell, or the suite's
    /// portable pass tests Linux's twice.
    #[cfg(target_os = "linux")]
    #[test]
    fn the_bell_is_the_one_the_build_chose() {
        let bell = Doorbell::new();
        let link = std::fs::read_link(format!("/proc/self/fd/{}", bell.arm().unwrap())).unwrap();
        let kind = link.to_string_lossy();
        if cfg!(feature = "portable") {
            assert!(kind.starts_with("pipe:"), "{kind}");
        } else {
            assert_eq!(kind, "anon_inode:[eventpoll]");
        }
    }

    #[test]
    fn a_deadline_already_past_rings_at_once() {
        let bell = Doorbell::new();
        bell.arm().unwrap();
        bell.ring_at(Some(Instant::now() - Duration::from_millis(5)));
        Doorbell::wait_any(&[&bell], Duration::from_secs(2));
        assert!(readable(&bell));
    }
}
