//! The other half of MCP: a server whose tools, resources and prompts are
//! answered by the holder's handlers (Lua functions, in the binding).
//!
//! This is the server's protocol and nothing else: the handshake and the
//! version it settles on, the listings and their pages, each call checked
//! against what was declared (a tool's arguments against its
//! `inputSchema` before its handler runs, its structured content against
//! its `outputSchema` after), completions, subscriptions, the log level a
//! client sets, and the `list_changed` notices owed once a list changed
//! while serving. It knows nothing of Lua and does no I/O: a message comes
//! in, a reply (or none) goes out, and what the server owes the client
//! unasked waits in [`Server::take_notices`] for the transport.
//!
//! A handler's own failure is a tool result with `isError` (the 2025-11-25
//! revision asks that arguments a tool cannot use come back the same way:
//! the model reads them and corrects its call); a request the server
//! cannot take at all (an unknown tool, a prompt without its required
//! arguments, a resource nobody serves) is a JSON-RPC error.

pub mod catalog;
pub mod channel;
pub mod http;
pub mod link;
pub mod modern;
mod peer;
mod request_state;
pub mod skills;
pub mod stdio;
pub mod tasks;

use std::collections::HashMap;

use crate::codec::Json;
use crate::json_schema::Validator;
use crate::protocol::{self, id_key, SUPPORTED_VERSIONS};
use catalog::{match_template, parse_template, Entry, Kind, List};
use peer::Peer;
pub use peer::{Facts, PeerKey};

pub const METHOD_NOT_FOUND: i64 = -32601;
pub const INVALID_PARAMS: i64 = -32602;
pub const INTERNAL_ERROR: i64 = -32603;
/// The code MCP gives a resource nobody serves.
pub const RESOURCE_NOT_FOUND: i64 = -32002;

/// The log levels of RFC 5424, in the order the protocol names them.
pub const LOG_LEVELS: [&str; 8] = ["debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"];

/// What a handler made of a request.
pub enum Answer {
    /// Its result, in the protocol's shape (the binding shapes what the
    /// handler returned).
    Result(Json),
    /// The handler failed; its message, meant for the client (and, for a
    /// tool, for the model that called it).
    Failed(String),
    /// The handler will answer later ([`Server::answer_later`]): the
    /// request stays open meanwhile.
    Later,
    /// A 2026-07-28 client must answer these first (keyed requests of
    /// elicitation, sampling or roots): the request is sent again with
    /// the answers, and its handler runs again from the start.
    InputRequired(Json),
    /// The request is refused with the protocol's error (a capability the
    /// client did not declare, an answer that is not one).
    Refused(Refused),
}

/// What the core makes of a request: its result, none yet (a handler
/// answers later), or the protocol's error.
type Reply = Result<Option<Json>, Refused>;

/// A request refused with the protocol's error: its code, message, and
/// the `data` some codes carry.
#[derive(Debug)]
pub struct Refused {
    pub code: i64,
    pub message: String,
    pub data: Option<Json>,
}

impl From<(i64, String)> for Refused {
    fn from((code, message): (i64, String)) -> Refused {
        Refused { code, message, data: None }
    }
}

impl Refused {
    /// The JSON-RPC error object.
    pub fn to_error(&self) -> Json {
        let mut error = vec![("code", Json::Int(self.code)), ("message", Json::str(&self.message))];
        if let Some(data) = &self.data {
            error.push(("data", data.clone()));
        }
        Json::object(error)
    }

    /// The error response to request `id`.
    pub fn to_response(&self, id: Json) -> Json {
        Json::object([("error", self.to_error()), ("id", id), ("jsonrpc", Json::str("2.0"))])
    }
}

