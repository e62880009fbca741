//! JSON text <-> [`Json`], to the contract of the reference codec
//! (`lua/trace.lua`), byte for byte.
//!
//! serde_json is not used here on purpose. The contract is about Lua's view
//! of JSON, not Rust's: strings are byte strings (a server that sends
//! Latin-1 still gets its text through, as it does with the reference),
//! numbers are integers exactly when Lua's `tonumber` would make them
//! integers, objects keep duplicate keys so that "last one wins" and "null
//! deletes the key" happen in the same order as table assignment, and the
//! printer writes numbers the way `%d` and `%.14g` do. Matching all of that
//! on top of serde_json would cost more code than this file.
//!
//! One grammar, several builders. The reader below knows JSON; what it
//! makes of what it reads is a [`Build`]: a [`Json`] tree, nothing at all
//! (a check that counts each container's members, see [`RawJson`]), or, in
//! the binding, Lua values pushed straight onto the Lua stack. Replies
//! keep their `result` as checked text ([`decode_message`]): most results
//! only travel to Lua, and building a tree first, then tables from it,
//! then freeing the tree cost 4.1 + 5.7 + 2.4 ms for a 1 MB value, where
//! building the tables directly costs about 5.
//!
//! One deliberate departure: a `\uXXXX` surrogate pair decodes to the one
//! real character it names (the reference writes each half as its own
//! 3-byte sequence, which no UTF-8 reader accepts), and a lone surrogate
//! becomes U+FFFD.

use std::borrow::Cow;
use std::fmt;
use std::sync::OnceLock;

/// A decoded JSON value. Strings are bytes, and objects are kept as an
/// ordered list of pairs, duplicates included: [`Json::get`] resolves them
/// the way Lua table assignment would.
#[derive(Clone, Debug)]
pub enum Json {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(Vec<u8>),
    Array(Vec<Json>),
    Object(Vec<(Vec<u8>, Json)>),
    /// An array or object still in its JSON text (see [`RawJson`]). It
    /// reads like the tree it stands for: [`Json::get`] and friends decode
    /// it the first time they are used.
    Raw(Box<RawJson>),
    /// A request we send, held as its parts (see [`Request`]); it reads
    /// like the object it is written as.
    Request(Box<Request>),
}

/// A JSON-RPC request on its way out. Its four keys are the protocol's
/// own, written from constants: as an object it cost an owned key per
/// field, four of a small call's allocations.
#[derive(Clone, Debug)]
pub struct Request {
    pub id: Json,
    /// Always a string.
    pub method: Json,
    pub params: Json,
}

impl Request {
    /// The object it is written as, keys in the reference's sorted order.
    fn into_tree(self) -> Json {
        Json::object([("id", self.id), ("jsonrpc", Json::str("2.0")), ("method", self.method), ("params", self.params)])
    }
}

/// `"2.0"`, for [`Json::get`] on a [`Request`].
fn jsonrpc_version() -> &'static Json {
    static VERSION: OnceLock<Json> = OnceLock::new();
    VERSION.get_or_init(|| Json::str("2.0"))
}

/// An array or object kept as JSON text: a reply's `result`, checked by
/// [`decode_message`] when the message arrived and decoded only where
/// somebody needs it (straight into Lua, mostly), or the arguments of a
/// request, written once by the binding's encoder and sent as they are.
#[derive(Clone, Debug)]
pub struct RawJson {
    text: Vec<u8>,
    /// Each array's and object's member count (nulls and duplicate keys
    /// included), in the order their opening brackets stand in the text:
    /// a builder can then make each container at its final size when it
    /// opens. Empty until counted.
    sizes: Vec<u32>,
    /// The text is what [`encode_into`] would write for the value, so it
    /// goes to the wire as it is; a reply's text is not (spacing,
    /// escapes, number forms) and is encoded from its tree.
    canonical: bool,
    tree: OnceLock<Json>,
}

/// A kept text equals the tree it stands for.
impl PartialEq for Json {
    fn eq(&self, other: &Json) -> bool {
        match (self, other) {
            (Json::Raw(raw), other) => raw.tree() == other,
            (tree, Json::Raw(raw)) => tree == raw.tree(),
            (Json::Request(request), other) => &Request::into_tree((**request).clone()) == other,
            (tree, Json::Request(request)) => tree == &Request::into_tree((**request).clone()),
            (Json::Null, Json::Null) => true,
            (Json::Bool(a), Json::Bool(b)) => a == b,
            (Json::Int(a), Json::Int(b)) => a == b,
            (Json::Float(a), Json::Float(b)) => a == b,
            (Json::Str(a), Json::Str(b)) => a == b,
            (Json::Array(a), Json::Array(b)) => a == b,
            (Json::Object(a), Json::Object(b)) => a == b,
            _ => false,
        }
    }
}

impl RawJson {
    /// Text our encoder wrote for an array or object.
    pub fn encoded(text: Vec<u8>) -> Json {
        Json::Raw(Box::new(RawJson { text, sizes: Vec::new(), canonical: true, tree: OnceLock::new() }))
    }

    pub fn text(&self) -> &[u8] {
        &self.text
    }

    /// The member counts (see the field); counted now if the text came
    /// from our encoder, which does not count them.
    pub fn sizes(&self) -> Cow<'_, [u32]> {
        if !self.sizes.is_empty() {
            return Cow::Borrowed(&self.sizes);
        }
        let mut sizes = Vec::new();
        let mut scratch = Vec::new();
        let _ = Reader::new(&self.text, &mut scratch, Sizes { sizes: &mut sizes }).whole();
        Cow::Owned(sizes)
    }

    /// The tree, if something has needed it already: it then says what
    /// the value is (it may have been changed since).
    pub fn decoded(&self) -> Option<&Json> {
        self.tree.get()
    }

    /// The tree, decoded now if nobody needed it before. The text was
    /// checked when it was kept, so this cannot fail.
    pub fn tree(&self) -> &Json {
        self.tree.get_or_init(|| decode(&self.text).unwrap_or(Json::Null))
    }

    fn into_tree(self) -> Json {
        let RawJson { text, tree, .. } = self;
        tree.into_inner().unwrap_or_else(|| decode(&text).unwrap_or(Json::Null))
    }
}

/// Which parts of a value to decode into a tree, for [`Json::selected`]:
/// Rust needs a few fields of results that mostly go to Lua (a page's
/// `nextCursor`, the tools' names and output schemas, a call's `content`).
#[derive(Clone, Copy)]
pub enum Select<'a> {
    /// The whole value.
    Whole,
    /// Of an object, these keys, each selected further; an array stands
    /// as an empty array.
    Keys(&'a [(&'a str, Select<'a>)]),
    /// Of an array, every element, selected further; an object stands as
    /// an empty object.
    Each(&'a Select<'a>),
}

impl Json {
    pub fn str(s: impl AsRef<[u8]>) -> Json {
        Json::Str(s.as_ref().to_vec())
    }

