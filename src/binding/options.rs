//! The native options and the per-client state kept beside the client
//! table.

use super::*;

pub(super) struct ClientState {
    pub(super) timeout: Duration,
    pub(super) headers: Vec<(String, String)>,
    pub(super) ca_pem: Option<Vec<u8>>,
    pub(super) env: Vec<(String, String)>,
    pub(super) cwd: Option<String>,
    pub(super) max_message_bytes: usize,
    /// Methods of server requests that `opts.handlers` answers in Lua.
    pub(super) forward: Vec<String>,
    pub(super) session: Option<Session>,
}

impl UserData for ClientState {}

pub(super) const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);

pub(super) fn read_options(opts: &Table) -> Outcome<ClientState> {
    let timeout = match opts.get::<Value>("timeout")? {
        Value::Nil => DEFAULT_TIMEOUT,
        Value::Integer(i) if i > 0 => Duration::from_secs(i as u64),
        Value::Number(f) if f > 0.0 && f.is_finite() && f < 1e9 => Duration::from_secs_f64(f),
        _ => return Err(Error::BadInput("mcp.new: opts.timeout must be a positive number of seconds".into()).into()),
    };
    let max_message_bytes = match opts.get::<Value>("max_message_bytes")? {
        Value::Nil => stdio::DEFAULT_MAX_MESSAGE_BYTES,
        Value::Integer(i) if i > 0 => i as usize,
        _ => return Err(Error::BadInput("mcp.new: opts.max_message_bytes must be a positive integer".into()).into()),
    };
    let cwd = match opts.get::<Value>("cwd")? {
        Value::Nil => None,
        Value::String(s) => Some(s.to_str()?.to_string()),
        _ => return Err(Error::BadInput("mcp.new: opts.cwd must be a string".into()).into()),
    };
    let env = string_map(opts, "env")?;
    // Read now, so a wrong path fails at mcp.new rather than at first use.
    let ca_pem = match opts.get::<Value>("ca_file")? {
        Value::Nil => None,
        Value::String(path) => {
            let path = path.to_str()?.to_string();
            Some(
                std::fs::read(&path)
                    .map_err(|e| Error::BadInput(format!("mcp.new: cannot read opts.ca_file {path}: {e}")))?,
            )
        }
        _ => return Err(Error::BadInput("mcp.new: opts.ca_file must be a path".into()).into()),
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
    }
    let forward = handler_methods(opts)?;
    match opts.get::<Value>("on_notification")? {
        Value::Nil | Value::Function(_) => {}
        _ => return Err(Error::BadInput("mcp.new: opts.on_notification must be a function".into()).into()),
    }
    Ok(ClientState { timeout, headers, ca_pem, env, cwd, max_message_bytes, forward, session: None })
}

/// The methods named in `opts.handlers` (method name -> function).
fn handler_methods(opts: &Table) -> Outcome<Vec<String>> {
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
            methods.sort();
        }
        _ => return Err(bad()),
    }
    Ok(methods)
}

/// A table of string keys to string values, such as `opts.env`.
pub(super) fn string_map(opts: &Table, field: &str) -> Outcome<Vec<(String, String)>> {
    let bad = || Raise::Mcp(Error::BadInput(format!("mcp.new: opts.{field} must be a table of strings to strings")));
    let mut out = Vec::new();
    match opts.get::<Value>(field)? {
        Value::Nil => {}
        Value::Table(t) => {
            for pair in t.pairs::<Value, Value>() {
                let (k, v) = pair?;
                let (Some(k), Some(v)) = (concat_piece(&k), concat_piece(&v)) else { return Err(bad()) };
                let (Ok(k), Ok(v)) = (String::from_utf8(k), String::from_utf8(v)) else { return Err(bad()) };
                out.push((k, v));
            }
            out.sort();
        }
        _ => return Err(bad()),
    }
    Ok(out)
}

/// The userdata and callback kept beside a client table.
pub(super) fn state_of(lua: &Cx, client: &Table) -> Outcome<Option<Beside>> {
    let entry: Value = lua.glue.states.raw_get(client.clone())?;
    let Value::Table(entry) = entry else { return Ok(None) };
    Ok(Some(Beside { state: entry.raw_get(1)?, on_notification: entry.raw_get(2)?, handlers: entry.raw_get(3)? }))
}

/// What is kept beside a client table. The Lua functions live in a Lua
/// table (not in the userdata) so that a callback that refers to its own
/// client does not keep the client alive.
pub(super) struct Beside {
    pub(super) state: AnyUserData,
    pub(super) on_notification: Option<Function>,
    pub(super) handlers: Option<Table>,
}
