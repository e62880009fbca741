//! JSON-RPC messages as MCP uses them: the revisions this client speaks
//! (and the 2026-07-28 one, whose `_meta` envelope carries the version a
//! handshake used to), the messages it makes, the server requests it
//! answers itself, ids as keys, and the reading of replies.
//!
//! Nothing here knows about Lua or about pipes and sockets: messages are
//! [`Json`] values in, [`Json`] values out, so the same rules serve the
//! fixture transport, stdio and HTTP.

use std::collections::HashMap;

use crate::codec::{self, Json, Members, Request, Select};
use crate::error::{Error, Result};
use crate::server_text;

/// Versions this client can speak, newest first. The handshake offers the
/// client's `protocol_version`; a server may answer with any of these.
pub const SUPPORTED_VERSIONS: [&str; 4] = ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];

/// Revisions without a handshake (2026-07-28 and later), newest first:
/// each request carries its version and the client's capabilities in
/// `_meta`, and `server/discover` says what a server speaks.
pub const MODERN_VERSIONS: [&str; 1] = ["2026-07-28"];

/// The `_meta` keys of a modern request's envelope, and of what a modern
/// server puts in its results.
pub const META_PROTOCOL_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
pub const META_CLIENT_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
pub const META_CLIENT_INFO: &str = "io.modelcontextprotocol/clientInfo";
pub const META_LOG_LEVEL: &str = "io.modelcontextprotocol/logLevel";
pub const META_SERVER_INFO: &str = "io.modelcontextprotocol/serverInfo";

/// The Tasks extension (SEP-2663): a modern tool call that declares it
/// may be answered with a task to poll rather than its result.
pub const TASKS_EXTENSION: &str = "io.modelcontextprotocol/tasks";
/// Skills (SEP-2640): `skills/list`, `skills/get`, `skill://` resources.
pub const SKILLS_EXTENSION: &str = "io.modelcontextprotocol/skills";

/// What every modern request says of its client, in `params._meta`.
#[derive(Clone, Debug)]
pub struct Envelope {
    pub version: String,
    pub capabilities: Json,
    pub client_info: Json,
    /// `client:set_log_level`: a modern server sends log messages only
    /// for requests that ask for them.
    pub log_level: Option<Json>,
}

impl Envelope {
    /// This envelope declaring `extension` as well, for one request (a
    /// tool call that may become a task, and the polls of that task).
    pub fn declaring(&self, extension: &str) -> Envelope {
        let mut envelope = self.clone();
        declare_extension(&mut envelope.capabilities, extension);
        envelope
    }

    /// Puts the envelope in `message`'s `params._meta`, replacing an
    /// earlier envelope and keeping the caller's own `_meta` keys.
    pub fn stamp(&self, message: &mut Json) {
        message.materialize();
        let params = match message {
            Json::Request(request) => &mut request.params,
            Json::Object(pairs) => match pairs.iter().rposition(|(k, _)| k == b"params") {
                Some(at) => &mut pairs[at].1,
                None => {
                    pairs.push((b"params".to_vec(), Json::Object(vec![])));
                    &mut pairs.last_mut().expect("just pushed").1
                }
            },
            _ => return,
        };
        if matches!(params, Json::Null) {
            *params = Json::Object(vec![]);
        }
        params.materialize();
        let Json::Object(pairs) = params else { return };
        let meta = match pairs.iter().rposition(|(k, _)| k == b"_meta") {
            Some(at) => &mut pairs[at].1,
            None => {
                pairs.push((b"_meta".to_vec(), Json::Object(vec![])));
                &mut pairs.last_mut().expect("just pushed").1
            }
        };
        meta.materialize();
        if !matches!(meta, Json::Object(_)) {
            *meta = Json::Object(vec![]);
        }
        let Json::Object(meta) = meta else { return };
        let ours = [META_PROTOCOL_VERSION, META_CLIENT_CAPABILITIES, META_CLIENT_INFO, META_LOG_LEVEL];
        meta.retain(|(k, _)| !ours.iter().any(|o| o.as_bytes() == k.as_slice()));
        meta.push((META_PROTOCOL_VERSION.into(), Json::str(&self.version)));
        meta.push((META_CLIENT_CAPABILITIES.into(), self.capabilities.clone()));
        meta.push((META_CLIENT_INFO.into(), self.client_info.clone()));
        if let Some(level) = &self.log_level {
            meta.push((META_LOG_LEVEL.into(), level.clone()));
        }
    }
}

