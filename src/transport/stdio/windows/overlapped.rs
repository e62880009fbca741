//! The server's pipes on Windows, made here rather than by std so that
//! our ends are sure to be overlapped: one thread can then wait for
//! stdout, stderr, stdin's room and the process's exit at once. Each
//! pipe is a named pipe of a unique name, local only, with the server's
//! end opened from it (std hands the server an inheritable copy).

use std::os::windows::io::{AsRawHandle, FromRawHandle, OwnedHandle};
use std::sync::atomic::{AtomicU64, Ordering};

use windows_sys::Win32::Foundation::{
    GetLastError, ERROR_IO_INCOMPLETE, ERROR_IO_PENDING, GENERIC_READ, GENERIC_WRITE, HANDLE, INVALID_HANDLE_VALUE,
};
use windows_sys::Win32::Storage::FileSystem::{
    CreateFileW, ReadFile, WriteFile, FILE_FLAG_FIRST_PIPE_INSTANCE, FILE_FLAG_OVERLAPPED, FILE_READ_ATTRIBUTES,
    FILE_WRITE_ATTRIBUTES, OPEN_EXISTING, PIPE_ACCESS_INBOUND, PIPE_ACCESS_OUTBOUND,
};
use windows_sys::Win32::System::Pipes::{
    CreateNamedPipeW, PeekNamedPipe, PIPE_READMODE_BYTE, PIPE_REJECT_REMOTE_CLIENTS, PIPE_TYPE_BYTE, PIPE_WAIT,
};
use windows_sys::Win32::System::Threading::{CreateEventW, GetCurrentProcessId};
use windows_sys::Win32::System::IO::{CancelIoEx, GetOverlappedResult, OVERLAPPED};

/// The same 64 KiB a Linux pipe holds.
const CAPACITY: u32 = 64 * 1024;

/// A pipe between us and the server: `ours` overlapped, `theirs` for std
/// to hand to the child.
pub(super) struct Pipe {
    pub(super) ours: OwnedHandle,
    pub(super) theirs: OwnedHandle,
}

/// `inbound`: the server writes, we read (stdout, stderr); otherwise we
/// write (stdin).
pub(super) fn pipe(inbound: bool) -> std::io::Result<Pipe> {
    static SERIAL: AtomicU64 = AtomicU64::new(0);
    let random = crate::auth::pkce::random_text(12).map_err(std::io::Error::other)?;
    // SAFETY: no preconditions.
    let pid = unsafe { GetCurrentProcessId() };
    let name = format!(r"\\.\pipe\lua-mcp-{pid}-{}-{random}", SERIAL.fetch_add(1, Ordering::Relaxed));
    let wide: Vec<u16> = name.encode_utf16().chain(Some(0)).collect();
    let access = if inbound { PIPE_ACCESS_INBOUND } else { PIPE_ACCESS_OUTBOUND };
    // SAFETY: a NUL-terminated name; one instance, which fails if a pipe
    // of that name exists already (nobody can slip theirs in first).
    let ours = unsafe {
        CreateNamedPipeW(
            wide.as_ptr(),
            access | FILE_FLAG_OVERLAPPED | FILE_FLAG_FIRST_PIPE_INSTANCE,
            PIPE_TYPE_BYTE | PIPE_READMODE_BYTE | PIPE_WAIT | PIPE_REJECT_REMOTE_CLIENTS,
            1,
            CAPACITY,
            CAPACITY,
            0,
            std::ptr::null(),
        )
    };
    let ours = owned(ours)?;
    // The server's end: blocking, as programs expect their stdio to be,
    // with the attribute right some runtimes need to set the pipe's mode.
    let rights = if inbound { GENERIC_WRITE | FILE_READ_ATTRIBUTES } else { GENERIC_READ | FILE_WRITE_ATTRIBUTES };
    // SAFETY: opens the pipe just made, by its NUL-terminated name.
    let theirs = unsafe { CreateFileW(wide.as_ptr(), rights, 0, std::ptr::null(), OPEN_EXISTING, 0, 0) };
    Ok(Pipe { ours, theirs: owned(theirs)? })
}

