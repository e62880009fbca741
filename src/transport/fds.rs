//! Descriptor chores every Unix does a little differently: pipes made
//! close-on-exec and non-blocking, reads that never wait, and writes to a
//! pipe whose reader may be gone that must never raise SIGPIPE in the
//! host; and what to tell a user whose process ran out of descriptors,
//! the limit a host with many servers meets first.

use std::os::fd::{AsRawFd, OwnedFd, RawFd};

/// Takes ownership of a descriptor a system call just returned (or of
/// its error, for -1).
pub fn owned(fd: RawFd) -> std::io::Result<OwnedFd> {
    if fd < 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: a descriptor just returned by the kernel, owned by no one else.
    Ok(unsafe { std::os::fd::FromRawFd::from_raw_fd(fd) })
}

/// Only our end becomes non-blocking; a child's end of a pipe is its own.
pub fn set_nonblocking(fd: RawFd) {
    // SAFETY: fcntl on a descriptor the caller owns.
    unsafe {
        let flags = libc::fcntl(fd, libc::F_GETFL);
        libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK);
    }
}

/// A pipe for our own threads, both ends non-blocking. std makes it
/// close-on-exec: atomically with pipe2 where the system has it (Linux,
/// the BSDs); on macOS, which has no pipe2, right after creating it, so a
/// fork in another thread at that instant could carry it into a child.
/// On macOS the writer's end also refuses SIGPIPE (see [`refuse_sigpipe`]).
pub fn nonblocking_pipe() -> std::io::Result<(OwnedFd, OwnedFd)> {
    let (read, write) = std::io::pipe()?;
    let (read, write) = (OwnedFd::from(read), OwnedFd::from(write));
    set_nonblocking(read.as_raw_fd());
    set_nonblocking(write.as_raw_fd());
    refuse_sigpipe(write.as_raw_fd());
    Ok((read, write))
}

/// Asks the system not to raise SIGPIPE for writes on `fd` at all, where
/// it can (macOS's F_SETNOSIGPIPE, for a pipe or a socket). Elsewhere the
/// writes themselves take care: see [`write_without_sigpipe`] (std's own
/// socket writes pass MSG_NOSIGNAL there).
#[cfg(any(target_os = "macos", target_os = "ios"))]
pub fn refuse_sigpipe(fd: RawFd) {
    // SAFETY: fcntl on a descriptor the caller owns.
    unsafe { libc::fcntl(fd, libc::F_SETNOSIGPIPE, 1) };
}

#[cfg(not(any(target_os = "macos", target_os = "ios")))]
pub fn refuse_sigpipe(_fd: RawFd) {}

/// Writes as much of `bytes` as the non-blocking `fd` takes now (0 when it
/// is full). SIGPIPE is blocked in this thread for the duration, and one
/// the write raised is taken back before it is unblocked: the host's
/// default action for it is to die. Linux and FreeBSD send a write's
/// SIGPIPE to the writing thread, so blocking it here is enough; macOS
/// sends it to the process, hence [`refuse_sigpipe`] on its descriptors.
pub fn write_without_sigpipe(fd: RawFd, bytes: &[u8]) -> std::io::Result<usize> {
    // SAFETY: signal-mask calls on local sets, for this thread only, and
    // write(2) from a live slice.
    unsafe {
        let mut sigpipe: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut sigpipe);
        libc::sigaddset(&mut sigpipe, libc::SIGPIPE);
        let mut old: libc::sigset_t = std::mem::zeroed();
        libc::pthread_sigmask(libc::SIG_BLOCK, &sigpipe, &mut old);
        let outcome = write_some(fd, bytes);
        // A SIGPIPE pending before we blocked it (the caller had it
        // blocked) is the caller's to take, not ours.
        if matches!(&outcome, Err(e) if e.raw_os_error() == Some(libc::EPIPE))
            && libc::sigismember(&old, libc::SIGPIPE) == 0
        {
            take_pending(&sigpipe);
        }
        libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut());
        outcome
    }
}

fn write_some(fd: RawFd, bytes: &[u8]) -> std::io::Result<usize> {
    let mut written = 0;
    while written < bytes.len() {
        let rest = &bytes[written..];
        // SAFETY: write(2) from a live slice of the length passed.
        let n = unsafe { libc::write(fd, rest.as_ptr().cast(), rest.len()) };
        if n >= 0 {
            written += n as usize;
            continue;
        }
        let err = std::io::Error::last_os_error();
        match err.kind() {
            std::io::ErrorKind::Interrupted => continue,
            std::io::ErrorKind::WouldBlock => break,
            _ => return Err(err),
        }
    }
    Ok(written)
}

