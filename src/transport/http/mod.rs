//! Streamable HTTP: every message is a POST; a reply comes back as a JSON
//! body or as an SSE stream, which is read event by event and left as soon
//! as our reply has arrived. Nothing here reaches a shell: the reference
//! pasted the URL and the server-chosen `Mcp-Session-Id` into a curl
//! command line, so a hostile server could run commands on the user's
//! machine by choosing its session id.
//!
//! After the handshake a second connection (GET, the server's own stream)
//! is opened, so a server can ping us or notify us between requests. It
//! is opened from a thread, waited for one second at most (a server that
//! accepts the GET and never answers it must not hold anything long: see
//! `Shared::listen`), and then read by the process's poll thread, which
//! serves every client (`listener`); server requests are answered by the
//! client itself, as the stdio reader does.
//!
//! Here: what the Lua thread and the stream threads share, the transport
//! itself, the server's own stream opened and the ending. Beside it, a
//! file per job: `exchange` (one exchange: headers, redirects within the
//! origin, what each status means), `send` (how a message goes out, and
//! from which thread), `streams` (reply streams read, resumed, and read
//! past their reply), `listener` (the server's own stream, as the poll
//! thread reads it) and `sse` (the events read off a stream).
//!
//! READING ON THE WAITING THREAD
//!
//! A reply that comes as an SSE stream is read by the Lua thread that
//! waits for it, with no hand-off to another thread. Once the reply is in,
//! the rest of the stream (normally only its end) is read before the next
//! POST, so that its connection is kept for the next one: a stream dropped
//! unread closes its connection, and against server-everything discover
//! plus 320 calls opened 325 connections that way. A stream still open
//! [`FOREGROUND_DRAIN`] after its reply goes on on a thread of its own.
//!
//! The Lua thread reads only until the session wants it back (its receive
//! deadline, at most `interrupt::SLICE` away): the wait for input then
//! stops with [`Pause`](crate::wire::Pause), which ureq passes up without
//! closing anything, and the next receive reads on. Meanwhile what the
//! server's own stream brought waits in the inbox for that long at most.
//!
//! A server's name is looked up once per client (see
//! [`RememberingResolver`](crate::wire::RememberingResolver)).
//!
//! ENDING WITH THE CLIENT
//!
//! A stream that only sends keep-alive comments never gives its thread a
//! reason to look up, so waiting for "the next event" is not an ending.
//! Closing shuts down every socket of the client's connections (ureq's
//! `Agent::shutdown`, and `KeptConnections::shutdown` for those kept by
//! `wire::kept`), which wakes each stream thread at once with an
//! EOF; the threads are then joined, and the poll thread lets go of the
//! server's own stream (`listener::forget`). The session's DELETE goes
//! out on a fresh connection, bounded by [`DELETE_TIMEOUT`]; a client
//! dropped by the garbage collector sends it from a background thread,
//! joined when the Lua state closes, so collection never waits on a slow
//! server.
//!
//! CTRL-C
//!
//! A POST whose reply is a JSON body is waited for inside ureq (or
//! `wire::kept`, for a plain `http://` URL), on the Lua
//! thread. So that the host can still take its thread back (see
//! `interrupt`), the connection is ureq's own chain (proxy, TCP, TLS) with
//! its waits for input cut into slices on a Lua call's thread; between
//! slices it asks `interrupt::requested` (see `wire`).
//!
//! REDIRECTS
//!
//! The user's headers (an API key) and the session id belong to the origin
//! they were given for. ureq follows redirects itself and strips only
//! `Authorization` and cookies when the origin changes, so it is told not
//! to follow any: a redirect within the same origin (scheme, host, port) is
//! followed here with the method and body kept, since a JSON-RPC POST
//! turned into a GET means nothing; one to another origin is refused with
//! its Location in the error, for the user to decide.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use ureq::http::Response;
use ureq::{Agent, Body};

use crate::codec::{self, Json};
use crate::error::{Error, Result};
use crate::interrupt;
use crate::protocol::{self, id_key, IdKey};
use crate::transport::doorbell::Doorbell;
use crate::transport::inbox::{Event, Inbox};
use crate::transport::{Received, Transport};
use crate::wire::headers;
use crate::wire::{
    pausing_at, sliced_connector, tls_config, KeptConnections, RememberingResolver, SharedResolver, USER_AGENT,
};

