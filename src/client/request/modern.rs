//! The 2026-07-28 revision's rules on the one path: what a lost reply
//! may be sent again for, a version the server no longer takes, the
//! methods it removed, the rounds of input a server asks for, the
//! `Mcp-Param-*` headers and the relisting a header mismatch asks for,
//! and what the cache keeps of the results it allows to be kept.

use std::time::{Duration, Instant};

use super::super::cache::{self, CacheMode};
use super::super::{Client, Host};
use super::{Operation, Shape};
use crate::codec::Json;
use crate::error::Error;
use crate::protocol::{self, ResultKind, MODERN_VERSIONS};
use crate::server_text;
use crate::session::Session;
use crate::tool_headers;

/// How often a modern request whose reply stream broke is sent again.
pub(in crate::client) const MAX_REISSUES: usize = 2;

/// The methods that change nothing at the server: one whose reply was
/// lost is sent again without asking anyone.
pub(in crate::client) const CHANGE_NOTHING: &[&[u8]] = &[
    b"server/discover",
    b"ping",
    b"tools/list",
    b"prompts/list",
    b"prompts/get",
    b"resources/list",
    b"resources/templates/list",
    b"resources/read",
    b"completion/complete",
];

/// Rounds of input a request is given before it fails: a server that
/// never finishes is not followed for ever.
pub const MAX_INPUT_ROUNDS: usize = 10;

/// The pause before a round that carries only the server's state (no
/// input was asked for: a server shedding load, or polling for work it
/// started), so that such a server is not asked again at once.
pub(in crate::client) const STATE_ONLY_PAUSE: Duration = Duration::from_millis(250);

impl Client {
    /// Whether `op` may be sent a second time after its reply was lost:
    /// as its caller said (`opts.idempotent`), else when its method
    /// changes nothing, or, for a tool call, when the tool is annotated
    /// read-only or idempotent.
    pub(in crate::client) fn may_repeat(&self, op: &Operation) -> bool {
        if let Some(said) = op.request.idempotent {
            return said;
        }
        // A task's own requests: reading it changes nothing, and a server
        // ignores answers and cancellations it has taken already.
        if op.task.is_some() {
            return true;
        }
        match op.request.method() {
            b"tools/call" => self.tools.schemas.says_repeatable(op.request.tool()),
            method => CHANGE_NOTHING.contains(&method),
        }
    }

    /// A request refused with -32022 (unsupported version) after the
    /// session started: the server was upgraded or restarted as another
    /// release. A modern session takes a version both speak from the
    /// error's `supported` list and the request goes once more, alone; an
    /// older session, whose version `initialize` fixed, is ended so that a
    /// new one finds the version again, when the list names another one
    /// this client speaks. True when the request is worth sending again.
    pub(in crate::client) fn take_version_from(&mut self, op: &Operation, data: Option<&Json>) -> bool {
        let supported: Vec<&[u8]> = data
            .and_then(|d| d.get("supported"))
            .map(|s| {
                s.elements()
                    .filter_map(|v| match v {
                        Json::Str(v) => Some(v.as_slice()),
                        _ => None,
                    })
                    .collect()
            })
            .unwrap_or_default();
        if let Some(envelope) = self.envelope.as_mut() {
            let Some(version) = MODERN_VERSIONS.iter().find(|v| supported.contains(&v.as_bytes())) else {
                return false;
            };
            envelope.version = version.to_string();
            if let Some(session) = self.session.as_mut() {
                session.speak_modern(envelope.clone());
            }
            return true;
        }
        let negotiated = self.initialized.as_ref().and_then(|r| r.get("protocolVersion"));
        let other = supported.iter().any(|v| protocol::is_legacy_version(v) && negotiated != Some(&Json::str(v)));
        if other && op.session == self.session_number {
            self.retire(|_| Error::SessionExpired);
        }
        other
    }

