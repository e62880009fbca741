//! Results a modern server says may be kept: `ttlMs` and `cacheScope` on
//! `server/discover`, the lists and `resources/read` (2026-07-28). A fresh
//! entry answers the same request (same method, same params but `_meta`)
//! without sending it; an entry is stale once its time is up, and at once
//! when the server sent no time, or zero, or a negative one (the
//! revision's rule), so nothing of an older server's is ever kept. A
//! change notification evicts what it names. A `private` entry answers
//! only under the credentials it was fetched with. A listing is kept
//! whole, as long as its shortest-lived page.
//!
//! What is kept is the request's outcome as the caller gets it (a list's
//! pages, a read's contents), so a hit hands out the same value a request
//! would have.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use crate::codec::{self, Json, Select};

/// How long anything is kept at most, whatever a server says: the
/// official SDKs cap it the same way.
const LONGEST: Duration = Duration::from_secs(24 * 3600);

/// What a request does with the cache (per call: `opts.cache`).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub enum CacheMode {
    /// A fresh entry answers; a fetched result is kept.
    #[default]
    Use,
    /// Always fetched, and kept.
    Refresh,
    /// Neither answered from the cache nor kept.
    Bypass,
}

/// What a result allows: kept this long, and for whom.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Hints {
    pub ttl: Duration,
    pub private: bool,
}

impl Hints {
    /// The hints of a list's pages together: the shortest time, private
    /// if any page is.
    pub fn join(self, other: Hints) -> Hints {
        Hints { ttl: self.ttl.min(other.ttl), private: self.private || other.private }
    }
}

const HINTS: Select = Select::Keys(&[("ttlMs", Select::Whole), ("cacheScope", Select::Whole)]);

/// The hints a result carries; None when it may not be kept at all.
pub fn hints_of(result: &Json) -> Option<Hints> {
    let hints = result.selected(HINTS);
    let ttl = match hints.get("ttlMs") {
        Some(Json::Int(ms)) if *ms > 0 => Duration::from_millis(*ms as u64),
        Some(Json::Float(ms)) if *ms >= 1.0 => Duration::from_millis(*ms as u64),
        _ => return None,
    };
    let private = hints.get("cacheScope") != Some(&Json::str("public"));
    Some(Hints { ttl: ttl.min(LONGEST), private })
}

/// The methods whose results may be kept.
pub fn cacheable(method: &[u8]) -> bool {
    matches!(
        method,
        b"server/discover"
            | b"tools/list"
            | b"prompts/list"
            | b"resources/list"
            | b"resources/templates/list"
            | b"resources/read"
    )
}

struct Entry {
    outcome: Json,
    fresh_until: Instant,
    /// The credentials it was fetched under, when it is private.
    private_to: Option<u64>,
    method: Vec<u8>,
    uri: Option<Vec<u8>>,
}

pub struct Cache {
    pub on: bool,
    entries: HashMap<Vec<u8>, Entry>,
}

impl Default for Cache {
    fn default() -> Self {
        Cache { on: true, entries: HashMap::new() }
    }
}

/// The key of a request: its method, what its outcome is made of, and its
/// params without `_meta` (which changes with the envelope and progress
/// tokens, and says nothing of the answer).
pub fn key(method: &[u8], shape: &str, params: Option<&Json>) -> Vec<u8> {
    let mut key = method.to_vec();
    key.push(0);
    key.extend_from_slice(shape.as_bytes());
    key.push(0);
    if let Some(Json::Object(pairs)) = params.cloned().map(|mut p| {
        p.materialize();
        p
    }) {
        let kept: Vec<(Vec<u8>, Json)> = pairs.into_iter().filter(|(k, _)| k != b"_meta").collect();
        key.extend_from_slice(&codec::encode(&Json::Object(kept)));
    }
    key
}

impl Cache {
    /// A fresh entry for `key` that these credentials may see.
    pub fn get(&mut self, key: &[u8], credentials: u64) -> Option<Json> {
        let entry = self.entries.get(key)?;
        if Instant::now() >= entry.fresh_until {
            self.entries.remove(key);
            return None;
        }
        if entry.private_to.is_some_and(|c| c != credentials) {
            return None;
        }
        Some(entry.outcome.clone())
    }

    pub fn put(
        &mut self,
        key: Vec<u8>,
        method: &[u8],
        uri: Option<Vec<u8>>,
        outcome: Json,
        hints: Hints,
        credentials: u64,
    ) {
        let entry = Entry {
            outcome,
            fresh_until: Instant::now() + hints.ttl,
            private_to: hints.private.then_some(credentials),
            method: method.to_vec(),
            uri,
        };
        self.entries.insert(key, entry);
    }

    /// What a change notification makes stale: a list that changed, or
    /// the reads of a resource that was updated (or of one it is part of,
    /// or a part of it: an update may name either).
    pub fn evict_for(&mut self, notification: &Json) {
        let Some(Json::Str(method)) = notification.get("method") else { return };
        let lists: &[&[u8]] = match method.as_slice() {
            b"notifications/tools/list_changed" => &[b"tools/list"],
            b"notifications/prompts/list_changed" => &[b"prompts/list"],
            b"notifications/resources/list_changed" => &[b"resources/list", b"resources/templates/list"],
            b"notifications/resources/updated" => {
                let Some(Json::Str(updated)) = notification.get("params").and_then(|p| p.get("uri")) else { return };
                self.entries
                    .retain(|_, e| !e.uri.as_ref().is_some_and(|u| u.starts_with(updated) || updated.starts_with(u)));
                return;
            }
            _ => return,
        };
        self.entries.retain(|_, e| !lists.contains(&e.method.as_slice()));
    }

    pub fn clear(&mut self) {
        self.entries.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::decode;

    #[test]
    fn absent_zero_and_negative_times_keep_nothing_and_private_is_the_default_scope() {
        assert_eq!(hints_of(&decode(br#"{"tools":[]}"#).unwrap()), None);
        assert_eq!(hints_of(&decode(br#"{"ttlMs":0}"#).unwrap()), None);
        assert_eq!(hints_of(&decode(br#"{"ttlMs":-5}"#).unwrap()), None);
        let kept = hints_of(&decode(br#"{"ttlMs":1500,"cacheScope":"public"}"#).unwrap()).unwrap();
        assert_eq!(kept, Hints { ttl: Duration::from_millis(1500), private: false });
        assert!(hints_of(&decode(br#"{"ttlMs":1500}"#).unwrap()).unwrap().private);
    }

    #[test]
    fn a_private_entry_answers_only_its_credentials_and_an_update_evicts_its_reads() {
        let mut cache = Cache::default();
        let read = |uri: &str| decode(format!(r#"{{"uri":"{uri}","_meta":{{"x":1}}}}"#).as_bytes()).unwrap();
        let key_a = key(b"resources/read", "contents", Some(&read("memo://a")));
        assert_eq!(key_a, key(b"resources/read", "contents", Some(&decode(br#"{"uri":"memo://a"}"#).unwrap())));
        let hints = Hints { ttl: Duration::from_secs(60), private: true };
        cache.put(key_a.clone(), b"resources/read", Some(b"memo://a".to_vec()), Json::Int(1), hints, 7);
        assert_eq!(cache.get(&key_a, 7), Some(Json::Int(1)));
        assert_eq!(cache.get(&key_a, 8), None);
        let update = decode(br#"{"method":"notifications/resources/updated","params":{"uri":"memo://a"}}"#).unwrap();
        cache.evict_for(&update);
        assert_eq!(cache.get(&key_a, 7), None);
    }
}
