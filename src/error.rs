//! Every failure the module reports, as one enum.
//!
//! Each variant's text is what a Lua caller receives, raised as a plain
//! string (see `binding/prelude.lua` for why never as userdata). Where
//! the reference module (`lua/mcp.lua`) has a sentence for a case, the
//! variant keeps it word for word: agent loops match on these and feed
//! them to models.

use thiserror::Error;

use crate::codec::Json;

#[derive(Clone, Debug, Error)]
pub enum Error {
    /// `mcp.new` was given nothing to talk to.
    #[error("mcp.new: needs a command, a url, or a transport")]
    NoEndpoint,

    /// A transport could not deliver a message or returned a failure;
    /// `code` is the exit status, HTTP status or what the fixture returned.
    #[error("MCP transport failed ({code}): {detail}")]
    Transport { code: String, detail: String },

    /// No reply carried the id of our request.
    #[error("MCP: no response to {what}")]
    NoResponse { what: String },

    /// The server answered our request with a JSON-RPC error object.
    /// `said` tells what its `data` says that a caller can act on (the
    /// versions a modern server supports, the capabilities it requires),
    /// or is empty; `data` is the whole of it, for `client:request`.
    #[error("MCP {what} failed: {message} (code {code}){said}")]
    Rpc { what: String, message: String, code: String, said: String, data: Option<Box<Json>> },

    /// A result whose `resultType` this client does not know: the
    /// 2026-07-28 revision says to treat it as invalid.
    #[error("MCP {what} failed: the result's resultType is {result_type}, which this client does not know (it knows complete and input_required, and task on tools/call)")]
    UnknownResultType { what: String, result_type: String },

    /// A tool call the server made a task (the Tasks extension, or the
    /// 2025-11-25 revision's tasks) whose task the server no longer knows
    /// (-32602 on `tasks/get`): it expired, or the server restarted.
    #[error("MCP {what} failed: the server no longer knows its task {task} (the task expired, or the server restarted and lost it); call the tool again")]
    TaskLost { what: String, task: String },

    /// The server cancelled a call's task (its status became `cancelled`
    /// without this client asking); `said` is its status message, or empty.
    #[error("MCP {what} failed: the server cancelled its task {task}{said}")]
    TaskCancelled { what: String, task: String, said: String },

    /// A call's task was still running when the time the server gave it
    /// (`ttlMs`, from its creation) had passed, by more than a poll.
    #[error("MCP {what} failed: its task {task} was still {status} {ttl_ms} ms after it was made, past the time the server gave it to live; the server may have discarded it")]
    TaskExpired { what: String, task: String, status: String, ttl_ms: u64 },

    /// A request about a call's task (a poll, answers, its result) could
    /// not be sent, after the call itself reached the server: the task may
    /// still be running there, so the call must not read as unsent.
    #[error("MCP {what} failed: its task {task} is running at the server, but {method} about it could not be sent ({why}); the call itself was sent, so calling the tool again would run it twice")]
    TaskUnreachable { what: String, task: String, method: String, why: String },

    /// A call whose task was stopped here (`handle:cancel()`, Ctrl-C)
    /// but whose `tasks/cancel` could not be sent: the server was not told.
    #[error("MCP {what} cancelled here, but its task {task} may still be running at the server: tasks/cancel could not be sent ({why})")]
    TaskNotCancelled { what: String, task: String, why: String },

    /// What the server said of a call's task cannot be used: no task id,
    /// or a status this client does not know.
    #[error("MCP {what} failed: the server's answer about its task is unusable: {why}")]
    TaskUnusable { what: String, why: String },

    /// A modern server kept asking for input (`input_required`) past the
    /// rounds this client answers.
    #[error("MCP {what} failed: the server asked for input {rounds} times without finishing (this client answers {rounds} rounds at most)")]
    InputRounds { what: String, rounds: usize },

    /// A modern server asked for input (`input_required`) that the
    /// client's handlers could not give; `why` says what went wrong.
    #[error("MCP {what} failed: the server asked for {method} and it could not be given: {why}")]
    InputNotGiven { what: String, method: String, why: String },

    /// No protocol version both sides speak.
    #[error("MCP: the server speaks protocol versions {theirs}; this client speaks {ours}")]
    NoMutualVersion { theirs: String, ours: String },

    /// `opts.era = "modern"` and the server answered `server/discover`
    /// the way a server without the 2026-07-28 revision does.
    #[error("MCP: the server does not speak the 2026-07-28 revision (opts.era = \"modern\"): {why}; leave opts.era unset to speak to it through initialize")]
    NotModern { why: String },

