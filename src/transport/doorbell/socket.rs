//! Windows' bell: a connected pair of loopback TCP sockets, rung by
//! sending a byte on one and watched on the other, since an event loop
//! on Windows (libuv's poll handles, so luv's and Neovim's) can watch only
//! sockets. The deadline is kept by a thread (`deadline_thread`).
//!
//! The pair is made by listening on 127.0.0.1, port chosen by the system,
//! connecting, and accepting; the accepted socket is checked to be the
//! one we connected, so another process that connected first cannot
//! stand in for it.

use std::io::{ErrorKind, Read, Write};
use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::os::windows::io::AsRawSocket;
use std::sync::Arc;
use std::time::Duration;

use super::deadline_thread::DeadlineThread;

#[derive(Debug)]
pub(super) struct Bell {
    ends: Arc<Ends>,
    deadline: DeadlineThread,
}

#[derive(Debug)]
struct Ends {
    watched: TcpStream,
    rung: TcpStream,
}

impl Ends {
    fn ring(&self) {
        // Non-blocking: a full socket buffer is rung already.
        let _ = (&self.rung).write(b"!");
    }
}

impl Bell {
    pub(super) fn new() -> std::io::Result<Bell> {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?;
        let rung = TcpStream::connect(listener.local_addr()?)?;
        let watched = loop {
            let (accepted, from) = listener.accept()?;
            if from == rung.local_addr()? {
                break accepted;
            }
        };
        watched.set_nonblocking(true)?;
        rung.set_nonblocking(true)?;
        // One byte a ring: sent at once, not held for company.
        rung.set_nodelay(true)?;
        Ok(Bell { ends: Arc::new(Ends { watched, rung }), deadline: DeadlineThread::default() })
    }

    pub(super) fn fd(&self) -> super::Descriptor {
        self.ends.watched.as_raw_socket() as super::Descriptor
    }

    pub(super) fn ring(&self) {
        self.ends.ring();
    }

    pub(super) fn clear(&self) {
        let mut sink = [0u8; 64];
        loop {
            match (&self.ends.watched).read(&mut sink) {
                Ok(n) if n > 0 => continue,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                _ => return,
            }
        }
    }

    pub(super) fn set_timer(&self, delay: Option<Duration>) {
        let ends = self.ends.clone();
        self.deadline.set(delay, move || ends.ring());
    }
}