mod exchange;
mod legacy;
mod listener;
mod send;
mod sse;
mod streams;
#[cfg(test)]
mod tests;

use exchange::{drain_briefly, header, is_event_stream, trim, PostHeaders, Verb};
pub use legacy::Kind;
use streams::{read_stream, ReplyStream, Step};

#[derive(Clone, Debug)]
pub struct Options {
    pub url: String,
    pub headers: Vec<(String, String)>,
    pub timeout: Duration,
    /// The `initialize` POST's bound (a remote server's cold start, its
    /// TLS handshake).
    pub connect_timeout: Duration,
    pub max_message_bytes: usize,
    /// The longest header value sent (`opts.max_header_bytes`).
    pub max_header_bytes: usize,
    /// PEM certificates to trust instead of the bundled Mozilla roots
    /// (a private CA, a self-signed server).
    pub ca_pem: Option<Vec<u8>>,
    /// `Authorization: Bearer` for every request, when set; the binding
    /// may change it between calls (a token managed elsewhere).
    pub bearer: Arc<Mutex<Option<String>>>,
    /// DPoP (`opts.auth.dpop`): the key a login's token may be bound to;
    /// such a token goes with a proof per request.
    pub dpop: Option<Arc<crate::auth::dpop::Proofs>>,
    /// The bearer comes from a login (`opts.auth` without a token).
    pub login: bool,
    /// The server requests that Lua's handlers answer (the methods in
    /// `opts.handlers`): a stream hands those to Lua through the inbox and
    /// answers every other one itself, at once.
    pub lua_handled: Vec<String>,
    /// Rung when something is queued for Lua (`client:fd()`).
    pub doorbell: Option<Arc<Doorbell>>,
    /// Streamable HTTP, HTTP+SSE, or the first falling back to the second
    /// (`opts.transport_kind`; see `legacy`).
    pub kind: Kind,
}

/// The session's DELETE when closing: a courtesy, not worth a long wait.
const DELETE_TIMEOUT: Duration = Duration::from_secs(2);
/// How long the server's own stream is waited for once asked for: by the
/// Lua thread in a blocking handshake, by the thread that posted
/// `initialized` in one beside an event loop.
const LISTEN_WAIT: Duration = Duration::from_secs(1);
/// Server requests read by stream threads whose answers are looked for
/// (see `Http::read_beside`).
const READ_BESIDE_KEPT: usize = 64;
/// Answers posted from threads at once. A server that asks faster than it
/// takes the answers gets the rest from the Lua thread, one at a time, as
/// before: the brake that keeps it from piling up threads and sockets.
const MAX_ANSWERS_BESIDE: usize = 4;
/// A cancellation: the same courtesy.
const NOTICE_TIMEOUT: Duration = Duration::from_secs(2);
/// Connecting a stream thread's GET: bounded apart from `opts.timeout`, so
/// that closing, which waits for stream threads, waits this long at most
/// for one that is still connecting.
const STREAM_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long the Lua thread waits, once its reply is in, for the rest of
/// the reply stream (normally just its end, already on the way).
const FOREGROUND_DRAIN: Duration = Duration::from_millis(5);

