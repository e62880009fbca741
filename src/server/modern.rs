//! The 2026-07-28 revision, served: no handshake and no session; every
//! request carries its version, the client's capabilities and its log
//! level in `_meta`, and is answered on its own. `server/discover` says
//! what this server speaks; results say `resultType` and, where they may
//! be kept, for how long; a handler that needs the client's input ends
//! its request with `input_required` and the keyed requests, and runs
//! again from the start when the client sends the request back with the
//! answers (and the signed state of the rounds before).
//!
//! What is the HTTP transport's (the `Mcp-*` headers that must match the
//! body, the statuses of the errors) is checked in `http`; what needs the
//! catalog (a tool's `Mcp-Param-*` headers) is checked here.

use base64::engine::general_purpose::STANDARD;
use base64::Engine;

use super::catalog::Kind;
use super::request_state::State;
use super::{Call, Facts, Handlers, PeerKey, Refused, Server, INVALID_PARAMS, LOG_LEVELS, METHOD_NOT_FOUND};
use crate::codec::Json;
use crate::protocol::TASKS_EXTENSION;
use crate::protocol::{
    META_CLIENT_CAPABILITIES, META_LOG_LEVEL, META_PROTOCOL_VERSION, META_SERVER_INFO, MODERN_VERSIONS,
};

pub const INPUT_REQUIRED: &str = "input_required";
/// A header that does not match the body.
pub const HEADER_MISMATCH: i64 = -32020;
/// A request that needs a capability the client did not declare.
pub const MISSING_CAPABILITY: i64 = -32021;
/// A protocol version this server does not speak.
pub const UNSUPPORTED_VERSION: i64 = -32022;

/// The methods served at 2026-07-28 (`initialize`, `ping`, `logging/*`
/// and subscriptions by method are gone).
pub const METHODS: [&str; 15] = [
    "server/discover",
    "tools/list",
    "tools/call",
    "resources/list",
    "resources/templates/list",
    "resources/read",
    "prompts/list",
    "prompts/get",
    "completion/complete",
    "skills/list",
    "skills/get",
    "tasks/get",
    "tasks/update",
    "tasks/cancel",
    "subscriptions/listen",
];

/// Results the client may keep, and for how long: nothing here is kept
/// (a Lua program may change its lists at any time), but the hints are
/// the revision's, so they are said.
const CACHE_TTL_MS: i64 = 0;

pub fn is_modern(message: &Json) -> bool {
    meta_of(message).is_some_and(|m| m.get(META_PROTOCOL_VERSION).is_some())
}

fn meta_of(message: &Json) -> Option<&Json> {
    message.get("params").and_then(|p| p.get("_meta"))
}

/// The client's capabilities and log level, from the request itself.
/// Without a log level it hears no log messages at all.
pub fn facts(message: &Json) -> Facts {
    let meta = meta_of(message);
    let capabilities = meta.and_then(|m| m.get(META_CLIENT_CAPABILITIES)).cloned().unwrap_or_default();
    let log_level = match meta.and_then(|m| m.get(META_LOG_LEVEL)) {
        Some(Json::Str(level)) => LOG_LEVELS.iter().position(|l| l.as_bytes() == level.as_slice()),
        _ => None,
    };
    let version = match meta.and_then(|m| m.get(META_PROTOCOL_VERSION)) {
        Some(Json::Str(v)) => Some(String::from_utf8_lossy(v).into_owned()),
        _ => None,
    };
    Facts { log_level: log_level.unwrap_or(LOG_LEVELS.len()), capabilities, version }
}

/// A `_meta` a 2026-07-28 request can be served with, or why not.
pub fn check_meta(message: &Json) -> Result<(), Refused> {
    let meta = meta_of(message);
    let version = meta.and_then(|m| m.get(META_PROTOCOL_VERSION));
    let capabilities = meta.and_then(|m| m.get(META_CLIENT_CAPABILITIES));
    let why = match (version, capabilities) {
        (Some(Json::Str(_)), Some(c)) if c.is_object() => return Ok(()),
        (Some(Json::Str(_)), _) => format!("params._meta must carry {META_CLIENT_CAPABILITIES} (an object)"),
        _ => format!("params._meta must carry {META_PROTOCOL_VERSION} (a string)"),
    };
    Err((INVALID_PARAMS, format!("Invalid params: {why}")).into())
}