    /// Builds an object from pairs, keeping their order.
    pub fn object<K: AsRef<[u8]>>(pairs: impl IntoIterator<Item = (K, Json)>) -> Json {
        Json::Object(pairs.into_iter().map(|(k, v)| (k.as_ref().to_vec(), v)).collect())
    }

    /// A kept text becomes its tree, for code that changes or takes it
    /// apart.
    pub fn materialize(&mut self) {
        match std::mem::replace(self, Json::Null) {
            Json::Raw(raw) => *self = raw.into_tree(),
            Json::Request(request) => *self = request.into_tree(),
            other => *self = other,
        }
    }

    /// The parts of this value `select` names, as a tree. A kept text is
    /// decoded only there (the rest is stepped over); a tree is lent as
    /// it is, since reading it costs nothing.
    pub fn selected(&self, select: Select) -> Cow<'_, Json> {
        match self {
            Json::Raw(raw) => match raw.decoded() {
                Some(tree) => Cow::Borrowed(tree),
                None => Cow::Owned(decode_selected(&raw.text, select)),
            },
            tree => Cow::Borrowed(tree),
        }
    }

    /// [`Json::selected`], for a value no longer needed whole.
    pub fn into_selected(self, select: Select) -> Json {
        match self {
            Json::Raw(raw) if raw.decoded().is_none() => decode_selected(&raw.text, select),
            Json::Raw(raw) => raw.into_tree(),
            tree => tree,
        }
    }

    /// The value of `key` as Lua would see it after decoding: the last
    /// occurrence wins, and `null` means absent.
    pub fn get(&self, key: &str) -> Option<&Json> {
        match self {
            Json::Object(pairs) => pairs
                .iter()
                .rev()
                .find(|(k, _)| k == key.as_bytes())
                .map(|(_, v)| v)
                .filter(|v| !matches!(v, Json::Null)),
            Json::Raw(raw) => raw.tree().get(key),
            Json::Request(request) => match key {
                "id" => Some(&request.id),
                "jsonrpc" => Some(jsonrpc_version()),
                "method" => Some(&request.method),
                "params" => Some(&request.params),
                _ => None,
            }
            .filter(|v| !matches!(v, Json::Null)),
            _ => None,
        }
    }

    /// [`Json::get`], for changing the value in place.
    pub fn get_mut(&mut self, key: &str) -> Option<&mut Json> {
        self.materialize();
        match self {
            Json::Object(pairs) => pairs
                .iter_mut()
                .rev()
                .find(|(k, _)| k == key.as_bytes())
                .map(|(_, v)| v)
                .filter(|v| !matches!(v, Json::Null)),
            _ => None,
        }
    }

    /// Removes and returns the value of `key` as [`Json::get`] sees it,
    /// so a large result can be handed on without a copy.
    pub fn take(&mut self, key: &str) -> Option<Json> {
        self.materialize();
        let Json::Object(pairs) = self else { return None };
        let at = pairs.iter().rposition(|(k, _)| k == key.as_bytes())?;
        Some(pairs.swap_remove(at).1).filter(|v| !matches!(v, Json::Null))
    }

    /// Lua truthiness: absent, `null` and `false` are false.
    pub fn is_truthy(&self) -> bool {
        !matches!(self, Json::Null | Json::Bool(false))
    }

    /// The elements Lua's `ipairs` would visit: an array's non-null
    /// elements; nothing for any other value.
    pub fn elements(&self) -> impl Iterator<Item = &Json> {
        let items: &[Json] = match self {
            Json::Array(items) => items,
            Json::Raw(raw) => match raw.tree() {
                Json::Array(items) => items,
                _ => &[],
            },
            _ => &[],
        };
        items.iter().filter(|v| !matches!(v, Json::Null))
    }
}

/// Why a text is not JSON, and where.
#[derive(Debug, PartialEq)]
pub struct DecodeError {
    pub what: &'static str,
    pub at: usize,
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} at byte {}", self.what, self.at + 1)
    }
}

/// Nesting deeper than this is refused rather than recursed into, both
/// ways: a hostile line of `[[[[...` must not overflow the Lua host's
/// stack, and neither may a Lua table 12,000 levels deep. The binding's
/// encoder bounds a value (the arguments) at this depth, the decoder a
/// whole message; so a value within a few levels of the limit, echoed
/// back inside a reply, can be refused on its way in.
pub const MAX_DEPTH: usize = 512;

/// The error `decode` gives for nesting past [`MAX_DEPTH`].
pub const TOO_DEEP: &str = "nested too deeply";

/// What the top level of a message says about it, read without following
/// any nested value: used when a message is refused as too deep.
#[derive(Debug, Default, PartialEq)]
pub struct Envelope {
    /// Its scalar `id`, when one could be read.
    pub id: Option<Json>,
    /// It has a `method`: a request or notification from the server, not
    /// a reply to us (whose ids may well collide with ours).
    pub has_method: bool,
}

/// The [`Envelope`] of a JSON object: so that the request a too-deep reply
/// answers can fail at once instead of waiting out its time, and a too-deep
/// server request can be refused. Values are skipped by counting brackets,
/// so the id is found wherever it stands at the top level.
pub fn peek_envelope(text: &[u8]) -> Envelope {
    let mut envelope = Envelope::default();
    envelope.id = peek_top_level(text, &mut envelope.has_method);
    envelope
}

fn peek_top_level(text: &[u8], has_method: &mut bool) -> Option<Json> {
    let mut scratch = Vec::new();
    let mut reader = Reader::new(text, &mut scratch, Tree);
    reader.depth = MAX_DEPTH - 1;
    reader.skip_space();
    if reader.peek() != Some(b'{') {
        return None;
    }
    reader.pos += 1;
    let mut id = None;
    loop {
        reader.skip_space();
        if reader.peek() != Some(b'"') {
            return id;
        }
        let Ok(at) = reader.scan_string() else { return id };
        let key = match at {
            StringAt::Plain(from, to) => &text[from..to],
            StringAt::Escaped => &reader.scratch[..],
        };
        let (is_method, is_id) = (key == b"method", key == b"id");
        *has_method |= is_method;
        reader.skip_space();
        if reader.peek() != Some(b':') {
            return id;
        }
        reader.pos += 1;
        reader.skip_space();
        let scalar = !matches!(reader.peek(), Some(b'{' | b'['));
        if is_id && scalar {
            // Last one wins, as table assignment would have it.
            id = Some(reader.value().ok()?);
        } else if reader.skip_value().is_err() {
            // A line cut short: what was read so far still counts.
            return id;
        }
        reader.skip_space();
        match reader.peek() {
            Some(b',') => reader.pos += 1,
            _ => return id,
        }
    }
}

/// Parses one JSON text; only whitespace may surround the value.
pub fn decode(text: &[u8]) -> Result<Json, DecodeError> {
    let mut scratch = Vec::new();
    Reader::new(text, &mut scratch, Tree).whole()
}