/// What the Lua thread and the stream threads share.
struct Shared {
    agent: Agent,
    /// The session's POSTs to a plain `http://` URL (see `wire::kept`).
    kept: Arc<KeptConnections>,
    options: Options,
    /// Where requests go: `options.url`, or where it redirected to.
    url: Mutex<String>,
    session_id: Mutex<Option<String>>,
    protocol_version: Mutex<Option<String>>,
    inbox: Arc<Inbox>,
    /// Set by close: stream threads stop, and their waits between
    /// resumptions end early (`stopping` is signalled under `pause_lock`).
    stopped: AtomicBool,
    pause_lock: Mutex<()>,
    stopping: Condvar,
    threads: Mutex<Vec<JoinHandle<()>>>,
    /// Async requests whose POST has not been answered yet: a
    /// cancellation waits for its request to reach the server first
    /// (each POST has its own connection, so they can overtake).
    posting: Mutex<Vec<IdKey>>,
    posted: Condvar,
    /// Stream threads reading a reply stream past its reply.
    draining: Arc<AtomicUsize>,
    /// Lua's answers being posted from threads (see `Http::answer_beside`).
    answering: Arc<AtomicUsize>,
    /// Modern async requests whose reply a thread reads (or waits for),
    /// and those of them cancelled meanwhile: the thread lets go of a
    /// cancelled one's stream, which closes it.
    reading: Mutex<Vec<IdKey>>,
    abandoned: Mutex<Vec<IdKey>>,
    resolver: Arc<RememberingResolver>,
    /// The server's own stream, while the process's poll thread watches it.
    server_stream: Mutex<Option<Arc<listener::ServerStream>>>,
    /// Answers to the server read by the poll thread, waiting to be posted
    /// (see `Shared::answer_aside`), and whether a thread posts them.
    answers_aside: Mutex<(VecDeque<Vec<u8>>, bool)>,
    /// An HTTP+SSE session's message endpoint (see `legacy`).
    endpoint: legacy::Endpoint,
    /// Itself, for the threads a `&self` method starts.
    me: std::sync::Weak<Shared>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Shared {
    fn session_id(&self) -> Option<String> {
        lock(&self.session_id).clone()
    }

    /// Whether a 404 to this POST means the server forgot the session:
    /// it carried a session id, or went to an HTTP+SSE session's
    /// endpoint (its servers answer 404 once its stream is gone).
    fn has_session(&self, headers: &PostHeaders) -> bool {
        (self.session_id().is_some() && !headers.modern) || self.is_legacy()
    }

    fn is_stopped(&self) -> bool {
        self.stopped.load(Ordering::Relaxed)
    }

    /// Sleeps for `pause`, or less when the client closes meanwhile.
    fn pause(&self, pause: Duration) {
        let guard = lock(&self.pause_lock);
        let _ = self.stopping.wait_timeout_while(guard, pause, |_| !self.is_stopped());
    }

    /// Runs `work` on a thread that `close` joins. Once the transport is
    /// stopped nothing starts: a thread that posted `initialized` opens
    /// the server's stream, and it must not outlive a close that already
    /// joined the others (checked under the lock `join_streams` takes).
    fn spawn(self: &Arc<Self>, work: impl FnOnce(Arc<Shared>) + Send + 'static) {
        let mut threads = lock(&self.threads);
        if self.is_stopped() {
            return;
        }
        let shared = self.clone();
        threads.retain(|t| !t.is_finished());
        threads.push(thread::spawn(move || work(shared)));
    }

    /// Posts an answer; whatever comes back is read to its end, so that
    /// the connection goes back to the pool. A failure is not reported:
    /// the server never has its answer, and the request of ours it
    /// belongs to ends by the server's own limit or by ours.
    fn post_answer(&self, body: &[u8], headers: &PostHeaders) {
        if let Ok(response) = self.post(body, headers, self.options.timeout) {
            drain_briefly(response, self.options.max_message_bytes);
        }
    }

    /// An async request's POST, on its own thread: whatever comes of it
    /// goes to the inbox, its failure as [`Event::Failed`] for its id.
    fn post_detached(&self, body: &[u8], headers: &PostHeaders, id: &Json, key: IdKey, timeout: Duration) {
        if headers.modern {
            lock(&self.reading).push(key.clone());
        }
        self.post_and_read(body, headers, id, &key, timeout);
        if headers.modern {
            lock(&self.reading).retain(|k| k != &key);
            self.take_abandoned(&key);
        }
    }

    fn post_and_read(&self, body: &[u8], headers: &PostHeaders, id: &Json, key: &IdKey, timeout: Duration) {
        let key = key.clone();
        let had_session = self.has_session(headers);
        let answered = self.post(body, headers, timeout);
        if let (true, Ok(response)) = (headers.initialize, &answered) {
            if let Some(id) = header(response, headers::MCP_SESSION_ID) {
                *lock(&self.session_id) = Some(id.to_string());
            }
        }
        lock(&self.posting).retain(|k| k != &key);
        self.posted.notify_all();
        // Cancelled while its POST waited: its reply goes unread, and
        // dropping it closes the connection.
        if self.take_abandoned(&key) {
            return;
        }
        let incoming = match answered {
            // The session's own time limit for the request says it better.
            Err(Error::HttpTimeout { .. }) => return,
            Err(e) => Err(e),
            Ok(response) => {
                let status = response.status().as_u16();
                match status {
                    404 if had_session => Err(Error::SessionExpired),
                    // Acknowledged: the reply comes on the session's stream.
                    200..=299 if self.is_legacy() => {
                        drain_briefly(response, self.options.max_message_bytes);
                        return;
                    }
                    200..=299 if is_event_stream(&response) => {
                        read_stream(self, ReplyStream::new(self, response, Some(key)).modern(headers.modern));
                        return;
                    }
                    200..=299 => self.json_body(status, response),
                    _ => self.failure_body(status, response, Some(id)),
                }
            }
        };
        match incoming {
            Ok(items) => {
                for item in items {
                    match item {
                        Incoming::Message(msg) => self.inbox.push(Event::Message(msg), 0),
                        Incoming::TooDeep(id) => self.inbox.push(Event::TooDeep(id), 0),
                    }
                }
            }
            Err(e) => self.inbox.push(Event::Failed(key, e), 0),
        }
    }

    /// Whether the request `key` was cancelled while a thread had its
    /// reply stream; forgotten once asked.
    fn take_abandoned(&self, key: &IdKey) -> bool {
        let mut abandoned = lock(&self.abandoned);
        let before = abandoned.len();
        abandoned.retain(|k| k != key);
        abandoned.len() != before
    }

    /// Ends every stream at once: stream threads wake with EOF or an
    /// error, see that the client stopped, and return.
    fn stop_streams(&self) {
        // Set under the lock a pausing thread checks it under, so that
        // the wake-up below cannot fall between its check and its wait,
        // and under the one `spawn` checks it under.
        let guard = lock(&self.pause_lock);
        let threads = lock(&self.threads);
        self.stopped.store(true, Ordering::Relaxed);
        drop(threads);
        drop(guard);
        self.stopping.notify_all();
        self.inbox.close();
        self.agent.clone().shutdown();
        self.kept.shutdown();
    }

    /// Waits for the stream threads, and for the poll thread to let go
    /// of the server's stream.
    fn join_streams(&self) {
        let threads = std::mem::take(&mut *lock(&self.threads));
        for t in threads {
            let _ = t.join();
        }
        // After the threads: the one that opened the stream handed it over.
        listener::forget(self);
    }

    /// The session's DELETE (405 means the server does not let clients
    /// end sessions: fine), on a fresh agent: this one's pool is shut.
    fn delete_session(&self, session_id: String, agent: Agent) {
        *lock(&self.session_id) = Some(session_id);
        let _ = self.exchange(&agent, Verb::Delete, DELETE_TIMEOUT);
        *lock(&self.session_id) = None;
    }
}

pub struct Http {
    shared: Arc<Shared>,
    /// What the Lua thread read itself (JSON bodies, the foreground
    /// stream's events past the reply), not yet handed to the session.
    /// What stream threads read waits in the shared inbox.
    queue: VecDeque<Received>,
    /// The reply stream of the last request Lua waits on, read by the Lua
    /// thread itself (see READING ON THE WAITING THREAD).
    foreground: Option<ReplyStream>,
    /// The last POST ran out of time.
    timed_out: bool,
    /// When the handshake must be over (see `Transport::connect_by`).
    connect_by: Option<Instant>,
    /// The server speaks the modern way (see `post_headers`).
    modern: bool,
    /// The handshake is done; the server's stream opens after our next
    /// message (`initialized`), so the server hears that first.
    listen_pending: bool,
    /// A fresh agent for the DELETE, configured as the shared one.
    spare_agent: Agent,
    /// Server requests that a stream thread read (on an async request's
    /// stream, or the server's own): Lua's answers to them are posted
    /// from a thread too, since the Lua thread that answered them may be
    /// an event loop's (see `answer_beside`).
    read_beside: Vec<IdKey>,
}

/// What a JSON body held: messages, or one too deep to read.
enum Incoming {
    Message(Json),
    TooDeep(Option<IdKey>),
}

impl Incoming {
    fn received(self) -> Received {
        match self {
            Incoming::Message(msg) => Received::Message(msg),
            Incoming::TooDeep(id) => Received::TooDeep(id),
        }
    }
}

impl Http {
    pub fn connect(options: Options) -> Result<Http> {
        let tls = tls_config(options.ca_pem.as_deref())?;
        let resolver = Arc::new(RememberingResolver::default());
        let shared_resolver = SharedResolver(resolver.clone());
        let agent = |idle: usize| {
            let config = Agent::config_builder()
                .http_status_as_error(false)
                .max_redirects(0)
                .max_idle_connections_per_host(idle)
                .user_agent(USER_AGENT)
                .tls_config(tls.clone())
                .build();
            Agent::with_parts(config, sliced_connector(), shared_resolver.clone())
        };
        let inbox = Arc::new(Inbox::new(options.doorbell.clone()));
        let main_agent = agent(4);
        let kept = Arc::new(KeptConnections::new(main_agent.clone(), shared_resolver.clone()));
        let shared = Arc::new_cyclic(|me| Shared {
            me: me.clone(),
            endpoint: legacy::Endpoint::default(),
            agent: main_agent,
            kept,
            url: Mutex::new(options.url.clone()),
            options,
            session_id: Mutex::new(None),
            protocol_version: Mutex::new(None),
            inbox,
            stopped: AtomicBool::new(false),
            pause_lock: Mutex::new(()),
            stopping: Condvar::new(),
            threads: Mutex::new(Vec::new()),
            posting: Mutex::new(Vec::new()),
            posted: Condvar::new(),
            draining: Arc::default(),
            answering: Arc::default(),
            reading: Mutex::new(Vec::new()),
            abandoned: Mutex::new(Vec::new()),
            resolver,
            server_stream: Mutex::new(None),
            answers_aside: Mutex::new((VecDeque::new(), false)),
        });
        Ok(Http {
            shared,
            queue: VecDeque::new(),
            foreground: None,
            timed_out: false,
            connect_by: None,
            modern: false,
            listen_pending: false,
            spare_agent: agent(0),
            read_beside: Vec::new(),
        })
    }