/// The refusal of a version this server does not speak.
pub fn unsupported(requested: &[u8]) -> Refused {
    let supported = Json::Array(MODERN_VERSIONS.iter().map(|v| Json::str(*v)).collect());
    Refused {
        code: UNSUPPORTED_VERSION,
        message: format!("Unsupported protocol version: {}", String::from_utf8_lossy(requested)),
        data: Some(Json::object([("requested", Json::Str(requested.to_vec())), ("supported", supported)])),
    }
}

/// A header value as sent: `=?base64?...?=` is base64 (strict: the
/// alphabet, and padding to a multiple of four), anything else itself;
/// spaces around it are not part of it. None for base64 that is not.
pub fn header_value(raw: &[u8]) -> Option<Vec<u8>> {
    let text = raw.trim_ascii();
    match text.strip_prefix(b"=?base64?").and_then(|t| t.strip_suffix(b"?=")) {
        Some(encoded) => STANDARD.decode(encoded).ok(),
        None => Some(text.to_vec()),
    }
}

impl Server {
    /// A 2026-07-28 request (see the header). `headers`: over HTTP, the
    /// request's headers (names in lower case), for `Mcp-Param-*`.
    pub(super) fn handle_modern(
        &mut self,
        key: PeerKey,
        message: &Json,
        handlers: &mut dyn Handlers,
        headers: Option<&[(String, Vec<u8>)]>,
    ) -> Option<Json> {
        let id = message.get("id")?.clone();
        let reply = self.modern_reply(key, message, handlers, headers);
        let method = match message.get("method") {
            Some(Json::Str(m)) => m.clone(),
            _ => Vec::new(),
        };
        Some(match reply {
            Ok(Some(result)) => super::protocol::response(id, self.decorate(&method, result)),
            Ok(None) => return None,
            Err(refused) => refused.to_response(id),
        })
    }

    fn modern_reply(
        &mut self,
        key: PeerKey,
        message: &Json,
        handlers: &mut dyn Handlers,
        headers: Option<&[(String, Vec<u8>)]>,
    ) -> Result<Option<Json>, Refused> {
        check_meta(message)?;
        let version = match meta_of(message).and_then(|m| m.get(META_PROTOCOL_VERSION)) {
            Some(Json::Str(v)) => v.clone(),
            _ => Vec::new(),
        };
        if !MODERN_VERSIONS.iter().any(|v| v.as_bytes() == version.as_slice()) {
            return Err(unsupported(&version));
        }
        let method = match message.get("method") {
            Some(Json::Str(m)) => String::from_utf8_lossy(m).into_owned(),
            _ => String::new(),
        };
        let params = message.get("params").cloned().unwrap_or_default();
        let listing = |server: &Server, kind| server.listing(kind, &params).map(Some).map_err(Refused::from);
        match method.as_str() {
            "server/discover" => Ok(Some(self.discover())),
            "tools/list" => listing(self, Kind::Tool),
            "resources/list" => listing(self, Kind::Resource),
            "resources/templates/list" => listing(self, Kind::Template),
            "prompts/list" => listing(self, Kind::Prompt),
            "completion/complete" => self.complete(&params, handlers).map(Some).map_err(Refused::from),
            "skills/list" => Ok(Some(self.list_skills())),
            "skills/get" => self.get_skill(&params).map(Some).map_err(Refused::from),
            "tools/call" => {
                if let Some(headers) = headers {
                    self.check_param_headers(&params, headers)?;
                }
                self.call_tool_maybe_as_task(key, message, &params, handlers)
            }
            "resources/read" | "prompts/get" => self.with_inputs(message, &method, &params, handlers),
            "tasks/get" | "tasks/update" | "tasks/cancel" => self.task_method(message, &method, &params).map(Some),
            "subscriptions/listen" => {
                // Open until the client goes: what it hears are notices.
                let id = message.get("id").cloned().unwrap_or_default();
                self.peer(key).listen(id, params.get("notifications"));
                Ok(None)
            }
            _ => Err((METHOD_NOT_FOUND, format!("Method not found: {method}")).into()),
        }
    }

