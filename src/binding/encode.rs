//! Lua values to JSON text in one pass: what the wire may carry, refused
//! with the path to it otherwise (`arguments.items[2].cb`).
//!
//! A table is written straight into the output as it is walked, with no
//! [`Json`] tree in between: the tree was a deep copy of the arguments on
//! every call, and with its owned keys and strings it was most of a small
//! call's 54 allocations (`tests/allocations.rs`). What a table costs now
//! is one list of its entries, which the reference's key order needs
//! (keys sorted by their text, `__jsonorder` first); string keys are
//! borrowed from Lua, not copied. The arguments of nearly every call, a
//! few scalar fields, cost not even that (see `flat_table`).
//!
//! The output is what `codec::encode_into` would write for the same value,
//! byte for byte (the differential specs compare it with the pure module),
//! and is kept as [`RawJson::encoded`] text, sent as it is.
//!
//! The path is only built when something is refused, on the way back up:
//! formatting a path segment for every value would cost more than the
//! encoding itself.
//!
//! JSON types Lua cannot tell apart. Lua has one empty table, and nil
//! cannot sit in a table: so a table whose metatable says `__jsontype =
//! "array"` (`mcp.array`) or `"object"` (`mcp.object`), as dkjson reads
//! it, goes out as that, and `mcp.null` (a light userdata, NULL, as
//! lua-cjson's `cjson.null`) as `null`. Where neither says, a tool's
//! `inputSchema` may (see `input_shape`): an empty table goes out as `[]`
//! where only an array fits. Without either, the reference's rules.
//!
//! Tables are followed [`codec::MAX_DEPTH`] levels down and no further:
//! this recursion runs on the host's own C stack, and a table 12,000 levels
//! deep crashed the host with SIGSEGV when it was unbounded. (The
//! reference, in Lua, raises "stack overflow" at some depth instead.)

use std::ffi::c_void;
use std::ops::Deref;
use std::rc::Rc;

use mlua::{Table, Value};

use super::flat_table::{write_flat_table, Flat};
use super::lua::{call_lua, truthy, Cx, Outcome, Raise};
use crate::codec::{self, encode_string, write_float, write_int, write_json_float, Json, Members, RawJson};
use crate::error::{Error, Result};
use crate::input_shape::Place;
/// A Lua value as JSON: scalars as themselves, a table as the text
/// written for it. `root` names the value in a refusal.
pub(super) fn encode_lua(lua: &Cx, root: &str, value: &Value) -> Outcome<Json> {
    encode_lua_at(lua, root, value, Place::Nowhere)
}

/// A table of named entries (`{name = value, ...}`, an option such as
/// `opts.meta`) as JSON pairs, none for an empty table; None when the
/// table is a list.
pub(super) fn named_entries(lua: &Cx, root: &str, table: &Table) -> Outcome<Option<Members>> {
    Ok(match encode_lua(lua, root, &Value::Table(table.clone()))?.into_tree() {
        Json::Object(entries) => Some(entries),
        Json::Array(items) if items.is_empty() => Some(Vec::new()),
        _ => None,
    })
}

/// [`encode_lua`] of a value whose shape `place` may describe.
pub(super) fn encode_lua_at(lua: &Cx, root: &str, value: &Value, place: Place) -> Outcome<Json> {
    Ok(match value {
        Value::Nil => Json::Null,
        Value::Boolean(b) => Json::Bool(*b),
        Value::Integer(i) => Json::Int(*i),
        Value::Table(_) => {
            let mut writer = Writer::new(lua);
            writer.run(root, |w| w.value(value, place))?;
            RawJson::encoded(writer.out)
        }
        other => {
            // A string or a float: checked the same way, kept as a tree
            // value so that Rust can read it (a protocol version).
            let mut writer = Writer::new(lua);
            writer.run(root, |w| w.value(other, place))?;
            codec::decode(&writer.out).unwrap_or(Json::Null)
        }
    })
}