/// The protocol version a message's envelope names, if it has one: what
/// a modern HTTP request's `MCP-Protocol-Version` header must repeat.
pub fn envelope_version(message: &Json) -> Option<&[u8]> {
    match message.get("params")?.get("_meta")?.get(META_PROTOCOL_VERSION)? {
        Json::Str(version) => Some(version),
        _ => None,
    }
}

/// Whether `version` is one this client speaks in the modern way.
pub fn is_modern_version(version: &[u8]) -> bool {
    MODERN_VERSIONS.iter().any(|v| v.as_bytes() == version)
}

/// Whether `version` is one this client speaks through `initialize`.
pub fn is_legacy_version(version: &[u8]) -> bool {
    SUPPORTED_VERSIONS.iter().any(|v| v.as_bytes() == version)
}

/// A request, with its keys in the order the reference codec sorts them.
pub fn request(id: Json, method: &str, params: Json) -> Json {
    Json::Request(Box::new(Request { id, method: Request::method_json(method), params }))
}

pub fn notification(method: &str, params: Option<Json>) -> Json {
    let mut pairs = vec![("jsonrpc", Json::str("2.0")), ("method", Json::str(method))];
    if let Some(params) = params {
        pairs.push(("params", params));
    }
    Json::object(pairs)
}

/// Puts `entries` in `params._meta`, each replacing one of the same
/// name, keeping what else `_meta` holds.
pub fn add_meta(params: &mut Json, entries: Members) {
    if matches!(params, Json::Null) {
        *params = Json::Object(vec![]);
    }
    params.materialize();
    let Json::Object(pairs) = params else { return };
    let at = match pairs.iter().position(|(k, _)| k == b"_meta") {
        Some(at) => at,
        None => {
            pairs.push((b"_meta".to_vec(), Json::Object(vec![])));
            pairs.len() - 1
        }
    };
    pairs[at].1.materialize();
    if let Json::Object(meta) = &mut pairs[at].1 {
        for (key, value) in entries {
            meta.retain(|(k, _)| *k != key);
            meta.push((key, value));
        }
    }
}

/// Adds `extension` (with no settings) to `capabilities.extensions`,
/// unless the caller declared it already.
pub fn declare_extension(capabilities: &mut Json, extension: &str) {
    capabilities.materialize();
    if !matches!(capabilities, Json::Object(_)) {
        *capabilities = Json::Object(vec![]);
    }
    let Json::Object(pairs) = capabilities else { return };
    let at = match pairs.iter().position(|(k, _)| k == b"extensions") {
        Some(at) => at,
        None => {
            pairs.push((b"extensions".to_vec(), Json::Object(vec![])));
            pairs.len() - 1
        }
    };
    let extensions = &mut pairs[at].1;
    extensions.materialize();
    if let Json::Object(entries) = extensions {
        if !entries.iter().any(|(k, _)| k == extension.as_bytes()) {
            entries.push((extension.as_bytes().to_vec(), Json::Object(vec![])));
        }
    }
}

/// Puts `token` in `params._meta.progressToken`, keeping what else
/// `_meta` holds.
pub fn set_progress_token(params: &mut Json, token: Json) {
    add_meta(params, vec![(b"progressToken".to_vec(), token)]);
}

/// The notification that ends the handshake.
pub fn initialized() -> Json {
    notification("notifications/initialized", None)
}

/// `initialize` params; `version` and `client_info` come from Lua as
/// already-converted values, since a caller may have replaced either.
pub fn initialize_params(version: Json, capabilities: Json, client_info: Json) -> Json {
    Json::object([("capabilities", capabilities), ("clientInfo", client_info), ("protocolVersion", version)])
}

/// The spec's cancellation notice, sent when a request outlives its time.
pub fn cancelled(id: &Json, reason: &str) -> Json {
    notification(
        "notifications/cancelled",
        Some(Json::object([("reason", Json::str(reason)), ("requestId", id.clone())])),
    )
}

/// What Lua's `on_notification` receives when notifications were dropped
/// because Lua did not take them before the buffer filled (see
/// `transport::inbox`). Not an MCP method: the name says whose it is.
pub const DROPPED_METHOD: &str = "lua-mcp/notifications_dropped";

