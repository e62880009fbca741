//! The check a schema passes before anything is validated against it:
//! each keyword's value has the type its draft gives it (what the
//! meta-schema would say), every pattern compiles and every `$ref`
//! resolves. On the way it gathers what validation needs at hand: the
//! compiled patterns and where each reference leads.

use std::collections::{HashMap, HashSet};

use super::values::{at, field, is_integer, said, shown};
use super::{Draft, Target, DEFAULT_BASE};
use crate::codec::Json;
use crate::server_text::{quoted_str, TEXT_CHARS};

/// A schema nested deeper than this is refused: the walk recurses once
/// a level, and schemas come from servers.
const MAX_DEPTH: usize = 128;

/// What [`survey`] found.
pub struct Survey {
    pub patterns: HashMap<Vec<u8>, regex_lite::Regex>,
    pub refs: HashMap<String, HashMap<Vec<u8>, Target>>,
    pub tracks_evaluation: bool,
}

/// What a keyword's value must be.
#[derive(Clone, Copy)]
enum Shape {
    Any,
    Schema,
    /// A non-empty array of schemas.
    Schemas,
    /// An object of schemas; `true` when its keys are patterns.
    SchemaMap(bool),
    Number,
    Positive,
    Count,
    Boolean,
    Text,
    Texts,
    Types,
    List,
    Pattern,
    /// Drafts 4 to 2019-09: a schema, or an array of them (a tuple).
    SchemaOrTuple,
    /// Draft 4 to 7's `dependencies`: names, or a schema, per property.
    Dependencies,
    /// 2019-09's `dependentRequired`: names per property.
    NamesMap,
    Reference,
}

/// The keywords a draft defines, with the shape of their values; `None`
/// for a keyword the draft does not have (it is then an annotation and
/// may hold anything).
fn shape(keyword: &[u8], draft: Draft) -> Option<Shape> {
    use Draft::*;
    let since = |first: Draft, shape: Shape| (draft >= first).then_some(shape);
    match keyword {
        b"type" => Some(Shape::Types),
        b"enum" => Some(Shape::List),
        b"required" => Some(Shape::Texts),
        b"properties" | b"definitions" | b"$defs" => Some(Shape::SchemaMap(false)),
        b"patternProperties" => Some(Shape::SchemaMap(true)),
        b"additionalProperties" | b"not" => Some(Shape::Schema),
        b"allOf" | b"anyOf" | b"oneOf" => Some(Shape::Schemas),
        b"minimum" | b"maximum" => Some(Shape::Number),
        b"exclusiveMinimum" | b"exclusiveMaximum" if draft == Four => Some(Shape::Boolean),
        b"exclusiveMinimum" | b"exclusiveMaximum" => Some(Shape::Number),
        b"multipleOf" => Some(Shape::Positive),
        b"minLength" | b"maxLength" | b"minItems" | b"maxItems" | b"minProperties" | b"maxProperties" => {
            Some(Shape::Count)
        }
        b"uniqueItems" => Some(Shape::Boolean),
        b"pattern" => Some(Shape::Pattern),
        b"format" => Some(Shape::Text),
        b"$ref" => Some(Shape::Reference),
        b"items" if draft == Y2020 => Some(Shape::Schema),
        b"items" => Some(Shape::SchemaOrTuple),
        b"additionalItems" => (draft <= Y2019).then_some(Shape::Schema),
        b"dependencies" => (draft <= Seven).then_some(Shape::Dependencies),
        b"const" => since(Six, Shape::Any),
        b"contains" | b"propertyNames" => since(Six, Shape::Schema),
        b"if" | b"then" | b"else" => since(Seven, Shape::Schema),
        b"unevaluatedProperties" | b"unevaluatedItems" | b"contentSchema" => since(Y2019, Shape::Schema),
        b"dependentSchemas" => since(Y2019, Shape::SchemaMap(false)),
        b"dependentRequired" => since(Y2019, Shape::NamesMap),
        b"minContains" | b"maxContains" => since(Y2019, Shape::Count),
        b"$recursiveRef" => (draft == Y2019).then_some(Shape::Reference),
        b"$dynamicRef" => since(Y2020, Shape::Reference),
        b"prefixItems" => since(Y2020, Shape::Schemas),
        _ => None,
    }
}

