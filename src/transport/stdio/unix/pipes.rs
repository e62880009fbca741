//! The server's three pipes, handed to the process's poll thread
//! (`transport::poller`) and taken back at the shutdown: stdin (`stdin`),
//! which Lua writes straight to and the thread finishes writing when it
//! was full; stdout, read by that thread or by the Lua call that takes
//! its place (`reader`); stderr, drained by the thread into the log
//! (`stderr`). What the thread does with each is `served`. See the
//! module's header.

use std::io;
use std::os::fd::AsRawFd;
use std::process::ChildStdin;
use std::sync::{Arc, Mutex};

use crate::transport::fds::set_nonblocking;
use crate::transport::inbox::Inbox;
use crate::transport::poller::{self, Watched};

use super::super::lines::Reader;
use super::super::stderr::PipeLog;
use super::super::Options;
use super::exit_watch::ExitWatch;
use super::reader::ReadSide;
use super::served::Served;
use super::stdin::StdinPipe;

/// What the transport keeps of the pipes while the poll thread serves
/// them.
pub(super) struct Pipes {
    pub(super) stdin: Arc<StdinPipe>,
    pub(super) inbox: Arc<Inbox>,
    pub(super) log: Arc<Mutex<PipeLog>>,
    pub(super) read_side: Arc<ReadSide>,
    served: Arc<dyn Watched>,
}

/// Hands the server's pipes to the poll thread (already running: see
/// [`poller::start`]).
pub(super) fn start(
    stdin: ChildStdin,
    stdout: std::process::ChildStdout,
    stderr: std::process::ChildStderr,
    exit: Arc<ExitWatch>,
    options: &Options,
) -> io::Result<Pipes> {
    let log = Arc::new(Mutex::new(PipeLog::default()));
    let pipe = Arc::new(StdinPipe::new(stdin));
    // The poll thread serves every server: it must never wait for room.
    let inbox = Arc::new(Inbox::new(options.doorbell.clone()).never_waiting_for_room());
    set_nonblocking(stdout.as_raw_fd());
    let reader = Reader::new(options, inbox.clone(), pipe.clone(), log.clone());
    let read_side = Arc::new(ReadSide::new(reader, stdout, exit));
    let served: Arc<dyn Watched> =
        Arc::new(Served::new(read_side.clone(), pipe.clone(), inbox.clone(), stderr, log.clone()));
    poller::register(served.clone())?;
    Ok(Pipes { stdin: pipe, inbox, log, read_side, served })
}

impl Pipes {
    /// Stops serving the pipes; once this returns the poll thread holds
    /// none of them, so they close with the transport.
    pub(super) fn stop(&self) {
        self.stdin.abandon();
        self.inbox.close();
        poller::forget(&self.served);
    }
}
