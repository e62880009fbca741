//! The native options and the per-client state kept beside the client
//! table.

use std::cell::{OnceCell, RefCell};
use std::rc::Rc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mlua::{Table, UserData, Value};

use super::auth::{auth_token, read_login};
use super::convert::concat_text;
use super::encode::named_entries;
use super::login::LoginState;
use super::lua::{lua_type, Cx, Outcome, Raise};
use super::readers::Reader;
use super::system_text::system_text;
use crate::auth::dpop::Proofs;
use crate::client::{CacheBounds, Client, Ticket};
use crate::codec::{Json, Members};
use crate::era::EraChoice;
use crate::error::Error;
use crate::protocol::{self};
use crate::transport::doorbell::{Descriptor, Doorbell};
use crate::transport::http;
use crate::transport::record::{open_for_recording, Recorded};
use crate::transport::stdio::{self};
use crate::wire::headers;
pub(super) struct ClientState {
    pub(super) options: TransportOptions,
    /// The session core: handshake, requests, pages, restarts.
    pub(super) client: Client,
    /// Tickets of handles collected unsettled: the core forgets them at
    /// the next call (a handle's finaliser cannot reach the client).
    pub(super) forgotten: Rc<RefCell<Vec<Ticket>>>,
}

/// What a transport is opened with, read from `mcp.new`'s options.
pub(super) struct TransportOptions {
    /// `opts.transport_kind`: which HTTP transport a URL client speaks.
    pub(super) http_kind: http::Kind,
    pub(super) timeout: Duration,
    /// `opts.connect_timeout`: the handshake's bound.
    pub(super) connect_timeout: Duration,
    pub(super) headers: Vec<(String, String)>,
    pub(super) ca_pem: Option<Vec<u8>>,
    pub(super) env: Vec<(String, String)>,
    pub(super) cwd: Option<String>,
    pub(super) max_message_bytes: usize,
    /// `opts.max_header_bytes`: the longest header value a request sends.
    pub(super) max_header_bytes: usize,
    /// Methods of server requests that `opts.handlers` answers in Lua.
    pub(super) lua_handled: Vec<String>,
    /// Made on first use: by the first transport, or by `client:fd()`.
    pub(super) doorbell: OnceCell<Arc<Doorbell>>,
    /// `opts.record`: the file every message is appended to.
    pub(super) record: Option<String>,
    /// When `mcp.new` made the client: a recording's times count from it.
    pub(super) made: Instant,
    /// `opts.replay` (`mcp.replay`): the recording that plays the server.
    pub(super) replay: Option<Arc<Mutex<Recorded>>>,
    /// `opts.auth.token`: what HTTP requests carry as `Authorization:
    /// Bearer`. A function's answer is put here before each call.
    pub(super) bearer: Arc<Mutex<Option<String>>>,
    /// `opts.auth` as a login: run when the server refuses a request.
    pub(super) login: Option<RefCell<LoginState>>,
    /// `opts.auth.dpop`: the login's DPoP key, which the transport proves
    /// requests with.
    pub(super) dpop: Option<Arc<Proofs>>,
}

impl TransportOptions {
    /// The client's doorbell, which holds no descriptor until armed.
    pub(super) fn doorbell(&self) -> Arc<Doorbell> {
        self.doorbell.get_or_init(|| Arc::new(Doorbell::new())).clone()
    }

    /// The doorbell, armed: the descriptor it rings is made now if it was
    /// not (`client:fd()`, or a wait on several clients).
    pub(super) fn armed_doorbell(&self) -> Outcome<(Arc<Doorbell>, Descriptor)> {
        let bell = self.doorbell();
        let fd = bell.arm().map_err(|e| Error::Lua(cannot_watch(&e)))?;
        Ok((bell, fd))
    }
}