/// `tools/call` params, `{"arguments":...,"name":...}`, written at once.
/// An absent name stays absent, as in the reference; nil or false
/// arguments are `{}`. The name is checked first, as the reference does.
/// `schema` gives the tool's `inputSchema`, when `discover` found one
/// (asked only when the arguments need it); `name_bytes` are a string
/// name's bytes.
pub(super) fn encode_call_params(
    lua: &Cx,
    name: &Value,
    name_bytes: &[u8],
    args: &Value,
    schema: impl FnOnce() -> Outcome<Option<Rc<Json>>>,
) -> Outcome<Json> {
    let mut writer = Writer::new(lua);
    let mut name_text = Vec::new();
    if !matches!(name, Value::String(_) | Value::Nil) {
        writer.run("name", |w| w.value(name, Place::Nowhere))?;
        name_text = std::mem::take(&mut writer.out);
    } else if let Value::String(_) = name {
        writer.run("name", |w| w.check_utf8(name_bytes))?;
    }
    writer.out.extend_from_slice(b"{\"arguments\":");
    if truthy(args) {
        writer.run("arguments", |w| w.arguments(args, schema))?;
    } else {
        writer.out.extend_from_slice(b"{}");
    }
    match name {
        Value::Nil => {}
        Value::String(_) => {
            writer.out.extend_from_slice(b",\"name\":");
            encode_string(name_bytes, &mut writer.out);
        }
        _ => {
            writer.out.extend_from_slice(b",\"name\":");
            writer.out.extend_from_slice(&name_text);
        }
    }
    writer.out.push(b'}');
    Ok(RawJson::encoded(writer.out))
}

/// A refused value: what it was, and the path to it, innermost first.
pub(super) struct Refusal {
    what: String,
    path: Vec<String>,
}

impl Refusal {
    fn new(what: impl Into<String>) -> Self {
        Refusal { what: what.into(), path: Vec::new() }
    }

    fn under(mut self, segment: String) -> Self {
        self.path.push(segment);
        self
    }
}

pub(super) enum Fail {
    Refused(Refusal),
    /// Lua itself failed, or a `__pairs` metamethod raised.
    Raised(Raise),
}

impl From<mlua::Error> for Fail {
    fn from(e: mlua::Error) -> Self {
        Fail::Raised(e.into())
    }
}

pub(super) fn refused(what: impl Into<String>) -> Fail {
    Fail::Refused(Refusal::new(what))
}

/// Segments of a path shown before the rest is elided: a path 512 levels
/// deep makes no better error message than its first few steps.
pub(super) const PATH_SEGMENTS_SHOWN: usize = 8;

/// The output's first size: a small call's params fit, so the output is
/// allocated once instead of four times over as it doubles.
pub(super) const OUTPUT_START: usize = 128;

/// Tables open on the way down kept without allocating, for the cycle
/// check; deeper ones spill into a list.
pub(super) const SHALLOW: usize = 16;

pub(super) struct Writer<'a, 'b> {
    lua: &'a Cx<'b>,
    out: Vec<u8>,
    /// Tables on the way down from the root: meeting one again is a cycle.
    /// (A table shared by two branches is fine and encodes twice.)
    shallow: [*const c_void; SHALLOW],
    deep: Vec<*const c_void>,
    depth: usize,
    /// The outermost table was tried as a flat one already (see
    /// [`Writer::arguments`]).
    flat_tried: bool,
}

/// A table entry: its key, its value, and, in an object, the key's text.
pub(super) type Entry = (Value, Value, Option<KeyText>);

/// A key's text as the reference writes it: a string's own bytes
/// (borrowed from Lua), a number's `%d` or `%.14g`.
pub(super) enum KeyText {
    Lua(mlua::BorrowedBytes),
    Number(Vec<u8>),
}

impl Deref for KeyText {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        match self {
            KeyText::Lua(bytes) => bytes,
            KeyText::Number(text) => text,
        }
    }
}

/// None for a key JSON cannot carry.
pub(super) fn key_text(key: &Value) -> Option<KeyText> {
    Some(match key {
        Value::String(s) => KeyText::Lua(s.as_bytes()),
        Value::Integer(i) => {
            let mut text = Vec::with_capacity(20);
            write_int(*i, &mut text);
            KeyText::Number(text)
        }
        Value::Number(f) => {
            let mut text = Vec::with_capacity(24);
            write_float(*f, &mut text);
            KeyText::Number(text)
        }
        _ => return None,
    })
}

