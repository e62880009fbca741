//! The writer: a [`Json`] as JSON text, its floats as the shortest text
//! that reads back the same ([`write_json_float`]); and numbers as the
//! reference and Lua print them (`%d` and `%.14g`, Lua's `tostring`)
//! where a text must read as theirs does (a float key of a Lua table, a
//! recording's times, content blocks, error codes).

use super::Json;

/// Appends the JSON text of `value`. Object pairs are written in the order
/// they are held: callers put them in the order they want (sorted, or the
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
        response @ Json::Response(_) => encode_into(&response.clone().into_tree(), out),
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
    use crate::codec::{decode, RawJson};

    fn round_trip(text: &str) -> String {
        String::from_utf8(encode(&decode(text.as_bytes()).unwrap())).unwrap()
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
