-- lua_http.lua OPTIONS_JSON - a Lua server on mcp.server over Streamable
-- HTTP for the specs that feed it what no client should send. OPTIONS_JSON
-- is server:listen's options (token, read_timeout, max_connections, ...)
-- plus max_message_bytes for mcp.server. It prints its URL as its first
-- line and serves until its stdin ends.
--   add {a, b}        a + b
--   flood {bytes}     sends that many bytes of progress, then "flooded"
--   rss               its own resident memory in KiB (Linux)
local root = arg[0]:match('^(.*)/spec/servers/[^/]*$') or '.'
package.cpath = root .. '/?.so;' .. root .. '/?.dll;' .. package.cpath
local mcp = require('mcp')
local opts = mcp.json_decode(arg[1] or "{}")

local server = mcp.server({ name = 'lua-http', version = '1.0.0', max_message_bytes = opts.max_message_bytes })
opts.max_message_bytes = nil

server:tool({ name = 'add', input_schema = { type = 'object', properties = {
  a = { type = 'number' }, b = { type = 'number' } }, required = { 'a', 'b' } } },
  function(args) return args.a + args.b end)

server:tool({ name = 'flood', input_schema = { type = 'object', properties = { bytes = { type = 'number' } } } },
  function(args, ctx)
    local chunk = string.rep('x', 64 * 1024)
    for i = 1, math.ceil(args.bytes / #chunk) do ctx:progress(i, nil, chunk) end
    return 'flooded'
  end)

server:tool({ name = 'rss' }, function()
  local f = io.open('/proc/self/status')
  local status = f and f:read('*a') or ''
  if f then f:close() end
  return tonumber(status:match('VmRSS:%s*(%d+)')) or -1
end)

opts.until_stdin_ends = true
print(server:listen(opts))
io.stdout:flush()
server:run()
