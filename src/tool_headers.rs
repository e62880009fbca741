//! Tool parameters mirrored into HTTP headers (the 2026-07-28 revision's
//! `x-mcp-header`), and the encoding every such header value takes.
//!
//! A tool's `inputSchema` may mark a property with `"x-mcp-header":
//! "Region"`; a modern HTTP request calling it then carries the
//! argument's value as `Mcp-Param-Region`, so that a gateway can route on
//! it without reading the body. The revision is strict about where the
//! mark may stand (a property reached from the root through `properties`
//! alone, of type string, integer or boolean, a header-safe name unique
//! without regard to case) and asks HTTP clients to leave out a tool whose
//! marks break those rules, saying why. Values that a header cannot carry
//! as they are (non-ASCII, control characters, spaces at either end, or
//! text that looks like the encoded form) go as `=?base64?...?=`.

use base64::engine::general_purpose::STANDARD;
use base64::Engine;

use crate::codec::Json;
use crate::wire::headers::MCP_PARAM_PREFIX;

/// A header a tool's schema asks for, and where its value sits in the
/// arguments.
#[derive(Debug, PartialEq)]
pub struct Declared {
    pub header: String,
    pub path: Vec<Vec<u8>>,
}

/// Where a schema node stands, for whether it may carry a mark.
enum Place {
    Root,
    /// Reached from the root through `properties` alone, by these names.
    Property(Vec<Vec<u8>>),
    Elsewhere,
}

/// The headers `schema` declares, or why its marks make the tool invalid.
pub fn declared(schema: &Json) -> Result<Vec<Declared>, String> {
    let mut found = Vec::new();
    visit(schema, Place::Root, &mut found)?;
    for (i, d) in found.iter().enumerate() {
        if found[..i].iter().any(|e| e.header.eq_ignore_ascii_case(&d.header)) {
            return Err(format!("the header name {:?} is declared twice", d.header));
        }
    }
    Ok(found)
}

fn visit(node: &Json, place: Place, found: &mut Vec<Declared>) -> Result<(), String> {
    let pairs: &[(Vec<u8>, Json)] = match node {
        Json::Object(pairs) => pairs,
        Json::Array(items) => {
            return items.iter().try_for_each(|item| visit(item, Place::Elsewhere, found));
        }
        Json::Raw(raw) => return visit(raw.tree(), place, found),
        _ => return Ok(()),
    };
    if let Some(mark) = node.get("x-mcp-header") {
        let Place::Property(path) = &place else {
            return Err("x-mcp-header stands on a schema that is not a property reached through properties".into());
        };
        found.push(Declared { header: header_name(mark)?, path: path.clone() });
        match node.get("type") {
            Some(Json::Str(t)) if matches!(t.as_slice(), b"string" | b"integer" | b"boolean") => {}
            _ => return Err("x-mcp-header stands on a property whose type is not string, integer or boolean".into()),
        }
    }
    for (key, value) in pairs {
        let nested = key == b"properties" && !matches!(place, Place::Elsewhere);
        match (nested, value) {
            (true, Json::Object(properties)) => {
                for (name, schema) in properties {
                    let mut path = match &place {
                        Place::Property(path) => path.clone(),
                        _ => Vec::new(),
                    };
                    path.push(name.clone());
                    visit(schema, Place::Property(path), found)?;
                }
            }
            _ => visit(value, Place::Elsewhere, found)?,
        }
    }
    Ok(())
}

/// A mark's header name: a non-empty HTTP token (RFC 9110's `tchar`s).
fn header_name(mark: &Json) -> Result<String, String> {
    let Json::Str(name) = mark else { return Err("x-mcp-header is not a string".into()) };
    let tchar = |b: &u8| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(b);
    if name.is_empty() || !name.iter().all(tchar) {
        return Err(format!("x-mcp-header {:?} is not a valid header name", String::from_utf8_lossy(name)));
    }
    Ok(String::from_utf8_lossy(name).into_owned())
}

