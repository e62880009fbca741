//! Skills (SEP-2640) as a client loads them: `skills/list` describes each
//! skill with its frontmatter and every file's SHA-256 digest and size;
//! nothing is read until the holder loads a skill (the extension forbids
//! fetching ahead of need); a file read is handed over only once its size
//! and digest match the listing, and a `SKILL.md` only once its YAML
//! frontmatter says, field by field, what the listing said. A server can
//! change a file between listing and reading (or a man in the middle can):
//! the listing is what the host approved, so anything else is refused.
//!
//! The frontmatter is read by a small YAML reader of the forms skill
//! frontmatter uses (mappings, sequences, plain, quoted and block scalars,
//! JSON-style flow values); anything else refuses the skill, which is the
//! safe way to fail here. A YAML crate would read more, at a size cost the
//! module is trying to shed for one header.

use sha2::{Digest, Sha256};

use crate::codec::{self, Json};
use crate::error::{Error, Result};

/// A file of a skill as the listing described it.
#[derive(Clone, Debug, PartialEq)]
pub struct SkillFile {
    pub uri: Vec<u8>,
    digest: [u8; 32],
    size: u64,
}

/// A skill as the last `skills/list` described it.
#[derive(Clone, Debug, PartialEq)]
struct Skill {
    uri: Vec<u8>,
    name: Vec<u8>,
    frontmatter: Json,
    files: Vec<SkillFile>,
}

/// What a read is checked against before it is handed over.
#[derive(Clone, Debug, PartialEq)]
pub struct Check {
    file: SkillFile,
    /// The skill, when the file is its `SKILL.md`: its frontmatter is
    /// compared and the result describes the skill.
    skill: Option<Box<Skill>>,
}

/// The skills of the server's last listing (well-formed entries only),
/// and those loaded since: a skill's other files are read only once its
/// `SKILL.md` passed, never after it failed (nor ahead of it).
#[derive(Default)]
pub struct Skills {
    listed: Vec<Skill>,
    loaded: Vec<Skill>,
}

impl Skills {
    /// Takes the entries of every page of a `skills/list`.
    pub fn learn(&mut self, pages: &[Json]) {
        self.listed = pages
            .iter()
            .filter_map(|page| match page.get("skills") {
                Some(Json::Array(entries)) => Some(entries.iter().filter_map(entry)),
                _ => None,
            })
            .flatten()
            .collect();
        // A skill listed anew as it was stays loaded; a changed one is
        // loaded again before its files are read.
        let listed = &self.listed;
        self.loaded.retain(|skill| listed.contains(skill));
    }

    /// A `SKILL.md` passed its check: the skill's files may be read.
    pub fn passed(&mut self, check: &Check) {
        if let Some(skill) = &check.skill {
            if !self.loaded.contains(skill) {
                self.loaded.push((**skill).clone());
            }
        }
    }

    /// What reading `path` of the skill named `name` (its name or its
    /// `SKILL.md` URI) must be checked against, and the URI to read:
    /// `SKILL.md` when `path` is none.
    pub fn check(&self, name: &[u8], path: Option<&[u8]>) -> Result<(Vec<u8>, Check)> {
        let said = || String::from_utf8_lossy(name).into_owned();
        let skill = self
            .listed
            .iter()
            .find(|s| s.name == name || s.uri == name)
            .ok_or_else(|| Error::SkillNotListed { name: said() })?;
        let uri = match path {
            None => skill.uri.clone(),
            Some(path) => [directory(&skill.uri), path].concat(),
        };
        let file = skill.files.iter().find(|f| f.uri == uri).cloned().ok_or_else(|| Error::SkillFileNotListed {
            name: said(),
            path: String::from_utf8_lossy(path.unwrap_or(b"SKILL.md")).into_owned(),
        })?;
        if uri != skill.uri && !self.loaded.contains(skill) {
            return Err(Error::SkillNotLoaded { name: said() });
        }
        let skill = (uri == skill.uri).then(|| Box::new(skill.clone()));
        Ok((uri, Check { file, skill }))
    }
}

