//! Files that hold secrets or steer what the module does (the token
//! store, recordings, the era cache): believed and appended to only when
//! this user owns them and nobody else can write them, since whoever else
//! could write them could steer a login, read what was recorded, or make
//! every client speak to a server the wrong way. Several processes update
//! the same file: each update takes the lock beside it.
//!
//! What "owns" and "can write" mean, and how a file is made private,
//! differ by system: owner and permission bits on Unix (`unix.rs`), the
//! owner's SID and the access list on Windows (`windows.rs`).

#[cfg(unix)]
mod unix;
#[cfg(unix)]
use unix as system;
#[cfg(windows)]
mod windows;
#[cfg(windows)]
use windows as system;

pub use system::{
    create_private_dir, is_link_refused, make_private, open_for_append, open_to_read, other_owner, writable_fix,
};

use std::fs::{self, File, TryLockError};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::thread;
use std::time::{Duration, Instant};

use crate::interrupt;

/// Why a file is not believed.
#[derive(Debug, PartialEq)]
pub enum Untrusted {
    NotAFile,
    /// Another user owns it: who, as the system names them ("uid 1001",
    /// a SID).
    OwnedByAnother(String),
    /// Others can write it: what lets them ("mode 664", an access rule).
    WritableByOthers(String),
}

/// Whether the open `file` may be believed: a regular file of this
/// user's that no one else can write. Checked on what was opened, not on
/// the path, which could be swapped in between.
pub fn check_trusted(file: &File) -> Result<(), Untrusted> {
    if !file.metadata().is_ok_and(|m| m.file_type().is_file()) {
        return Err(Untrusted::NotAFile);
    }
    system::check_owner_and_writers(file)
}

/// Why the lock beside a file could not be had.
#[derive(Debug)]
pub enum LockFailure {
    /// Another process held it for the whole wait.
    Held { lock: PathBuf, waited: Duration },
    /// Ctrl-C came first.
    Interrupted,
    /// The lock file could not be opened or locked.
    Failed(String),
}

/// Takes the advisory lock beside `path` (on `PATH.lock`), held
/// until the file returned drops: waits for another process's update at
/// most `wait`, giving way to Ctrl-C. The lock file is opened read-only,
/// never through a link, and never blocking on a FIFO planted there.
pub fn lock_beside(path: &Path, wait: Duration) -> Result<File, LockFailure> {
    let mut lock = path.as_os_str().to_os_string();
    lock.push(".lock");
    let lock = PathBuf::from(lock);
    let file = system::open_lock_file(&lock).map_err(|e| LockFailure::Failed(format!("{e} ({})", lock.display())))?;
    if !file.metadata().is_ok_and(|m| m.file_type().is_file()) {
        return Err(LockFailure::Failed(format!("{} is not a regular file", lock.display())));
    }
    let deadline = Instant::now() + wait;
    loop {
        // flock(2) on Unix, LockFileEx on Windows.
        match file.try_lock() {
            Ok(()) => return Ok(file),
            Err(TryLockError::WouldBlock) => {}
            Err(TryLockError::Error(e)) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(TryLockError::Error(e)) => return Err(LockFailure::Failed(e.to_string())),
        }
        if interrupt::requested() {
            return Err(LockFailure::Interrupted);
        }
        if Instant::now() >= deadline {
            return Err(LockFailure::Held { lock, waited: wait });
        }
        thread::sleep(Duration::from_millis(5));
    }
}

/// Replaces `path` with a file of `text` that only this user can read:
/// written as a new file of a random name beside it (never one that is
/// there already, a leftover or one planted with wider rights, and never
/// through a symbolic link), then renamed over it, so that a process
/// reading the old file never sees half of the new one. `sync` waits for
/// the disk first (a token store); a cache need not.
pub fn replace(path: &Path, text: &[u8], sync: bool) -> std::io::Result<()> {
    let suffix = crate::auth::pkce::random_text(9).map_err(std::io::Error::other)?;
    let mut temporary = path.as_os_str().to_os_string();
    temporary.push(format!(".{suffix}.tmp"));
    let temporary = std::path::PathBuf::from(temporary);
    let written = (|| {
        let mut file = system::create_new_private(&temporary)?;
        file.write_all(text)?;
        if sync {
            file.sync_all()?;
        }
        fs::rename(&temporary, path)
    })();
    if written.is_err() {
        let _ = fs::remove_file(&temporary);
    }
    written
}