    /// The 2026-07-28 revision removed `ping`, `logging/setLevel` and
    /// `resources/subscribe`. On a modern server `ping` asks
    /// `server/discover` instead, which every modern server answers (a
    /// liveness check all the same); a log level goes in the envelope of
    /// every later request, which is where a modern server reads it; and
    /// a subscription joins the client's listen (see `listen`). True when
    /// `op` settled here.
    pub(in crate::client) fn stand_in_for_removed<H: Host>(
        &mut self,
        host: &mut H,
        op: &mut Operation,
    ) -> Result<bool, H::Error> {
        let method = op.request.method().to_vec();
        if let b"resources/subscribe" | b"resources/unsubscribe" = method.as_slice() {
            self.check_capability(&method)?;
            let uri = match op.request.message.get("params").and_then(|p| p.get("uri")) {
                Some(Json::Str(uri)) => uri.clone(),
                _ => Vec::new(),
            };
            if method == b"resources/subscribe" {
                self.subscribe_uri(uri);
            } else {
                self.unsubscribe_uri(&uri);
            }
            self.keep_listening(host, !op.request.detached)?;
            op.outcome = Some(Ok(Json::Object(vec![])));
            return Ok(true);
        }
        Ok(match op.request.method() {
            b"ping" => {
                let id = op.request.message.get("id").cloned().unwrap_or(Json::Null);
                op.request.message = protocol::request(id, "server/discover", Json::Object(vec![]));
                // A liveness check goes to the server, whatever it allows kept.
                op.request.cache = CacheMode::Bypass;
                false
            }
            b"logging/setLevel" => {
                let level = op.request.message.get("params").and_then(|p| p.get("level")).cloned();
                self.set_log_level(level);
                op.outcome = Some(Ok(Json::Object(vec![])));
                true
            }
            _ => false,
        })
    }

    /// What kind of result a modern server sent (an older one's are all
    /// complete). Input may be asked for only on the requests the
    /// revision names.
    pub(in crate::client) fn result_kind(&self, op: &Operation, result: Json) -> Result<(ResultKind, Json), Error> {
        if Self::is_legacy_task(op, &result) {
            return Ok((ResultKind::Task, result));
        }
        if self.envelope.is_none() || op.request.shape == Shape::Reply {
            return Ok((ResultKind::Complete, result));
        }
        match protocol::result_kind(&result, op.what())? {
            ResultKind::InputRequired if !op.request.may_need_input() => {
                Err(Error::UnknownResultType { what: op.what().to_string(), result_type: "input_required".into() })
            }
            // Only a tool call may become a task (the extension's rule).
            ResultKind::Task if !matches!(op.request.shape, Shape::ToolCall(_)) => {
                Err(Error::UnknownResultType { what: op.what().to_string(), result_type: "task".into() })
            }
            kind => Ok((kind, result)),
        }
    }

    /// A modern server needs input before it can finish (an
    /// `input_required` result). Each input it asks for is answered by the
    /// holder's handlers, as an older server's own requests are, and the
    /// request goes again on a new id with those answers and the server's
    /// state as they came. A round with no input asked for goes after
    /// [`STATE_ONLY_PAUSE`].
    pub(in crate::client) fn answer_input<H: Host>(
        &mut self,
        host: &mut H,
        op: &mut Operation,
        result: &Json,
    ) -> Result<(), H::Error> {
        op.input_rounds += 1;
        if op.input_rounds > MAX_INPUT_ROUNDS {
            op.outcome = Some(Err(Error::InputRounds { what: op.what().to_string(), rounds: MAX_INPUT_ROUNDS }));
            return Ok(());
        }
        let asked = result.get("inputRequests");
        let answers = match asked {
            Some(asked) => match gather_input(host, asked, op.what()) {
                Ok(answers) => Some(answers),
                Err(e) => {
                    op.outcome = Some(Err(e));
                    return Ok(());
                }
            },
            None => None,
        };
        set_input(&mut op.request.message, answers, result.get("requestState").cloned());
        if asked.is_none() {
            let at = Instant::now() + STATE_ONLY_PAUSE;
            op.resend_at = Some(at);
            self.paused_until.push(at);
            return Ok(());
        }
        self.send(host, op)
    }

