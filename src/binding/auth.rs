//! `opts.auth`: reading it, and the Lua side of a login (the caller's
//! `authorize` callback, a store of `load` / `save` functions). The flows
//! themselves are `crate::auth`'s.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use mlua::{Function, IntoLuaMulti, MultiValue, Table, Value};

use super::entry::Entry;
use super::lua::{call_lua, lua_type, Cx, Outcome, Raise};
use super::readers::Reader;
use crate::auth::dpop::Proofs;
use crate::auth::store::{FileStore, Store};
use crate::auth::{assertion, Authorizer, Grant, IdentityProvider, Settings, User, DEFAULT_REDIRECT_URI};
use crate::codec::{self, Json};
use crate::error::Error;
/// How long a user's login may take by default.
pub(super) const LOGIN_TIMEOUT: Duration = Duration::from_secs(300);

/// The options a login reads; anything else in `opts.auth` is refused,
/// not ignored (a misspelt `client_secret` must not fail silently).
pub(super) const LOGIN_OPTIONS: [&str; 14] = [
    "assertion",
    "authorize",
    "client_id",
    "client_metadata_url",
    "client_name",
    "client_secret",
    "dpop",
    "grant",
    "idp",
    "issuer",
    "login_timeout",
    "private_key_pem",
    "redirect_uri",
    "store",
];

/// A login in progress or done: the flows, and the token file if
/// `opts.auth.store` is a path.
pub(super) struct Login {
    pub(super) authorizer: Authorizer,
    pub(super) file: Option<FileStore>,
}

pub(super) fn bad(why: String) -> Raise {
    Raise::Mcp(Error::BadInput(why))
}

/// `opts.auth` as a table, or None.
pub(super) fn auth_table(opts: &Table) -> Outcome<Option<Table>> {
    Reader::new(opts, "mcp.new", "opts").table("auth")
}

/// `opts.auth.token`: a string, a function returning one, or nil.
pub(super) fn auth_token(opts: &Table) -> Outcome<Value> {
    let Some(auth) = auth_table(opts)? else { return Ok(Value::Nil) };
    match auth.get::<Value>("token")? {
        v @ (Value::Nil | Value::String(_) | Value::Function(_)) => Ok(v),
        _ => Err(bad("mcp.new: opts.auth.token must be a string or a function returning one".into())),
    }
}

