---@meta mcp
-- Type definitions for editors (LuaCATS, as read by lua-language-server):
-- add lua/types to `workspace.library`. They describe the native module;
-- the pure-Lua reference has the same shape without the extra options.

---@class mcp
---@field PROTOCOL_VERSION string        The version offered in initialize ("2025-06-18").
---@field CLIENT_INFO {name: string, version: string}  Sent as clientInfo; may be replaced.
local mcp = {}

---@class mcp.Options
---@field command? string|string[]     A command line for /bin/sh -c, or an argv run without a shell.
---@field url? string                  A Streamable HTTP endpoint.
---@field transport? fun(request_text: string): boolean, string?, any  A fixture: receives exactly what the reference sends.
---@field protocol_version? string
---@field prefix? string               Prefix for mounted tool names.
---@field timeout? number              Seconds per request (default 60; 0.001 to 1e7).
---@field env? table<string, string>   Added to the server's environment (stdio).
---@field cwd? string                  The server's working directory (stdio).
---@field max_message_bytes? integer   Largest reply accepted (default 64 MiB; at most 2^40).
---@field headers? table<string, string>  Sent on every HTTP request.
---@field ca_file? string              PEM certificates to trust instead of Mozilla's roots (HTTPS).
---@field on_notification? fun(msg: table)  Called for every server notification; `lua-mcp/notifications_dropped` ({count=N}) when some were dropped unread.
---@field handlers? table<string, fun(params: table?): (table?, string?)>  Server requests answered from Lua.

---@class mcp.Tool
---@field name string
---@field description? string
---@field inputSchema? table

---@class mcp.Client
---@field command? string|string[]
---@field url? string
---@field transport? function
---@field protocol_version any
---@field prefix? string
---@field next_id integer
---@field tools? mcp.Tool[]
---@field server_info? {name: string, version: string}
---@field negotiated_version? string
---@field session_ready? boolean
---@field session_id? string           HTTP only.
local Client = {}

---Handshake (once per session) and tools/list. Raises a string on failure.
---@return mcp.Tool[]
function Client:discover() end

---Calls a tool. A tool's own failure is not raised: it returns its text and true.
---@param name string
---@param args? table
---@return string text
---@return boolean is_error
function Client:call(name, args) end

---Ends the session (stops the server, or DELETEs the HTTP session). Safe twice.
function Client:close() end

---@class mcp.RequestOptions
---@field timeout? number              Seconds for this request (0.001 to 1e7; default: the client's timeout).
---@field on_done? fun(ok: boolean, ...: any)  On the Lua thread once settled: `true, text, is_error, result` (call_async), `true, result` (request_async), or `false, err`.

---Any request, blocking. Raises `MCP METHOD failed: MESSAGE (code N)` on a JSON-RPC error.
---@param method string
---@param params? table
---@param opts? mcp.RequestOptions
---@return table result
function Client:request(method, params, opts) end

---Sends tools/call and returns at once.
---@param name string
---@param args? table
---@param opts? mcp.RequestOptions
---@return mcp.Handle
function Client:call_async(name, args, opts) end

---Sends any request and returns at once.
---@param method string
---@param params? table
---@param opts? mcp.RequestOptions
---@return mcp.Handle
function Client:request_async(method, params, opts) end

---A descriptor for an event loop: readable whenever dispatch has something to run.
---@return integer fd
function Client:fd() end

---Runs what is ready (on_notification, handlers, on_done, timeouts) without blocking.
---@return integer ran  how many callbacks ran
function Client:dispatch() end

---@class mcp.Handle
local Handle = {}

---What call (or request) returns, or raises its error. With a timeout, nothing if it passes first.
---@param timeout? number
---@return any ...
function Handle:wait(timeout) end

---True once settled (a reply, an error, a timeout); never waits.
---@return boolean
function Handle:done() end

---Sends notifications/cancelled; the handle fails with `MCP METHOD cancelled`. False if already settled.
---@param reason? string
---@return boolean
function Handle:cancel(reason) end

---The index of a settled handle, or nil at the timeout.
---@param handles mcp.Handle[]
---@param timeout? number
---@return integer?
function mcp.wait_any(handles, timeout) end

---True once every handle has settled, or nil at the timeout.
---@param handles mcp.Handle[]
---@param timeout? number
---@return true?
function mcp.wait_all(handles, timeout) end

---@param opts mcp.Options
---@return mcp.Client
function mcp.new(opts) end

---@class mcp.Registry
---@field get fun(self: mcp.Registry, name: string): any
---@field add fun(self: mcp.Registry, tool: table)

---Adds a server's tools to a registry; returns the names added.
---@param registry mcp.Registry
---@param client mcp.Client
---@param opts? {prefix?: string, trust?: boolean}
---@return string[]
function mcp.mount(registry, client, opts) end

---Seconds on a monotonic clock.
---@return number
function mcp.clock() end

return mcp
