//! `mcp.server`: Lua functions served as tools, resources and prompts.
//! The protocol is the core's (`crate::server`); here, what is Lua's: the
//! definitions read from Lua tables (`input_schema` as `inputSchema`),
//! and, each in its file, the serving loop on the Lua thread where every
//! handler runs (`serving`), the handlers called (`handlers`), what they
//! return made into the protocol's results (`results`), and the `ctx` a
//! handler talks to its client through (`context`).

mod context;
mod handlers;
mod outgoing;
mod results;
mod serving;

pub(super) use context::{
    ctx_ask, ctx_cancelled, ctx_client_can, ctx_close_stream, ctx_finish, ctx_notify, ctx_request, ctx_task_ask,
};
use outgoing::send_notices;
pub(super) use serving::{serve_stdio, server_dispatch, server_fd, server_listen, server_run};

use std::cell::{Cell, RefCell};
use std::sync::Arc;
use std::time::{Duration, Instant};

use mlua::{Function, MultiValue, Table, UserData, Value};

use super::encode::encode_lua;
use super::lua::{arg, Cx, Outcome};
use super::readers::Reader;
use crate::codec::Json;
use crate::error::Error;
use crate::server::catalog::Kind;
use crate::server::channel::Channel;
use crate::server::http::listener::Shared;
use crate::server::skills::Skill;
use crate::server::{Facts, Server};

/// The longest line the server reads, unless `opts.max_message_bytes`
/// says otherwise.
const DEFAULT_MAX_MESSAGE_BYTES: usize = 16 << 20;

/// How long a handler waits for the client to answer the server's own
/// request (`ctx:elicit`, ...), unless `opts.request_timeout` says.
const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(300);

/// One handler and what shaping its return needs.
#[derive(Clone)]
struct Slot {
    function: Function,
    /// A tool with an output schema: a plain table is its structured content.
    structured: bool,
    /// A resource's (or template's) `uri` and `mimeType`, for its contents.
    mime_type: Option<Json>,
    /// A prompt's or template's `complete`: argument name -> list or function.
    complete: Option<Table>,
    /// A tool that may run as a task (`execution.taskSupport`).
    task: bool,
}

/// A server, kept in its Lua object as `_state`.
pub(super) struct ServerState {
    core: RefCell<Server>,
    slots: RefCell<Vec<Slot>>,
    /// Additions made while a request is being answered (a handler that
    /// adds a tool): applied once it is.
    deferred: RefCell<Vec<Change>>,
    channel: RefCell<Option<Channel>>,
    /// Requests to clients whose answers go to a callback.
    asked: RefCell<Vec<Asked>>,
    /// How the handler running now ended its request when it could not
    /// go on: input its 2026-07-28 client must give first, or a refusal.
    outcome: RefCell<Option<crate::server::Answer>>,
    /// Questions tasks' handlers asked (by the key of the request that
    /// made the task), not yet handed to the core, and the callbacks
    /// their answers go to.
    task_questions: RefCell<Vec<(u64, Vec<u8>, Json)>>,
    task_callbacks: RefCell<Vec<(u64, Vec<u8>, Function)>>,
    /// Answers given by `ctx:finish`, not sent yet.
    answered_later: RefCell<Vec<LaterAnswer>>,
    /// Over HTTP: what the poll thread shares (the doorbell of `fd()`).
    http: RefCell<Option<Arc<Shared>>>,
    /// What the core knew of the client whose request is being answered
    /// (the core itself is busy meanwhile).
    facts: RefCell<Facts>,
    max_message_bytes: usize,
    request_timeout: Duration,
    closed: Cell<bool>,
}

/// A request of the server's to a client, whose answer goes to `callback`
/// (`ctx:request` with one), unless `until` passes first.
struct Asked {
    id: Json,
    method: String,
    callback: Function,
    until: Instant,
}

