//! JSON text <-> [`Json`], to the contract of the reference codec
//! (`lua/trace.lua`), byte for byte.
//!
//! serde_json is not used here on purpose. The contract is about Lua's view
//! of JSON, not Rust's: strings are byte strings that need not be UTF-8 (a
//! server that sends Latin-1 still gets its text through, as it does with
//! the reference), numbers are integers exactly when Lua's `tonumber` would
//! make them integers, objects keep duplicate keys so that "last one wins"
//! and "null deletes the key" happen in the same order as table assignment,
//! and the printer writes integers the way `%d` does. Matching all of that
//! on top of serde_json would cost more code than this module.
//!
//! One grammar, several builders. The reader (`read.rs`) knows JSON; what
//! it makes of what it reads is a [`Build`]: a [`Json`] tree, nothing at
//! all (a check that counts each container's members, see [`RawJson`]),
//! or, in the binding, Lua values pushed straight onto the Lua stack.
//! Replies keep their `result` as checked text ([`decode_message`]),
//! decoded only when something reads it: most results only travel to Lua,
//! and building a tree first, then tables from it, then freeing the tree
//! cost 4.1 + 5.7 + 2.4 ms for a 1 MB value, where building the tables
//! directly costs about 5. A client's reply in the usual shape is not
//! even an object ([`decode_reply`], [`Response`]).
//!
//! The printer (`write.rs`) writes a [`Json`] as the reference does, but
//! for floats, which go out as the shortest text that reads back as the
//! same double ([`write_json_float`]); the numbers the module prints for
//! people (content blocks, error codes) come out as Lua's `tostring`
//! writes them, `%.14g`. This file holds the value model both share.
//!
//! One deliberate departure on the way in: a `\uXXXX` surrogate pair
//! decodes to the one real character it names (the reference writes each
//! half as its own 3-byte sequence, which no UTF-8 reader accepts), and a
//! lone surrogate becomes U+FFFD.

mod read;
mod write;

use std::borrow::Cow;
use std::sync::OnceLock;

use read::{decode_selected, Sizes};

pub use read::{
    decode, decode_message, decode_reply, peek_envelope, read_with, Build, DecodeError, Envelope, MAX_DEPTH, TOO_DEEP,
};
pub use write::{
    encode, encode_into, encode_string, format_float, format_g14, lua_float_text, write_float, write_int,
    write_json_float,
};

/// An object's members, in the order they came or were written.
pub type Members = Vec<(Vec<u8>, Json)>;

/// A decoded JSON value. Strings are bytes, and objects are kept as an
/// ordered list of pairs, duplicates included: [`Json::get`] resolves them
/// the way Lua table assignment would.
#[derive(Clone, Debug, Default)]
pub enum Json {
    #[default]
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
    /// A reply in the shape nearly every reply has, held as its parts
    /// (see [`Response`]); it reads like the object it came as.
    Response(Box<Response>),
}

/// A JSON-RPC request on its way out. Its four keys are the protocol's
/// own, written from constants: as an object it cost an owned key per
/// field, four of a small call's allocations.
#[derive(Clone, Debug)]
pub struct Request {
    pub id: Json,
    /// Always a string; the methods a client sends most are shared (see
    /// [`Request::method_json`]).
    pub method: Cow<'static, Json>,
    pub params: Json,
}

/// The methods a session sends over and over, as strings made once.
const SHARED_METHODS: [&str; 8] = [
    "tools/call",
    "tools/list",
    "resources/read",
    "resources/list",
    "prompts/get",
    "prompts/list",
    "ping",
    "tasks/get",
];

