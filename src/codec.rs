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
//! One deliberate departure: a `\uXXXX` surrogate pair decodes to the one
//! real character it names (the reference writes each half as its own
//! 3-byte sequence, which no UTF-8 reader accepts), and a lone surrogate
//! becomes U+FFFD.

use std::fmt;

/// A decoded JSON value. Strings are bytes, and objects are kept as an
/// ordered list of pairs, duplicates included: [`Json::get`] resolves them
/// the way Lua table assignment would.
#[derive(Clone, Debug, PartialEq)]
pub enum Json {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(Vec<u8>),
    Array(Vec<Json>),
    Object(Vec<(Vec<u8>, Json)>),
}

impl Json {
    pub fn str(s: impl AsRef<[u8]>) -> Json {
        Json::Str(s.as_ref().to_vec())
    }

    /// Builds an object from pairs, keeping their order.
    pub fn object<K: AsRef<[u8]>>(pairs: impl IntoIterator<Item = (K, Json)>) -> Json {
        Json::Object(pairs.into_iter().map(|(k, v)| (k.as_ref().to_vec(), v)).collect())
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
            _ => None,
        }
    }

    /// [`Json::get`], for changing the value in place.
    pub fn get_mut(&mut self, key: &str) -> Option<&mut Json> {
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
    let mut reader = Reader { text, pos: 0, depth: MAX_DEPTH - 1 };
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
        let Ok(key) = reader.string() else { return id };
        *has_method |= key == b"method";
        reader.skip_space();
        if reader.peek() != Some(b':') {
            return id;
        }
        reader.pos += 1;
        reader.skip_space();
        let scalar = !matches!(reader.peek(), Some(b'{' | b'['));
        if key == b"id" && scalar {
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
    let mut reader = Reader { text, pos: 0, depth: 0 };
    let value = reader.value()?;
    reader.skip_space();
    if reader.pos < text.len() {
        return Err(reader.fail("trailing text"));
    }
    Ok(value)
}

struct Reader<'a> {
    text: &'a [u8],
    pos: usize,
    depth: usize,
}

impl Reader<'_> {
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

    fn literal(&mut self, word: &[u8], value: Json) -> Result<Json, DecodeError> {
        if self.text[self.pos..].starts_with(word) {
            self.pos += word.len();
            Ok(value)
        } else {
            Err(self.fail("unexpected character"))
        }
    }

    fn value(&mut self) -> Result<Json, DecodeError> {
        self.skip_space();
        match self.peek() {
            Some(b'{') => self.nested(Self::object),
            Some(b'[') => self.nested(Self::array),
            Some(b'"') => self.string().map(Json::Str),
            Some(b'-' | b'0'..=b'9') => self.number(),
            Some(b't') => self.literal(b"true", Json::Bool(true)),
            Some(b'f') => self.literal(b"false", Json::Bool(false)),
            Some(b'n') => self.literal(b"null", Json::Null),
            Some(_) => Err(self.fail("unexpected character")),
            None => Err(self.fail("unexpected end of text")),
        }
    }

    fn nested(&mut self, read: fn(&mut Self) -> Result<Json, DecodeError>) -> Result<Json, DecodeError> {
        if self.depth >= MAX_DEPTH {
            return Err(self.fail(TOO_DEEP));
        }
        self.depth += 1;
        let value = read(self);
        self.depth -= 1;
        value
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
                    self.string()?;
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

    fn object(&mut self) -> Result<Json, DecodeError> {
        self.pos += 1;
        let mut pairs = Vec::new();
        self.skip_space();
        if self.peek() == Some(b'}') {
            self.pos += 1;
            return Ok(Json::Object(pairs));
        }
        loop {
            if self.peek() != Some(b'"') {
                return Err(self.fail("expected a key"));
            }
            let key = self.string()?;
            self.skip_space();
            if self.peek() != Some(b':') {
                return Err(self.fail("expected ':'"));
            }
            self.pos += 1;
            let value = self.value()?;
            pairs.push((key, value));
            self.skip_space();
            match self.peek() {
                Some(b'}') => {
                    self.pos += 1;
                    return Ok(Json::Object(pairs));
                }
                Some(b',') => {
                    self.pos += 1;
                    self.skip_space();
                }
                _ => return Err(self.fail("expected ',' or '}'")),
            }
        }
    }

    fn array(&mut self) -> Result<Json, DecodeError> {
        self.pos += 1;
        let mut items = Vec::new();
        self.skip_space();
        if self.peek() == Some(b']') {
            self.pos += 1;
            return Ok(Json::Array(items));
        }
        loop {
            items.push(self.value()?);
            self.skip_space();
            match self.peek() {
                Some(b']') => {
                    self.pos += 1;
                    return Ok(Json::Array(items));
                }
                Some(b',') => self.pos += 1,
                _ => return Err(self.fail("expected ',' or ']'")),
            }
        }
    }

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

    fn string(&mut self) -> Result<Vec<u8>, DecodeError> {
        let start = self.pos;
        self.pos += 1;
        let mut out = Vec::new();
        loop {
            // Copy the run up to the next quote or backslash in one go: long
            // tool results are mostly such runs.
            let rest = &self.text[self.pos..];
            let run = rest.iter().position(|&b| b == b'"' || b == b'\\');
            let Some(run) = run else {
                self.pos = start;
                return Err(self.fail("unterminated string"));
            };
            out.extend_from_slice(&rest[..run]);
            self.pos += run;
            if self.text[self.pos] == b'"' {
                self.pos += 1;
                return Ok(out);
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
                    out.extend_from_slice(code.encode_utf8(&mut buf).as_bytes());
                    continue;
                }
                _ => {
                    self.pos -= 2;
                    return Err(self.fail("bad escape"));
                }
            };
            out.push(simple);
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

    fn number(&mut self) -> Result<Json, DecodeError> {
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
                return Ok(Json::Int(i));
            }
        }
        let text = text.replace(".e", ".0e").replace(".E", ".0E");
        match text.trim_end_matches('.').parse::<f64>() {
            Ok(f) => Ok(Json::Float(f)),
            Err(_) => {
                self.pos = start;
                Err(self.fail("bad number"))
            }
        }
    }
}