const TYPE_NAMES: [&[u8]; 7] = [b"null", b"boolean", b"object", b"array", b"number", b"string", b"integer"];

struct Walk<'a> {
    root: &'a Json,
    draft: Draft,
    found: Survey,
    /// Where each resource (`$id`) is, by its absolute URI.
    resources: HashMap<String, Vec<Vec<u8>>>,
    /// Anchors, as `uri#name`.
    anchors: HashMap<String, Vec<Vec<u8>>>,
    /// References met, with the base they were written under.
    pending: Vec<(String, Vec<u8>)>,
    /// Reference targets already walked.
    walked: HashSet<Vec<Vec<u8>>>,
}

/// Checks `root` as a schema of `draft` and gathers what validating
/// needs, or says what is wrong and where.
pub fn survey(root: &Json, draft: Draft) -> Result<Survey, String> {
    let found = Survey { patterns: HashMap::new(), refs: HashMap::new(), tracks_evaluation: false };
    let mut walk = Walk {
        root,
        draft,
        found,
        resources: HashMap::from([(DEFAULT_BASE.to_string(), Vec::new())]),
        anchors: HashMap::new(),
        pending: Vec::new(),
        walked: HashSet::new(),
    };
    walk.schema(root, &mut Vec::new(), DEFAULT_BASE)?;
    while let Some((base, reference)) = walk.pending.pop() {
        if walk.found.refs.get(&base).is_some_and(|refs| refs.contains_key(&reference)) {
            continue;
        }
        let target = walk.resolve(&base, &reference)?;
        if walk.walked.insert(target.steps.clone()) {
            let node = at(root, &target.steps).expect("resolve checked it");
            walk.schema(node, &mut target.steps.clone(), &target.base)?;
        }
        walk.found.refs.entry(base).or_default().insert(reference, target);
    }
    Ok(walk.found)
}

/// "at /a/b: " before a complaint about the schema at that path.
fn located(path: &[Vec<u8>], why: String) -> String {
    if path.is_empty() {
        return why;
    }
    let steps: Vec<String> = path.iter().map(|s| super::values::pointer_step(s)).collect();
    format!("at {}: {why}", quoted_str(&format!("/{}", steps.join("/")), TEXT_CHARS))
}