/// [`decode`] for a whole JSON-RPC message: the same tree, with the same
/// errors at the same bytes, except that a `result` that is an array or
/// an object stays text ([`Json::Raw`]), checked here and counted for the
/// builder that reads it later. The check builds nothing but those counts.
pub fn decode_message(text: &[u8]) -> Result<Json, DecodeError> {
    let mut scratch = Vec::new();
    let mut reader = Reader::new(text, &mut scratch, Tree);
    reader.keep_result_raw = true;
    reader.whole()
}

/// Parses one JSON text with `builder`: whatever it makes of the value.
/// `scratch` holds strings with escapes while they are decoded.
pub fn read_with<B: Build>(text: &[u8], scratch: &mut Vec<u8>, builder: B) -> Result<B::Value, DecodeError> {
    Reader::new(text, scratch, builder).whole()
}

/// Only the parts `select` names of a text [`decode_message`] checked.
fn decode_selected(text: &[u8], select: Select) -> Json {
    let mut scratch = Vec::new();
    let mut reader = Reader::new(text, &mut scratch, Tree);
    reader.selected(select).unwrap_or(Json::Null)
}

/// What a parse makes of what it reads: the reader calls these in text
/// order, each container's members between its `begin_` and `end_` call.
pub trait Build {
    /// One finished value.
    type Value;
    /// An array being filled.
    type Array;
    /// An object being filled.
    type Object;
    fn null(&mut self) -> Self::Value;
    fn boolean(&mut self, b: bool) -> Self::Value;
    fn integer(&mut self, i: i64) -> Self::Value;
    fn float(&mut self, f: f64) -> Self::Value;
    fn string(&mut self, s: &[u8]) -> Self::Value;
    /// A value [`decode_message`] kept as text.
    fn raw(&mut self, raw: RawJson) -> Self::Value;
    fn begin_array(&mut self) -> Self::Array;
    fn element(&mut self, array: &mut Self::Array, value: Self::Value);
    fn end_array(&mut self, array: Self::Array) -> Self::Value;
    fn begin_object(&mut self) -> Self::Object;
    /// The key of the member whose value comes next.
    fn key(&mut self, object: &mut Self::Object, key: &[u8]);
    fn member(&mut self, object: &mut Self::Object, value: Self::Value);
    fn end_object(&mut self, object: Self::Object) -> Self::Value;
}

/// Builds [`Json`] trees.
struct Tree;

impl Build for Tree {
    type Value = Json;
    type Array = Vec<Json>;
    /// The pairs so far, and the key of the next one.
    type Object = (Vec<(Vec<u8>, Json)>, Vec<u8>);

    fn null(&mut self) -> Json {
        Json::Null
    }
    fn boolean(&mut self, b: bool) -> Json {
        Json::Bool(b)
    }
    fn integer(&mut self, i: i64) -> Json {
        Json::Int(i)
    }
    fn float(&mut self, f: f64) -> Json {
        Json::Float(f)
    }
    fn string(&mut self, s: &[u8]) -> Json {
        Json::Str(s.to_vec())
    }
    fn raw(&mut self, raw: RawJson) -> Json {
        Json::Raw(Box::new(raw))
    }
    fn begin_array(&mut self) -> Vec<Json> {
        Vec::new()
    }
    fn element(&mut self, array: &mut Vec<Json>, value: Json) {
        array.push(value);
    }
    fn end_array(&mut self, array: Vec<Json>) -> Json {
        Json::Array(array)
    }
    fn begin_object(&mut self) -> Self::Object {
        (Vec::new(), Vec::new())
    }
    fn key(&mut self, object: &mut Self::Object, key: &[u8]) {
        object.1 = key.to_vec();
    }
    fn member(&mut self, object: &mut Self::Object, value: Json) {
        let key = std::mem::take(&mut object.1);
        object.0.push((key, value));
    }
    fn end_object(&mut self, object: Self::Object) -> Json {
        Json::Object(object.0)
    }
}

/// Builds nothing: checks the text, counting each container's members.
struct Sizes<'a> {
    sizes: &'a mut Vec<u32>,
}

impl Build for Sizes<'_> {
    type Value = ();
    /// Its slot in `sizes`, and its count so far.
    type Array = (usize, u32);
    type Object = (usize, u32);

    fn null(&mut self) {}
    fn boolean(&mut self, _: bool) {}
    fn integer(&mut self, _: i64) {}
    fn float(&mut self, _: f64) {}
    fn string(&mut self, _: &[u8]) {}
    fn raw(&mut self, _: RawJson) {}
    fn begin_array(&mut self) -> (usize, u32) {
        self.sizes.push(0);
        (self.sizes.len() - 1, 0)
    }
    fn element(&mut self, array: &mut (usize, u32), _: ()) {
        array.1 += 1;
    }
    fn end_array(&mut self, (slot, count): (usize, u32)) {
        self.sizes[slot] = count;
    }
    fn begin_object(&mut self) -> (usize, u32) {
        self.begin_array()
    }
    fn key(&mut self, _: &mut (usize, u32), _: &[u8]) {}
    fn member(&mut self, object: &mut (usize, u32), _: ()) {
        object.1 += 1;
    }
    fn end_object(&mut self, object: (usize, u32)) {
        self.end_array(object)
    }
}

struct Reader<'t, 's, B> {
    text: &'t [u8],
    pos: usize,
    depth: usize,
    /// A string with escapes, decoded (one buffer for all of them).
    scratch: &'s mut Vec<u8>,
    builder: B,
    /// Keep a top-level `result` as text (see [`decode_message`]).
    keep_result_raw: bool,
}

impl<'t, 's, B: Build> Reader<'t, 's, B> {
    fn new(text: &'t [u8], scratch: &'s mut Vec<u8>, builder: B) -> Self {
        Reader { text, pos: 0, depth: 0, scratch, builder, keep_result_raw: false }
    }

    fn fail(&self, what: &'static str) -> DecodeError {
        DecodeError { what, at: self.pos }
    }

    fn peek(&self) -> Option<u8> {
        self.text.get(self.pos).copied()
    }

    fn skip_space(&mut self) {
        while let Some(b' ' | b'\t' | b'\r' | b'\n') = self.peek() {
            self.pos += 1;
        }
    }

    /// The text is one value, with only whitespace around it.
    fn whole(mut self) -> Result<B::Value, DecodeError> {
        let value = self.value()?;
        self.skip_space();
        if self.pos < self.text.len() {
            return Err(self.fail("trailing text"));
        }
        Ok(value)
    }

    fn literal(&mut self, word: &[u8]) -> Result<(), DecodeError> {
        if self.text[self.pos..].starts_with(word) {
            self.pos += word.len();
            Ok(())
        } else {
            Err(self.fail("unexpected character"))
        }
    }

