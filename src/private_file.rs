//! Files that hold secrets (the token store, recordings): believed and
//! appended to only when this user owns them, since whoever else could
//! write them could steer a login or read what was recorded.

use std::fs::Metadata;
use std::os::unix::fs::MetadataExt;

/// Whether the file `metadata` describes belongs to this process's user.
pub fn owned_by_me(metadata: &Metadata) -> bool {
    // SAFETY: geteuid has no preconditions and cannot fail.
    metadata.uid() == unsafe { libc::geteuid() }
}