    /// The `Mcp-Param-*` headers of a modern tool call, from the marks in
    /// the tool's listed `inputSchema` (a tool not listed yet has none: a
    /// server that needs them answers -32020, and the tools are listed).
    pub(in crate::client) fn param_headers(&self, message: &Json) -> Vec<(String, String)> {
        if self.envelope.is_none() || message.get("method") != Some(&Json::str("tools/call")) {
            return Vec::new();
        }
        let Some(params) = message.get("params") else { return Vec::new() };
        let Some(Json::Str(tool)) = params.get("name") else { return Vec::new() };
        let Some(schema) = self.tools.schemas.input(tool) else { return Vec::new() };
        let Ok(declared) = tool_headers::declared(&schema) else { return Vec::new() };
        let arguments = params.get("arguments").cloned().unwrap_or(Json::Null);
        tool_headers::param_headers(&declared, &arguments)
    }

    /// A modern server refused a tool call's headers (-32020, header
    /// mismatch): the tool's schema may have changed, so the tools are
    /// listed again and the call sent once more with the headers the new
    /// list asks for. True when that is under way.
    pub(in crate::client) fn relist_for_headers<H: Host>(
        &mut self,
        host: &mut H,
        op: &mut Operation,
        failure: &Error,
    ) -> Result<bool, H::Error> {
        let header_mismatch = matches!(failure, Error::Rpc { code, .. } if code == "-32020");
        if !header_mismatch
            || self.envelope.is_none()
            || !matches!(op.request.shape, Shape::ToolCall(_))
            || !op.retries.relist()
        {
            return Ok(false);
        }
        self.tools.stale = true;
        self.begin_refresh(host)?;
        op.after_refresh = Some(self.tools.refreshes);
        Ok(true)
    }

    /// Over HTTP a modern client must leave out of a tool list every tool
    /// whose `x-mcp-header` marks break the revision's rules (a gateway
    /// would read its headers wrong), and say which and why.
    pub(in crate::client) fn leave_out_invalid_headers<H: Host>(&self, host: &mut H, pages: &mut [Json]) {
        if self.envelope.is_none() || !self.session.as_ref().is_some_and(Session::carries_headers) {
            return;
        }
        for page in pages.iter_mut() {
            let Some(Json::Array(tools)) = page.get("tools") else { continue };
            let invalid: Vec<(usize, String)> = tools
                .iter()
                .enumerate()
                .filter_map(|(i, tool)| {
                    let schema = tool.get("inputSchema")?;
                    let why = tool_headers::declared(schema).err()?;
                    let name = server_text::quoted_value(tool.get("name"), server_text::ITEM_CHARS);
                    Some((i, format!("excluding tool '{name}' from tools/list: invalid x-mcp-header ({why})")))
                })
                .collect();
            if invalid.is_empty() {
                continue;
            }
            page.materialize();
            if let Some(Json::Array(tools)) = page.get_mut("tools") {
                let mut at = 0;
                tools.retain(|_| {
                    at += 1;
                    !invalid.iter().any(|(i, _)| *i == at - 1)
                });
            }
            for (_, warning) in &invalid {
                host.warn(warning);
            }
        }
    }

    /// A request a fresh cache entry answers settles at once, with no id
    /// taken and nothing sent; a tool list so answered is learnt as a
    /// listed one is. True when it did.
    pub(in crate::client) fn answer_from_cache(&mut self, op: &mut Operation) -> bool {
        if self.envelope.is_none() || !self.cache.on {
            return false;
        }
        op.cache_key = op.request.cache_key();
        let refresh = op.request.cache == CacheMode::Refresh || op.request.shape == (Shape::Tools { refresh: true });
        let Some(key) = op.cache_key.as_ref().filter(|_| !refresh) else { return false };
        op.cached_under = self.credentials;
        let Some(outcome) = self.cache.get(key, self.credentials) else { return false };
        if let (Shape::Tools { .. }, Json::Array(pages)) = (&op.request.shape, &outcome) {
            self.listed(pages, false);
        }
        op.outcome = Some(Ok(outcome));
        true
    }

