//! Output caps for `mcp.mount(..., {max_output = BYTES})`: a tool result
//! past the cap would fill a model's context (a directory listing, a log,
//! a page of HTML run to megabytes), so the model gets its head and tail
//! within the cap and a line saying how much was cut and how to read the
//! rest, and the whole goes to a private file the model pages through
//! with `mcp_read_output`. Cuts never fall inside a UTF-8 character.
//!
//! The files are 0600 in a 0700 folder of the process's own, removed
//! when the client whose tool made them closes, when the holder (the
//! registry's record) is collected, and oldest first once they hold more
//! than [`KEPT_BYTES`] in all.

use std::collections::VecDeque;
use std::fs;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::PathBuf;

use crate::private_file;

/// The smallest cap: the line that says what was cut takes about 200.
pub const MIN_CAP: usize = 512;

/// What the files of one holder may take in all before the oldest go.
pub const KEPT_BYTES: u64 = 256 << 20;

struct Kept {
    id: String,
    path: PathBuf,
    size: u64,
    /// Whose tool made it (see [`Outputs::forget_owner`]).
    owner: usize,
}

/// The whole outputs of one holder, on disk.
#[derive(Default)]
pub struct Outputs {
    dir: Option<PathBuf>,
    kept: VecDeque<Kept>,
    total: u64,
    made: u64,
}

impl Outputs {
    /// `text` as the model gets it under `cap`: itself when it fits;
    /// otherwise its head and tail around a line naming the output the
    /// whole was kept as. `owner` is whose tool it came from.
    pub fn cap(&mut self, text: &[u8], cap: usize, owner: usize) -> std::io::Result<Vec<u8>> {
        if text.len() <= cap {
            return Ok(text.to_vec());
        }
        let id = self.keep(text, owner)?;
        let budget = cap.saturating_sub(220);
        let head = char_start(text, budget * 2 / 3);
        let tail = char_end(text, text.len() - (budget - head).min(text.len() - head));
        let note = format!(
            "\n[... {} of {} bytes cut here (bytes {} to {}); the whole is output {id}: read on with mcp_read_output {{id = \"{id}\", offset = {head}}} ...]\n",
            tail - head,
            text.len(),
            head,
            tail
        );
        Ok([&text[..head], note.as_bytes(), &text[tail..]].concat())
    }

    /// Up to `length` bytes of output `id` from `offset` (cut back to a
    /// character boundary), with a line saying where the next page
    /// starts; None when there is no such output (any more).
    pub fn read(&self, id: &str, offset: u64, length: usize) -> std::io::Result<Option<Vec<u8>>> {
        let Some(kept) = self.kept.iter().find(|k| k.id == id) else { return Ok(None) };
        let mut file = fs::File::open(&kept.path)?;
        let offset = offset.min(kept.size);
        file.seek(SeekFrom::Start(offset))?;
        // Three bytes past the page show whether its end cuts a character.
        let mut page = Vec::with_capacity(length.saturating_add(3).min(kept.size as usize));
        file.take(length as u64 + 3).read_to_end(&mut page)?;
        // A page that starts inside a character begins at its next one,
        // and one that would end inside one ends before it.
        let skip = page.iter().take(3).take_while(|&&b| b & 0xC0 == 0x80).count();
        let end = char_start(&page, length.min(page.len()));
        let (start, end) = (skip.min(end), end);
        let next = offset + end as u64;
        let mut out = page[start..end].to_vec();
        let footer = if next < kept.size {
            format!("\n[bytes {} to {next} of {}; next page: offset = {next}]", offset + start as u64, kept.size)
        } else {
            format!("\n[bytes {} to {next} of {}: the end]", offset + start as u64, kept.size)
        };
        out.extend_from_slice(footer.as_bytes());
        Ok(Some(out))
    }

    /// Removes the outputs a client's tools made (the client closed).
    pub fn forget_owner(&mut self, owner: usize) {
        let (gone, kept): (Vec<Kept>, Vec<Kept>) = self.kept.drain(..).partition(|k| k.owner == owner);
        self.kept = kept.into();
        for k in gone {
            self.total -= k.size;
            let _ = fs::remove_file(&k.path);
        }
    }

    pub fn count(&self) -> usize {
        self.kept.len()
    }

