//! The checks a 2026-07-28 request must pass over HTTP before the core
//! sees it: the `_meta` it is served by, and the `Mcp-*` headers, which
//! intermediaries route by and so must say what the body says. Each
//! failure has its status and code, as the revision sets them (400 with
//! -32602, -32020 or -32022; 404 with -32601 for a method not served).

use super::request::Request;
use crate::codec::Json;
use crate::protocol::{is_legacy_version, META_PROTOCOL_VERSION};
use crate::server::modern::{check_meta, header_value, unsupported, HEADER_MISMATCH, METHODS};
use crate::server::{Refused, METHOD_NOT_FOUND};

/// Whether a POST is of the stateless revision: no session, and a
/// version header that is not of the earlier revisions, or a `_meta`
/// that says the revision's own fields.
pub fn is_stateless(request: &Request, message: &Json) -> bool {
    if request.header("mcp-session-id").is_some() {
        return false;
    }
    let header = request.header_text("mcp-protocol-version");
    let says_meta = match message.get("params").and_then(|p| p.get("_meta")) {
        Some(Json::Object(pairs)) => pairs.iter().any(|(k, _)| k.starts_with(b"io.modelcontextprotocol/")),
        Some(meta) => meta.get(META_PROTOCOL_VERSION).is_some(),
        None => false,
    };
    match header {
        Some(version) => !is_legacy_version(version.as_bytes()) || says_meta,
        None => says_meta,
    }
}

/// The status and refusal of a request that fails them, in the order the
/// revision checks them.
pub fn check(request: &Request, message: &Json) -> Result<(), (u16, Refused)> {
    let bad = |refused: Refused| (400, refused);
    check_meta(message).map_err(bad)?;
    let Some(Json::Str(version)) =
        message.get("params").and_then(|p| p.get("_meta")).and_then(|m| m.get(META_PROTOCOL_VERSION))
    else {
        unreachable!("check_meta found it")
    };
    if request.header_text("mcp-protocol-version").map(str::as_bytes) != Some(version.as_slice()) {
        return Err(bad(mismatch("MCP-Protocol-Version must be the version in params._meta")));
    }
    if !crate::protocol::is_modern_version(version) {
        return Err(bad(unsupported(version)));
    }
    let method = match message.get("method") {
        Some(Json::Str(m)) => String::from_utf8_lossy(m).into_owned(),
        _ => String::new(),
    };
    if request.header_text("mcp-method") != Some(method.as_str()) {
        return Err(bad(mismatch("Mcp-Method must be the request's method")));
    }
    if !METHODS.contains(&method.as_str()) {
        let refused = (METHOD_NOT_FOUND, format!("Method not found: {method}")).into();
        return Err((404, refused));
    }
    let named = match method.as_str() {
        "tools/call" | "prompts/get" => "name",
        "resources/read" => "uri",
        "tasks/get" | "tasks/update" | "tasks/cancel" => "taskId",
        _ => return Ok(()),
    };
    let wanted = match message.get("params").and_then(|p| p.get(named)) {
        Some(Json::Str(name)) => name.clone(),
        _ => Vec::new(),
    };
    match request.header("mcp-name").map(header_value) {
        Some(Some(sent)) if sent == wanted => Ok(()),
        Some(_) => Err(bad(mismatch(&format!("Mcp-Name must be params.{named}")))),
        None => Err(bad(mismatch(&format!("Mcp-Name is required: params.{named}")))),
    }
}

/// What an error answered over HTTP is sent with: the revision's status
/// for its code.
pub fn status_of(reply: &Json) -> u16 {
    match reply.get("error").and_then(|e| e.get("code")) {
        // -32020 header mismatch, -32021 missing capability, -32022 unsupported version
        Some(Json::Int(-32022..=-32020)) => 400,
        Some(Json::Int(code)) if *code == METHOD_NOT_FOUND => 404,
        _ => 200,
    }
}

fn mismatch(why: &str) -> Refused {
    (HEADER_MISMATCH, format!("Header mismatch: {why}")).into()
}