/// Why the descriptor behind `client:fd()` could not be made.
fn cannot_watch(err: &std::io::Error) -> String {
    #[cfg(unix)]
    if let Some(why) = crate::transport::fds::limit_reached(err) {
        return format!("cannot make a descriptor to watch: {why}");
    }
    format!("cannot make a descriptor to watch: {err}")
}

impl UserData for ClientState {}

pub(super) const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);
/// A server's start and handshake (`opts.connect_timeout`): cold starts
/// measured here took 3.6 s (`uvx`) to 7.6 s (`npx -y`, empty cache).
pub(super) const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(60);

/// Bounds of the numeric options (times are `readers::SECONDS`). A
/// number outside them is refused at `mcp.new` rather than clamped:
/// `timeout = math.maxinteger` once overflowed the deadline arithmetic
/// and panicked; a silent clamp would hide the mistake instead.
pub(super) const MAX_MESSAGE_BYTES_LIMIT: f64 = (1u64 << 40) as f64;

/// The longest header value a request sends by default: the per-field
/// limit of nginx and Apache (8 KiB); node takes 16 KiB for all headers.
pub(super) const DEFAULT_MAX_HEADER_BYTES: usize = 8 << 10;
/// And at most: the HTTP client's own buffer for a request head is not
/// much larger.
pub(super) const MAX_HEADER_BYTES_LIMIT: f64 = 65536.0;

/// `opts.cache`: true (the default), false (keep nothing a modern server
/// allows to be kept), or the cache's bounds, `{ max_entries = N,
/// max_bytes = N }` (either may be left out).
pub(super) fn cache_option(opts: &Table, client: &mut Client) -> Outcome<()> {
    let bounds = match opts.get::<Value>("cache")? {
        Value::Nil | Value::Boolean(true) => return Ok(()),
        Value::Boolean(false) => {
            client.use_cache(false);
            return Ok(());
        }
        Value::Table(t) => t,
        _ => {
            let why = "mcp.new: opts.cache must be a boolean or a table of max_entries and max_bytes";
            return Err(Error::BadInput(why.into()).into());
        }
    };
    let mut chosen = CacheBounds::default();
    let read = Reader::new(&bounds, "mcp.new", "opts.cache");
    let must = "a whole number from 0 to 2^40";
    if let Some(n) = read.whole("max_entries", 0.0, MAX_MESSAGE_BYTES_LIMIT, must)? {
        chosen.max_entries = n as usize;
    }
    if let Some(n) = read.whole("max_bytes", 0.0, MAX_MESSAGE_BYTES_LIMIT, must)? {
        chosen.max_bytes = n as usize;
    }
    client.bound_cache(chosen);
    Ok(())
}

/// `opts.era`: "auto" (the default), "legacy" or "modern".
pub(super) fn era_option(opts: &Table) -> Outcome<EraChoice> {
    Ok(match Reader::new(opts, "mcp.new", "opts").one_of("era", &["auto", "legacy", "modern"])? {
        None | Some(0) => EraChoice::Auto,
        Some(1) => EraChoice::Legacy,
        Some(_) => EraChoice::Modern,
    })
}

