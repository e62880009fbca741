//! Where a tool's `inputSchema` wants an array.
//!
//! Lua has one empty table, and a JSON encoder must choose: `{}` or `[]`.
//! The reference always writes `{}`, and real servers refuse it where
//! their schema says array: the filesystem server's `search_files` with
//! `excludePatterns = {}` answered `expected array, received object`
//! (zod), pydantic says `Input should be a valid list`, serde `invalid
//! type: map, expected a sequence`. An agent that decodes a model's tool
//! call and passes it on loses every empty array that way. The schema came
//! with `discover`, so the encoder asks it, at each place in the
//! arguments, whether only an array fits there.
//!
//! What is read: `type` (a name or a list of names, `null` ignored, since
//! a table is never null), `properties`, `additionalProperties`, `items`
//! (a schema, or draft 4's list), `prefixItems`, `anyOf` / `oneOf` /
//! `allOf`, and local `$ref`s (`#/$defs/...`, `#/definitions/...`, any
//! JSON pointer into the schema). A place the schema does not describe,
//! or describes loosely (no `type`, or array among others), keeps the
//! reference's `{}`: the schema only ever changes what it is sure of.
//!
//! A schema comes from the server, so every question asked of it visits
//! at most [`VISITS`] nodes: `{"anyOf":[{"$ref":"#"},{"$ref":"#"},...]}`
//! would otherwise cost ten to the eighth visits for each key of the
//! arguments, with the host's Ctrl-C unheard. Out of visits, the schema
//! does not say.

use std::cell::Cell;

use crate::codec::Json;

/// How many `$ref`s one place may pass through: a schema whose
/// references go round in a circle ends here.
const MAX_REFS: usize = 16;

/// How deep `anyOf` / `oneOf` / `allOf` are followed within one place.
const MAX_BRANCH_DEPTH: usize = 8;

/// Schema nodes one question may visit.
const VISITS: usize = 256;

/// What is left of one question's visits.
struct Budget(Cell<usize>);

impl Budget {
    fn new() -> Budget {
        Budget(Cell::new(VISITS))
    }

    /// Takes a visit; false when none is left.
    fn visit(&self) -> bool {
        let left = self.0.get();
        self.0.set(left.saturating_sub(1));
        left > 0
    }
}

/// A place in a value being encoded, and what the schema says of it.
#[derive(Clone, Copy)]
pub enum Place<'s> {
    /// Nothing is known here.
    Nowhere,
    /// The place `node` of the schema `root` describes.
    Described { root: &'s Json, node: &'s Json },
    /// A message whose member at `path` holds what `root` describes (the
    /// arguments of a `tools/call` written whole).
    Above { path: &'static [&'static str], root: &'s Json },
}

impl<'s> Place<'s> {
    /// The top of a value that `schema` describes.
    pub fn of(schema: Option<&'s Json>) -> Place<'s> {
        match schema {
            Some(root) => Place::Described { root, node: root },
            None => Place::Nowhere,
        }
    }

    /// The member `key` of the object here.
    pub fn member(self, key: &[u8]) -> Place<'s> {
        match self {
            Place::Nowhere => Place::Nowhere,
            Place::Above { path: [first, rest @ ..], root } if first.as_bytes() == key => match rest {
                [] => Place::Described { root, node: root },
                _ => Place::Above { path: rest, root },
            },
            Place::Above { .. } => Place::Nowhere,
            Place::Described { root, node } => Place::found(root, member_schema(root, node, key, 0, &Budget::new())),
        }
    }

    /// The element at `index` (from 0) of the array here.
    pub fn element(self, index: usize) -> Place<'s> {
        match self {
            Place::Described { root, node } => Place::found(root, element_schema(root, node, index, 0, &Budget::new())),
            _ => Place::Nowhere,
        }
    }

    /// Whether only an array fits here: an empty table is then `[]`.
    pub fn wants_array(self) -> bool {
        match self {
            Place::Described { root, node } => only_array(root, node, 0, &Budget::new()) == Some(true),
            _ => false,
        }
    }

    fn found(root: &'s Json, node: Option<&'s Json>) -> Place<'s> {
        match node {
            Some(node) => Place::Described { root, node },
            None => Place::Nowhere,
        }
    }
}

/// `node` with its `$ref`s followed (local ones only), if the budget
/// allows the visit.
fn resolve<'s>(root: &'s Json, mut node: &'s Json, budget: &Budget) -> Option<&'s Json> {
    if !budget.visit() {
        return None;
    }
    for _ in 0..MAX_REFS {
        let Some(Json::Str(reference)) = node.get("$ref") else { return Some(node) };
        node = pointer(root, reference)?;
    }
    None
}