fn owned(handle: HANDLE) -> std::io::Result<OwnedHandle> {
    if handle == INVALID_HANDLE_VALUE || handle == 0 {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: a handle just returned, owned by nobody else.
    Ok(unsafe { OwnedHandle::from_raw_handle(handle as _) })
}

/// A manual-reset event, unsignalled.
pub(super) fn event() -> std::io::Result<OwnedHandle> {
    // SAFETY: an unnamed event with default security.
    owned(unsafe { CreateEventW(std::ptr::null(), 1, 0, std::ptr::null()) })
}

/// An auto-reset event, unsignalled: one wake-up per signal.
pub(super) fn auto_event() -> std::io::Result<OwnedHandle> {
    // SAFETY: as above.
    owned(unsafe { CreateEventW(std::ptr::null(), 0, 0, std::ptr::null()) })
}

pub(super) fn raw(handle: &OwnedHandle) -> HANDLE {
    handle.as_raw_handle() as HANDLE
}

/// One read or write in flight on one of our ends, with the buffer the
/// system reads into or writes from. Both stay where they are (boxed)
/// until the operation is over: [`Operation::cancel`] waits for that.
pub(super) struct Operation {
    handle: HANDLE,
    overlapped: Box<OVERLAPPED>,
    event: OwnedHandle,
    pub(super) buf: Vec<u8>,
    pub(super) pending: bool,
}

/// How an operation ended.
pub(super) enum Done {
    Bytes(usize),
    /// The pipe broke (the other end closed) or failed.
    Closed,
}

impl Operation {
    pub(super) fn new(end: &OwnedHandle, capacity: usize) -> std::io::Result<Operation> {
        // SAFETY: an all-zero OVERLAPPED is the documented starting value.
        let overlapped = Box::new(unsafe { std::mem::zeroed::<OVERLAPPED>() });
        Ok(Operation { handle: raw(end), overlapped, event: event()?, buf: vec![0; capacity], pending: false })
    }

    pub(super) fn event(&self) -> HANDLE {
        raw(&self.event)
    }

    fn prepare(&mut self) {
        // SAFETY: as in `new`; no operation is in flight on it.
        *self.overlapped = unsafe { std::mem::zeroed() };
        self.overlapped.hEvent = self.event();
    }

    /// Starts reading into `buf`; false when the pipe is over.
    pub(super) fn start_read(&mut self) -> bool {
        self.prepare();
        // SAFETY: `buf` and `overlapped` stay put until the read is over
        // (see the type's comment); the handle is open as long as we are.
        let ok = unsafe {
            ReadFile(
                self.handle,
                self.buf.as_mut_ptr().cast(),
                self.buf.len() as u32,
                std::ptr::null_mut(),
                &mut *self.overlapped,
            )
        };
        self.started(ok)
    }

    /// Starts writing the first `len` bytes of `buf`; false when the
    /// pipe is over.
    pub(super) fn start_write(&mut self, len: usize) -> bool {
        self.prepare();
        // SAFETY: as for `start_read`.
        let ok = unsafe {
            WriteFile(self.handle, self.buf.as_ptr().cast(), len as u32, std::ptr::null_mut(), &mut *self.overlapped)
        };
        self.started(ok)
    }

    fn started(&mut self, ok: i32) -> bool {
        // SAFETY: no preconditions.
        self.pending = ok != 0 || unsafe { GetLastError() } == ERROR_IO_PENDING;
        self.pending
    }

    /// The outcome if the operation is over; None while it runs.
    pub(super) fn poll(&mut self) -> Option<Done> {
        if !self.pending {
            return None;
        }
        let mut n = 0u32;
        // SAFETY: the operation started on this handle with this OVERLAPPED.
        let ok = unsafe { GetOverlappedResult(self.handle, &*self.overlapped, &mut n, 0) };
        // SAFETY: no preconditions.
        if ok == 0 && unsafe { GetLastError() } == ERROR_IO_INCOMPLETE {
            return None;
        }
        self.pending = false;
        Some(if ok != 0 { Done::Bytes(n as usize) } else { Done::Closed })
    }

    /// Ends the operation in flight and waits until the system is done
    /// with the buffer: what it had read by then, if anything.
    pub(super) fn cancel(&mut self) -> Option<Done> {
        if !self.pending {
            return None;
        }
        let mut n = 0u32;
        // SAFETY: cancels our own operation, then waits for its end.
        let ok = unsafe {
            CancelIoEx(self.handle, &*self.overlapped);
            GetOverlappedResult(self.handle, &*self.overlapped, &mut n, 1)
        };
        self.pending = false;
        (ok != 0 && n > 0).then_some(Done::Bytes(n as usize))
    }
}

impl Drop for Operation {
    fn drop(&mut self) {
        self.cancel();
    }
}

/// How many bytes wait in a pipe we read from (0 when it is broken).
pub(super) fn available(end: HANDLE) -> u32 {
    let mut n = 0u32;
    // SAFETY: peeks at no data, only the count, into a local.
    let ok = unsafe { PeekNamedPipe(end, std::ptr::null_mut(), 0, std::ptr::null_mut(), &mut n, std::ptr::null_mut()) };
    if ok == 0 {
        0
    } else {
        n
    }
}