    fn limit(&self) -> usize {
        self.shared.options.max_message_bytes
    }

    /// Takes a non-stream reply body: see [`Shared::json_body`].
    fn take_json_body(&mut self, status: u16, response: Response<Body>) -> Result<()> {
        self.queue.extend(self.shared.json_body(status, response)?.into_iter().map(Incoming::received));
        Ok(())
    }

    /// A 4xx or 5xx: see [`Shared::failure_body`].
    fn take_failure(&mut self, status: u16, response: Response<Body>, sent: &Json) -> Result<()> {
        let incoming = self.shared.failure_body(status, response, sent.get("id"))?;
        self.queue.extend(incoming.into_iter().map(Incoming::received));
        Ok(())
    }

    /// A cancellation of an async request still being posted waits (up to
    /// `within`) until the server has answered that POST: sent at once, it
    /// could arrive first, and a server ignores a cancellation for an id it
    /// has not seen.
    fn await_posted(&self, cancellation: &Json, within: Duration) {
        let Some(key) = cancellation.get("params").and_then(|p| p.get("requestId")).and_then(id_key) else { return };
        let posting = lock(&self.shared.posting);
        let _ = self.shared.posted.wait_timeout_while(posting, within, |posting| posting.contains(&key));
    }

    /// What the session gets for an event.
    fn received(&self, event: Event) -> Option<Received> {
        match event {
            Event::Message(msg) => Some(Received::Message(msg)),
            Event::TooDeep(id) => Some(Received::TooDeep(id)),
            // For the request whose stream carried it; the session drops it
            // if that request is no longer waited for.
            Event::TooLarge(Some(id)) => {
                Some(Received::Failed(Some(id), Error::MessageTooLarge { limit: self.limit() }))
            }
            Event::Failed(id, e) => Some(Received::Failed(Some(id), e)),
            Event::Delivered(id) => Some(Received::Delivered(id)),
            Event::TooLarge(None) | Event::Ended => None,
        }
    }

