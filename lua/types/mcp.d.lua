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