    /// A reply carried neither `result` nor `error` (the reference indexes
    /// the missing result and dies with a Lua error; this says what is wrong).
    #[error("MCP {what} failed: the reply has no result")]
    NoResult { what: String },

    /// The request did not complete within `opts.timeout`. `note` says
    /// what else went wrong meanwhile (a reply skipped as too deep), or is
    /// empty.
    #[error("MCP {what} timed out after {seconds} s{note}")]
    Timeout { what: String, seconds: String, note: String },

    /// The host asked for Lua back while we waited (Ctrl-C in lua5.4 sets
    /// a debug hook); the request was cancelled. The host's own hook
    /// usually raises its error ("interrupted!") before this one is seen.
    #[error("MCP {what} interrupted")]
    Interrupted { what: String },

    /// An async request stopped by `handle:cancel()`; the server was told.
    #[error("MCP {what} cancelled")]
    Cancelled { what: String },

    /// An async request still in flight when its client was closed.
    #[error("MCP {what} failed: the client was closed before the reply came")]
    Closed { what: String },

    /// An async request whose client was garbage-collected: nothing can
    /// take its reply any more.
    #[error("MCP {what} failed: its client was collected before the reply came (keep a reference to the client while its requests run)")]
    ClientCollected { what: String },

    /// `client:dispatch()` or a wait called from a callback that dispatch
    /// or a wait is running for the same client.
    #[error("MCP: {what} cannot run inside a callback of the same client (on_notification, a handler or on_done); return from the callback first")]
    Reentered { what: String },

    /// A request for a capability the server did not declare in
    /// `initialize`; nothing was sent.
    #[error("MCP {what} not sent: the server did not declare the {capability} capability")]
    NotDeclared { what: String, capability: String },

    /// A tool's result broke the promise of its `outputSchema` (wrong
    /// shape, or no `structuredContent` at all).
    #[error("MCP {what}: structuredContent does not match the tool's outputSchema: {detail}")]
    OutputMismatch { what: String, detail: String },

    /// The reply to our request was nested deeper than the decoder follows;
    /// it was skipped rather than recursed into.
    #[error("MCP {what} failed: the reply is nested deeper than {limit} levels, which this client does not read")]
    ReplyTooDeep { what: String, limit: usize },

