//! The reader: one JSON grammar, and the builders that make something of
//! what it reads (see [`Build`]).

use std::fmt;
use std::sync::OnceLock;

use super::{Counts, Json, RawJson, Response, ResponseMember, Select};

/// The most counts the list below keeps room for between texts.
const COUNTING_KEPT: usize = 4096;

thread_local! {
    /// Where a kept text's member counts are made (see `kept_raw`).
    static COUNTING: std::cell::RefCell<Vec<u32>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Why a text is not JSON, and where.
#[derive(Debug, PartialEq)]
pub struct DecodeError {
    pub what: &'static str,
    pub at: usize,
    kind: Problem,
}

/// What kind of failure a [`DecodeError`] is, for callers that act on it
/// without reading its text.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Problem {
    /// The text is not JSON.
    Syntax,
    /// Nesting past [`MAX_DEPTH`] (see [`TOO_DEEP`]).
    TooDeep,
}

impl DecodeError {
    /// The text nests deeper than [`MAX_DEPTH`]: it may still be JSON, and
    /// its top level can be read with [`peek_envelope`].
    pub fn is_too_deep(&self) -> bool {
        self.kind == Problem::TooDeep
    }
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

/// [`decode_message`] for what a client receives: a reply in the shape
/// nearly every reply has becomes a [`Response`] (see there); any other
/// message, or a text the reader refuses, is read the general way, with
/// the same tree or error as [`decode_message`] gives.
pub fn decode_reply(text: &[u8]) -> Result<Json, DecodeError> {
    let mut scratch = Vec::new();
    let mut reader = Reader::new(text, &mut scratch, Tree);
    reader.keep_result_raw = true;
    match reader.usual_reply() {
        Some(reply) => Ok(reply),
        None => decode_message(text),
    }
}

/// Parses one JSON text with `builder`: whatever it makes of the value.
/// `scratch` holds strings with escapes while they are decoded.
pub fn read_with<B: Build>(text: &[u8], scratch: &mut Vec<u8>, builder: B) -> Result<B::Value, DecodeError> {
    Reader::new(text, scratch, builder).whole()
}

/// Only the parts `select` names of a text [`decode_message`] checked.
pub(super) fn decode_selected(text: &[u8], select: Select) -> Json {
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
pub(super) struct Sizes<'a> {
    pub(super) sizes: &'a mut Vec<u32>,
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
        DecodeError { what, at: self.pos, kind: Problem::Syntax }
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

    #[inline]
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
            return Err(DecodeError { what: TOO_DEEP, at: self.pos, kind: Problem::TooDeep });
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
        // Counted into a list this thread keeps, then held in place when
        // they are few (see `Counts`).
        let mut sizes = COUNTING.with(|c| std::mem::take(&mut *c.borrow_mut()));
        sizes.clear();
        let mut check = Reader {
            text: self.text,
            pos: self.pos,
            depth: self.depth,
            scratch: &mut *self.scratch,
            builder: Sizes { sizes: &mut sizes },
            keep_result_raw: false,
        };
        let checked = check.value();
        let end = check.pos;
        let counts = checked.map(|_| Counts::of(&sizes));
        // A large result's list is let go, not kept for the next one.
        if sizes.capacity() <= COUNTING_KEPT {
            COUNTING.with(|c| *c.borrow_mut() = sizes);
        }
        let counts = counts?;
        self.pos = end;
        let text = self.text[start..self.pos].to_vec();
        Ok(self.builder.raw(RawJson { text, sizes: counts, canonical: false, tree: OnceLock::new() }))
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

impl Reader<'_, '_, Tree> {
    /// The whole text as a [`Response`], or None when it is anything else:
    /// another key, a key twice or escaped, a version other than "2.0", a
    /// result that is not an array or object, an error anywhere.
    fn usual_reply(&mut self) -> Option<Json> {
        self.skip_space();
        if self.peek() != Some(b'{') {
            return None;
        }
        self.pos += 1;
        // As inside the object `whole` would have entered: the result's
        // depth is counted from here, and a too-deep one is left to the
        // general read, which says so.
        self.depth = 1;
        let (mut id, mut result) = (None, None);
        let mut order = [ResponseMember::Jsonrpc; 3];
        for n in 0..order.len() {
            self.skip_space();
            if n > 0 {
                self.literal(b",").ok()?;
                self.skip_space();
            }
            let member = self.response_key()?;
            if order[..n].contains(&member) {
                return None;
            }
            self.skip_space();
            self.literal(b":").ok()?;
            self.skip_space();
            match member {
                ResponseMember::Jsonrpc => self.literal(b"\"2.0\"").ok()?,
                ResponseMember::Id => id = Some(self.value().ok()?),
                ResponseMember::Result => match self.peek() {
                    Some(b'{' | b'[') => result = Some(self.kept_raw().ok()?),
                    _ => return None,
                },
            }
            order[n] = member;
        }
        self.skip_space();
        self.literal(b"}").ok()?;
        self.skip_space();
        if self.pos < self.text.len() {
            return None;
        }
        Some(Response::json(id?, result?, order))
    }

    fn response_key(&mut self) -> Option<ResponseMember> {
        if self.peek() != Some(b'"') {
            return None;
        }
        let StringAt::Plain(from, to) = self.scan_string().ok()? else { return None };
        match &self.text[from..to] {
            b"jsonrpc" => Some(ResponseMember::Jsonrpc),
            b"id" => Some(ResponseMember::Id),
            b"result" => Some(ResponseMember::Result),
            _ => None,
        }
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::encode;

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
    fn surrogate_pairs_join_and_lone_halves_become_replacement() {
        assert_eq!(decode(br#""\ud83d\ude00""#).unwrap(), Json::str("\u{1F600}"));
        assert_eq!(decode(br#""\ud83dx""#).unwrap(), Json::str("\u{FFFD}x"));
        assert_eq!(decode(br#""\ude00""#).unwrap(), Json::str("\u{FFFD}"));
    }

    #[test]
    fn malformed_text_is_an_error_not_a_panic() {
        for bad in ["", "{", "[1,", "{\"a\"}", "\"abc", "1 2", "-", "1e", "tru", "\"\\u12\"", "\"\\q\""] {
            assert!(decode(bad.as_bytes()).is_err_and(|e| !e.is_too_deep()), "{bad:?} decoded");
        }
        let deep = "[".repeat(100_000);
        let too_deep = decode(deep.as_bytes()).unwrap_err();
        assert_eq!(too_deep.what, TOO_DEEP);
        assert!(too_deep.is_too_deep());
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
    fn a_kept_result_counts_its_members_whether_few_or_many() {
        // Up to eight counts are held in place, more in a list; a text
        // refused in between leaves nothing behind for the next one.
        let many = format!(r#"{{"id":1,"result":[{}[1,2]]}}"#, "[],".repeat(20));
        let cases: [(&[u8], &[u32]); 3] = [
            (br#"{"id":1,"result":[[],[1],{"a":[1,2,3]}]}"#, &[3, 0, 1, 1, 3]),
            (br#"{"id":1,"result":[[],[1],[[[[[[[[[1]]]]]]]]]]}"#, &[]),
            (many.as_bytes(), &[]),
        ];
        for (text, expected) in cases {
            let message = decode_message(text).unwrap();
            let Some(Json::Raw(raw)) = message.get("result") else { panic!("the result was decoded") };
            let mut fresh = Vec::new();
            read_with(raw.text(), &mut Vec::new(), Sizes { sizes: &mut fresh }).unwrap();
            assert_eq!(&*raw.sizes(), &fresh[..]);
            if !expected.is_empty() {
                assert_eq!(&*raw.sizes(), expected);
            }
            assert!(decode_message(br#"{"id":1,"result":[[[1,2,]]]}"#).is_err());
        }
        assert_eq!(
            decode_message(many.as_bytes()).map(|m| m.get("result").map(|r| r.elements().count())),
            Ok(Some(21))
        );
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
}