impl<'a, 'b> Writer<'a, 'b> {
    fn new(lua: &'a Cx<'b>) -> Self {
        Writer {
            lua,
            out: Vec::with_capacity(OUTPUT_START),
            shallow: [std::ptr::null(); SHALLOW],
            deep: Vec::new(),
            depth: 0,
            flat_tried: false,
        }
    }

    /// Runs one write, turning a refusal into the error naming its path
    /// from `root`.
    fn run(&mut self, root: &str, write: impl FnOnce(&mut Self) -> Result<(), Fail>) -> Outcome<()> {
        match write(self) {
            Ok(()) => Ok(()),
            Err(Fail::Raised(raise)) => Err(raise),
            Err(Fail::Refused(refusal)) => {
                let mut path = root.to_string();
                let hidden = refusal.path.len().saturating_sub(PATH_SEGMENTS_SHOWN + 1);
                for segment in refusal.path.iter().rev().take(PATH_SEGMENTS_SHOWN) {
                    if !segment.starts_with('[') {
                        path.push('.');
                    }
                    path.push_str(segment);
                }
                if hidden > 0 {
                    path.push_str(&format!("...({hidden} levels)..."));
                }
                if refusal.path.len() > PATH_SEGMENTS_SHOWN {
                    let last = &refusal.path[0];
                    if !last.starts_with('[') {
                        path.push('.');
                    }
                    path.push_str(last);
                }
                Err(Raise::Mcp(Error::Encode { what: refusal.what, path }))
            }
        }
    }

    fn check_utf8(&mut self, bytes: &[u8]) -> Result<(), Fail> {
        match std::str::from_utf8(bytes) {
            Ok(_) => Ok(()),
            Err(_) => Err(refused("a string that is not UTF-8")),
        }
    }

    /// A table with nothing in it and no metatable: `[]` where only an
    /// array fits, `{}` otherwise (the reference's way).
    fn empty_table(&mut self, as_array: bool) {
        self.out.extend_from_slice(if as_array { b"[]" } else { b"{}" });
    }

    /// A call's arguments, shaped by the tool's input schema, which is
    /// looked up only when it can matter: a flat table with fields (nearly
    /// every call's) has nothing it could shape, and the lookup was 1,500
    /// instructions of each call.
    fn arguments(&mut self, args: &Value, schema: impl FnOnce() -> Outcome<Option<Rc<Json>>>) -> Result<(), Fail> {
        if let Value::Table(t) = args {
            match write_flat_table(self.lua, t, &mut self.out) {
                Flat::Written => return Ok(()),
                Flat::Empty => {
                    let schema = schema().map_err(Fail::Raised)?;
                    self.empty_table(Place::of(schema.as_deref()).wants_array());
                    return Ok(());
                }
                Flat::Other => self.flat_tried = true,
            }
        }
        let schema = schema().map_err(Fail::Raised)?;
        self.value(args, Place::of(schema.as_deref()))
    }

    fn value(&mut self, value: &Value, place: Place) -> Result<(), Fail> {
        match value {
            Value::Nil => self.out.extend_from_slice(b"null"),
            Value::LightUserData(p) if p.0.is_null() => self.out.extend_from_slice(b"null"),
            Value::Boolean(b) => self.out.extend_from_slice(if *b { b"true" } else { b"false" }),
            Value::Integer(i) => write_int(*i, &mut self.out),
            Value::Number(f) if f.is_nan() => return Err(refused("NaN")),
            Value::Number(f) if f.is_infinite() => return Err(refused("an infinite number")),
            Value::Number(f) => write_json_float(*f, &mut self.out),
            Value::String(s) => {
                let bytes = s.as_bytes();
                self.check_utf8(&bytes)?;
                encode_string(&bytes, &mut self.out);
            }
            Value::Table(t) => self.table(t, place)?,
            other => return Err(refused(format!("a {}", other.type_name()))),
        }
        Ok(())
    }