/// A request as its handler sees it: its id, its `_meta`, and the
/// progress token the client asked progress under.
pub struct Call<'a> {
    pub id: &'a Json,
    pub method: &'a str,
    /// What it is about: the tool's or prompt's name, the resource's uri.
    pub name: &'a [u8],
    pub meta: Option<&'a Json>,
    pub progress_token: Option<&'a Json>,
    /// A 2026-07-28 request: the client's answers given so far, by key
    /// (None for the earlier revisions, whose requests to the client go
    /// over the session).
    pub answers: Option<&'a [(Vec<u8>, Json)]>,
}

/// Who answers: the binding, calling the holder's handlers.
pub trait Handlers {
    fn call_tool(&mut self, handler: u64, arguments: Json, call: &Call) -> Answer;
    /// The `contents` of a resource (a template's also get its variables).
    fn read_resource(&mut self, handler: u64, uri: &[u8], variables: Option<Json>, call: &Call) -> Answer;
    fn get_prompt(&mut self, handler: u64, arguments: Json, call: &Call) -> Answer;
    /// Candidates for `argument` of the prompt or template `handler`
    /// answers, given what was typed (`value`) and the other arguments.
    fn complete(&mut self, handler: u64, argument: &[u8], value: &[u8], context: Option<&Json>) -> Answer;
}

/// Why a definition was refused.
pub type Refusal = String;

pub struct Server {
    info: Json,
    instructions: Option<Json>,
    lists: [List; 4],
    /// Items per page of every listing (0: all at once).
    pub page_size: usize,
    /// Each client's own state, by the key its transport gave it (stdio
    /// has one; Streamable HTTP one per session).
    peers: HashMap<PeerKey, Peer>,
    /// Signs the request state of 2026-07-28 rounds of input.
    signer: request_state::Signer,
    /// The Skills extension's skills, in the order they were added.
    skills: Vec<skills::Skill>,
    /// The Tasks extension's tasks, and which request (by its client's
    /// key) made each one still working.
    tasks: tasks::Tasks,
    task_of: HashMap<PeerKey, String>,
    /// Answers a client gave a task's questions (`tasks/update`), for the
    /// handlers that asked them: by the key of the request that made the
    /// task, and the question's key.
    task_answers: Vec<(PeerKey, Vec<u8>, Json)>,
}

impl Server {
    pub fn new(info: Json, instructions: Option<Json>) -> Server {
        Server {
            info,
            instructions,
            lists: Default::default(),
            page_size: 0,
            peers: HashMap::new(),
            signer: request_state::Signer::new(),
            skills: Vec::new(),
            tasks: tasks::Tasks::default(),
            task_of: HashMap::new(),
            task_answers: Vec::new(),
        }
    }

    /// The state of client `key`, made at its first message.
    fn peer(&mut self, key: PeerKey) -> &mut Peer {
        self.peers.entry(key).or_default()
    }

    /// What the server knows of client `key` (its log level, what it can
    /// answer), for a handler's `ctx`.
    pub fn facts(&self, key: PeerKey) -> Facts {
        self.peers.get(&key).map(Peer::facts).unwrap_or_default()
    }

    /// What a handler of `message` from client `key` may know of its
    /// client: a 2026-07-28 request says it all in its `_meta`.
    pub fn facts_of(&self, key: PeerKey, message: &Json) -> Facts {
        match modern::is_modern(message) {
            true => modern::facts(message),
            false => self.facts(key),
        }
    }

    /// Client `key` is gone (its session ended): its state goes with it.
    pub fn forget(&mut self, key: PeerKey) {
        self.peers.remove(&key);
    }

    fn list(&self, kind: Kind) -> &List {
        &self.lists[kind as usize]
    }

