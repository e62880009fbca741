//! Which revision of the protocol a server speaks, decided per server.
//!
//! Servers of the 2026-07-28 revision ("modern") have no handshake: every
//! request carries its version in `_meta`, and `server/discover` says what
//! they speak. Older ones ("legacy") need `initialize` first. A client
//! that must reach both asks `server/discover` first (the probe) and reads
//! the answer the way the revision's backward-compatibility rules say: a
//! discover result naming a version both speak, or a modern error naming
//! one, means modern; anything else means legacy.
//!
//! What legacy servers were seen to do with the probe: answer -32601 or
//! -32602 (most SDKs), 400 with -32000 over HTTP (the TypeScript SDK 1.x,
//! which refuses the `MCP-Protocol-Version: 2026-07-28` header before it
//! reads the body), 200 with an empty result (hand-written servers that
//! answer every method), say nothing at all, or exit. Silence costs a
//! stdio client [`PROBE_PATIENCE`] once; the verdict is then remembered
//! (`remembered`), so the next process goes straight to `initialize`.

use crate::codec::Json;
use crate::error::Error;
use crate::protocol::{self, is_legacy_version, is_modern_version, lua_text, MODERN_VERSIONS, SUPPORTED_VERSIONS};

pub mod remembered;

/// `opts.era`: how a client chooses.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum EraChoice {
    /// Probe, unless the server is remembered as legacy.
    Auto,
    /// `initialize`, never a probe: the client of earlier releases.
    Legacy,
    /// The probe, and an error if the server is not modern.
    Modern,
}

/// What a server was found to speak.
#[derive(Clone, Debug, PartialEq)]
pub enum Verdict {
    Legacy,
    Modern(String),
}

/// How long a stdio server that has not been seen before may stay silent
/// on the probe before it is taken for a legacy server that ignores
/// unknown requests. A modern server that starts slower than this is
/// found out when it refuses `initialize` (see `client`), at the cost of
/// a second probe.
pub const PROBE_PATIENCE: std::time::Duration = std::time::Duration::from_secs(1);

/// What the probe's answer says.
#[derive(Debug)]
pub enum Answer {
    /// A modern server, at this version; `result` is what discover said.
    Modern { version: String, result: Json },
    /// A modern server that refused the version offered and named one
    /// both speak: worth one more probe at it (`refusal` is the error
    /// should that be refused too).
    TryVersion { version: String, refusal: Error },
    /// A legacy server; `restart` when the probe cost its process (it
    /// exited, or closed its pipes); `why` says what it did.
    Legacy { restart: bool, why: String },
    /// The server refused the probe for want of credentials: no verdict
    /// until a login gave some.
    Refused(Error),
    /// No verdict, and no way on: the error says why.
    Failed(Error),
}

/// Reads the probe's outcome: the whole reply, or why none came.
/// `always_answers` is true over HTTP, where silence is a timeout and a
/// dead connection an error, never a sign of an older server.
pub fn read_answer(outcome: Result<Json, Error>, always_answers: bool) -> Answer {
    let reply = match outcome {
        Ok(reply) => reply,
        Err(e @ Error::Unauthorized { .. }) => return Answer::Refused(e),
        Err(e @ Error::Interrupted { .. }) => return Answer::Failed(e),
        Err(e) if always_answers => return http_failure(e),
        Err(Error::Timeout { seconds, .. }) => {
            return Answer::Legacy { restart: false, why: format!("it did not answer within {seconds} s") }
        }
        Err(e @ (Error::Transport { .. } | Error::NoResponse { .. })) => {
            return Answer::Legacy { restart: true, why: format!("it stopped ({e})") }
        }
        Err(e) => return Answer::Legacy { restart: false, why: e.to_string() },
    };
    if let Some(error) = reply.get("error").filter(|e| e.is_truthy()) {
        return read_error(error);
    }
    let not_discover = || Answer::Legacy { restart: false, why: "its result is not a discover result".into() };
    let Some(result) = reply.get("result") else { return not_discover() };
    let Some(versions) = result.get("supportedVersions").filter(|v| matches!(v, Json::Array(_))) else {
        // `{}` from a server that answers every method: not a discover
        // result, so not a modern server.
        return not_discover();
    };
    match mutual(versions) {
        Mutual::Modern(version) => Answer::Modern { version, result: result.clone() },
        Mutual::Legacy => Answer::Legacy { restart: false, why: legacy_list(versions) },
        Mutual::None => Answer::Failed(no_mutual_version(versions)),
    }
}

/// An error reply to the probe. -32022 (unsupported version) names what
/// the server speaks. Any other code means an older server, -32020 and
/// -32021 included: the revision reserves them, but an older server may
/// use any code in JSON-RPC's implementation-defined range, and the
/// revision says the fallback must not hang on one code.
fn read_error(error: &Json) -> Answer {
    let refusal = crate::server_text::bounded(protocol::rpc_error(error, "server/discover"));
    let legacy = |why: String| Answer::Legacy { restart: false, why };
    let code = error.get("code").map(|c| lua_text(Some(c)));
    match code.as_deref() {
        Some("-32022") => {
            let Some(versions) = error.get("data").and_then(|d| d.get("supported")) else {
                return legacy(format!("it answered {refusal}"));
            };
            match mutual(versions) {
                Mutual::Modern(version) => Answer::TryVersion { version, refusal },
                Mutual::Legacy => legacy(legacy_list(versions)),
                Mutual::None => Answer::Failed(no_mutual_version(versions)),
            }
        }
        _ => legacy(format!("it answered {refusal}")),
    }
}

fn legacy_list(versions: &Json) -> String {
    let theirs: Vec<String> = versions.elements().map(|v| lua_text(Some(v))).collect();
    format!("it speaks only {}", theirs.join(", "))
}