    fn is_open(&self, ptr: *const c_void) -> bool {
        self.shallow[..self.depth.min(SHALLOW)].contains(&ptr) || self.deep.contains(&ptr)
    }

    fn table(&mut self, t: &Table, place: Place) -> Result<(), Fail> {
        let ptr = t.to_pointer();
        if self.is_open(ptr) {
            return Err(refused("a table that contains itself"));
        }
        if self.depth >= codec::MAX_DEPTH {
            return Err(refused(format!("a table nested more than {} levels deep", codec::MAX_DEPTH)));
        }
        if self.depth < SHALLOW {
            self.shallow[self.depth] = ptr;
        } else {
            self.deep.push(ptr);
        }
        self.depth += 1;
        let written = self.table_body(t, place);
        self.depth -= 1;
        if self.depth >= SHALLOW {
            self.deep.pop();
        }
        written
    }

    /// The table's entries as the reference encoder sees them: keys from
    /// Lua's `pairs`, which honours `__pairs` (a proxy table holds nothing
    /// itself), and, for a proxy, each value as `t[k]` reads it. The flag
    /// says whether the table is such a proxy.
    fn entries(&mut self, t: &Table, mt: Option<&Table>) -> Result<(Vec<Entry>, bool), Fail> {
        let mut entries: Vec<Entry> = Vec::new();
        let proxied = mt.is_some_and(|mt| mt.raw_get::<Value>("__pairs").is_ok_and(|v| !v.is_nil()));
        if !proxied {
            // for_each, not pairs: pairs clones each key for its next step,
            // an allocation per entry (1 MB of arguments: 15.8 -> 13.3 ms).
            t.for_each(|k: Value, v: Value| {
                entries.push((k, v, None));
                Ok(())
            })?;
            return Ok((entries, false));
        }
        let raised = |r: Raise| Fail::Raised(r);
        let mut iteration = call_lua(self.lua, self.lua.prelude.pairs.clone(), t.clone()).map_err(raised)?;
        let next = iteration.pop_front().unwrap_or(Value::Nil);
        let state = iteration.pop_front().unwrap_or(Value::Nil);
        let mut control = iteration.pop_front().unwrap_or(Value::Nil);
        let Value::Function(next) = next else {
            return Err(refused("a table whose __pairs returned no iterator"));
        };
        loop {
            let mut step = call_lua(self.lua, next.clone(), (state.clone(), control)).map_err(raised)?;
            let key = step.pop_front().unwrap_or(Value::Nil);
            if key.is_nil() {
                return Ok((entries, true));
            }
            control = key.clone();
            let value = t.get::<Value>(key.clone())?;
            entries.push((key, value, None));
        }
    }