/// Appends the JSON text of `value`. Object pairs are written in the order
/// they are held: callers put them in the order they want (sorted, or the
/// `__jsonorder` of a Lua table) when they build the value.
pub fn encode_into(value: &Json, out: &mut Vec<u8>) {
    match value {
        Json::Null => out.extend_from_slice(b"null"),
        Json::Bool(b) => out.extend_from_slice(if *b { b"true" } else { b"false" }),
        Json::Int(i) => {
            // Into the output directly: no string per integer.
            use std::io::Write;
            let _ = write!(out, "{i}");
        }
        Json::Float(f) => out.extend_from_slice(format_float(*f).as_bytes()),
        Json::Str(s) => encode_string(s, out),
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

fn encode_string(s: &[u8], out: &mut Vec<u8>) {
    out.reserve(s.len() + 2);
    out.push(b'"');
    // Runs of bytes that need no escape are copied whole: most text is
    // one such run.
    let mut plain_from = 0;
    for (i, &b) in s.iter().enumerate() {
        let escape: &[u8] = match b {
            b'"' => b"\\\"",
            b'\\' => b"\\\\",
            0x08 => b"\\b",
            0x0c => b"\\f",
            b'\n' => b"\\n",
            b'\r' => b"\\r",
            b'\t' => b"\\t",
            0x00..=0x1f | 0x7f => b"",
            _ => continue,
        };
        out.extend_from_slice(&s[plain_from..i]);
        plain_from = i + 1;
        if escape.is_empty() {
            const HEX: &[u8; 16] = b"0123456789abcdef";
            out.extend_from_slice(&[b'\\', b'u', b'0', b'0', HEX[usize::from(b >> 4)], HEX[usize::from(b & 15)]]);
        } else {
            out.extend_from_slice(escape);
        }
    }
    out.extend_from_slice(&s[plain_from..]);
    out.push(b'"');
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
    const PRECISION: i32 = 14;
    if f.is_nan() {
        return if f.is_sign_negative() { "-nan" } else { "nan" }.into();
    }
    if f.is_infinite() {
        return if f < 0.0 { "-inf" } else { "inf" }.into();
    }
    if f == 0.0 {
        return if f.is_sign_negative() { "-0" } else { "0" }.into();
    }
    let mut scientific = format!("{:e}", f);
    let significant = scientific.split('e').next().map_or(0, |m| m.bytes().filter(u8::is_ascii_digit).count());
    // Below the normal range a float has fewer bits than 14 digits need,
    // so its shortest form (5e-324) is not what rounding to 14 digits
    // gives (4.9406564584125e-324): take the exact route there too.
    if significant > PRECISION as usize || f.is_subnormal() {
        scientific = format!("{:.*e}", (PRECISION - 1) as usize, f);
        #[cfg(feature = "luajit")]
        if let Some(away) = tie_rounded_away(f, PRECISION as usize) {
            scientific = away;
        }
    }
    let (mantissa, exponent) = scientific.split_once('e').unwrap_or((&scientific, "0"));
    let exponent: i32 = exponent.parse().unwrap_or(0);
    let negative = mantissa.starts_with('-');
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let digits = digits.trim_end_matches('0');
    let digits = if digits.is_empty() { "0" } else { digits };
    let sign = if negative { "-" } else { "" };
    if !(-4..PRECISION).contains(&exponent) {
        let (first, rest) = digits.split_at(1);
        let dot = if rest.is_empty() { "" } else { "." };
        let esign = if exponent < 0 { '-' } else { '+' };
        format!("{sign}{first}{dot}{rest}e{esign}{:02}", exponent.abs())
    } else if exponent >= 0 {
        let whole = exponent as usize + 1;
        if digits.len() <= whole {
            format!("{sign}{digits}{}", "0".repeat(whole - digits.len()))
        } else {
            format!("{sign}{}.{}", &digits[..whole], &digits[whole..])
        }
    } else {
        format!("{sign}0.{}{digits}", "0".repeat((-exponent - 1) as usize))
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
    fn round_trips_keep_order_and_forms() {
        assert_eq!(round_trip(r#" {"b":[1,2.5,"x"],"a":{}} "#), r#"{"b":[1,2.5,"x"],"a":{}}"#);
        assert_eq!(round_trip("1.0"), "1");
    }
}
