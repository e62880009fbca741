//! Verdicts remembered per server (its command line, or its URL), in the
//! process and in a small file under the user's cache directory, so that
//! the next process asks a legacy server nothing it does not know.
//!
//! The file is `$XDG_CACHE_HOME/lua-mcp/eras.json` (else
//! `~/.cache/lua-mcp/eras.json`; on Windows
//! `%LOCALAPPDATA%\lua-mcp\eras.json`): a JSON array of `[server, verdict]`
//! pairs, most recent last, at most [`KEPT`] of them, where a verdict is
//! `"legacy"` or the modern version spoken. A server is named there by the
//! SHA-256 of its name: command lines, their environment and URLs may
//! hold secrets (a token in an argument or a query), and nothing needs
//! them back. The file is its owner's alone all the same (0600 in a 0700
//! directory; on Windows, an access list that admits this user alone),
//! and only believed as the token store is: when this user owns it and
//! nobody else can write it (a verdict planted by another user would make
//! every client ask that server the wrong way first).
//! It is a cache: a file that cannot be read or written costs a probe,
//! never a connection, and one larger than [`MAX_BYTES`] (far more than
//! [`KEPT`] entries take) is taken for corrupt rather than read whole.
//! Writes go to a new file renamed over the old one (another process may
//! be reading it), under the lock beside it that the token store takes:
//! without it, 2 × 24 processes recording verdicts at once lost up to 14
//! of 48, each lost one costing its server a probe (up to a second on a
//! silent server) in the next process.

use std::collections::HashMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use super::Verdict;
use crate::codec::{self, Json};
use crate::private_file::{self, check_trusted};

/// Servers remembered in the file at most: the oldest go first.
const KEPT: usize = 256;

/// The largest file read: an entry takes under 90 bytes, so [`KEPT`] of
/// them fit in a quarter of this.
const MAX_BYTES: u64 = 96 << 10;

/// How long an update waits for another process's: each holds the lock
/// for a read and a rename, and a verdict not written costs only a probe.
/// Short, since the wait is on whatever thread finished the handshake,
/// an event loop's among them.
const LOCK_WAIT: Duration = Duration::from_millis(500);

/// The process's verdicts, and whether the file was read into them.
static KNOWN: Mutex<Option<HashMap<String, Verdict>>> = Mutex::new(None);

fn with_known<T>(work: impl FnOnce(&mut HashMap<String, Verdict>) -> T) -> T {
    let mut known = KNOWN.lock().unwrap_or_else(|p| p.into_inner());
    let map = known.get_or_insert_with(|| read_file().into_iter().collect());
    work(map)
}

/// What `server` was last found to speak, if it was found out before.
pub fn recall(server: &str) -> Option<Verdict> {
    let server = hashed(server);
    with_known(|known| known.get(&server).cloned())
}

/// A server's name as the file keeps it.
fn hashed(server: &str) -> String {
    use sha2::{Digest, Sha256};
    Sha256::digest(server.as_bytes()).iter().map(|b| format!("{b:02x}")).collect()
}

/// Remembers `verdict` for `server` (None forgets it: the server no
/// longer answers the way it did). The file is written only when the
/// verdict changed.
pub fn remember(server: &str, verdict: Option<Verdict>) {
    let server = &hashed(server);
    let changed = with_known(|known| match &verdict {
        Some(v) => known.insert(server.to_string(), v.clone()).as_ref() != Some(v),
        None => known.remove(server).is_some(),
    });
    if changed {
        write_file(server, verdict.as_ref());
    }
}

#[cfg(windows)]
fn path() -> Option<PathBuf> {
    // Per user and per machine, as caches are on Windows.
    let base = PathBuf::from(std::env::var_os("LOCALAPPDATA")?);
    base.is_absolute().then(|| base.join("lua-mcp").join("eras.json"))
}

#[cfg(unix)]
fn path() -> Option<PathBuf> {
    // XDG asks that a relative XDG_CACHE_HOME be ignored.
    let base = match std::env::var_os("XDG_CACHE_HOME").map(PathBuf::from) {
        Some(dir) if dir.is_absolute() => dir,
        _ => PathBuf::from(std::env::var_os("HOME")?).join(".cache"),
    };
    Some(base.join("lua-mcp").join("eras.json"))
}

