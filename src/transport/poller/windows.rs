//! WSAPoll and a loopback socket to wake it, for the poll thread on
//! Windows, where it serves sockets only (an HTTP session's stream from
//! the server): WSAPoll takes no pipe, so a stdio server's pipes keep
//! their pump thread there.
//!
//! The wake-up is a UDP socket on 127.0.0.1 sending to itself: a
//! datagram makes it readable, and it needs no second socket and no
//! listening port that another process could connect to.

use std::io;
use std::net::UdpSocket;
use std::os::windows::io::{AsRawSocket, RawSocket};

use windows_sys::Win32::Networking::WinSock::{WSAPoll, POLLRDNORM, POLLWRNORM, SOCKET, WSAPOLLFD};

pub type Descriptor = RawSocket;
pub type Entry = WSAPOLLFD;
// POLLIN also asks for out-of-band data, which some providers refuse.
pub const READABLE: i16 = POLLRDNORM;
pub const WRITABLE: i16 = POLLWRNORM;

pub fn entry(socket: Descriptor, events: i16) -> Entry {
    WSAPOLLFD { fd: socket as SOCKET, events, revents: 0 }
}

pub fn revents(entry: &Entry) -> i16 {
    entry.revents
}

/// Waits until one of `entries` is ready or `timeout_ms` passed (-1:
/// no limit).
pub fn poll(entries: &mut [Entry], timeout_ms: i32) -> io::Result<()> {
    // SAFETY: `entries` is a live array of the length passed.
    let n = unsafe { WSAPoll(entries.as_mut_ptr(), entries.len() as u32, timeout_ms) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

pub struct WakeUp {
    socket: UdpSocket,
}

impl WakeUp {
    pub fn new() -> io::Result<WakeUp> {
        let socket = UdpSocket::bind("127.0.0.1:0")?;
        socket.connect(socket.local_addr()?)?;
        socket.set_nonblocking(true)?;
        Ok(WakeUp { socket })
    }

    pub fn signal(&self) {
        // A full buffer already wakes the thread: the failed send is fine.
        let _ = self.socket.send(b"x");
    }

    pub fn descriptor(&self) -> Descriptor {
        self.socket.as_raw_socket()
    }

    /// Empties the socket, so that the next poll sleeps.
    pub fn drain(&self) {
        let mut buf = [0u8; 64];
        while self.socket.recv(&mut buf).is_ok() {}
    }
}
