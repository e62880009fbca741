//! What the core asks of Lua ([`LuaHost`], its `Host` and `Peer`): the
//! client's ids and fields, its transports opened as the options say
//! (stdio, HTTP, recorded or replayed), its handlers for server requests,
//! its notification callbacks, and the login's callbacks and store.

use std::cell::RefCell;
use std::rc::Rc;

use mlua::{Function, Table, Value};

use super::auth::{Login, LuaStore, LuaUser};
use super::boundary::{callback_failed, listener_failed};
use super::decode::{to_lua, to_lua_opt};
use super::encode::encode_lua;
use super::entry::{Entry, EntryRef, Listeners};
use super::fields::{apply_initialize, client_info, initialize_request, next_id};
use super::login::Refusal;
use super::lua::{call_lua, lua_tostring, truthy, Cx, Outcome, Raise};
use super::options::TransportOptions;
use super::system_text::system_text;
use crate::auth::store::Store;
use crate::client::{warn_on_stderr, Host, Ticket};
use crate::codec::Json;
use crate::era::Verdict;
use crate::error::Error;
use crate::protocol::{self};
use crate::session::Peer;
use crate::transport::http::{self, Http};
use crate::transport::record::{Recording, Replay};
use crate::transport::stdio::{self, Launch, Stdio};
use crate::transport::Transport;
pub(super) fn launch_of(command: &Value) -> Outcome<Launch> {
    let bad = || Raise::Mcp(Error::BadInput("mcp: command must be a string or an array of strings".into()));
    match command {
        Value::String(s) => Ok(Launch::Shell(system_text(s, "opts.command")?)),
        Value::Table(t) => {
            let mut argv = Vec::new();
            for v in t.sequence_values::<Value>() {
                match v? {
                    Value::String(s) => argv.push(system_text(&s, &format!("opts.command[{}]", argv.len() + 1))?),
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

pub(super) fn open_transport(client: &Table, options: &TransportOptions) -> Outcome<Box<dyn Transport>> {
    let transport = open_server(client, options)?;
    Ok(match &options.record {
        Some(path) => Box::new(Recording::open(transport, path, options.made)?),
        None => transport,
    })
}

pub(super) fn open_server(client: &Table, options: &TransportOptions) -> Outcome<Box<dyn Transport>> {
    if let Some(recorded) = &options.replay {
        return Ok(Box::new(Replay::new(recorded.clone(), Some(options.doorbell()))));
    }
    if let Value::String(url) = client.get::<Value>("url")? {
        let http_options = http::Options {
            url: url.to_str()?.to_string(),
            headers: options.headers.clone(),
            timeout: options.timeout,
            connect_timeout: options.connect_timeout,
            max_message_bytes: options.max_message_bytes,
            max_header_bytes: options.max_header_bytes,
            ca_pem: options.ca_pem.clone(),
            bearer: options.bearer.clone(),
            login: options.login.is_some(),
            dpop: options.dpop.clone(),
            lua_handled: options.lua_handled.clone(),
            doorbell: Some(options.doorbell()),
            kind: options.http_kind,
        };
        return Ok(Box::new(Http::connect(http_options)?));
    }
    let command: Value = client.get("command")?;
    if !truthy(&command) {
        return Err(Error::BadInput("mcp: the client has no command, url or transport".into()).into());
    }
    let stdio_options = stdio::Options {
        launch: launch_of(&command)?,
        env: options.env.clone(),
        cwd: options.cwd.clone(),
        max_message_bytes: options.max_message_bytes,
        lua_handled: options.lua_handled.clone(),
        doorbell: Some(options.doorbell()),
    };
    Ok(Box::new(Stdio::spawn(&stdio_options)?))
}

/// What names the server this client starts, from one process to the
/// next: the command line with the environment and directory it is given
/// (the same command may start another server elsewhere), or the URL. A
/// replay names nothing: its era is whatever the recording holds.
pub(super) fn server_key(client: &Table, options: &TransportOptions) -> Outcome<Option<String>> {
    if options.replay.is_some() {
        return Ok(None);
    }
    if let Value::String(url) = client.get::<Value>("url")? {
        return Ok(Some(format!("url {}", url.to_str()?)));
    }
    let command = match launch_of(&client.get::<Value>("command")?)? {
        Launch::Shell(line) => format!("sh {line}"),
        Launch::Argv(argv) => format!("argv {}", argv.join("\u{0}")),
    };
    let env: Vec<String> = options.env.iter().map(|(k, v)| format!("{k}={v}")).collect();
    let cwd = options.cwd.as_deref().unwrap_or("");
    Ok(Some(format!("{command}\u{0}cwd {cwd}\u{0}env {}", env.join("\u{0}"))))
}

/// The Lua side of a live client: its table (ids, fields, command or url),
/// its options, and its callbacks for what the server starts.
pub(super) struct LuaHost<'a, 'b> {
    pub(super) lua: &'a Cx<'b>,
    pub(super) table: &'a Table,
    pub(super) options: &'a TransportOptions,
    pub(super) forgotten: &'a Rc<RefCell<Vec<Ticket>>>,
    /// The entry's listeners, once a message needed one.
    pub(super) listeners: std::cell::OnceCell<Listeners>,
    /// The client's entry (for the login's callbacks).
    pub(super) entry: EntryRef<'a>,
    /// Notifications kept for the caller too (`client:exchange` returns
    /// them, as the reference does).
    pub(super) collected: Option<Vec<Json>>,
    /// Lua callbacks run for the server (notifications, handlers).
    pub(super) ran: usize,
}

impl LuaHost<'_, '_> {
    fn listeners(&self) -> &Listeners {
        self.listeners.get_or_init(|| self.entry.listeners())
    }

    /// Calls `on_progress` for each progress notification of the request
    /// whose progress token is `token` (its id).
    pub(super) fn watch_progress(&mut self, token: &Json, on_progress: Function) -> Outcome<()> {
        if let Some(progress) = &self.listeners().progress {
            progress.raw_set(to_lua(self.lua, token)?, on_progress)?;
        }
        Ok(())
    }

    pub(super) fn forget_progress(&mut self, token: &Json) {
        if let (Some(progress), Ok(key)) = (&self.listeners().progress, to_lua(self.lua, token)) {
            let _ = progress.raw_set(key, Value::Nil);
        }
    }

    /// A progress notification, to the request's `on_progress`:
    /// (progress, total, message).
    fn progressed(&mut self, note: &Json) {
        let (Some(progress), Some(params)) = (self.listeners().progress.clone(), note.get("params")) else { return };
        let Ok(token) = to_lua_opt(self.lua, params.get("progressToken")) else { return };
        if matches!(token, Value::Nil) {
            return;
        }
        let Ok(Some(callback)) = progress.raw_get::<Option<Function>>(token) else { return };
        self.ran += 1;
        let field = |name: &str| to_lua_opt(self.lua, params.get(name)).unwrap_or(Value::Nil);
        if let Err(Raise::Lua(error)) =
            call_lua(self.lua, callback, (field("progress"), field("total"), field("message")))
        {
            callback_failed(error);
        }
    }
}

impl Host for LuaHost<'_, '_> {
    type Error = Raise;

    /// Runs the login `opts.auth` describes (see `crate::auth`).
    fn authorize(&mut self, refusal: &Error, again: bool) -> Outcome<bool> {
        let (Error::Unauthorized { status, www_authenticate, .. }, Some(login)) = (refusal, &self.options.login) else {
            return Ok(false);
        };
        let mut login = login.borrow_mut();
        // The core waits for a login running beside Lua before it asks
        // for another.
        let Some(Login { authorizer, file }) = login.idle() else { return Ok(false) };
        let mut user = LuaUser { lua: self.lua, authorize: self.entry.authorize_callback()?, raised: None };
        let mut table = match self.entry.store_table()? {
            Some(table) => Some(LuaStore { lua: self.lua, table, raised: None }),
            None => None,
        };
        let store: Option<&mut dyn Store> = match (file.as_mut(), table.as_mut()) {
            (Some(file), _) => Some(file),
            (None, Some(table)) => Some(table),
            (None, None) => None,
        };
        let outcome = authorizer.recover(*status, www_authenticate.as_deref(), again, &mut user, store);
        // What a callback raised goes back to the caller unchanged.
        if let Some(raised) = user.raised.take().or_else(|| table.and_then(|mut t| t.raised.take())) {
            return Err(raised);
        }
        Ok(outcome?)
    }

    /// Runs the login on a thread of its own (see `login`).
    fn begin_login(&mut self, refusal: &Error, again: bool) -> Outcome<bool> {
        let (Error::Unauthorized { status, www_authenticate, .. }, Some(login)) = (refusal, &self.options.login) else {
            return Ok(false);
        };
        let refusal = Refusal { status: *status, www_authenticate: www_authenticate.as_deref(), again };
        let lua_store = self.entry.store_table()?.is_some();
        let bell = self.options.doorbell();
        Ok(login.borrow_mut().begin(refusal, lua_store, bell))
    }

    /// Answers what the login's thread asks (`opts.auth.authorize`, the
    /// store's functions), here on the Lua thread.
    fn login_ended(&mut self) -> Outcome<Option<bool>> {
        let Some(login) = &self.options.login else { return Ok(Some(false)) };
        let (authorize, store) = (self.entry.authorize_callback()?, self.entry.store_table()?);
        login.borrow_mut().poll(self.lua, authorize, store)
    }

    fn next_id(&mut self) -> Outcome<Json> {
        next_id(self.lua, self.table)
    }

    /// A callback's error goes to the caller the way one raised while an
    /// async request was moved on does (see `callback_failed`).
    fn settle_error(&mut self, raised: &Raise) -> Error {
        match raised {
            Raise::Mcp(e) => e.clone(),
            Raise::Lua(error) => {
                callback_failed(error.clone());
                Error::Lua(
                    "a Lua callback raised an error before this request could be sent; \
                     dispatch (or the wait that ran it) raised that error"
                        .into(),
                )
            }
        }
    }

    fn initialize_request(&mut self, id: Json, capabilities: Json) -> Outcome<Json> {
        initialize_request(self.lua, self.table, id, capabilities)
    }

    fn open(&mut self) -> Outcome<Box<dyn Transport>> {
        open_transport(self.table, self.options)
    }

    /// When the holder has `on_list_changed` (a watched mount sets one
    /// too): a modern server then tells of prompt and resource lists.
    fn listens_for_list_changes(&self) -> bool {
        self.listeners()
            .callbacks
            .as_ref()
            .is_some_and(|c| c.raw_get::<Option<Function>>("on_list_changed").ok().flatten().is_some())
    }

    /// To `on_log`, as a log message from the client itself (logger
    /// "lua-mcp"), or to stderr when there is none.
    fn warn(&mut self, message: &str) {
        let on_log =
            self.listeners().callbacks.as_ref().and_then(|c| c.raw_get::<Option<Function>>("on_log").ok().flatten());
        let Some(on_log) = on_log else {
            warn_on_stderr(message);
            return;
        };
        let params = Json::object([
            ("data", Json::str(message)),
            ("level", Json::str("warning")),
            ("logger", Json::str("lua-mcp")),
        ]);
        self.ran += 1;
        if let Ok(params) = to_lua(self.lua, &params) {
            if let Err(Raise::Lua(error)) = call_lua(self.lua, on_log, params) {
                listener_failed(error);
            }
        }
    }

    fn client_info(&mut self) -> Outcome<Json> {
        client_info(self.lua)
    }

    fn server_key(&mut self) -> Option<String> {
        server_key(self.table, self.options).ok().flatten()
    }

    fn established(&mut self, result: &Json, session_id: Option<String>, era: &Verdict) -> Outcome<()> {
        apply_initialize(self.lua, self.table, result)?;
        self.table.set("era", if matches!(era, Verdict::Legacy) { "legacy" } else { "modern" })?;
        // Live sessions only: through the fixture seam the client's fields
        // stay exactly the reference's.
        self.table.set("server_capabilities", to_lua_opt(self.lua, result.get("capabilities"))?)?;
        self.table.set("instructions", to_lua_opt(self.lua, result.get("instructions"))?)?;
        if let Some(session_id) = session_id {
            self.table.set("session_id", session_id)?;
        }
        Ok(())
    }
}

/// Where a live session hands what the server starts: notifications to
/// `opts.on_notification`, forwarded requests to `opts.handlers`.
impl Peer for LuaHost<'_, '_> {
    /// The callback for its kind first (`on_log` gets the params,
    /// `on_resource_updated` the uri, `on_list_changed` "tools",
    /// "resources" or "prompts"), then `on_notification` with the whole
    /// message. A listener's error is dropped (see `listener_failed`).
    fn notification(&mut self, note: Json) {
        if let Some(collected) = self.collected.as_mut() {
            collected.push(note.clone());
        }
        let method = match note.get("method") {
            Some(Json::Str(m)) => m.as_slice(),
            _ => b"",
        };
        if method == b"notifications/progress" {
            self.progressed(&note);
        }
        let list = |kind: &str| Some(("on_list_changed", Some(Json::str(kind))));
        let particular = match method {
            b"notifications/message" => Some(("on_log", note.get("params").cloned())),
            b"notifications/resources/updated" => {
                Some(("on_resource_updated", note.get("params").and_then(|p| p.get("uri")).cloned()))
            }
            b"notifications/tools/list_changed" => list("tools"),
            b"notifications/resources/list_changed" => list("resources"),
            b"notifications/prompts/list_changed" => list("prompts"),
            _ => None,
        };
        if let (Some((name, argument)), Some(callbacks)) = (particular, self.listeners().callbacks.clone()) {
            if let Ok(Some(callback)) = callbacks.raw_get::<Option<Function>>(name) {
                self.ran += 1;
                if let Ok(argument) = to_lua_opt(self.lua, argument.as_ref()) {
                    if let Err(Raise::Lua(error)) = call_lua(self.lua, callback, argument) {
                        listener_failed(error);
                    }
                }
            }
        }
        let Some(callback) = self.listeners().on_notification.clone() else { return };
        self.ran += 1;
        if let Ok(msg) = to_lua(self.lua, &note) {
            if let Err(Raise::Lua(error)) = call_lua(self.lua, callback, msg) {
                listener_failed(error);
            }
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
        let handler = self
            .listeners()
            .handlers
            .as_ref()
            .and_then(|h| h.raw_get::<Option<Function>>(method.as_str()).ok().flatten());
        let Some(handler) = handler else {
            return protocol::answer_server_request(msg).unwrap_or(Json::Null);
        };
        self.ran += 1;
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
                result => match encode_lua(self.lua, "result", &result) {
                    Ok(json) => protocol::response(id, json),
                    Err(Raise::Mcp(e)) => failure(e.to_string()),
                    Err(Raise::Lua(_)) => failure(format!("the handler for {method} failed")),
                },
            },
            Err(Raise::Lua(err)) => {
                // The server is answered either way; the host's interrupt
                // also reaches the caller, since a handler may run long
                // (sampling asks a model) and Ctrl-C then lands in it.
                listener_failed(err.clone());
                match lua_tostring(self.lua, err) {
                    Ok(bytes) => failure(String::from_utf8_lossy(&bytes).into_owned()),
                    Err(_) => failure(format!("the handler for {method} failed")),
                }
            }
            Err(Raise::Mcp(e)) => failure(e.to_string()),
        }
    }
}

/// A token about to expire is refreshed before the call rather than
/// refused during it (a refusal of an async request cannot be retried).
pub(super) fn refresh_before_call(lua: &Cx, entry: &Entry, login: &mut Login) -> Outcome<()> {
    let Login { authorizer, file } = login;
    match (file.as_mut(), entry.store_table()?) {
        (Some(file), _) => authorizer.refresh_if_expiring(Some(file)),
        (None, Some(table)) => authorizer.refresh_if_expiring(Some(&mut LuaStore { lua, table, raised: None })),
        (None, None) => authorizer.refresh_if_expiring(None),
    }
    Ok(())
}