    fn table_body(&mut self, t: &Table, place: Place) -> Result<(), Fail> {
        // Only the outermost table: a protected call per nested table that
        // turns out not to be flat cost 3% of a 1 MB argument's encoding.
        if self.depth == 1 && !self.flat_tried {
            match write_flat_table(self.lua, t, &mut self.out) {
                Flat::Written => return Ok(()),
                Flat::Empty => {
                    self.empty_table(place.wants_array());
                    return Ok(());
                }
                Flat::Other => {}
            }
        }
        // Read once: __pairs, __jsontype and __jsonorder all live there.
        let mt = t.metatable();
        let (mut entries, proxied) = self.entries(t, mt.as_ref())?;
        let declared = mt.as_ref().and_then(declared_type);
        if entries.is_empty() && (declared == Some(Declared::Array) || (declared.is_none() && place.wants_array())) {
            self.out.extend_from_slice(b"[]");
            return Ok(());
        }
        let is_array = !entries.is_empty()
            && declared != Some(Declared::Object)
            && entries.iter().all(|(k, _, _)| matches!(k, Value::Integer(i) if *i >= 1))
            && entries.iter().map(|(k, _, _)| k.as_integer().unwrap_or(0)).max() == Some(entries.len() as i64);
        if is_array {
            entries.sort_by_key(|(k, _, _)| k.as_integer().unwrap_or(0));
            if proxied {
                // The reference walks `1..#t` reading `t[i]`: for a proxy,
                // its `__len` and `__index` decide, not what pairs gave.
                let n = t.len()?;
                entries =
                    (1..=n).map(|i| Ok((Value::Integer(i), t.get::<Value>(i)?, None))).collect::<mlua::Result<_>>()?;
            }
            self.out.push(b'[');
            for (i, (_, v, _)) in entries.iter().enumerate() {
                if i > 0 {
                    self.out.push(b',');
                }
                match self.value(v, place.element(i)) {
                    Err(Fail::Refused(r)) => return Err(Fail::Refused(r.under(format!("[{}]", i + 1)))),
                    other => other?,
                }
            }
            self.out.push(b']');
            return Ok(());
        }
        for (k, _, text) in &mut entries {
            match key_text(k) {
                Some(key) => *text = Some(key),
                None => return Err(refused(format!("a {} key", k.type_name()))),
            }
        }
        // Each key's text made once, not at every comparison (1 MB of
        // arguments: 13.3 -> 12.1 ms), in the list the entries came in.
        // Stable, as the reference's order is for keys with the same text.
        entries.sort_by(|a, b| a.2.as_deref().cmp(&b.2.as_deref()));
        // `trace.ordered` tables list some keys first, in the given order.
        // An order entry names a key as `t[k]` would find it: by value, so
        // "5" does not name the key 5, and 5.0 does.
        if let Some(order) = mt.and_then(|mt| mt.raw_get::<Option<Table>>("__jsonorder").ok().flatten()) {
            let mut front = Vec::new();
            for key in order.sequence_values::<Value>() {
                let key = key?;
                if let Some(at) = entries.iter().position(|(k, _, _)| same_table_key(k, &key)) {
                    front.push(entries.remove(at));
                }
            }
            front.append(&mut entries);
            entries = front;
        }
        self.out.push(b'{');
        for (i, (_, v, key)) in entries.iter().enumerate() {
            let Some(key) = key else { continue };
            if i > 0 {
                self.out.push(b',');
            }
            let segment = || String::from_utf8_lossy(key).into_owned();
            encode_string(key, &mut self.out);
            self.out.push(b':');
            match self.value(v, place.member(&key[..])) {
                Err(Fail::Refused(r)) => return Err(Fail::Refused(r.under(segment()))),
                other => other?,
            }
            if std::str::from_utf8(key).is_err() {
                return Err(Fail::Refused(Refusal::new("a key that is not UTF-8").under(segment())));
            }
        }
        self.out.push(b'}');
        Ok(())
    }
}

/// What a table's metatable says it is, in `__jsontype` (dkjson's name).
#[derive(Clone, Copy, PartialEq)]
pub(super) enum Declared {
    Array,
    Object,
}

pub(super) fn declared_type(mt: &Table) -> Option<Declared> {
    match mt.raw_get::<Value>("__jsontype").ok()? {
        Value::String(s) if s.as_bytes().as_ref() == b"array" => Some(Declared::Array),
        Value::String(s) if s.as_bytes().as_ref() == b"object" => Some(Declared::Object),
        _ => None,
    }
}

/// Whether two values index the same table slot: equal strings, or equal
/// numbers whatever their subtype (a float with an integer value is
/// normalised to that integer as a key).
pub(super) fn same_table_key(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::String(x), Value::String(y)) => x.as_bytes() == y.as_bytes(),
        (Value::Integer(x), Value::Integer(y)) => x == y,
        (Value::Number(x), Value::Number(y)) => x == y,
        // Exactly, as Lua compares them: 2^63 as a float is no integer key.
        (Value::Integer(i), Value::Number(f)) | (Value::Number(f), Value::Integer(i)) => {
            const TWO_POW_63: f64 = 9_223_372_036_854_775_808.0;
            f.fract() == 0.0 && *f >= -TWO_POW_63 && *f < TWO_POW_63 && *f as i64 == *i
        }
        _ => false,
    }
}
