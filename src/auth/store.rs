//! Where tokens outlive the process: `opts.auth.store`, a file or the
//! caller's own `load` / `save`. A record is keyed by the authorization
//! server's issuer and the resource (the MCP server), so one store serves
//! many servers, and a token is never offered to a server it was not
//! issued for.
//!
//! A record holds the client registration (its secret too, when the
//! server gave one) and the tokens. The file is therefore created
//! readable by its owner only (0600 on Unix; on Windows an access list
//! that admits this user alone), and rewritten through a new file that
//! replaces it, so a reader never sees half a record and a crash never
//! leaves one (`private_file`).
//!
//! Several processes may log in at once (an editor and an agent, six
//! agents started together): each save re-reads the file and writes it
//! whole, so two saves at once would keep one of their records. A save
//! therefore holds an advisory lock on `PATH.lock`, beside the store
//! (`flock` on Unix, `LockFileEx` on Windows), from its read to its
//! rename. And the store steers logins (it holds the registration and
//! which issuer a secret goes to), so a file someone else owns or could
//! have written (its mode bits, or on Windows its access list) is
//! refused, as ssh refuses such keys.

use std::fs::File;
use std::io::{ErrorKind, Read};
use std::path::PathBuf;
use std::time::Duration;

use crate::codec::{self, Json};
use crate::error::{Error, Result};
use crate::private_file::{self, check_trusted, lock_beside, LockFailure, Untrusted};

/// How long a save waits for another process's save to finish: a save
/// takes milliseconds, so a lock held this long belongs to a process
/// that hangs.
const LOCK_WAIT: Duration = Duration::from_secs(10);

/// What keeps records: see the module doc.
pub trait Store {
    fn load(&mut self, key: &str) -> Result<Option<Json>>;
    fn save(&mut self, key: &str, record: &Json) -> Result<()>;
}

/// The key a record is kept under.
pub fn key(issuer: &str, resource: &str) -> String {
    format!("{issuer} {resource}")
}

/// The key of the record naming the issuer a pre-registered client's
/// secret is bound to. (No issuer is a single word, so this cannot meet
/// a login's key.)
pub fn secret_binding_key(client_id: &str) -> String {
    format!("secret-of {client_id}")
}

/// One JSON object in a file, a record per key.
pub struct FileStore {
    pub path: PathBuf,
}

impl FileStore {
    fn describe(&self) -> String {
        self.path.display().to_string()
    }

    /// The whole file: empty when it does not exist yet. Anything that
    /// is not a JSON object is refused rather than replaced: the path may
    /// name a file that is not ours.
    fn read_all(&self) -> Result<Vec<(Vec<u8>, Json)>> {
        let cannot =
            |e: std::io::Error| Error::BadInput(format!("mcp: cannot read the token store {}: {e}", self.describe()));
        // Opened once, and the checks made on what was opened: a path
        // checked and then read again could be swapped in between. Not
        // blocking: a FIFO planted there would hold the login for ever.
        let mut file = match private_file::open_to_read(&self.path, true) {
            Ok(file) => file,
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(cannot(e)),
        };
        self.check_owner(&file)?;
        let mut text = Vec::new();
        file.read_to_end(&mut text).map_err(cannot)?;
        match codec::decode(&text) {
            Ok(Json::Object(pairs)) => Ok(pairs),
            _ => Err(Error::BadInput(format!(
                "mcp: the token store {} is not a JSON object of saved logins; delete it (the next login writes it anew) or set opts.auth.store to another path",
                self.describe()
            ))),
        }
    }
}

impl FileStore {
    /// Refuses a store that is not a file, or that another user owns or
    /// could have written.
    fn check_owner(&self, file: &File) -> Result<()> {
        let path = self.describe();
        let why = match check_trusted(file) {
            Ok(()) => return Ok(()),
            Err(Untrusted::NotAFile) => format!("mcp: the token store {path} is not a regular file; set opts.auth.store to a file's path"),
            Err(Untrusted::OwnedByAnother(owner)) => format!(
                "mcp: the token store {path} belongs to another user ({owner}), who could steer every login through it; use a store of your own (opts.auth.store) or chown it"
            ),
            Err(Untrusted::WritableByOthers(rights)) => format!(
                "mcp: the token store {path} can be written by others ({rights}), who could steer every login through it; {}",
                private_file::writable_fix(&path)
            ),
        };
        Err(Error::BadInput(why))
    }

    /// The advisory lock beside the store, held until the file drops.
    /// Waits for another save at most [`LOCK_WAIT`], giving way to Ctrl-C.
    fn lock(&self) -> Result<File> {
        let fail =
            |why: String| Error::BadInput(format!("mcp: cannot lock the token store {}: {why}", self.describe()));
        lock_beside(&self.path, LOCK_WAIT).map_err(|failure| match failure {
            LockFailure::Interrupted => Error::Interrupted { what: "login".into() },
            LockFailure::Held { lock, waited } => {
                fail(format!("another process has held {} for {} s", lock.display(), waited.as_secs()))
            }
            LockFailure::Failed(why) => fail(why),
        })
    }
}

