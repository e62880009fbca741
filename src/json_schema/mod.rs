//! JSON Schema validation over the codec's own values: a tool's
//! `structuredContent` against its `outputSchema` (the client), a call's
//! arguments against its `inputSchema` (the server).
//!
//! Why a validator of our own. The crate this module used covered every
//! draft well, but brought a hundred crates with it (serde, a second
//! regex engine beside the first, bignums, URI and e-mail parsers): a
//! third of the module's bytes and most of a cold build, and every check
//! copied the value into serde's tree first. No lighter maintained crate
//! covers the drafts servers send without the same train. What tool
//! schemas use is small and settled: the 2020-12 vocabulary by default,
//! draft-07 from zod (`$schema` says so), now and then draft-04 or
//! 2019-09; local `$ref`s; a `pattern` or two. That is what this covers,
//! with the message wording agents and their users already saw:
//!
//! * every assertion of drafts 4, 6, 7, 2019-09 and 2020-12, each only
//!   in the drafts that define it; `format` asserted in drafts 4 to 7
//!   and an annotation after (as the drafts say);
//! * `$ref` to `#` pointers, anchors and `$id`s within the schema;
//!   `$dynamicRef` and `$recursiveRef` resolved like `$ref` (a schema
//!   that extends itself dynamically is beyond tool schemas);
//!   `unevaluatedProperties` and `unevaluatedItems` with the annotations
//!   of every applicator that passed;
//! * `pattern` through `regex-lite`: ECMA-262's common syntax, in linear
//!   time whatever the pattern (a server writes them); look-around and
//!   back-references are not supported, so a schema with them does not
//!   compile (the client then leaves the tool unchecked; a Lua server is
//!   told so when it adds the tool).
//!
//! A schema is checked when it is compiled, as a meta-schema would check
//! it: a keyword of the wrong type, an unresolved `$ref` or a pattern that
//! does not compile makes it "not a schema", never a silent pass.

mod check;
mod formats;
mod values;
mod wellformed;

use std::collections::HashMap;

use crate::codec::Json;
pub(crate) use values::plain;

/// The drafts, oldest first: a keyword exists from one of them on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Draft {
    Four,
    Six,
    Seven,
    Y2019,
    Y2020,
}

impl Draft {
    /// The draft a root's `$schema` names; 2020-12 when it names none,
    /// as the 2025-11-25 revision of MCP says.
    fn of(root: &Json) -> Draft {
        let Json::Object(pairs) = root else { return Draft::Y2020 };
        let Some(Json::Str(uri)) = values::field(pairs, b"$schema") else { return Draft::Y2020 };
        let uri = String::from_utf8_lossy(uri);
        [("draft-04", Draft::Four), ("draft-06", Draft::Six), ("draft-07", Draft::Seven), ("2019-09", Draft::Y2019)]
            .into_iter()
            .find(|(name, _)| uri.contains(name))
            .map_or(Draft::Y2020, |(_, draft)| draft)
    }
}

/// Where a `$ref` leads: the path from the root to the schema it names,
/// and the base URI in force there.
#[derive(Clone, Debug)]
struct Target {
    steps: Vec<Vec<u8>>,
    base: String,
}

/// A compiled schema: checked, its patterns compiled and its references
/// resolved once, so that validating does neither.
#[derive(Debug)]
pub struct Validator {
    root: Json,
    draft: Draft,
    patterns: HashMap<Vec<u8>, regex_lite::Regex>,
    /// Every `$ref` by the base it was written under, then its text.
    refs: HashMap<String, HashMap<Vec<u8>, Target>>,
    /// Whether `unevaluatedProperties` or `unevaluatedItems` appear: only
    /// then is it worth noting what each keyword evaluated.
    tracks_evaluation: bool,
}

/// Why an instance does not match: the message, and where in the
/// instance (a JSON Pointer; empty at the root).
#[derive(Debug, PartialEq)]
pub struct Failure {
    pub message: String,
    pub at: String,
}

/// The base URI of a schema without `$id`: an absolute one, so that
/// relative `$id`s and `$ref`s join onto it.
const DEFAULT_BASE: &str = "json-schema:///root";

impl Validator {
    /// Compiles `schema`, or says why it is not one.
    pub fn new(schema: &Json) -> Result<Validator, String> {
        let root = values::plain(schema);
        let draft = Draft::of(&root);
        let found = wellformed::survey(&root, draft)?;
        Ok(Validator {
            tracks_evaluation: found.tracks_evaluation,
            patterns: found.patterns,
            refs: found.refs,
            root,
            draft,
        })
    }

    /// The first way `instance` fails the schema, if it does. Keywords
    /// are tried in alphabetical order within a schema, so a value that
    /// fails several is told the same one every time.
    pub fn first_error(&self, instance: &Json) -> Option<Failure> {
        check::first_error(self, instance)
    }
}

#[cfg(test)]
mod tests;