/// An answer given by `ctx:finish`, for the request on `route`.
struct LaterAnswer {
    route: crate::server::link::Route,
    id: Json,
    method: String,
    name: Vec<u8>,
    answer: crate::server::Answer,
    /// A 2026-07-28 request (its result is written as that revision's).
    modern: bool,
}

enum Change {
    Add(Kind, Json, u64),
    Remove(Kind, Vec<u8>),
}

impl UserData for ServerState {}

/// `mcp.server(opts)`: name (required), version, title, instructions,
/// page_size, max_message_bytes, request_timeout.
pub(super) fn server_new(lua: &Cx, args: MultiValue) -> Outcome {
    let (Value::Table(opts), Value::Table(methods)) = (arg(&args, 0), arg(&args, 1)) else {
        return Err(
            Error::BadInput("mcp.server: opts must be a table, as mcp.server({ name = 'notes' })".into()).into()
        );
    };
    let read = Reader::new(&opts, "mcp.server", "opts");
    let Some(name) = read.text("name")? else {
        return Err(read.refuse("name", "a string: the server's name, which clients show"));
    };
    let mut info = vec![(b"name".to_vec(), Json::str(&name))];
    if let Some(title) = read.text("title")? {
        info.push((b"title".to_vec(), Json::str(title)));
    }
    info.push((b"version".to_vec(), Json::str(read.text("version")?.unwrap_or_else(|| "0.0.0".into()))));
    let instructions = read.text("instructions")?.map(Json::str);
    let mut core = Server::new(Json::Object(info), instructions);
    core.page_size =
        read.whole("page_size", 0.0, 1e6, "a whole number of items from 0 (no pages) up")?.unwrap_or(0) as usize;
    let max_message_bytes = read
        .whole(
            "max_message_bytes",
            1.0,
            super::options::MAX_MESSAGE_BYTES_LIMIT,
            "a whole number of bytes from 1 to 2^40",
        )?
        .map_or(DEFAULT_MAX_MESSAGE_BYTES, |n| n as usize);
    let state = ServerState {
        core: RefCell::new(core),
        slots: RefCell::new(Vec::new()),
        deferred: RefCell::new(Vec::new()),
        channel: RefCell::new(None),
        http: RefCell::new(None),
        asked: RefCell::new(Vec::new()),
        answered_later: RefCell::new(Vec::new()),
        outcome: RefCell::new(None),
        task_questions: RefCell::new(Vec::new()),
        task_callbacks: RefCell::new(Vec::new()),
        facts: RefCell::new(Facts::default()),
        max_message_bytes,
        request_timeout: read.seconds("request_timeout")?.unwrap_or(DEFAULT_REQUEST_TIMEOUT),
        closed: Cell::new(false),
    };
    let server = lua.create_table()?;
    server.raw_set("_state", lua.create_userdata(state)?)?;
    server.set_metatable(Some(methods))?;
    Ok(MultiValue::from_vec(vec![Value::Table(server)]))
}

fn state_of(server: &Value, what: &str) -> Outcome<mlua::AnyUserData> {
    let Value::Table(server) = server else {
        return Err(Error::BadInput(format!("mcp.server: call {what} with a colon, as server:{what}(...)")).into());
    };
    match server.raw_get::<Value>("_state")? {
        Value::UserData(ud) if ud.is::<ServerState>() => Ok(ud),
        _ => Err(Error::BadInput(format!("mcp.server: server:{what} needs a server made by mcp.server")).into()),
    }
}

/// The protocol's names for the keys a Lua definition may spell the Lua
/// way.
const RENAMED: [(&[u8], &[u8]); 5] = [
    (b"input_schema", b"inputSchema"),
    (b"output_schema", b"outputSchema"),
    (b"mime_type", b"mimeType"),
    (b"uri_template", b"uriTemplate"),
    (b"meta", b"_meta"),
];