    fn value(&mut self) -> Result<B::Value, DecodeError> {
        self.skip_space();
        match self.peek() {
            Some(b'{') => {
                self.enter()?;
                let value = self.object();
                self.depth -= 1;
                value
            }
            Some(b'[') => {
                self.enter()?;
                let value = self.array();
                self.depth -= 1;
                value
            }
            Some(b'"') => {
                let at = self.scan_string()?;
                let bytes = match at {
                    StringAt::Plain(from, to) => &self.text[from..to],
                    StringAt::Escaped => &self.scratch[..],
                };
                Ok(self.builder.string(bytes))
            }
            Some(b'-' | b'0'..=b'9') => self.number(),
            Some(b't') => self.literal(b"true").map(|_| self.builder.boolean(true)),
            Some(b'f') => self.literal(b"false").map(|_| self.builder.boolean(false)),
            Some(b'n') => self.literal(b"null").map(|_| self.builder.null()),
            Some(_) => Err(self.fail("unexpected character")),
            None => Err(self.fail("unexpected end of text")),
        }
    }

    fn enter(&mut self) -> Result<(), DecodeError> {
        if self.depth >= MAX_DEPTH {
            return Err(self.fail(TOO_DEEP));
        }
        self.depth += 1;
        Ok(())
    }

    /// Steps over one value of any depth without building it or recursing.
    fn skip_value(&mut self) -> Result<(), DecodeError> {
        let mut depth = 0usize;
        loop {
            self.skip_space();
            match self.peek() {
                None => return Err(self.fail("unexpected end of text")),
                Some(b'{' | b'[') => {
                    depth += 1;
                    self.pos += 1;
                    continue;
                }
                Some(b'}' | b']') if depth > 0 => {
                    depth -= 1;
                    self.pos += 1;
                }
                Some(b',' | b':') if depth > 0 => {
                    self.pos += 1;
                    continue;
                }
                Some(b'"') => {
                    self.scan_string()?;
                }
                Some(_) => {
                    let start = self.pos;
                    while let Some(b) = self.peek() {
                        if matches!(b, b',' | b':' | b']' | b'}' | b' ' | b'\t' | b'\r' | b'\n') {
                            break;
                        }
                        self.pos += 1;
                    }
                    if self.pos == start {
                        return Err(self.fail("unexpected character"));
                    }
                }
            }
            if depth == 0 {
                return Ok(());
            }
        }
    }

    /// The value of a member whose key was just read.
    fn member_value(&mut self, key_is_result: bool) -> Result<B::Value, DecodeError> {
        if key_is_result && self.keep_result_raw && self.depth == 1 {
            self.skip_space();
            if let Some(b'{' | b'[') = self.peek() {
                return self.kept_raw();
            }
        }
        self.value()
    }

    /// Checks and counts the array or object here, keeping its text.
    fn kept_raw(&mut self) -> Result<B::Value, DecodeError> {
        let start = self.pos;
        let mut sizes = Vec::new();
        let mut check = Reader {
            text: self.text,
            pos: self.pos,
            depth: self.depth,
            scratch: &mut *self.scratch,
            builder: Sizes { sizes: &mut sizes },
            keep_result_raw: false,
        };
        check.value()?;
        self.pos = check.pos;
        let text = self.text[start..self.pos].to_vec();
        Ok(self.builder.raw(RawJson { text, sizes, canonical: false, tree: OnceLock::new() }))
    }

    fn object(&mut self) -> Result<B::Value, DecodeError> {
        self.pos += 1;
        let mut object = self.builder.begin_object();
        self.skip_space();
        if self.peek() == Some(b'}') {
            self.pos += 1;
            return Ok(self.builder.end_object(object));
        }
        loop {
            if self.peek() != Some(b'"') {
                return Err(self.fail("expected a key"));
            }
            let at = self.scan_string()?;
            let key = match at {
                StringAt::Plain(from, to) => &self.text[from..to],
                StringAt::Escaped => &self.scratch[..],
            };
            let is_result = key == b"result";
            self.builder.key(&mut object, key);
            self.skip_space();
            if self.peek() != Some(b':') {
                return Err(self.fail("expected ':'"));
            }
            self.pos += 1;
            let value = self.member_value(is_result)?;
            self.builder.member(&mut object, value);
            self.skip_space();
            match self.peek() {
                Some(b'}') => {
                    self.pos += 1;
                    return Ok(self.builder.end_object(object));
                }
                Some(b',') => {
                    self.pos += 1;
                    self.skip_space();
                }
                _ => return Err(self.fail("expected ',' or '}'")),
            }
        }
    }

    fn array(&mut self) -> Result<B::Value, DecodeError> {
        self.pos += 1;
        let mut array = self.builder.begin_array();
        self.skip_space();
        if self.peek() == Some(b']') {
            self.pos += 1;
            return Ok(self.builder.end_array(array));
        }
        loop {
            let value = self.value()?;
            self.builder.element(&mut array, value);
            self.skip_space();
            match self.peek() {
                Some(b']') => {
                    self.pos += 1;
                    return Ok(self.builder.end_array(array));
                }
                Some(b',') => self.pos += 1,
                _ => return Err(self.fail("expected ',' or ']'")),
            }
        }
    }
}

/// Where a string just read is: still in the text (no escapes), or
/// decoded into the scratch buffer.
#[derive(Clone, Copy)]
enum StringAt {
    Plain(usize, usize),
    Escaped,
}

impl<B: Build> Reader<'_, '_, B> {
    fn hex4(&mut self) -> Result<u32, DecodeError> {
        let digits = self.text.get(self.pos..self.pos + 4).ok_or_else(|| self.fail("bad \\u escape"))?;
        let mut code = 0;
        for &d in digits {
            let nibble = (d as char).to_digit(16).ok_or_else(|| self.fail("bad \\u escape"))?;
            code = code * 16 + nibble;
        }
        self.pos += 4;
        Ok(code)
    }

    /// Reads the string at the opening quote here. Most strings have no
    /// escape and are handed on as a slice of the text, with no copy;
    /// the others are decoded into the scratch buffer, run by run.
    fn scan_string(&mut self) -> Result<StringAt, DecodeError> {
        let start = self.pos;
        self.pos += 1;
        let mut escaped = false;
        loop {
            let rest = &self.text[self.pos..];
            let Some(run) = rest.iter().position(|&b| b == b'"' || b == b'\\') else {
                self.pos = start;
                return Err(self.fail("unterminated string"));
            };
            if escaped {
                self.scratch.extend_from_slice(&rest[..run]);
            }
            self.pos += run;
            if self.text[self.pos] == b'"' {
                self.pos += 1;
                return Ok(if escaped { StringAt::Escaped } else { StringAt::Plain(start + 1, self.pos - 1) });
            }
            if !escaped {
                escaped = true;
                self.scratch.clear();
                self.scratch.extend_from_slice(&self.text[start + 1..self.pos]);
            }
            let escape = self.text.get(self.pos + 1).copied();
            self.pos += 2;
            let simple = match escape {
                Some(b'"') => b'"',
                Some(b'\\') => b'\\',
                Some(b'/') => b'/',
                Some(b'b') => 0x08,
                Some(b'f') => 0x0c,
                Some(b'n') => b'\n',
                Some(b'r') => b'\r',
                Some(b't') => b'\t',
                Some(b'u') => {
                    let code = self.escaped_char()?;
                    let mut buf = [0u8; 4];
                    self.scratch.extend_from_slice(code.encode_utf8(&mut buf).as_bytes());
                    continue;
                }
                _ => {
                    self.pos -= 2;
                    return Err(self.fail("bad escape"));
                }
            };
            self.scratch.push(simple);
        }
    }