pub(super) fn read_options(lua: &Cx, opts: &Table) -> Outcome<ClientState> {
    let read = Reader::new(opts, "mcp.new", "opts");
    let timeout = read.seconds("timeout")?.unwrap_or(DEFAULT_TIMEOUT);
    let connect_timeout = read.seconds("connect_timeout")?.unwrap_or(DEFAULT_CONNECT_TIMEOUT);
    let max_message_bytes = read
        .whole("max_message_bytes", 1.0, MAX_MESSAGE_BYTES_LIMIT, "a whole number of bytes from 1 to 2^40")?
        .map_or(stdio::DEFAULT_MAX_MESSAGE_BYTES, |n| n as usize);
    let max_header_bytes = read
        .whole("max_header_bytes", 1.0, MAX_HEADER_BYTES_LIMIT, "a whole number of bytes from 1 to 65536")?
        .map_or(DEFAULT_MAX_HEADER_BYTES, |n| n as usize);
    let cwd = match read.string("cwd", "a string")? {
        Some(s) => Some(system_text(&s, "opts.cwd")?),
        None => None,
    };
    let env = string_map(opts, "env")?;
    for (name, value) in &env {
        if name.is_empty() || name.contains(['=', '\0']) || value.contains('\0') {
            let why = format!(
                "mcp.new: opts.env.{name} cannot be passed to a process (a name with '=' or NUL, or a value with NUL)"
            );
            return Err(Error::BadInput(why).into());
        }
    }
    // Read now, so a wrong path fails at mcp.new rather than at first use.
    let ca_pem = match read.string("ca_file", "a path")? {
        None => None,
        Some(path) => {
            let path = system_text(&path, "opts.ca_file")?;
            Some(
                std::fs::read(&path)
                    .map_err(|e| Error::BadInput(format!("mcp.new: cannot read opts.ca_file {path}: {e}")))?,
            )
        }
    };
    let headers = string_map(opts, "headers")?;
    for (name, value) in &headers {
        if value.contains(['\r', '\n']) || name.contains(['\r', '\n']) {
            return Err(Error::BadInput(format!(
                "mcp.new: opts.headers.{name} contains CR or LF, which would split the header"
            ))
            .into());
        }
        if name.is_empty() || !name.bytes().all(|b| b.is_ascii_graphic() && b != b':') {
            return Err(Error::BadInput(format!("mcp.new: opts.headers has an invalid header name {name:?}")).into());
        }
        // HTTP allows tabs in a value, and no other control byte.
        if value.bytes().any(|b| (b < 0x20 && b != b'\t') || b == 0x7f) {
            return Err(Error::BadInput(format!(
                "mcp.new: opts.headers.{name} contains a control byte (NUL, DEL or another), which HTTP does not allow"
            ))
            .into());
        }
    }
    let bearer = match auth_token(opts)? {
        Value::String(token) => Some(bearer_text(&token.to_str()?, "opts.auth.token")?),
        _ => None,
    };
    let has_token = bearer.is_some() || matches!(auth_token(opts)?, Value::Function(_));
    if has_token && headers.iter().any(|(name, _)| name.eq_ignore_ascii_case(headers::AUTHORIZATION)) {
        let why = "mcp.new: give opts.auth.token or opts.headers.Authorization, not both";
        return Err(Error::BadInput(why.into()).into());
    }
    let bearer = Arc::new(Mutex::new(bearer));
    let login = read_login(opts, timeout, &ca_pem, &bearer)?;
    let dpop = login.as_ref().and_then(|login| login.authorizer.dpop());
    let login = login.map(|login| RefCell::new(LoginState::new(login)));
    if login.is_some() && headers.iter().any(|(name, _)| name.eq_ignore_ascii_case(headers::AUTHORIZATION)) {
        let why = "mcp.new: give opts.auth or opts.headers.Authorization, not both";
        return Err(Error::BadInput(why.into()).into());
    }
    let lua_handled = handler_methods(opts)?;
    read.function("on_notification")?;
    let capabilities = capabilities_to_declare(lua, opts, &lua_handled)?;
    let mut client = Client::new(timeout, connect_timeout, capabilities);
    client.choose_era(match (era_option(opts)?, read.one_of("transport_kind", &["http", "sse"])?) {
        // HTTP+SSE predates the 2026-07-28 revision: no probe is sent on it.
        (EraChoice::Auto, Some(1)) => EraChoice::Legacy,
        (EraChoice::Modern, Some(1)) => {
            let why = "mcp.new: opts.era = \"modern\" does not go with opts.transport_kind = \"sse\" (the HTTP+SSE transport predates the 2026-07-28 revision)";
            return Err(Error::BadInput(why.into()).into());
        }
        (era, _) => era,
    });
    if let Value::Function(_) = opts.get::<Value>("on_log")? {
        client.ask_for_logs();
    }
    cache_option(opts, &mut client)?;
    let record = match read.string("record", "a file path")? {
        None => None,
        // Opened now as well, so that a path that cannot be written fails
        // here rather than at the first call.
        Some(path) => {
            let path = system_text(&path, "opts.record")?;
            open_for_recording(&path)?;
            Some(path)
        }
    };
    // Read now, so that a missing or damaged recording fails here.
    let replay = match opts.get::<Value>("replay")? {
        Value::Nil => None,
        Value::String(path) => Some(Arc::new(Mutex::new(Recorded::read(&system_text(&path, "opts.replay")?)?))),
        _ => return Err(Error::BadInput("mcp.replay: the recording must be a file path".into()).into()),
    };
    let http_kind = match read.one_of("transport_kind", &["http", "sse"])? {
        None => http::Kind::Auto,
        Some(0) => http::Kind::Streamable,
        Some(_) => http::Kind::Sse,
    };
    let options = TransportOptions {
        http_kind,
        timeout,
        connect_timeout,
        headers,
        ca_pem,
        env,
        cwd,
        max_message_bytes,
        max_header_bytes,
        lua_handled,
        doorbell: OnceCell::new(),
        record,
        made: Instant::now(),
        replay,
        bearer,
        login,
        dpop,
    };
    Ok(ClientState { options, client, forgotten: Rc::default() })
}