/// The login `opts.auth` asks for, if any: every field but `token`
/// belongs to one; with `token` none may stand.
pub(super) fn read_login(
    opts: &Table,
    timeout: Duration,
    ca_pem: &Option<Vec<u8>>,
    bearer: &Arc<Mutex<Option<String>>>,
) -> Outcome<Option<Login>> {
    let Some(auth) = auth_table(opts)? else { return Ok(None) };
    let read = Reader::new(&auth, "mcp.new", "opts.auth");
    let mut has_token = false;
    for pair in auth.pairs::<Value, Value>() {
        let (key, _) = pair?;
        let name = match &key {
            Value::String(k) => k.to_str()?.to_string(),
            other => {
                return Err(bad(format!("mcp.new: opts.auth has a {} key; its keys are option names", lua_type(other))))
            }
        };
        if name == "token" {
            has_token = true;
        } else if !LOGIN_OPTIONS.contains(&name.as_str()) {
            return Err(bad(format!(
                "mcp.new: opts.auth.{name} is not an option (opts.auth takes token, or a login: {})",
                LOGIN_OPTIONS.join(", ")
            )));
        }
    }
    if has_token {
        if let Some(other) = LOGIN_OPTIONS.iter().find(|f| !matches!(auth.raw_get::<Value>(**f), Ok(Value::Nil))) {
            return Err(bad(format!(
                "mcp.new: give opts.auth.token or a login (opts.auth.{other} and the like), not both"
            )));
        }
        return Ok(None);
    }
    let url = match opts.get::<Value>("url")? {
        Value::String(url) => url.to_str()?.to_string(),
        _ => return Err(bad("mcp.new: opts.auth logs in to an HTTP server; give it with opts.url".into())),
    };
    let grant = match read.text("grant")?.as_deref() {
        None | Some("authorization_code") => Grant::AuthorizationCode,
        Some("client_credentials") => Grant::ClientCredentials,
        Some("identity_assertion") => Grant::IdentityAssertion,
        Some("jwt_bearer") => Grant::JwtBearer,
        Some(other) => {
            return Err(bad(format!(
                "mcp.new: opts.auth.grant must be \"authorization_code\", \"client_credentials\", \"identity_assertion\" or \"jwt_bearer\", got {other:?}"
            )))
        }
    };
    let assertion = read.text("assertion")?;
    if grant == Grant::JwtBearer && (assertion.is_none() || read.text("client_id")?.is_none()) {
        return Err(bad(
            "mcp.new: opts.auth.grant = \"jwt_bearer\" needs opts.auth.client_id and opts.auth.assertion (the workload's identity token)".into(),
        ));
    }
    let identity = match read.table("idp")? {
        None => None,
        Some(idp) => {
            let read = Reader::new(&idp, "mcp.new", "opts.auth.idp");
            let need = |field: &str| -> Outcome<String> {
                read.text(field)?.ok_or_else(|| read.refuse(field, "a string (cross-app access needs it)"))
            };
            Some(IdentityProvider {
                token_endpoint: need("token_endpoint")?,
                id_token: need("id_token")?,
                client_id: read.text("client_id")?,
                client_secret: read.text("client_secret")?,
            })
        }
    };
    if grant == Grant::IdentityAssertion && (identity.is_none() || read.text("client_id")?.is_none()) {
        return Err(bad(
            "mcp.new: opts.auth.grant = \"identity_assertion\" needs opts.auth.client_id and opts.auth.idp (token_endpoint, id_token)".into(),
        ));
    }
    let signing_key = match read.text("private_key_pem")? {
        Some(pem) => Some(assertion::signing_key(&pem)?),
        None => None,
    };
    let login_timeout = read
        .number("login_timeout", |n| n > 0.0 && n < 1e7, "a number of seconds above 0 and below 1e7")?
        .map_or(LOGIN_TIMEOUT, Duration::from_secs_f64);
    read.function("authorize")?;
    let file = match auth.get::<Value>("store")? {
        Value::Nil => None,
        Value::String(path) => Some(FileStore { path: path.to_str()?.to_string().into() }),
        Value::Table(t) => {
            let functions = matches!(t.get::<Value>("load")?, Value::Function(_))
                && matches!(t.get::<Value>("save")?, Value::Function(_));
            if !functions {
                return Err(bad(
                    "mcp.new: opts.auth.store must be a file path or a table with load and save functions".into(),
                ));
            }
            None
        }
        _ => {
            return Err(bad(
                "mcp.new: opts.auth.store must be a file path or a table with load and save functions".into()
            ))
        }
    };
    let client_id = read.text("client_id")?;
    let client_secret = read.text("client_secret")?;
    if grant == Grant::ClientCredentials && (client_id.is_none() || (client_secret.is_none() && signing_key.is_none()))
    {
        return Err(bad(
            "mcp.new: opts.auth.grant = \"client_credentials\" needs opts.auth.client_id and either client_secret or private_key_pem".into(),
        ));
    }
    let dpop = match read.boolean("dpop")? {
        Some(true) => Some(Arc::new(Proofs::new()?)),
        _ => None,
    };
    let settings = Settings {
        dpop,
        client_id,
        client_secret,
        client_metadata_url: read.text("client_metadata_url")?,
        client_name: read.text("client_name")?.unwrap_or_else(|| "lua-mcp".into()),
        redirect_uri: read.text("redirect_uri")?.unwrap_or_else(|| DEFAULT_REDIRECT_URI.into()),
        grant,
        signing_key,
        identity,
        assertion,
        issuer: read.text("issuer")?,
        login_timeout,
        timeout,
        ca_pem: ca_pem.clone(),
    };
    let authorizer = Authorizer::new(settings, &url, bearer.clone())?;
    Ok(Some(Login { authorizer, file }))
}