    fn keep(&mut self, text: &[u8], owner: usize) -> std::io::Result<String> {
        let dir = match &self.dir {
            Some(dir) => dir.clone(),
            None => {
                // An empty or relative TMPDIR would put the folder where
                // the process happens to be: the system's own then.
                let base = Some(std::env::temp_dir()).filter(|d| d.is_absolute()).unwrap_or_else(|| "/tmp".into());
                let dir = base.join(format!(
                    "lua-mcp-output-{}-{}",
                    std::process::id(),
                    crate::auth::pkce::random_text(6).map_err(|e| std::io::Error::other(e.to_string()))?
                ));
                private_file::create_private_dir(&dir)?;
                self.dir = Some(dir.clone());
                dir
            }
        };
        self.made += 1;
        let id = format!("out-{}", self.made);
        let path = dir.join(&id);
        let mut file = fs::OpenOptions::new().write(true).create_new(true).open(&path)?;
        private_file::make_private(&file)?;
        file.write_all(text)?;
        self.kept.push_back(Kept { id: id.clone(), path, size: text.len() as u64, owner });
        self.total += text.len() as u64;
        while self.total > KEPT_BYTES && self.kept.len() > 1 {
            if let Some(old) = self.kept.pop_front() {
                self.total -= old.size;
                let _ = fs::remove_file(&old.path);
            }
        }
        Ok(id)
    }
}

impl Drop for Outputs {
    fn drop(&mut self) {
        for k in self.kept.drain(..) {
            let _ = fs::remove_file(&k.path);
        }
        if let Some(dir) = &self.dir {
            let _ = fs::remove_dir(dir);
        }
    }
}

/// The largest `at <= want` that starts a character.
fn char_start(text: &[u8], want: usize) -> usize {
    let mut at = want.min(text.len());
    while at > 0 && at < text.len() && text[at] & 0xC0 == 0x80 {
        at -= 1;
    }
    at
}

/// The smallest `at >= want` that starts a character.
fn char_end(text: &[u8], want: usize) -> usize {
    let mut at = want.min(text.len());
    while at < text.len() && text[at] & 0xC0 == 0x80 {
        at += 1;
    }
    at
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_text_past_the_cap_keeps_head_and_tail_and_names_the_whole() {
        let mut outputs = Outputs::default();
        let text: Vec<u8> = "é".repeat(5000).into_bytes();
        let capped = outputs.cap(&text, 1000, 1).unwrap();
        assert!(capped.len() <= 1000, "{}", capped.len());
        let capped = String::from_utf8(capped).expect("never cut inside a character");
        assert!(capped.contains("the whole is output out-1"), "{capped}");
        assert!(capped.starts_with('é') && capped.ends_with('é'));
        assert_eq!(outputs.cap(b"short", 1000, 1).unwrap(), b"short");
        let page = String::from_utf8(outputs.read("out-1", 1, 11).unwrap().unwrap()).unwrap();
        assert_eq!(page, "ééééé\n[bytes 2 to 12 of 10000; next page: offset = 12]");
        let cut = String::from_utf8(outputs.read("out-1", 0, 5).unwrap().unwrap()).unwrap();
        assert_eq!(cut, "éé\n[bytes 0 to 4 of 10000; next page: offset = 4]");
        let last = String::from_utf8(outputs.read("out-1", 9996, 100).unwrap().unwrap()).unwrap();
        assert_eq!(last, "éé\n[bytes 9996 to 10000 of 10000: the end]");
        assert!(outputs.read("out-9", 0, 10).unwrap().is_none());
    }

    #[test]
    fn files_are_private_and_go_with_their_client_or_their_holder() {
        let mut outputs = Outputs::default();
        outputs.cap(&[b'x'; 4000], 1000, 1).unwrap();
        outputs.cap(&[b'y'; 4000], 1000, 2).unwrap();
        let dir = outputs.dir.clone().unwrap();
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            assert_eq!(fs::metadata(dir.join("out-1")).unwrap().permissions().mode() & 0o777, 0o600);
            assert_eq!(fs::metadata(&dir).unwrap().permissions().mode() & 0o777, 0o700);
        }
        outputs.forget_owner(1);
        assert!(!dir.join("out-1").exists() && dir.join("out-2").exists());
        drop(outputs);
        assert!(!dir.exists());
    }
}
