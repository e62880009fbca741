//! A login that runs beside Lua (for an async request the server
//! refused): the flows of `crate::auth` on a thread of their own, with
//! everything that is Lua's (`opts.auth.authorize`, a store of `load` /
//! `save` functions) asked of the Lua thread through a channel and
//! answered from whatever moves the client on (`dispatch`, a wait). The
//! client's descriptor rings when the thread asks and when it ends, so an
//! event loop hears of both.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::Arc;
use std::thread::JoinHandle;

use mlua::Table;

use super::auth::{Login, LuaStore, LuaUser};
use super::lua::{Cx, Outcome, Raise};
use crate::auth::store::Store;
use crate::auth::User;
use crate::codec::Json;
use crate::error::{Error, Result};
use crate::interrupt;
use crate::transport::doorbell::Doorbell;
/// `opts.auth`'s login: its flows, here while idle, on a thread while a
/// login runs beside Lua.
pub(super) struct LoginState {
    idle: Option<Login>,
    beside: Option<Beside>,
}

/// What the thread asks of the Lua thread.
pub(super) enum Ask {
    Authorize(String),
    Load(String),
    Save(String, Json),
}

/// The Lua thread's answer.
pub(super) enum Answer {
    Url(Result<Option<String>>),
    Loaded(Result<Option<Json>>),
    Saved(Result<()>),
}

/// The login's thread, and the way to it.
pub(super) struct Beside {
    thread: Option<JoinHandle<(Login, Result<bool>)>>,
    asks: Receiver<Ask>,
    answers: Sender<Answer>,
    /// The client closed: the thread's waits end.
    stop: Arc<AtomicBool>,
    /// Questions the thread asked, and those answered: the client's
    /// descriptor stays readable while one waits (see `wants_lua`).
    asked: Arc<AtomicUsize>,
    answered: usize,
    /// The login has ended (set before the thread rings for it).
    ended: Arc<AtomicBool>,
    /// What a Lua callback raised, raised again once the login ends.
    raised: Option<Raise>,
}

/// What the thread needs to begin: the refusal's status and challenge.
pub(super) struct Refusal<'a> {
    pub(super) status: u16,
    pub(super) www_authenticate: Option<&'a str>,
    pub(super) again: bool,
}

impl LoginState {
    pub(super) fn new(login: Login) -> LoginState {
        LoginState { idle: Some(login), beside: None }
    }

    /// The flows, unless a login runs beside Lua.
    pub(super) fn idle(&mut self) -> Option<&mut Login> {
        self.idle.as_mut()
    }

    /// Begins a login on a thread of its own; `lua_store` says whether
    /// the store is Lua's (asked of the Lua thread).
    pub(super) fn begin(&mut self, refusal: Refusal, lua_store: bool, bell: Arc<Doorbell>) -> bool {
        if self.beside.is_some() {
            return true;
        }
        let Some(mut login) = self.idle.take() else { return false };
        let (ask, asks) = mpsc::channel();
        let (answers, answered) = mpsc::channel();
        let stop = Arc::new(AtomicBool::new(false));
        let asked = Arc::new(AtomicUsize::new(0));
        let (status, challenge, again) = (refusal.status, refusal.www_authenticate.map(str::to_string), refusal.again);
        let asking = Asking { ask, answered, bell: bell.clone(), stop: stop.clone(), asked: asked.clone() };
        let stopped = stop.clone();
        let ended = Arc::new(AtomicBool::new(false));
        let ending = ended.clone();
        let thread = std::thread::spawn(move || {
            // The thread's waits (the loopback listener, the answers) end
            // as a Ctrl-C would end them when the client closes.
            let check = move || stopped.load(Ordering::Relaxed);
            let outcome = interrupt::watching(&check, || run(&mut login, status, challenge, again, asking, lua_store));
            ending.store(true, Ordering::Release);
            bell.ring();
            (login, outcome)
        });
        let thread = Some(thread);
        self.beside = Some(Beside { thread, asks, answers, stop, asked, answered: 0, ended, raised: None });
        true
    }

    /// Whether the login's thread waits for the Lua thread: a question to
    /// answer, or its end to take. The descriptor is rung again for it
    /// after each call, which clears what it rang for.
    pub(super) fn wants_lua(&self) -> bool {
        self.beside
            .as_ref()
            .is_some_and(|b| b.asked.load(Ordering::Acquire) > b.answered || b.ended.load(Ordering::Acquire))
    }

    /// Answers what the login's thread asks, and once it has ended takes
    /// its flows back: true when new credentials are in place. None while
    /// it runs.
    pub(super) fn poll(
        &mut self,
        lua: &Cx,
        authorize: Option<mlua::Function>,
        store: Option<Table>,
    ) -> Outcome<Option<bool>> {
        let Some(beside) = self.beside.as_mut() else { return Ok(Some(false)) };
        while let Ok(ask) = beside.asks.try_recv() {
            let answer = answer(lua, ask, authorize.clone(), store.clone(), &mut beside.raised);
            beside.answered += 1;
            let _ = beside.answers.send(answer);
        }
        // Ended: the thread is returning, and joins at once.
        if !beside.ended.load(Ordering::Acquire) {
            return Ok(None);
        }
        let Some(mut beside) = self.beside.take() else { return Ok(None) };
        let (login, outcome) = join(&mut beside)?;
        self.idle = Some(login);
        if let Some(raised) = beside.raised.take() {
            return Err(raised);
        }
        Ok(Some(outcome?))
    }