/// A definition as clients list it: the table's fields, renamed, without
/// what is the binding's own (`complete`). A tool without an input schema
/// takes an object of anything, as the protocol requires one.
fn definition(lua: &Cx, kind: Kind, def: &Table) -> Outcome<Json> {
    let mut json = encode_lua(lua, "the definition", &Value::Table(def.clone()))?;
    json.materialize();
    let Json::Object(pairs) = &mut json else {
        return Err(Error::BadInput("mcp.server: a definition must be a table of fields".into()).into());
    };
    pairs.retain(|(k, _)| k != b"complete");
    for (key, _) in pairs.iter_mut() {
        if let Some((_, to)) = RENAMED.iter().find(|(from, _)| from == key) {
            *key = to.to_vec();
        }
    }
    if kind == Kind::Tool && !pairs.iter().any(|(k, _)| k == b"inputSchema") {
        pairs.push((b"inputSchema".to_vec(), Json::object([("type", Json::str("object"))])));
    }
    crate::sorting::sort_by(pairs, |a, b| a.0.cmp(&b.0));
    Ok(json)
}

fn kind_named(name: &Value) -> Outcome<Kind> {
    let Value::String(name) = name else { return Err(Error::BadInput("mcp.server: unknown kind".into()).into()) };
    Ok(match &*name.as_bytes() {
        b"tool" => Kind::Tool,
        b"resource" => Kind::Resource,
        b"resource_template" => Kind::Template,
        b"prompt" => Kind::Prompt,
        _ => {
            let why = "mcp.server: the kind must be \"tool\", \"resource\", \"resource_template\" or \"prompt\"";
            return Err(Error::BadInput(why.into()).into());
        }
    })
}

/// `server:tool(def, fn)` and its kin (`native.server_add(server, kind,
/// def, fn)`).
pub(super) fn server_add(lua: &Cx, args: MultiValue) -> Outcome {
    let kind = kind_named(&arg(&args, 1))?;
    let what = match kind {
        Kind::Tool => "tool",
        Kind::Resource => "resource",
        Kind::Template => "resource_template",
        Kind::Prompt => "prompt",
    };
    let ud = state_of(&arg(&args, 0), what)?;
    let state = ud.borrow::<ServerState>()?;
    let (Value::Table(def), Value::Function(function)) = (arg(&args, 2), arg(&args, 3)) else {
        return Err(Error::BadInput(format!(
            "server:{what}: pass its definition (a table) and its handler (a function)"
        ))
        .into());
    };
    let wire = definition(lua, kind, &def)?;
    let complete = match def.get::<Value>("complete")? {
        Value::Nil => None,
        Value::Table(t) => Some(t),
        _ => return Err(Error::BadInput(format!("server:{what}: complete must be a table of argument names")).into()),
    };
    let structured = wire.get("outputSchema").is_some();
    let mime_type = wire.get("mimeType").cloned();
    let task = matches!(wire.get("execution").and_then(|e| e.get("taskSupport")),
        Some(Json::Str(s)) if s == b"optional" || s == b"required");
    let mut slots = state.slots.borrow_mut();
    let handler = slots.len() as u64;
    slots.push(Slot { function, structured, mime_type, complete, task });
    drop(slots);
    let change = Change::Add(kind, wire, handler);
    apply(&state, change).map_err(|why| Error::BadInput(format!("server:{what}: {why}")))?;
    Ok(MultiValue::new())
}

