//! What the process's poll thread (`transport::poller`) does for one
//! stdio server: its stdout while no Lua call reads it (see
//! `reader::ReadSide`), its exit notice, its stderr until EOF, and its
//! stdin while bytes wait to be written. One chunk per pipe per round,
//! so that a server that floods its pipe cannot starve the rest.

use std::os::fd::AsRawFd;
use std::process::ChildStderr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use crate::transport::fds::{read_now, set_nonblocking, Chunk};
use crate::transport::inbox::Inbox;
use crate::transport::poller::{Round, Watched, FULL_INBOX_LOOK, READABLE, WRITABLE};

use super::super::stderr::PipeLog;
use super::exit_watch::EXIT_POLL_MS;
use super::reader::{ReadSide, Turn};
use super::stdin::StdinPipe;

const STDOUT: u32 = 0;
const EXIT: u32 = 1;
const STDERR: u32 = 2;
const STDIN: u32 = 3;

/// One server's pipes, as the thread serves them.
pub(super) struct Served {
    read_side: Arc<ReadSide>,
    stdin: Arc<StdinPipe>,
    inbox: Arc<Inbox>,
    stderr: ChildStderr,
    /// Until stderr's EOF.
    stderr_open: AtomicBool,
    log: Arc<Mutex<PipeLog>>,
    /// Its exit has no descriptor to watch: looked for after each round.
    looks_for_exit: AtomicBool,
}

impl Served {
    pub(super) fn new(
        read_side: Arc<ReadSide>,
        stdin: Arc<StdinPipe>,
        inbox: Arc<Inbox>,
        stderr: ChildStderr,
        log: Arc<Mutex<PipeLog>>,
    ) -> Served {
        set_nonblocking(stderr.as_raw_fd());
        let stderr_open = AtomicBool::new(true);
        Served { read_side, stdin, inbox, stderr, stderr_open, log, looks_for_exit: AtomicBool::new(false) }
    }

    /// Keeps what stderr holds now, until its EOF.
    fn read_stderr(&self, buf: &mut [u8]) {
        match read_now(self.stderr.as_raw_fd(), buf) {
            Chunk::Bytes(n) => self.log().keep_stderr(&buf[..n]),
            Chunk::Nothing => {}
            Chunk::End => {
                self.log().stderr_done = true;
                self.stderr_open.store(false, Ordering::SeqCst);
            }
        }
    }

    fn log(&self) -> MutexGuard<'_, PipeLog> {
        self.log.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Watched for Served {
    fn gather(&self, round: &mut Round) {
        // Full of what Lua has not taken: its stdout waits (and the
        // server's writes with it), looked at again a little later.
        let turn = if self.inbox.full() { Turn::LuaReads(FULL_INBOX_LOOK) } else { self.read_side.turn() };
        let mut looks_for_exit = false;
        match turn {
            Turn::Ours => {
                round.watch(self.read_side.fd(), READABLE, STDOUT);
                match self.read_side.exit_fd() {
                    Some(fd) => round.watch(fd, READABLE, EXIT),
                    None => {
                        looks_for_exit = true;
                        // Unless a waiter thread wakes this one at the exit,
                        // it looks now and then.
                        if !self.read_side.exit_wakes_the_poll_thread() {
                            round.wait_at_most(Duration::from_millis(EXIT_POLL_MS as u64));
                        }
                    }
                }
            }
            Turn::LuaReads(again) => round.wait_at_most(again),
            Turn::Over => {}
        }
        self.looks_for_exit.store(looks_for_exit, Ordering::Relaxed);
        if self.stderr_open.load(Ordering::SeqCst) {
            round.watch(self.stderr.as_raw_fd(), READABLE, STDERR);
        }
        if let Some(fd) = self.stdin.waiting_to_write() {
            round.watch(fd, WRITABLE, STDIN);
        }
    }

    fn ready(&self, tag: u32, buf: &mut [u8]) {
        match tag {
            STDOUT => self.read_side.read_for_lua(),
            EXIT => self.read_side.exited(),
            STDERR => self.read_stderr(buf),
            _ => self.stdin.flush(),
        }
    }

    fn after_round(&self) {
        if self.looks_for_exit.load(Ordering::Relaxed) && self.read_side.has_exited() {
            self.read_side.exited();
        }
    }
}