    /// Adds (or replaces) an entry whose definition is in the protocol's
    /// shape; a client already serving hears that the list changed.
    pub fn add(&mut self, kind: Kind, definition: Json, handler: u64) -> Result<(), Refusal> {
        let key = match definition.get(kind.key_field()) {
            Some(Json::Str(key)) if !key.is_empty() => key.clone(),
            _ => return Err(format!("its {} must be a non-empty string", kind.key_field())),
        };
        let compile = |field: &str| -> Result<Option<Validator>, Refusal> {
            match definition.get(field) {
                None => Ok(None),
                Some(schema) => Validator::new(schema)
                    .map(Some)
                    .map_err(|e| format!("its {field} is not a JSON Schema this server can check: {e}")),
            }
        };
        let (input, output) = match kind {
            Kind::Tool => (compile("inputSchema")?, compile("outputSchema")?),
            _ => (None, None),
        };
        let template = match kind {
            Kind::Template => parse_template(&key).map_err(|why| format!("its uriTemplate: {why}"))?,
            _ => Vec::new(),
        };
        self.lists[kind as usize].put(Entry { key, definition, handler, input, output, template });
        self.list_changed(kind);
        Ok(())
    }

    /// Adds (or replaces, by name) a skill: the Skills extension is
    /// declared from the first one on.
    pub fn add_skill(&mut self, skill: skills::Skill) {
        match self.skills.iter_mut().find(|s| s.name() == skill.name()) {
            Some(old) => *old = skill,
            None => self.skills.push(skill),
        }
        self.list_changed(Kind::Resource);
    }

    /// The name skills' URIs carry: the server's.
    pub fn skill_authority(&self) -> String {
        match self.info.get("name") {
            Some(Json::Str(name)) => skills::authority(&String::from_utf8_lossy(name)),
            _ => skills::authority(""),
        }
    }

    /// What this server can do, the same at every revision (at 2026-07-28
    /// list changes and resource updates are heard through
    /// `subscriptions/listen`), with the extensions it declares.
    fn capabilities(&self) -> Json {
        let changing = || Json::object([("listChanged", Json::Bool(true))]);
        let mut pairs = vec![
            ("completions", Json::Object(vec![])),
            ("logging", Json::Object(vec![])),
            ("prompts", changing()),
            ("resources", Json::object([("listChanged", Json::Bool(true)), ("subscribe", Json::Bool(true))])),
            ("tools", changing()),
        ];
        if let Some(extensions) = self.extensions() {
            pairs.push(("extensions", extensions));
        }
        crate::sorting::sort_by(&mut pairs, |a, b| a.0.cmp(b.0));
        Json::object(pairs)
    }

    /// The extensions this server declares: Skills once it has a skill,
    /// Tasks once a tool may run as one.
    fn extensions(&self) -> Option<Json> {
        let mut declared = Vec::new();
        if !self.skills.is_empty() {
            declared.push((skills::EXTENSION, Json::Object(vec![])));
        }
        let runs_tasks = self.list(Kind::Tool).iter().any(|t| {
            matches!(t.definition.get("execution").and_then(|e| e.get("taskSupport")),
                Some(Json::Str(s)) if s == b"optional" || s == b"required")
        });
        if runs_tasks {
            declared.push((protocol::TASKS_EXTENSION, Json::Object(vec![])));
        }
        (!declared.is_empty()).then(|| Json::object(declared))
    }

    fn list_skills(&self) -> Json {
        Json::object([("skills", Json::Array(self.skills.iter().map(skills::Skill::entry).collect()))])
    }

    fn get_skill(&self, params: &Json) -> Result<Json, (i64, String)> {
        let Some(Json::Str(uri)) = params.get("uri") else {
            return Err((INVALID_PARAMS, "skills/get needs the skill's uri".into()));
        };
        let skill = self
            .skills
            .iter()
            .find(|s| s.uri() == uri.as_slice())
            .ok_or_else(|| (INVALID_PARAMS, format!("Unknown skill: {}", String::from_utf8_lossy(uri))))?;
        Ok(Json::object([("skill", skill.entry())]))
    }

    /// Removes an entry; false if there was none.
    pub fn remove(&mut self, kind: Kind, key: &[u8]) -> bool {
        let removed = self.lists[kind as usize].remove(key);
        if removed {
            self.list_changed(kind);
        }
        removed
    }

    fn list_changed(&mut self, kind: Kind) {
        for peer in self.peers.values_mut() {
            peer.list_changed(kind);
        }
    }

