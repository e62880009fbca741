//! What validation asks of a JSON value, in JSON's terms rather than
//! Lua's: a key set to `null` is present, `1` equals `1.0`, and an
//! object's keys have no order.

use std::borrow::Cow;

use crate::codec::{encode, Json};
use crate::server_text::{quoted, ITEM_CHARS, TEXT_CHARS};

/// The value of `key` in an object's pairs, `null` included (the last
/// occurrence wins, as in every decoder that keeps one).
pub fn field<'a>(pairs: &'a [(Vec<u8>, Json)], key: &[u8]) -> Option<&'a Json> {
    pairs.iter().rev().find(|(k, _)| k == key).map(|(_, v)| v)
}

/// A value to walk: a kept text is read as its tree, a request as the
/// object it is sent as.
pub fn tree(value: &Json) -> Cow<'_, Json> {
    match value {
        Json::Raw(raw) => Cow::Borrowed(raw.tree()),
        request @ (Json::Request(_) | Json::Response(_)) => Cow::Owned(request.clone().into_tree()),
        other => Cow::Borrowed(other),
    }
}

/// `value` as a tree all the way down, kept texts taken apart: a schema
/// is walked many times.
pub fn plain(value: &Json) -> Json {
    match value {
        Json::Array(items) => Json::Array(items.iter().map(plain).collect()),
        Json::Object(pairs) => Json::Object(pairs.iter().map(|(k, v)| (k.clone(), plain(v))).collect()),
        Json::Raw(raw) => plain(raw.tree()),
        request @ (Json::Request(_) | Json::Response(_)) => plain(&request.clone().into_tree()),
        other => other.clone(),
    }
}

/// A number as f64, and whether it is one.
pub fn number(value: &Json) -> Option<f64> {
    match value {
        Json::Int(i) => Some(*i as f64),
        Json::Float(f) => Some(*f),
        _ => None,
    }
}

/// Whether a number is an integer: `1.0` is one, as every draft from 6
/// on says (and draft 4's validators agree in practice).
pub fn is_integer(value: &Json) -> bool {
    match value {
        Json::Int(_) => true,
        Json::Float(f) => f.fract() == 0.0 && f.is_finite(),
        _ => false,
    }
}

/// JSON's equality, for `enum`, `const` and `uniqueItems`.
pub fn same(a: &Json, b: &Json) -> bool {
    match (a, b) {
        (Json::Raw(_) | Json::Request(_) | Json::Response(_), _)
        | (_, Json::Raw(_) | Json::Request(_) | Json::Response(_)) => same(&tree(a), &tree(b)),
        (Json::Int(x), Json::Int(y)) => x == y,
        (Json::Int(_) | Json::Float(_), Json::Int(_) | Json::Float(_)) => number(a) == number(b),
        (Json::Array(x), Json::Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(p, q)| same(p, q)),
        (Json::Object(x), Json::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| field(y, k).is_some_and(|w| same(v, w)))
        }
        _ => a == b,
    }
}

/// The number of characters in a string (UTF-8's lead bytes; a byte
/// that is not UTF-8 counts as one).
pub fn characters(s: &[u8]) -> usize {
    s.iter().filter(|&&b| b & 0xC0 != 0x80).count()
}

/// A value as messages show it: its compact JSON text, cut after
/// `server_text::TEXT_CHARS` characters (a 10 MB result of the wrong type
/// was a 10 MB error).
pub fn shown(value: &Json) -> String {
    quoted(&encode(value), TEXT_CHARS)
}

/// A schema's own text (a pattern, a format, a type name) as messages
/// quote it: it comes from a server too.
pub fn said(text: &[u8]) -> String {
    quoted(text, ITEM_CHARS)
}

/// One step of a JSON Pointer, escaped (`~` and `/`).
pub fn pointer_step(step: &[u8]) -> String {
    String::from_utf8_lossy(step).replace('~', "~0").replace('/', "~1")
}

/// The value at `steps` below `root`, if there is one: object keys, or
/// array indices in decimal.
pub fn at<'a>(root: &'a Json, steps: &[Vec<u8>]) -> Option<&'a Json> {
    steps.iter().try_fold(root, |node, step| match node {
        Json::Object(pairs) => field(pairs, step),
        Json::Array(items) => std::str::from_utf8(step).ok()?.parse::<usize>().ok().and_then(|i| items.get(i)),
        _ => None,
    })
}
