//! Long-lived sessions, stdio and HTTP: started lazily, handshaken once,
//! restarted when the transport dies or the HTTP session expires.

use super::*;

pub(super) fn launch_of(command: &Value) -> Outcome<Launch> {
    let bad = || Raise::Mcp(Error::BadInput("mcp: command must be a string or an array of strings".into()));
    match command {
        Value::String(s) => Ok(Launch::Shell(s.to_str()?.to_string())),
        Value::Table(t) => {
            let mut argv = Vec::new();
            for v in t.sequence_values::<Value>() {
                match v? {
                    Value::String(s) => argv.push(s.to_str()?.to_string()),
                    _ => return Err(bad()),
                }
            }
            if argv.is_empty() {
                return Err(bad());
            }
            Ok(Launch::Argv(argv))
        }
        _ => Err(bad()),
    }
}

pub(super) fn open_transport(client: &Table, state: &ClientState) -> Outcome<Box<dyn Transport>> {
    if let Value::String(url) = client.get::<Value>("url")? {
        let options = http::Options {
            url: url.to_str()?.to_string(),
            headers: state.headers.clone(),
            timeout: state.timeout,
            max_message_bytes: state.max_message_bytes,
            ca_pem: state.ca_pem.clone(),
            forward: state.forward.clone(),
        };
        return Ok(Box::new(Http::connect(options)?));
    }
    let command: Value = client.get("command")?;
    if !truthy(&command) {
        return Err(Error::BadInput("mcp: the client has no command, url or transport".into()).into());
    }
    let options = stdio::Options {
        launch: launch_of(&command)?,
        env: state.env.clone(),
        cwd: state.cwd.clone(),
        max_message_bytes: state.max_message_bytes,
        forward: state.forward.clone(),
    };
    Ok(Box::new(Stdio::spawn(&options)?))
}

/// Runs `request` on the client's live session, starting the session
/// (process and handshake) first if there is none or the last one broke.
pub(super) fn with_session<T>(
    lua: &Cx,
    client: &Table,
    mut request: impl FnMut(&mut Session, &mut dyn Peer, Duration) -> Outcome<T>,
) -> Outcome<T> {
    let Some(beside) = state_of(lua, client)? else {
        return Err(Error::BadInput("MCP: this client was not made by mcp.new".into()).into());
    };
    let mut state = beside.state.borrow_mut::<ClientState>().map_err(|_| {
        Error::BadInput("MCP: the client is already busy (called again from on_notification or a handler?)".into())
    })?;
    let mut peer = LuaPeer { lua, on_notification: beside.on_notification.clone(), handlers: beside.handlers.clone() };
    let timeout = state.timeout;
    // An HTTP server may forget a session (404): then one new session,
    // and the request sent once more. Any other failure is final.
    let mut retried = false;
    loop {
        if state.session.as_ref().is_some_and(|s| s.broken) {
            // Dropping hands a dead server to a background reaper.
            state.session = None;
        }
        if state.session.is_none() {
            state.session = Some(handshake(lua, client, &state, &mut peer)?);
        }
        let session = state.session.as_mut().expect("a session was just set");
        match request(session, &mut peer, timeout) {
            Err(Raise::Mcp(Error::SessionExpired)) if !retried => {
                retried = true;
                state.session = None;
            }
            other => return other,
        }
    }
}

/// Where a live session hands what the server starts: notifications to
/// `opts.on_notification`, forwarded requests to `opts.handlers`.
struct LuaPeer<'a, 'b> {
    lua: &'a Cx<'b>,
    on_notification: Option<Function>,
    handlers: Option<Table>,
}

impl Peer for LuaPeer<'_, '_> {
    fn notification(&mut self, note: Json) {
        let Some(callback) = &self.on_notification else { return };
        if let Ok(msg) = to_lua(self.lua, &note) {
            // A failing callback must not break the client.
            let _ = call_lua(self.lua, callback.clone(), msg);
        }
    }

