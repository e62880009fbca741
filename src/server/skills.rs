//! Skills (SEP-2640, the `io.modelcontextprotocol/skills` extension): a
//! server offers folders of instructions an agent loads when a task calls
//! for them. Each is a `SKILL.md` (YAML frontmatter with at least a name
//! and a description, then Markdown) and the files beside it, read as
//! resources under `skill://AUTHORITY/NAME/`. `skills/list` and
//! `skills/get` describe each with its frontmatter and every file's
//! SHA-256 digest and size, so a client can verify what it reads before
//! it hands any of it to a model.
//!
//! The frontmatter is written from the holder's table (no YAML is read):
//! plain strings as they are, anything else as JSON, which YAML reads as
//! the same values, so the `SKILL.md` a client parses says exactly what
//! the listing says.

use sha2::{Digest, Sha256};

use crate::codec::{encode, Json};

pub use crate::protocol::SKILLS_EXTENSION as EXTENSION;

/// The most files one skill holds, and their bytes in all: the
/// extension's limits.
const MAX_FILES: usize = 512;
const MAX_BYTES: usize = 16 << 20;

struct File {
    uri: Vec<u8>,
    bytes: Vec<u8>,
    mime_type: &'static str,
}

pub struct Skill {
    uri: Vec<u8>,
    frontmatter: Json,
    description: Json,
    name: String,
    files: Vec<File>,
}

/// Why a skill was refused.
pub type Refusal = String;

/// Whether `name` is a skill's name: lower-case letters, digits and
/// single hyphens inside, 1 to 64 characters.
fn is_name(name: &str) -> bool {
    let bytes = name.as_bytes();
    (1..=64).contains(&bytes.len())
        && bytes.iter().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
        && !name.starts_with('-')
        && !name.ends_with('-')
        && !name.contains("--")
}

/// A server's name as the authority of its skills' URIs.
pub fn authority(server_name: &str) -> String {
    let cleaned: String = server_name
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '.' { c.to_ascii_lowercase() } else { '-' })
        .collect();
    if cleaned.trim_matches('-').is_empty() {
        "server".into()
    } else {
        cleaned
    }
}