    fn discover(&self) -> Json {
        let mut result = vec![
            (b"capabilities".to_vec(), self.capabilities()),
            (b"supportedVersions".to_vec(), Json::Array(MODERN_VERSIONS.iter().map(|v| Json::str(*v)).collect())),
        ];
        if let Some(instructions) = &self.instructions {
            result.push((b"instructions".to_vec(), instructions.clone()));
        }
        Json::Object(result)
    }

    /// A result as the revision writes it: its `resultType`, the cache
    /// hints of what may be kept, and who answered.
    pub(super) fn decorate(&self, method: &[u8], result: Json) -> Json {
        let pairs = match result.into_tree() {
            Json::Object(pairs) => pairs,
            // Results are objects; anything else goes as it is.
            other => return other,
        };
        let mut pairs = pairs;
        let cacheable =
            method.ends_with(b"/list") || [&b"resources/read"[..], b"server/discover", b"skills/get"].contains(&method);
        let mut put = |key: &str, value: Json| {
            if !pairs.iter().any(|(k, _)| k == key.as_bytes()) {
                pairs.push((key.as_bytes().to_vec(), value));
            }
        };
        put("resultType", Json::str("complete"));
        if cacheable {
            put("ttlMs", Json::Int(CACHE_TTL_MS));
            put("cacheScope", Json::str("public"));
        }
        let info = (META_SERVER_INFO.as_bytes().to_vec(), self.info.clone());
        match pairs.iter_mut().find(|(k, _)| k == b"_meta") {
            Some((_, meta)) => {
                meta.materialize();
                if let Json::Object(meta) = meta {
                    meta.push(info);
                }
            }
            None => pairs.push((b"_meta".to_vec(), Json::Object(vec![info]))),
        }
        crate::sorting::sort_by(&mut pairs, |a, b| a.0.cmp(&b.0));
        Json::Object(pairs)
    }

    /// Each argument a tool names for a header (`x-mcp-header` in its
    /// input schema) must come as `Mcp-Param-NAME` too, and the same.
    fn check_param_headers(&self, params: &Json, headers: &[(String, Vec<u8>)]) -> Result<(), Refused> {
        let Some(Json::Str(name)) = params.get("name") else { return Ok(()) };
        let Some(tool) = self.list(Kind::Tool).get(name) else { return Ok(()) };
        let Some(Json::Object(properties)) = tool.definition.get("inputSchema").and_then(|s| s.get("properties"))
        else {
            return Ok(());
        };
        let arguments = params.get("arguments");
        for (property, schema) in properties {
            let Some(Json::Str(header)) = schema.get("x-mcp-header") else { continue };
            let value = match arguments.and_then(|a| a.get(&String::from_utf8_lossy(property))) {
                None | Some(Json::Null) => continue,
                Some(Json::Str(s)) => s.clone(),
                Some(Json::Bool(b)) => b.to_string().into_bytes(),
                Some(Json::Int(n)) => n.to_string().into_bytes(),
                Some(other) => crate::codec::encode(other),
            };
            let wanted = format!("mcp-param-{}", String::from_utf8_lossy(header).to_ascii_lowercase());
            let shown = String::from_utf8_lossy(header);
            let sent = headers.iter().find(|(n, _)| *n == wanted).map(|(_, v)| header_value(v));
            match sent {
                Some(Some(sent)) if sent == value => {}
                Some(Some(_)) => return Err(mismatch(format!("Mcp-Param-{shown} does not match the argument"))),
                Some(None) => return Err(mismatch(format!("Mcp-Param-{shown} is not valid base64"))),
                None => return Err(mismatch(format!("Mcp-Param-{shown} is missing"))),
            }
        }
        Ok(())
    }