pub fn dropped_notice(count: u64) -> Json {
    let count = i64::try_from(count).unwrap_or(i64::MAX);
    notification(DROPPED_METHOD, Some(Json::object([("count", Json::Int(count))])))
}

/// A successful response to a server's request.
pub fn response(id: Json, result: Json) -> Json {
    Json::object([("id", id), ("jsonrpc", Json::str("2.0")), ("result", result)])
}

/// A failed response to a server's request.
pub fn error_response(id: Json, code: i64, message: &str) -> Json {
    Json::object([
        ("error", Json::object([("code", Json::Int(code)), ("message", Json::str(message))])),
        ("id", id),
        ("jsonrpc", Json::str("2.0")),
    ])
}

/// The capability a client declares for each server request it can
/// answer; methods outside the spec's list need none.
pub fn capability_for(method: &str) -> Option<&'static str> {
    match method {
        "elicitation/create" => Some("elicitation"),
        "sampling/createMessage" => Some("sampling"),
        "roots/list" => Some("roots"),
        _ => None,
    }
}

/// The reply a client owes a server's request: an empty result for `ping`,
/// "method not found" for anything else this client does not offer.
pub fn answer_server_request(request: &Json) -> Option<Json> {
    let id = request.get("id")?.clone();
    let method = request.get("method")?;
    if method == &Json::str("ping") {
        return Some(response(id, Json::Object(vec![])));
    }
    let message = format!("Method not found: {}", lua_text(Some(method)));
    Some(error_response(id, -32601, &message))
}

/// The answer to a server request too deep to read (see
/// `codec::peek_envelope`): JSON-RPC's "invalid request".
pub fn too_deep_request_answer(id: Json) -> Json {
    let why =
        format!("Invalid Request: nested deeper than {} levels, which this client does not read", codec::MAX_DEPTH);
    error_response(id, -32600, &why)
}

/// Whether a server request goes to a Lua handler rather than being
/// answered by the transport thread.
pub fn is_forwarded(request: &Json, forward: &[String]) -> bool {
    match request.get("method") {
        Some(Json::Str(m)) => forward.iter().any(|f| f.as_bytes() == m.as_slice()),
        _ => false,
    }
}

/// What an incoming message is, by JSON-RPC's shape rules.
#[derive(Debug, PartialEq)]
pub enum Kind {
    /// Has an id and a method: the server asks us something.
    ServerRequest,
    /// Has an id and no method: an answer to one of ours.
    Response(IdKey),
    /// A method and no id.
    Notification,
    /// Anything else (a batch array, an object with neither).
    Other,
}

pub fn classify(msg: &Json) -> Kind {
    match id_and_method(msg) {
        (Some(_), Some(m)) if m.is_truthy() => Kind::ServerRequest,
        (Some(id), _) => id_key(id).map_or(Kind::Other, Kind::Response),
        (None, Some(m)) if m.is_truthy() => Kind::Notification,
        _ => Kind::Other,
    }
}

/// `msg.get("id")` and `msg.get("method")` in one pass over an object's
/// members, or straight from a reply (each message is classified up to
/// three times on its way in, and the two lookups were most of it): the
/// last of each key wins, and a null is none, as [`Json::get`] reads them.
fn id_and_method(msg: &Json) -> (Option<&Json>, Option<&Json>) {
    let pairs = match msg {
        Json::Object(pairs) => pairs,
        // A reply as the decoder keeps it: `jsonrpc`, `id` and `result`.
        Json::Response(response) => return (present(Some(&response.id)), None),
        _ => return (msg.get("id"), msg.get("method")),
    };
    let (mut id, mut method) = (None, None);
    for (key, value) in pairs.iter().rev() {
        match key.as_slice() {
            b"id" if id.is_none() => id = Some(value),
            b"method" if method.is_none() => method = Some(value),
            _ => continue,
        }
        if id.is_some() && method.is_some() {
            break;
        }
    }
    (present(id), present(method))
}

/// A member as [`Json::get`] gives it: a null is no member.
fn present(value: Option<&Json>) -> Option<&Json> {
    value.filter(|v| !matches!(v, Json::Null))
}

/// An id as a Lua table key: 1 and 1.0 are the same key, "1" is another.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum IdKey {
    Int(i64),
    Float(u64),
    Str(Vec<u8>),
    Bool(bool),
}

