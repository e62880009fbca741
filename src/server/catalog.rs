//! What a server offers: its tools, resources, resource templates and
//! prompts, each with the definition clients list and the handler that
//! answers it. Kept in the order they were added (a listing is stable
//! from page to page, so a cursor is an offset into it), and found by
//! name in constant time, since every call looks one up.

use std::collections::HashMap;

use crate::codec::Json;
use crate::json_schema::Validator;

/// Which list an entry is in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    Tool,
    Resource,
    Template,
    Prompt,
}

impl Kind {
    /// The listing method, the result field that holds its items, and the
    /// notification that says it changed.
    pub fn list_method(self) -> &'static str {
        match self {
            Kind::Tool => "tools/list",
            Kind::Resource => "resources/list",
            Kind::Template => "resources/templates/list",
            Kind::Prompt => "prompts/list",
        }
    }

    pub fn items_field(self) -> &'static str {
        match self {
            Kind::Tool => "tools",
            Kind::Resource => "resources",
            Kind::Template => "resourceTemplates",
            Kind::Prompt => "prompts",
        }
    }

    pub fn changed_notification(self) -> &'static str {
        match self {
            Kind::Tool => "notifications/tools/list_changed",
            Kind::Resource | Kind::Template => "notifications/resources/list_changed",
            Kind::Prompt => "notifications/prompts/list_changed",
        }
    }

    /// The definition's field that names it.
    pub fn key_field(self) -> &'static str {
        match self {
            Kind::Tool | Kind::Prompt => "name",
            Kind::Resource => "uri",
            Kind::Template => "uriTemplate",
        }
    }
}

/// One entry: what clients list, and who answers it (the binding's
/// number for its handler).
pub struct Entry {
    pub key: Vec<u8>,
    pub definition: Json,
    pub handler: u64,
    /// A tool's schemas, compiled once when it is added.
    pub input: Option<Validator>,
    pub output: Option<Validator>,
    /// A template's parts, parsed once.
    pub template: Vec<Part>,
}

/// The entries of one kind, in the order they were added.
#[derive(Default)]
pub struct List {
    entries: Vec<Entry>,
    by_key: HashMap<Vec<u8>, usize>,
}

impl List {
    /// Adds `entry`, replacing one of the same key in its place.
    pub fn put(&mut self, entry: Entry) {
        match self.by_key.get(&entry.key) {
            Some(&at) => self.entries[at] = entry,
            None => {
                self.by_key.insert(entry.key.clone(), self.entries.len());
                self.entries.push(entry);
            }
        }
    }

    /// Removes the entry named `key`; false if there was none.
    pub fn remove(&mut self, key: &[u8]) -> bool {
        let Some(at) = self.by_key.remove(key) else { return false };
        self.entries.remove(at);
        for index in self.by_key.values_mut() {
            if *index > at {
                *index -= 1;
            }
        }
        true
    }

    pub fn get(&self, key: &[u8]) -> Option<&Entry> {
        self.by_key.get(key).map(|&at| &self.entries[at])
    }

    pub fn iter(&self) -> impl Iterator<Item = &Entry> {
        self.entries.iter()
    }

    /// One page of definitions from `cursor` (an offset this server gave),
    /// and the cursor of the next page if there is one. `page_size` 0 lists
    /// everything at once.
    pub fn page(&self, cursor: Option<&[u8]>, page_size: usize) -> Result<(Vec<Json>, Option<String>), String> {
        let start = match cursor {
            None => 0,
            Some(text) => std::str::from_utf8(text)
                .ok()
                .and_then(|t| t.parse::<usize>().ok())
                .filter(|&at| at <= self.entries.len())
                .ok_or_else(|| "the cursor is not one this server gave".to_string())?,
        };
        let end = match page_size {
            0 => self.entries.len(),
            size => (start + size).min(self.entries.len()),
        };
        let items = self.entries[start..end].iter().map(|e| e.definition.clone()).collect();
        let next = (end < self.entries.len()).then(|| end.to_string());
        Ok((items, next))
    }
}

/// A piece of a URI template: text to match as it is, or a variable.
#[derive(Clone, Debug, PartialEq)]
pub enum Part {
    Text(Vec<u8>),
    /// `{name}` matches up to the next text and never across a `/`;
    /// `{+name}` (reserved expansion) may cross one.
    Var {
        name: Vec<u8>,
        reserved: bool,
    },
}