/// The JSON pointer `#/a/b` (RFC 6901, `~1` and `~0` unescaped) in `root`.
fn pointer<'s>(root: &'s Json, reference: &[u8]) -> Option<&'s Json> {
    let path = std::str::from_utf8(reference.strip_prefix(b"#")?).ok()?;
    let mut at = root;
    for raw in path.split('/').skip(1) {
        let segment = raw.replace("~1", "/").replace("~0", "~");
        at = match at {
            Json::Array(items) => items.get(segment.parse::<usize>().ok()?)?,
            _ => at.get(&segment)?,
        };
    }
    Some(at)
}

/// The branches of a combining keyword.
fn branches(node: &Json) -> impl Iterator<Item = &Json> {
    ["allOf", "anyOf", "oneOf"]
        .into_iter()
        .filter_map(|k| match node.get(k) {
            Some(Json::Array(items)) => Some(items.iter()),
            _ => None,
        })
        .flatten()
}

/// The schema of member `key` of `node`: its own `properties`, else the
/// one branch of a combination that names it (two that do may disagree:
/// a tagged union's `toys` may be an array in one and an object in the
/// other), else `additionalProperties`.
fn member_schema<'s>(root: &'s Json, node: &'s Json, key: &[u8], depth: usize, budget: &Budget) -> Option<&'s Json> {
    let node = resolve(root, node, budget)?;
    let key_text = std::str::from_utf8(key).ok()?;
    if let Some(Json::Object(_)) = node.get("properties") {
        if let Some(found) = node.get("properties").and_then(|p| p.get(key_text)) {
            return Some(found);
        }
    }
    if depth < MAX_BRANCH_DEPTH {
        let mut named = branches(node).filter_map(|b| member_schema(root, b, key, depth + 1, budget));
        if let Some(found) = named.next() {
            return match named.next() {
                None => Some(found),
                Some(_) => None,
            };
        }
    }
    match node.get("additionalProperties") {
        Some(extra @ Json::Object(_)) => Some(extra),
        _ => None,
    }
}

fn element_schema<'s>(root: &'s Json, node: &'s Json, index: usize, depth: usize, budget: &Budget) -> Option<&'s Json> {
    let node = resolve(root, node, budget)?;
    if let Some(Json::Array(prefix)) = node.get("prefixItems") {
        if let Some(found) = prefix.get(index) {
            return Some(found);
        }
    }
    match node.get("items") {
        Some(items @ Json::Object(_)) => return Some(items),
        Some(Json::Array(tuple)) => return tuple.get(index),
        _ => {}
    }
    if depth < MAX_BRANCH_DEPTH {
        let mut described = branches(node).filter_map(|b| element_schema(root, b, index, depth + 1, budget));
        if let (Some(found), None) = (described.next(), described.next()) {
            return Some(found);
        }
    }
    None
}

