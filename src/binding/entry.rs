//! What the binding keeps beside each client table: its entry, in the
//! prelude's weak-keyed `states` table (client -> entry).
//!
//! The entry is a Lua table, not fields of the `ClientState` userdata, so
//! that a callback that refers to its own client does not keep the client
//! alive.

use mlua::{ffi, AnyUserData, Function, Table, Value};

pub(super) use super::lua::Entry;
use super::lua::{on_raw_stack, truthy, Cx, KnownEntry, Outcome, Prelude, ReadAtOnce};
/// The `ClientState` userdata.
pub(super) const STATE: i64 = 1;
/// `opts.on_notification`.
pub(super) const ON_NOTIFICATION: i64 = 2;
/// `opts.handlers`: method name -> function.
pub(super) const HANDLERS: i64 = 3;
/// Handles whose `on_done` is still to run: handle -> on_done.
pub(super) const PENDING_ON_DONE: i64 = 4;
/// Set while dispatch runs its callbacks.
pub(super) const DISPATCHING: i64 = 5;
/// The callbacks for particular notifications (`on_log`,
/// `on_resource_updated`, `on_list_changed`), by name.
pub(super) const CALLBACKS: i64 = 6;
/// Requests' `on_progress` callbacks, by progress token.
pub(super) const PROGRESS: i64 = 7;
/// Watched mounts: a list of `{ registry, opts, names }`.
pub(super) const WATCHES: i64 = 8;
// (9 is no longer used.)
/// `opts.auth.token` when it is a function.
pub(super) const AUTH_TOKEN: i64 = 10;
/// `opts.auth.authorize`.
pub(super) const AUTH_AUTHORIZE: i64 = 11;
/// `opts.auth.store` when it is a table of `load` and `save`.
pub(super) const AUTH_STORE: i64 = 12;
/// `opts.json_types` (see `decode`).
pub(super) const JSON_TYPES: i64 = 13;
/// The process's count of settled requests when the pending `on_done`
/// callbacks were last looked at in full (see `handles::run_on_done`).
pub(super) const SETTLED_COUNT_SEEN: i64 = 14;

/// What a client's server may set off in Lua: read from the entry the
/// first time a message needs one (see `LuaHost::listeners`), since most
/// calls get only their reply.
#[derive(Default)]
pub(super) struct Listeners {
    pub(super) on_notification: Option<Function>,
    pub(super) handlers: Option<Table>,
    /// `on_log`, `on_resource_updated`, `on_list_changed`, by name.
    pub(super) callbacks: Option<Table>,
    /// Requests' `on_progress` callbacks, by progress token.
    pub(super) progress: Option<Table>,
}

/// An entry as [`Entry::of`] gives it: the one the export keeps, lent,
/// or one looked up for this caller alone.
pub(super) enum EntryRef<'a> {
    Kept(&'a Entry),
    Own(Entry),
}

impl std::ops::Deref for EntryRef<'_> {
    type Target = Entry;
    fn deref(&self) -> &Entry {
        match self {
            EntryRef::Kept(entry) => entry,
            EntryRef::Own(entry) => entry,
        }
    }
}

impl Entry {
    /// A new entry for a client `mcp.new` makes; [`Entry::attach`] puts it
    /// beside the client.
    pub(super) fn new(
        lua: &Cx,
        state: AnyUserData,
        on_notification: Value,
        handlers: Value,
        callbacks: Table,
        json_types: bool,
    ) -> Outcome<Entry> {
        let entry = lua.create_table()?;
        entry.raw_set(STATE, state)?;
        entry.raw_set(ON_NOTIFICATION, on_notification)?;
        entry.raw_set(HANDLERS, handlers)?;
        entry.raw_set(CALLBACKS, callbacks)?;
        entry.raw_set(PROGRESS, lua.create_table()?)?;
        entry.raw_set(JSON_TYPES, json_types)?;
        Ok(Entry::unread(entry))
    }

    /// Keeps the entry beside `client`, for as long as the client lives.
    pub(super) fn attach(&self, lua: &Cx, client: &Table) -> Outcome<()> {
        lua.prelude.states.raw_set(client.clone(), self.table.clone())?;
        Ok(())
    }

    fn unread(table: Table) -> Entry {
        Entry { table, at_once: None }
    }