    /// Reads the foreground stream until `deadline`: its next event, or
    /// None when the deadline or Ctrl-C came first, or when the stream
    /// ended (let go then, to a thread of its own if it may still be
    /// resumed).
    fn read_foreground(&mut self, deadline: Instant) -> Option<Event> {
        let stream = self.foreground.as_mut()?;
        match pausing_at(deadline, || stream.next(&self.shared, false)) {
            Step::Deliver(event, _) => Some(event),
            Step::Paused | Step::Interrupted => None,
            Step::Ended => {
                let stream = self.foreground.take()?;
                if stream.resumable(&self.shared) {
                    self.hand_off(stream);
                }
                None
            }
        }
    }

    /// Lets go of the foreground stream once its reply is in: what is left
    /// of it (normally only its end) is read for [`FOREGROUND_DRAIN`], so
    /// that its connection goes back to the pool for the next POST; a
    /// stream still open then goes on on a thread of its own. What it
    /// brings goes to the inbox, in order with what other streams bring.
    /// With `unanswered_too`, a stream whose reply has not come is handed
    /// to a thread of its own as well.
    fn finish_foreground(&mut self, unanswered_too: bool) {
        let Some(mut stream) = self.foreground.take_if(|s| s.answered || unanswered_too) else { return };
        if !stream.answered {
            self.hand_off(stream);
            return;
        }
        let shared = &self.shared;
        let step = pausing_at(Instant::now() + FOREGROUND_DRAIN, || loop {
            match stream.next(shared, false) {
                Step::Deliver(event, size) => shared.inbox.push(event, size),
                other => break other,
            }
        });
        if matches!(step, Step::Paused) {
            self.hand_off(stream);
        }
    }