    /// A resource changed: subscribers hear of it.
    pub fn resource_updated(&mut self, uri: &[u8]) {
        for peer in self.peers.values_mut() {
            peer.resource_updated(uri);
        }
    }

    /// What the server owes client `key` unasked, oldest first.
    pub fn take_notices(&mut self, key: PeerKey) -> Vec<Json> {
        self.peers.get_mut(&key).map(Peer::take_notices).unwrap_or_default()
    }

    /// Clients owed something unasked.
    pub fn owed(&self) -> Vec<PeerKey> {
        self.peers.iter().filter(|(_, p)| p.owes()).map(|(k, _)| *k).collect()
    }

    /// The reply to `message` from client `key` (None for a
    /// notification, or a reply to a request of ours, which the transport
    /// routes before it gets here).
    pub fn handle(&mut self, key: PeerKey, message: &Json, handlers: &mut dyn Handlers) -> Option<Json> {
        self.handle_from(key, message, handlers, None)
    }

    /// [`Server::handle`], given the request's HTTP headers (names in
    /// lower case) when it came over HTTP.
    pub fn handle_from(
        &mut self,
        key: PeerKey,
        message: &Json,
        handlers: &mut dyn Handlers,
        headers: Option<&[(String, Vec<u8>)]>,
    ) -> Option<Json> {
        if modern::is_modern(message) {
            return self.handle_modern(key, message, handlers, headers);
        }
        let Some(Json::Str(method)) = message.get("method") else {
            let id = message.get("id").cloned().unwrap_or(Json::Null);
            return Some(protocol::error_response(id, -32600, "Invalid Request: no method"));
        };
        let method = String::from_utf8_lossy(method).into_owned();
        let params = message.get("params").cloned().unwrap_or(Json::Object(vec![]));
        let Some(id) = message.get("id") else {
            if method == "notifications/initialized" {
                self.peer(key).initialized = true;
            }
            return None;
        };
        if id_key(id).is_none() {
            return Some(protocol::error_response(
                Json::Null,
                -32600,
                "Invalid Request: the id must be a number or a string",
            ));
        }
        let meta = params.get("_meta");
        let name = match params.get("name").or_else(|| params.get("uri")) {
            Some(Json::Str(name)) => name.as_slice(),
            _ => b"",
        };
        let progress_token = meta.and_then(|m| m.get("progressToken"));
        let call = Call { id, method: &method, name, meta, progress_token, answers: None };
        let answer: Reply = match method.as_str() {
            "tools/call" => self.call_tool(&params, &call, handlers),
            "resources/read" => self.read_resource(&params, &call, handlers),
            "prompts/get" => self.get_prompt(&params, &call, handlers),
            _ => self.answer_at_once(key, &method, &params, handlers).map(Some).map_err(Refused::from),
        };
        match answer {
            Ok(Some(result)) => Some(protocol::response(id.clone(), result)),
            Ok(None) => None,
            Err(refused) => Some(refused.to_response(id.clone())),
        }
    }

    /// What no handler can put off.
    fn answer_at_once(
        &mut self,
        key: PeerKey,
        method: &str,
        params: &Json,
        handlers: &mut dyn Handlers,
    ) -> Result<Json, (i64, String)> {
        match method {
            "initialize" => Ok(self.initialize(key, params)),
            "ping" => Ok(Json::Object(vec![])),
            "tools/list" => self.listing(Kind::Tool, params),
            "resources/list" => self.listing(Kind::Resource, params),
            "resources/templates/list" => self.listing(Kind::Template, params),
            "prompts/list" => self.listing(Kind::Prompt, params),
            "skills/list" => Ok(self.list_skills()),
            "skills/get" => self.get_skill(params),
            "completion/complete" => self.complete(params, handlers),
            "resources/subscribe" | "resources/unsubscribe" => self.peer(key).subscribe(method, params),
            "logging/setLevel" => self.peer(key).set_level(params),
            _ => Err((METHOD_NOT_FOUND, format!("Method not found: {method}"))),
        }
    }

