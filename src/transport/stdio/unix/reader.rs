//! The reader of the server's stdout on Unix: each read split into lines
//! (`lines`) and sorted into the inbox, by the process's poll thread
//! (`transport::poller`) or by the Lua call that takes its place while it
//! waits for its own reply (see `ReadSide`); and that call's wait: a spin
//! as long as recent replies earned (`next_spin`), then poll(2) on the
//! pipe and the server's exit (`wait_readable`).

use std::os::fd::{AsRawFd, RawFd};
use std::process::ChildStdout;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use crate::interrupt;
use crate::transport::fds::{read_now, Chunk};
use crate::transport::inbox::Event;

use super::super::lines::{split_lines, Piece, Reader};
use super::exit_watch::{ExitWatch, EXIT_POLL_MS};

/// Where the line splitter is between two reads.
pub(super) struct Lines {
    buf: Vec<u8>,
    line: Vec<u8>,
    oversized: bool,
    /// The child exited: what is still in the pipe is read (up to
    /// [`DRAIN_AFTER_EXIT`]), then the stream is over.
    drained_after_exit: Option<usize>,
    /// `Event::Ended` was queued: nothing more will be read.
    finished: bool,
}

/// What one pass over the pipe found.
pub(super) enum Step {
    Read,
    Nothing,
    Finished,
}

/// The server's stdout, read by whoever is waiting for it.
///
/// WHY THE WAITING THREAD READS
///
/// A reply read by another thread reaches Lua through a hand-off, which
/// costs a thread wake-up: ~3 us on the same CPU, 20-150 us on the other
/// one on this kind of VM, as much as the pipe round trip itself. So while
/// a Lua call waits for a reply, the Lua thread reads the pipe itself and
/// the poll thread leaves it alone (a leader/follower scheme: one line
/// splitter, one queue, and whoever holds the reading role reads). The
/// thread takes over again once no call has waited for [`LINGER`], so a
/// server's ping is still answered within that while Lua is busy
/// elsewhere, and notifications still queue up for the next call.
pub(super) struct ReadSide {
    reader: Reader,
    stdout: ChildStdout,
    exit: Arc<ExitWatch>,
    lines: Mutex<Lines>,
    /// A Lua call is reading; the thread must not.
    lua_reading: AtomicBool,
    /// When the last Lua call stopped reading, in ns since `epoch`.
    released_ns: AtomicU64,
    epoch: Instant,
    /// `Event::Ended` was queued (`Lines::finished`, readable unlocked).
    over: AtomicBool,
}

/// Whose turn it is to read stdout, as the poll thread sees it.
pub(super) enum Turn {
    /// The thread's: poll it, and the exit.
    Ours,
    /// A Lua call reads it, or did a moment ago: look again after this.
    LuaReads(Duration),
    /// The stream is over.
    Over,
}

/// How long the poll thread leaves the pipe to Lua after a call: calls
/// in a burst then never wake it.
pub(super) const LINGER: Duration = Duration::from_millis(2);

/// How often the thread looks whether calls have stopped reading.
pub(super) const STANDBY: Duration = Duration::from_millis(20);

/// The longest a waiting call spins (reading, yielding the CPU) before it
/// sleeps, when replies have been coming that fast; slower servers get no
/// spin at all.
pub(super) const MAX_SPIN: Duration = Duration::from_micros(100);

/// What is still read from stdout after the server exited: what it wrote
/// last, not a stream a leftover helper keeps pouring.
pub(super) const DRAIN_AFTER_EXIT: usize = 4 << 20;

/// The spin for the next wait, from how long this one took to get a
/// message: replies within microseconds earn a spin of about twice that
/// (so the next one is caught awake), anything slower none.
pub(super) fn next_spin(spin: Duration, took: Duration) -> Duration {
    if took > MAX_SPIN {
        return Duration::ZERO;
    }
    // Eased towards the new figure, so one quick reply after slow ones
    // does not start a spin at once, nor one slow reply end it.
    let target = (took * 2 + Duration::from_micros(5)).min(MAX_SPIN);
    (spin * 3 + target) / 4
}

impl ReadSide {
    pub(super) fn new(reader: Reader, stdout: ChildStdout, exit: Arc<ExitWatch>) -> ReadSide {
        let lines = Lines {
            buf: vec![0u8; 64 * 1024],
            line: Vec::new(),
            oversized: false,
            drained_after_exit: None,
            finished: false,
        };
        ReadSide {
            reader,
            stdout,
            exit,
            lines: Mutex::new(lines),
            lua_reading: AtomicBool::new(false),
            released_ns: AtomicU64::new(0),
            epoch: Instant::now(),
            over: AtomicBool::new(false),
        }
    }