    /// Runs a request whose handler may need the client's input: the
    /// answers of the rounds before (in the signed request state) and of
    /// this one go to it, and an `input_required` result gets the state
    /// the next round needs.
    fn with_inputs(
        &mut self,
        message: &Json,
        method: &str,
        params: &Json,
        handlers: &mut dyn Handlers,
    ) -> Result<Option<Json>, Refused> {
        let name = match params.get("name").or_else(|| params.get("uri")) {
            Some(Json::Str(name)) => name.clone(),
            _ => Vec::new(),
        };
        let request = [method.as_bytes(), b" ", &name].concat();
        let mut known = self.answers_given(&request, params)?;
        let id = message.get("id").cloned().unwrap_or_default();
        let meta = params.get("_meta");
        let progress_token = meta.and_then(|m| m.get("progressToken"));
        let call = Call { id: &id, method, name: &name, meta, progress_token, answers: Some(&known) };
        let reply = match method {
            "tools/call" => self.call_tool(params, &call, handlers),
            "resources/read" => self.read_resource(params, &call, handlers),
            _ => self.get_prompt(params, &call, handlers),
        }?;
        let Some(Json::Object(mut result)) = reply else { return Ok(reply) };
        if result.iter().any(|(k, v)| k == b"resultType" && *v == Json::str(INPUT_REQUIRED)) {
            let asked: Vec<Vec<u8>> =
                result
                    .iter()
                    .find(|(k, _)| k == b"inputRequests")
                    .and_then(|(_, v)| {
                        if let Json::Object(p) = v {
                            Some(p.iter().map(|(k, _)| k.clone()).collect())
                        } else {
                            None
                        }
                    })
                    .unwrap_or_default();
            known.retain(|(k, _)| !asked.contains(k));
            let state = self.signer.sign(&request, &State { answers: known, asked });
            result.push((b"requestState".to_vec(), Json::str(state)));
        }
        Ok(Some(Json::Object(result)))
    }

    /// The answers a round brings: those of the rounds before, from a
    /// state this server signed for this request, and this round's to
    /// what was asked (anything, when no state came: the first retry of
    /// a client that kept none). A state that does not verify refuses
    /// the request.
    fn answers_given(&self, request: &[u8], params: &Json) -> Result<Vec<(Vec<u8>, Json)>, Refused> {
        let state = match params.get("requestState") {
            None | Some(Json::Null) => None,
            Some(Json::Str(text)) => Some(
                self.signer
                    .verify(request, text)
                    .ok_or_else(|| Refused::from((INVALID_PARAMS, "requestState integrity check failed".into())))?,
            ),
            Some(_) => return Err((INVALID_PARAMS, "requestState must be a string".into()).into()),
        };
        let responses = match params.get("inputResponses").map(|r| r.clone().into_tree()) {
            None => Vec::new(),
            Some(Json::Object(pairs)) => pairs,
            Some(_) => return Err((INVALID_PARAMS, "inputResponses must be an object of answers by key".into()).into()),
        };
        let mut known = state.as_ref().map(|s| s.answers.clone()).unwrap_or_default();
        for (key, answer) in responses {
            let asked = state.as_ref().is_none_or(|s| s.asked.contains(&key));
            if !asked {
                continue;
            }
            if !answer.is_object() {
                let why = format!(
                    "inputResponses.{} must be an object (the answer to that request)",
                    String::from_utf8_lossy(&key)
                );
                return Err((INVALID_PARAMS, why).into());
            }
            known.retain(|(k, _)| *k != key);
            known.push((key, answer));
        }
        Ok(known)
    }
}

/// Whether the client of `message` declared the Tasks extension.
fn declares_tasks(message: &Json) -> bool {
    facts(message).capabilities.get("extensions").and_then(|e| e.get(TASKS_EXTENSION)).is_some()
}

/// The refusal of a request that needs the Tasks extension declared.
fn needs_tasks(what: &str) -> Refused {
    let data = Json::object([(
        "requiredCapabilities",
        Json::object([("extensions", Json::object([(TASKS_EXTENSION, Json::Object(vec![]))]))]),
    )]);
    Refused {
        code: MISSING_CAPABILITY,
        message: format!("Missing required client capability: {what} needs the Tasks extension"),
        data: Some(data),
    }
}

