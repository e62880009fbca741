//! Files that hold secrets (the token store, recordings): believed and
//! appended to only when this user owns them, since whoever else could
//! write them could steer a login or read what was recorded.

use std::fs::{self, Metadata, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::Path;

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