/// A listing's entry, when it has what loading needs: a `skill://` URI
/// ending in `SKILL.md`, a frontmatter object with a name, and files
/// with `sha256:` digests and sizes, its `SKILL.md` among them.
fn entry(item: &Json) -> Option<Skill> {
    let Some(Json::Str(uri)) = item.get("uri") else { return None };
    let frontmatter = item.get("frontmatter")?.clone().into_tree();
    let Some(Json::Str(name)) = frontmatter.get("name").cloned() else { return None };
    let Some(Json::Array(resources)) = item.get("resources") else { return None };
    let files: Vec<SkillFile> = resources.iter().map(file).collect::<Option<_>>()?;
    let well_formed = uri.starts_with(b"skill://") && uri.ends_with(b"/SKILL.md");
    (well_formed && files.iter().any(|f| f.uri == *uri)).then(|| Skill { uri: uri.clone(), name, frontmatter, files })
}

fn file(item: &Json) -> Option<SkillFile> {
    let (Some(Json::Str(uri)), Some(Json::Str(digest)), Some(Json::Int(size))) =
        (item.get("uri"), item.get("digest"), item.get("size"))
    else {
        return None;
    };
    let hex = digest.strip_prefix(b"sha256:")?;
    if hex.len() != 64 || *size < 0 {
        return None;
    }
    let mut bytes = [0u8; 32];
    for (i, pair) in hex.chunks(2).enumerate() {
        bytes[i] = u8::from_str_radix(std::str::from_utf8(pair).ok()?, 16).ok()?;
    }
    Some(SkillFile { uri: uri.clone(), digest: bytes, size: *size as u64 })
}

/// `skill://a/b/SKILL.md` -> `skill://a/b/`.
fn directory(skill_uri: &[u8]) -> &[u8] {
    &skill_uri[..skill_uri.len() - "SKILL.md".len()]
}

/// A `resources/read` result checked as `check` says: the file's bytes
/// (a Lua string), or for a `SKILL.md` the loaded skill.
pub fn verified(check: &Check, result: &Json) -> Result<Json> {
    let uri = String::from_utf8_lossy(&check.file.uri).into_owned();
    let refuse = |why: String| Error::SkillUnverified { uri: uri.clone(), why };
    let bytes = contents(result, &check.file.uri).map_err(refuse)?;
    if bytes.len() as u64 != check.file.size {
        return Err(refuse(format!("{} bytes came where the listing said {}", bytes.len(), check.file.size)));
    }
    if Sha256::digest(&bytes).as_slice() != check.file.digest {
        return Err(refuse("its SHA-256 digest is not the one the listing gave".into()));
    }
    let Some(skill) = &check.skill else { return Ok(Json::Str(bytes)) };
    let text = std::str::from_utf8(&bytes).map_err(|_| refuse("it is not UTF-8 text".into()))?;
    let (frontmatter, body) = split_frontmatter(text).map_err(|why| refuse(format!("its frontmatter {why}")))?;
    let read = yaml::mapping(frontmatter).map_err(|why| refuse(format!("its frontmatter {why}")))?;
    if let Some(field) = differing_field(&skill.frontmatter, &read) {
        return Err(refuse(format!("its frontmatter's {field} is not what the listing said")));
    }
    let files = skill.files.iter().filter(|f| f.uri != skill.uri).map(|f| {
        Json::object([
            ("path", Json::Str(f.uri[directory(&skill.uri).len()..].to_vec())),
            ("size", Json::Int(f.size as i64)),
            ("uri", Json::Str(f.uri.clone())),
        ])
    });
    Ok(Json::object([
        ("body", Json::str(body)),
        ("files", Json::Array(files.collect())),
        ("frontmatter", skill.frontmatter.clone()),
        ("name", Json::Str(skill.name.clone())),
        ("text", Json::Str(bytes)),
        ("uri", Json::Str(skill.uri.clone())),
    ]))
}

