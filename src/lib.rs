//! lua-mcp: a Model Context Protocol client for Lua, as a native module.
//!
//! `require('mcp')` gives the same functions, tables and error strings as
//! the pure-Lua reference module (`lua/mcp.lua`), so an agent swaps one for
//! the other without a change. What changes is underneath.
//!
//! WHY NATIVE
//!
//! Lua cannot hold both ends of a pipe, so the reference re-spawns a stdio
//! server and re-runs the handshake for every request: 0.7 s a call
//! against server-everything, and whatever state the server held is gone
//! by the next call. Here each client keeps one server process for its
//! whole life, with one handshake, and the server's pings are answered
//! even while Lua is busy elsewhere: by one thread of the process that
//! serves every client (`transport::poller`), where each once had up to
//! three of its own and a host with hundreds of servers ran out of
//! descriptors. (Windows' pipes cannot be polled beside sockets: a stdio
//! server there keeps a pump thread of its own.)
//!
//! LAYERS, ONE MODULE EACH
//!
//! * `codec`     JSON text <-> `Json`, to the reference codec's contract:
//!   the value model, the reader and the writer.
//! * `protocol`  JSON-RPC messages, the revisions supported and the modern
//!   `_meta` envelope, and reply matching; no I/O, no Lua.
//! * `error`     every failure the module reports, in the reference's words.
//! * `client`    a server's sessions over the client's life (started as
//!   steps that never wait: the era probe, `initialize`, the version
//!   check; restarted; async requests queued meanwhile, logins run beside
//!   the holder) and the one path every request takes (`client/request/`:
//!   pages, the 404 restart, the resend after a login, output schemas,
//!   the stale tool list, the 2026-07-28 rules); knows nothing of Lua.
//! * `era`       which revision a server speaks: the probe's answer read,
//!   and the verdict remembered per server.
//! * `session`   one session: requests matched by id, time limits,
//!   cancellation, Ctrl-C.
//! * `interrupt` waits in slices, and whether the host wants its thread back.
//! * `transport` one interface and two kinds under it: stdio (a child
//!   process in a group of its own; `stdio/unix/`, `stdio/windows/`) and
//!   Streamable HTTP (`http/exchange`, `http/send`, `http/streams`,
//!   `http/sse`, `http/listener`), recorded or replayed (`record`). The
//!   poll thread (`poller`) serves, while no Lua call waits, every stdio
//!   server's pipes and every HTTP session's own stream; the bounded inbox
//!   (`inbox`) takes what they read for Lua and rings the descriptor
//!   behind `client:fd()` (`doorbell`), and a wait on several clients
//!   sleeps on one process-wide signal (`arrivals`).
//! * `wire`      the HTTP connection every wait can interrupt, shared by the
//!   transport and the login, and the names of the headers sent over it.
//! * `auth`      OAuth: who issues the tokens, who the client is there, the
//!   grants, the tokens kept and refreshed, the loopback redirect.
//! * `tool_headers` tool arguments a schema marks, sent as `Mcp-Param-*`
//!   headers, and the encoding of their values.
//! * `mount`     the registry rules: descriptions, schemas, collisions.
//! * `schema`    tool results checked against their `outputSchema`, and
//!   each tool's `inputSchema` kept for the encoder.
//! * `json_schema` the validator both sides use: a schema checked and
//!   compiled once, values walked beside it (`check`, `formats`).
//! * `private_file` files that hold secrets are ours alone.
//! * `server_text` what a server wrote, bounded and inert before an error
//!   quotes it.
//! * `input_shape` where a tool's `inputSchema` wants an array, so that
//!   an empty Lua table goes out as `[]` there.
//! * `sorting`   the sorts off the per-call path, through one copy of the
//!   sort.
//! * `trace_context` W3C `traceparent` made, read and continued, for a
//!   request's `_meta`.
//! * `binding`   the only code that touches Lua, a file per job: the export
//!   table (`mod`), the boundary (`boundary`, `lua`), the methods and the
//!   async API (`methods`, `handles`, `waits`), the way into `client`
//!   (`door`, `host`), values both ways (`encode`, `decode`, `results`),
//!   options (`options`, `readers`), the fixture seam, mounts and logins.
//!
//! The fixture seam (`opts.transport`, a Lua function) bypasses `client`
//! on purpose: it reproduces the reference's batched exchange byte for
//! byte, because users test their agents with it and it must not drift.

pub mod auth;
pub mod client;
pub mod codec;
pub mod era;
pub mod error;
pub mod input_shape;
pub mod interrupt;
pub mod json_schema;
pub mod mount;
pub mod output_cap;
pub mod private_file;
pub mod protocol;
pub mod schema;
pub mod server;
pub mod server_text;
pub mod session;
pub mod sorting;
pub mod tool_headers;
pub mod tool_search;
pub mod trace_context;
pub mod transport;
pub mod wire;

mod binding;

pub use binding::open;

#[cfg(feature = "module")]
#[mlua::lua_module(name = "mcp", skip_memory_check)]
fn luaopen(lua: &mlua::Lua) -> mlua::Result<mlua::Table> {
    stay_loaded();
    binding::open(lua)
}

/// Keeps this library mapped until the process exits. Lua unloads C
/// modules when its state closes, which is before the process exits, and
/// the library leaves behind it an exit hook (which stops servers nobody
/// closed: `transport::stdio`) and, at worst, a thread still ending. Tying
/// the hook to the library instead needs the C runtime's start files,
/// which a module linked by zig (FreeBSD's from `make cross`) lacks.
#[cfg(all(feature = "module", unix))]
fn stay_loaded() {
    // SAFETY: dladdr reads the address of a function of ours; dlopen with
    // RTLD_NOLOAD only takes one more reference to a library already
    // loaded (this one), marked never to be unloaded.
    unsafe {
        let mut info: libc::Dl_info = std::mem::zeroed();
        if libc::dladdr(stay_loaded as *const libc::c_void, &mut info) != 0 && !info.dli_fname.is_null() {
            libc::dlopen(info.dli_fname, libc::RTLD_NOW | libc::RTLD_NOLOAD | libc::RTLD_NODELETE);
        }
    }
}

/// As on Unix: the library pinned, so that the threads ending after the
/// Lua state closed never run unloaded code.
#[cfg(all(feature = "module", windows))]
fn stay_loaded() {
    use windows_sys::Win32::System::LibraryLoader::{
        GetModuleHandleExW, GET_MODULE_HANDLE_EX_FLAG_FROM_ADDRESS, GET_MODULE_HANDLE_EX_FLAG_PIN,
    };
    let mut module = 0;
    // SAFETY: looks up the module holding one of our functions, and pins
    // it; the handle written needs no closing.
    unsafe {
        GetModuleHandleExW(
            GET_MODULE_HANDLE_EX_FLAG_FROM_ADDRESS | GET_MODULE_HANDLE_EX_FLAG_PIN,
            stay_loaded as *const u16,
            &mut module,
        )
    };
}