/// The server capability a request needs (a dotted path in the
/// `initialize` result's `capabilities`), for the methods this client
/// checks before sending; None for the rest.
pub fn capability_needed(method: &str) -> Option<&'static str> {
    Some(match method {
        "resources/subscribe" | "resources/unsubscribe" => "resources.subscribe",
        m if m.starts_with("resources/") => "resources",
        m if m.starts_with("prompts/") => "prompts",
        "completion/complete" => "completions",
        "logging/setLevel" => "logging",
        _ => return None,
    })
}

/// Hashes the ids of our own requests. They are ours (counted up from 1
/// by default), so no server chooses what is inserted, and a multiply-
/// rotate hash is plenty; the default SipHash showed up in per-call
/// profiles. (Replies keyed by the server's ids, as in [`Replies`], keep
/// the default.)
#[derive(Default)]
pub struct IdHasher(u64);

impl std::hash::Hasher for IdHasher {
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.write_u64(u64::from_le_bytes(word));
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(5) ^ n).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }

    fn write_usize(&mut self, n: usize) {
        self.write_u64(n as u64);
    }

    fn write_i64(&mut self, n: i64) {
        self.write_u64(n as u64);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

/// A map keyed by the ids of our own requests.
pub type IdMap<V> = HashMap<IdKey, V, std::hash::BuildHasherDefault<IdHasher>>;

pub fn id_key(id: &Json) -> Option<IdKey> {
    match id {
        Json::Int(i) => Some(IdKey::Int(*i)),
        Json::Float(f) if f.fract() == 0.0 && f.abs() < 9.2e18 => Some(IdKey::Int(*f as i64)),
        Json::Float(f) => Some(IdKey::Float(f.to_bits())),
        Json::Str(s) => Some(IdKey::Str(s.clone())),
        Json::Bool(b) => Some(IdKey::Bool(*b)),
        // A table key in Lua that nothing can look up again.
        Json::Null | Json::Array(_) | Json::Object(_) | Json::Raw(_) | Json::Request(_) | Json::Response(_) => None,
    }
}

/// Replies gathered from one or more raw transport outputs, as the
/// reference's `decode_stream` gathers them: newline-delimited JSON or SSE
/// `data:` lines, anything that is not a JSON object skipped, replies
/// keyed by id (a later duplicate wins), notifications kept in order.
#[derive(Default)]
pub struct Replies {
    by_id: HashMap<IdKey, Json>,
    /// Ids of replies too deep to decode: their requests fail saying so.
    too_deep: Vec<IdKey>,
    pub notifications: Vec<Json>,
}

impl Replies {
    pub fn absorb(&mut self, raw: &[u8]) {
        for line in raw.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
            let payload = match line.strip_prefix(b"data:") {
                Some(rest) => trim_lua_space_start(rest),
                None => line,
            };
            if !payload.iter().any(|b| !is_lua_space(*b)) {
                continue;
            }
            let msg = match codec::decode_message(payload) {
                Ok(msg) => msg,
                Err(e) if e.is_too_deep() => {
                    let envelope = codec::peek_envelope(payload);
                    if !envelope.has_method {
                        self.too_deep.extend(envelope.id.as_ref().and_then(id_key));
                    }
                    continue;
                }
                Err(_) => continue,
            };
            if !matches!(msg, Json::Object(_)) {
                continue;
            }
            match msg.get("id") {
                Some(id) => {
                    if let Some(key) = id_key(id) {
                        self.by_id.insert(key, msg);
                    }
                }
                None if msg.get("method").is_some_and(Json::is_truthy) => self.notifications.push(msg),
                None => {}
            }
        }
    }

    /// Every reply gathered, in no particular order (the reference's
    /// `by_id` table has none either).
    pub fn into_replies(self) -> Vec<Json> {
        self.by_id.into_values().collect()
    }

    pub fn take(&mut self, id: &Json) -> Option<Json> {
        id_key(id).and_then(|key| self.by_id.remove(&key))
    }

    /// The result of the reply to `id`, or the error the reference raises;
    /// a reply skipped as too deep says so instead of "no response".
    pub fn result(&mut self, id: &Json, what: &str) -> Result<Json> {
        let reply = self.take(id);
        if reply.is_none() && id_key(id).is_some_and(|key| self.too_deep.contains(&key)) {
            return Err(Error::ReplyTooDeep { what: what.to_string(), limit: codec::MAX_DEPTH });
        }
        result_of(reply, what)
    }
}

/// Lua's `%s` class: space, \t, \n, \v, \f, \r.
pub fn is_lua_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

