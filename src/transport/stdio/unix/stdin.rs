//! The server's stdin, shared by Lua, the reader and the process's poll
//! thread (`transport::poller`): a message is written straight from the
//! calling thread while the pipe has room, and what does not fit waits
//! here, in order, for the thread to finish writing it; a server that
//! stopped reading then never blocks Lua. Written with SIGPIPE refused
//! (`transport::fds`). See the module's header.

use std::collections::VecDeque;
use std::os::fd::{AsRawFd, RawFd};
use std::process::ChildStdin;
use std::sync::Mutex;

use crate::transport::fds::{refuse_sigpipe, set_nonblocking, write_without_sigpipe};
use crate::transport::poller;

/// The server's stdin, shared by Lua (requests), the reader (answers to
/// server requests) and the poll thread (whatever did not fit).
pub(in crate::transport::stdio) struct StdinPipe {
    state: Mutex<PipeState>,
}

struct PipeState {
    /// Non-blocking; None once closed or broken.
    stdin: Option<ChildStdin>,
    /// Bytes accepted but not yet written, in order.
    pending: VecDeque<u8>,
    /// EOF for the server once `pending` is written.
    closing: bool,
}

impl StdinPipe {
    pub(super) fn new(stdin: ChildStdin) -> Self {
        set_nonblocking(stdin.as_raw_fd());
        refuse_sigpipe(stdin.as_raw_fd());
        let state = PipeState { stdin: Some(stdin), pending: VecDeque::new(), closing: false };
        StdinPipe { state: Mutex::new(state) }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, PipeState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Writes what the pipe takes now, in order after anything queued, and
    /// queues the rest for the poll thread. A broken pipe shows up as EOF
    /// on stdout soon after, which reports it with the exit status.
    pub(in crate::transport::stdio) fn send(&self, bytes: &[u8]) {
        let mut st = self.lock();
        if st.closing {
            return;
        }
        let Some(fd) = st.stdin.as_ref().map(|s| s.as_raw_fd()) else { return };
        let queued = !st.pending.is_empty();
        let written = if queued {
            0
        } else {
            match write_without_sigpipe(fd, bytes) {
                Ok(n) => n,
                Err(_) => {
                    st.stdin = None;
                    return;
                }
            }
        };
        if written < bytes.len() {
            st.pending.extend(&bytes[written..]);
            drop(st);
            // The thread polls this stdin from its next round.
            if !queued {
                poller::wake();
            }
        }
    }

    /// EOF for the server once what is queued has been written.
    pub(super) fn close(&self) {
        let mut st = self.lock();
        st.closing = true;
        if st.pending.is_empty() {
            st.stdin = None;
        }
    }

    /// Shutting down: what is pending is dropped, and stdin closed, even
    /// if the server never reads again.
    pub(super) fn abandon(&self) {
        let mut st = self.lock();
        st.pending.clear();
        st.stdin = None;
    }

    /// The descriptor to poll for room, while bytes wait for it.
    pub(super) fn waiting_to_write(&self) -> Option<RawFd> {
        let st = self.lock();
        st.stdin.as_ref().filter(|_| !st.pending.is_empty()).map(AsRawFd::as_raw_fd)
    }

    /// Writes what the pipe takes of what waits; closes stdin once a close
    /// was asked for and nothing is left.
    pub(super) fn flush(&self) {
        let mut st = self.lock();
        let Some(fd) = st.stdin.as_ref().map(|s| s.as_raw_fd()) else { return };
        let written = {
            let (front, _) = st.pending.as_slices();
            write_without_sigpipe(fd, front)
        };
        match written {
            Ok(n) => {
                st.pending.drain(..n);
            }
            Err(_) => {
                st.stdin = None;
                st.pending.clear();
            }
        }
        if st.closing && st.pending.is_empty() {
            st.stdin = None;
        }
    }
}