    /// The reply to request `id` (a `method` about `name`: the tool, the
    /// resource's uri, the prompt) whose handler answered later, shaped
    /// and checked as an answer given at once would have been.
    /// `peer` is the client's key; `modern`, whether the request was of
    /// the 2026-07-28 revision. None when the request became a task: the
    /// answer settles it, and the client reads it there.
    pub fn answer_later(
        &mut self,
        peer: PeerKey,
        request: (&Json, &str, &[u8]),
        answer: Answer,
        modern: bool,
    ) -> Option<Json> {
        let (id, method, name) = request;
        let reply = match method {
            "tools/call" => self.tool_reply(name, answer),
            "resources/read" => resource_reply(answer),
            _ => prompt_reply(answer),
        };
        if let Some(task) = self.task_of.remove(&peer) {
            let outcome = match reply {
                Ok(result) => Ok(result.unwrap_or_default()),
                Err(refused) => Err(refused.to_error()),
            };
            self.tasks.settle(&task, outcome);
            return None;
        }
        Some(match reply {
            Ok(Some(result)) if modern => protocol::response(id.clone(), self.decorate(method.as_bytes(), result)),
            Ok(Some(result)) => protocol::response(id.clone(), result),
            Ok(None) => protocol::error_response(id.clone(), INTERNAL_ERROR, "the handler answered later twice"),
            Err(refused) => refused.to_response(id.clone()),
        })
    }

    /// The version: the client's if this server speaks it, else the
    /// newest it speaks (the client then decides whether it can go on).
    fn initialize(&mut self, key: PeerKey, params: &Json) -> Json {
        let asked = match params.get("protocolVersion") {
            Some(Json::Str(v)) => String::from_utf8_lossy(v).into_owned(),
            _ => String::new(),
        };
        let version = SUPPORTED_VERSIONS.iter().find(|v| **v == asked).unwrap_or(&SUPPORTED_VERSIONS[0]).to_string();
        let peer = self.peer(key);
        peer.capabilities = params.get("capabilities").cloned().unwrap_or(Json::Object(vec![]));
        peer.version = Some(version.clone());
        let mut result = vec![
            (b"capabilities".to_vec(), self.capabilities()),
            (b"protocolVersion".to_vec(), Json::str(&version)),
            (b"serverInfo".to_vec(), self.info.clone()),
        ];
        if let Some(instructions) = &self.instructions {
            result.push((b"instructions".to_vec(), instructions.clone()));
        }
        Json::Object(result)
    }

    fn listing(&self, kind: Kind, params: &Json) -> Result<Json, (i64, String)> {
        let cursor = match params.get("cursor") {
            Some(Json::Str(c)) => Some(c.as_slice()),
            _ => None,
        };
        let (mut items, next) = self.list(kind).page(cursor, self.page_size).map_err(|why| (INVALID_PARAMS, why))?;
        if kind == Kind::Resource && next.is_none() {
            // Each skill's SKILL.md is a resource too, listed last.
            items.extend(self.skills.iter().map(skills::Skill::listed));
        }
        let mut result = vec![(kind.items_field().as_bytes().to_vec(), Json::Array(items))];
        if let Some(next) = next {
            result.push((b"nextCursor".to_vec(), Json::str(next)));
        }
        Ok(Json::Object(result))
    }

