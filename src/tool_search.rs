//! Tool search for `mcp.mount(..., {search = true})`: an agent with
//! hundreds of tools sends its model two (search, call) instead of every
//! definition, and the model finds the ones it needs by what it wants
//! done. Ranked by BM25 (the scoring text retrieval has used for decades,
//! parameters k1 = 1.2, b = 0.75) over each tool's words: its name (three
//! times over: a name is the densest description), title (twice),
//! description and parameter names. Words are split at case changes,
//! digits, `_`, `-` and `.` (`getWeatherForecast`, `get_weather` and
//! `weather.get` share "weather"), lower-cased, a plural `s` dropped, and
//! a few words too common to mean anything ("a", "the") left out.

use std::collections::HashMap;

const K1: f64 = 1.2;
const B: f64 = 0.75;

/// A tool's words as the index weighs them.
pub struct ToolText<'a> {
    pub name: &'a [u8],
    pub title: &'a [u8],
    pub description: &'a [u8],
    pub parameters: Vec<&'a [u8]>,
}

struct Doc {
    name: Vec<u8>,
    terms: HashMap<String, u32>,
    length: u32,
}

/// The tools of one registry's searchable mounts.
#[derive(Default)]
pub struct Index {
    docs: Vec<Doc>,
}

impl Index {
    /// Adds a tool, or replaces the one of that name.
    pub fn add(&mut self, tool: &ToolText) {
        let mut terms: HashMap<String, u32> = HashMap::new();
        let mut length = 0;
        let weighted = [(tool.name, 3), (tool.title, 2), (tool.description, 1)];
        let parameters = tool.parameters.iter().map(|p| (*p, 1));
        for (text, weight) in weighted.into_iter().chain(parameters) {
            for word in words(text) {
                *terms.entry(word).or_default() += weight;
                length += weight;
            }
        }
        self.remove(tool.name);
        self.docs.push(Doc { name: tool.name.to_vec(), terms, length });
    }

    pub fn remove(&mut self, name: &[u8]) {
        self.docs.retain(|d| d.name != name);
    }

    pub fn len(&self) -> usize {
        self.docs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.docs.is_empty()
    }