fn trim_lua_space_start(s: &[u8]) -> &[u8] {
    let start = s.iter().position(|b| !is_lua_space(*b)).unwrap_or(s.len());
    &s[start..]
}

pub use crate::codec::lua_text;

/// The `result` of a reply to `what`, or the error the reference raises.
pub fn result_of(reply: Option<Json>, what: &str) -> Result<Json> {
    let mut reply = reply.ok_or_else(|| Error::NoResponse { what: what.to_string() })?;
    if let Some(err) = reply.get("error").filter(|e| e.is_truthy()) {
        return Err(rpc_error(err, what));
    }
    match reply.take("result") {
        Some(result) if result.is_truthy() => Ok(result),
        _ => Err(Error::NoResult { what: what.to_string() }),
    }
}

const RESULT_TYPE: Select = Select::Keys(&[("resultType", Select::Whole)]);

/// What a modern result is: complete (`resultType` absent counts as
/// that), or a request for input (see `client::request`). Anything else
/// is refused, as the 2026-07-28 revision asks. Only a modern session
/// reads it: an older server never sends it, and the scan of a large
/// result is not paid for nothing.
pub fn result_kind(result: &Json, what: &str) -> Result<ResultKind> {
    match result.selected(RESULT_TYPE).get("resultType") {
        None => Ok(ResultKind::Complete),
        Some(Json::Str(t)) if t == b"complete" => Ok(ResultKind::Complete),
        Some(Json::Str(t)) if t == b"input_required" => Ok(ResultKind::InputRequired),
        Some(Json::Str(t)) if t == b"task" => Ok(ResultKind::Task),
        Some(other) => Err(Error::UnknownResultType {
            what: what.to_string(),
            result_type: server_text::quoted_str(&lua_text(Some(other)), server_text::ITEM_CHARS),
        }),
    }
}

#[derive(Debug, PartialEq)]
pub enum ResultKind {
    Complete,
    InputRequired,
    /// The server made the request a task (the Tasks extension): the
    /// result is the task, to poll.
    Task,
}

/// A JSON-RPC error object as the error Lua sees: the reference's words,
/// then what its `data` says that the caller can act on. The server's
/// message and code are as they came, as the reference raises them (the
/// fixture seam's callers compare them byte for byte); a live client
/// bounds them (`server_text::bounded`).
pub fn rpc_error(err: &Json, what: &str) -> Error {
    let data = err.get("data");
    let versions = |key: &str| Some(server_text::listed(data?.get(key)?.elements().map(|v| lua_text(Some(v)))));
    let said = match (versions("supported"), data.and_then(|d| d.get("requiredCapabilities"))) {
        (Some(supported), _) => format!("; the server supports protocol versions {supported}"),
        (None, Some(required)) => format!(
            "; the server requires the client capabilities {}",
            server_text::quoted_str(&lua_text(Some(required)), server_text::TEXT_CHARS)
        ),
        _ => String::new(),
    };
    Error::Rpc {
        what: what.to_string(),
        message: lua_text(err.get("message")),
        code: lua_text(err.get("code")),
        said,
        data: data.map(|d| Box::new(d.clone())),
    }
}

/// What [`call_outcome`] reads of a result: a structuredContent or a
/// block's other fields (image data) are stepped over, not decoded.
const CALL_OUTCOME_FIELDS: Select = Select::Keys(&[
    ("content", Select::Each(&Select::Keys(&[("type", Select::Whole), ("text", Select::Whole)]))),
    ("isError", Select::Whole),
]);

