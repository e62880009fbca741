-- lua_echo.lua - the smallest server on mcp.server: one tool, `echo`,
-- for bench/server.lua. MCP_SO names the build of the module to load.
local here = arg[0]:match('^(.*)/[^/]*$') or '.'
---@type mcp
local mcp = assert(package.loadlib(os.getenv('MCP_SO') or (here .. '/../../mcp.so'), 'luaopen_mcp'))()
local server = mcp.server({ name = 'lua-echo', version = '1.0.0' })
server:tool({ name = 'echo', input_schema = { type = 'object', properties = { message = { type = 'string' } } } },
  function(args) return 'Echo: ' .. tostring(args.message) end)
server:serve_stdio()