/// Takes a pending SIGPIPE, if there is one, without waiting.
///
/// # Safety
/// `sigpipe` is a set holding SIGPIPE, blocked on this thread.
#[cfg(any(target_os = "linux", target_os = "freebsd"))]
unsafe fn take_pending(sigpipe: &libc::sigset_t) {
    let zero = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    libc::sigtimedwait(sigpipe, std::ptr::null_mut(), &zero);
}

/// Where there is no sigtimedwait (macOS): sigwait returns at once for a
/// pending signal, and is only called for one. Another thread could take
/// a process-wide SIGPIPE in between and leave sigwait waiting, but on
/// macOS our descriptors refuse SIGPIPE, so none is raised to take.
///
/// # Safety
/// As the other `take_pending`.
#[cfg(not(any(target_os = "linux", target_os = "freebsd")))]
unsafe fn take_pending(sigpipe: &libc::sigset_t) {
    let mut pending: libc::sigset_t = std::mem::zeroed();
    if libc::sigpending(&mut pending) == 0 && libc::sigismember(&pending, libc::SIGPIPE) == 1 {
        let mut taken: libc::c_int = 0;
        libc::sigwait(sigpipe, &mut taken);
    }
}

/// What to tell a user when making a descriptor failed because a limit
/// was reached, or None for any other failure. A host that connects many
/// servers meets the per-process limit first (the soft `ulimit -n`, 1024
/// on most systems), and "Too many open files" alone names neither the
/// limit nor the way out.
pub fn limit_reached(err: &std::io::Error) -> Option<String> {
    match err.raw_os_error() {
        Some(libc::EMFILE) => {
            let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
            // SAFETY: getrlimit writes the struct it is given, nothing else.
            let known = unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } == 0;
            let now = match (known, limit.rlim_max == libc::RLIM_INFINITY) {
                (false, _) => "unknown".into(),
                (true, true) => format!("{} now, no hard limit", limit.rlim_cur),
                (true, false) => format!("{} now, {} at most", limit.rlim_cur, limit.rlim_max),
            };
            Some(format!(
                "this process has reached its limit of open descriptors ({now}; each stdio client holds 4, and 3 more once \
                 its client:fd() is asked for): raise it (ulimit -n before starting, or setrlimit RLIMIT_NOFILE) or close clients no longer used"
            ))
        }
        // fork(2) and pthread_create(3) say EAGAIN at a limit of processes
        // or threads, per user (RLIMIT_NPROC) or for the system.
        Some(libc::EAGAIN) => Some(
            "this user or the system has reached its limit of processes and threads (ulimit -u, RLIMIT_NPROC; \
             kernel.threads-max and kernel.pid_max on Linux): raise it, or close clients no longer used"
                .into(),
        ),
        Some(libc::ENFILE) => Some(
            "the system has reached its limit of open files (fs.file-max on Linux, kern.maxfiles on the BSDs \
             and macOS): raise it, or close clients no longer used"
                .into(),
        ),
        _ => None,
    }
}

/// What a read without blocking found.
pub enum Chunk {
    Bytes(usize),
    /// Nothing there right now.
    Nothing,
    /// EOF, or the pipe failed: either way nothing more will come.
    End,
}

pub fn read_now(fd: RawFd, buf: &mut [u8]) -> Chunk {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_write_to_a_pipe_nobody_reads_fails_without_killing_the_process() {
        let (read, write) = nonblocking_pipe().unwrap();
        drop(read);
        let err = write_without_sigpipe(write.as_raw_fd(), b"hello").unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::EPIPE));
        // The signal was taken back: nothing is left pending for the thread.
        // SAFETY: an all-zero sigset_t is valid, and sigpending fills it.
        unsafe {
            let mut pending: libc::sigset_t = std::mem::zeroed();
            libc::sigpending(&mut pending);
            assert_eq!(libc::sigismember(&pending, libc::SIGPIPE), 0);
        }
    }

    #[test]
    fn a_full_pipe_takes_what_fits() {
        let (_read, write) = nonblocking_pipe().unwrap();
        let big = vec![b'x'; 1 << 20];
        let n = write_without_sigpipe(write.as_raw_fd(), &big).unwrap();
        assert!(n > 0 && n < big.len());
        assert_eq!(write_without_sigpipe(write.as_raw_fd(), b"more").unwrap(), 0);
    }

    #[test]
    fn pipes_are_close_on_exec() {
        let (read, write) = nonblocking_pipe().unwrap();
        for fd in [read.as_raw_fd(), write.as_raw_fd()] {
            // SAFETY: F_GETFD reads the flags of a descriptor we hold.
            let flags = unsafe { libc::fcntl(fd, libc::F_GETFD) };
            assert_ne!(flags & libc::FD_CLOEXEC, 0);
        }
    }
}