    /// The client closed: a login under way stops (its waits end within
    /// a slice, a request to the authorization server within its
    /// timeout) and its thread is joined.
    pub(super) fn stop(&mut self) {
        if let Some(mut beside) = self.beside.take() {
            beside.stop.store(true, Ordering::Relaxed);
            if let Ok((login, _)) = join(&mut beside) {
                self.idle = Some(login);
            }
        }
    }
}

/// A client collected with a login under way: the thread's waits end,
/// and it finishes on its own (nothing waits for it).
impl Drop for Beside {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

pub(super) fn join(beside: &mut Beside) -> Outcome<(Login, Result<bool>)> {
    let thread = beside.thread.take().ok_or_else(|| Error::Internal("a login thread joined twice".into()))?;
    thread.join().map_err(|_| Raise::Mcp(Error::Internal("the login thread panicked".into())))
}

/// The login itself, on its thread.
pub(super) fn run(
    login: &mut Login,
    status: u16,
    challenge: Option<String>,
    again: bool,
    asking: Asking,
    lua_store: bool,
) -> Result<bool> {
    let Login { authorizer, file } = login;
    let mut lua_side = AskingStore { asking: &asking };
    let store: Option<&mut dyn Store> = match (file.as_mut(), lua_store) {
        (Some(file), _) => Some(file),
        (None, true) => Some(&mut lua_side),
        (None, false) => None,
    };
    let mut user = AskingUser { asking: &asking };
    authorizer.recover(status, challenge.as_deref(), again, &mut user, store)
}

/// The thread's end of the channel.
pub(super) struct Asking {
    ask: Sender<Ask>,
    answered: Receiver<Answer>,
    bell: Arc<Doorbell>,
    stop: Arc<AtomicBool>,
    asked: Arc<AtomicUsize>,
}

impl Asking {
    /// Asks the Lua thread and waits for its answer, until the client
    /// closes.
    fn ask(&self, ask: Ask) -> Result<Answer> {
        let gone = || Error::Interrupted { what: "login".into() };
        self.ask.send(ask).map_err(|_| gone())?;
        self.asked.fetch_add(1, Ordering::Release);
        self.bell.ring();
        loop {
            match self.answered.recv_timeout(interrupt::SLICE) {
                Ok(answer) => return Ok(answer),
                Err(RecvTimeoutError::Timeout) if !self.stop.load(Ordering::Relaxed) => {}
                Err(_) => return Err(gone()),
            }
        }
    }
}

pub(super) struct AskingUser<'a> {
    asking: &'a Asking,
}

impl User for AskingUser<'_> {
    fn authorize(&mut self, url: &str) -> Result<Option<String>> {
        match self.asking.ask(Ask::Authorize(url.to_string()))? {
            Answer::Url(url) => url,
            _ => Err(Error::Internal("a login asked for a URL and got another answer".into())),
        }
    }
}

pub(super) struct AskingStore<'a> {
    asking: &'a Asking,
}

impl Store for AskingStore<'_> {
    fn load(&mut self, key: &str) -> Result<Option<Json>> {
        match self.asking.ask(Ask::Load(key.to_string()))? {
            Answer::Loaded(record) => record,
            _ => Err(Error::Internal("a login asked its store for a record and got another answer".into())),
        }
    }

    fn save(&mut self, key: &str, record: &Json) -> Result<()> {
        match self.asking.ask(Ask::Save(key.to_string(), record.clone()))? {
            Answer::Saved(saved) => saved,
            _ => Err(Error::Internal("a login saved to its store and got another answer".into())),
        }
    }
}

/// What the Lua thread answers, calling the caller's functions; what
/// they raise is kept for the caller (and the thread hears of a failure).
pub(super) fn answer(
    lua: &Cx,
    ask: Ask,
    authorize: Option<mlua::Function>,
    store: Option<Table>,
    raised: &mut Option<Raise>,
) -> Answer {
    match ask {
        Ask::Authorize(url) => {
            let mut user = LuaUser { lua, authorize, raised: None };
            let url = user.authorize(&url);
            *raised = raised.take().or(user.raised);
            Answer::Url(url)
        }
        // Asked only of a client whose store is a table.
        Ask::Load(_) if store.is_none() => Answer::Loaded(Ok(None)),
        Ask::Save(..) if store.is_none() => Answer::Saved(Ok(())),
        Ask::Load(key) => {
            let mut table = LuaStore { lua, table: store.expect("checked above"), raised: None };
            let record = table.load(&key);
            *raised = raised.take().or(table.raised);
            Answer::Loaded(record)
        }
        Ask::Save(key, record) => {
            let mut table = LuaStore { lua, table: store.expect("checked above"), raised: None };
            let saved = table.save(&key, &record);
            *raised = raised.take().or(table.raised);
            Answer::Saved(saved)
        }
    }
}