/// `server:skill(def)`: a skill of the Skills extension (`name`,
/// `description`, `body`: the Markdown of its SKILL.md, `files`: relative
/// path -> text or bytes, `frontmatter`: more fields for its SKILL.md).
pub(super) fn server_skill(lua: &Cx, args: MultiValue) -> Outcome {
    let ud = state_of(&arg(&args, 0), "skill")?;
    let state = ud.borrow::<ServerState>()?;
    let Value::Table(def) = arg(&args, 1) else {
        return Err(Error::BadInput(
            "server:skill: pass its definition, as { name = 'lua-style', description = '...', body = '...' }".into(),
        )
        .into());
    };
    let read = Reader::new(&def, "server:skill", "def");
    let (Some(name), Some(description)) = (read.text("name")?, read.text("description")?) else {
        return Err(read.refuse("name", "a string, and def.description one too"));
    };
    let mut frontmatter = vec![(b"name".to_vec(), Json::str(name)), (b"description".to_vec(), Json::str(description))];
    if let Some(extra) = read.table("frontmatter")? {
        let Json::Object(pairs) = encode_lua(lua, "def.frontmatter", &Value::Table(extra))?.into_tree() else {
            return Err(read.refuse("frontmatter", "a table of fields"));
        };
        frontmatter.extend(pairs.into_iter().filter(|(k, _)| k != b"name" && k != b"description"));
    }
    let body = read
        .string("body", "a string: the Markdown of its SKILL.md")?
        .map(|b| b.as_bytes().to_vec())
        .unwrap_or_default();
    let mut files = Vec::new();
    if let Some(table) = read.table("files")? {
        for pair in table.pairs::<Value, Value>() {
            let (Value::String(path), Value::String(bytes)) = pair? else {
                return Err(read.refuse("files", "a table of relative paths to their contents (strings)"));
            };
            files.push((path.to_str()?.to_string(), bytes.as_bytes().to_vec()));
        }
    }
    crate::sorting::sort_by(&mut files, |a, b| a.0.cmp(&b.0));
    let Ok(mut core) = state.core.try_borrow_mut() else {
        return Err(Error::BadInput(
            "server:skill: add skills before serving or between requests, not from a handler".into(),
        )
        .into());
    };
    let skill = Skill::new(&core.skill_authority(), Json::Object(frontmatter), &body, files)
        .map_err(|why| Error::BadInput(format!("server:skill: {why}")))?;
    core.add_skill(skill);
    Ok(MultiValue::new())
}

/// `server:remove(kind, name)`: true if there was one.
pub(super) fn server_remove(_lua: &Cx, args: MultiValue) -> Outcome {
    let ud = state_of(&arg(&args, 0), "remove")?;
    let state = ud.borrow::<ServerState>()?;
    let kind = kind_named(&arg(&args, 1))?;
    let Value::String(key) = arg(&args, 2) else {
        return Err(Error::BadInput("server:remove: pass the kind and the name (or uri) to remove".into()).into());
    };
    let change = Change::Remove(kind, key.as_bytes().to_vec());
    let removed = apply(&state, change).map_err(Error::BadInput)?;
    Ok(MultiValue::from_vec(vec![Value::Boolean(removed)]))
}

/// Applies a change now, or once the request being answered is: false
/// only for a removal of nothing.
fn apply(state: &ServerState, change: Change) -> Result<bool, String> {
    let Ok(mut core) = state.core.try_borrow_mut() else {
        state.deferred.borrow_mut().push(change);
        return Ok(true);
    };
    match change {
        Change::Add(kind, wire, handler) => core.add(kind, wire, handler).map(|()| true),
        Change::Remove(kind, key) => Ok(core.remove(kind, &key)),
    }
}

/// `server:resource_updated(uri)`: subscribers hear of it.
pub(super) fn server_resource_updated(_lua: &Cx, args: MultiValue) -> Outcome {
    let ud = state_of(&arg(&args, 0), "resource_updated")?;
    let state = ud.borrow::<ServerState>()?;
    let Value::String(uri) = arg(&args, 1) else {
        return Err(Error::BadInput("server:resource_updated: pass the resource's uri".into()).into());
    };
    state.core.borrow_mut().resource_updated(&uri.as_bytes());
    send_notices(&state)?;
    Ok(MultiValue::new())
}

/// `server:close()`: serving ends, at once or, from inside a handler,
/// once its answer is sent; the listener, its connections and the
/// discovery file go with it.
pub(super) fn server_close(_lua: &Cx, args: MultiValue) -> Outcome {
    let ud = state_of(&arg(&args, 0), "close")?;
    let state = ud.borrow::<ServerState>()?;
    state.closed.set(true);
    if state.core.try_borrow_mut().is_ok() {
        serving::stop(&state);
    }
    Ok(MultiValue::new())
}