    pub(super) fn fd(&self) -> RawFd {
        self.stdout.as_raw_fd()
    }

    /// The descriptor readable at the server's exit; None: look with
    /// [`Self::has_exited`].
    pub(super) fn exit_fd(&self) -> Option<RawFd> {
        self.exit.fd()
    }

    pub(super) fn exit_wakes_the_poll_thread(&self) -> bool {
        self.exit.wakes_the_poll_thread()
    }

    pub(super) fn has_exited(&self) -> bool {
        self.exit.exited()
    }

    pub(super) fn lock_lines(&self) -> std::sync::MutexGuard<'_, Lines> {
        self.lines.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Reads what the pipe holds now, splitting and handling lines; queues
    /// `Event::Ended` when the stream is over. With `one_chunk`, stops after
    /// one read: a Lua call takes what it read before it reads more, so a
    /// server that keeps the pipe full cannot keep it here.
    pub(super) fn read_available(&self, lines: &mut Lines, one_chunk: bool) -> Step {
        if lines.finished {
            return Step::Finished;
        }
        let mut any = false;
        loop {
            let n = match read_now(self.fd(), &mut lines.buf) {
                Chunk::Bytes(n) => n,
                Chunk::End => break,
                // Nothing there now: after an exit, that is the end of what
                // the server wrote.
                Chunk::Nothing if lines.drained_after_exit.is_some() => break,
                Chunk::Nothing => return if any { Step::Read } else { Step::Nothing },
            };
            any = true;
            if let Some(drained) = lines.drained_after_exit.as_mut() {
                *drained += n;
                if *drained > DRAIN_AFTER_EXIT {
                    break;
                }
            }
            self.split(lines, n);
            if one_chunk && lines.drained_after_exit.is_none() {
                return Step::Read;
            }
        }
        if !lines.line.is_empty() && !lines.oversized {
            let line = std::mem::take(&mut lines.line);
            self.reader.handle_line(&line);
        }
        lines.finished = true;
        self.over.store(true, Ordering::SeqCst);
        self.reader.inbox.push(Event::Ended, 0);
        Step::Finished
    }

    pub(super) fn split(&self, lines: &mut Lines, n: usize) {
        let Lines { buf, line, oversized, .. } = lines;
        split_lines(&buf[..n], line, oversized, self.reader.limit, |piece| match piece {
            Piece::Line(text) => self.reader.handle_line(text),
            Piece::TooLarge => self.reader.inbox.push(Event::TooLarge(None), 0),
        });
    }

    /// The child is gone: drain what it left, then end the stream.
    pub(super) fn exited(&self) {
        let mut lines = self.lock_lines();
        lines.drained_after_exit.get_or_insert(0);
        self.read_available(&mut lines, false);
    }

    pub(super) fn since_release(&self) -> Duration {
        let released = Duration::from_nanos(self.released_ns.load(Ordering::SeqCst));
        self.epoch.elapsed().saturating_sub(released)
    }

    /// Whether the poll thread should poll stdout now.
    pub(super) fn turn(&self) -> Turn {
        if self.over.load(Ordering::SeqCst) {
            return Turn::Over;
        }
        // While a call reads, a look now and then costs nothing; after it,
        // the thread is back within LINGER.
        if self.lua_reading.load(Ordering::SeqCst) {
            return Turn::LuaReads(STANDBY);
        }
        match self.since_release() {
            since if since >= LINGER => Turn::Ours,
            since => Turn::LuaReads(LINGER - since),
        }
    }

    /// The poll thread found stdout readable: one chunk is read, unless a
    /// Lua call has begun reading meanwhile (checked under the lock: see
    /// `wait_as_reader`).
    pub(super) fn read_for_lua(&self) {
        let mut lines = self.lock_lines();
        if !self.lua_reading.load(Ordering::SeqCst) {
            self.read_available(&mut lines, true);
        }
    }