impl Server {
    /// A tool call, run as a task when the tool may be (its
    /// `execution.taskSupport`) and the client declared the extension:
    /// its handler's answer, now or later, settles the task, and the call
    /// is answered with the task at once. Questions before that are
    /// asked in rounds, as of any call. A tool that must run as a task is
    /// refused to a client without the extension.
    fn call_tool_maybe_as_task(
        &mut self,
        key: PeerKey,
        message: &Json,
        params: &Json,
        handlers: &mut dyn Handlers,
    ) -> Result<Option<Json>, Refused> {
        let support =
            match params
                .get("name")
                .and_then(|n| if let Json::Str(n) = n { self.list(Kind::Tool).get(n) } else { None })
            {
                Some(tool) => match tool.definition.get("execution").and_then(|e| e.get("taskSupport")) {
                    Some(Json::Str(s)) => String::from_utf8_lossy(s).into_owned(),
                    _ => String::new(),
                },
                None => String::new(),
            };
        let as_task = matches!(support.as_str(), "optional" | "required") && declares_tasks(message);
        if support == "required" && !as_task {
            return Err(needs_tasks("this tool"));
        }
        let reply = self.with_inputs(message, "tools/call", params, handlers)?;
        if !as_task {
            return Ok(reply);
        }
        match reply {
            Some(result) if result.get("resultType") == Some(&Json::str(INPUT_REQUIRED)) => Ok(Some(result)),
            Some(result) => {
                let id = self.tasks.create(Vec::new());
                self.tasks.settle(&id, Ok(result));
                Ok(self.tasks.describe(&id, true))
            }
            None => {
                // Requests whose task is over, or gone, need no mapping.
                let tasks = &self.tasks;
                self.task_of.retain(|_, id| tasks.is_open(id));
                let id = self.tasks.create(Vec::new());
                self.task_of.insert(key, id.clone());
                Ok(self.tasks.describe(&id, true))
            }
        }
    }

    /// `tasks/get`, `tasks/update` and `tasks/cancel`.
    fn task_method(&mut self, message: &Json, method: &str, params: &Json) -> Result<Json, Refused> {
        if !declares_tasks(message) {
            return Err(needs_tasks(method));
        }
        let id = match params.get("taskId") {
            Some(Json::Str(id)) => String::from_utf8_lossy(id).into_owned(),
            _ => return Err((INVALID_PARAMS, format!("{method} needs the taskId")).into()),
        };
        if !self.tasks.exists(&id) {
            return Err((INVALID_PARAMS, format!("Unknown task: {id}")).into());
        }
        let ack = Json::object([("resultType", Json::str("complete"))]);
        match method {
            "tasks/get" => Ok(self.tasks.describe(&id, false).unwrap_or_default()),
            "tasks/cancel" => {
                self.tasks.cancel(&id);
                Ok(ack)
            }
            _ => {
                let answers = match params.get("inputResponses").map(|r| r.clone().into_tree()) {
                    Some(Json::Object(pairs)) => pairs,
                    _ => Vec::new(),
                };
                let taken = self.tasks.answer(&id, answers);
                if let Some((&request, _)) = self.task_of.iter().find(|(_, t)| **t == id) {
                    self.task_answers.extend(taken.into_iter().map(|(k, a)| (request, k, a)));
                }
                Ok(ack)
            }
        }
    }

    /// A task's handler asks its client `key` (it answers with
    /// `tasks/update`); the request that made the task is `request`.
    pub fn task_asks(&mut self, request: PeerKey, key: Vec<u8>, question: Json) {
        if let Some(id) = self.task_of.get(&request) {
            self.tasks.ask(id, key, question);
        }
    }

    /// Answers to tasks' questions, for the handlers that asked them.
    pub fn take_task_answers(&mut self) -> Vec<(PeerKey, Vec<u8>, Json)> {
        std::mem::take(&mut self.task_answers)
    }

    /// Whether the task request `request` made may still ask or settle.
    pub fn task_open(&self, request: PeerKey) -> bool {
        self.task_of.get(&request).is_some_and(|id| self.tasks.is_open(id))
    }

    /// Whether the task request `request` made was cancelled.
    pub fn task_cancelled(&self, request: PeerKey) -> bool {
        self.task_of.get(&request).is_some_and(|id| self.tasks.is_cancelled(id))
    }
}

fn mismatch(why: String) -> Refused {
    (HEADER_MISMATCH, format!("Header mismatch: {why}")).into()
}