/// What the client declares: one capability per server request a handler
/// answers (`{}`), then `opts.capabilities` over them (a capability both
/// name is merged, its settings from `opts`: `elicitation = {form = {},
/// url = {}}`, `sampling = {tools = {}}`, `roots = {listChanged = true}`),
/// then `opts.extensions` as `capabilities.extensions`, and the Skills
/// extension where `opts.skills` asks (a server may serve skills only to
/// a client that says it loads them).
fn capabilities_to_declare(lua: &Cx, opts: &Table, lua_handled: &[String]) -> Outcome<Json> {
    let mut declared: Vec<(Vec<u8>, Json)> = lua_handled
        .iter()
        .filter_map(|m| protocol::capability_for(m))
        .map(|c| (c.as_bytes().to_vec(), Json::Object(vec![])))
        .collect();
    crate::sorting::sort_by(&mut declared, |a, b| a.0.cmp(&b.0));
    declared.dedup_by(|a, b| a.0 == b.0);
    for (name, value) in object_option(lua, opts, "capabilities")? {
        merge_entry(&mut declared, name, value);
    }
    let extensions = object_option(lua, opts, "extensions")?;
    if !extensions.is_empty() {
        merge_entry(&mut declared, b"extensions".to_vec(), Json::Object(extensions));
    }
    let mut declared = Json::Object(declared);
    if Reader::new(opts, "mcp.new", "opts").boolean("skills")? == Some(true) {
        protocol::declare_extension(&mut declared, protocol::SKILLS_EXTENSION);
    }
    Ok(declared)
}

/// `opts[field]`: a table of named entries (empty when absent).
fn object_option(lua: &Cx, opts: &Table, field: &str) -> Outcome<Members> {
    let value = opts.get::<Value>(field)?;
    let refuse = || Error::BadInput(format!("mcp.new: opts.{field} must be a table of named entries"));
    match value {
        Value::Nil => Ok(vec![]),
        Value::Table(t) => named_entries(lua, &format!("opts.{field}"), &t)?.ok_or_else(|| refuse().into()),
        _ => Err(refuse().into()),
    }
}

/// Sets `name` in `entries`; two objects are merged, the new one's keys
/// winning.
fn merge_entry(entries: &mut Vec<(Vec<u8>, Json)>, name: Vec<u8>, value: Json) {
    let Some(at) = entries.iter().position(|(k, _)| *k == name) else {
        entries.push((name, value));
        return;
    };
    match (&mut entries[at].1, value) {
        (Json::Object(old), Json::Object(new)) => {
            for (key, item) in new {
                old.retain(|(k, _)| *k != key);
                old.push((key, item));
            }
        }
        (slot, value) => *slot = value,
    }
}

