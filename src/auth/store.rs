//! Where tokens outlive the process: `opts.auth.store`, a file or the
//! caller's own `load` / `save`. A record is keyed by the authorization
//! server's issuer and the resource (the MCP server), so one store serves
//! many servers, and a token is never offered to a server it was not
//! issued for.
//!
//! A record holds the client registration (its secret too, when the
//! server gave one) and the tokens. The file is therefore created
//! readable by its owner only (0600), and rewritten through a new file
//! that replaces it, so a reader never sees half a record and a crash
//! never leaves one.

use std::fs::{self, OpenOptions};
use std::io::{ErrorKind, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;

use crate::auth::pkce::random_text;
use crate::codec::{self, Json};
use crate::error::{Error, Result};

/// What keeps records: see the module doc.
pub trait Store {
    fn load(&mut self, key: &str) -> Result<Option<Json>>;
    fn save(&mut self, key: &str, record: &Json) -> Result<()>;
}

/// The key a record is kept under.
pub fn key(issuer: &str, resource: &str) -> String {
    format!("{issuer} {resource}")
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
        let text = match fs::read(&self.path) {
            Ok(text) => text,
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => {
                return Err(Error::BadInput(format!("mcp: cannot read the token store {}: {e}", self.describe())))
            }
        };
        match codec::decode(&text) {
            Ok(Json::Object(pairs)) => Ok(pairs),
            _ => Err(Error::BadInput(format!(
                "mcp: the token store {} is not a JSON object of saved logins; delete it (the next login writes it anew) or set opts.auth.store to another path",
                self.describe()
            ))),
        }
    }
}

impl Store for FileStore {
    fn load(&mut self, key: &str) -> Result<Option<Json>> {
        let pairs = self.read_all()?;
        Ok(pairs.into_iter().find(|(k, _)| k == key.as_bytes()).map(|(_, v)| v))
    }

    fn save(&mut self, key: &str, record: &Json) -> Result<()> {
        let mut pairs = self.read_all()?;
        pairs.retain(|(k, _)| k != key.as_bytes());
        pairs.push((key.as_bytes().to_vec(), record.clone()));
        let text = codec::encode(&Json::Object(pairs));
        let fail =
            |e: std::io::Error| Error::BadInput(format!("mcp: cannot write the token store {}: {e}", self.describe()));
        // A new file of a random name, never one that is there already (a
        // leftover, or one planted beside the store with wider rights) and
        // never through a symbolic link.
        let mut temporary = self.path.clone().into_os_string();
        temporary.push(format!(".{}.tmp", random_text(9)?));
        let temporary = PathBuf::from(temporary);
        let written = (|| {
            let mut file = OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .custom_flags(libc::O_NOFOLLOW)
                .open(&temporary)?;
            file.write_all(&text)?;
            file.sync_all()?;
            fs::rename(&temporary, &self.path)
        })();
        if written.is_err() {
            let _ = fs::remove_file(&temporary);
        }
        written.map_err(fail)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

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