/// The bytes of the content item for `uri`: text as it is, a blob decoded.
fn contents(result: &Json, uri: &[u8]) -> std::result::Result<Vec<u8>, String> {
    let Some(Json::Array(items)) = result.get("contents") else { return Err("the read gave no contents".into()) };
    let item = items
        .iter()
        .find(|item| matches!(item.get("uri"), Some(Json::Str(u)) if u == uri))
        .or(if items.len() == 1 { items.first() } else { None })
        .ok_or("the read gave no contents for it")?;
    match (item.get("text"), item.get("blob")) {
        (Some(Json::Str(text)), _) => Ok(text.clone()),
        (_, Some(Json::Str(blob))) => {
            use base64::Engine;
            base64::engine::general_purpose::STANDARD.decode(blob).map_err(|_| "its blob is not base64".into())
        }
        _ => Err("its contents have neither text nor blob".into()),
    }
}

/// The YAML between a `SKILL.md`'s opening `---` line and the next, and
/// the Markdown after.
fn split_frontmatter(text: &str) -> std::result::Result<(&str, &str), String> {
    let rest = text.strip_prefix("---\n").or_else(|| text.strip_prefix("---\r\n")).ok_or("is missing")?;
    let mut at = 0;
    for line in rest.split_inclusive('\n') {
        if line.trim_end() == "---" {
            return Ok((&rest[..at], &rest[at + line.len()..]));
        }
        at += line.len();
    }
    Err("has no closing --- line".into())
}

/// The first field (of the listing's frontmatter or of the file's) whose
/// values differ, if any.
fn differing_field(listed: &Json, read: &Json) -> Option<String> {
    let (Json::Object(a), Json::Object(b)) = (listed, read) else { return Some("shape".into()) };
    let name = |k: &[u8]| String::from_utf8_lossy(k).into_owned();
    for (key, value) in a {
        if !b.iter().any(|(k, v)| k == key && same(value, v)) {
            return Some(name(key));
        }
    }
    b.iter().find(|(k, _)| !a.iter().any(|(key, _)| key == k)).map(|(k, _)| name(k))
}

/// JSON equality with objects as maps and numbers as numbers.
fn same(a: &Json, b: &Json) -> bool {
    match (a, b) {
        (Json::Int(x), Json::Float(y)) | (Json::Float(y), Json::Int(x)) => *x as f64 == *y,
        (Json::Array(x), Json::Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(p, q)| same(p, q)),
        (Json::Object(x), Json::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.iter().any(|(key, w)| key == k && same(v, w)))
        }
        (Json::Raw(_), _) | (_, Json::Raw(_)) => same(&a.clone().into_tree(), &b.clone().into_tree()),
        _ => a == b,
    }
}

/// The YAML skill frontmatter is written in (see the module doc).
mod yaml {
    use super::codec;
    use crate::codec::Json;

    type Parsed<T> = std::result::Result<T, String>;