    /// A Lua call waits for what the server sends, until `deadline`: it
    /// reads the pipe itself (see the type's comment), spinning up to
    /// `spin` before it sleeps. Returns what came (None at the deadline)
    /// and how long it waited for it (zero when it was there at once).
    pub(super) fn wait_as_reader(&self, deadline: Instant, spin: Duration) -> (Option<Event>, Duration) {
        self.lua_reading.store(true, Ordering::SeqCst);
        // The clock is read once something has to wait, and once at the
        // end: a reply already there (the usual case on one CPU, where the
        // server ran as soon as the request woke it) costs one read, not
        // four (~30 ns each here, a call made ten).
        let mut started = None;
        let event = loop {
            if let Some(event) = self.reader.inbox.try_pop() {
                break Some(event);
            }
            // Under the lock: a read the thread began before we took the
            // role is finished (and queued) before we look.
            match self.read_available(&mut self.lock_lines(), true) {
                Step::Read => continue,
                // Its `Ended` is queued, or was taken by an earlier call.
                Step::Finished => break self.reader.inbox.try_pop(),
                Step::Nothing => {}
            }
            // The thread may have queued something just before we took the
            // lines (it read under the lock before it saw our flag).
            if let Some(event) = self.reader.inbox.try_pop() {
                break Some(event);
            }
            let now = Instant::now();
            let started = *started.get_or_insert(now);
            if now >= deadline {
                break None;
            }
            if now - started < spin {
                // Lets a server on this CPU run; costs nothing otherwise.
                thread::yield_now();
                continue;
            }
            let within = deadline.min(now + interrupt::SLICE) - now;
            match wait_readable(self.fd(), Some(&self.exit), Some(within)) {
                Readiness::Data => {}
                Readiness::Idle => {
                    if interrupt::requested() || Instant::now() >= deadline {
                        break self.reader.inbox.try_pop();
                    }
                }
                Readiness::Exited | Readiness::Failed => self.exited(),
            }
        };
        let ended = Instant::now();
        self.released_ns.store((ended - self.epoch).as_nanos() as u64, Ordering::SeqCst);
        self.lua_reading.store(false, Ordering::SeqCst);
        (event, started.map_or(Duration::ZERO, |started| ended - started))
    }
}

/// What woke a reader.
pub(super) enum Readiness {
    Data,
    Exited,
    /// The time given passed with nothing to read.
    Idle,
    /// poll(2) itself failed: nothing more can be read.
    Failed,
}

/// Waits until `fd` has data (or EOF), the child exits, or `within`
/// passes (None: no limit).
pub(super) fn wait_readable(fd: RawFd, exit: Option<&ExitWatch>, within: Option<Duration>) -> Readiness {
    let deadline = within.map(|w| Instant::now() + w);
    loop {
        let mut fds = [
            libc::pollfd { fd, events: libc::POLLIN, revents: 0 },
            libc::pollfd { fd: -1, events: libc::POLLIN, revents: 0 },
        ];
        let left = deadline.map(|d| d.saturating_duration_since(Instant::now()));
        // Whole milliseconds, rounded up: a 0 would spin.
        let mut timeout = left.map_or(-1, |l| l.as_micros().div_ceil(1000).min(i32::MAX as u128) as libc::c_int);
        let mut polls_exit = false;
        if let Some(exit) = exit {
            match exit.fd() {
                Some(notice) => fds[1].fd = notice,
                None if !(0..=EXIT_POLL_MS).contains(&timeout) => {
                    timeout = EXIT_POLL_MS;
                    polls_exit = true;
                }
                None => polls_exit = true,
            }
        }
        // SAFETY: poll on two pollfds on the stack; a negative fd is
        // ignored by the kernel.
        let n = unsafe { libc::poll(fds.as_mut_ptr(), 2, timeout) };
        if n < 0 && std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
            return Readiness::Failed;
        }
        if fds[0].revents != 0 {
            return Readiness::Data;
        }
        if fds[1].revents != 0 || (polls_exit && exit.is_some_and(ExitWatch::exited)) {
            return Readiness::Exited;
        }
        if deadline.is_some_and(|d| Instant::now() >= d) {
            return Readiness::Idle;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::{next_spin, MAX_SPIN};

    #[test]
    fn a_slow_reply_ends_the_spin() {
        assert_eq!(next_spin(MAX_SPIN, MAX_SPIN + Duration::from_micros(1)), Duration::ZERO);
    }

    #[test]
    fn one_quick_reply_after_slow_ones_starts_only_a_short_spin() {
        let spin = next_spin(Duration::ZERO, Duration::from_micros(10));
        assert!(spin > Duration::ZERO && spin < Duration::from_micros(10), "{spin:?}");
    }

    #[test]
    fn quick_replies_earn_a_spin_of_about_twice_their_time() {
        let mut spin = Duration::ZERO;
        for _ in 0..50 {
            spin = next_spin(spin, Duration::from_micros(10));
        }
        // Twice 10 us, and 5 us to spare, approached from below.
        let target = Duration::from_micros(25);
        assert!(spin <= target && spin > target - Duration::from_micros(1), "{spin:?}");
    }

    #[test]
    fn the_spin_never_passes_its_cap() {
        let mut spin = Duration::ZERO;
        for _ in 0..100 {
            spin = next_spin(spin, MAX_SPIN);
            assert!(spin <= MAX_SPIN, "{spin:?}");
        }
        assert!(spin > MAX_SPIN / 2, "{spin:?}");
    }
}