impl Request {
    /// `method` as a string: one made once for the methods sent most (a
    /// string of its own was an allocation of every call), one of its own
    /// for the rest.
    pub fn method_json(method: &str) -> Cow<'static, Json> {
        static SHARED: OnceLock<[Json; SHARED_METHODS.len()]> = OnceLock::new();
        let shared = SHARED.get_or_init(|| SHARED_METHODS.map(Json::str));
        match SHARED_METHODS.iter().position(|m| *m == method) {
            Some(at) => Cow::Borrowed(&shared[at]),
            None => Cow::Owned(Json::str(method)),
        }
    }

    /// The object it is written as, keys in the reference's sorted order.
    fn into_tree(self) -> Json {
        let method = self.method.into_owned();
        Json::object([("id", self.id), ("jsonrpc", Json::str("2.0")), ("method", method), ("params", self.params)])
    }
}

/// A reply that came as `"jsonrpc":"2.0"`, an id and an array or object
/// `result` (kept as text), each once, in any order: as an object, its
/// three keys, their "2.0" and its list of members were five of a small
/// call's allocations. Any other reply is an object as usual.
#[derive(Clone, Debug)]
pub struct Response {
    pub id: Json,
    /// None once [`Json::take`] has taken it.
    result: Option<Json>,
    /// The members in the order they came, for the object it reads as.
    order: [ResponseMember; 3],
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum ResponseMember {
    Jsonrpc,
    Id,
    Result,
}

impl Response {
    pub(crate) fn json(id: Json, result: Json, order: [ResponseMember; 3]) -> Json {
        Json::Response(Box::new(Response { id, result: Some(result), order }))
    }

    fn members(&self) -> impl Iterator<Item = (&'static str, &Json)> {
        self.order.iter().filter_map(|member| match member {
            ResponseMember::Jsonrpc => Some(("jsonrpc", jsonrpc_version())),
            ResponseMember::Id => Some(("id", &self.id)),
            ResponseMember::Result => self.result.as_ref().map(|result| ("result", result)),
        })
    }

    fn into_tree(self) -> Json {
        Json::object(self.members().map(|(k, v)| (k, v.clone())).collect::<Vec<_>>())
    }
}

/// `"2.0"`, for [`Json::get`] on a [`Request`] or a [`Response`].
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
    sizes: Counts,
    /// The text is what [`encode_into`] would write for the value, so it
    /// goes to the wire as it is; a reply's text is not (spacing,
    /// escapes, number forms) and is encoded from its tree.
    canonical: bool,
    tree: OnceLock<Json>,
}

/// Member counts held in place up to this many: a small result's three
/// or four were an allocation of every call.
const COUNTS_IN_PLACE: usize = 8;

/// A [`RawJson`]'s member counts.
#[derive(Clone, Debug)]
enum Counts {
    InPlace(u8, [u32; COUNTS_IN_PLACE]),
    Listed(Vec<u32>),
}

impl Counts {
    const NONE: Counts = Counts::InPlace(0, [0; COUNTS_IN_PLACE]);

    fn of(counts: &[u32]) -> Counts {
        if counts.len() > COUNTS_IN_PLACE {
            return Counts::Listed(counts.to_vec());
        }
        let mut in_place = [0; COUNTS_IN_PLACE];
        in_place[..counts.len()].copy_from_slice(counts);
        Counts::InPlace(counts.len() as u8, in_place)
    }

    fn as_slice(&self) -> &[u32] {
        match self {
            Counts::InPlace(n, counts) => &counts[..*n as usize],
            Counts::Listed(counts) => counts,
        }
    }
}