impl Skill {
    /// A skill from its frontmatter (an object with `name` and
    /// `description`), the Markdown after it, and the files beside it
    /// (relative path, bytes).
    pub fn new(
        authority: &str,
        frontmatter: Json,
        body: &[u8],
        files: Vec<(String, Vec<u8>)>,
    ) -> Result<Skill, Refusal> {
        let name = match frontmatter.get("name") {
            Some(Json::Str(name)) => String::from_utf8_lossy(name).into_owned(),
            _ => return Err("its frontmatter needs a name".into()),
        };
        if !is_name(&name) {
            return Err(format!(
                "its name {name:?} must be 1 to 64 lower-case letters, digits and single hyphens inside"
            ));
        }
        let description = match frontmatter.get("description") {
            Some(Json::Str(d)) if !d.is_empty() => Json::Str(d.clone()),
            _ => return Err("its frontmatter needs a description".into()),
        };
        let dir = format!("skill://{authority}/{name}");
        let uri = format!("{dir}/SKILL.md").into_bytes();
        let mut text = b"---\n".to_vec();
        text.extend_from_slice(&frontmatter_text(&frontmatter));
        text.extend_from_slice(b"---\n");
        text.extend_from_slice(body);
        let mut all = vec![File { uri: uri.clone(), bytes: text, mime_type: "text/markdown" }];
        for (path, bytes) in files {
            if path.is_empty()
                || path.starts_with('/')
                || path.split('/').any(|p| p.is_empty() || p == "." || p == "..")
            {
                return Err(format!("its file {path:?} must be a relative path inside the skill"));
            }
            if path == "SKILL.md" {
                return Err("SKILL.md is made from the frontmatter and body".into());
            }
            all.push(File { uri: format!("{dir}/{path}").into_bytes(), bytes, mime_type: mime_type_of(&path) });
        }
        if all.len() > MAX_FILES || all.iter().map(|f| f.bytes.len()).sum::<usize>() > MAX_BYTES {
            return Err(format!("a skill holds at most {MAX_FILES} files and {MAX_BYTES} bytes"));
        }
        Ok(Skill { uri, frontmatter, description, name, files: all })
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// Its entry in `skills/list` and `skills/get`.
    pub fn entry(&self) -> Json {
        let resources = self
            .files
            .iter()
            .map(|f| {
                let digest: String = Sha256::digest(&f.bytes).iter().map(|b| format!("{b:02x}")).collect();
                Json::object([
                    ("digest", Json::str(format!("sha256:{digest}"))),
                    ("size", Json::Int(f.bytes.len() as i64)),
                    ("uri", Json::Str(f.uri.clone())),
                ])
            })
            .collect();
        Json::object([
            ("frontmatter", self.frontmatter.clone()),
            ("resources", Json::Array(resources)),
            ("uri", Json::Str(self.uri.clone())),
        ])
    }

    /// Its SKILL.md as `resources/list` shows it.
    pub fn listed(&self) -> Json {
        Json::object([
            ("description", self.description.clone()),
            ("mimeType", Json::str("text/markdown")),
            ("name", Json::str(&self.name)),
            ("uri", Json::Str(self.uri.clone())),
        ])
    }

    /// The contents of its file at `uri`, if it has one there.
    pub fn read(&self, uri: &[u8]) -> Option<Json> {
        let file = self.files.iter().find(|f| f.uri == uri)?;
        let body = match std::str::from_utf8(&file.bytes) {
            Ok(_) => ("text", Json::Str(file.bytes.clone())),
            Err(_) => {
                use base64::Engine;
                ("blob", Json::str(base64::engine::general_purpose::STANDARD.encode(&file.bytes)))
            }
        };
        let item = Json::object([body, ("mimeType", Json::str(file.mime_type)), ("uri", Json::Str(file.uri.clone()))]);
        Some(Json::Array(vec![item]))
    }

    pub fn uri(&self) -> &[u8] {
        &self.uri
    }
}

/// The frontmatter's YAML, one `key: value` line each: a plain string
/// bare when YAML would read it back as that string, anything else as
/// its JSON (a double-quoted string, a number, a flow mapping).
fn frontmatter_text(frontmatter: &Json) -> Vec<u8> {
    let mut out = Vec::new();
    let Json::Object(pairs) = frontmatter.clone().into_tree() else { return out };
    for (key, value) in pairs {
        let key_json = Json::Str(key.clone());
        if is_plain(&key) {
            out.extend_from_slice(&key);
        } else {
            out.extend_from_slice(&encode(&key_json));
        }
        out.extend_from_slice(b": ");
        match &value {
            Json::Str(s) if is_plain(s) => out.extend_from_slice(s),
            other => out.extend_from_slice(&encode(other)),
        }
        out.push(b'\n');
    }
    out
}

/// Text YAML reads back as the same string when written bare.
fn is_plain(text: &[u8]) -> bool {
    let Ok(text) = std::str::from_utf8(text) else { return false };
    let safe = text.bytes().all(|b| b.is_ascii_alphanumeric() || b" _-.,()/".contains(&b));
    let starts_well = text.bytes().next().is_some_and(|b| b.is_ascii_alphabetic());
    let lower = text.to_ascii_lowercase();
    let special = ["true", "false", "yes", "no", "on", "off", "null", "y", "n"].contains(&lower.as_str());
    safe && starts_well && !special && !text.ends_with(' ')
}

fn mime_type_of(path: &str) -> &'static str {
    match path.rsplit('.').next().unwrap_or("") {
        "md" => "text/markdown",
        "txt" => "text/plain",
        "json" => "application/json",
        "py" => "text/x-python",
        "lua" => "text/x-lua",
        "sh" => "text/x-shellscript",
        _ => "application/octet-stream",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::decode;

    #[test]
    fn a_skill_lists_every_file_with_the_digest_and_size_of_the_bytes_read() {
        let front = decode(br#"{"name":"lua-style","description":"How Lua is written here","version":2}"#).unwrap();
        let skill =
            Skill::new("notes", front, b"# Style\n", vec![("references/idioms.md".into(), b"x".to_vec())]).unwrap();
        let entry = String::from_utf8(encode(&skill.entry())).unwrap();
        assert!(entry.contains(r#""uri":"skill://notes/lua-style/SKILL.md""#), "{entry}");
        // sha256("x")
        assert!(entry.contains("sha256:2d711642b726b04401627ca9fbac32f5c8530fb1903cc4db02258717921a4881"), "{entry}");
        let text = skill.read(b"skill://notes/lua-style/SKILL.md").unwrap();
        let text = String::from_utf8(encode(&text)).unwrap();
        assert!(
            text.contains(r#"---\nname: lua-style\ndescription: How Lua is written here\nversion: 2\n---\n# Style\n"#),
            "{text}"
        );
    }

    #[test]
    fn names_and_paths_that_break_the_rules_are_refused() {
        let front = |name: &str| decode(format!(r#"{{"name":"{name}","description":"d"}}"#).as_bytes()).unwrap();
        assert!(Skill::new("a", front("Bad--Name"), b"", vec![]).is_err());
        assert!(Skill::new("a", front("ok"), b"", vec![("../etc/passwd".into(), vec![])]).is_err());
        assert!(Skill::new("a", front("ok"), b"", vec![]).is_ok());
    }
}
