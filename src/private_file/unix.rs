//! Private files on Unix: this user's uid, permission bits no wider than
//! 0600, and opens that never follow a link or block on a FIFO planted
//! at the path.

use std::fs::{DirBuilder, File, OpenOptions, Permissions};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;

use super::Untrusted;

pub(super) fn check_owner_and_writers(file: &File) -> Result<(), Untrusted> {
    if let Some(owner) = other_owner(file) {
        return Err(Untrusted::OwnedByAnother(owner));
    }
    let mode = file.metadata().map(|m| m.mode() & 0o777).unwrap_or(0o777);
    if mode & 0o022 != 0 {
        return Err(Untrusted::WritableByOthers(format!("mode {mode:03o}")));
    }
    Ok(())
}

/// Who owns `file` when it is not this process's user ("uid 1001").
pub fn other_owner(file: &File) -> Option<String> {
    let uid = file.metadata().map(|m| m.uid()).ok()?;
    // SAFETY: geteuid has no preconditions and cannot fail.
    (uid != unsafe { libc::geteuid() }).then(|| format!("uid {uid}"))
}

/// What to run so that only its owner can write `path`.
pub fn writable_fix(path: &str) -> String {
    format!("run chmod 600 {path}")
}

/// Opened to read, without blocking on a FIFO; `follow_links` false
/// refuses a symbolic link.
pub fn open_to_read(path: &Path, follow_links: bool) -> std::io::Result<File> {
    let nofollow = if follow_links { 0 } else { libc::O_NOFOLLOW };
    OpenOptions::new().read(true).custom_flags(libc::O_NONBLOCK | nofollow).open(path)
}

/// Opened to append, created 0600 if missing, never through a link.
pub fn open_for_append(path: &Path) -> std::io::Result<File> {
    OpenOptions::new()
        .create(true)
        .append(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
}

/// Whether an open failed because the path is a symbolic link.
pub fn is_link_refused(e: &std::io::Error) -> bool {
    e.raw_os_error() == Some(libc::ELOOP)
}

/// Narrows a file made before (by hand, or by an older version) to 0600.
pub fn make_private(file: &File) -> std::io::Result<()> {
    if file.metadata()?.mode() & 0o077 != 0 {
        file.set_permissions(Permissions::from_mode(0o600))?;
    }
    Ok(())
}

pub fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    DirBuilder::new().recursive(true).mode(0o700).create(dir)
}

pub(super) fn open_lock_file(path: &Path) -> std::io::Result<File> {
    OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CREAT)
        .mode(0o600)
        .open(path)
}

pub(super) fn create_new_private(path: &Path) -> std::io::Result<File> {
    OpenOptions::new().write(true).create_new(true).mode(0o600).custom_flags(libc::O_NOFOLLOW).open(path)
}
