//! One set of option readers: `mcp.new`'s options and the tables inside
//! them (`opts.auth`, `opts.auth.idp`, `opts.cache`), and each request's
//! own. Config files and the command-line tool hand theirs to `mcp.new`,
//! so they meet the same rules. A refusal names who read the option and
//! where it sits, `mcp.new: opts.auth.login_timeout must be ...`, in one
//! wording. A time is read by one of two rules, each written once here: a
//! duration an option sets runs from 0.001 to 1e7 seconds ([`SECONDS`]),
//! and the bound of a wait (`handle:wait(t)`, `mcp.wait_all(hs, t)`) is
//! any number from 0 up ([`wait_bound`]), since a wait of 0 asks "has it
//! settled yet?". `opts.auth.login_timeout` keeps the words it had
//! before this rule existed (above 0 and below 1e7), which callers match.

use std::time::Duration;

use mlua::{Function, LuaString, Table, Value};

use super::lua::{Outcome, Raise};
use crate::error::Error;

/// Seconds an option may give, as a refusal words them.
pub(super) const SECONDS: &str = "a number of seconds from 0.001 to 1e7";
const SECONDS_RANGE: (f64, f64) = (0.001, 1e7);

/// The options in `table`, read by `who` ("mcp.new", "client:call"),
/// found at `at` ("opts", "opts.auth").
pub(super) struct Reader<'a> {
    table: &'a Table,
    who: &'a str,
    at: &'a str,
}

impl<'a> Reader<'a> {
    pub(super) fn new(table: &'a Table, who: &'a str, at: &'a str) -> Reader<'a> {
        Reader { table, who, at }
    }

    /// `field` is refused: it must be `must`.
    pub(super) fn refuse(&self, field: &str, must: &str) -> Raise {
        Raise::Mcp(Error::BadInput(format!("{}: {}.{field} must be {must}", self.who, self.at)))
    }

    /// A number `within` allows (NaN never is), or none.
    pub(super) fn number(&self, field: &str, within: impl Fn(f64) -> bool, must: &str) -> Outcome<Option<f64>> {
        let n = match self.table.get::<Value>(field)? {
            Value::Nil => return Ok(None),
            Value::Integer(i) => i as f64,
            Value::Number(n) => n,
            _ => return Err(self.refuse(field, must)),
        };
        if n.is_nan() || !within(n) {
            return Err(self.refuse(field, must));
        }
        Ok(Some(n))
    }

    /// A whole number from `min` to `max`, or none.
    pub(super) fn whole(&self, field: &str, min: f64, max: f64, must: &str) -> Outcome<Option<u64>> {
        match self.number(field, |n| (min..=max).contains(&n), must)? {
            Some(n) if n.fract() == 0.0 => Ok(Some(n as u64)),
            Some(_) => Err(self.refuse(field, must)),
            None => Ok(None),
        }
    }

    /// A time in seconds (see [`SECONDS`]), or none.
    pub(super) fn seconds(&self, field: &str) -> Outcome<Option<Duration>> {
        let (low, high) = SECONDS_RANGE;
        Ok(self.number(field, |n| (low..=high).contains(&n), SECONDS)?.map(Duration::from_secs_f64))
    }

    pub(super) fn text(&self, field: &str) -> Outcome<Option<String>> {
        match self.table.get::<Value>(field)? {
            Value::Nil => Ok(None),
            Value::String(s) => Ok(Some(s.to_str()?.to_string())),
            _ => Err(self.refuse(field, "a string")),
        }
    }

    pub(super) fn function(&self, field: &str) -> Outcome<Option<Function>> {
        match self.table.get::<Value>(field)? {
            Value::Nil => Ok(None),
            Value::Function(f) => Ok(Some(f)),
            _ => Err(self.refuse(field, "a function")),
        }
    }

    /// A string of any bytes, refused as not being `must` ("a string",
    /// "a file path").
    pub(super) fn string(&self, field: &str, must: &str) -> Outcome<Option<LuaString>> {
        match self.table.get::<Value>(field)? {
            Value::Nil => Ok(None),
            Value::String(s) => Ok(Some(s)),
            _ => Err(self.refuse(field, must)),
        }
    }

    pub(super) fn table(&self, field: &str) -> Outcome<Option<Table>> {
        match self.table.get::<Value>(field)? {
            Value::Nil => Ok(None),
            Value::Table(t) => Ok(Some(t)),
            _ => Err(self.refuse(field, "a table")),
        }
    }

    pub(super) fn boolean(&self, field: &str) -> Outcome<Option<bool>> {
        match self.table.get::<Value>(field)? {
            Value::Nil => Ok(None),
            Value::Boolean(b) => Ok(Some(b)),
            _ => Err(self.refuse(field, "a boolean")),
        }
    }

    /// Which of `words` the option is (its index), or none; anything else
    /// is refused naming them all: `"auto", "legacy" or "modern"`.
    pub(super) fn one_of(&self, field: &str, words: &[&str]) -> Outcome<Option<usize>> {
        let value = self.table.get::<Value>(field)?;
        if value.is_nil() {
            return Ok(None);
        }
        let found = match &value {
            Value::String(s) => words.iter().position(|w| w.as_bytes() == s.as_bytes().as_ref()),
            _ => None,
        };
        found.map(Some).ok_or_else(|| self.refuse(field, &quoted_choices(words)))
    }

    /// Whether the option is the one word it may be (absent: false).
    pub(super) fn word(&self, field: &str, word: &str) -> Outcome<bool> {
        match self.table.get::<Value>(field)? {
            Value::Nil => Ok(false),
            Value::String(s) if s.as_bytes() == word.as_bytes() => Ok(true),
            _ => Err(self.refuse(field, &format!("\"{word}\" or nil"))),
        }
    }
}

/// `"a", "b" or "c"`.
fn quoted_choices(words: &[&str]) -> String {
    let quoted: Vec<String> = words.iter().map(|w| format!("\"{w}\"")).collect();
    match quoted.split_last() {
        Some((last, [])) => last.clone(),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
        None => String::new(),
    }
}

/// The time a wait may take: nil for no bound, else seconds from 0 up
/// (a wait of 0 only looks). `what` names the wait in the refusal.
pub(super) fn wait_bound(value: &Value, what: &str) -> Outcome<Option<Duration>> {
    let seconds = match value {
        Value::Nil => return Ok(None),
        Value::Integer(i) => *i as f64,
        Value::Number(n) => *n,
        _ => return Err(Error::BadInput(format!("{what}: the timeout must be a number of seconds")).into()),
    };
    if seconds.is_nan() || seconds < 0.0 {
        return Err(Error::BadInput(format!("{what}: the timeout must be a number of seconds, 0 or more")).into());
    }
    Ok(Some(Duration::from_secs_f64(seconds.min(1e9))))
}