/// A failure of the probe's POST. A 4xx other than a login's (those come
/// as [`Error::Unauthorized`]) without a JSON-RPC error in its body is an
/// older server's refusal of a method or header it does not know; a 5xx,
/// a timeout or a dead connection says nothing of the era.
fn http_failure(error: Error) -> Answer {
    match &error {
        Error::Transport { code, .. } if code.len() == 3 && code.starts_with('4') => {
            Answer::Legacy { restart: false, why: error.to_string() }
        }
        Error::NotJson { .. } | Error::NotRecorded { .. } => Answer::Legacy { restart: false, why: error.to_string() },
        _ => Answer::Failed(error),
    }
}

enum Mutual {
    Modern(String),
    Legacy,
    None,
}

/// The newest modern version in `versions` this client speaks too, or
/// whether they share a legacy one.
fn mutual(versions: &Json) -> Mutual {
    let theirs: Vec<&[u8]> = versions
        .elements()
        .filter_map(|v| match v {
            Json::Str(s) => Some(s.as_slice()),
            _ => None,
        })
        .collect();
    if let Some(version) = MODERN_VERSIONS.iter().find(|v| theirs.contains(&v.as_bytes())) {
        return Mutual::Modern(version.to_string());
    }
    if theirs.iter().any(|v| is_legacy_version(v)) {
        return Mutual::Legacy;
    }
    debug_assert!(!theirs.iter().any(|v| is_modern_version(v)));
    Mutual::None
}

fn no_mutual_version(versions: &Json) -> Error {
    let theirs = crate::server_text::listed(versions.elements().map(|v| lua_text(Some(v))));
    let ours: Vec<&str> = MODERN_VERSIONS.iter().chain(SUPPORTED_VERSIONS.iter()).copied().collect();
    Error::NoMutualVersion { theirs, ours: ours.join(", ") }
}

/// A discover result as the `initialize` result it stands in for, so that
/// the client's fields (`server_info`, `negotiated_version`,
/// `server_capabilities`, `instructions`) and its capability checks read
/// it the same way. The server's name sits in the result's `_meta`; some
/// servers put it in the body, as `initialize` did.
pub fn as_initialize_result(discovered: &Json, version: &str) -> Json {
    let server_info = discovered
        .get("_meta")
        .and_then(|m| m.get(protocol::META_SERVER_INFO))
        .or_else(|| discovered.get("serverInfo"))
        .cloned();
    let mut pairs = vec![("capabilities", discovered.get("capabilities").cloned().unwrap_or(Json::Object(vec![])))];
    if let Some(instructions) = discovered.get("instructions") {
        pairs.push(("instructions", instructions.clone()));
    }
    pairs.push(("protocolVersion", Json::str(version)));
    if let Some(info) = server_info {
        pairs.push(("serverInfo", info));
    }
    Json::object(pairs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::decode;

    fn answer(text: &str) -> Answer {
        read_answer(Ok(decode(text.as_bytes()).unwrap()), false)
    }

    #[test]
    fn a_discover_result_naming_a_mutual_version_is_modern() {
        let a = answer(r#"{"id":"p","result":{"supportedVersions":["2027-01-01","2026-07-28"],"capabilities":{}}}"#);
        assert!(matches!(a, Answer::Modern { version, .. } if version == "2026-07-28"));
    }

    #[test]
    fn an_empty_result_from_a_server_that_answers_everything_is_legacy() {
        assert!(matches!(answer(r#"{"id":"p","result":{}}"#), Answer::Legacy { restart: false, .. }));
    }

    #[test]
    fn method_not_found_is_legacy_and_unsupported_version_names_the_way_on() {
        assert!(matches!(answer(r#"{"id":"p","error":{"code":-32601,"message":"x"}}"#), Answer::Legacy { .. }));
        let retry = answer(r#"{"id":"p","error":{"code":-32022,"message":"x","data":{"supported":["2026-07-28"]}}}"#);
        assert!(matches!(retry, Answer::TryVersion { version, .. } if version == "2026-07-28"));
        let legacy = answer(r#"{"id":"p","error":{"code":-32022,"message":"x","data":{"supported":["2025-11-25"]}}}"#);
        assert!(matches!(legacy, Answer::Legacy { .. }));
    }

    #[test]
    fn a_disjoint_version_list_is_a_clear_error() {
        let a = answer(r#"{"id":"p","error":{"code":-32022,"message":"x","data":{"supported":["2030-01-01"]}}}"#);
        let Answer::Failed(e) = a else { panic!("not a failure") };
        assert_eq!(
            e.to_string(),
            "MCP: the server speaks protocol versions 2030-01-01; this client speaks 2026-07-28, 2025-11-25, 2025-06-18, 2025-03-26, 2024-11-05"
        );
    }

    #[test]
    fn silence_and_exits_on_stdio_are_legacy_but_not_over_http() {
        let timeout = || Error::Timeout { what: "server/discover".into(), seconds: "1".into(), note: String::new() };
        assert!(matches!(read_answer(Err(timeout()), false), Answer::Legacy { restart: false, .. }));
        let gone = || Error::Transport { code: "1".into(), detail: "exited".into() };
        assert!(matches!(read_answer(Err(gone()), false), Answer::Legacy { restart: true, .. }));
        assert!(matches!(read_answer(Err(timeout()), true), Answer::Failed(_)));
        let refused = Error::Transport { code: "405".into(), detail: "HTTP 405".into() };
        assert!(matches!(read_answer(Err(refused), true), Answer::Legacy { .. }));
        let down = Error::Transport { code: "503".into(), detail: "HTTP 503".into() };
        assert!(matches!(read_answer(Err(down), true), Answer::Failed(_)));
    }
}
