//! Lua values <-> [`Json`]: what the wire may carry, and how replies
//! become Lua tables exactly as the reference codec builds them.

use super::*;

/// The bytes Lua's `..` would use for a string or number; None otherwise.
pub(super) fn concat_piece(v: &Value) -> Option<Vec<u8>> {
    match v {
        Value::String(s) => Some(s.as_bytes().to_vec()),
        Value::Integer(i) => Some(i.to_string().into_bytes()),
        Value::Number(f) => Some(lua_float_text(*f).into_bytes()),
        _ => None,
    }
}

/// Converts a Lua value for the wire, refusing what JSON cannot carry and
/// naming where it was found (`arguments.items[2].cb`).
///
/// The path is only built when something is refused, on the way back up:
/// formatting a path segment for every value would cost more than the
/// conversion itself.
///
/// Tables are followed [`codec::MAX_DEPTH`] levels down and no further: this
/// recursion runs on the host's own C stack, and a table 12,000 levels
/// deep crashed the host with SIGSEGV when it was unbounded. (The
/// reference, in Lua, raises "stack overflow" at some depth instead.)
pub(super) struct Encoder<'a, 'b> {
    lua: &'a Cx<'b>,
    /// Tables on the way down from the root: meeting one again is a cycle.
    /// (A table shared by two branches is fine and encodes twice.) Its
    /// length is the current depth.
    open: Vec<*const c_void>,
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

/// Segments of a path shown before the rest is elided: a path 512 levels
/// deep makes no better error message than its first few steps.
const PATH_SEGMENTS_SHOWN: usize = 8;

impl<'a, 'b> Encoder<'a, 'b> {
    pub(super) fn convert(lua: &'a Cx<'b>, root: &str, value: &Value) -> Outcome<Json> {
        let mut enc = Encoder { lua, open: Vec::new() };
        match enc.value(value) {
            Ok(json) => Ok(json),
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

    fn value(&mut self, value: &Value) -> Result<Json, Fail> {
        Ok(match value {
            Value::Nil => Json::Null,
            Value::Boolean(b) => Json::Bool(*b),
            Value::Integer(i) => Json::Int(*i),
            Value::Number(f) if f.is_nan() => return Err(Fail::Refused(Refusal::new("NaN"))),
            Value::Number(f) if f.is_infinite() => return Err(Fail::Refused(Refusal::new("an infinite number"))),
            Value::Number(f) => Json::Float(*f),
            Value::String(s) => {
                let bytes = s.as_bytes();
                if std::str::from_utf8(&bytes).is_err() {
                    return Err(Fail::Refused(Refusal::new("a string that is not UTF-8")));
                }
                Json::Str(bytes.to_vec())
            }
            Value::Table(t) => self.table(t)?,
            other => return Err(Fail::Refused(Refusal::new(format!("a {}", other.type_name())))),
        })
    }

    fn table(&mut self, t: &Table) -> Result<Json, Fail> {
        let ptr = t.to_pointer();
        if self.open.contains(&ptr) {
            return Err(Fail::Refused(Refusal::new("a table that contains itself")));
        }
        if self.open.len() >= codec::MAX_DEPTH {
            let what = format!("a table nested more than {} levels deep", codec::MAX_DEPTH);
            return Err(Fail::Refused(Refusal::new(what)));
        }
        self.open.push(ptr);
        let json = self.table_body(t);
        self.open.pop();
        json
    }

    /// The table's entries as the reference encoder sees them: keys from
    /// Lua's `pairs`, which honours `__pairs` (a proxy table holds nothing
    /// itself), and, for a proxy, each value as `t[k]` reads it. The flag
    /// says whether the table is such a proxy.
    fn entries(&mut self, t: &Table) -> Result<(Vec<(Value, Value)>, bool), Fail> {
        let mut entries: Vec<(Value, Value)> = Vec::new();
        let proxied = t.metatable().is_some_and(|mt| mt.raw_get::<Value>("__pairs").is_ok_and(|v| !v.is_nil()));
        if !proxied {
            for pair in t.pairs::<Value, Value>() {
                entries.push(pair?);
            }
            return Ok((entries, false));
        }
        let raised = |r: Raise| Fail::Raised(r);
        let mut iteration = call_lua(self.lua, self.lua.glue.pairs.clone(), t.clone()).map_err(raised)?;
        let next = iteration.pop_front().unwrap_or(Value::Nil);
        let state = iteration.pop_front().unwrap_or(Value::Nil);
        let mut control = iteration.pop_front().unwrap_or(Value::Nil);
        let Value::Function(next) = next else {
            return Err(Fail::Refused(Refusal::new("a table whose __pairs returned no iterator")));
        };
        loop {
            let mut step = call_lua(self.lua, next.clone(), (state.clone(), control)).map_err(raised)?;
            let key = step.pop_front().unwrap_or(Value::Nil);
            if key.is_nil() {
                return Ok((entries, true));
            }
            control = key.clone();
            let value = t.get::<Value>(key.clone())?;
            entries.push((key, value));
        }
    }

    fn table_body(&mut self, t: &Table) -> Result<Json, Fail> {
        let (mut entries, proxied) = self.entries(t)?;
        let is_array = !entries.is_empty()
            && entries.iter().all(|(k, _)| matches!(k, Value::Integer(i) if *i >= 1))
            && entries.iter().map(|(k, _)| k.as_integer().unwrap_or(0)).max() == Some(entries.len() as i64);
        if is_array {
            entries.sort_by_key(|(k, _)| k.as_integer().unwrap_or(0));
            if proxied {
                // The reference walks `1..#t` reading `t[i]`: for a proxy,
                // its `__len` and `__index` decide, not what pairs gave.
                let n = t.len()?;
                entries = (1..=n).map(|i| Ok((Value::Integer(i), t.get::<Value>(i)?))).collect::<mlua::Result<_>>()?;
            }
            let mut items = Vec::with_capacity(entries.len());
            for (i, (_, v)) in entries.iter().enumerate() {
                match self.value(v) {
                    Ok(json) => items.push(json),
                    Err(Fail::Refused(r)) => return Err(Fail::Refused(r.under(format!("[{}]", i + 1)))),
                    Err(e) => return Err(e),
                }
            }
            return Ok(Json::Array(items));
        }
        let mut keyed = Vec::with_capacity(entries.len());
        for (k, v) in entries {
            let text = match &k {
                Value::String(s) => s.as_bytes().to_vec(),
                Value::Integer(i) => i.to_string().into_bytes(),
                Value::Number(f) => format_float(*f).into_bytes(),
                other => return Err(Fail::Refused(Refusal::new(format!("a {} key", other.type_name())))),
            };
            keyed.push((text, k, v));
        }
        keyed.sort_by(|a, b| a.0.cmp(&b.0));
        // `trace.ordered` tables list some keys first, in the given order.
        // An order entry names a key as `t[k]` would find it: by value, so
        // "5" does not name the key 5, and 5.0 does.
        if let Some(order) = t.metatable().and_then(|mt| mt.raw_get::<Option<Table>>("__jsonorder").ok().flatten()) {
            let mut front = Vec::new();
            for key in order.sequence_values::<Value>() {
                let key = key?;
                if let Some(at) = keyed.iter().position(|(_, k, _)| same_table_key(k, &key)) {
                    front.push(keyed.remove(at));
                }
            }
            front.append(&mut keyed);
            keyed = front;
        }
        let mut pairs = Vec::with_capacity(keyed.len());
        for (key, _, v) in keyed {
            let segment = || String::from_utf8_lossy(&key).into_owned();
            let json = match self.value(&v) {
                Ok(json) => json,
                Err(Fail::Refused(r)) => return Err(Fail::Refused(r.under(segment()))),
                Err(e) => return Err(e),
            };
            if std::str::from_utf8(&key).is_err() {
                return Err(Fail::Refused(Refusal::new("a key that is not UTF-8").under(segment())));
            }
            pairs.push((key, json));
        }
        Ok(Json::Object(pairs))
    }
}

/// Whether two values index the same table slot: equal strings, or equal
/// numbers whatever their subtype (a float with an integer value is
/// normalised to that integer as a key).
fn same_table_key(a: &Value, b: &Value) -> bool {
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
