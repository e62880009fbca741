//! The one thread that serves a Windows server's pipes: it waits, in one
//! WaitForMultipleObjects, for stdout's read, stderr's read, stdin's
//! write, the process's exit and a wake-up from us, and does whatever
//! came. A read sorts lines into the inbox (`lines`), stderr keeps its
//! tail, and stdin takes what Lua queued. Overlapped operations can be
//! cancelled, so shutdown never waits on a pipe someone else holds.
//!
//! Unlike Unix, the Lua thread does not read the pipe itself while it
//! waits: every reply reaches Lua through the inbox, a thread hand-off
//! per reply. Windows makes a pipe readable only by starting a read, and
//! one read in flight per pipe keeps the design simple.

use std::collections::VecDeque;
use std::os::windows::io::OwnedHandle;
use std::sync::{Arc, Mutex, MutexGuard};

use windows_sys::Win32::Foundation::{HANDLE, WAIT_FAILED};
use windows_sys::Win32::System::Threading::{SetEvent, WaitForMultipleObjects, WaitForSingleObject, INFINITE};

use crate::transport::inbox::Event;

use super::super::lines::{split_lines, Piece, Reader};
use super::super::stderr::PipeLog;
use super::overlapped::{auto_event, available, raw, Done, Operation};

/// What is still read from stdout after the server exited: what it wrote
/// last, not a stream a leftover helper keeps pouring.
const DRAIN_AFTER_EXIT: usize = 4 << 20;

/// The server's stdin, shared by Lua (requests), the pump's reader
/// (answers to server requests) and the pump's writer.
pub(in crate::transport::stdio) struct StdinPipe {
    state: Mutex<PipeState>,
    wake: OwnedHandle,
}

#[derive(Default)]
struct PipeState {
    pending: VecDeque<u8>,
    /// EOF for the server once `pending` is written.
    closing: bool,
    /// Shutting down: the pump ends, whatever is pending.
    stopped: bool,
}

impl StdinPipe {
    pub(super) fn new() -> std::io::Result<StdinPipe> {
        Ok(StdinPipe { state: Mutex::default(), wake: auto_event()? })
    }

    fn lock(&self) -> MutexGuard<'_, PipeState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn wake(&self) {
        // SAFETY: signals our own event.
        unsafe { SetEvent(raw(&self.wake)) };
    }

    /// Queues `bytes` for the server; the pump writes them in order.
    pub(in crate::transport::stdio) fn send(&self, bytes: &[u8]) {
        let mut st = self.lock();
        if st.closing {
            return;
        }
        st.pending.extend(bytes);
        drop(st);
        self.wake();
    }

    /// EOF for the server once what is queued has been written.
    pub(super) fn close(&self) {
        self.lock().closing = true;
        self.wake();
    }

    /// Ends the pump.
    pub(super) fn stop(&self) {
        let mut st = self.lock();
        st.stopped = true;
        st.pending.clear();
        drop(st);
        self.wake();
    }
}

/// Everything the pump thread owns.
pub(super) struct Pump {
    /// Taken by `run`: closing it is the server's EOF.
    pub(super) stdin: Option<OwnedHandle>,
    pub(super) stdout: OwnedHandle,
    pub(super) stderr: OwnedHandle,
    /// A handle of our own to the server's first process.
    pub(super) process: OwnedHandle,
    pub(super) pipe: Arc<StdinPipe>,
    pub(super) reader: Reader,
    pub(super) log: Arc<Mutex<PipeLog>>,
}

/// Our end of stdin with the write in flight on it. The operation is
/// declared first, so it is cancelled (and its buffer released by the
/// system) before the handle closes.
struct Stdin {
    op: Operation,
    _end: OwnedHandle,
}

/// Where stdout's reading stands.
struct Stdout {
    op: Operation,
    line: Vec<u8>,
    oversized: bool,
    /// Ended has been queued: nothing more is read.
    over: bool,
    /// Read since the server exited, once it has.
    after_exit: Option<usize>,
}

