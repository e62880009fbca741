//! Every HTTP header name this module writes or reads, in one place: the
//! session's (`transport::http`), the login's (`auth`), a tool's own
//! (`tool_headers`) and the loopback listener's reply to the browser.
//!
//! Names are case-insensitive, and a reply's are looked up that way (the
//! `http` crate's lookup ignores case), so the spelling here is the one
//! the specifications print: what a reader of a capture, or of an error
//! that names a header (`HeaderTooLarge`), looks for, and what the
//! loopback listener, which writes its reply by hand, sends as it is.
//! One place keeps the MCP names from drifting apart between the
//! session, the era probe and the login: a server that reads
//! `MCP-Protocol-Version` must find it on every request that carries it.
//!
//! The tests' own servers read what arrives in lower case, from their
//! own literals: they check what went over the wire, so they do not
//! take their names from here.

// MCP's own (the Streamable HTTP transport, and the 2026-07-28
// revision's headers for a message's routing).

/// The session a server gave at `initialize`; sent back on every later
/// request of that session (never on a modern one: it has none).
pub const MCP_SESSION_ID: &str = "Mcp-Session-Id";
/// The revision a request speaks: after `initialize` on an older
/// session, and repeating a modern message's envelope, which a server
/// compares with it.
pub const MCP_PROTOCOL_VERSION: &str = "MCP-Protocol-Version";
/// A modern message's method, for a router that reads no bodies.
pub const MCP_METHOD: &str = "Mcp-Method";
/// What a modern request names (a tool, a prompt, a resource, a task).
pub const MCP_NAME: &str = "Mcp-Name";
/// Before a tool's own header name: a property marked `x-mcp-header`
/// goes out as `Mcp-Param-<its name>`.
pub const MCP_PARAM_PREFIX: &str = "Mcp-Param-";

// Server-Sent Events.

/// The last event of a reply stream read, when the stream is resumed.
pub const LAST_EVENT_ID: &str = "Last-Event-ID";

// HTTP's own.

pub const ACCEPT: &str = "Accept";
/// `identity` on the session's requests: a gzip decoder between the
/// wire and the reader wrapped the pause and Ctrl-C errors of a slice,
/// so the session asks for replies as they are.
pub const ACCEPT_ENCODING: &str = "Accept-Encoding";
pub const AUTHORIZATION: &str = "Authorization";
pub const CONNECTION: &str = "Connection";
pub const CONTENT_LENGTH: &str = "Content-Length";
pub const CONTENT_TYPE: &str = "Content-Type";
/// Where a redirect points: followed within the origin only.
pub const LOCATION: &str = "Location";
/// A refusal's challenge: a 403 with one is about credentials.
pub const WWW_AUTHENTICATE: &str = "WWW-Authenticate";