    /// An HTTP server refused us for want of credentials (401, or 403 with
    /// a challenge); `hint` says what to set, or that the token given was
    /// refused; `reason` is the start of the body when there is no
    /// challenge to quote.
    #[error(
        "MCP transport failed ({status}): the server at {url} refused the request (HTTP {status}{}{}); {hint}",
        quoted_challenge(.www_authenticate),
        quoted_reason(.reason)
    )]
    Unauthorized {
        status: u16,
        url: String,
        www_authenticate: Option<String>,
        reason: Option<String>,
        hint: &'static str,
    },

    /// `client:get_skill` named a skill the last `client:list_skills()`
    /// did not list (or listed without what loading needs).
    #[error("the server's last skills/list has no skill named {name}: call client:list_skills() first")]
    SkillNotListed { name: String },

    /// `client:read_skill_file` named a file the skill's listing does not.
    #[error("the skill {name} has no file {path} in the server's last skills/list")]
    SkillFileNotListed { name: String, path: String },

    /// `client:read_skill_file` before the skill's `SKILL.md` was loaded
    /// (or after it failed its checks).
    #[error("the skill {name} is not loaded: call client:get_skill first (a skill's files are read only once its SKILL.md passed its checks)")]
    SkillNotLoaded { name: String },

    /// A skill's file read back other than its listing said (size, digest
    /// or frontmatter): nothing of it reaches Lua.
    #[error("the skill file {uri} failed verification ({why}); it was not used")]
    SkillUnverified { uri: String, why: String },

    /// Logging in to an HTTP server failed: its metadata could not be
    /// found or was refused, the authorization server refused a request,
    /// or the login came back wrong. `detail` never holds a secret.
    #[error("MCP authorization for {url} failed: {detail}")]
    Authorization { url: String, detail: String },

    /// Nobody came back to the loopback redirect URI within
    /// `opts.auth.login_timeout`.
    #[error("MCP authorization failed: no browser came back to {redirect_uri} in time (open the authorization URL given to opts.auth.authorize, or raise opts.auth.login_timeout)")]
    LoginTimedOut { redirect_uri: String },

    /// An HTTP server redirected us somewhere we do not follow: another
    /// origin, or too many hops.
    #[error("MCP transport failed ({status}): the server at {url} redirected to {location}, which is not followed ({why}); use that address as opts.url if you trust it")]
    Redirected { status: u16, url: String, location: String, why: &'static str },

    /// A successful HTTP status whose body is neither JSON nor an event
    /// stream (a login page, a proxy's notice).
    #[error("MCP transport failed ({status}): the server at {url} answered {content_type}, not JSON or an event stream: {excerpt}")]
    NotJson { status: u16, url: String, content_type: String, excerpt: String },

    /// An HTTP request got no answer within `opts.timeout`; the session
    /// layer turns this into [`Error::Timeout`] with the request's name.
    #[error("MCP transport failed (28): the server at {url} did not answer within {seconds} s")]
    HttpTimeout { url: String, seconds: String },

    /// A Lua value that JSON cannot carry; `path` names where it sits in the
    /// message, e.g. `arguments.cb`.
    #[error("MCP: cannot encode {what} at {path}")]
    Encode { what: String, path: String },

    /// A header of a request (a tool argument mirrored as `Mcp-Param-*`,
    /// a long name or URI as `Mcp-Name`) would pass
    /// `opts.max_header_bytes`; nothing was sent.
    #[error("MCP {what} not sent: its {header} header would be {bytes} bytes, over the {limit} this client sends in one header (opts.max_header_bytes; HTTP servers and proxies commonly refuse more than 8 KiB)")]
    HeaderTooLarge { what: String, header: String, bytes: usize, limit: usize },

    /// A server reply line grew past `opts.max_message_bytes`.
    #[error("MCP: a message from the server exceeded {limit} bytes (raise opts.max_message_bytes to allow it)")]
    MessageTooLarge { limit: usize },

    /// A tool of the same name is already in the registry.
    #[error("mcp.mount: {quoted} already exists in the registry. Pass a prefix to namespace this server's tools.")]
    Collision { quoted: String },

    /// An option of the wrong type or value, named by `what`.
    #[error("{0}")]
    BadInput(String),

    /// A replayed client sent a request its recording has no reply for.
    #[error("MCP replay: no recorded reply for {method} {params}")]
    NotRecorded { method: String, params: String },

    /// The server speaks a protocol version this client does not.
    #[error("MCP initialize failed: the server chose protocol version {chosen}, which this client does not speak ({supported})")]
    UnsupportedVersion { chosen: String, supported: String },

    /// A modern server's reply stream ended before the reply came (the
    /// 2026-07-28 revision resumes nothing: the request is sent again as
    /// a new one, and this is what is left when that fails too).
    #[error("MCP transport failed: the server's reply stream ended before the reply came")]
    StreamEnded,

    /// A modern server's reply stream ended before the reply to a request
    /// that may have changed something (a tool call not annotated
    /// read-only or idempotent): it may have run, so it was not sent
    /// again.
    #[error("MCP {what} failed: the server's reply stream ended before the reply came, so it may or may not have run; it was not sent again, since nothing says running it twice is safe (a tool annotated readOnlyHint or idempotentHint is; pass opts.idempotent = true for a call you know is)")]
    OutcomeUnknown { what: String },

    /// An HTTP server answered 404 to a request that carried a session id:
    /// the session is gone. The binding starts a new one and retries once.
    #[error("MCP: the server ended the session (HTTP 404)")]
    SessionExpired,

    /// A bug of ours: a panic caught at the Lua boundary, with its message.
    /// The call failed; the client and the host go on.
    #[error("MCP: internal error ({0}); the call failed, the client can be used again. Please report this.")]
    Internal(String),

    /// The Lua state refused an operation (out of memory, usually).
    #[error("MCP: {0}")]
    Lua(String),
}

/// `, WWW-Authenticate: VALUE` for [`Error::Unauthorized`], when the
/// server sent one.
fn quoted_challenge(www_authenticate: &Option<String>) -> String {
    www_authenticate.as_ref().map(|value| format!(", WWW-Authenticate: {value}")).unwrap_or_default()
}

/// `: BODY` for [`Error::Unauthorized`], the server's own words.
fn quoted_reason(reason: &Option<String>) -> String {
    reason.as_ref().map(|r| format!(": {r}")).unwrap_or_default()
}

impl From<mlua::Error> for Error {
    fn from(err: mlua::Error) -> Self {
        Error::Lua(err.to_string())
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