    /// The entry of `client`; None when `mcp.new` did not make it.
    ///
    /// The export keeps the first one it looks up (nearly always its own
    /// client's), keeping the client alive and so its address its own
    /// until it returns, and lends it to every later look: a small call
    /// looked the same entry up four times. Kept in place, not shared
    /// through an `Rc`, which was an allocation a call.
    pub(super) fn of<'a>(lua: &'a Cx, client: &Table) -> Outcome<Option<EntryRef<'a>>> {
        if let Some(known) = lua.known_entry.get() {
            if known.client.to_pointer() == client.to_pointer() {
                return Ok(Some(EntryRef::Kept(&known.entry)));
            }
        }
        let found = match read_at_once(lua, client)? {
            Some(found) => found,
            None => Entry::in_prelude(lua.prelude, client)?,
        };
        let Some(found) = found else { return Ok(None) };
        if lua.known_entry.get().is_some() {
            return Ok(Some(EntryRef::Own(found)));
        }
        let known = lua.known_entry.get_or_init(|| KnownEntry { client: client.clone(), entry: found });
        Ok(Some(EntryRef::Kept(&known.entry)))
    }

    /// [`Entry::of`], for code that has the prelude but no [`Cx`].
    pub(super) fn in_prelude(prelude: &Prelude, client: &Table) -> mlua::Result<Option<Entry>> {
        match prelude.states.raw_get::<Value>(client.clone())? {
            Value::Table(entry) => Ok(Some(Entry::unread(entry))),
            _ => Ok(None),
        }
    }

    /// The entry of a client that must have one: when it has none, the
    /// error mlua gives for reading nil as a table.
    pub(super) fn existing<'a>(lua: &'a Cx, client: &Table) -> Outcome<EntryRef<'a>> {
        match Entry::of(lua, client)? {
            Some(entry) => Ok(entry),
            None => Ok(EntryRef::Own(Entry::unread(lua.prelude.states.raw_get::<Table>(client.clone())?))),
        }
    }

    /// The client's listeners (see [`Listeners`]), each None when it is
    /// not there: `mcp.new` kept only functions and tables of them.
    pub(super) fn listeners(&self) -> Listeners {
        let function = |field| self.table.raw_get::<Option<Function>>(field).ok().flatten();
        let table = |field| self.table.raw_get::<Option<Table>>(field).ok().flatten();
        Listeners {
            on_notification: function(ON_NOTIFICATION),
            handlers: table(HANDLERS),
            callbacks: table(CALLBACKS),
            progress: table(PROGRESS),
        }
    }

    /// `opts.auth.token` when it is a function, asked before each call.
    pub(super) fn token_function(&self) -> Outcome<Option<Function>> {
        if let Some(read) = &self.at_once {
            return Ok(read.token_function.clone());
        }
        match self.table.raw_get::<Value>(AUTH_TOKEN)? {
            Value::Function(f) => Ok(Some(f)),
            _ => Ok(None),
        }
    }

    /// The `ClientState` userdata.
    pub(super) fn state(&self) -> Outcome<AnyUserData> {
        match &self.at_once {
            Some(read) => Ok(read.state.clone()),
            None => Ok(self.table.raw_get(STATE)?),
        }
    }

    pub(super) fn on_notification(&self) -> Outcome<Option<Function>> {
        Ok(self.table.raw_get(ON_NOTIFICATION)?)
    }

    /// The handles with an `on_done` still to run (handle -> on_done),
    /// made on first use.
    pub(super) fn pending_on_done(&self, lua: &Cx) -> Outcome<Table> {
        match self.table.raw_get::<Value>(PENDING_ON_DONE)? {
            Value::Table(t) => Ok(t),
            _ => {
                let t = lua.create_table()?;
                self.table.raw_set(PENDING_ON_DONE, t.clone())?;
                Ok(t)
            }
        }
    }

    /// [`Entry::pending_on_done`] if it was ever made.
    pub(super) fn pending_on_done_if_any(&self) -> Outcome<Option<Table>> {
        match self.table.raw_get::<Value>(PENDING_ON_DONE)? {
            Value::Table(t) => Ok(Some(t)),
            _ => Ok(None),
        }
    }

    /// Whether `client:dispatch()` is running the client's callbacks.
    pub(super) fn dispatching(&self) -> Outcome<bool> {
        Ok(truthy(&self.table.raw_get::<Value>(DISPATCHING)?))
    }

    pub(super) fn set_dispatching(&self, on: bool) -> Outcome<()> {
        if on {
            self.table.raw_set(DISPATCHING, true)?;
        } else {
            self.table.raw_set(DISPATCHING, Value::Nil)?;
        }
        Ok(())
    }

    /// See [`SETTLED_COUNT_SEEN`]; None when the next call must look.
    pub(super) fn settled_count_seen(&self) -> Outcome<Option<u64>> {
        Ok(match self.table.raw_get::<Value>(SETTLED_COUNT_SEEN)? {
            Value::Integer(n) => Some(n as u64),
            // Lua 5.1 and LuaJIT keep every number as a float.
            Value::Number(n) => Some(n as u64),
            _ => None,
        })
    }

    pub(super) fn set_settled_count_seen(&self, count: Option<u64>) -> Outcome<()> {
        match count {
            Some(n) => self.table.raw_set(SETTLED_COUNT_SEEN, n as i64)?,
            None => self.table.raw_set(SETTLED_COUNT_SEEN, Value::Nil)?,
        }
        Ok(())
    }

    /// The watched mounts, a list of `{ registry, opts, names }`, made on
    /// first use.
    pub(super) fn watches(&self, lua: &Cx) -> Outcome<Table> {
        match self.table.raw_get::<Value>(WATCHES)? {
            Value::Table(t) => Ok(t),
            _ => {
                let t = lua.create_table()?;
                self.table.raw_set(WATCHES, t.clone())?;
                Ok(t)
            }
        }
    }

    /// [`Entry::watches`] if there are any.
    pub(super) fn watches_if_any(&self) -> Outcome<Option<Table>> {
        match self.table.raw_get::<Value>(WATCHES)? {
            Value::Table(t) => Ok(Some(t)),
            _ => Ok(None),
        }
    }

    pub(super) fn set_token_function(&self, f: Function) -> Outcome<()> {
        self.table.raw_set(AUTH_TOKEN, f)?;
        Ok(())
    }

    /// `opts.auth.authorize`.
    pub(super) fn authorize_callback(&self) -> Outcome<Option<Function>> {
        Ok(self.table.raw_get(AUTH_AUTHORIZE)?)
    }

    pub(super) fn set_authorize_callback(&self, f: Function) -> Outcome<()> {
        self.table.raw_set(AUTH_AUTHORIZE, f)?;
        Ok(())
    }

    /// `opts.auth.store` when it is a table of `load` and `save`.
    pub(super) fn store_table(&self) -> Outcome<Option<Table>> {
        Ok(self.table.raw_get(AUTH_STORE)?)
    }

    pub(super) fn set_store_table(&self, t: Table) -> Outcome<()> {
        self.table.raw_set(AUTH_STORE, t)?;
        Ok(())
    }

    /// `opts.json_types`: whether what the client returns keeps `null`
    /// and empty arrays.
    pub(super) fn json_types(&self) -> bool {
        match &self.at_once {
            Some(read) => read.json_types,
            None => self.table.raw_get::<bool>(JSON_TYPES).unwrap_or(false),
        }
    }
}