/// Some(true) when only an array fits `node`, Some(false) when something
/// else does too, None when it does not say.
fn only_array(root: &Json, node: &Json, depth: usize, budget: &Budget) -> Option<bool> {
    let node = resolve(root, node, budget)?;
    let named = |name: &[u8]| name != b"null";
    match node.get("type") {
        Some(Json::Str(name)) if named(name) => return Some(name == b"array"),
        Some(Json::Array(names)) => {
            let names: Vec<&[u8]> = names
                .iter()
                .filter_map(|n| match n {
                    Json::Str(s) if named(s) => Some(s.as_slice()),
                    _ => None,
                })
                .collect();
            if !names.is_empty() {
                return Some(names.iter().all(|n| *n == b"array"));
            }
        }
        _ => {}
    }
    if depth >= MAX_BRANCH_DEPTH {
        return None;
    }
    // allOf: every branch must hold, so one that wants an array decides.
    if let Some(Json::Array(all)) = node.get("allOf") {
        if all.iter().any(|b| only_array(root, b, depth + 1, budget) == Some(true)) {
            return Some(true);
        }
    }
    // anyOf / oneOf: an array only if every branch that says wants one.
    let either: Vec<Option<bool>> = ["anyOf", "oneOf"]
        .into_iter()
        .filter_map(|k| match node.get(k) {
            Some(Json::Array(items)) => Some(items),
            _ => None,
        })
        .flatten()
        .filter(|b| !matches!(b.get("type"), Some(Json::Str(t)) if t == b"null"))
        .map(|b| only_array(root, b, depth + 1, budget))
        .collect();
    if either.is_empty() {
        return None;
    }
    Some(either.iter().all(|said| *said == Some(true)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::decode;

    fn schema(text: &str) -> Json {
        decode(text.as_bytes()).unwrap()
    }

    #[test]
    fn properties_nested_objects_and_items_say_where_arrays_go() {
        let s = schema(
            r#"{"type":"object","properties":{"excludePatterns":{"type":"array","items":{"type":"string"}},
            "entities":{"type":"array","items":{"type":"object","properties":{"observations":{"type":"array"}}}},
            "options":{"type":"object","properties":{"tags":{"type":["array","null"]}}},"name":{"type":"string"}}}"#,
        );
        let top = Place::of(Some(&s));
        assert!(!top.wants_array());
        assert!(top.member(b"excludePatterns").wants_array());
        assert!(top.member(b"entities").element(0).member(b"observations").wants_array());
        assert!(top.member(b"entities").element(3).member(b"observations").wants_array());
        assert!(top.member(b"options").member(b"tags").wants_array());
        assert!(!top.member(b"name").wants_array());
        assert!(!top.member(b"unknown").wants_array());
        assert!(!top.member(b"options").wants_array());
    }

    #[test]
    fn local_refs_and_defs_are_followed_and_a_circle_ends() {
        let s = schema(
            r##"{"$defs":{"List":{"type":"array"},"Node":{"type":"object","properties":{"children":{"$ref":"#/$defs/List"},"next":{"$ref":"#/$defs/Node"}}},
            "Loop":{"$ref":"#/$defs/Loop"}},
            "type":"object","properties":{"root":{"$ref":"#/$defs/Node"},"loop":{"$ref":"#/$defs/Loop"},"old":{"$ref":"#/definitions/x"}},
            "definitions":{"x":{"type":"array"}}}"##,
        );
        let top = Place::of(Some(&s));
        assert!(top.member(b"root").member(b"children").wants_array());
        assert!(top.member(b"root").member(b"next").member(b"next").member(b"children").wants_array());
        assert!(!top.member(b"loop").wants_array());
        assert!(top.member(b"old").wants_array());
    }

    #[test]
    fn any_of_and_one_of_want_an_array_only_where_nothing_else_fits() {
        let s = schema(
            r#"{"type":"object","properties":{
            "a":{"anyOf":[{"type":"array","items":{"type":"string"}},{"type":"null"}]},
            "b":{"oneOf":[{"type":"array"},{"type":"object"}]},
            "c":{"anyOf":[{"type":"string"},{"type":"array"}]},
            "d":{"allOf":[{"type":"array"},{"minItems":0}]},
            "e":{"type":["array","object"]},
            "f":{"description":"anything"},
            "g":{"type":"object","additionalProperties":{"type":"array"}}}}"#,
        );
        let top = Place::of(Some(&s));
        assert!(top.member(b"a").wants_array());
        assert!(!top.member(b"b").wants_array());
        assert!(!top.member(b"c").wants_array());
        assert!(top.member(b"d").wants_array());
        assert!(!top.member(b"e").wants_array());
        assert!(!top.member(b"f").wants_array());
        assert!(top.member(b"g").member(b"any").wants_array());
    }

    #[test]
    fn a_schema_built_to_explode_is_cut_off_and_branches_that_disagree_say_nothing() {
        let branches = vec![r##"{"$ref":"#"}"##; 20].join(",");
        let s = schema(&format!(r#"{{"anyOf":[{branches}]}}"#));
        let top = Place::of(Some(&s));
        let started = std::time::Instant::now();
        assert!(!top.member(b"a").member(b"b").wants_array());
        assert!(started.elapsed() < std::time::Duration::from_secs(1), "{:?}", started.elapsed());
        let union = schema(
            r#"{"oneOf":[{"properties":{"kind":{"const":"cat"},"toys":{"type":"array"},"bowls":{"type":"array"}}},
            {"properties":{"kind":{"const":"dog"},"toys":{"type":"object"}}}]}"#,
        );
        let top = Place::of(Some(&union));
        assert!(!top.member(b"toys").wants_array());
        assert!(top.member(b"bowls").wants_array());
    }

    #[test]
    fn tuples_no_schema_and_a_message_above_the_arguments() {
        let s =
            schema(r#"{"type":"array","prefixItems":[{"type":"string"},{"type":"array"}],"items":{"type":"object"}}"#);
        let top = Place::of(Some(&s));
        assert!(top.wants_array());
        assert!(!top.element(0).wants_array());
        assert!(top.element(1).wants_array());
        assert!(!top.element(2).wants_array());
        assert!(!Place::of(None).member(b"x").wants_array());
        let args = schema(r#"{"type":"object","properties":{"list":{"type":"array"}}}"#);
        let message = Place::Above { path: &["params", "arguments"], root: &args };
        assert!(message.member(b"params").member(b"arguments").member(b"list").wants_array());
        assert!(!message.member(b"id").wants_array());
        assert!(!message.member(b"params").member(b"name").wants_array());
    }
}