/// A kept text equals the tree it stands for.
impl PartialEq for Json {
    fn eq(&self, other: &Json) -> bool {
        match (self, other) {
            (Json::Raw(raw), other) => raw.tree() == other,
            (tree, Json::Raw(raw)) => tree == raw.tree(),
            (Json::Request(request), other) => &Request::into_tree((**request).clone()) == other,
            (tree, Json::Request(request)) => tree == &Request::into_tree((**request).clone()),
            (Json::Response(response), other) => &Response::into_tree((**response).clone()) == other,
            (tree, Json::Response(response)) => tree == &Response::into_tree((**response).clone()),
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
        Json::Raw(Box::new(RawJson { text, sizes: Counts::NONE, canonical: true, tree: OnceLock::new() }))
    }

    pub fn text(&self) -> &[u8] {
        &self.text
    }

    /// The member counts (see the field); counted now if the text came
    /// from our encoder, which does not count them.
    pub fn sizes(&self) -> Cow<'_, [u32]> {
        if !self.sizes.as_slice().is_empty() {
            return Cow::Borrowed(self.sizes.as_slice());
        }
        let mut sizes = Vec::new();
        let mut scratch = Vec::new();
        let _ = read_with(&self.text, &mut scratch, Sizes { sizes: &mut sizes });
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

    /// About how much memory it holds: its text, its counts and its
    /// tree if one was made.
    fn held_bytes(&self) -> usize {
        self.text.len() + 4 * self.sizes.as_slice().len() + self.tree.get().map_or(0, Json::held_bytes)
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
    /// About how much memory the value holds (each node counted at the
    /// size of a `Json`, strings and texts by their bytes): what a cache
    /// of values bounds itself by.
    pub fn held_bytes(&self) -> usize {
        let node = std::mem::size_of::<Json>();
        node + match self {
            Json::Null | Json::Bool(_) | Json::Int(_) | Json::Float(_) => 0,
            Json::Str(s) => s.len(),
            Json::Array(items) => items.iter().map(Json::held_bytes).sum(),
            Json::Object(pairs) => pairs.iter().map(|(k, v)| k.len() + node + v.held_bytes()).sum(),
            Json::Raw(raw) => raw.held_bytes(),
            Json::Request(request) => {
                request.id.held_bytes() + request.method.held_bytes() + request.params.held_bytes()
            }
            Json::Response(response) => response.members().map(|(_, v)| v.held_bytes()).sum(),
        }
    }

    pub fn str(s: impl AsRef<[u8]>) -> Json {
        Json::Str(s.as_ref().to_vec())
    }

    /// Builds an object from pairs, keeping their order.
    pub fn object<K: AsRef<[u8]>>(pairs: impl IntoIterator<Item = (K, Json)>) -> Json {
        Json::Object(pairs.into_iter().map(|(k, v)| (k.as_ref().to_vec(), v)).collect())
    }

    /// This value as a tree (see [`Json::materialize`]).
    pub fn into_tree(mut self) -> Json {
        self.materialize();
        self
    }

    /// A kept text becomes its tree, for code that changes or takes it
    /// apart.
    pub fn materialize(&mut self) {
        match std::mem::replace(self, Json::Null) {
            Json::Raw(raw) => *self = raw.into_tree(),
            Json::Request(request) => *self = request.into_tree(),
            Json::Response(response) => *self = response.into_tree(),
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
                "method" => Some(&*request.method),
                "params" => Some(&request.params),
                _ => None,
            }
            .filter(|v| !matches!(v, Json::Null)),
            Json::Response(response) => {
                response.members().find(|(k, _)| *k == key).map(|(_, v)| v).filter(|v| !matches!(v, Json::Null))
            }
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
        if let (Json::Response(response), "result") = (&mut *self, key) {
            return response.result.take().filter(|v| !matches!(v, Json::Null));
        }
        self.materialize();
        let Json::Object(pairs) = self else { return None };
        let at = pairs.iter().rposition(|(k, _)| k == key.as_bytes())?;
        Some(pairs.swap_remove(at).1).filter(|v| !matches!(v, Json::Null))
    }

    /// Whether this is a JSON object (a kept text included).
    pub fn is_object(&self) -> bool {
        match self {
            Json::Object(_) | Json::Request(_) | Json::Response(_) => true,
            Json::Raw(raw) => matches!(raw.tree(), Json::Object(_)),
            _ => false,
        }
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

/// What Lua's `tostring` prints for a decoded value; tables print as their
/// JSON text (Lua would print an address, which tells a reader nothing).
pub fn lua_text(value: Option<&Json>) -> String {
    match value {
        None | Some(Json::Null) => "nil".into(),
        Some(Json::Bool(b)) => b.to_string(),
        Some(Json::Int(i)) => i.to_string(),
        Some(Json::Float(f)) => lua_float_text(*f),
        Some(Json::Str(s)) => String::from_utf8_lossy(s).into_owned(),
        Some(other) => String::from_utf8_lossy(&encode(other)).into_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reply_in_the_usual_shape_reads_as_the_object_it_came_as() {
        let usual = [
            r#"{"jsonrpc":"2.0","id":1,"result":{"content":[]}}"#,
            r#"{"result":[1,{"a":null}],"jsonrpc":"2.0","id":"x"}"#,
            r#" { "id" : 1.5 , "result" : {} , "jsonrpc" : "2.0" } "#,
            r#"{"id":{"result":{}},"jsonrpc":"2.0","result":{"result":2}}"#,
        ];
        let other = [
            r#"{"jsonrpc":"2.0","id":1,"result":7}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":null}"#,
            r#"{"jsonrpc":"2.1","id":1,"result":{}}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":{},"id":2}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":{},"extra":1}"#,
            r#"{"jsonrpc":"2.0","\u0069d":1,"result":{}}"#,
            r#"{"jsonrpc":"2.0","id":1,"error":{"code":1,"message":"no"}}"#,
            r#"{"jsonrpc":"2.0","id":1}"#,
            r#"{"jsonrpc":"2.0","result":{}}"#,
            r#"{"jsonrpc":"2.0","method":"ping","id":1}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":{}} x"#,
            r#"{"jsonrpc":"2.0","id":1,"result":{"a":}}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":{}"#,
            r#"[{"jsonrpc":"2.0","id":1,"result":{}}]"#,
        ];
        let deep = format!(r#"{{"jsonrpc":"2.0","id":1,"result":{}{}}}"#, "[".repeat(MAX_DEPTH), "]".repeat(MAX_DEPTH));
        let same = |text: &str| {
            let (reply, message) = (decode_reply(text.as_bytes()), decode_message(text.as_bytes()));
            match (&reply, &message) {
                (Ok(a), Ok(b)) => {
                    assert_eq!(encode(a), encode(b), "{text}");
                    assert_eq!(a, b, "{text}");
                    for key in ["jsonrpc", "id", "result", "error"] {
                        assert_eq!(a.get(key).map(encode), b.get(key).map(encode), "{key} of {text}");
                    }
                }
                (Err(a), Err(b)) => assert_eq!((a.to_string(), a.is_too_deep()), (b.to_string(), b.is_too_deep())),
                _ => panic!("{text}: {reply:?} against {message:?}"),
            }
            reply
        };
        for text in usual {
            assert!(matches!(same(text), Ok(Json::Response(_))), "{text}");
        }
        for text in other.iter().copied().chain([deep.as_str()]) {
            assert!(!matches!(same(text), Ok(Json::Response(_))), "{text}");
        }
    }

    #[test]
    fn a_result_taken_from_a_reply_is_gone_from_it() {
        let mut reply = decode_reply(br#"{"jsonrpc":"2.0","id":3,"result":{"a":1}}"#).unwrap();
        assert_eq!(reply.take("result").map(|r| encode(&r)), Some(br#"{"a":1}"#.to_vec()));
        assert_eq!(reply.get("result"), None);
        assert_eq!(encode(&reply), br#"{"jsonrpc":"2.0","id":3}"#.to_vec());
        assert_eq!(reply.take("id"), Some(Json::Int(3)));
        assert_eq!(encode(&reply), br#"{"jsonrpc":"2.0"}"#.to_vec());
    }

    #[test]
    fn duplicate_keys_resolve_like_table_assignment() {
        let v = decode(br#"{"a":1,"a":2,"b":3,"b":null}"#).unwrap();
        assert_eq!(v.get("a"), Some(&Json::Int(2)));
        assert_eq!(v.get("b"), None);
    }
}