    /// After `\u`: one code unit, or a surrogate pair joined into one char.
    fn escaped_char(&mut self) -> Result<char, DecodeError> {
        let first = self.hex4()?;
        if (0xD800..0xDC00).contains(&first) && self.text[self.pos..].starts_with(b"\\u") {
            let save = self.pos;
            self.pos += 2;
            let second = self.hex4()?;
            if (0xDC00..0xE000).contains(&second) {
                let code = 0x10000 + ((first - 0xD800) << 10) + (second - 0xDC00);
                return Ok(char::from_u32(code).unwrap_or(char::REPLACEMENT_CHARACTER));
            }
            self.pos = save;
        }
        Ok(char::from_u32(first).unwrap_or(char::REPLACEMENT_CHARACTER))
    }

    fn number(&mut self) -> Result<B::Value, DecodeError> {
        let start = self.pos;
        let digits = |r: &mut Self| {
            let from = r.pos;
            while let Some(b'0'..=b'9') = r.peek() {
                r.pos += 1;
            }
            r.pos - from
        };
        if self.peek() == Some(b'-') {
            self.pos += 1;
        }
        if digits(self) == 0 {
            self.pos = start;
            return Err(self.fail("bad number"));
        }
        let mut integral = true;
        if self.peek() == Some(b'.') {
            self.pos += 1;
            digits(self);
            integral = false;
        }
        if let Some(b'e' | b'E') = self.peek() {
            self.pos += 1;
            if let Some(b'+' | b'-') = self.peek() {
                self.pos += 1;
            }
            if digits(self) == 0 {
                self.pos = start;
                return Err(self.fail("bad number"));
            }
            integral = false;
        }
        // The slice is ASCII by construction.
        let text = std::str::from_utf8(&self.text[start..self.pos]).unwrap_or("");
        // As Lua's tonumber: a decimal integer that fits in 64 bits stays an
        // integer; one that overflows becomes a float.
        if integral {
            if let Ok(i) = text.parse::<i64>() {
                return Ok(self.builder.integer(i));
            }
        }
        // Rust reads "1.", "1.e5" and leading zeros as Lua does, straight
        // from the slice: no string is made for a float.
        match text.parse::<f64>() {
            Ok(f) => Ok(self.builder.float(f)),
            Err(_) => {
                self.pos = start;
                Err(self.fail("bad number"))
            }
        }
    }
}

impl Reader<'_, '_, Tree> {
    /// [`Reader::value`] for the parts `select` names; the rest is stepped
    /// over. Only for text already checked.
    fn selected(&mut self, select: Select) -> Result<Json, DecodeError> {
        self.skip_space();
        match (select, self.peek()) {
            (Select::Whole, _) | (_, Some(b'"' | b'-' | b'0'..=b'9' | b't' | b'f' | b'n')) => self.value(),
            (Select::Keys(_), Some(b'[')) => self.skip_value().map(|_| Json::Array(Vec::new())),
            (Select::Each(_), Some(b'{')) => self.skip_value().map(|_| Json::Object(Vec::new())),
            (Select::Keys(keys), Some(b'{')) => {
                self.pos += 1;
                let mut pairs = Vec::new();
                loop {
                    self.skip_space();
                    if self.peek() == Some(b'}') {
                        self.pos += 1;
                        return Ok(Json::Object(pairs));
                    }
                    if self.peek() != Some(b'"') {
                        return Err(self.fail("expected a key"));
                    }
                    let at = self.scan_string()?;
                    let key = match at {
                        StringAt::Plain(from, to) => &self.text[from..to],
                        StringAt::Escaped => &self.scratch[..],
                    };
                    let wanted = keys.iter().find(|(name, _)| name.as_bytes() == key).map(|(_, sub)| *sub);
                    let key = wanted.map(|_| key.to_vec());
                    self.skip_space();
                    self.pos += 1; // the ':'
                    match (key, wanted) {
                        (Some(key), Some(sub)) => {
                            let value = self.selected(sub)?;
                            pairs.push((key, value));
                        }
                        _ => self.skip_value()?,
                    }
                    self.skip_space();
                    match self.peek() {
                        Some(b',') => self.pos += 1,
                        Some(b'}') => {}
                        _ => return Err(self.fail("expected ',' or '}'")),
                    }
                }
            }
            (Select::Each(each), Some(b'[')) => {
                self.pos += 1;
                let mut items = Vec::new();
                loop {
                    self.skip_space();
                    if self.peek() == Some(b']') {
                        self.pos += 1;
                        return Ok(Json::Array(items));
                    }
                    items.push(self.selected(*each)?);
                    self.skip_space();
                    match self.peek() {
                        Some(b',') => self.pos += 1,
                        Some(b']') => {}
                        _ => return Err(self.fail("expected ',' or ']'")),
                    }
                }
            }
            _ => Err(self.fail("unexpected character")),
        }
    }
}

/// `__jsonorder` of a Lua table) when they build the value.
pub fn encode_into(value: &Json, out: &mut Vec<u8>) {
    match value {
        Json::Null => out.extend_from_slice(b"null"),
        Json::Bool(b) => out.extend_from_slice(if *b { b"true" } else { b"false" }),
        Json::Int(i) => write_int(*i, out),
        Json::Float(f) => write_json_float(*f, out),
        Json::Str(s) => encode_string(s, out),
        Json::Raw(raw) if raw.canonical && raw.decoded().is_none() => out.extend_from_slice(&raw.text),
        Json::Raw(raw) => encode_into(raw.tree(), out),
        Json::Request(request) => {
            out.extend_from_slice(b"{\"id\":");
            encode_into(&request.id, out);
            out.extend_from_slice(b",\"jsonrpc\":\"2.0\",\"method\":");
            encode_into(&request.method, out);
            out.extend_from_slice(b",\"params\":");
            encode_into(&request.params, out);
            out.push(b'}');
        }
        Json::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                encode_into(item, out);
            }
            out.push(b']');
        }
        Json::Object(pairs) => {
            out.push(b'{');
            for (i, (key, item)) in pairs.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                encode_string(key, out);
                out.push(b':');
                encode_into(item, out);
            }
            out.push(b'}');
        }
    }
}

pub fn encode(value: &Json) -> Vec<u8> {
    let mut out = Vec::with_capacity(128);
    encode_into(value, &mut out);
    out
}

/// What a byte becomes inside a JSON string: 0 for itself, else the
/// second byte of its two-byte escape, or `u` for `\u00XX`.
const ESCAPES: [u8; 256] = {
    let mut table = [0u8; 256];
    let mut b = 0;
    while b < 0x20 {
        table[b] = b'u';
        b += 1;
    }
    table[0x7f] = b'u';
    table[b'"' as usize] = b'"';
    table[b'\\' as usize] = b'\\';
    table[0x08] = b'b';
    table[0x0c] = b'f';
    table[b'\n' as usize] = b'n';
    table[b'\r' as usize] = b'r';
    table[b'\t' as usize] = b't';
    table
};

