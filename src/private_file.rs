//! Files that hold secrets or steer what the module does (the token
//! store, recordings, the era cache): believed and appended to only when
//! this user owns them and nobody else can write them, since whoever else
//! could write them could steer a login, read what was recorded, or make
//! every client speak to a server the wrong way. Several processes update
//! the same file: each update takes the lock beside it.

use std::fs::{self, File, Metadata, OpenOptions};
use std::io::{ErrorKind, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::thread;
use std::time::{Duration, Instant};

use crate::interrupt;

/// Why a file is not believed.
#[derive(Debug, PartialEq)]
pub enum Untrusted {
    NotAFile,
    /// Another user owns it (their uid).
    OwnedByAnother(u32),
    /// Others can write it (its permission bits).
    WritableByOthers(u32),
}

/// Whether the file `metadata` describes may be believed: a regular
/// file of this user's that no one else can write.
pub fn check_trusted(metadata: &Metadata) -> Result<(), Untrusted> {
    if !metadata.file_type().is_file() {
        return Err(Untrusted::NotAFile);
    }
    if !owned_by_me(metadata) {
        return Err(Untrusted::OwnedByAnother(metadata.uid()));
    }
    let mode = metadata.mode() & 0o777;
    if mode & 0o022 != 0 {
        return Err(Untrusted::WritableByOthers(mode));
    }
    Ok(())
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

/// Takes the advisory lock beside `path` (`flock` on `PATH.lock`), held
/// until the file returned drops: waits for another process's update at
/// most `wait`, giving way to Ctrl-C. The lock file is opened read-only,
/// never through a link, and never blocking on a FIFO planted there.
pub fn lock_beside(path: &Path, wait: Duration) -> Result<File, LockFailure> {
    let mut lock = path.as_os_str().to_os_string();
    lock.push(".lock");
    let lock = PathBuf::from(lock);
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CREAT)
        .mode(0o600)
        .open(&lock)
        .map_err(|e| LockFailure::Failed(format!("{e} ({})", lock.display())))?;
    if !file.metadata().is_ok_and(|m| m.file_type().is_file()) {
        return Err(LockFailure::Failed(format!("{} is not a regular file", lock.display())));
    }
    let deadline = Instant::now() + wait;
    loop {
        // SAFETY: the descriptor is open for as long as `file` lives.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
            return Ok(file);
        }
        let e = std::io::Error::last_os_error();
        if e.kind() != ErrorKind::WouldBlock && e.kind() != ErrorKind::Interrupted {
            return Err(LockFailure::Failed(e.to_string()));
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

/// Whether the file `metadata` describes belongs to this process's user.
pub fn owned_by_me(metadata: &Metadata) -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    metadata.uid() == unsafe { libc::geteuid() }
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
        let mut file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .custom_flags(libc::O_NOFOLLOW)
            .open(&temporary)?;
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