/// The methods named in `opts.handlers` (method name -> function).
pub(super) fn handler_methods(opts: &Table) -> Outcome<Vec<String>> {
    let bad = || Raise::Mcp(Error::BadInput("mcp.new: opts.handlers must map method names to functions".into()));
    let mut methods = Vec::new();
    match opts.get::<Value>("handlers")? {
        Value::Nil => {}
        Value::Table(t) => {
            for pair in t.pairs::<Value, Value>() {
                match pair? {
                    (Value::String(name), Value::Function(_)) => methods.push(name.to_str()?.to_string()),
                    _ => return Err(bad()),
                }
            }
            crate::sorting::sort(&mut methods);
        }
        _ => return Err(bad()),
    }
    Ok(methods)
}

/// A table of string keys to string values, such as `opts.env`. Anything
/// else is refused naming the key: `env = { 'API_KEY=x' }` once started
/// the server with a variable named `1`.
pub(super) fn string_map(opts: &Table, field: &str) -> Outcome<Vec<(String, String)>> {
    let refuse = |why: String| Raise::Mcp(Error::BadInput(format!("mcp.new: opts.{field} {why}")));
    let mut out = Vec::new();
    match opts.get::<Value>(field)? {
        Value::Nil => {}
        Value::Table(t) => {
            for pair in t.pairs::<Value, Value>() {
                let (k, v) = pair?;
                let name = match &k {
                    Value::String(s) => system_text(s, &format!("a key of opts.{field}"))?,
                    other => {
                        let key = concat_text(other).map(|b| String::from_utf8_lossy(&b).into_owned());
                        let key = key.unwrap_or_else(|| other.type_name().to_string());
                        return Err(refuse(format!(
                            "must map names to strings, as {{ NAME = 'value' }}; key {key} is a {}",
                            lua_type(other)
                        )));
                    }
                };
                let value = match &v {
                    Value::String(s) => system_text(s, &format!("opts.{field}.{name}"))?,
                    other => {
                        return Err(refuse(format!(
                            "must map names to strings; the value for {name} is a {}",
                            lua_type(other)
                        )))
                    }
                };
                out.push((name, value));
            }
            crate::sorting::sort(&mut out);
        }
        _ => return Err(refuse("must be a table of names to strings".into())),
    }
    Ok(out)
}

/// A token as it may go into a header: no CR, LF or other control byte,
/// and never quoted in the refusal (it is a secret).
pub(super) fn bearer_text(token: &str, what: &str) -> Outcome<String> {
    if token.is_empty() || token.bytes().any(|b| b < 0x20 || b == 0x7f) {
        return Err(Error::BadInput(format!("mcp: {what} must be a non-empty token without control bytes")).into());
    }
    Ok(token.to_string())
}

/// `opts.json_types`: a boolean, false when absent. `who` names the
/// function in the refusal.
pub(super) fn json_types_option(opts: &Table, who: &str) -> Outcome<bool> {
    match opts.get::<Value>("json_types")? {
        Value::Nil => Ok(false),
        Value::Boolean(b) => Ok(b),
        other => {
            Err(Error::BadInput(format!("{who}: opts.json_types must be a boolean, got {}", lua_type(&other))).into())
        }
    }
}

/// The particular-notification callbacks from `mcp.new`'s options, as a
/// table (checked: functions or absent).
pub(super) fn callbacks_of(lua: &Cx, opts: &Table) -> Outcome<Table> {
    let callbacks = lua.create_table()?;
    let read = Reader::new(opts, "mcp.new", "opts");
    for name in ["on_log", "on_resource_updated", "on_list_changed"] {
        if let Some(f) = read.function(name)? {
            callbacks.raw_set(name, f)?;
        }
    }
    Ok(callbacks)
}