/// Appends `s` as a JSON string. Runs of bytes that need no escape are
/// found with one table look-up per byte and copied whole: most text is
/// one such run (1 MB of arguments took 9.5 ms when every byte went
/// through a match and a push).
pub fn encode_string(s: &[u8], out: &mut Vec<u8>) {
    out.reserve(s.len() + 2);
    out.push(b'"');
    let mut rest = s;
    while let Some(at) = rest.iter().position(|&b| ESCAPES[usize::from(b)] != 0) {
        out.extend_from_slice(&rest[..at]);
        let b = rest[at];
        match ESCAPES[usize::from(b)] {
            b'u' => {
                const HEX: &[u8; 16] = b"0123456789abcdef";
                out.extend_from_slice(&[b'\\', b'u', b'0', b'0', HEX[usize::from(b >> 4)], HEX[usize::from(b & 15)]]);
            }
            second => out.extend_from_slice(&[b'\\', second]),
        }
        rest = &rest[at + 1..];
    }
    out.extend_from_slice(rest);
    out.push(b'"');
}

/// Appends an integer as `%d` writes it, with no string made for it.
pub fn write_int(i: i64, out: &mut Vec<u8>) {
    let mut buf = [0u8; 20];
    let mut at = buf.len();
    let mut n = i.unsigned_abs();
    loop {
        at -= 1;
        buf[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    if i < 0 {
        out.push(b'-');
    }
    out.extend_from_slice(&buf[at..]);
}

/// A float as a JSON value: the shortest text that reads back as the same
/// double, laid out as JavaScript writes numbers (plain from 1e-6 up to
/// 1e21, with an exponent outside), so that whatever parses it (JSON.parse,
/// Python's json, serde) gets the float that was sent. The reference
/// writes `%.14g`, which rounds away up to three digits: 2^53 reached a
/// Python server as 9007199254741000.0. Integral values come out without
/// a fraction (`3`, not `3.0`), as `%.14g` wrote them too. Callers must
/// not pass NaN or infinity.
pub fn write_json_float(f: f64, out: &mut Vec<u8>) {
    use std::io::Write;
    if f == 0.0 {
        // -0 too, as JSON.stringify writes it and the reference did.
        out.push(b'0');
        return;
    }
    let mut room = [0u8; SCIENTIFIC_ROOM];
    let len = {
        let mut cursor = &mut room[..];
        let _ = write!(cursor, "{:e}", f.abs());
        SCIENTIFIC_ROOM - cursor.len()
    };
    let text = &room[..len];
    let e_at = text.iter().position(|&b| b == b'e').unwrap_or(len);
    let mut digits = [0u8; 20];
    let mut count = 0;
    for &b in text[..e_at].iter().filter(|b| b.is_ascii_digit()) {
        digits[count] = b;
        count += 1;
    }
    let digits = &digits[..count];
    let exponent: i32 =
        std::str::from_utf8(&text[(e_at + 1).min(len)..]).ok().and_then(|e| e.parse().ok()).unwrap_or(0);
    // Where the decimal point falls after the first `point` digits.
    let point = exponent + 1;
    if f < 0.0 {
        out.push(b'-');
    }
    if count as i32 <= point && point <= 21 {
        out.extend_from_slice(digits);
        out.resize(out.len() + (point as usize - count), b'0');
    } else if 0 < point && point <= 21 {
        out.extend_from_slice(&digits[..point as usize]);
        out.push(b'.');
        out.extend_from_slice(&digits[point as usize..]);
    } else if -6 < point && point <= 0 {
        out.extend_from_slice(b"0.");
        out.resize(out.len() + (-point) as usize, b'0');
        out.extend_from_slice(digits);
    } else {
        out.push(digits[0]);
        if count > 1 {
            out.push(b'.');
            out.extend_from_slice(&digits[1..]);
        }
        let _ = write!(out, "e{}{}", if exponent < 0 { '-' } else { '+' }, exponent.abs());
    }
}

/// [`format_float`], appended to `out` with no string made for it.
pub fn write_float(f: f64, out: &mut Vec<u8>) {
    if f == f.trunc() && f.abs() < 1e15 {
        write_int(f as i64, out);
    } else {
        write_g14(f, out);
    }
}

/// A float as the wire writes it: integral values below 1e15 as `%d`,
/// everything else as `%.14g`. Callers must not pass NaN or infinity.
pub fn format_float(f: f64) -> String {
    if f == f.trunc() && f.abs() < 1e15 {
        return (f as i64).to_string();
    }
    format_g14(f)
}

/// C's `%.14g`, which is also how Lua's `tostring` writes floats.
///
/// The digits come from Rust's shortest round-trip form when that has at
/// most 14 significant digits (then it is exactly what rounding to 14
/// digits gives, since the 14-digit grid is far coarser than a float's
/// spacing); otherwise from exact formatting, which is much slower.
/// LuaJIT formats numbers itself and rounds an exact tie away from zero
/// (`%.14g` of 10000000000000.5 is 10000000000001 there, ...000 in C, which
/// rounds to even). For a tie at `digits` significant digits, the scientific
/// form LuaJIT's rounding gives; None when `f` is no tie there.
#[cfg(feature = "luajit")]
fn tie_rounded_away(f: f64, digits: usize) -> Option<String> {
    // Every f64 has at most 767 significant decimal digits: this is exact.
    let exact = format!("{:.*e}", 800, f);
    let (mantissa, exponent) = exact.split_once('e')?;
    let negative = mantissa.starts_with('-');
    let all: Vec<u8> = mantissa.bytes().filter(u8::is_ascii_digit).collect();
    let (kept, dropped) = all.split_at(digits);
    if dropped.first() != Some(&b'5') || dropped[1..].iter().any(|&d| d != b'0') {
        return None;
    }
    let mut kept = kept.to_vec();
    let mut exponent: i32 = exponent.parse().ok()?;
    let mut at = kept.len();
    loop {
        if at == 0 {
            // 9.99...9 rounded up: 1.00...0 one decade higher.
            kept.insert(0, b'1');
            kept.pop();
            exponent += 1;
            break;
        }
        at -= 1;
        if kept[at] == b'9' {
            kept[at] = b'0';
        } else {
            kept[at] += 1;
            break;
        }
    }
    let (first, rest) = kept.split_at(1);
    let sign = if negative { "-" } else { "" };
    Some(format!("{sign}{}.{}e{exponent}", String::from_utf8_lossy(first), String::from_utf8_lossy(rest)))
}

pub fn format_g14(f: f64) -> String {
    let mut out = Vec::with_capacity(24);
    write_g14(f, &mut out);
    String::from_utf8(out).unwrap_or_default()
}

/// Room for any `{:e}` or `{:.13e}` of an f64: sign, 17 digits, point,
/// `e-308`.
const SCIENTIFIC_ROOM: usize = 32;

/// [`format_g14`], appended to `out`. The digits are worked on in stack
/// buffers: a float in the arguments or a reply costs no allocation.
fn write_g14(f: f64, out: &mut Vec<u8>) {
    use std::io::Write;
    const PRECISION: i32 = 14;
    if f.is_nan() {
        out.extend_from_slice(if f.is_sign_negative() { b"-nan" } else { b"nan" });
        return;
    }
    if f.is_infinite() {
        out.extend_from_slice(if f < 0.0 { b"-inf" } else { b"inf" });
        return;
    }
    if f == 0.0 {
        out.extend_from_slice(if f.is_sign_negative() { b"-0" } else { b"0" });
        return;
    }
    let mut room = [0u8; SCIENTIFIC_ROOM];
    let written = |room: &mut [u8; SCIENTIFIC_ROOM], args: std::fmt::Arguments| {
        let mut cursor = &mut room[..];
        let _ = cursor.write_fmt(args);
        SCIENTIFIC_ROOM - cursor.len()
    };
    let mut len = written(&mut room, format_args!("{:e}", f));
    let significant = room[..len].iter().take_while(|&&b| b != b'e').filter(|b| b.is_ascii_digit()).count();
    // Below the normal range a float has fewer bits than 14 digits need,
    // so its shortest form (5e-324) is not what rounding to 14 digits
    // gives (4.9406564584125e-324): take the exact route there too.
    #[allow(unused_mut)]
    let mut tie: Option<String> = None;
    if significant > PRECISION as usize || f.is_subnormal() {
        len = written(&mut room, format_args!("{:.*e}", (PRECISION - 1) as usize, f));
        #[cfg(feature = "luajit")]
        {
            tie = tie_rounded_away(f, PRECISION as usize);
        }
    }
    let scientific = tie.as_ref().map_or(&room[..len], |t| t.as_bytes());
    let e_at = scientific.iter().position(|&b| b == b'e').unwrap_or(scientific.len());
    let (mantissa, exponent) = (&scientific[..e_at], scientific.get(e_at + 1..).unwrap_or(b"0"));
    let exponent: i32 = std::str::from_utf8(exponent).ok().and_then(|e| e.parse().ok()).unwrap_or(0);
    let mut digits = [0u8; 20];
    let mut count = 0;
    for &b in mantissa.iter().filter(|b| b.is_ascii_digit()) {
        if count < digits.len() {
            digits[count] = b;
            count += 1;
        }
    }
    while count > 1 && digits[count - 1] == b'0' {
        count -= 1;
    }
    let digits = &digits[..count.max(1)];
    if mantissa.first() == Some(&b'-') {
        out.push(b'-');
    }
    if !(-4..PRECISION).contains(&exponent) {
        out.push(digits[0]);
        if digits.len() > 1 {
            out.push(b'.');
            out.extend_from_slice(&digits[1..]);
        }
        out.extend_from_slice(if exponent < 0 { b"e-" } else { b"e+" });
        if exponent.abs() < 10 {
            out.push(b'0');
        }
        write_int(i64::from(exponent.abs()), out);
    } else if exponent >= 0 {
        let whole = exponent as usize + 1;
        if digits.len() <= whole {
            out.extend_from_slice(digits);
            out.resize(out.len() + whole - digits.len(), b'0');
        } else {
            out.extend_from_slice(&digits[..whole]);
            out.push(b'.');
            out.extend_from_slice(&digits[whole..]);
        }
    } else {
        out.extend_from_slice(b"0.");
        out.resize(out.len() + (-exponent - 1) as usize, b'0');
        out.extend_from_slice(digits);
    }
}

/// Lua's `tostring` of a float: `%.14g`, plus ".0" when that looks like
/// an integer. Content blocks and error codes are printed this way.
pub fn lua_float_text(f: f64) -> String {
    let text = format_g14(f);
    if text.bytes().all(|b| b == b'-' || b.is_ascii_digit()) {
        text + ".0"
    } else {
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(text: &str) -> String {
        String::from_utf8(encode(&decode(text.as_bytes()).unwrap())).unwrap()
    }

    #[test]
    fn numbers_keep_lua_integer_and_float_kinds() {
        assert_eq!(decode(b"10").unwrap(), Json::Int(10));
        assert_eq!(decode(b"-0").unwrap(), Json::Int(0));
        assert_eq!(decode(b"1e3").unwrap(), Json::Float(1000.0));
        assert_eq!(decode(b"2.5").unwrap(), Json::Float(2.5));
        assert_eq!(decode(b"9223372036854775807").unwrap(), Json::Int(i64::MAX));
        assert_eq!(decode(b"9223372036854775808").unwrap(), Json::Float(9223372036854775808.0));
    }

    #[test]
    fn json_floats_are_the_shortest_text_that_reads_back_the_same() {
        let text = |f: f64| {
            let mut out = Vec::new();
            write_json_float(f, &mut out);
            String::from_utf8(out).unwrap()
        };
        assert_eq!(text(3.0), "3");
        assert_eq!(text(-0.0), "0");
        assert_eq!(text(0.1), "0.1");
        assert_eq!(text(2f64.powi(53)), "9007199254740992");
        assert_eq!(text(1.0 / 3.0), "0.3333333333333333");
        assert_eq!(text(123456789012345.6), "123456789012345.6");
        assert_eq!(text(1e21), "1e+21");
        assert_eq!(text(1e20), "100000000000000000000");
        assert_eq!(text(-2.5e300), "-2.5e+300");
        assert_eq!(text(1e-6), "0.000001");
        assert_eq!(text(1.5e-7), "1.5e-7");
        assert_eq!(text(5e-324), "5e-324");
        assert_eq!(text(f64::MAX), "1.7976931348623157e+308");
        for f in [0.1 + 0.2, 1.0 / 3.0, 6.02214076e23, -1.2345678901234567e-89, 2f64.powi(53) + 2.0, 4.35] {
            assert_eq!(text(f).parse::<f64>().unwrap(), f, "{f}");
        }
    }

    #[test]
    fn floats_print_like_percent_g14() {
        assert_eq!(format_float(3.0), "3");
        assert_eq!(format_float(-0.0), "0");
        assert_eq!(format_float(0.1), "0.1");
        assert_eq!(format_float(1e15), "1e+15");
        assert_eq!(format_float(123456789012345.6), "1.2345678901235e+14");
        assert_eq!(format_float(1.0 / 3.0), "0.33333333333333");
        assert_eq!(format_float(1e-5), "1e-05");
        assert_eq!(format_float(0.0001), "0.0001");
        assert_eq!(format_float(-2.5e300), "-2.5e+300");
        assert_eq!(lua_float_text(3.0), "3.0");
        assert_eq!(lua_float_text(1e100), "1e+100");
        assert_eq!(format_g14(0.1 + 0.2), "0.3");
        assert_eq!(format_g14(-1234.5678), "-1234.5678");
        assert_eq!(format_g14(9.99999999999999e14), "1e+15");
        assert_eq!(format_g14(123456.0), "123456");
        assert_eq!(format_g14(0.000123), "0.000123");
        assert_eq!(format_g14(std::f64::consts::PI), "3.1415926535898");
        assert_eq!(format_g14(2.0f64.powi(63)), "9.2233720368548e+18");
        assert_eq!(format_g14(5e-324), "4.9406564584125e-324");
        assert_eq!(format_g14(1e-320), "9.9998886718268e-321");
    }

    #[test]
    fn strings_escape_controls_and_pass_other_bytes() {
        let mut out = Vec::new();
        encode_string(b"a\"\\\n\x01\x7f\xc3\xa9\xff/", &mut out);
        assert_eq!(out, b"\"a\\\"\\\\\\n\\u0001\\u007f\xc3\xa9\xff/\"".to_vec());
    }

    #[test]
    fn surrogate_pairs_join_and_lone_halves_become_replacement() {
        assert_eq!(decode(br#""\ud83d\ude00""#).unwrap(), Json::str("\u{1F600}"));
        assert_eq!(decode(br#""\ud83dx""#).unwrap(), Json::str("\u{FFFD}x"));
        assert_eq!(decode(br#""\ude00""#).unwrap(), Json::str("\u{FFFD}"));
    }

    #[test]
    fn duplicate_keys_resolve_like_table_assignment() {
        let v = decode(br#"{"a":1,"a":2,"b":3,"b":null}"#).unwrap();
        assert_eq!(v.get("a"), Some(&Json::Int(2)));
        assert_eq!(v.get("b"), None);
    }

    #[test]
    fn malformed_text_is_an_error_not_a_panic() {
        for bad in ["", "{", "[1,", "{\"a\"}", "\"abc", "1 2", "-", "1e", "tru", "\"\\u12\"", "\"\\q\""] {
            assert!(decode(bad.as_bytes()).is_err(), "{bad:?} decoded");
        }
        let deep = "[".repeat(100_000);
        assert_eq!(decode(deep.as_bytes()).unwrap_err().what, TOO_DEEP);
    }

    #[test]
    fn the_id_of_a_too_deep_reply_is_read_wherever_it_stands() {
        let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
        let after = format!(r#"{{"jsonrpc":"2.0","result":{{"a":{deep},"s":"]}}\""}},"id":7}}"#);
        assert_eq!(decode(after.as_bytes()).unwrap_err().what, TOO_DEEP);
        let peek_id = |text: &[u8]| peek_envelope(text).id;
        assert_eq!(peek_id(after.as_bytes()), Some(Json::Int(7)));
        let before = format!(r#"{{"id":"x","result":{}"#, "[".repeat(100_000));
        assert_eq!(peek_id(before.as_bytes()), Some(Json::str("x")));
        assert_eq!(peek_id(b"[1]"), None);
        assert_eq!(peek_id(format!(r#"{{"result":{}"#, "[".repeat(1000)).as_bytes()), None);
        let request = format!(r#"{{"id":3,"params":{deep},"method":"sampling/createMessage"}}"#);
        assert_eq!(peek_envelope(request.as_bytes()), Envelope { id: Some(Json::Int(3)), has_method: true });
    }

    #[test]
    fn a_message_keeps_its_result_as_checked_text_that_reads_as_the_tree() {
        let text = br#"{"id":1,"result":{"a":[1,null,{"b":2.5}],"a":"last","s":"\u00e9\ud83d\ude00"}}"#;
        let message = decode_message(text).unwrap();
        let Some(Json::Raw(raw)) = message.get("result") else { panic!("the result was decoded: {message:?}") };
        assert_eq!(raw.text(), &text[17..text.len() - 1]);
        assert_eq!(&*raw.sizes(), &[3, 3, 1]);
        assert_eq!(message, decode(text).unwrap_or(Json::Null));
        assert_eq!(message.get("result").and_then(|r| r.get("a")), Some(&Json::str("last")));
        // a scalar result, and a result below the top level, stay trees
        assert_eq!(decode_message(br#"{"result":5}"#).unwrap().get("result"), Some(&Json::Int(5)));
        let nested = decode_message(br#"{"params":{"result":[1]}}"#).unwrap();
        assert!(matches!(nested.get("params").and_then(|p| p.get("result")), Some(Json::Array(_))));
    }

    #[test]
    fn a_kept_result_is_refused_where_and_as_the_tree_decoder_refuses_it() {
        let deep = format!(r#"{{"id":1,"result":{}1{}}}"#, "[".repeat(511), "]".repeat(511));
        let deeper = format!(r#"{{"id":1,"result":{}1{}}}"#, "[".repeat(512), "]".repeat(512));
        for text in [
            br#"{"id":1,"result":{"a":tru}}"#.to_vec(),
            br#"{"id":1,"result":{"a":"\q"}}"#.to_vec(),
            br#"{"id":1,"result":[1,]}"#.to_vec(),
            br#"{"id":1,"result":{"a":1} x"#.to_vec(),
            br#"{"id":1,"result":{"a":"\ud83"}}"#.to_vec(),
            deep.into_bytes(),
            deeper.into_bytes(),
        ] {
            let (kept, tree) = (decode_message(&text), decode(&text));
            assert_eq!(kept.map_err(|e| e.to_string()), tree.map_err(|e| e.to_string()));
        }
    }

    #[test]
    fn a_selection_decodes_only_the_named_parts() {
        let message =
            decode_message(br#"{"result":{"tools":[{"name":"a","big":[1,2,3]},null,7],"nextCursor":"c"}}"#).unwrap();
        let result = message.get("result").unwrap();
        let keys = Select::Keys(&[("tools", Select::Each(&Select::Keys(&[("name", Select::Whole)])))]);
        assert_eq!(encode(&result.selected(keys)), br#"{"tools":[{"name":"a"},null,7]}"#.to_vec());
        // an array where an object was selected stands as an empty one
        assert_eq!(encode(&decode_selected(b"[1,2]", Select::Keys(&[]))), b"[]".to_vec());
        assert_eq!(encode(&decode_selected(br#"{"a":1}"#, Select::Each(&Select::Whole))), b"{}".to_vec());
    }

    #[test]
    fn encoded_text_is_sent_as_it_is_until_something_changes_it() {
        let mut value = RawJson::encoded(br#"{"a":[1,2]}"#.to_vec());
        assert_eq!(encode(&value), br#"{"a":[1,2]}"#.to_vec());
        if let Some(a) = value.get_mut("a") {
            *a = Json::Int(3);
        }
        assert_eq!(encode(&value), br#"{"a":3}"#.to_vec());
    }

    #[test]
    fn round_trips_keep_order_and_forms() {
        assert_eq!(round_trip(r#" {"b":[1,2.5,"x"],"a":{}} "#), r#"{"b":[1,2.5,"x"],"a":{}}"#);
        assert_eq!(round_trip("1.0"), "1");
    }
}