    /// Calls the handler with the request's params. It returns the result
    /// (a table), or nil and a message, or raises: the last two become a
    /// JSON-RPC error the server can read.
    fn request(&mut self, msg: &Json) -> Json {
        let id = msg.get("id").cloned().unwrap_or(Json::Null);
        let method = match msg.get("method") {
            Some(Json::Str(m)) => String::from_utf8_lossy(m).into_owned(),
            _ => String::new(),
        };
        let handler =
            self.handlers.as_ref().and_then(|h| h.raw_get::<Option<Function>>(method.as_str()).ok().flatten());
        let Some(handler) = handler else {
            return protocol::answer_server_request(msg).unwrap_or(Json::Null);
        };
        let params = to_lua_opt(self.lua, msg.get("params")).unwrap_or(Value::Nil);
        let outcome = call_lua(self.lua, handler, params);
        let failure = |text: String| protocol::error_response(id.clone(), -32603, &text);
        match outcome {
            Ok(mut values) => match values.pop_front().unwrap_or(Value::Nil) {
                Value::Nil => {
                    let why = values.pop_front().map(|v| lua_tostring(self.lua, v));
                    let why = match why {
                        Some(Ok(bytes)) => String::from_utf8_lossy(&bytes).into_owned(),
                        _ => format!("the handler for {method} returned nothing"),
                    };
                    failure(why)
                }
                result => match Encoder::convert(self.lua, "result", &result) {
                    Ok(json) => protocol::response(id, json),
                    Err(Raise::Mcp(e)) => failure(e.to_string()),
                    Err(Raise::Lua(_)) => failure(format!("the handler for {method} failed")),
                },
            },
            Err(Raise::Lua(err)) => match lua_tostring(self.lua, err) {
                Ok(bytes) => failure(String::from_utf8_lossy(&bytes).into_owned()),
                Err(_) => failure(format!("the handler for {method} failed")),
            },
            Err(Raise::Mcp(e)) => failure(e.to_string()),
        }
    }
}

/// A new session: transport opened, initialize answered, initialized sent.
pub(super) fn handshake(lua: &Cx, client: &Table, state: &ClientState, peer: &mut dyn Peer) -> Outcome<Session> {
    let mut session = Session::new(open_transport(client, state)?);
    let id = next_id(client)?;
    let mut capabilities: Vec<(&str, Json)> =
        state.forward.iter().filter_map(|m| protocol::capability_for(m)).map(|c| (c, Json::Object(vec![]))).collect();
    capabilities.sort_by(|a, b| a.0.cmp(b.0));
    capabilities.dedup_by(|a, b| a.0 == b.0);
    let init = initialize_request(lua, client, id.clone(), Json::object(capabilities))?;
    let reply = session.request(&id, &init, state.timeout, "initialize", peer)?;
    let result = result_of(Some(reply), "initialize")?;
    check_version(&result)?;
    apply_initialize(lua, client, &result)?;
    if let Some(session_id) = session.session_id() {
        client.set("session_id", session_id)?;
    }
    if let Some(Json::Str(version)) = result.get("protocolVersion") {
        session.established(&String::from_utf8_lossy(version));
    }
    session.notify(&initialized_notice())?;
    Ok(session)
}

pub(super) fn check_version(result: &Json) -> Outcome<()> {
    match result.get("protocolVersion") {
        Some(Json::Str(v)) if SUPPORTED_VERSIONS.iter().any(|s| s.as_bytes() == v.as_slice()) => Ok(()),
        chosen => Err(Error::UnsupportedVersion {
            chosen: protocol::lua_text(chosen),
            supported: SUPPORTED_VERSIONS.join(", "),
        }
        .into()),
    }
}

/// Pages of `tools/list` are followed while the server hands out a new
/// cursor; a server that repeats its cursor is not followed round again.
pub(super) const MAX_TOOL_PAGES: usize = 100;

pub(super) fn discover_session(lua: &Cx, client: &Table) -> Outcome {
    let pages = with_session(lua, client, |session, peer, timeout| {
        let mut pages: Vec<Json> = Vec::new();
        let mut cursor: Option<Json> = None;
        loop {
            let id = next_id(client)?;
            let params = match &cursor {
                Some(c) => Json::object([("cursor", c.clone())]),
                None => Json::Object(vec![]),
            };
            let request = protocol::request(id.clone(), "tools/list", params);
            let reply = session.request(&id, &request, timeout, "tools/list", peer)?;
            let listed = result_of(Some(reply), "tools/list")?;
            let next = listed.get("nextCursor").filter(|c| matches!(c, Json::Str(_))).cloned();
            pages.push(listed);
            if next.is_none() || next == cursor || pages.len() >= MAX_TOOL_PAGES {
                return Ok(pages);
            }
            cursor = next;
        }
    })?;
    if pages.len() == 1 {
        return store_tools(lua, client, pages[0].get("tools").filter(|t| t.is_truthy()));
    }
    // Moved out of the pages, not copied: a tool list can be large.
    let mut all = Vec::new();
    for mut page in pages {
        if let Some(Json::Array(tools)) = page.take("tools") {
            all.extend(tools.into_iter().filter(|t| !matches!(t, Json::Null)));
        }
    }
    store_tools(lua, client, Some(&Json::Array(all)))
}

pub(super) fn call_session(lua: &Cx, client: &Table, name: &Value, args: &Value) -> Outcome {
    let what = tool_label(name)?;
    let params = call_params(lua, name, args)?;
    let result = with_session(lua, client, |session, peer, timeout| {
        let id = next_id(client)?;
        let request = protocol::request(id.clone(), "tools/call", params.clone());
        let reply = session.request(&id, &request, timeout, &what, peer)?;
        Ok(result_of(Some(reply), &what)?)
    })?;
    call_return(lua, result)
}