    fn call_tool(&mut self, params: &Json, call: &Call, handlers: &mut dyn Handlers) -> Reply {
        let name = match params.get("name") {
            Some(Json::Str(name)) => name.as_slice(),
            _ => return Err((INVALID_PARAMS, "tools/call needs the tool's name".into()).into()),
        };
        let shown = String::from_utf8_lossy(name).into_owned();
        let tool = self.list(Kind::Tool).get(name).ok_or_else(|| (INVALID_PARAMS, format!("Unknown tool: {shown}")))?;
        let arguments = params.get("arguments").cloned().unwrap_or(Json::Object(vec![]));
        if let Some(validator) = &tool.input {
            if let Some(failure) = validator.first_error(&arguments) {
                let at = if failure.at.is_empty() { String::new() } else { format!(" (at {})", failure.at) };
                let why = format!(
                    "Invalid arguments for tool {shown}: {}{at}. Call it again with arguments that match its inputSchema.",
                    failure.message
                );
                return Ok(Some(tool_error(&why)));
            }
        }
        let answer = handlers.call_tool(tool.handler, arguments, call);
        self.tool_reply(name, answer)
    }

    /// A tool's answer as its result: a failure is a result with
    /// `isError`; structured content is checked against the tool's
    /// `outputSchema`, looked up now (its handler may have changed it).
    fn tool_reply(&self, name: &[u8], answer: Answer) -> Reply {
        let result = match answer {
            Answer::Result(result) => result,
            Answer::Failed(why) => return Ok(Some(tool_error(&why))),
            other => return unanswered(other),
        };
        let shown = String::from_utf8_lossy(name);
        let output = self.list(Kind::Tool).get(name).and_then(|t| t.output.as_ref());
        if let Some(validator) = output {
            let failed = result.get("isError").is_some_and(Json::is_truthy);
            let structured = result.get("structuredContent");
            let mismatch = match structured {
                _ if failed => None,
                None => Some("it returned no structured content".to_string()),
                Some(value) => validator.first_error(value).map(|failure| failure.message),
            };
            if let Some(why) = mismatch {
                return Err((INTERNAL_ERROR, format!("Tool {shown} broke its outputSchema: {why}")).into());
            }
        }
        Ok(Some(result))
    }

    fn read_resource(&mut self, params: &Json, call: &Call, handlers: &mut dyn Handlers) -> Reply {
        let uri = match params.get("uri") {
            Some(Json::Str(uri)) => uri.clone(),
            _ => return Err((INVALID_PARAMS, "resources/read needs the resource's uri".into()).into()),
        };
        if let Some(contents) = self.skills.iter().find_map(|s| s.read(&uri)) {
            return Ok(Some(Json::object([("contents", contents)])));
        }
        let (handler, variables) = match self.list(Kind::Resource).get(&uri) {
            Some(resource) => (resource.handler, None),
            None => {
                let found = self
                    .list(Kind::Template)
                    .iter()
                    .find_map(|t| match_template(&t.template, &uri).map(|vars| (t.handler, vars)));
                // -32002 until 2026-07-28, which made it -32602; the uri
                // goes with it either way.
                let code = if call.answers.is_some() { INVALID_PARAMS } else { RESOURCE_NOT_FOUND };
                let (handler, vars) = found.ok_or_else(|| Refused {
                    code,
                    message: format!("Resource not found: {}", String::from_utf8_lossy(&uri)),
                    data: Some(Json::object([("uri", Json::Str(uri.clone()))])),
                })?;
                let vars = Json::Object(vars.into_iter().map(|(k, v)| (k, Json::Str(v))).collect());
                (handler, Some(vars))
            }
        };
        resource_reply(handlers.read_resource(handler, &uri, variables, call))
    }

    fn get_prompt(&mut self, params: &Json, call: &Call, handlers: &mut dyn Handlers) -> Reply {
        let name = match params.get("name") {
            Some(Json::Str(name)) => name.clone(),
            _ => return Err((INVALID_PARAMS, "prompts/get needs the prompt's name".into()).into()),
        };
        let shown = String::from_utf8_lossy(&name).into_owned();
        let prompt =
            self.list(Kind::Prompt).get(&name).ok_or_else(|| (INVALID_PARAMS, format!("Unknown prompt: {shown}")))?;
        let arguments = params.get("arguments").cloned().unwrap_or(Json::Object(vec![]));
        for argument in prompt.definition.get("arguments").map(|a| a.elements().collect::<Vec<_>>()).unwrap_or_default()
        {
            let required = argument.get("required").is_some_and(Json::is_truthy);
            if let (true, Some(Json::Str(arg))) = (required, argument.get("name")) {
                if arguments.get(&String::from_utf8_lossy(arg)).is_none() {
                    let arg = String::from_utf8_lossy(arg);
                    return Err((INVALID_PARAMS, format!("Prompt {shown} needs its argument {arg}")).into());
                }
            }
        }
        prompt_reply(handlers.get_prompt(prompt.handler, arguments, call))
    }