/// The parts of an RFC 6570 template, as far as resource templates use
/// them (simple and reserved expansion of one variable per brace).
pub fn parse_template(template: &[u8]) -> Result<Vec<Part>, String> {
    let mut parts = Vec::new();
    let mut rest = template;
    while !rest.is_empty() {
        match rest.iter().position(|&b| b == b'{') {
            Some(0) => {
                let close = rest.iter().position(|&b| b == b'}').ok_or("a '{' is never closed")?;
                let inner = &rest[1..close];
                let (reserved, name) = match inner.first() {
                    Some(b'+') => (true, &inner[1..]),
                    _ => (false, inner),
                };
                if name.is_empty() || !name.iter().all(|b| b.is_ascii_alphanumeric() || *b == b'_') {
                    return Err(format!(
                        "{{{}}} is not a variable this server can match",
                        String::from_utf8_lossy(inner)
                    ));
                }
                parts.push(Part::Var { name: name.to_vec(), reserved });
                rest = &rest[close + 1..];
            }
            Some(at) => {
                parts.push(Part::Text(rest[..at].to_vec()));
                rest = &rest[at..];
            }
            None => {
                parts.push(Part::Text(rest.to_vec()));
                rest = &[];
            }
        }
    }
    Ok(parts)
}

/// The variables of `uri` if it matches the template's `parts`.
pub fn match_template(parts: &[Part], uri: &[u8]) -> Option<Vec<(Vec<u8>, Vec<u8>)>> {
    let mut vars = Vec::new();
    let mut rest = uri;
    for (i, part) in parts.iter().enumerate() {
        match part {
            Part::Text(text) => rest = rest.strip_prefix(text.as_slice())?,
            Part::Var { name, reserved } => {
                let end = match parts.get(i + 1) {
                    Some(Part::Text(next)) => find(rest, next)?,
                    _ => rest.len(),
                };
                let value = &rest[..end];
                if value.is_empty() || (!reserved && value.contains(&b'/')) {
                    return None;
                }
                vars.push((name.clone(), value.to_vec()));
                rest = &rest[end..];
            }
        }
    }
    rest.is_empty().then_some(vars)
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(key: &str) -> Entry {
        Entry {
            key: key.as_bytes().to_vec(),
            definition: Json::object([("name", Json::str(key))]),
            handler: 0,
            input: None,
            output: None,
            template: Vec::new(),
        }
    }

    #[test]
    fn pages_follow_the_order_entries_were_added_and_a_cursor_is_checked() {
        let mut list = List::default();
        for name in ["a", "b", "c"] {
            list.put(entry(name));
        }
        let (first, next) = list.page(None, 2).unwrap();
        assert_eq!(first.len(), 2);
        assert_eq!(next.as_deref(), Some("2"));
        let (second, next) = list.page(Some(b"2"), 2).unwrap();
        assert_eq!(second.len(), 1);
        assert_eq!(next, None);
        assert_eq!(list.page(Some(b"x"), 2).unwrap_err(), "the cursor is not one this server gave");
        assert_eq!(list.page(None, 0).unwrap().0.len(), 3);
    }

    #[test]
    fn a_removed_entry_leaves_the_others_found_by_name() {
        let mut list = List::default();
        for name in ["a", "b", "c"] {
            list.put(entry(name));
        }
        assert!(list.remove(b"a"));
        assert!(!list.remove(b"a"));
        assert_eq!(list.get(b"c").unwrap().key, b"c");
        list.put(entry("b"));
        assert_eq!(list.iter().count(), 2);
    }

    #[test]
    fn templates_match_their_variables_and_nothing_else() {
        let parts = parse_template(b"notes://{day}/lines/{n}").unwrap();
        assert_eq!(
            match_template(&parts, b"notes://monday/lines/3"),
            Some(vec![(b"day".to_vec(), b"monday".to_vec()), (b"n".to_vec(), b"3".to_vec())])
        );
        assert_eq!(match_template(&parts, b"notes://monday/lines/"), None);
        assert_eq!(match_template(&parts, b"other://monday/lines/3"), None);
        let simple = parse_template(b"file:///{name}").unwrap();
        assert_eq!(match_template(&simple, b"file:///a/b"), None, "a simple variable never crosses a /");
        let reserved = parse_template(b"file:///{+path}").unwrap();
        assert_eq!(match_template(&reserved, b"file:///a/b"), Some(vec![(b"path".to_vec(), b"a/b".to_vec())]));
        assert!(parse_template(b"x://{a b}").is_err());
        assert!(parse_template(b"x://{open").is_err());
    }
}