/// The text of a `tools/call` result and its `isError` flag, as the
/// reference builds them: text blocks joined by "\n", every other block
/// named `[TYPE content]`, `(no content)` when nothing is left.
pub fn call_outcome(result: Json) -> (Vec<u8>, bool) {
    let mut result = result.into_selected(CALL_OUTCOME_FIELDS);
    let is_error = result.get("isError") == Some(&Json::Bool(true));
    let blocks = match result.take("content") {
        Some(Json::Array(blocks)) => blocks,
        _ => Vec::new(),
    };
    let mut parts: Vec<Vec<u8>> = Vec::new();
    for mut block in blocks.into_iter().filter(|b| !matches!(b, Json::Null)) {
        let kind = block.get("type");
        let is_text = matches!(kind, Some(Json::Str(k)) if k == b"text");
        match (kind, block.get("text")) {
            (_, Some(text)) if is_text && text.is_truthy() => {
                // Moved, not copied: a tool result can be tens of megabytes.
                parts.push(match block.take("text") {
                    Some(Json::Str(s)) => s,
                    other => lua_text(other.as_ref()).into_bytes(),
                });
            }
            (Some(kind), _) if kind.is_truthy() => {
                parts.push(format!("[{} content]", lua_text(Some(kind))).into_bytes());
            }
            _ => {}
        }
    }
    let mut text = if parts.len() == 1 { parts.pop().unwrap_or_default() } else { parts.join(&b'\n') };
    if text.is_empty() {
        text = b"(no content)".to_vec();
    }
    (text, is_error)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::decode;

    #[test]
    fn replies_are_matched_by_id_whatever_their_order() {
        let mut r = Replies::default();
        r.absorb(b"banner line\n{\"id\":3,\"result\":{}}\r\nevent: message\ndata: {\"id\":2.0,\"result\":{\"x\":1}}\n{\"method\":\"notifications/x\"}\n");
        assert!(r.take(&Json::Int(2)).is_some());
        assert!(r.take(&Json::Int(3)).is_some());
        assert!(r.take(&Json::Int(4)).is_none());
        assert_eq!(r.notifications.len(), 1);
    }

    #[test]
    fn string_ids_are_not_numeric_ids() {
        let mut r = Replies::default();
        r.absorb(b"{\"id\":\"1\",\"result\":{}}\n");
        assert!(r.take(&Json::Int(1)).is_none());
    }

    #[test]
    fn errors_use_the_reference_wording() {
        let reply = decode(br#"{"id":1,"error":{"code":-32602,"message":"bad"}}"#).unwrap();
        let err = result_of(Some(reply), "tools/call echo").unwrap_err();
        assert_eq!(err.to_string(), "MCP tools/call echo failed: bad (code -32602)");
        assert_eq!(result_of(None, "x").unwrap_err().to_string(), "MCP: no response to x");
    }

    #[test]
    fn content_blocks_flatten_like_the_reference() {
        let res = decode(br#"{"content":[{"type":"text","text":"a"},{"type":"image","data":"x"},null,{"type":"text","text":"b"}],"isError":true}"#).unwrap();
        assert_eq!(call_outcome(res), (b"a\n[image content]\nb".to_vec(), true));
        assert_eq!(call_outcome(decode(b"{}").unwrap()), (b"(no content)".to_vec(), false));
    }

    #[test]
    fn a_message_is_classified_by_its_last_id_and_method_a_null_being_none() {
        let kind = |text: &str| classify(&decode(text.as_bytes()).unwrap());
        assert_eq!(kind(r#"{"jsonrpc":"2.0","id":7,"result":{}}"#), Kind::Response(IdKey::Int(7)));
        assert_eq!(kind(r#"{"id":1,"id":2,"result":{}}"#), Kind::Response(IdKey::Int(2)));
        assert_eq!(kind(r#"{"id":1,"method":"ping","id":null}"#), Kind::Notification);
        assert_eq!(kind(r#"{"method":null,"id":3,"method":"ping"}"#), Kind::ServerRequest);
        assert_eq!(kind(r#"{"id":3,"method":"ping","method":null}"#), Kind::Response(IdKey::Int(3)));
        assert_eq!(kind(r#"{"id":null,"result":{}}"#), Kind::Other);
        // A reply as the decoder keeps it for a session (its result as text).
        let reply = codec::decode_reply(br#"{"jsonrpc":"2.0","id":"r1","result":{"content":[]}}"#).unwrap();
        assert_eq!(classify(&reply), Kind::Response(IdKey::Str(b"r1".to_vec())));
    }

    #[test]
    fn server_requests_are_told_apart_from_responses() {
        let ping = decode(br#"{"id":1,"method":"ping"}"#).unwrap();
        assert_eq!(classify(&ping), Kind::ServerRequest);
        let answer = answer_server_request(&ping).unwrap();
        assert_eq!(codec::encode(&answer), br#"{"id":1,"jsonrpc":"2.0","result":{}}"#.to_vec());
        let other = decode(br#"{"id":"a","method":"roots/list"}"#).unwrap();
        let answer = codec::encode(&answer_server_request(&other).unwrap());
        assert!(String::from_utf8(answer).unwrap().contains("-32601"));
    }
}