impl Pump {
    /// The thread's body: until `StdinPipe::stop`.
    pub(super) fn run(mut self) {
        let Some(stdin) = self.stdin.take() else { return };
        let (Ok(out), Ok(err), Ok(input)) = (
            Operation::new(&self.stdout, 64 * 1024),
            Operation::new(&self.stderr, 16 * 1024),
            Operation::new(&stdin, 64 * 1024),
        ) else {
            self.reader.inbox.push(Event::Ended, 0);
            return;
        };
        let mut out = Stdout { op: out, line: Vec::new(), oversized: false, over: false, after_exit: None };
        let (mut err, mut input) = (Some(err), Some(Stdin { op: input, _end: stdin }));
        let mut exited = false;
        loop {
            if !out.over && !out.op.pending && !out.op.start_read() {
                self.end_stdout(&mut out);
            }
            if let Some(op) = err.as_mut().filter(|op| !op.pending) {
                if !op.start_read() {
                    self.stderr_done(&mut err);
                }
            }
            if !self.feed_stdin(&mut input) {
                return;
            }
            let mut waits: Vec<HANDLE> = vec![raw(&self.pipe.wake)];
            waits.extend([&out.op].into_iter().filter(|op| op.pending).map(|op| op.event()));
            waits.extend(err.iter().chain(input.iter().map(|i| &i.op)).filter(|op| op.pending).map(Operation::event));
            if !exited {
                waits.push(raw(&self.process));
            }
            // SAFETY: live handles of ours, fewer than the 64 allowed.
            if unsafe { WaitForMultipleObjects(waits.len() as u32, waits.as_ptr(), 0, INFINITE) } == WAIT_FAILED {
                self.end_stdout(&mut out);
                return;
            }
            if self.pipe.lock().stopped {
                return;
            }
            while let Some(done) = out.op.poll() {
                self.stdout_read(&mut out, done);
                if out.over || !out.op.start_read() {
                    break;
                }
            }
            if let Some(done) = err.as_mut().and_then(Operation::poll) {
                self.stderr_read(&mut err, done);
            }
            if let Some(Done::Closed) = input.as_mut().and_then(|i| i.op.poll()) {
                input = None;
            }
            // SAFETY: a zero-time wait on our process handle.
            exited = exited || unsafe { WaitForSingleObject(raw(&self.process), 0) } == 0;
            if exited {
                self.after_exit(&mut out, &mut err);
            }
        }
    }

    /// Starts writing what Lua queued, or closes stdin when asked and
    /// done; false when the pump is to stop.
    fn feed_stdin(&self, input: &mut Option<Stdin>) -> bool {
        let mut st = self.pipe.lock();
        if st.stopped {
            return false;
        }
        let Some(Stdin { op, .. }) = input.as_mut() else {
            st.pending.clear();
            return true;
        };
        if op.pending {
            return true;
        }
        if st.pending.is_empty() {
            if st.closing {
                // Closing our end is the server's EOF.
                *input = None;
            }
            return true;
        }
        let n = st.pending.len().min(op.buf.len());
        for (slot, byte) in op.buf.iter_mut().zip(st.pending.drain(..n)) {
            *slot = byte;
        }
        drop(st);
        if !op.start_write(n) {
            *input = None;
        }
        true
    }

    fn stdout_read(&self, out: &mut Stdout, done: Done) {
        let Done::Bytes(n) = done else {
            self.end_stdout(out);
            return;
        };
        let Stdout { op, line, oversized, .. } = out;
        split_lines(&op.buf[..n], line, oversized, self.reader.limit, |piece| match piece {
            Piece::Line(text) => self.reader.handle_line(text),
            Piece::TooLarge => self.reader.inbox.push(Event::TooLarge(None), 0),
        });
        if let Some(drained) = out.after_exit.as_mut() {
            *drained += n;
        }
    }

    /// The stream is over: its last unfinished line, then `Ended`.
    fn end_stdout(&self, out: &mut Stdout) {
        if out.over {
            return;
        }
        out.over = true;
        if let Some(Done::Bytes(n)) = out.op.cancel() {
            self.stdout_read(out, Done::Bytes(n));
        }
        if !out.line.is_empty() && !out.oversized {
            let line = std::mem::take(&mut out.line);
            self.reader.handle_line(&line);
        }
        self.reader.inbox.push(Event::Ended, 0);
    }

    fn stderr_read(&self, err: &mut Option<Operation>, done: Done) {
        match (done, err.as_ref()) {
            (Done::Bytes(n), Some(op)) => self.log.lock().unwrap_or_else(|p| p.into_inner()).keep_stderr(&op.buf[..n]),
            _ => self.stderr_done(err),
        }
    }

    fn stderr_done(&self, err: &mut Option<Operation>) {
        if let Some(mut op) = err.take() {
            if let Some(Done::Bytes(n)) = op.cancel() {
                self.log.lock().unwrap_or_else(|p| p.into_inner()).keep_stderr(&op.buf[..n]);
            }
        }
        self.log.lock().unwrap_or_else(|p| p.into_inner()).stderr_done = true;
    }

    /// The server exited: what it wrote last is in the pipes, and a read
    /// in flight with nothing left to take means the end (a helper it
    /// left may hold the pipes open for ever).
    fn after_exit(&self, out: &mut Stdout, err: &mut Option<Operation>) {
        let drained = *out.after_exit.get_or_insert(0);
        if !out.over && (available(raw(&self.stdout)) == 0 || drained > DRAIN_AFTER_EXIT) {
            self.end_stdout(out);
        }
        if err.is_some() && available(raw(&self.stderr)) == 0 {
            self.stderr_done(err);
        }
    }
}