/// Keeps the Lua callbacks of `opts.auth` in the client's entry.
pub(super) fn keep_auth_callbacks(opts: &Table, entry: &Entry) -> Outcome<()> {
    if let Value::Function(f) = auth_token(opts)? {
        entry.set_token_function(f)?;
    }
    if let Some(auth) = auth_table(opts)? {
        if let Value::Function(f) = auth.get::<Value>("authorize")? {
            entry.set_authorize_callback(f)?;
        }
        if let Value::Table(t) = auth.get::<Value>("store")? {
            entry.set_store_table(t)?;
        }
    }
    Ok(())
}

/// The user, as `opts.auth.authorize` reaches them; without it, the URL
/// goes to stderr and the module waits at its loopback redirect URI.
pub(super) struct LuaUser<'a, 'b> {
    pub(super) lua: &'a Cx<'b>,
    pub(super) authorize: Option<Function>,
    /// What the callback raised, raised again unchanged once the login
    /// is abandoned.
    pub(super) raised: Option<Raise>,
}

impl User for LuaUser<'_, '_> {
    fn authorize(&mut self, url: &str) -> crate::error::Result<Option<String>> {
        let Some(f) = self.authorize.clone() else {
            eprintln!("lua-mcp: the server asks you to log in; open this address in a browser:\n  {url}");
            return Ok(None);
        };
        match call_lua(self.lua, f, url) {
            Ok(mut results) => match results.pop_front() {
                None | Some(Value::Nil) => Ok(None),
                Some(Value::String(s)) => Ok(Some(s.to_str().map_err(Error::from)?.to_string())),
                Some(other) => Err(Error::BadInput(format!(
                    "mcp: opts.auth.authorize must return the URL the browser came back to, or nil; it returned a {}",
                    lua_type(&other)
                ))),
            },
            Err(raised) => {
                self.raised = Some(raised);
                Err(Error::Interrupted { what: "login".into() })
            }
        }
    }
}

/// `opts.auth.store` as a table: `load(key)` returns the saved text (or
/// nil), `save(key, text)` keeps it. The text is JSON; it holds secrets.
pub(super) struct LuaStore<'a, 'b> {
    pub(super) lua: &'a Cx<'b>,
    pub(super) table: Table,
    pub(super) raised: Option<Raise>,
}

impl LuaStore<'_, '_> {
    fn call(&mut self, name: &str, args: impl IntoLuaMulti) -> crate::error::Result<MultiValue> {
        let f: Function = self.table.get(name)?;
        call_lua(self.lua, f, args).map_err(|raised| {
            self.raised = Some(raised);
            Error::BadInput(format!("mcp: opts.auth.store.{name} failed"))
        })
    }
}

impl Store for LuaStore<'_, '_> {
    fn load(&mut self, key: &str) -> crate::error::Result<Option<Json>> {
        let mut results = self.call("load", key)?;
        match results.pop_front() {
            None | Some(Value::Nil) => Ok(None),
            Some(Value::String(text)) => match codec::decode(&text.as_bytes()) {
                Ok(record @ Json::Object(_)) => Ok(Some(record)),
                _ => Err(Error::BadInput(
                    "mcp: opts.auth.store.load returned text that is not a saved login (the JSON save was given)"
                        .into(),
                )),
            },
            Some(other) => Err(Error::BadInput(format!(
                "mcp: opts.auth.store.load must return the text save was given, or nil; it returned a {}",
                lua_type(&other)
            ))),
        }
    }

    fn save(&mut self, key: &str, record: &Json) -> crate::error::Result<()> {
        let text = self.lua.create_string(codec::encode(record))?;
        self.call("save", (key, text)).map(|_| ())
    }
}