/// `states[client]`, with the entry's `ClientState`, JSON types and token
/// function (see [`ReadAtOnce`]): Some(None) when the client has no entry,
/// None when this could not tell (no room on the stack, or an entry whose
/// state is not there) and the reads through mlua must.
fn read_at_once(lua: &Cx, client: &Table) -> mlua::Result<Option<Option<Entry>>> {
    lua.exec_raw_lua(|raw| {
        let state = raw.state();
        // SAFETY: only reads that cannot raise a Lua error: raw gets by a
        // table or an integer key (no metamethod, no allocation), types
        // and booleans, and mlua's own pushes and pops of references.
        unsafe {
            on_raw_stack(state, 4, || {
                raw.push(&lua.prelude.states)?;
                raw.push(client)?;
                ffi::lua_rawget(state, -2);
                if ffi::lua_type(state, -1) != ffi::LUA_TTABLE {
                    return Ok(Some(None));
                }
                if ffi::lua_rawgeti(state, -1, STATE) != ffi::LUA_TUSERDATA {
                    return Ok(None);
                }
                let state_userdata: AnyUserData = raw.pop()?;
                ffi::lua_rawgeti(state, -1, JSON_TYPES);
                let json_types = ffi::lua_toboolean(state, -1) != 0;
                ffi::lua_pop(state, 1);
                let token_function = match ffi::lua_rawgeti(state, -1, AUTH_TOKEN) {
                    ffi::LUA_TFUNCTION => Some(raw.pop::<Function>()?),
                    _ => {
                        ffi::lua_pop(state, 1);
                        None
                    }
                };
                let at_once = ReadAtOnce { state: state_userdata, json_types, token_function };
                Ok(Some(Some(Entry { table: raw.pop::<Table>()?, at_once: Some(at_once) })))
            })
        }
    })
}
