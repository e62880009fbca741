//! Noticing the server's exit, however it dies, and reading how it ended,
//! both without reaping it: its pid and process group must stay reserved
//! until we have stopped the rest of the group (see `child::stop_group`).
//!
//! The reader polls one descriptor that becomes readable at the exit:
//! - Linux (5.3 and later): a pidfd;
//! - macOS and FreeBSD: a kqueue watching the process (EVFILT_PROC,
//!   NOTE_EXIT), readable once it exits;
//! - everywhere else, on Linux with the `portable` feature or without
//!   pidfd, and should the above fail: a small thread blocked in `waitid`
//!   with WNOWAIT (which waits without reaping) marks the exit and wakes
//!   the poll thread. It ends when the server does, which `stop_group`
//!   makes sure of before reaping it. That costs the server a thread but
//!   no descriptor (a pipe of its own made it 5 a server, over the 4 a
//!   host can count on); a Lua call waiting on the server looks at the
//!   mark between its 50 ms slices.
//! - should even that thread not start, the reader looks every
//!   [`EXIT_POLL_MS`] instead.

#[cfg(any(
    all(target_os = "linux", not(feature = "portable")),
    target_os = "macos",
    target_os = "ios",
    target_os = "freebsd"
))]
use std::os::fd::AsRawFd;
#[cfg(all(target_os = "linux", not(feature = "portable")))]
use std::os::fd::OwnedFd;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::Duration;

use crate::transport::poller;

pub(super) const EXIT_POLL_MS: libc::c_int = 100;

pub(super) struct ExitWatch {
    pid: libc::pid_t,
    /// Readable once the process has exited.
    notice: Option<Notice>,
    /// Set by the waiter thread at the exit, where there is no notice.
    ended: Arc<AtomicBool>,
    /// The waiter thread, where there is no notice.
    waiter: Mutex<Option<JoinHandle<()>>>,
    has_waiter: bool,
}

impl ExitWatch {
    pub(super) fn new(pid: libc::pid_t) -> ExitWatch {
        let ended = Arc::new(AtomicBool::new(false));
        let (notice, waiter) = match exit_descriptor(pid) {
            Some(notice) => (Some(notice), None),
            None => (None, waiter_thread(pid, ended.clone()).ok()),
        };
        let has_waiter = waiter.is_some();
        ExitWatch { pid, notice, ended, waiter: Mutex::new(waiter), has_waiter }
    }

    /// The descriptor to poll for the exit; None: look at [`Self::exited`].
    pub(super) fn fd(&self) -> Option<RawFd> {
        self.notice.as_ref().map(Notice::fd)
    }

    /// Whether the poll thread is woken at the exit, with no descriptor
    /// to poll: it then looks at [`Self::exited`] after each round, and
    /// needs no rounds of its own for it.
    pub(super) fn wakes_the_poll_thread(&self) -> bool {
        self.has_waiter
    }

    pub(super) fn exited(&self) -> bool {
        if self.has_waiter {
            return self.ended.load(Ordering::SeqCst);
        }
        exit_status_without_reaping(self.pid).is_some()
    }

    /// Waits for the waiter thread, once the server has been made to exit
    /// and before it is reaped: reaped first, its pid could go to another
    /// child of ours before the thread's `waitid` named it.
    pub(super) fn finish(&self) {
        if let Some(waiter) = self.waiter.lock().unwrap_or_else(|p| p.into_inner()).take() {
            let _ = waiter.join();
        }
    }
}

/// How the child ended.
#[derive(Clone, Copy)]
pub(super) enum ChildEnd {
    Exited(i32),
    Killed(i32),
}