    fn complete(&mut self, params: &Json, handlers: &mut dyn Handlers) -> Result<Json, (i64, String)> {
        let reference = params.get("ref").ok_or((INVALID_PARAMS, "completion/complete needs a ref".to_string()))?;
        let entry = match (reference.get("type"), reference.get("name"), reference.get("uri")) {
            (Some(t), Some(Json::Str(name)), _) if *t == Json::str("ref/prompt") => self.list(Kind::Prompt).get(name),
            (Some(t), _, Some(Json::Str(uri))) if *t == Json::str("ref/resource") => self.list(Kind::Template).get(uri),
            _ => None,
        };
        let entry =
            entry.ok_or((INVALID_PARAMS, "completion/complete: the ref names nothing this server has".to_string()))?;
        let argument = params.get("argument");
        let (Some(Json::Str(name)), value) =
            (argument.and_then(|a| a.get("name")), argument.and_then(|a| a.get("value")))
        else {
            return Err((INVALID_PARAMS, "completion/complete needs argument.name".into()));
        };
        let value = match value {
            Some(Json::Str(v)) => v.as_slice(),
            _ => b"",
        };
        let context = params.get("context").and_then(|c| c.get("arguments"));
        let values = match handlers.complete(entry.handler, name, value, context) {
            Answer::Result(values) => values,
            Answer::Failed(why) => return Err((INTERNAL_ERROR, why)),
            _ => return Err((INTERNAL_ERROR, "a completion is answered at once".into())),
        };
        // At most 100 values a reply, as the protocol asks; the total says
        // how many there were.
        let all: Vec<Json> = values.elements().cloned().collect();
        let total = all.len();
        let shown: Vec<Json> = all.into_iter().take(100).collect();
        let has_more = total > shown.len();
        Ok(Json::object([(
            "completion",
            Json::object([
                ("hasMore", Json::Bool(has_more)),
                ("total", Json::Int(total as i64)),
                ("values", Json::Array(shown)),
            ]),
        )]))
    }
}

fn resource_reply(answer: Answer) -> Reply {
    match answer {
        Answer::Result(contents) => Ok(Some(Json::object([("contents", contents)]))),
        Answer::Failed(why) => Err((INTERNAL_ERROR, why).into()),
        other => unanswered(other),
    }
}

fn prompt_reply(answer: Answer) -> Reply {
    match answer {
        Answer::Result(result) => Ok(Some(result)),
        Answer::Failed(why) => Err((INTERNAL_ERROR, why).into()),
        other => unanswered(other),
    }
}

/// An answer that is not a result: none yet, input the client must give
/// first (its request state is added by `modern`), or a refusal.
fn unanswered(answer: Answer) -> Reply {
    match answer {
        Answer::Later => Ok(None),
        Answer::InputRequired(requests) => {
            Ok(Some(Json::object([("inputRequests", requests), ("resultType", Json::str(modern::INPUT_REQUIRED))])))
        }
        Answer::Refused(refused) => Err(refused),
        Answer::Result(_) | Answer::Failed(_) => unreachable!("results are shaped by their method"),
    }
}

/// A tool result that says the call failed, in words for the model.
pub fn tool_error(why: &str) -> Json {
    let text = Json::object([("text", Json::str(why)), ("type", Json::str("text"))]);
    Json::object([("content", Json::Array(vec![text])), ("isError", Json::Bool(true))])
}

#[cfg(test)]
mod tests;