    /// A stream the Lua thread stops reading goes on on a thread of its own.
    fn hand_off(&self, stream: ReplyStream) {
        self.shared.spawn(move |shared| read_stream(&shared, stream));
    }

    /// Opens the server's own stream (GET); see [`Shared::listen`].
    fn listen(&mut self) {
        self.shared.listen();
    }
}

impl Shared {
    /// Opens the server's own stream (GET) on a thread of its own; a 405
    /// means the server offers none, which is fine.
    ///
    /// The caller waits for the GET's answer up to [`LISTEN_WAIT`]: long
    /// enough that the stream is normally open before our next request (a
    /// server may rely on that order: the conformance suite's sse-retry
    /// scenario times a reconnection from the last GET it saw), short
    /// enough that a server which never answers its GET costs little. The
    /// caller is the Lua thread for a blocking handshake, the thread that
    /// posts `initialized` for one beside an event loop.
    fn listen(self: &Arc<Self>) {
        // An HTTP+SSE session has its one stream open already; another
        // GET would be another session.
        if self.is_legacy() {
            return;
        }
        let answered = Arc::new((Mutex::new(false), Condvar::new()));
        let signal = answered.clone();
        self.spawn(move |shared| {
            let response = shared.get_stream(None);
            *lock(&signal.0) = true;
            signal.1.notify_all();
            let Ok((response, socket)) = response else { return };
            if response.status().as_u16() != 200 || !is_event_stream(&response) {
                return;
            }
            let stream = ReplyStream::new(&shared, response, None).on_socket(socket);
            listener::watch(&shared, stream);
        });
        let (done, wake) = &*answered;
        let _ = wake.wait_timeout_while(lock(done), LISTEN_WAIT, |done| !*done);
    }

    /// Posts a notification whose delivery is waited for (see
    /// `Transport::send_notice`), then opens the server's stream when the
    /// handshake just finished, as the Lua thread would have: the server
    /// hears `initialized` before anything else, and its stream is open
    /// before our first request.
    fn deliver_notice(
        self: &Arc<Self>,
        body: &[u8],
        headers: &PostHeaders,
        key: IdKey,
        timeout: Duration,
        listen: bool,
    ) {
        let had_session = self.has_session(headers);
        let delivered = self.post(body, headers, timeout).and_then(|response| match response.status().as_u16() {
            404 if had_session => Err(Error::SessionExpired),
            200..=299 => {
                drain_briefly(response, self.options.max_message_bytes);
                Ok(())
            }
            status => self.failure_body(status, response, None).map(drop),
        });
        if listen && delivered.is_ok() {
            self.listen();
        }
        let event = match delivered {
            Ok(()) => Event::Delivered(key),
            Err(e) => Event::Failed(key, e),
        };
        self.inbox.push(event, 0);
    }
}

impl Transport for Http {
    fn send(&mut self, sent: &Json) -> Result<()> {
        self.send_with(sent, &[])
    }

    fn send_detached(&mut self, request: &Json, timeout: Duration) -> Result<()> {
        self.send_detached_with(request, &[], timeout)
    }

    fn send_notice(&mut self, notice: &Json, key: &IdKey, timeout: Duration) -> Result<bool> {
        let timeout = self.within_handshake(timeout);
        let Some(headers) = self.headers_for(notice, &[])? else { return Ok(true) };
        self.finish_foreground(true);
        if self.shared.is_stopped() {
            return Err(Error::Closed { what: protocol::lua_text(notice.get("method")) });
        }
        let (body, key) = (codec::encode(notice), key.clone());
        let listen = std::mem::take(&mut self.listen_pending);
        self.shared.spawn(move |shared| shared.deliver_notice(&body, &headers, key, timeout, listen));
        Ok(false)
    }