impl Walk<'_> {
    fn schema(&mut self, node: &Json, path: &mut Vec<Vec<u8>>, base: &str) -> Result<(), String> {
        if path.len() > MAX_DEPTH {
            return Err(format!("it nests deeper than {MAX_DEPTH} levels"));
        }
        let pairs = match node {
            Json::Bool(_) => return Ok(()),
            Json::Object(pairs) => pairs,
            other => return Err(located(path, format!("a schema is an object or a boolean, not {}", shown(other)))),
        };
        let base = self.note_identity(pairs, path, base)?;
        for (keyword, value) in pairs {
            let Some(shape) = shape(keyword, self.draft) else { continue };
            path.push(keyword.clone());
            self.keyword(keyword, shape, value, path, &base)?;
            path.pop();
        }
        Ok(())
    }

    /// Registers the schema's `$id` and anchors, and returns the base
    /// URI in force inside it.
    fn note_identity(&mut self, pairs: &[(Vec<u8>, Json)], path: &[Vec<u8>], base: &str) -> Result<String, String> {
        let id_keyword: &[u8] = if self.draft == Draft::Four { b"id" } else { b"$id" };
        let mut base = base.to_string();
        // Before 2019-09 a `$ref` hides its siblings, `$id` among them.
        let hidden = self.draft <= Draft::Seven && field(pairs, b"$ref").is_some();
        if let (Some(Json::Str(id)), false) = (field(pairs, id_keyword), hidden) {
            let id = String::from_utf8_lossy(id);
            match id.strip_prefix('#') {
                Some(anchor) if self.draft <= Draft::Seven => {
                    self.anchors.insert(format!("{base}#{anchor}"), path.to_vec());
                }
                _ => {
                    base = join(&base, &id).map_err(|why| located(path, why))?;
                    self.resources.insert(base.clone(), path.to_vec());
                }
            }
        }
        if self.draft >= Draft::Y2019 {
            for keyword in [&b"$anchor"[..], b"$dynamicAnchor"] {
                if let Some(Json::Str(name)) = field(pairs, keyword) {
                    self.anchors.insert(format!("{base}#{}", String::from_utf8_lossy(name)), path.to_vec());
                }
            }
        }
        Ok(base)
    }

    fn keyword(
        &mut self,
        keyword: &[u8],
        shape: Shape,
        value: &Json,
        path: &mut Vec<Vec<u8>>,
        base: &str,
    ) -> Result<(), String> {
        let name = String::from_utf8_lossy(keyword).into_owned();
        let wrong = |path: &[Vec<u8>], what: &str| {
            let path = &path[..path.len() - 1];
            Err(located(path, format!("\"{name}\" must be {what}, not {}", shown(value))))
        };
        if keyword.starts_with(b"unevaluated") {
            self.found.tracks_evaluation = true;
        }
        match (shape, value) {
            (Shape::Any, _) => Ok(()),
            (Shape::Schema, _) => self.schema(value, path, base),
            (Shape::SchemaOrTuple, Json::Array(items)) | (Shape::Schemas, Json::Array(items))
                if !items.is_empty() || matches!(shape, Shape::SchemaOrTuple) =>
            {
                self.each(items, path, base)
            }
            (Shape::SchemaOrTuple, _) => self.schema(value, path, base),
            (Shape::SchemaMap(patterns), Json::Object(pairs)) => {
                for (key, schema) in pairs {
                    if patterns {
                        self.pattern(key).map_err(|why| located(path, why))?;
                    }
                    path.push(key.clone());
                    self.schema(schema, path, base)?;
                    path.pop();
                }
                Ok(())
            }
            (Shape::Number, Json::Int(_) | Json::Float(_)) => Ok(()),
            (Shape::Positive, Json::Int(_) | Json::Float(_)) if super::values::number(value) > Some(0.0) => Ok(()),
            (Shape::Count, n) if is_integer(n) && super::values::number(n) >= Some(0.0) => Ok(()),
            (Shape::Boolean, Json::Bool(_)) | (Shape::Text, Json::Str(_)) | (Shape::List, Json::Array(_)) => Ok(()),
            (Shape::Texts, Json::Array(items)) if items.iter().all(|i| matches!(i, Json::Str(_))) => Ok(()),
            (Shape::Types, types) if type_names(types) => Ok(()),
            (Shape::Pattern, Json::Str(pattern)) => {
                self.pattern(pattern).map_err(|why| located(&path[..path.len() - 1], why))
            }
            (Shape::Reference, Json::Str(reference)) => {
                self.pending.push((base.to_string(), reference.clone()));
                Ok(())
            }
            (Shape::Dependencies | Shape::NamesMap, Json::Object(pairs)) => {
                for (key, entry) in pairs {
                    let names = matches!(entry, Json::Array(items) if items.iter().all(|i| matches!(i, Json::Str(_))));
                    if names {
                        continue;
                    }
                    if matches!(shape, Shape::NamesMap) {
                        return wrong(path, "an object of property name lists");
                    }
                    path.push(key.clone());
                    self.schema(entry, path, base)?;
                    path.pop();
                }
                Ok(())
            }
            (Shape::Schemas, _) => wrong(path, "a non-empty array of schemas"),
            (Shape::SchemaMap(_), _) => wrong(path, "an object of schemas"),
            (Shape::Number, _) => wrong(path, "a number"),
            (Shape::Positive, _) => wrong(path, "a number above 0"),
            (Shape::Count, _) => wrong(path, "a non-negative integer"),
            (Shape::Boolean, _) => wrong(path, "true or false"),
            (Shape::Text | Shape::Pattern | Shape::Reference, _) => wrong(path, "a string"),
            (Shape::Texts, _) => wrong(path, "an array of strings"),
            (Shape::Types, _) => wrong(path, "a type name or an array of them"),
            (Shape::List, _) => wrong(path, "an array"),
            (Shape::Dependencies | Shape::NamesMap, _) => wrong(path, "an object"),
        }
    }

    fn each(&mut self, items: &[Json], path: &mut Vec<Vec<u8>>, base: &str) -> Result<(), String> {
        for (i, item) in items.iter().enumerate() {
            path.push(i.to_string().into_bytes());
            self.schema(item, path, base)?;
            path.pop();
        }
        Ok(())
    }

    fn pattern(&mut self, pattern: &[u8]) -> Result<(), String> {
        if self.found.patterns.contains_key(pattern) {
            return Ok(());
        }
        let text = String::from_utf8_lossy(pattern);
        let compiled = regex_lite::Regex::new(&text)
            .map_err(|e| format!("the pattern \"{}\" is not one this validator can run ({e})", said(pattern)))?;
        self.found.patterns.insert(pattern.to_vec(), compiled);
        Ok(())
    }

    /// Where `reference`, written under `base`, leads.
    fn resolve(&self, base: &str, reference: &[u8]) -> Result<Target, String> {
        let text = String::from_utf8_lossy(reference);
        let unresolved = || {
            format!(
                "its $ref \"{}\" does not resolve (only references within the schema are followed)",
                said(reference)
            )
        };
        let absolute = join(base, &text).map_err(|_| unresolved())?;
        let (resource, fragment) = absolute.split_once('#').unwrap_or((&absolute, ""));
        let mut steps = self.resources.get(resource).ok_or_else(unresolved)?.clone();
        if let Some(pointer) = fragment.strip_prefix('/') {
            for step in pointer.split('/') {
                let step = percent_decoded(step).replace("~1", "/").replace("~0", "~");
                steps.push(step.into_bytes());
            }
        } else if !fragment.is_empty() {
            steps = self.anchors.get(&format!("{resource}#{fragment}")).ok_or_else(unresolved)?.clone();
        }
        match at(self.root, &steps) {
            Some(Json::Object(_) | Json::Bool(_)) => Ok(Target { base: self.base_at(&steps), steps }),
            _ => Err(unresolved()),
        }
    }

    /// The base URI at `steps`: that of the innermost resource holding it.
    fn base_at(&self, steps: &[Vec<u8>]) -> String {
        let holding = self.resources.iter().filter(|(_, root)| steps.starts_with(root));
        holding.max_by_key(|(_, root)| root.len()).map_or(DEFAULT_BASE.to_string(), |(uri, _)| uri.clone())
    }
}

fn type_names(types: &Json) -> bool {
    let known = |t: &Json| matches!(t, Json::Str(name) if TYPE_NAMES.contains(&name.as_slice()));
    match types {
        Json::Array(items) => items.iter().all(known),
        single => known(single),
    }
}

/// `reference` resolved against `base`, without an empty fragment.
pub fn join(base: &str, reference: &str) -> Result<String, String> {
    let joined = url::Url::parse(base)
        .and_then(|base| base.join(reference))
        .map_err(|e| format!("\"{reference}\" is not a URI reference ({e})"))?;
    let text = joined.to_string();
    Ok(text.strip_suffix('#').map(str::to_string).unwrap_or(text))
}

fn percent_decoded(step: &str) -> String {
    let bytes = step.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes.get(i + 1..i + 3).and_then(|h| std::str::from_utf8(h).ok());
        match (bytes[i], hex.and_then(|h| u8::from_str_radix(h, 16).ok())) {
            (b'%', Some(byte)) => {
                out.push(byte);
                i += 3;
            }
            (byte, _) => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}
