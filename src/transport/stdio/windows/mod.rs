//! stdio on Windows: the server's process tree in a Job Object
//! (`process`), its command found as cmd.exe would (`command`), and its
//! three pipes served by one thread (`pump`, over `overlapped`). The
//! guarantees are Unix's: one process per client; `close`, the garbage
//! collector, the Lua state's close and the host's exit leave nothing
//! running; the close is bounded; death is noticed when it happens (the
//! process handle is one of the pump's waits); stderr's tail is quoted.

use std::os::windows::io::{AsHandle, OwnedHandle};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use crate::codec::Json;
use crate::error::{Error, Result};
use crate::interrupt;
use crate::transport::inbox::Inbox;
use crate::transport::{Received, Transport};

mod command;
mod overlapped;
mod process;
mod pump;

pub(super) use pump::StdinPipe;

use super::lines::Reader;
use super::reapers::reap_in_background;
use super::stderr::{ended_detail, stderr_excerpt, PipeLog};
use super::{received, send_line, Launch, Options};
use overlapped::pipe;
use process::Server;
use pump::Pump;

pub struct Stdio {
    server: Option<Server>,
    launch: Launch,
    pipe: Arc<StdinPipe>,
    inbox: Arc<Inbox>,
    log: Arc<Mutex<PipeLog>>,
    pump: Option<JoinHandle<()>>,
    /// Where requests are encoded, reused.
    out: Vec<u8>,
    max_message_bytes: usize,
    /// Set once the server is known dead; every later call fails with it.
    failure: Option<(String, String)>,
}

impl Stdio {
    pub fn spawn(options: &Options) -> Result<Stdio> {
        let no_start = |err: std::io::Error| Error::Transport {
            code: "127".into(),
            detail: format!("MCP server produced no output ({}): {}", options.launch.describe(), err),
        };
        let (stdin, stdout, stderr) = (pipe(false), pipe(true), pipe(true));
        let (stdin, stdout, stderr) = (stdin.map_err(no_start)?, stdout.map_err(no_start)?, stderr.map_err(no_start)?);
        let server = process::spawn(options, stdin.theirs, stdout.theirs, stderr.theirs).map_err(no_start)?;
        let process: OwnedHandle = server.child.as_handle().try_clone_to_owned().map_err(no_start)?;

        let pipe = Arc::new(StdinPipe::new().map_err(no_start)?);
        let inbox = Arc::new(Inbox::new(options.doorbell.clone()));
        let log = Arc::new(Mutex::new(PipeLog::default()));
        let reader = Reader::new(options, inbox.clone(), pipe.clone(), log.clone());
        let pump = Pump {
            stdin: Some(stdin.ours),
            stdout: stdout.ours,
            stderr: stderr.ours,
            process,
            pipe: pipe.clone(),
            reader,
            log: log.clone(),
        };
        let pump = thread::Builder::new().name("mcp-stdio".into()).spawn(move || pump.run()).map_err(no_start)?;
        Ok(Stdio {
            server: Some(server),
            launch: options.launch.clone(),
            pipe,
            inbox,
            log,
            pump: Some(pump),
            out: Vec::new(),
            max_message_bytes: options.max_message_bytes,
            failure: None,
        })
    }

    /// The server closed stdout or exited: how it ended, said the way the
    /// reference does, with the stderr tail.
    fn ended(&mut self) -> Error {
        if self.failure.is_none() {
            let code = self.server.as_ref().and_then(|s| s.exit_code(Duration::from_secs(1)));
            let code = code.map_or("-1".into(), |c| (c as i32).to_string());
            self.failure = Some((code, ended_detail(&self.log, &self.launch)));
        }
        let (code, detail) = self.failure.clone().unwrap_or_default();
        Error::Transport { code, detail }
    }

    fn shut_down(&mut self) {
        self.pipe.close();
        let (server, pump, pipe, inbox) = (self.server.take(), self.pump.take(), self.pipe.clone(), self.inbox.clone());
        stop(server, pump, &pipe, &inbox);
    }
}

/// The shutdown: the grace and the job's end (`Server::stop`), then the
/// pump, which every process of the job being gone has nothing to wait on.
fn stop(server: Option<Server>, pump: Option<JoinHandle<()>>, pipe: &StdinPipe, inbox: &Inbox) {
    if let Some(server) = server {
        server.stop();
    }
    inbox.close();
    pipe.stop();
    if let Some(pump) = pump {
        let _ = pump.join();
    }
}

impl Transport for Stdio {
    fn send(&mut self, message: &Json) -> Result<()> {
        if self.failure.is_some() {
            return Err(self.ended());
        }
        send_line(&mut self.out, message, |line| self.pipe.send(line));
        Ok(())
    }

    fn receive(&mut self, deadline: Instant) -> Result<Option<Received>> {
        if self.failure.is_some() {
            return Err(self.ended());
        }
        let event = loop {
            let now = Instant::now();
            if let Some(event) = self.inbox.pop(deadline.min(now + interrupt::SLICE)) {
                break Some(event);
            }
            if interrupt::requested() || Instant::now() >= deadline {
                break None;
            }
        };
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
    /// As on Unix: the shutdown moves to a thread of its own, which
    /// `join_reapers` waits for when the Lua state closes.
    fn drop(&mut self) {
        self.pipe.close();
        let (server, pump) = (self.server.take(), self.pump.take());
        if server.is_none() && pump.is_none() {
            return;
        }
        let (pipe, inbox) = (self.pipe.clone(), self.inbox.clone());
        reap_in_background(move || stop(server, pump, &pipe, &inbox));
    }
}