/// The child's end if it has ended, read without reaping it (WNOWAIT), so
/// its pid and group stay reserved until we have signalled the rest of the
/// group. A child already reaped reads as ended.
pub(super) fn exit_status_without_reaping(pid: libc::pid_t) -> Option<ChildEnd> {
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
        // A stop or a continue is no end: macOS's waitid reports those
        // even when asked for exits only.
        match info.si_code {
            libc::CLD_EXITED => Some(ChildEnd::Exited(info.si_status())),
            libc::CLD_KILLED | libc::CLD_DUMPED => Some(ChildEnd::Killed(info.si_status())),
            _ => None,
        }
    }
}

/// What becomes readable at the exit.
enum Notice {
    /// Linux's pidfd.
    #[cfg(all(target_os = "linux", not(feature = "portable")))]
    Pidfd(OwnedFd),
    /// A kqueue watching the process. Fork does not copy a kqueue, so in a
    /// child the number may name another file by now: only its maker
    /// closes it.
    #[cfg(any(target_os = "macos", target_os = "ios", target_os = "freebsd"))]
    Queue { fd: RawFd, owner: libc::pid_t },
}

impl Notice {
    fn fd(&self) -> RawFd {
        match *self {
            #[cfg(all(target_os = "linux", not(feature = "portable")))]
            Notice::Pidfd(ref fd) => fd.as_raw_fd(),
            #[cfg(any(target_os = "macos", target_os = "ios", target_os = "freebsd"))]
            Notice::Queue { fd, .. } => fd,
        }
    }
}

#[cfg(any(target_os = "macos", target_os = "ios", target_os = "freebsd"))]
impl Drop for Notice {
    fn drop(&mut self) {
        let Notice::Queue { fd, owner } = *self;
        // SAFETY: getpid(2) has no preconditions.
        if owner == unsafe { libc::getpid() } {
            // SAFETY: the queue was made by this process and is closed
            // once, here.
            unsafe { libc::close(fd) };
        }
    }
}

/// The exit's own descriptor, where the system has one: a pidfd.
#[cfg(all(target_os = "linux", not(feature = "portable")))]
fn exit_descriptor(pid: libc::pid_t) -> Option<Notice> {
    use std::os::fd::FromRawFd;
    // SAFETY: pidfd_open takes a pid and flags and returns a new
    // descriptor or -1; we own the descriptor it returns.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    // SAFETY: a descriptor pidfd_open just returned, owned by nobody else.
    (fd >= 0).then(|| Notice::Pidfd(unsafe { OwnedFd::from_raw_fd(fd as RawFd) }))
}

/// The exit's own descriptor, where the system has one: a kqueue with
/// the process's exit as its one event. A process that exited already is
/// refused (ESRCH): the waiter thread then sees the exit at once.
#[cfg(any(target_os = "macos", target_os = "ios", target_os = "freebsd"))]
fn exit_descriptor(pid: libc::pid_t) -> Option<Notice> {
    use std::os::fd::IntoRawFd;
    // SAFETY: kqueue(2) returns a new descriptor or -1.
    let queue = crate::transport::fds::owned(unsafe { libc::kqueue() }).ok()?;
    // SAFETY: an all-zero kevent is valid (FreeBSD's has reserved fields
    // macOS's lacks, hence zeroed() rather than a literal).
    let mut event: libc::kevent = unsafe { std::mem::zeroed() };
    event.ident = pid as _;
    event.filter = libc::EVFILT_PROC as _;
    event.flags = (libc::EV_ADD | libc::EV_ONESHOT) as _;
    event.fflags = libc::NOTE_EXIT as _;
    // SAFETY: one live change and no event list, on our own queue.
    let added = unsafe { libc::kevent(queue.as_raw_fd(), &event, 1, std::ptr::null_mut(), 0, std::ptr::null()) };
    // SAFETY: getpid(2) has no preconditions.
    let owner = unsafe { libc::getpid() };
    (added == 0).then(|| Notice::Queue { fd: queue.into_raw_fd(), owner })
}

#[cfg(not(any(
    all(target_os = "linux", not(feature = "portable")),
    target_os = "macos",
    target_os = "ios",
    target_os = "freebsd"
)))]
fn exit_descriptor(_pid: libc::pid_t) -> Option<Notice> {
    None
}

