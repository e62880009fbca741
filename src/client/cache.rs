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
//!
//! The cache is bounded, in entries and in bytes ([`Bounds`],
//! `opts.cache`): 3,000 distinct 64 KiB reads kept for a day once grew a
//! host by 189 MB, and as much with 50 ms times, since nothing stale was
//! ever let go. Each new entry first drops every stale one, then, while
//! the bounds would be passed, the one that would go stale soonest; a
//! result larger than the byte bound alone is not kept.

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

/// How much the cache holds at most (`opts.cache = { max_entries = N,
/// max_bytes = N }`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Bounds {
    pub max_entries: usize,
    /// As [`Json::held_bytes`] counts them.
    pub max_bytes: usize,
}

impl Default for Bounds {
    /// A few hundred lists and reads: more than a session's tools,
    /// prompts and the resources an agent reads again, and a few MB at
    /// most of a host's memory.
    fn default() -> Self {
        Bounds { max_entries: 256, max_bytes: 8 << 20 }
    }
}

struct Entry {
    outcome: Json,
    /// What it holds, as [`Json::held_bytes`] counts it.
    size: usize,
    fresh_until: Instant,
    /// The credentials it was fetched under, when it is private.
    private_to: Option<u64>,
    method: Vec<u8>,
    uri: Option<Vec<u8>>,
}

pub struct Cache {
    pub on: bool,
    pub bounds: Bounds,
    entries: HashMap<Vec<u8>, Entry>,
    /// The sizes of the entries together.
    held: usize,
}

impl Default for Cache {
    fn default() -> Self {
        Cache { on: true, bounds: Bounds::default(), entries: HashMap::new(), held: 0 }
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
            self.remove(key);
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
        self.remove(&key);
        let size = outcome.held_bytes() + key.len();
        if size > self.bounds.max_bytes || self.bounds.max_entries == 0 {
            return;
        }
        let now = Instant::now();
        self.retain(|e| e.fresh_until > now);
        while self.entries.len() >= self.bounds.max_entries || self.held + size > self.bounds.max_bytes {
            let Some(soonest) = self.entries.iter().min_by_key(|(_, e)| e.fresh_until).map(|(k, _)| k.clone()) else {
                break;
            };
            self.remove(&soonest);
        }
        let entry = Entry {
            outcome,
            size,
            fresh_until: now + hints.ttl,
            private_to: hints.private.then_some(credentials),
            method: method.to_vec(),
            uri,
        };
        self.held += size;
        self.entries.insert(key, entry);
    }

    fn remove(&mut self, key: &[u8]) {
        if let Some(entry) = self.entries.remove(key) {
            self.held -= entry.size;
        }
    }

    /// Keeps the entries `keep` says to, counting what the rest held.
    fn retain(&mut self, mut keep: impl FnMut(&Entry) -> bool) {
        let mut freed = 0;
        self.entries.retain(|_, e| {
            let kept = keep(e);
            if !kept {
                freed += e.size;
            }
            kept
        });
        self.held -= freed;
    }

    /// How many entries are kept, and what they hold.
    #[cfg(test)]
    pub fn holding(&self) -> (usize, usize) {
        (self.entries.len(), self.held)
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
                let updated = updated.clone();
                self.retain(|e| !e.uri.as_ref().is_some_and(|u| u.starts_with(&updated) || updated.starts_with(u)));
                return;
            }
            _ => return,
        };
        self.retain(|e| !lists.contains(&e.method.as_slice()));
    }

    pub fn clear(&mut self) {
        self.entries.clear();
        self.held = 0;
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

    #[test]
    fn the_cache_keeps_within_its_bounds_dropping_the_stale_and_then_the_soonest_stale() {
        let mut cache = Cache { bounds: Bounds { max_entries: 3, max_bytes: 10_000 }, ..Cache::default() };
        let read = |i: usize| {
            key(b"resources/read", "contents", Some(&Json::object([("uri", Json::str(format!("m://{i}")))])))
        };
        let keep = |cache: &mut Cache, i: usize, ms: u64, bytes: usize| {
            let hints = Hints { ttl: Duration::from_millis(ms), private: false };
            cache.put(read(i), b"resources/read", None, Json::str("x".repeat(bytes)), hints, 0);
        };
        for i in 0..3 {
            keep(&mut cache, i, 60_000 + i as u64, 100);
        }
        // A fourth pushes out the one that would go stale first.
        keep(&mut cache, 3, 90_000, 100);
        assert_eq!(cache.holding().0, 3);
        assert_eq!(cache.get(&read(0), 0), None);
        assert!(cache.get(&read(1), 0).is_some());
        // Stale entries go before any fresh one, and their bytes with them.
        let mut cache = Cache { bounds: Bounds { max_entries: 100, max_bytes: 10_000 }, ..Cache::default() };
        for i in 0..50 {
            keep(&mut cache, i, 1, 100);
        }
        std::thread::sleep(Duration::from_millis(5));
        keep(&mut cache, 99, 60_000, 100);
        assert_eq!(cache.holding().0, 1);
        // Bytes bound it too, and a result larger than the bound is not kept.
        for i in 0..20 {
            keep(&mut cache, i, 60_000, 2_000);
        }
        assert!(cache.holding().1 <= 10_000, "{:?}", cache.holding());
        keep(&mut cache, 500, 60_000, 20_000);
        assert_eq!(cache.get(&read(500), 0), None);
        cache.clear();
        assert_eq!(cache.holding(), (0, 0));
    }
}