    /// The names of the best `limit` tools for `query`, best first; ties
    /// keep the order tools were added in. Tools that share no word with
    /// the query are left out.
    pub fn search(&self, query: &[u8], limit: usize) -> Vec<Vec<u8>> {
        let mut query_words = words(query);
        crate::sorting::sort(&mut query_words);
        query_words.dedup();
        let n = self.docs.len() as f64;
        let average = self.docs.iter().map(|d| d.length as f64).sum::<f64>() / n.max(1.0);
        let weights: Vec<f64> = query_words
            .iter()
            .map(|w| {
                let containing = self.docs.iter().filter(|d| d.terms.contains_key(w)).count() as f64;
                ((n - containing + 0.5) / (containing + 0.5) + 1.0).ln()
            })
            .collect();
        let mut scored: Vec<(f64, usize)> = self
            .docs
            .iter()
            .enumerate()
            .filter_map(|(at, doc)| {
                let norm = K1 * (1.0 - B + B * doc.length as f64 / average.max(1.0));
                let score: f64 = query_words
                    .iter()
                    .zip(&weights)
                    .filter_map(|(w, idf)| {
                        doc.terms.get(w).map(|&tf| idf * tf as f64 * (K1 + 1.0) / (tf as f64 + norm))
                    })
                    .sum();
                (score > 0.0).then_some((score, at))
            })
            .collect();
        crate::sorting::sort_by(&mut scored, |a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        scored.into_iter().take(limit).map(|(_, at)| self.docs[at].name.clone()).collect()
    }

    /// Up to `limit` indexed names nearest `name` by edit distance, for an
    /// error that tells a model what it may have meant.
    pub fn closest(&self, name: &[u8], limit: usize) -> Vec<Vec<u8>> {
        let mut near: Vec<(usize, &Vec<u8>)> =
            self.docs.iter().map(|d| (edit_distance(name, &d.name), &d.name)).collect();
        crate::sorting::sort(&mut near);
        near.into_iter().take(limit).map(|(_, n)| n.clone()).collect()
    }
}

/// Words too common to tell tools apart ("a", "the", "for"): left out of
/// tools and queries alike.
const STOP_WORDS: &[&str] = &[
    "a", "an", "and", "are", "as", "at", "be", "by", "for", "from", "in", "is", "it", "its", "of", "on", "or", "that",
    "the", "this", "to", "with",
];

/// The words of `text` (see the module doc).
fn words(text: &[u8]) -> Vec<String> {
    let mut out = split(text);
    out.retain(|w| !STOP_WORDS.contains(&w.as_str()));
    out
}

fn split(text: &[u8]) -> Vec<String> {
    let text = String::from_utf8_lossy(text);
    let mut out = Vec::new();
    let mut word = String::new();
    let mut previous: Option<char> = None;
    for c in text.chars() {
        let boundary = match previous {
            _ if !c.is_alphanumeric() => true,
            Some(p) => (p.is_lowercase() && c.is_uppercase()) || (p.is_alphabetic() != c.is_alphabetic()),
            None => false,
        };
        if boundary && !word.is_empty() {
            out.push(normal(&word));
            word.clear();
        }
        if c.is_alphanumeric() {
            word.extend(c.to_lowercase());
        }
        previous = Some(c);
    }
    if !word.is_empty() {
        out.push(normal(&word));
    }
    out
}

/// A plural's `s` dropped (`files` finds `file`), from words of four
/// letters or more that do not end in `ss` (`access` stays).
fn normal(word: &str) -> String {
    match word.strip_suffix('s') {
        Some(stem) if word.len() >= 4 && !stem.ends_with('s') => stem.to_string(),
        _ => word.to_string(),
    }
}

fn edit_distance(a: &[u8], b: &[u8]) -> usize {
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.iter().enumerate() {
        let mut diagonal = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let above = row[j + 1];
            row[j + 1] = (above + 1).min(row[j] + 1).min(diagonal + usize::from(ca != cb));
            diagonal = above;
        }
    }
    row[b.len()]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tool<'a>(name: &'a str, description: &'a str, parameters: &[&'a str]) -> ToolText<'a> {
        ToolText {
            name: name.as_bytes(),
            title: b"",
            description: description.as_bytes(),
            parameters: parameters.iter().map(|p| p.as_bytes()).collect(),
        }
    }

    fn names(found: Vec<Vec<u8>>) -> Vec<String> {
        found.into_iter().map(|n| String::from_utf8(n).unwrap()).collect()
    }

    #[test]
    fn words_split_at_case_digits_and_punctuation_and_lose_a_plural_s() {
        assert_eq!(words(b"getWeatherForecast"), ["get", "weather", "forecast"]);
        assert_eq!(words(b"fs_read-files.v2 HTTPServer"), ["fs", "read", "file", "v", "2", "httpserver"]);
        assert_eq!(words(b"access"), ["access"]);
    }

    #[test]
    fn the_best_match_comes_first_and_tools_without_a_shared_word_are_left_out() {
        let mut index = Index::default();
        index.add(&tool("read_file", "Read the complete contents of a file from the file system", &["path"]));
        index.add(&tool("write_file", "Create a new file or overwrite an existing one", &["path", "content"]));
        index.add(&tool("get_weather", "Weather forecast for a city", &["city"]));
        index.add(&tool("echo", "Echoes back the input", &["message"]));
        assert_eq!(names(index.search(b"read a file", 10)), ["read_file", "write_file"]);
        assert_eq!(names(index.search(b"forecast for Paris", 1)), ["get_weather"]);
        assert!(index.search(b"database", 10).is_empty());
        index.remove(b"read_file");
        assert_eq!(names(index.search(b"read", 10)), Vec::<String>::new());
        assert_eq!(index.len(), 3);
    }

    #[test]
    fn the_closest_names_are_offered_for_a_misspelt_one() {
        let mut index = Index::default();
        for name in ["fs_read_file", "fs_write_file", "everything_echo"] {
            index.add(&tool(name, "", &[]));
        }
        assert_eq!(names(index.closest(b"fs_read_fil", 2)), ["fs_read_file", "fs_write_file"]);
    }
}
