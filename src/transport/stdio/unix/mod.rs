//! stdio on Unix: the server's process group (`child`), its exit noticed
//! without reaping it (`exit_watch`), and its three pipes handed to the
//! process's poll thread (`pipes`), which serves them (`served`) while no
//! Lua call waits: stdin written at once or queued (`stdin`), stdout read
//! by the thread or by the Lua call that takes its place (`reader`). The
//! guarantees are the module's header's (`stdio`).

use std::process::Child;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::codec::Json;
use crate::error::{Error, Result};
use crate::transport::inbox::{Event, Inbox};
use crate::transport::poller;
use crate::transport::{Received, Transport};

mod child;
mod exit_watch;
mod pipes;
mod reader;
mod served;
mod stdin;

pub(super) use stdin::StdinPipe;

use super::reapers::reap_in_background;
use super::stderr::{ended_detail, stderr_excerpt, PipeLog};
use super::{received, send_line, Launch, Options};
use child::{current_pid, exit_code, spawn_in_group, stop_group};
use exit_watch::ExitWatch;
use pipes::Pipes;
use reader::{next_spin, ReadSide};

pub struct Stdio {
    /// The process that started the server. A child made by fork(2)
    /// inherits this value but none of our threads: it must neither
    /// signal the parent's servers nor join threads it does not have.
    owner: libc::pid_t,
    child: Option<Child>,
    /// Tells the reader when the server exits; ended before it is reaped.
    exit: Arc<ExitWatch>,
    launch: Launch,
    pipe: Arc<StdinPipe>,
    inbox: Arc<Inbox>,
    log: Arc<Mutex<PipeLog>>,
    /// Served by the poll thread until the shutdown takes them back.
    pipes: Option<Pipes>,
    read_side: Arc<ReadSide>,
    /// Where requests are encoded, reused.
    out: Vec<u8>,
    /// How long a wait spins before it sleeps: about twice the time recent
    /// replies took, when that is under [`MAX_SPIN`](reader::MAX_SPIN); zero
    /// otherwise.
    spin: Duration,
    max_message_bytes: usize,
    /// Set once the server is known dead; every later call fails with it.
    failure: Option<(String, String)>,
}

impl Stdio {
    pub fn spawn(options: &Options) -> Result<Stdio> {
        let no_start = |err: std::io::Error| Error::Transport {
            code: "127".into(),
            detail: match crate::transport::fds::limit_reached(&err) {
                Some(why) => format!("MCP server could not be started ({}): {why}", options.launch.describe()),
                None => format!("MCP server produced no output ({}): {}", options.launch.describe(), err),
            },
        };
        poller::start().map_err(no_start)?;
        let mut child = spawn_in_group(options).map_err(no_start)?;
        let pid = child.id() as libc::pid_t;

        let (Some(stdin), Some(stdout), Some(stderr)) = (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            unreachable!("all three pipes were asked for")
        };
        let exit = Arc::new(ExitWatch::new(pid));
        let started = match pipes::start(stdin, stdout, stderr, exit.clone(), options) {
            Ok(started) => started,
            Err(e) => {
                // The poll thread could not be started again (it ended
                // with the last server meanwhile): the server goes too.
                stop_group(&mut child, &exit);
                return Err(no_start(e));
            }
        };

        Ok(Stdio {
            owner: current_pid(),
            child: Some(child),
            exit,
            launch: options.launch.clone(),
            pipe: started.stdin.clone(),
            inbox: started.inbox.clone(),
            log: started.log.clone(),
            read_side: started.read_side.clone(),
            pipes: Some(started),
            out: Vec::new(),
            spin: Duration::ZERO,
            max_message_bytes: options.max_message_bytes,
            failure: None,
        })
    }

    /// The server closed stdout or exited: find out how it ended and say so
    /// the way the reference does, with the stderr tail.
    fn ended(&mut self) -> Error {
        if self.failure.is_none() {
            let pid = self.child.as_ref().map(|c| c.id() as libc::pid_t);
            let code = exit_code(pid, Duration::from_secs(1));
            let detail = ended_detail(&self.log, &self.launch);
            self.failure = Some((code, detail));
        }
        let (code, detail) = self.failure.clone().unwrap_or_default();
        Error::Transport { code, detail }
    }

    /// In a child made by fork(2): let go of everything without touching
    /// the parent's server or waiting for threads this process lacks.
    fn forked_away(&mut self) -> bool {
        if self.owner == current_pid() {
            return false;
        }
        std::mem::forget(self.child.take());
        std::mem::forget(self.pipes.take());
        true
    }

    /// The spec's shutdown sequence, bounded: see [`stop_group`].
    fn shut_down(&mut self) {
        if self.forked_away() {
            return;
        }
        self.pipe.close();
        if let Some(mut child) = self.child.take() {
            stop_group(&mut child, &self.exit);
        }
        if let Some(pipes) = self.pipes.take() {
            pipes.stop();
        }
    }
}

impl Transport for Stdio {
    fn send(&mut self, message: &Json) -> Result<()> {
        if self.failure.is_some() {
            return Err(self.ended());
        }
        // One buffer for the client's life: a request costs no allocation
        // here once the buffer has grown to the usual size.
        send_line(&mut self.out, message, |line| self.pipe.send(line));
        Ok(())
    }

    fn receive(&mut self, deadline: Instant) -> Result<Option<Received>> {
        if self.failure.is_some() {
            return Err(self.ended());
        }
        let (event, waited) = self.read_side.wait_as_reader(deadline, self.spin);
        if let Some(Event::Message(_)) = &event {
            self.spin = next_spin(self.spin, waited);
        }
        let limit = self.max_message_bytes;
        received(event, limit, || self.ended())
    }

    fn take_dropped(&mut self) -> u64 {
        self.inbox.take_dropped()
    }

    fn queued(&self) -> bool {
        !self.inbox.is_empty()
    }

    fn last_words(&self) -> Option<String> {
        stderr_excerpt(&self.log.lock().unwrap_or_else(|p| p.into_inner()))
    }

    fn close(&mut self) {
        self.shut_down();
    }
}

impl Drop for Stdio {
    /// A client dropped by the garbage collector must not hold Lua for the
    /// seconds a shutdown can take, so the sequence moves to a thread of
    /// its own; [`join_reapers`] waits for those when the Lua state closes.
    fn drop(&mut self) {
        if self.forked_away() {
            return;
        }
        self.pipe.close();
        let child = self.child.take();
        let pipes = self.pipes.take();
        if child.is_none() && pipes.is_none() {
            return;
        }
        let exit = self.exit.clone();
        reap_in_background(move || {
            if let Some(mut child) = child {
                stop_group(&mut child, &exit);
            }
            if let Some(pipes) = pipes {
                pipes.stop();
            }
        });
    }
}