    struct Line<'a> {
        indent: usize,
        text: &'a str,
        number: usize,
    }

    /// The frontmatter as an object.
    pub fn mapping(text: &str) -> Parsed<Json> {
        let lines: Vec<Line> = text
            .lines()
            .enumerate()
            .filter(|(_, l)| !l.trim().is_empty() && !l.trim_start().starts_with('#'))
            .map(|(i, l)| Line { indent: l.len() - l.trim_start_matches(' ').len(), text: l.trim(), number: i + 1 })
            .collect();
        if lines.iter().any(|l| l.text.contains('\t') && l.indent == 0 && l.text.starts_with('\t')) {
            return Err("is indented with tabs".into());
        }
        let mut at = 0;
        let value = block(&lines, &mut at, 0, 0)?;
        match (value, lines.get(at)) {
            (Json::Object(pairs), None) => Ok(Json::Object(pairs)),
            (_, Some(line)) => Err(format!("has YAML this client does not read (line {})", line.number)),
            _ => Err("is not a mapping".into()),
        }
    }

    /// A block mapping or sequence whose lines are indented `indent`.
    /// How deep mappings and sequences may nest: a server's file must not
    /// recurse the reader off its stack.
    const MAX_DEPTH: usize = 32;

    fn block(lines: &[Line], at: &mut usize, indent: usize, depth: usize) -> Parsed<Json> {
        if depth > MAX_DEPTH {
            return Err(format!("nests past {MAX_DEPTH} levels"));
        }
        let Some(first) = lines.get(*at) else { return Ok(Json::Null) };
        if first.text.starts_with("- ") || first.text == "-" {
            let mut items = Vec::new();
            while let Some(line) = lines.get(*at).filter(|l| l.indent == indent && l.text.starts_with('-')) {
                *at += 1;
                let rest = line.text[1..].trim();
                items.push(if rest.is_empty() {
                    nested(lines, at, indent, depth)?
                } else {
                    scalar(rest, line.number)?
                });
            }
            return Ok(Json::Array(items));
        }
        let mut pairs: Vec<(Vec<u8>, Json)> = Vec::new();
        while let Some(line) = lines.get(*at).filter(|l| l.indent == indent) {
            let (key, rest) = split_key(line.text).ok_or_else(|| format!("line {} is not key: value", line.number))?;
            *at += 1;
            let value = match rest {
                "" => nested(lines, at, indent, depth)?,
                "|" | "|-" | "|+" | ">" | ">-" | ">+" => block_scalar(lines, at, indent, rest),
                _ => scalar(rest, line.number)?,
            };
            if pairs.iter().any(|(k, _)| k == key.as_bytes()) {
                return Err(format!("repeats the key {key:?}"));
            }
            pairs.push((key.into_bytes(), value));
        }
        Ok(Json::Object(pairs))
    }

    /// What follows `key:` on the lines indented deeper (null if none).
    fn nested(lines: &[Line], at: &mut usize, indent: usize, depth: usize) -> Parsed<Json> {
        match lines.get(*at) {
            Some(next) if next.indent > indent => block(lines, at, next.indent, depth + 1),
            // A sequence may sit at its key's own indent.
            Some(next) if next.indent == indent && next.text.starts_with('-') => block(lines, at, indent, depth + 1),
            _ => Ok(Json::Null),
        }
    }

    /// `|` keeps line breaks, `>` folds them into spaces; `-` drops the
    /// final one, `+` keeps them all.
    fn block_scalar(lines: &[Line], at: &mut usize, indent: usize, style: &str) -> Json {
        let mut parts = Vec::new();
        while let Some(line) = lines.get(*at).filter(|l| l.indent > indent) {
            parts.push(line.text);
            *at += 1;
        }
        let mut text = parts.join(if style.starts_with('|') { "\n" } else { " " });
        if !style.ends_with('-') && !parts.is_empty() {
            text.push('\n');
        }
        Json::str(text)
    }

    fn split_key(text: &str) -> Option<(String, &str)> {
        if let Some(quoted) = text.strip_prefix('"') {
            let end = quoted.find("\":")?;
            return Some((quoted[..end].to_string(), quoted[end + 2..].trim()));
        }
        let colon = text.find(": ").or_else(|| text.ends_with(':').then(|| text.len() - 1))?;
        Some((text[..colon].trim().to_string(), text[colon + 1..].trim()))
    }

    /// A flow collection of plain or quoted scalars (`[pdf, forms]`,
    /// `{a: 1, b: x}`), not nested.
    fn flow(text: &str, number: usize) -> Option<Json> {
        let (open, close) = (text.chars().next()?, text.chars().last()?);
        let inner = text.get(1..text.len() - 1)?.trim();
        if inner.contains(['[', ']', '{', '}']) || !matches!((open, close), ('[', ']') | ('{', '}')) {
            return None;
        }
        let items = if inner.is_empty() { Vec::new() } else { inner.split(',').map(str::trim).collect() };
        if open == '[' {
            return items.into_iter().map(|item| scalar(item, number).ok()).collect::<Option<_>>().map(Json::Array);
        }
        let pairs = items.into_iter().map(|item| {
            let (key, value) = split_key(item)?;
            Some((key.into_bytes(), scalar(value, number).ok()?))
        });
        pairs.collect::<Option<_>>().map(Json::Object)
    }

    /// A value on one line: quoted, flow (read as JSON), or plain.
    fn scalar(text: &str, number: usize) -> Parsed<Json> {
        let unreadable = || format!("has a value this client does not read (line {number})");
        if text.starts_with('"') || text.starts_with('[') || text.starts_with('{') {
            if let Ok(json) = codec::decode(text.as_bytes()) {
                return Ok(json.into_tree());
            }
            return flow(text, number).ok_or_else(unreadable);
        }
        if let Some(quoted) = text.strip_prefix('\'') {
            let inner = quoted.strip_suffix('\'').ok_or_else(unreadable)?;
            return Ok(Json::str(inner.replace("''", "'")));
        }
        if text.starts_with(['&', '*', '!', '|', '>', '%', '@', '`']) {
            return Err(unreadable());
        }
        let plain = match text.find(" #") {
            Some(comment) => text[..comment].trim_end(),
            None => text,
        };
        Ok(match plain {
            "null" | "Null" | "NULL" | "~" => Json::Null,
            "true" | "True" | "TRUE" => Json::Bool(true),
            "false" | "False" | "FALSE" => Json::Bool(false),
            _ => match (plain.parse::<i64>(), plain.parse::<f64>()) {
                (Ok(n), _) => Json::Int(n),
                (_, Ok(f)) if f.is_finite() && plain.bytes().any(|b| b.is_ascii_digit()) => Json::Float(f),
                _ => Json::str(plain),
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SKILL_MD: &str =
        "---\nname: pdf-processing\ndescription: Extract, fill, and assemble PDF documents\n---\n\nBody.\n";

    fn digest(bytes: &[u8]) -> String {
        Sha256::digest(bytes).iter().map(|b| format!("{b:02x}")).collect()
    }

    fn listing(skill_md: &str) -> Skills {
        let page = codec::decode(
            format!(
                r#"{{"skills":[{{"uri":"skill://s/pdf-processing/SKILL.md","frontmatter":{{"name":"pdf-processing","description":"Extract, fill, and assemble PDF documents"}},"resources":[{{"uri":"skill://s/pdf-processing/SKILL.md","digest":"sha256:{}","size":{}}},{{"uri":"skill://s/pdf-processing/FORMS.md","digest":"sha256:{}","size":3}}]}},{{"uri":"skill://s/bad/SKILL.md","frontmatter":{{}},"resources":[]}}]}}"#,
                digest(skill_md.as_bytes()),
                skill_md.len(),
                digest(b"abc")
            )
            .as_bytes(),
        )
        .unwrap();
        let mut skills = Skills::default();
        skills.learn(&[page]);
        skills
    }

    fn read(text: &str) -> Json {
        Json::object([(
            "contents",
            Json::Array(vec![Json::object([
                ("uri", Json::str("skill://s/pdf-processing/SKILL.md")),
                ("text", Json::str(text)),
            ])]),
        )])
    }

    #[test]
    fn a_skill_md_that_matches_its_listing_loads_with_its_body_and_files() {
        let skills = listing(SKILL_MD);
        let (uri, check) = skills.check(b"pdf-processing", None).unwrap();
        assert_eq!(uri, b"skill://s/pdf-processing/SKILL.md");
        let mut skills = skills;
        assert_eq!(
            skills.check(b"pdf-processing", Some(b"FORMS.md")).unwrap_err().to_string(),
            "the skill pdf-processing is not loaded: call client:get_skill first (a skill's files are read only once its SKILL.md passed its checks)"
        );
        let loaded = verified(&check, &read(SKILL_MD)).unwrap();
        skills.passed(&check);
        assert_eq!(loaded.get("body"), Some(&Json::str("\nBody.\n")));
        let Some(Json::Array(files)) = loaded.get("files") else { panic!("no files") };
        assert_eq!(files[0].get("path"), Some(&Json::str("FORMS.md")));
        let (uri, check) = skills.check(b"pdf-processing", Some(b"FORMS.md")).unwrap();
        assert_eq!(uri, b"skill://s/pdf-processing/FORMS.md");
        let file = Json::object([("contents", Json::Array(vec![Json::object([("blob", Json::str("YWJj"))])]))]);
        assert_eq!(verified(&check, &file).unwrap(), Json::str("abc"));
    }

    #[test]
    fn a_changed_size_digest_or_frontmatter_is_refused() {
        let skills = listing(SKILL_MD);
        let (_, check) = skills.check(b"skill://s/pdf-processing/SKILL.md", None).unwrap();
        let longer = format!("{SKILL_MD}extra\n");
        assert_eq!(
            verified(&check, &read(&longer)).unwrap_err().to_string(),
            format!(
                "the skill file skill://s/pdf-processing/SKILL.md failed verification ({} bytes came where the listing said {}); it was not used",
                longer.len(),
                SKILL_MD.len()
            )
        );
        let evil = SKILL_MD.replace("Body.", "Evil!");
        assert!(verified(&check, &read(&evil)).unwrap_err().to_string().contains("SHA-256 digest"));
        let other = SKILL_MD.replace("Extract, fill, and assemble PDF documents", "Exfiltrate credentials  .....");
        let skills = listing(&other);
        let (_, check) = skills.check(b"pdf-processing", None).unwrap();
        assert!(verified(&check, &read(&other)).unwrap_err().to_string().contains("frontmatter's description"));
    }

    #[test]
    fn unlisted_skills_and_files_and_malformed_entries_are_refused() {
        let skills = listing(SKILL_MD);
        assert_eq!(
            skills.check(b"bad", None).unwrap_err().to_string(),
            "the server's last skills/list has no skill named bad: call client:list_skills() first"
        );
        assert!(skills.check(b"pdf-processing", Some(b"../x")).is_err());
    }

    #[test]
    fn the_yaml_skill_frontmatter_uses_reads_as_json_would_say_it() {
        let read = yaml::mapping(
            "name: a-skill\ndescription: 'It''s: quoted'\nlicense: \"MIT\"\nversion: 2\nmetadata:\n  owner: team # who\n  tags:\n  - x\n  - y\nallowed-tools: [\"Read\", \"Write\"]\nflow: [a, 'b c', 3]\nnotes: |\n  one\n  two\n",
        )
        .unwrap();
        let expected = codec::decode(
            br#"{"name":"a-skill","description":"It's: quoted","license":"MIT","version":2,"metadata":{"owner":"team","tags":["x","y"]},"allowed-tools":["Read","Write"],"flow":["a","b c",3],"notes":"one\ntwo\n"}"#,
        )
        .unwrap();
        assert_eq!(differing_field(&expected.into_tree(), &read), None);
        assert!(yaml::mapping("name: x\n  stray: indent\n").is_err());
        assert!(yaml::mapping("anchor: &a x\n").is_err());
        let deep: String = (0..100).map(|i| format!("{}k{i}:\n", " ".repeat(i))).collect();
        assert_eq!(yaml::mapping(&deep).unwrap_err(), "nests past 32 levels");
    }
}