fn read_file() -> Vec<(String, Verdict)> {
    path().map(|p| read_pairs(&p)).unwrap_or_default()
}

fn read_pairs(path: &Path) -> Vec<(String, Verdict)> {
    // Not blocking on a FIFO planted at the path, never through a link.
    let Ok(mut file) = private_file::open_to_read(path, false) else {
        return Vec::new();
    };
    let believed = check_trusted(&file).is_ok();
    let mut text = Vec::new();
    // One byte past the bound tells a file that is too large.
    if !believed || (&mut file).take(MAX_BYTES + 1).read_to_end(&mut text).is_err() || text.len() as u64 > MAX_BYTES {
        return Vec::new();
    }
    let Ok(Json::Array(entries)) = codec::decode(&text) else { return Vec::new() };
    entries.iter().filter_map(entry).collect()
}

fn entry(pair: &Json) -> Option<(String, Verdict)> {
    let mut parts = pair.elements();
    let (Some(Json::Str(server)), Some(Json::Str(verdict))) = (parts.next(), parts.next()) else { return None };
    let verdict = match verdict.as_slice() {
        b"legacy" => Verdict::Legacy,
        v if crate::protocol::is_modern_version(v) => Verdict::Modern(String::from_utf8_lossy(v).into_owned()),
        _ => return None,
    };
    Some((String::from_utf8(server.clone()).ok()?, verdict))
}

/// Writes the file anew with `server`'s verdict last (or gone), keeping
/// what other processes wrote meanwhile.
fn write_file(server: &str, verdict: Option<&Verdict>) {
    let Some(path) = path() else { return };
    let Some(dir) = path.parent() else { return };
    if private_file::create_private_dir(dir).is_err() {
        return;
    }
    let Ok(_lock) = private_file::lock_beside(&path, LOCK_WAIT) else { return };
    let mut pairs = read_pairs(&path);
    pairs.retain(|(s, _)| s != server);
    if let Some(verdict) = verdict {
        pairs.push((server.to_string(), verdict.clone()));
    }
    let skip = pairs.len().saturating_sub(KEPT);
    let entries = pairs.into_iter().skip(skip).map(|(server, verdict)| {
        let verdict = match verdict {
            Verdict::Legacy => "legacy".to_string(),
            Verdict::Modern(version) => version,
        };
        Json::Array(vec![Json::str(server), Json::str(verdict)])
    });
    let text = codec::encode(&Json::Array(entries.collect()));
    let _ = private_file::replace(&path, &text, false);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    #[test]
    fn verdicts_survive_in_the_file_most_recent_last() {
        let dir = std::env::temp_dir().join(format!("lua-mcp-eras-{}", std::process::id()));
        let file = dir.join("eras.json");
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        fs::write(&file, br#"[["a","legacy"],["b","2026-07-28"],["c","1999-01-01"],"junk"]"#).unwrap();
        let pairs = read_pairs(&file);
        assert_eq!(pairs, vec![("a".into(), Verdict::Legacy), ("b".into(), Verdict::Modern("2026-07-28".into()))]);
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_file_others_can_write_or_larger_than_the_bound_is_not_believed() {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("lua-mcp-eras-trust-{}", std::process::id()));
        let file = dir.join("eras.json");
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        fs::write(&file, br#"[["a","legacy"]]"#).unwrap();
        fs::set_permissions(&file, fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(read_pairs(&file).len(), 1);
        fs::set_permissions(&file, fs::Permissions::from_mode(0o666)).unwrap();
        assert_eq!(read_pairs(&file), vec![]);
        let mut big = br#"[["a","legacy"]"#.to_vec();
        big.resize(MAX_BYTES as usize + 10, b' ');
        big.push(b']');
        fs::write(&file, &big).unwrap();
        fs::set_permissions(&file, fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(read_pairs(&file), vec![]);
        let _ = fs::remove_dir_all(&dir);
    }
}