fn waiter_thread(pid: libc::pid_t, ended: Arc<AtomicBool>) -> std::io::Result<JoinHandle<()>> {
    thread::Builder::new().name("mcp-exit-watch".into()).stack_size(64 * 1024).spawn(move || {
        block_until_ended(pid);
        ended.store(true, Ordering::SeqCst);
        poller::wake();
    })
}

/// Returns once `pid` has ended (or is no child of ours any more).
fn block_until_ended(pid: libc::pid_t) {
    loop {
        // SAFETY: waitid writes only into the siginfo we pass.
        let rc = unsafe {
            let mut info: libc::siginfo_t = std::mem::zeroed();
            libc::waitid(libc::P_PID, pid as libc::id_t, &mut info, libc::WEXITED | libc::WNOWAIT)
        };
        if rc != 0 && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
            continue;
        }
        // macOS's waitid also returns for a stopped child (its WEXITED is
        // not honoured alone): look at what it is, and while it is only
        // stopped, look again a little later rather than spin.
        if rc != 0 || exit_status_without_reaping(pid).is_some() {
            return;
        }
        thread::sleep(Duration::from_millis(50));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;
    use std::time::Instant;

    /// Whether `ended` is set within `within_ms`.
    fn set_within(ended: &AtomicBool, within_ms: u64) -> bool {
        let deadline = Instant::now() + Duration::from_millis(within_ms);
        while !ended.load(Ordering::SeqCst) {
            if Instant::now() >= deadline {
                return false;
            }
            thread::sleep(Duration::from_millis(5));
        }
        true
    }

    #[test]
    fn the_waiter_thread_notices_an_exit_without_reaping() {
        let mut child = Command::new("sh").arg("-c").arg("sleep 0.1; exit 3").spawn().unwrap();
        let pid = child.id() as libc::pid_t;
        let ended = Arc::new(AtomicBool::new(false));
        let waiter = waiter_thread(pid, ended.clone()).unwrap();
        assert!(!ended.load(Ordering::SeqCst));
        let started = Instant::now();
        assert!(set_within(&ended, 5000));
        assert!(started.elapsed() < Duration::from_secs(4));
        waiter.join().unwrap();
        // Not reaped: the status is still ours to read.
        assert_eq!(child.wait().unwrap().code(), Some(3));
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn the_watch_is_the_one_the_build_chose() {
        let mut child = Command::new("sleep").arg("30").spawn().unwrap();
        let watch = ExitWatch::new(child.id() as libc::pid_t);
        let kind = watch.fd().map(|fd| std::fs::read_link(format!("/proc/self/fd/{fd}")).unwrap());
        let kind = kind.map(|link| link.to_string_lossy().into_owned());
        let woken = watch.wakes_the_poll_thread();
        child.kill().unwrap();
        watch.finish();
        child.wait().unwrap();
        if cfg!(all(target_os = "linux", not(feature = "portable"))) {
            assert_eq!(kind.as_deref(), Some("anon_inode:[pidfd]"));
            assert!(!woken);
        } else {
            assert_eq!(kind, None, "the waiter thread needs no descriptor");
            assert!(woken);
        }
    }

    #[test]
    fn the_waiter_thread_waits_out_a_stop() {
        let mut child = Command::new("sleep").arg("30").spawn().unwrap();
        let pid = child.id() as libc::pid_t;
        let ended = Arc::new(AtomicBool::new(false));
        let waiter = waiter_thread(pid, ended.clone()).unwrap();
        // SAFETY: kill has no memory preconditions; the pid is our child's.
        unsafe { libc::kill(pid, libc::SIGSTOP) };
        assert!(!set_within(&ended, 200), "a stopped child has not exited");
        // SAFETY: as above.
        unsafe { libc::kill(pid, libc::SIGKILL) };
        assert!(set_within(&ended, 5000));
        waiter.join().unwrap();
        child.wait().unwrap();
    }
}