impl Store for FileStore {
    fn load(&mut self, key: &str) -> Result<Option<Json>> {
        let pairs = self.read_all()?;
        Ok(pairs.into_iter().find(|(k, _)| k == key.as_bytes()).map(|(_, v)| v))
    }

    fn save(&mut self, key: &str, record: &Json) -> Result<()> {
        // Re-read under the lock: another process may have saved since
        // this one last read.
        let _lock = self.lock()?;
        let mut pairs = self.read_all()?;
        pairs.retain(|(k, _)| k != key.as_bytes());
        pairs.push((key.as_bytes().to_vec(), record.clone()));
        let text = codec::encode(&Json::Object(pairs));
        let fail =
            |e: std::io::Error| Error::BadInput(format!("mcp: cannot write the token store {}: {e}", self.describe()));
        let written = crate::private_file::replace(&self.path, &text, true);
        written.map_err(fail)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;
    use std::os::unix::fs::PermissionsExt;
    use std::thread;

    fn scratch(name: &str) -> PathBuf {
        let path = std::env::temp_dir().join(format!("lua-mcp-store-{}-{name}", std::process::id()));
        let _ = fs::remove_file(&path);
        path
    }

    #[test]
    fn a_saved_record_is_found_by_its_key_alone_in_a_file_only_its_owner_reads() {
        let path = scratch("keys");
        let mut store = FileStore { path: path.clone() };
        store.save(&key("https://as", "https://a/mcp"), &Json::object([("access_token", Json::str("A"))])).unwrap();
        store.save(&key("https://as", "https://b/mcp"), &Json::object([("access_token", Json::str("B"))])).unwrap();
        let found = store.load(&key("https://as", "https://b/mcp")).unwrap().unwrap();
        assert_eq!(found.get("access_token"), Some(&Json::str("B")));
        assert!(store.load(&key("https://other", "https://b/mcp")).unwrap().is_none());
        assert_eq!(fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
        fs::remove_file(path).unwrap();
    }

    #[test]
    fn saves_from_many_writers_at_once_keep_every_record() {
        let path = scratch("concurrent");
        let writers: Vec<_> = (0..8)
            .map(|w| {
                let path = path.clone();
                thread::spawn(move || {
                    // A store each, as separate processes would have.
                    let mut store = FileStore { path };
                    for i in 0..12 {
                        store.save(&format!("w{w} r{i}"), &Json::Int(i)).unwrap();
                    }
                })
            })
            .collect();
        for writer in writers {
            writer.join().unwrap();
        }
        let mut store = FileStore { path: path.clone() };
        for w in 0..8 {
            for i in 0..12 {
                assert_eq!(store.load(&format!("w{w} r{i}")).unwrap(), Some(Json::Int(i)), "w{w} r{i}");
            }
        }
        fs::remove_file(&path).unwrap();
        let _ = fs::remove_file(format!("{}.lock", path.display()));
    }

    #[test]
    fn a_store_others_can_write_is_refused_saying_how_to_fix_it() {
        let path = scratch("wide");
        fs::write(&path, "{}").unwrap();
        fs::set_permissions(&path, fs::Permissions::from_mode(0o664)).unwrap();
        let mut store = FileStore { path: path.clone() };
        let e = store.load("k").unwrap_err().to_string();
        assert_eq!(
            e,
            format!("mcp: the token store {0} can be written by others (mode 664), who could steer every login through it; run chmod 600 {0}", path.display())
        );
        fs::remove_file(path).unwrap();
    }

    #[test]
    fn a_fifo_at_the_store_or_its_lock_is_refused_without_waiting_for_a_writer() {
        let fifo = |path: &PathBuf| {
            let name = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
            // SAFETY: a valid C string for the path.
            assert_eq!(unsafe { libc::mkfifo(name.as_ptr(), 0o600) }, 0);
        };
        let path = scratch("fifo");
        fifo(&path);
        let mut store = FileStore { path: path.clone() };
        let e = store.load("k").unwrap_err().to_string();
        assert!(e.ends_with("is not a regular file; set opts.auth.store to a file's path"), "{e}");
        fs::remove_file(&path).unwrap();
        let lock = PathBuf::from(format!("{}.lock", path.display()));
        let _ = fs::remove_file(&lock);
        fifo(&lock);
        let e = store.save("k", &Json::Int(1)).unwrap_err().to_string();
        assert!(e.ends_with("is not a regular file"), "{e}");
        fs::remove_file(&lock).unwrap();
    }

    #[test]
    fn a_file_that_is_not_a_store_is_refused_and_left_alone() {
        let path = scratch("foreign");
        fs::write(&path, "not json").unwrap();
        let mut store = FileStore { path: path.clone() };
        let e = store.save("k", &Json::Null).unwrap_err().to_string();
        assert!(e.ends_with("is not a JSON object of saved logins; delete it (the next login writes it anew) or set opts.auth.store to another path"), "{e}");
        assert_eq!(fs::read_to_string(&path).unwrap(), "not json");
        fs::remove_file(path).unwrap();
    }
}
