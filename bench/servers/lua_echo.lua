-- lua_echo.lua [--http] - the smallest server on mcp.server: one tool,
-- `echo`, for bench/server.lua. Over stdio, or with --http over Streamable
-- HTTP on a free loopback port (`listening PORT` on stdout) until it is
-- killed. MCP_SO names the build of the module to load.
local here = arg[0]:match('^(.*)/[^/]*$') or '.'
---@type mcp
local mcp = assert(package.loadlib(os.getenv('MCP_SO') or (here .. '/../../mcp.so'), 'luaopen_mcp'))()
local server = mcp.server({ name = 'lua-echo', version = '1.0.0' })
server:tool({ name = 'echo', input_schema = { type = 'object', properties = { message = { type = 'string' } } } },
  function(args) return 'Echo: ' .. tostring(args.message) end)
if arg[1] == '--http' then
  local url = server:listen({ port = 0 })
  print('listening ' .. url:match(':(%d+)/'))
  io.stdout:flush()
  server:run()
else
  server:serve_stdio()
end