    /// What a result allows, joined with what the request's other results
    /// (a list's pages) allowed.
    pub(in crate::client) fn note_hints(&self, op: &mut Operation, result: &Json) {
        if op.cache_key.is_none() {
            return;
        }
        match (cache::hints_of(result), op.hints) {
            (None, _) => op.unhinted = true,
            (Some(hints), None) => op.hints = Some(hints),
            (Some(hints), Some(before)) => op.hints = Some(before.join(hints)),
        }
    }

    /// Keeps `op`'s outcome when every result allowed it. Never one that
    /// took rounds of input: its result answered that exchange alone.
    pub(in crate::client) fn keep_outcome(&mut self, op: &Operation) {
        let (Some(key), Some(hints), Some(Ok(outcome))) = (&op.cache_key, op.hints, &op.outcome) else { return };
        // Kept for the credentials it was fetched with, and not at all if
        // they changed on the way (a login between two pages).
        if op.unhinted || op.input_rounds > 0 || !self.cache.on || op.credentials != op.cached_under {
            return;
        }
        let uri = match op.request.message.get("params").and_then(|p| p.get("uri")) {
            Some(Json::Str(uri)) if op.request.method() == b"resources/read" => Some(uri.clone()),
            _ => None,
        };
        let method = op.request.method().to_vec();
        self.cache.put(key.clone(), &method, uri, outcome.clone(), hints, op.credentials);
    }
}

/// Answers each of a server's input requests (`{KEY: {method, params}}`)
/// through the holder's handlers: `{KEY: result}`, or why one could not
/// be given (one failure fails the call, as it would in the older way).
pub(in crate::client) fn gather_input<H: Host>(host: &mut H, asked: &Json, what: &str) -> Result<Json, Error> {
    let mut asked = asked.clone();
    asked.materialize();
    let Json::Object(requests) = asked else {
        let why = "its inputRequests is not an object".to_string();
        return Err(Error::InputNotGiven { what: what.to_string(), method: "input".into(), why });
    };
    let mut answers = Vec::new();
    for (key, request) in requests {
        let method = match request.get("method") {
            Some(Json::Str(m)) => String::from_utf8_lossy(m).into_owned(),
            _ => {
                let why =
                    format!("input request {} names no method", server_text::quoted(&key, server_text::ITEM_CHARS));
                return Err(Error::InputNotGiven { what: what.to_string(), method: "input".into(), why });
            }
        };
        let params = request.get("params").cloned().unwrap_or(Json::Object(vec![]));
        let message = protocol::request(Json::Str(key.clone()), &method, params);
        let mut answer = host.request(&message);
        if let Some(result) = answer.take("result") {
            answers.push((key, result));
            continue;
        }
        let error = answer.get("error");
        // The method is the server's text: quoted, bounded, in the error.
        let method = server_text::quoted_str(&method, server_text::ITEM_CHARS);
        let why = match error.and_then(|e| e.get("code")) {
            Some(Json::Int(-32601)) => format!("there is no handler for it (set opts.handlers[\"{method}\"])"),
            _ => server_text::quoted_value(error.and_then(|e| e.get("message")), server_text::TEXT_CHARS),
        };
        return Err(Error::InputNotGiven { what: what.to_string(), method, why });
    }
    Ok(Json::Object(answers))
}

/// The next round's params: the first round's, with this round's answers
/// (none when none were asked for) and the server's state echoed as it
/// came (none when it sent none).
pub(in crate::client) fn set_input(message: &mut Json, answers: Option<Json>, state: Option<Json>) {
    message.materialize();
    let Some(params) = message.get_mut("params") else { return };
    params.materialize();
    let Json::Object(pairs) = params else { return };
    pairs.retain(|(k, _)| k != b"inputResponses" && k != b"requestState");
    if let Some(answers) = answers {
        pairs.push((b"inputResponses".to_vec(), answers));
    }
    if let Some(state) = state {
        pairs.push((b"requestState".to_vec(), state));
    }
}
