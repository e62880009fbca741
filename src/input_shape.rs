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

use crate::codec::Json;

/// How many `$ref`s one place may pass through: a schema whose
/// references go round in a circle ends here.
const MAX_REFS: usize = 16;

/// How deep `anyOf` / `oneOf` / `allOf` are followed within one place.
const MAX_BRANCH_DEPTH: usize = 8;

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
            Place::Described { root, node } => Place::found(root, member_schema(root, node, key, 0)),
        }
    }

    /// The element at `index` (from 0) of the array here.
    pub fn element(self, index: usize) -> Place<'s> {
        match self {
            Place::Described { root, node } => Place::found(root, element_schema(root, node, index, 0)),
            _ => Place::Nowhere,
        }
    }

    /// Whether only an array fits here: an empty table is then `[]`.
    pub fn wants_array(self) -> bool {
        match self {
            Place::Described { root, node } => only_array(root, node, 0) == Some(true),
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

/// `node` with its `$ref`s followed (local ones only).
fn resolve<'s>(root: &'s Json, mut node: &'s Json) -> Option<&'s Json> {
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

fn member_schema<'s>(root: &'s Json, node: &'s Json, key: &[u8], depth: usize) -> Option<&'s Json> {
    let node = resolve(root, node)?;
    let key = std::str::from_utf8(key).ok()?;
    if let Some(Json::Object(_)) = node.get("properties") {
        if let Some(found) = node.get("properties").and_then(|p| p.get(key)) {
            return Some(found);
        }
    }
    if depth < MAX_BRANCH_DEPTH {
        if let Some(found) = branches(node).find_map(|b| member_schema(root, b, key.as_bytes(), depth + 1)) {
            return Some(found);
        }
    }
    match node.get("additionalProperties") {
        Some(extra @ Json::Object(_)) => Some(extra),
        _ => None,
    }
}

fn element_schema<'s>(root: &'s Json, node: &'s Json, index: usize, depth: usize) -> Option<&'s Json> {
    let node = resolve(root, node)?;
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
        return branches(node).find_map(|b| element_schema(root, b, index, depth + 1));
    }
    None
}

/// Some(true) when only an array fits `node`, Some(false) when something
/// else does too, None when it does not say.
fn only_array(root: &Json, node: &Json, depth: usize) -> Option<bool> {
    let node = resolve(root, node)?;
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
        if all.iter().any(|b| only_array(root, b, depth + 1) == Some(true)) {
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
        .map(|b| only_array(root, b, depth + 1))
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