    fn send_request(&mut self, request: &Json, headers: &[(String, String)], detached: Option<Duration>) -> Result<()> {
        match detached {
            Some(timeout) => self.send_detached_with(request, headers, timeout),
            None => self.send_with(request, headers),
        }
    }

    fn always_answers(&self) -> bool {
        true
    }

    fn connect_by(&mut self, deadline: Option<Instant>) {
        self.connect_by = deadline;
    }

    fn carries_headers(&self) -> bool {
        true
    }

    fn speak_modern(&mut self) {
        self.modern = true;
    }

    fn receive(&mut self, deadline: Instant) -> Result<Option<Received>> {
        // What followed the last reply on its stream is taken now, not at
        // the next POST: a program that only waits (async handles, an
        // event loop) must still get a notification sent after a reply.
        self.finish_foreground(false);
        loop {
            // What the stream threads brought while Lua was elsewhere comes
            // first: it arrived before the body just read on this thread.
            let event = match self.shared.inbox.pop(Instant::now()) {
                Some(event) => {
                    self.note_read_beside(&event);
                    event
                }
                None => match self.queue.pop_front() {
                    Some(received) => return Ok(Some(received)),
                    None if std::mem::take(&mut self.timed_out) => return Ok(None),
                    None if self.foreground.as_ref().is_some_and(|s| !s.answered) => {
                        match self.read_foreground(deadline) {
                            Some(event) => event,
                            None if Instant::now() >= deadline || interrupt::requested() => return Ok(None),
                            None => continue,
                        }
                    }
                    None => match self.shared.inbox.pop(deadline) {
                        Some(event) => {
                            self.note_read_beside(&event);
                            event
                        }
                        None => return Ok(None),
                    },
                },
            };
            if let Some(received) = self.received(event) {
                return Ok(Some(received));
            }
        }
    }

    fn take_dropped(&mut self) -> u64 {
        self.shared.inbox.take_dropped()
    }

    fn queued(&self) -> bool {
        // An answered foreground stream may hold what followed its reply.
        !self.queue.is_empty() || !self.shared.inbox.is_empty() || self.foreground.as_ref().is_some_and(|s| s.answered)
    }

    fn established(&mut self, negotiated_version: &str) {
        *lock(&self.shared.protocol_version) = Some(negotiated_version.to_string());
        self.listen_pending = true;
    }

    fn session_id(&self) -> Option<String> {
        self.shared.session_id()
    }

    fn close(&mut self) {
        if self.shared.is_stopped() {
            return;
        }
        self.shared.stop_streams();
        self.shared.join_streams();
        let session_id = lock(&self.shared.session_id).take();
        if let Some(id) = session_id {
            self.shared.delete_session(id, self.spare_agent.clone());
        }
    }
}

impl Drop for Http {
    /// Streams end at once; the DELETE goes out from a background thread,
    /// joined when the Lua state closes (`join_background`).
    fn drop(&mut self) {
        if self.shared.is_stopped() {
            return;
        }
        self.shared.stop_streams();
        let (shared, agent) = (self.shared.clone(), self.spare_agent.clone());
        let closer = thread::spawn(move || {
            shared.join_streams();
            let session_id = lock(&shared.session_id).take();
            if let Some(id) = session_id {
                shared.delete_session(id, agent);
            }
        });
        let mut background = lock(&BACKGROUND);
        background.retain(|t| !t.is_finished());
        background.push(closer);
    }
}

static BACKGROUND: Mutex<Vec<JoinHandle<()>>> = Mutex::new(Vec::new());

/// Waits for the closings of dropped clients (each bounded by
/// [`DELETE_TIMEOUT`]). Called when the Lua state closes.
pub fn join_background() {
    let closers = std::mem::take(&mut *lock(&BACKGROUND));
    for c in closers {
        let _ = c.join();
    }
}

/// One of a bounded number of places for work on threads (streams read
/// past their reply, answers posted beside Lua), given back when dropped,
/// whether the work ran or not (a closed transport starts no thread).
pub(super) struct Slot(Arc<AtomicUsize>);

impl Slot {
    pub(super) fn take(taken: &Arc<AtomicUsize>, most: usize) -> Option<Slot> {
        if taken.fetch_add(1, Ordering::Relaxed) >= most {
            taken.fetch_sub(1, Ordering::Relaxed);
            return None;
        }
        Some(Slot(taken.clone()))
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}