/// The `Mcp-Param-*` headers for `arguments`: one per declared property
/// that has a value there (absent and null leave the header out).
pub fn param_headers(declared: &[Declared], arguments: &Json) -> Vec<(String, String)> {
    let mut headers = Vec::new();
    for d in declared {
        let mut at = Some(arguments);
        for key in &d.path {
            at = at.and_then(|v| lookup(v, key));
        }
        let text = match at {
            Some(Json::Str(s)) => String::from_utf8_lossy(s).into_owned(),
            Some(Json::Int(i)) => i.to_string(),
            Some(Json::Float(f)) if f.fract() == 0.0 && f.abs() < 9.007_199_254_740_992e15 => (*f as i64).to_string(),
            Some(Json::Bool(b)) => b.to_string(),
            _ => continue,
        };
        headers.push((format!("{MCP_PARAM_PREFIX}{}", d.header), header_value(&text)));
    }
    headers
}

fn lookup<'a>(value: &'a Json, key: &[u8]) -> Option<&'a Json> {
    match value {
        Json::Object(pairs) => pairs.iter().rev().find(|(k, _)| k == key).map(|(_, v)| v),
        Json::Raw(raw) => lookup(raw.tree(), key),
        _ => None,
    }
    .filter(|v| !matches!(v, Json::Null))
}

/// A value as a header carries it: as it is when that is safe, else
/// `=?base64?...?=`. Tabs are encoded too (a proxy may fold them), and so
/// is the empty string, which some HTTP stacks drop with its header.
pub fn header_value(text: &str) -> String {
    let bytes = text.as_bytes();
    let unsafe_byte = bytes.iter().any(|b| !(0x20..=0x7e).contains(b));
    let edge_space = bytes.first() == Some(&b' ') || bytes.last() == Some(&b' ');
    let looks_encoded = text.starts_with("=?base64?") && text.ends_with("?=");
    if bytes.is_empty() || unsafe_byte || edge_space || looks_encoded {
        format!("=?base64?{}?=", STANDARD.encode(bytes))
    } else {
        text.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::decode;

    fn schema(text: &str) -> Json {
        decode(text.as_bytes()).unwrap()
    }

    #[test]
    fn values_a_header_cannot_carry_go_as_base64() {
        assert_eq!(header_value("us-west1"), "us-west1");
        assert_eq!(header_value("us west 1"), "us west 1");
        assert_eq!(header_value("Hello, 世界"), "=?base64?SGVsbG8sIOS4lueVjA==?=");
        assert_eq!(header_value(" padded "), "=?base64?IHBhZGRlZCA=?=");
        assert_eq!(header_value("line1\nline2"), "=?base64?bGluZTEKbGluZTI=?=");
        assert_eq!(header_value("=?base64?literal?="), "=?base64?PT9iYXNlNjQ/bGl0ZXJhbD89?=");
        assert_eq!(header_value("\tindented"), "=?base64?CWluZGVudGVk?=");
        assert_eq!(header_value(""), "=?base64??=");
    }

    #[test]
    fn marks_on_nested_properties_are_followed_and_values_mirrored() {
        let s = schema(
            r#"{"type":"object","properties":{"region":{"type":"string","x-mcp-header":"Region"},
            "opts":{"type":"object","properties":{"n":{"type":"integer","x-mcp-header":"N"}}},
            "query":{"type":"string"}}}"#,
        );
        let d = declared(&s).unwrap();
        let args = schema(r#"{"region":"eu","opts":{"n":42},"query":"x"}"#);
        let h = param_headers(&d, &args);
        assert_eq!(h, vec![("Mcp-Param-Region".into(), "eu".into()), ("Mcp-Param-N".into(), "42".into())]);
        assert!(param_headers(&d, &schema(r#"{"region":null}"#)).is_empty());
    }

    #[test]
    fn marks_the_revision_forbids_make_the_tool_invalid() {
        let bad = [
            r#"{"properties":{"a":{"type":"number","x-mcp-header":"A"}}}"#,
            r#"{"properties":{"a":{"type":"string","x-mcp-header":""}}}"#,
            r#"{"properties":{"a":{"type":"string","x-mcp-header":"A B"}}}"#,
            r#"{"properties":{"a":{"type":"string","x-mcp-header":"Région"}}}"#,
            r#"{"properties":{"a":{"type":"string","x-mcp-header":"A"},"b":{"type":"string","x-mcp-header":"a"}}}"#,
            r#"{"properties":{"a":{"type":"array","items":{"type":"string","x-mcp-header":"A"}}}}"#,
            r#"{"x-mcp-header":"Root","type":"string"}"#,
        ];
        for text in bad {
            assert!(declared(&schema(text)).is_err(), "{text}");
        }
    }
}
